# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the sparkfold.cluster.venv_pins module (AnsibleModule run in-process).

A real venv (python3 -m venv) and real pip, offline: the packages are tiny wheels of made-up packages written by
hand into a directory that pip reads with --no-index --find-links.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import venv_pins

from tests.unit.module_runner import module_runner

PROBE = "sparkfold_probe"


def _wheel(directory, name, version, requires=()):
    """A pure-Python wheel of ``name`` at ``version``: one module that knows its version, and its metadata."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: {}\nVersion: {}\n{}".format(
            name, version, "".join(f"Requires-Dist: {r}\n" for r in requires)),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: sparkfold-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    directory = tmp_path_factory.mktemp("wheels")
    _wheel(directory, PROBE, "1.0")
    _wheel(directory, PROBE, "2.0")
    _wheel(directory, "sparkfold_tool", "1.0", requires=[f"{PROBE}==1.0"])
    return directory


@pytest.fixture
def run(monkeypatch):
    """run(args) -> (kind, result, warnings): venv_pins.main() in-process."""
    return module_runner(monkeypatch, venv_pins.main)


def _args(path, packages, wheels, check=False, extra=None):
    args = {"path": str(path), "packages": packages, "_ansible_diff": True,
            "extra_args": extra if extra is not None else f"--no-index --find-links {wheels}"}
    if check:
        args["_ansible_check_mode"] = True
    return args


def test_creates_installs_leaves_alone_bumps_and_never_lets_a_tool_move_a_pin(run, tmp_path, wheels):
    venv = tmp_path / "venv"
    kind, result, _warnings = run(_args(venv, [f"{PROBE}==1.0"], wheels))
    assert kind == "exit", result
    assert (result["changed"], result["created"], result["installed"]) == (True, True, {PROBE: "1.0"})
    assert result["changed_pins"] == [f"{PROBE}==1.0"]
    assert result["diff"] == {"before_header": f"{venv} (absent)", "after_header": str(venv), "before": "",
                              "after": f"{PROBE}==1.0\n"}
    location = result["locations"][PROBE]
    assert (venv / "bin" / "python").exists()
    assert "VERSION = '1.0'" in (tmp_path.joinpath(location, PROBE, "__init__.py")).read_text()

    # Nothing differs: pip must not run (it would refuse the unknown option and fail the task).
    kind, result, _warnings = run(_args(venv, [f"{PROBE}==1.0"], wheels, extra="--no-such-pip-option"))
    assert kind == "exit", result
    assert (result["changed"], result["created"], result["changed_pins"]) == (False, False, [])
    assert result["installed"] == {PROBE: "1.0"} and "diff" not in result
    # 1.0.0 is the same version as 1.0 (PEP 440), as pip sees it
    kind, result, _warnings = run(_args(venv, [f"{PROBE}==1.0.0"], wheels, extra="--no-such-pip-option"))
    assert (kind, result["changed"]) == ("exit", False), result

    # Check mode: says what would change, installs nothing.
    kind, result, _warnings = run(_args(venv, [f"{PROBE}==2.0"], wheels, check=True, extra="--no-such-pip-option"))
    assert (kind, result["changed"], result["installed"]) == ("exit", True, {PROBE: "2.0"}), result
    assert result["diff"]["before"] == f"{PROBE}==1.0\n" and result["diff"]["after"] == f"{PROBE}==2.0\n"
    assert "VERSION = '1.0'" in (tmp_path.joinpath(location, PROBE, "__init__.py")).read_text()

    kind, result, _warnings = run(_args(venv, [f"{PROBE}==2.0"], wheels))
    assert kind == "exit", result
    assert (result["changed"], result["created"], result["installed"]) == (True, False, {PROBE: "2.0"})
    assert result["diff"]["before"] == f"{PROBE}==1.0\n" and result["diff"]["after"] == f"{PROBE}==2.0\n"
    assert "VERSION = '2.0'" in (tmp_path.joinpath(location, PROBE, "__init__.py")).read_text()

    # A tool that needs another version of a pin fails in pip's one resolution instead of moving the pin.
    kind, result, _warnings = run(_args(venv, [f"{PROBE}==2.0", "sparkfold_tool==1.0"], wheels))
    assert kind == "fail", result
    assert "sparkfold_tool==1.0" in result["msg"] and "conflict" in result["msg"].lower(), result["msg"]
    assert "VERSION = '2.0'" in (tmp_path.joinpath(location, PROBE, "__init__.py")).read_text()

    # A pin that does not exist fails with pip's own words.
    kind, result, _warnings = run(_args(venv, [f"{PROBE}==2.0", "sparkfold_nowhere==3.1"], wheels))
    assert kind == "fail", result
    assert "No matching distribution found for sparkfold_nowhere==3.1" in result["msg"], result["msg"]


def test_check_mode_creates_no_venv(run, tmp_path, wheels):
    venv = tmp_path / "venv"
    kind, result, _warnings = run(_args(venv, [f"{PROBE}==1.0"], wheels, check=True))
    assert kind == "exit", result
    assert (result["changed"], result["created"], result["installed"]) == (True, True, {PROBE: "1.0"})
    assert result["locations"] == {}
    assert not venv.exists()


@pytest.mark.parametrize("pin, says", [
    (f"{PROBE}>=1.0", f"write {PROBE}==VERSION"),
    (PROBE, f"write {PROBE}==VERSION"),
    (f"{PROBE}==1.*", f"write {PROBE}==VERSION"),
    (f"{PROBE}[extra]==1.0", f"write {PROBE}==VERSION"),
    (f"{PROBE}==1.0; python_version > '3'", f"write {PROBE}==VERSION"),
])
def test_a_pin_that_is_not_exact_is_refused_before_anything_runs(run, tmp_path, wheels, pin, says):
    kind, result, _warnings = run(_args(tmp_path / "venv", ["other==1.0", pin], wheels))
    assert kind == "fail"
    assert f"'{pin}' is not an exact pin" in result["msg"] and says in result["msg"], result["msg"]
    assert "other" not in result["msg"].replace("other==1.0", "")
    assert not (tmp_path / "venv").exists()


def test_a_package_pinned_twice_is_refused(run, tmp_path, wheels):
    kind, result, _warnings = run(_args(tmp_path / "venv", [f"{PROBE}==1.0", "Sparkfold-Probe==2.0"], wheels))
    assert kind == "fail" and "pinned twice" in result["msg"], result
    assert not (tmp_path / "venv").exists()


def test_a_venv_that_cannot_be_created_says_what_to_install(run, tmp_path, wheels):
    args = _args(tmp_path / "venv", [f"{PROBE}==1.0"], wheels)
    args["virtualenv_command"] = "false"
    kind, result, _warnings = run(args)
    assert kind == "fail" and "Is python3-venv installed" in result["msg"], result


def test_a_venv_without_pip_is_made_again_and_filled(run, tmp_path, wheels):
    """python3 -m venv without python3-venv leaves a venv with no pip behind: the next run makes it again."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    kind, result, _warnings = run(_args(venv, [f"{PROBE}==1.0"], wheels))
    assert kind == "exit", result
    assert (result["changed"], result["created"], result["installed"]) == (True, True, {PROBE: "1.0"})
