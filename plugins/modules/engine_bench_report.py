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
    C(results.json) (all of it), C(results.csv) (one row per measured run, for spreadsheets), C(report.md) and
    four plots, C(throughput_vs_streams.png) (aggregate and per-stream tok/s), C(prefill_vs_context.png) (prefill
    tok/s), C(ttft_vs_context.png) (TTFT) and C(decode_vs_depth.png) (decode tok/s at depth).
  - "The plots never print an axis in scientific notation, draw a recipe's figure only at the measured rungs its
    metric matched, mark a skipped or failed rung on the axis with its reason, and say why the aggregate at one
    stream reads below the per-stream speed (its wall time includes the TTFT)."
  - "C(results.csv) columns - phase, name, tokens, streams, run, ok, prompt_tokens, cached_tokens,
    completion_tokens, ttft_ms, decode_tok_s, prefill_tok_s, aggregate_tok_s, wall_s, completed, sent, note;
    a cell that does not apply is empty; a skipped rung is a row with its reason in note. C(cached_tokens) is the
    server's count of prompt tokens it took from its prompt cache, where the server says it (a concurrency round's
    row adds up its streams', with their C(prompt_tokens)); a run served mostly from the cache says so in note."
  - "C(report.md) has a Prompt cache section - the cached prompt tokens per phase and every run served mostly from
    the cache (more than half of its prompt tokens; a concurrency round when any of its streams was), whose TTFT
    and prefill figures hold little or no prefill. The phase tables mark those rows too, and the verdict of a figure
    measured on them says so."
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
        runs), C(decode.garbled), C(prefill.<tokens>.tok_s), C(prefill.<tokens>.ttft_ms), C(depth.<tokens>.tok_s),
        C(depth.<tokens>.ttft_ms),
        C(concurrency.<streams>.aggregate_tok_s), C(.per_stream_tok_s), C(.ttft_ms), C(.completed_pct),
        C(.garbled), C(concurrency.max.completed_pct) (at the largest stream count),
        C(concurrency.all.garbled), C(concurrency.peak.aggregate_tok_s), C(concurrency.peak.streams),
        C(needle.passed) (1 or 0), C(needle.found_pct). Percentages are 0-100. A concurrency point where any
        stream failed has no aggregate (not measured). A needle that was not sent because it does not fit the served
        context is not measured (never a failure); its reason is in the verdict.
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
      - Draw the four PNG plots. Without them C(matplotlib) is not needed.
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
  sample: [results.json, results.csv, report.md, throughput_vs_streams.png, prefill_vs_context.png,
    ttft_vs_context.png, decode_vs_depth.png]
verdicts:
  description: One per expected figure and matching metric - C(id), C(label), C(metric), C(measured), C(expected),
    C(unit), C(low), C(high), C(tolerance), C(better), C(verdict) (within, above, below, not measured), C(regression),
    C(reason) (why a figure was not measured, for example the needle skipped for lack of context; null otherwise),
    C(cached) (that the figure rests on runs served mostly from the prompt cache, how many; null otherwise).
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

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_plots
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_report as br
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_tables as bt


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
    verdicts = (br.judge(expectations, br.metrics(results), br.unmeasured(results), br.cached(results))
                if expectations else [])
    regressions = br.regressions(verdicts)
    out = {"changed": False, "run_dir": run_dir, "files": [], "verdicts": verdicts, "regressions": regressions,
           "table": br.verdict_lines(verdicts)}
    if p["plots"] and bench_plots.plt is None:
        module.fail_json(msg=missing_required_lib("matplotlib", reason="to draw the benchmark plots")
                         + " Run `make setup` (requirements.txt pins it) or set plots=false (bench_plots: false).",
                         exception=bench_plots.MPL_IMPORT_ERROR, **out)
    if module.check_mode:
        module.exit_json(msg=f"check mode: would write the report into {run_dir}", **out)

    try:
        os.makedirs(run_dir, exist_ok=True)
        files = []
        raw = {"stamp": stamp, "expectations": expectations, "verdicts": verdicts, "measurements": results}
        _write(os.path.join(run_dir, "results.json"), json.dumps(raw, indent=1, sort_keys=True) + "\n")
        files.append("results.json")
        _write(os.path.join(run_dir, "results.csv"), bt.results_csv(results))
        files.append("results.csv")
        plots = list(bench_plots.PLOTS) if p["plots"] else []
        _write(os.path.join(run_dir, "report.md"), bt.render_markdown(results, stamp, expectations, verdicts, plots))
        files.append("report.md")
        if plots:
            files += bench_plots.draw_all(run_dir, results, expectations, stamp)
    except OSError as exc:
        module.fail_json(msg=f"cannot write the report into {run_dir}: {exc}. Check bench_run_dir and its "
                             "permissions on the controller", **out)
    out.update(changed=True, files=[os.path.join(run_dir, f) for f in files])
    module.exit_json(msg=f"report written to {os.path.join(run_dir, 'report.md')}", **out)


if __name__ == "__main__":
    main()
