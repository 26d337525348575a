# SPDX-License-Identifier: GPL-3.0-or-later
"""The smoke role's smoke_verify, run by ansible-playbook on this machine against the lab engine (TP2 simulator).

The health probe (ready, the served name, 17 * 23 = 391) runs every time. The smoke checks run when a node's
engine_service_ranks_moved is true (a rank was (re)started in this run), when a node has no such fact (the run
did not manage the engine: playbooks/smoke.yml alone, --tags smoke), or with smoke_verify=always; otherwise the
health report says that they were left out.

A key set (recipe_api_key) must be enforced: the lab engine started without --api-key-file is an engine that did not
read the key it was given, and fails the verdict; started with one, it refuses /v1/models without the key and passes.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.labengine import Cluster
from tests.unit.playbook import run_playbook

LEFT_OUT = "the smoke checks (arithmetic) are left out: no rank was (re)started in this run"


@pytest.fixture(scope="module")
def pair(engine_bin, tmp_path_factory):
    c = Cluster(engine_bin, tmp_path_factory.mktemp("smoke-role-pair")).start()
    yield c
    c.stop()


def smoke(pair, tmp_path, moved, extra=(), key="", ok=True, tasks=None):
    """Run the smoke role on localhost; moved is the node's engine_service_ranks_moved (None: not set), key the
    recipe_api_key, ok whether the play must pass; tasks (a list of tasks) instead of the role's main."""
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    if moved is not None:
        host["engine_service_ranks_moved"] = moved
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"head": {"hosts": {"localhost": host}}}}}))
    variables = {
        "recipe_nodes": ["localhost"],
        "recipe_cluster": {"head": "localhost", "nodes": ["localhost"]},
        "recipe_api_port": pair.port,
        "recipe_api_served_name": "dsv41-sim",
        "recipe_api_key": key,
        "recipe_spec": {"smoke": {"prompt": "What is 17 * 23?", "answer": "391", "chat_template_kwargs": {}}},
        "smoke_checks": ["arithmetic"],
        "smoke_wait_s": 60,
        "smoke_interval_s": 1,
        "smoke_timeout_s": 30,
    }
    play = tmp_path / "play.yml"
    body = f"  tasks: {json.dumps(tasks)}\n" if tasks else "  roles:\n    - role: sparkfold.cluster.smoke\n"
    play.write_text(f"- hosts: head\n  gather_facts: false\n  vars: {json.dumps(variables)}\n{body}")
    result = run_playbook(play, inventory, tmp_path, args=list(extra), timeout=300)
    assert (result.returncode == 0) == ok, result.stdout[-4000:] + result.stderr[-2000:]
    return result.stdout


def ran_checks(stdout):
    return "result  seconds  detail" in stdout and "arithmetic" in stdout.split("result  seconds  detail", 1)[1]


def test_no_rank_moved_probes_health_and_leaves_the_checks_out(pair, tmp_path):
    out = smoke(pair, tmp_path, moved=False)
    assert "What is 17 * 23? -> 391: TTFT" in out
    assert LEFT_OUT in out
    assert not ran_checks(out)


def test_smoke_verify_always_runs_the_checks_when_no_rank_moved(pair, tmp_path):
    out = smoke(pair, tmp_path, moved=False, extra=["-e", "smoke_verify=always"])
    assert LEFT_OUT not in out
    assert ran_checks(out)


def test_a_moved_rank_runs_the_checks(pair, tmp_path):
    out = smoke(pair, tmp_path, moved=True)
    assert LEFT_OUT not in out
    assert ran_checks(out)


def test_a_run_that_did_not_manage_the_engine_runs_the_checks(pair, tmp_path):
    out = smoke(pair, tmp_path, moved=None)
    assert LEFT_OUT not in out
    assert ran_checks(out)


NOT_ENFORCED = "served /v1/models without the API key"


def test_a_key_the_engine_does_not_enforce_fails_the_smoke(pair, tmp_path):
    # The pair runs without --api-key-file: the key the run set reaches nothing that reads it. Before, the key was
    # sent, the engine answered anyway, and the smoke passed with the API open to whoever reaches the port.
    out = smoke(pair, tmp_path, moved=False, key="site-key", ok=False)
    assert NOT_ENFORCED in out and "keep recipe_api_host on loopback or fix the recipe" in out
    assert "site-key" not in out


def test_the_verdict_the_rollback_reads_is_failed_with_the_message(pair, tmp_path):
    # engine_release (main.yml, rollback.yml) includes probe.yml and reads smoke_verdict.passed and .msg to roll back
    tasks = [{"ansible.builtin.include_role": {"name": "sparkfold.cluster.smoke", "tasks_from": "probe"}},
             {"ansible.builtin.copy": {"content": "{{ smoke_verdict | to_json }}", "dest": str(tmp_path / "verdict"),
                                       "mode": "0600"}}]
    smoke(pair, tmp_path, moved=True, key="site-key", tasks=tasks)
    verdict = json.loads((tmp_path / "verdict").read_text())
    assert verdict["passed"] is False and NOT_ENFORCED in verdict["msg"]
    assert verdict["key_enforced"] is False


def test_check_mode_fails_on_a_key_not_enforced_too(pair, tmp_path):
    # check mode first asks whether an engine runs at all; an engine that runs but ignores the key is not "not
    # running" (which would skip the checks): the probe after it fails on the key as in a real run
    out = smoke(pair, tmp_path, moved=False, key="site-key", ok=False, extra=["--check"])
    assert NOT_ENFORCED in out and "this run would start it" not in out


def test_an_enforced_key_passes_and_is_reported(engine_bin, tmp_path):
    (tmp_path / "key").write_text("lab-key\n")
    keyed = Cluster(engine_bin, tmp_path / "engine", extra_args=["--api-key-file", str(tmp_path / "key")]).start()
    try:
        out = smoke(keyed, tmp_path, moved=False, key="lab-key")
    finally:
        keyed.stop()
    assert "What is 17 * 23? -> 391: TTFT" in out and "the API key is enforced" in out
    assert "lab-key" not in out
