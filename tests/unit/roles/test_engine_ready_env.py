# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rank 0's engine.env (roles/engine_service/templates/engine.env.j2) carries each recipe's readiness, and the unit's
ready gate (files/sparkfold-engine-gate.py), run with that environment as systemd gives it, waits for what the
recipe's source waits for: the shipped TP4 recipe's /v1/models then one 4-token chat (with the key), the SGLang ring
recipe's boot.py banner in rank 0's container log."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import pytest

from tests.unit.fake_openai import FakeEngine, tensorfold_health
from tests.unit.playbook import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]
TEMPLATE = ROOT / "roles" / "engine_service" / "templates" / "engine.env.j2"
GATE = ROOT / "roles" / "engine_service" / "files" / "sparkfold-engine-gate.py"
RECIPES = ROOT / "roles" / "recipe" / "recipes"

PLAY = """
- name: Render rank 0's engine.env
  hosts: localhost
  gather_facts: false
  vars:
    recipe_spec: "{{ lookup('ansible.builtin.file', recipe_file) | from_yaml | sparkfold.cluster.recipe_check }}"
  tasks:
    - name: Render it
      ansible.builtin.copy:
        content: "{{ lookup('ansible.builtin.template', template_file) }}"
        dest: "{{ out_file }}"
        mode: "0600"
"""


@pytest.fixture(scope="module")
def gate():
    spec = importlib.util.spec_from_file_location("sparkfold_engine_gate_env", GATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render(tmp_path, recipe, port, key="", container=False, runtime="/usr/bin/podman"):
    (tmp_path / "inventory.yml").write_text(
        f"all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")
    (tmp_path / "play.yml").write_text(PLAY)
    out = tmp_path / "engine.env"
    extra = {
        "recipe_file": str(RECIPES / recipe), "template_file": str(TEMPLATE), "out_file": str(out),
        "recipe_rank": 0, "recipe_world": 4, "recipe_api_host": "0.0.0.0", "recipe_api_port": port,
        "recipe_api_served_name": "DeepSeek-V4.1-Flash-TP4", "recipe_api_key": key,
        "recipe_api_key_file": str(tmp_path / "engine-api-key"), "engine_service_env_files": [],
        "engine_service_launch_env": {}, "engine_service_env": {}, "engine_service_ready_timeout_s": 5,
        "engine_service_container": container, "engine_service_container_runtime_bin": runtime,
        "engine_service_container_name": "sparkfold-engine-0",
    }
    proc = run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path, ["-e", json.dumps(extra)])
    assert proc.returncode == 0, proc.stdout[-3000:]
    return out.read_text()


def systemd_env(text):
    """KEY=VALUE lines as systemd's EnvironmentFile= reads these (no value here starts with a quote)."""
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_tp4_ready_env_waits_for_the_models_list_then_one_short_chat(gate, tmp_path, monkeypatch):
    calls = []
    with (FakeEngine()
          .route("GET", "/health", lambda body, n: (200, tensorfold_health()))
          .route("GET", "/v1/models", lambda body, n: (200, {"data": [{"id": "DeepSeek-V4.1-Flash-TP4"}]}))
          .route("POST", "/v1/chat/completions", lambda body, n: (200, {"choices": [{"index": 0}]}))) as engine:
        env = systemd_env(render(tmp_path, "dsv41-flash-tp4-zig.yml", engine.port, key="sk-x"))
        (tmp_path / "engine-api-key").write_text("sk-x\n")
        assert env["SPARKFOLD_READY_URL"] == f"http://127.0.0.1:{engine.port}/health"
        assert env["SPARKFOLD_READY_MODELS_URL"] == f"http://127.0.0.1:{engine.port}/v1/models"
        assert env["SPARKFOLD_READY_SERVED_NAME"] == "DeepSeek-V4.1-Flash-TP4"
        assert json.loads(env["SPARKFOLD_READY_CHAT"]) == {
            "model": "DeepSeek-V4.1-Flash-TP4", "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4,
            "temperature": 0, "chat_template_kwargs": {"enable_thinking": False}}
        assert "SPARKFOLD_READY_LOG_PATTERN" not in env
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert gate.main(["ready", "--interval", "0.05"]) == 0
        calls = [(c[0], c[1], c[3].get("Authorization")) for c in engine.calls]
    assert ("GET", "/v1/models", "Bearer sk-x") in calls
    assert calls[-1] == ("POST", "/v1/chat/completions", "Bearer sk-x")


def test_tp2_ready_env_is_health_alone(tmp_path):
    env = systemd_env(render(tmp_path, "dsv41-flash-tp2-zig.yml", 8000))
    assert env["SPARKFOLD_READY_URL"] == "http://127.0.0.1:8000/health"
    assert not [name for name in env if name.startswith("SPARKFOLD_READY_") and name not in
                ("SPARKFOLD_READY_URL", "SPARKFOLD_READY_TIMEOUT_S")]


def test_sglang_ready_env_waits_for_boot_pys_banner(gate, tmp_path, monkeypatch):
    log_file = tmp_path / "head.log"
    log_file.write_text("INFO: The server is fired up and ready to roll!\n")
    runtime = tmp_path / "podman"
    runtime.write_text(f'#!/bin/sh\n[ "$1" = logs ] && [ "$2" = sparkfold-engine-0 ] || exit 125\ncat {log_file}\n')
    runtime.chmod(0o755)
    with FakeEngine().route("GET", "/health", lambda body, n: (200, "")) as engine:
        env = systemd_env(render(tmp_path, "dsv41-flash-tp4-ring-sglang.yml", engine.port, container=True,
                                 runtime=str(runtime)))
        assert env["SPARKFOLD_READY_LOG_PATTERN"] == f"^Ready: API on port {engine.port}"
        assert env["SPARKFOLD_READY_LOG_CONTAINER"] == "sparkfold-engine-0"
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("SPARKFOLD_READY_TIMEOUT_S", "0.5")
        # /health answers, boot.py is still in its smoke test and warm-up: not ready
        assert gate.main(["ready", "--interval", "0.05"]) == 1
        with open(log_file, "a", encoding="utf-8") as handle:
            handle.write(f"Ready: API on port {engine.port} (rank 0), no API key.\n")
        assert gate.main(["ready", "--interval", "0.05"]) == 0
