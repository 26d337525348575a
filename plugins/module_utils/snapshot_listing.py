# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Hub's listing of the commit a store was last fetched at, kept beside the store so that a re-run need not
list the commit again (module_utils/snapshot_plan.py).

A commit's files never change on the Hub: a git commit names its tree, and the tree names every file's blob (an
LFS file's pointer names its sha256). So the listing of (endpoint, repo, commit) that a run read from the Hub stays
true for as long as the Hub has that commit. A run that completes writes it to
``<local_dir>/.cache/huggingface/.sparkfold-listing.json`` (with the other bookkeeping of the store, which copies of
the store leave out). A later run still asks the Hub, with one HEAD of one file of the listing at the revision it
was given (huggingface_hub's get_hf_file_metadata, as hub_download.Downloader.locate asks before a download),
whether the revision still resolves to that commit and the file is still the one listed (its size and hash); with
any other answer, or none, it lists the commit as a first run does (repo_info), and says what that says.

What the HEAD tells, huggingface_hub 2.4.0 huggingface_hub/file_download.py get_hf_file_metadata: commit_hash is
the answer's X-Repo-Commit header (the commit the revision resolved to), etag is X-Linked-Etag (an LFS file's
sha256) or else ETag (a git file's blob id), size is X-Linked-Size or Content-Length.
"""

from __future__ import annotations

import hashlib
import json
import os

from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import (
    check_repo_path,
    expected_hash,
    remote_entry,
    write_atomic,
)

try:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
except ImportError:  # pragma: no cover - reported by the module through HAS_HF
    get_hf_file_metadata = hf_hub_url = None

LISTING_NAME = ".sparkfold-listing.json"  # under <local_dir>/.cache/huggingface/
LISTING_VERSION = 1


def listing_path(local_dir):
    return os.path.join(local_dir, ".cache", "huggingface", LISTING_NAME)


def _digest(files):
    """sha256 of the files' canonical JSON: a listing damaged on disk is not taken for the Hub's."""
    return hashlib.sha256(json.dumps(files, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def listing_text(endpoint, repo_id, repo_type, commit, entries):
    """The listing file's text: every file of the commit (remote_entry dicts), sorted by path."""
    files = sorted(entries, key=lambda entry: entry["path"])
    data = {"version": LISTING_VERSION, "endpoint": endpoint, "repo_id": repo_id, "repo_type": repo_type,
            "commit": commit, "files": files, "sha256": _digest(files)}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def parse_listing(text, endpoint, repo_id, repo_type):
    """(commit, entries) of a listing text for that endpoint and repository; None for any other or a bad one.

    Every entry is checked again as one from the Hub is (a safe path, a size, a hash), and the whole against the
    digest written with it.
    """
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("version") != LISTING_VERSION:
        return None
    if (data.get("endpoint"), data.get("repo_id"), data.get("repo_type")) != (endpoint, repo_id, repo_type):
        return None
    commit, files = data.get("commit"), data.get("files")
    if not isinstance(commit, str) or not isinstance(files, list) or not files or data.get("sha256") != _digest(files):
        return None
    entries = []
    try:
        for item in files:
            if not isinstance(item, dict) or not isinstance(item.get("size"), int):
                return None
            path = check_repo_path(item.get("path"))
            entries.append(remote_entry(path, item["size"], sha256=item.get("sha256"), blob_id=item.get("blob_id")))
    except (ValueError, AttributeError, TypeError):
        return None
    return commit, entries


def read_listing(path, endpoint, repo_id, repo_type):
    """The listing at ``path`` as parse_listing gives it; None when there is none or it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    return parse_listing(text, endpoint, repo_id, repo_type)


def write_listing(path, text):
    """Write the listing when its text differs from what is there; return whether it wrote."""
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return False
    except (OSError, UnicodeDecodeError):
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, text, durable=False)  # lost in a crash, it is listed again by the next run
    return True


def probe_entry(entries):
    """The file a re-run asks the Hub about: the smallest git file (the Hub answers its HEAD itself, with no
    redirect to a CDN), else the smallest file; ties by path."""
    git_files = [entry for entry in entries if "blob_id" in entry]
    return min(git_files or entries, key=lambda entry: (entry["size"], entry["path"]))


def ask_hub(repo_id, repo_type, revision, endpoint, token, entry, timeout, library_name):
    """HEAD ``entry`` of the repository at ``revision``: huggingface_hub's HfFileMetadata of the answer.

    ``timeout`` is passed on (hub_timeouts.http_timeout), so the call needs no client of use_timeouts. Raises
    what get_hf_file_metadata raises.
    """
    url = hf_hub_url(repo_id, entry["path"], repo_type=repo_type, revision=revision, endpoint=endpoint)
    return get_hf_file_metadata(url, token=token if token else False, endpoint=endpoint, timeout=timeout,
                                library_name=library_name)


def still_listed(meta, commit, entry):
    """Whether the Hub's HEAD answer (``meta``) says the revision is still ``commit`` and ``entry`` unchanged."""
    _kind, digest = expected_hash(entry)
    return (meta.commit_hash == commit and meta.size == entry["size"]
            and (meta.etag or "").lower() == digest)
