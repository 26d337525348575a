# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for module_utils/node_files (the readers of read_files, fabric_facts and write_files)."""

import os

from ansible_collections.sparkfold.cluster.plugins.module_utils import node_files


def test_a_link_is_a_link_or_what_it_points_to(tmp_path):
    (tmp_path / "target").write_text("text\n")
    os.symlink(tmp_path / "target", tmp_path / "link")
    entry, problem = node_files.read_entry(str(tmp_path / "link"), 100)
    assert problem is None
    assert (entry["type"], entry["target"], entry["content"]) == ("link", str(tmp_path / "target"), "text\n")
    entry, problem = node_files.read_entry(str(tmp_path / "link"), 100, follow_links=True)
    assert problem is None
    assert (entry["type"], entry["content"], "target" in entry) == ("file", "text\n", False)


def test_a_dangling_link_has_no_text_and_followed_is_absent(tmp_path):
    os.symlink(tmp_path / "gone", tmp_path / "link")
    entry, problem = node_files.read_entry(str(tmp_path / "link"), 100)
    assert (problem, entry["type"], "content" in entry) == (None, "link", False)
    assert node_files.read_entry(str(tmp_path / "link"), 100, follow_links=True) == (
        {"exists": False, "type": "absent"}, None)


def test_a_directory_lists_only_when_asked_and_a_large_file_is_a_problem(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "big").write_text("x" * 11)
    entry, _problem = node_files.read_entry(str(tmp_path / "d"), 10)
    assert (entry["type"], "entries" in entry) == ("directory", False)
    entry, _problem = node_files.read_entry(str(tmp_path / "d"), 10, list_directories=True)
    assert [(e["name"], e["type"]) for e in entry["entries"]] == [("big", "file")]
    entry, problem = node_files.read_entry(str(tmp_path / "d" / "big"), 10)
    assert entry is None
    assert problem == f"{tmp_path / 'd' / 'big'} holds 11 bytes, more than max_bytes (10)"
    assert node_files.read_entry(str(tmp_path / "d" / "big"), 10, text=False)[0]["type"] == "file"
