# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster.git_apply, against real git repositories under tmp_path."""

import subprocess

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import git_apply

from tests.unit.module_runner import module_runner

ADD_RECIPE = """diff --git a/RECIPE.md b/RECIPE.md
new file mode 100644
--- /dev/null
+++ b/RECIPE.md
@@ -0,0 +1 @@
+recipe
"""

EDIT_README = """diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1 +1 @@
-engine
+engine, patched
"""

EDIT_MISSING = """diff --git a/src/gone.zig b/src/gone.zig
--- a/src/gone.zig
+++ b/src/gone.zig
@@ -1 +1 @@
-a
+b
"""


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, git_apply.main)


@pytest.fixture
def tree(tmp_path):
    path = tmp_path / "tree"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "README.md").write_text("engine\n")
    return path


def _patch(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_patches_apply_in_order_and_a_second_run_finds_them_applied(run, tree, tmp_path):
    patches = [_patch(tmp_path, "1.patch", ADD_RECIPE), _patch(tmp_path, "2.patch", EDIT_README)]
    kind, result, _warnings = run({"path": str(tree), "patches": patches})
    assert kind == "exit", result
    assert (result["changed"], result["applied"], result["already"]) == (True, patches, [])
    assert (tree / "README.md").read_text() == "engine, patched\n" and (tree / "RECIPE.md").is_file()
    kind, result, _warnings = run({"path": str(tree), "patches": patches})
    assert (kind, result["changed"], result["applied"], result["already"]) == ("exit", False, [], patches)


def test_check_mode_applies_nothing(run, tree, tmp_path):
    patches = [_patch(tmp_path, "1.patch", EDIT_README)]
    kind, result, _warnings = run({"path": str(tree), "patches": patches, "_ansible_check_mode": True})
    assert (kind, result["changed"], result["applied"]) == ("exit", True, patches)
    assert (tree / "README.md").read_text() == "engine\n"


@pytest.mark.parametrize(("text", "files"), [
    (EDIT_MISSING, ["src/gone.zig"]),
    (EDIT_README.replace("-engine", "-something else"), ["README.md"]),
])
def test_a_patch_that_does_not_apply_is_named_with_its_files(run, tree, tmp_path, text, files):
    patches = [_patch(tmp_path, "1.patch", ADD_RECIPE), _patch(tmp_path, "2.patch", text)]
    kind, result, _warnings = run({"path": str(tree), "patches": patches})
    assert kind == "fail"
    assert (result["failed_patch"], result["failed_index"], result["files"]) == (patches[1], 1, files)
    assert result["msg"] == f"patch {patches[1]} (2 of 2) does not apply to {tree}; file(s): {', '.join(files)}"
    assert result["applied"] == [patches[0]] and "error:" in result["stderr"]
    # the tree keeps the patch before it, and nothing of the failing one
    assert (tree / "RECIPE.md").is_file() and (tree / "README.md").read_text() == "engine\n"


def test_conflict_files_of_each_error_form():
    stderr = ("error: patch failed: src/a.zig:12\nerror: src/a.zig: patch does not apply\n"
              "error: src/b.zig: No such file or directory\nerror: NEW.md: already exists in working directory\n")
    assert git_apply.conflict_files(stderr) == ["src/a.zig", "src/b.zig", "NEW.md"]
