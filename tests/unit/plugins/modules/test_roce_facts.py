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


# check_gids: the GID index an engine uses whatever NCCL picks (the dsv41 Zig RDMA ring: 5), and the common IPv4
# RoCE v2 index of the SGLang ring's start script.
ZIG_WHY = "the engine's RDMA ring (TF_RDMA_DEVICES) uses GID index 5"


def test_check_gids_index_5_passes_where_the_rail_ipv4_roce_v2_gid_sits_there(module_result, fixtures_dir):
    root = os.path.join(fixtures_dir, "sysfs", "spark-a-ipv6-first")
    kind, result, _warnings = module_result({
        "sysfs_root": root,
        "check_gids": {"devices": ["rocep1s0f1", "roceP2p1s0f1"], "index": 5,
                       "addresses": ["192.168.102.11", "192.168.103.11"], "why": ZIG_WHY},
    })
    assert kind == "exit"
    assert result["changed"] is False
    check = result["gid_check"]
    assert check["problems"] == []
    assert check["index"] == 5
    assert {dev: (e["gid"], e["type"]) for dev, e in check["slots"].items()} == {
        "rocep1s0f1": ("::ffff:192.168.102.11", "RoCE v2"),
        "roceP2p1s0f1": ("::ffff:192.168.103.11", "RoCE v2"),
    }


def test_check_gids_index_5_refuses_a_fresh_node_and_names_the_fix(module_result, fixtures_dir):
    # spark-a: every IPv4 RoCE v2 GID at index 3, index 5 empty (a node with only its IPv4 address)
    root = os.path.join(fixtures_dir, "sysfs", "spark-a")
    kind, result, _warnings = module_result({
        "sysfs_root": root,
        "check_gids": {"devices": ["rocep1s0f1", "roceP2p1s0f1"], "index": 5,
                       "addresses": ["192.168.102.11", "192.168.103.11"], "why": ZIG_WHY},
    })
    assert kind == "exit"
    problems = result["gid_check"]["problems"]
    assert len(problems) == 2
    first = problems[0]
    assert first.startswith(ZIG_WHY + ": rocep1s0f1 port 1 GID index 5 is empty, not the RoCE v2 GID of the rail "
                            "address 192.168.102.11 (it is at index 3). Fix: ")
    assert "exactly 1 other address on enp1s0f1np1 came before it" in first
    assert "/sys/class/infiniband/rocep1s0f1/ports/1/gids/5" in first
    assert result["gid_check"]["slots"] == {"rocep1s0f1": None, "roceP2p1s0f1": None}


def test_check_gids_index_5_refuses_another_address_or_a_roce_v1_slot(module_result, fixtures_dir):
    # spark-b-shifted: roceP2p1s0f0 holds 192.168.101.12 as RoCE v2 at 5; rocep1s0f1 holds .102.12 as RoCE v1 at 3
    # and as RoCE v2 at 4, index 5 empty
    root = os.path.join(fixtures_dir, "sysfs", "spark-b-shifted")
    kind, result, _warnings = module_result({
        "sysfs_root": root,
        "check_gids": {"devices": ["roceP2p1s0f0", "rocep1s0f1"], "index": 5,
                       "addresses": ["192.168.103.12", "192.168.102.12"]},
    })
    assert kind == "exit"
    first, second = result["gid_check"]["problems"]
    assert first.startswith("roceP2p1s0f0 port 1 GID index 5 is ::ffff:192.168.101.12 (RoCE v2), not the RoCE v2 GID "
                            "of the rail address 192.168.103.12 (no RoCE v2 GID of port 1 carries 192.168.103.12)")
    assert second.startswith("rocep1s0f1 port 1 GID index 5 is empty, not the RoCE v2 GID of the rail address "
                             "192.168.102.12 (it is at index 4)")
    # the right address at 5 passes
    kind, result, _warnings = module_result({
        "sysfs_root": root,
        "check_gids": {"devices": ["roceP2p1s0f0"], "index": 5, "addresses": ["192.168.101.12"]},
    })
    assert result["gid_check"]["problems"] == []


def test_check_gids_index_3_refuses_a_roce_v1_slot(module_result, fixtures_dir):
    root = os.path.join(fixtures_dir, "sysfs", "spark-b-shifted")
    kind, result, _warnings = module_result({
        "sysfs_root": root,
        "check_gids": {"devices": ["rocep1s0f1"], "index": 3, "addresses": ["192.168.102.12"]},
    })
    assert kind == "exit"
    (problem,) = result["gid_check"]["problems"]
    assert problem.startswith("rocep1s0f1 port 1 GID index 3 is ::ffff:192.168.102.12 (IB/RoCE v1), not the RoCE v2 "
                              "GID of the rail address 192.168.102.12 (it is at index 4)")
    assert "when no other address on enp1s0f1np1 came before it" in problem


def test_check_gids_common_index_as_the_ring_script_finds_it(module_result, fixtures_dir):
    kind, result, _warnings = module_result({
        "sysfs_root": os.path.join(fixtures_dir, "sysfs", "spark-a"),
        "check_gids": {"devices": ["rocep1s0f0", "rocep1s0f1"]},
    })
    assert kind == "exit"
    assert result["gid_check"]["common_index"] == 3
    assert result["gid_check"]["problems"] == []
    kind, result, _warnings = module_result({
        "sysfs_root": os.path.join(fixtures_dir, "sysfs", "spark-a-ipv6-first"),
        "check_gids": {"devices": ["rocep1s0f1", "roceP2p1s0f1"]},
    })
    # 3 is an IPv6 (fd00::) RoCE v2 GID there: not IPv4, so 5
    assert result["gid_check"]["common_index"] == 5


def test_check_gids_no_common_index_is_a_problem(module_result, fixtures_dir):
    # spark-b-shifted: rocep1s0f1's IPv4 RoCE v2 GID at 4, roceP2p1s0f1's at 3
    kind, result, _warnings = module_result({
        "sysfs_root": os.path.join(fixtures_dir, "sysfs", "spark-b-shifted"),
        "check_gids": {"devices": ["rocep1s0f1", "roceP2p1s0f1"], "why": "the ring's NCCL"},
    })
    assert kind == "exit"
    check = result["gid_check"]
    assert check["common_index"] is None
    (problem,) = check["problems"]
    assert problem.startswith("the ring's NCCL: no GID index holds an IPv4 RoCE v2 GID on every one of rocep1s0f1, "
                              "roceP2p1s0f1 (rocep1s0f1: 0 fe80::")
    assert "4 ::ffff:192.168.102.12 (RoCE v2)" in problem


def test_check_gids_missing_device_and_port_down(module_result, fixtures_dir):
    kind, result, _warnings = module_result({
        "sysfs_root": os.path.join(fixtures_dir, "sysfs", "spark-degraded"),
        "check_gids": {"devices": ["rocep1s0f1", "roceP2p1s0f1"]},
    })
    assert kind == "exit"
    problems = result["gid_check"]["problems"]
    assert problems[0].startswith("rocep1s0f1 port 1 is DOWN, not ACTIVE")
    assert problems[1].startswith("roceP2p1s0f1: no such RDMA device under class/infiniband (have: roceP2p1s0f0, "
                                  "rocep1s0f0, rocep1s0f1)")
    assert len(problems) == 2


def test_check_gids_refuses_bad_arguments(module_result, fixtures_dir):
    root = os.path.join(fixtures_dir, "sysfs", "spark-a")
    kind, result, _warnings = module_result({
        "sysfs_root": root,
        "check_gids": {"devices": ["rocep1s0f1", "roceP2p1s0f1"], "index": 5, "addresses": ["192.168.102.11"]},
    })
    assert kind == "fail"
    assert "check_gids.addresses has 1 entries for 2 devices" in result["msg"]
    kind, result, _warnings = module_result({
        "sysfs_root": root, "check_gids": {"devices": ["rocep1s0f1"], "index": 256},
    })
    assert kind == "fail"
    assert "0..255" in result["msg"]


def test_without_check_gids_there_is_no_gid_check(module_result, fixtures_dir):
    kind, result, _warnings = module_result({"sysfs_root": os.path.join(fixtures_dir, "sysfs", "spark-a")})
    assert kind == "exit"
    assert "gid_check" not in result


FAKE_PING = """#!/bin/sh
echo "ping $*" >> "$FAKE_NET_LOG"
case "$*" in
  *192.168.100.12*) echo "PING 192.168.100.12 8972(9000) bytes of data."
    echo "3 packets transmitted, 3 received, 0% packet loss"; exit 0;;
  *) echo "ping: local error: message too long, mtu=1500"
    echo "3 packets transmitted, 0 received, +3 errors, 100% packet loss"; exit 1;;
esac
"""

FAKE_IP = """#!/bin/sh
echo "ip $*" >> "$FAKE_NET_LOG"
case "$*" in
  *192.168.100.12*) echo '[{"dst":"192.168.100.12","dev":"enp1s0f1np1","prefsrc":"192.168.100.11","uid":0}]';;
  *192.168.101.12*) echo '[{"dst":"192.168.101.12","gateway":"10.0.0.1","dev":"enP7s7","uid":0}]';;
  *) echo "RTNETLINK answers: Network is unreachable" >&2; exit 2;;
esac
"""


@pytest.fixture
def fake_net(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("ping", FAKE_PING), ("ip", FAKE_IP)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_NET_LOG", str(tmp_path / "net.log"))
    return tmp_path / "net.log"


def test_links_are_pinged_with_a_full_frame_and_their_routes_asked(module_result, fixtures_dir, fake_net):
    # What the fabric role's verification judges (verify_problems.j2): a ping per directed link, the route of its
    # address, both as data in one round trip.
    links = [{"interface": "enp1s0f1np1", "address": "192.168.100.12", "mtu": 9000, "peer": "spark-b", "name": "r0",
              "peer_interface": "enp1s0f1np1"},
             {"interface": "enP2p1s0f1np1", "address": "192.168.101.12", "mtu": 9000, "peer": "spark-b", "name": "r1"},
             {"interface": "enP2p1s0f1np1", "address": "192.168.109.12", "mtu": 9000, "peer": "spark-c"}]
    kind, result, _w = module_result({"sysfs_root": os.path.join(fixtures_dir, "sysfs", "spark-a"), "links": links,
                                      "ping_count": 3, "ping_timeout_s": 2})
    assert kind == "exit", result
    first, second, third = result["links"]
    assert first == dict(links[0], ping_ok=True, ping_detail="", route_dev="enp1s0f1np1", route_error=None)
    assert second["ping_ok"] is False
    assert second["ping_detail"] == ("ping: local error: message too long, mtu=1500; 3 packets transmitted, 0 received,"
                                     " +3 errors, 100% packet loss")
    assert (second["route_dev"], second["route_error"]) == ("enP7s7", None)
    assert third["route_dev"] is None and "Network is unreachable" in third["route_error"]
    assert third["name"] is None and third["peer_interface"] is None
    log = fake_net.read_text()
    assert "ping -n -M do -s 8972 -c 3 -W 2 -I enp1s0f1np1 192.168.100.12" in log
    assert "ip -json route get 192.168.100.12" in log
    # no links: no command at all
    fake_net.unlink()
    kind, result, _w = module_result({"sysfs_root": os.path.join(fixtures_dir, "sysfs", "spark-a")})
    assert (result["links"], result["port_counters"]) == ([], {}) and not fake_net.exists()


def test_counters_of_port_1_are_read_and_a_missing_device_left_out(module_result, fixtures_dir, tmp_path):
    import shutil

    root = tmp_path / "sys"
    shutil.copytree(os.path.join(fixtures_dir, "sysfs", "spark-a"), root, symlinks=True)
    counters = root / "class" / "infiniband" / "rocep1s0f1" / "ports" / "1" / "counters"
    counters.mkdir(exist_ok=True)
    for name, value in (("symbol_error", "0"), ("link_downed", "2"), ("link_error_recovery", "0")):
        (counters / name).write_text(value + "\n")
    kind, result, _w = module_result({"sysfs_root": str(root), "counters": ["rocep1s0f1", "mlx5_9"]})
    assert kind == "exit", result
    assert result["port_counters"] == {"rocep1s0f1": {"symbol_error": 0, "link_downed": 2, "link_error_recovery": 0,
                                                      "port_rcv_errors": None}}


def test_a_link_without_a_real_mtu_is_refused(module_result, fixtures_dir):
    kind, result, _w = module_result({"sysfs_root": os.path.join(fixtures_dir, "sysfs", "spark-a"),
                                      "links": [{"interface": "enp1s0f1np1", "address": "192.168.100.12", "mtu": 0}]})
    assert kind == "fail" and result["msg"].startswith("links over enp1s0f1np1 have an MTU of 28 or less")
