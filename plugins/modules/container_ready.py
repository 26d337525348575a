#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_ready
short_description: Wait until an engine in a container answers a URL with a status, failing as soon as it stops
version_added: "0.2.0"
description:
  - Asks O(url) every O(interval) seconds until it answers with HTTP status O(status), as
    C(bertholomus/TensorFold tools/dsv41-zig/build_inputs.sh) waits for rank 0's first start
    (C(curl ... /v1/models) until C(200), every 10 s, with no time limit of its own).
  - Before each question it asks the container runtime whether the container O(name) still runs, and fails at once
    when it does not, with the last O(log_lines) lines of its log (as build_inputs.sh stops with C(rank 0 stopped),
    naming C(docker logs)).
  - Fails after O(timeout) seconds when the container still runs but never answered, naming how to read its log.
  - Changes nothing. In check mode it does not wait.
author:
  - sparkfold developers (@sparkfold)
options:
  runtime:
    description: The container runtime.
    type: str
    choices: [podman, docker]
    default: docker
  name:
    description: The container's name.
    type: str
    required: true
  url:
    description: The URL to ask, with C(GET).
    type: str
    required: true
  status:
    description: The HTTP status that says ready.
    type: int
    default: 200
  interval:
    description: Seconds between two questions.
    type: float
    default: 10
  timeout:
    description: Seconds to wait at most.
    type: float
    default: 86400
  log_lines:
    description: Lines of the container's log a failure shows.
    type: int
    default: 40
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: It does not wait; RV(status) is 0.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Wait until rank 0's first start answers /v1/models
  sparkfold.cluster.container_ready:
    runtime: docker
    name: sparkfold-inputs-0
    url: http://127.0.0.1:18891/v1/models
    status: 200
    interval: 10
    timeout: 14400
"""

RETURN = r"""
waited_s:
  description: Seconds it waited.
  returned: success
  type: float
  sample: 1234.5
status:
  description: The last HTTP status the URL answered, 0 when it did not answer.
  returned: always
  type: int
  sample: 200
"""

import time
from urllib.error import HTTPError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url


def running(module, runtime, name):
    """True when the container runs, False when it stopped or does not exist."""
    result = module.run_command([runtime, 'container', 'inspect', '--format', '{{.State.Running}}', name])
    return result[0] == 0 and result[1].strip() == 'true'


def ask(url):
    """The HTTP status url answers, 0 when nothing answers."""
    try:
        with open_url(url, method='GET', timeout=10, validate_certs=False) as resp:
            return resp.status
    except HTTPError as exc:
        return exc.code
    except Exception:  # pylint: disable=broad-except
        return 0


def main():
    module = AnsibleModule(
        argument_spec=dict(
            runtime=dict(type='str', choices=['podman', 'docker'], default='docker'),
            name=dict(type='str', required=True),
            url=dict(type='str', required=True),
            status=dict(type='int', default=200),
            interval=dict(type='float', default=10),
            timeout=dict(type='float', default=86400),
            log_lines=dict(type='int', default=40),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params['interval'] <= 0 or params['timeout'] <= 0:
        module.fail_json(msg='interval and timeout must be more than 0 seconds', status=0)
    if module.check_mode:
        module.exit_json(changed=False, status=0, waited_s=0.0)
    runtime = module.get_bin_path(params['runtime'], required=True)
    start = time.monotonic()
    status = 0
    while True:
        if not running(module, runtime, params['name']):
            logs = module.run_command([runtime, 'logs', '--tail', str(params['log_lines']), params['name']])
            module.fail_json(
                msg=f"the container {params['name']} stopped before {params['url']} answered {params['status']} "
                    f"(after {time.monotonic() - start:.0f} s); its last log lines follow, and "
                    f"'{params['runtime']} logs {params['name']}' shows all of them:\n{(logs[1] + logs[2]).strip()}",
                status=status)
        status = ask(params['url'])
        waited = time.monotonic() - start
        if status == params['status']:
            module.exit_json(changed=False, status=status, waited_s=round(waited, 1))
        if waited >= params['timeout']:
            module.fail_json(
                msg=f"{params['url']} did not answer {params['status']} within {params['timeout']:.0f} s (last: "
                    f"{status or 'no answer'}) while the container {params['name']} still runs: read "
                    f"'{params['runtime']} logs {params['name']}', or give it more time",
                status=status)
        time.sleep(params['interval'])


if __name__ == '__main__':
    main()
