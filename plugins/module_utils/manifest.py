# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The verification manifest of a model store written by sparkfold.cluster.hub_snapshot.

A store is a directory of real files (one repository revision, or the part of it that the
patterns select) plus ``.sparkfold-manifest.json``. For every file that was hashed and found
equal to the Hub's listing, the manifest records its size, its mtime in nanoseconds and the
hash the Hub publishes for it: the sha256 of an LFS file, the git blob id (sha1 of
``blob <size>\\0`` + content) of any other. A later run trusts a file whose size, mtime and
recorded hash still agree with the manifest and with the Hub's listing, without reading it.
Files of the selection that a run could not put in place (a download or a repair that failed) are
listed under ``pending``: a store with pending files is incomplete, whatever its records say.

Everything here is pure (paths, stat results and text in, values out) except the hashing and
the atomic write helpers; nothing imports huggingface_hub.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import posixpath
import tempfile

MANIFEST_NAME = ".sparkfold-manifest.json"
MANIFEST_VERSION = 1
HASH_CHUNK = 8 * 1024 * 1024
HASH_KINDS = ("sha256", "blob_id")

# Plan states of a file of the selection.
PRESENT = "present"  # verified: nothing to fetch
MISSING = "missing"  # not in the store: download
BAD = "bad"  # in the store but wrong (size, hash, not a regular file): move aside, refetch
UNCHECKED = "unchecked"  # in the store with the right size, must be hashed to tell


class ManifestError(ValueError):
    """The manifest text cannot be used (not JSON, wrong shape, another version)."""


def utc_now():
    """ISO 8601 UTC time to the second, as recorded in ``verified_at``."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_bytes(count):
    """Human-readable binary size: ``1536`` -> ``1.50 KiB``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} PiB"  # pragma: no cover - unreachable


def check_repo_path(path):
    """Reject a path from the Hub listing that would leave the store (absolute, ``..``, empty parts).

    Returns the path; raises ValueError with the reason.
    """
    if not path or path.startswith("/") or "\\" in path or "\x00" in path:
        raise ValueError(f"unsafe file name in the Hub listing: {path!r}")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts) or posixpath.normpath(path) != path:
        raise ValueError(f"unsafe file name in the Hub listing: {path!r}")
    if parts[0] == ".cache" or path == MANIFEST_NAME:
        raise ValueError(f"file name in the Hub listing collides with the store's own files: {path!r}")
    return path


def remote_entry(path, size, sha256=None, blob_id=None):
    """A file of the Hub listing: ``{path, size, sha256}`` for LFS files, ``{path, size, blob_id}`` otherwise."""
    if size is None:
        raise ValueError(f"the Hub listing gives no size for {path}")
    if sha256:
        return {"path": path, "size": int(size), "sha256": sha256.lower()}
    if blob_id:
        return {"path": path, "size": int(size), "blob_id": blob_id.lower()}
    raise ValueError(f"the Hub listing gives neither an LFS sha256 nor a blob id for {path}")


def expected_hash(entry):
    """Return ``(kind, hex)`` of a remote entry or a manifest record."""
    for kind in HASH_KINDS:
        if entry.get(kind):
            return kind, entry[kind]
    raise ValueError(f"no hash recorded for {entry.get('path')}")


def new_hasher(kind, size):
    """A hashlib object for ``kind``; a git blob id hashes a ``blob <size>\\0`` header first."""
    if kind == "sha256":
        return hashlib.sha256()
    if kind == "blob_id":
        hasher = hashlib.sha1()  # git's object id, not a security boundary
        hasher.update(b"blob %d\x00" % size)
        return hasher
    raise ValueError(f"unknown hash kind {kind}")


def digest_file(path, kinds, size=None, chunk_size=HASH_CHUNK, on_bytes=None):
    """Hash the file at ``path`` once as every kind of ``kinds``; return ``{kind: hex digest}``.

    The one file hasher of the collection (hub_snapshot, store_verify, tokenizer_pull). ``on_bytes(n)``
    is called after each chunk (progress reports). hashlib drops the GIL on large buffers, so several
    threads hash several files in parallel.
    """
    if size is None:
        size = os.path.getsize(path)
    hashers = {kind: new_hasher(kind, size) for kind in kinds}
    buf = bytearray(chunk_size)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as handle:
        while True:
            count = handle.readinto(buf)
            if not count:
                break
            for hasher in hashers.values():
                hasher.update(view[:count])
            if on_bytes is not None:
                on_bytes(count)
    return {kind: hasher.hexdigest() for kind, hasher in hashers.items()}


def hash_file(path, kind, size=None, chunk_size=HASH_CHUNK, on_bytes=None):
    """Hash the file at ``path`` as ``kind`` (``sha256`` or ``blob_id``); return the hex digest."""
    return digest_file(path, (kind,), size, chunk_size, on_bytes)[kind]


def file_digests(path, chunk_size=HASH_CHUNK):
    """(sha256, git blob id, size) of a local file, read once."""
    size = os.stat(path).st_size
    digests = digest_file(path, HASH_KINDS, size, chunk_size)
    return digests["sha256"], digests["blob_id"], size


def content_matches(record, digests):
    """Whether local digests (file_digests) are the content of a listed file (hub.file_record).

    The sha256 is compared when the record has one (LFS files), else the git blob id.
    """
    sha256, blob_id, size = digests
    if record.get("size") is not None and record["size"] != size:
        return False
    if record.get("sha256"):
        return record["sha256"].lower() == sha256
    return bool(record.get("blob_id")) and record["blob_id"].lower() == blob_id


def make_record(entry, st, verified_at):
    """Manifest record of a verified file from its remote entry and its os.stat result."""
    kind, digest = expected_hash(entry)
    return {
        "path": entry["path"],
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        kind: digest,
        "verified_at": verified_at,
    }


def record_agrees(record, entry, st):
    """Whether a manifest record vouches for the file: same hash as the Hub, same size and mtime on disk."""
    if record is None or st is None:
        return False
    try:
        if expected_hash(record) != expected_hash(entry):
            return False
    except ValueError:
        return False
    return record.get("size") == entry["size"] == st.st_size and record.get("mtime_ns") == st.st_mtime_ns


def record_holds_other(record, entry, st):
    """Whether a record that still matches the file on disk (size, mtime) vouches for other content.

    That is a file of another revision (same size, other hash): wrong whatever ``verify`` says, and
    known to be so without reading it.
    """
    if record is None or st is None:
        return False
    if record.get("size") != st.st_size or record.get("mtime_ns") != st.st_mtime_ns:
        return False
    try:
        (kind, digest), (want_kind, want) = expected_hash(record), expected_hash(entry)
    except ValueError:
        return False
    return kind == want_kind and digest != want


def classify(entry, st, is_regular, record, verify):
    """Plan state of one file of the selection: PRESENT, MISSING, BAD or UNCHECKED (hash it to tell).

    ``st`` is the os.lstat result or None when there is no such path; ``is_regular`` whether it is a
    regular file (a symlink, say into a Hub cache, is BAD: the store holds real files).

    - a file whose record still matches it on disk but names another hash (another revision's file) is BAD;
    - verify ``none``: a regular file of the right size is PRESENT;
    - verify ``manifest``: PRESENT when the record agrees (size, mtime, hash); a file of the right size
      without an agreeing record is UNCHECKED (hashed once, then recorded);
    - verify ``full``: every file of the right size is UNCHECKED.
    """
    if st is None:
        return MISSING
    if not is_regular or st.st_size != entry["size"]:
        return BAD
    if record_holds_other(record, entry, st):
        return BAD
    if verify == "none":
        return PRESENT
    if verify == "manifest" and record_agrees(record, entry, st):
        return PRESENT
    return UNCHECKED


def parse_manifest(text):
    """Parse manifest text into ``{repo_id, repo_type, commit, files: {path: record}}``.

    Raises ManifestError when the text is not a manifest this version understands.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ManifestError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION:
        raise ManifestError(f"not a version {MANIFEST_VERSION} sparkfold manifest")
    files = data.get("files")
    if not isinstance(files, list):
        raise ManifestError("'files' is not a list")
    records = {}
    for record in files:
        if not isinstance(record, dict) or not isinstance(record.get("path"), str):
            raise ManifestError("a file record has no path")
        if not isinstance(record.get("size"), int) or not isinstance(record.get("mtime_ns"), int):
            raise ManifestError(f"record of {record['path']} lacks size or mtime_ns")
        if not any(isinstance(record.get(kind), str) for kind in HASH_KINDS):
            raise ManifestError(f"record of {record['path']} has no sha256 or blob_id")
        records[record["path"]] = record
    pending = data.get("pending", [])
    if not isinstance(pending, list) or not all(isinstance(path, str) for path in pending):
        raise ManifestError("'pending' is not a list of paths")
    return {
        "repo_id": data.get("repo_id"),
        "repo_type": data.get("repo_type"),
        "commit": data.get("commit"),
        "files": records,
        "pending": sorted(set(pending)),
    }


def render_manifest(repo_id, repo_type, commit, records, pending=()):
    """Manifest text: stable key order and file order, so equal content gives equal bytes.

    ``pending``: paths of the selection that the store lacks (a failed download or repair); written only
    when there are some, so the manifest of a complete store is the same text as before the key existed.
    """
    data = {
        "version": MANIFEST_VERSION,
        "repo_id": repo_id,
        "repo_type": repo_type,
        "commit": commit,
        "files": [records[path] for path in sorted(records)],
    }
    if pending:
        data["pending"] = sorted(set(pending))
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def substance(manifest):
    """What a manifest says about the store, without the ``verified_at`` stamps (for ``changed``)."""
    if manifest is None:
        return None
    files = {
        path: {key: value for key, value in record.items() if key != "verified_at"}
        for path, record in manifest["files"].items()
    }
    pending = tuple(sorted(manifest.get("pending") or ()))
    return (manifest.get("repo_id"), manifest.get("repo_type"), manifest.get("commit"), files, pending)


def carry_over(old_records, selected_paths, stat_of):
    """Records of files outside the selection that are still on disk unchanged (size and mtime).

    Narrowing allow_patterns must not forget files verified before. ``stat_of(path)`` returns an
    os.stat result or None.
    """
    kept = {}
    for path, record in old_records.items():
        if path in selected_paths:
            continue
        st = stat_of(path)
        if st is not None and st.st_size == record.get("size") and st.st_mtime_ns == record.get("mtime_ns"):
            kept[path] = record
    return kept


def bytes_to_fetch(entries, partial_sizes):
    """Bytes still to transfer for ``entries``, minus what resumable partial files already hold."""
    total = 0
    for entry in entries:
        have = partial_sizes.get(entry["path"], 0)
        total += entry["size"] - have if 0 <= have <= entry["size"] else entry["size"]
    return total


def nearest_existing(path):
    """``path`` or its nearest existing parent directory (what shutil.disk_usage can be asked about)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def disk_shortfall(needed, free, margin, where):
    """Message refusing a download that would leave less than ``margin`` bytes free; None when it fits."""
    if needed <= 0 or free >= needed + margin:
        return None
    return (
        f"not enough disk space on {where}: the download needs {format_bytes(needed)} ({needed} bytes) "
        f"plus the min_free_bytes margin of {format_bytes(margin)} ({margin} bytes), "
        f"but only {format_bytes(free)} ({free} bytes) are free; free "
        f"{format_bytes(needed + margin - free)} or point local_dir at a larger filesystem"
    )


def file_lines(files):
    """``path  size  kind:hash`` lines of a file list (the before/after text of the diff)."""
    lines = []
    for item in sorted(files, key=lambda f: f["path"]):
        kind, digest = expected_hash(item)
        lines.append(f"{item['path']}  {item['size']}  {kind}:{digest}")
    return "\n".join(lines) + ("\n" if lines else "")


def partial_name(path, kind, digest):
    """Name of the resumable partial download of ``path`` (keyed by the expected hash)."""
    return f"{path}.sparkfold-{kind}-{digest}.incomplete"


def write_atomic(path, data, mode=0o644, durable=True):
    """Write ``data`` (str or bytes) to ``path`` through a temporary file in the same directory.

    Readers see the old content or the new one, never a part: the temporary file is flushed,
    fsynced (unless ``durable`` is false: a progress report need not survive a crash) and renamed
    over ``path``.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
