# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkfold.cluster.zig (wheel): venv_pins leaves a converged wheel alone, the link is declared, zig is asked.

Runs the role's tasks against this machine with the test venv (it holds the pinned ziglang wheel) as zig_venv and
the link under the test's directory: no lab. Another wheel version would run pip (check mode: nothing is
installed on the controller).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import pathlib
import re
import sys

import ziglang

from tests.unit.playbook import run_playbook, task_result

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


_task = functools.partial(task_result, role="zig")
LINK = "Link zig where non-interactive shells find it"
ASK = "Ask the linked zig for its version"
REQUIRE = "Require exactly zig_version"


def test_a_converged_wheel_runs_no_pip_changes_nothing_and_the_version_is_checked(tmp_path):
    for args in ((), ("--check", "--diff")):
        proc = _run(tmp_path, {}, args)
        assert proc.returncode == 0, proc.stdout[-4000:]
        # venv_pins found the wheel at its version (pip would have made it "changed"), the link is right
        assert _task(proc.stdout, PIP) == "ok", proc.stdout[-3000:]
        assert _task(proc.stdout, LINK) == "ok", proc.stdout[-3000:]
        assert _task(proc.stdout, ASK) == "ok" and _task(proc.stdout, REQUIRE) == "ok", proc.stdout[-3000:]
        assert f"zig {RELEASE}" in proc.stdout
        assert re.search(r"node\s+: ok=\d+\s+changed=0 ", proc.stdout), proc.stdout[-2000:]


def test_another_wheel_version_runs_pip_and_check_mode_asks_no_zig_yet(tmp_path):
    proc = _run(tmp_path, {"zig_wheel_version": RELEASE + ".post99"}, ["--check", "--diff"])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _task(proc.stdout, PIP) == "changed", proc.stdout[-3000:]
    assert f"+ziglang=={RELEASE}.post99" in proc.stdout and f"-ziglang=={WHEEL}" in proc.stdout, proc.stdout[-3000:]
    # the wheel is not there yet in check mode: no binary to link or ask (the link would keep the old zig)
    for task in (LINK, ASK, REQUIRE):
        assert _task(proc.stdout, task) == "skipping", task


def test_a_wheel_version_that_is_not_the_release_is_refused_before_anything_runs(tmp_path):
    proc = _run(tmp_path, {"zig_wheel_version": "0.0.1"})
    assert proc.returncode != 0
    assert "zig_wheel_version that release or a .postN of it" in proc.stdout, proc.stdout[-3000:]
    assert _task(proc.stdout, PIP) == "left out"


def test_a_link_to_another_zig_is_repaired_and_asked_again(tmp_path):
    fake = tmp_path / "other-zig"
    fake.write_text("#!/bin/sh\necho 0.0.1\n")
    fake.chmod(0o755)
    (tmp_path / "zig").symlink_to(fake)
    proc = _run(tmp_path, {})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _task(proc.stdout, PIP) == "ok", proc.stdout[-3000:]
    assert _task(proc.stdout, LINK) == "changed", proc.stdout[-3000:]
    assert _task(proc.stdout, ASK) == "ok", proc.stdout[-3000:]
    assert (tmp_path / "zig").resolve() == pathlib.Path(ziglang.__file__).resolve().parent / "zig"
