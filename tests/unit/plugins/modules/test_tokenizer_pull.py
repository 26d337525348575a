# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster.tokenizer_pull, run in-process against the offline Hub (tests/hub)."""

import hashlib
import os
import stat
import time

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import tokenizer
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import hub_client
from ansible_collections.sparkfold.cluster.plugins.modules import tokenizer_pull

from tests.hub.fixtures import (
    BASE,
    BASE_PIN,
    GATED,
    GOOD_TOKEN,
    QUANT,
    QUANT_PIN,
    SQUASHED,
)
from tests.unit.module_runner import module_runner

TOKENIZER = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
# what the base fixture has: the three tokenizer files and one of the optional chat templates
BASE_FILES = [*TOKENIZER, "chat_template.jinja"]


pytestmark = pytest.mark.usefixtures("hf_env")


@pytest.fixture
def run(monkeypatch):
    """Run tokenizer_pull.main() with the given args; return (kind, result dict, warnings)."""
    return module_runner(monkeypatch, tokenizer_pull.main)


@pytest.fixture
def model_dir(tmp_path):
    """A model directory as hub_snapshot leaves it for the quant: weights and config, no tokenizer."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_bytes(b'{"model_type": "deepseek_v4"}\n')
    (path / "model-00001-of-00003.safetensors").write_bytes(b"weights")
    return path


def snapshot(directory):
    """{relative path: ("link", target) | ("file", bytes, mode)} of everything under directory."""
    out = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, directory)
            if os.path.islink(full):
                out[rel] = ("link", os.readlink(full))
            elif os.path.isfile(full):
                with open(full, "rb") as handle:
                    out[rel] = ("file", handle.read(), stat.S_IMODE(os.lstat(full).st_mode))
            else:
                out[rel] = ("dir",)
    return out


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def expected_files(hub_data, repo_id, commit, paths, actions):
    return [
        {
            "path": p,
            "sha256": hub_data.file(repo_id, p, commit).sha256,
            "source_repo": repo_id,
            "source_commit": commit,
            "action": actions[p] if isinstance(actions, dict) else actions,
        }
        for p in paths
    ]


def resolve_gets(hub_server):
    return [path for method, path in hub_server.requests if method == "GET" and "/resolve/" in path]


def pull(run, hub_server, model_dir, **extra):
    """Run the module as the weights role does: both revisions pinned to full commits (no warning)."""
    args = {
        "model_dir": str(model_dir),
        "repo_id": QUANT,
        "revision": QUANT_PIN,
        "base_revision": BASE_PIN,
        "endpoint": hub_server.url,
    }
    args.update(extra)
    return run(args)


def assert_real_files(hub_data, model_dir, repo_id, paths):
    for p in paths:
        full = os.path.join(str(model_dir), p)
        assert not os.path.islink(full), p
        assert stat.S_ISREG(os.lstat(full).st_mode), p
        with open(full, "rb") as handle:
            data = handle.read()
        assert data == hub_data.file_bytes(repo_id, p), p
        assert sha256(data) == hub_data.file(repo_id, p).sha256, p


def test_tokenizer_from_base_when_the_quant_lacks_it(run, hub_server, hub_data, model_dir):
    before = snapshot(model_dir)
    kind, result, warnings = pull(run, hub_server, model_dir)
    assert kind == "exit", result
    assert warnings == []
    assert {k: v for k, v in result.items() if k != "invocation"} == {
        "changed": True,
        "source": "base",
        "files": expected_files(hub_data, BASE, BASE_PIN, BASE_FILES, "create"),
        "written": BASE_FILES,
        "model_commit": QUANT_PIN,
        "base_repo_id": BASE,
        "base_commit": BASE_PIN,
    }
    assert_real_files(hub_data, model_dir, BASE, BASE_FILES)
    after = snapshot(model_dir)
    # the weights and config are untouched, and no staging directory or .cache is left behind
    assert sorted(after) == sorted([*before, *BASE_FILES])
    assert {k: after[k] for k in before} == before
    umask = os.umask(0)
    os.umask(umask)
    assert {after[p][2] for p in BASE_FILES} == {0o666 & ~umask}
    # each file is fetched once, from the base at its resolved commit
    assert sorted(resolve_gets(hub_server)) == sorted(f"/{BASE}/resolve/{BASE_PIN}/{p}" for p in BASE_FILES)


def test_rerun_reports_present_and_downloads_nothing(run, hub_server, hub_data, model_dir):
    kind, _result, _warnings = pull(run, hub_server, model_dir)
    assert kind == "exit"
    before = snapshot(model_dir)
    hub_server.reset()
    kind, result, warnings = pull(run, hub_server, model_dir)
    assert kind == "exit", result
    assert warnings == []
    assert {k: v for k, v in result.items() if k != "invocation"} == {
        "changed": False,
        "source": "present",
        "files": expected_files(hub_data, BASE, BASE_PIN, BASE_FILES, "present"),
        "written": [],
        "model_commit": QUANT_PIN,
        "base_repo_id": BASE,
        "base_commit": BASE_PIN,
    }
    assert snapshot(model_dir) == before
    assert resolve_gets(hub_server) == []


def test_symlinks_are_replaced_by_real_files(run, hub_server, hub_data, model_dir, tmp_path):
    cache = tmp_path / "hf-cache" / "blobs"
    cache.mkdir(parents=True)
    good = cache / hub_data.file(BASE, "tokenizer.json").sha256
    good.write_bytes(hub_data.file_bytes(BASE, "tokenizer.json"))
    wrong = cache / "wrong"
    wrong.write_bytes(b'{"not": "the tokenizer config"}\n')
    os.symlink(str(good), str(model_dir / "tokenizer.json"))
    os.symlink(str(wrong), str(model_dir / "tokenizer_config.json"))
    os.symlink(str(cache / "gone"), str(model_dir / "special_tokens_map.json"))
    kind, result, _warnings = pull(run, hub_server, model_dir)
    assert kind == "exit", result
    assert result["changed"] is True
    assert result["source"] == "base"
    assert result["files"] == expected_files(
        hub_data,
        BASE,
        BASE_PIN,
        BASE_FILES,
        {
            "tokenizer.json": "replace_symlink",
            "tokenizer_config.json": "replace_symlink",
            "special_tokens_map.json": "replace_symlink",
            "chat_template.jinja": "create",
        },
    )
    assert result["written"] == BASE_FILES
    assert_real_files(hub_data, model_dir, BASE, BASE_FILES)
    # the link with the right content is copied locally; the others are downloaded
    assert sorted(resolve_gets(hub_server)) == sorted(
        f"/{BASE}/resolve/{BASE_PIN}/{p}" for p in BASE_FILES if p != "tokenizer.json"
    )
    # the cache the links pointed into is left as it was
    assert good.read_bytes() == hub_data.file_bytes(BASE, "tokenizer.json")
    assert wrong.read_bytes() == b'{"not": "the tokenizer config"}\n'


def test_file_with_other_content_is_updated_keeping_its_mode(run, hub_server, hub_data, model_dir):
    target = model_dir / "tokenizer_config.json"
    target.write_bytes(b"{}\n")
    os.chmod(str(target), 0o600)
    for p in ("tokenizer.json", "special_tokens_map.json", "chat_template.jinja"):
        (model_dir / p).write_bytes(hub_data.file_bytes(BASE, p))
    kind, result, _warnings = pull(run, hub_server, model_dir)
    assert kind == "exit", result
    assert result["changed"] is True
    assert result["source"] == "base"
    assert result["written"] == ["tokenizer_config.json"]
    assert [f["action"] for f in result["files"]] == ["present", "update", "present", "present"]
    assert target.read_bytes() == hub_data.file_bytes(BASE, "tokenizer_config.json")
    assert stat.S_IMODE(os.lstat(str(target)).st_mode) == 0o600
    assert resolve_gets(hub_server) == [f"/{BASE}/resolve/{BASE_PIN}/tokenizer_config.json"]


def test_check_mode_writes_nothing(run, hub_server, hub_data, model_dir):
    os.symlink("/nonexistent/blob", str(model_dir / "tokenizer.json"))
    before = snapshot(model_dir)
    kind, result, warnings = pull(run, hub_server, model_dir, _ansible_check_mode=True, _ansible_diff=True)
    assert kind == "exit", result
    assert warnings == []
    assert snapshot(model_dir) == before
    assert resolve_gets(hub_server) == []
    files = expected_files(
        hub_data,
        BASE,
        BASE_PIN,
        BASE_FILES,
        {p: "replace_symlink" if p == "tokenizer.json" else "create" for p in BASE_FILES},
    )
    # git files (all but the LFS tokenizer.json) have no sha256 on the Hub: unknown until downloaded
    for f in files:
        if not hub_data.file(BASE, f["path"]).lfs:
            f["sha256"] = None
    assert {k: v for k, v in result.items() if k not in ("invocation", "diff")} == {
        "changed": True,
        "source": "base",
        "files": files,
        "written": BASE_FILES,
        "model_commit": QUANT_PIN,
        "base_repo_id": BASE,
        "base_commit": BASE_PIN,
    }
    tok = hub_data.file(BASE, "tokenizer.json")
    sizes = {p: hub_data.file(BASE, p).size for p in BASE_FILES}
    assert result["diff"] == {
        "before_header": str(model_dir),
        "after_header": str(model_dir),
        "before": (
            "tokenizer.json: symlink to /nonexistent/blob (dangling)\n"
            "tokenizer_config.json: absent\n"
            "special_tokens_map.json: absent\n"
            "chat_template.jinja: absent\n"
        ),
        "after": (
            f"tokenizer.json: file, sha256 {tok.sha256}, {tok.size} bytes, from {BASE}@{BASE_PIN[:7]}\n"
            f"tokenizer_config.json: file, sha256 (not listed), {sizes['tokenizer_config.json']} bytes, "
            f"from {BASE}@{BASE_PIN[:7]}\n"
            f"special_tokens_map.json: file, sha256 (not listed), {sizes['special_tokens_map.json']} bytes, "
            f"from {BASE}@{BASE_PIN[:7]}\n"
            f"chat_template.jinja: file, sha256 (not listed), {sizes['chat_template.jinja']} bytes, "
            f"from {BASE}@{BASE_PIN[:7]}\n"
        ),
    }


def test_check_mode_on_a_missing_model_dir_creates_nothing(run, hub_server, tmp_path):
    target = tmp_path / "not-yet"
    kind, result, _warnings = pull(run, hub_server, target, _ansible_check_mode=True)
    assert kind == "exit", result
    assert result["changed"] is True
    assert result["written"] == BASE_FILES
    assert not os.path.lexists(str(target))


def test_missing_model_dir_is_created(run, hub_server, hub_data, tmp_path):
    target = tmp_path / "models" / "dsv41"
    kind, result, _warnings = pull(run, hub_server, target)
    assert kind == "exit", result
    assert result["written"] == BASE_FILES
    assert sorted(os.listdir(str(target))) == sorted(BASE_FILES)
    assert_real_files(hub_data, target, BASE, BASE_FILES)


def test_diff_after_writing_and_when_present(run, hub_server, hub_data, model_dir):
    kind, result, _warnings = pull(run, hub_server, model_dir, _ansible_diff=True)
    assert kind == "exit", result
    lines = result["diff"]["after"].splitlines()
    assert lines == [
        f"{p}: file, sha256 {hub_data.file(BASE, p).sha256}, {hub_data.file(BASE, p).size} bytes, "
        f"from {BASE}@{BASE_PIN[:7]}"
        for p in BASE_FILES
    ]
    kind, result, _warnings = pull(run, hub_server, model_dir, _ansible_diff=True)
    assert kind == "exit", result
    assert result["changed"] is False
    listing = "".join(
        f"{p}: file, sha256 {hub_data.file(BASE, p).sha256}, {hub_data.file(BASE, p).size} bytes\n" for p in BASE_FILES
    )
    assert result["diff"]["before"] == listing
    assert result["diff"]["after"] == listing


def test_tokenizer_missing_in_both_repos(run, hub_server, hub_data, model_dir):
    before = snapshot(model_dir)
    squashed = hub_data.pin(SQUASHED)
    kind, result, _warnings = pull(
        run, hub_server, model_dir, revision="v1.0", base_repo_id=SQUASHED, base_revision="main"
    )
    assert kind == "fail"
    assert result["hub_error"] == "tokenizer_missing"
    assert result["msg"] == (
        f"the tokenizer is missing in both repos: {QUANT} at v1.0 ({QUANT_PIN[:7]}) lacks tokenizer.json, "
        f"tokenizer_config.json, special_tokens_map.json, and its base {SQUASHED} at main ({squashed[:7]}) lacks "
        f"tokenizer.json, tokenizer_config.json, special_tokens_map.json. Nothing was written to {model_dir}. "
        "Set base_repo_id/base_revision to a repo that has them, or files to the names this model's tokenizer uses"
    )
    assert snapshot(model_dir) == before
    assert resolve_gets(hub_server) == []


def test_source_is_the_model_when_it_has_the_tokenizer(run, hub_server, hub_data, model_dir):
    kind, result, _warnings = pull(run, hub_server, model_dir, repo_id=BASE, revision="main")
    assert kind == "exit", result
    assert result["source"] == "model"
    assert result["model_commit"] == BASE_PIN
    assert result["base_repo_id"] is None
    assert result["base_commit"] is None
    assert result["files"] == expected_files(hub_data, BASE, BASE_PIN, BASE_FILES, "create")
    assert_real_files(hub_data, model_dir, BASE, BASE_FILES)


def test_explicit_base_and_short_sha_revision(run, hub_server, hub_data, model_dir):
    kind, result, _warnings = pull(
        run,
        hub_server,
        model_dir,
        revision=QUANT_PIN[:10],
        base_repo_id=BASE,
        base_revision=BASE_PIN[:8],
        files=["tokenizer.json"],
        optional_files=[],
    )
    assert kind == "exit", result
    assert result["model_commit"] == QUANT_PIN
    assert result["base_repo_id"] == BASE
    assert result["base_commit"] == BASE_PIN
    assert result["files"] == expected_files(hub_data, BASE, BASE_PIN, ["tokenizer.json"], "create")
    assert result["written"] == ["tokenizer.json"]
    assert not os.path.exists(str(model_dir / "tokenizer_config.json"))


def test_card_without_base_model(run, hub_server, hub_data, model_dir):
    before = snapshot(model_dir)
    gated = hub_data.pin(GATED)
    kind, result, _warnings = pull(run, hub_server, model_dir, repo_id=GATED, revision="main", token=GOOD_TOKEN)
    assert kind == "fail"
    assert result["hub_error"] == "no_base_model"
    assert result["msg"] == (
        f"{GATED} at main ({gated[:7]}) lacks tokenizer.json, tokenizer_config.json, special_tokens_map.json and "
        "its model card names no base_model to take them from; set base_repo_id (and base_revision) to the model "
        "it was made from"
    )
    assert snapshot(model_dir) == before


def test_base_model_read_from_the_readme_when_the_hub_gives_no_card_data(hub_server, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub_server.url)
    api, _endpoint, _token = hub_client({})
    info = api.model_info(QUANT, revision=QUANT_PIN, files_metadata=True)
    assert info.card_data.base_model == BASE
    info.card_data = None
    assert tokenizer.card_base_model(api, QUANT, QUANT_PIN, info) == [BASE]


def test_missing_model_revision_fails_before_writing(run, hub_server, model_dir):
    before = snapshot(model_dir)
    missing = "0123456789abcdef0123456789abcdef01234567"
    kind, result, _warnings = pull(run, hub_server, model_dir, revision=missing)
    assert kind == "fail"
    assert result["hub_error"] == "revision_not_found"
    assert result["msg"].startswith(f"revision {missing} does not exist in {QUANT} on {hub_server.url} ")
    assert snapshot(model_dir) == before


def test_missing_base_revision(run, hub_server, model_dir):
    kind, result, _warnings = pull(run, hub_server, model_dir, base_revision="v9")
    assert kind == "fail"
    assert result["hub_error"] == "revision_not_found"
    assert result["msg"].startswith(f"revision v9 does not exist in {BASE} on {hub_server.url} ")


def test_gated_base_without_token(run, hub_server, model_dir):
    before = snapshot(model_dir)
    kind, result, _warnings = pull(run, hub_server, model_dir, base_repo_id=GATED, base_revision="main")
    assert kind == "fail"
    assert result["hub_error"] == "gated"
    assert result["msg"] == (
        f"{GATED} on {hub_server.url} is gated: give a token of an account that accepted its conditions "
        "(HF_TOKEN, the token option, or token_file)"
    )
    assert snapshot(model_dir) == before


@pytest.mark.parametrize("bad", ["../tokenizer.json", "/etc/passwd", ""])
def test_paths_must_stay_inside_model_dir(run, hub_server, model_dir, bad):
    kind, result, _warnings = pull(run, hub_server, model_dir, files=[bad])
    assert kind == "fail"
    assert result["msg"] == f"files entry {bad!r} is not a relative path inside the repo"


def test_model_dir_that_is_a_file(run, hub_server, tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    kind, result, _warnings = pull(run, hub_server, target)
    assert kind == "fail"
    assert result["msg"] == f"model_dir {target} exists and is not a directory"


def test_directory_in_the_way(run, hub_server, model_dir):
    (model_dir / "tokenizer.json").mkdir()
    kind, result, _warnings = pull(run, hub_server, model_dir)
    assert kind == "fail"
    assert result["msg"] == f"{model_dir}/tokenizer.json exists and is not a regular file or a symlink; move it away"


def unpinned(repo_id, revision, kind, commit, variable):
    return (
        f"revision {revision} of {repo_id} is a {kind}, not a pin: it resolved to commit {commit} on this run, but "
        f"a {kind} can move, so the next run may deploy another commit. To pin it, set {variable} to {commit}"
    )


def test_branch_or_tag_revisions_warn_naming_the_variables(run, hub_server, hub_data, model_dir):
    kind, result, warnings = pull(
        run,
        hub_server,
        model_dir,
        revision="v1.0",
        base_revision="main",
        revision_variable="weights_revision",
        base_revision_variable="weights_base_revision",
    )
    assert kind == "exit", result
    assert result["model_commit"] == QUANT_PIN
    assert result["base_commit"] == BASE_PIN
    assert result["files"] == expected_files(hub_data, BASE, BASE_PIN, BASE_FILES, "create")
    assert warnings == [
        unpinned(QUANT, "v1.0", "tag", QUANT_PIN, "weights_revision"),
        unpinned(BASE, "main", "branch", BASE_PIN, "weights_base_revision"),
    ]


def test_unpinned_warning_without_variable_names_the_option(run, hub_server, hub_data, model_dir):
    # the model has the tokenizer: no base model is consulted, so its revision gives no warning
    kind, result, warnings = pull(run, hub_server, model_dir, repo_id=BASE, revision="main", base_revision="main")
    assert kind == "exit", result
    assert result["base_commit"] is None
    assert warnings == [unpinned(BASE, "main", "branch", BASE_PIN, "this task's revision")]
    # in check mode too, and a short sha is a commit: no warning for it
    kind, result, warnings = pull(
        run, hub_server, model_dir, revision=QUANT_PIN[:9], base_revision="main", _ansible_check_mode=True
    )
    assert kind == "exit", result
    assert warnings[1:] == [unpinned(BASE, "main", "branch", BASE_PIN, "this task's base_revision")]


# ---- timeouts (issue 26 item 3): the options of hub_snapshot, and messages that name them ------------------
SLACK = 3.0  # seconds a slow machine may add to a deadline


def test_a_silent_hub_fails_after_read_timeout_naming_the_option(run, hub_server, model_dir):
    before = snapshot(model_dir)
    fault = hub_server.add_fault(r"^/api/models/", "hang")
    start = time.monotonic()
    kind, result, _warnings = pull(run, hub_server, model_dir, read_timeout=0.5)
    assert kind == "fail", result
    assert fault.hits == 1 and time.monotonic() - start < 0.5 + SLACK
    assert result["hub_error"] == "timeout"
    assert "gave up after waiting 0.5 s" in result["msg"] and "read_timeout=0.5" in result["msg"]
    assert snapshot(model_dir) == before


def test_a_tokenizer_file_that_never_comes_fails_after_read_timeout(run, hub_server, model_dir):
    before = snapshot(model_dir)
    hub_server.add_fault(r"/resolve/[^/]+/tokenizer\.json$", "stall", methods=("GET",), hold=10)
    start = time.monotonic()
    kind, result, _warnings = pull(run, hub_server, model_dir, read_timeout=0.5)
    assert kind == "fail", result
    assert time.monotonic() - start < 2 * 0.5 + SLACK
    assert result["hub_error"] == "timeout"
    assert "tokenizer.json" in result["msg"] and "read_timeout=0.5" in result["msg"]
    assert "Nothing was written" in result["msg"]
    assert snapshot(model_dir) == before


def test_a_trickling_tokenizer_download_is_cut_off_by_stall_timeout(run, hub_server, model_dir):
    hub_server.add_fault(r"/resolve/[^/]+/tokenizer\.json$", "trickle", methods=("GET",), step=256, interval=0.05)
    start = time.monotonic()
    kind, result, _warnings = pull(run, hub_server, model_dir, stall_timeout=0.5)
    assert kind == "fail", result
    assert time.monotonic() - start < 2 * 0.5 + SLACK
    assert result["hub_error"] == "stalled"
    assert "tokenizer.json" in result["msg"] and "stall_timeout=0.5" in result["msg"]
