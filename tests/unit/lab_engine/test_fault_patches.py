# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fault patches molecule pair builds on purpose (molecule/pair/files/lab-fault-*.patch) apply to the lab
engine's tree after the recipe's own patches (lab/engine/patches, which scripts/lab publishes), as the engine role
applies them: a change to the lab engine's sources that moves their context breaks the rollback checks, found here
instead of 25 minutes into molecule's verify."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.unit.playbook import REPO

ENGINE = REPO / "lab" / "engine"
RECIPE_PATCHES = sorted((ENGINE / "patches").glob("*.patch"))
FAULTS = sorted((REPO / "molecule" / "pair" / "files").glob("lab-fault-*.patch"))


def _git(tree, *args):
    return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def patched_tree(tmp_path_factory):
    tree = tmp_path_factory.mktemp("engine")
    shutil.copytree(ENGINE, tree, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".zig-cache", "zig-out"))
    assert _git(tree, "init", "-q").returncode == 0
    for patch in RECIPE_PATCHES:
        applied = _git(tree, "apply", str(patch))
        assert applied.returncode == 0, (patch.name, applied.stderr)
    return tree


@pytest.mark.parametrize("fault", FAULTS, ids=[path.name for path in FAULTS])
def test_each_fault_patch_applies_after_the_recipe_patches(patched_tree, fault):
    assert RECIPE_PATCHES, "lab/engine/patches holds the recipe's patches"
    check = _git(patched_tree, "apply", "--check", str(fault))
    assert check.returncode == 0, f"{fault.name} does not apply to lab/engine: {check.stderr}"
