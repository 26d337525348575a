#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: venv_pins
short_description: A Python venv that holds exactly-pinned packages, read, compared and installed in one round trip
version_added: "0.2.0"
description:
  - Makes sure the venv at O(path) exists (created with C(python3 -m venv), or O(virtualenv_command)) and holds every
    package of O(packages) at exactly its pinned version.
  - Reads the installed versions first, with the venv's own python and C(importlib.metadata) in one subprocess (no
    pip start-up). When every pin is installed at its version, nothing else runs and C(changed) is false.
  - Otherwise runs the venv's pip once, with every pin on one command line - pip keeps the pins already there and
    installs the rest in one resolution, so a package that one pin needs never moves another pin (it fails instead).
    Then reads the versions again and fails unless every pin is now at its version.
  - Versions are compared as PEP 440 versions where the venv has C(packaging) (pip's own copy counts), so C(2.4) and
    C(2.4.0) are the same version, as for pip.
author:
  - sparkfold developers (@sparkfold)
options:
  path:
    description: The venv's directory. Created when it does not hold C(bin/python); its parent must be writable.
    type: path
    required: true
  packages:
    description:
      - The pins, each C(name==version) (an exact version, no extras, markers, wildcards or ranges). A pin that is not
        exact, or a package named twice, fails the task before anything runs.
    type: list
    elements: str
    required: true
  extra_args:
    description:
      - Further arguments for C(pip install), split as a shell would (e.g. C(--no-index --find-links /srv/wheels)).
    type: str
    default: ""
  virtualenv_command:
    description:
      - The command that creates the venv, split as a shell would; the venv's path is added as its last argument.
      - The default is the C(python3) found on the node's PATH with C(-m venv).
    type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Nothing is created or installed; the venv's versions are read when it exists. C(changed), RV(installed) and
        RV(changed_pins) say what a real run would do.
  diff_mode:
    support: full
    details: The pinned packages as C(name==version) lines, before and after, when something changes.
  platform:
    platforms: posix
notes:
  - The venv's python needs Python 3.8 or later (C(importlib.metadata)). On Debian and Ubuntu C(python3 -m venv) needs
    the C(python3-venv) package.
seealso:
  - module: ansible.builtin.pip
"""

EXAMPLES = r"""
- name: Install huggingface_hub and hf_xet, pinned, into their venv
  sparkfold.cluster.venv_pins:
    path: /opt/sparkfold/hf
    packages:
      - huggingface_hub==2.4.0
      - hf_xet==1.8.0
  register: hf_venv

- name: From local wheels only
  sparkfold.cluster.venv_pins:
    path: /opt/sparkfold/zig
    packages: [ziglang==0.17.0]
    extra_args: --no-index --find-links /srv/wheels
    virtualenv_command: /usr/bin/python3 -m venv
"""

RETURN = r"""
installed:
  description:
    - Each pinned package's version after the run, by its name as pinned (in check mode, the version a real run would
      leave).
  returned: always
  type: dict
  sample: {huggingface_hub: 2.4.0, hf_xet: 1.8.0}
changed_pins:
  description: The pins that were not installed at their version before the run (so pip ran, or in check mode would).
  returned: always
  type: list
  elements: str
  sample: [hf_xet==1.8.0]
created:
  description: Whether the venv was (in check mode, would be) created, or made again because it had no pip.
  returned: always
  type: bool
locations:
  description:
    - Each installed pinned package's directory (the real path of the site-packages that holds it), by its name as
      pinned; a package not installed (in check mode) is left out. A package's files lie under it, e.g.
      C(<location>/ziglang/zig).
  returned: always
  type: dict
  sample: {ziglang: /opt/sparkfold/zig/lib/python3.12/site-packages}
"""

import json
import os
import re
import shlex

from ansible.module_utils.basic import AnsibleModule

# A PEP 508 name (as pip takes it) and an exact PEP 440 version: no extras, markers, wildcards or ranges.
PIN = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([0-9][A-Za-z0-9.+!_-]*)$")

# Run with the venv's python: each pin's installed version, whether it is the pinned one, and where it lies.
READ = r"""
import importlib.metadata as metadata, importlib.util, json, os, sys
try:
    from packaging.version import InvalidVersion, Version
except ImportError:
    try:
        from pip._vendor.packaging.version import InvalidVersion, Version
    except ImportError:
        Version = None
out = {"pip": importlib.util.find_spec("pip") is not None, "packages": {}}
for name, want in json.loads(sys.argv[1]):
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        out["packages"][name] = {"version": None, "same": False, "location": None}
        continue
    have = dist.version
    same = have == want
    if not same and Version is not None:
        try:
            same = Version(have) == Version(want)
        except InvalidVersion:
            pass
    location = os.path.realpath(str(dist.locate_file("")))
    out["packages"][name] = {"version": have, "same": same, "location": location}
print(json.dumps(out))
"""


def parse_pins(packages):
    """([(name, version)], problems): the pins, and a message for each pin not exact or naming a package again."""
    pins, problems, seen = [], [], {}
    for pin in packages:
        found = PIN.match(pin.strip())
        if not found:
            name = re.split(r"[\s\[=<>!~;@]", pin.strip(), maxsplit=1)[0] or "NAME"
            problems.append(f"'{pin}' is not an exact pin: write {name}==VERSION (one version, no extras, markers, "
                            f"wildcards or ranges)")
            continue
        name, version = found.groups()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            problems.append(f"{name} is pinned twice ({seen[key]} and {pin.strip()}): keep one")
            continue
        seen[key] = pin.strip()
        pins.append((name, version))
    return pins, problems


def last_lines(text, count=8):
    return "\n".join((text or "").strip().splitlines()[-count:])


def read(module, python, pins):
    """What the venv holds: {"pip": bool, "packages": {name: {version, same, location}}}."""
    rc, out, err = module.run_command([python, "-I", "-c", READ, json.dumps(pins)])
    if rc != 0:
        module.fail_json(
            msg=f"could not read the packages of the venv with {python} (exit {rc}): {last_lines(err or out)}. "
                "Is its python broken (e.g. its base python3 removed)? Remove the venv and run again.",
            rc=rc, stdout=out, stderr=err)
    try:
        return json.loads(out)
    except ValueError:
        module.fail_json(msg=f"{python} printed no JSON when asked for the venv's packages: {last_lines(out)}")
    return None


def create(module, path, command):
    rc, out, err = module.run_command([*command, path])
    if rc != 0:
        module.fail_json(
            msg=f"could not create the venv {path} with '{' '.join(command)}' (exit {rc}): {last_lines(err or out)}. "
                "Is python3-venv installed (apt install python3-venv)?",
            rc=rc, stdout=out, stderr=err)


def lines(pins):
    return "".join(f"{name}=={version}\n" for name, version in pins)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            packages=dict(type="list", elements="str", required=True),
            extra_args=dict(type="str", default=""),
            virtualenv_command=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"].rstrip("/") or "/"
    pins, problems = parse_pins(module.params["packages"])
    if problems:
        module.fail_json(msg=f"Nothing was installed: {'; '.join(problems)}.")
    if not pins:
        module.fail_json(msg="packages is empty: name at least one pin (name==version)")
    try:
        extra_args = shlex.split(module.params["extra_args"])
        venv_command = shlex.split(module.params["virtualenv_command"] or "")
    except ValueError as exc:
        module.fail_json(msg=f"extra_args or virtualenv_command cannot be split as a shell would: {exc}")
    if not os.path.isabs(path):
        module.fail_json(msg=f"path {path} is not an absolute path")
    if os.path.exists(path) and not os.path.isdir(path):
        module.fail_json(msg=f"{path} exists and is not a directory: remove it, or choose another path for the venv")

    python = os.path.join(path, "bin", "python")
    exists = os.path.exists(python)
    found = read(module, python, pins) if exists else {"pip": False, "packages": {}}
    before = found["packages"]
    missing = [(name, version) for name, version in pins if not before.get(name, {}).get("same")]
    # A venv without pip (python3 -m venv failed half-way, without python3-venv's ensurepip) is made again.
    created = not exists or (bool(missing) and not found["pip"])
    result = {"changed": created or bool(missing), "created": created,
              "changed_pins": [f"{name}=={version}" for name, version in missing]}
    if result["changed"] and module._diff:
        result["diff"] = {
            "before_header": path if exists else f"{path} (absent)", "after_header": path,
            "before": lines((name, before[name]["version"]) for name, _version in pins
                            if before.get(name, {}).get("version")),
            "after": lines(pins)}

    if module.check_mode or not result["changed"]:
        after = before
        result["installed"] = {name: after[name]["version"] if after.get(name, {}).get("same") else version
                               for name, version in pins}
    else:
        if created:
            create(module, path, venv_command or [module.get_bin_path("python3", required=True), "-m", "venv"])
        if missing:
            command = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", *extra_args,
                       *(f"{name}=={version}" for name, version in pins)]
            rc, out, err = module.run_command(command)
            if rc != 0:
                module.fail_json(
                    msg=f"pip could not install {', '.join(result['changed_pins'])} into {path} (exit {rc}): "
                        f"{last_lines(err or out)}. Check that each pin exists at its version, that the pins agree "
                        "with each other's requirements, and that pip reaches its index (extra_args, /etc/pip.conf).",
                    rc=rc, stdout=out, stderr=err, cmd=" ".join(command), **result)
        after = read(module, python, pins)["packages"]
        wrong = [f"{name} is {after.get(name, {}).get('version') or 'not installed'}, pinned {version}"
                 for name, version in pins if not after.get(name, {}).get("same")]
        if wrong:
            module.fail_json(msg=f"after pip ran in {path}: {'; '.join(wrong)}", **result)
        result["installed"] = {name: after[name]["version"] for name, _version in pins}
    result["locations"] = {name: after[name]["location"] for name, _version in pins
                           if after.get(name, {}).get("location")}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
