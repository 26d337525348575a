# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A typo in a role variable stops the play before any change, with a message naming it.

Runs ansible-playbook against localhost (no lab), importing the role as the playbooks do. Ansible validates
each role's variables against its meta/argument_specs.yml (a wrong type: fabric_mtu=9k, a size that is not a
number, an override that is not a mapping); the values only the fabric_plan filter can judge (fabric_mtu=90000,
a malformed rail CIDR) fail with the filter's one short line, not wrapped in the templating chain.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from tests.unit.playbook import run_playbook

RAILS = [
    {"name": "rail0", "interface": "enp1s0f1np1", "cidr": "192.168.100.0/24", "rdma_device": "rocep1s0f1"},
    {"name": "rail1", "interface": "enP2p1s0f1np1", "cidr": "192.168.101.0/24", "rdma_device": "roceP2p1s0f1"},
]


def _run(tmp_path, role, extra_vars, as_playbooks=True):
    (tmp_path / "inventory.yml").write_text(
        "sparks:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")
    if as_playbooks:
        plays = (f"  tasks:\n    - name: The role\n      ansible.builtin.import_role:\n"
                 f"        name: sparkfold.cluster.{role}\n")
    else:
        plays = f"  roles:\n    - sparkfold.cluster.{role}\n"
    (tmp_path / "play.yml").write_text("- name: Bad input\n  hosts: sparks\n  gather_facts: false\n" + plays)
    return run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path, ["-e", json.dumps(extra_vars)])


def _fatal(proc):
    """The one fatal result of the run, as a dict."""
    out = proc.stdout
    fatals = re.findall(r"^fatal: \[localhost\]: FAILED! => (\{.*\})$", out, re.MULTILINE)
    assert len(fatals) == 1, out[-3000:]
    return json.loads(fatals[0])


@pytest.mark.parametrize(("role", "extra_vars", "expected"), [
    ("fabric", {"fabric_mtu": "90000"},
     "fabric_mtu: mtu 90000 is outside 576..9216"),
    ("fabric", {"fabric_rails": [dict(RAILS[0], cidr="192.168.100.0/33"), RAILS[1]]},
     "fabric_rails: rail0 (enp1s0f1np1): cidr '192.168.100.0/33' is not a valid IPv4 network"),
    ("fabric", {"fabric_rails": [RAILS[0], dict(RAILS[1], cidr="192.168.101.7")]},
     "fabric_rails: rail1 (enP2p1s0f1np1): cidr '192.168.101.7' is not a valid IPv4 network: it has no prefix"),
], ids=["mtu-90000", "cidr-prefix-33", "cidr-no-prefix"])
def test_a_wrong_variable_fails_short_and_named(tmp_path, role, extra_vars, expected):
    proc = _run(tmp_path, role, extra_vars)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    fatal = _fatal(proc)
    assert expected in fatal["msg"], fatal["msg"]
    # the message alone: no argument spec, no templating chain, one line
    assert set(fatal) <= {"changed", "msg", "_ansible_no_log"}, sorted(fatal)
    assert "\n" not in fatal["msg"] and len(fatal["msg"]) < 250, fatal["msg"]
    assert "argument_spec_data" not in proc.stdout
    assert "caused by" not in proc.stdout + proc.stderr
    assert re.search(r"localhost\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=1", proc.stdout), proc.stdout[-800:]


@pytest.mark.parametrize(("role", "extra_vars", "expected"), [
    ("fabric", {"fabric_mtu": "9k"}, "argument 'fabric_mtu' is of type str and we were unable to convert to int"),
    ("preflight", {"preflight_min_memory_gib": "110G"},
     "argument 'preflight_min_memory_gib' is of type str and we were unable to convert to int"),
    ("recipe", {"recipe_overrides": 5},
     "argument 'recipe_overrides' is of type int and we were unable to convert to dict"),
], ids=["mtu-9k", "preflight-int", "recipe-overrides"])
@pytest.mark.parametrize("as_playbooks", [True, False], ids=["import_role", "roles"])
def test_ansible_validates_the_argument_spec_before_any_change(tmp_path, role, extra_vars, expected, as_playbooks):
    # imported as the playbooks do it, or listed under roles: the same check, Ansible's own, as the first task
    proc = _run(tmp_path, role, extra_vars, as_playbooks=as_playbooks)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    fatal = _fatal(proc)
    assert expected in fatal["msg"], fatal["msg"]
    assert fatal["validate_args_context"]["name"] == role, fatal["validate_args_context"]
    assert re.search(r"localhost\s+: ok=0\s+changed=0\s+unreachable=0\s+failed=1", proc.stdout), proc.stdout[-800:]


def test_a_wrong_variable_on_two_hosts_is_refused_once_naming_both(tmp_path):
    """issue 28: fabric_mtu=9k printed "unable to convert to int" three times (once per host and Ansible's error).
    The recipe role, first in every play, checks the variables of every sparkfold role once for the run, before
    Ansible's own validation of the roles that follow it would refuse the same value once per host."""
    (tmp_path / "inventory.yml").write_text(
        "sparks:\n  children:\n    head: {hosts: {spark-a: {}}}\n    workers: {hosts: {spark-b: {}}}\n")
    (tmp_path / "play.yml").write_text(
        "- name: Bad input\n  hosts: sparks\n  gather_facts: false\n  roles:\n"
        "    - sparkfold.cluster.recipe\n    - sparkfold.cluster.fabric\n")
    variables = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "fabric_mtu": "9k"}
    proc = run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path,
                        ["-e", json.dumps(variables)], quiet=True)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    fatals = re.findall(r"^fatal: \[([^\]]+)\]: FAILED! => (\{.*\})$", proc.stdout, re.MULTILINE)
    assert len(fatals) == 1, out[-3000:]
    assert json.loads(fatals[0][1])["msg"] == (
        "sparkfold.cluster.fabric - fabric_mtu is '9k', not a whole number (the default is 9000): set it to a whole "
        "number or leave it out (on spark-a, spark-b)")
    assert "unable to convert" not in out
    assert out.count("fabric_mtu is '9k'") == 2  # Ansible's error line, then the failed result: once each
    assert re.search(r"spark-b\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", proc.stdout), proc.stdout[-800:]


def test_a_role_default_naming_a_later_fact_is_left_to_ansibles_validation(tmp_path):
    """The engine role's defaults read recipe_spec, which the recipe role sets after its check of every role's
    variables: playbooks/engine.yml imports both, so the check sees those defaults before recipe_spec exists."""
    (tmp_path / "inventory.yml").write_text(
        "sparks:\n  children:\n    head: {hosts: {spark-a: {fabric_host_index: 1}}}\n"
        "    workers: {hosts: {spark-b: {fabric_host_index: 2}}}\n")
    (tmp_path / "play.yml").write_text(
        "- name: As playbooks/engine.yml\n  hosts: sparks\n  gather_facts: false\n  tasks:\n"
        "    - name: Recipe\n      ansible.builtin.import_role:\n        name: sparkfold.cluster.recipe\n"
        "    - name: Engine\n      ansible.builtin.import_role:\n        name: sparkfold.cluster.engine\n"
        "      when: false\n")
    variables = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "fabric_rails": RAILS}
    proc = run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path, ["-e", json.dumps(variables)])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "is undefined" not in proc.stdout
