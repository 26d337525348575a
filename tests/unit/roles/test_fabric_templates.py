# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric role's templates, rendered by Ansible's templating engine.

40-cx7.yaml.j2: no global renderer (on DGX OS it would move every interface of the node off
NetworkManager), a per-rail renderer only when asked, every rail optional (boot does not wait for a
peer that is off). live_drift.j2: each way a rail's live state (ip -json -details addr show)
differs from the plan, with the command that fixes it.
"""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.sparkfold.cluster.plugins.filter.fabric import fabric_plan, fabric_ring_cabling

TEMPLATES = pathlib.Path(__file__).resolve().parents[3] / "roles" / "fabric" / "templates"
RAILS = [
    {"name": "rail0", "interface": "enp1s0f1np1", "cidr": "192.168.100.0/24", "rdma_device": "rocep1s0f1"},
    {"name": "rail1", "interface": "enP2p1s0f1np1", "cidr": "192.168.101.0/24", "rdma_device": "roceP2p1s0f1"},
]
PLAN = fabric_plan(RAILS, 2)


def render(name, **variables):
    variables.setdefault("inventory_hostname", "spark-b")
    variables.setdefault("ansible_managed", "Ansible managed")
    variables.setdefault("fabric_plan_result", PLAN)
    variables.setdefault("fabric_unaddressed_result", [])
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template((TEMPLATES / name).read_text()))


@pytest.mark.parametrize("renderer", ["", "networkd", "NetworkManager"])
def test_netplan_sets_no_global_renderer_and_optional_rails(renderer):
    netplan = yaml.safe_load(render("40-cx7.yaml.j2", fabric_netplan_renderer=renderer))["network"]
    assert "renderer" not in netplan
    assert list(netplan["ethernets"]) == ["enp1s0f1np1", "enP2p1s0f1np1"]
    for rail, config in zip(PLAN, netplan["ethernets"].values()):
        assert config["optional"] is True
        assert config.get("renderer", "") == renderer
        assert config["mtu"] == 9000
        assert config["addresses"] == [rail["address_cidr"]]
        assert config["dhcp4"] is False and config["link-local"] == []


def link(interface, mtu=9000, addresses=(), up=True, carrier=True):
    """One interface as `ip -json -details addr show dev IF` prints it (the fields the role reads)."""
    return json.dumps([{
        "ifname": interface, "flags": ["BROADCAST", "MULTICAST"]
        + ((["UP", "LOWER_UP"] if carrier else ["NO-CARRIER", "UP"]) if up else []),
        "mtu": mtu, "min_mtu": 68, "max_mtu": 9978, "operstate": "UP" if up else "DOWN",
        "addr_info": [{"family": "inet", "local": a.split("/")[0], "prefixlen": int(a.split("/")[1]),
                       "scope": "global", "label": interface} for a in addresses]
        + [{"family": "inet6", "local": "fe80::1", "prefixlen": 64, "scope": "link"}],
    }])


def drift(*stdouts):
    """live_drift.j2 over the rails present (None: the interface is missing, left to the input checks)."""
    links = [{"rail": rail, "link": json.loads(out)[0]} for rail, out in zip(PLAN, stdouts) if out is not None]
    text = render("live_drift.j2", _fabric_links=links)
    return yaml.safe_load(text or "") or []


def test_no_drift_when_the_rails_match_the_plan():
    assert drift(link("enp1s0f1np1", addresses=["192.168.100.2/24"]),
                 link("enP2p1s0f1np1", addresses=["192.168.101.2/24"])) == []


def test_mtu_and_address_changed_by_hand_are_named_with_their_fix():
    found = drift(link("enp1s0f1np1", mtu=1500, addresses=["192.168.100.2/24"]),
                  link("enP2p1s0f1np1", addresses=[]))
    assert found == [
        {"interface": "enp1s0f1np1",
         "message": "spark-b: interface enp1s0f1np1 (rail0) has MTU 1500, the plan 9000",
         "fix": "ip link set dev enp1s0f1np1 mtu 9000"},
        {"interface": "enP2p1s0f1np1",
         "message": "spark-b: interface enP2p1s0f1np1 (rail1) lacks address 192.168.101.2/24 (has: none)",
         "fix": "ip addr add 192.168.101.2/24 dev enP2p1s0f1np1"},
    ]


def test_a_down_link_a_wrong_prefix_and_an_extra_address_are_drift():
    found = drift(link("enp1s0f1np1", up=False, addresses=["192.168.100.2/24"]),
                  link("enP2p1s0f1np1", addresses=["192.168.101.2/25", "10.9.9.9/8"]))
    assert [d["fix"] for d in found] == [
        "ip link set dev enp1s0f1np1 up",
        "ip addr add 192.168.101.2/24 dev enP2p1s0f1np1",
        "ip addr del 192.168.101.2/25 dev enP2p1s0f1np1",
        "ip addr del 10.9.9.9/8 dev enP2p1s0f1np1",
    ]
    assert found[1]["message"].endswith("lacks address 192.168.101.2/24 (has: 192.168.101.2/25, 10.9.9.9/8)")


def test_a_port_without_a_link_names_its_cable_not_netplan():
    """A pulled cable: the port is up, NO-CARRIER, and lost its address; netplan apply cannot repair that."""
    found = drift(link("enp1s0f1np1", carrier=False), link("enP2p1s0f1np1", addresses=["192.168.101.2/24"]))
    assert found[0] == {
        "interface": "enp1s0f1np1", "no_link": True,
        "message": "spark-b: interface enp1s0f1np1 (rail0) has no link (no carrier): the cable to the peers on rail0 "
                   "is pulled, or the other end is down",
        "fix": "plug the cable of enp1s0f1np1 (to the peers on rail0) in at both ends, and check that node is up"}
    plan = fabric_plan(RING_PORTS, 2, topology="ring", ring_cidr="10.10.0.0/16", min_hosts=4)
    links = [{"rail": plan[0], "link": json.loads(link("enp1s0f0np0", carrier=False))[0]}]
    ring = yaml.safe_load(render("live_drift.j2", _fabric_links=links, fabric_plan_result=plan,
                                 fabric_ring_order=["spark-a", "spark-b", "spark-c", "spark-d"]))
    assert ring[0]["message"] == ("spark-b: interface enp1s0f0np0 (port0) has no link (no carrier): the cable to "
                                  "spark-c port1 is pulled, or the other end is down")


HANDLERS = TEMPLATES.parent / "handlers" / "main.yml"


def fake_ip(argv, entry):
    """What iproute2 prints for `ip -json [-4] addr show dev IF`: with -4 only interfaces holding an IPv4 address
    (and only those addresses), [] for a port without one."""
    if "-4" in argv:
        inet = [a for a in entry["addr_info"] if a["family"] == "inet"]
        return json.dumps([dict(entry, addr_info=inet)] if inet else [])
    return json.dumps([entry])


@pytest.mark.parametrize("addresses, carrier, ready", [(["192.168.100.2/24"], True, True), ([], False, False)])
def test_the_address_wait_reads_a_port_without_an_address(addresses, carrier, ready):
    """After netplan apply a port whose cable is pulled has no IPv4 address: the wait goes on (then gives up and
    the role names the cable), it does not crash with "No first item, sequence was empty"."""
    handler = next(h for h in yaml.safe_load(HANDLERS.read_text()) if h["name"] == "Wait For Fabric Addresses")
    rail = PLAN[0]
    templar = Templar(loader=DataLoader(), variables={"item": rail})
    argv = templar.template(trust_as_template(handler["ansible.builtin.command"])).split()
    entry = json.loads(link(rail["interface"], addresses=addresses, carrier=carrier))[0]
    for attempts, done in ((1, ready), (30, True)):
        variables = {"item": rail, "__fabric_addr": {"stdout": fake_ip(argv, entry), "attempts": attempts}}
        until = Templar(loader=DataLoader(), variables=variables).template(
            trust_as_template("{{ " + handler["until"] + " }}"))
        assert until is done or str(until) == str(done)


def test_a_missing_interface_is_left_to_the_input_checks():
    assert drift(None, link("enP2p1s0f1np1", addresses=["192.168.101.2/24"])) == []


RING_PORTS = [{"name": "port0", "interface": "enp1s0f0np0", "rdma_device": "rocep1s0f0"},
              {"name": "port1", "interface": "enp1s0f1np1", "rdma_device": "rocep1s0f1"}]
VIEWS = [{"name": "unaddressed", "interface": "enP2p1s0f0np0", "mtu": 9000},
         {"name": "unaddressed", "interface": "enP2p1s0f1np1", "mtu": 9000}]


def test_ring_netplan_addresses_two_ports_and_leaves_the_second_views_unaddressed_at_mtu_9000():
    plan = fabric_plan(RING_PORTS, 3, topology="ring", ring_cidr="10.10.0.0/16", min_hosts=4)
    netplan = yaml.safe_load(render("40-cx7.yaml.j2", fabric_netplan_renderer="", fabric_plan_result=plan,
                                    fabric_unaddressed_result=VIEWS))["network"]["ethernets"]
    assert list(netplan) == ["enp1s0f0np0", "enp1s0f1np1", "enP2p1s0f0np0", "enP2p1s0f1np1"]
    assert netplan["enp1s0f0np0"]["addresses"] == ["10.10.3.3/24"]
    assert netplan["enp1s0f1np1"]["addresses"] == ["10.10.2.3/24"]
    for view in ("enP2p1s0f0np0", "enP2p1s0f1np1"):
        assert "addresses" not in netplan[view] and netplan[view]["mtu"] == 9000
        assert netplan[view]["dhcp4"] is False and netplan[view]["link-local"] == []


def test_an_address_on_a_second_view_is_drift_and_its_mtu_too():
    links = [{"rail": VIEWS[0], "link": json.loads(link("enP2p1s0f0np0", mtu=1500, addresses=["10.10.9.3/24"]))[0]}]
    found = yaml.safe_load(render("live_drift.j2", _fabric_links=links) or "") or []
    assert [item["fix"] for item in found] == ["ip link set dev enP2p1s0f0np0 mtu 9000",
                                               "ip addr del 10.10.9.3/24 dev enP2p1s0f0np0"]


# --- expressions of the role's tasks, on what fabric_facts read ---------------------------------------------

TASKS = TEMPLATES.parent / "tasks"


def task(file, name):
    """The task called NAME in roles/fabric/tasks/FILE."""
    return next(t for t in yaml.safe_load((TASKS / file).read_text()) if t["name"] == name)


def role_var(name):
    """The expression of NAME in roles/fabric/vars/main.yml."""
    return yaml.safe_load((TASKS.parent / "vars" / "main.yml").read_text())[name]


def evaluate(expression, **variables):
    variables.setdefault("inventory_hostname", "spark-b")
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template(expression))


def ip_links(*entries):
    return [json.loads(e)[0] for e in entries]


def test_live_links_are_the_plan_interfaces_present_in_plan_order_whatever_ip_order():
    compare = task("live.yml", "Compare the live rails with the plan")
    live = ip_links(link("lo"), link("enP2p1s0f1np1", addresses=["192.168.101.2/24"]),
                    link("enp1s0f1np1", mtu=1500, addresses=["192.168.100.2/24"]))
    pairs = evaluate(compare["vars"]["_fabric_links"], fabric_plan_result=PLAN, fabric_unaddressed_result=[],
                     __fabric_read={"ip_links": live},
                     ansible_facts={"sparkfold_roce": {"netdevs": {"lo": {}, "enp1s0f1np1": {}, "enP2p1s0f1np1": {}}}})
    assert [(p["rail"]["name"], p["link"]["ifname"]) for p in pairs] == [
        ("rail0", "enp1s0f1np1"), ("rail1", "enP2p1s0f1np1")]
    # an interface sysfs does not list is left to the input checks (as the loop's `when` did)
    pairs = evaluate(compare["vars"]["_fabric_links"], fabric_plan_result=PLAN, fabric_unaddressed_result=VIEWS,
                     __fabric_read={"ip_links": live},
                     ansible_facts={"sparkfold_roce": {"netdevs": {"enp1s0f1np1": {}}}})
    assert [p["link"]["ifname"] for p in pairs] == ["enp1s0f1np1"]


def test_an_interface_that_cannot_carry_the_mtu_is_an_input_problem():
    collect = task("plan.yml",
                   "Collect missing interfaces, those that cannot carry the fabric MTU and rails without a link")
    small = json.loads(link("enp1s0f1np1", addresses=["192.168.100.2/24"]))[0] | {"max_mtu": 1500}
    no_limit = {k: v for k, v in json.loads(link("enP2p1s0f1np1"))[0].items() if k != "max_mtu"}
    variables = {"fabric_live_links": [small, no_limit], "fabric_mtu": 9000, "fabric_plan_result": PLAN,
                 "fabric_unaddressed_result": [], "fabric_live_drift": [], "fabric_topology": "pair",
                 "fabric_lab": True,
                 "ansible_facts": {"sparkfold_roce": {"netdevs": {"enp1s0f1np1": {}, "enP2p1s0f1np1": {}}}},
                 "__fabric_read": {"files": {"/etc/ssh/ssh_host_ed25519_key.pub": {"exists": True, "type": "file"}}}}
    variables["_fabric_mtu_problems"] = evaluate(collect["vars"]["_fabric_mtu_problems"], **variables)
    variables["_fabric_gid_problems"] = []
    assert evaluate(collect["ansible.builtin.set_fact"]["fabric_input_problems"], **variables) == [
        "spark-b: interface enp1s0f1np1 carries at most MTU 1500, fabric_mtu is 9000"]
    variables["__fabric_read"]["files"]["/etc/ssh/ssh_host_ed25519_key.pub"] = {"exists": False, "type": "absent"}
    variables["fabric_live_links"] = [no_limit]
    variables["_fabric_mtu_problems"] = evaluate(collect["vars"]["_fabric_mtu_problems"], **variables)
    assert evaluate(collect["ansible.builtin.set_fact"]["fabric_input_problems"], **variables) == [
        "spark-b: /etc/ssh/ssh_host_ed25519_key.pub does not exist (the ed25519 host key of sshd, which the peers"
        " pin for the fabric addresses; ssh-keygen -A makes it)"]
    # a rail without a link stops the play before netplan apply (a pair); a ring's cable check names it instead
    variables["__fabric_read"]["files"]["/etc/ssh/ssh_host_ed25519_key.pub"] = {"exists": True, "type": "file"}
    variables["fabric_live_drift"] = drift(link("enp1s0f1np1", carrier=False), link("enP2p1s0f1np1"))
    assert evaluate(collect["ansible.builtin.set_fact"]["fabric_input_problems"], **variables) == [
        "spark-b: interface enp1s0f1np1 (rail0) has no link (no carrier): the cable to the peers on rail0 is pulled,"
        " or the other end is down"]
    variables["fabric_topology"] = "ring"
    assert evaluate(collect["ansible.builtin.set_fact"]["fabric_input_problems"], **variables) == []


def test_a_ring_bootstraps_on_the_first_interface_in_ip_order_holding_the_management_ipv4():
    expression = task("env.yml", "Name the bootstrap interface")["ansible.builtin.set_fact"][
        "fabric_bootstrap_interface_result"]

    def bootstrap(**variables):
        return (evaluate(expression, **variables) or "").strip()

    live = [{"ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1"}]},
            {"ifname": "enP7s7", "addr_info": [{"family": "inet6", "local": "fd00::11"},
                                               {"family": "inet", "local": "10.231.0.11"}]},
            {"ifname": "wlP9s9", "addr_info": [{"family": "inet", "local": "10.231.0.11"}]},
            {"ifname": "enp1s0f0np0"}]
    ring = {"fabric_topology": "ring", "__fabric_read": {"ip_links": live}}
    assert bootstrap(fabric_bootstrap_interface="", ansible_host="10.231.0.11", **ring) == "enP7s7"
    # only IPv4 counts (as `ip -4` read it): an IPv6 management address finds none, and the ring is refused
    assert bootstrap(fabric_bootstrap_interface="", ansible_host="fd00::11", **ring) == ""
    assert bootstrap(fabric_bootstrap_interface="eth9", ansible_host="10.231.0.11", **ring) == "eth9"
    assert bootstrap(fabric_bootstrap_interface="", ansible_host="10.231.0.11", fabric_topology="pair",
                     __fabric_read={"ip_links": live}) == ""


# --- SSH: each write runs only when the read shows it would change something ----------------------------------

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMyMT4vBekf9ZqDK49KAf2230vYUnBg9Es/9MDUgxAFx"
HOSTKEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN4ovRQK5oSsIQ5u9Jis6fRVOTj8iDJLgVP+CuFcH2yP"


def entry(content=None, mode="0600", owner="root", kind="file"):
    found = {"exists": True, "type": kind, "mode": mode, "owner": owner, "group": "root"}
    return found | ({"content": content} if content is not None else {})


def ssh_read(**changes):
    ssh = {"home": "/root", "dir": entry(mode="0700", kind="directory"), "key": entry(), "key_public": KEY,
           "key_pub": entry(KEY + " sparkfold-fabric@spark-b\n"), "known_hosts": entry("", mode="0644"),
           "authorized_keys": entry("")}
    ssh.update(changes)
    return {"ssh": ssh, "files": {"/etc/ssh/ssh_host_ed25519_key.pub": entry(HOSTKEY + " root@spark-b\n", "0644")}}


def key_whole(read):
    names = task("ssh.yml", "Name the fabric SSH key and this node's public keys for its peers")
    variables = {"__fabric_read": read, "fabric_ssh_user": "root"}
    for name, expression in names["vars"].items():
        variables[name] = evaluate(expression, **variables)
    facts = names["ansible.builtin.set_fact"]
    assert evaluate(facts["fabric_ssh_hostkey"], **variables) == HOSTKEY
    return evaluate(facts["fabric_ssh_key_whole"], **variables)


def test_a_whole_key_pair_is_left_alone():
    assert key_whole(ssh_read()) is True


@pytest.mark.parametrize("changes", [
    {"key": {"exists": False, "type": "absent"}, "key_public": None},
    {"key_pub": {"exists": False, "type": "absent"}},
    {"key_public": None},                                                   # unreadable or protected
    {"key_public": "ssh-rsa AAAAB3NzaC1yc2E"},                              # not ed25519
    {"key_pub": entry("ssh-ed25519 AAAAother sparkfold-fabric@spark-b\n")},  # not the private key's half
    {"key_pub": entry(KEY + " other@x\n")},                                 # another comment
    {"key_pub": entry(KEY + "\n")},                                         # no comment
    {"key": entry(mode="0644")},
    {"key_pub": entry(KEY + " sparkfold-fabric@spark-b\n", mode="0644")},  # openssh_keypair gives both 0600
    {"key": entry(owner="spark")},
])
def test_a_key_pair_openssh_keypair_would_change_is_handed_to_it(changes):
    assert key_whole(ssh_read(**changes)) is False


def peer_lines(read):
    """Whether the authorized_key and known_hosts tasks run for spark-a (and which addresses), read as `read`
    on spark-b."""
    peer = {"inventory_hostname": "spark-a", "fabric_ssh_pubkey": KEY, "fabric_ssh_hostkey": HOSTKEY,
            "fabric_plan_result": fabric_plan(RAILS, 1)}
    variables = {"__fabric_read": read, "fabric_ssh_user": "root", "hostvars": {"spark-a": peer},
                 "fabric_peers": ["spark-a"]}
    runs = evaluate(role_var("fabric_ssh_authorize"), **variables) == ["spark-a"]
    pinned = [p["address"] for p in evaluate(role_var("fabric_ssh_pins"), **variables)]
    return runs, [rail["address"] in pinned for rail in peer["fabric_plan_result"]]


def test_peer_keys_already_in_place_are_left_alone():
    read = ssh_read(authorized_keys=entry(f'from="192.168.100.1,192.168.101.1" {KEY} sparkfold-fabric@spark-a\n'),
                    known_hosts=entry(f"192.168.100.1 {HOSTKEY}\n192.168.101.1 {HOSTKEY}\n", mode="0644"))
    assert peer_lines(read) == (False, [False, False])


@pytest.mark.parametrize("authorized, runs", [
    (f'from="192.168.100.1" {KEY} sparkfold-fabric@spark-a\n', True),              # from= not the plan's
    (f'from="192.168.100.1,192.168.101.1" {KEY} other@x\n', True),                 # another comment
    (f'{KEY} sparkfold-fabric@spark-a\n', True),                                    # no from=
    ("", True),
])
def test_an_authorized_key_that_differs_is_handed_to_authorized_key(authorized, runs):
    read = ssh_read(authorized_keys=entry(authorized),
                    known_hosts=entry(f"192.168.100.1 {HOSTKEY}\n", mode="0644"))
    assert peer_lines(read) == (runs, [False, True])


def test_authorized_keys_with_the_wrong_mode_or_missing_is_handed_to_authorized_key():
    line = f'from="192.168.100.1,192.168.101.1" {KEY} sparkfold-fabric@spark-a\n'
    assert peer_lines(ssh_read(authorized_keys=entry(line, mode="0644")))[0] is True
    assert peer_lines(ssh_read(authorized_keys={"exists": False, "type": "absent"}))[0] is True
    assert peer_lines(ssh_read(known_hosts={"exists": False, "type": "absent"}))[1] == [True, True]


def test_a_peer_without_a_key_yet_is_not_authorised_and_pins_carry_the_peer_host_key():
    # check mode on a fresh peer: openssh_keypair made no key, so there is nothing to authorise yet
    peer = {"fabric_ssh_pubkey": "", "fabric_ssh_hostkey": HOSTKEY, "fabric_plan_result": fabric_plan(RAILS, 1)}
    variables = {"__fabric_read": ssh_read(), "fabric_ssh_user": "root", "hostvars": {"spark-a": peer},
                 "fabric_peers": ["spark-a"]}
    assert evaluate(role_var("fabric_ssh_authorize"), **variables) == []
    assert evaluate(role_var("fabric_ssh_pins"), **variables) == [
        {"peer": "spark-a", "address": "192.168.100.1", "hostkey": HOSTKEY},
        {"peer": "spark-a", "address": "192.168.101.1", "hostkey": HOSTKEY}]


def test_on_real_sparks_every_run_a_rail_holding_its_address_holds_its_roce_gid():
    collect = task("plan.yml",
                   "Collect missing interfaces, those that cannot carry the fabric MTU and rails without a link")
    gids = {"192.168.100.2": {"index": 3, "device": "rocep1s0f1"},
            "192.168.101.2": {"index": 3, "device": "rocep1s0f1"}}
    variables = {"fabric_plan_result": PLAN, "fabric_live_drift": [],
                 "ansible_facts": {"sparkfold_roce": {"netdevs": {"enp1s0f1np1": {}, "enP2p1s0f1np1": {}},
                                                      "ipv4_gids": gids}}}
    # rail1's address sits on the other twin's RDMA device (or mlx5_ib did not make the GID): refused
    assert evaluate(collect["vars"]["_fabric_gid_problems"], **variables) == [
        "spark-b: no RoCE v2 GID carries 192.168.101.2 on roceP2p1s0f1 (enP2p1s0f1np1): NCCL and the engine cannot"
        " use this rail; is mlx5_ib loaded (rdma link), and is rdma_device right in fabric_rails?"]
    gids["192.168.101.2"]["device"] = "roceP2p1s0f1"
    assert evaluate(collect["vars"]["_fabric_gid_problems"], **variables) == []
    # a rail still without its address (a first install) is netplan's to fix first
    del gids["192.168.101.2"]
    variables["fabric_live_drift"] = [{"interface": "enP2p1s0f1np1", "message": "lacks address"}]
    assert evaluate(collect["vars"]["_fabric_gid_problems"], **variables) == []


# --- the ring's cable check (cables.yml), on what fabric_neighbors returned ----------------------------------

RING_HOSTS = ["spark-a", "spark-b", "spark-c", "spark-d"]


def test_the_cable_check_refuses_a_pulled_cable_one_line_each_naming_it():
    stop = task("cables.yml", "Stop on a mis-cabled ring, saying which port faces which and the fewest cable moves")
    plans = {h: fabric_plan(RING_PORTS, i + 1, topology="ring", ring_cidr="10.10.0.0/16", min_hosts=4)
             for i, h in enumerate(RING_HOSTS)}
    seen = {}
    for i, host in enumerate(RING_HOSTS):
        nxt, prev = RING_HOSTS[(i + 1) % 4], RING_HOSTS[i - 1]
        seen[host] = {"neighbors": {"enp1s0f0np0": [{"host": nxt, "interface": "enp1s0f1np1"}],
                                    "enp1s0f1np1": [{"host": prev, "interface": "enp1s0f0np0"}]},
                      "links": {"enp1s0f0np0": {"carrier": True}, "enp1s0f1np1": {"carrier": True}}}
    # the cable from spark-c port0 to spark-d port1 is pulled: no link at either end, nothing heard
    seen["spark-c"]["neighbors"]["enp1s0f0np0"] = []
    seen["spark-c"]["links"]["enp1s0f0np0"]["carrier"] = False
    seen["spark-d"]["neighbors"]["enp1s0f1np1"] = []
    seen["spark-d"]["links"]["enp1s0f1np1"]["carrier"] = False
    variables = {"fabric_ring_order": RING_HOSTS,
                 "hostvars": {h: {"fabric_plan_result": plans[h], "__fabric_ring_seen": seen[h]} for h in RING_HOSTS}}
    for name in ("_ring", "_seen", "_carrier"):
        variables[name] = evaluate(stop["vars"][name], **variables)
    assert variables["_carrier"]["spark-c"] == {"enp1s0f0np0": False, "enp1s0f1np1": True}
    # the collection's filter, called as the task calls it (this Templar loads no collection filters)
    assert stop["vars"]["_lines"] == "{{ _seen | sparkfold.cluster.fabric_ring_cabling(_ring, _carrier) }}"
    variables["_lines"] = fabric_ring_cabling(variables["_seen"], variables["_ring"], variables["_carrier"])
    variables["_newline"] = "\n"
    message = evaluate(stop["ansible.builtin.fail"]["msg"], **variables).splitlines()
    assert message[0] == "The ring is mis-cabled:"
    assert message[1] == ("spark-c port0 (enp1s0f0np0) has no link (no carrier): its cable to spark-d port1 "
                          "(enp1s0f1np1) is pulled, or the other end is down")
    assert ("  plug: a cable between spark-c port0 (enp1s0f0np0) and spark-d port1 (enp1s0f1np1)  (no link at either "
            "end: the cable is pulled)") in message
    # a well cabled ring: no line, the task is skipped
    seen["spark-c"]["neighbors"]["enp1s0f0np0"] = [{"host": "spark-d", "interface": "enp1s0f1np1"}]
    seen["spark-d"]["neighbors"]["enp1s0f1np1"] = [{"host": "spark-c", "interface": "enp1s0f0np0"}]
    variables["_seen"] = evaluate(stop["vars"]["_seen"], **variables)
    assert fabric_ring_cabling(variables["_seen"], variables["_ring"], variables["_carrier"]) == []


def test_the_cable_check_pings_only_on_a_converged_ring_and_judges_each_ping():
    probe = task("cables.yml", "Learn which node faces each ring port (and ping each neighbour when the rails match "
                               "the plan)")
    hostvars = {h: {"fabric_live_drift": []} for h in RING_HOSTS}
    variables = {"ansible_play_hosts": RING_HOSTS, "hostvars": hostvars}
    assert evaluate(probe["vars"]["_fabric_converged"], **variables) is True
    hostvars["spark-c"]["fabric_live_drift"] = [{"interface": "enp1s0f0np0", "message": "lacks address"}]
    assert evaluate(probe["vars"]["_fabric_converged"], **variables) is False
    links = [{"peer": "spark-c", "interface": "enp1s0f0np0", "address": "10.10.2.3", "mtu": 9000}]
    assert evaluate(probe["vars"]["_fabric_pings"], fabric_links_result=links) == [
        {"interface": "enp1s0f0np0", "address": "10.10.2.3", "size": 8972, "peer": "spark-c"}]
    judge = task("cables.yml", "Judge the jumbo pings to the neighbours")
    pings = [{"interface": "enp1s0f0np0", "address": "10.10.2.3", "size": 8972, "peer": "spark-c", "ok": False,
              "detail": "1 packets transmitted, 0 received, 100% packet loss"},
             {"interface": "enp1s0f1np1", "address": "10.10.1.1", "size": 8972, "peer": "spark-a", "ok": True,
              "detail": ""}]
    assert evaluate(judge["ansible.builtin.set_fact"]["fabric_reach_problems"],
                    __fabric_ring_seen={"pings": pings}) == [
        "spark-b: jumbo ping (MTU 9000, don't fragment) to spark-c via enp1s0f0np0 failed: 1 packets transmitted, "
        "0 received, 100% packet loss"]


def verify_problems(links, counters, lab=False):
    """verify_problems.j2 over roce_facts' data: the rails' sysfs state as planned, and the given links and counters
    (roce_facts' links and port_counters results)."""
    netdevs = {rail["interface"]: {"mtu": 9000, "speed": 200000} for rail in PLAN}
    devices = {rail["rdma_device"]: {"ports": {"1": {"state": "ACTIVE"}}} for rail in PLAN}
    text = render("verify_problems.j2", ansible_facts={"sparkfold_roce": {"netdevs": netdevs, "devices": devices}},
                  fabric_lab=lab, fabric_expected_speed_mbps=200000, fabric_max_port_errors=0,
                  __fabric_live={"links": links, "port_counters": counters})
    return yaml.safe_load(text or "") or []


def checked_link(rail, **result):
    """One entry of roce_facts' links result, a healthy one unless ``result`` says otherwise."""
    return {"interface": rail["interface"], "address": rail["address"].replace(".2", ".1", 1), "mtu": 9000,
            "peer": "spark-a", "name": rail["name"], "peer_interface": rail["interface"], "ping_ok": True,
            "ping_detail": "", "route_dev": rail["interface"], "route_error": None, **result}


def test_verify_problems_name_a_failed_ping_a_wrong_route_and_counters_above_the_limit():
    assert verify_problems([checked_link(rail) for rail in PLAN],
                           {"rocep1s0f1": {"symbol_error": 0, "link_downed": 0}}) == []
    found = verify_problems(
        [checked_link(PLAN[0], ping_ok=False, ping_detail="ping: local error: message too long, mtu=1500"),
         checked_link(PLAN[1], route_dev=None, route_error="ip route get: Network is unreachable")],
        {"rocep1s0f1": {"symbol_error": 7, "link_downed": 0, "port_rcv_errors": None}})
    assert found == [
        "spark-b: jumbo ping (MTU 9000, don't fragment) to spark-a via enp1s0f1np1 failed: ping: local error:"
        " message too long, mtu=1500",
        "spark-b: the route to spark-a on rail1 leaves by no interface, expected enP2p1s0f1np1",
        "spark-b: symbol_error of rocep1s0f1 is 7 (above 0)",
    ]
    assert verify_problems([checked_link(PLAN[0], route_dev="enP7s7")], {}) == [
        "spark-b: the route to spark-a on rail0 leaves by enP7s7, expected enp1s0f1np1"]
