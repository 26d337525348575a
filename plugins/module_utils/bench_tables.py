# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark's results as people read them, standard library only: the Markdown report
(``render_markdown``) and a CSV of every measured run for spreadsheets (``results_csv``).
"""

from __future__ import annotations

import csv
import io

from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_figures import cache_mark, cache_note, cache_rows
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_report import VERDICTS, fmt


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _i in header) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in row) + " |" for row in rows]
    lines.append("")
    return lines


def _runs_ok(row):
    """"2/3": runs with a figure of all runs of a prefill or depth row; "-" for a skipped one."""
    if row.get("skipped") or not row.get("runs"):
        return "-"
    key = "prefill_tok_s" if "target_tokens" in row else "decode_tok_s"
    return f"{sum(1 for run in row['runs'] if run.get(key) is not None)}/{len(row['runs'])}"


def _range(stats):
    """["min - max", "spread"] of a summary (bench_figures.summarize); dashes without one."""
    if not stats or stats.get("median") is None:
        return ["-", "-"]
    spread = "-" if stats.get("spread_pct") is None else f"{stats['spread_pct']:.1f}%"
    return [f"{fmt(stats['min'])} - {fmt(stats['max'])}", spread]


def _aggregate(point):
    """A point's aggregate, never a figure from a round with a failed stream without saying so."""
    value = point.get("aggregate_tok_s")
    if point["completed"] != point["sent"] and not point.get("aggregate_note"):
        return f"- (not reported: {point['sent'] - point['completed']} of {point['sent']} streams failed)"
    if value is None:
        return f"- ({point['aggregate_note']})" if point.get("aggregate_note") else "-"
    return fmt(value) + (f" ({point['aggregate_note']})" if point.get("aggregate_note") else "")


def _mark(verdict):
    cached = f" (**{verdict['cached']}**)" if verdict.get("cached") else ""
    if verdict["regression"]:
        return f"**{verdict['verdict']}** (regression){cached}"
    if verdict.get("reason"):
        return f"{verdict['verdict']} ({verdict['reason']})"
    return verdict["verdict"] + cached


def _cache_line(marks):
    """A line under a phase table naming its rows served mostly from the prompt cache ([] when none was)."""
    marks = [(name, mark) for name, mark in marks if mark]
    if not marks:
        return []
    return ["Served mostly from the prompt cache (their TTFT holds little or no prefill): "
            + "; ".join(f"{name}, {mark.split(': ', 1)[1]}" for name, mark in marks), ""]


def _pct(part, whole):
    return f"{100.0 * part / whole:.0f}%" if whole else "-"


def _cache_section(results):
    """The prompt cache: what the server said came from it, per phase, and each run served mostly from it."""
    rows = cache_rows(results)
    out = ["## Prompt cache", ""]
    if not rows:
        return [*out, "The server did not say how many prompt tokens came from its cache (no "
                      "`usage.prompt_tokens_details.cached_tokens`, no `timings.cache_n`), so this run cannot show "
                      "that none did. Every prompt starts with a nonce of its own, so none should have.", ""]
    out += ["Prompt tokens the server took from its prompt cache (`usage.prompt_tokens_details.cached_tokens`, "
            "llama.cpp's `timings.cache_n`). Every prompt starts with a nonce of its own, so only the chat "
            "template's first tokens should be found there.", ""]
    phases = []
    for r in rows:
        if r["phase"] not in phases:
            phases.append(r["phase"])
    table = []
    for phase in phases:
        mine = [r for r in rows if r["phase"] == phase]
        prompt = sum(r["prompt_tokens"] or 0 for r in mine)
        cached = sum(r["cached_tokens"] for r in mine)
        table.append([phase, sum(r["requests"] for r in mine), prompt, cached, _pct(cached, prompt),
                      sum(1 for r in mine if r["flagged"])])
    out += _table(["phase", "requests", "prompt tokens", "cached tokens", "cached", "rows mostly from cache"], table)
    flagged = [r for r in rows if r["flagged"]]
    if not flagged:
        return [*out, "No row was served mostly from the cache.", ""]
    out += [f"**{len(flagged)} row(s) served mostly from the cache** (more than half of the prompt tokens; a "
            "concurrency round when any of its streams was): their TTFT and prefill figures hold little or no "
            "prefill.", ""]
    return out + _table(["row", "prompt tokens", "cached tokens", "cached"], [
        [r["row"], r["prompt_tokens"], r["cached_tokens"], _pct(r["cached_tokens"], r["prompt_tokens"])]
        for r in flagged])


def _stamp_value(value):
    if value in (None, "", [], {}):
        return "not available"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items() if v not in (None, "", [], {})) or "not available"
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value)


def render_markdown(results, stamp, expectations, verdicts, plots):
    """The report: stamp, verdicts against the recipe, one table per phase, the plots, definitions."""
    stamp = stamp or {}
    expectations = expectations or {}
    recipe = stamp.get("recipe") or expectations.get("recipe") or "unknown recipe"
    simulated = bool(stamp.get("simulated", expectations.get("simulated")))
    out = [f"# Benchmark: {recipe}", ""]
    if simulated:
        out += ["> **SIMULATED numbers.** This run measured the lab engine (lab/engine), a simulator that streams at",
                "> the rates it is configured with. The figures show that the benchmark measures correctly; they say",
                "> nothing about a DGX Spark pair.", ""]
    engine = stamp.get("engine") or {}
    weights = stamp.get("weights") or {}
    counter = results.get("token_counter") or {}
    patches = ", ".join(str(f).rsplit("/", 1)[-1] for f in engine.get("patch_files") or []) or None
    rows = [
        ["recipe", f"{recipe}" + (f" ({expectations['description']})" if expectations.get("description") else "")],
        ["engine", _stamp_value({"commit": engine.get("commit"), "build-id": engine.get("build_id"),
                                 "patches": patches,
                                 "built": engine.get("built_at")}) if engine else "not available"],
        ["weights", f"{weights.get('repo_id')}@{weights['commit']}" if weights.get("commit") else "not available"],
        ["clocks", _stamp_value(stamp.get("clocks"))],
        ["host", _stamp_value(stamp.get("host"))],
        ["endpoint", f"{results.get('url', '-')} model {results.get('model', '-')}"
                     + (f", context {results['context_length']}" if results.get("context_length") else "")],
        ["date", _stamp_value(stamp.get("date") or results.get("started_at"))],
        ["duration", f"{fmt(results.get('duration_s'), 0)} s"],
        ["prompt lengths counted with", _stamp_value(counter.get("label"))
         + (f" ({'; '.join(counter['notes'])})" if counter.get("notes") else "")],
    ]
    out += _table(["", ""], rows)

    out += ["## Against the recipe", ""]
    if verdicts:
        counts = {k: sum(1 for v in verdicts if v["verdict"] == k) for k in VERDICTS}
        n_reg = sum(1 for v in verdicts if v["regression"])
        n_cached = sum(1 for v in verdicts if v.get("cached"))
        cached = f"; {n_cached} figure(s) on runs served mostly from the prompt cache" if n_cached else ""
        out += [f"{counts['within']} within, {counts['above']} above, {counts['below']} below, "
                f"{counts['not measured']} not measured; {n_reg} regression(s){cached}.", ""]
        out += _table(["figure", "measured", "expected", "tolerance", "verdict"], [
            [v["label"], f"{fmt(v['measured'])} {v['unit']}".strip() if v["measured"] is not None else "-",
             f"{fmt(v['expected'])} {v['unit']}".strip(), v["tolerance"], _mark(v)] for v in verdicts
        ])
    else:
        out += ["No expected figures for this recipe.", ""]

    if results.get("decode"):
        out += ["## Single-stream decode", ""]
        out += _table(["case", "prompt", "T", "thinking", "runs ok", "decode tok/s (median)", "min - max",
                       "spread", "TTFT ms (median)"], [
            [c["name"], c["prompt"], f"{c['temperature']:g}", {True: "on", False: "off"}.get(c.get("thinking"), "-"),
             f"{c['ok']}/{len(c['runs'])}", fmt(c["decode_tok_s"]["median"]),
             f"{fmt(c['decode_tok_s']['min'])} - {fmt(c['decode_tok_s']['max'])}",
             "-" if c["decode_tok_s"]["spread_pct"] is None else f"{c['decode_tok_s']['spread_pct']:.1f}%",
             fmt(c["ttft_ms"]["median"], 0)] for c in results["decode"]
        ])
        problems = [f"{c['name']} run {i + 1}: {r.get('error') or r.get('garbled')}"
                    for c in results["decode"] for i, r in enumerate(c["runs"]) if not r["ok"] or r.get("garbled")]
        if problems:
            out += ["Failed or garbled runs: " + "; ".join(problems), ""]
        out += _cache_line((c["name"], cache_mark(c["runs"])) for c in results["decode"])

    if results.get("prefill"):
        out += ["## Prefill ladder", ""]
        out += _table(["context (asked)", "prompt tokens", "runs ok", "TTFT s (median)", "prefill tok/s (median)",
                       "min - max", "spread", "note"], [
            [r["target_tokens"], r.get("prompt_tokens") or "-", _runs_ok(r),
             "-" if r.get("ttft_ms") is None else f"{r['ttft_ms'] / 1000:.3f}", fmt(r.get("prefill_tok_s")),
             *_range((r.get("stats") or {}).get("prefill_tok_s")),
             r.get("skipped") or _note(r.get("error"), cache_mark(r.get("runs")),
                                       None if r.get("exact", True) else "length estimated") or ""]
            for r in results["prefill"]
        ])

    if results.get("depth"):
        out += ["## Decode at depth", "",
                "Decode speed with that many tokens of history already in the context (one chat stream, T=0, "
                "thinking off); its TTFT is the prefill of the whole history.", ""]
        out += _table(["depth (tokens)", "prompt tokens", "runs ok", "decode tok/s (median)", "min - max", "spread",
                       "TTFT s (median)", "note"], [
            [r["depth_tokens"], r.get("prompt_tokens") or "-", _runs_ok(r), fmt(r["decode_tok_s"]["median"]),
             *_range(r["decode_tok_s"]),
             "-" if r["ttft_ms"]["median"] is None else f"{r['ttft_ms']['median'] / 1000:.3f}",
             ("skipped: " + r["skipped"]) if r.get("skipped") else (_note(r.get("error"), cache_mark(r["runs"])) or "")]
            for r in results["depth"]
        ])

    if results.get("concurrency"):
        out += ["## Concurrency", ""]
        out += _table(["streams", "completed/sent", "garbled", "aggregate tok/s", "aggregate min - max", "spread",
                       "per-stream tok/s (median)", "TTFT ms (median / max)", "wall s", "errors"], [
            [pt["streams"], f"{pt['completed']}/{pt['sent']}", pt["garbled"], _aggregate(pt),
             *_range((pt.get("stats") or {}).get("aggregate_tok_s")), fmt(pt["per_stream_tok_s"]["median"]),
             f"{fmt(pt['ttft_ms']['median'], 0)} / {fmt(pt['ttft_ms']['max'], 0)}", f"{pt['wall_s']:.2f}",
             "; ".join(f"{e['count']}x {e['error']}" for e in pt.get("errors") or []) or "-"]
            for pt in results["concurrency"]
        ])
        out += _cache_line((f"{pt['streams']} streams", cache_mark(pt.get("rounds") or [pt], "rounds"))
                           for pt in results["concurrency"])
        out += ["Aggregate = all output tokens / wall time from the first request sent to the last stream done, "
                "so it includes a TTFT: at 1 stream it reads below the per-stream decode speed, which is timed "
                "from the first token to the last. A round in which any stream failed has no aggregate.", ""]

    needle = results.get("needle")
    if needle and needle.get("skipped"):
        out += ["## Needle", ""]
        out += _table(["context (asked)", "prompt tokens", "passphrases found", "TTFT s", "result", "detail"], [[
            needle["target_tokens"], "-", "-", "-", "not measured", "skipped: " + needle["skipped"]]])
    elif needle:
        out += ["## Needle", ""]
        out += _table(["context (asked)", "prompt tokens", "passphrases found", "TTFT s", "result", "detail"], [[
            needle["target_tokens"], needle.get("prompt_tokens") or "-",
            f"{needle.get('found', 0)}/{needle.get('expected', 0)}",
            "-" if needle.get("ttft_ms") is None else f"{needle['ttft_ms'] / 1000:.3f}",
            "PASS" if needle.get("passed") else "FAIL",
            _note(needle.get("detail"), cache_mark([needle], "requests")) or "",
        ]])

    if any(results.get(phase) for phase in ("decode", "prefill", "depth", "concurrency", "needle")):
        out += _cache_section(results)

    if plots:
        out += ["## Plots", ""]
        for title, name in plots:
            out += [f"![{title}]({name})", ""]

    out += [
        "## Definitions", "",
        "- decode tok/s = (n - 1) / (t_last_chunk - t_first_chunk), n = completion tokens of the stream;",
        "- TTFT = first content chunk - request sent (includes queueing);",
        "- prefill tok/s = prompt tokens / TTFT; decode at depth = decode tok/s with that many tokens of history;",
        "- every timed prompt (each stream of a concurrency round too) starts with a nonce of its own, its random part"
        " first (no prompt cache shortens it), after one untimed warm-up request; a run is served mostly from the"
        " cache when the server says more than half of its prompt tokens came from it;",
        "- aggregate tok/s = total output tokens of all streams / wall time (first request sent to last stream done);"
        " per-stream tok/s = median decode tok/s of the streams;",
        "- garbled = empty output, or a token (or a cycle of up to 4) repeated to the end, or one token half the"
        " output;",
        "- within / above / below = inside, over or under the recipe's expected figure with its tolerance; a regression"
        " is the worse side (below for throughput, above for times).",
        "",
    ]
    return "\n".join(out)


CSV_COLUMNS = ("phase", "name", "tokens", "streams", "run", "ok", "prompt_tokens", "cached_tokens",
               "completion_tokens", "ttft_ms", "decode_tok_s", "prefill_tok_s", "aggregate_tok_s", "wall_s",
               "completed", "sent", "note")


def _note(*parts):
    return "; ".join(p for p in parts if p) or None


def _cached(run):
    return cache_note(run.get("prompt_tokens"), run.get("cached_tokens"))


def _csv_rows(results):
    """One dict per measured run (decode run, prefill run, depth run, concurrency round), in phase order."""
    for case in results.get("decode") or []:
        for i, run in enumerate(case.get("runs") or []):
            yield dict(run, phase="decode", name=case["name"], run=i + 1,
                       note=_note(run.get("error") or run.get("garbled"), _cached(run)))
    for row in results.get("prefill") or []:
        runs = row.get("runs") or ([] if row.get("skipped") else [row])  # schema 1: the row is its one run
        for i, run in enumerate(runs):
            yield dict(run, phase="prefill", tokens=row["target_tokens"], run=i + 1,
                       note=_note(run.get("error"), _cached(run)))
        if row.get("skipped"):
            yield {"phase": "prefill", "tokens": row["target_tokens"], "note": "skipped: " + row["skipped"]}
    for row in results.get("depth") or []:
        for i, run in enumerate(row.get("runs") or []):
            yield dict(run, phase="depth", tokens=row["depth_tokens"], run=i + 1,
                       note=_note(run.get("error") or run.get("garbled"), _cached(run)))
        if row.get("skipped"):
            yield {"phase": "depth", "tokens": row["depth_tokens"], "note": "skipped: " + row["skipped"]}
    for point in results.get("concurrency") or []:
        for i, rnd in enumerate(point.get("rounds") or [point]):
            errors = "; ".join(f"{e['count']}x {e['error']}" for e in rnd.get("errors") or [])
            yield {"phase": "concurrency", "streams": point["streams"], "run": i + 1,
                   "ok": rnd["completed"] == rnd["sent"], "completion_tokens": rnd.get("output_tokens"),
                   "aggregate_tok_s": rnd.get("aggregate_tok_s") if rnd["completed"] == rnd["sent"] else None,
                   "wall_s": rnd.get("wall_s"), "completed": rnd["completed"], "sent": rnd["sent"],
                   "decode_tok_s": (rnd.get("per_stream_tok_s") or {}).get("median"),
                   "ttft_ms": (rnd.get("ttft_ms") or {}).get("median"),
                   "prompt_tokens": rnd.get("prompt_tokens"), "cached_tokens": rnd.get("cached_tokens"),
                   "note": _note(rnd.get("aggregate_note"), errors,
                                 cache_note(rnd.get("prompt_tokens"), rnd.get("cached_tokens"), rnd["sent"],
                                            rnd.get("mostly_cached")))}
    needle = results.get("needle")
    if needle and needle.get("skipped"):
        yield {"phase": "needle", "tokens": needle["target_tokens"], "note": "skipped: " + needle["skipped"]}
    elif needle:
        yield {"phase": "needle", "tokens": needle["target_tokens"], "run": 1, "ok": bool(needle.get("passed")),
               "prompt_tokens": needle.get("prompt_tokens"), "cached_tokens": needle.get("cached_tokens"),
               "ttft_ms": needle.get("ttft_ms"), "note": _note(needle.get("detail"), _cached(needle))}


def results_csv(results):
    """The runs of ``results`` as CSV text (CSV_COLUMNS; an empty cell for what does not apply)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in _csv_rows(results):
        writer.writerow({key: "" if row.get(key) is None else _cell(row[key]) for key in CSV_COLUMNS})
    return buf.getvalue()


def _cell(value):
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return value
