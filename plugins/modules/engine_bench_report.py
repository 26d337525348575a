#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_bench_report
short_description: Write a benchmark run directory - raw JSON, a Markdown report against the recipe, PNG plots
version_added: "0.1.0"
description:
  - Takes the raw results of M(sparkfold.cluster.engine_bench), the recipe's expected figures and a stamp (recipe,
    engine commit, weights revision, clocks, host, date) and writes into O(run_dir)
    C(results.json) (all of it), C(report.md) and three plots, C(throughput_vs_streams.png) (aggregate and
    per-stream tok/s), C(prefill_vs_context.png) (prefill tok/s) and C(ttft_vs_context.png) (TTFT).
  - Marks each expected figure as within, above or below its tolerance; the side that is worse (below for a
    throughput, above for a time) is a regression, listed in RV(regressions). The module itself never fails on a
    regression; the C(sparkfold.cluster.bench) role does when C(bench_fail_on_regression) is set.
  - Runs on the controller (C(delegate_to localhost)) with the python of ansible-playbook, which needs
    C(matplotlib) (pinned in the collection's C(requirements.txt)); without it the module fails and says so.
author:
  - sparkfold developers (@sparkfold)
requirements:
  - matplotlib (plots, Agg backend)
options:
  measurements:
    description:
      - RV(sparkfold.cluster.engine_bench#module:measurements), the raw results.
    type: dict
    required: true
  expectations:
    description:
      - "The recipe's expected figures: C(recipe), C(description), C(simulated) (true for the lab recipe: the report
        says SIMULATED) and C(figures), a list of C(id), C(label), C(metric) (a metric name or a glob such as
        C(prefill.*.tok_s), with an optional C(range) [low, high] on the number the C(*) stands for), C(expected),
        C(unit), C(tolerance_pct) or C(tolerance_abs), C(better) (higher or lower)."
      - Metric names - C(decode.<case>.tok_s), C(decode.<case>.ttft_ms), C(decode.ttft_ms) (median over all decode
        runs), C(decode.garbled), C(prefill.<tokens>.tok_s), C(prefill.<tokens>.ttft_ms),
        C(concurrency.<streams>.aggregate_tok_s), C(.per_stream_tok_s), C(.ttft_ms), C(.completed_pct),
        C(.garbled), C(concurrency.max.completed_pct) (at the largest stream count),
        C(concurrency.all.garbled), C(concurrency.peak.aggregate_tok_s), C(concurrency.peak.streams),
        C(needle.passed) (1 or 0), C(needle.found_pct). Percentages are 0-100.
    type: dict
    default: {}
  stamp:
    description:
      - What was measured, shown at the top of the report - C(recipe), C(simulated), C(engine) (the engine's
        C(sparkfold-stamp.json) with C(commit) and C(build_id)), C(weights) (C(repo_id), C(commit)), C(clocks),
        C(host), C(date). A missing entry shows as "not available".
    type: dict
    default: {}
  run_dir:
    description:
      - Directory to write; created with its parents. Files of the same names in it are replaced.
    type: path
    required: true
  plots:
    description:
      - Draw the three PNG plots. Without them C(matplotlib) is not needed.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Judges the figures and returns the verdicts, writes nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: sparkfold.cluster.engine_bench
"""

EXAMPLES = r"""
- name: Write the report on the controller
  sparkfold.cluster.engine_bench_report:
    measurements: "{{ bench.measurements }}"
    expectations: "{{ lookup('ansible.builtin.file', 'recipes/dsv41-flash-tp2.yml') | from_yaml }}"
    stamp:
      recipe: dsv41-flash-tp2
      host: spark-a
      date: "{{ now(utc=true).isoformat() }}"
    run_dir: "{{ playbook_dir }}/../bench-runs/manual"
  delegate_to: localhost
  register: report

- name: Fail on a regression
  ansible.builtin.fail:
    msg: "{{ report.regressions | join('; ') }}"
  when: report.regressions | length > 0
"""

RETURN = r"""
run_dir:
  description: The directory written.
  returned: always
  type: str
  sample: /home/me/sparkfold/bench-runs/20261201T101500Z-dsv41-flash-tp2
files:
  description: Paths of the files written (none in check mode).
  returned: always
  type: list
  elements: str
  sample: [results.json, report.md, throughput_vs_streams.png, prefill_vs_context.png, ttft_vs_context.png]
verdicts:
  description: One per expected figure and matching metric - C(id), C(label), C(metric), C(measured), C(expected),
    C(unit), C(low), C(high), C(tolerance), C(better), C(verdict) (within, above, below, not measured), C(regression).
  returned: always
  type: list
  elements: dict
regressions:
  description: One line per figure on the worse side of its tolerance.
  returned: always
  type: list
  elements: str
  sample: ["Single-stream decode, prose, T=0: measured 61.0 tok/s, expected 80.7 tok/s ±10% (below 72.6)"]
table:
  description: The verdicts as short lines, for the console.
  returned: always
  type: list
  elements: str
"""

import json
import os
import tempfile
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
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
)


def _write(path, data, binary=False):
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb" if binary else "w") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _subtitle(stamp, expectations):
    recipe = stamp.get("recipe") or expectations.get("recipe") or ""
    text = f"{recipe} - {stamp.get('host') or ''} - {stamp.get('date') or ''}".strip(" -")
    if stamp.get("simulated", expectations.get("simulated")):
        text = "SIMULATED (lab engine) - " + text
    return text


def _figure(title, subtitle):
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    ax.set_title(title + "\n" + subtitle, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def _nothing(ax, what):
    ax.text(0.5, 0.5, f"{what}: not measured", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _expected(expectations, prefix):
    return [f for f in expectations.get("figures") or [] if str(f.get("metric", "")).startswith(prefix)]


def plot_throughput(path, results, expectations, subtitle):
    fig, ax = _figure("Throughput vs streams", subtitle)
    points = [pt for pt in results.get("concurrency") or [] if pt.get("aggregate_tok_s") is not None]
    if points:
        xs = [pt["streams"] for pt in points]
        ax.plot(xs, [pt["aggregate_tok_s"] for pt in points], "o-", label="aggregate tok/s")
        ax.plot(xs, [pt["per_stream_tok_s"]["median"] for pt in points], "s--", label="per-stream tok/s (median)")
        for fig_exp in _expected(expectations, "concurrency."):
            parts = fig_exp["metric"].split(".")
            if len(parts) == 3 and parts[1].isdigit() and parts[2] in ("aggregate_tok_s", "per_stream_tok_s"):
                low, high, _text = br.band(fig_exp)
                ax.errorbar([int(parts[1])], [fig_exp["expected"]], yerr=[[fig_exp["expected"] - low],
                            [high - fig_exp["expected"]]], fmt="D", color="black", capsize=4,
                            label=f"recipe: {fig_exp.get('label') or fig_exp['id']}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.set_xlabel("concurrent streams")
        ax.set_ylabel("tok/s")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    else:
        _nothing(ax, "concurrency grid")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def _tokens_label(value, _pos=None):
    value = round(float(value))
    if value >= 1048576 and value % 1048576 == 0:
        return f"{value // 1048576}M"
    if value >= 1024 and value % 1024 == 0:
        return f"{value // 1024}K"
    return str(value)


def plot_context(path, title, subtitle, prefill, key, ylabel, expectations, scale, logy):
    """Prefill tok/s or TTFT (scaled by ``scale``) against prompt tokens, with the recipe's band.

    For TTFT the recipe's band is the TTFT its prefill figure implies (prompt tokens / prefill tok/s).
    """
    fig, ax = _figure(title, subtitle)
    rows = [r for r in prefill if r.get(key) is not None]
    if rows:
        xs = [r.get("prompt_tokens") or r["target_tokens"] for r in rows]
        ax.plot(xs, [r[key] * scale for r in rows], "o-", label=ylabel + " (measured)")
        for fig_exp in _expected(expectations, "prefill."):
            if not fig_exp["metric"].endswith(".tok_s"):
                continue
            low, high, _text = br.band(fig_exp)
            lo_x, hi_x = fig_exp.get("range") or [min(xs), max(xs)]
            lo_x, hi_x = max(lo_x, min(xs)), min(hi_x, max(xs))
            if lo_x > hi_x:
                continue
            name = fig_exp.get("label") or fig_exp["id"]
            if key == "prefill_tok_s":
                ax.hlines(fig_exp["expected"], lo_x, hi_x, colors="black", linestyles="dashed",
                          label=f"recipe: {name}, {fig_exp['expected']:g} tok/s")
                ax.fill_between([lo_x, hi_x], [low] * 2, [high] * 2, color="grey", alpha=0.2)
            else:
                line = [lo_x, hi_x]
                ax.plot(line, [x / fig_exp["expected"] for x in line], "k--",
                        label=f"recipe: tokens / {fig_exp['expected']:g} tok/s")
                ax.fill_between(line, [x / high for x in line], [x / low for x in line], color="grey", alpha=0.2)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(_tokens_label))
        if logy:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:g}"))
            ax.yaxis.set_minor_formatter(ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel("prompt tokens")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    else:
        _nothing(ax, "prefill ladder")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def main():
    module = AnsibleModule(
        argument_spec={
            "measurements": {"type": "dict", "required": True},
            "expectations": {"type": "dict", "default": {}},
            "stamp": {"type": "dict", "default": {}},
            "run_dir": {"type": "path", "required": True},
            "plots": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    results, expectations, stamp, run_dir = p["measurements"], p["expectations"] or {}, p["stamp"] or {}, p["run_dir"]
    if expectations:
        problems = br.check_expectations(expectations)
        if problems:
            module.fail_json(msg="the recipe's expected figures cannot be used: " + "; ".join(problems)
                                 + ". Fix the recipe file (roles/bench/files/recipes/) and run again")
    verdicts = br.judge(expectations, br.metrics(results)) if expectations else []
    regressions = br.regressions(verdicts)
    out = {"changed": False, "run_dir": run_dir, "files": [], "verdicts": verdicts, "regressions": regressions,
           "table": br.verdict_lines(verdicts)}
    if p["plots"] and plt is None:
        module.fail_json(msg=missing_required_lib("matplotlib", reason="to draw the benchmark plots")
                         + " Run `make setup` (requirements.txt pins it) or set plots=false (bench_plots: false).",
                         exception=MPL_IMPORT_ERROR, **out)
    if module.check_mode:
        module.exit_json(msg=f"check mode: would write the report into {run_dir}", **out)

    try:
        os.makedirs(run_dir, exist_ok=True)
        files = []
        raw = {"stamp": stamp, "expectations": expectations, "verdicts": verdicts, "measurements": results}
        _write(os.path.join(run_dir, "results.json"), json.dumps(raw, indent=1, sort_keys=True) + "\n")
        files.append("results.json")
        plots = list(PLOTS) if p["plots"] else []
        _write(os.path.join(run_dir, "report.md"), br.render_markdown(results, stamp, expectations, verdicts, plots))
        files.append("report.md")
        if plots:
            subtitle = _subtitle(stamp, expectations)
            plot_throughput(os.path.join(run_dir, PLOTS[0][1]), results, expectations, subtitle)
            prefill = results.get("prefill") or []
            plot_context(os.path.join(run_dir, PLOTS[1][1]), PLOTS[1][0], subtitle, prefill, "prefill_tok_s",
                         "prefill tok/s", expectations, 1.0, False)
            plot_context(os.path.join(run_dir, PLOTS[2][1]), PLOTS[2][0], subtitle, prefill, "ttft_ms", "TTFT (s)",
                         expectations, 0.001, True)
            files += [name for _title, name in PLOTS]
    except OSError as exc:
        module.fail_json(msg=f"cannot write the report into {run_dir}: {exc}. Check bench_run_dir and its "
                             "permissions on the controller", **out)
    out.update(changed=True, files=[os.path.join(run_dir, f) for f in files])
    module.exit_json(msg=f"report written to {os.path.join(run_dir, 'report.md')}", **out)


if __name__ == "__main__":
    main()
