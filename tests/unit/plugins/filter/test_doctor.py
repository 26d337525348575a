# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the doctor_report filter, and the doctor role's fallbacks against the roles they mirror."""

import copy
import os

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfold.cluster.plugins.filter.doctor import doctor_pings, doctor_report, doctor_verdict
from ansible_collections.sparkfold.cluster.plugins.module_utils.roce import gather_roce_facts

HERE = os.path.dirname(__file__)
SYSFS = os.path.join(HERE, "..", "..", "fixtures", "sysfs", "spark-a")
GIB = 1024 ** 3

RAILS = [
    {"name": "rail0", "interface": "enp1s0f1np1", "rdma_device": "rocep1s0f1", "address": "192.168.102.11",
     "address_cidr": "192.168.102.11/24", "mtu": 9000},
    {"name": "rail1", "interface": "enP2p1s0f1np1", "rdma_device": "roceP2p1s0f1", "address": "192.168.103.11",
     "address_cidr": "192.168.103.11/24", "mtu": 9000},
]


def healthy_facts():
    roce, _warnings = gather_roce_facts(SYSFS)
    return {
        "machine": "aarch64",
        "roce": roce,
        "addresses": {"enp1s0f1np1": ["192.168.102.11/24"], "enP2p1s0f1np1": ["192.168.103.11/24"]},
        "pings": [{"interface": r["interface"], "address": r["address"][:-2] + "12", "size": 8972, "peer": "spark-b",
                   "rail": r["name"], "ok": True, "detail": ""} for r in RAILS],
        "memory": {"total_bytes": 121 * GIB, "available_bytes": 8 * GIB, "error": None},
        "space": [{"path": "/srv/models/m", "measured": "/srv/models/m", "free_bytes": 300 * GIB,
                   "total_bytes": 3600 * GIB, "mount": "/srv/models", "fstype": "ext4", "error": None}],
        "stores": [
            {"name": "model store", "path": "/srv/models/m", "ok": True, "error": None, "problems": [],
             "shards": {"present": 39, "expected": 39}, "commit": "64ba41b6" + "0" * 32, "files_checked": 45,
             "mount": "/srv/models", "fstype": "ext4", "network_fs": False},
            {"name": "Engram tables", "path": "/var/lib/sparkfold/engram", "ok": True, "error": None, "problems": [],
             "shards": {"present": 0, "expected": 0}, "commit": "dba1be0a" + "0" * 32, "files_checked": 4,
             "mount": "/", "fstype": "ext4", "network_fs": False},
        ],
        "units": [{"unit": "sparkfold-engine@0.service", "LoadState": "loaded", "ActiveState": "active",
                   "SubState": "running", "Result": "success", "ExecMainStatus": "0", "NRestarts": "0",
                   "journal": [], "error": None}],
        "health": {"url": "http://127.0.0.1:8000", "ready": True, "state": "ready", "detail": "ready",
                   "health": {"ok": True, "context_length": 1048576}},
        "gpu": {"error": None, "count": 1, "driver_version": "580.95.05", "cuda_version": "13.0",
                "names": ["NVIDIA GB10"]},
        "packages": {"libnccl2": "2.29.3-1+cuda13.0"},
    }


def expect(**extra):
    base = {"host": "spark-a", "rank": 0, "lab": False, "inventory": "inventory/example", "rails": RAILS,
            "memory_gate_gib": 112, "serving_floor_gib": 5, "store_min_free_gib": 20, "shards": 39,
            "hub": {"ok": True, "kind": "", "msg": "", "repo_id": "Mia-AiLab/q", "revision": "64ba41b6" + "0" * 32}}
    base.update(extra)
    return base


def row(report, check):
    found = [r for r in report["rows"] if r["check"] == check]
    assert found, [r["check"] for r in report["rows"]]
    return found[0]


def test_a_healthy_serving_spark_passes_every_check():
    report = doctor_report(healthy_facts(), expect())
    assert report["ok"], report["problems"]
    assert report["problems"] == [] and report["not_available"] == []
    assert row(report, "rail0 enp1s0f1np1 RoCE")["seen"] == "ACTIVE, GID index 3"
    # Serving: MemAvailable is judged against the serving floor, not the gate (the engine holds the rest).
    assert "while the engine runs" in row(report, "memory")["seen"]
    assert report["table"][0] == "--- spark-a ---"
    assert any("Hub pin" in line and " ok " in line for line in report["table"])


def test_a_rail_at_mtu_1500_says_to_run_the_fabric_playbook():
    facts = healthy_facts()
    facts["roce"]["netdevs"]["enp1s0f1np1"]["mtu"] = 1500
    facts["pings"][0].update(ok=False, detail="ping: local error: message too long, mtu=1500")
    report = doctor_report(facts, expect())
    assert not report["ok"]
    link = row(report, "rail0 enp1s0f1np1 link")
    assert link["state"] == "FAIL"
    fix = "MTU 1500 is not the plan's 9000: ansible-playbook -i inventory/example playbooks/fabric.yml"
    assert fix in link["advice"]
    assert row(report, "ping spark-b via enp1s0f1np1")["state"] == "FAIL"
    assert row(report, "ping spark-b via enP2p1s0f1np1")["state"] == "ok"
    assert report["problems"][0].startswith("spark-a: rail0 enp1s0f1np1 link: up, MTU 1500")


def test_a_slow_link_a_missing_address_and_a_missing_gid():
    facts = healthy_facts()
    facts["roce"]["netdevs"]["enP2p1s0f1np1"]["speed"] = 25000
    facts["addresses"]["enP2p1s0f1np1"] = []
    del facts["roce"]["ipv4_gids"]["192.168.103.11"]
    report = doctor_report(facts, expect())
    link = row(report, "rail1 enP2p1s0f1np1 link")
    assert "links at 25000 Mb/s: a link stuck low after boot needs a power cycle" in link["advice"]
    assert "192.168.103.11/24 is not on enP2p1s0f1np1" in link["advice"]
    gid = row(report, "rail1 enP2p1s0f1np1 RoCE")
    assert gid["state"] == "FAIL" and "no RoCE v2 GID holds 192.168.103.11 on roceP2p1s0f1" in gid["advice"]


def test_the_lab_says_what_it_cannot_show():
    facts = healthy_facts()
    facts["roce"] = {"rdma_available": False, "devices": {}, "ipv4_gids": {}, "netdevs": {
        name: dict(nd, speed=10000) for name, nd in facts["roce"]["netdevs"].items()}}
    facts["gpu"], facts["packages"], facts["machine"] = None, {}, "x86_64"
    report = doctor_report(facts, expect(lab=True))
    assert report["ok"], report["problems"]
    lab = "not available in the lab"
    assert f"spark-a: rail0 enp1s0f1np1 RoCE: RoCE port and GID index: {lab}" in report["not_available"]
    assert "spark-a: driver and NCCL: no GPU: not available in the lab" in report["not_available"]
    assert "speed not available in the lab" in row(report, "rail0 enp1s0f1np1 link")["seen"]


def test_a_missing_shard_on_a_worker_says_the_worker_copies_it_again():
    facts = healthy_facts()
    missing = [{"path": "model-00002-of-00039.safetensors", "reason": "missing"}]
    facts["stores"][0].update(ok=False, problems=missing, shards={"present": 38, "expected": 39})
    report = doctor_report(facts, expect(host="spark-b", rank=1, hub=None))
    store = row(report, "model store")
    assert store["seen"] == "model-00002-of-00039.safetensors: missing"
    assert store["advice"] == ("ansible-playbook -i inventory/example playbooks/weights.yml: "
                               "the worker copies it again from the head over the fabric")
    head = doctor_report(facts, expect())
    assert "the head fetches what is missing from the Hub" in row(head, "model store")["advice"]


def test_engram_over_nfs_and_a_store_without_manifest():
    facts = healthy_facts()
    facts["stores"][1].update(network_fs=True, fstype="nfs4", mount="/var/lib/sparkfold")
    facts["stores"][0].update(ok=False, error="store /srv/models/m has no manifest", problems=[])
    report = doctor_report(facts, expect())
    assert "prefill falls from ~2,150 to 690-890 tok/s" in row(report, "Engram tables")["seen"]
    assert "point recipe_engram_dir at a local disk" in row(report, "Engram tables")["advice"]
    assert row(report, "model store")["seen"] == "store /srv/models/m has no manifest"


def test_a_stopped_rank_shows_its_journal_and_the_ordered_start():
    facts = healthy_facts()
    facts["units"][0].update(ActiveState="inactive", SubState="dead", Result="success",
                             journal=[f"line {n}" for n in range(10)])
    facts["health"].update(ready=False, state="loading", detail="still loading: connection refused on 127.0.0.1:8000")
    facts["memory"]["available_bytes"] = 100 * GIB
    report = doctor_report(facts, expect())
    unit = row(report, "sparkfold-engine@0.service")
    assert unit["seen"] == "inactive (dead), 0 restarts"
    assert "start the ranks in order with ansible-playbook -i inventory/example playbooks/engine.yml" in unit["advice"]
    assert unit["journal"] == [f"line {n}" for n in range(4, 10)]
    assert "| line 9" in "\n".join(report["table"])
    assert "waits for a follower" in row(report, "http://127.0.0.1:8000/health")["advice"]
    # Not serving: the memory gate applies, and 100 GiB is under the 112 GiB gate.
    memory = row(report, "memory")
    assert memory["state"] == "FAIL" and "a start would wait at the memory gate" in memory["advice"]


def test_a_full_disk_old_nccl_and_another_driver_branch():
    facts = healthy_facts()
    facts["space"][0]["free_bytes"] = 5 * GIB
    facts["packages"]["libnccl2"] = "2.28.9-1+cuda13.0"
    facts["gpu"]["driver_version"] = "575.51.03"
    report = doctor_report(facts, expect())
    disk = row(report, "disk free")
    assert disk["state"] == "FAIL" and disk["seen"].startswith("5.0 GiB free of 3600.0 GiB under /srv/models/m")
    assert "deadlocks after about 1.1 million collectives" in row(report, "NCCL")["advice"]
    assert row(report, "driver")["state"] == "FAIL"
    facts["machine"] = "x86_64"
    assert row(doctor_report(facts, expect()), "NCCL")["state"] == "ok"


def test_the_hub_offline_is_not_a_problem_a_vanished_pin_is():
    offline = doctor_report(healthy_facts(), expect(hub={"ok": False, "kind": "network", "msg": "could not reach"}))
    assert offline["ok"] and row(offline, "Hub pin")["state"] == "n/a"
    assert "offline" in row(offline, "Hub pin")["seen"]
    gone = doctor_report(healthy_facts(), expect(hub={"ok": False, "kind": "revision_not_found", "msg": "refs: main",
                                                      "repo_id": "a/b", "revision": "c" * 40}))
    assert row(gone, "Hub pin")["state"] == "FAIL"
    assert "pin a revision that exists" in row(gone, "Hub pin")["advice"]


def test_missing_expectations_are_named():
    with pytest.raises(AnsibleFilterError, match=r"expect\.memory_gate_gib is missing"):
        doctor_report(healthy_facts(), {k: v for k, v in expect().items() if k != "memory_gate_gib"})


def test_the_input_is_not_changed():
    facts = healthy_facts()
    before = copy.deepcopy(facts)
    doctor_report(facts, expect())
    assert facts == before


def test_pings_pair_the_rails_by_name_at_the_full_mtu():
    peer = [dict(r, address=r["address"][:-2] + "12") for r in reversed(RAILS)]
    pings = doctor_pings(RAILS, {"spark-b": peer})
    assert pings == [
        {"interface": "enp1s0f1np1", "address": "192.168.102.12", "size": 8972, "peer": "spark-b", "rail": "rail0"},
        {"interface": "enP2p1s0f1np1", "address": "192.168.103.12", "size": 8972, "peer": "spark-b", "rail": "rail1"},
    ]
    with pytest.raises(AnsibleFilterError, match="spark-b has no rail rail1"):
        doctor_pings(RAILS, {"spark-b": peer[1:]})


def ring_expect(cables, host="spark-b"):
    from ansible_collections.sparkfold.cluster.plugins.filter.fabric import fabric_plan
    ports = [{"name": "port0", "interface": "enp1s0f0np0", "rdma_device": "rocep1s0f0"},
             {"name": "port1", "interface": "enp1s0f1np1", "rdma_device": "rocep1s0f1"}]
    hosts = ["spark-a", "spark-b", "spark-c", "spark-d"]
    plans = {h: fabric_plan(ports, i + 1, topology="ring", ring_cidr="10.10.0.0/16", min_hosts=4)
             for i, h in enumerate(hosts)}
    return expect(host=host, rank=1, lab=True, rails=plans[host], cables=cables,
                  peer_plans={h: plans[h] for h in hosts if h != host})


def on(host, interface):
    return [{"host": host, "interface": interface}]


def ring_probe(port0, port1, carrier0=True, carrier1=True):
    return {"neighbors": {"enp1s0f0np0": port0, "enp1s0f1np1": port1},
            "links": {"enp1s0f0np0": {"carrier": carrier0}, "enp1s0f1np1": {"carrier": carrier1}}}


def test_the_cable_rows_name_who_faces_each_port_and_the_command_that_checks_them():
    good = ring_probe(on("spark-c", "enp1s0f1np1"), on("spark-a", "enp1s0f0np0"))
    report = doctor_report(healthy_facts(), ring_expect(good))
    assert row(report, "port0 enp1s0f0np0 cable")["state"] == "ok"
    assert row(report, "port0 enp1s0f0np0 cable")["seen"] == "faces spark-c port1 (enp1s0f1np1)"
    # spark-b's two cables in each other's port (scripts/lab miscable swap)
    swapped = ring_probe(on("spark-a", "enp1s0f0np0"), on("spark-c", "enp1s0f1np1"))
    cable = row(doctor_report(healthy_facts(), ring_expect(swapped)), "port0 enp1s0f0np0 cable")
    assert cable["state"] == "FAIL" and cable["seen"] == "faces spark-a enp1s0f0np0"
    assert cable["want"] == "faces spark-c port1 (enp1s0f1np1)"
    assert cable["advice"].startswith(
        "the cable in spark-b port0 (enp1s0f0np0) must go to spark-c port1 (enp1s0f1np1); "
        "ansible-playbook -i inventory/example playbooks/fabric.yml checks every cable")
    pulled = ring_probe([], on("spark-a", "enp1s0f0np0"), carrier0=False)
    assert row(doctor_report(healthy_facts(), ring_expect(pulled)), "port0 enp1s0f0np0 cable")["seen"] == \
        "no link (no carrier): the cable is pulled, or the other end is down"
    loop = ring_probe(on("spark-b", "enp1s0f1np1"), on("spark-b", "enp1s0f0np0"))
    assert row(doctor_report(healthy_facts(), ring_expect(loop)), "port1 enp1s0f1np1 cable")["seen"] == \
        "faces its own port enp1s0f0np0 (a loop on one node)"
    failed = doctor_report(healthy_facts(), ring_expect({"failed": True, "msg": "a raw packet socket needs root"}))
    assert row(failed, "cables")["seen"] == "the cable probe failed: a raw packet socket needs root"


def test_a_failed_ping_points_at_the_cable_rows_and_a_command_that_checks_them():
    # A pair: a plain fabric.yml run checks each rail's link, MTU and address, and pings nobody when none of them
    # drifted (it passes silently over a ping that fails); fabric_verify=always pings every peer on every rail.
    facts = healthy_facts()
    facts["pings"][0].update(ok=False, detail="100% packet loss")
    advice = row(doctor_report(facts, expect()), "ping spark-b via enp1s0f1np1")["advice"]
    assert "repairs the plan" not in advice
    assert "see the cable row of enp1s0f1np1 (who it faces)" in advice
    assert advice.endswith("ansible-playbook -i inventory/example playbooks/fabric.yml -e fabric_verify=always pings "
                           "every peer on every rail and names each that fails (a run without it checks only each "
                           "rail's link, MTU and address)")
    # A ring: the plain run checks who faces each port and pings each neighbour on every run.
    facts = healthy_facts()
    facts["pings"] = [{"interface": "enp1s0f0np0", "address": "10.10.2.3", "size": 8972, "peer": "spark-c",
                       "rail": "port0", "ok": False, "detail": "100% packet loss"}]
    advice = row(doctor_report(facts, ring_expect(None)), "ping spark-c via enp1s0f0np0")["advice"]
    assert "fabric_verify" not in advice
    assert advice.endswith("playbooks/fabric.yml checks every cable on every run, before it changes anything, and "
                           "names the fewest cable moves (or the fabric_host_index renumbering)")


def test_a_pair_cable_row_points_at_the_run_that_pings_every_peer():
    peer = [dict(r, address=r["address"][:-2] + "12", address_cidr=r["address"][:-2] + "12/24",
                 cidr=r["address"][:-2] + "0/24") for r in RAILS]
    rails = [dict(r, cidr=r["address"][:-2] + "0/24") for r in RAILS]
    # spark-a's rail0 port hears nobody though it has a link (its cable in a port of the peer's other cage)
    probe = {"neighbors": {"enp1s0f1np1": [], "enP2p1s0f1np1": [{"host": "spark-b", "interface": "enP2p1s0f1np1"}]},
             "links": {"enp1s0f1np1": {"carrier": True}, "enP2p1s0f1np1": {"carrier": True}}}
    report = doctor_report(healthy_facts(), expect(rails=rails, cables=probe, peer_plans={"spark-b": peer}))
    assert row(report, "rail1 enP2p1s0f1np1 cable")["state"] == "ok"
    cable = row(report, "rail0 enp1s0f1np1 cable")
    assert cable["state"] == "FAIL" and cable["want"] == "faces spark-b rail0 (enp1s0f1np1)"
    assert cable["advice"] == (
        "the cable in spark-a rail0 (enp1s0f1np1) must go to spark-b rail0 (enp1s0f1np1); ansible-playbook -i "
        "inventory/example playbooks/fabric.yml -e fabric_verify=always pings every peer on every rail and names each "
        "that fails (a run without it checks only each rail's link, MTU and address)")


# --- issue 28: the verdict names only the sick nodes, lab-only apart; tables fit 100 columns ----------------------
def lab_facts():
    facts = healthy_facts()
    facts["roce"] = {"rdma_available": False, "devices": {}, "ipv4_gids": {}, "netdevs": facts["roce"]["netdevs"]}
    facts["gpu"], facts["packages"], facts["machine"] = None, {}, "x86_64"
    return facts


def stopped(facts):
    facts["units"][0].update(ActiveState="failed", SubState="failed", Result="exit-code", ExecMainStatus="2",
                             journal=["tensorfold-native: refusing to start: no rank cache file for rank 1"])
    facts["memory"]["available_bytes"] = 200 * GIB
    return facts


def test_a_long_table_fits_100_columns_and_keeps_every_word():
    facts = stopped(healthy_facts())
    long_path = "/srv/models/" + "a-very-long-directory-name/" * 5 + "model-00002-of-00039.safetensors"
    facts["stores"][0].update(ok=False, problems=[{"path": long_path, "reason": "size 1 differs from the manifest's"}])
    facts["units"][0]["unit"] = "sparkfold-engine-with-a-much-longer-unit-name@0.service"
    facts["units"][0]["journal"] = ["Dec 01 19:00:00 spark-a tensorfold-native[4242]: " + "word " * 40 + "END"]
    report = doctor_report(facts, expect())
    table = report["table"]
    assert max(len(line) for line in table) <= 92, [line for line in table if len(line) > 92]
    text = " ".join(table)
    assert long_path in "".join(text.split())  # a word longer than a line is broken, not cut
    assert "END" in text and text.count("word") == 40
    unit_advice = row(report, "sparkfold-engine-with-a-much-longer-unit-name@0.service")["advice"]
    assert " ".join(unit_advice.split()[-3:]) in " ".join(" ".join(table).split())
    # The state column stays a column: every row's state sits at the same place.
    header = table[1]
    at = header.index("state")
    states = {line[at:at + 5].strip() for line in table[2:] if line[at:at + 5].strip() in ("ok", "FAIL", "n/a", "lab")}
    assert {"ok", "FAIL"} <= states


def test_the_verdict_names_only_the_sick_nodes():
    head = doctor_report(healthy_facts(), expect())
    worker = stopped(healthy_facts())
    worker["space"][0]["free_bytes"] = GIB
    worker = doctor_report(worker, expect(host="spark-b", rank=1, hub=None))
    verdict = doctor_verdict([head, worker], ["spark-a", "spark-b"])
    assert not verdict["ok"] and verdict["sick"] == ["spark-b"]
    assert verdict["lines"][0] == "SICK: spark-b (2 problems); healthy: spark-a"
    assert all(line.startswith("spark-b: ") for line in verdict["problems"])
    assert verdict["text"] == "\n".join(verdict["lines"])


def test_a_node_without_results_is_sick():
    head = doctor_report(healthy_facts(), expect())
    verdict = doctor_verdict([head], ["spark-a", "spark-b"])
    assert verdict["sick"] == ["spark-b"]
    assert "spark-b: no doctor results (unreachable, or failed before the checks)" in verdict["problems"]


def test_the_lab_only_lines_are_apart_from_the_problems():
    head = doctor_report(stopped(lab_facts()), expect(lab=True, hub={"ok": False, "kind": "network", "msg": "x"}))
    worker = doctor_report(lab_facts(), expect(lab=True, host="spark-b", rank=1, hub=None))
    assert [r["state"] for r in head["rows"] if r["lab_only"]] == ["n/a", "n/a", "n/a"]
    assert next(line for line in head["table"] if "driver and NCCL" in line).split()[3] == "lab"
    verdict = doctor_verdict([head, worker], ["spark-a", "spark-b"])
    lines = verdict["lines"]
    assert lines[0] == "SICK: spark-a (1 problem); healthy: spark-b"
    lab_at = lines.index("Lab only, not problems (not available in the lab):")
    assert lines.index("Not checked (not problems):") < lab_at
    assert not [line for line in lines[:lab_at] if "not available in the lab" in line]
    assert "  driver and NCCL (spark-a, spark-b)" in lines[lab_at:]
    assert "  rail0 enp1s0f1np1 RoCE (spark-a, spark-b)" in lines[lab_at:]
    assert any("Hub pin: offline" in line for line in lines[:lab_at])


def test_a_healthy_pair():
    pair = [doctor_report(healthy_facts(), expect()),
            doctor_report(healthy_facts(), expect(host="spark-b", rank=1, hub=None))]
    verdict = doctor_verdict(pair, ["spark-a", "spark-b"])
    assert verdict["ok"] and verdict["sick"] == []
    assert verdict["lines"] == ["HEALTHY: every check passed on spark-a, spark-b"]
