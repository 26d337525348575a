# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decode speed at depth for sparkfold.cluster.engine_bench, standard library only.

The figure users of a long-window recipe ask for first: how fast the model still writes with a long
history already in its context (published for the 1M-window TensorFold recipe: 68-70 tok/s from 8K
to 900K). For each depth a new prompt of that many tokens (filler text behind a nonce whose random
part is the prompt's first text, built to the count like the prefill ladder's) ends with the prose
task, and is sent as one chat stream at temperature 0, thinking off. Its TTFT is the prefill of the
whole history; its decode tok/s, (n - 1) / (t_last_chunk - t_first_chunk), is the decode speed at
that depth.

A depth above ``limit`` (the option ``depth_limit``: a 1M-token prefill takes about ten minutes on a
Spark pair) or one that does not fit the served context with its reply is skipped, and said so,
never sent.
"""

from __future__ import annotations

from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_figures import (
    depth_line,
    garble_reason,
    summarize,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_prompts import PROMPTS, prompt_of_tokens
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_requests import nonce, one_stream, thinking_extra

DEPTH_QUESTION = "\n\nThe text above is only there to fill the context; set it aside. " + PROMPTS["prose"]


def depth_skip(depth, max_tokens, limit, context_length):
    """Why ``depth`` is not measured (a sentence), or None when it is."""
    if limit and depth > limit:
        return f"{depth} tokens is above depth_limit {limit}"
    if context_length and depth + max_tokens > context_length:
        return f"{depth} + {max_tokens} tokens exceeds the server's context of {context_length}"
    return None


def _one(client, counter, depth, max_tokens, extra, deadline, garble_min_tokens, label):
    run = {"ok": False, "error": None, "counted_tokens": None, "prompt_tokens": None, "cached_tokens": None,
           "completion_tokens": None, "ttft_ms": None, "decode_tok_s": None, "garbled": None}
    try:
        text, counted, _rounds = prompt_of_tokens(depth, counter.count, nonce(f"depth {label}"),
                                                  question=DEPTH_QUESTION)
    except Exception as exc:
        run["error"] = f"could not build the prompt: {exc}"
        return run
    run["counted_tokens"] = counted
    r = one_stream(client, text, max_tokens, 0.0, extra, deadline)
    run.update(ok=r["ok"], error=r.get("error"), completion_tokens=r["completion_tokens"],
               prompt_tokens=r["prompt_tokens"] if r["prompt_tokens"] is not None else counted,
               cached_tokens=r.get("cached_tokens"),
               ttft_ms=None if r["ttft_s"] is None else r["ttft_s"] * 1000.0, decode_tok_s=r["decode_tok_s"],
               garbled=garble_reason(r["text"], garble_min_tokens) if r["ok"] else None)
    if r["ok"] and r["decode_tok_s"] is None:
        run["error"] = f"only {r['completion_tokens']} token(s) came back: no decode speed (raise depth_max_tokens?)"
    return run


def run_depth(client, counter, depths, max_tokens=256, limit=None, context_length=None, repeats=1,
              thinking_key="thinking", extra_body=None, deadline=None, progress=None, garble_min_tokens=16):
    """Decode at each of ``depths`` (history tokens): one row per depth with ``runs`` and the statistics
    ``decode_tok_s`` and ``ttft_ms`` (bench_figures.summarize), or ``skipped`` with the reason."""
    extra = thinking_extra(False, thinking_key, extra_body)
    out = []
    for depth in depths:
        row = {"depth_tokens": depth, "max_tokens": max_tokens, "runs": [], "exact": counter.exact,
               "skipped": depth_skip(depth, max_tokens, limit, context_length), "error": None}
        out.append(row)
        for i in range(0 if row["skipped"] else repeats):
            if progress:
                progress.step("depth", f"{depth} tokens, run {i + 1}/{repeats}: prefill, then decode")
            row["runs"].append(_one(client, counter, depth, max_tokens, extra, deadline, garble_min_tokens,
                                    f"{depth} run {i + 1}/{repeats}"))
        good = [run for run in row["runs"] if run["decode_tok_s"] is not None]
        row["decode_tok_s"] = summarize(run["decode_tok_s"] for run in good)
        row["ttft_ms"] = summarize(run["ttft_ms"] for run in row["runs"])
        row["prompt_tokens"] = next((run["prompt_tokens"] for run in row["runs"] if run["prompt_tokens"]), None)
        row["error"] = "; ".join(f"run {i + 1}: {run['error']}" for i, run in enumerate(row["runs"])
                                 if run["error"]) or None
        if progress:
            progress.finished(depth_line(row))
    return out
