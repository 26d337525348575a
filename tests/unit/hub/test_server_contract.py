# SPDX-License-Identifier: GPL-3.0-or-later
"""Contract of the offline Hub (tests/hub/server.py), driven only through huggingface_hub's own client.

Whatever these tests pin down is what the sparkfold Hub modules may rely on when they run against the
test server: if huggingface_hub's wire expectations change, this file is where it shows.
"""

import hashlib
import os
import re
import subprocess
import sys

import pytest
from huggingface_hub import HfApi, constants, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from tests.hub import fixtures
from tests.hub.fixtures import BASE, GATED, GOOD_TOKEN, NOACCESS_TOKEN, QUANT, SQUASHED
from tests.hub.server import HubServer

SHARD = "model-00002-of-00003.safetensors"


def sha256_of(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


@pytest.fixture
def api(hub_server):
    return HfApi(endpoint=hub_server.url, token=False)


def test_environment_is_isolated():
    assert constants.HF_HUB_DISABLE_XET
    assert not constants.HF_HUB_OFFLINE
    assert "sparkfold-hf-home-" in constants.HF_HOME


def test_pins_match_the_built_hub(hub_data):
    assert hub_data.pin(QUANT, "v1.0") == fixtures.QUANT_PIN
    assert hub_data.pin(BASE) == fixtures.BASE_PIN
    assert fixtures.SQUASHED_PIN in hub_data.repos[SQUASHED].vanished
    assert hub_data.repos[SQUASHED].resolve(fixtures.SQUASHED_PIN) is None


def test_model_info_on_branch_tag_and_commits(api, hub_data):
    c3, c2, c1 = (c.id for c in hub_data.commits(QUANT))
    assert api.model_info(QUANT).sha == c3
    assert api.model_info(QUANT, revision="main").sha == c3
    assert api.model_info(QUANT, revision="v1.0").sha == c2 == fixtures.QUANT_PIN
    assert api.model_info(QUANT, revision=c1).sha == c1
    assert api.model_info(QUANT, revision=c2[:7]).sha == c2  # short sha resolves to the full id
    assert api.model_info(QUANT, revision="refs/heads/main").sha == c3
    # revisions with "/" travel URL-encoded (refs%2Fpr%2F1)
    assert api.model_info(QUANT, revision=fixtures.QUANT_SLASH_BRANCH).sha == c2
    pr = api.model_info(QUANT, revision=fixtures.QUANT_PR_REF)
    assert pr.sha == hub_data.pin(QUANT, fixtures.QUANT_PR_REF)
    assert "USAGE.md" in {s.rfilename for s in pr.siblings}

    info = api.model_info(QUANT, revision="v1.0")
    assert info.id == QUANT
    assert info.card_data.base_model == BASE
    assert info.config["quantization_config"] == {
        "quant_method": "exl3",
        "bits": 2.9,
        "head_bits": 6,
        "calibration": {"rows": 250, "cols": 2048},
        "out_scales": "auto",
    }
    assert info.gated is False and info.private is False
    assert info.last_modified.isoformat().startswith("2026-01-06T11:30")
    assert {s.rfilename for s in info.siblings} == set(hub_data.expected_sha256(QUANT, "v1.0"))
    assert not any("tokenizer" in s.rfilename for s in info.siblings)
    assert all(s.size is None and s.lfs is None for s in info.siblings)  # only with files_metadata
    assert api.model_info(QUANT, revision=c1).card_data.base_model == BASE
    assert api.model_info(BASE).sha == fixtures.BASE_PIN


def _check_entry(hub_data, path, size, blob_id, lfs, rev="main"):
    entry = hub_data.file(QUANT, path, rev)
    data = hub_data.file_bytes(QUANT, path, rev)
    assert size == len(data) == entry.size
    if path.endswith((".safetensors", ".bin")):
        assert lfs is not None, path
        assert lfs.sha256 == hashlib.sha256(data).hexdigest() == entry.sha256
        assert lfs.size == len(data)
        assert lfs.pointer_size == len(fixtures.lfs_pointer(lfs.sha256, lfs.size))
        assert blob_id == fixtures.git_blob_sha1(fixtures.lfs_pointer(lfs.sha256, lfs.size))
    else:
        assert lfs is None, path
        assert blob_id == fixtures.git_blob_sha1(data)  # `git hash-object`


def test_files_metadata_gives_lfs_sha256_and_blob_ids(api, hub_data):
    info = api.model_info(QUANT, files_metadata=True)
    assert len(info.siblings) == len(hub_data.expected_sha256(QUANT))
    for s in info.siblings:
        _check_entry(hub_data, s.rfilename, s.size, s.blob_id, s.lfs)


def test_list_repo_tree_expand_and_pagination(hub_data):
    # tiny pages: the client must follow the Link header
    with HubServer(hub_data, tree_page_size=3, tree_expand_page_size=2) as server:
        api = HfApi(endpoint=server.url, token=False)
        entries = list(api.list_repo_tree(QUANT, recursive=True, expand=True, revision="v1.0"))
        tree_calls = [p for m, p in server.requests if "/tree/" in p]
        assert len(tree_calls) > 3
        files = [e for e in entries if hasattr(e, "blob_id")]
        folders = [e for e in entries if not hasattr(e, "blob_id")]
        assert {f.path for f in files} == set(hub_data.expected_sha256(QUANT, "v1.0"))
        assert [f.path for f in folders] == ["engram"]
        for f in files:
            _check_entry(hub_data, f.path, f.size, f.blob_id, f.lfs, rev="v1.0")
            assert f.last_commit.title in ("Initial upload", "Add EXL3 shards")
        shard = next(f for f in files if f.path == SHARD)
        assert shard.last_commit.oid == fixtures.QUANT_PIN
        assert folders[0].last_commit.title == "Add EXL3 shards"

        top = {e.path for e in api.list_repo_tree(QUANT)}
        assert "engram" in top and "engram/engram_table_0.bin" not in top
        sub = [e.path for e in api.list_repo_tree(QUANT, path_in_repo="engram")]
        assert sub == ["engram/engram_table_0.bin", "engram/engram_table_1.bin"]
        with pytest.raises(RemoteEntryNotFoundError):
            list(api.list_repo_tree(QUANT, path_in_repo="no/such/dir"))


def test_get_paths_info(api, hub_data):
    infos = api.get_paths_info(QUANT, ["config.json", "engram", "missing.txt"], revision="v1.0", expand=True)
    assert [i.path for i in infos] == ["config.json", "engram"]
    assert infos[0].blob_id == hub_data.file(QUANT, "config.json", "v1.0").blob_id
    assert infos[0].last_commit.title == "Initial upload"


def test_list_repo_refs(api, hub_data):
    refs = api.list_repo_refs(QUANT, include_pull_requests=True)
    assert {b.name: b.target_commit for b in refs.branches} == {
        "main": hub_data.pin(QUANT),
        fixtures.QUANT_SLASH_BRANCH: fixtures.QUANT_PIN,
    }
    assert [(t.name, t.ref, t.target_commit) for t in refs.tags] == [("v1.0", "refs/tags/v1.0", fixtures.QUANT_PIN)]
    assert [p.ref for p in refs.pull_requests] == [fixtures.QUANT_PR_REF]
    assert refs.converts == []
    assert api.list_repo_refs(QUANT).pull_requests is None
    squashed = api.list_repo_refs(SQUASHED)
    assert [(t.name, t.target_commit) for t in squashed.tags] == [("v0", hub_data.pin(SQUASHED))]


def test_list_repo_commits(hub_data):
    with HubServer(hub_data, commits_page_size=2) as server:  # 3 commits: two pages via Link
        api = HfApi(endpoint=server.url, token=False)
        commits = api.list_repo_commits(QUANT)
        assert len([p for m, p in server.requests if "/commits/" in p]) == 2
        expected = hub_data.commits(QUANT)
        assert [c.commit_id for c in commits] == [c.id for c in expected]
        assert [c.title for c in commits] == ["Update README", "Add EXL3 shards", "Initial upload"]
        assert commits[1].message == "2.9 bpw, head 6 bpw"
        assert commits[0].authors == [fixtures.AUTHOR]
        assert [c.created_at.isoformat() for c in commits] == [
            "2026-01-07T09:15:00+00:00",
            "2026-01-06T11:30:00+00:00",
            "2026-01-05T10:00:00+00:00",
        ]
        assert [c.commit_id for c in api.list_repo_commits(QUANT, revision="v1.0")] == [c.id for c in expected[1:]]
        formatted = api.list_repo_commits(QUANT, formatted=True)
        assert formatted[0].formatted_title == "<p>Update README</p>"
        squashed = api.list_repo_commits(SQUASHED)
        assert [c.title for c in squashed] == [fixtures.SQUASH_TITLE]


def test_vanished_commit_is_revision_not_found(api, tmp_path):
    pin = fixtures.SQUASHED_PIN
    with pytest.raises(RevisionNotFoundError) as err:
        api.model_info(SQUASHED, revision=pin)
    response = err.value.response
    assert response.status_code == 404
    assert response.headers["X-Error-Code"] == "RevisionNotFound"
    assert response.json() == {"error": f"Invalid rev id: {pin}"}
    assert err.value.server_message == f"Invalid rev id: {pin}"
    assert not api.revision_exists(SQUASHED, pin)
    assert api.revision_exists(SQUASHED, "v0")
    with pytest.raises(RevisionNotFoundError):
        api.list_repo_commits(SQUASHED, revision=pin)
    # snapshot_download does not ask model_info for a 40-hex revision: the tree listing fails instead
    with pytest.raises(RevisionNotFoundError):
        snapshot_download(SQUASHED, revision=pin, endpoint=api.endpoint, token=False, local_dir=tmp_path / "sq")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(
            SQUASHED, "config.json", revision=pin, endpoint=api.endpoint, token=False, cache_dir=tmp_path / "c"
        )
    with pytest.raises(RevisionNotFoundError):
        api.model_info(QUANT, revision="no-such-branch")


def test_unknown_repo(hub_server, tmp_path):
    anonymous = HfApi(endpoint=hub_server.url, token=False)
    with pytest.raises(RepositoryNotFoundError) as err:
        anonymous.model_info("sparkfold-test/nope")
    assert not isinstance(err.value, GatedRepoError)
    assert err.value.response.status_code == 401  # the Hub answers 401 to anonymous callers
    assert err.value.response.headers["X-Error-Code"] == "RepoNotFound"
    assert err.value.repo_id == "sparkfold-test/nope"
    with pytest.raises(RepositoryNotFoundError) as err:
        HfApi(endpoint=hub_server.url, token=GOOD_TOKEN).model_info("sparkfold-test/nope")
    assert err.value.response.status_code == 404
    assert not anonymous.repo_exists("sparkfold-test/nope")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("sparkfold-test/nope", "config.json", endpoint=hub_server.url, token=False, cache_dir=tmp_path)


def test_gated_repo(hub_server, hub_data, tmp_path):
    url = hub_server.url
    # metadata of a gated repo is public, as on the Hub; the files are not
    info = HfApi(endpoint=url, token=False).model_info(GATED)
    assert info.gated == "manual"
    with pytest.raises(GatedRepoError) as err:
        hf_hub_download(GATED, "config.json", endpoint=url, token=False, cache_dir=tmp_path / "a")
    assert err.value.response.status_code == 401
    assert err.value.response.headers["X-Error-Code"] == "GatedRepo"
    with pytest.raises(GatedRepoError) as err:
        hf_hub_download(GATED, "config.json", endpoint=url, token=NOACCESS_TOKEN, cache_dir=tmp_path / "b")
    assert err.value.response.status_code == 403
    assert "not in the authorized list" in err.value.server_message
    with pytest.raises(GatedRepoError):
        HfApi(endpoint=url, token=NOACCESS_TOKEN).auth_check(GATED)
    with pytest.raises(GatedRepoError):
        snapshot_download(GATED, endpoint=url, token=False, local_dir=tmp_path / "d")

    HfApi(endpoint=url, token=GOOD_TOKEN).auth_check(GATED)
    path = hf_hub_download(GATED, "model.safetensors", endpoint=url, token=GOOD_TOKEN, cache_dir=tmp_path / "c")
    assert sha256_of(path) == hub_data.file(GATED, "model.safetensors").sha256
    HfApi(endpoint=url, token=NOACCESS_TOKEN).auth_check(QUANT)  # not gated: fine


def test_bad_token(hub_server, tmp_path):
    """A token the Hub does not know: 401 without X-Error-Code => plain HfHubHTTPError, not RepoNotFound."""
    bad = "hf_thisisnotavalidtoken000000000000000"
    api = HfApi(endpoint=hub_server.url, token=bad)
    with pytest.raises(HfHubHTTPError) as err:
        api.model_info(QUANT)
    assert not isinstance(err.value, RepositoryNotFoundError)  # a plain HfHubHTTPError, not a subclass
    assert err.value.response.status_code == 401
    assert err.value.server_message == "Invalid credentials in Authorization header"
    with pytest.raises(HfHubHTTPError) as err:
        hf_hub_download(QUANT, "config.json", endpoint=hub_server.url, token=bad, cache_dir=tmp_path)
    assert not isinstance(err.value, RepositoryNotFoundError) and err.value.response.status_code == 401
    with pytest.raises(HfHubHTTPError) as err:
        api.whoami()
    assert err.value.response.status_code == 401 and "Invalid user token" in str(err.value)

    assert HfApi(endpoint=hub_server.url).whoami(token=GOOD_TOKEN)["name"] == "sparkfold-ci"
    assert HfApi(endpoint=hub_server.url).whoami(token=NOACCESS_TOKEN)["name"] == "sparkfold-outsider"


def test_missing_file(api, hub_data, tmp_path):
    with pytest.raises(RemoteEntryNotFoundError) as err:
        hf_hub_download(QUANT, "tokenizer.json", endpoint=api.endpoint, token=False, cache_dir=tmp_path)
    assert err.value.response.status_code == 404
    assert not api.file_exists(QUANT, "tokenizer.json")
    assert api.file_exists(BASE, "tokenizer.json")
    assert api.file_exists(QUANT, "engram/engram_table_1.bin", revision="v1.0")
    first = hub_data.commits(QUANT)[-1].id  # "Initial upload": no shards yet
    assert not api.file_exists(QUANT, "model-00001-of-00003.safetensors", revision=first)


def test_download_headers_and_etags(api, hub_data, tmp_path):
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    for path in ("config.json", SHARD):
        url = hf_hub_url(QUANT, path, revision="v1.0", endpoint=api.endpoint)
        meta = get_hf_file_metadata(url, token=False)
        entry = hub_data.file(QUANT, path, "v1.0")
        assert meta.commit_hash == fixtures.QUANT_PIN
        assert meta.etag == (entry.sha256 if entry.lfs else fixtures.git_blob_sha1(hub_data.file_bytes(QUANT, path)))
        assert meta.size == entry.size
    # the cache layout keys blobs by etag: LFS blobs land under their sha256
    path = hf_hub_download(QUANT, SHARD, revision="v1.0", endpoint=api.endpoint, token=False, cache_dir=tmp_path)
    assert os.path.basename(os.path.realpath(path)) == hub_data.file(QUANT, SHARD).sha256
    assert f"snapshots{os.sep}{fixtures.QUANT_PIN}" in path


def test_resume_with_range(hub_server, hub_data, tmp_path, monkeypatch):
    """A connection dropped mid-file: the client resumes with `Range: bytes=N-`, the server answers 206.

    huggingface_hub 2.4 only counts bytes it has handed over in DOWNLOAD_CHUNK_SIZE (10 MiB) chunks, so
    with the default a file under 10 MiB restarts from 0 (see the next test); a smaller chunk size shows
    the resume.
    """
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 16 * 1024)
    size = hub_data.file(QUANT, SHARD).size
    hub_server.cut_after[f"{QUANT}/{SHARD}"] = 100_000
    path = hf_hub_download(QUANT, SHARD, endpoint=hub_server.url, token=False, local_dir=tmp_path / "x")
    assert sha256_of(path) == hub_data.file(QUANT, SHARD).sha256
    gets = hub_server.file_gets(QUANT, SHARD)
    assert [g["status"] for g in gets] == [200, 206]
    start = int(re.fullmatch(r"bytes=(\d+)-", gets[1]["range"]).group(1))
    assert 0 < start <= 100_000 and start % (16 * 1024) == 0
    assert hub_server.bytes_served == 100_000 + size - start
    assert f"{QUANT}/{SHARD}" not in hub_server.cut_after


def test_cut_below_chunk_size_restarts_without_range(hub_server, hub_data, tmp_path):
    size = hub_data.file(QUANT, SHARD).size
    hub_server.cut_after[f"{QUANT}/{SHARD}"] = 100_000
    path = hf_hub_download(QUANT, SHARD, endpoint=hub_server.url, token=False, cache_dir=tmp_path)
    assert sha256_of(path) == hub_data.file(QUANT, SHARD).sha256
    gets = hub_server.file_gets(QUANT, SHARD)
    assert [(g["status"], g["range"]) for g in gets] == [(200, None), (200, None)]
    assert hub_server.bytes_served == 100_000 + size


def test_snapshot_download_into_local_dir(hub_server, hub_data, tmp_path):
    local = tmp_path / "quant"
    out = snapshot_download(QUANT, revision="v1.0", endpoint=hub_server.url, token=False, local_dir=local)
    assert os.path.realpath(out) == os.path.realpath(local)
    expected = hub_data.expected_sha256(QUANT, "v1.0")
    for path, sha in expected.items():
        target = local / path
        assert target.is_file() and not target.is_symlink(), path
        assert sha256_of(target) == sha, path
    assert (local / ".cache" / "huggingface").is_dir()
    served = hub_server.bytes_served
    assert served == sum(hub_data.file(QUANT, p, "v1.0").size for p in expected)

    # again: everything is known locally for that commit, so no file is fetched
    resolves_before = len([p for _method, p in hub_server.requests if "/resolve/" in p])
    snapshot_download(QUANT, revision="v1.0", endpoint=hub_server.url, token=False, local_dir=local)
    assert hub_server.bytes_served == served
    assert len([p for _method, p in hub_server.requests if "/resolve/" in p]) == resolves_before

    # the shards are real safetensors files whose index names every shard
    import json
    import struct

    index = json.loads((local / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert shards == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    with open(local / shards[0], "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
        end = max(t["data_offsets"][1] for k, t in header.items() if k != "__metadata__")
        assert 8 + n + end == os.path.getsize(local / shards[0])


def test_allow_patterns_on_base(hub_server, hub_data, tmp_path):
    local = tmp_path / "tok"
    snapshot_download(
        BASE, endpoint=hub_server.url, token=False, local_dir=local, allow_patterns=["tokenizer*", "*.jinja"]
    )
    got = sorted(p.name for p in local.iterdir() if p.is_file())
    assert got == ["chat_template.jinja", "tokenizer.json", "tokenizer_config.json"]
    assert sha256_of(local / "tokenizer.json") == hub_data.file(BASE, "tokenizer.json").sha256
    assert hub_data.file(BASE, "tokenizer.json").lfs  # LFS by size (> 10 KiB)


def test_server_script(tmp_path):
    """`python3 tests/hub/server.py --root DIR --port 0` builds the hub and serves it (what the lab runs)."""
    script = os.path.join(os.path.dirname(fixtures.__file__), "server.py")
    proc = subprocess.Popen(
        [sys.executable, script, "--root", str(tmp_path / "root"), "--port", "0", "--shard-bytes", "4096"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://\S+", line).group(0)
        api = HfApi(endpoint=url, token=False)
        assert api.model_info(QUANT).sha == fixtures.load_hub(str(tmp_path / "root")).pin(QUANT)
        assert api.model_info(QUANT, files_metadata=True).siblings[0].size is not None
    finally:
        proc.terminate()
        proc.wait(10)
    assert proc.returncode == 0
