# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster module_utils.roce against sysfs fixture trees."""

import errno
import os
import shutil

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import roce

TWINS = {
    "rocep1s0f0": "enp1s0f0np0",
    "roceP2p1s0f0": "enP2p1s0f0np0",
    "rocep1s0f1": "enp1s0f1np1",
    "roceP2p1s0f1": "enP2p1s0f1np1",
}


def _root(fixtures_dir, name):
    return os.path.join(fixtures_dir, "sysfs", name)


def _gather(fixtures_dir, name):
    facts, warnings = roce.gather_roce_facts(_root(fixtures_dir, name))
    assert warnings == []
    return facts


def _gid_rows(port):
    return [
        (g["index"], g["gid"], g["type"], g["netdev"], g["ipv4"]) for g in port["gids"]
    ]


# --- parsers ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4: ACTIVE", (4, "ACTIVE")),
        ("1: DOWN", (1, "DOWN")),
        ("5: LinkUp", (5, "LinkUp")),
        ("3: Disabled", (3, "Disabled")),
        ("ACTIVE", (None, "ACTIVE")),
        ("", (None, None)),
        (None, (None, None)),
    ],
)
def test_parse_state(text, expected):
    assert roce.parse_state(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("200 Gb/sec (4X HDR)", 200.0),
        ("100 Gb/sec (2X HDR)", 100.0),
        ("2.5 Gb/sec (1X SDR)", 2.5),
        ("garbage", None),
        (None, None),
    ],
)
def test_parse_rate(text, expected):
    assert roce.parse_rate(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("9000", 9000),
        ("-1", -1),
        ("4096 (5)", 4096),
        ("", None),
        ("unknown", None),
        (None, None),
    ],
)
def test_parse_int(text, expected):
    assert roce.parse_int(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "fe80:0000:0000:0000:4ebb:47ff:fe2c:7e10",
            ("fe80::4ebb:47ff:fe2c:7e10", None),
        ),
        (
            "0000:0000:0000:0000:0000:ffff:c0a8:6401",
            ("::ffff:192.168.100.1", "192.168.100.1"),
        ),
        ("fd00:0101:0000:0000:0000:0000:0000:0012", ("fd00:101::12", None)),
        ("0000:0000:0000:0000:0000:0000:0000:0000", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_gid(text, expected):
    assert roce.parse_gid(text) == expected


def test_parse_gid_rejects_garbage_naming_the_file():
    with pytest.raises(roce.SysfsError) as excinfo:
        roce.parse_gid("not-a-gid", "/sys/class/infiniband/rocep1s0f0/ports/1/gids/7")
    msg = str(excinfo.value)
    assert msg.startswith(
        "/sys/class/infiniband/rocep1s0f0/ports/1/gids/7: 'not-a-gid' is not a GID"
    )
    assert "8 groups of 4 hex digits" in msg


def test_list_dir_sorts_numbers_numerically(tmp_path):
    for name in ("10", "2", "1"):
        (tmp_path / name).write_text("x\n")
    assert roce.list_dir(str(tmp_path)) == ["1", "2", "10"]
    assert roce.list_dir(str(tmp_path / "missing")) == []


def test_read_attr_missing_and_unreadable(tmp_path, monkeypatch):
    attr = tmp_path / "types_0"
    attr.write_text("RoCE v2\n")
    assert roce.read_attr(str(attr)) == "RoCE v2"
    assert roce.read_attr(str(tmp_path / "nope")) is None

    def einval(path, mode="r"):
        raise OSError(errno.EINVAL, "Invalid argument", path)

    monkeypatch.setattr(roce, "open", einval, raising=False)
    assert roce.read_attr(str(attr)) is None


# --- spark-a: the textbook node --------------------------------------------


def test_spark_a_devices_and_ports(fixtures_dir):
    facts = _gather(fixtures_dir, "spark-a")
    assert facts["rdma_available"] is True
    assert sorted(facts["devices"]) == sorted(TWINS)
    for dev, netdev in TWINS.items():
        device = facts["devices"][dev]
        assert device["hca_type"] == "MT4129"
        assert device["fw_ver"] == "28.44.1036"
        assert device["netdevs"] == [netdev]
        assert list(device["ports"]) == ["1"]
        port = device["ports"]["1"]
        assert port["state"] == "ACTIVE"
        assert port["state_code"] == 4
        assert port["phys_state"] == "LinkUp"
        assert port["phys_state_code"] == 5
        assert port["rate"] == "200 Gb/sec (4X HDR)"
        assert port["rate_gbps"] == 200.0
        assert port["active_mtu"] is None
        assert port["link_layer"] == "Ethernet"
        assert port["netdev"] == netdev


def test_spark_a_gid_table_skips_empty_slots(fixtures_dir):
    facts = _gather(fixtures_dir, "spark-a")
    port = facts["devices"]["rocep1s0f0"]["ports"]["1"]
    # slots 4..15 hold all-zero GIDs and have no gid_attrs: left out
    assert _gid_rows(port) == [
        (0, "fe80::4ebb:47ff:fe2c:7e10", "IB/RoCE v1", "enp1s0f0np0", None),
        (1, "fe80::4ebb:47ff:fe2c:7e10", "RoCE v2", "enp1s0f0np0", None),
        (2, "::ffff:192.168.100.11", "IB/RoCE v1", "enp1s0f0np0", "192.168.100.11"),
        (3, "::ffff:192.168.100.11", "RoCE v2", "enp1s0f0np0", "192.168.100.11"),
    ]
    port = facts["devices"]["roceP2p1s0f1"]["ports"]["1"]
    assert _gid_rows(port) == [
        (0, "fe80::4ebb:47ff:fe2c:7e15", "IB/RoCE v1", "enP2p1s0f1np1", None),
        (1, "fe80::4ebb:47ff:fe2c:7e15", "RoCE v2", "enP2p1s0f1np1", None),
        (2, "::ffff:192.168.103.11", "IB/RoCE v1", "enP2p1s0f1np1", "192.168.103.11"),
        (3, "::ffff:192.168.103.11", "RoCE v2", "enP2p1s0f1np1", "192.168.103.11"),
    ]


def test_spark_a_ipv4_gids_only_roce_v2(fixtures_dir):
    facts = _gather(fixtures_dir, "spark-a")
    assert facts["ipv4_gids"] == {
        "192.168.100.11": {
            "device": "rocep1s0f0",
            "port": 1,
            "index": 3,
            "netdev": "enp1s0f0np0",
            "gid": "::ffff:192.168.100.11",
        },
        "192.168.101.11": {
            "device": "roceP2p1s0f0",
            "port": 1,
            "index": 3,
            "netdev": "enP2p1s0f0np0",
            "gid": "::ffff:192.168.101.11",
        },
        "192.168.102.11": {
            "device": "rocep1s0f1",
            "port": 1,
            "index": 3,
            "netdev": "enp1s0f1np1",
            "gid": "::ffff:192.168.102.11",
        },
        "192.168.103.11": {
            "device": "roceP2p1s0f1",
            "port": 1,
            "index": 3,
            "netdev": "enP2p1s0f1np1",
            "gid": "::ffff:192.168.103.11",
        },
    }


def test_spark_a_netdevs_every_class_net_entry(fixtures_dir):
    facts = _gather(fixtures_dir, "spark-a")
    # lo, enP7s7 (10GbE) and wlP9s9 (Wi-Fi) carry no RDMA device: listed with rdma_device null
    assert facts["netdevs"] == {
        "enP2p1s0f0np0": {
            "mtu": 9000,
            "speed": 200000,
            "operstate": "up",
            "address": "4c:bb:47:2c:7e:14",
            "rdma_device": "roceP2p1s0f0",
            "rdma_port": 1,
        },
        "enP2p1s0f1np1": {
            "mtu": 9000,
            "speed": 200000,
            "operstate": "up",
            "address": "4c:bb:47:2c:7e:15",
            "rdma_device": "roceP2p1s0f1",
            "rdma_port": 1,
        },
        "enP7s7": {
            "mtu": 1500,
            "speed": 10000,
            "operstate": "up",
            "address": "4c:bb:47:2c:70:01",
            "rdma_device": None,
            "rdma_port": None,
        },
        "enp1s0f0np0": {
            "mtu": 9000,
            "speed": 200000,
            "operstate": "up",
            "address": "4c:bb:47:2c:7e:10",
            "rdma_device": "rocep1s0f0",
            "rdma_port": 1,
        },
        "enp1s0f1np1": {
            "mtu": 9000,
            "speed": 200000,
            "operstate": "up",
            "address": "4c:bb:47:2c:7e:11",
            "rdma_device": "rocep1s0f1",
            "rdma_port": 1,
        },
        # no speed file
        "lo": {
            "mtu": 65536,
            "speed": None,
            "operstate": "unknown",
            "address": "00:00:00:00:00:00",
            "rdma_device": None,
            "rdma_port": None,
        },
        "wlP9s9": {
            "mtu": 1500,
            "speed": None,
            "operstate": "dormant",
            "address": "4c:bb:47:2c:70:02",
            "rdma_device": None,
            "rdma_port": None,
        },
    }


# --- spark-b-shifted: GID index drift ---------------------------------------


def test_spark_b_shifted_index_drift(fixtures_dir):
    facts = _gather(fixtures_dir, "spark-b-shifted")
    gids = facts["ipv4_gids"]
    assert sorted(gids) == [
        "192.168.100.12",
        "192.168.101.12",
        "192.168.102.12",
        "192.168.103.12",
    ]
    assert (gids["192.168.100.12"]["device"], gids["192.168.100.12"]["index"]) == (
        "rocep1s0f0",
        3,
    )
    # extra IPv6 address added first: IPv4 RoCE v2 GID moved from 3 to 5
    assert (gids["192.168.101.12"]["device"], gids["192.168.101.12"]["index"]) == (
        "roceP2p1s0f0",
        5,
    )
    # an empty slot 2 (removed address) in the middle of the table: moved from 3 to 4
    assert (gids["192.168.102.12"]["device"], gids["192.168.102.12"]["index"]) == (
        "rocep1s0f1",
        4,
    )
    assert (gids["192.168.103.12"]["device"], gids["192.168.103.12"]["index"]) == (
        "roceP2p1s0f1",
        3,
    )


def test_spark_b_shifted_gid_tables(fixtures_dir):
    facts = _gather(fixtures_dir, "spark-b-shifted")
    port = facts["devices"]["roceP2p1s0f0"]["ports"]["1"]
    assert _gid_rows(port) == [
        (0, "fe80::4ebb:47ff:fe2c:8114", "IB/RoCE v1", "enP2p1s0f0np0", None),
        (1, "fe80::4ebb:47ff:fe2c:8114", "RoCE v2", "enP2p1s0f0np0", None),
        (2, "fd00:101::12", "IB/RoCE v1", "enP2p1s0f0np0", None),
        (3, "fd00:101::12", "RoCE v2", "enP2p1s0f0np0", None),
        (4, "::ffff:192.168.101.12", "IB/RoCE v1", "enP2p1s0f0np0", "192.168.101.12"),
        (5, "::ffff:192.168.101.12", "RoCE v2", "enP2p1s0f0np0", "192.168.101.12"),
    ]
    port = facts["devices"]["rocep1s0f1"]["ports"]["1"]
    assert [g["index"] for g in port["gids"]] == [0, 1, 3, 4]
    assert port["gids"][3]["type"] == "RoCE v2"
    assert port["gids"][3]["ipv4"] == "192.168.102.12"


# --- spark-degraded: a DOWN port, MTU 1500, half rate -------------------------


def test_spark_degraded_ports(fixtures_dir):
    facts = _gather(fixtures_dir, "spark-degraded")
    assert sorted(facts["devices"]) == ["roceP2p1s0f0", "rocep1s0f0", "rocep1s0f1"]

    down = facts["devices"]["rocep1s0f1"]["ports"]["1"]
    assert (down["state"], down["state_code"]) == ("DOWN", 1)
    assert (down["phys_state"], down["phys_state_code"]) == ("Disabled", 3)
    assert down["rate"] == "40 Gb/sec (4X QDR)"
    assert down["rate_gbps"] == 40.0
    assert down["active_mtu"] == 1024
    assert down["netdev"] == "enp1s0f1np1"
    assert [(g["index"], g["type"], g["ipv4"]) for g in down["gids"]] == [
        (0, "IB/RoCE v1", None),
        (1, "RoCE v2", None),
    ]

    up = facts["devices"]["rocep1s0f0"]["ports"]["1"]
    assert (up["state"], up["state_code"], up["active_mtu"]) == ("ACTIVE", 4, 1024)

    half = facts["devices"]["roceP2p1s0f0"]["ports"]["1"]
    assert (half["rate"], half["rate_gbps"], half["active_mtu"]) == (
        "100 Gb/sec (2X HDR)",
        100.0,
        4096,
    )


def test_spark_degraded_netdevs(fixtures_dir):
    facts = _gather(fixtures_dir, "spark-degraded")
    assert facts["netdevs"] == {
        # MTU never raised to 9000
        "enp1s0f0np0": {
            "mtu": 1500,
            "speed": 200000,
            "operstate": "up",
            "address": "4c:bb:47:2c:90:10",
            "rdma_device": "rocep1s0f0",
            "rdma_port": 1,
        },
        # link down: speed reads -1 -> null
        "enp1s0f1np1": {
            "mtu": 1500,
            "speed": None,
            "operstate": "down",
            "address": "4c:bb:47:2c:90:11",
            "rdma_device": "rocep1s0f1",
            "rdma_port": 1,
        },
        # speed attribute unreadable -> null
        "enP2p1s0f0np0": {
            "mtu": 9000,
            "speed": None,
            "operstate": "up",
            "address": "4c:bb:47:2c:90:14",
            "rdma_device": "roceP2p1s0f0",
            "rdma_port": 1,
        },
        "enP7s7": {
            "mtu": 1500,
            "speed": 10000,
            "operstate": "up",
            "address": "4c:bb:47:2c:70:01",
            "rdma_device": None,
            "rdma_port": None,
        },
        "lo": {
            "mtu": 65536,
            "speed": None,
            "operstate": "unknown",
            "address": "00:00:00:00:00:00",
            "rdma_device": None,
            "rdma_port": None,
        },
        "wlP9s9": {
            "mtu": 1500,
            "speed": None,
            "operstate": "dormant",
            "address": "4c:bb:47:2c:70:02",
            "rdma_device": None,
            "rdma_port": None,
        },
    }
    # the DOWN port has no IPv4 GID; the others keep index 3
    assert {ip: (v["device"], v["index"]) for ip, v in facts["ipv4_gids"].items()} == {
        "192.168.100.13": ("rocep1s0f0", 3),
        "192.168.101.13": ("roceP2p1s0f0", 3),
    }


# --- no RDMA (the lab) and edge cases ----------------------------------------


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def test_no_infiniband_class(tmp_path):
    _write(tmp_path / "class" / "net" / "eth0" / "mtu", "1500")
    facts, warnings = roce.gather_roce_facts(str(tmp_path))
    assert facts == {
        "rdma_available": False,
        "devices": {},
        "netdevs": {
            "eth0": {
                "mtu": 1500,
                "speed": None,
                "operstate": None,
                "address": None,
                "rdma_device": None,
                "rdma_port": None,
            },
        },
        "ipv4_gids": {},
    }
    assert warnings == []


def test_lab_host_without_rdma_lists_cx7_interface_names(tmp_path):
    # the lab: the CX7 interface names exist under class/net, but there is no class/infiniband
    for name, address in (
        ("enp1s0f1np1", "52:54:00:12:34:01"),
        ("enP2p1s0f1np1", "52:54:00:12:34:02"),
    ):
        _write(tmp_path / "class" / "net" / name / "mtu", "1500")
        _write(tmp_path / "class" / "net" / name / "operstate", "up")
        _write(tmp_path / "class" / "net" / name / "address", address)
        _write(tmp_path / "class" / "net" / name / "speed", "-1")
    facts, warnings = roce.gather_roce_facts(str(tmp_path))
    assert facts == {
        "rdma_available": False,
        "devices": {},
        "netdevs": {
            "enP2p1s0f1np1": {
                "mtu": 1500,
                "speed": None,
                "operstate": "up",
                "address": "52:54:00:12:34:02",
                "rdma_device": None,
                "rdma_port": None,
            },
            "enp1s0f1np1": {
                "mtu": 1500,
                "speed": None,
                "operstate": "up",
                "address": "52:54:00:12:34:01",
                "rdma_device": None,
                "rdma_port": None,
            },
        },
        "ipv4_gids": {},
    }
    assert warnings == []


def test_empty_infiniband_class(tmp_path):
    # no class/net either: netdevs is empty, not an error
    (tmp_path / "class" / "infiniband").mkdir(parents=True)
    facts, warnings = roce.gather_roce_facts(str(tmp_path))
    assert facts == {
        "rdma_available": False,
        "devices": {},
        "netdevs": {},
        "ipv4_gids": {},
    }
    assert warnings == []


def test_plain_files_under_class_net_are_not_netdevs(tmp_path):
    _write(tmp_path / "class" / "net" / "bonding_masters", "")
    (tmp_path / "class" / "net" / "eth0").mkdir()
    facts, _warnings = roce.gather_roce_facts(str(tmp_path))
    assert list(facts["netdevs"]) == ["eth0"]


def test_infiniband_not_a_directory(tmp_path):
    _write(tmp_path / "class" / "infiniband", "oops")
    with pytest.raises(
        roce.SysfsError, match="class/infiniband exists but is not a directory"
    ):
        roce.gather_roce_facts(str(tmp_path))


def _tiny_device(root, dev, netdev, gids, types, ndevs=None, device_net=True):
    port = root / "class" / "infiniband" / dev / "ports" / "1"
    _write(port / "state", "4: ACTIVE")
    _write(port / "phys_state", "5: LinkUp")
    _write(port / "rate", "200 Gb/sec (4X HDR)")
    _write(port / "link_layer", "Ethernet")
    for index, gid in enumerate(gids):
        _write(port / "gids" / str(index), gid)
    for index, gid_type in types.items():
        _write(port / "gid_attrs" / "types" / str(index), gid_type)
    for index, name in (ndevs or {}).items():
        _write(port / "gid_attrs" / "ndevs" / str(index), name)
    if device_net:
        (root / "class" / "infiniband" / dev / "device" / "net" / netdev).mkdir(
            parents=True
        )
    _write(root / "class" / "net" / netdev / "mtu", "9000")


def test_nonzero_gid_with_unreadable_type_is_skipped_and_netdev_from_device_net(
    tmp_path,
):
    mapped = "0000:0000:0000:0000:0000:ffff:c0a8:6401"
    # slot 0 has a GID but no type (EINVAL on a real kernel); slot 1 v2 without ndevs
    _tiny_device(
        tmp_path, "rocep1s0f0", "enp1s0f0np0", [mapped, mapped], {1: "RoCE v2"}
    )
    facts, _warnings = roce.gather_roce_facts(str(tmp_path))
    port = facts["devices"]["rocep1s0f0"]["ports"]["1"]
    assert _gid_rows(port) == [
        (1, "::ffff:192.168.100.1", "RoCE v2", None, "192.168.100.1")
    ]
    assert port["netdev"] == "enp1s0f0np0"
    assert facts["ipv4_gids"]["192.168.100.1"]["index"] == 1
    assert facts["netdevs"] == {
        "enp1s0f0np0": {
            "mtu": 9000,
            "speed": None,
            "operstate": None,
            "address": None,
            "rdma_device": "rocep1s0f0",
            "rdma_port": 1,
        },
    }


def test_port_netdev_unknown_without_ndevs_or_device_net(tmp_path):
    _tiny_device(tmp_path, "mlx5_0", "ib0", [], {}, device_net=False)
    facts, _warnings = roce.gather_roce_facts(str(tmp_path))
    assert facts["rdma_available"] is True
    assert facts["devices"]["mlx5_0"]["ports"]["1"]["netdev"] is None
    assert facts["devices"]["mlx5_0"]["ports"]["1"]["gids"] == []
    # ib0 is under class/net but nothing ties it to mlx5_0
    assert facts["netdevs"] == {
        "ib0": {
            "mtu": 9000,
            "speed": None,
            "operstate": None,
            "address": None,
            "rdma_device": None,
            "rdma_port": None,
        },
    }


def test_netdev_tied_only_through_device_net_has_no_port(tmp_path):
    # two netdevs under device/net and no gid_attrs/ndevs: the port cannot tell which is its own
    _tiny_device(tmp_path, "mlx5_0", "eth0", [], {})
    (tmp_path / "class" / "infiniband" / "mlx5_0" / "device" / "net" / "eth1").mkdir()
    _write(tmp_path / "class" / "net" / "eth1" / "mtu", "1500")
    facts, _warnings = roce.gather_roce_facts(str(tmp_path))
    assert facts["devices"]["mlx5_0"]["ports"]["1"]["netdev"] is None
    assert {
        name: (nd["rdma_device"], nd["rdma_port"]) for name, nd in facts["netdevs"].items()
    } == {"eth0": ("mlx5_0", None), "eth1": ("mlx5_0", None)}


def test_rdma_device_without_class_net(tmp_path):
    mapped = "0000:0000:0000:0000:0000:ffff:c0a8:6401"
    _tiny_device(
        tmp_path, "rocep1s0f0", "enp1s0f0np0", [mapped], {0: "RoCE v2"}, {0: "enp1s0f0np0"}
    )
    shutil.rmtree(tmp_path / "class" / "net")
    facts, warnings = roce.gather_roce_facts(str(tmp_path))
    assert facts["rdma_available"] is True
    assert facts["ipv4_gids"]["192.168.100.1"]["netdev"] == "enp1s0f0np0"
    assert facts["netdevs"] == {}
    assert warnings == []


def test_same_ipv4_on_two_devices_warns_and_keeps_first(tmp_path):
    mapped = "0000:0000:0000:0000:0000:ffff:c0a8:6401"
    _tiny_device(
        tmp_path,
        "rocep1s0f0",
        "enp1s0f0np0",
        [mapped],
        {0: "RoCE v2"},
        {0: "enp1s0f0np0"},
    )
    _tiny_device(
        tmp_path,
        "roceP2p1s0f0",
        "enP2p1s0f0np0",
        [mapped],
        {0: "RoCE v2"},
        {0: "enP2p1s0f0np0"},
    )
    facts, warnings = roce.gather_roce_facts(str(tmp_path))
    # sorted() puts upper-case "roceP2..." first
    assert facts["ipv4_gids"]["192.168.100.1"]["device"] == "roceP2p1s0f0"
    assert warnings == [
        (
            "IPv4 192.168.100.1 has a RoCE v2 GID on roceP2p1s0f0 port 1 index 0 and on rocep1s0f0 "
            "port 1 index 0; ipv4_gids keeps the first. One address on two RDMA netdevs breaks routing "
            "and NCCL: give each twin its own subnet."
        )
    ]


def test_malformed_gid_fails_with_path(tmp_path):
    _tiny_device(tmp_path, "rocep1s0f0", "enp1s0f0np0", ["zzzz"], {0: "RoCE v2"})
    with pytest.raises(roce.SysfsError) as excinfo:
        roce.gather_roce_facts(str(tmp_path))
    assert str(excinfo.value).startswith(
        str(
            tmp_path
            / "class"
            / "infiniband"
            / "rocep1s0f0"
            / "ports"
            / "1"
            / "gids"
            / "0"
        )
        + ": 'zzzz' is not a GID"
    )
