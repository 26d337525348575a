#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: write_files
short_description: Write several small files of a node, or remove them, in one round trip
version_added: "0.1.0"
description:
  - For each of O(files), what M(ansible.builtin.copy) with C(content) does for one file - write the text when it
    differs, give the file the owner, group and mode asked for - or, with C(state=absent), what M(ansible.builtin.file)
    with C(state=absent) does; in one module run instead of one task per file (each task is a round trip to the node).
    Render templates on the controller, e.g. a C(content) of C("{{ lookup('ansible.builtin.template', 'unit.j2') }}").
  - Every file is checked first (an absolute path, a parent directory that exists, no directory or link in the way, an
    owner and group that exist); a problem fails the task before anything is written. Then every C(validate) command
    runs on the new text of the files that change; a refusal fails the task before anything is written.
  - Each file is written atomically - a temporary file in the same directory, given its owner, group and mode, then
    renamed over the file - so a reader never sees a partial file, and a private file is never readable by others,
    not even for a moment.
  - C(changed) is true only when a file's text, owner, group or mode (or its existence) changed; RV(results) says which.
author:
  - sparkfold developers (@sparkfold)
options:
  files:
    description: The files, written in this order.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute path of the file. Its parent directory must exist. A path named twice fails the task.
        type: path
        required: true
      content:
        description:
          - The file's text, written as given (UTF-8). Required with C(state=present).
        type: str
      state:
        description: C(present) writes the file; C(absent) removes it (nothing to do when it is not there).
        type: str
        choices: [present, absent]
        default: present
      owner:
        description: The file's owner (a name, or a uid as a string).
        type: str
        default: root
      group:
        description: The file's group (a name, or a gid as a string).
        type: str
        default: root
      mode:
        description:
          - The file's permission bits as octal digits, e.g. C("0644") (quote it in YAML). Symbolic modes are not taken.
        type: raw
        default: "0644"
      validate:
        description:
          - A command that checks the new text before it lands, as for M(ansible.builtin.copy); C(%s) is the temporary
            file's path. Runs only when the text changes, and not in check mode. Not run through a shell.
        type: str
      secret:
        description:
          - The text is a secret (an API key), so it never appears in the diff or in the result, and its value is hidden
            from the task's output wherever it would appear. Use it in place of C(no_log) on the whole task, which would
            also hide the diffs of the other files.
        type: bool
        default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Nothing is written or removed; C(changed) and RV(results) say what a real run would do. No C(validate).
      - A missing parent directory, owner or group is not a problem in check mode (the tasks before this one create
        them in a real run); such a file is reported as one that would be written.
  diff_mode:
    support: full
    details:
      - One C(before)/C(after) text pair per file whose text changes (a secret's text is not shown), and one pair of
        C(owner)/C(group)/C(mode) per file whose attributes change.
  platform:
    platforms: posix
seealso:
  - module: ansible.builtin.copy
  - module: ansible.builtin.template
  - module: sparkfold.cluster.read_files
"""

EXAMPLES = r"""
- name: Write the environment, the units and the API key in one round trip
  sparkfold.cluster.write_files:
    files:
      - path: /etc/sparkfold/engine.env
        content: "{{ lookup('ansible.builtin.template', 'engine.env.j2') }}"
      - path: /var/lib/sparkfold/engine-units/sparkfold-engine@.service
        content: "{{ lookup('ansible.builtin.template', 'sparkfold-engine@.service.j2') }}"
        validate: systemd-analyze verify --man=no %s
      - path: /etc/sparkfold/engine-api-key
        content: "{{ api_key }}\n"
        mode: "0600"
        secret: true
      - path: /etc/sparkfold/old.env
        state: absent
  register: written

- name: Restart only when the environment changed
  ansible.builtin.debug:
    msg: the environment changed
  when: >-
    written.results | selectattr('path', 'equalto', '/etc/sparkfold/engine.env')
    | selectattr('changed') | list | length > 0
"""

RETURN = r"""
results:
  description: One entry per file of O(files), in their order.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The file's path, as given.
      type: str
    changed:
      description: Whether the file was (in check mode, would be) written, removed, or given another owner, group, mode.
      type: bool
    content_changed:
      description: Whether its text (or its existence) changed.
      type: bool
    attributes_changed:
      description: Whether its owner, group or mode changed (and not its text).
      type: bool
  sample:
    - {path: /etc/sparkfold/engine.env, changed: true, content_changed: true, attributes_changed: false}
    - {path: /etc/sparkfold/engine-api-key, changed: false, content_changed: false, attributes_changed: false}
changed_paths:
  description: The paths whose file changed (in check mode, would change).
  returned: always
  type: list
  elements: str
  sample: [/etc/sparkfold/engine.env]
"""

import contextlib
import grp
import os
import pwd
import re
import shlex
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils.node_files import attributes

SECRET_BEFORE = "(the text of a secret file, not shown)\n"
SECRET_AFTER = "(the new text of a secret file, not shown)\n"


def _mode(value):
    """The permission bits of a mode option ("0644", "644" or an int), or None when it is not one."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value <= 0o7777 else None
    if isinstance(value, str) and re.fullmatch(r"0?[0-7]{3,4}", value):
        bits = int(value, 8)
        return bits if bits <= 0o7777 else None
    return None


def _id(lookup, value):
    """The uid or gid of a name (or of a number given as a string); None when it does not exist."""
    try:
        return lookup(value)[2]
    except KeyError:
        return int(value) if value.isdigit() else None


def plan(item, check_mode=False):
    """What to do for one file: (plan, problem). Reads the file; changes nothing.

    In check mode a missing directory, owner or group is no problem: the tasks before this one in a real run create
    them (check mode created nothing), so the file is reported as one that would be written.
    """
    path = item["path"]
    if not os.path.isabs(path):
        return None, f"{path} is not an absolute path"
    entry = {"item": item, "path": path, "absent": item["state"] == "absent"}
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        return None, f"{path}: {exc.strerror}"
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a link" if stat.S_ISLNK(info.st_mode) else "not a file"
        return None, f"{path} exists and is {kind}, not a regular file"
    entry["before"] = None
    if info is not None:
        try:
            with open(path, "rb") as handle:
                entry["before"] = handle.read()
        except OSError as exc:
            return None, f"{path}: {exc.strerror}"
        entry["before_attrs"] = attributes(info)
        entry["before_ids"] = (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode))
    if entry["absent"]:
        entry["content_changed"] = info is not None
        entry["attributes_changed"] = False
        return entry, None
    if item["content"] is None:
        return None, f"{path}: content is required with state=present"
    if not os.path.isdir(os.path.dirname(path)) and not check_mode:
        return None, f"{path} cannot be written: its directory {os.path.dirname(path)} does not exist"
    mode = _mode(item["mode"])
    if mode is None:
        return None, f"{path}: mode {item['mode']!r} is not octal permission bits such as '0644'"
    uid, gid = _id(pwd.getpwnam, item["owner"]), _id(grp.getgrnam, item["group"])
    if uid is None and not check_mode:
        return None, f"{path}: owner {item['owner']} does not exist on this node"
    if gid is None and not check_mode:
        return None, f"{path}: group {item['group']} does not exist on this node"
    entry["after"] = item["content"].encode("utf-8")
    entry["after_ids"] = (uid, gid, mode)
    entry["after_attrs"] = {"owner": item["owner"], "group": item["group"], "mode": f"{mode:04o}"}
    entry["content_changed"] = entry["before"] != entry["after"]
    entry["attributes_changed"] = (
        info is not None and not entry["content_changed"] and entry["before_ids"] != (uid, gid, mode))
    return entry, None


def diffs(entry):
    """The diff entries of one planned file (text, then attributes)."""
    out = []
    item, path = entry["item"], entry["path"]
    if entry["content_changed"]:
        def text(data, secret_text):
            if data is None:
                return ""
            return secret_text if item["secret"] else data.decode("utf-8", errors="replace")

        out.append({
            "before_header": path if entry["before"] is not None else f"{path} (absent)",
            "after_header": f"{path} (absent)" if entry["absent"] else path,
            "before": text(entry["before"], SECRET_BEFORE),
            "after": "" if entry["absent"] else text(entry["after"], SECRET_AFTER),
        })
    if entry["attributes_changed"]:
        before = {k: v for k, v in entry["before_attrs"].items() if v != entry["after_attrs"][k]}
        out.append({"before": {"path": path, **before},
                    "after": {"path": path, **{k: entry["after_attrs"][k] for k in before}}})
    return out


def write_temp(entry):
    """The new text in a temporary file next to the file, with its owner, group and mode; returns its path."""
    uid, gid, mode = entry["after_ids"]
    directory, name = os.path.split(entry["path"])
    fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(entry["after"])
            handle.flush()
            os.fsync(handle.fileno())
            if (os.geteuid(), os.getegid()) != (uid, gid):
                os.fchown(handle.fileno(), uid, gid)
            os.fchmod(handle.fileno(), mode)
    except BaseException:
        os.unlink(temp)
        raise
    return temp


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(
                type="list",
                elements="dict",
                required=True,
                options=dict(
                    path=dict(type="path", required=True),
                    content=dict(type="str"),
                    state=dict(type="str", choices=["present", "absent"], default="present"),
                    owner=dict(type="str", default="root"),
                    group=dict(type="str", default="root"),
                    mode=dict(type="raw", default="0644"),
                    validate=dict(type="str"),
                    secret=dict(type="bool", default=False),
                ),
            ),
        ),
        supports_check_mode=True,
    )
    items = module.params["files"]
    for item in items:
        if item["secret"] and item["content"]:
            module.no_log_values.add(item["content"])
            module.no_log_values.add(item["content"].strip())
    if not items:
        module.fail_json(msg="files is empty: name at least one file")
    paths = [item["path"] for item in items]
    twice = sorted({p for p in paths if paths.count(p) > 1})
    if twice:
        module.fail_json(msg=f"Nothing was written: named more than once: {', '.join(twice)}")

    planned, problems = [], []
    for item in items:
        entry, problem = plan(item, module.check_mode)
        if problem:
            problems.append(problem)
        else:
            planned.append(entry)
    if problems:
        module.fail_json(msg=f"Nothing was written: {'; '.join(problems)}.")

    temps = {}
    try:
        for entry in planned:
            if entry["absent"] or not entry["content_changed"] or module.check_mode:
                continue
            temps[entry["path"]] = write_temp(entry)
            command = entry["item"]["validate"]
            if command:
                if "%s" not in command:
                    module.fail_json(msg=f"Nothing was written: validate of {entry['path']} must hold %s: {command}")
                argv = [temps[entry["path"]] if part == "%s" else part.replace("%s", temps[entry["path"]])
                        for part in shlex.split(command)]
                rc, out, err = module.run_command(argv)
                if rc != 0:
                    module.fail_json(
                        msg=f"Nothing was written: {entry['path']} failed its validation ({command}, exit {rc}): "
                            f"{(err or out).strip()}",
                        rc=rc, stdout=out, stderr=err)
        for entry in planned:
            path = entry["path"]
            if module.check_mode:
                continue
            if entry["absent"]:
                if entry["content_changed"]:
                    os.unlink(path)
            elif entry["content_changed"]:
                os.replace(temps.pop(path), path)
            elif entry["attributes_changed"]:
                uid, gid, mode = entry["after_ids"]
                os.chown(path, uid, gid)
                os.chmod(path, mode)
    except OSError as exc:
        module.fail_json(msg=f"could not write {getattr(exc, 'filename', None) or 'a file'}: {exc.strerror or exc}")
    finally:
        for temp in temps.values():
            with contextlib.suppress(OSError):
                os.unlink(temp)

    results, diff = [], []
    for entry in planned:
        changed = entry["content_changed"] or entry["attributes_changed"]
        results.append({"path": entry["path"], "changed": changed, "content_changed": entry["content_changed"],
                        "attributes_changed": entry["attributes_changed"]})
        if changed:
            diff.extend(diffs(entry))
    changed_paths = [r["path"] for r in results if r["changed"]]
    module.exit_json(changed=bool(changed_paths), results=results, changed_paths=changed_paths, diff=diff)


if __name__ == "__main__":
    main()
