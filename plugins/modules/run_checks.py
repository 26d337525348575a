#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: run_checks
short_description: Run the own check programs of downloaded artifacts, all in one round trip
version_added: "0.1.0"
description:
  - Runs each of O(checks) - a shell script shipped inside an artifact, such as a kernel kit's
    C(tools/verify_kit.sh) - with O(interpreter), in the check's directory, and returns what each did as data
    (whether its program is there at all, its exit status and the last lines of its output).
  - A program that is not there is not run and is no error (RV(results[].missing)); a check that fails is no error
    either. The caller decides (the weights role refuses a failed check, and a missing program outside check
    mode).
  - The programs only read (they verify what was downloaded), so they run in check mode too; never reports a
    change.
author:
  - sparkfold developers (@sparkfold)
options:
  checks:
    description: The checks to run, in this order.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: What is checked, returned with the result.
        type: str
        required: true
      chdir:
        description: The directory the program runs in.
        type: path
        required: true
      argv:
        description:
          - The program, relative to O(checks[].chdir) or absolute, then its arguments.
        type: list
        elements: str
        required: true
  interpreter:
    description: The program that runs each check's script.
    type: str
    default: /bin/bash
  tail_lines:
    description: How many of the last lines of each check's standard output and standard error are returned.
    type: int
    default: 20
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The check programs only read; they run in check mode as well.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Run the kernel kit's own check
  sparkfold.cluster.run_checks:
    checks:
      - name: kernel kit
        chdir: /srv/kits/tensorfold/kit
        argv: [tools/verify_kit.sh]
  register: own_check

- name: Refuse a kit that fails its own check
  ansible.builtin.assert:
    that: item.rc == 0
    fail_msg: >-
      {{ item.name }} failed its own check (exit {{ item.rc }}):
      {{ (item.stdout_tail + item.stderr_tail) | last | default('') }}
    quiet: true
  loop: "{{ own_check.results }}"
  loop_control:
    label: "{{ item.name }}: {{ item.stdout_tail | last | default('no output') }}"
"""

RETURN = r"""
results:
  description: One entry per check of O(checks), in the same order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: O(checks[].name).
      type: str
    program:
      description: The program's absolute path.
      type: str
    missing:
      description: Whether the program is not there (not a regular file); it was then not run.
      type: bool
    rc:
      description: The program's exit status; null when it is missing.
      type: int
    stdout_tail:
      description: The last O(tail_lines) lines of its standard output (empty when missing).
      type: list
      elements: str
    stderr_tail:
      description: The last O(tail_lines) lines of its standard error (empty when missing).
      type: list
      elements: str
  sample:
    - name: kernel kit
      program: /srv/kits/tensorfold/kit/tools/verify_kit.sh
      missing: false
      rc: 0
      stdout_tail: ["kit OK"]
      stderr_tail: []
"""

import os

from ansible.module_utils.basic import AnsibleModule


def run_one(module, check, interpreter, tail):
    """The result of one check: its program run in its directory, or missing."""
    program = os.path.join(check["chdir"], check["argv"][0])
    result = {"name": check["name"], "program": program, "missing": not os.path.isfile(program), "rc": None,
              "stdout_tail": [], "stderr_tail": []}
    if result["missing"]:
        return result
    rc, out, err = module.run_command([interpreter, program, *check["argv"][1:]], cwd=check["chdir"])
    result.update(rc=rc, stdout_tail=(out or "").splitlines()[-tail:] if tail > 0 else [],
                  stderr_tail=(err or "").splitlines()[-tail:] if tail > 0 else [])
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            checks=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                chdir=dict(type="path", required=True),
                argv=dict(type="list", elements="str", required=True),
            )),
            interpreter=dict(type="str", default="/bin/bash"),
            tail_lines=dict(type="int", default=20),
        ),
        supports_check_mode=True,
    )
    empty = [check["name"] for check in module.params["checks"] if not check["argv"]]
    if empty:
        module.fail_json(msg=f"checks {', '.join(empty)} have an empty argv: give the program (and its arguments)")
    module.exit_json(changed=False, results=[run_one(module, check, module.params["interpreter"],
                                                     module.params["tail_lines"])
                                             for check in module.params["checks"]])


if __name__ == "__main__":
    main()
