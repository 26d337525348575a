# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkfold.cluster.zig (wheel) on a converged node reads the wheel once and leaves apt and pip out.

Runs the role against this machine with the test venv (it holds the pinned ziglang wheel) as zig_venv and
the link under the test's directory: no lab. Another wheel version runs pip (check mode: nothing is
installed on the controller).
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import re
import sys

import ziglang

from tests.unit.playbook import run_playbook

PLAY = """
- name: Zig on this machine
  hosts: node
  gather_facts: false
  roles:
    - role: sparkfold.cluster.zig
"""
PIP = "Install the ziglang wheel (pinned) into its venv"
WHEEL = importlib.metadata.version("ziglang")
RELEASE = re.match(r"[0-9]+\.[0-9]+\.[0-9]+", WHEEL).group(0)


def _run(tmp_path, extra, args=()):
    (tmp_path / "inventory.yml").write_text(
        "all:\n  hosts:\n    node:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")
    (tmp_path / "play.yml").write_text(PLAY)
    link = tmp_path / "zig"
    if not link.is_symlink():
        link.symlink_to(pathlib.Path(ziglang.__file__).resolve().parent / "zig")
    given = {"zig_install_method": "wheel", "zig_venv": str(pathlib.Path(sys.executable).parent.parent),
             "zig_link": str(link), "zig_version": RELEASE, "zig_wheel_version": WHEEL, "zig_wheel_packages": []}
    return run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path,
                        ["-e", json.dumps({**given, **extra}), *args])


def _task(out, name):
    """The result of the task named ``name`` (ok, changed or skipping), or "left out" when it did not run at all (the
    tasks of wheel_install.yml, when the read found the pinned wheel installed)."""
    found = re.search(rf"TASK \[sparkfold\.cluster\.zig : {re.escape(name)}\][^\n]*\n(\w+): ", out)
    return found.group(1) if found else "left out"


def test_a_converged_wheel_skips_apt_pip_the_link_and_a_second_question_and_the_version_is_checked(tmp_path):
    proc = _run(tmp_path, {})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _task(proc.stdout, "Install the pinned ziglang wheel and find its zig binary") == "skipping"
    for task in ("Install the packages the venv needs", PIP, "Find the zig binary inside the newly installed wheel"):
        assert _task(proc.stdout, task) == "left out", task
    for task in ("Link zig where non-interactive shells find it", "Ask the linked zig for its version"):
        assert _task(proc.stdout, task) == "skipping", task
    # the answer of the first read is the one checked
    assert _task(proc.stdout, "Require exactly zig_version") == "ok"
    assert f"zig {RELEASE}" in proc.stdout
    assert re.search(r"node\s+: ok=\d+\s+changed=0 ", proc.stdout), proc.stdout[-2000:]


def test_another_wheel_version_runs_pip(tmp_path):
    proc = _run(tmp_path, {"zig_wheel_version": RELEASE + ".post99"}, ["--check"])
    assert _task(proc.stdout, PIP) not in ("skipping", "left out"), proc.stdout[-3000:]


def test_a_link_to_another_zig_is_repaired_and_asked_again(tmp_path):
    fake = tmp_path / "other-zig"
    fake.write_text("#!/bin/sh\necho 0.0.1\n")
    fake.chmod(0o755)
    (tmp_path / "zig").symlink_to(fake)
    proc = _run(tmp_path, {})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _task(proc.stdout, "Link zig where non-interactive shells find it") == "changed", proc.stdout[-3000:]
    assert _task(proc.stdout, "Ask the linked zig for its version") == "ok", proc.stdout[-3000:]
    assert (tmp_path / "zig").resolve() == pathlib.Path(ziglang.__file__).resolve().parent / "zig"
