# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The progress file of hub_snapshot: counters of the run, rewritten atomically for async pollers."""

from __future__ import annotations

import json
import os
import threading
import time

from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import write_atomic


class Progress:
    """Counters of the run, written atomically to ``path`` (if any) at most every ``interval`` seconds.

    Thread safe: the download and hashing pools update it. A write that fails is remembered in
    ``failed_write`` (the module warns once) and does not stop the run.
    """

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
            write_atomic(self.path, json.dumps(self.state, sort_keys=True) + "\n", durable=False)
        except OSError as exc:
            self.failed_write = f"could not write progress_file {self.path}: {exc}"
