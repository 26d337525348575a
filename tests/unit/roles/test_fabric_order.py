# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric role's task order (issue 30, item 5): a ring's cable check runs on every run, a first install
included, before the role writes anything (the netplan file and its apply, the SSH keys and names, the
environment file).

The role's task files are walked in the order Ansible runs them, every include_tasks followed: every task up
to the refusal of a mis-cabled ring must be one that only reads or judges, and the includes on the way to the
check may depend on nothing but the topology (not on a rail having changed, nor on fabric_verify).
"""

from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

TASKS = pathlib.Path(__file__).resolve().parents[3] / "roles" / "fabric" / "tasks"
INCLUDES = ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks")
KEYWORDS = {"name", "when", "tags", "vars", "register", "loop", "loop_control", "run_once", "delegate_to",
            "changed_when", "failed_when", "check_mode", "notify", "no_log", "become", "until", "retries", "delay",
            "environment", "args", "listen", "ignore_errors"}
# What may run before the cable check: modules that read the node, and tasks that compute or refuse.
READS = {"ansible.builtin.set_fact", "ansible.builtin.fail", "ansible.builtin.assert", "ansible.builtin.debug",
         "sparkfold.cluster.fabric_facts", "sparkfold.cluster.fabric_neighbors", "sparkfold.cluster.roce_facts"}
PROBE = "sparkfold.cluster.fabric_neighbors"


def action(task):
    (name,) = [key for key in task if key not in KEYWORDS]
    return name


def walk(file, chain=()):
    """Every task of FILE in run order, includes followed: (file, task, the includes' conditions above it)."""
    for task in yaml.safe_load((TASKS / file).read_text()):
        name = action(task)
        if name in INCLUDES:
            when = task.get("when", [])
            yield from walk(task[name], (*chain, *(when if isinstance(when, list) else [when])))
        else:
            yield file, task, chain


def first_run():
    """The role's tasks on its first run (verify.yml plans again when it runs alone: its own include is left out)."""
    seen = []
    for file, task, chain in walk("main.yml"):
        if file == "verify.yml":
            break
        seen.append((file, task, chain))
    return seen


def refusal(tasks):
    """Where the ring's cabling is judged and a mis-cabled ring refused."""
    found = [i for i, (_f, task, _c) in enumerate(tasks)
             if action(task) == "ansible.builtin.fail" and "fabric_ring_cabling" in str(task.get("vars"))]
    assert found, "no task of the role's run (before verify.yml) refuses a mis-cabled ring (fabric_ring_cabling)"
    return found[0]


def test_the_ring_cable_check_runs_before_anything_is_written():
    tasks = first_run()
    probes = [i for i, (_f, task, _c) in enumerate(tasks) if action(task) == PROBE]
    assert probes, "no task of the role's run (before verify.yml) probes who faces each port"
    stop = refusal(tasks)
    assert probes[0] < stop
    writes = [f"{file}: {task['name']} ({action(task)})" for file, task, _chain in tasks[:stop]
              if action(task) not in READS and not (
                  action(task) == "ansible.builtin.include_role"
                  and task[action(task)] == {"name": "sparkfold.cluster.common", "tasks_from": "fail_once"})]
    assert writes == [], f"these run before the cable check: {writes}"


@pytest.mark.parametrize("verify", ["always", "changed"])
def test_the_cable_check_depends_on_the_topology_only(verify):
    """A first install, a run that changes nothing and one that repairs a rail all reach it: its includes' conditions
    hold with nothing but the topology known (a condition on anything else would be undefined here)."""
    tasks = first_run()
    _file, _task, chain = tasks[refusal(tasks)]
    for topology, runs in (("ring", True), ("pair", False)):
        templar = Templar(loader=DataLoader(), variables={"fabric_topology": topology, "fabric_verify": verify})
        held = all(templar.template(trust_as_template("{{ " + str(when) + " }}")) in (True, "True") for when in chain)
        assert held is runs, (topology, chain)
