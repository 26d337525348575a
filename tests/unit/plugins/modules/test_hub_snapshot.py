# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster.hub_snapshot against the offline Hub server (tests/hub).

Nothing of huggingface_hub is mocked: the module talks HTTP to a HubServer on 127.0.0.1, whose
`bytes_served` and `request_log` tell what was fetched.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import snapshot_lock
from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import MANIFEST_NAME
from ansible_collections.sparkfold.cluster.plugins.modules import hub_snapshot, store_verify

from tests.hub import fixtures
from tests.hub.fixtures import quant_args as quant
from tests.unit.module_runner import module_runner

SHARD = "model-00001-of-00003.safetensors"
MODULE_PATH = os.path.abspath(hub_snapshot.__file__)


def sha256_of(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def store_files(store):
    """Repository paths of the regular files in the store, without its own bookkeeping."""
    out = set()
    for root, dirs, files in os.walk(store):
        dirs[:] = [d for d in dirs if d != ".cache"]
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), store).replace(os.sep, "/")
            if rel != MANIFEST_NAME:
                out.add(rel)
    return out


def resolve_gets(server):
    return [e for e in server.request_log if e["method"] == "GET" and "/resolve/" in e["path"]]


def flip_byte(path, offset=1000):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_fresh_download_then_rerun_fetches_nothing(run, store, hub_server, hub_data):
    expected = hub_data.expected_sha256(fixtures.QUANT, fixtures.QUANT_PIN)
    total = sum(f.size for f in hub_data.repos[fixtures.QUANT].files(fixtures.QUANT_PIN).values())

    kind, result = run(quant(store))
    assert kind == "exit", result
    assert run.warnings == []
    assert result["changed"] is True
    assert result["commit"] == fixtures.QUANT_PIN
    assert result["verified"] == "manifest"
    assert result["downloaded_bytes"] == total == hub_server.bytes_served
    assert {f["path"] for f in result["files"]} == set(expected)
    assert {f["status"] for f in result["files"]} == {"downloaded"}
    assert store_files(store) == set(expected)
    for path, sha in expected.items():
        assert not (store / path).is_symlink()
        assert sha256_of(store / path) == sha
    shard = next(f for f in result["files"] if f["path"] == SHARD)
    assert shard["sha256"] == expected[SHARD]
    config = next(f for f in result["files"] if f["path"] == "config.json")
    assert config["blob_id"] == hub_data.file(fixtures.QUANT, "config.json", fixtures.QUANT_PIN).blob_id

    manifest = json.loads((store / MANIFEST_NAME).read_text())
    assert manifest["repo_id"] == fixtures.QUANT and manifest["commit"] == fixtures.QUANT_PIN
    assert {r["path"] for r in manifest["files"]} == set(expected)
    record = next(r for r in manifest["files"] if r["path"] == SHARD)
    assert record["sha256"] == expected[SHARD]
    assert record["mtime_ns"] == (store / SHARD).stat().st_mtime_ns
    assert record["verified_at"].endswith("Z")
    manifest_stat = (store / MANIFEST_NAME).stat()
    # nothing left behind: no partial downloads, no empty download folders
    assert os.listdir(store / ".cache" / "huggingface" / "download") == []

    served, gets = hub_server.bytes_served, len(resolve_gets(hub_server))
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert result["changed"] is False
    assert result["downloaded_bytes"] == 0
    assert hub_server.bytes_served - served == 0
    assert len(resolve_gets(hub_server)) == gets  # not even a HEAD-less GET
    assert {f["status"] for f in result["files"]} == {"present"}
    assert (store / MANIFEST_NAME).stat().st_mtime_ns == manifest_stat.st_mtime_ns  # not rewritten


def test_folders_are_fsynced_once_each_before_the_manifest_names_their_files(run, store, monkeypatch):
    """One fsync per folder files were renamed into (not one per file), all before the manifest is written."""
    from ansible_collections.sparkfold.cluster.plugins.module_utils import snapshot as snapshot_mod

    events = []
    real_write = snapshot_mod.write_atomic
    monkeypatch.setattr(snapshot_mod, "_fsync_dir", lambda path: events.append(("fsync", path)))
    monkeypatch.setattr(snapshot_mod, "write_atomic",
                        lambda path, text, **kw: (events.append(("write", path)), real_write(path, text, **kw)))
    kind, result = run(quant(store))
    assert kind == "exit", result
    files = [f for f in result["files"] if f["status"] == "downloaded"]
    folders = {os.path.dirname(os.path.join(str(store), f["path"])) for f in files}
    assert len(files) > len(folders)  # several files share a folder
    fsyncs = [path for what, path in events if what == "fsync"]
    assert sorted(fsyncs) == sorted(folders)
    assert events[-1] == ("write", os.path.join(str(store), MANIFEST_NAME))
    assert all(what == "fsync" for what, _path in events[:-1])


def test_check_mode_on_empty_dir_lists_everything_and_writes_nothing(run, store, hub_server, hub_data, tmp_path):
    files = hub_data.repos[fixtures.QUANT].files(fixtures.QUANT_PIN)
    progress = tmp_path / "progress.json"
    kind, result = run(quant(store, progress_file=str(progress), _ansible_check_mode=True, _ansible_diff=True))
    assert kind == "exit", result
    assert result["changed"] is True
    assert sorted(result["would_download"]) == sorted(files)
    assert result["download_bytes"] == sum(f.size for f in files.values())
    assert result["downloaded_bytes"] == 0
    assert {f["status"] for f in result["files"]} == {"downloaded"}
    assert result["diff"]["before"] == ""
    assert f"{SHARD}  {files[SHARD].size}  sha256:{files[SHARD].sha256}" in result["diff"]["after"]
    assert not store.exists()
    assert not progress.exists()
    assert hub_server.bytes_served == 0
    assert resolve_gets(hub_server) == []


def test_check_mode_on_complete_store_reports_no_change(run, store):
    assert run(quant(store))[0] == "exit"
    kind, result = run(quant(store, _ansible_check_mode=True))
    assert kind == "exit", result
    assert result["changed"] is False
    assert result["would_download"] == []
    assert result["download_bytes"] == 0


def test_progress_file_reports_the_finished_run(run, store, tmp_path, hub_data):
    progress = tmp_path / "run" / "progress.json"
    progress.parent.mkdir()
    kind, result = run(quant(store, progress_file=str(progress)))
    assert kind == "exit", result
    state = json.loads(progress.read_text())
    total = sum(f.size for f in hub_data.repos[fixtures.QUANT].files(fixtures.QUANT_PIN).values())
    assert state["phase"] == "done"
    assert state["commit"] == fixtures.QUANT_PIN
    assert state["files_done"] == state["files_total"] == len(result["files"])
    assert state["bytes_done"] == state["bytes_total"] == total
    assert state["current"] == []
    assert state["pid"] == os.getpid()  # for job_watch's "kill <pid>" when the watch times out
    assert abs(state["updated"] - time.time()) < 60
    assert os.listdir(progress.parent) == ["progress.json"]  # no temporary files left


def test_connection_cut_mid_file_is_resumed_with_range(run, store, hub_server, hub_data):
    size = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN).size
    hub_server.cut_after[f"{fixtures.QUANT}/{SHARD}"] = 100_000
    kind, result = run(quant(store, allow_patterns=[SHARD]))
    assert kind == "exit", result
    assert sha256_of(store / SHARD) == hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN).sha256
    gets = hub_server.file_gets(fixtures.QUANT, SHARD)
    assert [g["range"] for g in gets] == [None, "bytes=100000-"]
    assert hub_server.bytes_served == size  # the first 100000 bytes were not sent twice


def test_killed_run_is_resumed_by_the_next_run(run, store, hub_server, hub_data, hub_env, tmp_path):
    """SIGKILL the module in the middle of a shard (as an async timeout would); the re-run resumes it."""
    entry = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN)
    cut = 128 * 1024
    hub_server.cut_after[f"{fixtures.QUANT}/{SHARD}"] = cut
    args_file = tmp_path / "args.json"
    args = quant(store, allow_patterns=[SHARD], endpoint=hub_server.url)
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(hub_env)
    collections = MODULE_PATH
    while os.path.basename(collections) != "ansible_collections":
        collections = os.path.dirname(collections)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(collections), env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, MODULE_PATH, str(args_file)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    partial = (
        store / ".cache" / "huggingface" / "download" / f"{SHARD}.sparkfold-sha256-{entry.sha256}.incomplete"
    )
    try:
        # After the cut huggingface_hub waits 1 s before it retries: kill it in that window.
        deadline = time.monotonic() + 20
        while hub_server.bytes_served < cut or not partial.exists() or partial.stat().st_size < cut:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the module never reached the cut"
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert len(hub_server.file_gets(fixtures.QUANT, SHARD)) == 1
    assert not (store / SHARD).exists()  # never a partial file under the real name
    have = partial.stat().st_size
    assert have == cut

    kind, result = run(quant(store, allow_patterns=[SHARD]))
    assert kind == "exit", result
    assert result["downloaded_bytes"] == entry.size - have
    assert sha256_of(store / SHARD) == entry.sha256
    gets = hub_server.file_gets(fixtures.QUANT, SHARD)
    assert [g["range"] for g in gets] == [None, f"bytes={have}-"]
    assert hub_server.bytes_served == entry.size
    assert not partial.exists()


def test_check_mode_and_disk_check_count_resumable_partials(run, store, hub_data):
    entry = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN)
    partial_dir = store / ".cache" / "huggingface" / "download"
    partial_dir.mkdir(parents=True)
    data = hub_data.file_bytes(fixtures.QUANT, SHARD, fixtures.QUANT_PIN)
    (partial_dir / f"{SHARD}.sparkfold-sha256-{entry.sha256}.incomplete").write_bytes(data[:1000])
    kind, result = run(quant(store, allow_patterns=[SHARD], _ansible_check_mode=True))
    assert kind == "exit", result
    assert result["would_download"] == [SHARD]
    assert result["download_bytes"] == entry.size - 1000


def test_flipped_byte_with_mtime_restored_is_caught_by_full_only(run, store, hub_server, hub_data):
    assert run(quant(store))[0] == "exit"
    shard = store / SHARD
    before = shard.stat()
    flip_byte(shard)
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))  # same size, same mtime
    size = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN).size

    # verify=manifest trusts size + mtime: the flip goes unseen (documented)
    served = hub_server.bytes_served
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert result["changed"] is False
    assert hub_server.bytes_served == served

    # verify=full re-hashes, moves the bad copy aside and fetches a good one; nothing else is fetched
    kind, result = run(quant(store, verify="full"))
    assert kind == "exit", result
    assert result["changed"] is True
    assert result["verified"] == "full"
    statuses = {f["path"]: f["status"] for f in result["files"]}
    assert statuses.pop(SHARD) == "refetched"
    assert set(statuses.values()) == {"present"}
    assert result["downloaded_bytes"] == size == hub_server.bytes_served - served
    assert sha256_of(shard) == hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN).sha256
    assert not (store / (SHARD + ".corrupt")).exists()


def test_flipped_byte_with_new_mtime_is_caught_by_manifest(run, store, hub_server, hub_data):
    assert run(quant(store))[0] == "exit"
    shard = store / SHARD
    other = store / "model-00002-of-00003.safetensors"
    other_inode = other.stat().st_ino
    flip_byte(shard)
    st = shard.stat()
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    served = hub_server.bytes_served
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert result["changed"] is True
    assert {f["path"]: f["status"] for f in result["files"]}[SHARD] == "refetched"
    assert hub_server.bytes_served - served == hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN).size
    assert sha256_of(shard) == hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN).sha256
    assert other.stat().st_ino == other_inode  # verified files are never touched


def test_a_repair_that_cannot_fetch_leaves_the_store_incomplete_until_a_run_repairs_it(
    run, store, hub_server, hub_data, monkeypatch
):
    """Issue 26 item 1: a damaged file the Hub cannot serve now is moved aside, and the store stays incomplete."""
    table = "engram/engram_table_0.bin"  # no index names it: only the manifest can tell it is missing
    assert run(quant(store))[0] == "exit"
    damaged = store / table
    damaged.write_bytes(damaged.read_bytes()[:-10])
    hub_server.add_fault(rf"/resolve/[^/]+/{table}$", "gone", methods=("GET",))  # its HEAD still answers

    kind, result = run(quant(store))
    assert kind == "fail", result
    assert table in result["msg"] and "pending" in result["msg"] and "incomplete" in result["msg"]
    manifest = json.loads((store / MANIFEST_NAME).read_text())
    assert manifest["pending"] == [table]
    assert table not in {r["path"] for r in manifest["files"]}
    assert not damaged.exists() and (store / (table + ".corrupt")).exists()

    # store_verify, as the weights role and the workers run it (repo_id and commit), says the store is incomplete
    verify = module_runner(monkeypatch, store_verify.main)
    verify_args = {"path": str(store), "repo_id": fixtures.QUANT, "commit": fixtures.QUANT_PIN}
    kind, verified, _warnings = verify(verify_args)
    assert kind == "fail", verified
    assert table in verified["msg"] and "pending" in verified["msg"]
    assert [p["path"] for p in verified["problems"]] == [table]

    # a run while the Hub still cannot serve it keeps it pending; the first run that can repairs the store
    assert run(quant(store))[0] == "fail"
    assert json.loads((store / MANIFEST_NAME).read_text())["pending"] == [table]
    hub_server.faults.clear()
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert {f["path"]: f["status"] for f in result["files"]}[table] == "downloaded"
    assert "pending" not in json.loads((store / MANIFEST_NAME).read_text())
    assert sha256_of(damaged) == hub_data.file(fixtures.QUANT, table, fixtures.QUANT_PIN).sha256
    kind, verified, _warnings = verify(verify_args)
    assert kind == "exit", verified


def test_full_verify_of_a_good_store_changes_nothing(run, store, hub_server):
    assert run(quant(store))[0] == "exit"
    served = hub_server.bytes_served
    kind, result = run(quant(store, verify="full", max_workers=2))
    assert kind == "exit", result
    assert result["changed"] is False  # only verified_at stamps were refreshed
    assert hub_server.bytes_served == served
    kind, result = run(quant(store, verify="full"))
    assert result["changed"] is False


def test_truncated_file_is_refetched_even_with_verify_none(run, store, hub_server, hub_data):
    assert run(quant(store))[0] == "exit"
    shard = store / SHARD
    shard.write_bytes(shard.read_bytes()[:-10])
    kind, result = run(quant(store, verify="none"))
    assert kind == "exit", result
    assert {f["path"]: f["status"] for f in result["files"]}[SHARD] == "refetched"
    assert sha256_of(shard) == hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN).sha256


def test_files_copied_in_without_manifest_are_adopted_without_download(run, store, hub_server, hub_data, tmp_path):
    assert run(quant(store))[0] == "exit"
    (store / MANIFEST_NAME).unlink()
    served = hub_server.bytes_served
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert hub_server.bytes_served == served
    assert {f["status"] for f in result["files"]} == {"present"}
    assert result["changed"] is True  # the manifest was written
    assert (store / MANIFEST_NAME).exists()
    kind, result = run(quant(store))
    assert result["changed"] is False


def test_symlink_into_a_cache_is_replaced_by_a_real_file(run, store, hub_data, tmp_path):
    store.mkdir()
    target = tmp_path / "cache-blob"
    target.write_bytes(hub_data.file_bytes(fixtures.QUANT, "config.json", fixtures.QUANT_PIN))
    (store / "config.json").symlink_to(target)
    kind, result = run(quant(store, allow_patterns=["config.json"]))
    assert kind == "exit", result
    assert result["files"][0]["status"] == "refetched"
    assert not (store / "config.json").is_symlink()
    assert target.exists()  # the link was replaced, its target left alone


def test_new_revision_fetches_only_what_changed(run, store, hub_server, hub_data):
    assert run(quant(store))[0] == "exit"  # v1.0
    served = hub_server.bytes_served
    kind, result = run(quant(store, revision="main", _ansible_diff=True))
    assert kind == "exit", result
    main = hub_data.pin(fixtures.QUANT, "main")
    assert result["commit"] == main
    changed = {f["path"]: f["status"] for f in result["files"] if f["status"] != "present"}
    assert changed == {"README.md": "refetched"}
    assert hub_server.bytes_served - served == hub_data.file(fixtures.QUANT, "README.md").size
    assert "README.md" not in result["diff"]["before"]
    assert "README.md" in result["diff"]["after"]
    assert json.loads((store / MANIFEST_NAME).read_text())["commit"] == main


def test_disk_too_small_fails_before_any_download(run, store, hub_server):
    kind, result = run(quant(store, min_free_bytes=10**18))
    assert kind == "fail"
    assert result["kind"] == "disk"
    assert "not enough disk space" in result["msg"]
    assert "needs" in result["msg"] and "are free" in result["msg"]
    assert result["needed_bytes"] > 0 and result["free_bytes"] > 0
    assert hub_server.bytes_served == 0
    assert resolve_gets(hub_server) == []
    assert store_files(store) == set()


def test_squashed_pin_fails_before_any_byte(run, store, hub_server, hub_data):
    args = {"repo_id": fixtures.SQUASHED, "revision": fixtures.SQUASHED_PIN, "local_dir": str(store)}
    kind, result = run(args)
    assert kind == "fail"
    assert result["kind"] == "revision_not_found"
    assert fixtures.SQUASHED_PIN in result["msg"] and "does not exist" in result["msg"]
    # what the Hub has now, as hub_revision says it, and what to do
    head = hub_data.pin(fixtures.SQUASHED)
    assert f"Branches now: main at {head[:7]}" in result["msg"] and f"Tags now: v0 at {head[:7]}" in result["msg"]
    assert "super-squashed" in result["msg"] and fixtures.SQUASH_TITLE in result["msg"]
    assert f"(for example revision: {head}, the head of main)" in result["msg"]
    assert "local_dir was not touched" in result["msg"] and "on_missing" not in result["msg"]
    assert [ref["commit"] for ref in result["refs"]["branches"]] == [head]
    assert result["squashed"]["commit"] == head
    assert hub_server.bytes_served == 0
    assert not any("/resolve/" in path for _method, path in hub_server.requests)
    assert not store.exists()


def test_allow_and_ignore_patterns(run, store, hub_server, hub_data):
    kind, result = run(quant(store, allow_patterns=["*.json", "engram/"], ignore_patterns=["*.index.json"]))
    assert kind == "exit", result
    wanted = {"config.json", "engram/engram_table_0.bin", "engram/engram_table_1.bin"}
    assert {f["path"] for f in result["files"]} == wanted
    assert store_files(store) == wanted
    assert hub_server.bytes_served == sum(
        hub_data.file(fixtures.QUANT, p, fixtures.QUANT_PIN).size for p in wanted
    )
    # narrowing the selection keeps what was verified before
    kind, result = run(quant(store, allow_patterns=["config.json"]))
    assert kind == "exit" and result["changed"] is False
    recorded = {r["path"] for r in json.loads((store / MANIFEST_NAME).read_text())["files"]}
    assert recorded == wanted


def test_patterns_selecting_nothing_fail(run, store, hub_server):
    kind, result = run(quant(store, allow_patterns=["*.gguf"]))
    assert kind == "fail"
    assert result["kind"] == "empty_selection"
    assert "*.gguf" in result["msg"]


def test_gated_repo_needs_a_token_with_access(run, store, hub_server):
    args = {"repo_id": fixtures.GATED, "local_dir": str(store)}
    kind, result = run(args)
    assert kind == "fail" and result["kind"] == "gated", result
    assert "is gated" in result["msg"]
    kind, result = run(dict(args, token=fixtures.NOACCESS_TOKEN))
    assert kind == "fail" and result["kind"] == "gated", result
    assert "no access" in result["msg"]
    assert hub_server.bytes_served == 0
    assert store_files(store) == set()
    kind, result = run(dict(args, token=fixtures.GOOD_TOKEN))
    assert kind == "exit", result
    assert result["changed"] is True


def test_unknown_repo_and_bad_token(run, store):
    kind, result = run({"repo_id": "sparkfold-test/nope", "local_dir": str(store)})
    assert kind == "fail" and result["kind"] == "repo_not_found", result
    kind, result = run({"repo_id": fixtures.QUANT, "local_dir": str(store), "token": "hf_invalid"})
    assert kind == "fail" and result["kind"] == "bad_token", result


def test_local_dir_that_is_a_file_fails(run, tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    kind, result = run(quant(path))
    assert kind == "fail"
    assert "not a directory" in result["msg"]


def test_missing_huggingface_hub_is_reported(run, store, monkeypatch):
    monkeypatch.setattr(hub_snapshot, "HAS_HF", False)
    kind, result = run(quant(store))
    assert kind == "fail"
    assert "huggingface_hub" in result["msg"]


def test_partials_of_other_content_are_removed(run, store):
    partial_dir = store / ".cache" / "huggingface" / "download"
    partial_dir.mkdir(parents=True)
    stale = partial_dir / f"{SHARD}.sparkfold-sha256-{'0' * 64}.incomplete"  # left by an older commit
    stale.write_bytes(b"x" * 1000)
    kind, result = run(quant(store, allow_patterns=[SHARD]))
    assert kind == "exit", result
    assert result["downloaded_bytes"] == result["files"][0]["size"]  # not resumed from the stale bytes
    assert os.listdir(partial_dir) == []


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe garbage", b'{"version": 1, "files": 3}'])
def test_broken_manifest_is_rebuilt_by_hashing(run, store, hub_server, content):
    assert run(quant(store))[0] == "exit"
    (store / MANIFEST_NAME).write_bytes(content)
    served = hub_server.bytes_served
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert hub_server.bytes_served == served
    assert {f["status"] for f in result["files"]} == {"present"}
    assert any(MANIFEST_NAME in w for w in run.warnings)
    assert json.loads((store / MANIFEST_NAME).read_text())["commit"] == fixtures.QUANT_PIN


# --- a second run while one is running (a re-run of the play while the async job still downloads) ---------
LOCK = os.path.join(".cache", "huggingface", snapshot_lock.LOCK_NAME)

# Takes the store's lock in another process with hub_snapshot's own code, as a running download does,
# says "locked" and holds it until its stdin closes. argv: local_dir, "raw" to take a bare flock instead
# (a lock file of an older version, without a PID in it).
HOLD_LOCK = """
import fcntl, os, sys
from ansible_collections.sparkfold.cluster.plugins.module_utils import snapshot_lock
if sys.argv[2:] == ["raw"]:
    path = snapshot_lock.lock_path(sys.argv[1])
    os.makedirs(os.path.dirname(path))
    handle = open(path, "a")
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    print("locked", flush=True)
    sys.stdin.read()
else:
    with snapshot_lock.store_lock(sys.argv[1]):
        print("locked", flush=True)
        sys.stdin.read()
"""


@pytest.fixture
def hold_lock(store):
    """hold_lock(raw=False) -> Popen of a process holding the store's lock; ended after the test."""
    collections = MODULE_PATH
    while os.path.basename(collections) != "ansible_collections":
        collections = os.path.dirname(collections)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(collections))
    procs = []

    def _hold(raw=False):
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(store)] + (["raw"] if raw else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
        )
        procs.append(proc)
        assert proc.stdout.readline() == "locked\n"
        return proc

    yield _hold
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_a_run_while_another_holds_the_lock_names_its_pid(run, store, hub_server, hold_lock):
    holder = hold_lock()
    lock = store / LOCK
    assert lock.read_text() == f"{holder.pid}\n"

    kind, result = run(quant(store))
    assert kind == "fail", result
    assert result["kind"] == "locked"
    assert result["pid"] == holder.pid
    assert result["lock_file"] == str(lock)
    msg = result["msg"]
    assert f"PID {holder.pid}, holds {lock}" in msg
    assert f"`kill {holder.pid}`" in msg and "Wait for it to finish" in msg
    assert hub_server.bytes_served == 0  # refused before any download

    holder.communicate("")  # the running download ends: its PID leaves the lock file with it
    assert holder.returncode == 0
    assert lock.read_text() == ""
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert lock.read_text() == ""


def test_the_lock_holds_the_running_module_pid(run, store, monkeypatch):
    seen = []
    plan = hub_snapshot.HubSnapshot.plan

    def spy(self, *args, **kwargs):
        seen.append((store / LOCK).read_text())
        return plan(self, *args, **kwargs)

    monkeypatch.setattr(hub_snapshot.HubSnapshot, "plan", spy)
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert seen == [f"{os.getpid()}\n"]


def test_a_lock_without_pid_says_how_to_find_the_holder(run, store, hold_lock):
    hold_lock(raw=True)
    kind, result = run(quant(store))
    assert kind == "fail" and result["kind"] == "locked", result
    assert result["pid"] is None
    assert "PID is not recorded" in result["msg"] and f"`fuser -v {store / LOCK}`" in result["msg"]


def test_a_killed_holder_leaves_no_lock_behind(run, store, hold_lock):
    holder = hold_lock()
    holder.kill()  # SIGKILL, as an async time limit does: the PID stays in the file, the lock goes
    holder.communicate()
    assert (store / LOCK).read_text() == f"{holder.pid}\n"
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert (store / LOCK).read_text() == ""
