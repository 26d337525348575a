# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The journal of a revision switch's final move (module_utils/snapshot.py), so that a killed switch can be undone.

A switch downloads the new commit's files that differ into the partial-download folder, then moves them into
place one rename each, deletes the previous commit's leftovers and rewrites the manifest. A run killed inside
those moves leaves some files of the new commit in place while the manifest still records the previous one.
Going on to the new commit needs nothing more (its files are hashed and kept); going back to the previous one
(a rollback) must not keep any of them. Before the first move, the switch writes
``<local_dir>/.cache/huggingface/.sparkfold-switch.json``: the commit it switches to and, for each file it is
about to move, the path, size, mtime and inode of the verified download. A rename keeps the inode and the
mtime, so a later run knows a file in the store as one the switch moved in without reading it, and a file that
is not (one the switch never reached) is never touched. The journal is removed once a run completes.
"""

from __future__ import annotations

import json
import os
import stat

from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import (
    HASH_KINDS,
    check_repo_path,
    expected_hash,
    write_atomic,
)

JOURNAL_NAME = ".sparkfold-switch.json"  # under <local_dir>/.cache/huggingface/
JOURNAL_VERSION = 1


def journal_path(local_dir):
    return os.path.join(local_dir, ".cache", "huggingface", JOURNAL_NAME)


def journal_text(repo_id, repo_type, previous_commit, commit, moves):
    """The journal of a switch about to move ``moves`` ([(entry, os.stat of its verified download)])."""
    files = []
    for entry, st in sorted(moves, key=lambda move: move[0]["path"]):
        kind, digest = expected_hash(entry)
        files.append({"path": entry["path"], "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino,
                      kind: digest})
    data = {"version": JOURNAL_VERSION, "repo_id": repo_id, "repo_type": repo_type, "from": previous_commit,
            "to": commit, "files": files}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def write_journal(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, text)  # durable before the first rename


def parse_journal(text):
    """The journal as a dict, or None when it is not one this version wrote."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("version") != JOURNAL_VERSION or not isinstance(data.get("to"), str):
        return None
    files = data.get("files")
    if not isinstance(files, list):
        return None
    for item in files:
        if not (isinstance(item, dict) and isinstance(item.get("path"), str)
                and all(isinstance(item.get(key), int) for key in ("size", "mtime_ns", "ino"))
                and any(isinstance(item.get(kind), str) for kind in HASH_KINDS)):
            return None
        try:
            check_repo_path(item["path"])
        except ValueError:
            return None
    return data


def read_journal(path):
    """The journal at ``path``; None when there is none. Raises ValueError for one that cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    data = parse_journal(text)
    if data is None:
        raise ValueError(f"{path} is not a switch journal this version wrote")
    return data


def moved_in(item, st):
    """Whether ``st`` (os.lstat of the store's file, or None) is the very file the journal's ``item`` moved in."""
    return (st is not None and stat.S_ISREG(st.st_mode) and st.st_ino == item["ino"]
            and st.st_size == item["size"] and st.st_mtime_ns == item["mtime_ns"])
