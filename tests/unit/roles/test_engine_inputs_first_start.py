# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine_inputs role's first start (inputs.first_start: bertholomus/TensorFold tools/dsv41-zig/build_inputs.sh
@5e10970a, TP2's inputs), run by ansible-playbook on this machine against a stand-in container runtime: `docker` here
is a small program that keeps its containers as processes (tests/unit/roles/fake_docker.py); its engine writes the
rank cache and the token map into the directory mounted at /root/.cache and, on rank 0, answers /v1/models. The lab's
molecule pair scenario runs the real thing with podman and the lab engine's Python personality.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import sys

import pytest

from tests.unit.playbook import run_playbook

COMMIT = "d17a1af21a75dff84c12b89ae207cd43c05865a7"
FAKE = pathlib.Path(__file__).with_name("fake_docker.py")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the role writes root-owned files (run as root, as CI does)")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def node(tmp_path):
    model, prefix, inputs, engram = tmp_path / "model", tmp_path / "engine", tmp_path / "inputs", tmp_path / "engram"
    for path in (model, engram, prefix / "current"):
        path.mkdir(parents=True)
    (prefix / "current" / "sparkfold-stamp.json").write_text(json.dumps({"build_id": "b1"}))
    (model / ".sparkfold-manifest.json").write_text(json.dumps({"repo_id": "r/m", "commit": COMMIT, "files": []}))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    docker = bindir / "docker"
    docker.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    docker.chmod(0o755)
    port = free_port()
    first_start = {
        "runtime": "docker", "image": "example/dsv41-tp2:test", "entrypoint": "tensorfold",
        "options": {"network": "host", "ipc": "host"},
        "mounts": [{"src": "{model_dir}", "dest": "/model", "mode": "ro"},
                   {"src": "{engram_dir}", "dest": "/engram", "mode": "ro"},
                   {"src": "{inputs_dir}", "dest": "/root/.cache", "mode": "rw"}],
        "env": {"TF_DS_RANK_CACHE": "/root/.cache/tf-ds-rank", "TF_DS_ENGRAM": "/engram",
                "NCCL_IB_HCA": "{rdma_devices}", "NCCL_IB_GID_INDEX": "5"},
        "args": ["serve", "/model", "--tp", "2", "--rank", "{rank}", "--master", "{master}", "--port",
                 "{first_start_port}"],
        "port": port, "ready": {"path": "/v1/models", "status": 200}, "stop_timeout_s": 30,
    }
    variables = {
        "ansible_python_interpreter": sys.executable,
        "recipe_model_dir": str(model),
        "recipe_engine_prefix_root": str(prefix),
        "recipe_inputs_dir": str(inputs),
        "recipe_rank": 0,
        "recipe_world": 2,
        "recipe_values": {"model_dir": str(model), "inputs_dir": str(inputs), "engram_dir": str(engram),
                          "rank_cache_dir": str(inputs / "tf-ds-rank"),
                          "token_map": str(inputs / "dsv41_token_map.json"), "rank": 0, "world": 2,
                          "master": "192.0.2.1", "rdma_devices": "rocep1s0f1,roceP2p1s0f1"},
        "recipe_spec": {"name": "tp2-test", "inputs": {"rank_cache_subdir": "tf-ds-rank",
                                                       "token_map": "dsv41_token_map.json",
                                                       "first_start": first_start}},
        "engine_inputs_poll_s": 1,
        "engine_inputs_timeout_s": 60,
    }
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    (tmp_path / "play.yml").write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n"
        "  vars_files: [vars.json]\n"
        "  roles:\n    - role: sparkfold.cluster.engine_inputs\n")
    return tmp_path


def converge(node, ok=True):
    env = {"PATH": f"{node / 'bin'}{os.pathsep}{os.environ['PATH']}", "FAKE_DOCKER_STATE": str(node / "docker"),
           "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml"}
    result = run_playbook(node / "play.yml", "localhost,", node, env=env)
    assert (result.returncode == 0) == ok, result.stdout[-6000:] + result.stderr[-2000:]
    return " ".join(result.stdout.split())


def calls(node):
    log = node / "docker" / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_the_first_start_writes_the_inputs_and_is_stopped(node):
    converge(node)
    runs = [c for c in calls(node) if c[0] == "run"]
    assert len(runs) == 1
    argv = runs[0]
    # build_inputs.sh's docker run: detached, the inputs directory as the engine's cache, its serve line
    assert argv[:4] == ["run", "--detach", "--name", "sparkfold-inputs-0"] and "--rm" not in argv
    assert f"{node / 'inputs'}:/root/.cache:rw" in argv and f"{node / 'model'}:/model:ro" in argv
    assert argv[argv.index("--entrypoint") + 1:] == [
        "tensorfold", "example/dsv41-tp2:test", "serve", "/model", "--tp", "2", "--rank", "0", "--master", "192.0.2.1",
        "--port", str(json.loads((node / "vars.json").read_text())["recipe_spec"]["inputs"]["first_start"]["port"])]
    # then stopped with the source's 30 s and removed; its environment file is gone (it was 0600 while it ran)
    assert ["stop", "--time", "30", "sparkfold-inputs-0"] in calls(node)
    assert ["rm", "sparkfold-inputs-0"] in calls(node)
    assert not (node / "inputs" / ".sparkfold-first-start.env").exists()
    # the container saw every variable of the recipe's, each with its own value, as docker reads --env-file
    # (one KEY=VALUE a line, nothing unquoted or unescaped); the lab's pair converge once saw one variable only
    assert json.loads((node / "docker" / "sparkfold-inputs-0.environ.json").read_text()) == {
        "HOME": "/root", "NCCL_IB_GID_INDEX": "5", "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1",
        "TF_DS_ENGRAM": "/engram", "TF_DS_RANK_CACHE": "/root/.cache/tf-ds-rank"}
    assert [p.name for p in (node / "inputs" / "tf-ds-rank").iterdir()] == ["rank0of2-fake.bin"]
    assert (node / "inputs" / "dsv41_token_map.json").exists()
    stamp = json.loads((node / "inputs" / ".sparkfold-inputs.json").read_text())
    assert stamp["weights_commit"] == COMMIT and stamp["script"] == "first start of example/dsv41-tp2:test"
    # a second run starts nothing and changes nothing
    out = converge(node)
    assert [c for c in calls(node) if c[0] == "run"] == [argv]
    assert re.search(r"localhost : ok=\d+ changed=0 ", out), out[-3000:]


def test_a_first_start_that_stops_fails_at_once_with_its_log(node):
    variables = json.loads((node / "vars.json").read_text())
    variables["recipe_spec"]["inputs"]["first_start"]["env"]["FAKE_EXIT"] = "NoEngramTables"
    (node / "vars.json").write_text(json.dumps(variables))
    out = converge(node, ok=False)
    assert "the container sparkfold-inputs-0 stopped before http://127.0.0.1:" in out
    assert "error: NoEngramTables" in out
    # cleaned up all the same, and nothing stamped
    assert ["rm", "sparkfold-inputs-0"] in calls(node)
    assert not (node / "inputs" / ".sparkfold-inputs.json").exists()


def test_a_first_start_without_an_image_is_refused_before_anything_runs(node):
    variables = json.loads((node / "vars.json").read_text())
    variables["recipe_spec"]["inputs"]["first_start"]["image"] = ""
    (node / "vars.json").write_text(json.dumps(variables))
    out = converge(node, ok=False)
    assert "inputs.first_start.image is empty: no source publishes the image" in out
    assert calls(node) == []


def test_an_image_missing_on_the_node_is_refused_with_the_fix(node):
    variables = json.loads((node / "vars.json").read_text())
    variables["recipe_spec"]["inputs"]["first_start"]["image"] = "example/absent:1"
    (node / "vars.json").write_text(json.dumps(variables))
    out = converge(node, ok=False)
    assert "the image example/absent:1 is not on this node" in out
    assert [c for c in calls(node) if c[0] == "run"] == []


@pytest.mark.parametrize(("value", "said"), [
    ("/root/.cache/tf-ds-rank\nTF_DS_ENGRAM=/elsewhere", "TF_DS_RANK_CACHE holds a line break or NUL"),
    ('"/root/.cache/tf-ds-rank"', "TF_DS_RANK_CACHE=\"/root/.cache/tf-ds-rank\" is quoted"),
])
def test_an_environment_a_runtime_reads_otherwise_is_refused_before_anything_runs(node, value, said):
    variables = json.loads((node / "vars.json").read_text())
    variables["recipe_spec"]["inputs"]["first_start"]["env"]["TF_DS_RANK_CACHE"] = value
    (node / "vars.json").write_text(json.dumps(variables))
    (node / "inputs").mkdir()
    (node / "inputs" / "keep").write_text("x")
    out = converge(node, ok=False)
    assert "recipe 'tp2-test' inputs.first_start.env cannot be written as a container's --env-file" in out
    assert said in out
    assert calls(node) == []
    assert [p.name for p in (node / "inputs").iterdir()] == ["keep"]


@pytest.mark.parametrize("missing", ["context", "containerfile"])
def test_a_build_missing_on_the_controller_is_refused_before_anything_runs(node, missing):
    """A fresh machine's `make demo` stopped at copy's "Could not find or access '.../tfpy-image/'" halfway through
    the first start (scripts/lab up had not staged the stand-in image): refused first now, naming what is missing."""
    context = node / "image"
    context.mkdir()
    (context / "Containerfile").write_text("FROM scratch\n")
    if missing == "context":
        context = node / "unstaged"
    else:
        (context / "Containerfile").unlink()
    variables = json.loads((node / "vars.json").read_text())
    variables["recipe_spec"]["inputs"]["first_start"]["image"] = "example/absent:1"
    build = {"containerfile": str(context / "Containerfile"), "context": str(context)}
    variables["recipe_spec"]["inputs"]["first_start"]["build"] = build
    (node / "vars.json").write_text(json.dumps(variables))
    out = converge(node, ok=False)
    containerfile = context / "Containerfile"
    gone = f"{containerfile} and {context} are" if missing == "context" else f"{containerfile} is"
    assert (f"The recipe builds the image of its first start from {context / 'Containerfile'} in the build context "
            f"{context}, on the controller: {gone} not there.") in out, out[-3000:]
    assert "scripts/lab stage-tfpy" in out
    assert calls(node) == []
    assert not (node / "inputs").exists()
