# SPDX-License-Identifier: GPL-3.0-or-later
"""The smoke role's smoke_verify, run by ansible-playbook on this machine against the lab engine (TP2 simulator).

The health probe (ready, the served name, 17 * 23 = 391) runs every time. The smoke checks run when a node's
engine_service_ranks_moved is true (a rank was (re)started in this run), when a node has no such fact (the run
did not manage the engine: playbooks/smoke.yml alone, --tags smoke), or with smoke_verify=always; otherwise the
health report says that they were left out.
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


def smoke(pair, tmp_path, moved, extra=()):
    """Run the smoke role on localhost; moved is the node's engine_service_ranks_moved (None: not set)."""
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
        "recipe_api_key": "",
        "recipe_spec": {"smoke": {"prompt": "What is 17 * 23?", "answer": "391", "chat_template_kwargs": {}}},
        "smoke_checks": ["arithmetic"],
        "smoke_wait_s": 60,
        "smoke_interval_s": 1,
        "smoke_timeout_s": 30,
    }
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: head\n  gather_facts: false\n"
        f"  vars: {json.dumps(variables)}\n"
        "  roles:\n    - role: sparkfold.cluster.smoke\n"
    )
    result = run_playbook(play, inventory, tmp_path, args=list(extra), timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
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
