#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: roce_facts
short_description: Gather RoCE devices, GID tables and netdevs from sysfs
version_added: "0.1.0"
description:
  - Reads C(<sysfs_root>/class/infiniband) and C(<sysfs_root>/class/net) and returns the RDMA devices,
    their ports, the non-empty GID table entries and every netdev, each with the RDMA device and port tied
    to it, as the fact C(sparkfold_roce).
  - Built for the ConnectX-7 of an NVIDIA DGX Spark, where each QSFP port shows up as two PCIe "twins"
    (for example C(rocep1s0f1) and C(roceP2p1s0f1)), each with its own netdev and GID table.
  - The RoCE v2 GID index of an address differs between nodes and drifts (3, then 4 or 5) when addresses are
    added. Use RV(ansible_facts.sparkfold_roce.ipv4_gids) to look the index up by IPv4 address instead of
    pinning it.
  - A GID slot is empty, and left out, when its GID is all zeros or when its C(gid_attrs/types) file is missing
    or unreadable (the kernel answers EINVAL for unused slots).
  - A host without RDMA devices (no or empty C(class/infiniband)) is not an error; the module returns
    RV(ansible_facts.sparkfold_roce.rdma_available=false), empty RV(ansible_facts.sparkfold_roce.devices) and
    RV(ansible_facts.sparkfold_roce.ipv4_gids), and still lists the netdevs of C(class/net), so interface names
    can be checked on such a host too. Without C(class/net), RV(ansible_facts.sparkfold_roce.netdevs) is empty.
  - With O(links), also sends don't-fragment pings of a full frame over each directed link, all at once, and asks
    the kernel which interface routes each peer address (C(ip -json route get)), in the same round trip; with
    O(counters), reads the error counters of port 1 of each named device. What they find is returned as data
    (RV(links), RV(port_counters)); the caller judges it (the fabric role's verification).
  - Read-only; never reports a change.
author:
  - sparkfold developers (@sparkfold)
options:
  sysfs_root:
    description:
      - The directory that contains C(class/), normally C(/sys).
      - Point it at a copy of a sysfs tree to inspect another machine's state or in tests.
      - The module fails when the path does not exist, is not a directory, or has no C(class/) directory.
    type: path
    default: /sys
  check_gids:
    description:
      - Also check the RoCE GIDs an engine will use on port 1 of each of O(check_gids.devices), and return the
        result as RV(gid_check). The module does not fail on what it finds; the caller decides (the fabric
        and engine_service roles fail once, for every node, with RV(gid_check.problems)).
      - With O(check_gids.index), each device's GID slot at that index must be the RoCE v2 GID of its rail
        address (O(check_gids.addresses)). The dsv41 Zig engine's RDMA ring uses index 5 on every
        C(TF_RDMA_DEVICES) device whatever C(NCCL_IB_GID_INDEX) says.
      - Without O(check_gids.index), the lowest index at which every device holds an IPv4 RoCE v2 GID is
        returned as RV(gid_check.common_index), each port must be ACTIVE, and there must be such an index (what the
        SGLang switchless-ring recipe's start script gives NCCL as C(NCCL_IB_GID_INDEX) on each node).
    type: dict
    suboptions:
      devices:
        description: The RDMA devices (port 1 of each), as the engine names them.
        type: list
        elements: str
        required: true
      index:
        description: The GID index the engine uses on every device, whatever NCCL picks.
        type: int
      addresses:
        description:
          - The rail address (IPv4) each device must carry at O(check_gids.index), in the order of
            O(check_gids.devices). Without it any IPv4 RoCE v2 GID passes.
        type: list
        elements: str
      why:
        description: Who uses the index, put in front of each problem about it (for example the engine and its source).
        type: str
        default: ""
  links:
    description:
      - Directed fabric links to check from this node, each pinged with C(ping -n -M do -s <mtu - 28> -c
        <ping_count> -W <ping_timeout_s> -I <interface> <address>) (a frame of exactly the MTU, 20 bytes of IPv4 and
        8 of ICMP header around the payload, that must not be fragmented), all at once; and the route to each
        address asked of the kernel.
    type: list
    elements: dict
    default: []
    suboptions:
      interface:
        description: The interface the link leaves by.
        type: str
        required: true
      address:
        description: The peer's address on that link.
        type: str
        required: true
      mtu:
        description: The link's MTU.
        type: int
        required: true
      peer:
        description: The peer's name, returned with the result.
        type: str
      name:
        description: The rail's name, returned with the result.
        type: str
      peer_interface:
        description: The peer's interface on that link, returned with the result.
        type: str
  ping_count:
    description: Pings sent over each of O(links); all must be answered.
    type: int
    default: 1
  ping_timeout_s:
    description: Seconds each ping of O(links) waits for its reply.
    type: int
    default: 2
  counters:
    description:
      - RDMA devices whose port 1 error counters (C(symbol_error), C(link_downed), C(link_error_recovery),
        C(port_rcv_errors)) are returned in RV(port_counters). A device that does not exist is left out.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: linux
notes:
  - Every netdev under C(class/net) appears under RV(ansible_facts.sparkfold_roce.netdevs), RDMA or not
    (C(lo), Wi-Fi and the 10GbE port included). Select the RDMA ones by their C(rdma_device).
  - IPv4-mapped GIDs are returned in dotted form (C(::ffff:192.168.100.11)) whatever the target's Python version.
seealso:
  - name: Linux kernel ABI, sysfs-class-infiniband
    description: The files this module reads under C(/sys/class/infiniband).
    link: https://www.kernel.org/doc/Documentation/ABI/stable/sysfs-class-infiniband
"""

EXAMPLES = r"""
- name: Gather RoCE facts
  sparkfold.cluster.roce_facts:

- name: Stop early when the node has no RDMA device
  ansible.builtin.assert:
    that: sparkfold_roce.rdma_available
    fail_msg: No RDMA device under /sys/class/infiniband; is the ConnectX-7 driver (mlx5_ib) loaded?

- name: Look up the RoCE v2 GID index of this node's rail address (never pin it globally)
  ansible.builtin.set_fact:
    nccl_ib_gid_index: "{{ sparkfold_roce.ipv4_gids[rail_ipv4].index }}"
  vars:
    rail_ipv4: 192.168.100.11

- name: Both twins of port 1 must run jumbo frames
  ansible.builtin.assert:
    that: sparkfold_roce.netdevs[item].mtu == 9000
  loop:
    - enp1s0f1np1
    - enP2p1s0f1np1

- name: The configured interfaces must exist, with or without RDMA devices (the lab has none)
  ansible.builtin.assert:
    that: item in sparkfold_roce.netdevs
    fail_msg: "No interface {{ item }} (have: {{ sparkfold_roce.netdevs.keys() | sort | join(', ') }})"
  loop:
    - enp1s0f1np1
    - enP2p1s0f1np1

- name: Names of the netdevs that carry an RDMA device
  ansible.builtin.set_fact:
    rdma_netdevs: >-
      {{ sparkfold_roce.netdevs | dict2items | rejectattr('value.rdma_device', 'none')
         | map(attribute='key') | list }}

- name: The dsv41 Zig engine's RDMA ring uses GID index 5 on each rail device; refuse any other layout
  sparkfold.cluster.roce_facts:
    check_gids:
      devices: [rocep1s0f1, roceP2p1s0f1]
      index: 5
      addresses: [192.168.100.11, 192.168.101.11]
      why: the engine's RDMA ring (TF_RDMA_DEVICES) uses GID index 5
  register: gids

- name: Stop with the problems found
  ansible.builtin.fail:
    msg: "{{ gids.gid_check.problems | join('; ') }}"
  when: gids.gid_check.problems | length > 0

- name: Jumbo pings and routes over each directed link, and the error counters, in the same round trip
  sparkfold.cluster.roce_facts:
    links:
      - {interface: enp1s0f1np1, address: 192.168.100.12, mtu: 9000, peer: spark-b, name: rail0}
    ping_count: 3
    counters: [rocep1s0f1]
  register: live

- name: Stop on a link whose jumbo ping failed
  ansible.builtin.fail:
    msg: "{{ item.peer }} via {{ item.interface }}: {{ item.ping_detail }}"
  loop: "{{ live.links | rejectattr('ping_ok') | list }}"

- name: Read a sysfs tree copied from another machine
  sparkfold.cluster.roce_facts:
    sysfs_root: /srv/captures/spark-b/sys
"""

RETURN = r"""
gid_check:
  description: What O(check_gids) found.
  returned: when O(check_gids) is set
  type: dict
  contains:
    index:
      description: O(check_gids.index), or null.
      returned: always
      type: int
      sample: 5
    common_index:
      description: The lowest GID index at which port 1 of every device holds an IPv4 RoCE v2 GID; null when none does.
      returned: always
      type: int
      sample: 3
    slots:
      description:
        - Each device's GID entry at O(check_gids.index) (as in the C(gids) lists of the facts), null when the slot is
          empty or the device missing, or when no index was given.
      returned: always
      type: dict
      sample:
        rocep1s0f1: {index: 5, gid: "::ffff:192.168.100.11", type: RoCE v2, netdev: enp1s0f1np1, ipv4: 192.168.100.11}
    problems:
      description: One sentence a problem, naming the device, what its table holds and the fix; empty when all is well.
      returned: always
      type: list
      elements: str
      sample: []
links:
  description:
    - One entry per link of O(links), in that order; each as given (C(interface), C(address), C(mtu), C(peer),
      C(name), C(peer_interface)) with C(ping_ok), C(ping_detail) (the lines of ping's output that say why it
      failed, else empty), C(route_dev) (the interface the kernel routes the address by, null when it has none)
      and C(route_error).
  returned: always
  type: list
  elements: dict
  sample:
    - {interface: enp1s0f1np1, address: 192.168.100.12, mtu: 9000, peer: spark-b, name: rail0,
       peer_interface: enp1s0f1np1, ping_ok: true, ping_detail: "", route_dev: enp1s0f1np1, route_error: null}
port_counters:
  description:
    - For each device of O(counters) that exists, the error counters of its port 1 (an int, null when the kernel has
      no such file).
  returned: always
  type: dict
  sample:
    rocep1s0f1: {symbol_error: 0, link_downed: 0, link_error_recovery: 0, port_rcv_errors: 0}
ansible_facts:
  description: Facts to add to the host's variables.
  returned: always
  type: dict
  contains:
    sparkfold_roce:
      description: RDMA devices, every netdev and the IPv4 to RoCE v2 GID map.
      returned: always
      type: dict
      contains:
        rdma_available:
          description: Whether C(class/infiniband) holds at least one RDMA device.
          returned: always
          type: bool
          sample: true
        devices:
          description:
            - RDMA devices keyed by name (C(rocep1s0f0)).
            - Each device has C(fw_ver), C(hca_type), C(node_guid) (null when unreadable), C(netdevs)
              (the names under C(device/net)) and C(ports), keyed by port number as a string (C("1")).
            - Each port has C(state) (V(ACTIVE), V(DOWN)), C(state_code) (V(4)), C(phys_state) (V(LinkUp)),
              C(phys_state_code) (V(5)), C(rate) (the raw text such as V(200 Gb/sec (4X HDR\))), C(rate_gbps)
              (V(200.0)), C(active_mtu) (null when the kernel has no such file), C(link_layer) (V(Ethernet)),
              C(netdev) (from the GID table, else the device's only C(device/net) entry, else null) and C(gids).
            - C(gids) lists the non-empty GID slots in index order, each with C(index), C(gid) (compressed IPv6
              text), C(type) (V(RoCE v2) or V(IB/RoCE v1)), C(netdev) and C(ipv4) (the address of an
              IPv4-mapped GID, else null).
            - On a Spark the table starts with the link-local C(fe80::) GID as RoCE v1 (index 0) and RoCE v2
              (index 1), then the IPv4-mapped GID of each address as RoCE v1 and RoCE v2 (indexes 2 and 3 on a
              fresh node). The sample shows only the IPv4-mapped entries.
          returned: always
          type: dict
          sample:
            rocep1s0f1:
              fw_ver: 28.44.1036
              hca_type: MT4129
              node_guid: 4cbb:4703:002c:7e11
              netdevs: [enp1s0f1np1]
              ports:
                "1":
                  state: ACTIVE
                  state_code: 4
                  phys_state: LinkUp
                  phys_state_code: 5
                  rate: 200 Gb/sec (4X HDR)
                  rate_gbps: 200.0
                  active_mtu: null
                  link_layer: Ethernet
                  netdev: enp1s0f1np1
                  gids:
                    - {index: 2, gid: "::ffff:192.168.102.11", type: IB/RoCE v1, netdev: enp1s0f1np1,
                       ipv4: 192.168.102.11}
                    - {index: 3, gid: "::ffff:192.168.102.11", type: RoCE v2, netdev: enp1s0f1np1,
                       ipv4: 192.168.102.11}
        netdevs:
          description:
            - Every netdev under C(class/net) (RDMA or not), keyed by name, each with C(mtu) (int), C(speed)
              (Mb/s; null when the link is down and the kernel reports -1 or refuses the read), C(operstate),
              C(address), C(rdma_device) and C(rdma_port).
            - C(rdma_device) names the RDMA device tied to the netdev through a port (the port's C(netdev) or a
              C(gid_attrs/ndevs) entry) or through its C(device/net); null when none is.
            - C(rdma_port) is the number (int) of that port; null when the netdev is tied through C(device/net)
              alone or not at all.
            - Empty when C(class/net) is missing.
          returned: always
          type: dict
          sample:
            enp1s0f1np1: {mtu: 9000, speed: 200000, operstate: up, address: "4c:bb:47:2c:7e:11",
                          rdma_device: rocep1s0f1, rdma_port: 1}
            enP7s7: {mtu: 1500, speed: 10000, operstate: up, address: "4c:bb:47:2c:70:01",
                     rdma_device: null, rdma_port: null}
        ipv4_gids:
          description:
            - IPv4 addresses that have a RoCE v2 GID, each with C(device), C(port) (int), C(index) (the GID
              index to give NCCL or C(ib_write_bw -x)), C(netdev) and C(gid).
            - When one address has RoCE v2 GIDs on two devices the first (by device name) is kept and the
              module warns.
          returned: always
          type: dict
          sample:
            192.168.102.11: {device: rocep1s0f1, port: 1, index: 3, netdev: enp1s0f1np1, gid: "::ffff:192.168.102.11"}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.sparkfold.cluster.plugins.module_utils.doctor_probe import ping_all, route_dev
from ansible_collections.sparkfold.cluster.plugins.module_utils.programs import program_runner
from ansible_collections.sparkfold.cluster.plugins.module_utils.roce import (
    SysfsError,
    check_gids,
    gather_roce_facts,
    read_port_counters,
)

# An IPv4 header (20 bytes) and an ICMP echo header (8) around the payload: a payload of MTU - 28 fills the frame.
IP_ICMP_HEADERS = 28


def check_links(module, links, count, timeout_s):
    """Each link with its ping's outcome and the interface the kernel routes its address by."""
    if not links:
        return []

    run = program_runner(module)  # PATH, then the sbin directories
    pings = ping_all(run, [dict(link, size=link["mtu"] - IP_ICMP_HEADERS) for link in links], timeout_s, count)
    checked = []
    for link, pinged in zip(links, pings):
        dev, error = route_dev(run, link["address"])
        checked.append(dict(link, ping_ok=pinged["ok"], ping_detail=pinged["detail"], route_dev=dev,
                            route_error=error))
    return checked


def main():
    module = AnsibleModule(
        argument_spec={
            "sysfs_root": {"type": "path", "default": "/sys"},
            "check_gids": {
                "type": "dict",
                "options": {
                    "devices": {"type": "list", "elements": "str", "required": True},
                    "index": {"type": "int"},
                    "addresses": {"type": "list", "elements": "str"},
                    "why": {"type": "str", "default": ""},
                },
            },
            "links": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "interface": {"type": "str", "required": True},
                    "address": {"type": "str", "required": True},
                    "mtu": {"type": "int", "required": True},
                    "peer": {"type": "str"},
                    "name": {"type": "str"},
                    "peer_interface": {"type": "str"},
                },
            },
            "ping_count": {"type": "int", "default": 1},
            "ping_timeout_s": {"type": "int", "default": 2},
            "counters": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    sysfs_root = module.params["sysfs_root"]

    if not os.path.exists(sysfs_root):
        module.fail_json(
            msg=f"sysfs_root {sysfs_root} does not exist; set sysfs_root to the directory that contains class/ "
            "(default /sys)"
        )
    if not os.path.isdir(sysfs_root):
        module.fail_json(
            msg=f"sysfs_root {sysfs_root} is not a directory; set sysfs_root to the directory that contains "
            "class/ (default /sys)"
        )
    if not os.path.isdir(os.path.join(sysfs_root, "class")):
        module.fail_json(
            msg=f"sysfs_root {sysfs_root} has no class/ directory; set sysfs_root to the directory that "
            "contains class/ (default /sys, not /sys/class)"
        )

    try:
        facts, warnings = gather_roce_facts(sysfs_root)
    except SysfsError as exc:
        module.fail_json(msg=to_native(exc))

    for warning in warnings:
        module.warn(warning)

    small = [link["interface"] for link in module.params["links"] if link["mtu"] <= IP_ICMP_HEADERS]
    if small:
        module.fail_json(msg=f"links over {', '.join(small)} have an MTU of {IP_ICMP_HEADERS} or less: give each link's"
                             " MTU (the rail's, 9000 for jumbo frames)")
    if module.params["ping_count"] < 1 or module.params["ping_timeout_s"] < 1:
        module.fail_json(msg="ping_count and ping_timeout_s must be at least 1")
    counters = {}
    for device in module.params["counters"]:
        found = read_port_counters(sysfs_root, device)
        if found is not None:
            counters[device] = found
    result = {"changed": False, "ansible_facts": {"sparkfold_roce": facts},
              "links": check_links(module, module.params["links"], module.params["ping_count"],
                                   module.params["ping_timeout_s"]),
              "port_counters": counters}
    wanted = module.params["check_gids"]
    if wanted is not None:
        if wanted["index"] is not None and not 0 <= wanted["index"] <= 255:
            module.fail_json(msg=f"check_gids.index must be a GID index in 0..255, got {wanted['index']}")
        if wanted["addresses"] and len(wanted["addresses"]) != len(wanted["devices"]):
            module.fail_json(
                msg=f"check_gids.addresses has {len(wanted['addresses'])} entries for {len(wanted['devices'])} "
                "devices: give one rail address a device, in the same order"
            )
        result["gid_check"] = check_gids(
            facts, wanted["devices"], wanted["index"], wanted["addresses"], wanted["why"]
        )

    module.exit_json(**result)


if __name__ == "__main__":
    main()
