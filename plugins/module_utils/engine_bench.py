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

Every timed request is new to the server: each decode run, prefill prompt, depth prompt, needle and
every stream of every concurrency round starts with its own nonce, the random part first
(bench_requests.nonce), so no prompt cache answers it (a repeated decode prompt had 72 of its 74 tokens
cached, and its "TTFT" was no prefill at all; the queued streams of a round that shared one prompt had
all but one token cached); one untimed warm-up request (:func:`warm_up`) goes first, so the first timed
run does not pay for a cold server. Each run keeps the prompt tokens the server says came from its cache
(``cached_tokens``) where the server says it; bench_figures.cache_rows flags a run served mostly from it.
Prefill and concurrency points are repeated like the decode cases; an aggregate is reported only for a
round whose streams all completed.

Phases (``run_*``) take an EngineClient-like object and return plain dicts (JSON-ready). Nothing
here raises on a failed request: failures are recorded in the results with their reason. The
prompts and token counters are in bench_prompts, the statistics and lines in bench_figures, the
options in bench_setup.
"""

from __future__ import annotations

import time

from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_depth import run_depth
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_figures import (
    combine_rounds,
    concurrency_line,
    fmt,
    garble_reason,
    mostly_cached,
    needle_line,
    prefill_line,
    summarize,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_prompts import PROMPTS, prompt_of_tokens
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_requests import (
    nonce,
    one_stream,
    thinking_extra,
    unique,
    warm_up,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_errors import context_refusal
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_needle import Needle
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_stream import together


# --- phases (one request: bench_requests; decode at depth: bench_depth) ---------------------------
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
            r = one_stream(client, unique(prompt, f"{case['name']} run {i + 1}"), max_tokens,
                           case.get("temperature", 0.0), extra, deadline)
            runs.append({
                "ok": r["ok"], "error": r.get("error"), "completion_tokens": r["completion_tokens"],
                "prompt_tokens": r["prompt_tokens"], "cached_tokens": r.get("cached_tokens"),
                "finish_reason": r["finish_reason"],
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
                progress=None, nonce_seed="sparkfold", repeats=1):
    """Prefill ladder: ``repeats`` new prompts of each length (built to the token count), TTFT and prefill tok/s.

    A row's ``ttft_ms``, ``prefill_tok_s`` and ``prompt_tokens`` are the medians of its good runs (what the
    report judges); ``stats`` holds their n, median, mean, min, max, stdev and spread; ``runs`` each run.
    """
    out = []
    for target in lengths:
        row = {"target_tokens": target, "counted_tokens": None, "prompt_tokens": None, "ttft_ms": None,
               "prefill_tok_s": None, "ok": False, "error": None, "skipped": None, "exact": counter.exact,
               "runs": [], "repeats": repeats}
        out.append(row)
        if context_length and target + max_tokens > context_length:
            row["skipped"] = f"{target} + {max_tokens} tokens exceeds the server's context of {context_length}"
            row["stats"] = {key: summarize([]) for key in ("ttft_ms", "prefill_tok_s")}
        else:
            for i in range(repeats):
                run = {"ok": False, "error": None, "counted_tokens": None, "prompt_tokens": None, "ttft_ms": None,
                       "prefill_tok_s": None}
                row["runs"].append(run)
                _prefill(client, counter, target, run, max_tokens, extra_body, deadline, progress,
                         f"{nonce_seed} {target}", f"run {i + 1}/{repeats}")
            _prefill_figures(row)
        if progress:
            progress.finished(prefill_line(row))
    return out


def _prefill_figures(row):
    """The row's figures from its runs: medians of the good runs, their statistics, the first error."""
    good = [run for run in row["runs"] if run["ok"]]
    timed = [run for run in row["runs"] if run["prefill_tok_s"] is not None]  # a TTFT, even if the stream broke later
    row["stats"] = {key: summarize(run[key] for run in timed) for key in ("ttft_ms", "prefill_tok_s")}
    row["ok"] = len(good) == len(row["runs"])
    row["ttft_ms"] = row["stats"]["ttft_ms"]["median"]
    row["prefill_tok_s"] = row["stats"]["prefill_tok_s"]["median"]
    counted = summarize(run["prompt_tokens"] for run in timed or row["runs"])["median"]
    row["prompt_tokens"] = None if counted is None else round(counted)
    row["counted_tokens"] = next((run["counted_tokens"] for run in row["runs"] if run["counted_tokens"]), None)
    row["prompt_tokens_source"] = next((run.get("prompt_tokens_source") for run in timed), None)
    failed = [f"run {i + 1}: {run['error']}" for i, run in enumerate(row["runs"]) if not run["ok"]]
    row["error"] = "; ".join(failed) or None


def _prefill(client, counter, target, row, max_tokens, extra_body, deadline, progress, tag, label):
    """Build a new prompt of ``target`` tokens, send it, and fill ``row`` (one run) with what came back."""
    if progress:
        progress.step("prefill", f"{target} tokens, {label}: building the prompt")
    try:
        text, counted, rounds = prompt_of_tokens(target, counter.count, nonce(f"prefill {tag} {label}"))
    except Exception as exc:
        row["error"] = f"could not build the prompt: {exc}"
        return
    row["counted_tokens"] = counted
    row["count_rounds"] = rounds
    if progress:
        progress.step("prefill", f"{target} tokens, {label}: waiting for the first token")
    try:
        res = client.stream_completion(text, max_tokens, temperature=0.0, extra=dict(extra_body or {}),
                                       deadline=deadline)
    except Exception as exc:
        row["error"] = str(exc)
        return
    row["prompt_tokens"] = res.prompt_tokens if res.prompt_tokens is not None else counted
    row["prompt_tokens_source"] = "server usage" if res.prompt_tokens is not None else counter.method
    row["cached_tokens"] = res.cached_tokens
    if res.ttft_s is None:
        row["error"] = res.error or "no token came back"
    else:
        row["ok"] = res.ok
        row["error"] = res.error
        row["ttft_ms"] = res.ttft_s * 1000.0
        row["prefill_tok_s"] = row["prompt_tokens"] / res.ttft_s if res.ttft_s > 0 else None


def run_concurrency_point(client, streams, prompt, max_tokens, temperature=0.0, extra=None, deadline=None,
                          garble_min_tokens=16, raw=None, tag=""):
    """``streams`` requests started together; aggregate and per-stream figures.

    Every stream sends ``prompt`` behind a nonce of its own (bench_requests.unique, ``tag`` and the stream's
    number in it): with one prompt for all, a stream queued behind the first finds the whole prompt in the
    server's cache and its TTFT holds no prefill. ``prompt_tokens`` and ``cached_tokens`` add up the streams'
    (None when no stream's server said); ``mostly_cached`` counts the streams served mostly from the cache.
    ``raw``: a list to receive each stream's own figures (``one_stream`` dicts), for callers that need them.
    """
    prompts = [unique(prompt, f"{tag + ', ' if tag else ''}stream {i + 1} of {streams}") for i in range(streams)]
    results, t0 = together(streams, lambda i: one_stream(client, prompts[i], max_tokens, temperature, extra,
                                                         deadline))
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
    failed = streams - len(completed)
    told = [r for r in results if r and r.get("prompt_tokens") is not None]
    cached = [r for r in results if r and r.get("cached_tokens") is not None]
    return {
        "streams": streams, "sent": streams, "completed": len(completed),
        "garbled": len(garbled), "garbled_streams": garbled[:10],
        "errors": [{"error": k, "count": v} for k, v in sorted(errors.items())],
        "output_tokens": total_tokens, "wall_s": wall,
        # Tokens / wall of a round in which streams failed is no aggregate of `streams` streams: none.
        "aggregate_tok_s": None if failed else total_tokens / wall,
        "aggregate_note": f"not reported: {failed} of {streams} streams failed" if failed else None,
        "per_stream_tok_s": summarize(r["decode_tok_s"] for r in completed),
        "ttft_ms": summarize(None if r["ttft_s"] is None else r["ttft_s"] * 1000.0 for r in completed),
        "distinct_outputs": len(texts), "max_tokens": max_tokens, "temperature": temperature,
        "prompt_tokens": sum(r["prompt_tokens"] for r in told) if told else None,
        "cached_tokens": sum(r["cached_tokens"] for r in cached) if cached else None,
        "mostly_cached": sum(1 for r in results if r and mostly_cached(r.get("prompt_tokens"), r.get("cached_tokens"))),
    }


def run_concurrency(client, grid, max_tokens, prompt_kind="prose", temperature=0.0, thinking=None,
                    thinking_key="thinking", extra_body=None, deadline=None, progress=None, garble_min_tokens=16,
                    repeats=1):
    """The concurrency grid: one point per stream count, in order, each ``repeats`` rounds.

    Every stream of every round sends a prompt of its own (a nonce first, then the same task), so no stream
    finds another's prompt in the server's cache.
    """
    out = []
    extra = thinking_extra(thinking, thinking_key, extra_body)
    for streams in grid:
        rounds = []
        for i in range(repeats):
            if progress:
                progress.step("concurrency", f"{streams} streams, round {i + 1}/{repeats}")
            raw = []
            point = run_concurrency_point(client, streams, PROMPTS[prompt_kind], max_tokens, temperature, extra,
                                          deadline, garble_min_tokens, raw, tag=f"round {i + 1}")
            point["_decode"] = [r["decode_tok_s"] for r in raw if r and r["ok"]]
            point["_ttft"] = [r["ttft_s"] * 1000.0 for r in raw if r and r["ok"] and r["ttft_s"] is not None]
            rounds.append(point)
        point = combine_rounds(rounds)
        point["prompt"] = prompt_kind
        out.append(point)
        if progress:
            progress.finished(concurrency_line(point))
    return out


def run_needle(client, counter, target_tokens, count=3, depths=None, seed=0, max_tokens=256, context_length=None,
               thinking_key="thinking", extra_body=None, deadline=None, progress=None):
    """The needle test of the smoke checks (engine_needle) at ``target_tokens``, with TTFT.

    The prompt starts with a nonce of its own, so a second run does not find it in the server's cache. A prompt
    that does not fit ``context_length`` with its reply is not sent, and one the server refuses for lack of context
    (engine_errors.context_refusal: its context unknown here, or the chat template's own tokens tipping the prompt
    over) was not answered: either way ``skipped`` says why and ``passed`` is None (not measured, never a FAIL).
    """
    out = {"target_tokens": target_tokens, "prompt_tokens": None, "cached_tokens": None, "counted_tokens": None,
           "token_counter": counter.method, "passed": False, "found": 0, "expected": 0, "detail": None,
           "skipped": None, "ttft_ms": None, "passphrases": [], "reply_head": None}
    if progress:
        progress.step("needle", f"{target_tokens} tokens: building the prompt")
    try:
        needle = Needle(target_tokens, count, depths, seed, prefix=nonce("needle") + "\n")
        out["passphrases"] = needle.passphrases
        out["expected"] = len(needle.passphrases)
        out["depths"] = needle.depths
        try:
            needle.fit(max_tokens, context_length)
        except ValueError as exc:
            out.update(skipped=str(exc), passed=None, found=None)
            if progress:
                progress.finished(needle_line(out))
            return out
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
    out["cached_tokens"] = res.cached_tokens
    out["ttft_ms"] = None if res.ttft_s is None else res.ttft_s * 1000.0
    out["reply_head"] = res.text[:300]
    refused = None if res.ok else context_refusal(res.status, res.body)
    if refused:
        out.update(skipped=f"the server refused the {prompt.tokens}-token prompt for lack of context: {refused}",
                   passed=None, found=None)
    elif not res.ok:
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

    Returns ``{warmup, decode, prefill, depth, concurrency, needle}``: the warm-up request's outcome, a list per
    phase, the needle's dict (None when not run).
    """
    results = {"decode": [], "prefill": [], "depth": [], "concurrency": [], "needle": None}
    common = {"extra_body": params["extra_body"], "deadline": params["request_timeout_s"], "progress": progress}
    results["warmup"] = warm_up(client, **common)
    if progress:
        warm = results["warmup"]
        progress.finished("warm-up: " + ("done" if warm["ok"] else f"failed, {warm['error']}"))
    if "decode" in phases:
        results["decode"] = run_decode(client, params["decode_cases"], params["decode_repeats"],
                                       params["decode_max_tokens"], thinking_key=params["thinking_key"],
                                       garble_min_tokens=params["garble_min_tokens"], **common)
    if "prefill" in phases:
        results["prefill"] = run_prefill(client, counter, params["prefill_tokens"], params["prefill_max_tokens"],
                                         context_length=context, repeats=params["prefill_repeats"], **common)
    if "depth" in phases:
        results["depth"] = run_depth(client, counter, params["depth_tokens"], params["depth_max_tokens"],
                                     limit=params["depth_limit"], context_length=context,
                                     repeats=params["depth_repeats"], thinking_key=params["thinking_key"],
                                     garble_min_tokens=params["garble_min_tokens"], **common)
    if "concurrency" in phases:
        results["concurrency"] = run_concurrency(
            client, params["concurrency_streams"], params["concurrency_max_tokens"],
            temperature=params["concurrency_temperature"], thinking_key=params["thinking_key"],
            garble_min_tokens=params["garble_min_tokens"], repeats=params["concurrency_repeats"], **common)
    if "needle" in phases:
        results["needle"] = run_needle(client, counter, params["needle_tokens"], count=params["needle_count"],
                                       seed=params["needle_seed"], context_length=context,
                                       thinking_key=params["thinking_key"], **common)
    return results
