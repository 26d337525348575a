# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The units' start budget follows the recipe: systemd's TimeoutStartSec of sparkfold-engine@.service covers the
memory gate's wait (memory.gate_timeout_s) and the source's readiness wait (ready.timeout_s) plus the unit's other
waits (the cluster facts' recipe_cluster.start_budget, plugins/filter/cluster.py), rank 0's ready gate waits for the
source's wait (SPARKFOLD_READY_TIMEOUT_S), and a site's engine_service_start_timeout_s below the recipe's waits is
refused (tasks/budget.yml) before anything is written."""

from __future__ import annotations

import json
import pathlib
import re
import sys

import pytest
import yaml
from ansible_collections.sparkfold.cluster.plugins.filter.cluster import start_budget
from ansible_collections.sparkfold.cluster.plugins.filter.recipe import recipe_check

from tests.unit.playbook import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]
RECIPES = ROOT / "roles" / "recipe" / "recipes"
TEMPLATES = ROOT / "roles" / "engine_service" / "templates"

PLAY = """
- name: Check the start budget and render the unit and rank 0's engine.env
  hosts: localhost
  gather_facts: false
  vars:
    recipe_spec: "{{ lookup('ansible.builtin.file', recipe_file) | from_yaml | sparkfold.cluster.recipe_check }}"
  tasks:
    - name: Check the start budget (the role's own task file)
      ansible.builtin.include_role:
        name: sparkfold.cluster.engine_service
        tasks_from: budget
        public: true
    - name: Render the unit and engine.env
      ansible.builtin.copy:
        content: "{{ lookup('ansible.builtin.template', templates ~ '/' ~ item.src) }}"
        dest: "{{ out_dir }}/{{ item.dest }}"
        mode: "0600"
      loop:
        - {src: sparkfold-engine@.service.j2, dest: unit}
        - {src: engine.env.j2, dest: engine.env}
"""


def run(tmp_path, recipe, **overrides):
    (tmp_path / "inventory.yml").write_text(
        f"all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")
    (tmp_path / "play.yml").write_text(PLAY)
    extra = {
        "recipe_file": str(RECIPES / recipe), "templates": str(TEMPLATES), "out_dir": str(tmp_path),
        "ansible_managed": "managed", "recipe_rank": 0, "recipe_world": 2, "recipe_api_host": "127.0.0.1",
        "recipe_api_port": 8000, "recipe_api_served_name": "served", "recipe_api_key": "",
        "recipe_api_key_file": "/etc/sparkfold/engine-api-key", "recipe_model_dir": "/srv/models/m",
        "recipe_engram_dir": "/srv/models/e", "recipe_kit_dir": "/srv/models/k",
        "recipe_inputs_dir": "/var/lib/sparkfold/engine-inputs", "engine_service_launch_env": {},
        # The cluster facts' start budget, as the recipe role computes it (plugins/filter/cluster.py).
        "recipe_cluster": {"start_budget": start_budget(recipe_check(yaml.safe_load((RECIPES / recipe).read_text())),
                                                        2)},
        **overrides,
    }
    return run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path, ["-e", json.dumps(extra)])


def rendered(tmp_path):
    unit = (tmp_path / "unit").read_text()
    env = dict(line.split("=", 1) for line in (tmp_path / "engine.env").read_text().splitlines()
               if line and not line.startswith("#"))
    return int(re.search(r"^TimeoutStartSec=(\d+)$", unit, re.M).group(1)), env


def recipe(name):
    return yaml.safe_load((RECIPES / name).read_text())


def test_sglang_unit_outlasts_the_gate_and_boot_py_s_wait(tmp_path):
    # The SGLang ring's START waits 3600 s for boot.py's banner, after the roles' 600 s memory gate: the old fixed
    # 1800 s budget stopped the unit half-way.
    proc = run(tmp_path, "dsv41-flash-tp4-ring-sglang.yml")
    assert proc.returncode == 0, proc.stdout[-3000:]
    timeout, env = rendered(tmp_path)
    assert timeout >= 3600 + 600
    # 60 s of ExecStartPre, the container's 10 s stop timeout (rm --force), 30 s of the ready gate's last probes.
    assert timeout == 600 + 3600 + 60 + 10 + 30
    assert env["SPARKFOLD_READY_TIMEOUT_S"] == "3600"


@pytest.mark.parametrize("name", sorted(path.name for path in RECIPES.glob("*.yml")))
def test_every_recipe_s_unit_covers_its_gate_and_ready_waits(tmp_path, name):
    spec = recipe(name)
    gate_s = spec["memory"]["gate_timeout_s"]
    # A recipe without ready.timeout_s gets the recipe format's default (roles/recipe/files/recipe.schema.json).
    ready_s = spec["ready"].get("timeout_s", 1800)
    proc = run(tmp_path, name)
    assert proc.returncode == 0, proc.stdout[-3000:]
    timeout, env = rendered(tmp_path)
    assert timeout >= gate_s + ready_s
    assert env["SPARKFOLD_READY_TIMEOUT_S"] == str(ready_s)


def test_a_budget_below_the_recipe_s_waits_is_refused(tmp_path):
    proc = run(tmp_path, "dsv41-flash-tp4-ring-sglang.yml", engine_service_start_timeout_s=1800)
    assert proc.returncode != 0
    assert "engine_service_start_timeout_s is 1800: recipe dsv41-flash-tp4-ring-sglang's start waits up to 4300 s" \
        in proc.stdout
    assert "Set engine_service_start_timeout_s to at least 4300" in proc.stdout
    assert not (tmp_path / "unit").exists()


def test_a_budget_that_is_not_a_number_is_refused(tmp_path):
    proc = run(tmp_path, "dsv41-flash-tp2-vllm.yml", engine_service_start_timeout_s="30m")
    assert proc.returncode != 0
    assert "engine_service_start_timeout_s is 30m" in proc.stdout


def test_a_larger_budget_goes_to_rank_0_s_ready_gate(tmp_path):
    # TP4: 60 s ExecStartPre + 240 s gate + 1200 s ready + 150 s (last probes and the 4-token chat check) = 1650.
    proc = run(tmp_path, "dsv41-flash-tp4-zig.yml", engine_service_start_timeout_s=2000)
    assert proc.returncode == 0, proc.stdout[-3000:]
    timeout, env = rendered(tmp_path)
    assert timeout == 2000
    assert env["SPARKFOLD_READY_TIMEOUT_S"] == str(1200 + 2000 - 1650)
