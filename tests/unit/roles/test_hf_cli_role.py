# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkfold.cluster.hf_cli: venv_pins leaves a converged venv alone, the link and the token are declared.

Runs the role's tasks against this machine with the test venv (it holds the pinned huggingface_hub) as hf_cli_venv
and a link under the test's directory: no lab. When a pin is missing, venv_pins would run pip (check mode here, so
nothing is installed on the controller).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import pathlib
import re
import sys

from tests.unit.playbook import run_playbook, task_result

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
LINK = "Link hf where non-interactive shells find it"
ASK = "Ask the installed hf for its version"


_task = functools.partial(task_result, role="hf_cli")


def _link(tmp_path, target=None):
    """hf linked as a converged node has it (or to ``target``)."""
    (tmp_path / "hf").symlink_to(target or pathlib.Path(sys.executable).parent / "hf")


def test_a_converged_venv_runs_no_pip_asks_nothing_and_changes_nothing(tmp_path):
    _link(tmp_path)
    for args in ((), ("--check", "--diff")):
        proc = _run(tmp_path, {"hf_cli_python_packages": [f"PyYAML=={importlib.metadata.version('PyYAML')}"]}, args)
        assert proc.returncode == 0, proc.stdout[-4000:]
        # venv_pins found every pin at its version (pip would have made it "changed"), the link is right
        assert _task(proc.stdout, PIP) == "ok", proc.stdout[-3000:]
        assert _task(proc.stdout, LINK) == "ok", proc.stdout[-3000:]
        assert _task(proc.stdout, ASK) == "skipping", proc.stdout[-3000:]
        assert re.search(r"node\s+: ok=\d+\s+changed=0 ", proc.stdout), proc.stdout[-2000:]


def test_a_missing_pin_runs_pip_and_a_range_is_refused(tmp_path):
    _link(tmp_path)
    proc = _run(tmp_path, {"hf_cli_python_packages": ["PyYAML==0.0.1"]}, ["--check", "--diff"])
    assert _task(proc.stdout, PIP) == "changed", proc.stdout[-3000:]
    assert "+PyYAML==0.0.1" in proc.stdout and "-PyYAML==" in proc.stdout, proc.stdout[-3000:]
    proc = _run(tmp_path, {"hf_cli_python_packages": ["PyYAML>=1"]}, ["--check"])
    assert proc.returncode != 0 and _task(proc.stdout, PIP) == "fatal", proc.stdout[-3000:]
    assert "'PyYAML>=1' is not an exact pin: write PyYAML==VERSION" in proc.stdout, proc.stdout[-3000:]


def test_hf_xet_is_pinned_with_huggingface_hub(tmp_path):
    """Another hf_xet than the pin in the venv: pip runs (check mode)."""
    _link(tmp_path)
    proc = _run(tmp_path, {"hf_cli_xet_version": "0.0.1"}, ["--check"])
    assert _task(proc.stdout, PIP) == "changed", proc.stdout[-3000:]


def test_a_link_to_another_hf_is_repaired_and_the_new_one_asked(tmp_path):
    fake = tmp_path / "other-hf"
    fake.write_text("#!/bin/sh\necho 'version: 0.0.1'\n")
    fake.chmod(0o755)
    _link(tmp_path, fake)
    proc = _run(tmp_path, {})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _task(proc.stdout, PIP) == "ok", proc.stdout[-3000:]
    assert _task(proc.stdout, LINK) == "changed", proc.stdout[-3000:]
    assert _task(proc.stdout, ASK) == "ok", proc.stdout[-3000:]
    assert (tmp_path / "hf").resolve() == (pathlib.Path(sys.executable).parent / "hf").resolve()


def test_a_token_on_a_node_that_never_downloads_is_removed(tmp_path):
    _link(tmp_path)
    token = tmp_path / "token"
    token.write_text("hf_left0000000000000000000000000000000\n")
    proc = _run(tmp_path, {"recipe_head": "another-node"})
    assert _task(proc.stdout, "Remove a Hub token from the nodes that never download") == "changed", proc.stdout[-3000:]
    assert not token.exists()


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
    assert _task(proc.stdout, TOKEN_WRITE) == "ok", proc.stdout[-3000:]
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


def test_an_hf_that_answers_another_version_is_refused(tmp_path):
    """hf's JSON answer is compared with the pin, not searched for it: a pre-release of the pin is another version."""
    pin = importlib.metadata.version("huggingface_hub")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    # venv_pins reads the venv with its python: the test venv's, which holds every pin
    (venv / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (venv / "bin" / "hf").write_text(f"#!/bin/sh\necho '{{\"version\": \"{pin}rc1\"}}'\n")
    for name in ("python", "hf"):
        (venv / "bin" / name).chmod(0o755)
    proc = _run(tmp_path, {"hf_cli_venv": str(venv)})
    assert _task(proc.stdout, PIP) == "ok", proc.stdout[-3000:]
    assert _task(proc.stdout, LINK) == "changed", proc.stdout[-3000:]
    assert proc.returncode != 0, proc.stdout[-3000:]
    text = " ".join(proc.stdout.split())
    assert (f"node: {tmp_path / 'hf'} is huggingface_hub {pin}rc1, pinned {pin}; remove the venv ({venv}) and run "
            "again") in text, text[-3000:]
