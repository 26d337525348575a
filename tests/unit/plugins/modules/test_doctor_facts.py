# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster.doctor_facts and its readers (module_utils/doctor_probe)."""

import json
import os

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import doctor_probe as probe
from ansible_collections.sparkfold.cluster.plugins.modules import doctor_facts

from tests.unit.module_runner import module_runner
from tests.unit.plugins.modules.test_store_verify import COMMIT, FILES, REPO, SHARD2, write_manifest

HERE = os.path.dirname(__file__)
SYSFS = os.path.join(HERE, "..", "..", "fixtures", "sysfs", "spark-a")
MEMINFO = os.path.join(HERE, "..", "..", "fixtures", "nvidia-smi", "gb10-meminfo.txt")


class FakeRun:
    """run(argv) -> (rc, out, err) by the first words of argv; records every call."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        for prefix, answer in self.answers.items():
            if " ".join(argv).startswith(prefix):
                return answer
        return 127, "", f"{argv[0]}: not found"


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    for path, (data, _kind) in FILES.items():
        (root / path).write_bytes(data)
    write_manifest(root, FILES)
    return root


def test_a_missing_shard_is_named_without_hashing(store):
    os.rename(store / SHARD2, store.parent / SHARD2)
    found = probe.read_store({"name": "model store", "path": str(store), "repo_id": REPO, "commit": COMMIT}, [])
    assert found["ok"] is False
    assert {"path": SHARD2, "reason": "missing"} in found["problems"]
    assert found["shards"] == {"present": 1, "expected": 2}


def test_a_complete_store_and_another_pin(store):
    assert probe.read_store({"name": "s", "path": str(store), "repo_id": REPO, "commit": COMMIT}, [])["ok"] is True
    other = probe.read_store({"name": "s", "path": str(store), "repo_id": REPO, "commit": "f" * 40}, [])
    assert other["ok"] is False
    assert "f" * 40 in other["error"]


def test_a_store_on_nfs_is_flagged(store):
    mounts = [(str(store.parent), "nfs4"), ("/", "ext4")]
    found = probe.read_store({"name": "Engram tables", "path": str(store), "require_safetensors_index": False}, mounts)
    assert (found["fstype"], found["network_fs"], found["ok"]) == ("nfs4", True, True)


def test_free_space_is_measured_on_the_nearest_parent(tmp_path):
    found = probe.read_space(str(tmp_path / "not" / "yet"), [(str(tmp_path), "ext4"), ("/", "overlay")])
    assert found["measured"] == str(tmp_path)
    assert found["exists"] is False
    assert found["fstype"] == "ext4"
    assert found["free_bytes"] > 0


def test_an_active_unit_reads_no_journal():
    shown = "LoadState=loaded\nActiveState=active\nSubState=running\nNRestarts=0\n"
    run = FakeRun({"systemctl show": (0, shown, "")})
    unit = probe.read_unit(run, "sparkfold-engine@0.service", 12)
    assert (unit["ActiveState"], unit["journal"]) == ("active", [])
    assert len(run.calls) == 1


def test_a_stopped_unit_brings_its_journal():
    run = FakeRun({
        "systemctl show": (0, "LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code\n"
                              "ExecMainStatus=2\n", ""),
        "journalctl": (0, "refusing to start: model file x is missing\n\n", ""),
    })
    unit = probe.read_unit(run, "sparkfold-engine@1.service", 12)
    assert unit["journal"] == ["refusing to start: model file x is missing"]
    assert run.calls[1] == ["journalctl", "--no-pager", "--output=cat", "--lines=12",
                            "--unit=sparkfold-engine@1.service"]


def test_a_failed_jumbo_ping_says_why():
    out = "PING 192.168.100.2\n--- stats ---\n1 packets transmitted, 0 received, 100% packet loss\n"
    run = FakeRun({"ping": (1, out, "ping: local error: message too long, mtu=1500\n")})
    res = probe.ping_all(run, [{"interface": "enp1s0f1np1", "address": "192.168.100.2", "size": 8972}], 2)
    assert res[0]["ok"] is False
    assert "100% packet loss" in res[0]["detail"]
    assert "message too long, mtu=1500" in res[0]["detail"]
    assert run.calls[0] == ["ping", "-n", "-M", "do", "-s", "8972", "-c", "1", "-W", "2", "-I", "enp1s0f1np1",
                            "192.168.100.2"]


def test_addresses_and_packages():
    links = [{"ifname": "enp1s0f1np1", "addr_info": [{"family": "inet", "local": "192.168.100.1", "prefixlen": 24},
                                                     {"family": "inet6", "local": "fe80::1", "prefixlen": 64}]}]
    run = FakeRun({"ip -json": (0, json.dumps(links), ""),
                   "dpkg-query -W -f ${Status}\t${Version} libnccl2": (0, "install ok installed\t2.29.3-1", ""),
                   "dpkg-query": (1, "", "no packages found matching x")})
    assert probe.read_addresses(run) == ({"enp1s0f1np1": ["192.168.100.1/24"]}, None)
    assert probe.read_package(run, "libnccl2") == "2.29.3-1"
    assert probe.read_package(run, "x") is None


def test_memory_in_bytes():
    mem = probe.read_memory(MEMINFO)
    assert mem["error"] is None
    assert mem["available_bytes"] % 1024 == 0 and 0 < mem["available_bytes"] <= mem["total_bytes"]
    assert probe.read_memory("/nonexistent/meminfo")["error"].startswith("cannot read /nonexistent/meminfo")


def test_an_engine_that_does_not_answer_is_a_finding():
    found = probe.read_health("http://127.0.0.1:9", "", "m", 1.0)
    assert found["ready"] is False
    assert found["state"] in ("loading", "unavailable", "timeout")


def test_the_module_reads_and_changes_nothing(monkeypatch, store):
    run = module_runner(monkeypatch, doctor_facts.main)
    kind, result, _warnings = run({
        "sysfs_root": SYSFS, "meminfo_path": MEMINFO, "gpu": False, "space_paths": [str(store)],
        "stores": [{"name": "model store", "path": str(store), "repo_id": REPO, "commit": COMMIT}],
    })
    assert kind == "exit"
    assert result["changed"] is False
    facts = result["ansible_facts"]["sparkfold_doctor"]
    assert facts["roce"]["ipv4_gids"]["192.168.102.11"]["index"] == 3
    assert facts["stores"][0]["ok"] is True
    assert facts["gpu"] is None and facts["health"] is None
    assert facts["pings"] == [] and facts["units"] == []
