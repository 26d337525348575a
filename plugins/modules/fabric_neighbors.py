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
  - A port that hears this host's other port is cabled to it (a loop on one node) and says so; a port that hears
    nobody says whether it has a link (RV(links)), so a pulled cable is told from a peer that is not running.
  - A port that is administratively down (a fresh node, before the fabric's netplan) is brought up for the
    probe and down again after it (O(bring_up)); nothing else is changed.
  - With O(pings), also sends one don't-fragment ping of each entry, all at once, after the probe (the
    rails' reachability in the same round trip).
  - Read-only; never reports a change. Needs root (a raw packet socket).
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
  linger:
    description:
      - How long a node keeps announcing once each of its interfaces heard someone (its neighbours may have
        started the task a little later). Defaults to O(seconds).
      - A well cabled ring is done this long after its last node started the task.
    type: float
  bring_up:
    description: Bring an administratively down interface up for the probe, and down again after it.
    type: bool
    default: true
  pings:
    description:
      - Pings to send after the probe, each C(ping -M do -s <size> -c 1 -I <interface> <address>).
    type: list
    elements: dict
    default: []
    suboptions:
      interface:
        description: The interface the ping leaves by.
        type: str
        required: true
      address:
        description: The address pinged.
        type: str
        required: true
      size:
        description: Payload bytes (the MTU less 28 for a frame of exactly the MTU).
        type: int
        required: true
      peer:
        description: The peer's name, returned as given.
        type: str
  ping_timeout_s:
    description: Seconds each ping waits for its reply.
    type: int
    default: 2
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
links:
  description:
    - Interface -> its link as sysfs has it after the probe; C(carrier) false is a port without a link (a pulled
      cable, or the other end down), null while the port is administratively down.
  returned: always
  type: dict
  sample:
    enp1s0f0np0: {carrier: true, operstate: up, up: true, brought_up: false}
pings:
  description: The entries of O(pings), each with C(ok) and C(detail) (why it failed).
  returned: always
  type: list
  elements: dict
  sample:
    - {interface: enp1s0f0np0, address: 10.10.1.2, size: 8972, peer: spark-b, ok: true, detail: ""}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils.doctor_probe import ping_all
from ansible_collections.sparkfold.cluster.plugins.module_utils.fabric_probe import link_state, listen
from ansible_collections.sparkfold.cluster.plugins.module_utils.programs import program_runner


def main():
    module = AnsibleModule(
        argument_spec={
            'interfaces': {'type': 'list', 'elements': 'str', 'required': True},
            'host': {'type': 'str', 'required': True},
            'cluster': {'type': 'str', 'default': 'sparkfold'},
            'seconds': {'type': 'float', 'default': 4.0},
            'linger': {'type': 'float'},
            'bring_up': {'type': 'bool', 'default': True},
            'pings': {'type': 'list', 'elements': 'dict', 'default': [], 'options': {
                'interface': {'type': 'str', 'required': True},
                'address': {'type': 'str', 'required': True},
                'size': {'type': 'int', 'required': True},
                'peer': {'type': 'str'},
            }},
            'ping_timeout_s': {'type': 'int', 'default': 2},
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
    if params['linger'] is not None and not 0 < params['linger'] <= 60:
        module.fail_json(msg=f"linger must be within 0..60, got {params['linger']}")
    ip = module.get_bin_path('ip', opt_dirs=['/usr/sbin', '/sbin'], required=params['bring_up'])
    down = [name for name in params['interfaces'] if not link_state(params['sysfs_root'], name)['up']]
    raised = []
    try:
        for name in down if params['bring_up'] else []:
            rc, _out, err = module.run_command([ip, 'link', 'set', 'dev', name, 'up'])
            if rc != 0:
                module.fail_json(msg=f'could not bring {name} up for the probe: {err.strip()}')
            raised.append(name)
        heard = listen(params['interfaces'], params['host'], params['cluster'], params['seconds'],
                       sysfs_root=params['sysfs_root'], linger=params['linger'])
        links = {name: dict(link_state(params['sysfs_root'], name), brought_up=name in raised)
                 for name in params['interfaces']}
    except PermissionError as exc:
        module.fail_json(msg=f'a raw packet socket needs root (become: true): {exc}')
    except OSError as exc:
        module.fail_json(msg=f'could not probe the ports: {exc}')
    finally:
        for name in raised:
            module.run_command([ip, 'link', 'set', 'dev', name, 'down'])

    run = program_runner(module, opt_dirs=['/usr/sbin', '/sbin', '/bin', '/usr/bin'])
    pings = ping_all(run, params['pings'], params['ping_timeout_s'])
    module.exit_json(changed=False, neighbors=heard, links=links, pings=pings)


if __name__ == '__main__':
    main()
