# SPDX-License-Identifier: GPL-3.0-or-later
"""The sparkfold.cluster.engine_bench_report module in-process: a run directory from a fixed raw-results
fixture (recorded from the lab engine), regressions against the published recipe, check mode, and the
failure without matplotlib."""

import json
import os
import re

import pytest
import yaml
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_plots
from ansible_collections.sparkfold.cluster.plugins.modules import engine_bench_report

from tests.unit.module_runner import module_runner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PNG = b"\x89PNG\r\n\x1a\n"
PLOTS = ("throughput_vs_streams.png", "prefill_vs_context.png", "ttft_vs_context.png", "decode_vs_depth.png")


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, engine_bench_report.main)


@pytest.fixture
def args(fixtures_dir):
    def load(name):
        with open(os.path.join(fixtures_dir, "bench", name)) as handle:
            return json.load(handle)

    def recipe(name):
        with open(os.path.join(ROOT, "roles", "bench", "files", "recipes", name + ".yml")) as handle:
            return yaml.safe_load(handle)

    return {"measurements": load("lab-measurements.json"), "stamp": load("stamp.json"), "recipe": recipe}


def test_run_directory(run, args, tmp_path):
    run_dir = tmp_path / "runs" / "20261129T213216Z-lab"
    kind, result, _w = run({"measurements": args["measurements"], "stamp": args["stamp"],
                            "expectations": args["recipe"]("lab"), "run_dir": str(run_dir)})
    assert kind == "exit", result
    assert result["changed"] is True
    assert sorted(os.listdir(run_dir)) == sorted(["results.json", "results.csv", "report.md", *PLOTS])
    for name in PLOTS:
        data = (run_dir / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 10000, name
    report = (run_dir / "report.md").read_text()
    assert "| Single-stream decode, code, T=0, thinking off | 60.0 tok/s | 60 tok/s | ±5% | within |" in report
    assert "| Prefill [32768] | 3942 tok/s | 4000 tok/s | ±10% | within |" in report
    assert "| 3 | 3/3 | 0 | 161 | - | - | 60.0 |" in report  # one round (schema 1): no spread
    assert "![TTFT vs context](ttft_vs_context.png)" in report
    raw = json.loads((run_dir / "results.json").read_text())
    assert set(raw) == {"stamp", "expectations", "verdicts", "measurements"}
    assert raw["measurements"] == args["measurements"]
    assert result["regressions"] == []
    # The fixture (recorded before decode at depth existed) has no depth: that one figure is not measured.
    assert [line for line in result["table"] if not line.startswith("within")] == [
        "not measured Decode at depth: - tok/s (expected 60 ±5%)"]


def test_regressions_against_the_published_recipe(run, args, tmp_path):
    kind, result, _w = run({"measurements": args["measurements"], "expectations": args["recipe"]("dsv41-flash-tp2"),
                            "run_dir": str(tmp_path / "r")})
    assert kind == "exit"
    assert result["regressions"] == [
        "Single-stream decode, prose, T=0, thinking off: measured 60.0 tok/s, expected 80.7 tok/s ±10% (below 72.6)",
        "Single-stream decode, code, T=0, thinking off: measured 60.0 tok/s, expected 118 tok/s ±10% (below 106)",
    ]
    assert "not available" in (tmp_path / "r" / "report.md").read_text()  # no stamp given


def test_check_mode_writes_nothing(run, args, tmp_path):
    kind, result, _w = run({"measurements": args["measurements"], "expectations": args["recipe"]("lab"),
                            "run_dir": str(tmp_path / "r"), "_ansible_check_mode": True})
    assert kind == "exit"
    assert result["changed"] is False and result["files"] == []
    assert len(result["verdicts"]) == 13
    assert not (tmp_path / "r").exists()


def test_bad_recipe(run, args, tmp_path):
    kind, result, _w = run({"measurements": args["measurements"], "run_dir": str(tmp_path),
                            "expectations": {"figures": [{"id": "a", "metric": "m", "expected": 1}]}})
    assert kind == "fail"
    assert result["msg"] == ("the recipe's expected figures cannot be used: figure 1 (a) needs exactly one of "
                             "tolerance_pct and tolerance_abs. Fix the recipe file (roles/bench/files/recipes/) "
                             "and run again")


def test_without_matplotlib(run, args, tmp_path, monkeypatch):
    monkeypatch.setattr(bench_plots, "plt", None)
    monkeypatch.setattr(bench_plots, "MPL_IMPORT_ERROR", "ImportError: No module named 'matplotlib'")
    kind, result, _w = run({"measurements": args["measurements"], "run_dir": str(tmp_path / "r")})
    assert kind == "fail"
    assert "matplotlib" in result["msg"] and "make setup" in result["msg"]
    assert not (tmp_path / "r").exists()
    kind, result, _w = run({"measurements": args["measurements"], "run_dir": str(tmp_path / "r"), "plots": False})
    assert kind == "exit"
    assert sorted(os.listdir(tmp_path / "r")) == ["report.md", "results.csv", "results.json"]
    assert "## Plots" not in (tmp_path / "r" / "report.md").read_text()


def test_nothing_measured_still_draws_every_plot(run, tmp_path):
    kind, _result, _w = run({"measurements": {"decode": [], "prefill": [], "concurrency": [], "needle": None},
                             "run_dir": str(tmp_path)})
    assert kind == "exit"
    for name in PLOTS:
        assert (tmp_path / name).read_bytes().startswith(PNG)


# --- issue 16: plots that say what they show, a CSV for spreadsheets ---------------------------------------------
def _stats(*values):
    from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_figures import summarize

    return summarize(values)


def _prefill_row(target, tok_s=None, skipped=None):
    ttft = None if tok_s is None else target / tok_s * 1000
    return {"target_tokens": target, "prompt_tokens": None if skipped else target, "counted_tokens": target,
            "ttft_ms": ttft, "prefill_tok_s": tok_s, "ok": tok_s is not None, "error": None, "skipped": skipped,
            "exact": True}


MEASURED = {
    "decode": [],
    # TTFTs from 0.2 to 16 s: two decades of a log axis, where matplotlib's own minor labels read 2e-01.
    "prefill": [_prefill_row(512, 2560.0), _prefill_row(1024, 2560.0), _prefill_row(32768, 2048.0),
                _prefill_row(131072, skipped="131072 + 4 tokens exceeds the server's context of 65536")],
    "concurrency": [
        {"streams": n, "sent": n, "completed": n, "garbled": 0, "aggregate_tok_s": 54.0 * n, "wall_s": 1.2,
         "per_stream_tok_s": _stats(60.0), "ttft_ms": _stats(130.0), "errors": []} for n in (1, 2)
    ] + [{"streams": 4, "sent": 4, "completed": 3, "garbled": 0, "aggregate_tok_s": 150.0, "wall_s": 1.3,
          "per_stream_tok_s": _stats(60.0), "ttft_ms": _stats(130.0),
          "errors": [{"error": "out of KV pool pages", "count": 1}]}],
    "needle": None,
}
ONE_LENGTH = {"figures": [{"id": "p32k", "label": "Prefill at 32K", "metric": "prefill.32768.tok_s",
                           "expected": 65000, "unit": "tok/s", "tolerance_pct": 10}]}


@pytest.fixture
def figures(monkeypatch):
    """The figures the module draws, by the first line of their title (kept open for the test to read)."""
    import matplotlib.pyplot as plt

    drawn = {}
    monkeypatch.setattr(plt, "close", lambda fig: drawn.__setitem__(fig.axes[0].get_title().split("\n")[0], fig))
    yield drawn
    for fig in drawn.values():
        plt.figure(fig.number)
        plt.clf()


def _recipe_x(ax):
    """The x values of everything the recipe's figures drew."""
    xs = []
    handles, labels = ax.get_legend_handles_labels()
    for handle, label in zip(handles, labels):
        if not label.startswith("recipe:"):
            continue
        if hasattr(handle, "get_segments"):  # a line collection
            xs += [x for seg in handle.get_segments() for x, _y in seg]
        elif hasattr(handle, "get_xdata"):
            xs += list(handle.get_xdata())
        else:  # an error bar container
            xs += list(handle.lines[0].get_xdata())
    return xs


def test_ttft_axis_is_in_plain_seconds(run, figures, tmp_path):
    kind, result, _w = run({"measurements": MEASURED, "run_dir": str(tmp_path)})
    assert kind == "exit", result
    ax = figures["TTFT vs context"].axes[0]
    figures["TTFT vs context"].canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() + ax.get_yticklabels(minor=True) if t.get_text()]
    assert labels, "the TTFT axis has no labels"
    assert not [text for text in labels if re.search(r"\d\s*[eE][-+\u2212]|times|\^", text)], labels
    assert {"0.2", "0.5", "2", "5"} <= set(labels), labels  # seconds, plainly


def test_a_recipe_figure_for_one_length_is_drawn_at_that_length_only(run, figures, tmp_path):
    kind, result, _w = run({"measurements": MEASURED, "expectations": ONE_LENGTH, "run_dir": str(tmp_path)})
    assert kind == "exit", result
    for title in ("Prefill tok/s vs context", "TTFT vs context"):
        xs = _recipe_x(figures[title].axes[0])
        assert xs and set(xs) == {32768}, (title, xs)


def test_refused_rungs_are_marked_with_their_reason(run, figures, tmp_path):
    kind, result, _w = run({"measurements": MEASURED, "run_dir": str(tmp_path)})
    assert kind == "exit", result
    for title in ("Prefill tok/s vs context", "TTFT vs context"):
        texts = [t.get_text() for t in figures[title].axes[0].texts]
        assert any(t.replace("\n", " ").startswith("skipped: 131072 + 4 tokens exceeds the server's context")
                   for t in texts), texts
    texts = [t.get_text() for t in figures["Throughput vs streams"].axes[0].texts]
    assert "1/4 streams failed" in texts


def test_the_throughput_plot_says_why_aggregate_reads_low_at_one_stream(run, figures, tmp_path):
    kind, result, _w = run({"measurements": MEASURED, "run_dir": str(tmp_path)})
    assert kind == "exit", result
    fig = figures["Throughput vs streams"]
    notes = " ".join(t.get_text() for t in fig.texts)
    assert "TTFT included" in notes and "at 1 stream it reads below the per-stream" in notes
    # The point where a stream failed has no aggregate drawn (and is marked instead).
    (aggregate,) = [line for line in fig.axes[0].get_lines() if line.get_label() == "aggregate tok/s"]
    assert list(aggregate.get_xdata()) == [1, 2]
    report = (tmp_path / "report.md").read_text()
    assert "| 4 | 3/4 | 0 | - (not reported: 1 of 4 streams failed) |" in report
    assert "at 1 stream it reads below the per-stream decode speed" in report


def test_results_csv_for_spreadsheets(run, args, tmp_path):
    import csv

    kind, result, _w = run({"measurements": MEASURED, "run_dir": str(tmp_path), "plots": False})
    assert kind == "exit", result
    assert str(tmp_path / "results.csv") in result["files"]
    with open(tmp_path / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:6] == ["phase", "name", "tokens", "streams", "run", "ok"]
    prefill = [r for r in rows if r["phase"] == "prefill"]
    assert [r["tokens"] for r in prefill] == ["512", "1024", "32768", "131072"]
    assert prefill[0]["prefill_tok_s"] == "2560" and prefill[0]["ttft_ms"] == "200"
    assert prefill[3]["note"].startswith("skipped: 131072 + 4 tokens") and prefill[3]["ttft_ms"] == ""
    four = next(r for r in rows if r["phase"] == "concurrency" and r["streams"] == "4")
    assert four["ok"] == "no" and four["aggregate_tok_s"] == "" and four["completed"] == "3"
    assert "1x out of KV pool pages" in four["note"]
    kind, _result, _w = run({"measurements": args["measurements"], "run_dir": str(tmp_path / "lab"), "plots": False})
    with open(tmp_path / "lab" / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    decode = [r for r in rows if r["phase"] == "decode"]
    assert len(decode) == sum(len(c["runs"]) for c in args["measurements"]["decode"])
    assert {r["name"] for r in decode} == {"prose_t0.7_thinking", "prose_t0", "code_t0"}
    assert [r["phase"] for r in rows].count("needle") == 1


def test_a_needle_skipped_for_lack_of_context_is_not_a_regression(run, args, tmp_path):
    # Issue 31: the lab run's needle, as a run on a server with too small a context leaves it: not sent.
    measurements = dict(args["measurements"], needle={
        "target_tokens": 65536, "prompt_tokens": None, "cached_tokens": None, "passed": None, "found": None,
        "expected": 3, "detail": None, "ttft_ms": None,
        "skipped": "a 65536-token prompt plus a 256-token reply does not fit the engine's context of 32768 tokens; "
                   "lower needle_tokens or raise the engine's context"})
    kind, result, _w = run({"measurements": measurements, "expectations": args["recipe"]("lab"),
                            "run_dir": str(tmp_path / "r"), "plots": False})
    assert kind == "exit", result
    (needle,) = [v for v in result["verdicts"] if v["metric"] == "needle.passed"]
    assert needle["verdict"] == "not measured" and needle["regression"] is False
    assert needle["reason"].startswith("skipped: a 65536-token prompt plus a 256-token reply does not fit")
    assert result["regressions"] == []
    report = (tmp_path / "r" / "report.md").read_text()
    assert "| not measured (skipped: a 65536-token prompt" in report


def test_a_figure_on_runs_served_mostly_from_the_cache_says_so(run, args, tmp_path):
    # Issue 31: the lab run as a server that found 70 of 74 prompt tokens of every prose_t0 run in its cache would
    # leave it; the verdict on that figure, on the console and in the report, and its row in the table say so.
    measurements = json.loads(json.dumps(args["measurements"]))
    (case,) = [c for c in measurements["decode"] if c["name"] == "prose_t0"]
    for one in case["runs"]:
        one.update(prompt_tokens=74, cached_tokens=70)
    kind, result, _w = run({"measurements": measurements, "expectations": args["recipe"]("lab"),
                            "run_dir": str(tmp_path / "r"), "plots": False})
    assert kind == "exit", result
    mark = f"served mostly from the prompt cache: {len(case['runs'])} of {len(case['runs'])} runs"
    marked = {v["metric"]: v["cached"] for v in result["verdicts"] if v.get("cached")}
    assert marked == {"decode.prose_t0.tok_s": mark, "decode.ttft_ms": mark.replace(
        f"of {len(case['runs'])}", f"of {sum(len(c['runs']) for c in measurements['decode'])}")}
    assert any(line.startswith("within") and "prose, T=0" in line and line.endswith(f"({mark})")
               for line in result["table"])
    report = (tmp_path / "r" / "report.md").read_text()
    assert f"| within (**{mark}**) |" in report
    assert ("Served mostly from the prompt cache (their TTFT holds little or no prefill): prose_t0, "
            f"{len(case['runs'])} of {len(case['runs'])} runs") in report
