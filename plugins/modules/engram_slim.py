#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engram_slim
short_description: Make the slim Engram folder the vLLM overlay mounts (shards 47 and 48, an index of the embed tables)
version_added: "0.1.0"
description:
  - The Engram tables of DeepSeek-V4.1-Flash are the unquantised n-gram embeddings in shards 47 and 48 of
    C(deepseek-ai/DeepSeek-V4.1-Flash). Its C(model.safetensors.index.json) names all 48 shards, and vLLM's loader
    reads the folder it is given through that index, so a folder of only the downloaded files names 46 absent
    shards and every other tensor of shards 47 and 48.
  - Builds what MiaAI-Lab's C(start.sh) builds before it starts the overlay (C(prepare_engram_src_dir), running
    C(scripts/prepare_engram_src.py) "only embed tensors from shards 47+48") in O(dest) - the two shards hard-linked
    from O(src) (same file system, no extra bytes; copied when a link cannot be made), an index whose C(weight_map)
    keeps only the tensors whose names end in one of O(keep_suffixes), with C(metadata.total_size) of the original
    and C(metadata.dsv41_engram_src=embed-only), and C(config.json) (the overlay's Engram backend reads its layer
    ids and sizes there).
  - Refuses, before anything is written, an O(src) without the index or the shards, an index with no embed
    tensors, or one that puts an embed tensor in another shard.
author:
  - sparkfold developers (@sparkfold)
options:
  src:
    description: The Engram download (C(config.json), the two shards and the full index).
    type: path
    required: true
  dest:
    description: The slim folder to make or bring up to date; on the file system of O(src) for hard links.
    type: path
    required: true
  shards:
    description: The shards that hold the Engram tables.
    type: list
    elements: str
    default: [model-00047-of-00048.safetensors, model-00048-of-00048.safetensors]
  keep_suffixes:
    description: The tensor name endings the slim index keeps.
    type: list
    elements: str
    default: [.engram.embed.weight, .engram.embed.scale]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Nothing is written; C(changed) and RV(files) say what a real run would do.
  diff_mode:
    support: full
    details: The slim index before and after.
  platform:
    platforms: posix
notes:
  - C(changed) is true when a shard was linked or copied anew, or the index or C(config.json) was rewritten.
  - "Source: MiaAI-Lab/DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks C(scripts/prepare_engram_src.py)
    @c08f50f2ef59233816fd0f4f26d112653e0ae23a and C(start.sh) @145bb98 (C(prepare_engram_src_dir), then
    C(-v $ENGRAM_SRC:/engram-src:ro))."
"""

EXAMPLES = r"""
- name: Make the slim Engram folder next to the download
  sparkfold.cluster.engram_slim:
    src: /var/lib/sparkfold/engram
    dest: /var/lib/sparkfold/engram-src
"""

RETURN = r"""
tensors:
  description: The tensors the slim index keeps.
  returned: success
  type: list
  elements: str
  sample: [model.layers.1.engram.embed.scale, model.layers.1.engram.embed.weight]
files:
  description:
    - What was (in check mode, would be) done to each file of O(dest) - C(hardlink), C(copy), C(write) or C(kept).
  returned: success
  type: dict
  sample: {model-00047-of-00048.safetensors: kept, model.safetensors.index.json: write, config.json: kept}
"""

import json
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

INDEX = "model.safetensors.index.json"
CONFIG = "config.json"


class Refused(Exception):
    """What is wrong with the source, for fail_json."""


def slim_index(src, shards, suffixes):
    """(the slim index text, the kept tensors) from src's index, or Refused."""
    path = os.path.join(src, INDEX)
    if not os.path.isfile(path):
        raise Refused(f"{path} is missing (the Engram download's index)")
    for shard in shards:
        if not os.path.isfile(os.path.join(src, shard)):
            raise Refused(f"the Engram shard {os.path.join(src, shard)} is missing")
    try:
        with open(path, "rb") as handle:
            raw = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise Refused(f"{path} is not a safetensors index ({to_native(exc)})") from exc
    weight_map = raw.get("weight_map") if isinstance(raw, dict) else None
    if not isinstance(weight_map, dict):
        raise Refused(f"{path} has no weight_map")
    keep = {name: shard for name, shard in weight_map.items() if name.endswith(tuple(suffixes))}
    if not keep:
        raise Refused(f"{path} names no tensor ending in {', '.join(suffixes)}: "
                      f"is {src} the original V4.1 checkpoint's files?")
    elsewhere = sorted({shard for shard in keep.values() if shard not in shards})
    if elsewhere:
        raise Refused(f"{path} puts embed tables in {', '.join(elsewhere)}, not in {', '.join(shards)}")
    metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    slim = {"metadata": {"total_size": metadata.get("total_size"), "dsv41_engram_src": "embed-only"},
            "weight_map": keep}
    return json.dumps(slim, indent=2) + "\n", sorted(keep)


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _same_file(a, b):
    try:
        sa, sb = os.stat(a), os.stat(b)
    except FileNotFoundError:
        return False
    return (sa.st_ino, sa.st_dev) == (sb.st_ino, sb.st_dev)


def _write(module, path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".engram_slim.")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, 0o644)
    module.atomic_move(tmp, path)


def _link(src, dest):
    """Hard-link src at dest (replacing what is there); a copy when no link can be made. Returns what was done."""
    tmp = f"{dest}.engram_slim.partial"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    try:
        os.link(src, tmp)
        done = "hardlink"
    except OSError:
        shutil.copy2(src, tmp)
        done = "copy"
    os.replace(tmp, dest)
    return done


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path", required=True),
            dest=dict(type="path", required=True),
            shards=dict(type="list", elements="str", default=[
                "model-00047-of-00048.safetensors", "model-00048-of-00048.safetensors"]),
            keep_suffixes=dict(type="list", elements="str", default=[".engram.embed.weight", ".engram.embed.scale"]),
        ),
        supports_check_mode=True,
    )
    src, dest = os.path.abspath(module.params["src"]), os.path.abspath(module.params["dest"])
    shards = module.params["shards"]
    if src == dest:
        module.fail_json(msg=f"dest is src ({src}): the slim folder must be another directory (e.g. {src}-src)")
    try:
        index_text, tensors = slim_index(src, shards, module.params["keep_suffixes"])
    except Refused as exc:
        module.fail_json(msg=f"Nothing was changed: {exc}. Run the weights role (--tags weights) to complete the "
                         "Engram download, or check the recipe's engram.files.")
    if os.path.lexists(dest) and not os.path.isdir(dest):
        module.fail_json(msg=f"{dest} exists and is not a directory: move it away so the slim Engram folder "
                         "can be made")

    files = {}
    for shard in shards:
        files[shard] = "kept" if _same_file(os.path.join(src, shard), os.path.join(dest, shard)) else "hardlink"
    index_before = _read(os.path.join(dest, INDEX))
    files[INDEX] = "kept" if index_before == index_text.encode() else "write"
    config = _read(os.path.join(src, CONFIG))
    if config is not None:
        files[CONFIG] = "kept" if _read(os.path.join(dest, CONFIG)) == config else "write"
    changed = any(action != "kept" for action in files.values())

    if changed and not module.check_mode:
        try:
            if not os.path.isdir(dest):
                os.makedirs(dest, 0o755)
            for shard in shards:
                if files[shard] != "kept":
                    files[shard] = _link(os.path.join(src, shard), os.path.join(dest, shard))
            if files[INDEX] == "write":
                _write(module, os.path.join(dest, INDEX), index_text.encode())
            if files.get(CONFIG) == "write":
                _write(module, os.path.join(dest, CONFIG), config)
        except OSError as exc:
            module.fail_json(msg=f"could not make the slim Engram folder {dest}: {to_native(exc)} (done so far: "
                             f"{files}); check its file system's free space and permissions", files=files)
    result = dict(changed=changed, tensors=tensors, files=files)
    if module._diff:
        result["diff"] = dict(before=(index_before or b"").decode("utf-8", "replace"), after=index_text,
                              before_header=os.path.join(dest, INDEX), after_header=os.path.join(dest, INDEX))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
