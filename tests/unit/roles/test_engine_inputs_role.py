# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine_inputs role, run by ansible-playbook on this machine in a play without the engine_service role (and
without any handler): a new weights revision in the store's manifest makes the inputs anew, which leaves the inputs
directory newer than before (what engine_service's stale list reads to restart the ranks), an unchanged one does
neither; the stamp records the revision the ranks serve and the run shows it. The role notifies nothing: a handler
it named would be missing from this play and fail it.
"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from tests.unit.playbook import run_playbook

OLD = "d17a1af21a75dff84c12b89ae207cd43c05865a7"
NEW = "5b0c0a2a1c4a6f2b7e1d3c5a7b9d1f3e5a7c9b1d"
REPO = "sparkfold-test/dsv41-flash-exl3"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the role writes root-owned files (run as root, as CI does)")

INPUTS_SCRIPT = """#!/bin/sh
# stand-in for the recipe's node_inputs.sh: one rank cache file and the token map
mkdir -p "$2/rank-cache"
echo "$1" > "$2/rank-cache/rank0of2-test.bin"
echo '{}' > "$2/token_map.json"
echo made >> "$3"
"""


@pytest.fixture
def node(tmp_path):
    model, prefix, inputs = tmp_path / "model", tmp_path / "engine", tmp_path / "inputs"
    (prefix / "current" / "libexec").mkdir(parents=True)
    model.mkdir()
    script = prefix / "current" / "libexec" / "inputs.sh"
    script.write_text(INPUTS_SCRIPT)
    script.chmod(0o755)
    (prefix / "current" / "sparkfold-stamp.json").write_text(json.dumps({"build_id": "b1"}))
    variables = {
        "ansible_python_interpreter": sys.executable,
        "recipe_model_dir": str(model),
        "recipe_engine_prefix_root": str(prefix),
        "recipe_inputs_dir": str(inputs),
        "recipe_rank": 0,
        "recipe_world": 2,
        "recipe_values": {"model_dir": str(model), "inputs_dir": str(inputs)},
        "recipe_spec": {
            "inputs": {
                "script": "libexec/inputs.sh",
                "args": ["{model_dir}", "{inputs_dir}", str(tmp_path / "made.log")],
                "env": {},
                "rank_cache_subdir": "rank-cache",
                "token_map": "token_map.json",
            }
        },
        "engine_inputs_poll_s": 1,
    }
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n"
        f"  vars: {json.dumps(variables)}\n"
        "  roles:\n    - role: sparkfold.cluster.engine_inputs\n"
    )
    return tmp_path


def store_holds(node, commit):
    manifest = {"repo_id": REPO, "commit": commit, "files": []}
    (node / "model" / ".sparkfold-manifest.json").write_text(json.dumps(manifest))


def converge(node):
    result = run_playbook(node / "play.yml", "localhost,", node, env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml"})
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    return " ".join(result.stdout.split())


def changed_at(node):
    """The inputs directory's entries (one level, as the gate's `stale` reads it) by their lstat mtime."""
    inputs = node / "inputs"
    return {entry.name: entry.lstat().st_mtime_ns for entry in inputs.iterdir()} | {".": inputs.lstat().st_mtime_ns}


def lines(path):
    return path.read_text().splitlines() if path.exists() else []


def test_a_new_weights_revision_remakes_the_inputs_which_the_ranks_find_newer(node):
    store_holds(node, OLD)
    out = converge(node)
    assert lines(node / "made.log") == ["made"]
    assert f"rank 0 serves {REPO}@{OLD} (engine build b1;" in out
    first = changed_at(node)

    out = converge(node)
    assert lines(node / "made.log") == ["made"], "unchanged inputs are not made again"
    assert changed_at(node) == first, "nothing changed: nothing a rank reads is newer (no restart)"
    assert re.search(r"localhost : ok=\d+ changed=0 ", out)
    assert f"rank 0 serves {REPO}@{OLD}" in out and "changed from" not in out

    store_holds(node, NEW)
    out = converge(node)
    assert lines(node / "made.log") == ["made", "made"]
    after = changed_at(node)
    assert after[".sparkfold-inputs.json"] > first[".sparkfold-inputs.json"]
    assert after["rank-cache"] > first["rank-cache"], "the new rank cache is newer than a rank started before"
    assert f"rank 0 serves {REPO}@{NEW}" in out
    assert f"the weights revision changed from {OLD}, the ranks restart" in out
    stamp = json.loads((node / "inputs" / ".sparkfold-inputs.json").read_text())
    assert stamp["weights_commit"] == NEW
