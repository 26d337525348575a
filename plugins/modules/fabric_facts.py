#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fabric_facts
short_description: Read everything the fabric role checks on a node, in one round trip
version_added: "0.1.0"
description:
  - Reads, in one module run, what the fabric role compares with its plan on every run - what a
    M(sparkfold.cluster.roce_facts) task, a loop of C(ip -json -details addr show dev IF), M(ansible.builtin.getent),
    M(ansible.builtin.slurp) and M(ansible.builtin.stat) tasks would read one round trip each.
  - The RDMA devices, GID tables and netdevs of sysfs, as M(sparkfold.cluster.roce_facts) returns them
    (the fact C(sparkfold_roce)).
  - Every interface's live state as C(ip -json -details addr show) prints it (link flags, MTU and its limit,
    addresses), in C(ip)'s order.
  - The fabric SSH account (O(ssh_user)) and, under its home, the C(.ssh) directory, the key pair O(ssh_key_name)
    (the private key's state and the public half derived from it with C(ssh-keygen -y), never its text),
    C(known_hosts) and C(authorized_keys).
  - Each of O(paths) - whether it exists, what it is, its mode, owner, group and, for a regular file, its text.
  - Read-only; never reports a change. The role writes only what differs from this read.
author:
  - sparkfold developers (@sparkfold)
options:
  sysfs_root:
    description:
      - The directory that contains C(class/), normally C(/sys) (as M(sparkfold.cluster.roce_facts)).
    type: path
    default: /sys
  ssh_user:
    description:
      - The account whose C(.ssh) is read. The task fails when the passwd database has no such account.
    type: str
    default: root
  ssh_key_name:
    description:
      - The name of the key pair under the account's C(.ssh) (the private key; the public one adds C(.pub)).
    type: str
    default: sparkfold_fabric
  paths:
    description:
      - Absolute paths of other files to read (configuration files, the host key). A missing path is no error.
    type: list
    elements: str
    default: []
  max_bytes:
    description:
      - Largest file whose text is returned; a larger regular file fails the task, naming it.
    type: int
    default: 1048576
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    details: Reads the same in check mode.
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: linux
notes:
  - Needs C(ip) (iproute2) with C(-json). Without C(ssh-keygen), or for a key it cannot read without a passphrase,
    RV(ssh.key_public) is null.
seealso:
  - module: sparkfold.cluster.roce_facts
  - module: sparkfold.cluster.read_files
"""

EXAMPLES = r"""
- name: Read the fabric's state of this node
  sparkfold.cluster.fabric_facts:
    ssh_user: root
    ssh_key_name: sparkfold_fabric
    paths:
      - /etc/ssh/ssh_host_ed25519_key.pub
      - /etc/netplan/40-cx7.yaml
  register: __fabric_read

- name: Say the MTU of each interface
  ansible.builtin.debug:
    msg: "{{ __fabric_read.ip_links | items2dict(key_name='ifname', value_name='mtu') }}"
"""

RETURN = r"""
ansible_facts:
  description: The fact C(sparkfold_roce), exactly as M(sparkfold.cluster.roce_facts) returns it.
  returned: always
  type: dict
ip_links:
  description: What C(ip -json -details addr show) prints, one entry per interface, in its order.
  returned: always
  type: list
  elements: dict
  sample:
    - {ifname: enp1s0f1np1, flags: [BROADCAST, MULTICAST, UP, LOWER_UP], mtu: 9000, max_mtu: 9978,
       addr_info: [{family: inet, local: 192.168.100.2, prefixlen: 24}]}
ssh:
  description: The fabric SSH account and its files.
  returned: always
  type: dict
  contains:
    user:
      description: O(ssh_user).
      type: str
    uid:
      description: Its uid.
      type: int
    gid:
      description: Its primary gid.
      type: int
    home:
      description: Its home directory (the passwd database's).
      type: str
    dir:
      description: The C(.ssh) directory, as an entry of RV(files) without C(content).
      type: dict
    key:
      description: The private key, as an entry of RV(files) without C(content) (its text is never read back).
      type: dict
    key_public:
      description: The public half of the private key, C(type base64) (from C(ssh-keygen -y)); null when none.
      type: str
    key_pub:
      description: The public key file, as an entry of RV(files).
      type: dict
    known_hosts:
      description: C(known_hosts), as an entry of RV(files).
      type: dict
    authorized_keys:
      description: C(authorized_keys), as an entry of RV(files).
      type: dict
files:
  description: One entry per path of O(paths), keyed by the path as given.
  returned: always
  type: dict
  contains:
    exists:
      description: Whether the path exists.
      type: bool
    type:
      description: C(file), C(directory), C(link), C(other) or C(absent) (a link is followed).
      type: str
    mode:
      description: The permission bits as four octal digits, e.g. C(0644); absent when it does not exist.
      type: str
    owner:
      description: The owner's name (its uid as a string when it has none).
      type: str
    group:
      description: The group's name (its gid as a string when it has none).
      type: str
    content:
      description: For a regular file, its text (UTF-8, undecodable bytes replaced).
      type: str
  sample:
    /etc/netplan/40-cx7.yaml: {exists: true, type: file, mode: "0600", owner: root, group: root,
                               content: "network:\n  version: 2\n"}
"""

import json
import os
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.sparkfold.cluster.plugins.module_utils.node_files import read_entry
from ansible_collections.sparkfold.cluster.plugins.module_utils.roce import (
    SysfsError,
    gather_roce_facts,
)


def derive_public(module, key_path, key_entry):
    """The public half of a private key as 'type base64', or None (no key, no ssh-keygen, unreadable key)."""
    if key_entry.get("type") != "file":
        return None
    keygen = module.get_bin_path("ssh-keygen")
    if not keygen:
        return None
    rc, out, _err = module.run_command([keygen, "-y", "-P", "", "-f", key_path])
    fields = out.split()
    if rc != 0 or len(fields) < 2:
        return None
    return " ".join(fields[:2])


def read_ip_links(module):
    """Every interface as `ip -json -details addr show` prints it; fails the module naming ip's error."""
    ip = module.get_bin_path("ip", required=True)
    rc, out, err = module.run_command([ip, "-json", "-details", "addr", "show"])
    if rc != 0:
        module.fail_json(msg=f"ip -json -details addr show failed (rc {rc}): {err.strip() or out.strip()}")
    try:
        links = json.loads(out or "[]")
    except ValueError as exc:
        module.fail_json(msg=f"ip -json -details addr show printed no JSON ({exc}); is iproute2 too old for -json?")
    if not isinstance(links, list):
        module.fail_json(msg="ip -json -details addr show printed JSON that is not a list of interfaces")
    return links


def main():
    module = AnsibleModule(
        argument_spec={
            "sysfs_root": {"type": "path", "default": "/sys"},
            "ssh_user": {"type": "str", "default": "root"},
            "ssh_key_name": {"type": "str", "default": "sparkfold_fabric"},
            "paths": {"type": "list", "elements": "str", "default": []},
            "max_bytes": {"type": "int", "default": 1048576},
        },
        supports_check_mode=True,
    )
    params = module.params
    relative = [p for p in params["paths"] if not os.path.isabs(p)]
    if relative:
        module.fail_json(msg=f"paths must be absolute: {', '.join(relative)}")
    if not params["ssh_key_name"] or "/" in params["ssh_key_name"]:
        module.fail_json(msg=f"ssh_key_name {params['ssh_key_name']!r} must be a file name under ~/.ssh, without /")
    if not os.path.isdir(os.path.join(params["sysfs_root"], "class")):
        module.fail_json(
            msg=f"sysfs_root {params['sysfs_root']} has no class/ directory; set sysfs_root to the directory "
            "that contains class/ (default /sys)"
        )

    try:
        roce, warnings = gather_roce_facts(params["sysfs_root"])
    except SysfsError as exc:
        module.fail_json(msg=to_native(exc))
    for warning in warnings:
        module.warn(warning)

    try:
        account = pwd.getpwnam(params["ssh_user"])
    except KeyError:
        module.fail_json(
            msg=f"no account {params['ssh_user']} in the passwd database (fabric_ssh_user): create it, or name "
            "the account the engine ranks and weight copies use between the nodes"
        )

    problems = []

    def entry(path, content=True):
        found, problem = read_entry(path, params["max_bytes"], text=content, follow_links=True)
        if problem:
            problems.append(problem)
            return {}
        return found

    ssh_dir = os.path.join(account.pw_dir, ".ssh")
    key_path = os.path.join(ssh_dir, params["ssh_key_name"])
    key = entry(key_path, content=False)
    ssh = {
        "user": params["ssh_user"],
        "uid": account.pw_uid,
        "gid": account.pw_gid,
        "home": account.pw_dir,
        "dir": entry(ssh_dir, content=False),
        "key": key,
        "key_public": derive_public(module, key_path, key),
        "key_pub": entry(key_path + ".pub"),
        "known_hosts": entry(os.path.join(ssh_dir, "known_hosts")),
        "authorized_keys": entry(os.path.join(ssh_dir, "authorized_keys")),
    }
    files = {path: entry(path) for path in params["paths"]}
    if problems:
        module.fail_json(msg=f"cannot read {'; '.join(problems)} (run as root, or check the files)")

    module.exit_json(
        changed=False,
        ansible_facts={"sparkfold_roce": roce},
        ip_links=read_ip_links(module),
        ssh=ssh,
        files=files,
    )


if __name__ == "__main__":
    main()
