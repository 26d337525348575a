# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Measurements of sparkfold.cluster.engine_bench, standard library only (runs on the head's python3).

The bench definitions (docs/bench.md):

- decode tok/s = (n - 1) / (t_last_chunk - t_first_chunk), n = completion tokens (the server's usage
  figure when it sends one, else the content chunks); TTFT = first content chunk - request sent;
- prefill tok/s = prompt tokens / TTFT;
- aggregate tok/s = total output tokens of all streams / wall time (first request sent to last
  stream finished); per-stream tok/s = median decode tok/s of the streams;
- a stream is garbled as bench_figures.garble_reason says.

Phases (``run_*``) take an EngineClient-like object and return plain dicts (JSON-ready). Nothing
here raises on a failed request: failures are recorded in the results with their reason. The
prompts and token counters are in bench_prompts, the statistics and lines in bench_figures, the
options in bench_setup.
"""

from __future__ import annotations

import time

from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_figures import (
    concurrency_line,
    fmt,
    garble_reason,
    needle_line,
    prefill_line,
    summarize,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_prompts import PROMPTS, prompt_of_tokens
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_needle import Needle
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_stream import together


# --- phases -------------------------------------------------------------------------------------
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
                "finish_reason": None, "status": None}
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


def run_decode(client, cases, repeats, max_tokens, thinking_key="thinking", extra_body=None, deadline=None,
               progress=None, garble_min_tokens=16):
    """Single-stream decode: each case ``repeats`` times, one request at a time."""
    out = []
    for case in cases:
        prompt_kind = case.get("prompt", "prose")
        prompt = case.get("text") or PROMPTS[prompt_kind]
        extra = thinking_extra(case.get("thinking"), thinking_key, extra_body)
        runs = []
        for i in range(repeats):
            if progress:
                progress.step("decode", f"{case['name']} run {i + 1}/{repeats}")
            r = one_stream(client, prompt, max_tokens, case.get("temperature", 0.0), extra, deadline)
            runs.append({
                "ok": r["ok"], "error": r.get("error"), "completion_tokens": r["completion_tokens"],
                "prompt_tokens": r["prompt_tokens"], "finish_reason": r["finish_reason"],
                "ttft_ms": None if r["ttft_s"] is None else r["ttft_s"] * 1000.0,
                "decode_tok_s": r["decode_tok_s"], "garbled": garble_reason(r["text"], garble_min_tokens),
                "text_head": r["text"][:160],
            })
            if progress:
                last = (f"decode {case['name']} run {i + 1}: {fmt(r['decode_tok_s'])} tok/s, "
                        f"TTFT {fmt(None if r['ttft_s'] is None else r['ttft_s'] * 1000)} ms"
                        if r["ok"] else f"decode {case['name']} run {i + 1} failed: {r.get('error')}")
                progress.finished(last)
        good = [run for run in runs if run["ok"]]
        out.append({
            "name": case["name"], "prompt": prompt_kind, "temperature": case.get("temperature", 0.0),
            "thinking": case.get("thinking"), "max_tokens": max_tokens, "runs": runs,
            "ok": len(good), "failed": len(runs) - len(good),
            "decode_tok_s": summarize(run["decode_tok_s"] for run in good),
            "ttft_ms": summarize(run["ttft_ms"] for run in good),
        })
    return out


def run_prefill(client, counter, lengths, max_tokens=4, context_length=None, extra_body=None, deadline=None,
                progress=None, nonce_seed="sparkfold"):
    """Prefill ladder: one prompt of each length (built to the token count), TTFT and prefill tok/s."""
    out = []
    for target in lengths:
        row = {"target_tokens": target, "counted_tokens": None, "prompt_tokens": None, "ttft_ms": None,
               "prefill_tok_s": None, "ok": False, "error": None, "skipped": None, "exact": counter.exact}
        out.append(row)
        if context_length and target + max_tokens > context_length:
            row["skipped"] = f"{target} + {max_tokens} tokens exceeds the server's context of {context_length}"
        else:
            _prefill(client, counter, row, max_tokens, extra_body, deadline, progress, nonce_seed)
        if progress:
            progress.finished(prefill_line(row))
    return out


def _prefill(client, counter, row, max_tokens, extra_body, deadline, progress, nonce_seed):
    """Build the prompt of ``row``'s length, send it, and fill ``row`` with what came back."""
    target = row["target_tokens"]
    if progress:
        progress.step("prefill", f"{target} tokens: building the prompt")
    nonce = f"[bench {nonce_seed} {target} {time.time_ns()}]"
    try:
        text, counted, rounds = prompt_of_tokens(target, counter.count, nonce)
    except Exception as exc:
        row["error"] = f"could not build the prompt: {exc}"
        return
    row["counted_tokens"] = counted
    row["count_rounds"] = rounds
    if progress:
        progress.step("prefill", f"{target} tokens: waiting for the first token")
    try:
        res = client.stream_completion(text, max_tokens, temperature=0.0, extra=dict(extra_body or {}),
                                       deadline=deadline)
    except Exception as exc:
        row["error"] = str(exc)
        return
    row["prompt_tokens"] = res.prompt_tokens if res.prompt_tokens is not None else counted
    row["prompt_tokens_source"] = "server usage" if res.prompt_tokens is not None else counter.method
    if res.ttft_s is None:
        row["error"] = res.error or "no token came back"
    else:
        row["ok"] = res.ok
        row["error"] = res.error
        row["ttft_ms"] = res.ttft_s * 1000.0
        row["prefill_tok_s"] = row["prompt_tokens"] / res.ttft_s if res.ttft_s > 0 else None


def run_concurrency_point(client, streams, prompt, max_tokens, temperature=0.0, extra=None, deadline=None,
                          garble_min_tokens=16, raw=None):
    """``streams`` requests started together; aggregate and per-stream figures.

    ``raw``: a list to receive each stream's own figures (``one_stream`` dicts), for callers that need them.
    """
    results, t0 = together(streams, lambda _i: one_stream(client, prompt, max_tokens, temperature, extra, deadline))
    if raw is not None:
        raw.extend(results)
    t_end = max((r["t_end"] for r in results if r), default=time.monotonic())
    wall = max(t_end - t0, 1e-9)
    completed = [r for r in results if r and r["ok"]]
    garbled = []
    for i, r in enumerate(results):
        if r and r["ok"]:
            reason = garble_reason(r["text"], garble_min_tokens)
            if reason:
                garbled.append({"stream": i, "reason": reason})
    errors = {}
    for r in results:
        if r and not r["ok"]:
            key = r.get("error") or f"status {r.get('status')}"
            errors[key] = errors.get(key, 0) + 1
    total_tokens = sum(r["completion_tokens"] or 0 for r in results if r)
    texts = {r["text"] for r in completed}
    return {
        "streams": streams, "sent": streams, "completed": len(completed),
        "garbled": len(garbled), "garbled_streams": garbled[:10],
        "errors": [{"error": k, "count": v} for k, v in sorted(errors.items())],
        "output_tokens": total_tokens, "wall_s": wall,
        "aggregate_tok_s": total_tokens / wall,
        "per_stream_tok_s": summarize(r["decode_tok_s"] for r in completed),
        "ttft_ms": summarize(None if r["ttft_s"] is None else r["ttft_s"] * 1000.0 for r in completed),
        "distinct_outputs": len(texts), "max_tokens": max_tokens, "temperature": temperature,
    }


def run_concurrency(client, grid, max_tokens, prompt_kind="prose", temperature=0.0, thinking=None,
                    thinking_key="thinking", extra_body=None, deadline=None, progress=None, garble_min_tokens=16):
    """The concurrency grid: one point per stream count, in order."""
    out = []
    extra = thinking_extra(thinking, thinking_key, extra_body)
    for streams in grid:
        if progress:
            progress.step("concurrency", f"{streams} streams")
        point = run_concurrency_point(client, streams, PROMPTS[prompt_kind], max_tokens, temperature, extra,
                                      deadline, garble_min_tokens)
        point["prompt"] = prompt_kind
        out.append(point)
        if progress:
            progress.finished(concurrency_line(point))
    return out


def run_needle(client, counter, target_tokens, count=3, depths=None, seed=0, max_tokens=256, context_length=None,
               thinking_key="thinking", extra_body=None, deadline=None, progress=None):
    """The needle test of the smoke checks (engine_needle) at ``target_tokens``, with TTFT."""
    out = {"target_tokens": target_tokens, "prompt_tokens": None, "counted_tokens": None,
           "token_counter": counter.method, "passed": False, "found": 0, "expected": 0, "detail": None,
           "ttft_ms": None, "passphrases": [], "reply_head": None}
    if progress:
        progress.step("needle", f"{target_tokens} tokens: building the prompt")
    try:
        needle = Needle(target_tokens, count, depths, seed)
        out["passphrases"] = needle.passphrases
        out["expected"] = len(needle.passphrases)
        out["depths"] = needle.depths
        needle.fit(max_tokens, context_length)
        prompt = needle.build(counter.count)
        out["counted_tokens"] = prompt.tokens
        if progress:
            progress.step("needle", f"{prompt.tokens} tokens: waiting for the reply")
        res = needle.ask(client, max_tokens, thinking_extra(False, thinking_key, extra_body), deadline)
    except Exception as exc:  # ValueError from the prompt builder, EngineError from the client
        out["detail"] = str(exc)
        if progress:
            progress.finished(needle_line(out))
        return out
    out["prompt_tokens"] = res.prompt_tokens if res.prompt_tokens is not None else prompt.tokens
    out["ttft_ms"] = None if res.ttft_s is None else res.ttft_s * 1000.0
    out["reply_head"] = res.text[:300]
    if not res.ok:
        out["detail"] = res.error or f"status {res.status}"
    else:
        low = res.text.lower()
        out["found"] = sum(1 for word in needle.passphrases if word.lower() in low)
        out["passed"], out["detail"] = needle.check(res.text)
    if progress:
        progress.finished(needle_line(out))
    return out


def run_phases(client, params, phases, counter, context, progress):
    """The measurements of ``phases`` with the module's options ``params`` (bench_setup.ARGUMENT_SPEC).

    Returns ``{decode, prefill, concurrency, needle}``: a list per phase, the needle's dict (None when not run).
    """
    results = {"decode": [], "prefill": [], "concurrency": [], "needle": None}
    common = {"extra_body": params["extra_body"], "deadline": params["request_timeout_s"], "progress": progress}
    if "decode" in phases:
        results["decode"] = run_decode(client, params["decode_cases"], params["decode_repeats"],
                                       params["decode_max_tokens"], thinking_key=params["thinking_key"],
                                       garble_min_tokens=params["garble_min_tokens"], **common)
    if "prefill" in phases:
        results["prefill"] = run_prefill(client, counter, params["prefill_tokens"], params["prefill_max_tokens"],
                                         context_length=context, **common)
    if "concurrency" in phases:
        results["concurrency"] = run_concurrency(
            client, params["concurrency_streams"], params["concurrency_max_tokens"],
            temperature=params["concurrency_temperature"], thinking_key=params["thinking_key"],
            garble_min_tokens=params["garble_min_tokens"], **common)
    if "needle" in phases:
        results["needle"] = run_needle(client, counter, params["needle_tokens"], count=params["needle_count"],
                                       seed=params["needle_seed"], context_length=context,
                                       thinking_key=params["thinking_key"], **common)
    return results
