# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric role's check of the GID slot the engine's own RDMA transport uses (tasks/engine_gids.yml), against
real-format sysfs fixture trees (tests/unit/fixtures/sysfs): two local hosts, each reading its own tree through
module_defaults, fail once naming every rail at fault and the fix."""

from __future__ import annotations

import json
import pathlib
import re
import sys

from tests.unit.playbook import run_playbook

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"

PLAY = """
- name: The engine's GID slot
  hosts: sparks
  gather_facts: false
  module_defaults:
    sparkfold.cluster.roce_facts:
      sysfs_root: "{{ sysfs_tree }}"
  tasks:
    - name: Check it as the fabric role does on every run
      ansible.builtin.include_role:
        name: sparkfold.cluster.fabric
        tasks_from: engine_gids.yml
"""

# The port-1 twins and their rail addresses in the fixture trees (hosts .11).
RAILS = [{"rdma_device": "rocep1s0f1", "address": "192.168.102.11"},
         {"rdma_device": "roceP2p1s0f1", "address": "192.168.103.11"}]


def _run(tmp_path, trees, index=5, recipe_index=None):
    hosts = "".join(
        f"    {name}:\n      ansible_connection: local\n      ansible_python_interpreter: {sys.executable}\n"
        f"      sysfs_tree: {FIXTURES / tree}\n"
        for name, tree in trees.items())
    (tmp_path / "inventory.yml").write_text("sparks:\n  hosts:\n" + hosts)
    (tmp_path / "play.yml").write_text(PLAY)
    extra = {"fabric_plan_result": RAILS, "fabric_engine_gid_index": index}
    if recipe_index is not None:  # the role's default: the recipe's launch.rdma_gid_index
        extra = {"fabric_plan_result": RAILS, "recipe_spec": {"launch": {"rdma_gid_index": recipe_index}}}
    return run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path, ["-e", json.dumps(extra)])


def _fatal(out):
    found = re.findall(r"^fatal: \[[^\]]+\]: FAILED! => (\{.*\})$", out, re.MULTILINE)
    return [json.loads(m)["msg"] for m in found]


def test_index_5_holding_each_rails_ipv4_roce_v2_gid_passes(tmp_path):
    proc = _run(tmp_path, {"spark-1": "spark-a-ipv6-first", "spark-2": "spark-a-ipv6-first"})
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_a_node_with_its_ipv4_gid_at_3_is_refused_once_naming_the_rail_and_the_fix(tmp_path):
    proc = _run(tmp_path, {"spark-1": "spark-a-ipv6-first", "spark-2": "spark-a"}, recipe_index=5)
    assert proc.returncode != 0
    (msg,) = _fatal(proc.stdout)
    assert msg.startswith("The engine's RDMA GID index: 2 problem(s) on spark-1, spark-2:"), msg
    assert ("- spark-2: the engine's own RDMA transport (TF_RDMA_DEVICES) uses GID index 5 whatever NCCL picks: "
            "rocep1s0f1 port 1 GID index 5 is empty, not the RoCE v2 GID of the rail address 192.168.102.11 "
            "(it is at index 3). Fix: ") in msg
    assert "roceP2p1s0f1 port 1 GID index 5 is empty" in msg
    assert not [line for line in msg.splitlines() if line.startswith("- spark-1")], msg


def test_the_index_is_the_one_asked_for(tmp_path):
    # spark-a holds the IPv4 RoCE v2 GIDs at 3: an engine pinned to 3 passes there
    proc = _run(tmp_path, {"spark-1": "spark-a"}, index=3)
    assert proc.returncode == 0, proc.stdout[-4000:]
