# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The progress file of a long run (hub_snapshot, engine_bench), read by the job_watch action.

One writer: a JSON object replaced atomically (readers never see a part), written at most every
``interval`` seconds unless forced, thread safe, carrying the writer's pid (job_watch names it when a
watch times out). A write that fails is remembered in ``failed_write`` and never stops the run.
"""

from __future__ import annotations

import json
import os
import threading
import time

from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import write_atomic


class ProgressFile:
    """``state`` (a dict) written to ``path`` (None: nothing is written)."""

    def __init__(self, path, state, interval=0.0):
        self.path = path
        self.lock = threading.Lock()
        self.interval = interval
        self.last_write = 0.0
        self.failed_write = None
        self.state = dict(state, pid=os.getpid())

    def update(self, force=False, **changes):
        with self.lock:
            self.state.update(changes)
            self._maybe_write(force)

    def add(self, key, count, force=False):
        with self.lock:
            self.state[key] += count
            self._maybe_write(force)

    def stamp(self, now):
        """Fields set on every write (subclasses add theirs)."""
        self.state["updated"] = now

    def _maybe_write(self, force):
        """Write now if forced or ``interval`` has passed; the caller holds ``lock``."""
        if not self.path:
            return
        now = time.time()
        if not force and now - self.last_write < self.interval:
            return
        self.last_write = now
        self.stamp(now)
        try:
            write_atomic(self.path, json.dumps(self.state, sort_keys=True) + "\n", durable=False)
        except OSError as exc:
            self.failed_write = f"could not write progress_file {self.path}: {exc}"


class SnapshotProgress(ProgressFile):
    """hub_snapshot's counters: files and bytes done of the totals, the files in flight."""

    def __init__(self, path, commit, files_total, bytes_total, interval=0.5):
        super().__init__(path, {
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
        }, interval)

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


class StepProgress(ProgressFile):
    """engine_bench's steps: the phase and step running, the last one finished, done of total."""

    def __init__(self, path, total):
        self.started = time.time()
        super().__init__(path, {"phase": "starting", "step": "", "last": "", "done": 0, "total": total})
        self.update(force=True)

    def stamp(self, now):
        self.state["elapsed_s"] = round(now - self.started, 1)
        self.state["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))

    def step(self, phase, step):
        self.update(force=True, phase=phase, step=step)

    def finished(self, last):
        self.update(force=True, last=last, done=self.state["done"] + 1)
