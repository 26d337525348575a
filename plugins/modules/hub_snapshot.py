#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: hub_snapshot
short_description: Download a pinned Hugging Face Hub revision into a verified directory of real files
version_added: "0.1.0"
description:
  - Resolves O(revision) of O(repo_id) to a commit with the Hub's repository API (which lists every file with its
    size and hash) before fetching anything, so a revision that no longer exists (a force-squashed pin) fails
    before the first byte is downloaded.
  - Downloads the files of that commit selected by O(allow_patterns) and O(ignore_patterns) into O(local_dir)
    as real files (no symlinks into a Hub cache), O(max_workers) files at a time, with huggingface_hub.
  - Every downloaded file is hashed while it streams and compared with the hash the Hub publishes (sha256 for LFS
    files, the git blob id for the others) before it is moved into place; a file that does not match is never
    put in O(local_dir).
  - Keeps partial downloads under C(<local_dir>/.cache/huggingface/download/) and resumes them with HTTP Range
    requests on the next run, so a run killed in the middle of a 5 GB shard loses nothing already transferred.
  - Records every verified file (path, size, mtime in nanoseconds, sha256 or blob id, time of verification, with the
    repository and commit) in C(<local_dir>/.sparkfold-manifest.json). See O(verify) for how a run uses it.
  - Refuses to start, before any download, when the filesystem of O(local_dir) lacks room for the bytes still
    needed plus O(min_free_bytes).
  - Never deletes a verified file. Files of O(local_dir) that are not in the selection are left alone.
  - A file in the store that fails verification (wrong size or hash, a symlink, a partial copy) is renamed to
    C(<file>.corrupt) and fetched again; the C(.corrupt) copy is deleted once a good copy is in place.
author:
  - sparkfold developers (@sparkfold)
options:
  revision:
    description:
      - Branch, tag or full 40-hex commit to download. It is resolved to a commit before anything is fetched; the
        module fails when the Hub does not know it.
      - Pin a commit in production, and keep the check; a commit can vanish when its history is squashed.
    type: str
    default: main
  local_dir:
    description:
      - Directory of the store. Created when missing (with its parents).
      - The download's bookkeeping lives under C(<local_dir>/.cache/huggingface/).
    type: path
    required: true
  allow_patterns:
    description:
      - Download only the files whose repository path matches one of these glob patterns (C(fnmatch); C(*) also
        matches C(/); a pattern ending in C(/) selects a folder), as C(hf download --include).
      - The module fails when the patterns select no file at all (a typo would otherwise pass silently).
    type: list
    elements: str
  ignore_patterns:
    description:
      - Skip the files whose repository path matches one of these glob patterns, as C(hf download --exclude).
    type: list
    elements: str
  verify:
    description:
      - How files already in O(local_dir) are checked before the module trusts them. Downloaded files are always
        hashed, whatever this says.
      - V(manifest) trusts a file whose size and mtime equal its manifest record and whose recorded hash equals the
        Hub's. That costs one C(stat) per file. A file without an agreeing record (new, touched, copied in by other
        means) but with the right size is hashed once, then recorded; one of the wrong size is fetched again.
        A change that keeps size and mtime (for example a byte flipped and the mtime set back with C(touch -d))
        is not seen; use V(full) for that.
      - V(full) hashes every file again, O(max_workers) at a time, compares with the Hub's hashes, refetches what
        differs and refreshes C(verified_at) in the manifest. Use it after copying a store from another node or
        when the disk is suspect.
      - V(none) trusts any regular file of the right size.
    type: str
    default: manifest
    choices: [manifest, full, none]
  max_workers:
    description:
      - Files downloaded, or hashed by O(verify=full), at the same time.
    type: int
    default: 8
  progress_file:
    description:
      - While it runs, the module rewrites this JSON file atomically (at most twice a second, and after each file) so
        that a play can poll an C(async) run with M(ansible.builtin.slurp).
      - Keys are C(files_total), C(files_done), C(bytes_total), C(bytes_done) (the selection, with files already
        present counted as done), C(current) (list of the files in flight), C(updated) (Unix time), C(phase)
        (V(verifying), V(downloading), V(done), V(failed)), C(error) (the failure message, with V(failed)),
        C(commit), C(pid) (the module's process), and C(verify_bytes_total) and C(verify_bytes_done) for the hashing
        before the download.
      - Its directory must exist; a file that cannot be written only gives a warning.
      - The file is first written after the revision is resolved; a poller should allow for it not to exist yet.
      - Not written in check mode.
    type: path
  min_free_bytes:
    description:
      - Bytes that must remain free on the filesystem of O(local_dir) after the download. The module refuses to
        start when the free space is less than the bytes still needed plus this margin.
    type: int
    default: 1073741824
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - sparkfold.cluster.hub
  - sparkfold.cluster.hub.repo
attributes:
  check_mode:
    support: full
    details: Lists the files that would be fetched and their bytes (RV(would_download), RV(download_bytes)). Files
      without an agreeing manifest record are hashed (read only) to tell. Nothing is written, the progress file
      included. The disk space check applies.
  diff_mode:
    support: full
    details: Before and after are the verified files of the selection, one C(path size hash) line each.
  platform:
    platforms: posix
requirements:
  - huggingface_hub >= 1.0 on the target (the hf_cli role installs it into a venv; point
    C(ansible_python_interpreter) at that venv's python for this task)
notes:
  - C(changed) is true when file bytes were written or the manifest's content changed (for example files adopted
    into it); refreshing only the C(verified_at) stamps of V(full) is not a change.
  - Two runs on the same O(local_dir) at once are refused (a lock under C(<local_dir>/.cache/huggingface/), which
    holds the PID of the run that has it). The refused run fails with C(kind=locked), naming that PID and the lock
    file, and says how to wait for the run or stop it.
  - Set E(HF_HUB_DISABLE_XET=1) in the task's environment to force plain HTTP downloads (and Range resumes) when
    hf_xet is installed; the module itself downloads over HTTP.
  - Copying a store with C(rsync -a) keeps sizes and mtimes, so the copied manifest would vouch for the copies
    without reading them; run the receiving node once with O(verify=full).
seealso:
  - name: Download files to a local folder (huggingface_hub)
    description: How huggingface_hub lays out a local_dir download.
    link: https://huggingface.co/docs/huggingface_hub/guides/download#download-files-to-a-local-folder
"""

EXAMPLES = r"""
- name: Download the pinned quant into the model store
  sparkfold.cluster.hub_snapshot:
    repo_id: sfxnz/DeepSeek-V4.1-Flash-EXL3
    revision: 3f1c2a9e0b7d4c5a8e6f1b2d3c4a5e6f7a8b9c0d
    local_dir: /srv/models/dsv41-exl3
  environment:
    HF_HUB_DISABLE_XET: "1"

- name: Only the tokenizer and config files of the base model
  sparkfold.cluster.hub_snapshot:
    repo_id: deepseek-ai/DeepSeek-V4.1-Flash
    revision: main
    local_dir: /srv/models/dsv41-exl3
    allow_patterns: ["tokenizer*", "*.json"]
    ignore_patterns: ["*.safetensors.index.json"]

- name: Long download as an async task that reports progress
  sparkfold.cluster.hub_snapshot:
    repo_id: "{{ model_repo }}"
    revision: "{{ model_commit }}"
    local_dir: /srv/models/current
    progress_file: /run/sparkfold/hub_snapshot.progress.json
    max_workers: 8
  async: 14400
  poll: 0
  register: snapshot_job

- name: Report progress until done
  ansible.builtin.slurp:
    src: /run/sparkfold/hub_snapshot.progress.json
  register: progress
  until: (progress.content | b64decode | from_json).phase in ['done', 'failed']
  retries: 1440
  delay: 10

- name: Re-hash every file after copying the store from the head node
  sparkfold.cluster.hub_snapshot:
    repo_id: "{{ model_repo }}"
    revision: "{{ model_commit }}"
    local_dir: /srv/models/current
    verify: full
"""

RETURN = r"""
commit:
  description: The commit the revision resolved to.
  returned: always
  type: str
  sample: 3f1c2a9e0b7d4c5a8e6f1b2d3c4a5e6f7a8b9c0d
verified:
  description: The O(verify) mode used.
  returned: always
  type: str
  sample: manifest
manifest:
  description: Path of the manifest.
  returned: always
  type: str
  sample: /srv/models/current/.sparkfold-manifest.json
local_dir:
  description: Absolute path of the store.
  returned: always
  type: str
  sample: /srv/models/current
downloaded_bytes:
  description: Bytes written to files of the store by this run (V(0) in check mode).
  returned: always
  type: int
  sample: 5368709120
files:
  description:
    - The selected files, sorted by path, each with C(path), C(size), C(sha256) (LFS files) or C(blob_id) (others)
      and C(status).
    - C(status) is V(present) (verified, untouched), V(downloaded) (was missing) or V(refetched) (was in the store
      but failed verification). In check mode it says what a real run would do.
  returned: always
  type: list
  elements: dict
  sample:
    - path: config.json
      size: 1043
      blob_id: 8c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d
      status: present
    - path: model-00001-of-00040.safetensors
      size: 5368709120
      sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
      status: downloaded
would_download:
  description: Repository paths a real run would fetch (missing or failing verification).
  returned: in check mode
  type: list
  elements: str
  sample: [model-00001-of-00040.safetensors]
download_bytes:
  description: Bytes a real run would transfer (partial downloads it would resume are subtracted).
  returned: in check mode
  type: int
  sample: 5368709120
"""

import contextlib
import json
import os
import shutil
import stat
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from urllib.parse import urlparse

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import (
    HAS_HF,
    HF_IMPORT_ERROR,
    HUB_COMMON_ARG_SPEC,
    HubError,
    describe_hub_error,
    hub_client,
    is_full_sha,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import (
    BAD,
    HASH_CHUNK,
    MANIFEST_NAME,
    MISSING,
    PRESENT,
    UNCHECKED,
    ManifestError,
    bytes_to_fetch,
    carry_over,
    check_repo_path,
    classify,
    disk_shortfall,
    expected_hash,
    file_lines,
    hash_file,
    make_record,
    nearest_existing,
    new_hasher,
    parse_manifest,
    partial_name,
    record_agrees,
    remote_entry,
    render_manifest,
    substance,
    utc_now,
    write_atomic,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

try:
    from huggingface_hub import constants as hf_constants
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import (
        build_hf_headers,
        disable_progress_bars,
        filter_repo_objects,
        hf_raise_for_status,
        http_stream_backoff,
    )

    DOWNLOAD_TIMEOUT = hf_constants.HF_HUB_DOWNLOAD_TIMEOUT
except ImportError:  # pragma: no cover - reported through HAS_HF
    get_hf_file_metadata = hf_hub_url = hf_raise_for_status = http_stream_backoff = None
    build_hf_headers = disable_progress_bars = filter_repo_objects = None
    DOWNLOAD_TIMEOUT = 10

try:  # huggingface_hub >= 2 talks HTTP through httpx2, 1.x through httpx
    import httpx2 as _httpx
except ImportError:  # pragma: no cover - depends on the huggingface_hub version
    try:
        import httpx as _httpx
    except ImportError:
        _httpx = None
TRANSIENT_HTTP_ERRORS = (_httpx.TransportError,) if _httpx is not None else (OSError,)

# Errors after which no other file can succeed either: stop the pool at once.
FATAL_KINDS = ("gated", "bad_token", "repo_not_found", "revision_not_found", "disk")
LIBRARY_NAME = "sparkfold-hub_snapshot"
LOCK_NAME = ".sparkfold-hub_snapshot.lock"  # under <local_dir>/.cache/huggingface/; holds the running run's PID
# Seconds between attempts when a download stops early without new bytes (then the run fails; the next resumes).
RETRY_DELAYS = (1, 2, 4, 8, 8)


class Progress:
    """Counters of the run, written atomically to progress_file (if any) for async pollers."""

    def __init__(self, path, commit, files_total, bytes_total, interval=0.5):
        self.path = path
        self.lock = threading.Lock()
        self.interval = interval
        self.last_write = 0.0
        self.failed_write = None
        self.state = {
            "pid": os.getpid(),
            "commit": commit,
            "phase": "verifying",
            "files_total": files_total,
            "files_done": 0,
            "bytes_total": bytes_total,
            "bytes_done": 0,
            "verify_bytes_total": 0,
            "verify_bytes_done": 0,
            "current": [],
            "updated": time.time(),
        }

    def update(self, force=False, **changes):
        with self.lock:
            for key, value in changes.items():
                self.state[key] = value
            self._maybe_write(force)

    def add(self, key, count):
        with self.lock:
            self.state[key] += count
            self._maybe_write(False)

    def start(self, path):
        with self.lock:
            self.state["current"].append(path)
            self._maybe_write(False)

    def finish(self, path, done=True):
        with self.lock:
            if path in self.state["current"]:
                self.state["current"].remove(path)
            if done:
                self.state["files_done"] += 1
            self._maybe_write(True)

    def _maybe_write(self, force):
        if not self.path:
            return
        now = time.time()
        if not force and now - self.last_write < self.interval:
            return
        self.last_write = now
        self.state["updated"] = now
        try:
            write_atomic(self.path, _json_dumps(self.state), durable=False)
        except OSError as exc:
            self.failed_write = f"could not write progress_file {self.path}: {exc}"


def _json_dumps(data):
    return json.dumps(data, sort_keys=True) + "\n"


class HubSnapshot:
    def __init__(self, module):
        self.module = module
        params = module.params
        self.params = params
        self.repo_id = params["repo_id"]
        self.revision = params["revision"]
        self.repo_type = params["repo_type"]
        self.verify = params["verify"]
        self.max_workers = params["max_workers"]
        self.local_dir = os.path.abspath(params["local_dir"])  # type=path: ~ and $VARS expanded
        self.manifest_path = os.path.join(self.local_dir, MANIFEST_NAME)
        self.download_dir = os.path.join(self.local_dir, ".cache", "huggingface", "download")
        self.abort = threading.Event()
        self._count_lock = threading.Lock()
        self.downloaded = 0
        self._preflight = {}
        self.endpoint = None
        self.token = None
        self.commit = None

    # ---- paths -------------------------------------------------------------------------------

    def local_path(self, path):
        return os.path.join(self.local_dir, *path.split("/"))

    def partial_path(self, entry):
        kind, digest = expected_hash(entry)
        return os.path.join(self.download_dir, *partial_name(entry["path"], kind, digest).split("/"))

    def _stat(self, path):
        try:
            return os.lstat(self.local_path(path))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise HubError(f"cannot stat {self.local_path(path)}: {exc}", kind="io") from exc

    # ---- Hub ---------------------------------------------------------------------------------

    def resolve(self):
        """Resolve the revision to a commit and return the selected remote entries."""
        api, self.endpoint, self.token = hub_client(self.params)
        try:
            info = api.repo_info(
                self.repo_id, revision=self.revision, repo_type=self.repo_type, files_metadata=True
            )
        except Exception as exc:
            if type(exc).__name__ == "HFValidationError":
                raise HubError(f"repo_id {self.repo_id!r} is not a valid Hub repository id: {exc}") from exc
            raise describe_hub_error(exc, self.repo_id, self.revision, self.endpoint, self.token) from exc
        commit = getattr(info, "sha", None)
        if not is_full_sha(commit):
            raise HubError(
                f"the Hub at {self.endpoint} did not resolve revision {self.revision} of {self.repo_id} to a commit "
                f"(got {commit!r}); is endpoint a Hub-compatible server?",
                kind="http",
            )
        if is_full_sha(self.revision) and commit != self.revision:
            raise HubError(
                f"the Hub resolved commit {self.revision} of {self.repo_id} to {commit}; refusing a different commit",
                kind="revision_not_found",
            )
        self.commit = commit
        entries = []
        try:
            for sibling in info.siblings or []:
                lfs = getattr(sibling, "lfs", None)
                sha256 = (lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)) if lfs else None
                path = check_repo_path(sibling.rfilename)
                entries.append(remote_entry(path, sibling.size, sha256=sha256, blob_id=sibling.blob_id))
        except ValueError as exc:
            raise HubError(f"{self.repo_id}@{commit} on {self.endpoint}: {exc}", kind="listing") from exc
        selected = list(
            filter_repo_objects(
                entries,
                allow_patterns=self.params["allow_patterns"],
                ignore_patterns=self.params["ignore_patterns"],
                key=lambda entry: entry["path"],
            )
        )
        if not selected:
            raise HubError(
                f"no file of {self.repo_id}@{commit} ({len(entries)} files) matches allow_patterns="
                f"{self.params['allow_patterns']} ignore_patterns={self.params['ignore_patterns']}",
                kind="empty_selection",
            )
        return sorted(selected, key=lambda entry: entry["path"])

    # ---- planning ----------------------------------------------------------------------------

    def load_manifest(self):
        try:
            with open(self.manifest_path, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            self.module.warn(f"cannot read {self.manifest_path} ({exc}); every file present will be hashed")
            return None
        try:
            return parse_manifest(text)
        except ManifestError as exc:
            self.module.warn(f"ignoring {self.manifest_path} ({exc}); every file present will be hashed")
            return None

    def plan(self, selected, manifest, progress):
        """Return {path: state} and {path: new record} (files hashed now and found good)."""
        records = manifest["files"] if manifest else {}
        states = {}
        to_hash = []
        for entry in selected:
            st = self._stat(entry["path"])
            regular = st is not None and _is_regular(st)
            if st is not None and not regular and os.path.isdir(self.local_path(entry["path"])):
                raise HubError(
                    f"{self.local_path(entry['path'])} is a directory where {self.repo_id} has a file; remove it",
                    kind="io",
                )
            state = classify(entry, st, regular, records.get(entry["path"]), self.verify)
            states[entry["path"]] = state
            if state == UNCHECKED:
                to_hash.append(entry)
        fresh = {}
        if to_hash:
            progress.update(force=True, verify_bytes_total=sum(entry["size"] for entry in to_hash))
            for entry, record in self._hash_all(to_hash, progress):
                if record is None:
                    states[entry["path"]] = BAD
                else:
                    states[entry["path"]] = PRESENT
                    fresh[entry["path"]] = record
        return states, fresh

    def _hash_one(self, entry, progress):
        path = self.local_path(entry["path"])
        kind, digest = expected_hash(entry)
        progress.start(entry["path"])
        try:
            before = os.stat(path)
            actual = hash_file(path, kind, entry["size"], on_bytes=lambda n: progress.add("verify_bytes_done", n))
            after = os.stat(path)
        except OSError as exc:
            raise HubError(f"cannot read {path} to verify it: {exc}", kind="io") from exc
        finally:
            progress.finish(entry["path"], done=False)
        if actual != digest or before.st_mtime_ns != after.st_mtime_ns or before.st_size != after.st_size:
            return None
        return make_record(entry, after, utc_now())

    def _hash_all(self, entries, progress):
        workers = max(1, min(self.max_workers, len(entries)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hub_snapshot_hash") as pool:
            futures = {pool.submit(self._hash_one, entry, progress): entry for entry in entries}
            results = []
            for future in as_completed(futures):
                results.append((futures[future], future.result()))
        return results

    def partial_sizes(self, entries):
        sizes = {}
        for entry in entries:
            with contextlib.suppress(OSError):
                sizes[entry["path"]] = os.path.getsize(self.partial_path(entry))
        return sizes

    def check_disk(self, needed):
        where = nearest_existing(self.local_dir)
        try:
            free = shutil.disk_usage(where).free
        except OSError as exc:
            raise HubError(f"cannot read the free space of {where}: {exc}", kind="io") from exc
        message = disk_shortfall(needed, free, self.params["min_free_bytes"], where)
        if message:
            raise HubError(
                message, kind="disk", needed_bytes=needed, free_bytes=free, min_free_bytes=self.params["min_free_bytes"]
            )

    # ---- download ----------------------------------------------------------------------------

    def locate(self, entry):
        """HEAD the file of the commit: return (URL to GET, headers). Auth and gating errors show up here."""
        path = entry["path"]
        url = hf_hub_url(self.repo_id, path, repo_type=self.repo_type, revision=self.commit, endpoint=self.endpoint)
        token = self.token if self.token else False
        try:
            meta = get_hf_file_metadata(
                url, token=token, endpoint=self.endpoint, retry_on_errors=True, library_name=LIBRARY_NAME
            )
        except Exception as exc:
            raise describe_hub_error(exc, self.repo_id, self.revision, self.endpoint, self.token) from exc
        if meta.size is not None and meta.size != entry["size"]:
            raise HubError(
                f"{path}: the Hub's listing says {entry['size']} bytes but the file is {meta.size} bytes",
                kind="http",
            )
        headers = build_hf_headers(token=token, library_name=LIBRARY_NAME)
        headers["Accept-Encoding"] = "identity"  # byte ranges and sizes of the file itself, not of a gzip of it
        location = meta.location or url
        if urlparse(location).netloc != urlparse(url).netloc:
            headers.pop("authorization", None)  # a signed CDN URL: do not hand it the token
        return location, headers

    def fetch_one(self, entry, progress):
        """Download one file to its partial path, verify it, move it into place; return its record."""
        if self.abort.is_set():
            return None
        path = entry["path"]
        kind, digest = expected_hash(entry)
        progress.start(path)
        try:
            location, headers = self._preflight.pop(path, None) or self.locate(entry)
            partial = self.partial_path(entry)
            os.makedirs(os.path.dirname(partial), exist_ok=True)
            for attempt in (1, 2):
                resumed, actual = self._download(location, headers, partial, entry, kind, progress)
                if actual == digest:
                    break
                progress.add("bytes_done", -entry["size"])
                os.unlink(partial)
                if not resumed or attempt == 2:
                    raise HubError(
                        f"{path}: downloaded content has {kind} {actual}, the Hub lists {digest}; nothing was put "
                        f"in place (is endpoint {self.endpoint} serving the right data?)",
                        kind="hash_mismatch",
                    )
            final = self.local_path(path)
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.replace(partial, final)
            _fsync_dir(os.path.dirname(final))
            corrupt = final + ".corrupt"
            if os.path.lexists(corrupt):
                os.unlink(corrupt)
            return make_record(entry, os.stat(final), utc_now())
        except HubError as exc:
            if exc.kind in FATAL_KINDS:
                self.abort.set()
            raise
        except OSError as exc:
            if exc.errno == 28:  # ENOSPC
                self.abort.set()
            raise HubError(f"{path}: {exc}", kind="io") from exc
        except Exception as exc:
            raise describe_hub_error(exc, self.repo_id, self.revision, self.endpoint, self.token) from exc
        finally:
            progress.finish(path, done=False)

    def _download(self, location, headers, partial, entry, kind, progress):
        """Fill ``partial`` up to the entry's size, resuming what is there; return (resumed, hex digest).

        Every chunk goes to disk (unbuffered) as it arrives, so what a killed run received is kept and
        asked for again with ``Range: bytes=<have>-`` only from the next byte on. A dropped connection
        is retried the same way, RETRY_DELAYS apart, as long as each attempt brings new bytes.
        """
        path = entry["path"]
        size = entry["size"]
        fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o644)
        with os.fdopen(fd, "r+b", buffering=0) as handle:
            have = handle.seek(0, os.SEEK_END)
            if have > size:
                handle.truncate(0)
                have = 0
            resumed = have > 0
            hasher = new_hasher(kind, size)
            handle.seek(0)
            while handle.tell() < have:
                chunk = handle.read(min(have - handle.tell(), HASH_CHUNK))
                if not chunk:
                    break
                hasher.update(chunk)
            handle.seek(have)
            progress.add("bytes_done", have)
            failures = 0
            while have < size:
                request_headers = dict(headers)
                if have:
                    request_headers["Range"] = f"bytes={have}-"
                error = None
                try:
                    # retry_on_exceptions=(): errors while reading the body must reach the loop here, which
                    # resumes from the bytes on disk; http_stream_backoff still retries 429 and 5xx answers.
                    with http_stream_backoff(
                        "GET", location, headers=request_headers, timeout=DOWNLOAD_TIMEOUT, retry_on_exceptions=()
                    ) as response:
                        hf_raise_for_status(response)
                        if have and response.status_code != 206:  # the server ignored Range: start over
                            handle.seek(0)
                            handle.truncate(0)
                            progress.add("bytes_done", -have)
                            hasher = new_hasher(kind, size)
                            have = 0
                        for chunk in response.iter_bytes():
                            if not chunk:
                                continue
                            if have + len(chunk) > size:
                                raise HubError(
                                    f"{path}: the server sent more than the {size} bytes the Hub lists", kind="http"
                                )
                            _write_all(handle, chunk)
                            hasher.update(chunk)
                            have += len(chunk)
                            failures = 0
                            self._count(progress, len(chunk))
                except TRANSIENT_HTTP_ERRORS as exc:
                    error = exc
                if have < size:
                    failures += 1
                    if failures > len(RETRY_DELAYS):
                        raise HubError(
                            f"{path}: the download stopped at {have} of {size} bytes {failures} times in a row "
                            f"({error or 'connection closed early'}); the next run resumes it",
                            kind="network",
                        )
                    time.sleep(RETRY_DELAYS[failures - 1])
            os.fsync(handle.fileno())
        return resumed, hasher.hexdigest()

    def _count(self, progress, count):
        with self._count_lock:
            self.downloaded += count
        progress.add("bytes_done", count)

    # ---- main --------------------------------------------------------------------------------

    def run(self):
        if os.path.lexists(self.local_dir) and not os.path.isdir(self.local_dir):
            raise HubError(f"local_dir {self.local_dir} exists and is not a directory", kind="io")
        if self.max_workers < 1:
            raise HubError("max_workers must be 1 or more", kind="args")
        if self.params["min_free_bytes"] < 0:
            raise HubError("min_free_bytes must be 0 or more", kind="args")

        selected = self.resolve()
        by_path = {entry["path"]: entry for entry in selected}
        manifest = self.load_manifest()
        check_mode = self.module.check_mode
        progress = Progress(
            None if check_mode else self.params["progress_file"],
            self.commit,
            len(selected),
            sum(entry["size"] for entry in selected),
        )

        try:
            return self._run_locked(selected, by_path, manifest, progress, check_mode)
        except (HubError, OSError) as exc:
            progress.update(force=True, phase="failed", current=[], error=getattr(exc, "msg", None) or str(exc))
            raise

    def _run_locked(self, selected, by_path, manifest, progress, check_mode):
        with self._lock(check_mode):
            states, fresh = self.plan(selected, manifest, progress)
            fetch = [by_path[path] for path in sorted(states) if states[path] in (MISSING, BAD)]
            partials = self.partial_sizes(fetch)
            needed = bytes_to_fetch(fetch, partials)
            self.check_disk(needed)

            old_records = manifest["files"] if manifest else {}
            records = {
                path: old_records[path]
                for path, state in states.items()
                if state == PRESENT and path in old_records
                # verify=none hashes nothing: keep only the records that still agree, vouch for nothing new
                and (self.verify != "none" or record_agrees(old_records[path], by_path[path], self._stat(path)))
            }
            records.update(fresh)
            records.update(carry_over(old_records, set(by_path), self._stat))
            before_files = [dict(by_path[path]) for path, state in states.items() if state == PRESENT]

            files_out = []
            for entry in selected:
                state = states[entry["path"]]
                status = {PRESENT: "present", MISSING: "downloaded", BAD: "refetched"}[state]
                files_out.append(dict(entry, status=status))
            result = {
                "changed": False,
                "commit": self.commit,
                "verified": self.verify,
                "manifest": self.manifest_path,
                "local_dir": self.local_dir,
                "downloaded_bytes": 0,
                "files": files_out,
            }
            diff_after = file_lines(selected)
            if check_mode:
                result["would_download"] = [entry["path"] for entry in fetch]
                result["download_bytes"] = needed
                result["changed"] = bool(fetch) or self._manifest_differs(manifest, records)
                if self.module._diff:
                    result["diff"] = self._diff(before_files, diff_after)
                return result

            errors = []
            moved = False
            progress.update(
                force=True,
                files_done=len(selected) - len(fetch),
                bytes_done=sum(by_path[path]["size"] for path, state in states.items() if state == PRESENT),
            )
            if fetch:
                # one HEAD before anything is moved or fetched: a gated repo or a refused token fails here
                first = fetch[0]
                self._preflight[first["path"]] = self.locate(first)
                os.makedirs(self.local_dir, exist_ok=True)
                for entry in fetch:
                    if states[entry["path"]] == BAD:
                        moved = True
                        final = self.local_path(entry["path"])
                        os.replace(final, final + ".corrupt")
                progress.update(force=True, phase="downloading")
                errors = self._fetch_all(fetch, progress, records)

            self._drop_stale_corrupt(selected, states)
            self._drop_stale_partials(selected)
            _prune_empty_dirs(self.download_dir)
            manifest_changed = self._write_manifest(manifest, records)
            result["downloaded_bytes"] = self.downloaded
            result["changed"] = self.downloaded > 0 or moved or manifest_changed
            if progress.failed_write:
                self.module.warn(progress.failed_write)
            if errors:
                failure = self._failure(errors, fetch, sum(1 for entry in fetch if entry["path"] in records))
                failure.details.update(commit=self.commit, downloaded_bytes=self.downloaded, changed=result["changed"])
                raise failure
            progress.update(force=True, phase="done", current=[])
            if self.module._diff:
                result["diff"] = self._diff(before_files, diff_after)
            return result

    def _fetch_all(self, fetch, progress, records):
        """Fetch ``fetch`` with a pool of max_workers; record the good files; return the HubErrors."""
        errors = []
        order = sorted(fetch, key=lambda entry: (-entry["size"], entry["path"]))  # big shards first
        workers = max(1, min(self.max_workers, len(order)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hub_snapshot_fetch") as pool:
            futures = {pool.submit(self.fetch_one, entry, progress): entry for entry in order}
            for future in as_completed(futures):
                entry = futures[future]
                try:
                    record = future.result()
                except HubError as exc:
                    errors.append(exc)
                    continue
                if record is not None:  # None: skipped after a fatal error
                    records[entry["path"]] = record
                    progress.finish(entry["path"], done=True)
        return errors

    def _failure(self, errors, fetch, fetched):
        """One HubError for the failed downloads: the fatal reason alone, else the list of files."""
        kept = (
            f" The {fetched} files fetched were verified and kept; partial downloads are resumed by the next run."
            if fetched
            else " Partial downloads are kept and resumed by the next run."
        )
        fatal = [exc for exc in errors if exc.kind in FATAL_KINDS]
        if fatal:
            return HubError(fatal[0].msg + "." + kept, kind=fatal[0].kind)
        details = "; ".join(exc.msg for exc in errors[:5])
        if len(errors) > 5:
            details += f"; and {len(errors) - 5} more"
        return HubError(
            f"{len(errors)} of {len(fetch)} files of {self.repo_id}@{self.commit} could not be fetched into "
            f"{self.local_dir}: {details}.{kept}",
            kind=errors[0].kind,
        )

    def _drop_stale_partials(self, selected):
        """Remove partial downloads of selected paths that no longer lead anywhere (other content, done)."""
        for entry in selected:
            keep = self.partial_path(entry)
            if not os.path.exists(self.local_path(entry["path"])) and os.path.exists(keep):
                keep_name = os.path.basename(keep)
            else:
                keep_name = None
            folder = os.path.dirname(keep)
            prefix = os.path.basename(entry["path"]) + ".sparkfold-"
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                if name.startswith(prefix) and name.endswith(".incomplete") and name != keep_name:
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(folder, name))

    def _drop_stale_corrupt(self, selected, states):
        for entry in selected:
            corrupt = self.local_path(entry["path"]) + ".corrupt"
            if states[entry["path"]] == PRESENT and os.path.lexists(corrupt):
                try:
                    os.unlink(corrupt)
                except OSError as exc:
                    self.module.warn(f"could not remove {corrupt}: {exc}")

    def _substance(self, records):
        return substance(
            {"repo_id": self.repo_id, "repo_type": self.repo_type, "commit": self.commit, "files": records}
        )

    def _manifest_differs(self, manifest, records):
        if not records and manifest is None:
            return False
        return substance(manifest) != self._substance(records)

    def _write_manifest(self, manifest, records):
        """Write the manifest when its text changes; return whether its substance changed."""
        if not records and manifest is None:
            return False
        text = render_manifest(self.repo_id, self.repo_type, self.commit, records)
        try:
            with open(self.manifest_path, encoding="utf-8") as handle:
                current = handle.read()
        except (OSError, UnicodeDecodeError):
            current = None
        if text != current:
            os.makedirs(self.local_dir, exist_ok=True)
            try:
                write_atomic(self.manifest_path, text)
            except OSError as exc:
                raise HubError(f"cannot write {self.manifest_path}: {exc}", kind="io") from exc
        return self._manifest_differs(manifest, records)

    def _diff(self, before_files, after_text):
        return {
            "before_header": f"{self.local_dir} (verified files)",
            "after_header": f"{self.local_dir} ({self.repo_id}@{self.commit})",
            "before": file_lines(before_files),
            "after": after_text,
        }

    @contextlib.contextmanager
    def _lock(self, check_mode):
        if check_mode or fcntl is None:
            yield
            return
        lock_dir = os.path.join(self.local_dir, ".cache", "huggingface")
        os.makedirs(lock_dir, exist_ok=True)
        lock_path = os.path.join(lock_dir, LOCK_NAME)
        with open(lock_path, "a+") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                handle.seek(0)
                pid = lock_holder(handle.read())
                raise HubError(locked_message(lock_path, pid), kind="locked", lock_file=lock_path, pid=pid) from exc
            # The holder's PID, for the message of a run refused meanwhile; cleared before the lock is let go.
            os.ftruncate(handle.fileno(), 0)
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            try:
                yield
            finally:
                os.ftruncate(handle.fileno(), 0)
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def lock_holder(text):
    """The PID written in a lock file, or None (an empty file, a lock file of an older version)."""
    text = text.strip()
    return int(text) if text.isdigit() else None


def locked_message(lock_path, pid):
    """Why a run is refused while another holds the lock, with how to wait for it or stop it."""
    if pid is None:
        who = f"another hub_snapshot run holds {lock_path} (its PID is not recorded; `fuser -v {lock_path}` shows it)"
        stop = "stop that process"
    else:
        who = f"another hub_snapshot run, PID {pid}, holds {lock_path}"
        stop = f"stop it with `kill {pid}` on this host"
    return (
        f"{who}: a download into this directory is still running, perhaps the async job of an earlier play. "
        f"Wait for it to finish (its progress file shows how far it is), or {stop} (what it has fetched is kept "
        "and resumed), then run again."
    )


def _is_regular(st):
    return stat.S_ISREG(st.st_mode)


def _write_all(handle, data):
    view = memoryview(data)
    while view:
        view = view[handle.write(view) :]


def _prune_empty_dirs(top):
    """Remove the empty directories left under ``top`` (the partial-download tree), ``top`` itself kept."""
    for current, _dirs, _files in os.walk(top, topdown=False):
        if current != top:
            with contextlib.suppress(OSError):
                os.rmdir(current)


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def main():
    argument_spec = dict(HUB_COMMON_ARG_SPEC)
    argument_spec.update(
        local_dir={"type": "path", "required": True},
        allow_patterns={"type": "list", "elements": "str"},
        ignore_patterns={"type": "list", "elements": "str"},
        verify={"type": "str", "default": "manifest", "choices": ["manifest", "full", "none"]},
        max_workers={"type": "int", "default": 8},
        progress_file={"type": "path"},
        min_free_bytes={"type": "int", "default": 1073741824},
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    if not HAS_HF:
        module.fail_json(msg=missing_required_lib("huggingface_hub"), exception=HF_IMPORT_ERROR)
    disable_progress_bars()

    snapshot = HubSnapshot(module)
    try:
        result = snapshot.run()
    except HubError as exc:
        module.fail_json(msg=exc.msg, kind=exc.kind, **exc.details)
    except OSError as exc:
        module.fail_json(msg=f"hub_snapshot: {to_native(exc)}", kind="io", exception=traceback.format_exc())
    except Exception as exc:  # an unexpected failure still says where it happened
        module.fail_json(msg=f"hub_snapshot failed: {to_native(exc)}", exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
