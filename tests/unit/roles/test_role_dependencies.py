# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A role that reads another role's variables reads that role's own definition, not a copy of it.

The doctor checks against what the cuda, fabric and weights roles require; the watchdog reads the engine_service
role's files; engine_service reads the fabric role's NCCL library and bootstrap interface (the inventory's where
the node holds no record of the fabric role's: tests/unit/roles/test_engine_bootstrap_interface.py). Each names those
roles as dependencies that run no task (meta/main.yml: tags never, when false), so their defaults reach the play.
ansible-playbook loads the role as the playbooks do, from a copy of the collection whose owners' defaults were
changed: the reader follows them. A value the inventory sets for an owner's variable is the reader's too, and none
of the owners' tasks runs."""

from __future__ import annotations

import json
import re
import shutil
import sys

import pytest

from tests.unit.playbook import REPO, run_playbook

PLAY = """\
- hosts: node
  gather_facts: false
  tasks:
    - name: Load the role, its variables and its dependencies' defaults, running none of its tasks
      ansible.builtin.import_role:
        name: sparkfold.cluster.{role}
      when: false
    - name: Write what the role reads
      ansible.builtin.copy:
        content: "{{{{ {read} | to_json }}}}"
        dest: "{{{{ out }}}}"
        mode: "0644"
"""

READ = {
    "doctor": ("{'lab': doctor_lab, 'speed': doctor_expected_speed_mbps, 'driver': doctor_driver_branch, "
               "'nccl_package': doctor_nccl_package, 'nccl_min': doctor_nccl_min_version_aarch64, "
               "'listen': doctor_neighbor_listen_s, 'endpoint': doctor_hub_endpoint, 'token': doctor_hub_token}"),
    "watchdog": "{'env': watchdog_engine_env, 'gate': watchdog_gate, 'image_record': watchdog_config.image_record}",
    "engine_service": ("{'nccl_library': engine_service_own_values.nccl_library, "
                       "'bootstrap_interface': engine_service_own_values.bootstrap_interface}"),
}
# The roles whose variables each reader reads (its dependencies).
OWNERS = {"doctor": ("cuda", "fabric", "weights"), "watchdog": ("engine_service",), "engine_service": ("fabric",)}
# What the watchdog's image record entry needs besides: the recipe role's facts it reads in the same mapping.
RECIPE = {"recipe_spec": {"name": "dsv41-flash-tp2-zig", "launch": {"order": "followers_first"}},
          "recipe_engine_prefix_root": "/opt/sparkfold/engine", "recipe_model_dir": "/srv/models/m",
          "recipe_nodes": ["node"], "recipe_head": "node"}


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


def reads(tmp_path, role, collections, host_vars=None):
    """What ``role`` reads, run from ``collections`` with ``host_vars`` in the inventory, and the run's output."""
    out = tmp_path / "read.json"
    inventory = tmp_path / "hosts.yml"
    node = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "out": str(out),
            **RECIPE, **(host_vars or {})}
    inventory.write_text(json.dumps({"all": {"hosts": {"node": node}}}))
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(role=role, read=READ[role]))
    proc = run_playbook(play, inventory, tmp_path, env={"ANSIBLE_COLLECTIONS_PATH": str(collections)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return json.loads(out.read_text()), proc.stdout


@pytest.mark.parametrize(("role", "changes", "host_vars", "expected"), [
    ("doctor", [("cuda", 'cuda_driver_branch: "580"', 'cuda_driver_branch: "595"'),
                ("cuda", "cuda_nccl_package: libnccl2", "cuda_nccl_package: libnccl3"),
                ("fabric", "fabric_expected_speed_mbps: 200000", "fabric_expected_speed_mbps: 100000"),
                ("fabric", "fabric_neighbor_listen_s: 4", "fabric_neighbor_listen_s: 6")],
     {"weights_endpoint": "https://hub.example", "weights_token": "hf_x", "sparkfold_lab": True,
      "cuda_nccl_min_version_aarch64": "2.30.1"},
     {"lab": True, "speed": 100000, "driver": "595", "nccl_package": "libnccl3", "nccl_min": "2.30.1", "listen": 6,
      "endpoint": "https://hub.example", "token": "hf_x"}),
    ("doctor", [], {},
     {"lab": False, "speed": 200000, "driver": "580", "nccl_package": "libnccl2", "nccl_min": "2.29.3", "listen": 4,
      "endpoint": "", "token": ""}),
    ("watchdog", [("engine_service", "engine_service_image_dir: /var/lib/sparkfold/engine-image",
                   "engine_service_image_dir: /srv/images"),
                  ("engine_service", "engine_service_gate: /usr/local/libexec/sparkfold/sparkfold-engine-gate.py",
                   "engine_service_gate: /opt/gate.py")],
     {"engine_service_env_file": "/etc/engine-a.env"},
     {"env": "/etc/engine-a.env", "gate": "/opt/gate.py", "image_record": "/srv/images/current.json"}),
    ("watchdog", [], {},
     {"env": "/etc/sparkfold/engine.env", "gate": "/usr/local/libexec/sparkfold/sparkfold-engine-gate.py",
      "image_record": "/var/lib/sparkfold/engine-image/current.json"}),
    # engine_service's read of the node (tasks/node_read.yml) did not run, so found no record of the fabric role's:
    # the inventory's fabric_bootstrap_interface, the fabric role's default else.
    ("engine_service", [("fabric", 'fabric_nccl_library: ""', "fabric_nccl_library: /opt/nccl/libnccl.so.2")],
     {"fabric_bootstrap_interface": "enP7s7"},
     {"nccl_library": "/opt/nccl/libnccl.so.2", "bootstrap_interface": "enP7s7"}),
    ("engine_service", [], {}, {"nccl_library": "", "bootstrap_interface": ""}),
], ids=["doctor-changed-owners", "doctor-as-shipped", "watchdog-changed-owner", "watchdog-as-shipped",
        "engine_service-changed-owner", "engine_service-as-shipped"])
def test_a_reader_follows_the_owners_definition_and_the_inventory(tmp_path, role, changes, host_vars, expected):
    found, out = reads(tmp_path, role, collection(tmp_path, changes), host_vars)
    assert found == expected
    # Of the roles whose defaults the reader loads, no task runs: only their argument checks (tagged always) are
    # listed, and skipped.
    ran = re.findall(rf"TASK \[sparkfold\.cluster\.({'|'.join(OWNERS[role])}) : ([^\]]*)\][^\n]*\n"
                     r"(?:(?!TASK \[).*\n)*?(ok|changed|skipping|fatal): ", out)
    assert ran and all(name.startswith("Validating arguments") and status == "skipping"
                       for _owner, name, status in ran), ran
