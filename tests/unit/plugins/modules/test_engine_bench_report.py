# SPDX-License-Identifier: GPL-3.0-or-later
"""The sparkfold.cluster.engine_bench_report module in-process: a run directory from a fixed raw-results
fixture (recorded from the lab engine), regressions against the published recipe, check mode, and the
failure without matplotlib."""

import json
import os

import pytest
import yaml
from ansible_collections.sparkfold.cluster.plugins.modules import engine_bench_report

from tests.unit.module_runner import module_runner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PNG = b"\x89PNG\r\n\x1a\n"
PLOTS = ("throughput_vs_streams.png", "prefill_vs_context.png", "ttft_vs_context.png")


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
    assert sorted(os.listdir(run_dir)) == sorted(["results.json", "report.md", *PLOTS])
    for name in PLOTS:
        data = (run_dir / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 10000, name
    report = (run_dir / "report.md").read_text()
    assert "| Single-stream decode, code, T=0, thinking off | 60.0 tok/s | 60 tok/s | ±5% | within |" in report
    assert "| Prefill [32768] | 3942 tok/s | 4000 tok/s | ±10% | within |" in report
    assert "| 3 | 3/3 | 0 | 161 | 60.0 |" in report
    assert "![TTFT vs context](ttft_vs_context.png)" in report
    raw = json.loads((run_dir / "results.json").read_text())
    assert set(raw) == {"stamp", "expectations", "verdicts", "measurements"}
    assert raw["measurements"] == args["measurements"]
    assert result["regressions"] == []
    assert all(line.startswith("within") for line in result["table"])


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
    assert len(result["verdicts"]) == 12
    assert not (tmp_path / "r").exists()


def test_bad_recipe(run, args, tmp_path):
    kind, result, _w = run({"measurements": args["measurements"], "run_dir": str(tmp_path),
                            "expectations": {"figures": [{"id": "a", "metric": "m", "expected": 1}]}})
    assert kind == "fail"
    assert result["msg"] == ("the recipe's expected figures cannot be used: figure 1 (a) needs exactly one of "
                             "tolerance_pct and tolerance_abs. Fix the recipe file (roles/bench/files/recipes/) "
                             "and run again")


def test_without_matplotlib(run, args, tmp_path, monkeypatch):
    monkeypatch.setattr(engine_bench_report, "plt", None)
    monkeypatch.setattr(engine_bench_report, "MPL_IMPORT_ERROR", "ImportError: No module named 'matplotlib'")
    kind, result, _w = run({"measurements": args["measurements"], "run_dir": str(tmp_path / "r")})
    assert kind == "fail"
    assert "matplotlib" in result["msg"] and "make setup" in result["msg"]
    assert not (tmp_path / "r").exists()
    kind, result, _w = run({"measurements": args["measurements"], "run_dir": str(tmp_path / "r"), "plots": False})
    assert kind == "exit"
    assert sorted(os.listdir(tmp_path / "r")) == ["report.md", "results.json"]
    assert "## Plots" not in (tmp_path / "r" / "report.md").read_text()


def test_nothing_measured_still_draws_three_plots(run, tmp_path):
    kind, _result, _w = run({"measurements": {"decode": [], "prefill": [], "concurrency": [], "needle": None},
                             "run_dir": str(tmp_path)})
    assert kind == "exit"
    for name in PLOTS:
        assert (tmp_path / name).read_bytes().startswith(PNG)
