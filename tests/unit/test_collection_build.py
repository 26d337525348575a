# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The built collection artifact ships what users need and nothing of the test bench."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def artifact_names(tmp_path_factory):
    galaxy = shutil.which("ansible-galaxy", path=str(pathlib.Path(sys.executable).parent)) or shutil.which(
        "ansible-galaxy"
    )
    if galaxy is None:
        pytest.fail("ansible-galaxy not found: run `make setup` first")
    out = tmp_path_factory.mktemp("build")
    subprocess.run(
        [galaxy, "collection", "build", "--force", "--output-path", str(out), str(ROOT)],
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
        "MANIFEST.json",
        "README.md",
        "roles/preflight/tasks/main.yml",
        "roles/preflight/meta/argument_specs.yml",
        "roles/fabric/tasks/main.yml",
        "roles/fabric/meta/argument_specs.yml",
        "plugins/modules/roce_facts.py",
        "plugins/module_utils/roce.py",
        "plugins/filter/fabric.py",
        "plugins/filter/fabric_plan.yml",
        "playbooks/preflight.yml",
        "playbooks/fabric.yml",
        "docs/fabric.md",
        "inventory/example/group_vars/sparks.yml",
    ],
)
def test_artifact_contains(artifact_names, path):
    assert path in artifact_names


@pytest.mark.parametrize(
    "prefix",
    ["tests/", "molecule/", "lab/", "inventory/lab/", ".lab/", ".venv/", ".collections/", ".cache/", "scripts/",
     ".ci/"],
)
def test_artifact_leaves_out(artifact_names, prefix):
    assert not [name for name in artifact_names if name.startswith(prefix)]
