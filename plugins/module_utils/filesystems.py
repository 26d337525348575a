# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The filesystem that holds a path (or its nearest existing parent): type, mount point, source, free bytes; and what
is mounted at a mount point, by the kernel and by fstab.

Used by ``read_files`` (``filesystem_paths``, ``mount_points``) in place of ``findmnt -T``, ``findmnt --mountpoint``
and ``df`` read from a shell. The mount
table is the kernel's ``/proc/self/mountinfo``, parsed here: one line per mount,
``ID PARENT MAJOR:MINOR ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - TYPE[.SUBTYPE] SOURCE SUPER_OPTIONS``
(torvalds/linux Documentation/filesystems/proc.rst section 3.5 @03c11eb3b16dc0058589751dfd91f254be2be613), where
the root, the mount point, the type and the source have a space, tab, newline and backslash written as a
three-digit octal escape (``\\040`` for a space): ``show_mountinfo`` writes them with the escape set
``" \\t\\n\\\\"`` (torvalds/linux fs/proc_namespace.c @0226f4923f6c9b40cfa1c1c1b19a6ac6b3924ead). Free bytes are
what ``df --output=avail`` shows: ``f_bavail * f_frsize`` of ``os.statvfs`` (the space an unprivileged writer has).
A mount's options are its own (the sixth field) then its superblock's (the last field) without repeats: the two lists
libmount keeps apart as VFS and FS options (util-linux libmount/src/fs.c @0382ba32eda9e9d14d1e425390abf4b1fd1bda6b,
``mnt_fs_print_debug``), where an NFS mount's ``proto=rdma`` and ``port=`` are. fstab is "fs_spec fs_file
fs_vfstype fs_mntops fs_freq fs_passno" separated by blanks, ``#`` lines comments, a space or tab in the mount point
written ``\\040`` or ``\\011`` (util-linux sys-utils/fstab.5.adoc @03ca5bfd049ec69b2d83cb80cf3d63197a723b1a).
"""

from __future__ import annotations

import os
import re

MOUNTINFO = "/proc/self/mountinfo"
FSTAB = "/etc/fstab"

_ESCAPE = re.compile(r"\\([0-7]{3})")


def unescape(field):
    """A mountinfo field with its octal escapes (``\\040``, ``\\011``, ``\\012``, ``\\134``) decoded."""
    return _ESCAPE.sub(lambda found: chr(int(found.group(1), 8)), field)


def parse_mountinfo(text):
    """(mounts, problem): the mounts of a mountinfo text in its order, each ``mount_point``, ``type``, ``source`` and
    ``options`` (the mount's own, then its superblock's not already there); problem names the first line that is not
    in the kernel's format (then mounts is None)."""
    mounts = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)  # the optional fields (zero or more) end at a lone "-"
        except ValueError:
            separator = None
        if len(fields) < 6 or separator is None or len(fields) < separator + 3:
            return None, f"line {number} is not a mountinfo line (no '-' separator or too few fields): {line!r}"
        own = fields[5].split(",")
        superblock = fields[separator + 3].split(",") if len(fields) > separator + 3 else []
        mounts.append({
            "mount_point": unescape(fields[4]),
            "type": unescape(fields[separator + 1]),
            "source": unescape(fields[separator + 2]),
            "options": own + [option for option in superblock if option and option not in own],
        })
    return mounts, None


def parse_fstab(text):
    """The entries of an fstab text in its order, each ``source``, ``mount_point``, ``type`` and ``options`` (a
    missing type is None, missing options an empty list); comments, blank lines and lines of one field are skipped."""
    entries = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 2 or fields[0].startswith("#"):
            continue
        entries.append({
            "source": unescape(fields[0]),
            "mount_point": unescape(fields[1]),
            "type": fields[2] if len(fields) > 2 else None,
            "options": fields[3].split(",") if len(fields) > 3 else [],
        })
    return entries


def holding_mount(path, mounts):
    """The mount of ``mounts`` that holds the absolute, resolved ``path``: the longest mount point that is the path
    or one of its parents; of equal ones the last (a mount over a mount hides the one below)."""
    best = None
    for mount in mounts:
        point = mount["mount_point"]
        holds = point == "/" or path == point or path.startswith(point.rstrip("/") + "/")
        if holds and (best is None or len(point) >= len(best["mount_point"])):
            best = mount
    return best


def nearest_existing(path):
    """The path itself when it exists (a link to something counts), else its nearest existing parent."""
    while not os.path.exists(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    return path


def filesystem_of(path, mounts):
    """(entry, problem) for the absolute ``path``: the filesystem holding it or its nearest existing parent.

    entry: ``measured_at`` (that path), ``type``, ``mount_point``, ``source``, ``free_bytes`` and ``size_bytes``.
    """
    measured_at = nearest_existing(path)
    resolved = os.path.realpath(measured_at)
    try:
        usage = os.statvfs(resolved)
    except OSError as exc:
        return None, f"{measured_at} (nearest existing path of {path}): {exc.strerror}"
    mount = holding_mount(resolved, mounts)
    if mount is None:
        return None, f"no mount in {MOUNTINFO} holds {resolved} (nearest existing path of {path})"
    return {
        "measured_at": measured_at,
        "type": mount["type"],
        "mount_point": mount["mount_point"],
        "source": mount["source"],
        "free_bytes": usage.f_bavail * usage.f_frsize,
        "size_bytes": usage.f_blocks * usage.f_frsize,
    }, None


def filesystems(paths, mountinfo=None):
    """({path: entry}, problems) for every path of ``paths``; the mount table read once from ``mountinfo``
    (default MOUNTINFO, read at call time)."""
    if not paths:
        return {}, []
    source = mountinfo or MOUNTINFO
    try:
        with open(source, encoding="utf-8", errors="surrogateescape") as handle:
            text = handle.read()
    except OSError as exc:
        return {}, [f"{source}: {exc.strerror}"]
    mounts, problem = parse_mountinfo(text)
    if problem:
        return {}, [f"{source}: {problem}"]
    found, problems = {}, []
    for path in paths:
        entry, problem = filesystem_of(path, mounts)
        if problem:
            problems.append(problem)
        else:
            found[path] = entry
    return found, problems


def mounted_at(points, mountinfo=None, fstab=None):
    """({point: {"kernel": [...], "fstab": [...]}}, problems): for every mount point of ``points``, what the kernel's
    mount table has mounted exactly there (in its order: the last one is on top) and what fstab mounts there, each
    entry as ``parse_mountinfo`` or ``parse_fstab`` gives it. A missing fstab has no entries; an unreadable mount
    table or fstab is a problem. The tables are read once, from ``mountinfo`` and ``fstab`` (default MOUNTINFO and
    FSTAB, read at call time)."""
    if not points:
        return {}, []
    tables = {}
    for name, source in (("kernel", mountinfo or MOUNTINFO), ("fstab", fstab or FSTAB)):
        try:
            with open(source, encoding="utf-8", errors="surrogateescape") as handle:
                text = handle.read()
        except FileNotFoundError:
            if name == "kernel":
                return {}, [f"{source}: No such file or directory"]
            text = ""
        except OSError as exc:
            return {}, [f"{source}: {exc.strerror}"]
        if name == "kernel":
            entries, problem = parse_mountinfo(text)
            if problem:
                return {}, [f"{source}: {problem}"]
        else:
            entries = parse_fstab(text)
        tables[name] = entries

    def same(one, other):
        return one.rstrip("/") == other.rstrip("/") or one == other

    return {point: {name: [entry for entry in entries if same(entry["mount_point"], point)]
                    for name, entries in tables.items()} for point in points}, []
