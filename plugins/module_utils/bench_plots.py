# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark's plots (PNG, matplotlib on the controller): throughput vs streams, prefill tok/s and
TTFT vs context, decode tok/s vs depth.

What they must never do: print an axis in scientific notation (times are plain seconds), draw a
recipe's expected figure where the recipe says nothing (a band spans only the measured rungs its
metric matched; one length is one point), let a refused or failed rung vanish (it is marked, with
the reason, on the axis), or show an aggregate below the per-stream speed without saying why.
Nor hide a measured point: measured series are drawn above the recipe's markers, which are hollow,
each recipe figure in its own shape and colour, and the legend and notes sit below the axes, inside
the figure (no text is cut off at its edge).
"""

from __future__ import annotations

import math
import os
import textwrap
import traceback

from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_report as br

MPL_IMPORT_ERROR = None
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker
except ImportError:
    MPL_IMPORT_ERROR = traceback.format_exc()
    plt = ticker = None

PLOTS = (
    ("Throughput vs streams", "throughput_vs_streams.png"),
    ("Prefill tok/s vs context", "prefill_vs_context.png"),
    ("TTFT vs context", "ttft_vs_context.png"),
    ("Decode tok/s vs depth", "decode_vs_depth.png"),
)
# Measured series above the recipe's markers; the recipe's markers hollow, one shape and colour per figure.
MEASURED_Z = 3
RECIPE_Z = 2
RECIPE_STYLES = (("D", "black"), ("^", "tab:purple"), ("v", "tab:brown"), ("P", "tab:olive"), ("X", "tab:cyan"))
# A refused rung's reason, wrapped beside its mark (characters a line).
REASON_WIDTH = 36
AGGREGATE_NOTE = ("aggregate = all tokens / wall time from the first request sent, TTFT included:\n"
                  "at 1 stream it reads below the per-stream decode speed (first to last token)")


def subtitle(stamp, expectations):
    recipe = stamp.get("recipe") or expectations.get("recipe") or ""
    text = f"{recipe} - {stamp.get('host') or ''} - {stamp.get('date') or ''}".strip(" -")
    if stamp.get("simulated", expectations.get("simulated")):
        text = "SIMULATED (lab engine) - " + text
    return text


def plain(value, _pos=None):
    """A tick label without scientific notation: 0.25, 2, 30, 1200."""
    return f"{value:.6g}" if abs(value) >= 1e-4 or value == 0 else f"{value:f}".rstrip("0")


def minor_labels(axis):
    """Minor tick labels of a log ``axis`` in plain numbers: every one within a decade, else 2s and 5s only."""
    def label(value, _pos=None):
        low, high = sorted(axis.get_view_interval())
        if low > 0 and high / low > 10:
            mantissa = round(value / 10 ** math.floor(math.log10(value) + 1e-9), 6)
            if mantissa not in (2, 5):
                return ""
        return plain(value)

    return ticker.FuncFormatter(label)


def tokens_label(value, _pos=None):
    value = round(float(value))
    if value >= 1048576 and value % 1048576 == 0:
        return f"{value // 1048576}M"
    if value >= 1024 and value % 1024 == 0:
        return f"{value // 1024}K"
    return str(value)


def _figure(title, sub):
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=100)
    ax.set_title(title + "\n" + sub, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def _save(fig, path, ax=None, note=None):
    """Lay out and write the figure: the legend of ``ax`` and the ``note`` below the axes, inside the figure."""
    legend = None
    if ax is not None:
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            legend = fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    text = fig.text(0.01, 0.01, note, fontsize=7, va="bottom", ha="left") if note else None
    fig.canvas.draw()
    height = fig.bbox.height
    bottom = 0.01
    if text is not None:
        bottom += text.get_window_extent().height / height + 0.01
    if legend is not None:
        legend.set_bbox_to_anchor((0.5, bottom), transform=fig.transFigure)
        bottom += legend.get_window_extent().height / height
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, format="png")
    plt.close(fig)


def _nothing(ax, what):
    ax.text(0.5, 0.5, f"{what}: not measured", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _refused(ax, marks):
    """Rungs without a figure, marked on the x axis with their whole reason beside the mark: [(x, reason)].

    Call it once the x axis is final: a mark in the right half of the axes gets its reason on its left.
    """
    if not marks:
        return
    xs = [x for x, _reason in marks]
    ax.plot(xs, [0.02] * len(xs), "x", color="red", markersize=9, transform=ax.get_xaxis_transform(),
            clip_on=False, label="not measured (reason beside it)", zorder=MEASURED_Z)
    ax.get_xlim()  # the view limits, with the marks in them
    for x, reason in marks:
        where = ax.transAxes.inverted().transform(ax.transData.transform((x, 1)))[0]
        right = where > 0.5
        ax.annotate("\n".join(textwrap.wrap(reason, REASON_WIDTH)), (x, 0.04), xycoords=ax.get_xaxis_transform(),
                    xytext=(-6 if right else 6, 0), textcoords="offset points", fontsize=7, color="red",
                    va="bottom", ha="right" if right else "left")


def _log_x_tokens(ax):
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(tokens_label))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())


def _expected_at(ax, expectations, prefix, suffix, where, scale=None, drawn=0):
    """Each recipe figure of metrics ``prefix.<n>.suffix``, only at the measured rungs it matched.

    ``where``: {metric name: x of that rung}; ``scale(x, value)`` turns an expected value into the plotted
    one (TTFT from a prefill rate). One rung: a hollow marker with its band as an error bar; several: a line
    over just those rungs with the band shaded. Each figure takes the next of RECIPE_STYLES (``drawn`` were
    taken on these axes already), under the measured series. Returns how many figures it drew.
    """
    for fig_exp in expectations.get("figures") or []:
        metric = str(fig_exp.get("metric", ""))
        if not (metric.startswith(prefix + ".") and metric.endswith("." + suffix)):
            continue
        xs = sorted(where[name] for name in br.matches(fig_exp, list(where)) if name in where)
        if not xs:
            continue
        low, high, _text = br.band(fig_exp)
        name = fig_exp.get("label") or fig_exp["id"]
        conv = scale or (lambda _x, v: v)
        label = f"recipe: {name}, {fig_exp['expected']:g} {fig_exp.get('unit', '')}".rstrip()
        mid = [conv(x, fig_exp["expected"]) for x in xs]
        lo = [min(conv(x, low), conv(x, high)) for x in xs]
        hi = [max(conv(x, low), conv(x, high)) for x in xs]
        marker, color = RECIPE_STYLES[drawn % len(RECIPE_STYLES)]
        drawn += 1
        if len(xs) == 1:
            ax.errorbar(xs, mid, yerr=[[mid[0] - lo[0]], [hi[0] - mid[0]]], fmt=marker, color=color, capsize=4,
                        markersize=11, markerfacecolor="none", markeredgewidth=1.5, label=label, zorder=RECIPE_Z)
        else:
            ax.plot(xs, mid, "--", marker=marker, color=color, markerfacecolor="none", label=label, zorder=RECIPE_Z)
            ax.fill_between(xs, lo, hi, color=color, alpha=0.15, zorder=RECIPE_Z - 1)
    return drawn


def plot_throughput(path, results, expectations, sub):
    fig, ax = _figure("Throughput vs streams", sub)
    points = results.get("concurrency") or []
    if points:
        xs = [pt["streams"] for pt in points]
        agg = [pt for pt in points if pt.get("aggregate_tok_s") is not None and pt["completed"] == pt["sent"]]
        per = [pt for pt in points if (pt.get("per_stream_tok_s") or {}).get("median") is not None]
        ax.plot([pt["streams"] for pt in agg], [pt["aggregate_tok_s"] for pt in agg], "o-", label="aggregate tok/s",
                zorder=MEASURED_Z)
        ax.plot([pt["streams"] for pt in per], [pt["per_stream_tok_s"]["median"] for pt in per], "s--",
                label="per-stream tok/s (median)", zorder=MEASURED_Z)
        where = {f"concurrency.{pt['streams']}.{key}": pt["streams"] for pt in points
                 for key in ("aggregate_tok_s", "per_stream_tok_s")}
        drawn = 0
        for key in ("aggregate_tok_s", "per_stream_tok_s"):
            drawn = _expected_at(ax, expectations, "concurrency", key,
                                 {k: v for k, v in where.items() if k.endswith(key)}, drawn=drawn)
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(plain))
        ax.set_xlabel("concurrent streams")
        ax.set_ylabel("tok/s")
        ax.set_ylim(bottom=0)
        _refused(ax, [(pt["streams"], f"{pt['sent'] - pt['completed']}/{pt['sent']} streams failed")
                      for pt in points if pt not in agg])
        _save(fig, path, ax, AGGREGATE_NOTE)
        return
    _nothing(ax, "concurrency grid")
    _save(fig, path)


def plot_context(path, title, sub, prefill, key, ylabel, expectations, scale, logy):
    """Prefill tok/s or TTFT (scaled by ``scale``) against prompt tokens, with the recipe's band.

    For TTFT the recipe's band is the TTFT its prefill figure implies (prompt tokens / prefill tok/s).
    """
    fig, ax = _figure(title, sub)
    rows = [r for r in prefill if r.get(key) is not None]
    if prefill:
        xs = [r.get("prompt_tokens") or r["target_tokens"] for r in rows]
        ax.plot(xs, [r[key] * scale for r in rows], "o-", label=ylabel + " (measured, median)", zorder=MEASURED_Z)
        where = {f"prefill.{r['target_tokens']}.tok_s": r.get("prompt_tokens") or r["target_tokens"] for r in rows}
        conv = None if key == "prefill_tok_s" else (lambda x, v: x / v)
        _expected_at(ax, expectations, "prefill", "tok_s", where, conv)
        refused = [(r["target_tokens"], "skipped: " + r["skipped"] if r.get("skipped") else "failed")
                   for r in prefill if r.get(key) is None]
        _log_x_tokens(ax)
        if logy:
            ax.set_yscale("log")
            ax.yaxis.set_minor_formatter(minor_labels(ax.yaxis))
        else:
            ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(plain))
        ax.set_xlabel("prompt tokens")
        ax.set_ylabel(ylabel)
        _refused(ax, refused)
    else:
        _nothing(ax, "prefill ladder")
    _save(fig, path, ax)


def plot_depth(path, sub, depth, expectations):
    """Decode tok/s against the tokens already in the context, with the recipe's band where it has one."""
    fig, ax = _figure("Decode tok/s vs depth", sub)
    rows = [r for r in depth if r["decode_tok_s"]["median"] is not None]
    if depth:
        xs = [r["depth_tokens"] for r in rows]
        ax.plot(xs, [r["decode_tok_s"]["median"] for r in rows], "o-", label="decode tok/s (measured, median)",
                zorder=MEASURED_Z)
        _expected_at(ax, expectations, "depth", "tok_s", {f"depth.{x}.tok_s": x for x in xs})
        refused = [(r["depth_tokens"], "skipped: " + r["skipped"] if r.get("skipped") else "failed")
                   for r in depth if r not in rows]
        _log_x_tokens(ax)
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(plain))
        ax.set_ylim(bottom=0)
        ax.set_xlabel("tokens already in the context")
        ax.set_ylabel("decode tok/s")
        _refused(ax, refused)
    else:
        _nothing(ax, "decode at depth")
    _save(fig, path, ax)


def draw_all(run_dir, results, expectations, stamp):
    """The four plots into ``run_dir``; their file names."""
    sub = subtitle(stamp, expectations)
    prefill = results.get("prefill") or []
    plot_throughput(os.path.join(run_dir, PLOTS[0][1]), results, expectations, sub)
    plot_context(os.path.join(run_dir, PLOTS[1][1]), PLOTS[1][0], sub, prefill, "prefill_tok_s", "prefill tok/s",
                 expectations, 1.0, False)
    plot_context(os.path.join(run_dir, PLOTS[2][1]), PLOTS[2][0], sub, prefill, "ttft_ms", "TTFT (s)", expectations,
                 0.001, True)
    plot_depth(os.path.join(run_dir, PLOTS[3][1]), sub, results.get("depth") or [], expectations)
    return [name for _title, name in PLOTS]
