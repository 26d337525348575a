# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkfold.cluster.engine: a build of a pinned commit and a recipe patch, made current; the source cache, the
directories, the patch and the links declared by modules that decide what changed.

Runs the role's tasks against this machine, every path under the test's directory: the engine's repository is a
local git repository, zig a stand-in that answers `version` and whose `build` installs the program the recipe
names under --prefix. No lab.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

from tests.unit.playbook import changed_count, run_playbook, task_result

PLAY = """
- name: engine on this machine
  hosts: node
  gather_facts: false
  roles:
    - role: sparkfold.cluster.engine
"""

ZIG = """#!/bin/sh
case "$1" in
  version) echo 0.17.0 ;;
  build)
    while [ $# -gt 0 ]; do [ "$1" = --prefix ] && prefix="$2"; shift; done
    mkdir -p "$prefix/bin" && printf '#!/bin/sh\\n' > "$prefix/bin/tf-dsv41-lanes"
    chmod 0755 "$prefix/bin/tf-dsv41-lanes"
    ;;
  *) exit 64 ;;
esac
"""

PATCH = """diff --git a/RECIPE.md b/RECIPE.md
new file mode 100644
--- /dev/null
+++ b/RECIPE.md
@@ -0,0 +1 @@
+Built by the engine role's test.
"""


def _git(*args, cwd):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def _setup(tmp_path):
    """The engine's repository, the stand-in zig and the patch; returns the role's variables."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    _git("init", "-q", "-b", "main", cwd=upstream)
    (upstream / ".zig-version").write_text("0.17.0\n")
    (upstream / "README.md").write_text("engine\n")
    _git("add", "-A", cwd=upstream)
    _git("commit", "-qm", "engine", cwd=upstream)
    zig = tmp_path / "bin" / "zig"
    zig.parent.mkdir()
    zig.write_text(ZIG)
    zig.chmod(0o755)
    (tmp_path / "0001-recipe.patch").write_text(PATCH)
    node = tmp_path / "node"
    return {
        "engine_repo_url": str(upstream), "engine_commit": _git("rev-parse", "HEAD", cwd=upstream),
        "engine_patches": [str(tmp_path / "0001-recipe.patch")], "engine_build_args": ["install"],
        "engine_binaries": ["bin/tf-dsv41-lanes"], "engine_tree_files": [], "engine_packages": [],
        "engine_server_packages": [], "recipe_rank": 0,
        "engine_zig": str(zig), "engine_src_dir": f"{node}/src/engine", "engine_patch_dir": f"{node}/patches",
        "engine_worktree_dir": f"{node}/build", "engine_zig_cache_dir": f"{node}/zig",
        "engine_prefix_root": f"{node}/engine", "engine_build_poll_s": 1,
        "engine_retired_files": [f"{node}/libexec/engine-fetch"],
        "engine_dirs": [f"{node}/patches", f"{node}/src", f"{node}/engine"],
    }


def _run(tmp_path, given, args=(), play=PLAY):
    (tmp_path / "inventory.yml").write_text(
        "all:\n  hosts:\n    node:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")
    (tmp_path / "play.yml").write_text(play)
    return run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path,
                        ["-e", json.dumps(given), *args])


_task = functools.partial(task_result, role="engine")
_changed = changed_count
FETCH = "Fetch the engine repository and check that the pinned commit is upstream"
RETIRE = "Remove the files earlier releases put on the node that nothing uses any more"


def test_a_build_is_made_current_then_left_alone_and_a_drift_repaired(tmp_path):
    given = _setup(tmp_path)
    root = tmp_path / "node" / "engine"
    # a fresh node in check mode: said what would happen, nothing made
    proc = _run(tmp_path, given, ["--check", "--diff"])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "is not installed: it would be built into" in proc.stdout and not (tmp_path / "node").exists()
    proc = _run(tmp_path, given)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _task(proc.stdout, FETCH) == "changed", proc.stdout[-3000:]
    build = (root / "current").resolve()
    assert (build / "bin" / "tf-dsv41-lanes").is_file() and (build / "sparkfold-stamp.json").is_file()
    # converged: nothing to build, every module finds what it would write
    for args in ((), ("--check", "--diff")):
        proc = _run(tmp_path, given, args)
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert _task(proc.stdout, "Build the engine (zig build install)") == "left out", proc.stdout[-3000:]
        for name in ("Copy the patches to the node", "Make this build current"):
            assert _task(proc.stdout, name) == "ok", (name, proc.stdout[-3000:])
        # the source is fetched on every real run, and that is no change
        if not args:
            assert _task(proc.stdout, FETCH) == "ok", proc.stdout[-3000:]
        assert _changed(proc) == 0, proc.stdout[-3000:]
    # a drift: the link gone, the patch's mode, the fetch helper an earlier release installed
    (root / "current").unlink()
    patch = next((tmp_path / "node" / "patches").iterdir())
    patch.chmod(0o600)
    helper = tmp_path / "node" / "libexec" / "engine-fetch"
    helper.parent.mkdir()
    helper.write_text("#!/bin/sh\nexit 0\n")
    proc = _run(tmp_path, given, ["--check", "--diff"])
    assert _changed(proc) == 3 and not (root / "current").exists() and helper.exists(), proc.stdout[-3000:]
    proc = _run(tmp_path, given)
    assert proc.returncode == 0, proc.stdout[-4000:]
    for name in ("Copy the patches to the node", "Make this build current", RETIRE):
        assert _task(proc.stdout, name) == "changed", (name, proc.stdout[-3000:])
    assert _task(proc.stdout, "Build the engine (zig build install)") == "left out"
    assert (root / "current").resolve() == build
    assert patch.stat().st_mode & 0o777 == 0o644 and not helper.exists()


def test_a_zig_that_does_not_run_is_named(tmp_path):
    given = _setup(tmp_path)
    proc = _run(tmp_path, {**given, "engine_zig": str(tmp_path / "no-zig")})
    assert proc.returncode != 0
    assert f"{tmp_path}/no-zig does not run (" in proc.stdout, proc.stdout[-3000:]
    assert "the zig role installs it" in proc.stdout


IN_THE_COMMIT = """diff --git a/README.md b/README.md
new file mode 100644
--- /dev/null
+++ b/README.md
@@ -0,0 +1 @@
+engine
"""

EDIT_MISSING = """diff --git a/src/gone.zig b/src/gone.zig
--- a/src/gone.zig
+++ b/src/gone.zig
@@ -1 +1 @@
-a
+b
"""


def test_a_patch_in_the_commit_is_skipped_and_one_that_does_not_apply_named_with_its_files(tmp_path):
    given = _setup(tmp_path)
    (tmp_path / "0002-in-commit.patch").write_text(IN_THE_COMMIT)
    (tmp_path / "0003-gone.patch").write_text(EDIT_MISSING)
    patches = [str(tmp_path / "0001-recipe.patch"), str(tmp_path / "0002-in-commit.patch")]
    proc = _run(tmp_path, {**given, "engine_patches": patches})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert f"patch {patches[1]} is already in {given['engine_commit']} (git apply --check --reverse applies): " \
        "skipped" in proc.stdout, proc.stdout[-3000:]
    current = (tmp_path / "node" / "engine" / "current").resolve()
    proc = _run(tmp_path, {**given, "engine_patches": [*patches, str(tmp_path / "0003-gone.patch")]})
    assert proc.returncode != 0
    assert (f"patch {tmp_path}/0003-gone.patch (patch 3 of 3) does not apply to {given['engine_repo_url']}@"
            f"{given['engine_commit']} after the patches before it; file(s): src/gone.zig. git apply --check says: "
            "error: src/gone.zig: No such file or directory") in proc.stdout, proc.stdout[-3000:]
    # the build that failed is not made current
    assert (tmp_path / "node" / "engine" / "current").resolve() == current


def test_a_pin_force_pushed_away_upstream_stops_the_run_naming_the_commit_and_the_repository(tmp_path):
    given = _setup(tmp_path)
    upstream = given["engine_repo_url"]
    proc = _run(tmp_path, given)
    assert proc.returncode == 0, proc.stdout[-4000:]
    # upstream rewrites main and its server forgets the old commit; the node's cache still holds it
    (tmp_path / "upstream" / "README.md").write_text("engine, rewritten\n")
    _git("commit", "-q", "--amend", "-am", "engine, rewritten", cwd=upstream)
    _git("reflog", "expire", "--expire=now", "--all", cwd=upstream)
    _git("gc", "--quiet", "--prune=now", cwd=upstream)
    proc = _run(tmp_path, given)
    assert proc.returncode != 0
    assert _task(proc.stdout, FETCH) == "fatal", proc.stdout[-3000:]
    assert (f"commit {given['engine_commit']} is not upstream in {upstream} (the cache still holds it from an "
            "earlier fetch)") in proc.stdout, proc.stdout[-3000:]
    assert f"the newest there: main {_git('rev-parse', 'HEAD', cwd=upstream)} (" in proc.stdout


PACKAGES_PLAY = PLAY + """  post_tasks:
    - name: Keep what the package step read
      ansible.builtin.copy:
        content: "{{ __engine_packages | default({}) | to_json }}"
        dest: "{{ packages_out }}"
        mode: "0644"
"""


@pytest.mark.parametrize(("rank", "wanted"), [(0, ["dpkg"]), (1, [])])
def test_rank_0_s_node_gets_the_packages_its_server_runs_with(tmp_path, rank, wanted):
    # The Zig recipes' engine.server_packages (python3-pil: rank 0's vision decodes every image format but PNG with
    # the host's python3 and Pillow) go to the node of rank 0 only, in the build's package step. dpkg stands in for
    # python3-pil: installed on every Debian machine, so the step reads dpkg's database and installs nothing.
    given = {**_setup(tmp_path), "engine_server_packages": ["dpkg"], "recipe_rank": rank,
             "packages_out": str(tmp_path / "packages.json")}
    proc = _run(tmp_path, given, play=PACKAGES_PLAY)
    assert proc.returncode == 0, proc.stdout[-4000:]
    read = json.loads((tmp_path / "packages.json").read_text())
    assert sorted(read.get("installed", {})) == wanted, read
    assert read.get("missing", []) == []
