# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.container_images module (AnsibleModule run in-process), the runtime a stand-in:
podman answers as tests/unit/roles/fake_podman.py does (`image exists` exit 0 or 1, `image inspect` a JSON list),
docker as docker/cli docs/reference/commandline/image_ls.md @1f03d05b2d198aa8a8a4abfeb3689db5ff69aa1d shows
(one JSON object a line, none when the image is not held)."""

import json

from ansible.module_utils import basic
from ansible_collections.sparkfold.cluster.plugins.modules import container_images

from tests.unit.module_runner import module_runner

HELD = "localhost/sparkfold-engine:0123456789abcdef"
GONE = "localhost/sparkfold-engine:previous"


def runtime(monkeypatch, answers):
    """AnsibleModule.run_command answers from ``answers`` (a function of the argv); every argv is logged."""
    seen = []

    def run_command(self, argv, **_kwargs):
        seen.append(argv)
        return answers(argv)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    return seen


def podman(argv):
    if argv[1:3] == ["image", "exists"]:
        return (0, "", "") if argv[3] == HELD else (1, "", "")
    return 0, json.dumps([{"Id": "3c1f" * 16}]), ""


def test_podman_held_and_absent_images(monkeypatch):
    seen = runtime(monkeypatch, podman)
    kind, result, _w = module_runner(monkeypatch, container_images.main)(
        {"runtime": "podman", "executable": "/usr/bin/podman", "names": [HELD, GONE]})
    assert kind == "exit" and result["changed"] is False
    assert result["images"] == {HELD: {"present": True, "id": "3c1f" * 16}, GONE: {"present": False, "id": ""}}
    # an image not held is never inspected
    assert seen == [["/usr/bin/podman", "image", "exists", HELD], ["/usr/bin/podman", "image", "inspect", HELD],
                    ["/usr/bin/podman", "image", "exists", GONE]]


def test_podman_storage_unreadable_fails_naming_the_command(monkeypatch):
    runtime(monkeypatch, lambda argv: (125, "", "Error: database is locked"))
    kind, result, _w = module_runner(monkeypatch, container_images.main)(
        {"runtime": "podman", "executable": "/usr/bin/podman", "names": [HELD]})
    assert kind == "fail" and result["rc"] == 125
    assert result["msg"].startswith(f"/usr/bin/podman image exists {HELD} could not say whether it holds the image "
                                    "(exit 125): Error: database is locked. Check that the container runtime works")


def test_docker_held_and_absent_images(monkeypatch):
    row = {"Containers": "N/A", "ID": "sha256:" + "ab" * 32, "Repository": "localhost/sparkfold-engine",
           "Tag": "0123456789abcdef"}
    seen = runtime(monkeypatch, lambda argv: (0, json.dumps(row) + "\n" if argv[-1] == HELD else "", ""))
    kind, result, _w = module_runner(monkeypatch, container_images.main)(
        {"runtime": "docker", "executable": "/usr/bin/docker", "names": [HELD, GONE]})
    assert kind == "exit"
    assert result["images"] == {HELD: {"present": True, "id": "sha256:" + "ab" * 32},
                                GONE: {"present": False, "id": ""}}
    assert seen[0] == ["/usr/bin/docker", "image", "ls", "--no-trunc", "--format", "{{json .}}", HELD]
