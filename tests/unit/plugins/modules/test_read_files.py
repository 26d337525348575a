# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.read_files module (AnsibleModule run in-process)."""

import grp
import json
import os
import pwd

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import read_files

from tests.unit.module_runner import module_runner


@pytest.fixture
def run(monkeypatch):
    """run(args) -> (kind, result, warnings): read_files.main() in-process."""
    return module_runner(monkeypatch, read_files.main)


def test_reads_files_links_directories_and_absent_paths_in_one_run(run, tmp_path):
    build = tmp_path / "engine" / "3f0c2a9e41b7d655"
    build.mkdir(parents=True)
    (build / "sparkfold-stamp.json").write_text(json.dumps({"build_id": "3f0c2a9e41b7d655"}))
    (tmp_path / "engine" / "current").symlink_to(build)
    (tmp_path / "engine" / "dangling").symlink_to(tmp_path / "engine" / "gone")
    paths = [
        str(tmp_path / "engine" / "current"),
        str(tmp_path / "engine" / "current" / "sparkfold-stamp.json"),
        str(tmp_path / "engine" / "previous"),
        str(tmp_path / "engine" / "dangling"),
        str(build),
    ]
    kind, result, _warnings = run({"paths": paths})
    assert kind == "exit"
    assert result["changed"] is False
    files = result["files"]
    me = {"owner": pwd.getpwuid(os.getuid()).pw_name, "group": grp.getgrgid(os.getgid()).gr_name}
    assert files[paths[0]] == {
        "exists": True,
        "type": "link",
        "mode": "0777",
        **me,
        "target": str(build),
        "resolved": str(build),
    }
    assert files[paths[1]]["type"] == "file"
    assert json.loads(files[paths[1]]["content"]) == {"build_id": "3f0c2a9e41b7d655"}
    assert files[paths[2]] == {"exists": False, "type": "absent"}
    assert files[paths[3]]["type"] == "link" and "content" not in files[paths[3]]
    os.chmod(build, 0o750)
    kind, result, _warnings = run({"paths": [str(build)]})
    assert result["files"][str(build)] == {"exists": True, "type": "directory", "mode": "0750", **me}


def test_a_relative_link_resolves_as_stat_has_it(run, tmp_path):
    (tmp_path / "b1").mkdir()
    os.symlink("b1", tmp_path / "current")
    kind, result, _warnings = run({"paths": [str(tmp_path / "current")]})
    assert kind == "exit"
    assert result["files"][str(tmp_path / "current")]["target"] == "b1"
    assert result["files"][str(tmp_path / "current")]["resolved"] == str(tmp_path / "b1")


def test_a_file_over_max_bytes_fails_naming_it(run, tmp_path):
    big = tmp_path / "big.json"
    big.write_text("x" * 100)
    kind, result, _warnings = run({"paths": [str(big)], "max_bytes": 10})
    assert kind == "fail"
    assert f"{big} holds 100 bytes, more than max_bytes (10)" in result["msg"]


def test_a_relative_path_is_refused(run):
    kind, result, _warnings = run({"paths": ["relative/stamp.json"]})
    assert kind == "fail"
    assert "paths must be absolute: relative/stamp.json" in result["msg"]


def test_check_mode_reads_the_same(run, tmp_path):
    (tmp_path / "f").write_text("hello\n")
    kind, result, _warnings = run({"paths": [str(tmp_path / "f")], "_ansible_check_mode": True})
    assert (kind, result["files"][str(tmp_path / "f")]["content"]) == ("exit", "hello\n")


def test_list_directories_lists_what_find_would_without_recursing(run, tmp_path):
    builds = tmp_path / "engine"
    (builds / "3f0c2a9e41b7d655" / "bin").mkdir(parents=True)
    (builds / "aa00bb11cc22dd33").mkdir()
    (builds / "current").symlink_to(builds / "3f0c2a9e41b7d655")
    (builds / "notes.txt").write_text("x")
    os.utime(builds / "aa00bb11cc22dd33", (1000, 1000))
    kind, result, _warnings = run({"paths": [str(builds), str(builds / "current")], "list_directories": True})
    assert kind == "exit"
    entries = result["files"][str(builds)]["entries"]
    assert [(e["name"], e["type"]) for e in entries] == [
        ("3f0c2a9e41b7d655", "directory"),
        ("aa00bb11cc22dd33", "directory"),
        ("current", "link"),
        ("notes.txt", "file"),
    ]
    assert entries[1]["path"] == str(builds / "aa00bb11cc22dd33") and entries[1]["mtime"] == 1000
    # A link to a directory is read as a link, not listed.
    assert "entries" not in result["files"][str(builds / "current")]
    # Without the option nothing is listed (the entry is as before).
    kind, result, _warnings = run({"paths": [str(builds)]})
    assert "entries" not in result["files"][str(builds)]


def test_stat_paths_are_not_read_whatever_their_size(run, tmp_path):
    program = tmp_path / "python3"
    program.write_bytes(b"\0" * 2048)
    link = tmp_path / "python"
    link.symlink_to(program)
    record = tmp_path / "record.json"
    record.write_text("{}")
    kind, result, _warnings = run({"paths": [str(record)], "stat_paths": [str(link), str(tmp_path / "none")],
                                   "max_bytes": 1024})
    assert kind == "exit"
    files = result["files"]
    assert files[str(record)]["content"] == "{}"
    assert files[str(link)]["exists"] is True
    assert files[str(link)]["type"] == "link"
    assert "content" not in files[str(link)]
    assert files[str(tmp_path / "none")] == {"exists": False, "type": "absent"}


def test_a_relative_stat_path_is_refused(run):
    kind, result, _warnings = run({"paths": [], "stat_paths": ["bin/python"]})
    assert kind == "fail"
    assert result["msg"] == "paths must be absolute: bin/python"
