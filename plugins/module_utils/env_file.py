# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The KEY=VALUE lines of an environment file as systemd's EnvironmentFile= reads the ones sparkfold writes.

systemd.exec(5), EnvironmentFile=: "Empty lines, lines without an "=" separator, or lines starting with ";" or "#"
will be ignored"; a value in double or single quotes is unquoted; a later assignment of a variable overrides an
earlier one. A line without "=" or with a key that is not a variable name is reported here rather than ignored:
sparkfold's files (fabric.env, cuda.env, engine.env) never hold one, so it is a file edited by hand.
"""

from __future__ import annotations

import string

_NAME_START = set(string.ascii_letters + "_")
_NAME_REST = _NAME_START | set(string.digits)


def is_name(key):
    """Whether ``key`` is an environment variable name (a letter or _, then letters, digits or _)."""
    return bool(key) and key[0] in _NAME_START and all(char in _NAME_REST for char in key[1:])


def parse_env(text):
    """The variables of an environment file's ``text``, by name (the last assignment wins).

    Raises ValueError naming the first line that is not a comment, blank or KEY=VALUE."""
    values = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not is_name(key):
            raise ValueError(f"line {number} is not KEY=VALUE: {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key] = value
    return values
