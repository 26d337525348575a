# SPDX-License-Identifier: GPL-3.0-or-later
"""A third-party Hub mirror (olah, from PyPI) serves the QUANT fixture from a local git repo, offline.

This checks the fixtures against an implementation of the Hub protocol that is not ours: the same
files, committed with the git CLI the way a `git clone` of a Hub repo looks (LFS files as pointers, their
content under .git/lfs/objects), served by olah's offline mirror mode (`mirrors-path` + `offline = true`),
downloaded with huggingface_hub's snapshot_download.
"""

import hashlib
import os
import socket
import subprocess
import sys
import time

import httpx2
from huggingface_hub import HfApi, snapshot_download

from tests.hub import fixtures
from tests.hub.fixtures import QUANT


def _git(repo, *args, env=None):
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def make_git_mirror(hub_data, repo_id, git_dir):
    """Replay the first-parent history of repo_id's main as git commits; returns {fixture id: git sha}."""
    git_dir.mkdir(parents=True)
    _git(git_dir, "init", "-q", "-b", "main")
    _git(git_dir, "config", "user.name", fixtures.AUTHOR)
    _git(git_dir, "config", "user.email", f"{fixtures.AUTHOR}@example.invalid")
    _git(git_dir, "config", "commit.gpgsign", "false")
    ids = {}
    for commit in reversed(hub_data.commits(repo_id)):
        for path in _git(git_dir, "ls-files").splitlines():
            if path not in commit.files:
                (git_dir / path).unlink()
        for path, entry in commit.files.items():
            target = git_dir / path
            target.parent.mkdir(parents=True, exist_ok=True)
            data = hub_data.read(entry.sha256)
            if entry.lfs:
                obj = git_dir / ".git" / "lfs" / "objects" / entry.sha256[:2] / entry.sha256[2:4] / entry.sha256
                obj.parent.mkdir(parents=True, exist_ok=True)
                obj.write_bytes(data)
                data = fixtures.lfs_pointer(entry.sha256, entry.size)
            target.write_bytes(data)
        _git(git_dir, "add", "-A")
        date = commit.date.replace(".000Z", "+00:00")
        env = dict(os.environ, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
        _git(git_dir, "commit", "-q", "-m", commit.title, env=env)
        ids[commit.id] = _git(git_dir, "rev-parse", "HEAD")
    for tag, target in hub_data.repos[repo_id].tags.items():
        _git(git_dir, "tag", tag, ids[target])
    return ids


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_olah_mirror_serves_the_quant_fixture(hub_data, tmp_path):
    org, name = QUANT.split("/")
    ids = make_git_mirror(hub_data, QUANT, tmp_path / "mirrors" / "models" / org / name)

    port = _free_port()
    config = tmp_path / "olah.toml"
    config.write_text(
        "[basic]\n"
        'host = "127.0.0.1"\n'
        f"port = {port}\n"
        f'repos-path = "{tmp_path / "repos"}"\n'
        f'mirrors-path = ["{tmp_path / "mirrors"}"]\n'
        "[accessibility]\n"
        "offline = true\n"
    )
    log = (tmp_path / "olah.out").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "olah.server", "-c", str(config), "--log-path", str(tmp_path / "logs")],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx2.get(url + "/api/models/" + QUANT + "/refs", timeout=1)
                break
            except httpx2.TransportError:
                assert proc.poll() is None, (tmp_path / "olah.out").read_text()
                assert time.monotonic() < deadline, "olah did not start"
                time.sleep(0.1)

        api = HfApi(endpoint=url, token=False)
        main_git_sha = ids[hub_data.pin(QUANT)]
        # olah 0.5.4 answers /api/models/{repo} (no revision) from its upstream cache only, never from a
        # mirror: offline that is a 401. /revision/main is served from the git mirror.
        info = api.model_info(QUANT, revision="main")
        assert info.sha == main_git_sha
        assert info.card_data.base_model == fixtures.BASE
        assert api.model_info(QUANT, revision="v1.0").sha == ids[fixtures.QUANT_PIN]

        local = tmp_path / "download"
        snapshot_download(QUANT, endpoint=url, token=False, local_dir=local)
        expected = hub_data.expected_sha256(QUANT)
        got = {
            os.path.relpath(os.path.join(d, f), local).replace(os.sep, "/")
            for d, _dirs, files in os.walk(local)
            for f in files
            if ".cache" not in d
        }
        assert got == set(expected)
        for path, sha in expected.items():
            data = (local / path).read_bytes()
            assert data == hub_data.file_bytes(QUANT, path), path
            assert hashlib.sha256(data).hexdigest() == sha
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
