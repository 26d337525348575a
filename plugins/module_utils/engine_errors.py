# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What goes wrong when talking to the inference engine, and the short texts that say it; standard library only.

- :class:`EngineError`: the engine could not be asked, or answered in a way that cannot be used;
- :func:`error_in` / :func:`error_message`: the message of an OpenAI-, TensorFold- or llama.cpp-shaped
  error body;
- :func:`context_refusal`: the message of an answer that refuses a request for lack of context;
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


# How the engines word a refusal for lack of context (HTTP 400, before any token):
# - TensorFold: OpenAI's code `context_length_exceeded`, a message that starts "This server's maximum context length
#   is N tokens" (ashhart/TensorFold docs/api.md @01ecc8dc204d07484f98ded75a51d20d6515c188, "Context and errors");
# - vLLM: "This model's maximum context length is N tokens. However, your request has M input tokens."
#   (vllm-project/vllm vllm/entrypoints/renderer.py @09b5e071385d566ae62637708a8197f86196c257 _create_tokens_prompt);
# - SGLang: "The input (N tokens) is longer than the model's context length (M tokens)." and "Requested token count
#   exceeds the model's maximum context length of M tokens." (sgl-project/sglang
#   python/sglang/srt/managers/tokenizer_manager.py @001067fffe33427bee0ed2f007fb7551a1d76b44 _validate_one_request);
# - llama.cpp server: type `exceed_context_size_error` (ggml-org/llama.cpp tools/server/server-common.cpp
#   @006639c3ff51a3dbde5f52ebf4c5a55ad5306caf format_error_response).
CONTEXT_CODES = ("context_length_exceeded", "exceed_context_size_error")
CONTEXT_WORDS = ("maximum context length", "longer than the model's context length")


def context_refusal(status, text):
    """The server's message when an answer of ``status`` with body ``text`` refuses the request for lack of context
    (the prompt, or the prompt and its reply, do not fit the served window); None for any other answer."""
    if status is None or not 400 <= status < 500:
        return None
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        data = None
    err = data.get("error") if isinstance(data, dict) else None
    codes = [str(err.get(key)) for key in ("code", "type")] if isinstance(err, dict) else []
    message = error_message(text)
    if any(code in CONTEXT_CODES for code in codes) or any(w in message.lower() for w in CONTEXT_WORDS):
        return message
    return None


def shorten(text, limit=120):
    """``text`` on one line (runs of whitespace as one space), cut to ``limit`` characters with "..."."""
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
