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
    not match the Hub's listing.
  returned: failure
  type: str
  sample: tokenizer_missing
"""

import os
import posixpath
import shutil
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import (
    HubError,
    content_matches,
    describe_hub_error,
    file_digests,
    hub_client,
    repo_files,
    require_hf,
    resolve_revision,
    short_sha,
)

DEFAULT_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
DEFAULT_OPTIONAL_FILES = ["chat_template.jinja", "chat_template.json", "tokenizer.model"]
STAGING_PREFIX = ".tokenizer_pull."


class PullError(Exception):
    def __init__(self, msg, kind):
        super().__init__(msg)
        self.msg = msg
        self.kind = kind


def argument_spec():
    return {
        "model_dir": {"type": "path", "required": True},
        "repo_id": {"type": "str", "required": True},
        "revision": {"type": "str", "default": "main"},
        "base_repo_id": {"type": "str"},
        "base_revision": {"type": "str", "default": "main"},
        "token": {"type": "str", "no_log": True},
        "token_file": {"type": "path"},
        "endpoint": {"type": "str"},
        "files": {"type": "list", "elements": "str", "default": list(DEFAULT_FILES)},
        "optional_files": {"type": "list", "elements": "str", "default": list(DEFAULT_OPTIONAL_FILES)},
    }


def check_paths(option, paths):
    """Repo paths must be relative and stay inside model_dir; return them normalized, without duplicates."""
    result = []
    for path in paths:
        norm = posixpath.normpath(path) if path else ""
        if not path or path.startswith("/") or norm == "." or norm.split("/")[0] == "..":
            raise PullError(f"{option} entry {path!r} is not a relative path inside the repo", "options")
        if norm not in result:
            result.append(norm)
    return result


def card_base_model(api, repo_id, commit, info):
    """base_model from the model card: the Hub's parsed cardData, else the README's YAML header."""
    card = getattr(info, "card_data", None)
    base = getattr(card, "base_model", None) if card is not None else None
    if base is None and any(s.rfilename == "README.md" for s in info.siblings or []):
        from huggingface_hub.repocard import metadata_load

        tmp = tempfile.mkdtemp(prefix="tokenizer_pull-card.")
        try:
            readme = api.hf_hub_download(repo_id, "README.md", revision=commit, local_dir=tmp)
            base = (metadata_load(readme) or {}).get("base_model")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if isinstance(base, (list, tuple)):
        return [b for b in base if b] or None
    return [base] if base else None


def local_state(dest, record):
    """(action, local copy source or None, digests or None) for the file at dest against the listing record."""
    if os.path.islink(dest):
        target = os.path.realpath(dest)
        if os.path.isfile(target):
            digests = file_digests(target)
            if content_matches(record, digests):
                return "replace_symlink", target, digests
        return "replace_symlink", None, None
    if not os.path.lexists(dest):
        return "create", None, None
    if not stat.S_ISREG(os.lstat(dest).st_mode):
        raise PullError(f"{dest} exists and is not a regular file or a symlink; move it away", "local")
    digests = file_digests(dest)
    return ("present" if content_matches(record, digests) else "update"), None, digests


def describe_local(dest):
    if os.path.islink(dest):
        target = os.path.realpath(dest)
        if os.path.isfile(target):
            sha256, _blob, size = file_digests(target)
            return f"symlink to {os.readlink(dest)} (sha256 {sha256}, {size} bytes)"
        return f"symlink to {os.readlink(dest)} (dangling)"
    if os.path.isfile(dest):
        sha256, _blob, size = file_digests(dest)
        return f"file, sha256 {sha256}, {size} bytes"
    return "absent"


def default_mode():
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    require_hf(module)
    params = module.params
    model_dir = params["model_dir"]
    repo_id, revision = params["repo_id"], params["revision"]

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
    except HubError as exc:
        module.fail_json(msg=exc.msg, hub_error="token_file")

    base_repo_id = base_commit = None
    try:
        info, model_commit = resolve_revision(api, repo_id, revision, "model", endpoint, token)
        listing = {f["path"]: f for f in repo_files(info)}
        model_missing = [p for p in files if p not in listing]
        source, source_repo, source_commit = "model", repo_id, model_commit
        if model_missing:
            base_repo_id = params["base_repo_id"]
            if not base_repo_id:
                try:
                    bases = card_base_model(api, repo_id, model_commit, info)
                except Exception as exc:
                    raise describe_hub_error(exc, repo_id, revision, endpoint, token) from None
                if not bases:
                    raise PullError(
                        f"{repo_id} at {revision} ({short_sha(model_commit)}) lacks {', '.join(model_missing)} and "
                        "its model card names no base_model to take them from; set base_repo_id (and "
                        "base_revision) to the model it was made from",
                        "no_base_model",
                    )
                base_repo_id = bases[0]
                if len(bases) > 1:
                    module.warn(
                        f"the model card of {repo_id} lists {len(bases)} base models ({', '.join(bases)}); "
                        f"using the first, {base_repo_id}; set base_repo_id to choose another"
                    )
            base_info, base_commit = resolve_revision(
                api, base_repo_id, params["base_revision"], "model", endpoint, token
            )
            base_listing = {f["path"]: f for f in repo_files(base_info)}
            base_missing = [p for p in files if p not in base_listing]
            if base_missing:
                raise PullError(
                    f"the tokenizer is missing in both repos: {repo_id} at {revision} ({short_sha(model_commit)}) "
                    f"lacks {', '.join(model_missing)}, and its base {base_repo_id} at {params['base_revision']} "
                    f"({short_sha(base_commit)}) lacks {', '.join(base_missing)}. Nothing was written to "
                    f"{model_dir}. Set base_repo_id/base_revision to a repo that has them, or files to the names "
                    "this model's tokenizer uses",
                    "tokenizer_missing",
                )
            source, source_repo, source_commit, listing = "base", base_repo_id, base_commit, base_listing
    except HubError as exc:
        module.fail_json(msg=exc.msg, hub_error=exc.kind)
    except PullError as exc:
        module.fail_json(msg=exc.msg, hub_error=exc.kind)

    wanted = files + [p for p in optional if p in listing]
    plan = []
    try:
        for path in wanted:
            dest = os.path.join(model_dir, *path.split("/"))
            action, local_copy, digests = local_state(dest, listing[path])
            plan.append(
                {
                    "path": path,
                    "dest": dest,
                    "record": listing[path],
                    "action": action,
                    "local_copy": local_copy,
                    "digests": digests,
                }
            )
    except PullError as exc:
        module.fail_json(msg=exc.msg, hub_error=exc.kind)
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
        write_files(module, api, model_dir, to_write, source_repo, source_commit)

    results = []
    for item in plan:
        record = item["record"]
        if item["action"] == "present":
            sha256 = item["digests"][0]
        elif "written_sha256" in item:
            sha256 = item["written_sha256"]
        elif item["digests"] is not None and item["local_copy"]:
            sha256 = item["digests"][0]
        else:
            sha256 = record.get("sha256")
        results.append(
            {
                "path": item["path"],
                "sha256": sha256,
                "source_repo": source_repo,
                "source_commit": source_commit,
                "action": item["action"],
            }
        )
    if diff is not None:
        diff["after"] = "".join(
            f"{r['path']}: file, sha256 {r['sha256'] or '(not listed)'}, {listing[r['path']]['size']} bytes"
            f"{'' if r['action'] == 'present' else f', from {source_repo}@{short_sha(source_commit)}'}\n"
            for r in results
        )

    result = {
        "changed": bool(to_write),
        "source": source if to_write else "present",
        "files": results,
        "written": [item["path"] for item in to_write],
        "model_commit": model_commit,
        "base_repo_id": base_repo_id,
        "base_commit": base_commit,
    }
    if diff is not None:
        result["diff"] = diff
    module.exit_json(**result)


def write_files(module, api, model_dir, to_write, source_repo, source_commit):
    """Stage every file in a temp dir inside model_dir, verify it, then move each into place with os.replace."""
    try:
        os.makedirs(model_dir, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=model_dir)
    except OSError as exc:
        module.fail_json(msg=f"cannot write into {model_dir}: {to_native(exc)}")
    try:
        for index, item in enumerate(to_write):
            record = item["record"]
            if item["local_copy"]:
                staged = os.path.join(staging, f"copy.{index}")
                shutil.copyfile(item["local_copy"], staged)
                origin = f"the symlink target {item['local_copy']}"
            else:
                try:
                    staged = api.hf_hub_download(
                        source_repo,
                        item["path"],
                        revision=source_commit,
                        local_dir=os.path.join(staging, f"download.{index}"),
                    )
                except Exception as exc:
                    error = describe_hub_error(exc, source_repo, source_commit, api.endpoint, api.token)
                    module.fail_json(
                        msg=f"downloading {item['path']} from {source_repo} at {short_sha(source_commit)} failed: "
                        f"{error.msg}. Nothing was written to {model_dir}",
                        hub_error=error.kind,
                    )
                origin = f"the download from {source_repo} at {short_sha(source_commit)}"
            digests = file_digests(staged)
            if not content_matches(record, digests):
                want = record.get("sha256") or f"blob id {record.get('blob_id')}"
                module.fail_json(
                    msg=f"{item['path']} from {origin} does not match the Hub's listing (expected {want}, "
                    f"{record.get('size')} bytes; got sha256 {digests[0]}, blob id {digests[1]}, {digests[2]} "
                    f"bytes). Nothing was written to {model_dir}",
                    hub_error="verify",
                )
            item["staged"] = staged
            item["written_sha256"] = digests[0]
        mode = default_mode()
        for item in to_write:
            dest = item["dest"]
            keep = None
            if item["action"] == "update":
                keep = stat.S_IMODE(os.lstat(dest).st_mode)
            os.chmod(item["staged"], keep if keep is not None else mode)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            os.replace(item["staged"], dest)
    except OSError as exc:
        module.fail_json(msg=f"cannot write the tokenizer files into {model_dir}: {to_native(exc)}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


if __name__ == "__main__":
    main()
