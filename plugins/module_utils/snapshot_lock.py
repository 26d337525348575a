# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lock of a model store: one hub_snapshot run per local_dir at a time.

An flock on ``<local_dir>/.cache/huggingface/.sparkfold-hub_snapshot.lock``, which holds the PID of the
run that has it (cleared before the lock is let go), so that a refused run can say whom it waits for.
"""

from __future__ import annotations

import contextlib
import os

from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import HubError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

LOCK_NAME = ".sparkfold-hub_snapshot.lock"  # under <local_dir>/.cache/huggingface/; holds the running run's PID


def lock_path(local_dir):
    return os.path.join(local_dir, ".cache", "huggingface", LOCK_NAME)


@contextlib.contextmanager
def store_lock(local_dir, check_mode=False):
    """Hold the store's lock for the block; raise HubError(kind=locked) when another run has it.

    Check mode takes no lock (it writes nothing, not even the lock file).
    """
    if check_mode or fcntl is None:
        yield
        return
    path = lock_path(local_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            handle.seek(0)
            pid = lock_holder(handle.read())
            raise HubError(locked_message(path, pid), kind="locked", lock_file=path, pid=pid) from exc
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


def locked_message(path, pid):
    """Why a run is refused while another holds the lock, with how to wait for it or stop it."""
    if pid is None:
        who = f"another hub_snapshot run holds {path} (its PID is not recorded; `fuser -v {path}` shows it)"
        stop = "stop that process"
    else:
        who = f"another hub_snapshot run, PID {pid}, holds {path}"
        stop = f"stop it with `kill {pid}` on this host"
    return (
        f"{who}: a download into this directory is still running, perhaps the async job of an earlier play. "
        f"Wait for it to finish (its progress file shows how far it is), or {stop} (what it has fetched is kept "
        "and resumed), then run again."
    )
