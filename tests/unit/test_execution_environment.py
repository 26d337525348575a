# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""execution-environment.yml and the collection's meta/execution-environment.yml, against ansible-builder 3's schema
and against requirements.txt.

ansible-builder is not a dependency of this checkout: `scripts/ee-context` runs it for real (`ansible-builder create`
and its introspection of the installed collection), `scripts/ee-build` builds the image with podman and
`scripts/ee-build --check` proves it (not part of this run: it needs the image). These tests check what needs no
ansible-builder: the keys (https://docs.ansible.com/projects/builder/en/stable/definition/, the `schema_v3` of
ansible_builder/ee_schema.py in ansible-builder 3.2.0), what a Debian base needs of ansible-builder's dnf-minded
scripts, and that the image gets requirements.txt's runtime pins, all of them and nothing else.
"""

from __future__ import annotations

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The definition's seven top-level sections and the keys of those used here, as ansible-builder 3 documents them.
SECTIONS = {
    "additional_build_files",
    "additional_build_steps",
    "build_arg_defaults",
    "dependencies",
    "images",
    "options",
    "version",
}
DEPENDENCIES = {"python", "galaxy", "system", "python_interpreter", "ansible_core", "ansible_runner", "exclude"}
BUILD_ARGS = {"ANSIBLE_GALAXY_CLI_COLLECTION_OPTS", "ANSIBLE_GALAXY_CLI_ROLE_OPTS", "PKGMGR_PRESERVE_CACHE"}
BUILD_STEPS = {
    f"{where}_{stage}" for where in ("prepend", "append") for stage in ("base", "galaxy", "builder", "final")
}
OPTIONS = {
    "relax_passwd_permissions",
    "skip_ansible_check",
    "skip_pip_install",
    "workdir",
    "package_manager_path",
    "user",
    "container_init",
    "tags",
}

# requirements.txt's test and lint tools: never in the image. Every other pin of that file is the controller's.
TEST_ONLY = {
    "molecule",
    "ansible-lint",
    "antsibull-changelog",
    "yamllint",
    "ruff",
    "pytest",
    "pytest-xdist",
    "olah",
    "ziglang",
    "prometheus_client",
}
# The two the definition installs itself (ansible_core, and python: the `ansible` bundle of collections).
WITH_THE_IMAGE = {"ansible", "ansible-core"}


def _pins(path):
    """{name: version} of a pip requirements file of `name==version` lines."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line).groups()
            pins[name] = version
    return pins


def _load(path):
    return yaml.safe_load(path.read_text())


def test_definition_uses_documented_keys_only():
    ee = _load(ROOT / "execution-environment.yml")
    assert ee["version"] == 3
    assert set(ee) <= SECTIONS
    assert set(ee["dependencies"]) <= DEPENDENCIES
    assert set(ee.get("build_arg_defaults", {})) <= BUILD_ARGS
    assert set(ee.get("options", {})) <= OPTIONS
    assert set(ee["images"]) == {"base_image"}
    assert set(ee["images"]["base_image"]) <= {"name", "signature_original_name"}
    assert set(ee["dependencies"]["python_interpreter"]) <= {"package_system", "python_path"}
    for build_file in ee.get("additional_build_files", []):
        assert set(build_file) == {"src", "dest"}
    assert set(ee.get("additional_build_steps", {})) <= BUILD_STEPS


def test_definition_builds_on_debian_with_apt_get():
    """ansible-builder 3's scripts were written for dnf: on Debian's apt-get, `$PKGMGR clean all` fails (apt-get clean
    takes no arguments) unless PKGMGR_PRESERVE_CACHE is `always`, Debian's system Python refuses ensurepip (hence
    python3-pip and skip_pip_install), assemble makes a venv (python3-venv), and an image's apt has no lists until
    `apt-get update`, which must come before the first install (prepend_base)."""
    ee = _load(ROOT / "execution-environment.yml")
    assert ee["images"]["base_image"]["name"] == "docker.io/library/debian:bookworm"
    assert ee["options"]["package_manager_path"] == "/usr/bin/apt-get"
    assert ee["options"]["skip_pip_install"] is True
    assert ee["build_arg_defaults"]["PKGMGR_PRESERVE_CACHE"] == "always"
    interpreter = ee["dependencies"]["python_interpreter"]
    assert interpreter["python_path"] == "/usr/bin/python3"
    assert {"python3", "python3-pip", "python3-venv"} <= set(interpreter["package_system"].split())
    steps = ee["additional_build_steps"]
    assert any("apt-get update" in step for step in steps["prepend_base"])
    assert any("Install-Recommends" in step for step in steps["prepend_base"])
    assert any("/var/lib/apt/lists" in step for step in steps["append_final"])


def test_definition_tags_this_version():
    """scripts/ee-build tags sparkfold-ee:<galaxy.yml version>, as the definition's own tag."""
    version = _load(ROOT / "galaxy.yml")["version"]
    assert _load(ROOT / "execution-environment.yml")["options"]["tags"] == [f"sparkfold-ee:{version}"]


def test_definition_pins_are_requirements_txt_pins():
    pins = _pins(ROOT / "requirements.txt")
    deps = _load(ROOT / "execution-environment.yml")["dependencies"]
    assert deps["ansible_core"]["package_pip"] == f"ansible-core=={pins['ansible-core']}"
    assert deps["python"] == [f"ansible=={pins['ansible']}"]
    assert re.fullmatch(r"ansible-runner==[0-9.]+", deps["ansible_runner"]["package_pip"])


def test_definition_installs_this_version_of_the_collection():
    """The tarball `ansible-galaxy collection build` writes for galaxy.yml's version, put where the galaxy stage
    installs it from (the context's _build/ is /build/ there), without Galaxy (--no-deps)."""
    galaxy = _load(ROOT / "galaxy.yml")
    ee = _load(ROOT / "execution-environment.yml")
    tarball = f"{galaxy['namespace']}-{galaxy['name']}-{galaxy['version']}.tar.gz"
    assert ee["additional_build_files"] == [{"src": f".cache/ee/{tarball}", "dest": "collections"}]
    assert ee["dependencies"]["galaxy"] == {"collections": [{"name": f"/build/collections/{tarball}", "type": "file"}]}
    assert "--no-deps" in ee["build_arg_defaults"]["ANSIBLE_GALAXY_CLI_COLLECTION_OPTS"].split()
    assert "execution-environment.yml" in galaxy["build_ignore"]


def test_collection_metadata_names_runtime_requirements():
    """ansible-builder reads meta/execution-environment.yml of the installed collection; without it, it would take
    requirements.txt at the top (test tools and all)."""
    meta = _load(ROOT / "meta/execution-environment.yml")
    assert meta == {
        "version": 1,
        "dependencies": {"python": "meta/ee-requirements.txt", "system": "meta/ee-bindep.txt"},
    }
    bindep = [line for line in (ROOT / "meta/ee-bindep.txt").read_text().splitlines() if not line.startswith("#")]
    assert "openssh-clients [platform:rpm]" in bindep
    # The image is Debian's: without a dpkg line, bindep would install no ssh client at all.
    assert "openssh-client [platform:dpkg]" in bindep


def test_runtime_requirements_are_requirements_txt_less_the_tools():
    pins = _pins(ROOT / "requirements.txt")
    runtime = _pins(ROOT / "meta/ee-requirements.txt")
    unknown = TEST_ONLY - set(pins)
    assert not unknown, f"TEST_ONLY names what requirements.txt no longer pins: {sorted(unknown)}"
    want = {name: version for name, version in pins.items() if name not in TEST_ONLY | WITH_THE_IMAGE}
    assert runtime == want, (
        "meta/ee-requirements.txt is requirements.txt's runtime pins: add a new runtime pin there, or a test tool "
        "to TEST_ONLY here"
    )
