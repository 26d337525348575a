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
  - Every file the manifest lists under C(pending) (one that the last M(sparkfold.cluster.hub_snapshot) run could
    not download or repair) is a problem, since such a store is incomplete whatever the other files are.
  - With O(require_safetensors_index), every shard that C(model.safetensors.index.json) names in its
    C(weight_map) must be in the manifest and on disk.
  - Checks every file before it fails, then fails once, listing every problem with its path and reason.
  - When the manifest is missing or unusable, or names another repository or commit than O(repo_id) and O(commit),
    the module fails at once without reading the files.
  - With O(stores), several stores are verified in one module run (each with its own options, as O(path) and the
    options beside it describe them for one store); the module fails when any of them fails, naming each failed
    store's path and message, and returns every store's result in RV(stores) either way.
  - Read-only; never reports a change.
author:
  - sparkfold developers (@sparkfold)
options:
  path:
    description:
      - The store directory, the C(local_dir) of M(sparkfold.cluster.hub_snapshot) on the head.
      - Give O(path) or O(stores), not both.
    type: path
  stores:
    description:
      - Several stores to verify in one module run, each a dict of C(path) (required), C(verify), C(repo_id),
        C(commit), C(extra_files) and C(require_safetensors_index), with the meaning and the defaults of the
        options of the same names. O(max_workers) applies to each.
      - Give O(path) or O(stores), not both.
    type: list
    elements: dict
    suboptions:
      path:
        description: The store directory.
        type: path
        required: true
      verify:
        description: As O(verify).
        type: str
        default: manifest
        choices: [manifest, full]
      repo_id:
        description: As O(repo_id).
        type: str
      commit:
        description: As O(commit).
        type: str
      extra_files:
        description: As O(extra_files).
        type: list
        elements: dict
        default: []
        suboptions:
          path:
            description: Path of the file relative to the store (no C(..), not absolute).
            type: str
            required: true
          sha256:
            description: The sha256 of its content, 64 hex digits.
            type: str
            required: true
      require_safetensors_index:
        description: As O(require_safetensors_index).
        type: bool
        default: true
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

- name: Verify the model store and the Engram tables in one round trip
  sparkfold.cluster.store_verify:
    stores:
      - path: /srv/models/dsv41-flash-exl3
        commit: 3f1c2a9e0b7d4c5a8e6f1b2d3c4a5e6f7a8b9c0d
      - path: /var/lib/sparkfold/engram
        require_safetensors_index: false
  register: stores
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
safetensors:
  description:
    - The C(*.safetensors) regular files directly in O(path) (not in subdirectories, not hidden, not links), as a
      count; what M(ansible.builtin.find) with that pattern counts.
  returned: when the store could be read
  type: int
  sample: 40
stores:
  description:
    - With O(stores), one entry per store in their order, with C(path), C(ok) (whether it passed), C(msg) (why not,
      when it did not) and the returns above (C(files_checked), C(files_hashed), C(bytes_hashed), C(shards),
      C(commit), C(repo_id), C(safetensors), C(problems)) where the store could be read.
  returned: with O(stores)
  type: list
  elements: dict
  sample:
    - {path: /srv/models/dsv41-flash-exl3, ok: true, files_checked: 48, files_hashed: 0, safetensors: 40}
problems:
  description: On failure, every problem found, each with C(path) (relative to O(path)) and C(reason).
  returned: failure
  type: list
  elements: dict
  sample:
    - {path: model-00003-of-00040.safetensors, reason: missing}
    - {path: model.safetensors.index.json, reason: 39 of 40 shards present}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.sparkfold.cluster.plugins.module_utils.store_check import StoreError, verify_store

STORE_OPTIONS = {
    "path": {"type": "path", "required": True},
    "verify": {"type": "str", "default": "manifest", "choices": ["manifest", "full"]},
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
}


def count_safetensors(path):
    """The *.safetensors regular files directly in ``path``, not hidden: what ansible.builtin.find counts."""
    count = 0
    with os.scandir(path) as entries:
        for entry in entries:
            if (not entry.name.startswith(".") and entry.name.endswith(".safetensors")
                    and entry.is_file(follow_symlinks=False)):
                count += 1
    return count


def verify_one(store, max_workers):
    """Verify one store (a dict of STORE_OPTIONS); return ``(result, message or None)``, never raising StoreError."""
    try:
        result, msg = verify_store(
            store["path"],
            verify=store["verify"],
            max_workers=max_workers,
            repo_id=store["repo_id"],
            commit=store["commit"],
            extra_files=store["extra_files"],
            require_safetensors_index=store["require_safetensors_index"],
        )
    except StoreError as exc:
        return {"changed": False}, to_native(exc)
    result["safetensors"] = count_safetensors(store["path"])
    return result, msg


def main():
    module = AnsibleModule(
        argument_spec=dict(
            STORE_OPTIONS,
            path={"type": "path"},
            stores={"type": "list", "elements": "dict", "options": STORE_OPTIONS},
            max_workers={"type": "int", "default": 8},
        ),
        mutually_exclusive=[["path", "stores"]],
        required_one_of=[["path", "stores"]],
        supports_check_mode=True,
    )
    params = module.params
    if params["max_workers"] < 1:
        module.fail_json(msg=f"max_workers must be at least 1, got {params['max_workers']}")

    if params["stores"] is None:
        result, msg = verify_one(params, params["max_workers"])
        if msg is not None:
            module.fail_json(msg=msg, **result)
        module.exit_json(**result)

    stores = []
    failed = []
    for store in params["stores"]:
        result, msg = verify_one(store, params["max_workers"])
        result.pop("changed", None)
        entry = dict(result, path=store["path"], ok=msg is None)
        if msg is not None:
            entry["msg"] = msg
            failed.append(f"{store['path']}: {msg}")
        stores.append(entry)
    if failed:
        module.fail_json(msg=f"{len(failed)} of {len(stores)} stores failed verification: " + "; ".join(failed),
                         changed=False, stores=stores)
    module.exit_json(changed=False, stores=stores)


if __name__ == "__main__":
    main()
