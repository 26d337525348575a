# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The figures of sparkfold.cluster.engine_bench, standard library only: statistics, the garble check,
and the lines that tell the results (progress lines and the module's summary alike).

- a stream is garbled when its output is empty or a repeated token (one token, or a cycle of up to
  four, repeated to the end; or one token making up at least half of the output);
- spread = (max - min) / median, in % of the median;
- a run is served mostly from the prompt cache when the server says more than half of its prompt tokens
  came from its cache (:func:`mostly_cached`; :func:`cache_rows` lists every run that says).
"""

from __future__ import annotations

import math
import statistics


# --- statistics ---------------------------------------------------------------------------------
def summarize(values):
    """n, median, mean, min, max, stdev and spread (% of the median, (max - min) / median) of numbers.

    None values are dropped; with no values left every figure is None (n is 0).
    """
    data = sorted(float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not data:
        return {"n": 0, "median": None, "mean": None, "min": None, "max": None, "stdev": None, "spread_pct": None}
    median = statistics.median(data)
    return {
        "n": len(data),
        "median": median,
        "mean": statistics.fmean(data),
        "min": data[0],
        "max": data[-1],
        "stdev": statistics.stdev(data) if len(data) > 1 else 0.0,
        "spread_pct": (100.0 * (data[-1] - data[0]) / median) if median else None,
    }


def combine_rounds(rounds):
    """One point of the grid from its repeated rounds (``run_concurrency_point`` dicts, same stream count).

    Counts add up; ``aggregate_tok_s`` is the median over the rounds whose streams all completed (None
    when none did, and ``aggregate_note`` says so whenever a round failed), with its statistics in
    ``stats``; ``per_stream_tok_s`` and ``ttft_ms`` are over every completed stream of every round.
    """
    first = rounds[0]
    complete = [r["aggregate_tok_s"] for r in rounds if r["aggregate_tok_s"] is not None]
    notes = [f"round {i + 1}: {r['aggregate_note']}" for i, r in enumerate(rounds) if r.get("aggregate_note")]
    errors = {}
    for r in rounds:
        for e in r["errors"]:
            errors[e["error"]] = errors.get(e["error"], 0) + e["count"]
    stats = summarize(complete)
    note = None
    if notes:
        note = ("not reported" if not complete else f"from {len(complete)} of {len(rounds)} rounds") + \
            "; " + "; ".join(notes)
    return {
        "streams": first["streams"], "repeats": len(rounds),
        "sent": sum(r["sent"] for r in rounds), "completed": sum(r["completed"] for r in rounds),
        "garbled": sum(r["garbled"] for r in rounds),
        "garbled_streams": [g for r in rounds for g in r["garbled_streams"]][:10],
        "errors": [{"error": k, "count": v} for k, v in sorted(errors.items())],
        "output_tokens": sum(r["output_tokens"] for r in rounds),
        "wall_s": summarize(r["wall_s"] for r in rounds)["median"],
        "aggregate_tok_s": stats["median"], "aggregate_note": note, "stats": {"aggregate_tok_s": stats},
        "per_stream_tok_s": summarize(v for r in rounds for v in r["_decode"]),
        "ttft_ms": summarize(v for r in rounds for v in r["_ttft"]),
        "distinct_outputs": max(r["distinct_outputs"] for r in rounds),
        "prompt_tokens": _total(r.get("prompt_tokens") for r in rounds),
        "cached_tokens": _total(r.get("cached_tokens") for r in rounds),
        "mostly_cached": sum(r.get("mostly_cached") or 0 for r in rounds),
        "max_tokens": first["max_tokens"], "temperature": first["temperature"],
        "rounds": [{k: v for k, v in r.items() if not k.startswith("_") and k not in ("max_tokens", "temperature")}
                   for r in rounds],
    }


def _total(values):
    """The sum of the numbers of ``values``; None when there is none."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


# --- prompt cache -------------------------------------------------------------------------------
def mostly_cached(prompt_tokens, cached_tokens):
    """True when the server said more than half of ``prompt_tokens`` came from its prompt cache."""
    return bool(prompt_tokens) and cached_tokens is not None and 2 * cached_tokens > prompt_tokens


def cache_note(prompt_tokens, cached_tokens, streams=None, flagged=None):
    """"served mostly from the prompt cache: 70 of 74 prompt tokens cached" for a run that was (a concurrency
    round: ``flagged`` of its ``streams`` streams were, and the note says how many); None otherwise."""
    if streams is not None:
        if not flagged:
            return None
        return (f"served mostly from the prompt cache: {cached_tokens} of {prompt_tokens} prompt tokens cached "
                f"({flagged} of {streams} streams)")
    if not mostly_cached(prompt_tokens, cached_tokens):
        return None
    return f"served mostly from the prompt cache: {cached_tokens} of {prompt_tokens} prompt tokens cached"


def cache_mark(runs, noun="runs"):
    """"served mostly from the prompt cache: 1 of 3 runs" for the ``runs`` (run dicts, or a concurrency point's rounds
    with ``noun`` "rounds": a round counts when any of its streams was) of one row; None when none was."""
    runs = list(runs or [])
    if noun == "rounds":
        flagged = [r for r in runs if r.get("mostly_cached")]
        if not flagged:
            return None
        streams = sum(r.get("mostly_cached") or 0 for r in runs)
        sent = sum(r.get("sent") or 0 for r in runs)
        return (f"served mostly from the prompt cache: {len(flagged)} of {len(runs)} rounds "
                f"({streams} of {sent} streams)")
    flagged = [r for r in runs if mostly_cached(r.get("prompt_tokens"), r.get("cached_tokens"))]
    if not flagged:
        return None
    return f"served mostly from the prompt cache: {len(flagged)} of {len(runs)} {noun}"


def cache_rows(results):
    """Every timed run of ``results`` whose server said how many prompt tokens came from its cache, in phase order:
    dicts with ``row`` (``decode prose_t0 run 1``, ``concurrency 4 streams round 2``), ``phase``, ``prompt_tokens``,
    ``cached_tokens``, ``requests`` (a concurrency round's streams) and ``flagged`` (served mostly from the cache:
    a run more than half, a round any stream)."""
    out = []

    def add(row, phase, run, requests=1, flagged=None):
        if run.get("cached_tokens") is None:
            return
        if flagged is None:
            flagged = mostly_cached(run.get("prompt_tokens"), run["cached_tokens"])
        out.append({"row": row, "phase": phase, "prompt_tokens": run.get("prompt_tokens"),
                    "cached_tokens": run["cached_tokens"], "requests": requests, "flagged": bool(flagged)})

    for case in results.get("decode") or []:
        for i, run in enumerate(case.get("runs") or []):
            add(f"decode {case['name']} run {i + 1}", "decode", run)
    for row in results.get("prefill") or []:
        for i, run in enumerate(row.get("runs") or []):
            add(f"prefill {row['target_tokens']} run {i + 1}", "prefill", run)
    for row in results.get("depth") or []:
        for i, run in enumerate(row.get("runs") or []):
            add(f"depth {row['depth_tokens']} run {i + 1}", "depth", run)
    for point in results.get("concurrency") or []:
        for i, rnd in enumerate(point.get("rounds") or []):
            add(f"concurrency {point['streams']} streams round {i + 1}", "concurrency", rnd, rnd.get("sent") or 1,
                rnd.get("mostly_cached") or 0)
    needle = results.get("needle")
    if needle:
        add(f"needle {needle['target_tokens']}", "needle", needle)
    return out


def cache_line(results):
    """The prompt cache in one line (None when the server never said what came from it)."""
    rows = cache_rows(results)
    if not rows:
        return None
    flagged = [r["row"] for r in rows if r["flagged"]]
    if flagged:
        more = f"; and {len(flagged) - 5} more" if len(flagged) > 5 else ""
        return (f"prompt cache: {len(flagged)} row(s) served mostly from the cache ({'; '.join(flagged[:5])}{more})")
    prompt = sum(r["prompt_tokens"] or 0 for r in rows)
    cached = sum(r["cached_tokens"] for r in rows)
    return (f"prompt cache: {cached} of {prompt} prompt tokens cached over {sum(r['requests'] for r in rows)} "
            "requests; no row served mostly from the cache")


# --- garble check -------------------------------------------------------------------------------
def garble_reason(text, min_tokens=16):
    """Why an output counts as garbled, or None when it does not.

    Empty (nothing but whitespace) is garbled. With at least ``min_tokens`` whitespace-separated
    tokens, so is an output whose last ``min_tokens`` tokens are one token or a short cycle (period
    up to 4) repeated, or in which one token makes up half or more of all tokens.
    """
    if not text or not text.strip():
        return "empty output"
    tokens = text.split()
    if len(tokens) < min_tokens:
        return None
    tail = tokens[-min_tokens:]
    for period in range(1, 5):
        if all(tail[i] == tail[i % period] for i in range(len(tail))) and len(set(tail[:period])) == period:
            if period == 1:
                return f"repeated token {tail[0][:40]!r} at the end ({min_tokens}+ times in a row)"
            return f"repeated cycle {' '.join(tail[:period])[:60]!r} at the end"
    counts = {}
    for token in tokens:
        counts[token] = counts.get(token, 0) + 1
    token, count = max(counts.items(), key=lambda item: item[1])
    if count * 2 >= len(tokens):
        return f"token {token[:40]!r} is {count} of {len(tokens)} tokens"
    return None


def fmt(value, digits=1):
    """``value`` with ``digits`` decimals; "-" for None."""
    return "-" if value is None else f"{value:.{digits}f}"


def _runs(stats, total, noun="runs"):
    """" (3 of 3 runs, spread 1.2%)" of a summary over ``total`` runs (or rounds); "" for a single one."""
    if total <= 1 or not stats:
        return ""
    spread = "" if stats.get("spread_pct") is None else f", spread {stats['spread_pct']:.1f}%"
    return f" ({stats['n']} of {total} {noun}{spread})"


def prefill_line(row):
    """One prefill row (``run_prefill``) in words."""
    if row.get("skipped"):
        return f"prefill {row['target_tokens']}: skipped, {row['skipped']}"
    if row.get("prefill_tok_s") is None:
        return f"prefill {row['target_tokens']}: failed, {row.get('error')}"
    runs = _runs((row.get("stats") or {}).get("prefill_tok_s"), len(row.get("runs") or []))
    return (f"prefill {row['target_tokens']}: {row['prompt_tokens']} tokens, TTFT {fmt(row['ttft_ms'], 0)} ms, "
            f"{fmt(row['prefill_tok_s'])} tok/s{runs}")


def depth_line(row):
    """One depth row in words (progress line and summary)."""
    if row.get("skipped"):
        return f"depth {row['depth_tokens']}: skipped, {row['skipped']}"
    d = row["decode_tok_s"]
    if d["median"] is None:
        return f"depth {row['depth_tokens']}: failed, {row.get('error')}"
    return (f"depth {row['depth_tokens']}: decode {fmt(d['median'])} tok/s ({d['n']} of {len(row['runs'])} runs), "
            f"TTFT {fmt(row['ttft_ms']['median'], 0)} ms")


def concurrency_line(point):
    """One point of the concurrency grid (``run_concurrency``, or one round of it) in words."""
    if point.get("aggregate_tok_s") is None:
        aggregate = f"aggregate {point.get('aggregate_note') or 'not measured'}"
    else:
        aggregate = f"aggregate {fmt(point['aggregate_tok_s'])} tok/s"
        if point.get("aggregate_note"):
            aggregate += f" ({point['aggregate_note']})"
        aggregate += _runs((point.get("stats") or {}).get("aggregate_tok_s"), point.get("repeats") or 1, "rounds")
    return (f"{point['streams']} streams: {point['completed']}/{point['sent']} completed, "
            f"{point['garbled']} garbled, {aggregate}, per stream {fmt(point['per_stream_tok_s']['median'])} tok/s")


def needle_line(needle):
    """The needle result (``run_needle``) in words."""
    if needle.get("skipped"):
        return f"needle {needle['target_tokens']}: not measured, skipped: {needle['skipped']}"
    return f"needle {needle['target_tokens']}: {'PASS' if needle['passed'] else 'FAIL'}, {needle['detail']}"


def summary_lines(results):
    """One line per measurement of ``results`` (the module's RV(measurements))."""
    lines = []
    for case in results.get("decode") or []:
        d, t = case["decode_tok_s"], case["ttft_ms"]
        spread = "" if d["spread_pct"] is None else f", spread {d['spread_pct']:.1f}%"
        lines.append(f"decode {case['name']}: median {fmt(d['median'])} tok/s ({d['n']} of {len(case['runs'])} runs"
                     f"{spread}), TTFT {fmt(t['median'], 0)} ms")
    lines.extend(prefill_line(row) for row in results.get("prefill") or [])
    lines.extend(depth_line(row) for row in results.get("depth") or [])
    lines.extend(concurrency_line(point) for point in results.get("concurrency") or [])
    if results.get("needle"):
        lines.append(needle_line(results["needle"]))
    cache = cache_line(results)
    if cache:
        lines.append(cache)
    return lines
