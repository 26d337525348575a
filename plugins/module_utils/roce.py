# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read RoCE / RDMA state from a sysfs tree.

Pure functions: every reader takes the sysfs root (the directory that contains
``class/``, normally ``/sys``) so unit tests can point them at a fixture tree.

Layout read (kernel ABI ``sysfs-class-infiniband`` and ``sysfs-class-net``)::

    <root>/class/infiniband/<dev>/{fw_ver,hca_type,node_guid}
    <root>/class/infiniband/<dev>/device/net/<netdev>/
    <root>/class/infiniband/<dev>/ports/<n>/{state,phys_state,rate,link_layer,active_mtu}
    <root>/class/infiniband/<dev>/ports/<n>/gids/<i>
    <root>/class/infiniband/<dev>/ports/<n>/gid_attrs/types/<i>
    <root>/class/infiniband/<dev>/ports/<n>/gid_attrs/ndevs/<i>
    <root>/class/net/<netdev>/{mtu,speed,operstate,address}

Every netdev under ``class/net`` is reported, RDMA or not, so a host without
RDMA devices (no ``class/infiniband``) still shows its interfaces.  A netdev
is tied to an RDMA device (``rdma_device``, ``rdma_port``) when a port of that
device names it (the port's netdev or a ``gid_attrs/ndevs`` entry) or, without
a port, when it sits under the device's ``device/net``.

A GID slot is empty when its GID is all zeros or when its ``gid_attrs/types``
file is missing or unreadable (the kernel answers EINVAL for unused slots).
Empty slots are left out of the result.
"""

from __future__ import annotations

import ipaddress
import os
import re

ROCE_V2 = "RoCE v2"
ROCE_V1 = "IB/RoCE v1"

_STATE_RE = re.compile(r"^\s*(\d+)\s*:\s*(.*?)\s*$")
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")
_LEADING_INT_RE = re.compile(r"^\s*(-?\d+)")


class SysfsError(Exception):
    """A sysfs file holds something this module cannot interpret.

    The message names the file and what was expected.
    """


def read_attr(path):
    """Return the stripped text of a sysfs attribute, or None.

    None means missing or unreadable: absent file, permission denied, or the
    EINVAL the kernel returns for attributes of unused GID slots and for the
    speed of a link that is down.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return data.decode("utf-8", "replace").strip()


def list_dir(path):
    """Return the entries of a directory, sorted (numerically when all are numbers).

    A missing or unreadable directory yields an empty list.
    """
    try:
        names = os.listdir(path)
    except OSError:
        return []
    if names and all(name.isdigit() for name in names):
        return sorted(names, key=int)
    return sorted(names)


def parse_state(text):
    """Split a port state attribute such as ``4: ACTIVE`` into ``(4, "ACTIVE")``.

    Text without the numeric prefix is returned as ``(None, text)``; None
    (unreadable) as ``(None, None)``.
    """
    if text is None or text == "":
        return None, None
    match = _STATE_RE.match(text)
    if match is None:
        return None, text
    return int(match.group(1)), match.group(2)


def parse_rate(text):
    """Return the Gb/s figure of a rate attribute (``200 Gb/sec (4X HDR)`` -> 200.0) or None."""
    if text is None:
        return None
    match = _RATE_RE.match(text)
    if match is None:
        return None
    return float(match.group(1))


def parse_int(text):
    """Return the leading integer of an attribute (``4096 (5)`` -> 4096) or None."""
    if text is None:
        return None
    match = _LEADING_INT_RE.match(text)
    if match is None:
        return None
    return int(match.group(1))


def parse_gid(text, path="GID"):
    """Normalise a sysfs GID to ``(compressed_ipv6, ipv4_or_None)``, or None when empty.

    sysfs writes GIDs as eight groups of four hex digits.  An IPv4-mapped GID
    (``::ffff:a.b.c.d``) is always rendered in dotted form so the text is the
    same on every Python version (3.13 changed ``str()`` of mapped addresses).

    Raises SysfsError when the text is not an IPv6 address.
    """
    if text is None or text == "":
        return None
    try:
        addr = ipaddress.IPv6Address(text)
    except ValueError as exc:
        raise SysfsError(
            f"{path}: {text!r} is not a GID (expected 8 groups of 4 hex digits such as "
            f"fe80:0000:0000:0000:0000:0000:0000:0001): {exc}"
        ) from None
    if int(addr) == 0:
        return None
    mapped = addr.ipv4_mapped
    if mapped is not None:
        return f"::ffff:{mapped}", str(mapped)
    return addr.compressed, None


# The error counters the fabric role judges, under <root>/class/infiniband/<dev>/ports/<n>/counters/
# (torvalds/linux Documentation/ABI/stable/sysfs-class-infiniband @031616c434db05ce766f76c62865f55698e0924f).
ERROR_COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors")


def read_port_counters(sysfs_root, device, port="1", names=ERROR_COUNTERS):
    """{name: value} of a port's counters (an int; None when the file is missing or holds no number), or None when
    the device or the port does not exist."""
    port_dir = os.path.join(sysfs_root, "class", "infiniband", device, "ports", str(port))
    if not os.path.isdir(port_dir):
        return None
    return {name: parse_int(read_attr(os.path.join(port_dir, "counters", name))) for name in names}


def read_gids(port_dir):
    """Return the non-empty GID table entries of one port, ordered by index."""
    gids = []
    gids_dir = os.path.join(port_dir, "gids")
    for name in list_dir(gids_dir):
        if not name.isdigit():
            continue
        gid_path = os.path.join(gids_dir, name)
        parsed = parse_gid(read_attr(gid_path), gid_path)
        if parsed is None:
            continue
        gid_type = read_attr(os.path.join(port_dir, "gid_attrs", "types", name))
        if not gid_type:
            continue
        netdev = read_attr(os.path.join(port_dir, "gid_attrs", "ndevs", name)) or None
        gids.append(
            {
                "index": int(name),
                "gid": parsed[0],
                "type": gid_type,
                "netdev": netdev,
                "ipv4": parsed[1],
            }
        )
    return gids


def read_port(port_dir, device_netdevs):
    """Return the facts of one port directory ``.../ports/<n>``.

    The port's netdev comes from its GID table (``gid_attrs/ndevs``); when no
    GID names one, the device's only entry under ``device/net`` is used.
    """
    state_code, state = parse_state(read_attr(os.path.join(port_dir, "state")))
    phys_code, phys_state = parse_state(read_attr(os.path.join(port_dir, "phys_state")))
    rate = read_attr(os.path.join(port_dir, "rate")) or None
    gids = read_gids(port_dir)
    netdev = None
    for entry in gids:
        if entry["netdev"]:
            netdev = entry["netdev"]
            break
    if netdev is None and len(device_netdevs) == 1:
        netdev = device_netdevs[0]
    return {
        "state": state,
        "state_code": state_code,
        "phys_state": phys_state,
        "phys_state_code": phys_code,
        "rate": rate,
        "rate_gbps": parse_rate(rate),
        "active_mtu": parse_int(read_attr(os.path.join(port_dir, "active_mtu"))),
        "link_layer": read_attr(os.path.join(port_dir, "link_layer")) or None,
        "netdev": netdev,
        "gids": gids,
    }


def read_device(dev_dir):
    """Return the facts of one RDMA device directory ``class/infiniband/<dev>``."""
    netdevs = list_dir(os.path.join(dev_dir, "device", "net"))
    ports = {}
    ports_dir = os.path.join(dev_dir, "ports")
    for name in list_dir(ports_dir):
        port_dir = os.path.join(ports_dir, name)
        if name.isdigit() and os.path.isdir(port_dir):
            ports[name] = read_port(port_dir, netdevs)
    return {
        "fw_ver": read_attr(os.path.join(dev_dir, "fw_ver")) or None,
        "hca_type": read_attr(os.path.join(dev_dir, "hca_type")) or None,
        "node_guid": read_attr(os.path.join(dev_dir, "node_guid")) or None,
        "netdevs": netdevs,
        "ports": ports,
    }


def read_netdev(sysfs_root, name):
    """Return mtu, speed (Mb/s), operstate and address of ``class/net/<name>``.

    Unreadable values are None; a speed of -1 (link down, unknown) is None too.
    The RDMA tie (``rdma_device``, ``rdma_port``) is added by gather_roce_facts.
    """
    net_dir = os.path.join(sysfs_root, "class", "net", name)
    speed = parse_int(read_attr(os.path.join(net_dir, "speed")))
    if speed is not None and speed < 0:
        speed = None
    return {
        "mtu": parse_int(read_attr(os.path.join(net_dir, "mtu"))),
        "speed": speed,
        "operstate": read_attr(os.path.join(net_dir, "operstate")) or None,
        "address": read_attr(os.path.join(net_dir, "address")) or None,
    }


def list_netdevs(sysfs_root):
    """Return the names of the netdevs under ``<sysfs_root>/class/net``, sorted.

    Only directories (symlinks to them on a real kernel) count, so a plain file
    such as ``bonding_masters`` is left out.  A missing ``class/net`` yields [].
    """
    net_dir = os.path.join(sysfs_root, "class", "net")
    return [name for name in list_dir(net_dir) if os.path.isdir(os.path.join(net_dir, name))]


def rdma_links(devices):
    """Map each netdev named by an RDMA device to ``(device, port)``.

    Ties through a port (the port's netdev or a ``gid_attrs/ndevs`` entry) give
    the port number as an int and win over ties through ``device/net`` alone,
    which give a port of None.  Devices go by name and ports by number; the
    first tie found for a netdev is kept.
    """
    links = {}
    for dev_name in sorted(devices):
        device = devices[dev_name]
        for port_name in sorted(device["ports"], key=int):
            port = device["ports"][port_name]
            names = [port["netdev"]] + [entry["netdev"] for entry in port["gids"]]
            for name in names:
                if name and name not in links:
                    links[name] = (dev_name, int(port_name))
    for dev_name in sorted(devices):
        for name in devices[dev_name]["netdevs"]:
            if name not in links:
                links[name] = (dev_name, None)
    return links


def gather_roce_facts(sysfs_root):
    """Read every RDMA device under ``<sysfs_root>/class/infiniband``.

    Returns ``(facts, warnings)``.  ``facts`` has ``rdma_available``,
    ``devices``, ``netdevs`` (every netdev under ``class/net``, each with the
    ``rdma_device`` and ``rdma_port`` that tie it, or None) and ``ipv4_gids``
    (IPv4 -> device/port/index of its RoCE v2 GID).
    A missing or empty ``class/infiniband`` gives ``rdma_available: false``
    and empty ``devices`` and ``ipv4_gids``; a missing ``class/net`` gives
    empty ``netdevs``.  Raises SysfsError for unparseable content.
    """
    ib_dir = os.path.join(sysfs_root, "class", "infiniband")
    if os.path.exists(ib_dir) and not os.path.isdir(ib_dir):
        raise SysfsError(f"{ib_dir} exists but is not a directory")

    devices = {}
    for name in list_dir(ib_dir):
        dev_dir = os.path.join(ib_dir, name)
        if os.path.isdir(dev_dir):
            devices[name] = read_device(dev_dir)

    warnings = []
    ipv4_gids = {}
    for dev_name in sorted(devices):
        device = devices[dev_name]
        for port_name in sorted(device["ports"], key=int):
            port = device["ports"][port_name]
            for entry in port["gids"]:
                if entry["type"] != ROCE_V2 or entry["ipv4"] is None:
                    continue
                where = {
                    "device": dev_name,
                    "port": int(port_name),
                    "index": entry["index"],
                    "netdev": entry["netdev"],
                    "gid": entry["gid"],
                }
                seen = ipv4_gids.get(entry["ipv4"])
                if seen is not None:
                    warnings.append(
                        f"IPv4 {entry['ipv4']} has a RoCE v2 GID on {seen['device']} port {seen['port']} "
                        f"index {seen['index']} and on {dev_name} port {where['port']} index {where['index']}; "
                        "ipv4_gids keeps the first. One address on two RDMA netdevs breaks "
                        "routing and NCCL: give each twin its own subnet."
                    )
                    continue
                ipv4_gids[entry["ipv4"]] = where

    links = rdma_links(devices)
    netdevs = {}
    for name in list_netdevs(sysfs_root):
        netdev = read_netdev(sysfs_root, name)
        netdev["rdma_device"], netdev["rdma_port"] = links.get(name, (None, None))
        netdevs[name] = netdev

    facts = {
        "rdma_available": bool(devices),
        "devices": devices,
        "netdevs": netdevs,
        "ipv4_gids": ipv4_gids,
    }
    return facts, warnings


def _port_one(facts, device):
    """Port 1 of ``device`` in gathered facts, or None when the device or its port 1 is missing."""
    dev = facts["devices"].get(device)
    if dev is None:
        return None
    return dev["ports"].get("1")


def _slot(port, index):
    """The non-empty GID entry at ``index`` of a port, or None."""
    for entry in port["gids"]:
        if entry["index"] == index:
            return entry
    return None


def _ipv4_roce_v2(entry):
    """Whether a GID entry is a RoCE v2 GID of a real IPv4 address (IPv4-mapped, not 0.0.0.0)."""
    return entry is not None and entry["type"] == ROCE_V2 and entry["ipv4"] not in (None, "0.0.0.0")


def common_ipv4_gid_index(facts, devices):
    """The lowest GID index at which port 1 of every device holds an IPv4 RoCE v2 GID, or None.

    The same selection as the SGLang ring recipe's ``ring_gid_index`` (MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks
    files/nccl.sh @e0985205caea5a3afd43e88bebb076eeefdec8b5): one index, valid on every selected port, whose type is
    ``RoCE v2`` and whose GID is ``0000:...:ffff:xxxx:xxxx`` with a non-zero address. That script tries the
    indexes in its glob's order; this takes the lowest (they agree below index 10, where a Spark's table ends).
    """
    ports = [_port_one(facts, device) for device in devices]
    if not devices or any(port is None for port in ports):
        return None
    candidates = sorted({entry["index"] for entry in ports[0]["gids"]})
    for index in candidates:
        if all(_ipv4_roce_v2(_slot(port, index)) for port in ports):
            return index
    return None


def _describe(entry):
    if entry is None:
        return "empty"
    return f"{entry['gid']} ({entry['type']})"


def _slot_fix(device, netdev, index, address):
    """How to make ``index`` the RoCE v2 GID of ``address``, from the GID table's layout."""
    where = f"/sys/class/infiniband/{device}/ports/1/gids/{index} and gid_attrs/types/{index}"
    if index % 2 == 0 or index < 3:
        return (f"index {index} is never the RoCE v2 GID of an address on a ConnectX-7 (0 and 1 are the link-local "
                f"pair; then each address takes a RoCE v1 slot and the RoCE v2 slot after it): use an engine that "
                f"takes the index from the GID table; check {where}")
    before = (index - 1) // 2 - 1
    others = "no other address" if before == 0 else f"exactly {before} other address{'es' if before > 1 else ''}"
    return (f"the kernel fills the table in the order addresses are added, after the link-local pair at 0 and 1, "
            f"two slots an address (RoCE v1, then v2), reusing freed pairs: index {index} is the RoCE v2 GID of "
            f"{address} when {others} on {netdev or 'its interface'} came before it. Re-add the addresses of "
            f"{netdev or 'the interface'} in that order (for instance one IPv6 address, then {address}) and "
            f"check {where}")


def check_gids(facts, devices, index=None, addresses=None, why=""):
    """Check the RoCE GIDs an engine will use on port 1 of each of ``devices``.

    With ``index``: the engine uses that GID index on every device whatever NCCL picks, so each device's slot
    ``index`` must be the RoCE v2 GID of its rail address (``addresses[i]`` for ``devices[i]``; any IPv4 when no
    address is given). Without ``index``: the engine needs one index common to all the devices (the SGLang ring's
    ``ring_gid_index``), each port ACTIVE, and one must exist.

    Returns ``{"index", "common_index", "slots", "problems"}``: ``slots`` maps each device to its entry at
    ``index`` (None when empty, missing, or no index was given); ``problems`` are sentences that name the device,
    what was found and the fix; ``why`` (who uses the index) is put in front of each problem about the index.
    """
    addresses = list(addresses or [])
    if addresses and len(addresses) != len(devices):
        raise ValueError(f"addresses has {len(addresses)} entries for {len(devices)} devices: give one a device")
    lead = f"{why}: " if why else ""
    have = ", ".join(sorted(facts["devices"])) or "none"
    problems = []
    slots = {}
    present = []
    for device in devices:
        port = _port_one(facts, device)
        if port is None:
            what = "no port 1" if device in facts["devices"] else "no such RDMA device"
            problems.append(f"{device}: {what} under class/infiniband (have: {have}); is the ConnectX-7 driver "
                            f"(mlx5_ib) loaded and the device name right?")
            slots[device] = None
            continue
        present.append(device)
        if index is None:
            slots[device] = None
            if port["state"] != "ACTIVE":
                problems.append(f"{device} port 1 is {port['state'] or 'in an unknown state'}, not ACTIVE: bring "
                                f"its link up (cable, peer, `ip link set {port['netdev'] or '<netdev>'} up`)")
            continue
        entry = _slot(port, index)
        slots[device] = entry
        address = addresses[devices.index(device)] if addresses else None
        if entry is not None and entry["type"] == ROCE_V2 and entry["ipv4"] is not None and \
                (address is None or entry["ipv4"] == address):
            continue
        target = f"the rail address {address}" if address else "an IPv4 address"
        held = [e["index"] for e in port["gids"] if e["type"] == ROCE_V2 and e["ipv4"] is not None and
                (address is None or e["ipv4"] == address)]
        found = (f"it is at index {held[0]}" if held else f"no RoCE v2 GID of port 1 carries {address or 'one'}")
        problems.append(f"{lead}{device} port 1 GID index {index} is {_describe(entry)}, not the RoCE v2 GID of "
                        f"{target} ({found}). Fix: "
                        f"{_slot_fix(device, port['netdev'], index, address or 'the rail address')}")
    common = common_ipv4_gid_index(facts, devices)
    if index is None and len(present) == len(devices) and devices and common is None:
        tables = "; ".join(
            f"{device}: " + (", ".join(f"{e['index']} {_describe(e)}" for e in _port_one(facts, device)["gids"])
                             or "empty")
            for device in devices)
        problems.append(f"{lead}no GID index holds an IPv4 RoCE v2 GID on every one of {', '.join(devices)} "
                        f"({tables}). Fix: give each of these ports its IPv4 address, added in the same order "
                        f"on each (the kernel gives an address the same slots on every port only then)")
    return {"index": index, "common_index": common, "slots": slots, "problems": problems}
