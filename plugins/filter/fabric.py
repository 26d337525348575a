# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that plan the ConnectX-7 RoCE fabric of a DGX Spark cluster.

Documentation lives in the sidecar files next to this one
(fabric_plan.yml, roce_gid_index.yml, nccl_ib_hca.yml, nccl_addr_range.yml).
All address math is done with netaddr.
"""

from __future__ import annotations

import itertools
import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text
from ansible_collections.sparkfold.cluster.plugins.module_utils import fabric_ring

try:
    import netaddr
except ImportError as imp_exc:  # pragma: no cover - exercised only without netaddr
    netaddr = None
    NETADDR_IMPORT_ERROR = imp_exc
else:
    NETADDR_IMPORT_ERROR = None


MTU_MIN = 576
MTU_MAX = 9216

# What NCCL_IB_HCA may name: an RDMA device as the kernel spells it in
# /sys/class/infiniband (rocep1s0f1, roceP2p1s0f1, mlx5_0). Commas, colons,
# '=' and '^' are NCCL_IB_HCA syntax and must not leak in from a device name.
_RDMA_DEVICE_RE = re.compile(r'^[A-Za-z0-9_.-]+$')
_INT_RE = re.compile(r'^[+-]?[0-9]+$')
_OCTAL_MODE_RE = re.compile(r'^0[0-7]{3}$')

_SPLIT_TWINS = 'one subnet on both twins breaks routing and NCCL'


def _require_netaddr(filter_name):
    if NETADDR_IMPORT_ERROR is not None:
        raise AnsibleFilterError(
            f'{filter_name} requires the Python library netaddr on the Ansible controller '
            f'(pip install netaddr): {to_text(NETADDR_IMPORT_ERROR)}')


def _as_int(value, what):
    """Return value as int; accept ints and decimal strings, never bools."""
    if isinstance(value, bool):
        raise AnsibleFilterError(f'{what} must be an integer, got boolean {value}')
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str) and _INT_RE.match(value.strip()):
        return int(value.strip())
    raise AnsibleFilterError(f"{what} must be an integer, got '{to_text(value)}'")


def _is_blank(value):
    return value is None or (isinstance(value, str) and not value.strip())


def _label(rail, position):
    """How a rail is named in messages: 'rail0 (enp1s0f1np1)', else 'rails[1]'."""
    if isinstance(rail, dict):
        name = rail.get('name')
        interface = rail.get('interface')
        if isinstance(name, str) and name.strip():
            if isinstance(interface, str) and interface.strip():
                return f'{name.strip()} ({interface.strip()})'
            return name.strip()
    return f'rails[{position}]'


def _check_rails_list(rails, filter_name):
    if isinstance(rails, (str, dict)) or not isinstance(rails, (list, tuple)):
        raise AnsibleFilterError(
            f'{filter_name}: rails must be a list of rail dicts, got {type(rails).__name__}')
    if not rails:
        raise AnsibleFilterError(
            f'{filter_name}: rails is empty; at least one rail (CX7 twin) is needed')


def _parse_rail_cidr(value, label):
    """Parse a rail CIDR: an IPv4 network in network/prefix form with host bits clear."""
    if _is_blank(value):
        raise AnsibleFilterError(f'{label}: cidr is missing')
    if not isinstance(value, str):
        raise AnsibleFilterError(
            f"{label}: cidr '{to_text(value)}' is not a valid IPv4 network "
            "(expected a string such as 192.168.100.0/24)")
    text = value.strip()
    if '/' not in text:
        raise AnsibleFilterError(
            f"{label}: cidr '{text}' is not a valid IPv4 network: it has no prefix length "
            f"(write it as network/prefix, for example {text}/24)")
    try:
        net = netaddr.IPNetwork(text)
    except (netaddr.AddrFormatError, ValueError, TypeError):
        raise AnsibleFilterError(f"{label}: cidr '{text}' is not a valid IPv4 network") from None
    if net.version != 4:
        raise AnsibleFilterError(
            f"{label}: cidr '{text}' is an IPv6 network; rails must be IPv4 "
            "(RoCE v2 uses the IPv4-mapped GID ::ffff:<ipv4>)")
    if net.ip != net.network:
        raise AnsibleFilterError(
            f"{label}: cidr '{text}' has host bits set; the network address is {net.cidr}")
    return net.cidr


def _host_count(net):
    """Usable host addresses: both of a /31 (RFC 3021), else all but network and broadcast."""
    if net.prefixlen >= 31:
        return net.size
    return net.size - 2


def _parse_management(management_cidrs):
    if management_cidrs is None:
        return []
    if isinstance(management_cidrs, str):
        management_cidrs = [management_cidrs]
    if not isinstance(management_cidrs, (list, tuple)):
        raise AnsibleFilterError(
            f'management_cidrs must be a list of CIDRs, got {type(management_cidrs).__name__}')
    networks = []
    for value in management_cidrs:
        if _is_blank(value):
            continue
        try:
            net = netaddr.IPNetwork(to_text(value).strip())
        except (netaddr.AddrFormatError, ValueError, TypeError):
            raise AnsibleFilterError(
                f"management_cidrs: '{to_text(value)}' is not a valid IP network") from None
        # Host bits are fine here: 10.0.0.5/24 (an interface address) means 10.0.0.0/24.
        networks.append(net.cidr)
    return networks


def _overlaps(net_a, net_b):
    if net_a.version != net_b.version:
        return False
    # Two CIDR blocks overlap exactly when one contains the other.
    return net_a in net_b or net_b in net_a


def _parse_rail(rail, position, needed, index, min_hosts):
    if not isinstance(rail, dict):
        raise AnsibleFilterError(
            f"rails[{position}] must be a dict with name, interface and cidr, got '{to_text(rail)}'")
    label = _label(rail, position)
    for key in ('name', 'interface'):
        value = rail.get(key)
        if _is_blank(value) or not isinstance(value, str):
            raise AnsibleFilterError(f'{label}: {key} is missing or not a string')
    rdma_device = rail.get('rdma_device')
    if _is_blank(rdma_device):
        rdma_device = None
    elif not isinstance(rdma_device, str) or not _RDMA_DEVICE_RE.match(rdma_device):
        raise AnsibleFilterError(
            f"{label}: rdma_device '{to_text(rdma_device)}' is not an RDMA device name "
            "(such as rocep1s0f1)")
    net = _parse_rail_cidr(rail.get('cidr'), label)
    if net.prefixlen == 32:
        raise AnsibleFilterError(
            f'{label}: {net} is a single address; a rail subnet must hold both ends '
            'of the link (use a /31 or wider)')
    hosts = _host_count(net)
    if hosts < needed:
        if index >= min_hosts:
            why = f'host index {index} needs at least {needed}'
        else:
            why = f'min_hosts={min_hosts} needs at least {needed}'
        raise AnsibleFilterError(f'{label}: {net} holds {hosts} host addresses; {why}')
    return {
        'label': label,
        'name': to_text(rail['name']).strip(),
        'interface': to_text(rail['interface']).strip(),
        'rdma_device': None if rdma_device is None else to_text(rdma_device),
        'net': net,
    }


def _check_distinct(first, second):
    if first['name'] == second['name']:
        raise AnsibleFilterError(
            f"rails {first['label']} and {second['label']} share the name "
            f"'{first['name']}'; rail names must be unique")
    if first['interface'] == second['interface']:
        raise AnsibleFilterError(
            f"rails {first['name']} and {second['name']} both use interface "
            f"{first['interface']}; each rail needs its own CX7 twin")
    if first['rdma_device'] is not None and first['rdma_device'] == second['rdma_device']:
        raise AnsibleFilterError(
            f"rails {first['label']} and {second['label']} both use rdma_device "
            f"{first['rdma_device']}; each CX7 twin has its own RDMA device")
    if _overlaps(first['net'], second['net']):
        raise AnsibleFilterError(
            f"{first['label']} {first['net']} overlaps {second['label']} {second['net']}; "
            f'each CX7 twin needs its own subnet ({_SPLIT_TWINS})')


def _check_index(index):
    index = _as_int(index, 'index')
    if index < 1:
        raise AnsibleFilterError(
            f'index must be the 1-based position of the host in the cluster (>= 1), got {index}')
    return index


def _check_mtu(mtu):
    mtu = _as_int(mtu, 'mtu')
    if not MTU_MIN <= mtu <= MTU_MAX:
        raise AnsibleFilterError(
            f'mtu {mtu} is outside {MTU_MIN}..{MTU_MAX} (use 9000 on both ends of every rail)')
    return mtu


TOPOLOGIES = ('pair', 'switch', 'ring')


def _check_topology(topology):
    if topology not in TOPOLOGIES:
        raise AnsibleFilterError(
            f"topology must be one of {', '.join(TOPOLOGIES)}, got '{to_text(topology)}'")
    return topology


def fabric_plan_problems(rails, index, management_cidrs=None, mtu=9000, min_hosts=2, names=None,
                         topology='pair', ring_cidr=None):
    """What fabric_plan would refuse, as a list of at most one message, prefixed with the name
    (from ``names``, e.g. {'mtu': 'fabric_mtu'}) of the input at fault; [] when it accepts."""
    names = names or {}
    checks = (('topology', lambda: _check_topology(topology)),
              ('index', lambda: _check_index(index)), ('mtu', lambda: _check_mtu(mtu)),
              ('management_cidrs', lambda: _parse_management(management_cidrs)),
              ('ring_cidr', lambda: topology != 'ring' or _parse_ring_cidr(ring_cidr, min_hosts)),
              ('rails', lambda: fabric_plan(rails, index, management_cidrs, mtu, min_hosts,
                                            topology=topology, ring_cidr=ring_cidr)))
    for what, check in checks:
        try:
            check()
        except AnsibleFilterError as exc:
            return [f'{names.get(what, what)}: {to_text(exc.message)}']
    return []


def fabric_plan(rails, index, management_cidrs=None, mtu=9000, min_hosts=2, topology='pair', ring_cidr=None):
    """Address plan of one host on every rail (CX7 twin) of the fabric.

    ``topology`` ``pair`` and ``switch``: every host on every rail. ``ring``: see _ring_plan.
    """
    _require_netaddr('fabric_plan')
    _check_topology(topology)
    _check_rails_list(rails, 'fabric_plan')
    if topology == 'ring':
        return _ring_plan(rails, index, management_cidrs, mtu, min_hosts, ring_cidr)

    index = _check_index(index)
    mtu = _check_mtu(mtu)
    min_hosts = _as_int(min_hosts, 'min_hosts')
    if min_hosts < 1:
        raise AnsibleFilterError(f'min_hosts must be >= 1, got {min_hosts}')
    management = _parse_management(management_cidrs)

    needed = max(index, min_hosts)
    parsed = [_parse_rail(rail, position, needed, index, min_hosts)
              for position, rail in enumerate(rails)]

    for first, second in itertools.combinations(parsed, 2):
        _check_distinct(first, second)

    for rail in parsed:
        for mgmt in management:
            if _overlaps(rail['net'], mgmt):
                raise AnsibleFilterError(
                    f"{rail['label']}: {rail['net']} overlaps management network {mgmt}; "
                    'the fabric subnets must be disjoint from the management network, or '
                    "the kernel routes one network's traffic through the other's interface")

    plan = []
    for rail in parsed:
        net = rail['net']
        # iter_hosts() skips the network and broadcast addresses and yields both
        # addresses of a /31 (RFC 3021): its index-th element is this host's address.
        address = next(itertools.islice(net.iter_hosts(), index - 1, None))
        plan.append({
            'name': rail['name'],
            'interface': rail['interface'],
            'rdma_device': rail['rdma_device'],
            'cidr': str(net),
            'address': str(address),
            'prefix': int(net.prefixlen),
            'address_cidr': f'{address}/{net.prefixlen}',
            'network': str(net.network),
            'mtu': mtu,
        })
    return plan


# A switchless ring (MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks docs/switchless-ring.md @a7ef928; jnardiello/
# GLM-5.3-Flash-FP8-4-DGX-Spark-Switchless docs/fabric.md @07d9123): one cable from each node's CX7 port 0 to
# the next node's port 1, no diagonals; "each link owns a private /24 and each node addresses exactly two
# ports", 10.10.<L>.<N>/24 with L = 1..4 walking rank0 -> 1 -> 2 -> 3 -> 0.
RING_LINK_PREFIX = 24


def _parse_ring_cidr(ring_cidr, count):
    """The ring's supernet: link L (1-based) is its L-th /24; count links must fit."""
    net = _parse_rail_cidr(ring_cidr, 'ring_cidr')
    count = _as_int(count, 'min_hosts')
    if net.prefixlen > RING_LINK_PREFIX - 1:
        raise AnsibleFilterError(
            f'ring_cidr {net} must be wider than a /{RING_LINK_PREFIX}: each cable gets a '
            f'/{RING_LINK_PREFIX} of its own inside it (10.10.0.0/16 gives 10.10.1.0/24 to cable 1)')
    links = 2 ** (RING_LINK_PREFIX - net.prefixlen)
    if links <= count:
        raise AnsibleFilterError(
            f'ring_cidr {net} holds {links - 1} cable subnets after its first; a ring of {count} nodes needs {count}')
    return net


def ring_link_network(ring_cidr, link):
    """The /24 of cable ``link`` (1-based) inside the ring's supernet."""
    net = netaddr.IPNetwork(str(ring_cidr))
    first = netaddr.IPAddress(int(net.network) + (link << (32 - RING_LINK_PREFIX)))
    return netaddr.IPNetwork(f'{first}/{RING_LINK_PREFIX}')


def _ring_plan(rails, index, management_cidrs, mtu, count, ring_cidr):
    """A ring node's two addressed ports: port 0 (rails[0]) on the cable to the next node,
    port 1 (rails[1]) on the cable from the previous node. Node N's address on cable L is
    host N of the cable's /24."""
    index = _check_index(index)
    mtu = _check_mtu(mtu)
    count = _as_int(count, 'min_hosts')
    if count < 3:
        raise AnsibleFilterError(
            f'a ring needs at least 3 nodes, the cluster has {count} (two nodes are a pair: fabric_topology pair)')
    if index > count:
        raise AnsibleFilterError(f'index {index} is past the {count} nodes of the ring')
    if len(rails) != 2:
        raise AnsibleFilterError(
            f'a ring node addresses exactly two ports (port 0 to the next node, port 1 to the previous), '
            f'{len(rails)} rails given')
    management = _parse_management(management_cidrs)
    supernet = _parse_ring_cidr(ring_cidr, count)
    parsed = []
    for position, rail in enumerate(rails):
        if not isinstance(rail, dict):
            raise AnsibleFilterError(
                f"rails[{position}] must be a dict with name and interface, got '{to_text(rail)}'")
        label = _label(rail, position)
        for key in ('name', 'interface'):
            if _is_blank(rail.get(key)) or not isinstance(rail.get(key), str):
                raise AnsibleFilterError(f'{label}: {key} is missing or not a string')
        if not _is_blank(rail.get('cidr')):
            raise AnsibleFilterError(
                f'{label}: a ring port has no cidr of its own (each cable gets a /{RING_LINK_PREFIX} of ring_cidr)')
        device = rail.get('rdma_device')
        if not _is_blank(device) and (not isinstance(device, str) or not _RDMA_DEVICE_RE.match(device)):
            raise AnsibleFilterError(
                f"{label}: rdma_device '{to_text(device)}' is not an RDMA device name (such as rocep1s0f0)")
        parsed.append({'label': label, 'name': rail['name'].strip(), 'interface': rail['interface'].strip(),
                       'rdma_device': None if _is_blank(device) else to_text(device),
                       'net': netaddr.IPNetwork('0.0.0.0/32')})
    first, second = parsed
    if first['name'] == second['name'] or first['interface'] == second['interface'] or (
            first['rdma_device'] is not None and first['rdma_device'] == second['rdma_device']):
        raise AnsibleFilterError(
            f"ring ports {first['label']} and {second['label']} must differ in name, interface and rdma_device")
    for mgmt in management:
        if _overlaps(supernet, mgmt):
            raise AnsibleFilterError(
                f'ring_cidr {supernet} overlaps management network {mgmt}; the fabric subnets must be '
                'disjoint from the management network')
    nxt = index % count + 1
    prev = (index - 2) % count + 1
    # Port 0 sits on cable `index` (this node to the next), port 1 on cable `prev` (previous to this node).
    sides = ((first, index, nxt, second), (second, prev, prev, first))
    plan = []
    for port, link, peer, peer_port in sides:
        net = ring_link_network(supernet.cidr, link)
        address = net.network + index
        plan.append({
            'name': port['name'],
            'interface': port['interface'],
            'rdma_device': port['rdma_device'],
            'cidr': str(net.cidr),
            'address': str(address),
            'prefix': RING_LINK_PREFIX,
            'address_cidr': f'{address}/{RING_LINK_PREFIX}',
            'network': str(net.network),
            'mtu': mtu,
            'link': link,
            'peer_index': peer,
            'peer_port': peer_port['name'],
            'peer_interface': peer_port['interface'],
            'peer_address': str(net.network + peer),
        })
    return plan


def fabric_links(plan, peer_plans):
    """Every directed link of this host: for each of its rails (in order) and each peer (in the
    order of ``peer_plans``, a list of {host, plan}), the peer's address on the same subnet.
    A pair or switch gives every peer on every rail; a ring only the neighbour on each cable."""
    _require_netaddr('fabric_links')
    if isinstance(peer_plans, dict):
        peer_plans = [{'host': host, 'plan': peer_plan} for host, peer_plan in peer_plans.items()]
    if not isinstance(peer_plans, (list, tuple)):
        raise AnsibleFilterError('fabric_links: peer_plans must be a list of {host, plan} dicts or a dict host -> plan')
    links = []
    for peer in peer_plans:
        for rail in plan:
            network = netaddr.IPNetwork(rail['cidr'])
            for theirs in peer['plan']:
                if netaddr.IPNetwork(theirs['cidr']) == network:
                    links.append({'peer': peer['host'], 'name': rail['name'], 'interface': rail['interface'],
                                  'address': theirs['address'], 'peer_interface': theirs['interface'],
                                  'mtu': rail['mtu']})
    return links


def fabric_ring_cabling(observed, ring, carrier=None):
    """Explain a mis-cabled ring from what each node heard on its two ports, with the cheapest fix.

    ``ring``: the nodes in ring order, each {host, ports: [port0, port1]} (a port: {name, interface}).
    ``observed``: host -> interface -> list of {host, interface} heard on that port (the fabric_neighbors
    module). ``carrier``: host -> interface -> whether the port has a link (fabric_neighbors' links).
    Returns [] when every port faces the neighbour the ring wants, else the explanation, one line each:
    what each wrong port faces, then the fewest cable moves (or the fabric_host_index renumbering when it
    needs fewer), one per line (module_utils/fabric_ring.py).
    """
    try:
        return fabric_ring.ring_cabling(observed, ring, carrier)['lines']
    except fabric_ring.RingCablingError as exc:
        raise AnsibleFilterError(f'fabric_ring_cabling: {exc}') from None


def weights_sources(nodes, topology, plans):
    """Where each worker copies the weights from, over the fabric.

    ``nodes``: the hosts, head first. ``plans``: host -> fabric plan. Walks the fabric's links
    breadth first from the head: each worker copies from the node that reached it first, over
    the links between them; ``wave`` is the hop count, so a node copies only after its source
    has its copy. A pair or switch: the head over every rail (wave 1). A four-node ring relays
    0 -> 1, 1 -> 2, 0 -> 3 (rank 2 has no direct link from the head).
    Returns host -> {source, addresses, interfaces, wave}.
    """
    _check_topology(topology)
    if not isinstance(nodes, (list, tuple)) or not nodes:
        raise AnsibleFilterError('weights_sources: nodes must list the hosts, head first')
    if not isinstance(plans, dict) or any(host not in plans for host in nodes):
        raise AnsibleFilterError('weights_sources: plans must hold the fabric plan of every node')
    result = {}
    reached = [nodes[0]]
    depth = {nodes[0]: 0}
    position = 0
    while position < len(reached):
        source = reached[position]
        position += 1
        for host in nodes:
            if host in depth:
                continue
            links = fabric_links(plans[host], [{'host': source, 'plan': plans[source]}])
            if links:
                depth[host] = depth[source] + 1
                reached.append(host)
                result[host] = {'source': source, 'addresses': [link['address'] for link in links],
                                'interfaces': [link['interface'] for link in links], 'wave': depth[host]}
    cut_off = [host for host in nodes if host not in depth]
    if cut_off:
        raise AnsibleFilterError(
            f"weights_sources: {', '.join(cut_off)} shares no fabric subnet with the nodes reached from the head "
            f'{nodes[0]}: no fabric path to copy the weights over')
    return result


def _parse_ipv4_address(address):
    if _is_blank(address) or not isinstance(address, str):
        raise AnsibleFilterError(f"roce_gid_index: '{to_text(address)}' is not an IPv4 address")
    text = address.strip()
    try:
        # Accept a bare address or an address_cidr such as 192.168.100.1/24.
        wanted = netaddr.IPNetwork(text).ip if '/' in text else netaddr.IPAddress(text)
    except (netaddr.AddrFormatError, ValueError, TypeError):
        raise AnsibleFilterError(f"roce_gid_index: '{text}' is not an IPv4 address") from None
    if wanted.version != 4:
        raise AnsibleFilterError(f"roce_gid_index: '{text}' is not an IPv4 address")
    return wanted


def _same_address(key, wanted):
    try:
        return netaddr.IPAddress(to_text(key).strip()) == wanted
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return False


def roce_gid_index(ipv4_gids, address, device=None):
    """GID table index of the RoCE v2 GID that carries address (::ffff:<address>)."""
    _require_netaddr('roce_gid_index')
    if ipv4_gids is None:
        ipv4_gids = {}
    if not isinstance(ipv4_gids, dict):
        raise AnsibleFilterError(
            'roce_gid_index: ipv4_gids must be the ipv4_gids dict of the RoCE facts, '
            f'got {type(ipv4_gids).__name__}')
    wanted = _parse_ipv4_address(address)

    matches = [value for key, value in ipv4_gids.items() if _same_address(key, wanted)]
    if not matches:
        present = ', '.join(sorted(to_text(key) for key in ipv4_gids)) or 'none'
        raise AnsibleFilterError(
            f'no RoCE v2 GID carries {wanted}; is the address applied to the CX7 netdev? '
            f'(IPv4 addresses that have a RoCE v2 GID: {present})')
    entry = matches[0]
    if not isinstance(entry, dict) or 'index' not in entry:
        raise AnsibleFilterError(
            f"roce_gid_index: the ipv4_gids entry for {wanted} has no index: '{to_text(entry)}'")
    gid_index = _as_int(entry['index'], f'roce_gid_index: the GID index of {wanted}')
    if gid_index < 0:
        raise AnsibleFilterError(
            f'roce_gid_index: the GID index of {wanted} must be >= 0, got {gid_index}')
    if not _is_blank(device) and to_text(entry.get('device')) != to_text(device):
        raise AnsibleFilterError(
            f"the RoCE v2 GID of {wanted} is on {to_text(entry.get('device'))} "
            f'(index {gid_index}), not {to_text(device)}; the address sits on the wrong CX7 twin')
    return gid_index


def nccl_ib_hca(rails):
    """NCCL_IB_HCA value that names exactly the rails' RDMA devices: '=dev1,dev2'."""
    _check_rails_list(rails, 'nccl_ib_hca')
    devices = []
    for position, rail in enumerate(rails):
        if not isinstance(rail, dict):
            raise AnsibleFilterError(
                f"nccl_ib_hca: rails[{position}] must be a dict with rdma_device, got '{to_text(rail)}'")
        label = _label(rail, position)
        device = rail.get('rdma_device')
        if _is_blank(device):
            raise AnsibleFilterError(
                f'nccl_ib_hca: {label} has no rdma_device; NCCL_IB_HCA must list every '
                'CX7 twin, else NCCL runs at half bandwidth')
        if not isinstance(device, str) or not _RDMA_DEVICE_RE.match(device):
            raise AnsibleFilterError(
                f"nccl_ib_hca: {label}: rdma_device '{to_text(device)}' is not an RDMA device "
                'name (such as rocep1s0f1)')
        device = to_text(device)
        if device in devices:
            raise AnsibleFilterError(
                f'nccl_ib_hca: {label} repeats rdma_device {device}; each rail must name its own twin')
        devices.append(device)
    return '=' + ','.join(devices)


def nccl_addr_range(rails):
    """The one CIDR for NCCL_IB_ADDR_RANGE: the smallest network covering every rail."""
    _require_netaddr('nccl_addr_range')
    _check_rails_list(rails, 'nccl_addr_range')
    networks = []
    for position, rail in enumerate(rails):
        if isinstance(rail, dict):
            label = f'nccl_addr_range: {_label(rail, position)}'
            networks.append(_parse_rail_cidr(rail.get('cidr'), label))
        elif isinstance(rail, str):
            networks.append(_parse_rail_cidr(rail, f'nccl_addr_range: rails[{position}]'))
        else:
            raise AnsibleFilterError(
                f"nccl_addr_range: rails[{position}] must be a rail dict or a CIDR string, "
                f"got '{to_text(rail)}'")
    if len(networks) == 1:
        return str(networks[0])
    return str(netaddr.spanning_cidr(networks))


def fabric_addresses(index, rails, management_cidrs=None):
    """The fabric addresses of the host with 1-based ``index``, one per rail, in rail order."""
    return [rail['address'] for rail in fabric_plan(rails, index, management_cidrs=management_cidrs or [])]


def outside_rails(addresses, rails):
    """The entries of ``addresses`` that are not an IPv4 address inside one of the rails' CIDRs.

    An NFS export of the model store must reach the peers over the fabric only: a wildcard, a
    host name, a network, a management or public address all come back here, unchanged.
    """
    _require_netaddr('outside_rails')
    if not isinstance(addresses, (list, tuple)):
        raise AnsibleFilterError(f'outside_rails: expected a list of addresses, got {type(addresses).__name__}')
    networks = [netaddr.IPNetwork(to_text(rail['cidr']).strip()) for rail in rails]
    outside = []
    for entry in addresses:
        text = to_text(entry).strip()
        try:
            address = netaddr.IPAddress(text, version=4, flags=netaddr.INET_PTON)
        except (netaddr.AddrFormatError, ValueError, TypeError):
            outside.append(entry)
            continue
        if not any(address in net for net in networks):
            outside.append(entry)
    return outside


def fabric_file_differs(entry, content, owner, group, mode):
    """Whether a file read by fabric_facts (an entry of its ``files``) differs from what the role writes.

    True when it is missing or not a regular file, or when its text, owner, group or mode (four octal
    digits, e.g. ``0644``) is not the one given: the write task then runs (and reports a change, with
    its diff); False when the write would change nothing, so the task is left out.
    """
    if not isinstance(entry, dict):
        raise AnsibleFilterError(f'fabric_file_differs: expected an entry of fabric_facts files, got {entry!r}')
    if not entry.get('exists') or entry.get('type') != 'file':
        return True
    wanted_mode = to_text(mode)
    if not _OCTAL_MODE_RE.match(wanted_mode):
        raise AnsibleFilterError(f'fabric_file_differs: mode {mode!r} is not four octal digits such as 0644')
    return (entry.get('content') != to_text(content) or entry.get('owner') != owner
            or entry.get('group') != group or entry.get('mode') != wanted_mode)


class FilterModule:
    """sparkfold fabric filters."""

    def filters(self):
        return {
            'fabric_plan': fabric_plan,
            'fabric_plan_problems': fabric_plan_problems,
            'roce_gid_index': roce_gid_index,
            'nccl_ib_hca': nccl_ib_hca,
            'nccl_addr_range': nccl_addr_range,
            'fabric_addresses': fabric_addresses,
            'outside_rails': outside_rails,
            'fabric_links': fabric_links,
            'fabric_ring_cabling': fabric_ring_cabling,
            'weights_sources': weights_sources,
            'fabric_file_differs': fabric_file_differs,
        }
