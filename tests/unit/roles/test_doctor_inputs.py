# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the doctor checks against is what the cuda, fabric and weights roles define, not a copy of it.

ansible-playbook loads the doctor role as playbooks/doctor.yml does (its meta/main.yml loads the owners' defaults
and runs none of their tasks), from a copy of the collection whose cuda and fabric defaults were changed: the doctor
follows them. A value the inventory sets for an owner's variable is the doctor's too."""

from __future__ import annotations

import json
import re
import shutil
import sys

from tests.unit.playbook import REPO, run_playbook

PLAY = """\
- hosts: node
  gather_facts: false
  tasks:
    - name: Load the doctor role, its variables and its dependencies' defaults, running none of its tasks
      ansible.builtin.import_role:
        name: sparkfold.cluster.doctor
        tasks_from: verdict
      when: false
    - name: Write what the doctor would check against
      ansible.builtin.copy:
        content: "{{ {'lab': doctor_lab, 'speed': doctor_expected_speed_mbps, 'driver': doctor_driver_branch,
                      'nccl_package': doctor_nccl_package, 'nccl_min': doctor_nccl_min_version_aarch64,
                      'listen': doctor_neighbor_listen_s, 'endpoint': doctor_hub_endpoint,
                      'token': doctor_hub_token} | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""


def collection(tmp_path, changes):
    """A copy of this collection under tmp_path, each (role, old line, new line) of ``changes`` made in that
    role's defaults/main.yml; returns the collections path to run it from."""
    root = tmp_path / "collections"
    tree = root / "ansible_collections" / "sparkfold" / "cluster"
    for name in ("roles", "plugins", "meta"):
        shutil.copytree(REPO / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "galaxy.yml", tree / "galaxy.yml")
    for role, old, new in changes:
        path = tree / "roles" / role / "defaults" / "main.yml"
        text = path.read_text()
        assert re.search(rf"^{re.escape(old)}$", text, re.M), f"{role}: no line {old!r}"
        path.write_text(re.sub(rf"^{re.escape(old)}$", new, text, flags=re.M))
    return root


def doctor_inputs(tmp_path, collections, host_vars=None):
    out = tmp_path / "doctor-inputs.json"
    inventory = tmp_path / "hosts.yml"
    node = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "out": str(out),
            **(host_vars or {})}
    inventory.write_text(json.dumps({"all": {"hosts": {"node": node}}}))
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    proc = run_playbook(play, inventory, tmp_path, env={"ANSIBLE_COLLECTIONS_PATH": str(collections)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # Of the roles whose defaults the doctor loads, no task runs: only their argument checks (tagged always) are
    # listed, and skipped.
    ran = re.findall(r"TASK \[sparkfold\.cluster\.(cuda|fabric|weights) : ([^\]]*)\][^\n]*\n(?:(?!TASK \[).*\n)*?"
                     r"(ok|changed|skipping|fatal): ", proc.stdout)
    assert ran and all(name.startswith("Validating arguments") and status == "skipping" for _, name, status in ran), ran
    return json.loads(out.read_text())


def test_the_doctor_follows_the_owners_defaults_and_the_inventory(tmp_path):
    collections = collection(tmp_path, [
        ("cuda", 'cuda_driver_branch: "580"', 'cuda_driver_branch: "595"'),
        ("cuda", "cuda_nccl_package: libnccl2", "cuda_nccl_package: libnccl3"),
        ("fabric", "fabric_expected_speed_mbps: 200000", "fabric_expected_speed_mbps: 100000"),
        ("fabric", "fabric_neighbor_listen_s: 4", "fabric_neighbor_listen_s: 6"),
    ])
    found = doctor_inputs(tmp_path, collections, {
        "weights_endpoint": "https://hub.example", "weights_token": "hf_x", "sparkfold_lab": True,
        "cuda_nccl_min_version_aarch64": "2.30.1"})
    assert found == {"lab": True, "speed": 100000, "driver": "595", "nccl_package": "libnccl3", "nccl_min": "2.30.1",
                     "listen": 6, "endpoint": "https://hub.example", "token": "hf_x"}


def test_the_doctor_as_shipped_checks_the_owners_values(tmp_path):
    found = doctor_inputs(tmp_path, collection(tmp_path, []))
    assert found == {"lab": False, "speed": 200000, "driver": "580", "nccl_package": "libnccl2", "nccl_min": "2.29.3",
                     "listen": 4, "endpoint": "", "token": ""}
