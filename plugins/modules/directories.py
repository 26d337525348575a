#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: directories
short_description: Make sure several directories exist with one owner, group and mode, in one round trip
version_added: "0.1.0"
description:
  - For each of O(paths), what M(ansible.builtin.file) with C(state=directory) does for one path - create it and its
    missing parents, then give it the owner, group and mode asked for - in one module run instead of a loop of them
    (each loop item is a round trip to the node).
  - Every path is checked first; a path that exists and is not a directory (nor a link to one) fails the task before
    anything is created or changed.
  - Parents created on the way get the same owner, group and mode, as M(ansible.builtin.file) gives them.
author:
  - sparkfold developers (@sparkfold)
options:
  paths:
    description:
      - Absolute paths of the directories, in the order they are made. A path named twice is handled once.
    type: list
    elements: path
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.files
attributes:
  check_mode:
    support: full
    details: Nothing is created or changed; RV(created) and C(changed) say what a real run would do.
  diff_mode:
    support: full
    details: One C(before)/C(after) pair per path that changes (state, owner, group, mode).
  platform:
    platforms: posix
notes:
  - C(changed) is true when a directory was created or an attribute of one was changed.
seealso:
  - module: ansible.builtin.file
"""

EXAMPLES = r"""
- name: Create the service's directories
  sparkfold.cluster.directories:
    paths:
      - /etc/sparkfold
      - /var/lib/sparkfold/units
      - /srv/sparkfold/inputs
    owner: root
    group: root
    mode: "0755"
"""

RETURN = r"""
created:
  description: The directories created (in check mode, that would be), parents first.
  returned: always
  type: list
  elements: str
  sample: [/var/lib/sparkfold, /var/lib/sparkfold/units]
changed_paths:
  description: The paths of O(paths) that were created or whose owner, group or mode changed (in check mode, would).
  returned: always
  type: list
  elements: str
  sample: [/var/lib/sparkfold/units]
"""

import os

from ansible.module_utils.basic import AnsibleModule


def _problems(paths):
    """Each path that is relative, or exists and is not a directory, or has a non-directory on its way."""
    problems = []
    for path in paths:
        if not os.path.isabs(path):
            problems.append(f"{path} is not an absolute path")
            continue
        probe = path
        while not os.path.lexists(probe):
            probe = os.path.dirname(probe)
        if not os.path.isdir(probe):
            kind = "a link to nothing" if os.path.islink(probe) else "a file, not a directory"
            if probe == path:
                problems.append(f"{path} exists and is {kind}")
            else:
                problems.append(f"{path} cannot be created: {probe} is {kind}")
    return problems


def _missing(path):
    """The directories to create for path, parents first (empty when it exists)."""
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        path = os.path.dirname(path)
    return list(reversed(missing))


def main():
    module = AnsibleModule(
        argument_spec=dict(paths=dict(type="list", elements="path", required=True)),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    paths = []
    for path in module.params["paths"]:
        path = os.path.normpath(path)
        if path not in paths:
            paths.append(path)
    if not paths:
        module.fail_json(msg="paths is empty: name at least one directory")
    problems = _problems(paths)
    if problems:
        module.fail_json(
            msg=f"Nothing was changed: {'; '.join(problems)}. Move what is in the way, or name other directories."
        )

    created, changed_paths, diffs = [], [], []
    for path in paths:
        missing = [d for d in _missing(path) if d not in created]
        diff = {"before": {"path": path}, "after": {"path": path}}
        changed = False
        if missing:
            diff["before"]["state"] = "absent"
            diff["after"]["state"] = "directory"
            for directory in missing:
                if not module.check_mode:
                    try:
                        os.mkdir(directory)
                    except OSError as exc:
                        module.fail_json(
                            msg=f"could not create {directory}: {exc} (created before it: "
                            f"{', '.join(created) or 'nothing'}); check the parent's permissions and free space",
                            created=created,
                        )
                    file_args = module.load_file_common_arguments(module.params, path=directory)
                    module.set_fs_attributes_if_different(file_args, True)
                created.append(directory)
            changed = True
        else:
            # A link to a directory: the directory's attributes, as M(ansible.builtin.file) (follow) has it.
            file_args = module.load_file_common_arguments(module.params, path=os.path.realpath(path))
            changed = module.set_fs_attributes_if_different(file_args, False, diff)
        if changed:
            changed_paths.append(path)
            diffs.append(diff)
    module.exit_json(changed=bool(changed_paths), created=created, changed_paths=changed_paths, diff=diffs)


if __name__ == "__main__":
    main()
