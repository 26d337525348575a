# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster.git_cache, against real git repositories under tmp_path (the upstream is a local
path, which git fetches through upload-pack as it would a server)."""

import subprocess

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import git_cache

from tests.unit.module_runner import module_runner


def _git(*args, cwd):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo, name):
    (repo / name).write_text(f"{name}\n")
    _git("add", "-A", cwd=repo)
    _git("commit", "-qm", name, cwd=repo)
    return _git("rev-parse", "HEAD", cwd=repo)


def _forget(repo):
    """What a server's gc does after a force-push: objects no ref holds are gone."""
    _git("reflog", "expire", "--expire=now", "--all", cwd=repo)
    _git("gc", "--quiet", "--prune=now", cwd=repo)


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, git_cache.main)


@pytest.fixture
def upstream(tmp_path):
    repo = tmp_path / "upstream"
    repo.mkdir()
    _git("init", "-q", "-b", "main", cwd=repo)
    # protocol v0 serves an unadvertised sha only with this; v2 serves any object it has
    _git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=repo)
    _commit(repo, "README.md")
    return repo


def _args(cache, upstream, commit, **extra):
    return {"path": str(cache), "repo": str(upstream), "commit": commit, **extra}


def _pinned(cache):
    return _git("rev-parse", "refs/sparkfold/pinned", cwd=cache)


def test_the_cache_is_made_once_then_fetched_into_without_a_change(run, upstream, tmp_path):
    cache = tmp_path / "node" / "src" / "engine"
    first = _git("rev-parse", "HEAD", cwd=upstream)
    kind, result, _warnings = run(_args(cache, upstream, first, _ansible_diff=True))
    assert kind == "exit", result
    assert (result["changed"], result["created"], result["checked"]) == (True, True, True)
    assert (result["found_on"], result["fetched_by_sha"]) == ("main", False)
    assert result["diff"]["before"] == {"path": str(cache), "state": "absent"}
    assert _git("rev-parse", "--is-bare-repository", cwd=cache) == "true" and _pinned(cache) == first
    # upstream moves on and the pin with it: fetched, found, not a change
    second = _commit(upstream, "more.zig")
    _git("tag", "v1", cwd=upstream)
    kind, result, _warnings = run(_args(cache, upstream, second, _ansible_diff=True))
    assert kind == "exit", result
    assert (result["changed"], result["created"], result["found_on"]) == (False, False, "main")
    assert "diff" not in result
    assert _pinned(cache) == second and _git("rev-parse", "v1", cwd=cache) == second
    # an older commit of the branch is upstream too
    kind, result, _warnings = run(_args(cache, upstream, first))
    assert (kind, result["changed"], result["found_on"]) == ("exit", False, "main")


def test_a_commit_on_no_branch_or_tag_that_the_server_serves_by_sha_is_fetched_and_kept(run, upstream, tmp_path):
    cache = tmp_path / "cache"
    _git("checkout", "-q", "-b", "pr", cwd=upstream)
    head = _commit(upstream, "pr.zig")
    _git("checkout", "-q", "main", cwd=upstream)
    _git("update-ref", "refs/pull/1/head", head, cwd=upstream)
    _git("branch", "-D", "pr", cwd=upstream)
    kind, result, _warnings = run(_args(cache, upstream, head))
    assert kind == "exit", result
    assert (result["changed"], result["found_on"], result["fetched_by_sha"]) == (True, None, True)
    assert _pinned(cache) == head
    _git("gc", "--quiet", "--prune=now", cwd=cache)
    assert _git("cat-file", "-t", head, cwd=cache) == "commit"


@pytest.mark.parametrize("how", ["main force-pushed", "branch deleted"])
def test_a_pin_gone_upstream_fails_naming_the_commit_and_the_remote_though_the_cache_holds_it(
        run, upstream, tmp_path, how):
    cache = tmp_path / "cache"
    base = _git("rev-parse", "HEAD", cwd=upstream)
    if how == "branch deleted":
        _git("checkout", "-q", "-b", "feature", cwd=upstream)
    pinned = _commit(upstream, "lost.zig")
    kind, result, _warnings = run(_args(cache, upstream, pinned))
    assert (kind, result["found_on"]) == ("exit", "main" if how == "main force-pushed" else "feature"), result
    if how == "main force-pushed":
        _git("reset", "-q", "--hard", base, cwd=upstream)
    else:
        _git("checkout", "-q", "main", cwd=upstream)
        _git("branch", "-D", "feature", cwd=upstream)
    now = _commit(upstream, "rewritten.zig")
    _forget(upstream)
    kind, result, _warnings = run(_args(cache, upstream, pinned))
    assert kind == "fail", result
    assert result["msg"].startswith(
        f"commit {pinned} is not upstream in {upstream} (the cache still holds it from an earlier fetch): after a "
        "pruning fetch it is on no branch or tag there, and the server does not serve it by sha. It was probably "
        "force-pushed or squashed away"), result["msg"]
    assert f"the newest there: main {now} (" in result["msg"]
    assert result["changed"] is False and [ref["ref"] for ref in result["refs"]] == ["main"]
    assert result["refs"][0]["commit"] == now and result["refs"][0]["subject"] == "rewritten.zig"
    # the pruning fetch dropped the deleted branch from the cache
    assert _git("for-each-ref", "--format=%(refname)", "refs/heads", cwd=cache) == "refs/heads/main"


def test_a_commit_never_pushed_fails_on_a_fresh_cache(run, upstream, tmp_path):
    cache = tmp_path / "cache"
    kind, result, _warnings = run(_args(cache, upstream, "0" * 40))
    assert kind == "fail"
    assert result["msg"].startswith(f"commit {'0' * 40} is not upstream in {upstream}: after a pruning fetch")
    assert (result["changed"], result["created"]) == (True, True)


def test_an_unreachable_repository_fails_with_the_url_and_gits_message(run, tmp_path):
    missing = tmp_path / "no-such-repo"
    kind, result, _warnings = run(_args(tmp_path / "cache", missing, "a" * 40))
    assert kind == "fail"
    assert result["msg"].startswith(f"cannot fetch the repository {missing} into {tmp_path / 'cache'}: git says: ")
    assert "does not appear to be a git repository" in result["msg"], result["msg"]
    assert "that this node reaches it" in result["msg"] and result["stderr"]


def test_check_mode_writes_nothing_and_says_what_it_can_tell(run, upstream, tmp_path):
    cache = tmp_path / "node" / "cache"
    first = _git("rev-parse", "HEAD", cwd=upstream)
    second = _commit(upstream, "more.zig")
    check = {"_ansible_check_mode": True, "_ansible_diff": True}
    # a fresh node: the tip is found by ls-remote; an older commit needs a fetch to tell
    kind, result, _warnings = run(_args(cache, upstream, second, **check))
    assert kind == "exit", result
    assert (result["changed"], result["created"], result["checked"], result["found_on"]) == (True, True, True, "main")
    assert result["diff"]["after"]["state"] == "bare repository"
    kind, result, _warnings = run(_args(cache, upstream, first, **check))
    assert (kind, result["changed"], result["checked"], result["found_on"]) == ("exit", True, False, None)
    assert not (tmp_path / "node").exists()
    # a cache fetched before: an ancestor of a tip it holds is found, nothing written
    assert run(_args(cache, upstream, second))[0] == "exit"
    refs = _git("for-each-ref", cwd=cache)
    kind, result, _warnings = run(_args(cache, upstream, first, **check))
    assert (kind, result["changed"], result["checked"], result["found_on"]) == ("exit", False, True, "main")
    assert "diff" not in result and _pinned(cache) == second and _git("for-each-ref", cwd=cache) == refs
    # an unreachable repository fails in check mode too
    kind, result, _warnings = run(_args(cache, tmp_path / "gone", first, **check))
    assert kind == "fail" and result["msg"].startswith(f"cannot fetch the repository {tmp_path / 'gone'} into")


@pytest.mark.parametrize("commit", ["main", "a1b2c3d", "A" * 40])
def test_a_commit_that_is_not_a_full_sha_is_refused(run, upstream, tmp_path, commit):
    kind, result, _warnings = run(_args(tmp_path / "cache", upstream, commit))
    assert kind == "fail"
    assert result["msg"].startswith(f"commit must be a full commit sha in lower case (40 hex digits, or 64), got "
                                    f"'{commit}'")
    assert not (tmp_path / "cache").exists()
