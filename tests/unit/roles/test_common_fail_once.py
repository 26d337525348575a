# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkfold.cluster.common's fail_once: one failure for the play, listing every host's problems.

Runs ansible-playbook against two local hosts (no lab). The roles include it by name after each host
collected its own problems (preflight, cuda, fabric, storage, engine_service).
"""

from __future__ import annotations

import json
import re
import sys

from tests.unit.playbook import run_playbook

PLAY = """
- name: Collect and fail once
  hosts: nodes
  gather_facts: false
  tags: [engine]
  tasks:
    - name: Collect this host's problems
      ansible.builtin.set_fact:
        demo_problems: "{{{{ problems[inventory_hostname] }}}}"
      when: inventory_hostname in problems
    - name: Fail once
      ansible.builtin.include_role:
        name: sparkfold.cluster.common
        tasks_from: fail_once
      vars:
        common_problems_fact: demo_problems
        common_problems_title: The demo check
{optional}    - name: After
      ansible.builtin.debug:
        msg: reached
"""


def _run(tmp_path, problems, hint=None, unreported=None, extra=()):
    (tmp_path / "inventory.yml").write_text(
        "nodes:\n  hosts:\n" + "".join(
            f"    {h}:\n      ansible_connection: local\n      ansible_python_interpreter: {sys.executable}\n"
            for h in ("node-a", "node-b")))
    # hint and unreported left out: the role's defaults (none)
    given = (("common_problems_hint", hint), ("common_problems_unreported", unreported))
    optional = "".join(f"        {name}: {value}\n" for name, value in given if value is not None)
    (tmp_path / "play.yml").write_text(PLAY.format(optional=optional))
    return run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path,
                        ["-e", json.dumps({"problems": problems}), *extra])


def _fatals(out):
    return [json.loads(m) for m in re.findall(r"^fatal: \[[^\]]+\]: FAILED! => (\{.*\})$", out, re.MULTILINE)]


def test_every_problem_of_every_host_in_one_failure_and_no_host_goes_on(tmp_path):
    proc = _run(tmp_path, {"node-a": ["node-a: disk full"], "node-b": ["node-b: MTU 1500", "node-b: no GPU"]},
                hint="'Fix them, then run again.'")
    assert proc.returncode == 2, proc.stdout[-3000:]
    fatals = _fatals(proc.stdout)
    assert len(fatals) == 1, proc.stdout[-3000:]
    assert fatals[0]["msg"] == ("The demo check: 3 problem(s) on node-a, node-b:\n- node-a: disk full\n"
                                "- node-b: MTU 1500\n- node-b: no GPU\nFix them, then run again.")
    assert '"msg": "reached"' not in proc.stdout


def test_no_problem_no_failure(tmp_path):
    proc = _run(tmp_path, {"node-a": [], "node-b": []})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert proc.stdout.count('"msg": "reached"') == 2


def test_a_host_without_results_is_named_when_asked(tmp_path):
    proc = _run(tmp_path, {"node-a": []}, unreported="'no results (unreachable?)'")
    fatals = _fatals(proc.stdout)
    assert len(fatals) == 1 and fatals[0]["msg"] == (
        "The demo check: 1 problem(s) on node-a, node-b:\n- node-b: no results (unreachable?)"), proc.stdout[-3000:]
    # not asked: a host without the fact is not a problem
    assert _run(tmp_path, {"node-a": []}).returncode == 0


def test_it_fails_under_a_tag_run_too(tmp_path):
    proc = _run(tmp_path, {"node-a": ["node-a: disk full"], "node-b": []}, extra=("--tags", "engine"))
    assert proc.returncode == 2 and len(_fatals(proc.stdout)) == 1, proc.stdout[-3000:]
