# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared pieces of the Hugging Face Hub modules (hub_revision, hub_snapshot, tokenizer_pull).

Everything that talks to the Hub goes through huggingface_hub; nothing here speaks HTTP itself.
The modules run on the node, usually with the interpreter of the venv that the hf_cli role
makes (where huggingface_hub is installed).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import traceback
from datetime import datetime, timezone

from ansible.module_utils.basic import missing_required_lib
from ansible_collections.sparkfold.cluster.plugins.module_utils import manifest
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_refs import describe_force_push, force_pushed
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_timeouts import (
    describe_timeout,
    hub_timeouts,
    is_timeout,
    use_timeouts,
)

try:
    # HfApi is imported where a client is made (hub_client): its module (hf_api, the largest of huggingface_hub)
    # takes longer to import than the rest of a hub_snapshot no-op run, which asks the Hub without it.
    from huggingface_hub import errors as hf_errors

    HAS_HF = True
    HF_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - exercised on hosts without the venv
    hf_errors = None
    HAS_HF = False
    HF_IMPORT_ERROR = traceback.format_exc()

# The one file hasher is manifest.py's; tokenizer_pull takes these two from here.
file_digests = manifest.file_digests
content_matches = manifest.content_matches

DEFAULT_ENDPOINT = "https://huggingface.co"
FULL_SHA = re.compile(r"^[0-9a-f]{40}$")

# Options every Hub module takes, in the manner of kubernetes.core's args_common.
HUB_COMMON_ARG_SPEC = {
    "repo_id": {"type": "str", "required": True},
    "revision": {"type": "str", "default": "main"},
    "repo_type": {"type": "str", "default": "model", "choices": ["model", "dataset", "space"]},
    "token": {"type": "str", "no_log": True},
    "token_file": {"type": "path"},
    "endpoint": {"type": "str"},
}


class HubError(Exception):
    """A Hub failure, already phrased for the person running the playbook."""

    def __init__(self, msg, kind="error", **details):
        super().__init__(msg)
        self.msg = msg
        self.kind = kind
        self.details = details


def resolve_token(token=None, token_file=None, environ=None):
    """Return the token to use: the option, else HF_TOKEN, else a token file, else None.

    The token file is token_file, else HF_TOKEN_PATH, else ~/.cache/huggingface/token
    (where `hf auth login` writes it).
    """
    environ = os.environ if environ is None else environ
    if token:
        return token.strip()
    if environ.get("HF_TOKEN"):
        return environ["HF_TOKEN"].strip()
    candidates = [token_file] if token_file else [
        environ.get("HF_TOKEN_PATH"),
        os.path.join(environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "token"),
    ]
    for path in candidates:
        if path and os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                value = handle.read().strip()
            if value:
                return value
    if token_file:
        raise HubError(f"token_file {token_file} does not exist or is empty; write the Hub token into it (mode 0600)")
    return None


def resolve_endpoint(endpoint=None, environ=None):
    """Return the Hub endpoint: the option, else HF_ENDPOINT, else the public Hub."""
    environ = os.environ if environ is None else environ
    return (endpoint or environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hub_settings(params):
    """Return (HubTimeouts, endpoint, token) for the module parameters in HUB_COMMON_ARG_SPEC and
    HUB_TIMEOUT_ARG_SPEC (their defaults when the module has no such option); HubError for a bad one."""
    try:
        timeouts = hub_timeouts(params)
    except ValueError as exc:
        raise HubError(str(exc), kind="args") from None
    endpoint = resolve_endpoint(params.get("endpoint"))
    return timeouts, endpoint, resolve_token(params.get("token"), params.get("token_file"))


def hub_client(params):
    """Return (HfApi, endpoint, token) for the module parameters in HUB_COMMON_ARG_SPEC.

    Every Hub call of the process then times out as the connect_timeout and read_timeout parameters say
    (module_utils/hub_timeouts.py HUB_TIMEOUT_ARG_SPEC; their defaults when the module has no such option).
    """
    timeouts, endpoint, token = hub_settings(params)
    use_timeouts(timeouts)
    from huggingface_hub import HfApi  # here, not at the top: see the import of hf_errors

    return HfApi(endpoint=endpoint, token=token if token else False), endpoint, token


def describe_hub_error(exc, repo_id, revision, endpoint, token):
    """Turn a huggingface_hub exception into a HubError that says what is wrong and what to do.

    GatedRepoError is a subclass of RepositoryNotFoundError: it is tested first.
    """
    where = f"{repo_id} on {endpoint}"
    if is_timeout(exc):
        return HubError(describe_timeout(exc, f"asking the Hub at {endpoint} about {repo_id}"), kind="timeout")
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, hf_errors.GatedRepoError):
        if token:
            return HubError(
                f"{where} is gated and the token given has no access to it: accept the model's "
                "conditions on its Hub page with the account that owns the token, or use another token",
                kind="gated",
            )
        return HubError(
            f"{where} is gated: give a token of an account that accepted its conditions "
            "(HF_TOKEN, the token option, or token_file)",
            kind="gated",
        )
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return HubError(f"revision {revision} does not exist in {where}", kind="revision_not_found")
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        if status == 401 and token:
            return HubError(
                f"the Hub at {endpoint} refused the token (401): it is invalid or expired; "
                "make a new one at <hub>/settings/tokens and set HF_TOKEN",
                kind="bad_token",
            )
        hint = " (it may be private: give a token that can read it)" if not token else ""
        return HubError(f"repository {where} does not exist{hint}; check repo_id", kind="repo_not_found")
    if isinstance(exc, hf_errors.HfHubHTTPError) and status == 401:
        return HubError(
            f"the Hub at {endpoint} refused the token (401): it is invalid or expired; make a new one and set HF_TOKEN",
            kind="bad_token",
        )
    if isinstance(exc, hf_errors.HfHubHTTPError):
        return HubError(f"the Hub at {endpoint} answered {status} for {where}: {exc}", kind="http")
    return HubError(f"could not reach the Hub at {endpoint} for {where}: {exc}", kind="network")


def is_full_sha(revision):
    return bool(FULL_SHA.match(revision or ""))


# ---------------------------------------------------------------------------
# Revisions, refs and file listings (hub_revision, tokenizer_pull; usable by hub_snapshot).

SHORT_SHA = re.compile(r"^[0-9a-f]{7,39}$")
SUPER_SQUASH_PREFIX = "Super-squash"

HF_MISSING_HINT = (
    "The modules that talk to the Hugging Face Hub need huggingface_hub (1.x or newer) in the Python that runs "
    "them on the node: run the sparkfold.cluster.hf_cli role on the node and set ansible_python_interpreter to "
    "the python of the venv it makes (hf_cli_venv, by default /opt/sparkfold/hf/bin/python), or install "
    "huggingface_hub for that interpreter"
)


def require_hf(module):
    """fail_json with missing_required_lib and HF_MISSING_HINT when huggingface_hub cannot be imported."""
    if not HAS_HF:
        module.fail_json(
            msg=f"{missing_required_lib('huggingface_hub')} {HF_MISSING_HINT}",
            exception=HF_IMPORT_ERROR,
        )


def short_sha(commit):
    """The first 7 characters of a commit id (as the Hub shows it), or None."""
    return commit[:7] if commit else None


def _lfs_sha256(lfs):
    if not lfs:
        return None
    value = lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)
    return value.lower() if value else None


def file_record(sibling):
    """One file of a repo_info(files_metadata=True) listing as {path, size, sha256, blob_id}.

    sha256 is the LFS sha256 of the content (None for files kept in git, whose blob_id is the git blob id of
    the content; for LFS files blob_id is the id of the pointer).
    """
    return {
        "path": sibling.rfilename,
        "size": sibling.size,
        "sha256": _lfs_sha256(sibling.lfs),
        "blob_id": sibling.blob_id,
    }


def repo_files(info):
    """The files of a repo_info(files_metadata=True) answer as file_record dicts, sorted by path."""
    return sorted((file_record(s) for s in info.siblings or []), key=lambda f: f["path"])


def _commit_date(commit_info):
    created = getattr(commit_info, "created_at", None)
    return created.isoformat() if created else None


def _commit_title(commit_info):
    return (getattr(commit_info, "title", None) or "").strip()


def list_refs(api, repo_id, repo_type="model", histories=None):
    """Branches and tags of a repo with their head commits: {branches: [...], tags: [...]}.

    Each entry is {name, commit, date, title}; date (ISO 8601) and title are those of the head commit, from
    list_repo_commits. Pass a dict as histories to get the commit list of every head, keyed by commit id.
    """
    histories = {} if histories is None else histories
    refs = api.list_repo_refs(repo_id, repo_type=repo_type)
    result = {}
    for kind, entries in (("branches", refs.branches), ("tags", refs.tags)):
        listed = []
        for ref in sorted(entries, key=lambda r: r.name):
            commit = ref.target_commit
            if commit not in histories:
                histories[commit] = api.list_repo_commits(repo_id, repo_type=repo_type, revision=commit)
            head = histories[commit][0] if histories[commit] else None
            listed.append(
                {
                    "name": ref.name,
                    "commit": commit,
                    "date": _commit_date(head) if head else None,
                    "title": _commit_title(head) if head else None,
                }
            )
        result[kind] = listed
    return result


def super_squashed(refs, histories, branch="main"):
    """The head of branch when its whole history is one commit titled "Super-squash...", else None."""
    for ref in refs.get("branches", []):
        if ref["name"] == branch:
            history = histories.get(ref["commit"]) or []
            if len(history) == 1 and _commit_title(history[0]).startswith(SUPER_SQUASH_PREFIX):
                return ref
    return None


def _describe_ref(ref):
    date = ref.get("date") or "no date"
    with contextlib.suppress(ValueError):
        date = datetime.fromisoformat(date).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"{ref['name']} at {short_sha(ref['commit'])} ({date}, \"{ref.get('title') or ''}\")"


def missing_revision_error(api, repo_id, revision, repo_type, endpoint, fallback_branch="main", remedy=None):
    """HubError for a revision the Hub does not have, naming what it has now and what to do.

    remedy: the closing sentence for the module's own options; {pin} in it becomes " (for example
    revision: <head of fallback_branch>)". Default: hub_revision's (pin a commit, or on_missing).
    details: refs (as list_refs, None when they could not be listed), squashed (the branch head of
    super_squashed or None), force_pushed (what force_pushed found, or None; never set with squashed).
    """
    where = f"{repo_id} on {endpoint}"
    histories = {}
    try:
        refs = list_refs(api, repo_id, repo_type, histories)
    except Exception as exc:  # the revision error is the one to report; the listing is a help
        return HubError(
            f"revision {revision} does not exist in {where} (the Hub answered RevisionNotFound; nothing was "
            f"downloaded), and its branches and tags could not be listed: {exc}",
            kind="revision_not_found",
            refs=None,
            squashed=None,
            force_pushed=None,
        )
    branches = "; ".join(_describe_ref(r) for r in refs["branches"]) or "none"
    tags = "; ".join(_describe_ref(r) for r in refs["tags"]) or "none"
    msg = (
        f"revision {revision} does not exist in {where} (the Hub answered RevisionNotFound; nothing was "
        f"downloaded). Branches now: {branches}. Tags now: {tags}."
    )
    squashed = super_squashed(refs, histories, fallback_branch)
    forced = None if squashed else force_pushed(api, repo_id, repo_type, refs, histories, fallback_branch)
    if squashed:
        msg += (
            f" The history of {fallback_branch} looks super-squashed: it is a single commit titled "
            f"\"{squashed['title']}\", so older commits such as {revision} were removed from the Hub and will "
            "not come back."
        )
    elif forced:
        msg += describe_force_push(forced, revision)
    else:
        head = next((r for r in refs["branches"] if r["name"] == fallback_branch), None)
        if head is not None:
            count = len(histories.get(head["commit"]) or [])
            msg += (
                f" The history of {fallback_branch} ({count} commit{'s' if count != 1 else ''}) does not look "
                "super-squashed"
            )
            if is_full_sha(revision):  # a pasted full commit: a rewrite is as likely as a typo
                msg += (
                    f", and no tag or date tells of a force-push. Either {revision} is mistyped, or "
                    f"{fallback_branch} was force-pushed (reset to an older commit with new commits on top, which "
                    "leaves no other trace) and the commit removed from the Hub: compare it with where you took it "
                    "from."
                )
            else:
                msg += f"; check {revision} for a typo."
    fallback = next((r for r in refs["branches"] if r["name"] == fallback_branch), None)
    pin = f" (for example revision: {fallback['commit']}, the head of {fallback_branch})" if fallback else ""
    if remedy is None:
        remedy = (
            " To go on, pin one of the commits above{pin} after checking its files, or set "
            f"on_missing=branch_head_if_files_match with expected_files to accept the head of {fallback_branch} "
            "only if its files match the ones you expect."
        )
    msg += remedy.replace("{pin}", pin)
    return HubError(msg, kind="revision_not_found", refs=refs, squashed=squashed, force_pushed=forced)


def _expand_short_sha(api, repo_id, prefix, repo_type):
    """Full ids of the commits reachable from a branch or tag head that start with prefix."""
    histories = {}
    list_refs(api, repo_id, repo_type, histories)
    return sorted({c.commit_id for history in histories.values() for c in history if c.commit_id.startswith(prefix)})


def resolve_revision(api, repo_id, revision, repo_type, endpoint, token, fallback_branch="main", check_access=True):
    """Ask the Hub for revision (a full sha too) and return (info, commit); raise HubError.

    info is the repo_info(files_metadata=True) answer at the commit. A short sha the Hub does not resolve itself
    is looked up in the history of the branches and tags. A revision the Hub does not have gives
    missing_revision_error (kind revision_not_found). With check_access, a gated repo is also asked for one file's
    metadata, since the Hub shows a gated repo's listing to everyone but its files only to accepted accounts.
    """
    try:
        try:
            info = api.repo_info(repo_id, revision=revision, repo_type=repo_type, files_metadata=True)
        except hf_errors.RevisionNotFoundError:
            matches = _expand_short_sha(api, repo_id, revision, repo_type) if SHORT_SHA.match(revision) else []
            if len(matches) > 1:
                raise HubError(
                    f"revision {revision} of {repo_id} on {endpoint} is ambiguous: it starts "
                    f"{len(matches)} commits ({', '.join(matches)}); give more of the sha",
                    kind="ambiguous_revision",
                ) from None
            if not matches:
                raise missing_revision_error(api, repo_id, revision, repo_type, endpoint, fallback_branch) from None
            info = api.repo_info(repo_id, revision=matches[0], repo_type=repo_type, files_metadata=True)
        if is_full_sha(revision) and info.sha != revision:
            raise HubError(
                f"the Hub at {endpoint} answered commit {info.sha} for revision {revision} of {repo_id}",
                kind="http",
            )
        if check_access and getattr(info, "gated", None):
            files = [s for s in info.siblings or [] if s.rfilename]
            if files:
                probe = min(files, key=lambda s: (s.size or 0, s.rfilename))
                api.file_exists(repo_id, probe.rfilename, repo_type=repo_type, revision=info.sha)
    except HubError:
        raise
    except Exception as exc:
        raise describe_hub_error(exc, repo_id, revision, endpoint, token) from None
    return info, info.sha


def compare_manifest(files, expected, patterns=None):
    """Compare a listing (file_record dicts) with expected [{path, sha256, blob_id}]; return the differences.

    Every expected file must be in the listing with the same sha256 and/or blob_id (whichever the entry gives);
    every listed file whose path matches one of patterns (fnmatch, default: all) must be expected. Returns a list
    of sentences, empty when the listing matches.
    """
    patterns = patterns or ["*"]
    by_path = {f["path"]: f for f in files}
    problems = []
    seen = set()
    for entry in expected:
        path = entry["path"]
        if path in seen:
            problems.append(f"{path} is listed twice in expected_files")
            continue
        seen.add(path)
        have = by_path.get(path)
        if have is None:
            problems.append(f"{path} is missing")
            continue
        for key, label in (("sha256", "sha256"), ("blob_id", "blob id")):
            want = (entry.get(key) or "").lower()
            if not want:
                continue
            got = have.get(key)
            if got is None and key == "sha256":
                problems.append(f"{path} is not an LFS file, so the Hub lists no sha256 for it: give its blob_id")
            elif (got or "").lower() != want:
                problems.append(f"{path} has {label} {got}, expected {want}")
    for path in sorted(by_path):
        if path not in seen and any(fnmatch.fnmatchcase(path, p) for p in patterns):
            problems.append(f"{path} is not in expected_files")
    return problems
