# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.store_verify module (AnsibleModule run in-process, no Hub)."""

import hashlib
import json
import os

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import manifest as m
from ansible_collections.sparkfold.cluster.plugins.modules import store_verify

from tests.unit.module_runner import module_runner

REPO = "sfxnz/Tiny-EXL3"
COMMIT = "3f1c2a9e0b7d4c5a8e6f1b2d3c4a5e6f7a8b9c0d"
SHARD1 = "model-00001-of-00002.safetensors"
SHARD2 = "model-00002-of-00002.safetensors"
INDEX = "model.safetensors.index.json"
FIX = "run the weights role on the head, then copy again"
TOKENIZER = b'{"version": "1.0", "model": {"type": "BPE"}}\n'


@pytest.fixture
def module_result(monkeypatch):
    """Run store_verify.main() with the given args; return (kind, result dict, warnings)."""
    return module_runner(monkeypatch, store_verify.main)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def blob_id(data):
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


# Contents of the small store: LFS files carry a sha256, the others a git blob id.
INDEX_TEXT = json.dumps(
    {"metadata": {"total_size": 3000}, "weight_map": {"a.weight": SHARD1, "b.weight": SHARD2, "c.weight": SHARD1}}
).encode()
FILES = {
    "config.json": (b'{"model_type": "deepseek_v4"}\n', "blob_id"),
    INDEX: (INDEX_TEXT, "blob_id"),
    SHARD1: (bytes(range(256)) * 4, "sha256"),  # 1024 bytes
    SHARD2: (b"\x5a" * 1976, "sha256"),
}
TOTAL = sum(len(data) for data, _kind in FILES.values())


def write_manifest(store, files, repo_id=REPO, commit=COMMIT):
    """Manifest of ``files`` as they are now on disk, in hub_snapshot's format (manifest.render_manifest)."""
    records = {}
    for path, (data, kind) in files.items():
        digest = sha256(data) if kind == "sha256" else blob_id(data)
        entry = m.remote_entry(path, len(data), **{kind: digest})
        records[path] = m.make_record(entry, os.stat(store / path), "2026-01-01T00:00:00Z")
    (store / m.MANIFEST_NAME).write_text(m.render_manifest(repo_id, "model", commit, records))


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    for path, (data, _kind) in FILES.items():
        (root / path).write_bytes(data)
    write_manifest(root, FILES)
    (root / "tokenizer.json").write_bytes(TOKENIZER)  # pulled from the base model, not in the manifest
    return root


def args(store, **extra):
    result = {"path": str(store)}
    result.update(extra)
    return result


def keep_mtime(path, change):
    """Apply ``change(path)`` and set the mtime back, as `touch -d` after an edit would."""
    st = os.stat(path)
    change(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def flip_byte(path):
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01
    path.write_bytes(bytes(data))


def test_good_store_manifest_mode_hashes_nothing(module_result, store):
    kind, result, warnings = module_result(args(store, repo_id=REPO, commit=COMMIT))
    assert kind == "exit"
    assert warnings == []
    assert result == {
        "changed": False,
        "files_checked": 4,
        "files_hashed": 0,
        "bytes_hashed": 0,
        "shards": {"present": 2, "expected": 2},
        "commit": COMMIT,
        "repo_id": REPO,
        "safetensors": 2,
    }


def test_good_store_full_mode_hashes_everything(module_result, store):
    kind, result, _warnings = module_result(args(store, verify="full", max_workers=2))
    assert kind == "exit"
    assert result["changed"] is False
    assert (result["files_checked"], result["files_hashed"], result["bytes_hashed"]) == (4, 4, TOTAL)
    assert result["shards"] == {"present": 2, "expected": 2}


def test_check_mode_verifies_the_same(module_result, store):
    kind, result, _warnings = module_result(args(store, verify="full", _ansible_check_mode=True))
    assert kind == "exit"
    assert result["changed"] is False
    assert result["files_hashed"] == 4


def test_touched_file_is_hashed_in_manifest_mode(module_result, store):
    os.utime(store / SHARD2, ns=(1_800_000_000_000_000_000, 1_800_000_000_000_000_000))
    kind, result, _warnings = module_result(args(store))
    assert kind == "exit"
    assert (result["files_hashed"], result["bytes_hashed"]) == (1, 1976)


def test_flipped_byte_with_mtime_kept_only_full_catches(module_result, store):
    keep_mtime(store / SHARD1, flip_byte)
    kind, result, _warnings = module_result(args(store))
    assert kind == "exit"
    assert result["files_hashed"] == 0

    good = sha256(FILES[SHARD1][0])
    bad = sha256((store / SHARD1).read_bytes())
    kind, result, _warnings = module_result(args(store, verify="full"))
    assert kind == "fail"
    assert result["changed"] is False
    assert result["problems"] == [
        {"path": SHARD1, "reason": f"sha256 mismatch: got {bad[:12]}, expected {good[:12]}"},
        {"path": INDEX, "reason": "1 of 2 shards present"},
    ]
    assert result["shards"] == {"present": 1, "expected": 2}
    assert result["msg"] == (
        f"store {store} failed verification (full, 4 files checked, 3.15 KiB hashed): 2 problems: "
        f"{SHARD1}: sha256 mismatch: got {bad[:12]}, expected {good[:12]}; {INDEX}: 1 of 2 shards present; "
        f"{FIX} (delete the files with a hash mismatch first: rsync skips files whose size and mtime match)"
    )


def test_blob_id_mismatch_in_full_mode(module_result, store):
    keep_mtime(store / "config.json", lambda p: p.write_bytes(b'{"model_type": "deepseek_v3"}\n'))
    kind, result, _warnings = module_result(args(store, verify="full"))
    assert kind == "fail"
    good = blob_id(FILES["config.json"][0])
    bad = blob_id((store / "config.json").read_bytes())
    assert result["problems"] == [
        {"path": "config.json", "reason": f"blob id mismatch: got {bad[:12]}, expected {good[:12]}"},
    ]
    assert result["shards"] == {"present": 2, "expected": 2}


def test_changed_size_caught_in_manifest_mode(module_result, store):
    keep_mtime(store / SHARD2, lambda p: p.write_bytes(b"\x5a" * 1975))
    kind, result, _warnings = module_result(args(store))
    assert kind == "fail"
    assert result["files_hashed"] == 0
    assert result["problems"] == [
        {"path": SHARD2, "reason": "size 1975 bytes, expected 1976 bytes"},
        {"path": INDEX, "reason": "1 of 2 shards present"},
    ]
    assert result["msg"] == (
        f"store {store} failed verification (manifest, 4 files checked, 0 B hashed): 2 problems: "
        f"{SHARD2}: size 1975 bytes, expected 1976 bytes; {INDEX}: 1 of 2 shards present; {FIX}"
    )


def test_missing_shard_named_by_the_index(module_result, store):
    (store / SHARD2).unlink()
    kind, result, _warnings = module_result(args(store))
    assert kind == "fail"
    assert result["problems"] == [
        {"path": SHARD2, "reason": "missing"},
        {"path": INDEX, "reason": "1 of 2 shards present"},
    ]
    assert result["shards"] == {"present": 1, "expected": 2}


def test_index_shard_not_in_manifest(module_result, store):
    # the head's manifest lacks shard 2 (a narrowed allow_patterns), whether or not the file came along
    files = {path: value for path, value in FILES.items() if path != SHARD2}
    write_manifest(store, files)
    kind, result, _warnings = module_result(args(store))
    assert kind == "fail"
    assert result["files_checked"] == 3
    assert result["problems"] == [
        {"path": SHARD2, "reason": f"named by {INDEX} but not in the manifest (on disk)"},
        {"path": INDEX, "reason": "1 of 2 shards present"},
    ]

    (store / SHARD2).unlink()
    kind, result, _warnings = module_result(args(store))
    assert result["problems"][0] == {"path": SHARD2, "reason": f"named by {INDEX} but not in the manifest (missing)"}

    kind, result, _warnings = module_result(args(store, require_safetensors_index=False))
    assert kind == "exit"
    assert result["shards"] == {"present": 0, "expected": 0}


def test_unreadable_index(module_result, store):
    keep_mtime(store / INDEX, lambda p: p.write_bytes(b"[" + b" " * (len(INDEX_TEXT) - 1)))
    kind, result, _warnings = module_result(args(store))
    assert kind == "fail"
    assert [p["path"] for p in result["problems"]] == [INDEX]
    assert result["problems"][0]["reason"].startswith("unreadable (")
    assert result["shards"] == {"present": 0, "expected": 0}


def test_symlink_instead_of_a_real_file(module_result, store, tmp_path):
    target = tmp_path / "elsewhere.safetensors"
    target.write_bytes(FILES[SHARD1][0])
    (store / SHARD1).unlink()
    (store / SHARD1).symlink_to(target)
    kind, result, _warnings = module_result(args(store, verify="full"))
    assert kind == "fail"
    assert result["files_hashed"] == 3
    assert result["problems"] == [
        {"path": SHARD1, "reason": f"a symlink (to {target}) instead of a real file"},
        {"path": INDEX, "reason": "1 of 2 shards present"},
    ]


def test_extra_files(module_result, store):
    good = sha256(TOKENIZER)
    kind, result, _warnings = module_result(args(store, extra_files=[{"path": "tokenizer.json", "sha256": good}]))
    assert kind == "exit"
    assert (result["files_checked"], result["files_hashed"], result["bytes_hashed"]) == (5, 1, len(TOKENIZER))

    wrong = "0123456789ab" + "0" * 52
    kind, result, _warnings = module_result(
        args(
            store,
            extra_files=[
                {"path": "tokenizer.json", "sha256": wrong.upper()},
                {"path": "tokenizer_config.json", "sha256": good},
            ],
        )
    )
    assert kind == "fail"
    assert result["problems"] == [
        {"path": "tokenizer.json", "reason": f"sha256 mismatch: got {good[:12]}, expected 0123456789ab (extra file)"},
        {"path": "tokenizer_config.json", "reason": "missing (extra file)"},
    ]


def test_extra_files_bad_parameters(module_result, store):
    outside = [{"path": "../tokenizer.json", "sha256": "a" * 64}]
    kind, result, _warnings = module_result(args(store, extra_files=outside))
    assert kind == "fail"
    assert result["msg"] == (
        "extra_files: '../tokenizer.json' must be a relative path inside the store (no '..', not absolute, "
        "not .sparkfold-manifest.json or .cache/)"
    )
    kind, result, _warnings = module_result(args(store, extra_files=[{"path": "tokenizer.json", "sha256": "abc"}]))
    assert kind == "fail"
    assert result["msg"] == "extra_files: sha256 of tokenizer.json must be 64 hex digits, got 'abc'"


def test_every_problem_listed_once(module_result, store):
    (store / SHARD1).unlink()
    keep_mtime(store / SHARD2, lambda p: p.write_bytes(b"\x5a" * 2000))
    (store / "config.json").unlink()
    (store / "config.json").mkdir()
    kind, result, _warnings = module_result(
        args(store, extra_files=[{"path": "tokenizer.model", "sha256": "b" * 64}])
    )
    assert kind == "fail"
    assert result["problems"] == [
        {"path": "config.json", "reason": "not a regular file"},
        {"path": SHARD1, "reason": "missing"},
        {"path": SHARD2, "reason": "size 2000 bytes, expected 1976 bytes"},
        {"path": "tokenizer.model", "reason": "missing (extra file)"},
        {"path": INDEX, "reason": "0 of 2 shards present"},
    ]
    assert result["msg"].startswith(
        f"store {store} failed verification (manifest, 5 files checked, 0 B hashed): 5 problems: "
        "config.json: not a regular file; "
    )


def test_wrong_commit_and_repo(module_result, store):
    other = "0" * 40
    kind, result, _warnings = module_result(args(store, commit=other))
    assert kind == "fail"
    assert result["msg"] == f"store {store}: the manifest is of commit {COMMIT}, expected {other}; {FIX}"

    kind, result, _warnings = module_result(args(store, repo_id="other/model", commit=other))
    assert result["msg"] == (
        f"store {store}: the manifest is of repo_id {REPO}, expected other/model; "
        f"the manifest is of commit {COMMIT}, expected {other}; {FIX}"
    )


def test_no_manifest(module_result, store):
    (store / m.MANIFEST_NAME).unlink()
    kind, result, _warnings = module_result(args(store))
    assert kind == "fail"
    assert result["msg"] == f"manifest {store / m.MANIFEST_NAME} is missing; {FIX}"


def test_manifest_not_json(module_result, store):
    (store / m.MANIFEST_NAME).write_text("{")
    kind, result, _warnings = module_result(args(store))
    assert kind == "fail"
    assert result["msg"].startswith(f"manifest {store / m.MANIFEST_NAME} is unreadable (not JSON: ")
    assert result["msg"].endswith(f"); {FIX}")


def test_unsafe_manifest_path(module_result, store):
    text = json.loads((store / m.MANIFEST_NAME).read_text())
    text["files"][0]["path"] = "../outside.json"
    (store / m.MANIFEST_NAME).write_text(json.dumps(text))
    kind, result, _warnings = module_result(args(store))
    assert kind == "fail"
    assert result["problems"] == [
        {"path": "../outside.json", "reason": "unsafe path in the manifest (absolute, '..' or the store's own files)"},
    ]


def test_store_missing(module_result, tmp_path):
    missing = tmp_path / "nowhere"
    kind, result, _warnings = module_result(args(missing))
    assert kind == "fail"
    assert result["msg"] == f"store {missing} does not exist; {FIX}"


def test_the_shards_beside_the_manifest_are_counted(module_result, store):
    (store / "sub").mkdir()
    (store / "sub" / "model-00009-of-00009.safetensors").write_bytes(b"x")
    (store / "stray.safetensors").symlink_to(store / SHARD1)
    (store / ".hidden.safetensors").write_bytes(b"x")
    kind, result, _warnings = module_result(args(store))
    assert kind == "exit"
    # regular files directly in the store, not hidden, as ansible.builtin.find counts them
    assert result["safetensors"] == 2


def test_several_stores_in_one_run(module_result, store, tmp_path):
    missing = tmp_path / "nowhere"
    kind, result, _warnings = module_result({"stores": [
        {"path": str(store), "repo_id": REPO, "commit": COMMIT},
        {"path": str(missing)},
    ]})
    assert kind == "fail"
    assert result["msg"] == f"1 of 2 stores failed verification: {missing}: store {missing} does not exist; {FIX}"
    good, bad = result["stores"]
    assert good["ok"] is True and good["path"] == str(store)
    assert (good["files_checked"], good["safetensors"], good["commit"]) == (4, 2, COMMIT)
    assert "msg" not in good
    assert bad == {"path": str(missing), "ok": False, "msg": f"store {missing} does not exist; {FIX}"}


def test_several_stores_each_with_its_own_options(module_result, store, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    for path, (data, _kind) in FILES.items():
        (other / path).write_bytes(data)
    write_manifest(other, FILES)
    keep_mtime(other / SHARD1, flip_byte)
    kind, result, _warnings = module_result({"stores": [
        {"path": str(store)},
        {"path": str(other), "verify": "full", "require_safetensors_index": False},
    ]})
    assert kind == "fail"
    good, bad = result["stores"]
    assert good["ok"] and good["files_hashed"] == 0
    assert not bad["ok"] and bad["files_hashed"] == 4 and bad["shards"] == {"present": 0, "expected": 0}
    assert bad["problems"][0]["path"] == SHARD1
    assert result["msg"].startswith(
        f"1 of 2 stores failed verification: {other}: store {other} failed verification (full, ")


def test_several_stores_that_pass(module_result, store):
    kind, result, _warnings = module_result({"stores": [{"path": str(store)}, {"path": str(store), "verify": "full"}]})
    assert kind == "exit"
    assert result["changed"] is False
    assert [entry["ok"] for entry in result["stores"]] == [True, True]


def test_path_or_stores(module_result, store):
    kind, result, _warnings = module_result({"path": str(store), "stores": [{"path": str(store)}]})
    assert kind == "fail"
    assert "mutually exclusive" in result["msg"]
