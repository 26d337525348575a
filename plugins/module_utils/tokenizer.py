# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tokenizer files of a model directory (sparkfold.cluster.tokenizer_pull).

- choose_source: which repo has the tokenizer - the model at its revision, else its base model (named by the
  caller or by the model card);
- plan_files / local_state: what each file in the directory is now against the chosen listing;
- write_files: stage in the directory, check against the listing, then move into place (atomic rename);
- file_results / diff_after: what the module returns.

Hashing and the content check are module_utils/hub.py's (file_digests, content_matches); files come through
hub_snapshot's downloader (module_utils/hub_download.py), so the module's connect_timeout, read_timeout and
stall_timeout bound them as they bound its other Hub calls. Hub failures come as HubError, everything else as
PullError (msg, kind: the module's hub_error, or None).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
import tempfile

from ansible.module_utils.common.text.converters import to_native
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import (
    HubError,
    content_matches,
    describe_hub_error,
    file_digests,
    file_record,
    repo_files,
    resolve_revision,
    short_sha,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_download import Downloader
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_timeouts import current_timeouts
from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import remote_entry

STAGING_PREFIX = ".tokenizer_pull."


class PullError(Exception):
    def __init__(self, msg, kind):
        super().__init__(msg)
        self.msg = msg
        self.kind = kind


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


def download(api, repo_id, commit, record, dest):
    """Fetch the listed file ``record`` (file_record) of repo_id@commit into ``dest``, checked against the listing
    as it streams, within the connect, read and stall timeouts in force (hub_client); raise HubError."""
    try:
        entry = remote_entry(record["path"], record.get("size"), sha256=record.get("sha256"),
                             blob_id=record.get("blob_id"))
    except ValueError as exc:
        raise HubError(f"{repo_id}@{commit} on {api.endpoint}: {exc}", kind="listing") from None
    timeouts = current_timeouts()
    # The tokenizer's few small files over our bounded HTTP download (a Xet-backed one through the Hub's HTTP
    # bridge): no staging folder for huggingface_hub's Xet path, and the stall bound applies to every file.
    downloader = Downloader(repo_id, "model", commit, commit, api.endpoint, api.token, timeouts, timeouts.stall,
                            lambda _count: None, transfer="http")
    try:
        downloader.fetch(entry, dest)
    except HubError:
        raise
    except OSError as exc:
        raise HubError(f"cannot write {dest}: {to_native(exc)}", kind=None) from None
    except Exception as exc:  # an HTTP error answer while streaming: phrased as the other Hub failures
        raise describe_hub_error(exc, repo_id, commit, api.endpoint, api.token) from None
    return dest


def card_base_model(api, repo_id, commit, info):
    """base_model from the model card: the Hub's parsed cardData, else the README's YAML header."""
    card = getattr(info, "card_data", None)
    base = getattr(card, "base_model", None) if card is not None else None
    readme = next((s for s in info.siblings or [] if s.rfilename == "README.md"), None)
    if base is None and readme is not None:
        from huggingface_hub.repocard import metadata_load

        tmp = tempfile.mkdtemp(prefix="tokenizer_pull-card.")
        try:
            path = download(api, repo_id, commit, file_record(readme), os.path.join(tmp, "README.md"))
            base = (metadata_load(path) or {}).get("base_model")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if isinstance(base, (list, tuple)):
        return [b for b in base if b] or None
    return [base] if base else None


def choose_source(api, params, files, endpoint, token, warn):
    """Resolve the model (and, when it lacks some of files, the base model); raise HubError or PullError.

    Returns {source, source_repo, source_commit, listing ({path: file_record}), model_commit, base_repo_id,
    base_commit}. warn(msg) is called when the model card names several base models.
    """
    repo_id, revision, model_dir = params["repo_id"], params["revision"], params["model_dir"]
    info, model_commit = resolve_revision(api, repo_id, revision, "model", endpoint, token)
    listing = {f["path"]: f for f in repo_files(info)}
    chosen = {
        "source": "model",
        "source_repo": repo_id,
        "source_commit": model_commit,
        "listing": listing,
        "model_commit": model_commit,
        "base_repo_id": None,
        "base_commit": None,
    }
    model_missing = [p for p in files if p not in listing]
    if not model_missing:
        return chosen
    base_repo_id = params["base_repo_id"]
    if not base_repo_id:
        try:
            bases = card_base_model(api, repo_id, model_commit, info)
        except HubError:
            raise
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
            warn(
                f"the model card of {repo_id} lists {len(bases)} base models ({', '.join(bases)}); "
                f"using the first, {base_repo_id}; set base_repo_id to choose another"
            )
    chosen["base_repo_id"] = base_repo_id
    base_info, base_commit = resolve_revision(api, base_repo_id, params["base_revision"], "model", endpoint, token)
    chosen["base_commit"] = base_commit
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
    chosen.update(source="base", source_repo=base_repo_id, source_commit=base_commit, listing=base_listing)
    return chosen


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


def plan_files(model_dir, paths, listing):
    """One entry per path: {path, dest, record, action, local_copy, digests}; raises PullError or OSError."""
    plan = []
    for path in paths:
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
    return plan


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


def _stage(api, staging, index, item, source_repo, source_commit, model_dir):
    """Put one file into staging (a copy of its symlink target, else a download) and check it; return its path."""
    record = item["record"]
    if item["local_copy"]:
        staged = os.path.join(staging, f"copy.{index}")
        shutil.copyfile(item["local_copy"], staged)
        origin = f"the symlink target {item['local_copy']}"
    else:
        try:
            staged = download(api, source_repo, source_commit, record, os.path.join(staging, f"download.{index}"))
        except HubError as error:
            raise PullError(
                f"downloading {item['path']} from {source_repo} at {short_sha(source_commit)} failed: "
                f"{error.msg}. Nothing was written to {model_dir}",
                "verify" if error.kind == "hash_mismatch" else error.kind,
            ) from None
        origin = f"the download from {source_repo} at {short_sha(source_commit)}"
    digests = file_digests(staged)
    if not content_matches(record, digests):
        want = record.get("sha256") or f"blob id {record.get('blob_id')}"
        raise PullError(
            f"{item['path']} from {origin} does not match the Hub's listing (expected {want}, "
            f"{record.get('size')} bytes; got sha256 {digests[0]}, blob id {digests[1]}, {digests[2]} "
            f"bytes). Nothing was written to {model_dir}",
            "verify",
        )
    item["written_sha256"] = digests[0]
    return staged


def write_files(api, model_dir, to_write, source_repo, source_commit):
    """Stage every file in a temp dir inside model_dir, verify it, then move each into place with os.replace.

    Raises PullError (kind None for a local write failure).
    """
    try:
        os.makedirs(model_dir, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=model_dir)
    except OSError as exc:
        raise PullError(f"cannot write into {model_dir}: {to_native(exc)}", None) from None
    try:
        for index, item in enumerate(to_write):
            item["staged"] = _stage(api, staging, index, item, source_repo, source_commit, model_dir)
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
        raise PullError(f"cannot write the tokenizer files into {model_dir}: {to_native(exc)}", None) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def file_results(plan, source_repo, source_commit):
    """The module's files: {path, sha256, source_repo, source_commit, action} per planned file."""
    results = []
    for item in plan:
        if item["action"] == "present":
            sha256 = item["digests"][0]
        elif "written_sha256" in item:
            sha256 = item["written_sha256"]
        elif item["digests"] is not None and item["local_copy"]:
            sha256 = item["digests"][0]
        else:
            sha256 = item["record"].get("sha256")
        results.append(
            {
                "path": item["path"],
                "sha256": sha256,
                "source_repo": source_repo,
                "source_commit": source_commit,
                "action": item["action"],
            }
        )
    return results


def diff_after(results, listing, source_repo, source_commit):
    """The after text of the diff: one line per file as it is (or will be) after the run."""
    return "".join(
        f"{r['path']}: file, sha256 {r['sha256'] or '(not listed)'}, {listing[r['path']]['size']} bytes"
        f"{'' if r['action'] == 'present' else f', from {source_repo}@{short_sha(source_commit)}'}\n"
        for r in results
    )
