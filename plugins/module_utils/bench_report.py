# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark results against a recipe's expected figures, and the Markdown report; standard library only.

``metrics(results)`` flattens the raw results of sparkfold.cluster.engine_bench into named figures
(``decode.prose_t0.tok_s``, ``prefill.65536.tok_s``, ``depth.131072.tok_s``, ``concurrency.3.aggregate_tok_s``,
...). A point where any stream failed has no aggregate (it is "not measured"), nor can it be the peak.
``judge(expectations, metrics)`` marks each expected figure within, above or below its tolerance and
flags the side that is worse as a regression. The report itself (Markdown, CSV) is bench_tables'.

Expectations (roles/bench/files/recipes/<recipe>.yml)::

    recipe: dsv41-flash-tp2
    description: ...
    simulated: false
    figures:
      - id: decode_prose
        label: Single-stream decode, prose, T=0, thinking off
        metric: decode.prose_t0.tok_s       # a metric name, or a glob over names ("prefill.*.tok_s")
        range: [4096, 262144]              # with a glob: only names whose "*" part is a number in range
        expected: 80.7
        unit: tok/s
        tolerance_pct: 10                  # or tolerance_abs: 50 (in the unit)
        better: higher                     # or lower: which side of the band is a regression
"""

from __future__ import annotations

import fnmatch

from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_figures import cache_mark

VERDICTS = ("within", "above", "below", "not measured")


# --- metrics ------------------------------------------------------------------------------------
def _put(out, key, value):
    if value is not None:
        out[key] = float(value)


def metrics(results):
    """Named figures of ``results`` (floats); a figure that was not measured is absent."""
    out = {}
    all_ttft = []
    garbled = 0
    for case in results.get("decode") or []:
        _put(out, f"decode.{case['name']}.tok_s", case["decode_tok_s"].get("median"))
        _put(out, f"decode.{case['name']}.ttft_ms", case["ttft_ms"].get("median"))
        for run in case.get("runs") or []:
            if run.get("ok") and run.get("ttft_ms") is not None:
                all_ttft.append(run["ttft_ms"])
            garbled += 1 if run.get("garbled") else 0
    if all_ttft:
        all_ttft.sort()
        mid = len(all_ttft) // 2
        median = all_ttft[mid] if len(all_ttft) % 2 else (all_ttft[mid - 1] + all_ttft[mid]) / 2
        _put(out, "decode.ttft_ms", median)
    if results.get("decode"):
        _put(out, "decode.garbled", garbled)
    for row in results.get("prefill") or []:
        _put(out, f"prefill.{row['target_tokens']}.tok_s", row.get("prefill_tok_s"))
        _put(out, f"prefill.{row['target_tokens']}.ttft_ms", row.get("ttft_ms"))
    for row in results.get("depth") or []:
        _put(out, f"depth.{row['depth_tokens']}.tok_s", (row.get("decode_tok_s") or {}).get("median"))
        _put(out, f"depth.{row['depth_tokens']}.ttft_ms", (row.get("ttft_ms") or {}).get("median"))
    points = results.get("concurrency") or []
    for point in points:
        n = point["streams"]
        if point["completed"] == point["sent"]:  # a failed stream leaves no aggregate to judge
            _put(out, f"concurrency.{n}.aggregate_tok_s", point.get("aggregate_tok_s"))
        _put(out, f"concurrency.{n}.per_stream_tok_s", (point.get("per_stream_tok_s") or {}).get("median"))
        _put(out, f"concurrency.{n}.ttft_ms", (point.get("ttft_ms") or {}).get("median"))
        _put(out, f"concurrency.{n}.completed_pct",
             100.0 * point["completed"] / point["sent"] if point["sent"] else None)
        _put(out, f"concurrency.{n}.garbled", point.get("garbled"))
    if points:
        largest = max(points, key=lambda pt: pt["streams"])
        _put(out, "concurrency.max.streams", largest["streams"])
        _put(out, "concurrency.max.completed_pct",
             100.0 * largest["completed"] / largest["sent"] if largest["sent"] else None)
        _put(out, "concurrency.all.garbled", sum(pt.get("garbled") or 0 for pt in points))
        _put(out, "concurrency.all.completed_pct",
             100.0 * sum(pt["completed"] for pt in points) / max(sum(pt["sent"] for pt in points), 1))
        whole = [pt for pt in points if pt["completed"] == pt["sent"] and pt.get("aggregate_tok_s") is not None]
        if whole:
            peak = max(whole, key=lambda pt: pt["aggregate_tok_s"])
            _put(out, "concurrency.peak.aggregate_tok_s", peak["aggregate_tok_s"])
            _put(out, "concurrency.peak.streams", peak["streams"])
    needle = results.get("needle")
    if needle and not needle.get("skipped"):  # a needle not sent is not measured, not failed
        _put(out, "needle.passed", 1.0 if needle.get("passed") else 0.0)
        if needle.get("expected"):
            _put(out, "needle.found_pct", 100.0 * needle.get("found", 0) / needle["expected"])
    return out


def unmeasured(results):
    """Why a figure of ``results`` was not measured: {metric name: reason} for the skipped prefill lengths and depths,
    the needle that was not sent, and the concurrency points without an aggregate."""
    out = {}
    for row in results.get("prefill") or []:
        why = ("skipped: " + row["skipped"]) if row.get("skipped") else (
            ("failed: " + row["error"]) if row.get("prefill_tok_s") is None and row.get("error") else None)
        if why:
            out[f"prefill.{row['target_tokens']}.tok_s"] = out[f"prefill.{row['target_tokens']}.ttft_ms"] = why
    for row in results.get("depth") or []:
        if row.get("skipped"):
            out[f"depth.{row['depth_tokens']}.tok_s"] = out[f"depth.{row['depth_tokens']}.ttft_ms"] = \
                "skipped: " + row["skipped"]
    for point in results.get("concurrency") or []:
        if point.get("aggregate_note") and (point.get("aggregate_tok_s") is None
                                            or point["completed"] != point["sent"]):
            out[f"concurrency.{point['streams']}.aggregate_tok_s"] = point["aggregate_note"]
    needle = results.get("needle")
    if needle and needle.get("skipped"):
        out["needle.passed"] = out["needle.found_pct"] = "skipped: " + needle["skipped"]
    return out


def cached(results):
    """Which figures of ``results`` rest on runs served mostly from the prompt cache (bench_figures.mostly_cached):
    {metric name: "served mostly from the prompt cache: 1 of 3 runs"}. Their TTFT and prefill hold little or no
    prefill, so the verdict on them says so (:func:`judge`)."""
    out = {}
    decode_runs = []
    for case in results.get("decode") or []:
        decode_runs += case.get("runs") or []
        mark = cache_mark(case.get("runs"))
        if mark:
            out[f"decode.{case['name']}.tok_s"] = out[f"decode.{case['name']}.ttft_ms"] = mark
    mark = cache_mark(decode_runs)
    if mark:
        out["decode.ttft_ms"] = mark
    for row in results.get("prefill") or []:
        mark = cache_mark(row.get("runs"))
        if mark:
            out[f"prefill.{row['target_tokens']}.tok_s"] = out[f"prefill.{row['target_tokens']}.ttft_ms"] = mark
    for row in results.get("depth") or []:
        mark = cache_mark(row.get("runs"))
        if mark:
            out[f"depth.{row['depth_tokens']}.tok_s"] = out[f"depth.{row['depth_tokens']}.ttft_ms"] = mark
    peak = metrics(results).get("concurrency.peak.streams")
    for point in results.get("concurrency") or []:
        mark = cache_mark(point.get("rounds") or [point], "rounds")
        if mark:
            for key in ("aggregate_tok_s", "per_stream_tok_s", "ttft_ms"):
                out[f"concurrency.{point['streams']}.{key}"] = mark
            if peak == point["streams"]:
                out["concurrency.peak.aggregate_tok_s"] = mark
    needle = results.get("needle")
    if needle and not needle.get("skipped"):
        mark = cache_mark([needle], "requests")
        if mark:
            out["needle.passed"] = out["needle.found_pct"] = mark
    return out


# --- judging ------------------------------------------------------------------------------------
def check_expectations(expectations):
    """Problems of an expectations document (a list of strings; empty when it can be used)."""
    problems = []
    if not isinstance(expectations, dict):
        return ["the expectations are not a mapping"]
    figures = expectations.get("figures")
    if not isinstance(figures, list):
        return ["the expectations have no 'figures' list"]
    seen = set()
    for i, fig in enumerate(figures):
        where = f"figure {i + 1} ({fig.get('id', '?') if isinstance(fig, dict) else '?'})"
        if not isinstance(fig, dict):
            problems.append(f"{where} is not a mapping")
            continue
        for key in ("id", "metric", "expected"):
            if key not in fig:
                problems.append(f"{where} has no {key}")
        if fig.get("id") in seen:
            problems.append(f"{where}: the id is used twice")
        seen.add(fig.get("id"))
        if "expected" in fig and not isinstance(fig["expected"], (int, float)):
            problems.append(f"{where}: expected must be a number, got {fig['expected']!r}")
        if ("tolerance_pct" in fig) == ("tolerance_abs" in fig):
            problems.append(f"{where} needs exactly one of tolerance_pct and tolerance_abs")
        if fig.get("better", "higher") not in ("higher", "lower"):
            problems.append(f"{where}: better must be higher or lower, got {fig.get('better')!r}")
        rng = fig.get("range")
        if rng is not None and (not isinstance(rng, list) or len(rng) != 2):
            problems.append(f"{where}: range must be [low, high]")
    return problems


def band(fig):
    """(low, high, text) of a figure's tolerance band."""
    expected = float(fig["expected"])
    if "tolerance_pct" in fig:
        pct = float(fig["tolerance_pct"])
        delta = abs(expected) * pct / 100.0
        return expected - delta, expected + delta, f"±{pct:g}%"
    delta = float(fig["tolerance_abs"])
    return expected - delta, expected + delta, f"±{delta:g} {fig.get('unit', '')}".rstrip()


def matches(fig, names):
    """The metric names of ``names`` that figure ``fig`` judges (its metric, or its glob within its range)."""
    pattern = fig["metric"]
    if "*" not in pattern:
        return [pattern]
    found = sorted((n for n in names if fnmatch.fnmatchcase(n, pattern)), key=_natural)
    rng = fig.get("range")
    if rng is None:
        return found
    star = pattern.split(".").index("*") if "*" in pattern.split(".") else None
    kept = []
    for name in found:
        parts = name.split(".")
        try:
            value = float(parts[star])
        except (TypeError, ValueError, IndexError):
            continue
        if rng[0] <= value <= rng[1]:
            kept.append(name)
    return kept


def _star(pattern, name):
    """What the ``*`` of ``pattern`` stands for in ``name``: (``prefill.*.tok_s``, ``prefill.4096.tok_s``) -> 4096."""
    pat, parts = pattern.split("."), name.split(".")
    if len(pat) != len(parts):
        return name
    return ".".join(part for p, part in zip(pat, parts) if p != part) or name


def _natural(name):
    return [int(p) if p.isdigit() else 0 for p in name.split(".")], name


def judge(expectations, measured, reasons=None, cache=None):
    """One verdict per expected figure and matching metric.

    A verdict: ``id``, ``label``, ``metric``, ``measured`` (None when not measured), ``expected``,
    ``unit``, ``low``, ``high``, ``tolerance`` (text), ``better``, ``verdict`` (within / above / below /
    not measured), ``regression`` (True when the verdict is on the worse side), ``reason`` (why it was not
    measured, from ``reasons``: :func:`unmeasured`; None when it was, or nobody said) and ``cached`` (that the
    figure rests on runs served mostly from the prompt cache, from ``cache``: :func:`cached`; None otherwise).
    """
    reasons = reasons or {}
    cache = cache or {}
    verdicts = []
    for fig in expectations.get("figures") or []:
        low, high, text = band(fig)
        better = fig.get("better", "higher")
        names = matches(fig, measured) or [fig["metric"]]
        for name in names:
            value = measured.get(name)
            if value is None:
                verdict = "not measured"
            elif value < low:
                verdict = "below"
            elif value > high:
                verdict = "above"
            else:
                verdict = "within"
            label = fig.get("label") or fig["id"]
            if name != fig["metric"]:
                label = f"{label} [{_star(fig['metric'], name)}]"
            verdicts.append({
                "id": fig["id"], "label": label, "metric": name, "measured": value,
                "expected": float(fig["expected"]), "unit": fig.get("unit", ""), "low": low, "high": high,
                "tolerance": text, "better": better, "verdict": verdict,
                "regression": (verdict == "below" and better == "higher") or (verdict == "above" and better == "lower"),
                "note": fig.get("note", ""),
                "reason": reasons.get(name) if value is None else None,
                "cached": cache.get(name) if value is not None else None,
            })
    return verdicts


def regressions(verdicts):
    """One line per regression: what, measured, expected and band."""
    lines = []
    for v in verdicts:
        if not v["regression"]:
            continue
        side, edge = ("below", v["low"]) if v["better"] == "higher" else ("above", v["high"])
        lines.append(f"{v['label']}: measured {fmt(v['measured'])} {v['unit']}, expected {fmt(v['expected'])} "
                     f"{v['unit']} {v['tolerance']} ({side} {fmt(edge)})")
    return lines


# --- Markdown -----------------------------------------------------------------------------------
def fmt(value, digits=1):
    """A figure for the report: whole numbers without decimals, >= 100 rounded, else ``digits`` decimals."""
    if value is None:
        return "-"
    if float(value).is_integer() or abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.{digits}f}"


def verdict_lines(verdicts):
    """Short fixed-width lines of the verdicts, for the console."""
    lines = []
    for v in verdicts:
        flag = " REGRESSION" if v["regression"] else (f" ({v['reason']})" if v.get("reason") else "")
        if v.get("cached"):
            flag += f" ({v['cached']})"
        lines.append(f"{v['verdict']:<12} {v['label']}: {fmt(v['measured'])} {v['unit']} "
                     f"(expected {fmt(v['expected'])} {v['tolerance']}){flag}")
    return lines
