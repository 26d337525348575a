# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine_service role's note on why the ranks restart (issue 28): ranks found stale after a change in this run
(a rebuild: the handler marked the node) are said to have changed in this run, not in an earlier one.

Runs the role's own two tasks (taken by name from roles/engine_service/tasks/) with ansible-playbook on a local host.
"""

from __future__ import annotations

import json
import pathlib
import sys

import yaml

from tests.unit.playbook import REPO, run_playbook

MARK = "Restart the ranks that run what the node no longer holds"
SAY = "Say why the ranks restart"
STALE = [{"unit": "sparkfold-engine@0.service", "newer": ["/opt/sparkfold/engine/current"]}]


def role_tasks():
    """The marking task and the note, as the role has them."""
    found = {}
    for path in sorted((REPO / "roles" / "engine_service" / "tasks").glob("*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            name = str(task.get("name", ""))
            if name == MARK or name.startswith(SAY):
                found[MARK if name == MARK else SAY] = task
    assert sorted(found) == sorted([MARK, SAY]), found
    return [found[MARK], found[SAY]]


def note(tmp_path, marked):
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    if marked:
        host["engine_service_restart_pending"] = True  # what the handler sets after a change in this run
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"spark-a": host}}}))
    play = [{"name": "The note", "hosts": "all", "gather_facts": False,
             "vars": {"engine_service_stale_found": STALE}, "tasks": role_tasks()}]
    pathlib.Path(tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    result = run_playbook(tmp_path / "play.yml", tmp_path / "hosts.yml", tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return result.stdout


def test_a_change_in_this_run_is_said_as_such(tmp_path):
    out = note(tmp_path, marked=True)
    assert "sparkfold-engine@0.service started before /opt/sparkfold/engine/current last changed (in this run): " \
           "restarting the ranks in order" in out
    assert "earlier run" not in out


def test_a_change_of_an_earlier_run_is_said_as_such(tmp_path):
    out = note(tmp_path, marked=False)
    assert "last changed (an earlier run changed them and stopped before the restart): restarting the ranks" in out
