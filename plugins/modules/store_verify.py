#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: store_verify
short_description: Verify a model store against its sparkfold manifest, without the Hub
version_added: "0.1.0"
description:
  - Checks the files of a model store against C(<path>/.sparkfold-manifest.json), the manifest that
    M(sparkfold.cluster.hub_snapshot) writes on the head node. Workers receive the store, manifest included, by
    C(rsync) from the head; this module tells whether that copy is complete and intact.
  - Needs no network and no Hub access, and nothing beyond the Python standard library, so it runs with the
    system C(python3) of the node.
  - Every file of the manifest must exist in O(path) as a regular file (not a symlink) of the recorded size, and
    match the recorded hash (the sha256 of an LFS file, the git blob id of any other) as O(verify) decides.
  - With O(require_safetensors_index), every shard that C(model.safetensors.index.json) names in its
    C(weight_map) must be in the manifest and on disk.
  - Checks every file before it fails, then fails once, listing every problem with its path and reason.
  - When the manifest is missing or unusable, or names another repository or commit than O(repo_id) and O(commit),
    the module fails at once without reading the files.
  - Read-only; never reports a change.
author:
  - sparkfold developers (@sparkfold)
options:
  path:
    description:
      - The store directory, the C(local_dir) of M(sparkfold.cluster.hub_snapshot) on the head.
    type: path
    required: true
  verify:
    description:
      - V(manifest) trusts, without reading it, a file whose size and mtime (in nanoseconds) equal its manifest
        record; a file whose size matches but whose mtime differs is hashed. One C(stat) per file when nothing
        changed. A change that keeps size and mtime (a byte flipped and the mtime set back) is not seen.
      - V(full) hashes every file of the manifest, O(max_workers) at a time. Use it after a copy, since C(rsync -a)
        keeps the head's mtimes, so the copied manifest would vouch for the copies without reading them.
    type: str
    default: manifest
    choices: [manifest, full]
  max_workers:
    description:
      - Files hashed at the same time.
    type: int
    default: 8
  repo_id:
    description:
      - The repository the store must hold, C(owner/name). The module fails, naming both, when the manifest
        records another.
    type: str
  commit:
    description:
      - The full 40-hex commit the store must hold. The module fails, naming both, when the manifest records
        another.
    type: str
  extra_files:
    description:
      - Files that are not in the manifest but must be in the store, for example the tokenizer files the head
        pulled from the base model with M(sparkfold.cluster.tokenizer_pull).
      - Each must exist as a regular file with the given sha256. They are always hashed.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description:
          - Path of the file relative to O(path) (no C(..), not absolute).
        type: str
        required: true
      sha256:
        description:
          - The sha256 of its content, 64 hex digits.
        type: str
        required: true
  require_safetensors_index:
    description:
      - When C(model.safetensors.index.json) exists in O(path), every shard its C(weight_map) names must be in the
        manifest and pass verification; an unreadable index is a problem too.
      - When false the index is not read and both counts of RV(shards) are V(0).
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Verifies exactly as a normal run does; the module never writes anything.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - C(rsync) skips files whose size and mtime are unchanged, so copying again does not repair a file whose content
    differs from the head's with the same size and mtime; delete it on the worker first.
seealso:
  - module: sparkfold.cluster.hub_snapshot
  - module: sparkfold.cluster.tokenizer_pull
"""

EXAMPLES = r"""
- name: Verify the copy of the store against the head's manifest
  sparkfold.cluster.store_verify:
    path: /srv/models/dsv41-flash-exl3
    repo_id: sfxnz/DeepSeek-V4.1-Flash-EXL3
    commit: 3f1c2a9e0b7d4c5a8e6f1b2d3c4a5e6f7a8b9c0d

- name: Re-hash every file after rsync brought in new ones
  sparkfold.cluster.store_verify:
    path: /srv/models/dsv41-flash-exl3
    verify: full
    max_workers: 16

- name: The tokenizer files pulled from the base model must be there too
  sparkfold.cluster.store_verify:
    path: /srv/models/dsv41-flash-exl3
    extra_files:
      - path: tokenizer.json
        sha256: 2a1f0c5d7a1e3f4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a1b
      - path: tokenizer_config.json
        sha256: 5d41402abc4b2a76b9719d911017c592ae7b5a4c0c2d4e6f8a0b2c4d6e8f0a1b
  register: store

- name: Show what was read
  ansible.builtin.debug:
    msg: "{{ store.files_hashed }} files hashed, {{ store.shards.present }} of {{ store.shards.expected }} shards"
"""

RETURN = r"""
files_checked:
  description: Files checked, those of the manifest plus O(extra_files).
  returned: always
  type: int
  sample: 48
files_hashed:
  description: Files whose content was read and hashed (V(0) with O(verify=manifest) when nothing changed and
    O(extra_files) is empty).
  returned: always
  type: int
  sample: 0
bytes_hashed:
  description: Bytes read to hash those files.
  returned: always
  type: int
  sample: 0
shards:
  description:
    - Shards named by C(model.safetensors.index.json), C(expected), and those of them in the manifest that passed
      verification, C(present). Both V(0) without an index or with O(require_safetensors_index=false).
  returned: always
  type: dict
  sample: {present: 40, expected: 40}
commit:
  description: The commit the manifest records.
  returned: always
  type: str
  sample: 3f1c2a9e0b7d4c5a8e6f1b2d3c4a5e6f7a8b9c0d
repo_id:
  description: The repository the manifest records.
  returned: always
  type: str
  sample: sfxnz/DeepSeek-V4.1-Flash-EXL3
problems:
  description: On failure, every problem found, each with C(path) (relative to O(path)) and C(reason).
  returned: failure
  type: list
  elements: dict
  sample:
    - {path: model-00003-of-00040.safetensors, reason: missing}
    - {path: model.safetensors.index.json, reason: 39 of 40 shards present}
"""

import json
import os
import re
import stat
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
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


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "verify": {"type": "str", "default": "manifest", "choices": ["manifest", "full"]},
            "max_workers": {"type": "int", "default": 8},
            "repo_id": {"type": "str"},
            "commit": {"type": "str"},
            "extra_files": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "path": {"type": "str", "required": True},
                    "sha256": {"type": "str", "required": True},
                },
            },
            "require_safetensors_index": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    if params["max_workers"] < 1:
        module.fail_json(msg=f"max_workers must be at least 1, got {params['max_workers']}")

    try:
        result, msg = verify_store(
            params["path"],
            verify=params["verify"],
            max_workers=params["max_workers"],
            repo_id=params["repo_id"],
            commit=params["commit"],
            extra_files=params["extra_files"],
            require_safetensors_index=params["require_safetensors_index"],
        )
    except StoreError as exc:
        module.fail_json(msg=to_native(exc), changed=False)

    if msg is not None:
        module.fail_json(msg=msg, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
