# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The weights role's own check of an artifact (the kit's tools/verify_kit.sh) says its result in one line per node
(issue 28: about 60 lines of registered result per node), with every result shown; and still refuses a failing kit,
and a missing check program outside check mode (run_checks returns it as data, issue 24).

Runs the role's two tasks (taken by name from roles/weights/tasks/main.yml, with the role's vars) on a local host.
"""

from __future__ import annotations

import json
import sys

import yaml

from tests.unit.playbook import REPO, run_playbook

RUN = "Run the own check of each artifact that has one"
REFUSE = "Refuse what fails its own check or lacks its check program"
VERIFY = "#!/bin/bash\nfor i in $(seq 1 40); do echo \"checking file $i\"; done\necho '{last}'\nexit {rc}\n"


def _tasks():
    tasks = {t.get("name"): t for t in yaml.safe_load((REPO / "roles" / "weights" / "tasks" / "main.yml").read_text())}
    return [tasks[RUN], tasks[REFUSE]]


def _run(tmp_path, rc, args=()):
    kit = tmp_path / "kit" / "kit"
    (kit / "tools").mkdir(parents=True)
    if rc is not None:
        (kit / "tools" / "verify_kit.sh").write_text(VERIFY.format(last="kit OK" if rc == 0 else "rope table short",
                                                                   rc=rc))
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"spark-a": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    role_vars = yaml.safe_load((REPO / "roles" / "weights" / "vars" / "main.yml").read_text())
    play = [{"name": "The own check", "hosts": "all", "gather_facts": False,
             "vars": {"weights_checked_artifacts": role_vars["weights_checked_artifacts"],
                      "weights_artifacts": [{"name": "kernel kit", "repo_id": "org/kit", "dir": str(tmp_path / "kit"),
                                             "verify_chdir": str(kit), "verify": ["tools/verify_kit.sh"]}]},
             "tasks": _tasks()}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    return run_playbook(tmp_path / "play.yml", tmp_path / "hosts.yml", tmp_path, list(args),
                        env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml"})


def test_a_passing_kit_check_is_one_line(tmp_path):
    proc = _run(tmp_path, 0)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    refuse = proc.stdout.split(REFUSE, 1)[1].split("PLAY RECAP", 1)[0]
    lines = [line for line in refuse.splitlines()[1:] if line.strip()]
    assert lines == ["ok: [spark-a] => (item=kernel kit: kit OK)"], refuse


def test_a_failing_kit_check_is_still_refused_with_its_last_line(tmp_path):
    proc = _run(tmp_path, 3)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "failed (exit 3): rope table short" in proc.stdout


def test_a_missing_check_program_is_refused_but_passes_in_check_mode(tmp_path):
    # run_checks says the program is missing as data: a fresh pair in check mode has not downloaded the kit yet.
    proc = _run(tmp_path, None, ["--check"])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "ok: [spark-a] => (item=kernel kit: no check program)" in proc.stdout
    proc = _run(tmp_path / "again", None)
    assert proc.returncode == 2, proc.stdout[-3000:]
    program = tmp_path / "again" / "kit" / "kit" / "tools" / "verify_kit.sh"
    assert (f"spark-a: {program} does not exist after the download of org/kit: the recipe's kit.subdir or kit.verify"
            " do not match that repository") in proc.stdout
