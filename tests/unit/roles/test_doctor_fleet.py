# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor's verdict on a fleet (two pairs in one play, docs/operations.md "A fleet"), run by ansible-playbook on
this machine with the callback ansible.cfg sets, from each node's doctor_report of made-up facts and its cluster's
facts as the recipe role sets them: one table with a row per cluster, a verdict per cluster naming it, and only the
hosts of the sick cluster fail (the healthy cluster's hosts end the run without a failure)."""

from __future__ import annotations

import json
import re
import sys

from ansible_collections.sparkfold.cluster.plugins.filter.doctor import doctor_fleet, doctor_report

from tests.unit.playbook import run_playbook
from tests.unit.plugins.filter.test_doctor import expect, lab_facts, stopped

PLAY = """\
- hosts: sparks
  gather_facts: false
  tasks:
    - name: Verdict
      ansible.builtin.import_role:
        name: sparkfold.cluster.doctor
        tasks_from: verdict
"""

REVISION = "d17a1af21a75dff84c12b89ae207cd43c05865a7"


def node(cluster, host, rank, nodes, recipe, result, engine=""):
    found = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
             "recipe_cluster_name": cluster, "recipe_cluster": {"nodes": nodes}, "recipe_rank": rank,
             "recipe_spec": {"name": recipe, "weights": {"revision": REVISION}}}
    if result is not None:
        found["doctor_result"] = result
    if engine:
        found["_doctor_engine"] = engine
    return found


def fleet(sick_a):
    head_a = lab_facts()
    if sick_a:
        stopped(head_a)
    return {
        "a1": node("cluster_a", "a1", 0, ["a1", "a2"], "dsv41-flash-tp2-zig",
                   doctor_report(head_a, expect(lab=True, host="a1")), engine="5e10970a-0123abcd"),
        "a2": node("cluster_a", "a2", 1, ["a1", "a2"], "dsv41-flash-tp2-zig",
                   doctor_report(lab_facts(), expect(lab=True, host="a2", rank=1, hub=None))),
        "b1": node("cluster_b", "b1", 0, ["b1", "b2"], "dsv41-flash-tp2-vllm",
                   doctor_report(lab_facts(), expect(lab=True, host="b1")),
                   engine="ghcr.io/x/vllm@sha256:2f0cf3adc0f9"),
        "b2": node("cluster_b", "b2", 1, ["b1", "b2"], "dsv41-flash-tp2-vllm",
                   doctor_report(lab_facts(), expect(lab=True, host="b2", rank=1, hub=None))),
    }


def run(tmp_path, hosts):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"sparks": {"hosts": hosts}}}}))
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    return run_playbook(play, inventory, tmp_path, env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml"}, quiet=True)


def failed(out, host):
    found = re.search(rf"^{host}\s+: ok=\d+\s+changed=\d+\s+unreachable=\d+\s+failed=(\d+)", out, re.M)
    assert found, out[-2000:]
    return int(found.group(1))


def test_one_row_per_cluster_and_only_the_sick_cluster_fails(tmp_path):
    result = run(tmp_path, fleet(sick_a=True))
    out = result.stdout
    assert result.returncode == 2, out[-3000:] + result.stderr[-2000:]
    assert "FLEET: 2 clusters, 1 healthy, sick: cluster_a" in out
    table = out.split("FLEET: ", 1)[1]
    assert re.search(r"cluster_a\s+dsv41-flash-tp2-zig\s+5e10970a-0123abcd\s+d17a1af21a75\s+SICK \(1 problem\)", table)
    assert re.search(r"cluster_b\s+dsv41-flash-tp2-vllm\s+ghcr.io/x/vllm@sha256:2f0cf3adc0f9\s+d17a1af21a75\s+HEALTHY",
                     table)
    assert "-> start the ranks in order" in table
    assert "cluster_a: SICK: a1 (1 problem); healthy: a2" in out
    assert "cluster_b: HEALTHY: every check passed on b1, b2" in out
    assert "cluster_a: sick: a1 (the verdict above says what to do)" in out
    assert [failed(out, host) for host in ("a1", "a2", "b1", "b2")] == [1, 1, 0, 0]


def test_a_healthy_fleet_exits_0(tmp_path):
    result = run(tmp_path, fleet(sick_a=False))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "FLEET: 2 clusters, 2 healthy" in result.stdout
    assert "SICK" not in result.stdout


def test_a_cluster_without_any_result_says_so():
    rows = doctor_fleet([{"cluster": "cluster_c", "host": "c1", "rank": "0", "recipe": "r", "result": None},
                         {"cluster": "cluster_c", "host": "c2", "rank": "1", "recipe": "r", "result": None}])
    assert rows["sick"] == ["cluster_c"] and rows["rows"][0]["health"] == "NO RESULTS"
    assert "-> reach the nodes (ssh, power), then run the doctor again" in rows["text"]
