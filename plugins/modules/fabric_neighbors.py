#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fabric_neighbors
short_description: Learn which node is at the other end of each ConnectX-7 cable
version_added: "0.2.0"
description:
  - Sends broadcast Ethernet frames (EtherType 0x88B5, IEEE local experimental) naming this host and the
    port they leave by, on every interface of O(interfaces), for O(seconds), and returns what each
    interface heard from the other hosts of the same O(cluster).
  - Runs below IP, so it needs no address; a frame is never routed, so what a port hears is the node at
    the other end of its cable. Run it on every node at once (one task, all hosts); a node hears only
    the nodes announcing while it listens.
  - Read-only; never reports a change. Needs root (a raw packet socket) and interfaces that are up.
author:
  - sparkfold developers (@sparkfold)
options:
  interfaces:
    description: The netdevs to probe, such as the two addressed ports of a ring node.
    type: list
    elements: str
    required: true
  host:
    description: The name this host announces (the inventory name).
    type: str
    required: true
  cluster:
    description: A name shared by the nodes of one cluster; frames of another cluster are ignored.
    type: str
    default: sparkfold
  seconds:
    description:
      - How long to announce and listen; long enough to cover the start of the task on every node.
      - A node keeps announcing this long past the moment each interface heard someone; an interface that heard
        nobody extends the window by this much, twice at most.
    type: float
    default: 4.0
  sysfs_root:
    description: The directory that contains C(class/net) (the interfaces' MAC addresses).
    type: path
    default: /sys
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
    platforms: linux
"""

EXAMPLES = r"""
- name: Learn who faces each ring port
  sparkfold.cluster.fabric_neighbors:
    interfaces: [enp1s0f0np0, enp1s0f1np1]
    host: "{{ inventory_hostname }}"
  register: ring_neighbors
"""

RETURN = r"""
neighbors:
  description: Interface -> what it heard, one entry per other host and port, sorted.
  returned: always
  type: dict
  sample:
    enp1s0f0np0:
      - {host: spark-b, interface: enp1s0f1np1, mac: "02:00:00:00:00:02"}
    enp1s0f1np1:
      - {host: spark-d, interface: enp1s0f0np0, mac: "02:00:00:00:00:07"}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils.fabric_probe import listen


def main():
    module = AnsibleModule(
        argument_spec={
            'interfaces': {'type': 'list', 'elements': 'str', 'required': True},
            'host': {'type': 'str', 'required': True},
            'cluster': {'type': 'str', 'default': 'sparkfold'},
            'seconds': {'type': 'float', 'default': 4.0},
            'sysfs_root': {'type': 'path', 'default': '/sys'},
        },
        supports_check_mode=True,
    )
    params = module.params
    if not params['interfaces']:
        module.fail_json(msg='interfaces is empty: name the ports to probe (for a ring, the two addressed ports)')
    if not 0 < params['seconds'] <= 60:
        module.fail_json(msg=f"seconds must be within 0..60, got {params['seconds']}")
    missing = [name for name in params['interfaces']
               if not os.path.isdir(os.path.join(params['sysfs_root'], 'class', 'net', name))]
    if missing:
        module.fail_json(msg=f"no such interface: {', '.join(missing)} (ip -br link lists this node's interfaces)")
    try:
        heard = listen(params['interfaces'], params['host'], params['cluster'], params['seconds'],
                       sysfs_root=params['sysfs_root'])
    except PermissionError as exc:
        module.fail_json(msg=f'a raw packet socket needs root (become: true): {exc}')
    except OSError as exc:
        module.fail_json(msg=f'could not probe the ports: {exc}')
    module.exit_json(changed=False, neighbors=heard)


if __name__ == '__main__':
    main()
