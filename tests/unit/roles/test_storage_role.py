# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The storage role's validation (tasks/validate.yml) run by ansible-playbook against this machine (no lab).

Two inventory hosts that are this machine: localhost is the head, 127.0.0.1 the worker. Each node is read by one
sparkfold.cluster.read_files run (the store's filesystem on the head, the leftover files everywhere) and judged on
the controller; every host's problems fail once. The lab test (molecule/pair storage-verify.yml) checks the export
on overlay and the NFS side on the lab pair.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.unit.playbook import run_playbook

PLAY = """
- name: Storage validation
  hosts: sparks
  gather_facts: false
  tasks:
    - name: Validate
      ansible.builtin.include_role:
        name: sparkfold.cluster.storage
        tasks_from: validate
        public: true
    - name: Show the leftover files found
      ansible.builtin.debug:
        var: storage_present_files
"""

RAILS = [{"cidr": "10.77.0.0/24"}]


def _run(tmp_path, extra, args=()):
    (tmp_path / "inventory.yml").write_text(
        "sparks:\n  hosts:\n" + "".join(
            f"    {h}:\n      ansible_connection: local\n      ansible_python_interpreter: {sys.executable}\n"
            for h in ("localhost", "127.0.0.1")))
    (tmp_path / "play.yml").write_text(PLAY)
    etc = tmp_path / "etc"
    variables = {
        "recipe_worker_store": "copy",
        "recipe_cluster": {
            "head": "localhost", "workers": ["127.0.0.1"], "nodes": ["localhost", "127.0.0.1"], "world": 2,
            "topology": "pair",
            "hosts": {"localhost": {"plan": RAILS, "addresses": ["10.77.0.1"], "fabric_address": "10.77.0.1"},
                      "127.0.0.1": {"plan": RAILS, "addresses": ["10.77.0.2"], "fabric_address": "10.77.0.2"}},
        },
        "storage_export_dir": str(tmp_path / "srv" / "models"),
        "storage_leftover_files": [str(etc / "sparkfold.exports"), str(etc / "ganesha.conf"), str(etc / "storage.env")],
        "storage_required_free_gib": 1,
        **extra,
    }
    return run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path,
                        ["-e", json.dumps(variables), *args])


def _fatals(out):
    return [json.loads(m) for m in re.findall(r"^fatal: \[[^\]]+\]: FAILED! => (\{.*\})$", out, re.MULTILINE)]


def _present(out, host):
    found = re.search(rf"^ok: \[{re.escape(host)}\] => (\{{\n(?:.*\n)*?\}})$", out[out.index("Show the leftover"):],
                      re.MULTILINE)
    assert found, out[-4000:]
    return json.loads(found.group(1))["storage_present_files"]


def test_the_leftover_files_present_are_found_on_every_node(tmp_path):
    (tmp_path / "srv").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "sparkfold.exports").write_text("/srv/models 10.77.0.2(rw)\n")
    # a link counts, even one to nothing (the role removes it all the same)
    (tmp_path / "etc" / "storage.env").symlink_to(tmp_path / "etc" / "gone")
    proc = _run(tmp_path, {})
    assert proc.returncode == 0, proc.stdout[-4000:]
    for host in ("localhost", "127.0.0.1"):
        assert _present(proc.stdout, host) == [str(tmp_path / "etc" / "sparkfold.exports"),
                                               str(tmp_path / "etc" / "storage.env")]
    (tmp_path / "etc" / "sparkfold.exports").unlink()
    (tmp_path / "etc" / "storage.env").unlink()
    proc = _run(tmp_path, {})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _present(proc.stdout, "localhost") == [] and _present(proc.stdout, "127.0.0.1") == []


@pytest.mark.skipif(not shutil.which("findmnt"), reason="findmnt (util-linux) names the mount the message must name")
def test_too_little_free_space_is_refused_naming_host_path_and_figures(tmp_path):
    # The store is not made yet: its filesystem is measured at tmp_path, its nearest existing parent. In check
    # mode too (read_files reads the same there).
    proc = _run(tmp_path, {"storage_required_free_gib": 999999}, ["--check"])
    assert proc.returncode == 2, proc.stdout[-4000:]
    fatals = _fatals(proc.stdout)
    assert len(fatals) == 1, proc.stdout[-4000:]
    msg = fatals[0]["msg"]
    mount = subprocess.run(["findmnt", "-n", "-o", "TARGET", "-T", str(tmp_path)], capture_output=True, text=True,
                           check=True).stdout.strip()
    found = re.fullmatch(rf"The model store: 1 problem\(s\) on localhost, 127\.0\.0\.1:\n- localhost: "
                         rf"{re.escape(str(tmp_path / 'srv' / 'models'))} has ([0-9.]+) GiB free on "
                         rf"{re.escape(mount)}, the recipe needs 999999 GiB", msg)
    assert found, msg
    usage = os.statvfs(tmp_path)
    assert abs(float(found.group(1)) - usage.f_bavail * usage.f_frsize / 1024 ** 3) < 0.2, msg


def test_an_export_of_a_symlink_to_clients_outside_the_rails_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "models").symlink_to(tmp_path / "real")
    proc = _run(tmp_path, {"recipe_worker_store": "nfs", "storage_export_clients": ["10.77.0.2", "*", "192.168.1.5"]})
    fatals = _fatals(proc.stdout)
    assert len(fatals) == 1, proc.stdout[-4000:]
    store = tmp_path / "srv" / "models"
    assert fatals[0]["msg"] == "\n".join([
        "The model store: 2 problem(s) on localhost, 127.0.0.1:",
        f"- localhost: {store} is a symlink; export a real directory",
        "- localhost: the export would reach *, 192.168.1.5, outside the fabric rails (10.77.0.0/24); list only the"
        " workers' fabric addresses",
    ])
    # the same store as a real directory: nothing to refuse (the worker reads no store)
    (tmp_path / "srv" / "models").unlink()
    (tmp_path / "srv" / "models").mkdir()
    proc = _run(tmp_path, {"recipe_worker_store": "nfs"})
    assert proc.returncode == 0, proc.stdout[-4000:]


CLIENT_PLAY = """
- name: A worker that copies the store
  hosts: sparks
  gather_facts: false
  module_defaults:
    sparkfold.cluster.read_files:
      mountinfo_path: {mountinfo}
      fstab_path: {fstab}
  tasks:
    - name: Reach the export
      ansible.builtin.include_role:
        name: sparkfold.cluster.storage
        tasks_from: client
"""


@pytest.mark.parametrize("left_in", ["mountinfo", "fstab"])
def test_a_worker_that_copies_refuses_the_head_export_an_nfs_run_left_mounted_or_in_fstab(tmp_path, left_in):
    # client.yml's copy block reads the kernel's mount table and fstab (read_files mount_points, as data) and stops
    # on the head's export left at the store's mount point by either; with neither, it passes.
    point = tmp_path / "srv" / "models"
    tables = {"mountinfo": "27 1 254:0 / / rw - ext4 /dev/vda rw\n", "fstab": "UUID=1 / ext4 defaults 0 1\n"}
    (tmp_path / "mountinfo").write_text(tables["mountinfo"])
    (tmp_path / "fstab").write_text(tables["fstab"])
    (tmp_path / "inventory.yml").write_text(
        f"sparks:\n  hosts:\n    127.0.0.1:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")
    (tmp_path / "play.yml").write_text(CLIENT_PLAY.format(mountinfo=tmp_path / "mountinfo", fstab=tmp_path / "fstab"))
    variables = ["-e", json.dumps({"recipe_worker_store": "copy", "storage_nfs_server": "kernel",
                                   "storage_server_address": "10.77.0.1", "storage_export_dir": "/srv/models",
                                   "storage_mount_point": str(point)})]
    proc = run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path, variables)
    assert proc.returncode == 0, proc.stdout[-4000:]
    line = {"mountinfo": f"70 27 0:61 / {point} rw,relatime - nfs4 10.77.0.1:/srv/models rw,proto=rdma\n",
            "fstab": f"10.77.0.1:/srv/models {point} nfs _netdev,proto=rdma 0 0\n"}[left_in]
    (tmp_path / left_in).write_text(tables[left_in] + line)
    proc = run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path, variables)
    fatals = _fatals(proc.stdout)
    assert proc.returncode == 2 and len(fatals) == 1, proc.stdout[-4000:]
    assert fatals[0]["msg"] == (
        f"127.0.0.1: recipe_worker_store is copy, so the head no longer exports /srv/models, but {point} is still"
        " mounted (or in /etc/fstab) from 10.77.0.1:/srv/models: run `umount " + str(point) + "` and remove its"
        " /etc/fstab line, then run again (the weights role makes the copy)")
