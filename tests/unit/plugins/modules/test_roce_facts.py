# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.roce_facts module (AnsibleModule run in-process)."""

import os

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import roce_facts

from tests.unit.module_runner import module_runner


@pytest.fixture
def module_result(monkeypatch):
    """Run roce_facts.main() with the given args; return (kind, result dict, warnings)."""
    return module_runner(monkeypatch, roce_facts.main)


def test_returns_facts_for_spark_a(module_result, fixtures_dir):
    kind, result, warnings = module_result(
        {"sysfs_root": os.path.join(fixtures_dir, "sysfs", "spark-a")}
    )
    assert kind == "exit"
    assert warnings == []
    assert result["changed"] is False
    facts = result["ansible_facts"]["sparkfold_roce"]
    assert facts["rdma_available"] is True
    assert sorted(facts["devices"]) == [
        "roceP2p1s0f0",
        "roceP2p1s0f1",
        "rocep1s0f0",
        "rocep1s0f1",
    ]
    assert {
        ip: (v["device"], v["port"], v["index"]) for ip, v in facts["ipv4_gids"].items()
    } == {
        "192.168.100.11": ("rocep1s0f0", 1, 3),
        "192.168.101.11": ("roceP2p1s0f0", 1, 3),
        "192.168.102.11": ("rocep1s0f1", 1, 3),
        "192.168.103.11": ("roceP2p1s0f1", 1, 3),
    }
    assert facts["netdevs"]["enp1s0f1np1"] == {
        "mtu": 9000,
        "speed": 200000,
        "operstate": "up",
        "address": "4c:bb:47:2c:7e:11",
        "rdma_device": "rocep1s0f1",
        "rdma_port": 1,
    }
    # every netdev under class/net, RDMA or not
    assert {
        name: (nd["rdma_device"], nd["rdma_port"]) for name, nd in facts["netdevs"].items()
    } == {
        "enP2p1s0f0np0": ("roceP2p1s0f0", 1),
        "enP2p1s0f1np1": ("roceP2p1s0f1", 1),
        "enP7s7": (None, None),
        "enp1s0f0np0": ("rocep1s0f0", 1),
        "enp1s0f1np1": ("rocep1s0f1", 1),
        "lo": (None, None),
        "wlP9s9": (None, None),
    }


def test_check_mode_returns_same_facts(module_result, fixtures_dir):
    root = os.path.join(fixtures_dir, "sysfs", "spark-b-shifted")
    kind, result, _warnings = module_result({"sysfs_root": root, "_ansible_check_mode": True})
    assert kind == "exit"
    assert result["changed"] is False
    assert (
        result["ansible_facts"]["sparkfold_roce"]["ipv4_gids"]["192.168.101.12"][
            "index"
        ]
        == 5
    )


def test_degraded_node(module_result, fixtures_dir):
    root = os.path.join(fixtures_dir, "sysfs", "spark-degraded")
    kind, result, _warnings = module_result({"sysfs_root": root})
    assert kind == "exit"
    facts = result["ansible_facts"]["sparkfold_roce"]
    assert facts["devices"]["rocep1s0f1"]["ports"]["1"]["state"] == "DOWN"
    assert facts["netdevs"]["enp1s0f0np0"]["mtu"] == 1500
    assert facts["netdevs"]["enp1s0f1np1"]["speed"] is None


def test_no_rdma_devices_is_not_an_error(module_result, tmp_path):
    (tmp_path / "class" / "net" / "eth0").mkdir(parents=True)
    kind, result, warnings = module_result({"sysfs_root": str(tmp_path)})
    assert kind == "exit"
    assert warnings == []
    assert result["changed"] is False
    assert result["ansible_facts"] == {
        "sparkfold_roce": {
            "rdma_available": False,
            "devices": {},
            "netdevs": {
                "eth0": {
                    "mtu": None,
                    "speed": None,
                    "operstate": None,
                    "address": None,
                    "rdma_device": None,
                    "rdma_port": None,
                },
            },
            "ipv4_gids": {},
        },
    }


def test_missing_sysfs_root_fails_clearly(module_result, tmp_path):
    missing = str(tmp_path / "no-such-sys")
    kind, result, _warnings = module_result({"sysfs_root": missing})
    assert kind == "fail"
    assert result["msg"] == (
        f"sysfs_root {missing} does not exist; set sysfs_root to the directory that contains class/ (default /sys)"
    )


def test_sysfs_root_is_a_file(module_result, tmp_path):
    path = tmp_path / "sys"
    path.write_text("")
    kind, result, _warnings = module_result({"sysfs_root": str(path)})
    assert kind == "fail"
    assert result["msg"] == (
        f"sysfs_root {path} is not a directory; set sysfs_root to the directory that contains class/ (default /sys)"
    )


def test_sysfs_root_without_class_dir(module_result, fixtures_dir):
    # a common slip: pointing at /sys/class instead of /sys
    root = os.path.join(fixtures_dir, "sysfs", "spark-a", "class")
    kind, result, _warnings = module_result({"sysfs_root": root})
    assert kind == "fail"
    assert result["msg"] == (
        f"sysfs_root {root} has no class/ directory; set sysfs_root to the directory that contains class/ "
        "(default /sys, not /sys/class)"
    )


def test_malformed_gid_fails_with_path(module_result, tmp_path):
    gid = (
        tmp_path / "class" / "infiniband" / "rocep1s0f0" / "ports" / "1" / "gids" / "0"
    )
    gid.parent.mkdir(parents=True)
    gid.write_text("zzzz\n")
    kind, result, _warnings = module_result({"sysfs_root": str(tmp_path)})
    assert kind == "fail"
    assert result["msg"].startswith(f"{gid}: 'zzzz' is not a GID")


def test_duplicate_ipv4_warns(module_result, tmp_path):
    for dev, netdev in (
        ("rocep1s0f0", "enp1s0f0np0"),
        ("roceP2p1s0f0", "enP2p1s0f0np0"),
    ):
        port = tmp_path / "class" / "infiniband" / dev / "ports" / "1"
        for sub, text in (
            ("gids/0", "0000:0000:0000:0000:0000:ffff:c0a8:6401"),
            ("gid_attrs/types/0", "RoCE v2"),
            ("gid_attrs/ndevs/0", netdev),
        ):
            (port / sub).parent.mkdir(parents=True, exist_ok=True)
            (port / sub).write_text(text + "\n")
    kind, _result, warnings = module_result({"sysfs_root": str(tmp_path)})
    assert kind == "exit"
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "IPv4 192.168.100.1 has a RoCE v2 GID on roceP2p1s0f0 port 1 index 0"
    )
