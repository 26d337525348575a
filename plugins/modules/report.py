#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: report
short_description: Print a report (a table, a verdict) as plain text, even where the output hides ok results
version_added: "0.1.0"
description:
  - Prints O(msg) on the controller as it is, one line per line, with no YAML quoting or folding, and changes
    nothing.
  - The repository's C(ansible.cfg) hides ok results (C(display_ok_hosts=false) of P(ansible.builtin.default#callback)),
    so that a run that changes nothing prints a few dozen lines. What the sparkfold playbooks exist to show - the
    doctor's tables and verdict, the smoke table, the benchmark's table - is printed with this action instead of
    M(ansible.builtin.debug), so it shows either way. The ok result itself follows as any task's does.
  - Printed once for each host the task runs on; with C(run_once), once. Nothing is printed when the task has
    C(no_log).
  - The text goes to the controller's display directly, beside the stdout callback's output, as the progress
    lines of M(sparkfold.cluster.job_watch) do.
options:
  msg:
    description:
      - The report, as a text (its newlines kept) or as a list of lines.
    type: raw
    required: true
author:
  - sparkfold developers (@sparkfold)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.conn
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  become:
    support: none
  bypass_host_loop:
    support: none
  connection:
    support: none
  check_mode:
    support: full
  delegation:
    support: none
  diff_mode:
    support: none
  platform:
    platforms: all
seealso:
  - module: ansible.builtin.debug
"""

EXAMPLES = r"""
- name: Print this node's table
  sparkfold.cluster.report:
    msg: "{{ doctor_result.table }}"

- name: Give the verdict once for the play
  sparkfold.cluster.report:
    msg: "{{ doctor_verdict.text }}"
  run_once: true
"""

RETURN = r"""
report_lines:
  description: How many lines were printed.
  returned: unless no_log is set
  type: int
  sample: 19
msg:
  description: Why nothing was printed.
  returned: when no_log is set
  type: str
  sample: "the report is hidden: no_log is set on this task"
"""
