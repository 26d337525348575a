# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Streamed answers of the inference engine, standard library only: reading one, and starting several at once.

- :class:`StreamResult`: what one streamed request gave back, with the arrival times of its chunks;
- :func:`read_sse`: reads an OpenAI-compatible server-sent-events answer into a StreamResult;
- :func:`together`: runs one piece of work on several threads released at the same moment (the
  concurrent streams of the determinism check and of the benchmark's concurrency grid).

The timing figures follow the bench definitions: TTFT = first content chunk - request sent;
decode tok/s = (n - 1) / (t_last - t_first) with n the completion tokens.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time

from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_errors import error_message


class StreamResult:
    """What one streamed request gave back, with the arrival times of its chunks (time.monotonic()).

    A content-bearing chunk is one with text: ``delta.content`` (chat), ``text`` (completions), or
    thinking (``delta.reasoning_content`` / ``delta.reasoning``, kept apart in ``reasoning``), so a
    thinking model's TTFT and decode speed count its thinking tokens as the engine produces them.
    """

    __slots__ = (
        "body",
        "chunks",
        "done",
        "error",
        "finish_reason",
        "prompt_tokens",
        "reasoning",
        "status",
        "t_first",
        "t_last",
        "t_start",
        "text",
        "usage_completion_tokens",
    )

    def __init__(self, t_start):
        self.status = None
        self.text = ""
        self.reasoning = ""  # thinking text (delta.reasoning_content / delta.reasoning), not part of text
        self.t_start = t_start
        self.t_first = None
        self.t_last = None
        self.chunks = 0
        self.usage_completion_tokens = None
        self.prompt_tokens = None
        self.finish_reason = None
        self.error = None
        self.done = False  # `data: [DONE]` was seen
        self.body = None  # the body of a non-200 answer

    @property
    def completion_tokens(self):
        """The server's usage figure when it sent one, else the number of content chunks."""
        if self.usage_completion_tokens is not None:
            return self.usage_completion_tokens
        return self.chunks

    @property
    def ttft_s(self):
        """Seconds from sending the request to the first content chunk; None without content."""
        if self.t_first is None:
            return None
        return self.t_first - self.t_start

    @property
    def decode_tok_s(self):
        """(n - 1) / (t_last - t_first); None when n < 2 or the span is 0."""
        n = self.completion_tokens
        if n is None or n < 2 or self.t_first is None or self.t_last is None:
            return None
        span = self.t_last - self.t_first
        if span <= 0:
            return None
        return (n - 1) / span

    @property
    def ok(self):
        return self.status == 200 and self.error is None

    def as_dict(self):
        return {
            "status": self.status,
            "text": self.text,
            "chunks": self.chunks,
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "finish_reason": self.finish_reason,
            "ttft_s": self.ttft_s,
            "decode_tok_s": self.decode_tok_s,
            "error": self.error,
        }

    def __repr__(self):
        return (f"StreamResult(status={self.status}, chunks={self.chunks}, finish_reason={self.finish_reason!r}, "
                f"error={self.error!r}, text={self.text[:60]!r})")


def read_sse(resp, result, chat, path, deadline, timeout):
    """Read the SSE answer of ``POST path`` from ``resp`` (its ``readline``) into ``result``.

    ``chat``: the chunks are chat deltas (else completions' ``text``); ``deadline``: seconds for the
    whole stream from ``result.t_start`` (None: no limit); ``timeout``: the socket timeout, as the
    message of a stalled stream says it. A timeout, a closed connection, a line that is not JSON or
    an error event ends the stream; what was read so far is kept and ``result.error`` says why.
    """
    readline = resp.readline
    monotonic = time.monotonic
    loads = json.loads
    end = None if deadline is None else result.t_start + deadline
    text_parts = []
    reasoning_parts = []
    key = "delta" if chat else None
    try:
        while True:
            line = readline()
            if not line:
                if not result.done and result.error is None:
                    result.error = (f"the stream of POST {path} ended before 'data: [DONE]' "
                                    f"after {result.chunks} content chunks")
                break
            if end is not None and monotonic() > end:
                result.error = f"the stream of POST {path} ran past its deadline of {deadline:g} s"
                break
            if not line.startswith(b"data:"):
                continue  # blank lines, ": comments", event:/id:/retry: fields
            data = line[5:].strip()
            if data == b"[DONE]":
                result.done = True
                break
            if not data:
                continue
            try:
                event = loads(data)
            except ValueError:
                result.error = f"the stream of POST {path} sent a line that is not JSON: {data[:120]!r}"
                break
            if not isinstance(event, dict):
                continue
            if "error" in event:
                result.error = f"the engine reported an error mid-stream: {error_message(json.dumps(event))}"
                break
            choices = event.get("choices")
            if choices:
                choice = choices[0]
                thought = None
                if key:
                    delta = choice.get("delta") or {}
                    piece = delta.get("content")
                    thought = delta.get("reasoning_content") or delta.get("reasoning")
                else:
                    piece = choice.get("text")
                if piece or thought:
                    now = monotonic()
                    if result.t_first is None:
                        result.t_first = now
                    result.t_last = now
                    result.chunks += 1
                    if piece:
                        text_parts.append(piece)
                    if thought:
                        reasoning_parts.append(thought)
                reason = choice.get("finish_reason")
                if reason:
                    result.finish_reason = reason
            usage = event.get("usage")
            if usage:
                if isinstance(usage.get("completion_tokens"), int):
                    result.usage_completion_tokens = usage["completion_tokens"]
                if isinstance(usage.get("prompt_tokens"), int):
                    result.prompt_tokens = usage["prompt_tokens"]
    except (socket.timeout, TimeoutError):
        result.error = (f"timeout: the stream of POST {path} sent nothing for {timeout:g} s "
                        f"after {result.chunks} content chunks")
    except (OSError, http.client.HTTPException) as exc:
        result.error = f"the stream of POST {path} broke after {result.chunks} content chunks: {exc}"
    result.text = "".join(text_parts)
    result.reasoning = "".join(reasoning_parts)


def together(count, work, timeout=None, join_timeout=None):
    """Run ``work(i)`` for i in 0..count-1, each on its own thread, all released at the same moment.

    Returns ``(results, t0)``: ``results[i]`` is what ``work(i)`` returned, None when its thread had not
    finished within ``join_timeout`` seconds (None: wait for it); ``t0`` is the ``time.monotonic()`` of
    the release. ``timeout`` bounds the wait for every thread to be ready (None: no bound); a thread
    that waited longer starts anyway.
    """
    results = [None] * count
    barrier = threading.Barrier(count + 1)

    def run(i):
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout)
        results[i] = work(i)

    threads = [threading.Thread(target=run, args=(i,), name=f"engine-stream-{i}", daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    t0 = time.monotonic()
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout)
    for thread in threads:
        thread.join(join_timeout)
    return results, t0
