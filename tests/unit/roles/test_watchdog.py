# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine's watchdog (roles/watchdog/files/sparkfold-watchdog.py) run against tests/unit/fake_openai.py.

Rank 0's /health is the fake server (TensorFold's shapes, its 503 of a lost rank, a port that never answers); the
engine's real gate judges each answer. `systemctl` is a stand-in on PATH that logs every call with the node it ran
on (rank 1's `via` sets FAKE_NODE, as ssh to the worker would) and answers `show` from a state directory. The
textfile is read back with prometheus_client's own parser.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.fake_openai import FakeEngine, silent_server, tensorfold_health

ROOT = pathlib.Path(__file__).resolve().parents[3]
WATCHDOG = ROOT / "roles" / "watchdog" / "files" / "sparkfold-watchdog.py"
GATE = ROOT / "roles" / "engine_service" / "files" / "sparkfold-engine-gate.py"

FAKE_SYSTEMCTL = """#!/bin/sh
node="${FAKE_NODE:-spark-a}"
echo "$node $*" >> "$FAKE_LOG"
if [ "$1" = show ]; then
  unit="$(for a in "$@"; do :; done; echo "$a")"
  state="$(cat "$FAKE_STATES/$node-$unit" 2>/dev/null || echo active)"
  case "$*" in
    *--value*) echo "$state" ;;
    *) printf 'ActiveState=%s\\nSubState=running\\nResult=success\\nExecMainStatus=0\\nNRestarts=0\\n' "$state" ;;
  esac
fi
exit 0
"""


@pytest.fixture(scope="module")
def watchdog():
    spec = importlib.util.spec_from_file_location("sparkfold_watchdog", WATCHDOG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A head node in tmp_path: the stand-in systemctl on PATH, its log and states, engine.env, the lock's path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(FAKE_SYSTEMCTL)
    systemctl.chmod(0o755)
    (tmp_path / "states").mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "systemctl.log"))
    monkeypatch.setenv("FAKE_STATES", str(tmp_path / "states"))
    monkeypatch.delenv("FAKE_NODE", raising=False)
    return tmp_path


def config(tmp_path, url, world=2, order="followers_first", **extra):
    (tmp_path / "engine.env").write_text(f"# rank 0\nTF_DS_REPLAY_FLOOR=1\nSPARKFOLD_READY_URL={url}/health\n"
                                         "SPARKFOLD_READY_JSON=1\n")
    build = tmp_path / "builds" / "0a0b69a-3f2e"
    build.mkdir(parents=True, exist_ok=True)
    if not (tmp_path / "current-link").is_symlink():
        (tmp_path / "current-link").symlink_to(build)
    (tmp_path / "weights.json").write_text(json.dumps({"repo_id": "MiaAI/DSv41-EXL3", "commit": "afc7aa0a" * 5,
                                                       "revision": "main"}))
    nodes = ["spark-a", "spark-b", "spark-c", "spark-d"]
    data = {
        "engine_env": str(tmp_path / "engine.env"), "gate": str(GATE), "python": sys.executable,
        "systemctl": "systemctl", "state_file": str(tmp_path / "state" / "state.json"),
        "lock_file": str(tmp_path / "cluster.lock"), "failures": 2, "window_s": 600, "order": order,
        "follower_watch_s": 0.2, "probe_timeout_s": 1, "textfile": str(tmp_path / "textfile" / "sparkfold.prom"),
        "recipe": "dsv41-flash-tp2-zig", "build_link": str(tmp_path / "current-link"),
        "weights_record": str(tmp_path / "weights.json"),
        "ranks": [{"rank": r, "node": nodes[r], "via": [] if r == 0 else ["env", f"FAKE_NODE={nodes[r]}"]}
                  for r in range(world)],
    }
    data.update(extra)
    path = tmp_path / "watchdog.json"
    path.write_text(json.dumps(data))
    return path


def calls(tmp_path):
    """The systemctl calls that act (show and reset-failed left out), as 'node action unit'."""
    log = tmp_path / "systemctl.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.split()[1] in ("stop", "start", "restart")]


def metrics(tmp_path):
    text = (tmp_path / "textfile" / "sparkfold.prom").read_text()
    return {sample.name: sample for family in text_string_to_metric_families(text) for sample in family.samples}


def lost_rank(_body, _n):
    return 503, {"ok": False, "error": "rank 1 lost: NCCL communicator aborted"}


def test_healthy_engine_writes_the_textfile_and_touches_no_rank(watchdog, node, capsys):
    with FakeEngine() as fake:
        fake.route("GET", "/health", lambda _b, _n: (200, tensorfold_health(context_length=1048576, parallel=4)))
        assert watchdog.main(["--config", str(config(node, fake.url))]) == 0
    assert calls(node) == []
    found = metrics(node)
    assert found["sparkfold_engine_healthy"].value == 1
    assert found["sparkfold_engine_health_failures"].value == 0
    assert found["sparkfold_engine_build_info"].labels["build"] == "0a0b69a-3f2e"
    assert found["sparkfold_weights_info"].labels == {"recipe": "dsv41-flash-tp2-zig", "repo_id": "MiaAI/DSv41-EXL3",
                                                      "revision": "afc7aa0a" * 5}
    assert found["sparkfold_watchdog_restarts_total"].value == 0
    assert found["sparkfold_watchdog_last_restart_timestamp_seconds"].value == 0
    assert oct((node / "state" / "state.json").stat().st_mode & 0o777) == "0o600"


def test_n_failures_restart_followers_first_then_rank0_and_the_textfile_records_it(watchdog, node, capsys):
    with FakeEngine() as fake:
        fake.route("GET", "/health", lost_rank)
        path = str(config(node, fake.url))
        assert watchdog.main(["--config", path]) == 1
        assert calls(node) == [], "one failure of two: counted, nothing restarted"
        assert metrics(node)["sparkfold_engine_health_failures"].value == 1
        before = time.time()
        assert watchdog.main(["--config", path]) == 1
    assert calls(node) == ["spark-a stop sparkfold-engine@0.service", "spark-b restart sparkfold-engine@1.service",
                           "spark-a start sparkfold-engine@0.service"]
    log = (node / "systemctl.log").read_text()
    assert "spark-b show --property=ActiveState,SubState,Result,ExecMainStatus,NRestarts sparkfold-engine@1.service" \
        in log, "the follower is watched (the gate's `watch`) on its own node before rank 0 starts"
    found = metrics(node)
    assert found["sparkfold_watchdog_restarts_total"].value == 1
    assert found["sparkfold_watchdog_last_restart_timestamp_seconds"].value >= int(before)
    info = found["sparkfold_watchdog_last_restart_info"].labels
    assert info["result"] == "ok"
    assert "2 failed health probes: fatal (HTTP 503" in info["reason"] and "rank 1 lost" in info["reason"]
    out = capsys.readouterr().out
    assert "<4>restarting the ranks in order (followers_first)" in out
    assert "<5>rank 1 restarted on spark-b" in out


@pytest.mark.parametrize(("order", "followers"), [("ascending", [("spark-b", 1), ("spark-c", 2), ("spark-d", 3)]),
                                                  ("descending", [("spark-d", 3), ("spark-c", 2), ("spark-b", 1)])])
def test_a_tp4_recipe_restarts_its_followers_in_the_recipes_order(watchdog, node, order, followers):
    with silent_server() as url:
        path = str(config(node, url, world=4, order=order, failures=1))
        assert watchdog.main(["--config", path]) == 1
    assert calls(node) == (["spark-a stop sparkfold-engine@0.service"]
                           + [f"{name} restart sparkfold-engine@{rank}.service" for name, rank in followers]
                           + ["spark-a start sparkfold-engine@0.service"])


def test_one_restart_per_window(watchdog, node, capsys):
    with FakeEngine() as fake:
        fake.route("GET", "/health", lost_rank)
        path = str(config(node, fake.url, failures=1, window_s=3600))
        assert watchdog.main(["--config", path]) == 1
        assert watchdog.main(["--config", path]) == 1
    assert len(calls(node)) == 3, "the second run is within the window: no second restart"
    assert "not restarting: the last restart was" in capsys.readouterr().out
    assert metrics(node)["sparkfold_watchdog_restarts_total"].value == 1


def test_site_yml_lock_holds_the_watchdog_back_until_it_expires(watchdog, node, capsys):
    with FakeEngine() as fake:
        fake.route("GET", "/health", lost_rank)
        path = str(config(node, fake.url, failures=1))
        lease = {"holder": "site.yml", "controller": "laptop", "since": time.time(), "expires": time.time() + 600}
        (node / "cluster.lock").write_text(json.dumps(lease))
        assert watchdog.main(["--config", path]) == 1
        assert calls(node) == []
        assert "not restarting: the cluster's lock is held by site.yml from laptop" in capsys.readouterr().out
        assert metrics(node)["sparkfold_watchdog_lock_held"].value == 1
        # a run that died without releasing it: the lease expires
        (node / "cluster.lock").write_text(json.dumps({**lease, "expires": time.time() - 1}))
        assert watchdog.main(["--config", path]) == 1
    assert len(calls(node)) == 3
    assert metrics(node)["sparkfold_watchdog_lock_held"].value == 0


@pytest.mark.parametrize("state", ["activating", "inactive"])
def test_a_loading_or_stopped_rank0_is_not_counted(watchdog, node, state, capsys):
    (node / "states" / "spark-a-sparkfold-engine@0.service").write_text(state)
    with silent_server() as url:
        path = str(config(node, url, failures=1))
        assert watchdog.main(["--config", path]) == 0
    assert calls(node) == []
    assert metrics(node)["sparkfold_engine_health_failures"].value == 0
    assert "not counted" in capsys.readouterr().out


def test_a_follower_that_does_not_stay_up_leaves_rank0_stopped_and_is_recorded(watchdog, node):
    (node / "states" / "spark-b-sparkfold-engine@1.service").write_text("failed")
    with silent_server() as url:
        assert watchdog.main(["--config", str(config(node, url, failures=1))]) == 1
    assert calls(node) == ["spark-a stop sparkfold-engine@0.service", "spark-b restart sparkfold-engine@1.service"]
    result = metrics(node)["sparkfold_watchdog_last_restart_info"].labels["result"]
    assert result.startswith("rank 1 on spark-b did not stay up")


def test_a_bad_configuration_is_refused_before_any_probe(watchdog, node, capsys):
    path = config(node, "http://127.0.0.1:9", order="random")
    assert watchdog.main(["--config", str(path)]) == 2
    assert "order 'random' is not followers_first, ascending or descending" in capsys.readouterr().out
    assert not (node / "systemctl.log").exists()


def test_the_program_runs_as_the_unit_runs_it(node):
    """python3 FILE --config ...: no import from the collection, the journal's priority prefixes on stdout."""
    with FakeEngine() as fake:
        fake.route("GET", "/health", lost_rank)
        path = config(node, fake.url, failures=3)
        done = subprocess.run([sys.executable, str(WATCHDOG), "--config", str(path)], capture_output=True, text=True,
                              check=False, env=dict(os.environ, PYTHONPATH=""))
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("<4>") and "failure 1 of 3" in done.stdout
