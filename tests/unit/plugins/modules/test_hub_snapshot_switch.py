# SPDX-License-Identifier: GPL-3.0-or-later
"""hub_snapshot switching a store from one revision to another (fixture repo SWITCH: tags a and b).

Revision a: README.md, config.json, shard-1, shard-2, extra/a-only.bin. Revision b: the same config.json and
shard-1, shard-2 with other bytes of the same size, a longer README.md, b-only.bin, no extra/a-only.bin.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import MANIFEST_NAME, partial_name
from ansible_collections.sparkfold.cluster.plugins.module_utils.snapshot import HubSnapshot
from ansible_collections.sparkfold.cluster.plugins.module_utils.snapshot_listing import LISTING_NAME
from ansible_collections.sparkfold.cluster.plugins.modules import hub_snapshot, store_verify

from tests.hub import fixtures
from tests.unit.module_runner import module_runner

A = fixtures.SWITCH_A
B = fixtures.SWITCH_B
SHARD2 = "shard-2.safetensors"
MODULE_PATH = os.path.abspath(hub_snapshot.__file__)


@pytest.fixture
def verify_store(monkeypatch):
    """verify_store(store, commit) -> (kind, result) of store_verify verify=full (what a worker checks)."""
    run_module = module_runner(monkeypatch, store_verify.main)

    def _verify(store, commit):
        args = {"path": str(store), "verify": "full", "repo_id": fixtures.SWITCH, "commit": commit,
                "require_safetensors_index": False}
        return run_module(args)[:2]

    return _verify


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store"


def args(store, revision, **extra):
    out = {"repo_id": fixtures.SWITCH, "revision": revision, "local_dir": str(store)}
    out.update(extra)
    return out


def store_files(store):
    """{repository path: sha256} of the regular files in the store, its own bookkeeping left out."""
    out = {}
    for root, dirs, files in os.walk(store):
        dirs[:] = [d for d in dirs if d != ".cache"]
        for name in files:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, store).replace(os.sep, "/")
            if rel != MANIFEST_NAME:
                with open(full, "rb") as handle:
                    out[rel] = hashlib.sha256(handle.read()).hexdigest()
    return out


def manifest_of(store):
    data = json.loads((store / MANIFEST_NAME).read_text())
    return data["commit"], {r["path"] for r in data["files"]}


def staged(store, hub_data, path, rev):
    entry = hub_data.file(fixtures.SWITCH, path, rev)
    kind, digest = ("sha256", entry.sha256) if entry.lfs else ("blob_id", entry.blob_id)
    return store / ".cache" / "huggingface" / "download" / partial_name(path, kind, digest)


def test_switch_keeps_identical_files_replaces_changed_and_removes_the_old_ones(run, store, hub_server, hub_data):
    kind, result = run(args(store, A))
    assert kind == "exit", result
    assert result["previous_commit"] is None and result["removed"] == []
    kept_inodes = {p: (store / p).stat().st_ino for p in ("config.json", "shard-1.safetensors")}
    served = hub_server.bytes_served

    kind, result = run(args(store, B, _ansible_diff=True))
    assert kind == "exit", result
    assert result["changed"] is True
    assert result["commit"] == B and result["previous_commit"] == A
    assert result["removed"] == ["extra/a-only.bin"]
    b_files = hub_data.expected_sha256(fixtures.SWITCH, B)
    assert store_files(store) == b_files  # exactly b's files, with b's bytes
    assert not (store / "extra").exists()  # the folder the old file leaves empty goes too
    assert manifest_of(store) == (B, set(b_files))  # b's records only
    statuses = {f["path"]: f["status"] for f in result["files"]}
    assert statuses == {"config.json": "present", "shard-1.safetensors": "present", "README.md": "refetched",
                        SHARD2: "refetched", "b-only.bin": "downloaded"}
    # the files a and b share were neither fetched again nor rewritten
    changed = ("README.md", SHARD2, "b-only.bin")
    assert hub_server.bytes_served - served == sum(hub_data.file(fixtures.SWITCH, p, B).size for p in changed)
    assert {p: (store / p).stat().st_ino for p in kept_inodes} == kept_inodes
    assert "extra/a-only.bin" in result["diff"]["before"] and "extra/a-only.bin" not in result["diff"]["after"]
    assert os.listdir(store / ".cache" / "huggingface" / "download") == []

    kind, result = run(args(store, B))
    assert kind == "exit" and result["changed"] is False, result
    assert result["previous_commit"] == B and result["removed"] == []


def test_switch_with_verify_none_does_not_keep_a_same_size_file_of_the_old_revision(run, store, hub_data):
    assert run(args(store, A))[0] == "exit"
    kind, result = run(args(store, B, verify="none"))
    assert kind == "exit", result
    assert store_files(store) == hub_data.expected_sha256(fixtures.SWITCH, B)


def test_check_mode_tells_the_switch_and_changes_nothing(run, store, hub_server, hub_data):
    assert run(args(store, A))[0] == "exit"
    before = store_files(store)
    kind, result = run(args(store, B, _ansible_check_mode=True))
    assert kind == "exit", result
    assert result["changed"] is True and result["previous_commit"] == A
    assert sorted(result["would_download"]) == ["README.md", "b-only.bin", SHARD2]
    assert result["removed"] == ["extra/a-only.bin"]
    assert store_files(store) == before and manifest_of(store)[0] == A


def test_failed_switch_leaves_the_old_revision_complete_and_the_rerun_resumes(
    run, verify_store, store, hub_server, hub_data
):
    assert run(args(store, A))[0] == "exit"
    a_files = store_files(store)
    a_manifest = (store / MANIFEST_NAME).read_bytes()
    # b-only.bin never comes (a CDN that stalls); the other files of b download fine
    hub_server.add_fault(r"/resolve/[^/]+/b-only\.bin$", "stall", methods=("GET",), hold=5)

    kind, result = run(args(store, B, stall_timeout=0.3, max_workers=1))
    assert kind == "fail", result
    assert result["kind"] == "timeout"
    assert result["commit"] == B and result["previous_commit"] == A
    assert f"still holds {A} as it was" in result["msg"] and "the next run resumes" in result["msg"]
    # a is untouched: same files, same bytes, same manifest, and store_verify passes on it
    assert store_files(store) == a_files
    assert (store / MANIFEST_NAME).read_bytes() == a_manifest
    kind, verified = verify_store(store, A)
    assert kind == "exit", verified
    # b's changed files wait, complete and verified, in the partial-download folder
    shard2 = staged(store, hub_data, SHARD2, B)
    assert shard2.stat().st_size == hub_data.file(fixtures.SWITCH, SHARD2, B).size

    hub_server.faults.clear()
    served = hub_server.bytes_served
    kind, result = run(args(store, B))
    assert kind == "exit", result
    assert result["previous_commit"] == A and result["removed"] == ["extra/a-only.bin"]
    assert store_files(store) == hub_data.expected_sha256(fixtures.SWITCH, B)
    assert manifest_of(store)[0] == B
    b_gets = [g for g in hub_server.file_gets(fixtures.SWITCH, SHARD2) if B in g["path"]]
    assert len(b_gets) == 1  # the run that failed fetched it; this one took the staged copy
    assert hub_server.bytes_served - served == hub_data.file(fixtures.SWITCH, "b-only.bin", B).size
    kind, verified = verify_store(store, B)
    assert kind == "exit", verified


def test_killed_switch_leaves_the_old_revision_complete(run, verify_store, store, hub_server, hub_data, hub_env,
                                                        tmp_path):
    """SIGKILL the module in the middle of the switch's downloads (an async time limit): a is still whole."""
    assert run(args(store, A))[0] == "exit"
    a_files = store_files(store)
    hub_server.add_fault(r"/resolve/[^/]+/b-only\.bin$", "stall", methods=("GET",), after=1000, hold=20)
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args(store, B, endpoint=hub_server.url)}))
    env = dict(hub_env)
    collections = MODULE_PATH
    while os.path.basename(collections) != "ansible_collections":
        collections = os.path.dirname(collections)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(collections), env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen([sys.executable, MODULE_PATH, str(args_file)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    partial = staged(store, hub_data, "b-only.bin", B)
    try:
        deadline = time.monotonic() + 20
        while not partial.exists() or partial.stat().st_size < 1000:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the module never reached b-only.bin"
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert store_files(store) == a_files and manifest_of(store)[0] == A
    assert verify_store(store, A)[0] == "exit"

    hub_server.faults.clear()
    kind, result = run(args(store, B))
    assert kind == "exit", result
    assert store_files(store) == hub_data.expected_sha256(fixtures.SWITCH, B)
    gets = hub_server.file_gets(fixtures.SWITCH, "b-only.bin")
    assert [g["range"] for g in gets if B in g["path"]] == [None, "bytes=1000-"]


# ---- a switch killed inside its final move (issue 26 item 4) -------------------------------------------------


class Killed(BaseException):
    """What SIGKILL does to the module at that point: nothing after it runs (no except, no cleanup of ours)."""


@pytest.fixture
def kill_switch(monkeypatch):
    """kill_switch(step): the next switch dies at its step-th rename or deletion (0: before the first rename).

    The final move renames b's changed files into place in path order (README.md, b-only.bin,
    shard-2.safetensors), then deletes a's leftovers (extra/a-only.bin). Returns the steps done before the kill.
    """
    done = []
    armed = {"at": None}
    real_put, real_remove = HubSnapshot._put_in_place, HubSnapshot._remove

    def step(self, name):
        if self.switching and armed["at"] is not None:
            if len(done) == armed["at"]:
                armed["at"] = None
                raise Killed(name)
            done.append(name)

    def put(self, entry, partial):
        step(self, entry["path"])
        return real_put(self, entry, partial)

    def remove(self, path):
        step(self, "rm " + path)
        return real_remove(self, path)

    monkeypatch.setattr(HubSnapshot, "_put_in_place", put)
    monkeypatch.setattr(HubSnapshot, "_remove", remove)

    def _arm(at):
        done.clear()
        armed["at"] = at
        return done

    return _arm


def leftovers(store):
    """Files left under the store's partial-download folder and its switch journal (not the lock, nor the
    listing of the commit that the last complete run keeps for the next)."""
    out = []
    for root, _dirs, files in os.walk(store / ".cache" / "huggingface"):
        out += [os.path.relpath(os.path.join(root, name), store) for name in files
                if not name.endswith(".lock") and name != LISTING_NAME]
    return sorted(out)


def assert_holds_only(store, hub_data, verify_store, rev):
    assert store_files(store) == hub_data.expected_sha256(fixtures.SWITCH, rev)
    commit, recorded = manifest_of(store)
    assert commit == rev and recorded == set(hub_data.expected_sha256(fixtures.SWITCH, rev))
    assert leftovers(store) == []
    kind, verified = verify_store(store, rev)
    assert kind == "exit", verified


@pytest.mark.parametrize("verify", ["manifest", "none"])
@pytest.mark.parametrize("at", [1, 2, 3])
def test_a_rollback_after_a_switch_killed_in_its_final_move_leaves_only_the_old_revision(
    run, verify_store, kill_switch, store, hub_data, at, verify
):
    assert run(args(store, A))[0] == "exit"
    done = kill_switch(at)
    with pytest.raises(Killed):
        run(args(store, B))
    assert done == ["README.md", "b-only.bin", SHARD2][:at]
    assert manifest_of(store)[0] == A  # killed before the manifest was rewritten

    kind, result = run(args(store, A, verify=verify))
    assert kind == "exit", result
    assert result["changed"] is True
    assert ("b-only.bin" in result["removed"]) == (at >= 2)
    assert_holds_only(store, hub_data, verify_store, A)


def test_a_switch_back_and_forth_under_kills_leaves_exactly_one_revision(
    run, verify_store, kill_switch, store, hub_data
):
    assert run(args(store, A))[0] == "exit"
    for target, back, at in ((B, A, 2), (B, A, 3), (A, B, 1), (A, B, 2)):
        if manifest_of(store)[0] != back:
            assert run(args(store, back))[0] == "exit"
        kill_switch(at)
        with pytest.raises(Killed):
            run(args(store, target))
        kind, result = run(args(store, back))  # roll back
        assert kind == "exit", result
        assert_holds_only(store, hub_data, verify_store, back)
        kill_switch(at)
        with pytest.raises(Killed):
            run(args(store, target))
        kind, result = run(args(store, target))  # or go on
        assert kind == "exit", result
        assert_holds_only(store, hub_data, verify_store, target)
