# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.directories module (AnsibleModule run in-process)."""

import grp
import os
import pwd
import stat

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import directories

from tests.unit.module_runner import module_runner

_OWNER = pwd.getpwuid(os.getuid()).pw_name
_GROUP = grp.getgrgid(os.getgid()).gr_name


@pytest.fixture
def run(monkeypatch):
    """run(args) -> (kind, result, warnings): directories.main() in-process."""
    return module_runner(monkeypatch, directories.main)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _args(paths, mode="0755", check=False):
    args = {"paths": [str(p) for p in paths], "owner": _OWNER, "group": _GROUP, "mode": mode}
    if check:
        args["_ansible_check_mode"] = True
    args["_ansible_diff"] = True
    return args


def test_creates_every_directory_and_its_parents_then_changes_nothing(run, tmp_path):
    wanted = [tmp_path / "a" / "b" / "c", tmp_path / "d", tmp_path / "a" / "b" / "e"]
    kind, result, _warnings = run(_args(wanted, mode="0750"))
    assert kind == "exit"
    assert result["changed"] is True
    assert result["created"] == [
        str(tmp_path / "a"),
        str(tmp_path / "a" / "b"),
        str(wanted[0]),
        str(wanted[1]),
        str(wanted[2]),
    ]
    assert result["changed_paths"] == [str(p) for p in wanted]
    for path in result["created"]:
        assert os.path.isdir(path)
        assert _mode(path) == 0o750
    assert result["diff"][0] == {
        "before": {"path": str(wanted[0]), "state": "absent"},
        "after": {"path": str(wanted[0]), "state": "directory"},
    }

    kind, result, _warnings = run(_args(wanted, mode="0750"))
    assert kind == "exit"
    assert result["changed"] is False
    assert result["created"] == []
    assert result["diff"] == []


def test_check_mode_creates_nothing_and_says_what_would_be(run, tmp_path):
    wanted = [tmp_path / "x" / "y", tmp_path / "x" / "z"]
    kind, result, _warnings = run(_args(wanted, check=True))
    assert kind == "exit"
    assert result["changed"] is True
    assert result["created"] == [str(tmp_path / "x"), str(wanted[0]), str(wanted[1])]
    assert not os.path.exists(tmp_path / "x")


def test_repairs_a_mode_and_reports_it_in_the_diff_check_mode_first(run, tmp_path):
    path = tmp_path / "units"
    path.mkdir(mode=0o700)
    os.chmod(path, 0o700)
    kind, result, _warnings = run(_args([path], check=True))
    assert (kind, result["changed"], result["created"]) == ("exit", True, [])
    assert _mode(path) == 0o700
    assert result["diff"] == [
        {"before": {"path": str(path), "mode": "0700"}, "after": {"path": str(path), "mode": "0755"}}
    ]

    kind, result, _warnings = run(_args([path]))
    assert (kind, result["changed"], result["changed_paths"]) == ("exit", True, [str(path)])
    assert _mode(path) == 0o755


def test_a_file_in_the_way_fails_before_anything_is_created(run, tmp_path):
    (tmp_path / "afile").write_text("x")
    wanted = [tmp_path / "new", tmp_path / "afile", tmp_path / "afile" / "below"]
    kind, result, _warnings = run(_args(wanted))
    assert kind == "fail"
    assert f"{tmp_path / 'afile'} exists and is a file, not a directory" in result["msg"]
    assert f"{tmp_path / 'afile' / 'below'} cannot be created: {tmp_path / 'afile'} is a file" in result["msg"]
    assert result["msg"].startswith("Nothing was changed")
    assert not os.path.exists(tmp_path / "new")


def test_a_link_to_a_directory_is_a_directory(run, tmp_path):
    (tmp_path / "real").mkdir()
    os.chmod(tmp_path / "real", 0o755)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    kind, result, _warnings = run(_args([tmp_path / "link"]))
    assert (kind, result["changed"]) == ("exit", False)
    kind, result, _warnings = run(_args([tmp_path / "link"], mode="0700"))
    assert (kind, result["changed"]) == ("exit", True)
    assert _mode(tmp_path / "real") == 0o700
    assert os.path.islink(tmp_path / "link")


def test_a_relative_path_is_refused(run, tmp_path):
    kind, result, _warnings = run(_args(["relative/dir", tmp_path / "ok"]))
    assert kind == "fail"
    assert "relative/dir is not an absolute path" in result["msg"]
    assert not os.path.exists(tmp_path / "ok")
