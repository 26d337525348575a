# SPDX-License-Identifier: GPL-3.0-or-later
"""The doctor role's verdict and exit status, run by ansible-playbook on this machine with Ansible's default
callback as ansible.cfg sets it (ok results hidden, result_format yaml), from each node's doctor_report of made-up
facts: the tables and the verdict print all the same (sparkfold.cluster.report).

A sick node makes ansible-playbook exit non-zero (a monitoring job's probe); a healthy pair exits 0. The verdict
names only the sick nodes; the lab-only lines come apart, after the problems; every line of the tables and the
verdict fits 100 columns.
"""

from __future__ import annotations

import json
import sys

from ansible_collections.sparkfold.cluster.plugins.filter.doctor import doctor_report

from tests.unit.playbook import run_playbook
from tests.unit.plugins.filter.test_doctor import expect, lab_facts, stopped

PLAY = """\
- hosts: sparks
  gather_facts: false
  tasks:
    - name: Print this node's table
      sparkfold.cluster.report:
        msg: "{{ doctor_result.table }}"
      when: doctor_result is defined
    - name: Verdict
      ansible.builtin.import_role:
        name: sparkfold.cluster.doctor
        tasks_from: verdict
"""


def doctor(tmp_path, results, extra=()):
    """ansible-playbook of the role's verdict over spark-a and spark-b, each with its doctor_result (None: none)."""
    hosts = {}
    for rank, (host, result) in enumerate(results.items()):
        # The recipe role's facts, as it sets them on every host of the play before the doctor runs.
        hosts[host] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "recipe_cluster_name": "sparks", "recipe_cluster": {"nodes": list(results)}, "recipe_rank": rank,
                       "recipe_spec": {"name": "dsv41-flash-tp2-zig",
                                       "weights": {"revision": "d17a1af21a75dff84c12b89ae207cd43c05865a7"}}}
        if result is not None:
            hosts[host]["doctor_result"] = result
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"sparks": {"hosts": hosts}}}}))
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    return run_playbook(play, inventory, tmp_path, args=list(extra), env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml"},
                        quiet=True)


def lab_pair(sick):
    head = lab_facts()
    if sick:
        stopped(head)
    return {"spark-a": doctor_report(head, expect(lab=True)),
            "spark-b": doctor_report(lab_facts(), expect(lab=True, host="spark-b", rank=1, hub=None))}


def test_a_sick_node_fails_the_run_and_only_it_is_named(tmp_path):
    result = doctor(tmp_path, lab_pair(sick=True))
    out = result.stdout
    assert result.returncode == 2, out[-3000:] + result.stderr[-2000:]
    assert "SICK: spark-a (1 problem); healthy: spark-b" in out
    assert "sick: spark-a (the verdict above says what to do)" in out
    verdict = out.split("SICK: ", 1)[1]
    problems, lab = verdict.split("Lab only, not problems (not available in the lab):", 1)
    assert "not available in the lab" not in problems
    assert "driver and NCCL (spark-a, spark-b)" in lab
    # The tables fit 100 columns (each problem of the verdict is one whole line, for grep).
    # each node's table prints as its host finishes: either may come first
    tables = out.split("SICK: ", 1)[0]
    assert "--- spark-a ---" in tables and "--- spark-b ---" in tables
    wide = [line for line in tables.splitlines() if len(line) > 100]
    assert not wide, wide


def test_a_healthy_pair_exits_0(tmp_path):
    result = doctor(tmp_path, lab_pair(sick=False))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "HEALTHY: every check passed on spark-a, spark-b" in result.stdout
    assert "SICK" not in result.stdout


def test_a_node_without_results_is_sick_and_the_verdict_alone_can_be_asked_for(tmp_path):
    pair = lab_pair(sick=False)
    pair["spark-b"] = None
    result = doctor(tmp_path, pair)
    assert result.returncode == 2, result.stdout[-3000:]
    assert "spark-b: no doctor results (unreachable, or failed before the checks)" in result.stdout
    quiet = doctor(tmp_path, pair, extra=["-e", "doctor_fail_on_problems=false"])
    assert quiet.returncode == 0 and "SICK: spark-b (1 problem); healthy: spark-a" in quiet.stdout
