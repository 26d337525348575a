# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What goes wrong when talking to the inference engine, and the short texts that say it; standard library only.

- :class:`EngineError`: the engine could not be asked, or answered in a way that cannot be used;
- :func:`error_in` / :func:`error_message`: the message of an OpenAI-, TensorFold- or llama.cpp-shaped
  error body;
- :func:`shorten`: a text on one line, cut to a length, for the messages of the checks.
"""

from __future__ import annotations

import json

KINDS = ("refused", "timeout", "http", "protocol")


class EngineError(Exception):
    """The engine could not be asked, or answered in a way that cannot be used.

    ``kind`` is one of "refused", "timeout", "http", "protocol"; ``status`` the HTTP status when
    there was one; ``body`` the response body (text) when there was one.
    """

    def __init__(self, message, kind, status=None, body=None):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status = status
        self.body = body

    def __str__(self):
        return self.message


def error_in(data):
    """The message of a parsed error body (a dict), or None when it holds none.

    ``{"error": {"message": ...}}`` (OpenAI, llama.cpp), ``{"error": "..."}`` (TensorFold's /health),
    ``{"message": ...}`` or ``{"detail": ...}``.
    """
    if not isinstance(data, dict):
        return None
    err = data.get("error")
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])
    if isinstance(err, str) and err:
        return err
    for key in ("message", "detail"):
        if data.get(key):
            return str(data[key])
    return None


def error_message(text):
    """The message of an OpenAI- or llama.cpp-shaped error body, else the text itself (shortened)."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        data = None
    message = error_in(data)
    if message:
        return message
    text = (text or "").strip()
    return text[:300] if text else "(empty body)"


def shorten(text, limit=120):
    """``text`` on one line (runs of whitespace as one space), cut to ``limit`` characters with "..."."""
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
