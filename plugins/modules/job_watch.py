#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The documentation of the action plugin plugins/action/job_watch.py; nothing runs from this file.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: job_watch
short_description: Follow an async job with progress lines until it ends, in one task
version_added: "0.2.0"
description:
  - Follows a job started with C(async) and C(poll=0) until it has finished, then returns the job's own result, as
    M(ansible.builtin.async_status) does, so the task can C(register) it and fail when the job failed.
  - Every O(interval) seconds it asks M(ansible.builtin.async_status) on the target, reads O(progress_file) there
    (with M(ansible.builtin.slurp)) when it is given, and prints one progress line on the controller, prefixed
    with the host's name.
  - The rounds run in a loop inside one task, so a job may run for days; a task file that includes itself each
    round instead stops with a RecursionError after about 250 rounds.
  - Gives up after O(timeout) seconds, naming the job, how long it waited, the last progress line and how to stop
    the job (C(kill) of its PID when the job or its progress file tells it, else the job's state file).
    The job itself keeps running until it ends or reaches its own C(async) limit.
  - Runs on the controller as an action plugin; it sends the two modules to the target each round.
author:
  - sparkfold developers (@sparkfold)
options:
  jid:
    description:
      - The C(ansible_job_id) of the async task.
      - May be empty only in check mode, where the async task did not run; the task is then skipped.
    type: str
    required: true
  interval:
    description:
      - Seconds between two rounds.
    type: float
    default: 15
  timeout:
    description:
      - Seconds to follow the job before failing. Set it a little above the async task's C(async), so that the
        job's own time limit is what normally ends a job that runs too long.
    type: float
    default: 86400
  progress_file:
    description:
      - A JSON file (an object) on the target that the job rewrites while it runs. Missing or unreadable, it counts
        as empty.
    type: str
  kind:
    description:
      - The progress line of a known job.
      - V(download), the progress file of M(sparkfold.cluster.hub_snapshot), e.g.
        C(0.52 of 1.04 GiB, 1 of 3 files, now model-00002-of-00003.safetensors).
      - "V(bench), the progress file of M(sparkfold.cluster.engine_bench), e.g.
        C(bench 3/12 steps, 84 s: decode code run 1/3; last: decode prose run 3: 41.2 tok/s)."
      - Without O(kind) and O(format), the line says how long the job has run, with the progress file's content.
    type: str
    choices: [download, bench]
  format:
    description:
      - "A Python format string for the progress line, filled with the progress file's keys, V(label) and
        V(waited_s) (seconds followed so far); a key the file lacks shows as C(?). For example
        C({phase}: {files_done} of {files_total} files)."
      - Mutually exclusive with O(kind).
    type: str
  label:
    description:
      - Text put before the line of O(kind), followed by a colon, or the V(label) field of O(format).
    type: str
    default: ""
  async_dir:
    description:
      - Directory of the job files on the target. Defaults to the shell's C(async_dir) setting
        (C(~/.ansible_async)), which is where the async task wrote it.
    type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: Skipped when O(jid) is empty (the async task did not run); a job started with C(check_mode=false) is
      followed as usual.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - The result is that of the job, as M(ansible.builtin.async_status) returns it, with RV(job_watch) added.
seealso:
  - module: ansible.builtin.async_status
  - name: Asynchronous actions and polling
    description: Starting a job with C(async) and C(poll=0).
    link: https://docs.ansible.com/ansible/latest/playbook_guide/playbooks_async.html
"""

EXAMPLES = r"""
- name: Start the download
  sparkfold.cluster.hub_snapshot:
    repo_id: sfxnz/DeepSeek-V4.1-Flash-EXL3
    revision: 3f1c2a9e0b7d4c5a8e6f1b2d3c4a5e6f7a8b9c0d
    local_dir: /srv/models/dsv41-exl3
    progress_file: /srv/models/dsv41-exl3/.sparkfold-progress.json
  async: 86400
  poll: 0
  register: download_job

- name: Follow it, one line every 15 seconds
  sparkfold.cluster.job_watch:
    jid: "{{ download_job.ansible_job_id }}"
    progress_file: /srv/models/dsv41-exl3/.sparkfold-progress.json
    kind: download
    label: sfxnz/DeepSeek-V4.1-Flash-EXL3
    timeout: 86520
  register: download

- name: Any long command, with a line of its own
  sparkfold.cluster.job_watch:
    jid: "{{ build_job.ansible_job_id }}"
    progress_file: /var/tmp/build-progress.json
    format: "build {label}: {done} of {total} targets after {waited_s} s"
    label: engine
    interval: 30
"""

RETURN = r"""
finished:
  description:
    - Whether the job has finished; V(true) when the job was followed.
    - The job's own return values (C(rc), C(msg), C(changed), those of its module) come with it, as the job
      wrote them.
  returned: when the job was followed
  type: bool
  sample: true
started:
  description: Whether the job had started.
  returned: when the job was followed
  type: bool
  sample: true
ansible_job_id:
  description: The job's id, O(jid).
  returned: when the job was followed
  type: str
  sample: "j826573215731.4169"
results_file:
  description: The job's state file on the target.
  returned: when the job was followed
  type: str
  sample: /root/.ansible_async/j826573215731.4169
job_watch:
  description: How the job was followed.
  returned: when the job was followed
  type: dict
  contains:
    rounds:
      description: Rounds run, the last one included (the one that found the job finished).
      type: int
      sample: 241
    waited_s:
      description: Seconds from the first round to the last.
      type: float
      sample: 3600.4
    last_line:
      description: The last progress line printed; empty when the job had finished at the first round.
      type: str
      sample: "0.52 of 1.04 GiB, 1 of 3 files"
"""
