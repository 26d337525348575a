# SPDX-License-Identifier: GPL-3.0-or-later
"""bench_report module_utils: metrics from raw results, within/above/below marking, regressions, the
recipe files, and the Markdown report."""

import json
import os

import pytest
import yaml
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_report as br
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_tables as bt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
RECIPES = os.path.join(ROOT, "roles", "bench", "files", "recipes")


@pytest.fixture
def measurements(fixtures_dir):
    with open(os.path.join(fixtures_dir, "bench", "lab-measurements.json")) as handle:
        return json.load(handle)


@pytest.fixture
def stamp(fixtures_dir):
    with open(os.path.join(fixtures_dir, "bench", "stamp.json")) as handle:
        return json.load(handle)


def recipe(name):
    with open(os.path.join(RECIPES, name + ".yml")) as handle:
        return yaml.safe_load(handle)


def test_metrics(measurements):
    m = br.metrics(measurements)
    assert m["decode.prose_t0.tok_s"] == pytest.approx(60, rel=0.02)
    assert m["decode.ttft_ms"] == pytest.approx(134, abs=20)
    assert set(k for k in m if k.startswith("prefill.") and k.endswith(".tok_s")) == {
        "prefill.8192.tok_s", "prefill.16384.tok_s", "prefill.32768.tok_s"}
    assert m["concurrency.max.streams"] == 8
    assert m["concurrency.max.completed_pct"] == 100.0
    assert m["concurrency.all.garbled"] == 0
    assert m["concurrency.peak.streams"] in (4, 8)
    assert m["needle.passed"] == 1.0 and m["needle.found_pct"] == 100.0


def fig(**kw):
    base = {"id": "x", "label": "X", "metric": "a", "expected": 100, "unit": "tok/s", "tolerance_pct": 10,
            "better": "higher"}
    base.update(kw)
    return base


@pytest.mark.parametrize("value, verdict, regression", [
    (100, "within", False), (90, "within", False), (110, "within", False),
    (89.9, "below", True), (110.1, "above", False), (None, "not measured", False),
])
def test_judge_higher_is_better(value, verdict, regression):
    measured = {} if value is None else {"a": value}
    (v,) = br.judge({"figures": [fig()]}, measured)
    assert (v["verdict"], v["regression"]) == (verdict, regression)
    assert v["low"] == pytest.approx(90) and v["high"] == pytest.approx(110)


def test_judge_lower_is_better_with_an_absolute_tolerance():
    f = fig(metric="t", expected=214, unit="ms", better="lower", tolerance_abs=50)
    del f["tolerance_pct"]
    below, within, above = (br.judge({"figures": [f]}, {"t": t})[0] for t in (100, 260, 265))
    assert (below["verdict"], below["regression"]) == ("below", False)
    assert within["verdict"] == "within" and within["tolerance"] == "±50 ms"
    assert (above["verdict"], above["regression"]) == ("above", True)


def test_judge_glob_with_range():
    measured = {"prefill.2048.tok_s": 500, "prefill.4096.tok_s": 2100, "prefill.262144.tok_s": 700,
                "prefill.524288.tok_s": 100, "prefill.4096.ttft_ms": 2000}
    f = fig(metric="prefill.*.tok_s", range=[4096, 262144], expected=2150, tolerance_pct=15, label="Prefill")
    verdicts = br.judge({"figures": [f]}, measured)
    assert [(v["metric"], v["verdict"]) for v in verdicts] == [
        ("prefill.4096.tok_s", "within"), ("prefill.262144.tok_s", "below")]
    assert verdicts[1]["label"] == "Prefill [262144]"
    lines = br.regressions(verdicts)
    assert lines == ["Prefill [262144]: measured 700 tok/s, expected 2150 tok/s ±15% (below 1828)"]


def test_glob_with_nothing_measured_says_so():
    (v,) = br.judge({"figures": [fig(metric="prefill.*.tok_s")]}, {})
    assert v["verdict"] == "not measured" and not v["regression"]


def test_check_expectations():
    assert br.check_expectations({"figures": [fig()]}) == []
    problems = br.check_expectations({"figures": [fig(), fig(expected="fast", better="sideways", tolerance_abs=1),
                                                  {"id": "y"}]})
    assert "figure 2 (x): the id is used twice" in problems
    assert "figure 2 (x): expected must be a number, got 'fast'" in problems
    assert "figure 2 (x) needs exactly one of tolerance_pct and tolerance_abs" in problems
    assert "figure 2 (x): better must be higher or lower, got 'sideways'" in problems
    assert "figure 3 (y) has no metric" in problems
    assert br.check_expectations([]) == ["the expectations are not a mapping"]


@pytest.mark.parametrize("name", ["dsv41-flash-tp2", "lab"])
def test_recipe_files_are_usable(name, measurements):
    data = recipe(name)
    assert data["recipe"] == name
    assert br.check_expectations(data) == []
    verdicts = br.judge(data, br.metrics(measurements))
    # Every figure of the recipe is measured by a full run (the fixture ran every phase).
    # The fixture was recorded before decode at depth existed.
    depth = [f["label"] for f in data["figures"] if f["id"] == "decode_at_depth"]
    assert [v["label"] for v in verdicts if v["verdict"] == "not measured"] == depth


def test_published_figures():
    figures = {f["id"]: f for f in recipe("dsv41-flash-tp2")["figures"]}
    assert figures["decode_prose_thinking"]["expected"] == 63.9
    assert figures["decode_prose"]["expected"] == 80.7
    assert figures["decode_code"]["expected"] == 118
    assert figures["aggregate_3_streams"]["expected"] == 171
    assert figures["prefill"]["expected"] == 2150 and figures["prefill"]["range"] == [4096, 262144]
    assert figures["ttft_short"]["expected"] == 214 and figures["ttft_short"]["better"] == "lower"


def test_lab_run_is_within_the_lab_recipe_and_below_the_published_one(measurements):
    lab = br.judge(recipe("lab"), br.metrics(measurements))
    assert {v["verdict"] for v in lab if v["id"] != "decode_at_depth"} == {"within"}  # no depth in the fixture
    published = br.judge(recipe("dsv41-flash-tp2"), br.metrics(measurements))
    regressed = {v["id"] for v in published if v["regression"]}
    # 60 tok/s is within 63.9 +-10% and 161 within 171 +-10%, not within 80.7 or 118 +-10%.
    assert regressed == {"decode_prose", "decode_code"}


def test_markdown(measurements, stamp):
    data = recipe("lab")
    verdicts = br.judge(data, br.metrics(measurements))
    text = bt.render_markdown(measurements, stamp, data, verdicts, [("Throughput", "throughput_vs_streams.png")])
    assert text.startswith("# Benchmark: lab\n")
    assert "**SIMULATED numbers.**" in text
    assert "| engine | commit 0a1b2c3d4e5f60718293a4b5c6d7e8f901234567, build-id 5d1e0c3a9b7f2e41, patches " \
           "0001-dsv41-served-name.patch, built 2026-11-29T20:01:02Z |" in text
    assert "| weights | sparkfold-test/dsv41-flash-exl3@d17a1af21a75dff84c12b89ae207cd43c05865a7 |" in text
    assert "| clocks | NVIDIA GB10, 2418 MHz, 3003 MHz, [N/A], [N/A], P0 |" in text
    assert "12 within, 0 above, 0 below, 1 not measured; 0 regression(s)." in text  # depth: not in the fixture
    assert "| Single-stream decode, prose, T=0, thinking off | 60.0 tok/s | 60 tok/s | ±5% | within |" in text
    assert "| figure | measured | expected | tolerance | verdict |" in text
    assert "| 8 | 8/8 | 0 |" in text
    assert "| 16384 | 16384 | 3/3 |" in text
    assert "![Throughput](throughput_vs_streams.png)" in text
    published = recipe("dsv41-flash-tp2")
    text = bt.render_markdown(measurements, {}, published, br.judge(published, br.metrics(measurements)), [])
    assert "SIMULATED" not in text
    assert "| engine | not available |" in text and "| clocks | not available |" in text
    assert "| 118 tok/s | ±10% | **below** (regression) |" in text
    assert "| TTFT, short prompt (median of the decode runs) | 134 ms | 214 ms | ±25% | below |" in text
