# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Verifying a model store against its sparkfold manifest, without the Hub (sparkfold.cluster.store_verify).

verify_store checks every manifest record (a regular file of the recorded size; hashed in "full" mode, and in
"manifest" mode when its mtime moved), the files the manifest lists as pending (a download or repair that
failed: the store is incomplete), the extra files the caller names by sha256, and the shards named by the
safetensors index. Hashing is module_utils/manifest.py's (hash_file), spread over a thread pool. Standard
library only, so it runs with the node's system python3.
"""

from __future__ import annotations

import json
import os
import re
import stat
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import (
    MANIFEST_NAME,
    ManifestError,
    check_repo_path,
    expected_hash,
    format_bytes,
    hash_file,
    parse_manifest,
)

INDEX_NAME = "model.safetensors.index.json"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
HOW_TO_FIX = "run the weights role on the head, then copy again"
KIND_NAMES = {"sha256": "sha256", "blob_id": "blob id"}
PENDING_REASON = "not fetched: the last hub_snapshot run could not download or repair it (pending in the manifest)"


class StoreError(Exception):
    """A problem that stops the verification before any file is read."""


def load_manifest(store):
    """Parsed manifest of ``store``; raises StoreError saying what is wrong and what to do."""
    manifest_path = os.path.join(store, MANIFEST_NAME)
    try:
        with open(manifest_path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError as exc:
        raise StoreError(f"manifest {manifest_path} is missing; {HOW_TO_FIX}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"manifest {manifest_path} is unreadable ({exc}); {HOW_TO_FIX}") from exc
    try:
        return parse_manifest(text)
    except ManifestError as exc:
        raise StoreError(f"manifest {manifest_path} is unreadable ({exc}); {HOW_TO_FIX}") from exc


def identity_problems(manifest, repo_id, commit):
    """Messages for a manifest of another repository or commit than asked for."""
    problems = []
    if repo_id is not None and manifest.get("repo_id") != repo_id:
        problems.append(f"the manifest is of repo_id {manifest.get('repo_id')}, expected {repo_id}")
    if commit is not None and manifest.get("commit") != commit:
        problems.append(f"the manifest is of commit {manifest.get('commit')}, expected {commit}")
    return problems


def lstat_problem(full_path):
    """``(st, None)`` for a regular file, else ``(None, reason)``."""
    try:
        st = os.lstat(full_path)
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"cannot stat ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(full_path)
        except OSError:
            target = "?"
        return None, f"a symlink (to {target}) instead of a real file"
    if not stat.S_ISREG(st.st_mode):
        return None, "not a regular file"
    return st, None


def hash_job(full_path, kind, digest, st):
    """Hash one file; return ``(reason or None, bytes read)``."""
    read = [0]

    def count(n):
        read[0] += n

    try:
        actual = hash_file(full_path, kind, st.st_size, on_bytes=count)
        after = os.stat(full_path)
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc})", read[0]
    if after.st_size != st.st_size or after.st_mtime_ns != st.st_mtime_ns:
        return "changed while it was being hashed", read[0]
    if actual != digest.lower():
        return f"{KIND_NAMES[kind]} mismatch: got {actual[:12]}, expected {digest.lower()[:12]}", read[0]
    return None, read[0]


class Verifier:
    def __init__(self, store, verify, max_workers):
        self.store = store
        self.verify = verify
        self.max_workers = max_workers
        self.problems = []
        self.files_checked = 0
        self.files_hashed = 0
        self.bytes_hashed = 0

    def problem(self, path, reason):
        self.problems.append({"path": path, "reason": reason})

    def run_hashes(self, jobs):
        """Hash ``jobs`` ([(key, full_path, kind, digest, st)]); return {key: reason or None}."""
        if not jobs:
            return {}
        workers = max(1, min(self.max_workers, len(jobs)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="store_verify_hash") as pool:
            futures = [(job[0], pool.submit(hash_job, *job[1:])) for job in jobs]
            results = {}
            for key, future in futures:
                reason, read = future.result()
                self.files_hashed += 1
                self.bytes_hashed += read
                results[key] = reason
        return results

    def check_manifest_files(self, records):
        """Check every manifest record; return the set of paths that passed."""
        reasons = {}
        jobs = []
        for path in sorted(records):
            record = records[path]
            self.files_checked += 1
            try:
                check_repo_path(path)
            except ValueError:
                reasons[path] = "unsafe path in the manifest (absolute, '..' or the store's own files)"
                continue
            full_path = os.path.join(self.store, path)
            st, reason = lstat_problem(full_path)
            if reason is None and st.st_size != record["size"]:
                reason = f"size {st.st_size} bytes, expected {record['size']} bytes"
            if reason is not None:
                reasons[path] = reason
                continue
            if self.verify == "manifest" and st.st_mtime_ns == record["mtime_ns"]:
                reasons[path] = None
                continue
            kind, digest = expected_hash(record)
            jobs.append((path, full_path, kind, digest, st))
        reasons.update(self.run_hashes(jobs))
        for path in sorted(reasons):
            if reasons[path] is not None:
                self.problem(path, reasons[path])
        return {path for path, reason in reasons.items() if reason is None}

    def check_pending(self, pending):
        """The files hub_snapshot could not put in place (a failed download or repair): each is a problem."""
        for path in pending:
            self.files_checked += 1
            self.problem(path, PENDING_REASON)

    def check_extra_files(self, extra_files):
        """Check the extra files; their problems follow the order of ``extra_files``."""
        reasons = {}
        jobs = []
        for number, item in enumerate(extra_files):
            self.files_checked += 1
            full_path = os.path.join(self.store, item["path"])
            st, reason = lstat_problem(full_path)
            if reason is not None:
                reasons[number] = reason
                continue
            jobs.append((number, full_path, "sha256", item["sha256"], st))
        reasons.update(self.run_hashes(jobs))
        for number, item in enumerate(extra_files):
            if reasons[number] is not None:
                self.problem(item["path"], f"{reasons[number]} (extra file)")

    def check_index(self, records, passed):
        """Check the shards of the safetensors index; return {present, expected}."""
        index_path = os.path.join(self.store, INDEX_NAME)
        if not os.path.lexists(index_path):
            return {"present": 0, "expected": 0}
        try:
            with open(index_path, encoding="utf-8") as handle:
                weight_map = json.load(handle).get("weight_map")
        except (OSError, ValueError, AttributeError) as exc:
            self.problem(INDEX_NAME, f"unreadable ({exc})")
            return {"present": 0, "expected": 0}
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            self.problem(INDEX_NAME, "has no weight_map of tensor names to shard files")
            return {"present": 0, "expected": 0}
        shards = sorted(set(weight_map.values()))
        present = 0
        for shard in shards:
            try:
                check_repo_path(shard)
            except ValueError:
                self.problem(shard, f"unsafe shard name in {INDEX_NAME}")
                continue
            if shard not in records:
                reason = lstat_problem(os.path.join(self.store, shard))[1]
                where = "on disk" if reason is None else reason
                self.problem(shard, f"named by {INDEX_NAME} but not in the manifest ({where})")
            elif shard in passed:
                present += 1
        if present < len(shards):
            self.problem(INDEX_NAME, f"{present} of {len(shards)} shards present")
        return {"present": present, "expected": len(shards)}


def validate_extra_files(extra_files):
    """Normalised extra_files; raises StoreError on a bad path or sha256."""
    checked = []
    for item in extra_files:
        path = item["path"]
        try:
            check_repo_path(path)
        except ValueError as exc:
            raise StoreError(
                f"extra_files: {path!r} must be a relative path inside the store (no '..', not absolute, "
                f"not {MANIFEST_NAME} or .cache/)"
            ) from exc
        digest = item["sha256"].strip().lower()
        if not SHA256_RE.match(digest):
            raise StoreError(f"extra_files: sha256 of {path} must be 64 hex digits, got {item['sha256']!r}")
        checked.append({"path": path, "sha256": digest})
    return checked


def verify_store(store, verify="manifest", max_workers=8, repo_id=None, commit=None, extra_files=(),
                 require_safetensors_index=True):
    """Verify ``store``; return ``(result, message or None)``. Raises StoreError when nothing could be checked."""
    if not os.path.exists(store):
        raise StoreError(f"store {store} does not exist; {HOW_TO_FIX}")
    if not os.path.isdir(store):
        raise StoreError(f"store {store} is not a directory")
    extra_files = validate_extra_files(extra_files)
    manifest = load_manifest(store)
    mismatch = identity_problems(manifest, repo_id, commit)
    if mismatch:
        raise StoreError(f"store {store}: {'; '.join(mismatch)}; {HOW_TO_FIX}")

    verifier = Verifier(store, verify, max_workers)
    records = manifest["files"]
    passed = verifier.check_manifest_files(records)
    verifier.check_pending(manifest["pending"])
    verifier.check_extra_files(extra_files)
    shards = {"present": 0, "expected": 0}
    if require_safetensors_index:
        shards = verifier.check_index(records, passed)

    result = {
        "changed": False,
        "files_checked": verifier.files_checked,
        "files_hashed": verifier.files_hashed,
        "bytes_hashed": verifier.bytes_hashed,
        "shards": shards,
        "commit": manifest.get("commit"),
        "repo_id": manifest.get("repo_id"),
    }
    if not verifier.problems:
        return result, None
    result["problems"] = verifier.problems
    count = len(verifier.problems)
    listing = "; ".join(f"{p['path']}: {p['reason']}" for p in verifier.problems)
    fix = HOW_TO_FIX
    if any("mismatch" in p["reason"] or "changed while" in p["reason"] for p in verifier.problems):
        fix += " (delete the files with a hash mismatch first: rsync skips files whose size and mtime match)"
    msg = (
        f"store {store} failed verification ({verify}, {verifier.files_checked} files checked, "
        f"{format_bytes(verifier.bytes_hashed)} hashed): {count} problem{'s' if count != 1 else ''}: "
        f"{listing}; {fix}"
    )
    return result, msg
