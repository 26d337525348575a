# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The built collection artifact ships what users need and nothing of the test bench."""

from __future__ import annotations

import configparser
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# What a user of the collection gets: every file under these folders of the checkout ...
SHIPPED_DIRS = ("roles", "plugins", "playbooks", "docs", "inventory/example", "meta", "changelogs")
# ... and these files at the top (MANIFEST.json and FILES.json are written by the build).
SHIPPED_FILES = (
    "MANIFEST.json",
    "FILES.json",
    "README.md",
    "CHANGELOG.md",
    "site.yml",
    "requirements.yml",
    "requirements.txt",
)
TOP_LEVEL = {*SHIPPED_FILES, *(d.split("/", maxsplit=1)[0] for d in SHIPPED_DIRS)}

# What a working checkout holds besides the tracked files: made in the copy the test builds, so
# that a build_ignore which forgets one of them fails here and not on Galaxy.
DECOYS = (
    ".venv/pyvenv.cfg",
    ".lab/state/spark-a.json",
    ".cache/build/sparkfold-cluster-0.1.0.tar.gz",
    ".cache/sanity.abc123/ansible_collections/sparkfold/cluster/galaxy.yml",
    ".ansible/collections/ansible_collections/x/y/MANIFEST.json",
    ".pytest_cache/v/cache/lastfailed",
    ".ruff_cache/CACHEDIR.TAG",
    "bench-runs/20261201T101500Z-dsv41-flash-tp2/report.md",
    "tests/output/junit/python3.11.xml",
    "lab/engine/zig-out/bin/tensorfold-lab",
    "plugins/modules/__pycache__/roce_facts.cpython-311.pyc",
    "sparkfold-cluster-0.0.9.tar.gz",
)

FORBIDDEN_PREFIXES = (
    "tests/",
    "molecule/",
    "lab/",
    "inventory/lab/",
    "inventory/lab-tp4/",
    "scripts/",
    "benchmarks/",
    "bench-runs/",
    ".ci/",
    ".config/",
    ".lab/",
    ".venv/",
    ".collections/",
    ".cache/",
    ".ansible/",
    ".pytest_cache/",
    ".ruff_cache/",
)
FORBIDDEN_FILES = ("ansible.cfg", "Makefile", "ruff.toml", "galaxy.yml", ".ansible-lint", ".yamllint", ".gitignore")


def _checkout_files(top):
    """Files of the checkout under top, as the build sees them (no __pycache__, no *.pyc)."""
    base = ROOT / top
    return sorted(
        path.relative_to(ROOT).as_posix()
        for path in base.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )


@pytest.fixture(scope="module")
def artifact_names(tmp_path_factory):
    galaxy = shutil.which("ansible-galaxy", path=str(pathlib.Path(sys.executable).parent)) or shutil.which(
        "ansible-galaxy"
    )
    if galaxy is None:
        pytest.fail("ansible-galaxy not found: run `make setup` first")
    # Build a copy of the checkout (without the heavy or self-referencing bits) with the decoys in it.
    src = tmp_path_factory.mktemp("src") / "cluster"
    shutil.copytree(
        ROOT,
        src,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            ".collections",
            ".cache",
            ".lab",
            ".ansible",
            ".pytest_cache",
            ".ruff_cache",
            ".zig-cache",
            "zig-out",
            "__pycache__",
            "bench-runs",
            "*.tar.gz",
        ),
    )
    for decoy in DECOYS:
        path = src / decoy
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("decoy\n")
    link = src / ".collections/ansible_collections/sparkfold/cluster"
    link.parent.mkdir(parents=True)
    os.symlink("../../..", link)
    out = tmp_path_factory.mktemp("build")
    subprocess.run(
        [galaxy, "collection", "build", "--force", "--output-path", str(out), str(src)],
        check=True,
        capture_output=True,
        text=True,
    )
    (tarball,) = out.glob("sparkfold-cluster-*.tar.gz")
    with tarfile.open(tarball) as tar:
        return set(tar.getnames())


@pytest.mark.parametrize(
    "path",
    [
        *SHIPPED_FILES,
        "roles/preflight/tasks/main.yml",
        "roles/preflight/meta/argument_specs.yml",
        "roles/fabric/tasks/main.yml",
        "roles/fabric/meta/argument_specs.yml",
        "roles/recipe/recipes/dsv41-flash-tp2-zig.yml",
        "plugins/modules/roce_facts.py",
        "plugins/module_utils/roce.py",
        "plugins/filter/fabric.py",
        "plugins/filter/fabric_plan.yml",
        "playbooks/preflight.yml",
        "playbooks/fabric.yml",
        "playbooks/bench.yml",
        "playbooks/site.yml",
        "playbooks/engine_rollback.yml",
        "docs/fabric.md",
        "inventory/example/hosts.yml",
        "inventory/example/group_vars/sparks.yml",
        "meta/runtime.yml",
    ],
)
def test_artifact_contains(artifact_names, path):
    assert path in artifact_names


@pytest.mark.parametrize("top", SHIPPED_DIRS)
def test_artifact_ships_every_file_under(artifact_names, top):
    files = _checkout_files(top)
    assert files, f"{top}/ is empty in the checkout"
    assert [name for name in files if name not in artifact_names] == []


@pytest.mark.parametrize("prefix", FORBIDDEN_PREFIXES)
def test_artifact_leaves_out(artifact_names, prefix):
    assert not [name for name in artifact_names if name.startswith(prefix)]


@pytest.mark.parametrize("name", FORBIDDEN_FILES)
def test_artifact_leaves_out_file(artifact_names, name):
    assert name not in artifact_names


def test_artifact_holds_nothing_else(artifact_names):
    """Only the shipped files and folders at the top; only the example inventory; no caches."""
    assert sorted({name.split("/")[0] for name in artifact_names} - TOP_LEVEL) == []
    assert sorted({"/".join(name.split("/")[:2]) for name in artifact_names if name.startswith("inventory/")}) == [
        "inventory/example"
    ]
    assert [name for name in artifact_names if "__pycache__" in name or name.endswith((".pyc", ".tar.gz"))] == []


def test_ansible_cfg_names_no_inventory():
    """ansible.cfg never points a command at an inventory: each names its own with -i."""
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "ansible.cfg")
    assert not cfg.has_option("defaults", "inventory")
