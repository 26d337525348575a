# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan of a parallel rsync pull (sparkfold.cluster.fabric_copy): what differs, cut into streams.

One ``rsync --dry-run`` lists what differs between the source directory and the local copy (its
``--out-format`` lines: ``%i|%l|%n``); the files to transfer are dealt to N streams by size (largest
first, each to the stream with the fewest bytes so far), stream ``i`` going to source address
``i mod len(addresses)``, so that the streams share every rail of the source. Pure: text and numbers
in, values out.
"""

from __future__ import annotations

# Not an rsync option: the prefix of the lines this plan parses (rsync's --out-format escapes).
OUT_FORMAT = "%i|%l|%n"
# Where an interrupted transfer waits (relative: one per directory; rsync protects it from --delete).
PARTIAL_DIR = ".rsync-partial"


class PlanError(ValueError):
    """An rsync listing line this plan does not understand."""


def parse_listing(text):
    """Parse dry-run lines into ``{"transfer": [(path, size)], "dirs": [path], "delete": [path], "other": [line]}``.

    ``transfer``: regular files whose content rsync would send (``>f``); ``dirs``: directories it would
    create (``cd+++``); ``delete``: paths ``--delete`` would remove; ``other``: every other change
    (attributes only, links, devices), applied by the final pass. Lines without ``|`` (rsync's own
    messages) are ignored.
    """
    plan = {"transfer": [], "dirs": [], "delete": [], "other": []}
    for line in text.splitlines():
        if line.count("|") < 2:
            continue
        item, size, path = line.split("|", 2)
        item = item.strip()
        if item.startswith("*deleting"):
            plan["delete"].append(path)
        elif item.startswith(">f"):
            try:
                plan["transfer"].append((path, int(size)))
            except ValueError as exc:
                raise PlanError(f"rsync listed {path} with size {size!r}") from exc
        elif item.startswith("cd") and item[2:].startswith("+"):
            plan["dirs"].append(path.rstrip("/"))
        else:
            plan["other"].append(f"{item} {path}")
    return plan


def changes(plan):
    """Every change of a plan, one ``what path`` line each (for ``diff`` and ``changed``)."""
    lines = [f"send {path} ({size} bytes)" for path, size in plan["transfer"]]
    lines += [f"mkdir {path}/" for path in plan["dirs"]]
    lines += [f"delete {path}" for path in plan["delete"]]
    lines += plan["other"]
    return lines


def shard(files, streams, addresses):
    """Deal ``files`` ((path, size) pairs) to at most ``streams`` streams, balanced by bytes.

    Returns a list of ``{"address", "files", "bytes"}``, one per non-empty stream, the largest files
    first; stream ``i`` pulls from ``addresses[i % len(addresses)]``. A file is never split: a stream
    per file at most.
    """
    if streams < 1:
        raise ValueError("streams must be 1 or more")
    if not addresses:
        raise ValueError("at least one source address is needed")
    count = max(1, min(streams, len(files)))
    bins = [{"address": addresses[i % len(addresses)], "files": [], "bytes": 0} for i in range(count)]
    for path, size in sorted(files, key=lambda item: (-item[1], item[0])):
        target = min(bins, key=lambda b: (b["bytes"], len(b["files"])))
        target["files"].append(path)
        target["bytes"] += size
    return [b for b in bins if b["files"]]


def files_from(paths):
    """The NUL-separated list an rsync ``--files-from=- --from0`` reads."""
    return b"".join(path.encode("utf-8") + b"\0" for path in paths)
