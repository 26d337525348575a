# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One request of sparkfold.cluster.engine_bench, standard library only: its extra body, a prompt no cache
has seen, the request as a dict of figures, and the untimed warm-up request.

Every timed request must be new to the server. A decode prompt sent again is found in the engine's
prompt cache (72 of its 74 tokens cached on a llama.cpp server), so its "TTFT" is no prefill at all:
:func:`unique` puts a random nonce first, where it breaks every cached prefix. The nonce is the very
first text of the prompt (:func:`nonce`): a constant before it (``[bench ``) was 1-11 tokens found in
the cache on every request.
"""

from __future__ import annotations

import secrets
import time

from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_prompts import PROMPTS


def thinking_extra(thinking, key="thinking", extra_body=None):
    """The extra body of a request: ``extra_body`` plus ``chat_template_kwargs: {key: thinking}``."""
    extra = dict(extra_body or {})
    if thinking is not None:
        kwargs = dict(extra.get("chat_template_kwargs") or {})
        kwargs[key] = bool(thinking)
        extra["chat_template_kwargs"] = kwargs
    return extra


def one_stream(client, prompt, max_tokens, temperature, extra, deadline):
    """One streamed chat request of ``prompt`` as a dict of figures (errors recorded, never raised)."""
    started = time.monotonic()
    try:
        res = client.ask(prompt, max_tokens, temperature, extra, deadline)
    except Exception as exc:
        return {"ok": False, "error": str(exc), "t_start": started, "t_end": time.monotonic(), "text": "",
                "completion_tokens": 0, "ttft_s": None, "decode_tok_s": None, "prompt_tokens": None,
                "cached_tokens": None, "finish_reason": None, "status": None}
    out = res.as_dict()
    # Thinking (reasoning_content) is timed with the content; the garble check reads both.
    reasoning = getattr(res, "reasoning", "") or ""
    out["text"] = (reasoning + "\n" + res.text) if reasoning else res.text
    out["ok"] = res.ok and res.chunks > 0
    if res.ok and res.chunks == 0 and not out.get("error"):
        out["error"] = "no content chunk in the stream"
    out["t_start"] = res.t_start
    out["t_end"] = time.monotonic()
    return out


def nonce(tag=""):
    """A line no other request has: 12 random hex digits first, then ``tag`` (which run it is, for a reader).

    Nothing constant comes before the random digits, so the prompt it starts shares no prefix with another
    one beyond the chat template's own tokens."""
    return f"{secrets.token_hex(6)}{' (' + tag + ')' if tag else ''}"


def unique(prompt, tag=""):
    """``prompt`` behind a line of its own that no other request has (:func:`nonce`), so that no prefix of the
    prompt is in the server's prompt cache."""
    return f"{nonce(tag)}\n{prompt}"


def warm_up(client, extra_body=None, deadline=None, progress=None, max_tokens=16):
    """One untimed request before the measurements (a cold server's first request pays for lazy setup)."""
    if progress:
        progress.step("warm-up", "one untimed request")
    r = one_stream(client, unique(PROMPTS["prose"], "warm-up"), max_tokens, 0.0, dict(extra_body or {}), deadline)
    return {"ok": r["ok"], "error": r.get("error"), "completion_tokens": r["completion_tokens"]}
