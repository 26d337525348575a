# SPDX-License-Identifier: GPL-3.0-or-later
"""The bench role, run by ansible-playbook on this machine against tests' fake server with a prompt cache
(tests/unit/fake_openai.py PrefixCache).

Issue 31: the Ansible wrapper costs about 2 s of CPU and 2 s of wall time per module call
(benchmarks/bench_wrapper_cost.py measures it), so the whole benchmark, every phase and every stream count of
the grid, is one engine_bench call: the server is asked for its models once. The run directory it writes shows
what the prompt cache gave: the CSV's concurrency rows carry their prompt and cached tokens, and the report's
Prompt cache section finds no row served mostly from the cache.
"""

from __future__ import annotations

import csv
import json
import sys

from tests.unit.fake_openai import FakeEngine, PrefixCache
from tests.unit.playbook import run_playbook

GRID = [1, 2, 3]
REPEATS = 2


def test_the_whole_grid_is_one_module_call_and_the_report_shows_the_cache(tmp_path):
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"head": {"hosts": {"localhost": host}}}}}))
    run_dir = tmp_path / "run"
    cache = PrefixCache()
    with cache.route(FakeEngine()) as fake:
        variables = {
            "recipe_api_port": fake.port, "recipe_api_served_name": "m", "recipe_api_key": "",
            "recipe_model_dir": str(tmp_path / "model"), "recipe_engine_prefix_root": str(tmp_path / "engine"),
            "bench_recipe": "lab", "bench_phases": ["decode", "depth", "concurrency"],
            "bench_decode_cases": [{"name": "prose_t0", "prompt": "prose", "temperature": 0.0, "thinking": False}],
            "bench_decode_repeats": 1, "bench_decode_max_tokens": 8, "bench_depth_tokens": [300],
            "bench_depth_max_tokens": 8, "bench_concurrency_streams": GRID, "bench_concurrency_repeats": REPEATS,
            "bench_concurrency_max_tokens": 8, "bench_progress_interval_s": 1,
            "bench_progress_file": str(tmp_path / "progress.json"), "bench_run_dir": str(run_dir),
            "bench_plots": False,
        }
        play = tmp_path / "play.yml"
        play.write_text("- hosts: head\n  gather_facts: false\n"
                        f"  vars: {json.dumps(variables)}\n"
                        "  tasks:\n    - ansible.builtin.import_role:\n        name: sparkfold.cluster.bench\n")
        result = run_playbook(play, inventory, tmp_path, timeout=300)
        calls = [(method, path) for method, path, _body, _headers in fake.calls]
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    # One engine_bench call for every phase and the whole grid: one untimed warm-up request (each call sends one).
    warm_ups = [text for _path, _n, _cached, text in cache.records if text.split("\n", 1)[0].endswith("(warm-up)")]
    assert len(warm_ups) == 1
    chats = calls.count(("POST", "/v1/chat/completions"))
    assert chats == 1 + 1 + 1 + REPEATS * sum(GRID)  # warm-up, decode, depth, every stream of every round

    rows = list(csv.DictReader((run_dir / "results.csv").open()))
    concurrency = [row for row in rows if row["phase"] == "concurrency"]
    assert [row["streams"] for row in concurrency] == [str(n) for n in GRID for _i in range(REPEATS)]
    for row in concurrency:
        assert row["cached_tokens"] == str(len(PrefixCache.TEMPLATE) * int(row["streams"])), row
        assert int(row["prompt_tokens"]) > 60 * int(row["streams"]), row
    report = (run_dir / "report.md").read_text()
    assert "| concurrency | 12 | " in report and "No row was served mostly from the cache." in report
