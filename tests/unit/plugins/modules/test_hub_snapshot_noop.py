# SPDX-License-Identifier: GPL-3.0-or-later
"""hub_snapshot's re-run with nothing to fetch: the listing of the commit kept beside the store
(module_utils/snapshot_listing.py) and the one HEAD that checks it, against the offline Hub (tests/hub).

What a no-op costs is what the benchmark compares with `hf download` (benchmarks/weights_verify.py): start-up,
imports and one question to the Hub. These tests pin that question (one HEAD of one small file, no listing
call, no HfApi imported) and that the kept listing is never taken for the Hub's answer when the Hub says
otherwise.
"""

import json
import os
import subprocess
import sys

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import MANIFEST_NAME
from ansible_collections.sparkfold.cluster.plugins.module_utils.snapshot_listing import (
    LISTING_NAME,
    listing_text,
    parse_listing,
)
from ansible_collections.sparkfold.cluster.plugins.modules import hub_snapshot

from tests.hub import fixtures
from tests.hub.fixtures import quant_args as quant

MODULE_PATH = os.path.abspath(hub_snapshot.__file__)
SLACK = 3.0  # seconds a slow CI machine may add to a deadline


def listing_file(store):
    return store / ".cache" / "huggingface" / LISTING_NAME


def probe_path(hub_data, repo_id, commit):
    """The file the re-run asks about: the smallest git (not LFS) file of the commit, ties by path."""
    files = hub_data.repos[repo_id].files(commit).values()
    return min((f for f in files if not f.lfs), key=lambda f: (f.size, f.path)).path


def listing_calls(server):
    return [(method, path) for method, path in server.requests if path.startswith("/api/")]


def test_a_noop_rerun_asks_the_hub_one_head_of_one_small_file(run, store, hub_server, hub_data):
    kind, first = run(quant(store))
    assert kind == "exit", first
    assert listing_calls(hub_server)  # the first run lists the commit
    kept = json.loads(listing_file(store).read_text())
    assert kept["commit"] == fixtures.QUANT_PIN
    assert {f["path"] for f in kept["files"]} == set(hub_data.repos[fixtures.QUANT].files(fixtures.QUANT_PIN))
    hub_server.reset()

    kind, result = run(quant(store))
    assert kind == "exit", result
    assert run.warnings == []
    assert result["changed"] is False
    assert {f["status"] for f in result["files"]} == {"present"}
    assert result["files"] == [dict(f, status="present") for f in first["files"]]
    probe = probe_path(hub_data, fixtures.QUANT, fixtures.QUANT_PIN)
    assert hub_server.requests == [("HEAD", f"/{fixtures.QUANT}/resolve/{fixtures.QUANT_PIN}/{probe}")]
    assert hub_server.bytes_served == 0


# Runs the module file as `python MODULE ARGS` does (its folder first on sys.path, __main__), and writes the names
# of the modules it imported to standard error at exit (exit_json ends the process).
RUN_AND_LIST_IMPORTS = """
import atexit, json, os, runpy, sys
module, args = sys.argv[1:3]
atexit.register(lambda: sys.stderr.write("IMPORTED " + json.dumps(sorted(sys.modules)) + chr(10)))
sys.argv = [module, args]
sys.path[0] = os.path.dirname(module)
runpy.run_path(module, run_name="__main__")
"""


def module_imports(args, env, tmp_path):
    """Run the module in a fresh interpreter: (its result, the modules it imported)."""
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(env)
    collections = MODULE_PATH
    while os.path.basename(collections) != "ansible_collections":
        collections = os.path.dirname(collections)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(collections), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", RUN_AND_LIST_IMPORTS, MODULE_PATH, str(args_file)], env=env,
                          capture_output=True, text=True, check=False, timeout=120)
    listed = [line for line in proc.stderr.splitlines() if line.startswith("IMPORTED ")]
    assert listed, proc.stderr
    return json.loads(proc.stdout), set(json.loads(listed[-1].split(" ", 1)[1]))


def test_a_noop_rerun_does_not_import_hfapi(store, hub_server, hub_env, tmp_path):
    """HfApi's module (huggingface_hub.hf_api) is the largest import of a run; the no-op's HEAD needs none of it."""
    args = quant(store, endpoint=hub_server.url)
    result, imported = module_imports(args, hub_env, tmp_path)
    assert result["changed"] is True, result
    assert "huggingface_hub.hf_api" in imported  # the first run lists the commit with HfApi.repo_info

    result, imported = module_imports(args, hub_env, tmp_path)
    assert result["changed"] is False, result
    assert "huggingface_hub.file_download" in imported  # the HEAD's
    assert "huggingface_hub.hf_api" not in imported


def test_widened_patterns_take_the_files_from_the_kept_listing(run, store, hub_server, hub_data):
    assert run(quant(store, allow_patterns=["config.json"]))[0] == "exit"
    hub_server.reset()
    kind, result = run(quant(store))
    assert kind == "exit", result
    expected = set(hub_data.repos[fixtures.QUANT].files(fixtures.QUANT_PIN))
    assert {f["path"] for f in result["files"]} == expected
    assert {f["path"] for f in result["files"] if f["status"] == "downloaded"} == expected - {"config.json"}
    assert listing_calls(hub_server) == []  # the listing kept by the first run has every file of the commit


def test_a_branch_that_moved_is_listed_again(run, store, hub_server, hub_data, monkeypatch):
    branches = hub_data.repos[fixtures.SWITCH].branches
    monkeypatch.setitem(branches, "main", fixtures.SWITCH_A)
    args = {"repo_id": fixtures.SWITCH, "revision": "main", "local_dir": str(store)}
    kind, result = run(args)
    assert (kind, result["commit"]) == ("exit", fixtures.SWITCH_A), result
    hub_server.reset()
    assert run(args)[1]["changed"] is False
    assert listing_calls(hub_server) == []  # main still at a: the kept listing

    monkeypatch.setitem(branches, "main", fixtures.SWITCH_B)
    hub_server.reset()
    kind, result = run(args)
    assert kind == "exit", result
    assert (result["commit"], result["previous_commit"]) == (fixtures.SWITCH_B, fixtures.SWITCH_A)
    assert result["changed"] is True
    assert hub_server.requests[0][0] == "HEAD" and listing_calls(hub_server)  # asked, then listed again
    assert json.loads(listing_file(store).read_text())["commit"] == fixtures.SWITCH_B


def test_a_kept_listing_of_a_pin_squashed_away_fails_as_a_first_run(run, store, hub_server, hub_data):
    """The Hub answers the HEAD 404 (RevisionNotFound): the listing call then gives the first run's message."""
    files = hub_data.repos[fixtures.SQUASHED].files(hub_data.pin(fixtures.SQUASHED))
    entries = [{"path": f.path, "size": f.size, "sha256": f.sha256} if f.lfs
               else {"path": f.path, "size": f.size, "blob_id": f.blob_id} for f in files.values()]
    listing_file(store).parent.mkdir(parents=True)
    listing_file(store).write_text(
        listing_text(hub_server.url, fixtures.SQUASHED, "model", fixtures.SQUASHED_PIN, entries))
    args = {"repo_id": fixtures.SQUASHED, "revision": fixtures.SQUASHED_PIN, "local_dir": str(store)}
    kind, result = run(args)
    assert kind == "fail"
    assert result["kind"] == "revision_not_found"
    assert "does not exist" in result["msg"] and "super-squashed" in result["msg"]
    assert "local_dir was not touched" in result["msg"]
    assert hub_server.requests[0][0] == "HEAD" and listing_calls(hub_server)
    assert hub_server.bytes_served == 0
    assert not (store / MANIFEST_NAME).exists()


@pytest.mark.parametrize("damage", ["not json", "other hash", "digest"])
def test_a_kept_listing_that_is_damaged_or_disagrees_with_the_hub_is_listed_again(
    run, store, hub_server, hub_data, damage
):
    assert run(quant(store))[0] == "exit"
    good = listing_file(store).read_text()
    data = json.loads(good)
    probe = probe_path(hub_data, fixtures.QUANT, fixtures.QUANT_PIN)
    if damage == "not json":
        listing_file(store).write_text(good[: len(good) // 2])
    elif damage == "other hash":  # as written by this version, but the Hub's HEAD names another blob
        entries = [dict(f, blob_id="0" * 40) if f["path"] == probe else f for f in data["files"]]
        listing_file(store).write_text(listing_text(hub_server.url, fixtures.QUANT, "model", fixtures.QUANT_PIN,
                                                    entries))
    else:  # a file of the listing changed on disk, its digest not
        data["files"][0]["size"] += 1
        listing_file(store).write_text(json.dumps(data))
    hub_server.reset()
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert result["changed"] is False and {f["status"] for f in result["files"]} == {"present"}
    assert listing_calls(hub_server)  # listed again
    assert listing_file(store).read_text() == good  # and kept again as the Hub listed it


def test_the_head_of_a_hub_that_never_answers_fails_after_read_timeout(snapshot, store, hub_server):
    assert snapshot(quant(store))[0] == "exit"
    hub_server.reset()
    fault = hub_server.add_fault(r"/resolve/", "hang", methods=("HEAD",))
    kind, result, took = snapshot(quant(store, read_timeout=0.5))
    assert kind == "fail", result
    assert fault.hits == 1  # one HEAD, cut off, and no listing call after it
    assert took < 0.5 + SLACK
    assert result["kind"] == "timeout"
    assert "read_timeout=0.5" in result["msg"] and "reachable" in result["msg"]
    assert listing_calls(hub_server) == []


def test_check_mode_keeps_no_listing(run, store, hub_server):
    assert run(quant(store))[0] == "exit"
    listing_file(store).unlink()
    kind, result = run(quant(store, _ansible_check_mode=True))
    assert kind == "exit", result
    assert result["changed"] is False
    assert not listing_file(store).exists()
    assert run(quant(store))[1]["changed"] is False  # a real run keeps it again, and that is no change
    assert listing_file(store).exists()


@pytest.mark.parametrize(
    "change",
    [{"endpoint": "http://other.invalid"}, {"repo_id": "sparkfold-test/other"}, {"repo_type": "dataset"},
     {"version": 2}, {"commit": None}, {"files": []}],
)
def test_parse_listing_takes_only_a_listing_of_that_hub_and_repository(change):
    entries = [{"path": "config.json", "size": 10, "blob_id": "a" * 40}]
    data = json.loads(listing_text("http://hub", "o/r", "model", "c" * 40, entries))
    assert parse_listing(json.dumps(data), "http://hub", "o/r", "model") == ("c" * 40, entries)
    data.update(change)
    assert parse_listing(json.dumps(data), "http://hub", "o/r", "model") is None


def test_parse_listing_refuses_an_unsafe_path():
    entries = [{"path": "../escape", "size": 10, "blob_id": "a" * 40}]
    assert parse_listing(listing_text("http://hub", "o/r", "model", "c" * 40, entries), "http://hub", "o/r",
                         "model") is None
