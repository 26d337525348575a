# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine_release role (upgrade, record and rollback, split out of engine_service), on one local node with its
files under a temporary directory: the record keeps the build `current` names and copies of the files engine_service
passes, and a second run changes nothing; the rollback reads that record and refuses, changing nothing back, when the
recorded build is gone or a kept copy is lost; Ansible checks the role's arguments against its spec."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

from tests.unit.playbook import changed_count, run_playbook

PLAYBOOK = '''
- name: Record or roll back as engine_service includes engine_release
  hosts: node
  gather_facts: false
  tasks:
    - name: Include the role's entry
      ansible.builtin.include_role:
        name: sparkfold.cluster.engine_release
        tasks_from: "{{ entry }}"
      vars:
        engine_release_serving_dir: "{{ root }}/serving"
        engine_release_files: "{{ files }}"
'''

NAMES = ["sparkfold-engine@.service", "sparkfold-engine@0.service.d/10-rank.conf", "sparkfold-engine.target",
         "engine.env"]


@pytest.fixture()
def node(tmp_path):
    """A node whose `current` build serves with its units and engine.env."""
    build = tmp_path / "engine" / "0123456789abcdef"
    build.mkdir(parents=True)
    (tmp_path / "engine" / "current").symlink_to(build)
    files = {}
    for name in NAMES:
        live = tmp_path / "live" / name
        live.parent.mkdir(parents=True, exist_ok=True)
        live.write_text(f"{name} as it serves\n")
        files[name] = str(live)
    (tmp_path / "hosts.yml").write_text(textwrap.dedent(f"""\
        all:
          hosts:
            node:
              ansible_connection: local
              ansible_python_interpreter: {os.environ.get("SPARKFOLD_TEST_PYTHON", sys.executable)}
        """))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    return tmp_path, build, files


def run(tmp_path, entry, files, **extra):
    variables = {"entry": entry, "root": str(tmp_path), "files": files,
                 "recipe_engine_prefix_root": str(tmp_path / "engine"), **extra}
    result = run_playbook(tmp_path / "play.yml", tmp_path / "hosts.yml", tmp_path, args=["-e", json.dumps(variables)])
    return result, " ".join(result.stdout.split())


def test_the_record_keeps_the_build_and_the_files_then_changes_nothing(node):
    tmp_path, build, files = node
    first, text = run(tmp_path, "record", files)
    assert first.returncode == 0, text[-3000:]
    record = json.loads((tmp_path / "serving" / "serving.json").read_text())
    assert record == {"build": str(build), "files": NAMES}
    for name in NAMES:
        assert (tmp_path / "serving" / name).read_text() == f"{name} as it serves\n"
    again, text = run(tmp_path, "record", files)
    assert again.returncode == 0 and changed_count(again) == 0, text[-3000:]


@pytest.mark.parametrize("loss", ["stamp", "copy"])
def test_the_rollback_reads_the_record_and_refuses_when_it_cannot_roll_back(node, loss):
    tmp_path, build, files = node
    assert run(tmp_path, "record", files)[0].returncode == 0
    failed = tmp_path / "engine" / "fedcba9876543210"
    failed.mkdir()
    (tmp_path / "engine" / "current").unlink()
    (tmp_path / "engine" / "current").symlink_to(failed)
    if loss == "stamp":
        problem = f"node: the build that served, {build}, is no longer installed (it has no stamp)"
    else:
        (build / "sparkfold-stamp.json").write_text("{}\n")
        (tmp_path / "serving" / "engine.env").unlink()
        problem = "node: the record of what served lacks engine.env"
    result, text = run(tmp_path, "rollback", files, _engine_release_failure="The engine did not start: rank 0 failed.")
    assert result.returncode != 0
    assert "The engine did not start: rank 0 failed. NOT ROLLED BACK: " + problem in text, text[-3000:]
    assert os.readlink(tmp_path / "engine" / "current") == str(failed)


def test_ansible_checks_the_role_arguments(node):
    tmp_path, _build, _files = node
    result, text = run(tmp_path, "main", "not a mapping")
    assert result.returncode != 0
    assert "engine_release_files" in text and "Run the smoke checks" not in text, text[-3000:]
