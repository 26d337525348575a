#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_node_facts
short_description: What the engine_service role checks on a node before it writes anything, read in one round trip
version_added: "0.2.0"
description:
  - Reads, without changing anything, the node's memory (C(MemTotal) of C(/proc/meminfo)), the bytes of the model
    store's C(*.safetensors) files, the program the running rank's unit runs, and the record of what served.
  - The engine_service role judges the recipe's capacity against the first two before any file is written, and
    compares the running program's build with the record (a pair that served before the record existed gets one).
  - With O(env_file), also the variables of an environment file another role wrote on the node (the fabric role's
    C(fabric.env), which records the bootstrap interface it named on a ring), parsed as systemd's
    C(EnvironmentFile=) reads it.
author:
  - sparkfold developers (@sparkfold)
options:
  model_dir:
    description:
      - The model store. The sizes of its C(*.safetensors) files (not hidden ones, not in subdirectories) are added
        up; a missing directory counts 0 bytes.
    type: path
    required: true
  unit:
    description: The rank's systemd unit, e.g. C(sparkfold-engine@0.service). Its main process's program is read.
    type: str
    required: true
  record:
    description: The JSON record of what served. Missing is no error (RV(record) is then null).
    type: path
    required: true
  env_file:
    description:
      - An environment file of C(KEY=VALUE) lines to read (comments and blank lines left out, a value's surrounding
        quotes removed, the last assignment of a name winning). Missing is no error (RV(env) is then null).
      - A line that is not a comment, blank or C(KEY=VALUE) fails the module, naming the line.
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Read this node's memory, the weights' size, the running rank's build and the record
  sparkfold.cluster.engine_node_facts:
    model_dir: /srv/models/dsv41-flash-exl3
    unit: sparkfold-engine@0.service
    record: /var/lib/sparkfold/engine/serving/serving.json
    env_file: /etc/sparkfold/fabric.env
  register: node
"""

RETURN = r"""
mem_total_kib:
  description: The node's memory, C(MemTotal) of C(/proc/meminfo), in KiB.
  returned: success
  type: int
  sample: 125829120
weights_bytes:
  description: The bytes of the model store's C(*.safetensors) files (0 when the store is missing or empty).
  returned: success
  type: int
  sample: 187904819200
running_exe:
  description: The program the unit's main process runs (C(/proc/PID/exe)), or an empty string when it runs none.
  returned: success
  type: str
  sample: /opt/sparkfold/engine/3c0666ef046d38c4/bin/tf-dsv41-lanes
record:
  description: The record of what served, parsed, or null when there is none.
  returned: success
  type: dict
env:
  description: The variables of O(env_file), by name; null when the file is missing, or when O(env_file) is not given.
  returned: success
  type: dict
  sample: {"SPARKFOLD_BOOTSTRAP_IFNAME": "enP7s7", "NCCL_SOCKET_IFNAME": "=enP7s7"}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils.env_file import parse_env


def mem_total_kib(meminfo="/proc/meminfo"):
    with open(meminfo) as handle:
        for line in handle:
            key, _sep, rest = line.partition(":")
            if key == "MemTotal":
                value, _sep, unit = rest.strip().partition(" ")
                if unit.strip() != "kB":
                    raise ValueError(f"MemTotal is in {unit.strip()!r}, not kB")
                return int(value)
    raise ValueError("it has no MemTotal line")


def weights_bytes(model_dir):
    total = 0
    try:
        entries = list(os.scandir(model_dir))
    except FileNotFoundError:
        return 0
    for entry in entries:
        if entry.name.endswith(".safetensors") and not entry.name.startswith(".") and entry.is_file():
            total += entry.stat().st_size
    return total


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_dir=dict(type="path", required=True),
            unit=dict(type="str", required=True),
            record=dict(type="path", required=True),
            env_file=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        memory = mem_total_kib()
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"could not read the node's memory from /proc/meminfo: {exc}")
    try:
        weights = weights_bytes(params["model_dir"])
    except OSError as exc:
        module.fail_json(msg=f"could not list the model store {params['model_dir']}: {exc}. Check that it is mounted "
                         "and readable (site.yml --tags weights fills it).")

    running = ""
    systemctl = module.get_bin_path("systemctl")
    if systemctl:
        rc, out, _err = module.run_command([systemctl, "show", "--property=MainPID", "--value", params["unit"]])
        pid = out.strip()
        if rc == 0 and pid.isdigit() and int(pid) > 0:
            try:
                running = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                running = ""  # it ended between the two reads

    record = None
    try:
        with open(params["record"]) as handle:
            text = handle.read()
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        module.fail_json(msg=f"could not read the record {params['record']}: {exc}")
    if text.strip():
        try:
            record = json.loads(text)
        except ValueError as exc:
            module.fail_json(msg=f"the record {params['record']} is not JSON ({exc}): remove it, and the next run "
                             "records what serves again")
        if not isinstance(record, dict):
            module.fail_json(msg=f"the record {params['record']} is not a JSON object: remove it, and the next run "
                             "records what serves again")

    env = None
    if params["env_file"]:
        try:
            with open(params["env_file"]) as handle:
                env = parse_env(handle.read())
        except FileNotFoundError:
            env = None
        except (OSError, UnicodeDecodeError) as exc:
            module.fail_json(msg=f"could not read the environment file {params['env_file']}: {exc}")
        except ValueError as exc:
            module.fail_json(msg=f"the environment file {params['env_file']} is not an environment file: {exc}. Remove "
                             "that line, or the file, and run the play of the role that writes it (site.yml without "
                             "--tags writes it again)")

    module.exit_json(changed=False, mem_total_kib=memory, weights_bytes=weights, running_exe=running, record=record,
                     env=env)


if __name__ == "__main__":
    main()
