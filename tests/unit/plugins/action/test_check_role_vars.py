# SPDX-License-Identifier: GPL-3.0-or-later
"""sparkfold.cluster.check_role_vars: a role's variables against its argument spec, the errors alone.

The short messages of a wrong variable in a role's play are tested end to end in tests/unit/roles/test_role_inputs.py;
here, the spec lookup and a playbook that names the check directly.
"""

from __future__ import annotations

import json
import re
import sys

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.sparkfold.cluster.plugins.action import check_role_vars

from tests.unit.playbook import run_playbook


def test_the_options_are_the_roles_main_entry_point():
    options = check_role_vars.role_options("fabric")
    assert options["fabric_mtu"]["type"] == "int"


@pytest.mark.parametrize(("role", "expected"), [
    ("no_such_role", "sparkfold.cluster.no_such_role has no argument spec"),
    ("../fabric", "role must name a sparkfold.cluster role by its short name"),
    (None, "role must name a sparkfold.cluster role by its short name"),
])
def test_a_role_without_a_spec_is_named_with_the_roles_there_are(role, expected):
    with pytest.raises(AnsibleActionFail, match=re.escape(expected)) as caught:
        check_role_vars.role_options(role)
    if role == "no_such_role":
        assert "fabric" in str(caught.value)


def _inventory(tmp_path):
    """localhost with a local connection and this Python, as inventory.yml under ``tmp_path``."""
    (tmp_path / "inventory.yml").write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")


def test_a_playbook_task_checks_templated_values_and_fails_short(tmp_path):
    _inventory(tmp_path)
    (tmp_path / "play.yml").write_text(
        "- name: Check\n  hosts: all\n  gather_facts: false\n  vars:\n    wanted: 9000\n"
        "    fabric_mtu: '{{ wanted }}'\n  tasks:\n"
        "    - name: Good\n      sparkfold.cluster.check_role_vars:\n        roles: [fabric]\n"
        "    - name: Bad\n      sparkfold.cluster.check_role_vars:\n        roles: [fabric]\n"
        "      vars:\n        fabric_mtu: 9k\n"
        "    - name: Every role\n      sparkfold.cluster.check_role_vars:\n"
        "      vars:\n        preflight_min_memory_gib: 110G\n      ignore_errors: true\n")
    proc = run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path, [])
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert re.search(r"TASK \[Good\] \**\nok: \[localhost\]", proc.stdout), proc.stdout[-3000:]
    fatal = json.loads(re.search(r"^fatal: \[localhost\]: FAILED! => (\{.*\})$", proc.stdout, re.MULTILINE).group(1))
    assert fatal["msg"].startswith("sparkfold.cluster.fabric - fabric_mtu is '9k', not a whole number"), fatal["msg"]
    assert set(fatal) <= {"changed", "msg", "host", "problems", "_ansible_no_log"}, sorted(fatal)
    assert fatal["host"] == "localhost" and fatal["problems"] == [fatal["msg"].split(" - ", 1)[1]]
    assert "\n" not in fatal["msg"]


def test_every_role_is_checked_when_none_is_named(tmp_path):
    _inventory(tmp_path)
    (tmp_path / "play.yml").write_text(
        "- name: Check\n  hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - name: Every role\n      sparkfold.cluster.check_role_vars:\n"
        "      vars:\n        preflight_min_memory_gib: 110G\n        fabric_mtu: 9k\n")
    proc = run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path, [])
    assert proc.returncode == 2, proc.stdout[-3000:]
    fatal = json.loads(re.search(r"^fatal: \[localhost\]: FAILED! => (\{.*\})$", proc.stdout, re.MULTILINE).group(1))
    assert fatal["msg"] == ("sparkfold.cluster.fabric - fabric_mtu is '9k', not a whole number (the default is 9000): "
                            "set it to a whole number or leave it out; sparkfold.cluster.preflight - "
                            "preflight_min_memory_gib is '110G', not a whole number (the default is 110): "
                            "set it to a whole number or leave it out"), fatal["msg"]
    assert len(fatal["problems"]) == 2
