# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine_image role, run on the lab's vLLM pair (inventory/lab-vllm, local connections): a build whose
Containerfile is not on the controller (the lab's stand-in image not staged: scripts/lab up stages it only when
SPARKFOLD_LAB_IMAGES names it) is refused once, before anything is copied or built, naming the file and how the lab
stages it.

Then a pulled image on a pair (two local hosts, each with its own stand-in podman's images, tests/unit/roles/
fake_podman.py): absent, it is pulled on the head and loaded on the worker, then left alone; the image the ranks ran
before is tagged :previous only where it is held; a worker whose image is not the head's is refused."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import sys

import pytest

from tests.unit.playbook import REPO, run_playbook

PLAYBOOK = '''
- name: Obtain the recipe's image as engine_service does
  hosts: sparks
  gather_facts: false
  roles:
    - role: sparkfold.cluster.recipe
  tasks:
    - name: Obtain the image
      ansible.builtin.include_role:
        name: sparkfold.cluster.engine_image
'''


@pytest.mark.skipif(shutil.which("podman") is None, reason="the role first checks for the recipe's runtime, podman")
def test_a_build_context_missing_on_the_controller_is_refused_before_anything(tmp_path):
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    variables = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
                 'sparkfold_lab_state': str(tmp_path / 'state'), 'engine_image_dir': str(tmp_path / 'images')}
    result = run_playbook(tmp_path / 'play.yml', REPO / 'inventory' / 'lab-vllm', tmp_path,
                          args=['-e', json.dumps(variables)])
    text = ' '.join(result.stdout.split())
    assert result.returncode != 0
    refusal = (f"The recipe builds its image from {tmp_path}/state/vllm-image/Containerfile, which is not on the "
               f"controller (the build context {tmp_path}/state/vllm-image is missing or empty).")
    assert refusal in text, text[-3000:]
    assert 'scripts/lab stage-vllm' in text
    # Once for the cluster (run_once on the head), not per host.
    assert re.search(r'spark-a : ok=\d+ changed=0 unreachable=0 failed=1 ', text), text[-600:]
    assert re.search(r'spark-b : ok=\d+ changed=0 unreachable=0 failed=0 ', text), text[-600:]
    assert not (tmp_path / 'images').exists()


# --- a pulled image on a pair, with a stand-in podman (tests/unit/roles/fake_podman.py), each node its own images ---
FAKE = pathlib.Path(__file__).with_name("fake_podman.py")
PAIR_PLAY = '''
- name: Obtain the recipe's image on a pair
  hosts: nodes
  gather_facts: false
  environment:
    FAKE_PODMAN_STATE: "{{ fake_state }}"
    FAKE_RSYNC_FROM: "{{ hostvars['head'].engine_image_dir }}"
  tasks:
    - name: Obtain the image
      ansible.builtin.include_role:
        name: sparkfold.cluster.engine_image
      vars:
        _engine_image_runtime_bin: "{{ fake_bin }}/podman"
'''


@pytest.fixture
def pair(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, line in (("podman", f'exec {sys.executable} {FAKE} "$@"'),
                       ("rsync", f'exec {sys.executable} {FAKE} --rsync "$@"'),
                       # deb_packages finds podman installed
                       ("dpkg-query", "printf 'podman\\tarm64\\tii \\t4.9.3\\n'")):
        (bindir / name).write_text(f"#!/bin/sh\n{line}\n")
        (bindir / name).chmod(0o755)
    spec = {"container": {"runtime": "podman", "image": {
        "obtain": "pull", "ref": "example.org/engine:1", "digest": "sha256:" + "a" * 64,
        # the recipe role's defaults: a pulled image has a build section too, unused
        "build": {"context": "", "containerfile": "Containerfile", "base": "scratch"}}}}
    hosts = {}
    for rank, host in enumerate(("head", "worker")):
        hosts[host] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "recipe_rank": rank, "fake_state": str(tmp_path / host / "podman"),
                       "engine_image_dir": str(tmp_path / host / "images")}
    inventory = {"all": {"children": {"nodes": {"hosts": hosts}},
                         "vars": {"recipe_head": "head", "recipe_world": 2, "recipe_spec": spec,
                                  "fake_bin": str(bindir), "engine_image_copy_address": "192.0.2.1"}}}
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(PAIR_PLAY)
    return tmp_path


def converge(pair, ok=True):
    env = {"PATH": f"{pair / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    result = run_playbook(pair / "play.yml", pair / "inventory.json", pair, env=env)
    text = " ".join(result.stdout.split())
    assert (result.returncode == 0) == ok, text[-5000:] + result.stderr[-2000:]
    return text


def images(pair, host):
    path = pair / host / "podman" / "images.json"
    return json.loads(path.read_text()) if path.exists() else {}


def calls(pair, host):
    path = pair / host / "podman" / "calls.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def changes(calls_made):
    return [call for call in calls_made if call[:2] not in (["image", "exists"], ["image", "inspect"])]


def test_an_absent_image_is_pulled_once_on_the_head_loaded_on_the_worker_and_then_left_alone(pair):
    converge(pair)
    pin = "example.org/engine@sha256:" + "a" * 64
    (tag,) = [name for name in images(pair, "head") if name.startswith("localhost/sparkfold-engine:")]
    assert [call[0] for call in changes(calls(pair, "head"))] == ["pull", "tag", "save"]
    assert changes(calls(pair, "head"))[:2] == [["pull", pin], ["tag", pin, tag]]
    assert [call[0] for call in changes(calls(pair, "worker"))] == ["load"]
    assert images(pair, "worker")[tag] == images(pair, "head")[tag]
    for host in ("head", "worker"):
        record = json.loads((pair / host / "images" / "current.json").read_text())
        assert record == {"tag": tag, "stamp": tag.rsplit(":", 1)[1], "previous": ""}
    assert not (pair / "worker" / "images" / f"{tag.rsplit(':', 1)[1]}.tar").exists()
    # present everywhere: nothing pulled, copied or loaded, nothing changed
    before = {host: len(calls(pair, host)) for host in ("head", "worker")}
    text = converge(pair)
    for host in ("head", "worker"):
        assert changes(calls(pair, host)[before[host]:]) == [], calls(pair, host)[before[host]:]
        assert re.search(rf"{host} : ok=\d+ changed=0 ", text), text[-3000:]


def test_the_image_the_ranks_ran_before_is_tagged_previous_only_when_held(pair):
    converge(pair)
    # the head still holds the image the ranks ran before; the worker's was removed (podman rmi) meanwhile
    old = "localhost/sparkfold-engine:0000000000000000"
    head = images(pair, "head")
    head[old] = "1" * 64
    (pair / "head" / "podman" / "images.json").write_text(json.dumps(head))
    for host in ("head", "worker"):
        record = {"tag": old, "stamp": "0" * 16, "previous": ""}
        (pair / host / "images" / "current.json").write_text(json.dumps(record))
    converge(pair)
    assert ["tag", old, "localhost/sparkfold-engine:previous"] in calls(pair, "head")
    assert images(pair, "head")["localhost/sparkfold-engine:previous"] == "1" * 64
    # asked, not tried: the worker's runtime is never told to tag an image it does not hold
    assert ["image", "exists", old] in calls(pair, "worker")
    assert [call for call in calls(pair, "worker") if call[0] == "tag"] == []
    for host in ("head", "worker"):
        assert json.loads((pair / host / "images" / "current.json").read_text())["previous"] == old


def test_a_worker_image_that_is_not_the_heads_is_refused_naming_the_node_and_the_fix(pair):
    converge(pair)
    (tag,) = [name for name in images(pair, "head") if name.startswith("localhost/sparkfold-engine:")]
    worker = images(pair, "worker")
    worker[tag] = "f" * 64
    (pair / "worker" / "podman" / "images.json").write_text(json.dumps(worker))
    text = converge(pair, ok=False)
    assert (f"worker: {tag} is image {'f' * 64}, the head's is {images(pair, 'head')[tag]}; remove it on this node "
            f"(podman rmi {tag}) and run again") in text, text[-3000:]
    assert re.search(r"head : ok=\d+ changed=0 unreachable=0 failed=0 ", text), text[-600:]
