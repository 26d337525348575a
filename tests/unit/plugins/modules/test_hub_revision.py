# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster.hub_revision, run in-process against the offline Hub (tests/hub)."""

import time

import pytest
from ansible.module_utils.basic import missing_required_lib
from ansible_collections.sparkfold.cluster.plugins.module_utils import hub
from ansible_collections.sparkfold.cluster.plugins.modules import hub_revision

from tests.hub import fixtures
from tests.hub.fixtures import (
    BASE,
    GATED,
    GOOD_TOKEN,
    NOACCESS_TOKEN,
    QUANT,
    QUANT_PIN,
    SQUASH_TITLE,
    SQUASHED,
    SQUASHED_PIN,
)
from tests.hub.server import HubServer
from tests.unit.module_runner import module_runner

pytestmark = pytest.mark.usefixtures("hf_env")


@pytest.fixture
def run(monkeypatch):
    """Run hub_revision.main() with the given args; return (kind, result dict, warnings)."""
    return module_runner(monkeypatch, hub_revision.main)


def listing(hub_data, repo_id, rev="main"):
    """What the module must return as files: the fixture's files with the Hub's hashes, sorted by path."""
    files = hub_data.repos[repo_id].files(rev)
    return [
        {"path": p, "size": f.size, "sha256": f.sha256 if f.lfs else None, "blob_id": f.blob_id}
        for p, f in sorted(files.items())
    ]


def manifest(hub_data, repo_id, rev="main", suffix=""):
    """expected_files for repo_id at rev: sha256 for LFS files, blob_id for the others."""
    out = []
    for p, f in sorted(hub_data.repos[repo_id].files(rev).items()):
        if p.endswith(suffix):
            out.append({"path": p, "sha256": f.sha256} if f.lfs else {"path": p, "blob_id": f.blob_id})
    return out


def resolve_gets(hub_server):
    return [path for method, path in hub_server.requests if method == "GET" and "/resolve/" in path]


def quant_refs(hub_data):
    main = hub_data.pin(QUANT, "main")
    return {
        "branches": [
            {
                "name": "exl3/2.9bpw",
                "commit": QUANT_PIN,
                "date": "2026-01-06T11:30:00+00:00",
                "title": "Add EXL3 shards",
            },
            {"name": "main", "commit": main, "date": "2026-01-07T09:15:00+00:00", "title": "Update README"},
        ],
        "tags": [
            {"name": "v1.0", "commit": QUANT_PIN, "date": "2026-01-06T11:30:00+00:00", "title": "Add EXL3 shards"},
        ],
    }


def unpinned(revision, kind, commit, variable="this task's revision", repo_id=QUANT):
    """The warning for a branch or tag given as the revision."""
    return (
        f"revision {revision} of {repo_id} is a {kind}, not a pin: it resolved to commit {commit} on this run, but "
        f"a {kind} can move, so the next run may deploy another commit. To pin it, set {variable} to {commit}"
    )


def test_branch_resolves_to_commit_files_and_refs(run, hub_server, hub_data):
    kind, result, warnings = run({"repo_id": QUANT, "endpoint": hub_server.url})
    assert kind == "exit", result
    assert warnings == [unpinned("main", "branch", hub_data.pin(QUANT, "main"))]
    files = listing(hub_data, QUANT, "main")
    assert {k: v for k, v in result.items() if k != "invocation"} == {
        "changed": False,
        "commit": hub_data.pin(QUANT, "main"),
        "requested_revision": "main",
        "files": files,
        "total_bytes": sum(f["size"] for f in files),
        "refs": quant_refs(hub_data),
        "policy_applied": None,
    }
    # LFS shards carry the content sha256, git files only their blob id
    shard = next(f for f in result["files"] if f["path"] == "model-00001-of-00003.safetensors")
    assert shard["sha256"] == hub_data.file(QUANT, "model-00001-of-00003.safetensors").sha256
    assert next(f for f in result["files"] if f["path"] == "config.json")["sha256"] is None
    assert resolve_gets(hub_server) == []


@pytest.mark.parametrize(
    ("revision", "ref_kind"),
    [
        ("v1.0", "tag"),
        ("exl3/2.9bpw", "branch"),
        ("refs/tags/v1.0", "tag"),
        (QUANT_PIN, None),
        (QUANT_PIN[:7], None),
        (QUANT_PIN[:12], None),
    ],
    ids=["tag", "branch-with-slash", "full-tag-ref", "full-sha", "short-sha-7", "short-sha-12"],
)
def test_revisions_resolve_to_the_full_commit(run, hub_server, hub_data, revision, ref_kind):
    kind, result, warnings = run({"repo_id": QUANT, "revision": revision, "endpoint": hub_server.url})
    assert kind == "exit", result
    # a branch or a tag is not a pin: it warns; a commit id (full or short) does not
    assert warnings == ([unpinned(revision, ref_kind, QUANT_PIN)] if ref_kind else [])
    assert result["commit"] == QUANT_PIN
    assert result["requested_revision"] == revision
    assert result["files"] == listing(hub_data, QUANT, "v1.0")
    assert result["total_bytes"] == sum(f.size for f in hub_data.repos[QUANT].files("v1.0").values())
    assert result["refs"] == quant_refs(hub_data)
    assert result["changed"] is False


def test_check_mode_and_endpoint_from_environment(run, hub_server, hub_data, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub_server.url)
    kind, result, _warnings = run({"repo_id": BASE, "_ansible_check_mode": True})
    assert kind == "exit", result
    assert result["changed"] is False
    assert result["commit"] == hub_data.pin(BASE)
    assert result["refs"] == {
        "branches": [
            {
                "name": "main",
                "commit": hub_data.pin(BASE),
                "date": "2025-12-02T12:00:00+00:00",
                "title": "Upload tokenizer",
            },
        ],
        "tags": [],
    }


def test_squashed_pin_fails_before_download_naming_the_heads(run, hub_server, hub_data):
    head = hub_data.pin(SQUASHED)
    kind, result, _warnings = run({"repo_id": SQUASHED, "revision": SQUASHED_PIN, "endpoint": hub_server.url})
    assert kind == "fail"
    ref = {"commit": head, "date": "2026-02-01T00:00:00+00:00", "title": SQUASH_TITLE}
    assert result["hub_error"] == "revision_not_found"
    assert result["refs"] == {"branches": [{"name": "main", **ref}], "tags": [{"name": "v0", **ref}]}
    assert result["squashed"] == {"name": "main", **ref}
    assert result["msg"] == (
        f"revision {SQUASHED_PIN} does not exist in {SQUASHED} on {hub_server.url} (the Hub answered "
        "RevisionNotFound; nothing was downloaded). "
        f'Branches now: main at {head[:7]} (2026-02-01 00:00 UTC, "{SQUASH_TITLE}"). '
        f'Tags now: v0 at {head[:7]} (2026-02-01 00:00 UTC, "{SQUASH_TITLE}"). '
        f'The history of main looks super-squashed: it is a single commit titled "{SQUASH_TITLE}", so older '
        f"commits such as {SQUASHED_PIN} were removed from the Hub and will not come back. "
        f"To go on, pin one of the commits above (for example revision: {head}, the head of main) after checking "
        "its files, or set on_missing=branch_head_if_files_match with expected_files to accept the head of main "
        "only if its files match the ones you expect."
    )
    assert resolve_gets(hub_server) == []


def test_missing_revision_of_a_normal_history_is_not_called_squashed(run, hub_server, hub_data):
    missing = "0123456789abcdef0123456789abcdef01234567"
    kind, result, _warnings = run({"repo_id": QUANT, "revision": missing, "endpoint": hub_server.url})
    assert kind == "fail"
    assert result["hub_error"] == "revision_not_found"
    assert result["squashed"] is None
    main = hub_data.pin(QUANT)
    assert result["msg"] == (
        f"revision {missing} does not exist in {QUANT} on {hub_server.url} (the Hub answered RevisionNotFound; "
        "nothing was downloaded). "
        f'Branches now: exl3/2.9bpw at {QUANT_PIN[:7]} (2026-01-06 11:30 UTC, "Add EXL3 shards"); '
        f'main at {main[:7]} (2026-01-07 09:15 UTC, "Update README"). '
        f'Tags now: v1.0 at {QUANT_PIN[:7]} (2026-01-06 11:30 UTC, "Add EXL3 shards"). '
        f"The history of main (3 commits) does not look super-squashed, and no tag or date tells of a force-push. "
        f"Either {missing} is mistyped, or main was force-pushed (reset to an older commit with new commits on top, "
        "which leaves no other trace) and the commit removed from the Hub: compare it with where you took it from. "
        f"To go on, pin one of the commits above (for example revision: {main}, the head of main) after checking "
        "its files, or set on_missing=branch_head_if_files_match with expected_files to accept the head of main "
        "only if its files match the ones you expect."
    )


def test_unknown_short_sha_is_a_missing_revision(run, hub_server):
    kind, result, _warnings = run({"repo_id": QUANT, "revision": "abcdef0", "endpoint": hub_server.url})
    assert kind == "fail"
    assert result["hub_error"] == "revision_not_found"
    assert result["msg"].startswith(f"revision abcdef0 does not exist in {QUANT} on {hub_server.url} ")


def test_policy_accepts_branch_head_when_all_files_match(run, hub_server, hub_data):
    head = hub_data.pin(SQUASHED)
    expected = manifest(hub_data, SQUASHED)
    kind, result, warnings = run(
        {
            "repo_id": SQUASHED,
            "revision": SQUASHED_PIN,
            "endpoint": hub_server.url,
            "on_missing": "branch_head_if_files_match",
            "expected_files": expected,
        }
    )
    assert kind == "exit", result
    assert result["changed"] is False
    assert result["commit"] == head
    assert result["requested_revision"] == SQUASHED_PIN
    assert result["files"] == listing(hub_data, SQUASHED)
    assert result["policy_applied"] == {
        "policy": "branch_head_if_files_match",
        "requested_revision": SQUASHED_PIN,
        "fallback_branch": "main",
        "commit": head,
        "files_compared": len(expected),
    }
    assert warnings == [
        f"revision {SQUASHED_PIN} does not exist in {SQUASHED} on {hub_server.url}; "
        f"on_missing=branch_head_if_files_match accepted the head of main, commit {head}, whose {len(expected)} "
        "expected files match expected_files"
    ]
    assert resolve_gets(hub_server) == []


def test_policy_with_patterns_compares_only_matching_files(run, hub_server, hub_data):
    expected = manifest(hub_data, SQUASHED, suffix=".safetensors")
    assert len(expected) == 3
    kind, result, warnings = run(
        {
            "repo_id": SQUASHED,
            "revision": SQUASHED_PIN,
            "endpoint": hub_server.url,
            "on_missing": "branch_head_if_files_match",
            "match_patterns": ["*.safetensors"],
            "expected_files": expected,
        }
    )
    assert kind == "exit", result
    assert result["policy_applied"]["files_compared"] == 3
    assert result["commit"] == hub_data.pin(SQUASHED)
    assert len(warnings) == 1


def test_policy_refuses_when_files_differ(run, hub_server, hub_data):
    head = hub_data.pin(SQUASHED)
    expected = manifest(hub_data, SQUASHED, suffix=".safetensors")
    shard1 = hub_data.file(SQUASHED, "model-00001-of-00003.safetensors").sha256
    expected[0] = {"path": "model-00001-of-00003.safetensors", "sha256": "f" * 64}
    del expected[1]  # model-00002 is on the Hub but not expected
    expected.append({"path": "model-00004-of-00003.safetensors", "sha256": "e" * 64})
    expected.append({"path": "config.json", "sha256": "d" * 64})  # a git file: the Hub lists no sha256
    kind, result, warnings = run(
        {
            "repo_id": SQUASHED,
            "revision": SQUASHED_PIN,
            "endpoint": hub_server.url,
            "on_missing": "branch_head_if_files_match",
            "match_patterns": ["*.safetensors"],
            "expected_files": expected,
        }
    )
    assert kind == "fail"
    assert warnings == []
    assert result["hub_error"] == "files_mismatch"
    differences = [
        f"model-00001-of-00003.safetensors has sha256 {shard1}, expected {'f' * 64}",
        "model-00004-of-00003.safetensors is missing",
        "config.json is not an LFS file, so the Hub lists no sha256 for it: give its blob_id",
        "model-00002-of-00003.safetensors is not in expected_files",
    ]
    assert result["differences"] == differences
    assert result["msg"].startswith(f"revision {SQUASHED_PIN} does not exist in {SQUASHED} on {hub_server.url} ")
    assert result["msg"].endswith(
        f" on_missing=branch_head_if_files_match did not accept the head of main ({head[:7]}) because its files "
        f"differ from expected_files: {'; '.join(differences)}"
    )
    assert "looks super-squashed" in result["msg"]
    assert resolve_gets(hub_server) == []


def test_policy_refuses_when_an_unlisted_file_matches_the_patterns(run, hub_server, hub_data):
    expected = manifest(hub_data, SQUASHED, suffix=".safetensors")
    kind, result, _warnings = run(
        {
            "repo_id": SQUASHED,
            "revision": SQUASHED_PIN,
            "endpoint": hub_server.url,
            "on_missing": "branch_head_if_files_match",
            "expected_files": expected,
        }
    )
    assert kind == "fail"
    assert result["differences"] == [
        f"{p} is not in expected_files"
        for p in sorted(hub_data.repos[SQUASHED].files("main"))
        if not p.endswith(".safetensors")
    ]


def test_policy_is_not_applied_when_the_revision_exists(run, hub_server, hub_data):
    kind, result, warnings = run(
        {
            "repo_id": QUANT,
            "revision": "v1.0",
            "endpoint": hub_server.url,
            "on_missing": "branch_head_if_files_match",
            "expected_files": [{"path": "nothing", "sha256": "0" * 64}],
        }
    )
    assert kind == "exit", result
    assert result["commit"] == QUANT_PIN
    assert result["policy_applied"] is None
    assert warnings == [unpinned("v1.0", "tag", QUANT_PIN)]  # no policy warning


def test_unpinned_revision_names_the_variable_to_set(run, hub_server, hub_data):
    head = hub_data.pin(BASE)
    kind, result, warnings = run(
        {"repo_id": BASE, "revision": "main", "endpoint": hub_server.url, "revision_variable": "weights_revision"}
    )
    assert kind == "exit", result
    assert result["commit"] == head
    assert warnings == [unpinned("main", "branch", head, "weights_revision", BASE)]
    assert warnings[0].endswith(f"set weights_revision to {head}")


def test_full_sha_gives_no_warning_and_check_mode_warns_too(run, hub_server, hub_data):
    head = hub_data.pin(BASE)
    kind, _result, warnings = run({"repo_id": BASE, "revision": head, "endpoint": hub_server.url})
    assert kind == "exit"
    assert warnings == []
    kind, result, warnings = run({"repo_id": BASE, "endpoint": hub_server.url, "_ansible_check_mode": True})
    assert kind == "exit", result
    assert warnings == [unpinned("main", "branch", head, repo_id=BASE)]


def test_policy_needs_expected_files(run, hub_server):
    kind, result, _warnings = run(
        {"repo_id": SQUASHED, "endpoint": hub_server.url, "on_missing": "branch_head_if_files_match"}
    )
    assert kind == "fail"
    assert (
        result["msg"] == "on_missing is branch_head_if_files_match but all of the following are missing: expected_files"
    )


def test_expected_file_needs_a_hash(run, hub_server):
    kind, result, _warnings = run(
        {
            "repo_id": SQUASHED,
            "endpoint": hub_server.url,
            "on_missing": "branch_head_if_files_match",
            "expected_files": [{"path": "config.json"}],
        }
    )
    assert kind == "fail"
    assert result["msg"] == "one of the following is required: sha256, blob_id found in expected_files"


def test_unknown_repo(run, hub_server):
    kind, result, _warnings = run({"repo_id": "sparkfold-test/nope", "endpoint": hub_server.url})
    assert kind == "fail"
    assert result["hub_error"] == "repo_not_found"
    assert result["msg"] == (
        f"repository sparkfold-test/nope on {hub_server.url} does not exist (it may be private: give a token that "
        "can read it); check repo_id"
    )


def test_unknown_repo_with_a_valid_token(run, hub_server):
    kind, result, _warnings = run({"repo_id": "sparkfold-test/nope", "endpoint": hub_server.url, "token": GOOD_TOKEN})
    assert kind == "fail"
    assert result["hub_error"] == "repo_not_found"
    assert result["msg"] == f"repository sparkfold-test/nope on {hub_server.url} does not exist; check repo_id"


def test_gated_repo_without_token(run, hub_server):
    kind, result, _warnings = run({"repo_id": GATED, "endpoint": hub_server.url})
    assert kind == "fail"
    assert result["hub_error"] == "gated"
    assert result["msg"] == (
        f"{GATED} on {hub_server.url} is gated: give a token of an account that accepted its conditions "
        "(HF_TOKEN, the token option, or token_file)"
    )
    assert resolve_gets(hub_server) == []


def test_gated_repo_with_a_token_without_access(run, hub_server):
    kind, result, _warnings = run({"repo_id": GATED, "endpoint": hub_server.url, "token": NOACCESS_TOKEN})
    assert kind == "fail"
    assert result["hub_error"] == "gated"
    assert result["msg"] == (
        f"{GATED} on {hub_server.url} is gated and the token given has no access to it: accept the model's "
        "conditions on its Hub page with the account that owns the token, or use another token"
    )
    assert NOACCESS_TOKEN not in str(result)


def test_gated_repo_with_access(run, hub_server, hub_data):
    kind, result, _warnings = run({"repo_id": GATED, "endpoint": hub_server.url, "token": GOOD_TOKEN})
    assert kind == "exit", result
    assert result["commit"] == hub_data.pin(GATED)
    assert result["files"] == listing(hub_data, GATED)
    assert GOOD_TOKEN not in str(result)


def test_bad_token(run, hub_server):
    kind, result, _warnings = run({"repo_id": QUANT, "endpoint": hub_server.url, "token": "hf_not_a_token"})
    assert kind == "fail"
    assert result["hub_error"] == "bad_token"
    assert result["msg"] == (
        f"the Hub at {hub_server.url} refused the token (401): it is invalid or expired; make a new one and set "
        "HF_TOKEN"
    )


def test_token_from_environment_and_file(run, hub_server, hub_data, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)
    kind, result, _warnings = run({"repo_id": GATED, "endpoint": hub_server.url})
    assert kind == "exit", result
    assert result["commit"] == hub_data.pin(GATED)

    monkeypatch.delenv("HF_TOKEN")
    token_file = tmp_path / "token"
    token_file.write_text(GOOD_TOKEN + "\n")
    kind, result, _warnings = run({"repo_id": GATED, "endpoint": hub_server.url, "token_file": str(token_file)})
    assert kind == "exit", result
    assert result["commit"] == hub_data.pin(GATED)


def test_missing_token_file(run, hub_server, tmp_path):
    missing = str(tmp_path / "no-token")
    kind, result, _warnings = run({"repo_id": QUANT, "endpoint": hub_server.url, "token_file": missing})
    assert kind == "fail"
    assert result["hub_error"] == "token_file"
    assert result["msg"] == (
        f"token_file {missing} does not exist or is empty; write the Hub token into it (mode 0600)"
    )


def test_huggingface_hub_missing(run, monkeypatch):
    monkeypatch.setattr(hub, "HAS_HF", False)
    monkeypatch.setattr(hub, "HF_IMPORT_ERROR", "Traceback: No module named 'huggingface_hub'")
    kind, result, _warnings = run({"repo_id": QUANT, "endpoint": "http://127.0.0.1:9"})
    assert kind == "fail"
    assert result["msg"] == f"{missing_required_lib('huggingface_hub')} {hub.HF_MISSING_HINT}"
    assert "sparkfold.cluster.hf_cli role" in result["msg"]
    assert "ansible_python_interpreter" in result["msg"]
    assert result["exception"] == "Traceback: No module named 'huggingface_hub'"


def test_unreachable_hub(run):
    kind, result, _warnings = run({"repo_id": QUANT, "endpoint": "http://127.0.0.1:9"})
    assert kind == "fail"
    assert result["hub_error"] == "network"
    assert result["msg"].startswith(
        f"could not reach the Hub at http://127.0.0.1:9 for {QUANT} on http://127.0.0.1:9: "
    )


def test_short_sha_lookup_in_the_history(hub_server, hub_data, monkeypatch):
    """The fallback for Hubs that do not resolve short shas themselves: search the heads' histories."""
    monkeypatch.setenv("HF_ENDPOINT", hub_server.url)
    api, _endpoint, _token = hub.hub_client({})
    first = hub_data.commits(QUANT, "main")[-1].id  # "Initial upload", reachable only through history
    assert hub._expand_short_sha(api, QUANT, first[:7], "model") == [first]
    assert hub._expand_short_sha(api, QUANT, QUANT_PIN[:9], "model") == [QUANT_PIN]
    assert hub._expand_short_sha(api, QUANT, "abcdef0", "model") == []


# --------------------------------------------------------------------------- force-pushed branches

FORCED = "sparkfold-test/dsv41-forced"  # main force-pushed to an unrelated history; tag v1.0 kept on the old one
FORCED_BARE = "sparkfold-test/dsv41-forced-bare"  # the same without tags: only the repo's age tells
# main reset to its first commit with new commits on top (a rebase-style push); tag v1.0 kept on the old line
REBASED = "sparkfold-test/dsv41-rebased"
REBASED_BARE = "sparkfold-test/dsv41-rebased-bare"  # the same without tags: nothing tells


def weights(label):
    """A small real safetensors file (the fixture server reads its header) whose content depends on label."""
    return fixtures.safetensors_file([("w", "F16", [8], label.ljust(16, b"."))])


@pytest.fixture(scope="module")
def forced_hub(tmp_path_factory):
    """A Hub with two repos whose main was force-pushed: (HubData, {repo_id: (pin that is gone, old root)}).

    The commits are made as tests/hub/fixtures.py makes them; the pinned one is then dropped, as the Hub drops
    commits no ref reaches any more. The old root stays (FORCED: tag v1.0 holds it; FORCED_BARE: unreferenced,
    so the repo's createdAt stays the date of its first commit, as on the Hub).
    """
    builder = fixtures._Builder(str(tmp_path_factory.mktemp("forced-hub")))
    gone = {}
    for repo_id in (FORCED, FORCED_BARE):
        repo = builder.new_repo(repo_id)
        first = builder.commit(
            repo, "Initial upload", "2026-01-05T10:00:00.000Z", {"config.json": b'{"model_type": "x"}\n'}, None
        )
        pin = builder.commit(
            repo, "Add EXL3 shards", "2026-01-06T11:30:00.000Z", {"model.safetensors": weights(b"old")}, first
        )
        new = builder.commit(
            repo,
            "Upload EXL3 2.9bpw",
            "2026-02-01T00:00:00.000Z",
            {"config.json": b'{"model_type": "y"}\n', "model.safetensors": weights(b"new")},
            None,
        )
        head = builder.commit(repo, "Update README", "2026-02-02T08:00:00.000Z", {"README.md": b"# new\n"}, new)
        del repo["commits"][pin]
        repo["branches"] = {"main": head}
        if repo_id == FORCED:
            repo["tags"] = {"v1.0": first}
        gone[repo_id] = (pin, first, new, head)
    for repo_id in (REBASED, REBASED_BARE):
        repo = builder.new_repo(repo_id)
        first = builder.commit(
            repo, "Initial upload", "2026-01-05T10:00:00.000Z", {"config.json": b'{"model_type": "x"}\n'}, None
        )
        tagged = builder.commit(
            repo, "Add EXL3 shards", "2026-01-06T11:30:00.000Z", {"model.safetensors": weights(b"old")}, first
        )
        pin = builder.commit(repo, "Update README", "2026-01-07T09:00:00.000Z", {"README.md": b"# old\n"}, tagged)
        new = builder.commit(
            repo, "Requantize", "2026-02-01T00:00:00.000Z", {"model.safetensors": weights(b"new")}, first
        )
        head = builder.commit(repo, "Update README", "2026-02-02T08:00:00.000Z", {"README.md": b"# new\n"}, new)
        del repo["commits"][pin]
        repo["branches"] = {"main": head}
        if repo_id == REBASED:
            repo["tags"] = {"v1.0": tagged}
        else:
            del repo["commits"][tagged]
        gone[repo_id] = (pin, first, tagged, head)
    return builder.finish(), gone


@pytest.fixture
def forced_server(forced_hub):
    with HubServer(forced_hub[0]) as server:
        yield server


def test_force_pushed_main_is_named_with_the_refs(run, forced_server, forced_hub):
    pin, first, root, head = forced_hub[1][FORCED]
    url = forced_server.url
    kind, result, _warnings = run({"repo_id": FORCED, "revision": pin, "endpoint": url})
    assert kind == "fail"
    assert result["hub_error"] == "revision_not_found"
    assert result["squashed"] is None
    assert result["force_pushed"] == {
        "branch": "main",
        "root": {"commit": root, "date": "2026-02-01T00:00:00+00:00", "title": "Upload EXL3 2.9bpw"},
        "created_at": "2026-01-05T10:00:00+00:00",
        "unrelated_tags": ["v1.0"],
        "diverged_tags": [],
    }
    assert result["refs"] == {
        "branches": [
            {"name": "main", "commit": head, "date": "2026-02-02T08:00:00+00:00", "title": "Update README"},
        ],
        "tags": [
            {"name": "v1.0", "commit": first, "date": "2026-01-05T10:00:00+00:00", "title": "Initial upload"},
        ],
    }
    assert result["msg"] == (
        f"revision {pin} does not exist in {FORCED} on {url} (the Hub answered RevisionNotFound; nothing was "
        "downloaded). "
        f'Branches now: main at {head[:7]} (2026-02-02 08:00 UTC, "Update README"). '
        f'Tags now: v1.0 at {first[:7]} (2026-01-05 10:00 UTC, "Initial upload"). '
        f'The history of main looks force-pushed: its oldest commit is {root[:7]} (2026-02-01 00:00 UTC, "Upload '
        'EXL3 2.9bpw"), while the repository was created 2026-01-05 10:00 UTC; it shares no commit with tag '
        f"v1.0. main was replaced by unrelated commits, so older commits such as {pin} were removed from the Hub and "
        "will not come back. "
        f"To go on, pin one of the commits above (for example revision: {head}, the head of main) after checking "
        "its files, or set on_missing=branch_head_if_files_match with expected_files to accept the head of main "
        "only if its files match the ones you expect."
    )
    assert "typo" not in result["msg"]
    assert resolve_gets(forced_server) == []


def test_force_pushed_main_without_tags_is_told_by_the_repos_age(run, forced_server, forced_hub):
    pin, _first, root, _head = forced_hub[1][FORCED_BARE]
    kind, result, _warnings = run({"repo_id": FORCED_BARE, "revision": pin, "endpoint": forced_server.url})
    assert kind == "fail"
    assert result["force_pushed"]["unrelated_tags"] == []
    assert result["force_pushed"]["created_at"] == "2026-01-05T10:00:00+00:00"
    assert result["refs"]["tags"] == []
    assert (
        f'The history of main looks force-pushed: its oldest commit is {root[:7]} (2026-02-01 00:00 UTC, "Upload '
        "EXL3 2.9bpw\"), while the repository was created 2026-01-05 10:00 UTC. main was replaced by unrelated "
        f"commits, so older commits such as {pin} were removed from the Hub and will not come back. "
    ) in result["msg"]


def test_rebase_style_force_push_is_named(run, forced_server, forced_hub):
    """Issue 26 item 5: main reset to an older commit with new commits on top, a tag left on the old line."""
    pin, first, tagged, head = forced_hub[1][REBASED]
    kind, result, _warnings = run({"repo_id": REBASED, "revision": pin, "endpoint": forced_server.url})
    assert kind == "fail"
    assert result["hub_error"] == "revision_not_found"
    assert result["squashed"] is None
    assert result["force_pushed"]["diverged_tags"] == [
        {"name": "v1.0", "commit": tagged,
         "reset_to": {"commit": first, "date": "2026-01-05T10:00:00+00:00", "title": "Initial upload"}},
    ]
    assert (
        f"The history of main looks force-pushed: it no longer contains tag v1.0 ({tagged[:7]}), whose history it "
        f'shares only up to {first[:7]} (2026-01-05 10:00 UTC, "Initial upload"). main was reset to an older commit '
        f"({first[:7]} or before) and new commits were put on top, so the commits it had after that, such as {pin}, "
        "were removed from the Hub and will not come back. "
    ) in result["msg"]
    assert "typo" not in result["msg"]
    assert f"for example revision: {head}" in result["msg"]


def test_rebase_style_force_push_without_tags_is_named_as_possible(run, forced_server, forced_hub):
    pin = forced_hub[1][REBASED_BARE][0]
    kind, result, _warnings = run({"repo_id": REBASED_BARE, "revision": pin, "endpoint": forced_server.url})
    assert kind == "fail"
    assert result["force_pushed"] is None
    assert (f"Either {pin} is mistyped, or main was force-pushed (reset to an older commit with new commits on "
            "top, which leaves no other trace)") in result["msg"]


def test_force_pushed_pin_accepted_by_the_policy_when_files_match(run, forced_server, forced_hub):
    pin, _first, _root, head = forced_hub[1][FORCED]
    hub_data = forced_hub[0]
    kind, result, warnings = run(
        {
            "repo_id": FORCED,
            "revision": pin,
            "endpoint": forced_server.url,
            "on_missing": "branch_head_if_files_match",
            "expected_files": manifest(hub_data, FORCED),
        }
    )
    assert kind == "exit", result
    assert result["commit"] == head
    assert len(warnings) == 1  # the policy's warning only: the pin given was a commit id


def test_squashed_and_normal_histories_are_not_called_force_pushed(run, hub_server):
    kind, result, _warnings = run({"repo_id": SQUASHED, "revision": SQUASHED_PIN, "endpoint": hub_server.url})
    assert kind == "fail"
    assert result["squashed"] is not None
    assert result["force_pushed"] is None
    assert "force-pushed" not in result["msg"]
    kind, result, _warnings = run({"repo_id": QUANT, "revision": "0" * 40, "endpoint": hub_server.url})
    assert kind == "fail"
    assert result["force_pushed"] is None
    assert "looks force-pushed" not in result["msg"]  # only named as what a full commit's loss may be


# ---- timeouts (issue 26 item 3): the options of hub_snapshot, and messages that name them ------------------
SLACK = 3.0  # seconds a slow machine may add to a deadline


def test_a_silent_hub_fails_after_read_timeout_naming_the_option(run, hub_server):
    fault = hub_server.add_fault(r"^/api/models/", "hang")
    start = time.monotonic()
    kind, result, _warnings = run({"repo_id": QUANT, "revision": QUANT_PIN, "endpoint": hub_server.url,
                                   "read_timeout": 0.5})
    took = time.monotonic() - start
    assert kind == "fail", result
    assert fault.hits == 1 and took < 0.5 + SLACK
    assert result["hub_error"] == "timeout"
    assert "gave up after waiting 0.5 s" in result["msg"] and "read_timeout=0.5" in result["msg"]
    assert "raise read_timeout" in result["msg"]


def test_a_trickling_hub_answer_is_cut_off_by_stall_timeout(run, hub_server):
    """The answer's headers come at once, then 64 bytes every 50 ms: no read waits long, the answer never ends."""
    hub_server.add_fault(r"^/api/models/[^/]+/[^/]+/revision/", "trickle", step=64, interval=0.05)
    start = time.monotonic()
    kind, result, _warnings = run({"repo_id": QUANT, "revision": QUANT_PIN, "endpoint": hub_server.url,
                                   "stall_timeout": 0.5})
    took = time.monotonic() - start
    assert kind == "fail", result
    assert took < 0.5 + SLACK
    assert result["hub_error"] == "timeout"
    assert "stall_timeout=0.5" in result["msg"] and "raise stall_timeout" in result["msg"]
    assert "read_timeout" not in result["msg"]


@pytest.mark.parametrize("option", ["connect_timeout", "read_timeout", "stall_timeout"])
def test_timeouts_must_be_positive(run, hub_server, option):
    kind, result, _warnings = run({"repo_id": QUANT, "endpoint": hub_server.url, option: 0})
    assert kind == "fail" and result["hub_error"] == "args", result
    assert option in result["msg"]
    assert hub_server.requests == []
