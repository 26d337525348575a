#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tokenizer_pull
short_description: Put a model's tokenizer files into its directory as real files, from the model or its base
version_added: "0.2.0"
description:
  - Makes sure the tokenizer files O(files) (and those of O(optional_files) the source has) exist in O(model_dir) as
    real files with the content the source lists on the Hugging Face Hub.
  - The source is the model repo O(repo_id) at O(revision) when it has every file of O(files); else the base model
    O(base_repo_id) at O(base_revision). Quantized checkpoints often leave the tokenizer out, and serving engines
    then fail after the weights (hundreds of GB) were downloaded.
  - When O(base_repo_id) is not given, the base model is read from the C(base_model) of the model card of
    O(repo_id) at O(revision) (the first one when it lists several).
  - A file already in O(model_dir) as a regular file with the content the source lists (its sha256 for LFS files,
    else its git blob id) is left alone. A symlink (for example into a Hugging Face cache) is replaced by a real file
    with the same content; an existing file with other content is replaced (its mode kept).
  - Files are downloaded into a temporary directory inside O(model_dir) (same filesystem), checked against the
    Hub's listing, and only then moved into place with an atomic rename; a failed run leaves no partial files.
  - When neither repo has the files of O(files) the module fails, naming both repos, their revisions and the files
    each lacks, before writing anything.
  - A branch or a tag given as O(revision) or O(base_revision) is resolved to its commit, and the module warns that
    it is not a pin (the next run may take other files), naming the variable to set to the commit it resolved to
    (O(revision_variable), O(base_revision_variable)). A commit sha, full or short, gives no warning.
author:
  - sparkfold developers (@sparkfold)
options:
  model_dir:
    description:
      - The directory of the model (where its weights and C(config.json) are or will be).
      - Created when it does not exist and files have to be written.
    type: path
    required: true
  repo_id:
    description:
      - The model repo, as C(owner/name), usually the quantized checkpoint that is served.
    type: str
    required: true
  revision:
    description:
      - The revision of O(repo_id) - a branch, a tag or a (full or short) commit sha. It is resolved to its commit
        (and a missing one fails, as in M(sparkfold.cluster.hub_revision)), and files are taken from that commit.
    type: str
    default: main
  revision_variable:
    description:
      - The name of the variable that O(revision) comes from, named in the warning when O(revision) is a branch or
        a tag (set it to RV(model_commit)). When not given, the warning names this task's O(revision).
    type: str
  base_repo_id:
    description:
      - The base model to take the tokenizer from when O(repo_id) lacks some of O(files).
      - When not given, the C(base_model) of the model card of O(repo_id) (the first one when it is a list). The
        module fails when it needs a base model and the card names none.
    type: str
  base_revision:
    description:
      - The revision of the base model. It is resolved to its commit, returned as RV(base_commit).
    type: str
    default: main
  base_revision_variable:
    description:
      - The name of the variable that O(base_revision) comes from (for example V(weights_base_revision)), named in
        the warning when O(base_revision) is a branch or a tag (set it to RV(base_commit)). When not given, the
        warning names this task's O(base_revision).
    type: str
  files:
    description:
      - The tokenizer files that must be in O(model_dir), as paths in the repo (and under O(model_dir)).
      - The source must have all of them.
    type: list
    elements: str
    default: [tokenizer.json, tokenizer_config.json, special_tokens_map.json]
  optional_files:
    description:
      - Files that are put into O(model_dir) too when the chosen source has them (chat templates, a SentencePiece
        model). They do not choose the source.
    type: list
    elements: str
    default: [chat_template.jinja, chat_template.json, tokenizer.model]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - sparkfold.cluster.hub
  - sparkfold.cluster.hub.timeouts
attributes:
  check_mode:
    support: full
    details: Reports in RV(files) and RV(written) which files would be written, and writes nothing.
  diff_mode:
    support: full
    details: A listing of the files before and after (absent, symlink and its target, or sha256 and size).
  platform:
    platforms: posix
requirements:
  - huggingface_hub >= 1.0 on the node (the sparkfold.cluster.hf_cli role installs it in a venv; point
    C(ansible_python_interpreter) at that venv's python)
notes:
  - All files come from one source, so that a tokenizer is never put together from two models.
  - A file in O(model_dir) that is not in O(files) or O(optional_files), or an optional file the source lacks, is left
    alone.
  - The temporary directory is C(<model_dir>/.tokenizer_pull.*) and is removed at the end of every run; only a run
    that was killed can leave one behind, which is safe to delete (and should not be copied to other nodes).
seealso:
  - module: sparkfold.cluster.hub_revision
"""

EXAMPLES = r"""
- name: Tokenizer next to the quant, from the base model named in its model card when the quant has none
  sparkfold.cluster.tokenizer_pull:
    model_dir: /srv/models/dsv41-exl3-2.9bpw
    repo_id: sfxnz/DeepSeek-V4.1-Flash-EXL3-2.9bpw
    revision: "{{ quant_rev.commit }}"
  register: tokenizer

- name: Name the base model and its revision explicitly
  sparkfold.cluster.tokenizer_pull:
    model_dir: /srv/models/dsv41-exl3-2.9bpw
    repo_id: sfxnz/DeepSeek-V4.1-Flash-EXL3-2.9bpw
    revision: "{{ quant_rev.commit }}"
    base_repo_id: deepseek-ai/DeepSeek-V4.1-Flash
    base_revision: main
    token_file: /etc/sparkfold/hf_token

- name: Only the fast tokenizer, no chat templates
  sparkfold.cluster.tokenizer_pull:
    model_dir: /srv/models/dsv41-exl3-2.9bpw
    repo_id: sfxnz/DeepSeek-V4.1-Flash-EXL3-2.9bpw
    files: [tokenizer.json, tokenizer_config.json]
    optional_files: []
"""

RETURN = r"""
source:
  description:
    - Where the written files came from - V(model) (O(repo_id)) or V(base) (the base model); V(present) when every
      file was already in O(model_dir) with the right content and nothing was written.
  returned: success
  type: str
  sample: base
files:
  description:
    - The files the module manages, in the order of O(files) then O(optional_files), each with C(path), C(sha256)
      (of the content; null in check mode for a file to be written that the Hub lists without sha256),
      C(source_repo), C(source_commit) and C(action) - V(present) (already right), V(create), V(update) (other
      content was there) or V(replace_symlink).
  returned: success
  type: list
  elements: dict
  sample:
    - {path: tokenizer.json, sha256: 2a1f0c5d7a1e3f4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a1b,
       source_repo: deepseek-ai/DeepSeek-V4.1-Flash, source_commit: 7a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b,
       action: create}
written:
  description: The paths written (in check mode, that would be written).
  returned: success
  type: list
  elements: str
  sample: [tokenizer.json, tokenizer_config.json, special_tokens_map.json]
model_commit:
  description: The commit of O(repo_id) that O(revision) resolved to.
  returned: success
  type: str
  sample: 3f1c2a9e8b7d6c5b4a39281706f5e4d3c2b1a098
base_repo_id:
  description: The base model consulted (O(base_repo_id) or the model card's), or null when O(repo_id) had every
    file of O(files) and no base model was needed.
  returned: success
  type: str
  sample: deepseek-ai/DeepSeek-V4.1-Flash
base_commit:
  description: The commit O(base_revision) resolved to, or null when no base model was needed.
  returned: success
  type: str
  sample: 7a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b
hub_error:
  description: On a Hub failure, its kind (as in M(sparkfold.cluster.hub_revision)), or V(tokenizer_missing) when
    neither repo has the files, V(no_base_model) when the card names no base model, V(verify) when a download did
    not match the Hub's listing, V(stalled) when a download trickled past O(stall_timeout) twice in a row.
  returned: failure
  type: str
  sample: tokenizer_missing
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import HubError, hub_client, require_hf
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_refs import check_pin
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_timeouts import HUB_TIMEOUT_ARG_SPEC
from ansible_collections.sparkfold.cluster.plugins.module_utils.tokenizer import (
    PullError,
    check_paths,
    choose_source,
    describe_local,
    diff_after,
    file_results,
    plan_files,
    write_files,
)

DEFAULT_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
DEFAULT_OPTIONAL_FILES = ["chat_template.jinja", "chat_template.json", "tokenizer.model"]


def argument_spec():
    return {
        **HUB_TIMEOUT_ARG_SPEC,
        "model_dir": {"type": "path", "required": True},
        "repo_id": {"type": "str", "required": True},
        "revision": {"type": "str", "default": "main"},
        "revision_variable": {"type": "str"},
        "base_repo_id": {"type": "str"},
        "base_revision": {"type": "str", "default": "main"},
        "base_revision_variable": {"type": "str"},
        "token": {"type": "str", "no_log": True},
        "token_file": {"type": "path"},
        "endpoint": {"type": "str"},
        "files": {"type": "list", "elements": "str", "default": list(DEFAULT_FILES)},
        "optional_files": {"type": "list", "elements": "str", "default": list(DEFAULT_OPTIONAL_FILES)},
    }


def fail(module, exc):
    """fail_json for a PullError or HubError, with its kind as hub_error when it has one."""
    module.fail_json(msg=exc.msg, **({"hub_error": exc.kind} if exc.kind else {}))


def warn_unpinned(module, api, chosen):
    """Warn for each revision used that is a branch or tag rather than a commit id."""
    params = module.params
    pins = [(params["repo_id"], params["revision"], chosen["model_commit"], params["revision_variable"], "revision")]
    if chosen["base_commit"]:
        pins.append(
            (chosen["base_repo_id"], params["base_revision"], chosen["base_commit"],
             params["base_revision_variable"], "base_revision")
        )
    for repo_id, revision, commit, variable, option in pins:
        warning = check_pin(api, repo_id, revision, commit, variable or f"this task's {option}")
        if warning:
            module.warn(warning)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    require_hf(module)
    params = module.params
    model_dir = params["model_dir"]

    try:
        files = check_paths("files", params["files"])
        optional = [p for p in check_paths("optional_files", params["optional_files"]) if p not in files]
    except PullError as exc:
        module.fail_json(msg=exc.msg)
    if not files:
        module.fail_json(msg="files is empty: list the tokenizer files that must be in model_dir")
    if os.path.exists(model_dir) and not os.path.isdir(model_dir):
        module.fail_json(msg=f"model_dir {model_dir} exists and is not a directory")

    try:
        api, endpoint, token = hub_client(params)
    except HubError as exc:  # a timeout option out of range, or an empty token_file
        module.fail_json(msg=exc.msg, hub_error="args" if exc.kind == "args" else "token_file")

    try:
        chosen = choose_source(api, params, files, endpoint, token, module.warn)
    except (HubError, PullError) as exc:
        fail(module, exc)
    warn_unpinned(module, api, chosen)
    listing, source_repo, source_commit = chosen["listing"], chosen["source_repo"], chosen["source_commit"]

    try:
        plan = plan_files(model_dir, files + [p for p in optional if p in listing], listing)
    except PullError as exc:
        fail(module, exc)
    except OSError as exc:
        module.fail_json(msg=f"cannot read the files in {model_dir}: {to_native(exc)}")

    to_write = [item for item in plan if item["action"] != "present"]
    diff = None
    if module._diff:
        diff = {
            "before_header": model_dir,
            "after_header": model_dir,
            "before": "".join(f"{item['path']}: {describe_local(item['dest'])}\n" for item in plan),
        }

    if to_write and not module.check_mode:
        try:
            write_files(api, model_dir, to_write, source_repo, source_commit)
        except PullError as exc:
            fail(module, exc)

    results = file_results(plan, source_repo, source_commit)
    result = {
        "changed": bool(to_write),
        "source": chosen["source"] if to_write else "present",
        "files": results,
        "written": [item["path"] for item in to_write],
        "model_commit": chosen["model_commit"],
        "base_repo_id": chosen["base_repo_id"],
        "base_commit": chosen["base_commit"],
    }
    if diff is not None:
        diff["after"] = diff_after(results, listing, source_repo, source_commit)
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
