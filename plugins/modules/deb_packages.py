#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: deb_packages
short_description: Debian packages present, read with dpkg-query, installed with apt-get only when missing
version_added: "0.2.0"
description:
  - Makes sure every package of O(names) is installed (dpkg's status C(ii)), at its version where one is pinned.
  - Reads dpkg's database first, with one C(dpkg-query) call (milliseconds; no apt cache is opened). When every
    package is installed, nothing else runs and C(changed) is false. M(ansible.builtin.apt) opens the apt cache on
    every call, a few seconds of CPU per host even when nothing is missing; a run that changes nothing makes one
    such call per package list per node.
  - Otherwise refreshes the package lists when they are older than O(cache_valid_time) (or absent), runs
    C(apt-get install) once with every missing package, reads dpkg's database again and fails unless every package
    is now installed.
author:
  - sparkfold developers (@sparkfold)
options:
  names:
    description:
      - The packages, each C(name), C(name:arch) or C(name=version) (an exact Debian version, installed with
        C(apt-get install name=version), which may downgrade). A package named twice fails the task before anything
        runs.
      - Real package names only. A virtual package (one that only other packages provide) is never installed under
        its own name, so it fails the task after the install, naming it.
    type: list
    elements: str
    required: true
  cache_valid_time:
    description:
      - When a package must be installed, the package lists are refreshed first (C(apt-get update)) unless they are
        younger than this many seconds. C(0) refreshes them before every install. Nothing is refreshed when nothing
        is missing.
    type: int
    default: 86400
  install_recommends:
    description:
      - Whether apt installs the missing packages' recommended packages too. Unset leaves apt's own setting
        (C(APT::Install-Recommends), true on Debian and Ubuntu), as M(ansible.builtin.apt) does.
    type: bool
  lock_timeout:
    description: Seconds apt-get waits for dpkg's lock held by another apt or dpkg (unattended-upgrades, say).
    type: int
    default: 300
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Nothing is refreshed or installed; dpkg's database is read. C(changed) and RV(missing) say what a real run
      would install.
  diff_mode:
    support: full
    details: One line per package, C(name version) or C(name (not installed)), before and after.
  platform:
    platforms: posix
notes:
  - Needs C(dpkg-query) (Debian, Ubuntu and DGX OS have it), and C(apt-get) when something is missing.
seealso:
  - module: ansible.builtin.apt
"""

EXAMPLES = r"""
- name: Install the RDMA user space
  sparkfold.cluster.deb_packages:
    names: [rdma-core, ibverbs-utils, infiniband-diags]

- name: NCCL at the recipe's version (a downgrade when a newer one is installed)
  sparkfold.cluster.deb_packages:
    names: ["libnccl2=2.28.9-1+cuda13.0"]
    cache_valid_time: 0
"""

RETURN = r"""
installed:
  description: Each package's name (as given, without a version) and its installed version after the task.
  returned: success
  type: dict
  sample: {rdma-core: "44.0-2", ibverbs-utils: "44.0-2"}
missing:
  description: The packages (as given) that were not installed, or not at their pinned version, before the task.
  returned: success
  type: list
  elements: str
  sample: [infiniband-diags]
updated_cache:
  description: Whether the package lists were refreshed (C(apt-get update)).
  returned: success
  type: bool
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

# The two places apt records a refresh, in the order ansible.builtin.apt reads them.
_UPDATE_STAMPS = ("/var/lib/apt/periodic/update-success-stamp", "/var/lib/apt/lists")
_LISTS_DIR = "/var/lib/apt/lists"
_FORMAT = "${Package}\t${Architecture}\t${db:Status-Abbrev}\t${Version}\n"


def parse_spec(spec):
    """'name[:arch][=version]' -> (name, arch or None, version or None)."""
    name, _sep, version = spec.partition("=")
    name, _sep, arch = name.partition(":")
    return name.strip(), (arch.strip() or None), (version.strip() or None)


def read_installed(module, dpkg_query, specs):
    """{spec: version or None}: dpkg's installed version of each spec's package (None: not installed)."""
    names = sorted({(name + ":" + arch) if arch else name for name, arch, _v in specs.values()})
    # rc 1 when some name is unknown to dpkg: those simply have no line.
    rc, out, err = module.run_command([dpkg_query, "-W", "-f", _FORMAT, "--", *names])
    if rc not in (0, 1):
        module.fail_json(msg=f"dpkg-query could not read the package database (rc {rc}): {err.strip()}",
                         rc=rc, stderr=err)
    found = {}
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) != 4:
            continue
        package, arch, status, version = fields
        if status.startswith("ii"):
            found.setdefault(package, {})[arch] = version
    result = {}
    for spec, (name, arch, _version) in specs.items():
        by_arch = found.get(name, {})
        if arch:
            result[spec] = by_arch.get(arch) or by_arch.get("all")
        else:
            result[spec] = next(iter(sorted(by_arch.values())), None) if by_arch else None
    return result


def lists_age(now):
    for path in _UPDATE_STAMPS:
        try:
            return now - os.stat(path).st_mtime
        except OSError:
            continue
    return None


def have_lists():
    try:
        return any(name.endswith("_Packages") or "_Packages." in name for name in os.listdir(_LISTS_DIR))
    except OSError:
        return False


def by_name(specs, state):
    """{name[:arch]: version} of the installed packages of state (a spec's version pin left out)."""
    return {specs[spec][0] + (":" + specs[spec][1] if specs[spec][1] else ""): version
            for spec, version in state.items() if version}


def diff_lines(state):
    return "".join(f"{spec} {version or '(not installed)'}\n" for spec, version in sorted(state.items()))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            names=dict(type="list", elements="str", required=True),
            cache_valid_time=dict(type="int", default=86400),
            install_recommends=dict(type="bool"),
            lock_timeout=dict(type="int", default=300),
        ),
        supports_check_mode=True,
    )
    names = [n.strip() for n in module.params["names"] if n and n.strip()]
    if not names:
        module.fail_json(msg="names is empty: list the packages to install, e.g. names: [rsync]")
    specs = {}
    seen = {}
    for spec in names:
        name, arch, version = parse_spec(spec)
        if not name:
            module.fail_json(msg=f"'{spec}' names no package: write name, name:arch or name=version")
        key = (name, arch)
        if key in seen:
            module.fail_json(msg=f"{name} is named twice in names ('{seen[key]}' and '{spec}'): keep one")
        seen[key] = spec
        specs[spec] = (name, arch, version)

    dpkg_query = module.get_bin_path("dpkg-query", required=True)
    before = read_installed(module, dpkg_query, specs)

    def wanted(spec):
        version = specs[spec][2]
        return before[spec] is not None and (version is None or before[spec] == version)

    missing = [spec for spec in names if not wanted(spec)]
    result = dict(changed=bool(missing), missing=missing, updated_cache=False, installed=by_name(specs, before))
    if module._diff and missing:
        after = dict(before)
        after.update({spec: specs[spec][2] or "(to be installed)" for spec in missing})
        result["diff"] = dict(before=diff_lines(before), after=diff_lines(after))
    if not missing or module.check_mode:
        module.exit_json(**result)

    apt_get = module.get_bin_path("apt-get", required=True)
    env = dict(DEBIAN_FRONTEND="noninteractive", DEBCONF_NONINTERACTIVE_SEEN="true", LC_ALL="C")
    lock = ["-o", f"DPkg::Lock::Timeout={module.params['lock_timeout']}"]
    age = lists_age(time.time())
    if not have_lists() or age is None or age >= module.params["cache_valid_time"]:
        rc, out, err = module.run_command([apt_get, "-q", "update", *lock], environ_update=env)
        if rc != 0:
            module.fail_json(msg=f"apt-get update failed (rc {rc}) before installing {', '.join(missing)}: "
                             f"{(err or out).strip()[-800:]}. Check the node's apt sources (/etc/apt/sources.list*) "
                             "and its network, then run again.", rc=rc, stdout=out, stderr=err)
        result["updated_cache"] = True
    cmd = [apt_get, "-y", "-q", "install", *lock,
           "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
    if module.params["install_recommends"] is not None:
        cmd += ["-o", f"APT::Install-Recommends={'true' if module.params['install_recommends'] else 'false'}"]
    if any(specs[spec][2] for spec in missing):
        cmd.append("--allow-downgrades")
    rc, out, err = module.run_command([*cmd, "--", *missing], environ_update=env)
    if rc != 0:
        wanted_line = " ".join(missing)
        module.fail_json(msg=f"apt-get install {wanted_line} failed (rc {rc}): {(err or out).strip()[-800:]}. Run "
                         f"`apt-get install {wanted_line}` on the node to see why (a misspelt name, a version the apt "
                         "sources do not carry, a held or broken package).",
                         rc=rc, stdout=out, stderr=err, missing=missing)
    after = read_installed(module, dpkg_query, specs)
    still = [spec for spec in missing if after[spec] is None or (specs[spec][2] and after[spec] != specs[spec][2])]
    if still:
        module.fail_json(msg="apt-get installed without error, yet dpkg does not hold {} as asked. A virtual package "
                         "(one that others only provide) is never installed under its own name: name the real package "
                         "that provides it (apt-cache showpkg NAME lists them).".format(", ".join(still)),
                         missing=missing, installed=after)
    result["installed"] = by_name(specs, after)
    if module._diff:
        result["diff"] = dict(before=diff_lines(before), after=diff_lines(after))
    result["stdout"] = out
    module.exit_json(**result)


if __name__ == "__main__":
    main()
