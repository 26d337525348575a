#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: containerfile_pin
short_description: Pin the base image a Containerfile builds on to a digest, in the Containerfile itself
version_added: "0.1.0"
description:
  - Rewrites every C(FROM) instruction of O(path) that names O(base) (literally, or through a global C(ARG) default
    such as C(ARG BASE=...) then C(FROM ${BASE})) to the base's repository at O(digest), so the build uses that
    image whatever the tag points to that day.
  - A C(--build-arg) pins nothing in a Containerfile that declares no C(ARG) of that name (the published
    Dockerfiles of the TensorFold Python engine and of the SGLang overlay write C(FROM name:tag) literally); the
    Containerfile is the one place every builder reads.
  - Refuses, changing nothing, a Containerfile none of whose C(FROM) instructions names O(base), and one with
    another outside image that no digest pins (the build would follow a moving tag there too). C(scratch) and
    earlier stages need no pin.
author:
  - sparkfold developers (@sparkfold)
options:
  path:
    description: The Containerfile (or Dockerfile) to pin, usually the copy in a staged build context.
    type: path
    required: true
  base:
    description:
      - The image the Containerfile builds on, as its C(FROM) names it (C(name:tag)), e.g. the recipe's
        C(container.image.build.base).
    type: str
    required: true
  digest:
    description: The digest to pin O(base) to (C(sha256:) and 64 hex digits).
    type: str
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Nothing is written; C(changed) and RV(from) say what a real run would do.
  diff_mode:
    support: full
    details: The Containerfile's text before and after.
  platform:
    platforms: posix
notes:
  - C(changed) is true when the Containerfile was rewritten; one already pinned to O(digest) is left as it is.
  - Only the escape character C(\) is supported (a C(# escape=) parser directive naming another is refused).
seealso:
  - name: Dockerfile reference, FROM and ARG
    description: How FROM reads global ARGs.
    link: https://docs.docker.com/reference/dockerfile/#understand-how-arg-and-from-interact
"""

EXAMPLES = r"""
- name: Pin the staged Dockerfile's base
  sparkfold.cluster.containerfile_pin:
    path: /var/lib/sparkfold/image/build-0123456789abcdef/Dockerfile
    base: nvcr.io/nvidia/pytorch:26.07-py3
    digest: sha256:2140e699b3beaf7f96a0081fd9c9406bc3832b435cdb60dfa2d261f7d2f34a1c
"""

RETURN = r"""
pinned:
  description: The reference the base is pinned to (its repository, without the tag, at O(digest)).
  returned: always
  type: str
  sample: nvcr.io/nvidia/pytorch@sha256:2140e699b3beaf7f96a0081fd9c9406bc3832b435cdb60dfa2d261f7d2f34a1c
from:
  description: The outside image of each C(FROM) after the pin, in order (stages and C(scratch) left out).
  returned: always
  type: list
  elements: str
  sample: [nvcr.io/nvidia/pytorch@sha256:2140e699b3beaf7f96a0081fd9c9406bc3832b435cdb60dfa2d261f7d2f34a1c]
"""

import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_DIRECTIVE = re.compile(r"^#\s*([A-Za-z]+)\s*=\s*(\S+)\s*$")


def repository(image):
    """name:tag -> name (a registry port's colon is kept); a digest is dropped too."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def instructions(text):
    """The Containerfile's instructions: (first line index, last line index, joined text), comments left out."""
    lines = text.split("\n")
    out = []
    start = None
    parts = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if start is None:
            if not stripped or stripped.startswith("#"):
                continue
            start = index
        elif stripped.startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            parts.append(line.rstrip()[:-1])
            continue
        parts.append(line)
        out.append((start, index, " ".join(part.strip() for part in parts).strip()))
        start, parts = None, []
    if start is not None:
        out.append((start, len(lines) - 1, " ".join(part.strip() for part in parts).strip()))
    return out


def _substitute(word, args):
    def value(match):
        name = match.group(1) or match.group(3)
        default = match.group(2)
        got = args.get(name)
        return got if got else (default or "")

    return _VAR.sub(value, word)


def plan(text, base, digest):
    """(new text, pinned ref, outside images after) or raise ValueError naming what is wrong."""
    for line in text.split("\n"):
        if not line.startswith("#"):
            break
        directive = _DIRECTIVE.match(line)
        if directive and directive.group(1).lower() == "escape" and directive.group(2) != "\\":
            raise ValueError(f"its escape directive is {directive.group(2)!r}; only \\ is supported")
    pinned = f"{repository(base)}@{digest}"
    lines = text.split("\n")
    global_args, stages, froms, matched, unpinned = {}, set(), [], 0, []
    replace = {}
    seen_from = False
    for first, last, instruction in instructions(text):
        words = instruction.split()
        keyword = words[0].upper()
        if keyword == "ARG" and not seen_from:
            for word in words[1:]:
                name, _sep, default = word.partition("=")
                global_args[name] = default.strip("\"'")
            continue
        if keyword != "FROM":
            continue
        seen_from = True
        flags = [w for w in words[1:] if w.startswith("--")]
        rest = [w for w in words[1:] if not w.startswith("--")]
        if not rest:
            raise ValueError(f"line {first + 1}: FROM names no image")
        image = _substitute(rest[0], global_args)
        alias = rest[2] if len(rest) >= 3 and rest[1].upper() == "AS" else ""
        if image.lower() in stages or image == "scratch":
            if alias:
                stages.add(alias.lower())
            continue
        if alias:
            stages.add(alias.lower())
        if image in (base, pinned) or (repository(image) == repository(base) and "@" in image):
            matched += 1
            wanted = " ".join(["FROM"] + flags + [pinned] + (["AS", alias] if alias else []))
            if [instruction] != [wanted] or first != last:
                replace[(first, last)] = wanted
            froms.append(pinned)
            continue
        if not DIGEST.match(image.rpartition("@")[2] or ""):
            unpinned.append(f"line {first + 1}: FROM {image}")
        froms.append(image)
    if matched == 0:
        named = ", ".join(froms) or "only scratch or earlier stages"
        raise ValueError(f"no FROM names {base} (it builds on {named})")
    if unpinned:
        raise ValueError(
            f"{'; '.join(unpinned)} is another outside image and no digest pins it, so the build would follow a "
            "moving tag there"
        )
    for (first, last), wanted in sorted(replace.items(), reverse=True):
        lines[first:last + 1] = [wanted]
    return "\n".join(lines), pinned, froms


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            base=dict(type="str", required=True),
            digest=dict(type="str", required=True),
        ),
        supports_check_mode=True,
    )
    path, base, digest = module.params["path"], module.params["base"], module.params["digest"]
    if not DIGEST.match(digest):
        module.fail_json(msg=f"digest must be sha256: and 64 hex digits, got {digest!r}: give the base image's digest")
    if "@" in base or not base.strip():
        module.fail_json(msg=f"base must be the image as FROM names it (name:tag), without a digest, got {base!r}")
    try:
        with open(path, "rb") as handle:
            before = handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg=f"cannot read the Containerfile {path}: {to_native(exc)}; stage the build context first")
    try:
        after, pinned, froms = plan(before, base, digest)
    except ValueError as exc:
        module.fail_json(
            msg=f"{path}: {exc}. Nothing was changed. Set the recipe's container.image.build.base (and base_digest) "
            "to the image this Containerfile builds on, or pin every outside image of it by digest."
        )
    result = dict(changed=after != before, pinned=pinned)
    result["from"] = froms
    if module._diff:
        result["diff"] = dict(before=before, after=after, before_header=path, after_header=path)
    if result["changed"] and not module.check_mode:
        directory = os.path.dirname(path) or "."
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".containerfile_pin.")
        with os.fdopen(fd, "wb") as handle:
            handle.write(to_bytes(after))
        module.atomic_move(tmp, path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
