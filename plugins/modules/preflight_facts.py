#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: preflight_facts
short_description: Read what the preflight role checks on a node, in one round trip
version_added: "0.1.0"
description:
  - Reads, in one module run, what the C(sparkfold.cluster.preflight) role judges on the controller, and returns it
    as data; it judges nothing and fails on nothing it finds (a reader that cannot read says why in its part).
  - The node's clock (read first, and again at the end), C(timedatectl)'s C(NTPSynchronized), MemTotal, the
    interfaces under C(/sys/class/net), the free space of the filesystem that would hold O(store_dir) (its nearest
    existing parent when it is not made yet), each of O(resolve) looked up with C(getent hosts), and one C(ping) to
    each of O(pings), all at once.
  - Read-only; never reports a change, and reads the same in check mode.
author:
  - sparkfold developers (@sparkfold)
options:
  controller_time:
    description:
      - The controller's clock when the task was sent (C("{{ now().timestamp() }}"), templated with the task's
        arguments just before they go to the node), returned in RV(clock) as C(controller) beside the node's readings.
    type: float
  store_dir:
    description:
      - The directory that will hold the model weights; the filesystem that holds it, or its nearest existing parent,
        is measured.
    type: path
  resolve:
    description: Names looked up with C(getent hosts) (the hosts database, as every program on the node resolves).
    type: list
    elements: str
    default: []
  pings:
    description: Peers pinged once each, C(ping -n -q -c 1 -w <ping_timeout_s> <address>), all at once.
    type: list
    elements: dict
    default: []
    suboptions:
      peer:
        description: The peer's inventory name, returned with the result.
        type: str
        required: true
      address:
        description: The address pinged (the peer's management address).
        type: str
        required: true
  ping_timeout_s:
    description: The deadline of each ping in seconds (one reply within it).
    type: int
    default: 2
  meminfo_path:
    description: The file MemTotal is read from, normally C(/proc/meminfo).
    type: path
    default: /proc/meminfo
  sysfs_root:
    description: The directory that contains C(class/net), normally C(/sys).
    type: path
    default: /sys
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: linux
seealso:
  - module: sparkfold.cluster.read_files
"""

EXAMPLES = r"""
- name: Read the node
  sparkfold.cluster.preflight_facts:
    controller_time: "{{ now().timestamp() }}"
    store_dir: /srv/models
    resolve: [spark-a, spark-b]
    pings:
      - {peer: spark-b, address: 10.0.0.12}
  register: node

- name: The clock differs from the controller's by about
  ansible.builtin.debug:
    msg: "{{ node.clock.node - node.clock.controller }} s"
"""

RETURN = r"""
clock:
  description:
    - C(controller), O(controller_time) (null without it); C(node), the node's clock (seconds since the epoch) as the
      module started; C(node_end), as it ended (the time spent after the first reading, for the controller to
      subtract from the round trip).
  returned: always
  type: dict
  sample: {controller: 1764684000.021, node: 1764684000.125, node_end: 1764684000.318}
ntp:
  description:
    - "C(timedatectl show --property=NTPSynchronized --value): C(ok) (it answered), C(value) (V(yes) or V(no)) and
      C(error) (the first line of what it said otherwise, or that it is not installed)."
  returned: always
  type: dict
  sample: {ok: true, value: "yes", error: null}
memory:
  description: C(total_kib), MemTotal in KiB (null when unreadable), and C(error).
  returned: always
  type: dict
  sample: {total_kib: 127824516, error: null}
netdevs:
  description: C(names), the interfaces under C(class/net) sorted (null when the directory is missing), and C(error).
  returned: always
  type: dict
  sample: {names: [enP2p1s0f1np1, enp1s0f1np1, lo], error: null}
store:
  description:
    - For O(store_dir), C(measured_at) (the path measured), C(mount_point), C(type) and C(free_bytes) of the filesystem
      that holds it, or C(error); null without O(store_dir).
  returned: always
  type: dict
  sample: {measured_at: /srv, mount_point: /, type: ext4, free_bytes: 2968006750208, error: null}
resolve:
  description:
    - One entry per name of O(resolve), in order; C(name), C(rc) (getent's exit status, 2 for a name it does not
      know), C(address) (the first address of its answer, null on failure) and C(error).
  returned: always
  type: list
  elements: dict
  sample: [{name: spark-b, rc: 0, address: 10.0.0.12, error: null}]
pings:
  description:
    - One entry per peer of O(pings), in order; C(peer), C(address), C(rc) (ping's exit status, 1 for no reply within
      the deadline, 127 when ping is not installed) and C(error) (the first line of what ping said on failure).
  returned: always
  type: list
  elements: dict
  sample: [{peer: spark-b, address: 10.0.0.12, rc: 0, error: null}]
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils.filesystems import filesystems
from ansible_collections.sparkfold.cluster.plugins.module_utils.gpu import parse_meminfo
from ansible_collections.sparkfold.cluster.plugins.module_utils.programs import program_runner


def _first_line(*texts):
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()
    return ""


def read_ntp(run):
    rc, out, err = run(["timedatectl", "show", "--property=NTPSynchronized", "--value"])
    if rc != 0:
        return {"ok": False, "value": None, "error": _first_line(err, out) or f"exit status {rc}"}
    return {"ok": True, "value": _first_line(out), "error": None}


def read_memory(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            total = parse_meminfo(handle.read()).get("MemTotal")
    except OSError as exc:
        return {"total_kib": None, "error": f"cannot read {path}: {exc.strerror}"}
    return {"total_kib": total, "error": None if total is not None else f"{path} has no MemTotal line"}


def read_netdevs(sysfs_root):
    path = os.path.join(sysfs_root, "class", "net")
    try:
        return {"names": sorted(os.listdir(path)), "error": None}
    except OSError as exc:
        return {"names": None, "error": f"cannot list {path}: {exc.strerror}"}


def read_store(store_dir):
    if not store_dir:
        return None
    found, problems = filesystems([store_dir])
    if problems:
        return {"measured_at": None, "mount_point": None, "type": None, "free_bytes": None,
                "error": "; ".join(problems)}
    entry = found[store_dir]
    return {"measured_at": entry["measured_at"], "mount_point": entry["mount_point"], "type": entry["type"],
            "free_bytes": entry["free_bytes"], "error": None}


def resolve(run, name):
    rc, out, err = run(["getent", "hosts", name])
    fields = _first_line(out).split()
    if rc != 0 or not fields:
        return {"name": name, "rc": rc if rc != 0 else 2, "address": None, "error": _first_line(err, out) or None}
    return {"name": name, "rc": 0, "address": fields[0], "error": None}


def ping(run, item, timeout_s):
    rc, out, err = run(["ping", "-n", "-q", "-c", "1", "-w", str(timeout_s), item["address"]])
    return {"peer": item["peer"], "address": item["address"], "rc": rc,
            "error": None if rc == 0 else (_first_line(err) or _first_line(out) or f"exit status {rc}")}


def main():
    # The node's clock first, before anything else runs: the preflight role bounds the clock skew with it.
    node_time = time.time()
    module = AnsibleModule(
        argument_spec=dict(
            controller_time=dict(type="float"),
            store_dir=dict(type="path"),
            resolve=dict(type="list", elements="str", default=[]),
            pings=dict(type="list", elements="dict", default=[], options=dict(
                peer=dict(type="str", required=True),
                address=dict(type="str", required=True),
            )),
            ping_timeout_s=dict(type="int", default=2),
            meminfo_path=dict(type="path", default="/proc/meminfo"),
            sysfs_root=dict(type="path", default="/sys"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["ping_timeout_s"] < 1:
        module.fail_json(msg=f"ping_timeout_s must be at least 1, got {params['ping_timeout_s']}")
    if params["store_dir"] and not os.path.isabs(params["store_dir"]):
        module.fail_json(msg=f"store_dir must be an absolute path, got {params['store_dir']}")
    run = program_runner(module)
    result = dict(
        changed=False,
        ntp=read_ntp(run),
        memory=read_memory(params["meminfo_path"]),
        netdevs=read_netdevs(params["sysfs_root"]),
        store=read_store(params["store_dir"]),
        resolve=[resolve(run, name) for name in params["resolve"]],
        pings=[],
    )
    if params["pings"]:
        with ThreadPoolExecutor(max_workers=min(8, len(params["pings"]))) as pool:
            result["pings"] = list(pool.map(lambda item: ping(run, item, params["ping_timeout_s"]), params["pings"]))
    result["clock"] = {"controller": params["controller_time"], "node": node_time, "node_end": time.time()}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
