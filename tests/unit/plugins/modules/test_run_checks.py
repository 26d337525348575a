# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster.run_checks: check programs run in their directory, a missing one as data."""

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import run_checks

from tests.unit.module_runner import module_runner


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, run_checks.main)


def test_each_check_runs_in_its_directory_with_its_arguments_and_a_missing_one_is_data(run, tmp_path):
    kit = tmp_path / "kit"
    (kit / "tools").mkdir(parents=True)
    # not executable, as a download leaves it: the interpreter runs it
    (kit / "tools" / "verify_kit.sh").write_text(
        'for i in $(seq 1 30); do echo "checking $i"; done\necho "in $(pwd) with $*"\necho warn >&2\nexit 3\n')
    checks = [{"name": "kernel kit", "chdir": str(kit), "argv": ["tools/verify_kit.sh", "--quick"]},
              {"name": "engram", "chdir": str(tmp_path / "engram"), "argv": ["verify.sh"]}]
    kind, result, _w = run({"checks": checks, "tail_lines": 3})
    assert kind == "exit" and result["changed"] is False
    kit_result, engram = result["results"]
    assert kit_result == {"name": "kernel kit", "program": str(kit / "tools" / "verify_kit.sh"), "missing": False,
                          "rc": 3, "stdout_tail": ["checking 29", "checking 30", f"in {kit} with --quick"],
                          "stderr_tail": ["warn"]}
    assert engram == {"name": "engram", "program": str(tmp_path / "engram" / "verify.sh"), "missing": True,
                      "rc": None, "stdout_tail": [], "stderr_tail": []}


def test_check_mode_runs_the_checks_too(run, tmp_path, monkeypatch):
    (tmp_path / "ok.sh").write_text("echo kit OK\n")
    kind, result, _w = run({"checks": [{"name": "kit", "chdir": str(tmp_path), "argv": ["ok.sh"]}],
                            "_ansible_check_mode": True})
    assert kind == "exit"
    assert (result["results"][0]["rc"], result["results"][0]["stdout_tail"]) == (0, ["kit OK"])


def test_an_empty_argv_is_refused_naming_the_check(run, tmp_path):
    kind, result, _w = run({"checks": [{"name": "kit", "chdir": str(tmp_path), "argv": []}]})
    assert (kind, result["msg"]) == ("fail", "checks kit have an empty argv: give the program (and its arguments)")
