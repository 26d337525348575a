# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read files, links and directories of a node as the sparkfold read modules return them.

Shared by ``read_files`` (links reported as links), ``fabric_facts`` (links followed) and ``write_files``
(the owner and group names it shows in a diff). Every reader returns ``(entry, problem)``: ``problem`` is None
or says why the path cannot be read, so a module can collect every problem before it fails.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat


def owner_name(lookup, number):
    """The user or group name of a uid or gid (``pwd.getpwuid``/``grp.getgrgid``), or the number as a string."""
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def attributes(info):
    """The mode (four octal digits), owner and group names of an ``os.stat_result``."""
    return {
        "mode": f"{stat.S_IMODE(info.st_mode):04o}",
        "owner": owner_name(pwd.getpwuid, info.st_uid),
        "group": owner_name(grp.getgrgid, info.st_gid),
    }


def kind(mode):
    """The type word of a st_mode: file, directory, link or other."""
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def list_directory(path):
    """What a directory holds, not recursing: (entries, problem); each entry has name, path, type and mtime."""
    entries = []
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        return None, f"{path}: {exc.strerror}"
    for name in names:
        child = os.path.join(path, name)
        try:
            info = os.lstat(child)
        except FileNotFoundError:
            continue  # gone between listing and looking: not there
        except OSError as exc:
            return None, f"{child}: {exc.strerror}"
        entries.append({"name": name, "path": child, "type": kind(info.st_mode), "mtime": info.st_mtime})
    return entries, None


def _text(path, info, max_bytes):
    """(text, problem) of a regular file of at most max_bytes, undecodable bytes replaced."""
    if info.st_size > max_bytes:
        return None, f"{path} holds {info.st_size} bytes, more than max_bytes ({max_bytes})"
    try:
        with open(path, "rb") as handle:
            return handle.read(max_bytes + 1).decode("utf-8", errors="replace"), None
    except OSError as exc:
        return None, f"{path}: {exc.strerror}"


def read_entry(path, max_bytes, list_directories=False, text=True, follow_links=False):
    """The entry of one path: exists, type, mode, owner, group, and the text of a file when text is true.

    A link is reported as ``type: link`` with its ``target`` and ``resolved`` path (and the text of the file it
    points to), or, with follow_links, as what it points to. A directory lists what it holds with
    list_directories. A missing path is ``{"exists": False, "type": "absent"}``, no problem.
    """
    try:
        info = os.stat(path) if follow_links else os.lstat(path)
    except FileNotFoundError:
        return {"exists": False, "type": "absent"}, None
    except OSError as exc:
        return None, f"{path}: {exc.strerror}"
    entry = {"exists": True, "type": kind(info.st_mode)}
    entry.update(attributes(info))
    if entry["type"] == "link":
        entry.update(target=os.readlink(path), resolved=os.path.realpath(path))
        try:
            info = os.stat(path)
        except OSError:
            return entry, None  # a link to nothing: no text
    elif entry["type"] == "directory" and list_directories:
        entries, problem = list_directory(path)
        if problem:
            return None, problem
        entry["entries"] = entries
    if text and stat.S_ISREG(info.st_mode):
        content, problem = _text(path, info, max_bytes)
        if problem:
            return None, problem
        entry["content"] = content
    return entry, None
