#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: git_apply
short_description: Apply patches in order to a git worktree; skip those it holds, name the files of one that fails
version_added: "0.2.0"
description:
  - For each of O(patches), in order, on top of the ones before it, in one module run, C(git apply --check --reverse)
    says whether the tree already holds it (then it is skipped and listed in RV(already)); else C(git apply --check)
    must pass, and C(git apply) applies it (listed in RV(applied)).
  - A patch that does not apply fails the task before it touches the tree, with RV(failed_patch), RV(failed_index)
    and the files git names (RV(files)) as data; the patches before it stay applied.
author:
  - sparkfold developers (@sparkfold)
options:
  path:
    description: The worktree the patches apply to.
    type: path
    required: true
  patches:
    description: Patch files on the node, in the order they apply.
    type: list
    elements: path
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Each patch is checked on the tree as it is; nothing is applied, so a patch that needs the ones before it
        applied is not checked against them.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - C(changed) is true when a patch was applied (in check mode, would be).
seealso:
  - name: git-apply
    description: The --check and --reverse options.
    link: https://git-scm.com/docs/git-apply
"""

EXAMPLES = r"""
- name: Apply the recipe's patches
  sparkfold.cluster.git_apply:
    path: /var/cache/sparkfold/engine-build/0123456789abcdef
    patches:
      - /opt/sparkfold/src/engine-patches/5e0a1d937c3b4f0e-0001-recipe.patch
  register: patched
"""

RETURN = r"""
applied:
  description: The patches applied (in check mode, that would be), in order.
  returned: always
  type: list
  elements: str
already:
  description: The patches the tree already holds (C(git apply --check --reverse) passes), skipped.
  returned: always
  type: list
  elements: str
failed_patch:
  description: The patch that does not apply.
  returned: failed
  type: str
failed_index:
  description: Its index in O(patches), from 0.
  returned: failed
  type: int
files:
  description: The files git names in its errors about that patch, each once, in the order it names them.
  returned: failed
  type: list
  elements: str
  sample: [src/main.zig]
stderr:
  description: What C(git apply --check) printed about that patch.
  returned: failed
  type: str
"""

import re

from ansible.module_utils.basic import AnsibleModule

# git apply's errors name a file as `error: patch failed: FILE:LINE`, `error: FILE: patch does not apply`,
# `error: FILE: No such file or directory`, `error: FILE: already exists in working directory`.
_ERROR_FILE_RE = re.compile(r"^error: (?:patch failed: )?([^:\n]+):", re.MULTILINE)


def conflict_files(stderr):
    """The files git apply names in its errors, each once, in order."""
    files = []
    for name in _ERROR_FILE_RE.findall(stderr):
        if name not in files:
            files.append(name)
    return files


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "patches": {"type": "list", "elements": "path", "required": True},
        },
        supports_check_mode=True,
    )
    path = module.params["path"]
    git = module.get_bin_path("git", required=True)
    applied, already = [], []
    for index, patch in enumerate(module.params["patches"]):
        rc, _out, _err = module.run_command([git, "-C", path, "apply", "--check", "--reverse", patch])
        if rc == 0:
            already.append(patch)
            continue
        rc, _out, err = module.run_command([git, "-C", path, "apply", "--check", patch])
        if rc != 0:
            files = conflict_files(err)
            module.fail_json(
                msg=f"patch {patch} ({index + 1} of {len(module.params['patches'])}) does not apply to {path}; "
                f"file(s): {', '.join(files) or 'see stderr'}",
                failed_patch=patch, failed_index=index, files=files, stderr=err.strip(),
                applied=applied, already=already, changed=bool(applied))
        if not module.check_mode:
            rc, _out, err = module.run_command([git, "-C", path, "apply", patch])
            if rc != 0:
                module.fail_json(msg=f"git apply {patch} failed after its check passed: {err.strip()}",
                                 failed_patch=patch, failed_index=index, files=conflict_files(err),
                                 stderr=err.strip(), applied=applied, already=already, changed=bool(applied))
        applied.append(patch)
    module.exit_json(changed=bool(applied), applied=applied, already=already)


if __name__ == "__main__":
    main()
