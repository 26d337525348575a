# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine units' start gates (roles/engine_service/files/sparkfold-engine-gate.py).

memory: MemAvailable from a meminfo file against the gate, caches dropped through a /proc/sys
tree (a temporary directory here); ready: the /health shapes TensorFold (with and without --parallel's
streams, with API keys on), vLLM and llama.cpp really answer, from tests/unit/fake_openai.py, the
engine's fatal state and its death while waiting; watch: a unit's state from a stand-in `systemctl`
on PATH.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.unit.fake_openai import FakeEngine, tensorfold_health

GATE = pathlib.Path(__file__).resolve().parents[3] / "roles" / "engine_service" / "files" / "sparkfold-engine-gate.py"


@pytest.fixture(scope="module")
def gate():
    spec = importlib.util.spec_from_file_location("sparkfold_engine_gate", GATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("SPARKFOLD_MEMORY_GATE_GIB", "SPARKFOLD_MEMORY_GATE_TIMEOUT_S", "SPARKFOLD_READY_URL",
                 "SPARKFOLD_READY_TIMEOUT_S", "SPARKFOLD_READY_JSON", "MAINPID"):
        monkeypatch.delenv(name, raising=False)


def meminfo(tmp_path, available_kib, total_kib=128 * 1024 * 1024):
    """A stand-in /proc/meminfo, replaced whole as the kernel's is read whole: written in place, a gate polling it
    from another thread could read it truncated and empty (CI: "has no MemAvailable line")."""
    path = tmp_path / "meminfo"
    staged = tmp_path / "meminfo.new"
    staged.write_text(
        f"MemTotal:       {total_kib} kB\nMemFree:         1000 kB\nMemAvailable:   {available_kib} kB\n"
    )
    os.replace(staged, path)
    return path


def proc_sys(tmp_path):
    root = tmp_path / "sys"
    (root / "vm").mkdir(parents=True)
    for name in ("drop_caches", "compact_memory"):
        (root / "vm" / name).write_text("")
    return root


# --- memory ----------------------------------------------------------------------------------


def test_memory_gate_passes_and_drops_caches(gate, tmp_path, capsys):
    sysdir = proc_sys(tmp_path)
    rc = gate.main(["memory", "--gib", "100", "--timeout", "1", "--meminfo", str(meminfo(tmp_path, 110 * 1024 * 1024)),
                    "--proc-sys", str(sysdir)])
    assert rc == 0
    assert (sysdir / "vm" / "drop_caches").read_text() == "3"
    assert (sysdir / "vm" / "compact_memory").read_text() == "1"
    assert "memory gate passed: MemAvailable 110.0 GiB >= 100 GiB" in capsys.readouterr().err


def test_memory_gate_not_met_gives_both_numbers(gate, tmp_path, capsys):
    started = time.monotonic()
    info = meminfo(tmp_path, int(87.3 * 1024 * 1024))
    rc = gate.main(["memory", "--gib", "100", "--timeout", "0.3", "--interval", "0.1",
                    "--meminfo", str(info), "--proc-sys", str(proc_sys(tmp_path))])
    assert rc == 1
    assert time.monotonic() - started < 2
    err = capsys.readouterr().err
    assert "memory gate not met: MemAvailable is 87.3 GiB after 0.3 s, the recipe needs 100 GiB" in err
    assert "memory.gate_gib" in err


def test_memory_gate_waits_for_memory_to_come_back(gate, tmp_path):
    path = meminfo(tmp_path, 50 * 1024 * 1024)

    def free_later():
        time.sleep(0.3)
        meminfo(tmp_path, 120 * 1024 * 1024)

    thread = threading.Thread(target=free_later)
    thread.start()
    rc = gate.main(["memory", "--gib", "100", "--timeout", "5", "--interval", "0.1", "--meminfo", str(path),
                    "--proc-sys", str(proc_sys(tmp_path))])
    thread.join()
    assert rc == 0


def test_memory_gate_goes_on_when_caches_cannot_be_dropped(gate, tmp_path, capsys):
    rc = gate.main(["memory", "--gib", "1", "--timeout", "1", "--meminfo", str(meminfo(tmp_path, 2 * 1024 * 1024)),
                    "--proc-sys", str(tmp_path / "read-only")])
    assert rc == 0
    err = capsys.readouterr().err
    assert "could not write" in err and "drop_caches" in err and "continuing" in err


def test_memory_gate_reads_the_environment_file_settings(gate, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPARKFOLD_MEMORY_GATE_GIB", "200")
    monkeypatch.setenv("SPARKFOLD_MEMORY_GATE_TIMEOUT_S", "0.1")
    rc = gate.main(["memory", "--meminfo", str(meminfo(tmp_path, 100 * 1024 * 1024)), "--proc-sys", str(tmp_path)])
    assert rc == 1
    assert "the recipe needs 200 GiB" in capsys.readouterr().err


def test_memory_gate_without_a_setting_or_meminfo_is_a_usage_error(gate, tmp_path, capsys):
    assert gate.main(["memory", "--meminfo", str(meminfo(tmp_path, 1))]) == 2
    assert "no memory gate set" in capsys.readouterr().err
    (tmp_path / "bad").write_text("MemTotal: 1 kB\n")
    assert gate.main(["memory", "--gib", "1", "--meminfo", str(tmp_path / "bad"), "--proc-sys", str(tmp_path)]) == 2
    assert "has no MemAvailable line" in capsys.readouterr().err


# --- ready -----------------------------------------------------------------------------------


def health_engine(answers):
    """A FakeEngine answering /health with the (status, body) pairs of `answers`, the last one forever."""
    return FakeEngine().route("GET", "/health", lambda body, number: answers[min(number, len(answers)) - 1])


@pytest.mark.parametrize(
    "answers",
    [
        [(200, tensorfold_health())],
        [(200, tensorfold_health(1048576, parallel=4))],
        [(200, tensorfold_health(1048576, parallel=4, decoding=3, prefilling=1, running=4))],
        [(200, {"status": "ok"})],
        [(200, "")],
        [(503, {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}),
         (200, {"status": "ok"})],
    ],
    ids=["tensorfold", "tensorfold-parallel", "tensorfold-busy", "api-key-mode", "vllm", "llama.cpp-loading"],
)
def test_ready_gate_accepts_the_engines_health_shapes(gate, answers, capsys):
    with health_engine(answers) as engine:
        assert gate.main(["ready", "--url", engine.url + "/health", "--timeout", "5", "--interval", "0.05"]) == 0
    assert "engine ready" in capsys.readouterr().err


@pytest.mark.parametrize(
    "body",
    [{"ok": False, "error": "follower rank 1 lost: connection closed"}, {"status": "error"}],
    ids=["tensorfold", "api-key-mode"],
)
def test_ready_gate_stops_on_the_engines_fatal_state(gate, body, capsys):
    started = time.monotonic()
    with health_engine([(503, body)]) as engine:
        assert gate.main(["ready", "--url", engine.url + "/health", "--timeout", "30", "--interval", "0.05"]) == 1
    assert time.monotonic() - started < 5
    assert "fatal state" in capsys.readouterr().err


def test_ready_gate_waits_while_a_200_says_not_ok(gate, capsys):
    with health_engine([(200, {"ok": False}), (200, {"status": "loading"}), (200, tensorfold_health())]) as engine:
        assert gate.main(["ready", "--url", engine.url + "/health", "--timeout", "5", "--interval", "0.05"]) == 0
        assert len(engine.calls) == 3
    assert "engine ready" in capsys.readouterr().err


def test_ready_gate_with_json_waits_past_an_empty_200(gate, monkeypatch, capsys):
    """TensorFold's Python engine (recipe ready.json): only its JSON ok is ready, not an empty or a text 200."""
    monkeypatch.setenv("SPARKFOLD_READY_JSON", "1")
    with health_engine([(200, ""), (200, "OK"), (200, tensorfold_health())]) as engine:
        assert gate.main(["ready", "--url", engine.url + "/health", "--timeout", "5", "--interval", "0.05"]) == 0
        assert len(engine.calls) == 3
    with health_engine([(200, "")]) as engine:
        assert gate.main(["ready", "--url", engine.url + "/health", "--timeout", "0.3", "--interval", "0.05"]) == 1
    assert "HTTP 200 with an empty body, not the JSON ready answer" in capsys.readouterr().err


def test_ready_gate_times_out_naming_the_last_answer(gate, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    url = f"http://127.0.0.1:{port}/health"
    assert gate.main(["ready", "--url", url, "--timeout", "0.5", "--interval", "0.1"]) == 1
    assert time.monotonic() - started < 3
    err = capsys.readouterr().err
    assert "engine not ready after 0.5 s" in err and "Connection refused" in err


def test_ready_gate_stops_when_the_engine_exited(gate, monkeypatch, capsys):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    monkeypatch.setenv("MAINPID", done.stdout.strip())
    started = time.monotonic()
    assert gate.main(["ready", "--url", "http://127.0.0.1:9/health", "--timeout", "60"]) == 1
    assert time.monotonic() - started < 2
    assert "exited before it was ready" in capsys.readouterr().err


def test_ready_gate_keeps_waiting_while_the_engine_lives(gate, monkeypatch):
    monkeypatch.setenv("MAINPID", str(os.getpid()))
    assert gate.main_pid_gone(os.getpid()) is False
    with health_engine([(200, {"ok": True})]) as engine:
        assert gate.main(["ready", "--url", engine.url + "/health", "--timeout", "5"]) == 0


# --- watch -----------------------------------------------------------------------------------


@pytest.fixture
def fake_systemctl(tmp_path, monkeypatch):
    """A `systemctl` on PATH whose `show` prints the file `state` (one Property=value per line)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    state = tmp_path / "state"
    script = bindir / "systemctl"
    script.write_text(f"#!/bin/sh\ncat {state}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return state


def test_watch_passes_while_the_follower_stays_up(gate, fake_systemctl, capsys):
    fake_systemctl.write_text("ActiveState=active\nSubState=running\nResult=success\nExecMainStatus=0\nNRestarts=0\n")
    assert gate.main(["watch", "sparkfold-engine@1.service", "--seconds", "0.3", "--interval", "0.1"]) == 0
    assert "is up" in capsys.readouterr().err


def test_watch_fails_when_the_follower_refused_to_start(gate, fake_systemctl, capsys):
    fake_systemctl.write_text("ActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainStatus=2\nNRestarts=0\n")
    assert gate.main(["watch", "sparkfold-engine@1.service", "--seconds", "5", "--interval", "0.1"]) == 1
    err = capsys.readouterr().err
    assert "did not stay up: failed/failed, result exit-code, exit status 2" in err
    assert "journalctl -u sparkfold-engine@1.service" in err


def test_watch_fails_when_the_follower_restarts(gate, fake_systemctl):
    fake_systemctl.write_text("ActiveState=active\nSubState=running\nResult=success\nExecMainStatus=0\nNRestarts=0\n")

    def restart_later():
        time.sleep(0.2)
        staged = fake_systemctl.with_name(fake_systemctl.name + ".new")  # replaced whole: never read half-written
        staged.write_text("ActiveState=activating\nSubState=start-pre\nResult=success\nExecMainStatus=1\nNRestarts=1\n")
        os.replace(staged, fake_systemctl)

    thread = threading.Thread(target=restart_later)
    thread.start()
    assert gate.main(["watch", "sparkfold-engine@1.service", "--seconds", "3", "--interval", "0.05"]) == 1
    thread.join()


# --- stale -----------------------------------------------------------------------------------


def stale_node(tmp_path, fake_systemctl, started):
    """A unit directory with ranks 0 and 1 of this node, the ranks active since `started` (epoch seconds), as
    systemd says it: microseconds of CLOCK_MONOTONIC."""
    units = tmp_path / "units"
    for name in ("sparkfold-engine@0.service.d", "sparkfold-engine@1.service.d", "other.service.d"):
        (units / name).mkdir(parents=True)
    for name in ("sparkfold-engine@0.service.d", "sparkfold-engine@1.service.d"):
        (units / name / "rank.conf").write_text("[Service]\n")
        os.utime(units / name / "rank.conf", (started - 1, started - 1))
        os.utime(units / name, (started - 1, started - 1))
    monotonic_us = int((time.monotonic() - (time.time() - started)) * 1e6)
    fake_systemctl.write_text(f"ActiveState=active\nActiveEnterTimestampMonotonic={monotonic_us}\n")
    return units


def test_stale_names_ranks_that_started_before_an_input_changed(gate, fake_systemctl, tmp_path, capsys):
    # an interrupted run: engine.env and the build's `current` link changed after the ranks started
    env = tmp_path / "engine.env"
    env.write_text("A=1\n")
    builds = tmp_path / "engine"
    (builds / "b1").mkdir(parents=True)
    (builds / "current").symlink_to("b1")
    started = int(time.time()) - 100
    os.utime(builds / "b1", (started - 500, started - 500))  # the target's age does not count, the link's does
    units = stale_node(tmp_path, fake_systemctl, started)
    assert gate.main(["stale", "--unit-dir", str(units), "--inputs", str(env), str(builds / "current"),
                      str(tmp_path / "missing.env")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["unit"] for s in out["stale"]] == ["sparkfold-engine@0.service", "sparkfold-engine@1.service"]
    assert out["stale"][0]["newer"] == sorted([str(env), str(builds / "current")])


def test_a_rank_started_a_fraction_of_a_second_after_its_input_is_not_stale(gate, fake_systemctl, tmp_path, capsys):
    env = tmp_path / "engine.env"
    env.write_text("A=1\n")
    changed = int(time.time()) - 5 + 0.2
    os.utime(env, (changed, changed))
    units = stale_node(tmp_path, fake_systemctl, changed + 0.3)  # the same whole second, 0.3 s later
    assert gate.main(["stale", "--unit-dir", str(units), "--inputs", str(env)]) == 0
    assert json.loads(capsys.readouterr().out) == {"stale": []}


def test_stale_is_empty_when_the_ranks_started_after_every_input(gate, fake_systemctl, tmp_path, capsys):
    env = tmp_path / "engine.env"
    env.write_text("A=1\n")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "rank0of2.bin").write_text("x")
    old = time.time() - 1000
    for path in (env, inputs, inputs / "rank0of2.bin"):
        os.utime(path, (old, old))
    units = stale_node(tmp_path, fake_systemctl, int(time.time()) - 10)
    assert gate.main(["stale", "--unit-dir", str(units), "--inputs", str(env), str(inputs)]) == 0
    assert json.loads(capsys.readouterr().out) == {"stale": []}
    # a rank's own drop-in, rewritten after it started
    (units / "sparkfold-engine@1.service.d" / "rank.conf").write_text("[Service]\nExecStart=/new\n")
    assert gate.main(["stale", "--unit-dir", str(units), "--inputs", str(env)]) == 0
    assert [s["unit"] for s in json.loads(capsys.readouterr().out)["stale"]] == ["sparkfold-engine@1.service"]
    (units / "sparkfold-engine@1.service.d" / "rank.conf").unlink()
    # a file that changes in the inputs directory (one level down) makes the ranks stale
    (inputs / "rank0of2.bin").write_text("y")
    assert gate.main(["stale", "--unit-dir", str(units), "--inputs", str(env), str(inputs)]) == 0
    assert json.loads(capsys.readouterr().out)["stale"][0]["newer"] == [str(inputs / "rank0of2.bin")]


def test_stale_leaves_out_ranks_that_do_not_run(gate, fake_systemctl, tmp_path, capsys):
    env = tmp_path / "engine.env"
    env.write_text("A=1\n")
    units = stale_node(tmp_path, fake_systemctl, time.time())
    fake_systemctl.write_text("ActiveState=inactive\nActiveEnterTimestampMonotonic=0\n")
    assert gate.main(["stale", "--unit-dir", str(units), "--inputs", str(env)]) == 0
    assert json.loads(capsys.readouterr().out) == {"stale": []}


def test_stale_with_units_also_reports_each_ranks_state_and_the_named_units(gate, fake_systemctl, tmp_path, capsys):
    env = tmp_path / "engine.env"
    env.write_text("A=1\n")
    units = stale_node(tmp_path, fake_systemctl, time.time())
    fake_systemctl.write_text(fake_systemctl.read_text() + "SubState=running\nUnitFileState=enabled\nResult=success\n")
    assert gate.main(["stale", "--unit-dir", str(units), "--inputs", str(env),
                      "--units", "sparkfold-engine.target", "sparkfold-engine@1.service"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stale"] == []
    state = {"ActiveState": "active", "SubState": "running", "UnitFileState": "enabled", "Result": "success"}
    assert out["units"] == {"sparkfold-engine@0.service": state, "sparkfold-engine@1.service": state,
                            "sparkfold-engine.target": state}


# --- ready as each recipe's source decides --------------------------------------------------------------------------
# TP4 (bertholomus/deepseek-v4.1-tensorfold-tp4-4xgb10 scripts/serve.sh @6033ea48): /v1/models lists SERVED_NAME, then
# `check` once: a 4-token chat whose answer holds "choices", else "up, but the chat check failed".
SAY_OK = {"model": "DeepSeek-V4.1-Flash-TP4", "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4,
          "temperature": 0, "chat_template_kwargs": {"enable_thinking": False}}
MODELS = {"object": "list", "data": [{"id": "DeepSeek-V4.1-Flash-TP4", "object": "model"}]}
CHOICES = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "length"}]}


def _tp4_args(engine, key_file=None):
    args = ["ready", "--url", engine.url + "/health", "--timeout", "5", "--interval", "0.05",
            "--models-url", engine.url + "/v1/models", "--served-name", "DeepSeek-V4.1-Flash-TP4",
            "--chat-url", engine.url + "/v1/chat/completions", "--chat", json.dumps(SAY_OK)]
    return args + (["--api-key-file", str(key_file)] if key_file else [])


def test_ready_gate_waits_for_the_models_list_then_asks_one_short_chat(gate, tmp_path, capsys):
    key = tmp_path / "engine-api-key"
    key.write_text("sk-test\n")
    models = [(200, {"object": "list", "data": []}), (200, MODELS)]
    with (FakeEngine()
          .route("GET", "/health", lambda body, n: (200, {"status": "ok"}))
          .route("GET", "/v1/models", lambda body, n: models[min(n, 2) - 1])
          .route("POST", "/v1/chat/completions", lambda body, n: (200, CHOICES))) as engine:
        assert gate.main(_tp4_args(engine, key)) == 0
        chats = [c for c in engine.calls if c[1] == "/v1/chat/completions"]
        listed = [c for c in engine.calls if c[1] == "/v1/models"]
    assert len(listed) == 2 and len(chats) == 1
    assert chats[0][2] == SAY_OK
    assert chats[0][3]["Authorization"] == "Bearer sk-test" and listed[0][3]["Authorization"] == "Bearer sk-test"
    assert "engine ready" in capsys.readouterr().err


def test_ready_gate_fails_the_start_when_the_chat_check_fails(gate, capsys):
    started = time.monotonic()
    with (FakeEngine()
          .route("GET", "/health", lambda body, n: (200, tensorfold_health()))
          .route("GET", "/v1/models", lambda body, n: (200, MODELS))
          .route("POST", "/v1/chat/completions",
                 lambda body, n: (500, {"error": {"message": "CUDA error: an illegal memory access"}}))) as engine:
        assert gate.main(_tp4_args(engine)) == 1
        assert len([c for c in engine.calls if c[1] == "/v1/chat/completions"]) == 1
    assert time.monotonic() - started < 3
    err = capsys.readouterr().err
    assert "engine up, but its chat check failed" in err and "HTTP 500" in err and "illegal memory access" in err


def test_ready_gate_health_alone_is_not_ready_when_the_models_list_lacks_the_name(gate, capsys):
    with (FakeEngine()
          .route("GET", "/health", lambda body, n: (200, tensorfold_health()))
          .route("GET", "/v1/models", lambda body, n: (200, {"data": [{"id": "other"}]}))) as engine:
        args = _tp4_args(engine)
        args[args.index("--timeout") + 1] = "0.4"
        assert gate.main(args) == 1
        assert not [c for c in engine.calls if c[1] == "/v1/chat/completions"]
    assert "lists other, not DeepSeek-V4.1-Flash-TP4" in capsys.readouterr().err


def _runtime(tmp_path, log_file):
    """A stand-in container runtime: `<it> logs NAME` prints log_file (as podman logs prints the container's output)."""
    script = tmp_path / "runtime"
    script.write_text(f'#!/bin/sh\n[ "$1" = logs ] && [ "$2" = sparkfold-engine-0 ] || exit 125\ncat {log_file}\n')
    script.chmod(0o755)
    return script


# SGLang (MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks start.sh @e0985205): ready once boot.py printed
# `^Ready: API on port ${PORT}` (after /health, its smoke test and its warm-up), not at /health.
def test_ready_gate_waits_for_rank_0s_log_line_after_health(gate, tmp_path, capsys):
    log_file = tmp_path / "head.log"
    log_file.write_text("[2026-09-11 23:47:01] INFO: The server is fired up and ready to roll!\n")

    def later():
        time.sleep(0.5)
        with open(log_file, "a", encoding="utf-8") as handle:
            handle.write("Warm-up done in 15s (4 prompt sizes + one batch of 4)\n"
                         "Ready: API on port 8000 (rank 0), no API key.\n")

    writer = threading.Thread(target=later)
    with FakeEngine().route("GET", "/health", lambda body, n: (200, "")) as engine:
        writer.start()
        started = time.monotonic()
        rc = gate.main(["ready", "--url", engine.url + "/health", "--timeout", "10", "--interval", "0.05",
                        "--log-runtime", str(_runtime(tmp_path, log_file)), "--log-container", "sparkfold-engine-0",
                        "--log-pattern", "^Ready: API on port 8000"])
        writer.join()
    assert rc == 0
    assert time.monotonic() - started >= 0.4
    assert "sparkfold-engine-0 logged: Ready: API on port 8000 (rank 0), no API key." in capsys.readouterr().err


def test_ready_gate_log_line_of_another_port_is_not_ready(gate, tmp_path, capsys):
    log_file = tmp_path / "head.log"
    log_file.write_text("Ready: API on port 8888 (rank 0), no API key.\n  Ready: API on port 8000\n")
    with FakeEngine().route("GET", "/health", lambda body, n: (200, "")) as engine:
        assert gate.main(["ready", "--url", engine.url + "/health", "--timeout", "0.4", "--interval", "0.05",
                          "--log-runtime", str(_runtime(tmp_path, log_file)), "--log-container",
                          "sparkfold-engine-0", "--log-pattern", "^Ready: API on port 8000"]) == 1
    assert "matches '^Ready: API on port 8000' yet" in capsys.readouterr().err


@pytest.mark.parametrize("args, says", [
    (["--models-url", "http://127.0.0.1:1/v1/models"], "go together"),
    (["--chat", "{}"], "needs --chat-url"),
    (["--chat", "{", "--chat-url", "http://127.0.0.1:1/c"], "is not JSON"),
    (["--log-pattern", "^Ready"], "needs --log-container and --log-runtime"),
    (["--log-pattern", "(", "--log-container", "c", "--log-runtime", "podman"], "is not a regular expression"),
    (["--api-key-file", "/nonexistent/key"], "cannot read the API key file /nonexistent/key"),
])
def test_ready_gate_refuses_incomplete_settings(gate, args, says, capsys):
    assert gate.main(["ready", "--url", "http://127.0.0.1:1/health", *args]) == 2
    assert says in capsys.readouterr().err
