# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The figures of sparkfold.cluster.engine_bench, standard library only: statistics, the garble check,
and the lines that tell the results (progress lines and the module's summary alike).

- a stream is garbled when its output is empty or a repeated token (one token, or a cycle of up to
  four, repeated to the end; or one token making up at least half of the output);
- spread = (max - min) / median, in % of the median.
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


def prefill_line(row):
    """One prefill row (``run_prefill``) in words."""
    if row.get("skipped"):
        return f"prefill {row['target_tokens']}: skipped, {row['skipped']}"
    if row.get("prefill_tok_s") is None:
        return f"prefill {row['target_tokens']}: failed, {row.get('error')}"
    return (f"prefill {row['target_tokens']}: {row['prompt_tokens']} tokens, TTFT {fmt(row['ttft_ms'], 0)} ms, "
            f"{fmt(row['prefill_tok_s'])} tok/s")


def concurrency_line(point):
    """One point of the concurrency grid (``run_concurrency_point``) in words."""
    return (f"{point['streams']} streams: {point['completed']}/{point['sent']} completed, "
            f"{point['garbled']} garbled, aggregate {fmt(point['aggregate_tok_s'])} tok/s, per stream "
            f"{fmt(point['per_stream_tok_s']['median'])} tok/s")


def needle_line(needle):
    """The needle result (``run_needle``) in words."""
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
    lines.extend(concurrency_line(point) for point in results.get("concurrency") or [])
    if results.get("needle"):
        lines.append(needle_line(results["needle"]))
    return lines
