# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A hub_snapshot run: fetch what the plan (module_utils/snapshot_plan.py) says is missing or wrong, put it in
place, write the manifest.

Within one commit, each verified file is moved into place as soon as it is complete. A revision switch (the
manifest records another commit, or another repository) must never leave a mixed store: the new commit's
files that differ are downloaded and verified in the partial-download folder first, and only when all of
them are there are they moved into place, the previous commit's files that the new selection lacks deleted
and the manifest rewritten. A switch that fails leaves the previous commit as it was. A switch killed inside
its final move is told by its journal (module_utils/snapshot_journal.py): a later run for another commit (a
rollback) deletes or fetches again every file it had moved in, so the store holds one revision.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed

from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import HubError, describe_hub_error
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_download import (
    DEFAULT_DOWNLOAD_RETRIES,
    DEFAULT_MIN_RATE,
    DEFAULT_RATE_WINDOW,
    Downloader,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_timeouts import DEFAULT_STALL_TIMEOUT
from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import (
    BAD,
    MISSING,
    PRESENT,
    bytes_to_fetch,
    carry_over,
    file_lines,
    make_record,
    record_agrees,
    render_manifest,
    substance,
    utc_now,
    write_atomic,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.progress_file import SnapshotProgress as Progress
from ansible_collections.sparkfold.cluster.plugins.module_utils.snapshot_journal import (
    journal_path,
    journal_text,
    moved_in,
    read_journal,
    write_journal,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.snapshot_listing import listing_text, write_listing
from ansible_collections.sparkfold.cluster.plugins.module_utils.snapshot_lock import store_lock
from ansible_collections.sparkfold.cluster.plugins.module_utils.snapshot_plan import SnapshotPlanner

# Errors after which no other file can succeed either: stop the pool at once.
FATAL_KINDS = ("gated", "bad_token", "repo_not_found", "revision_not_found", "disk")
STAGED = "staged"  # fetch_one's answer during a switch: verified, waiting in the partial-download folder
STATUS = {PRESENT: "present", MISSING: "downloaded", BAD: "refetched"}
MARKED_INCOMPLETE = (
    "The manifest lists the files not fetched as pending, so the store counts as incomplete (store_verify fails "
    "on it) until a run fetches them."
)


class HubSnapshot(SnapshotPlanner):
    def __init__(self, module):
        super().__init__(module)
        stall_timeout = module.params.get("stall_timeout")
        self.stall_timeout = DEFAULT_STALL_TIMEOUT if stall_timeout is None else stall_timeout
        self.abort = threading.Event()
        self.downloader = None
        self._preflight = {}
        self.previous_commit = None
        self.switching = False
        self._renamed_in = set()  # folders with files moved into place since their last fsync
        self.journal_path = journal_path(self.local_dir)
        self._journal_seen = False  # a switch journal exists: removed once this run completes

    @property
    def downloaded(self):
        return self.downloader.downloaded if self.downloader else 0

    def run(self):
        if os.path.lexists(self.local_dir) and not os.path.isdir(self.local_dir):
            raise HubError(f"local_dir {self.local_dir} exists and is not a directory", kind="io")
        if self.max_workers < 1:
            raise HubError("max_workers must be 1 or more", kind="args")
        if self.params["min_free_bytes"] < 0:
            raise HubError("min_free_bytes must be 0 or more", kind="args")
        if self.stall_timeout <= 0:
            raise HubError("stall_timeout must be a number of seconds above 0", kind="args")
        transfer_args = self._transfer_args()

        selected = self.resolve()
        manifest = self.load_manifest()
        if manifest is not None:
            self.previous_commit = manifest["commit"]
            self.switching = (manifest["repo_id"], manifest["repo_type"], manifest["commit"]) != (
                self.repo_id, self.repo_type, self.commit)
        check_mode = self.module.check_mode
        progress = Progress(
            None if check_mode else self.params["progress_file"],
            self.commit,
            len(selected),
            sum(entry["size"] for entry in selected),
        )
        self.downloader = Downloader(
            self.repo_id, self.repo_type, self.revision, self.commit, self.endpoint, self.token, self.timeouts,
            self.stall_timeout, lambda count: progress.add("bytes_done", count),
            library_dir=os.path.join(self.local_dir, ".cache", "huggingface", "xet"), **transfer_args,
        )
        try:
            with store_lock(self.local_dir, check_mode):
                return self._run_locked(selected, manifest, progress, check_mode)
        except (HubError, OSError) as exc:
            progress.update(force=True, phase="failed", current=[], error=getattr(exc, "msg", None) or str(exc))
            raise

    def _transfer_args(self):
        """The transfer options (hub_download.Downloader's arguments), checked before anything is fetched."""
        params = self.module.params
        args = {
            "transfer": params.get("transfer") or "auto",
            "retries": _default(params.get("download_retries"), DEFAULT_DOWNLOAD_RETRIES),
            "min_rate": _default(params.get("min_rate"), DEFAULT_MIN_RATE),
            "rate_window": _default(params.get("rate_window"), DEFAULT_RATE_WINDOW),
        }
        if args["retries"] < 0:
            raise HubError("download_retries must be 0 or more", kind="args")
        if args["min_rate"] < 0:
            raise HubError("min_rate must be 0 (no minimum) or a number of bytes per second above 0", kind="args")
        if args["rate_window"] <= 0:
            raise HubError("rate_window must be a number of seconds above 0", kind="args")
        return args

    def _run_locked(self, selected, manifest, progress, check_mode):
        by_path = {entry["path"]: entry for entry in selected}
        strays, suspects = self._interrupted_switch(manifest, by_path)
        states, fresh = self.plan(selected, manifest, progress)
        for item in suspects:  # trusted unread (verify=none), yet the content of the commit a killed switch sought
            if states[item["path"]] == PRESENT and item["path"] not in fresh:
                states[item["path"]] = BAD
        fetch = [by_path[path] for path in sorted(states) if states[path] in (MISSING, BAD)]
        needed = bytes_to_fetch(fetch, self.partial_sizes(fetch))
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
        if self.switching:  # the previous commit's files outside the new selection go, at the very end
            remove = sorted(path for path in old_records if path not in by_path and self._removable(path))
        else:  # narrowing the patterns must not forget files verified before
            records.update(carry_over(old_records, set(by_path), self._stat))
            remove = []
        before_files = [dict(by_path[path]) for path, state in states.items() if state == PRESENT]
        before_files += [old_records[path] for path in remove] + strays

        result = {
            "changed": False,
            "commit": self.commit,
            "previous_commit": self.previous_commit,
            "verified": self.verify,
            "manifest": self.manifest_path,
            "local_dir": self.local_dir,
            "downloaded_bytes": 0,
            "files": [dict(entry, status=STATUS[states[entry["path"]]]) for entry in selected],
            "removed": sorted(remove + [item["path"] for item in strays]),
            "xet_files": [],
        }
        if check_mode:
            result["would_download"] = [entry["path"] for entry in fetch]
            result["download_bytes"] = needed
            result["changed"] = bool(fetch or remove or strays) or self._manifest_differs(manifest, records)
            if self.module._diff:
                result["diff"] = self._diff(before_files, selected)
            return result

        errors, staged = [], []
        moved = bool(strays)
        for item in strays:  # files of the commit a killed switch sought, which this commit lacks
            self._remove(item["path"])
        progress.update(
            force=True,
            files_done=len(selected) - len(fetch),
            bytes_done=sum(by_path[path]["size"] for path, state in states.items() if state == PRESENT),
        )
        if fetch:
            # one HEAD before anything is moved or fetched: a gated repo or a refused token fails here
            self._preflight[fetch[0]["path"]] = self.downloader.locate(fetch[0])
            os.makedirs(self.local_dir, exist_ok=True)
            if not self.switching:  # within one commit a wrong file is set aside at once
                for entry in fetch:
                    if states[entry["path"]] == BAD:
                        moved = True
                        final = self.local_path(entry["path"])
                        os.replace(final, final + ".corrupt")
            progress.update(force=True, phase="downloading")
            errors, staged = self._fetch_all(fetch, progress, records)

        if progress.failed_write:
            self.module.warn(progress.failed_write)
        if errors:
            self._drop_stale_partials(selected, fetch)
            _prune_empty_dirs(self.download_dir)
            if self.switching:  # the previous commit stays as it was, manifest included
                manifest_changed = False
            else:
                self._drop_stale_corrupt(selected, states)
                # what could not be put in place is named in the manifest: the store is incomplete until a run
                # fetches it, whatever the records of the other files say (store_verify fails on it)
                pending = [path for path in by_path if path not in records and states[path] in (MISSING, BAD)]
                manifest_changed = self._write_manifest(manifest, records, pending)
            changed = self.downloaded > 0 or moved or manifest_changed
            failure = self._failure(errors, fetch, len(staged) + sum(1 for e in fetch if e["path"] in records))
            failure.details.update(
                commit=self.commit, previous_commit=self.previous_commit, downloaded_bytes=self.downloaded,
                changed=changed,
            )
            raise failure

        if staged:
            # the journal first, so that a run killed among the renames can be undone by the next (a rollback)
            moves = [(entry, os.stat(self.partial_path(entry))) for entry in staged]
            write_journal(self.journal_path, journal_text(self.repo_id, self.repo_type, self.previous_commit,
                                                          self.commit, moves))
            self._journal_seen = True
            self._move_staged(staged, records)
        for path in remove:
            self._remove(path)
        self._drop_stale_corrupt(selected, states)
        self._drop_stale_partials(selected, [])
        _prune_empty_dirs(self.download_dir)
        manifest_changed = self._write_manifest(manifest, records)
        self._keep_listing()
        if self._journal_seen:  # the manifest now records what is in place: nothing left to undo
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.journal_path)
        shutil.rmtree(self.downloader.library_dir, ignore_errors=True)  # hf_hub_download's bookkeeping
        result["downloaded_bytes"] = self.downloaded
        result["xet_files"] = sorted(path for path, route in self.downloader.routes.items() if route == "xet")
        result["changed"] = self.downloaded > 0 or moved or bool(staged or remove) or manifest_changed
        progress.update(force=True, phase="done", current=[])
        if self.module._diff:
            result["diff"] = self._diff(before_files, selected)
        return result

    # ---- fetching ----------------------------------------------------------------------------

    def fetch_one(self, entry, progress):
        """Download and verify one file; return its record (in place), STAGED (a switch) or None (aborted)."""
        if self.abort.is_set():
            return None
        path = entry["path"]
        progress.start(path)
        try:
            partial = self.partial_path(entry)
            self.downloader.fetch(entry, partial, self._preflight.pop(path, None))
            if self.switching:
                return STAGED
            return self._put_in_place(entry, partial)
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

    def _put_in_place(self, entry, partial):
        final = self.local_path(entry["path"])
        os.makedirs(os.path.dirname(final), exist_ok=True)
        os.replace(partial, final)
        # The rename is made durable once per folder, before the manifest vouches for the file (_write_manifest):
        # a crash before that loses at most the rename, and the next run fetches the file again.
        self._renamed_in.add(os.path.dirname(final))
        corrupt = final + ".corrupt"
        if os.path.lexists(corrupt):
            os.unlink(corrupt)
        return make_record(entry, os.stat(final), utc_now())

    def _fetch_all(self, fetch, progress, records):
        """Fetch ``fetch`` with a pool of max_workers; return (HubErrors, entries staged for a switch).

        The records of the files put in place are added to ``records``.
        """
        errors, staged = [], []
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
                if record is STAGED:
                    staged.append(entry)
                elif record is not None:  # None: skipped after a fatal error
                    records[entry["path"]] = record
                if record is not None:
                    progress.finish(entry["path"], done=True)
        return errors, staged

    def _failure(self, errors, fetch, fetched):
        """One HubError for the failed downloads: the fatal reason alone, else the list of files."""
        if self.switching:
            kept = (
                f" The store still holds {self.previous_commit} as it was, verified, with its manifest: nothing of "
                f"it was replaced or deleted. The {fetched} files of {self.commit} fetched so far wait, verified, "
                "under .cache/huggingface/download, and the next run resumes from them and then switches."
            )
        elif fetched:
            kept = (
                f" The {fetched} files fetched were verified and kept; partial HTTP downloads are resumed by the next "
                "run (a Xet download starts again). "
                f"{MARKED_INCOMPLETE}"
            )
        else:
            kept = (
                " Partial HTTP downloads are kept and resumed by the next run (a Xet download starts again). "
                f"{MARKED_INCOMPLETE}"
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

    # ---- the end of a switch -----------------------------------------------------------------

    def _interrupted_switch(self, manifest, by_path):
        """The files a killed switch moved in that this run must not keep, from its journal: (strays, suspects).

        Strays are outside this run's selection (deleted); suspects are in it (hashed, never trusted unread).
        None when there is no journal, when the switch completed (the manifest records its commit), or when this
        run goes on with it (its files are hashed and kept). In a rollback, the partial downloads of the journal's
        files outside the selection are removed too.
        """
        try:
            journal = read_journal(self.journal_path)
        except ValueError as exc:
            self.module.warn(f"{exc}; ignoring it")
            return [], []
        if journal is None:
            return [], []
        self._journal_seen = True
        target = (journal.get("repo_id"), journal.get("repo_type"), journal["to"])
        if manifest is not None and (manifest["repo_id"], manifest["repo_type"], manifest["commit"]) == target:
            return [], []
        if (self.repo_id, self.repo_type, self.commit) == target:
            return [], []
        strays, suspects = [], []
        for item in journal["files"]:
            if item["path"] in by_path:
                if moved_in(item, self._stat(item["path"])):
                    suspects.append(item)
                continue
            if moved_in(item, self._stat(item["path"])):
                strays.append(item)
            if not self.module.check_mode:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.partial_path(item))
        return strays, suspects

    def _move_staged(self, staged, records):
        """Move the verified files of the new commit over the old ones (a rename each: never half a file)."""
        for entry in sorted(staged, key=lambda e: e["path"]):
            partial = self.partial_path(entry)
            try:
                records[entry["path"]] = self._put_in_place(entry, partial)
            except OSError as exc:
                raise HubError(
                    f"cannot move {partial} to {self.local_path(entry['path'])}: {exc}; the next run finishes the "
                    "switch",
                    kind="io",
                ) from exc

    def _removable(self, path):
        st = self._stat(path)
        return st is not None and not stat.S_ISDIR(st.st_mode)

    def _remove(self, path):
        """Delete a file of the previous commit and the folders it leaves empty."""
        full = self.local_path(path)
        try:
            os.unlink(full)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise HubError(f"cannot delete {full} (a file of {self.previous_commit}): {exc}", kind="io") from exc
        folder = os.path.dirname(full)
        while folder != self.local_dir and folder.startswith(self.local_dir + os.sep):
            try:
                os.rmdir(folder)
            except OSError:
                break
            folder = os.path.dirname(folder)

    # ---- bookkeeping -------------------------------------------------------------------------

    def _drop_stale_partials(self, selected, keep):
        """Remove the partial downloads of selected paths, except those of ``keep`` (entries still wanted)."""
        keep_paths = {self.partial_path(entry) for entry in keep}
        for entry in selected:
            folder = os.path.dirname(self.partial_path(entry))
            prefix = os.path.basename(entry["path"]) + ".sparkfold-"
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                path = os.path.join(folder, name)
                if name.startswith(prefix) and name.endswith(".incomplete") and path not in keep_paths:
                    with contextlib.suppress(OSError):
                        os.unlink(path)

    def _drop_stale_corrupt(self, selected, states):
        for entry in selected:
            corrupt = self.local_path(entry["path"]) + ".corrupt"
            if states[entry["path"]] == PRESENT and os.path.lexists(corrupt):
                try:
                    os.unlink(corrupt)
                except OSError as exc:
                    self.module.warn(f"could not remove {corrupt}: {exc}")

    def _substance(self, records, pending=()):
        return substance(
            {"repo_id": self.repo_id, "repo_type": self.repo_type, "commit": self.commit, "files": records,
             "pending": pending}
        )

    def _manifest_differs(self, manifest, records, pending=()):
        if not records and manifest is None:
            return False
        return substance(manifest) != self._substance(records, pending)

    def _write_manifest(self, manifest, records, pending=()):
        """Write the manifest when its text changes; return whether its substance changed.

        First the folders that files were moved into are fsynced (one fsync per folder, not per file), so that
        the manifest never names a file whose rename a crash could undo.
        """
        for folder in sorted(self._renamed_in):
            _fsync_dir(folder)
        self._renamed_in.clear()
        if not records and manifest is None:
            return False
        text = render_manifest(self.repo_id, self.repo_type, self.commit, records, pending)
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
        return self._manifest_differs(manifest, records, pending)

    def _keep_listing(self):
        """Keep the commit's listing, when this run read it from the Hub, for the next run (snapshot_listing.py).

        Bookkeeping like the lock and the partial downloads: not a change of the store. A failure to write it
        costs the next run one listing call, and is only warned about.
        """
        if self.listed is None:
            return
        text = listing_text(self.endpoint, self.repo_id, self.repo_type, self.commit, self.listed)
        try:
            write_listing(self.listing_path, text)
        except OSError as exc:
            self.module.warn(f"could not write {self.listing_path} ({exc}); the next run lists the commit again")

    def _diff(self, before_files, selected):
        return {
            "before_header": f"{self.local_dir} (verified files)",
            "after_header": f"{self.local_dir} ({self.repo_id}@{self.commit})",
            "before": file_lines(before_files),
            "after": file_lines(selected),
        }


def _default(value, default):
    return default if value is None else value


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
