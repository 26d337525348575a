# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a hub_snapshot run has to do: the selected files of the commit, and the state of each in the store.

SnapshotPlanner resolves the revision, reads the manifest, classifies every selected file (hashing
those the manifest does not vouch for) and checks the disk space. module_utils/snapshot.py HubSnapshot
builds on it to fetch and put files in place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from concurrent.futures import ThreadPoolExecutor, as_completed

from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import (
    HubError,
    describe_hub_error,
    hf_errors,
    hub_client,
    hub_settings,
    is_full_sha,
    missing_revision_error,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_download import LIBRARY_NAME
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_timeouts import (
    current_timeouts,
    http_timeout,
    is_timeout,
    set_timeouts,
    use_timeouts,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import (
    BAD,
    MANIFEST_NAME,
    PRESENT,
    UNCHECKED,
    ManifestError,
    check_repo_path,
    classify,
    disk_shortfall,
    expected_hash,
    hash_file,
    make_record,
    nearest_existing,
    parse_manifest,
    partial_name,
    remote_entry,
    utc_now,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.snapshot_listing import (
    ask_hub,
    listing_path,
    probe_entry,
    read_listing,
    still_listed,
)

try:
    from huggingface_hub.utils import filter_repo_objects
except ImportError:  # pragma: no cover - reported by the module through HAS_HF
    filter_repo_objects = None

# The closing sentence of missing_revision_error for hub_snapshot ({pin}: an example commit).
MISSING_PIN_REMEDY = (
    " Nothing was downloaded and local_dir was not touched. To go on, pin one of the commits above{pin} after "
    "checking that its files are the ones you want (sparkfold.cluster.hub_revision with expected_files checks "
    "that), and run again."
)


class SnapshotPlanner:
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
        self.listing_path = listing_path(self.local_dir)
        self.listed = None  # every file of the commit, when this run listed it on the Hub (written at the end)
        self.endpoint = None
        self.token = None
        self.commit = None
        self.timeouts = None

    # ---- paths -------------------------------------------------------------------------------

    def local_path(self, path):
        return os.path.join(self.local_dir, *path.split("/"))

    def partial_path(self, entry):
        """Where ``entry`` is downloaded (and, while a revision switch runs, waits until all are there)."""
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
        """Resolve the revision to a commit and return the selected remote entries.

        When the store keeps the listing of the commit the revision still resolves to (one HEAD tells:
        _still_listed), that listing is used; otherwise the Hub lists the commit (_list).
        """
        timeouts, self.endpoint, self.token = hub_settings(self.params)
        set_timeouts(timeouts)
        kept = self._still_listed(timeouts)
        if kept is None:
            entries = self._list()
        else:
            use_timeouts(timeouts)  # every later Hub call of the run (downloads) as hub_client would set them
            self.commit, entries = kept
        self.timeouts = current_timeouts()
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
                f"no file of {self.repo_id}@{self.commit} ({len(entries)} files) matches allow_patterns="
                f"{self.params['allow_patterns']} ignore_patterns={self.params['ignore_patterns']}",
                kind="empty_selection",
            )
        return sorted(selected, key=lambda entry: entry["path"])

    def _still_listed(self, timeouts):
        """(commit, entries) of the listing the store keeps, when the Hub says the revision still resolves to
        its commit and one file of it is unchanged; None when there is no such listing or the Hub says
        otherwise (the Hub is then asked in full, as by a first run, which says what is wrong).

        One HEAD of one small file (snapshot_listing.probe_entry) with the timeouts passed on, so that no
        client is made for use_timeouts before it (the client the HEAD makes is the one use_timeouts then
        takes the hooks from). A timeout or a Hub that cannot be reached fails here, as the listing would.
        """
        kept = read_listing(self.listing_path, self.endpoint, self.repo_id, self.repo_type)
        if kept is None:
            return None
        commit, entries = kept
        if is_full_sha(self.revision) and self.revision != commit:
            return None
        probe = probe_entry(entries)
        try:
            meta = ask_hub(self.repo_id, self.repo_type, self.revision, self.endpoint, self.token, probe,
                           http_timeout(timeouts), LIBRARY_NAME)
        except Exception as exc:
            if is_timeout(exc) or not isinstance(exc, hf_errors.HfHubHTTPError):
                raise describe_hub_error(exc, self.repo_id, self.revision, self.endpoint, self.token) from exc
            return None  # the Hub answered (gone, gated, refused, ...): the listing call says it as a first run does
        return kept if still_listed(meta, commit, probe) else None

    def _list(self):
        """Ask the Hub for the revision's commit and its files (repo_info); return every file of the commit."""
        api, self.endpoint, self.token = hub_client(self.params)
        try:
            info = api.repo_info(
                self.repo_id, revision=self.revision, repo_type=self.repo_type, files_metadata=True
            )
        except Exception as exc:
            if type(exc).__name__ == "HFValidationError":
                raise HubError(f"repo_id {self.repo_id!r} is not a valid Hub repository id: {exc}") from exc
            if isinstance(exc, hf_errors.RevisionNotFoundError):
                raise missing_revision_error(
                    api, self.repo_id, self.revision, self.repo_type, self.endpoint, remedy=MISSING_PIN_REMEDY
                ) from exc
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
        self.listed = entries
        return entries

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
            regular = st is not None and stat.S_ISREG(st.st_mode)
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
