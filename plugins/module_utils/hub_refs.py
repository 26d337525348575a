# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a Hub revision is, and what happened to one that is gone (used by module_utils/hub.py and the Hub modules).

- force_pushed / describe_force_push: a pinned commit the Hub no longer has, in a repository whose branch was
  replaced by unrelated commits, or reset to an older commit with new commits on top (a force-push; the
  super-squash is told apart by hub.super_squashed first);
- revision_kind / unpinned_revision_warning: a branch or a tag given where a pin is expected.

Nothing here imports huggingface_hub: the functions take the HfApi object (or what list_refs returned) as input.
"""

from __future__ import annotations

import contextlib
import re
from datetime import datetime, timedelta, timezone

SHA_PREFIX = re.compile(r"^[0-9a-fA-F]{7,40}$")
# The Hub makes a repository's first commit when it creates the repository: a branch whose oldest commit is
# this much younger than the repository no longer starts where the repository did.
FORCE_PUSH_SLACK = timedelta(minutes=10)


def format_date(value):
    """A datetime or ISO 8601 text as "2026-02-01 00:00 UTC"; "no date" for None; other text as given."""
    if not value:
        return "no date"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _commit(info):
    """A GitCommitInfo as {commit, date, title} (what list_refs gives for a head)."""
    created = getattr(info, "created_at", None)
    return {
        "commit": info.commit_id,
        "date": created.isoformat() if created else None,
        "title": (getattr(info, "title", None) or "").strip(),
    }


def force_pushed(api, repo_id, repo_type, refs, histories, branch="main"):
    """Signs that branch was rewritten by a force-push, or None when there are none.

    refs and histories are what list_refs filled in. Three signs count:

    - the oldest commit of branch is dated more than FORCE_PUSH_SLACK after the repository was created
      (the created_at of repo_info): the branch's history no longer reaches back to the repository's start;
    - a tag whose history shares no commit with branch: the branch left the history the tag was made on;
    - a tag that no branch contains, whose history shares older commits with branch (a rebase-style push:
      branch reset to an older commit, new commits on top): the branch dropped the commits the tag was made on.

    Returns {branch, root ({commit, date, title} of the oldest commit of branch), created_at (ISO 8601 or None),
    unrelated_tags (names), diverged_tags ([{name, commit, reset_to: {commit, date, title} of the newest commit
    the tag shares with branch}])}. Other branches do not count as signs: quant repos keep a branch per size,
    often without common history; a tag that one of them contains is not counted as diverged.
    """
    head = next((r for r in refs.get("branches", []) if r["name"] == branch), None)
    history = histories.get(head["commit"]) if head else None
    if not history:
        return None
    ids = {c.commit_id for c in history}
    unrelated = [
        tag["name"]
        for tag in refs.get("tags", [])
        if histories.get(tag["commit"]) and not ids & {c.commit_id for c in histories[tag["commit"]]}
    ]
    branch_ids = set()
    for ref in refs.get("branches", []):
        branch_ids.update(c.commit_id for c in histories.get(ref["commit"]) or [])
    diverged = []
    for tag in refs.get("tags", []):
        if tag["commit"] in branch_ids or tag["name"] in unrelated:
            continue
        fork = next((c for c in histories.get(tag["commit"]) or [] if c.commit_id in ids), None)
        if fork is not None:
            diverged.append({"name": tag["name"], "commit": tag["commit"], "reset_to": _commit(fork)})
    oldest = history[-1]
    created = None
    with contextlib.suppress(Exception):  # a help for the message: without it only the tags can tell
        created = getattr(api.repo_info(repo_id, repo_type=repo_type), "created_at", None)
    started = getattr(oldest, "created_at", None)
    late = bool(created and started and started - created > FORCE_PUSH_SLACK)
    if not late and not unrelated and not diverged:
        return None
    return {
        "branch": branch,
        "root": _commit(oldest),
        "created_at": created.isoformat() if late else None,
        "unrelated_tags": unrelated,
        "diverged_tags": diverged,
    }


def describe_force_push(forced, revision):
    """The sentence of the missing-revision message for what force_pushed found."""
    branch, root = forced["branch"], forced["root"]
    signs = []
    if forced["created_at"]:
        signs.append(
            f"its oldest commit is {root['commit'][:7]} ({format_date(root['date'])}, \"{root['title']}\"), "
            f"while the repository was created {format_date(forced['created_at'])}"
        )
    if forced["unrelated_tags"]:
        tags = ", ".join(forced["unrelated_tags"])
        signs.append(f"it shares no commit with tag{'s' if len(forced['unrelated_tags']) > 1 else ''} {tags}")
    for tag in forced.get("diverged_tags") or []:
        base = tag["reset_to"]
        signs.append(
            f"it no longer contains tag {tag['name']} ({tag['commit'][:7]}), whose history it shares only up to "
            f"{base['commit'][:7]} ({format_date(base['date'])}, \"{base['title']}\")"
        )
    if forced["created_at"] or forced["unrelated_tags"]:
        what = f"{branch} was replaced by unrelated commits, so older commits such as {revision}"
    else:
        base = forced["diverged_tags"][0]["reset_to"]
        what = (
            f"{branch} was reset to an older commit ({base['commit'][:7]} or before) and new commits were put on "
            f"top, so the commits it had after that, such as {revision},"
        )
    return (
        f" The history of {branch} looks force-pushed: {'; '.join(signs)}. {what} were removed from the Hub and "
        "will not come back."
    )


def revision_kind(revision, commit, refs=None):
    """What revision names: "commit" (a full or short id of commit), "branch", "tag", "pull request ref", or
    "branch or tag" when refs (list_refs or ref_names, None if unknown) do not tell."""
    revision = revision or ""
    if SHA_PREFIX.match(revision) and commit and commit.lower().startswith(revision.lower()):
        return "commit"
    if revision.startswith("refs/pr/"):
        return "pull request ref"
    for prefix, kind in (("refs/heads/", "branch"), ("refs/tags/", "tag")):
        if revision.startswith(prefix):
            return kind
    for key, kind in (("branches", "branch"), ("tags", "tag")):
        if any(ref["name"] == revision for ref in (refs or {}).get(key, [])):
            return kind
    return "branch or tag"


def ref_names(api, repo_id, repo_type="model"):
    """{branches: [{name}], tags: [{name}]} of a repo (one request, no histories), or None if it fails."""
    try:
        refs = api.list_repo_refs(repo_id, repo_type=repo_type)
    except Exception:  # only names the kind in a warning: "branch or tag" will do
        return None
    return {
        "branches": [{"name": r.name} for r in refs.branches],
        "tags": [{"name": r.name} for r in refs.tags],
    }


def unpinned_revision_warning(repo_id, revision, commit, kind, variable):
    """The warning for a revision that is not a commit id (kind from revision_kind), or None for a commit id.

    variable names what to set to the commit (the playbook variable, or the module option).
    """
    if kind == "commit":
        return None
    return (
        f"revision {revision} of {repo_id} is a {kind}, not a pin: it resolved to commit {commit} on this run, but "
        f"a {kind} can move, so the next run may deploy another commit. To pin it, set {variable} to {commit}"
    )


def check_pin(api, repo_id, revision, commit, variable, repo_type="model", refs=None):
    """unpinned_revision_warning for revision (None for a commit id); asks the Hub for the names of the branches
    and tags when refs (as list_refs returns) is None and revision is not a commit id."""
    kind = revision_kind(revision, commit, refs)
    if kind == "branch or tag" and refs is None:
        kind = revision_kind(revision, commit, ref_names(api, repo_id, repo_type))
    return unpinned_revision_warning(repo_id, revision, commit, kind, variable)
