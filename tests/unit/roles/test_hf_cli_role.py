# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkfold.cluster.hf_cli on a converged node reads the venv once and leaves apt and pip out.

Runs the role against this machine with the test venv (it holds the pinned huggingface_hub) as hf_cli_venv
and a link under the test's directory: no lab. When a pin is missing, pip runs (check mode here, so
nothing is installed on the controller).
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import re
import sys

from tests.unit.playbook import run_playbook

PLAY = """
- name: hf on this machine
  hosts: node
  gather_facts: false
  roles:
    - role: sparkfold.cluster.hf_cli
"""


def _run(tmp_path, extra, args=()):
    (tmp_path / "inventory.yml").write_text(
        "all:\n  hosts:\n    node:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")
    (tmp_path / "play.yml").write_text(PLAY)
    given = {"hf_cli_venv": str(pathlib.Path(sys.executable).parent.parent), "hf_cli_link": str(tmp_path / "hf"),
             "hf_cli_version": importlib.metadata.version("huggingface_hub"),
             "hf_cli_xet_version": importlib.metadata.version("hf_xet"), "hf_cli_python_packages": [],
             "hf_cli_packages": [], "hf_cli_token_file": str(tmp_path / "token"), "recipe_head": "node"}
    return run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path,
                        ["-e", json.dumps({**given, **extra}), *args])


PIP = "Install huggingface_hub, hf_xet and the recipe tools' packages (pinned) into their venv"


INSTALL = "Install hf and write the token where the read found a difference"


def _task(out, name):
    """The result line of the task named ``name`` (ok, changed or skipping), or "left out" when it did not run at all
    (the tasks of install.yml, when main.yml's read found nothing to install or write)."""
    found = re.search(rf"TASK \[sparkfold\.cluster\.hf_cli : {re.escape(name)}\][^\n]*\n(\w+): ", out)
    return found.group(1) if found else "left out"


def _link(tmp_path, target=None):
    """hf linked as a converged node has it (or to ``target``)."""
    (tmp_path / "hf").symlink_to(target or pathlib.Path(sys.executable).parent / "hf")


def test_a_converged_venv_skips_apt_pip_and_the_second_question_and_changes_nothing(tmp_path):
    _link(tmp_path)
    proc = _run(tmp_path, {"hf_cli_python_packages": [f"PyYAML=={importlib.metadata.version('PyYAML')}"]})
    assert proc.returncode == 0, proc.stdout[-4000:]
    # the first read found every pin and the link as they should be: install.yml is not even included
    assert _task(proc.stdout, INSTALL) == "skipping", proc.stdout[-3000:]
    for task in ("Install the packages the venv needs", PIP, "Ask the installed hf for its version",
                 "Link hf where non-interactive shells find it"):
        assert _task(proc.stdout, task) == "left out", task
    assert re.search(r"node\s+: ok=\d+\s+changed=0 ", proc.stdout), proc.stdout[-2000:]


def test_a_missing_pin_or_a_range_runs_pip(tmp_path):
    _link(tmp_path)
    for packages in (["PyYAML==0.0.1"], ["PyYAML>=1"]):
        proc = _run(tmp_path, {"hf_cli_python_packages": packages}, ["--check"])
        assert _task(proc.stdout, PIP) not in ("skipping", "left out"), (packages, proc.stdout[-3000:])


def test_hf_xet_is_pinned_with_huggingface_hub(tmp_path):
    """Another hf_xet than the pin in the venv: pip runs (check mode)."""
    _link(tmp_path)
    proc = _run(tmp_path, {"hf_cli_xet_version": "0.0.1"}, ["--check"])
    assert _task(proc.stdout, PIP) not in ("skipping", "left out"), proc.stdout[-3000:]


def test_a_link_to_another_hf_runs_pip_and_is_repaired(tmp_path):
    fake = tmp_path / "other-hf"
    fake.write_text("#!/bin/sh\necho 'version: 0.0.1'\n")
    fake.chmod(0o755)
    _link(tmp_path, fake)
    proc = _run(tmp_path, {}, ["--check"])
    assert _task(proc.stdout, PIP) not in ("skipping", "left out"), proc.stdout[-3000:]
    assert _task(proc.stdout, "Link hf where non-interactive shells find it") == "changed", proc.stdout[-3000:]


TOKEN_WRITE = "Write the Hub token on the head (readable by root only)"


def test_a_written_token_is_left_alone_and_a_changed_or_opened_one_is_written_again(tmp_path):
    # The role writes root's 0600 token: these tests run as root (CI and the lab's controller).
    _link(tmp_path)
    token = tmp_path / "tokens" / "token"
    extra = {"hf_cli_token": "hf_first0000000000000000000000000000", "hf_cli_token_file": str(token)}
    proc = _run(tmp_path, extra)
    assert _task(proc.stdout, TOKEN_WRITE) == "changed", proc.stdout[-3000:]
    assert token.read_text() == extra["hf_cli_token"] + "\n" and token.stat().st_mode & 0o777 == 0o600
    proc = _run(tmp_path, extra)
    assert _task(proc.stdout, TOKEN_WRITE) == "left out", proc.stdout[-3000:]
    assert re.search(r"node\s+: ok=\d+\s+changed=0 ", proc.stdout), proc.stdout[-2000:]
    token.chmod(0o644)
    proc = _run(tmp_path, extra)
    assert _task(proc.stdout, TOKEN_WRITE) == "changed", proc.stdout[-3000:]
    assert token.stat().st_mode & 0o777 == 0o600
    proc = _run(tmp_path, {**extra, "hf_cli_token": "hf_second000000000000000000000000000"})
    assert _task(proc.stdout, TOKEN_WRITE) == "changed", proc.stdout[-3000:]
    assert token.read_text() == "hf_second000000000000000000000000000\n"
    # the token never reaches the output
    assert "hf_second0000" not in proc.stdout
