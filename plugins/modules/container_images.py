#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_images
short_description: Whether a container runtime holds some images, and their image IDs
version_added: "0.2.0"
description:
  - Asks the container runtime, podman or docker, for each image of O(names) whether it holds it, and its image ID;
    an image it does not hold is reported absent, never a failure.
  - podman - C(podman image exists NAME) (exit 0 held, 1 not held, as C(containers.podman.podman_image_info) asks),
    then C(podman image inspect NAME), a JSON list whose C(Id) is the image ID.
  - docker - C(docker image ls --no-trunc --format '{{json .}}' NAME), one JSON object a line (none when not held),
    whose C(ID) is the image ID.
  - Changes nothing; runs in check mode too.
author:
  - sparkfold developers (@sparkfold)
options:
  runtime:
    description: The container runtime.
    type: str
    choices: [podman, docker]
    required: true
  executable:
    description: The runtime's program. Default - O(runtime) found on the PATH.
    type: path
  names:
    description: The images to look for, each a name with its tag (C(localhost/sparkfold-engine:previous)).
    type: list
    elements: str
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: It only reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Look for the stamped image and the one the ranks ran before
  sparkfold.cluster.container_images:
    runtime: podman
    names:
      - localhost/sparkfold-engine:0123456789abcdef
      - localhost/sparkfold-engine:fedcba9876543210
  register: __engine_image_found

- name: Pull it when it is not held
  ansible.builtin.command:
    argv: [podman, pull, "ghcr.io/example/engine@sha256:..."]
  changed_when: true
  when: not __engine_image_found.images['localhost/sparkfold-engine:0123456789abcdef'].present
"""

RETURN = r"""
images:
  description: Each image of O(names), by its name as given.
  returned: always
  type: dict
  contains:
    present:
      description: Whether the runtime holds the image.
      type: bool
    id:
      description: Its image ID as the runtime writes it (podman without, docker with C(sha256:)); empty when absent.
      type: str
  sample:
    localhost/sparkfold-engine:0123456789abcdef: {present: true, id: 3c1f0e0d6a1b...}
    localhost/sparkfold-engine:previous: {present: false, id: ""}
"""

import json

# podman image exists: exit 0 when held, 1 otherwise, 125 when the storage cannot be read (containers/podman
# docs/source/markdown/podman-image-exists.1.md @2027e004a7e892fac6a92cfd970dc0fe9945bba6).
# docker image ls [REPOSITORY[:TAG]] with a JSON format: one object a line with its ID, Repository and Tag (docker/cli
# docs/reference/commandline/image_ls.md @1f03d05b2d198aa8a8a4abfeb3689db5ff69aa1d); --no-trunc: the whole ID.
from ansible.module_utils.basic import AnsibleModule


def _fail(module, what, command, rc, out, err):
    module.fail_json(
        msg=f"{' '.join(command)} could not {what} (exit {rc}): {(err or out).strip()[-400:]}. Check that the "
            "container runtime works on this node (as root: its service or socket running, its storage readable).",
        rc=rc, stdout=out, stderr=err, cmd=command)


def _podman(module, executable, name):
    exists = [executable, "image", "exists", name]
    rc, out, err = module.run_command(exists)
    if rc == 1:
        return {"present": False, "id": ""}
    if rc != 0:
        _fail(module, "say whether it holds the image", exists, rc, out, err)
    inspect = [executable, "image", "inspect", name]
    rc, out, err = module.run_command(inspect)
    if rc != 0:
        _fail(module, "inspect the image", inspect, rc, out, err)
    try:
        return {"present": True, "id": json.loads(out)[0]["Id"]}
    except (ValueError, LookupError, TypeError):
        module.fail_json(msg=f"{' '.join(inspect)} printed no JSON list with an Id: {out.strip()[-400:]}", cmd=inspect)


def _docker(module, executable, name):
    listing = [executable, "image", "ls", "--no-trunc", "--format", "{{json .}}", name]
    rc, out, err = module.run_command(listing)
    if rc != 0:
        _fail(module, "list the image", listing, rc, out, err)
    try:
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        return {"present": bool(rows), "id": rows[0]["ID"] if rows else ""}
    except (ValueError, LookupError, TypeError):
        module.fail_json(msg=f"{' '.join(listing)} printed no JSON line with an ID: {out.strip()[-400:]}", cmd=listing)


def main():
    module = AnsibleModule(
        argument_spec={
            "runtime": {"type": "str", "choices": ["podman", "docker"], "required": True},
            "executable": {"type": "path"},
            "names": {"type": "list", "elements": "str", "required": True},
        },
        supports_check_mode=True,
    )
    runtime = module.params["runtime"]
    executable = module.params["executable"] or module.get_bin_path(runtime, required=True)
    read = _podman if runtime == "podman" else _docker
    images = {name: read(module, executable, name) for name in module.params["names"]}
    module.exit_json(changed=False, images=images)


if __name__ == "__main__":
    main()
