#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: unit_verify
short_description: Verify systemd units with systemd-analyze and fail on what it says about them
version_added: "0.1.0"
description:
  - "Runs C(systemd-analyze verify --man=no UNIT...) once for all of O(units) and fails when it exits non-zero or
    when any line of its messages (its standard error) names one of the units (O(match)). systemd-analyze prints
    what it ignores in a unit - an unknown key, a bad value - as a message naming the unit and the line
    (C(alias.service:7: Unknown key name 'MysteryKey' in section 'Service', ignoring.), the example of
    systemd/systemd man/systemd-analyze.xml @00186ef2f7f542f337aee372068f153be0a29d62), and such a unit would start
    without that setting; so a message about one of these units is a failure whatever the exit status."
  - Messages about other units (those the verified ones pull in, the node's own) are returned in RV(messages) and
    do not fail the task.
  - Read-only; never reports a change, and verifies the same in check mode.
author:
  - sparkfold developers (@sparkfold)
options:
  units:
    description:
      - The units to verify, as systemd-analyze takes them - paths of unit files, or unit names looked up in
        O(unit_path) (a template's instance, C(sparkfold-engine@0.service), by its name).
    type: list
    elements: str
    required: true
  unit_path:
    description:
      - C(SYSTEMD_UNIT_PATH) for the run; directories separated by C(:), a trailing C(:) adding systemd's own unit
        directories after them. Units are looked up as systemd would otherwise.
    type: str
  match:
    description:
      - The strings that make a message line a problem when it holds one of them. By default each unit's name
        without its directory, its instance and its suffix (C(sparkfold-engine) for
        C(sparkfold-engine@0.service)), so a message about the template, an instance or a drop-in counts.
    type: list
    elements: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Verifies the same in check mode (it writes nothing).
  diff_mode:
    support: none
  platform:
    platforms: linux
notes:
  - Needs C(systemd-analyze) (the C(systemd) package) on the node's PATH.
seealso:
  - name: systemd-analyze(1)
    description: The verify command this module runs.
    link: https://www.freedesktop.org/software/systemd/man/latest/systemd-analyze.html
"""

EXAMPLES = r"""
- name: Verify the watchdog's service and timer where they are installed
  sparkfold.cluster.unit_verify:
    units:
      - /etc/systemd/system/sparkfold-watchdog.service
      - /etc/systemd/system/sparkfold-watchdog.timer

- name: Verify staged units before they are installed (their names looked up in the staging directory first)
  sparkfold.cluster.unit_verify:
    units: [sparkfold-engine@0.service, sparkfold-engine.target]
    unit_path: "/var/lib/sparkfold/units-staged:"
"""

RETURN = r"""
problems:
  description: The lines of its standard error that name one of the units (O(match)); empty when they verified clean.
  returned: always
  type: list
  elements: str
  sample:
    - "/etc/systemd/system/sparkfold-watchdog.service:9: Unknown key name 'OnFailurex' in section 'Unit', ignoring."
messages:
  description: Every line systemd-analyze printed (standard error, then standard output), about these units or others.
  returned: always
  type: list
  elements: str
  sample: []
rc:
  description: systemd-analyze's exit status.
  returned: always
  type: int
  sample: 0
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule


def default_match(units):
    """Each unit's name without its directory, instance and suffix, in the order given, once."""
    stems = []
    for unit in units:
        stem = re.split(r"[@.]", os.path.basename(unit.rstrip("/")), maxsplit=1)[0]
        if stem and stem not in stems:
            stems.append(stem)
    return stems


def main():
    module = AnsibleModule(
        argument_spec=dict(
            units=dict(type="list", elements="str", required=True),
            unit_path=dict(type="str"),
            match=dict(type="list", elements="str"),
        ),
        supports_check_mode=True,
    )
    units = module.params["units"]
    if not units:
        module.fail_json(msg="units is empty: name the unit files or units to verify")
    match = [text for text in (module.params["match"] or default_match(units)) if text]
    analyze = module.get_bin_path("systemd-analyze")
    if analyze is None:
        module.fail_json(msg="systemd-analyze is not on the PATH of this node: install systemd (it verifies units)")
    environ = {"SYSTEMD_UNIT_PATH": module.params["unit_path"]} if module.params["unit_path"] is not None else None
    rc, out, err = module.run_command([analyze, "verify", "--man=no", *units], environ_update=environ)
    said = [line.rstrip() for line in (err or "").splitlines() if line.strip()]
    messages = said + [line.rstrip() for line in (out or "").splitlines() if line.strip()]
    problems = [line for line in said if any(text in line for text in match)]
    result = dict(changed=False, rc=rc, problems=problems, messages=messages)
    if rc != 0 or problems:
        shown = problems or messages[-5:] or [f"no message, exit status {rc}"]
        module.fail_json(msg=f"systemd-analyze verify found problems in {', '.join(units)}: {' | '.join(shown)};"
                             " fix the unit (its template or the variables it is rendered from) and run again",
                         **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
