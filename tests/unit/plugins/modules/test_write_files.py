# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.write_files module (AnsibleModule run in-process)."""

import grp
import json
import os
import pwd
import stat

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import write_files

from tests.unit.module_runner import module_runner

_OWNER = pwd.getpwuid(os.getuid()).pw_name
_GROUP = grp.getgrgid(os.getgid()).gr_name


@pytest.fixture
def run(monkeypatch):
    """run(args) -> (kind, result, warnings): write_files.main() in-process."""
    return module_runner(monkeypatch, write_files.main)


def _file(path, content=None, **kwargs):
    item = {"path": str(path), "owner": _OWNER, "group": _GROUP, "mode": "0644"}
    if content is not None:
        item["content"] = content
    item.update(kwargs)
    return item


def _args(files, check=False):
    args = {"files": files, "_ansible_diff": True}
    if check:
        args["_ansible_check_mode"] = True
    return args


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_writes_every_file_then_changes_nothing(run, tmp_path):
    files = [_file(tmp_path / "engine.env", "A=1\n"), _file(tmp_path / "unit.service", "[Unit]\n", mode="0640")]
    kind, result, _warnings = run(_args(files))
    assert (kind, result["changed"]) == ("exit", True)
    assert [r["changed"] for r in result["results"]] == [True, True]
    assert (tmp_path / "engine.env").read_text() == "A=1\n"
    assert _mode(tmp_path / "unit.service") == 0o640
    assert result["diff"][0] == {"before_header": f"{tmp_path / 'engine.env'} (absent)",
                                 "after_header": str(tmp_path / "engine.env"), "before": "", "after": "A=1\n"}
    assert sorted(os.listdir(tmp_path)) == ["engine.env", "unit.service"]  # no temporary file left

    kind, result, _warnings = run(_args(files))
    assert (kind, result["changed"], result["diff"], result["changed_paths"]) == ("exit", False, [], [])
    assert [r["changed"] for r in result["results"]] == [False, False]


def test_says_which_file_changed_and_replaces_it_with_a_new_inode(run, tmp_path):
    (tmp_path / "a").write_text("same\n")
    (tmp_path / "b").write_text("old\n")
    os.chmod(tmp_path / "a", 0o644)
    os.chmod(tmp_path / "b", 0o644)
    inode = os.stat(tmp_path / "b").st_ino
    kind, result, _warnings = run(_args([_file(tmp_path / "a", "same\n"), _file(tmp_path / "b", "new\n")]))
    assert kind == "exit"
    assert result["results"] == [
        {"path": str(tmp_path / "a"), "changed": False, "content_changed": False, "attributes_changed": False},
        {"path": str(tmp_path / "b"), "changed": True, "content_changed": True, "attributes_changed": False},
    ]
    assert result["changed_paths"] == [str(tmp_path / "b")]
    assert result["diff"] == [{"before_header": str(tmp_path / "b"), "after_header": str(tmp_path / "b"),
                               "before": "old\n", "after": "new\n"}]
    assert os.stat(tmp_path / "b").st_ino != inode  # renamed over, never written in place


def test_a_mode_alone_is_repaired_and_shown_check_mode_first(run, tmp_path):
    path = tmp_path / "gate.py"
    path.write_text("print()\n")
    os.chmod(path, 0o600)
    kind, result, _warnings = run(_args([_file(path, "print()\n")], check=True))
    assert (kind, result["changed"]) == ("exit", True)
    assert result["results"][0]["attributes_changed"] and not result["results"][0]["content_changed"]
    assert result["diff"] == [
        {"before": {"path": str(path), "mode": "0600"}, "after": {"path": str(path), "mode": "0644"}}]
    assert _mode(path) == 0o600
    kind, result, _warnings = run(_args([_file(path, "print()\n")]))
    assert (kind, result["changed"]) == ("exit", True)
    assert _mode(path) == 0o644


def test_check_mode_writes_and_removes_nothing(run, tmp_path):
    (tmp_path / "old").write_text("x")
    files = [_file(tmp_path / "new", "y"), _file(tmp_path / "old", state="absent")]
    kind, result, _warnings = run(_args(files, check=True))
    assert (kind, result["changed_paths"]) == ("exit", [str(tmp_path / "new"), str(tmp_path / "old")])
    assert sorted(os.listdir(tmp_path)) == ["old"]


def test_check_mode_on_a_fresh_node_reports_files_whose_directory_and_owner_come_earlier(run, tmp_path):
    # Check mode on a fresh node: the task that creates the directory (and the user) ran in check mode too, so
    # neither exists yet; the files are ones a real run would write, not a failure (molecule pair's check step).
    files = [_file(tmp_path / "etc" / "sparkfold" / "engine.env", "A=1\n"),
             _file(tmp_path / "key", "k", owner="no-such-user-sparkfold", group="no-such-group-sparkfold")]
    kind, result, _warnings = run(_args(files, check=True))
    assert (kind, result["changed"]) == ("exit", True)
    assert result["changed_paths"] == [str(tmp_path / "etc" / "sparkfold" / "engine.env"), str(tmp_path / "key")]
    assert result["diff"][0]["after"] == "A=1\n"
    assert sorted(os.listdir(tmp_path)) == []
    # A real run still refuses them before writing anything.
    kind, result, _warnings = run(_args(files))
    assert kind == "fail"
    assert f"its directory {tmp_path / 'etc' / 'sparkfold'} does not exist" in result["msg"]


def test_absent_removes_a_file_and_is_no_change_when_it_is_gone(run, tmp_path):
    (tmp_path / "key").write_text("k\n")
    kind, result, _warnings = run(_args([_file(tmp_path / "key", state="absent")]))
    assert (kind, result["changed"]) == ("exit", True)
    assert not (tmp_path / "key").exists()
    kind, result, _warnings = run(_args([_file(tmp_path / "key", state="absent")]))
    assert (kind, result["changed"]) == ("exit", False)


def test_a_secret_is_written_private_and_never_shown(run, tmp_path):
    path = tmp_path / "engine-api-key"
    path.write_text("old-key-1234\n")
    os.chmod(path, 0o600)
    kind, result, _warnings = run(_args([_file(path, "sk-very-secret-5678\n", mode="0600", secret=True)]))
    assert (kind, result["changed"]) == ("exit", True)
    assert path.read_text() == "sk-very-secret-5678\n"
    assert _mode(path) == 0o600
    shown = json.dumps(result)
    assert "sk-very-secret-5678" not in shown and "old-key-1234" not in shown
    # the diff says that it changed, not what it holds
    diff = result["diff"][0]
    assert (diff["before"], diff["after"]) == (write_files.SECRET_BEFORE, write_files.SECRET_AFTER)


def test_a_new_private_file_is_never_readable_by_others(run, tmp_path, monkeypatch):
    """The temporary file has the final mode before it is renamed into place (no window at the umask's mode)."""
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        seen.append(_mode(src))
        real_replace(src, dst)

    monkeypatch.setattr(write_files.os, "replace", replace)
    kind, _result, _warnings = run(_args([_file(tmp_path / "key", "s\n", mode="0600", secret=True)]))
    assert kind == "exit"
    assert seen == [0o600]


def test_a_failed_validation_writes_nothing_and_says_why(run, tmp_path):
    good, bad = tmp_path / "good.conf", tmp_path / "bad.conf"
    validate = "/bin/sh -c 'grep -q ok %s || { echo refused >&2; exit 3; }'"
    files = [_file(good, "ok\n", validate=validate), _file(bad, "nope\n", validate=validate)]
    kind, result, _warnings = run(_args(files))
    assert kind == "fail"
    assert result["msg"] == (f"Nothing was written: {bad} failed its validation ({validate}, exit 3): refused")
    assert sorted(os.listdir(tmp_path)) == []  # neither file, no temporary file
    kind, result, _warnings = run(_args(files[:1]))
    assert (kind, result["changed"]) == ("exit", True)
    assert good.read_text() == "ok\n"


def test_problems_of_every_file_fail_before_anything_is_written(run, tmp_path):
    (tmp_path / "adir").mkdir()
    files = [
        _file(tmp_path / "fine", "x"),
        _file(tmp_path / "missing" / "f", "x"),
        _file(tmp_path / "adir", "x"),
        _file(tmp_path / "m", "x", mode="u+rw"),
        _file(tmp_path / "o", "x", owner="no-such-user-sparkfold"),
        _file("relative/f", "x"),
    ]
    kind, result, _warnings = run(_args(files))
    assert kind == "fail"
    assert result["msg"].startswith("Nothing was written: ")
    for part in (f"its directory {tmp_path / 'missing'} does not exist",
                 f"{tmp_path / 'adir'} exists and is a directory", "mode 'u+rw' is not octal",
                 "owner no-such-user-sparkfold does not exist", "relative/f is not an absolute"):
        assert part in result["msg"]
    assert not (tmp_path / "fine").exists()


def test_a_path_named_twice_is_refused(run, tmp_path):
    kind, result, _warnings = run(_args([_file(tmp_path / "f", "a"), _file(tmp_path / "f", "b")]))
    assert kind == "fail"
    assert result["msg"] == f"Nothing was written: named more than once: {tmp_path / 'f'}"
