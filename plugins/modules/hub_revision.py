#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: hub_revision
short_description: Resolve a Hugging Face Hub revision to its commit and list its files
version_added: "0.2.0"
description:
  - Asks the Hugging Face Hub (or the server at O(endpoint)) for O(repo_id) at O(revision) and returns the full
    commit, the files of that commit with their sizes and hashes, and the repo's branches and tags with their head
    commits.
  - O(revision) may be a branch, a tag, a full commit sha or a short one. A full sha is checked with the Hub too
    (the download tools do not check it themselves), so a pin that no longer exists fails here, before anything is
    downloaded.
  - When the revision does not exist the module fails with a message that names the repo and the revision, lists
    the current branches and tags with their head commits (short sha, date, title), says whether the history of
    O(fallback_branch) looks super-squashed (a single commit whose title starts with C(Super-squash), which is what
    removed the old commits) or force-pushed (its oldest commit is younger than the repo, or it shares no commit with
    a tag - the branch was replaced by unrelated commits), and what to do.
  - A branch or a tag is resolved to its commit, and the module warns that it is not a pin (the next run may deploy
    another commit), naming the variable to set to the returned commit (O(revision_variable)). A commit sha, full
    or short, gives no warning.
  - With O(on_missing=branch_head_if_files_match) a missing revision is replaced by the head of O(fallback_branch),
    but only when that commit's files match O(expected_files). The result then says so in RV(policy_applied) and the
    module warns; it never falls back silently.
  - Read-only; never reports a change.
author:
  - sparkfold developers (@sparkfold)
options:
  revision:
    description:
      - A branch, a tag, a full (40 hex digits) or short commit sha.
    type: str
    default: main
  revision_variable:
    description:
      - The name of the variable that O(revision) comes from (for example V(weights_revision)). When O(revision) is
        a branch or a tag, the warning says to set it to the returned RV(commit).
      - When not given, the warning names this task's O(revision).
    type: str
  on_missing:
    description:
      - What to do when O(revision) does not exist on the Hub.
      - V(fail) fails with the current branches and tags and what to do.
      - V(branch_head_if_files_match) accepts the head commit of O(fallback_branch) instead, only if its files match
        O(expected_files) (see O(match_patterns)); otherwise it fails with the differences. When it accepts, the
        module warns and sets RV(policy_applied).
    type: str
    default: fail
    choices: [fail, branch_head_if_files_match]
  fallback_branch:
    description:
      - The branch whose head O(on_missing=branch_head_if_files_match) may accept, and whose history is checked for a
        super-squash when the revision is missing.
    type: str
    default: main
  expected_files:
    description:
      - The files the head of O(fallback_branch) must have for O(on_missing=branch_head_if_files_match) to accept it.
      - Every entry must exist there with the given hash, and every file there whose path matches O(match_patterns)
        must be listed.
      - Required when O(on_missing=branch_head_if_files_match).
    type: list
    elements: dict
    suboptions:
      path:
        description:
          - The path of the file in the repo.
        type: str
        required: true
      sha256:
        description:
          - The sha256 of the content, as the Hub lists it for LFS files (weights, large tokenizers).
          - Files kept in git have no sha256 on the Hub; give their O(expected_files[].blob_id).
        type: str
      blob_id:
        description:
          - The git blob id of the file (for LFS files, of the pointer).
        type: str
  match_patterns:
    description:
      - Shell-style patterns (C(fnmatch), C(*) also matches C(/)) of the files of the head of O(fallback_branch) that
        must all be in O(expected_files). Files that match none are not compared unless O(expected_files) lists them.
    type: list
    elements: str
    default: ["*"]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - sparkfold.cluster.hub
  - sparkfold.cluster.hub.repo
  - sparkfold.cluster.hub.timeouts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
requirements:
  - huggingface_hub >= 1.0 on the node (the sparkfold.cluster.hf_cli role installs it in a venv; point
    C(ansible_python_interpreter) at that venv's python)
notes:
  - The Hub shows the file listing of a gated repo to everyone; when the repo is gated the module also asks for the
    metadata of its smallest file, so a token without access fails here rather than in the download.
  - Listing the branches and tags reads the commit history of each head; on a repo with a long history that takes
    a few requests more.
seealso:
  - module: sparkfold.cluster.tokenizer_pull
  - name: huggingface_hub HfApi reference
    description: model_info, list_repo_refs and list_repo_commits, which this module calls.
    link: https://huggingface.co/docs/huggingface_hub/package_reference/hf_api
"""

EXAMPLES = r"""
- name: Check the pinned checkpoint commit before downloading anything
  sparkfold.cluster.hub_revision:
    repo_id: sfxnz/DeepSeek-V4.1-Flash-EXL3-2.9bpw
    revision: 3f1c2a9e8b7d6c5b4a39281706f5e4d3c2b1a098
  register: quant_rev

- name: Download exactly that commit
  ansible.builtin.debug:
    msg: "{{ quant_rev.commit }}: {{ quant_rev.files | length }} files, {{ quant_rev.total_bytes | human_readable }}"

- name: Resolve a branch of a gated base model with a token from a file
  sparkfold.cluster.hub_revision:
    repo_id: deepseek-ai/DeepSeek-V4.1-Flash
    revision: main
    token_file: /etc/sparkfold/hf_token

- name: Accept the head of main if the pin was squashed away and the weights are the same
  sparkfold.cluster.hub_revision:
    repo_id: sfxnz/DeepSeek-V4.1-Flash-EXL3-2.9bpw
    revision: 3f1c2a9e8b7d6c5b4a39281706f5e4d3c2b1a098
    on_missing: branch_head_if_files_match
    match_patterns: ["*.safetensors"]
    expected_files:
      - path: model-00001-of-00002.safetensors
        sha256: 9b2f0c5d7a1e3f4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a1b
      - path: model-00002-of-00002.safetensors
        sha256: 1c3e5a7b9d1f3a5c7e9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a3c
  register: quant_rev
"""

RETURN = r"""
commit:
  description: The full commit id the revision resolved to (with RV(policy_applied), the head of O(fallback_branch)).
  returned: success
  type: str
  sample: 3f1c2a9e8b7d6c5b4a39281706f5e4d3c2b1a098
requested_revision:
  description: O(revision) as given.
  returned: success
  type: str
  sample: main
files:
  description:
    - The files of the commit, sorted by path, each with C(path), C(size) (bytes), C(sha256) (the content's sha256,
      listed by the Hub for LFS files only, else null) and C(blob_id) (the git blob id; for LFS files, of the
      pointer).
  returned: success
  type: list
  elements: dict
  sample:
    - {path: config.json, size: 1843, sha256: null, blob_id: 6d1f4a0c2b3e5f7a9c1d3e5f7b9a1c3e5d7f9b1a}
    - {path: model-00001-of-00002.safetensors, size: 4998223104,
       sha256: 9b2f0c5d7a1e3f4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a1b,
       blob_id: 0a5d2c4e6f8b1d3f5a7c9e1b3d5f7a9c1e3b5d7f}
total_bytes:
  description: The sum of the sizes of RV(files).
  returned: success
  type: int
  sample: 4998225097
refs:
  description:
    - The branches and tags of the repo, each sorted by name, each entry with C(name), C(commit) (full id of the
      head), C(date) (ISO 8601) and C(title) of the head commit.
  returned: success
  type: dict
  sample:
    branches:
      - {name: main, commit: 3f1c2a9e8b7d6c5b4a39281706f5e4d3c2b1a098, date: "2026-10-17T09:12:44+00:00",
         title: Upload 2.9 bpw quant}
    tags:
      - {name: v1.0, commit: 3f1c2a9e8b7d6c5b4a39281706f5e4d3c2b1a098, date: "2026-10-17T09:12:44+00:00",
         title: Upload 2.9 bpw quant}
policy_applied:
  description:
    - Null when O(revision) exists. When O(on_missing=branch_head_if_files_match) replaced a missing revision, what
      it did - C(policy) (V(branch_head_if_files_match)), C(requested_revision), C(fallback_branch), C(commit) (the
      head accepted) and C(files_compared) (how many files of the head were compared with O(expected_files)).
  returned: success
  type: dict
  sample:
    policy: branch_head_if_files_match
    requested_revision: 3f1c2a9e8b7d6c5b4a39281706f5e4d3c2b1a098
    fallback_branch: main
    commit: 7a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b
    files_compared: 2
squashed:
  description:
    - On a missing revision, the head of O(fallback_branch) (C(name), C(commit), C(date), C(title)) when its history
      looks super-squashed, else null.
  returned: failure
  type: dict
force_pushed:
  description:
    - On a missing revision, when the history of O(fallback_branch) looks force-pushed (and not super-squashed) -
      C(branch), C(root) (C(commit), C(date), C(title) of its oldest commit), C(created_at) (when the repo was
      created, set when that is the sign, else null), C(unrelated_tags) (tags that share no commit with the
      branch) and C(diverged_tags) (tags that no branch contains whose history the branch shares only up to an
      older commit, the sign of a branch reset to that commit with new commits on top; each C(name), C(commit) and
      C(reset_to) (C(commit), C(date), C(title) of the newest commit they share)); else null.
  returned: failure
  type: dict
  sample:
    branch: main
    root: {commit: 9c0e4b2a1d3f5e7a9b1c3d5e7f9a1b3c5d7e9f1a, date: "2026-02-01T00:00:00+00:00", title: Upload quant}
    created_at: "2026-01-05T10:00:00+00:00"
    unrelated_tags: [v1.0]
    diverged_tags: []
hub_error:
  description:
    - On failure, the kind of Hub failure - V(revision_not_found), V(ambiguous_revision), V(repo_not_found), V(gated),
      V(bad_token), V(files_mismatch), V(http), V(network), V(timeout) (the Hub did not answer within O(connect_timeout)
      or O(read_timeout), or its answer trickled past O(stall_timeout)), V(token_file) or V(args).
  returned: failure
  type: str
  sample: revision_not_found
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import (
    HUB_COMMON_ARG_SPEC,
    HubError,
    compare_manifest,
    describe_hub_error,
    hub_client,
    list_refs,
    repo_files,
    require_hf,
    resolve_revision,
    short_sha,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_refs import check_pin
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_timeouts import HUB_TIMEOUT_ARG_SPEC

MAX_LISTED_PROBLEMS = 20


def argument_spec():
    spec = dict(HUB_COMMON_ARG_SPEC)
    spec.update(HUB_TIMEOUT_ARG_SPEC)
    spec.update(
        on_missing={"type": "str", "default": "fail", "choices": ["fail", "branch_head_if_files_match"]},
        fallback_branch={"type": "str", "default": "main"},
        expected_files={
            "type": "list",
            "elements": "dict",
            "options": {
                "path": {"type": "str", "required": True},
                "sha256": {"type": "str"},
                "blob_id": {"type": "str"},
            },
            "required_one_of": [["sha256", "blob_id"]],
        },
        match_patterns={"type": "list", "elements": "str", "default": ["*"]},
        revision_variable={"type": "str"},
    )
    return spec


def fail(module, error):
    details = {k: v for k, v in error.details.items() if k in ("refs", "squashed", "force_pushed", "differences")}
    module.fail_json(msg=error.msg, hub_error=error.kind, **details)


def apply_policy(module, api, params, endpoint, token, missing):
    """Accept the head of fallback_branch when its files match expected_files; else raise HubError."""
    repo_id, revision, branch = params["repo_id"], params["revision"], params["fallback_branch"]
    info, commit = resolve_revision(api, repo_id, branch, params["repo_type"], endpoint, token)
    files = repo_files(info)
    problems = compare_manifest(files, params["expected_files"], params["match_patterns"])
    if problems:
        listed = "; ".join(problems[:MAX_LISTED_PROBLEMS])
        more = f"; and {len(problems) - MAX_LISTED_PROBLEMS} more" if len(problems) > MAX_LISTED_PROBLEMS else ""
        raise HubError(
            f"{missing.msg} on_missing=branch_head_if_files_match did not accept the head of {branch} "
            f"({short_sha(commit)}) because its files differ from expected_files: {listed}{more}",
            kind="files_mismatch",
            refs=missing.details.get("refs"),
            squashed=missing.details.get("squashed"),
            differences=problems,
        )
    compared = sum(1 for f in files if f["path"] in {e["path"] for e in params["expected_files"]})
    module.warn(
        f"revision {revision} does not exist in {repo_id} on {endpoint}; on_missing=branch_head_if_files_match "
        f"accepted the head of {branch}, commit {commit}, whose {compared} expected files match expected_files"
    )
    policy = {
        "policy": "branch_head_if_files_match",
        "requested_revision": revision,
        "fallback_branch": branch,
        "commit": commit,
        "files_compared": compared,
    }
    return info, commit, policy


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_if=[("on_missing", "branch_head_if_files_match", ("expected_files",))],
        supports_check_mode=True,
    )
    require_hf(module)
    params = module.params
    if params["on_missing"] == "branch_head_if_files_match" and not params["expected_files"]:
        module.fail_json(
            msg="on_missing=branch_head_if_files_match needs a non-empty expected_files: the head of "
            f"{params['fallback_branch']} is only accepted when its files match them"
        )

    try:
        api, endpoint, token = hub_client(params)
    except HubError as exc:  # a timeout option out of range, or an empty token_file
        module.fail_json(msg=exc.msg, hub_error="args" if exc.kind == "args" else "token_file")

    repo_id, revision, repo_type = params["repo_id"], params["revision"], params["repo_type"]
    policy = None
    try:
        try:
            info, commit = resolve_revision(
                api, repo_id, revision, repo_type, endpoint, token, fallback_branch=params["fallback_branch"]
            )
        except HubError as exc:
            if exc.kind != "revision_not_found" or params["on_missing"] != "branch_head_if_files_match":
                raise
            info, commit, policy = apply_policy(module, api, params, endpoint, token, exc)
        refs = list_refs(api, repo_id, repo_type)
    except HubError as exc:
        fail(module, exc)
    except Exception as exc:  # list_refs after a successful resolve: still phrase it
        fail(module, describe_hub_error(exc, repo_id, revision, endpoint, token))

    if policy is None:
        variable = params["revision_variable"] or "this task's revision"
        warning = check_pin(api, repo_id, revision, commit, variable, repo_type, refs)
        if warning:
            module.warn(warning)

    files = repo_files(info)
    module.exit_json(
        changed=False,
        commit=commit,
        requested_revision=revision,
        files=files,
        total_bytes=sum(f["size"] or 0 for f in files),
        refs=refs,
        policy_applied=policy,
    )


if __name__ == "__main__":
    main()
