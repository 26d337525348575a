#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_check
short_description: Check that an NCCL library carries the patches a recipe needs
version_added: "0.2.0"
description:
  - Reads the NCCL shared library at O(path) and looks for each string of O(markers) in it, as
    C(strings libnccl.so.2.30.7 | grep -c SWITCHLESS_RING_ONLY) does in the switchless-ring recipe
    (MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks docs/switchless-ring.md).
  - Fails, naming the missing markers and O(install_hint), when the file is missing, is not a shared
    library (ELF), or lacks a marker. A stock NCCL silently ignores C(NCCL_SWITCHLESS_RING_ONLY) and still
    fails on the tree transport of a four-node ring, so the check runs before any engine starts.
  - Read-only; never reports a change.
author:
  - sparkfold developers (@sparkfold)
options:
  path:
    description: The NCCL library the engine loads, such as C(/opt/nccl-2.30.7/libnccl.so.2.30.7).
    type: path
    required: true
  markers:
    description: Strings the library must contain; each found counts.
    type: list
    elements: str
    required: true
  install_hint:
    description: What to install when the check fails; appended to the message.
    type: str
    default: ''
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: The ring needs the switchless-cycle patch
  sparkfold.cluster.nccl_check:
    path: /opt/nccl-2.30.7/libnccl.so.2.30.7
    markers: [SWITCHLESS_RING_ONLY]
    install_hint: build NCCL 2.30.7 with FujitsuPolycom/sparkring nccl-2.30.7-switchless-cycle.patch
"""

RETURN = r"""
counts:
  description: Marker -> how many times the library holds it.
  returned: success
  type: dict
  sample: {SWITCHLESS_RING_ONLY: 3}
size:
  description: The library's size in bytes.
  returned: success
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule

CHUNK = 1 << 20


def count_markers(path, markers):
    """Marker -> occurrences in the file, read in chunks (a patched libnccl is ~64 MB)."""
    wanted = {marker: marker.encode('utf-8') for marker in markers}
    overlap = max((len(raw) for raw in wanted.values()), default=1) - 1
    counts = dict.fromkeys(markers, 0)
    tail = b''
    with open(path, 'rb') as handle:
        while True:
            chunk = handle.read(CHUNK)
            if not chunk:
                break
            window = tail + chunk
            for marker, raw in wanted.items():
                # Occurrences that end in the new bytes only: those within the old tail were counted.
                start = 0
                while True:
                    found = window.find(raw, start)
                    if found < 0:
                        break
                    if found + len(raw) > len(tail):
                        counts[marker] += 1
                    start = found + 1
            tail = window[-overlap:] if overlap else b''
    return counts


def main():
    module = AnsibleModule(
        argument_spec={
            'path': {'type': 'path', 'required': True},
            'markers': {'type': 'list', 'elements': 'str', 'required': True},
            'install_hint': {'type': 'str', 'default': ''},
        },
        supports_check_mode=True,
    )
    path, markers = module.params['path'], module.params['markers']
    hint = module.params['install_hint']
    todo = f'; install: {hint}' if hint else ''
    if not markers:
        module.fail_json(msg='markers is empty: name the strings the patched library must hold')
    if not os.path.isfile(path):
        module.fail_json(msg=f'NCCL library {path} does not exist{todo}')
    with open(path, 'rb') as handle:
        magic = handle.read(4)
    if magic != b'\x7fELF':
        module.fail_json(msg=f'{path} is not a shared library (no ELF header){todo}')
    counts = count_markers(path, markers)
    missing = [marker for marker in markers if counts[marker] == 0]
    if missing:
        module.fail_json(msg=f"NCCL library {path} lacks {', '.join(missing)}: it is not the patched NCCL "
                             f'this fabric needs (a stock NCCL ignores the setting and fails){todo}',
                         counts=counts)
    module.exit_json(changed=False, counts=counts, size=os.path.getsize(path))


if __name__ == '__main__':
    main()
