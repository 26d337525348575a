# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""site.yml holds the cluster's lock (sparkfold.cluster.cluster_lock) from its first play to its last, whatever the
tags; the lease the role writes is the one the watchdog program reads (roles/watchdog/files/sparkfold-watchdog.py)."""

from __future__ import annotations

import json
import re
import sys

import yaml

from tests.unit.playbook import REPO, run_playbook

PLAY = """
- name: Hold
  hosts: node
  gather_facts: false
  roles:
    - role: sparkfold.cluster.cluster_lock
- name: What the watchdog sees while it is held
  hosts: node
  gather_facts: false
  tasks:
    - name: Ask the watchdog program
      ansible.builtin.command: "{{ ansible_playbook_python }} {{ watchdog_probe }}"
      changed_when: false
      register: probe
    - name: Show it
      ansible.builtin.debug:
        msg: "HOLDER={{ probe.stdout }}"
- name: Release
  hosts: node
  gather_facts: false
  tasks:
    - name: Release
      ansible.builtin.import_role:
        name: sparkfold.cluster.cluster_lock
        tasks_from: release
"""

PROBE = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("w", {watchdog!r})
w = importlib.util.module_from_spec(spec)
spec.loader.exec_module(w)
print(w.lock_holder({lock!r}, time.time()))
"""


def test_site_yml_holds_the_lock_first_and_releases_it_last_under_every_tag():
    # site.yml imports playbooks/site.yml, which holds the plays (ansible-playbook sparkfold.cluster.site runs it)
    assert yaml.safe_load((REPO / "site.yml").read_text())[0]["ansible.builtin.import_playbook"] == "playbooks/site.yml"
    plays = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())
    # Before the lock, only the play that hands a run over several clusters to one run per cluster (on the
    # controller; each of those runs holds its own cluster's lock): it changes no node.
    dispatch, first, last = plays[0], plays[1], plays[-1]
    assert [task["ansible.builtin.include_role"] for task in dispatch["tasks"]] == \
        [{"name": "sparkfold.cluster.fleet", "tasks_from": "site"}]
    assert dispatch["tags"] == first["tags"] == last["tags"] == ["always"]
    assert first["tasks"][0]["ansible.builtin.import_role"] == {"name": "sparkfold.cluster.cluster_lock"}
    assert last["tasks"][0]["ansible.builtin.import_role"] == {"name": "sparkfold.cluster.cluster_lock",
                                                               "tasks_from": "release"}
    assert first["hosts"] == last["hosts"] == "{{ 'sparks' | sparkfold.cluster.fleet_not_dispatched(groups) }}"


def test_the_lease_holds_the_watchdog_back_then_goes_and_reports_no_change(tmp_path):
    lock = tmp_path / "run" / "sparkfold" / "cluster.lock"
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE.format(watchdog=str(REPO / "roles/watchdog/files/sparkfold-watchdog.py"), lock=str(lock)))
    (tmp_path / "inventory.yml").write_text(
        "all:\n  hosts:\n    node:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")
    (tmp_path / "play.yml").write_text(PLAY)
    proc = run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path,
                        ["-e", json.dumps({"cluster_lock_file": str(lock), "cluster_lock_ttl_s": 600,
                                           "watchdog_probe": str(probe)})])
    assert proc.returncode == 0, proc.stdout[-3000:]
    holder = re.search(r'"msg": "HOLDER=(.*)"', proc.stdout).group(1)
    assert holder.startswith("site.yml from ") and " until " in holder, holder
    assert not lock.exists(), "released by the last play"
    assert re.search(r"node\s+: ok=\d+\s+changed=0 ", proc.stdout), proc.stdout[-2000:]


def test_check_mode_writes_no_lease(tmp_path):
    lock = tmp_path / "cluster.lock"
    (tmp_path / "inventory.yml").write_text(
        "all:\n  hosts:\n    node:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")
    (tmp_path / "play.yml").write_text(PLAY.split("- name: What the watchdog", maxsplit=1)[0])
    proc = run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path,
                        ["--check", "-e", json.dumps({"cluster_lock_file": str(lock)})])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert not lock.exists()
