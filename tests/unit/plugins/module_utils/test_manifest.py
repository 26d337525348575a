# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for plugins/module_utils/manifest.py (pure functions of hub_snapshot)."""

import hashlib
import json
import os
import subprocess
from types import SimpleNamespace

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import manifest as m

SHA = "a" * 64
BLOB = "b" * 40


def st(size, mtime_ns=1_700_000_000_000_000_000):
    return SimpleNamespace(st_size=size, st_mtime_ns=mtime_ns)


def lfs(path="model-00001.safetensors", size=10, sha256=SHA):
    return m.remote_entry(path, size, sha256=sha256)


def record(entry, size=None, mtime_ns=1_700_000_000_000_000_000):
    return m.make_record(entry, st(entry["size"] if size is None else size, mtime_ns), "2026-01-01T00:00:00Z")


# ---- hashing ---------------------------------------------------------------------------------


def test_git_blob_id_matches_git_hash_object(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"model_type": "deepseek_v4"}\n')
    expected = hashlib.sha1(b"blob 30\x00" + path.read_bytes()).hexdigest()
    assert m.hash_file(str(path), "blob_id") == expected
    try:
        git = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return
    assert git.stdout.strip() == expected


def test_sha256_in_small_chunks_and_progress(tmp_path):
    data = os.urandom(100_000)
    path = tmp_path / "shard"
    path.write_bytes(data)
    seen = []
    assert m.hash_file(str(path), "sha256", chunk_size=4096, on_bytes=seen.append) == hashlib.sha256(data).hexdigest()
    assert sum(seen) == len(data) and max(seen) == 4096


def test_empty_file_hashes(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert m.hash_file(str(path), "sha256") == hashlib.sha256(b"").hexdigest()
    assert m.hash_file(str(path), "blob_id") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # git's empty blob


def test_file_digests_read_once_for_both_kinds_and_content_matches(tmp_path):
    data = os.urandom(50_000)
    path = tmp_path / "tokenizer.json"
    path.write_bytes(data)
    digests = m.file_digests(str(path), chunk_size=4096)
    sha, blob = hashlib.sha256(data).hexdigest(), hashlib.sha1(b"blob 50000\x00" + data).hexdigest()
    assert digests == (sha, blob, len(data))
    assert m.digest_file(str(path), m.HASH_KINDS) == {"sha256": sha, "blob_id": blob}
    assert m.content_matches({"size": len(data), "sha256": sha.upper(), "blob_id": "0" * 40}, digests)
    assert m.content_matches({"size": len(data), "sha256": None, "blob_id": blob}, digests)
    assert not m.content_matches({"size": len(data) + 1, "sha256": sha}, digests)
    assert not m.content_matches({"size": len(data), "sha256": None, "blob_id": None}, digests)


def test_one_hasher_for_the_hub_modules():
    """tokenizer_pull's file_digests/content_matches (imported from hub.py) are manifest.py's, not a second hasher."""
    from ansible_collections.sparkfold.cluster.plugins.module_utils import hub

    assert hub.file_digests is m.file_digests and hub.content_matches is m.content_matches
    assert not hasattr(hub, "hashlib")


def test_unknown_hash_kind():
    with pytest.raises(ValueError):
        m.new_hasher("md5", 1)


# ---- listing entries ---------------------------------------------------------------------------


def test_remote_entry_prefers_lfs_sha256_and_lowercases():
    assert m.remote_entry("a.bin", 3, sha256="ABC", blob_id="def") == {"path": "a.bin", "size": 3, "sha256": "abc"}
    assert m.remote_entry("a.json", 3, blob_id="DEF") == {"path": "a.json", "size": 3, "blob_id": "def"}
    assert m.expected_hash(m.remote_entry("a.json", 3, blob_id="def")) == ("blob_id", "def")


@pytest.mark.parametrize("kwargs", [{"size": None, "sha256": SHA}, {"size": 3}])
def test_remote_entry_needs_size_and_hash(kwargs):
    with pytest.raises(ValueError, match=r"a\.bin"):
        m.remote_entry("a.bin", **kwargs)


@pytest.mark.parametrize("path", ["config.json", "engram/engram_table_0.bin", "a/b/c.safetensors"])
def test_safe_repo_paths(path):
    assert m.check_repo_path(path) == path


@pytest.mark.parametrize(
    "path",
    ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/", "a\\b", ".cache/huggingface/x", m.MANIFEST_NAME],
)
def test_unsafe_repo_paths(path):
    with pytest.raises(ValueError):
        m.check_repo_path(path)


# ---- classify ----------------------------------------------------------------------------------


def test_classify_missing_and_wrong_size_and_not_regular():
    entry = lfs(size=10)
    assert m.classify(entry, None, False, None, "manifest") == m.MISSING
    assert m.classify(entry, st(9), True, record(entry), "manifest") == m.BAD
    assert m.classify(entry, st(10), False, None, "none") == m.BAD  # a symlink or other non-regular file


def test_classify_manifest_mode_trusts_agreeing_record_only():
    entry = lfs(size=10)
    rec = record(entry, mtime_ns=5)
    assert m.classify(entry, st(10, 5), True, rec, "manifest") == m.PRESENT
    assert m.classify(entry, st(10, 6), True, rec, "manifest") == m.UNCHECKED  # touched: hash it again
    assert m.classify(entry, st(10, 5), True, None, "manifest") == m.UNCHECKED  # never recorded
    # the Hub now lists another hash for the path (new commit): the old record vouches for nothing
    assert m.classify(lfs(size=10, sha256="c" * 64), st(10, 6), True, rec, "manifest") == m.UNCHECKED
    # ... and while it still matches the file on disk, it says the file holds the other content: no need to
    # read it to know it is wrong
    assert m.classify(lfs(size=10, sha256="c" * 64), st(10, 5), True, rec, "manifest") == m.BAD


def test_classify_file_of_another_revision_is_bad_whatever_verify_says():
    """A shard of the previous commit with the size of the new one is not trusted by verify=none either."""
    old = lfs(size=10)
    rec = record(old, mtime_ns=5)
    new = lfs(size=10, sha256="c" * 64)
    for verify in ("none", "manifest", "full"):
        assert m.classify(new, st(10, 5), True, rec, verify) == m.BAD
    # a record of another hash kind cannot be compared: hashed (or trusted by size with none) as before
    blob = m.remote_entry(old["path"], 10, blob_id=BLOB)
    assert m.classify(blob, st(10, 5), True, rec, "manifest") == m.UNCHECKED
    assert m.classify(blob, st(10, 5), True, rec, "none") == m.PRESENT


def test_classify_full_hashes_everything_and_none_trusts_size():
    entry = lfs(size=10)
    rec = record(entry, mtime_ns=5)
    assert m.classify(entry, st(10, 5), True, rec, "full") == m.UNCHECKED
    assert m.classify(entry, st(10, 99), True, None, "none") == m.PRESENT


def test_record_agrees_needs_hash_kind_match():
    blob_entry = m.remote_entry("config.json", 10, blob_id=BLOB)
    rec = record(blob_entry, mtime_ns=5)
    assert m.record_agrees(rec, blob_entry, st(10, 5))
    assert not m.record_agrees(rec, lfs(path="config.json", size=10), st(10, 5))
    assert not m.record_agrees(rec, blob_entry, None)
    assert not m.record_agrees({"path": "x", "size": 10, "mtime_ns": 5}, blob_entry, st(10, 5))


# ---- manifest text -----------------------------------------------------------------------------


def test_render_parse_roundtrip_is_stable():
    a = lfs("b.safetensors", 10)
    b = m.remote_entry("a.json", 3, blob_id=BLOB)
    records = {"b.safetensors": record(a), "a.json": record(b)}
    text = m.render_manifest("org/model", "model", "c" * 40, records)
    assert text == m.render_manifest("org/model", "model", "c" * 40, dict(reversed(list(records.items()))))
    data = json.loads(text)
    assert [f["path"] for f in data["files"]] == ["a.json", "b.safetensors"]
    assert data["version"] == m.MANIFEST_VERSION and data["commit"] == "c" * 40
    parsed = m.parse_manifest(text)
    assert parsed["files"] == records and parsed["repo_id"] == "org/model"
    assert parsed["pending"] == [] and "pending" not in data  # a complete store's text has no pending key


def test_pending_files_are_written_read_and_part_of_the_substance():
    a = lfs("b.safetensors", 10)
    records = {"b.safetensors": record(a)}
    text = m.render_manifest("org/model", "model", "c" * 40, records, pending=["z.bin", "a.json"])
    parsed = m.parse_manifest(text)
    assert parsed["pending"] == ["a.json", "z.bin"]
    complete = m.parse_manifest(m.render_manifest("org/model", "model", "c" * 40, records))
    assert m.substance(parsed) != m.substance(complete)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"version": 99, "files": []}',
        '{"version": 1, "files": {}}',
        '{"version": 1, "files": [{"size": 1, "mtime_ns": 1, "sha256": "x"}]}',
        '{"version": 1, "files": [{"path": "a", "size": "1", "mtime_ns": 1, "sha256": "x"}]}',
        '{"version": 1, "files": [{"path": "a", "size": 1, "mtime_ns": 1}]}',
        '{"version": 1, "files": [], "pending": "a.json"}',
        '{"version": 1, "files": [], "pending": [1]}',
    ],
)
def test_parse_rejects_broken_manifests(text):
    with pytest.raises(m.ManifestError):
        m.parse_manifest(text)


def test_substance_ignores_verified_at_only():
    entry = lfs()
    one = {"repo_id": "o/m", "repo_type": "model", "commit": "c" * 40, "files": {entry["path"]: record(entry)}}
    later = dict(one, files={entry["path"]: dict(record(entry), verified_at="2027-01-01T00:00:00Z")})
    touched = dict(one, files={entry["path"]: record(entry, mtime_ns=7)})
    assert m.substance(one) == m.substance(later)
    assert m.substance(one) != m.substance(touched)
    assert m.substance(None) is None


def test_carry_over_keeps_unchanged_files_outside_selection():
    a = record(lfs("a.bin"), mtime_ns=5)
    b = record(lfs("b.bin"), mtime_ns=5)
    c = record(lfs("c.bin"), mtime_ns=5)
    disk = {"a.bin": st(10, 5), "b.bin": st(10, 6)}  # b touched, c gone
    kept = m.carry_over({"a.bin": a, "b.bin": b, "c.bin": c, "sel.bin": a}, {"sel.bin"}, disk.get)
    assert kept == {"a.bin": a}


# ---- disk --------------------------------------------------------------------------------------


def test_bytes_to_fetch_subtracts_resumable_partials():
    entries = [lfs("a", 100), lfs("b", 50), lfs("c", 10)]
    # a: 40 bytes already there; b: a stale partial larger than the file is not counted
    assert m.bytes_to_fetch(entries, {"a": 40, "b": 60}) == 60 + 50 + 10


def test_disk_shortfall_message_says_needed_and_free():
    assert m.disk_shortfall(0, 0, 10**18, "/srv") is None
    assert m.disk_shortfall(100, 1100, 1000, "/srv") is None
    msg = m.disk_shortfall(2 * 1024**3, 1024**3, 1024**3, "/srv/models")
    assert "/srv/models" in msg
    assert "needs 2.00 GiB (2147483648 bytes)" in msg
    assert "margin of 1.00 GiB" in msg
    assert "only 1.00 GiB (1073741824 bytes) are free" in msg


def test_nearest_existing(tmp_path):
    assert m.nearest_existing(str(tmp_path / "a" / "b" / "c")) == str(tmp_path)
    assert m.nearest_existing(str(tmp_path)) == str(tmp_path)


@pytest.mark.parametrize(
    ("count", "text"), [(0, "0 B"), (1023, "1023 B"), (1536, "1.50 KiB"), (5 * 1024**3, "5.00 GiB")]
)
def test_format_bytes(count, text):
    assert m.format_bytes(count) == text


# ---- misc --------------------------------------------------------------------------------------


def test_file_lines_and_partial_name():
    entries = [lfs("b.bin", 10), m.remote_entry("a.json", 3, blob_id=BLOB)]
    assert m.file_lines(entries) == f"a.json  3  blob_id:{BLOB}\nb.bin  10  sha256:{SHA}\n"
    assert m.file_lines([]) == ""
    assert m.partial_name("dir/x.bin", "sha256", SHA) == f"dir/x.bin.sparkfold-sha256-{SHA}.incomplete"


def test_write_atomic_replaces_and_leaves_no_temp(tmp_path):
    path = tmp_path / "progress.json"
    m.write_atomic(str(path), "one")
    m.write_atomic(str(path), b"two")
    assert path.read_text() == "two"
    assert sorted(os.listdir(tmp_path)) == ["progress.json"]
    assert (path.stat().st_mode & 0o777) == 0o644


def test_write_atomic_cleans_up_on_failure(tmp_path):
    target = tmp_path / "dir-in-the-way"
    target.mkdir()
    with pytest.raises(OSError):
        m.write_atomic(str(target), "x")  # cannot replace a directory with a file
    assert os.listdir(tmp_path) == ["dir-in-the-way"]


def test_utc_now_format():
    assert len(m.utc_now()) == 20 and m.utc_now().endswith("Z")
