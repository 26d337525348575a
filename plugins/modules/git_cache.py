#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: git_cache
short_description: Fetch a repository into a bare cache on every run and prove a pinned commit is still upstream
version_added: "0.2.0"
description:
  - Makes O(path) a bare git repository when it is not one yet (the only change this module reports), then fetches
    every branch and tag of O(repo) into it with C(--prune --force), on every run, so the cache follows upstream.
  - "The pinned O(commit) must be upstream now, not only in the cache (a bare cache keeps the objects of commits that
    were force-pushed or squashed away): it must be on a branch or tag of O(repo) after that fetch, or the server must
    serve it by sha to an empty repository (a commit on no branch or tag, such as a pull request's head). Then it is
    kept in the cache under C(refs/sparkfold/pinned), out of reach of C(git gc)."
  - Otherwise the task fails, naming the commit, the repository and the newest branches and tags there now (also as
    data, RV(refs)), before anything is built from it. A repository that cannot be fetched fails with git's message.
  - M(ansible.builtin.git) with O(ansible.builtin.git#module:bare=true) does not do this - it fetches without
    C(--prune), takes a sha as found without asking the server, and reports a change whenever the fetched HEAD moves.
author:
  - sparkfold developers (@sparkfold)
options:
  path:
    description: The cache, a bare repository; it and its missing parents are made when it has no C(HEAD) file.
    type: path
    required: true
  repo:
    description: The repository to fetch from, any URL git fetches (https, ssh, C(file://), a local path).
    type: str
    required: true
  commit:
    description: The pinned commit, a full sha (40 hex digits, or 64 for a SHA-256 repository), lower case.
    type: str
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Nothing is written, the cache is not fetched into. O(repo) is asked for its branches and tags
        (C(git ls-remote)), so an unreachable repository fails in check mode too. The commit is found when it is the
        tip of one of them, or, when the cache exists, an ancestor of a tip the cache already holds; otherwise
        RV(checked) is false and the real run decides.
  diff_mode:
    support: full
    details: The cache's state before and after, when it is made.
  platform:
    platforms: posix
notes:
  - C(changed) is true only when the cache is made (in check mode, would be). Fetching into an existing cache and
    moving C(refs/sparkfold/pinned) to the pin are not changes, since the cache follows upstream on every run.
  - Git never prompts for credentials here (C(GIT_TERMINAL_PROMPT=0)); a repository that needs them fails instead.
seealso:
  - module: ansible.builtin.git
  - name: git-fetch
    description: The --prune and --force options and the refspecs.
    link: https://git-scm.com/docs/git-fetch
"""

EXAMPLES = r"""
# The dsv41-flash-tp2-zig recipe's engine pin (roles/recipe/recipes/dsv41-flash-tp2-zig.yml).
- name: Fetch the engine repository and check that the pinned commit is upstream
  sparkfold.cluster.git_cache:
    path: /opt/sparkfold/src/engine
    repo: https://github.com/bertholomus/TensorFold.git
    commit: 5e10970a1e2372313589641587bd6da85f070f05
  register: engine_source
"""

RETURN = r"""
path:
  description: The cache.
  returned: always
  type: str
created:
  description: Whether the cache was made (in check mode, would be).
  returned: always
  type: bool
checked:
  description: Whether the commit was shown to be upstream (false only in check mode, when that needs a fetch).
  returned: success
  type: bool
found_on:
  description: A branch or tag of O(repo) that holds the commit (its short name), or null when it is on none.
  returned: success
  type: str
  sample: deepseek-v41-zig
fetched_by_sha:
  description: Whether the commit is on no branch or tag and the server served it by sha.
  returned: success
  type: bool
refs:
  description: The newest branches and tags of O(repo) after the fetch (at most 10, newest first).
  returned: when the commit is not upstream
  type: list
  elements: dict
  contains:
    ref:
      description: Its short name.
      type: str
    commit:
      description: The object it points at.
      type: str
    date:
      description: Its commit (or tag) date, YYYY-MM-DD.
      type: str
    subject:
      description: The first line of its message.
      type: str
stderr:
  description: What git said when O(repo) could not be fetched.
  returned: when the repository cannot be fetched
  type: str
"""

import os
import re
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

PIN_REF = "refs/sparkfold/pinned"
REFSPECS = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]
_SHA_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


class GitCache:
    """The git commands on one cache, through the module's run_command."""

    def __init__(self, module, git, path, repo):
        self.module, self.git, self.path, self.repo = module, git, path, repo

    def run(self, *args, cwd=None):
        return self.module.run_command([self.git, *args], cwd=cwd,
                                       environ_update={"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})

    def in_cache(self, *args):
        return self.run("-C", self.path, *args)

    def has_commit(self, commit):
        return self.in_cache("cat-file", "-e", f"{commit}^{{commit}}")[0] == 0

    def fail_unreachable(self, created, err, **extra):
        said = " ".join(line.strip() for line in err.strip().splitlines() if line.strip()) or "no message"
        self.module.fail_json(
            msg=f"cannot fetch the repository {self.repo} into {self.path}: git says: {said}. Check the URL "
            "(a typo, a renamed or private repository) and that this node reaches it (network, proxy, credentials: "
            "git may not prompt here), then run again.",
            path=self.path, created=created, changed=created, stderr=err.strip(), **extra)

    def fetch(self, created):
        rc, _out, err = self.in_cache("fetch", "--quiet", "--prune", "--force", "--no-tags", self.repo, *REFSPECS)
        if rc != 0:
            self.fail_unreachable(created, err)

    def ref_holding(self, commit):
        """The short name of a branch or tag of the cache that holds the commit, or None."""
        rc, out, err = self.in_cache("for-each-ref", "--count=1", "--format=%(refname:short)", "--contains", commit,
                                     "refs/heads", "refs/tags")
        if rc != 0:
            self.module.fail_json(msg=f"git for-each-ref --contains {commit} failed in {self.path}: {err.strip()}",
                                  path=self.path)
        return out.strip() or None

    def served_by_sha(self, commit):
        """Whether the server gives the commit by sha. Asked from an empty repository when the cache already holds
        the object (a fetch into the cache would then not ask the server); the commit is fetched into the cache."""
        if self.has_commit(commit):
            probe = tempfile.mkdtemp(prefix="git-cache-probe-")
            try:
                if self.run("init", "--quiet", "--bare", probe)[0] != 0:
                    return False
                if self.run("-C", probe, "fetch", "--quiet", "--depth=1", self.repo, commit)[0] != 0:
                    return False
            finally:
                shutil.rmtree(probe, ignore_errors=True)
        return self.in_cache("fetch", "--quiet", self.repo, commit)[0] == 0 and self.has_commit(commit)

    def pin(self, commit):
        rc, _out, err = self.in_cache("update-ref", PIN_REF, commit)
        if rc != 0:
            self.module.fail_json(msg=f"cannot keep {commit} in {self.path} as {PIN_REF}: {err.strip()}",
                                  path=self.path)

    def newest_refs(self, count=10):
        rc, out, _err = self.in_cache(
            "for-each-ref", f"--count={count}", "--sort=-creatordate",
            "--format=%(refname:short)%00%(objectname)%00%(creatordate:short)%00%(subject)", "refs/heads", "refs/tags")
        if rc != 0:
            return []
        return [dict(zip(("ref", "commit", "date", "subject"), line.split("\0"))) for line in out.splitlines()
                if line.count("\0") == 3]

    def remote_tips(self, created):
        """{sha: short ref name} of the branches and tags of the repository (tags peeled), by git ls-remote (it lists
        every ref; those outside refs/heads and refs/tags are left out)."""
        rc, out, err = self.run("ls-remote", self.repo)
        if rc != 0:
            self.fail_unreachable(created, err, checked=False)
        tips = {}
        for line in out.splitlines():
            sha, _tab, name = line.partition("\t")
            if name.endswith("^{}"):
                name = name[:-3]
            for prefix in ("refs/heads/", "refs/tags/"):
                if name.startswith(prefix):
                    tips.setdefault(sha, name[len(prefix):])
        return tips


def check_mode_find(cache, commit, created):
    """(checked, found_on) without writing: the commit as a tip upstream, else as an ancestor of a tip the cache
    holds."""
    tips = cache.remote_tips(created)
    if commit in tips:
        return True, tips[commit]
    if not created and cache.has_commit(commit):
        for sha, name in tips.items():
            if cache.has_commit(sha) and cache.in_cache("merge-base", "--is-ancestor", commit, sha)[0] == 0:
                return True, name
    return False, None


def not_upstream(module, cache, commit, created):
    refs = cache.newest_refs()
    held = " (the cache still holds it from an earlier fetch)" if cache.has_commit(commit) else ""
    newest = "; ".join(f"{ref['ref']} {ref['commit']} ({ref['date']}, {ref['subject']})" for ref in refs[:5])
    module.fail_json(
        msg=f"commit {commit} is not upstream in {cache.repo}{held}: after a pruning fetch it is on no branch or tag "
        "there, and the server does not serve it by sha. It was probably force-pushed or squashed away (or never "
        f"pushed). Nothing was built from it. Pin a commit that is on a branch or tag of {cache.repo} now; the "
        f"newest there: {newest or 'none'}.",
        path=cache.path, created=created, changed=created, refs=refs)


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "repo": {"type": "str", "required": True},
            "commit": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    path, repo, commit = module.params["path"], module.params["repo"], module.params["commit"]
    if not _SHA_RE.match(commit):
        module.fail_json(msg=f"commit must be a full commit sha in lower case (40 hex digits, or 64), got '{commit}': "
                         "a branch, a tag or a short sha is not a pin; pin the full sha it names now")
    if not repo or repo.startswith("-"):
        module.fail_json(msg=f"repo must be a git URL or path, got '{repo}'")
    git = module.get_bin_path("git", required=True)
    cache = GitCache(module, git, path, repo)
    created = not os.path.isfile(os.path.join(path, "HEAD"))
    result = {"changed": created, "created": created, "path": path}
    if created and module._diff:
        result["diff"] = {"before": {"path": path, "state": "absent"},
                          "after": {"path": path, "state": "bare repository", "repo": repo}}

    if module.check_mode:
        checked, found_on = check_mode_find(cache, commit, created)
        module.exit_json(checked=checked, found_on=found_on, fetched_by_sha=False, **result)

    if created:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            module.fail_json(msg=f"cannot make the cache directory {path}: {exc}", path=path)
        rc, _out, err = cache.run("init", "--quiet", "--bare", path)
        if rc != 0:
            module.fail_json(msg=f"git init --bare {path} failed: {err.strip()}", path=path)
    cache.fetch(created)

    found_on = cache.ref_holding(commit) if cache.has_commit(commit) else None
    fetched_by_sha = False
    if found_on is None:
        if not cache.served_by_sha(commit):
            not_upstream(module, cache, commit, created)
        fetched_by_sha = True
    cache.pin(commit)
    module.exit_json(checked=True, found_on=found_on, fetched_by_sha=fetched_by_sha, **result)


if __name__ == "__main__":
    main()
