#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: read_files
short_description: Read several small files and links of a node in one round trip
version_added: "0.1.0"
description:
  - For each of O(paths), whether it exists and what it is (C(file), C(directory), C(link) or C(other)), its mode,
    owner and group (of the path itself, not of a link's target); for a link,
    where it points (as written, and resolved); for a regular file (or a link to one), its text - what a loop of
    M(ansible.builtin.slurp) and M(ansible.builtin.stat) tasks would read, in one module run instead of one per item.
  - A path that does not exist is no error (RV(files[path].exists) is false). A file larger than O(max_bytes), or one
    that cannot be read, fails the task naming it.
  - For each of O(filesystem_paths), the filesystem that holds it (or its nearest existing parent, for a directory not
    made yet) - its type, mount point and free space, what C(findmnt -T) and C(df) would show - in the same round
    trip, in RV(filesystems).
  - For each of O(mount_points), what the kernel has mounted exactly there and what C(/etc/fstab) mounts there - what
    C(findmnt --kernel) and C(findmnt --fstab) with C(--mountpoint) would show - in RV(mounts).
  - Read-only; never reports a change.
author:
  - sparkfold developers (@sparkfold)
options:
  paths:
    description:
      - Absolute paths to read. RV(files) is keyed by each path exactly as given here (no C(~) expansion).
    type: list
    elements: str
    required: true
  stat_paths:
    description:
      - Absolute paths of which only what they are is returned, never their text (a program, a large file), as
        M(ansible.builtin.stat) would; keyed in RV(files) like O(paths). O(max_bytes) does not apply to them.
    type: list
    elements: str
    default: []
  max_bytes:
    description:
      - Largest file whose text is returned; a larger regular file fails the task (these are stamps and records).
    type: int
    default: 1048576
  list_directories:
    description:
      - Also list each directory of O(paths) (not a link to one) in RV(files[path].entries), what a
        M(ansible.builtin.find) of it (not recursing) would find, in the same round trip.
    type: bool
    default: false
  filesystem_paths:
    description:
      - Absolute paths of which the filesystem is returned in RV(filesystems), keyed by each path as given. A path that
        does not exist yet is measured at its nearest existing parent (RV(filesystems[path].measured_at)).
      - The mount is the longest mount point of the kernel's mount table (C(/proc/self/mountinfo)) that holds the
        measured path (links resolved); the free space is C(os.statvfs)'s blocks available to an unprivileged writer,
        as C(df --output=avail) shows.
    type: list
    elements: str
    default: []
  mount_points:
    description:
      - Absolute mount points of which RV(mounts) says what is mounted there, keyed by each path as given. A trailing
        C(/) does not matter. The tables are O(mountinfo_path) and O(fstab_path); a node without fstab has no fstab
        entries.
    type: list
    elements: str
    default: []
  mountinfo_path:
    description:
      - The kernel's mount table read for O(filesystem_paths) and O(mount_points). Point it at a copy to read another
        machine's table, or in tests.
    type: path
    default: /proc/self/mountinfo
  fstab_path:
    description:
      - The fstab read for O(mount_points). Point it at a copy to read another machine's, or in tests.
    type: path
    default: /etc/fstab
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: ansible.builtin.slurp
  - module: ansible.builtin.stat
  - module: ansible.builtin.find
"""

EXAMPLES = r"""
- name: Read the stamp, the current link and the manifest
  sparkfold.cluster.read_files:
    paths:
      - /opt/sparkfold/engine/current
      - /opt/sparkfold/engine/current/sparkfold-stamp.json
      - /srv/models/dsv41/.sparkfold-manifest.json
    stat_paths:
      - /opt/sparkfold/hf/bin/python
  register: read

- name: Use the stamp when it is there
  ansible.builtin.debug:
    msg: "{{ (read.files['/opt/sparkfold/engine/current/sparkfold-stamp.json'].content | from_json).build_id }}"
  when: read.files['/opt/sparkfold/engine/current/sparkfold-stamp.json'].exists

- name: What the store is, which leftovers are there, and the filesystem that would hold the store
  sparkfold.cluster.read_files:
    paths: []
    stat_paths:
      - /srv/models
      - /etc/exports.d/sparkfold.exports
    filesystem_paths:
      - /srv/models
  register: store

- name: What is mounted at the store's mount point of a worker, and what fstab would mount there
  sparkfold.cluster.read_files:
    paths: []
    mount_points: [/srv/models]
  register: mounted

- name: The NFS mount carries proto=rdma
  ansible.builtin.assert:
    that: "'proto=rdma' in (mounted.mounts['/srv/models'].kernel | last).options"
  when: mounted.mounts['/srv/models'].kernel | length > 0

- name: Refuse a store with less than 400 GiB free
  ansible.builtin.assert:
    that: store.filesystems['/srv/models'].free_bytes >= 400 * 1024 ** 3
    fail_msg: "{{ store.filesystems['/srv/models'].mount_point }} has too little free space"
"""

RETURN = r"""
filesystems:
  description:
    - One entry per path of O(filesystem_paths), keyed by the path as given; empty without O(filesystem_paths).
  returned: always
  type: dict
  contains:
    measured_at:
      description: The path measured, the given path when it exists, else its nearest existing parent.
      type: str
    type:
      description:
        - The filesystem type as the kernel's mount table names it, C(type) or C(type.subtype) (C(ext4), C(overlay),
          C(fuse.fuse-overlayfs), C(nfs4)).
      type: str
    mount_point:
      description: Where that filesystem is mounted (octal escapes such as C(\040) decoded).
      type: str
    source:
      description: The mount source (a device, a server's export, or what the filesystem names there, C(none)).
      type: str
    free_bytes:
      description: Bytes free to an unprivileged writer (C(f_bavail * f_frsize)), as C(df --output=avail -B1).
      type: int
    size_bytes:
      description: Size of the filesystem in bytes (C(f_blocks * f_frsize)).
      type: int
  sample:
    /srv/models:
      measured_at: /srv
      type: ext4
      mount_point: /
      source: /dev/nvme0n1p2
      free_bytes: 2968006750208
      size_bytes: 3936820850688
mounts:
  description:
    - One entry per path of O(mount_points), keyed by the path as given; empty without O(mount_points).
  returned: always
  type: dict
  contains:
    kernel:
      description:
        - The mounts of the kernel's mount table at exactly that point, in its order (the last one is on top, what the
          path shows); empty when nothing is mounted there. Each has C(source), C(type), C(mount_point) and
          C(options), the mount's own options then its superblock's not already there (as C(findmnt)'s OPTIONS; an
          NFS mount's C(proto=rdma) and C(port=) are among them).
      type: list
      elements: dict
    fstab:
      description:
        - The lines of C(/etc/fstab) that mount at that point, in its order, each C(source), C(type) (null when the
          line has none), C(mount_point) and C(options) (as written, C(_netdev) included).
      type: list
      elements: dict
  sample:
    /srv/models:
      kernel:
        - source: "10.77.0.1:/srv/models"
          type: nfs4
          mount_point: /srv/models
          options: [rw, relatime, vers=4.2, proto=rdma, port=20049]
      fstab:
        - source: "10.77.0.1:/srv/models"
          type: nfs
          mount_point: /srv/models
          options: [_netdev, proto=rdma, port=20049]
files:
  description: One entry per path of O(paths), keyed by the path as given.
  returned: always
  type: dict
  contains:
    exists:
      description: Whether the path exists (a link counts, even one to nothing).
      type: bool
    type:
      description: C(file), C(directory), C(link), C(other), or C(absent).
      type: str
    mode:
      description:
        - The permission bits as four octal digits, e.g. C(0644) (of the path itself); absent when it does not exist.
      type: str
    owner:
      description: The owner's name (its uid as a string when it has no name); absent when it does not exist.
      type: str
    group:
      description: The group's name (its gid as a string when it has no name); absent when it does not exist.
      type: str
    target:
      description: For a link, what it points to as written (C(readlink)); else absent.
      type: str
    resolved:
      description:
        - For a link, the absolute path it resolves to (C(realpath)), as M(ansible.builtin.stat)'s C(lnk_source).
      type: str
    content:
      description:
        - For a regular file or a link to one, its text (UTF-8, undecodable bytes replaced); never for O(stat_paths).
      type: str
    entries:
      description:
        - With O(list_directories), for a directory, what it holds (not recursing), sorted by name; each
          C(name), C(path) (the directory's path joined with the name), C(type) (as RV(files[path].type), of
          the entry itself) and C(mtime) (seconds since the epoch, of the entry itself).
      type: list
      elements: dict
  sample:
    /opt/sparkfold/engine/current:
      exists: true
      type: link
      mode: "0777"
      owner: root
      group: root
      target: /opt/sparkfold/engine/3f0c2a9e41b7d655
      resolved: /opt/sparkfold/engine/3f0c2a9e41b7d655
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils.filesystems import (
    FSTAB,
    MOUNTINFO,
    filesystems,
    mounted_at,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.node_files import read_entry


def main():
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type="list", elements="str", required=True),
            stat_paths=dict(type="list", elements="str", default=[]),
            max_bytes=dict(type="int", default=1048576),
            list_directories=dict(type="bool", default=False),
            filesystem_paths=dict(type="list", elements="str", default=[]),
            mount_points=dict(type="list", elements="str", default=[]),
            mountinfo_path=dict(type="path", default=MOUNTINFO),
            fstab_path=dict(type="path", default=FSTAB),
        ),
        supports_check_mode=True,
    )
    given = (module.params["paths"] + module.params["stat_paths"] + module.params["filesystem_paths"]
             + module.params["mount_points"])
    relative = [p for p in given if not os.path.isabs(p)]
    if relative:
        module.fail_json(msg=f"paths must be absolute: {', '.join(relative)}")
    files, problems = {}, []
    wanted = [(path, True) for path in module.params["paths"]] + [(path, False) for path in module.params["stat_paths"]]
    for path, text in wanted:
        entry, problem = read_entry(path, module.params["max_bytes"], module.params["list_directories"], text)
        if problem:
            problems.append(problem)
        else:
            files[path] = entry
    found, fs_problems = filesystems(module.params["filesystem_paths"], module.params["mountinfo_path"])
    problems.extend(fs_problems)
    mounts, mount_problems = mounted_at(module.params["mount_points"], module.params["mountinfo_path"],
                                        module.params["fstab_path"])
    problems.extend(mount_problems)
    if problems:
        module.fail_json(msg=f"cannot read {'; '.join(problems)} (run as root, or check the files)", files=files,
                         filesystems=found, mounts=mounts)
    module.exit_json(changed=False, files=files, filesystems=found, mounts=mounts)


if __name__ == "__main__":
    main()
