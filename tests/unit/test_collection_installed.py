# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection works installed, without a clone: its playbooks run by FQCN (AWX, an execution environment).

The checkout is built with `ansible-galaxy collection build` (galaxy.yml's build_ignore applies), installed
offline into a temporary collections path, and its playbooks are run from an empty directory that sees only
that path (and the collections the `ansible` package bundles, where the dependencies come from).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
INSTALLED = "ansible_collections/sparkfold/cluster"
LIST = ("-i", "inventory", "--list-tasks", "--list-tags")


def _tool(name):
    path = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: run `scripts/setup` first")
    return path


def _other_collection_paths():
    """The inherited ANSIBLE_COLLECTIONS_PATH less any entry that holds this checkout (the clone's link).

    Under `scripts/test newest` the dependencies (ansible.posix, community.*) come from such an entry.
    """
    keep = []
    for entry in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep):
        if entry and not (pathlib.Path(entry) / INSTALLED).exists():
            keep.append(entry)
    return keep


def _run(args, cwd, env):
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _task_lines(listing):
    """The plays and tasks of a --list-tasks output, less its first line (the playbook's path)."""
    return [line for line in listing.splitlines() if not line.startswith("playbook: ")]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(empty working directory, environment) with the built collection installed where the environment looks."""
    build = tmp_path_factory.mktemp("build")
    collections = tmp_path_factory.mktemp("collections")
    work = tmp_path_factory.mktemp("work")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(collections), *_other_collection_paths()]),
        ANSIBLE_HOME=str(tmp_path_factory.mktemp("ansible-home")),
        ANSIBLE_NOCOLOR="1",
    )
    _run([_tool("ansible-galaxy"), "collection", "build", "--output-path", str(build), str(ROOT)], work, env)
    (tarball,) = build.glob("sparkfold-cluster-*.tar.gz")
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    assert [n for n in names if n.split("/")[0] in (".venv", ".cache", ".collections", ".lab", ".git")] == []
    # --offline: Galaxy is not reachable; the dependencies in galaxy.yml are found already installed.
    out = _run(
        [_tool("ansible-galaxy"), "collection", "install", "--offline", "-p", str(collections), str(tarball)],
        work,
        env,
    )
    assert "sparkfold.cluster:0.1.0 was installed successfully" in out
    # The inventory a user copies: the example one the collection ships.
    shutil.copytree(collections / INSTALLED / "inventory/example", work / "inventory")
    return work, env, collections / INSTALLED


def test_doctor_by_fqcn_lists_its_tasks(installed):
    work, env, where = installed
    out = _run([_tool("ansible-playbook"), "-i", "inventory", "sparkfold.cluster.doctor", "--list-tasks"], work, env)
    assert f"playbook: {where}/playbooks/doctor.yml" in out
    assert "sparkfold.cluster.doctor : Give the verdict for the pair" in out


def test_every_playbook_runs_by_fqcn(installed):
    """Each playbook of the checkout has a name ansible-core resolves (an identifier: engine-rollback.yml's body
    is engine_rollback.yml), and all pass --syntax-check from the installed collection, sparkfold.cluster.site too."""
    work, env, where = installed
    names = sorted({path.stem.replace("-", "_") for path in (ROOT / "playbooks").glob("*.yml")})
    assert "site" in names and "engine_rollback" in names
    assert [n for n in names if not re.fullmatch(r"\w+", n)] == []
    fqcns = [f"sparkfold.cluster.{name}" for name in names]
    out = _run([_tool("ansible-playbook"), "-i", "inventory", *fqcns, "--syntax-check"], work, env)
    for name in names:
        assert f"playbook: {where}/playbooks/{name}.yml" in out


@pytest.fixture(scope="module")
def site_listing(installed):
    """`ansible-playbook sparkfold.cluster.site --list-tasks --list-tags` from the installed collection."""
    work, env = installed[:2]
    return _run([_tool("ansible-playbook"), *LIST, "sparkfold.cluster.site"], work, env)


def test_installed_site_is_the_clone_site(installed, site_listing):
    """`sparkfold.cluster.site` installed lists the very plays, tasks and tags of `site.yml` in a clone."""
    work, env = installed[:2]
    from_install = site_listing
    clone_paths = os.pathsep.join([str(ROOT / ".collections"), *_other_collection_paths()])
    clone_env = dict(env, ANSIBLE_COLLECTIONS_PATH=clone_paths)
    clone_args = ["-i", str(work / "inventory"), "--list-tasks", "--list-tags", "site.yml"]
    from_clone = _run([_tool("ansible-playbook"), *clone_args], ROOT, clone_env)
    assert "sparkfold.cluster.cluster_lock : Hold the cluster's lock while this run lasts" in from_install
    assert _task_lines(from_install) == _task_lines(from_clone)


def test_project_playbook_imports_site_by_fqcn(installed, site_listing, tmp_path):
    """An AWX project's playbook of one `import_playbook: sparkfold.cluster.site` runs the whole site."""
    work, env = installed[:2]
    project = tmp_path / "project.yml"
    project.write_text("---\n- name: Provision the pair\n  ansible.builtin.import_playbook: sparkfold.cluster.site\n")
    from_project = _run([_tool("ansible-playbook"), *LIST, str(project)], work, env)
    assert "sparkfold.cluster.smoke : " in from_project
    assert _task_lines(from_project) == _task_lines(site_listing)
