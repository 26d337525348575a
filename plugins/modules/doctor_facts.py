#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: doctor_facts
short_description: Read, in one pass, what is needed to tell whether a Spark serves as it should
version_added: "0.1.0"
description:
  - Reads on the node, in one call, what an operator asks for when the served model misbehaves, and returns it as
    the fact C(sparkfold_doctor). It judges nothing; the P(sparkfold.cluster.doctor_report#filter) filter does,
    on the controller, against the fabric plan and the recipe. The C(sparkfold.cluster.doctor) role runs both.
  - "Read: the RoCE devices, ports, GID tables and netdevs from sysfs (as M(sparkfold.cluster.roce_facts));
    the IPv4 addresses of every interface (C(ip -json address show)); one don't-fragment ping per entry of
    O(pings), all at once; MemTotal and MemAvailable; the free space and filesystem under each of O(space_paths);
    each of O(stores) against its manifest (as M(sparkfold.cluster.store_verify) with C(verify=manifest): size
    and mtime, no hashing of unchanged files); the state of each of O(units) and, for one that is not active,
    its last O(journal_lines) journal lines; one probe of the engine's C(/health) and C(/v1/models) (as
    M(sparkfold.cluster.engine_health) with C(wait=0)); with O(gpu), the driver and GPUs from nvidia-smi; the
    installed version of each of O(packages)."
  - Nothing it reads makes it fail; a reader that cannot read says why in its part of the fact.
  - Read-only; never reports a change, and runs the same in check mode.
author:
  - sparkfold developers (@sparkfold)
options:
  sysfs_root:
    description: The directory that contains C(class/), normally C(/sys).
    type: path
    default: /sys
  meminfo_path:
    description: The file to read memory from, normally C(/proc/meminfo).
    type: path
    default: /proc/meminfo
  pings:
    description:
      - "Pings to send, each C(ping -M do -s <size> -c 1 -I <interface> <address>): a frame of exactly the rail's
        MTU (C(size) = MTU - 28) that must not be fragmented."
    type: list
    elements: dict
    default: []
    suboptions:
      interface:
        description: The interface the ping leaves by.
        type: str
        required: true
      address:
        description: The peer's address on that rail.
        type: str
        required: true
      size:
        description: The ICMP payload in bytes.
        type: int
        required: true
      peer:
        description: The peer's name, returned with the result.
        type: str
      rail:
        description: The rail's name, returned with the result.
        type: str
  ping_timeout_s:
    description: Seconds each ping waits for its reply.
    type: int
    default: 2
  space_paths:
    description: Paths whose filesystem's free space is read (on the nearest existing parent when missing).
    type: list
    elements: path
    default: []
  stores:
    description: Directories checked against their C(.sparkfold-manifest.json).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: What the store is, returned with the result.
        type: str
        required: true
      path:
        description: The store directory.
        type: path
        required: true
      repo_id:
        description: The repository the manifest must record.
        type: str
      commit:
        description: The full commit the manifest must record (the recipe's pin).
        type: str
      require_safetensors_index:
        description: Every shard of C(model.safetensors.index.json) must be there too.
        type: bool
        default: true
  units:
    description: systemd units whose state is read.
    type: list
    elements: str
    default: []
  journal_lines:
    description: Journal lines returned for each unit of O(units) that is not active.
    type: int
    default: 12
  health:
    description:
      - The engine to probe once, on the node that serves its API (rank 0). Not probed when left out.
    type: dict
    suboptions:
      url:
        description: The engine's base URL.
        type: str
        required: true
      api_key:
        description: The engine's API key.
        type: str
      served_name:
        description: The model id C(/v1/models) must list.
        type: str
  health_timeout_s:
    description: Seconds each request of the health probe may take.
    type: float
    default: 5
  gpu:
    description: Read the driver and GPUs with nvidia-smi (false where there is no GPU, as in the lab).
    type: bool
    default: true
  nvidia_smi:
    description: Path of nvidia-smi; looked up on E(PATH) when left out.
    type: path
  packages:
    description: Debian packages whose installed version is read, such as C(libnccl2).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    details: It only reads, so it runs in check mode exactly as in a normal run.
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: linux
seealso:
  - module: sparkfold.cluster.roce_facts
  - module: sparkfold.cluster.store_verify
  - module: sparkfold.cluster.engine_health
  - module: sparkfold.cluster.gpu_facts
"""

EXAMPLES = r"""
- name: Read what the doctor needs on rank 0's node
  sparkfold.cluster.doctor_facts:
    pings:
      - {interface: enp1s0f1np1, address: 192.168.100.2, size: 8972, peer: spark-b, rail: rail0}
    space_paths: [/srv/models/dsv41-flash-exl3]
    stores:
      - name: model store
        path: /srv/models/dsv41-flash-exl3
        repo_id: Mia-AiLab/DeepSeek-V4.1-Flash-EXL3-2.9bpw
        commit: 64ba41b6c916a587db06eae2e19b7845f7be6e6b
    units: [sparkfold-engine@0.service]
    health:
      url: http://127.0.0.1:8000
      served_name: deepseek-v4.1-flash
    packages: [libnccl2]

- name: Judge it against the plan
  ansible.builtin.debug:
    msg: "{{ sparkfold_doctor.units[0].ActiveState }}, MemAvailable {{ sparkfold_doctor.memory.available_bytes }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to the host's variables.
  returned: always
  type: dict
  contains:
    sparkfold_doctor:
      description: What was read, one key per reader.
      returned: always
      type: dict
      contains:
        machine:
          description: The node's architecture (C(aarch64) on a Spark).
          type: str
          returned: always
        roce:
          description: As M(sparkfold.cluster.roce_facts) returns it, with C(error) (null when read).
          type: dict
          returned: always
        addresses:
          description: IPv4 addresses (C(a.b.c.d/nn)) of every interface, by interface name.
          type: dict
          returned: always
          sample: {enp1s0f1np1: [192.168.100.1/24]}
        pings:
          description: The entries of O(pings), each with C(ok) and C(detail) (why it failed).
          type: list
          elements: dict
          returned: always
        memory:
          description: C(total_bytes), C(available_bytes) (MemAvailable) and C(error).
          type: dict
          returned: always
        space:
          description:
            - One per O(space_paths) - C(path), C(measured) (the nearest existing parent), C(free_bytes),
              C(total_bytes), C(mount), C(fstype), C(error).
          type: list
          elements: dict
          returned: always
        stores:
          description:
            - One per O(stores) - C(name), C(path), C(ok), C(error) (the store could not be checked at all),
              C(problems) (C(path), C(reason)), C(shards) (C(present), C(expected)), C(commit), C(mount), C(fstype)
              and C(network_fs) (the store is on NFS or another network filesystem).
          type: list
          elements: dict
          returned: always
        units:
          description:
            - One per O(units) - C(unit), C(LoadState), C(ActiveState), C(SubState), C(Result), C(ExecMainStatus),
              C(NRestarts), C(journal) (the last lines when not active) and C(error).
          type: list
          elements: dict
          returned: always
        health:
          description: C(url), C(ready), C(state), C(detail) and C(health) (the body of C(/health)); null unprobed.
          type: dict
          returned: always
        gpu:
          description: C(driver_version), C(cuda_version), C(count), C(names) and C(error); null without O(gpu).
          type: dict
          returned: always
        packages:
          description: The installed version of each of O(packages), null when not installed.
          type: dict
          returned: always
          sample: {libnccl2: 2.29.3-1+cuda13.0}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils.doctor_probe import gather
from ansible_collections.sparkfold.cluster.plugins.module_utils.programs import program_runner


def main():
    module = AnsibleModule(
        argument_spec={
            "sysfs_root": {"type": "path", "default": "/sys"},
            "meminfo_path": {"type": "path", "default": "/proc/meminfo"},
            "pings": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "interface": {"type": "str", "required": True},
                    "address": {"type": "str", "required": True},
                    "size": {"type": "int", "required": True},
                    "peer": {"type": "str"},
                    "rail": {"type": "str"},
                },
            },
            "ping_timeout_s": {"type": "int", "default": 2},
            "space_paths": {"type": "list", "elements": "path", "default": []},
            "stores": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "path": {"type": "path", "required": True},
                    "repo_id": {"type": "str"},
                    "commit": {"type": "str"},
                    "require_safetensors_index": {"type": "bool", "default": True},
                },
            },
            "units": {"type": "list", "elements": "str", "default": []},
            "journal_lines": {"type": "int", "default": 12},
            "health": {
                "type": "dict",
                "options": {
                    "url": {"type": "str", "required": True},
                    "api_key": {"type": "str", "no_log": True},
                    "served_name": {"type": "str"},
                },
            },
            "health_timeout_s": {"type": "float", "default": 5},
            "gpu": {"type": "bool", "default": True},
            "nvidia_smi": {"type": "path"},
            "packages": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    params = dict(module.params)
    if params["gpu"] and not params["nvidia_smi"]:
        params["nvidia_smi"] = module.get_bin_path("nvidia-smi", opt_dirs=["/usr/sbin", "/sbin"])

    run = program_runner(module, opt_dirs=["/usr/sbin", "/sbin"])
    module.exit_json(changed=False, ansible_facts={"sparkfold_doctor": gather(run, params)})


if __name__ == "__main__":
    main()
