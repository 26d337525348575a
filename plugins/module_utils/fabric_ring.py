# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A switchless ring's cabling judged from what each port heard, and the cheapest way to the ring.

The ring wants one cable from each node's port 0 to the next node's port 1 (node N's port 0 to node N+1's
port 1, the last node's port 0 back to the first's port 1). What the probe (fabric_probe) observed is a
graph on the ports: each cable joins two ports; a port that heard nobody has no working cable. Whatever the
mistake (a swap, a cross between nodes, a cable from a node's port 0 to its own port 1, a pulled cable, a
diagonal), the fix is computed the same way: every cable present is matched to one cable of the ring so
that the fewest cable ends have to move (a cable of which both ends are right costs 0, one end 1, none 2;
a ring cable no cable can become costs 2: plug one in). A renumbering of ``fabric_host_index`` that
needs fewer moves is offered instead: the cables then stay and the inventory changes.
"""

from __future__ import annotations

import itertools

# Rings up to this many nodes try every renumbering (the head keeps index 1); larger ones only the one the
# observed cables describe.
RENUMBER_ALL_UP_TO = 7


class RingCablingError(ValueError):
    """The ring description is unusable (not a cabling problem)."""


def _port_label(host, port):
    return f"{host} {port['name']} ({port['interface']})"


class Ring:
    """The ring's nodes in the order of fabric_host_index, each ``{host, ports: [port0, port1]}``."""

    def __init__(self, ring):
        if not isinstance(ring, (list, tuple)) or len(ring) < 3:
            raise RingCablingError('the ring must list at least 3 nodes in ring order')
        self.hosts = []
        self.ports = {}  # (host, interface) -> port dict
        self.names = {}  # host -> (port0, port1)
        for node in ring:
            if not isinstance(node, dict) or not isinstance(node.get('ports'), (list, tuple)) \
                    or len(node['ports']) != 2 or not isinstance(node.get('host'), str):
                raise RingCablingError(f'a ring node must be {{host, ports: [port0, port1]}}, got {node!r}')
            host = node['host']
            if host in self.names:
                raise RingCablingError(f'{host} is twice in the ring')
            self.hosts.append(host)
            self.names[host] = tuple(node['ports'])
            for port in node['ports']:
                self.ports[(host, port['interface'])] = port

    def label(self, key):
        return _port_label(key[0], self.ports[key])

    def short(self, key):
        return f"{key[0]} {self.ports[key]['name']}"

    def p0(self, host):
        return (host, self.names[host][0]['interface'])

    def p1(self, host):
        return (host, self.names[host][1]['interface'])

    def targets(self, order):
        """The ring's cables for the hosts in ``order``: (port 0 of each, port 1 of the next)."""
        count = len(order)
        return [(self.p0(order[i]), self.p1(order[(i + 1) % count])) for i in range(count)]


def observed_cables(ring, observed):
    """The cables the ports heard: a list of (port, port) (a pair of (host, interface)), each port in one at
    most, plus notes on what is not a cable of the ring (several nodes on one port, a port of no ring node).

    A cable is taken when both ends heard each other, or when one end heard the other and the other end
    heard nobody (one direction lost); a port that heard several ports is on something else than a cable."""
    heard = {}
    notes = []
    for key in ring.ports:
        host, interface = key
        entries = ((observed or {}).get(host) or {}).get(interface) or []
        keys = []
        for seen in entries:
            other = (seen.get('host'), seen.get('interface'))
            if other == key:
                continue  # its own frames, when a driver loops them back
            if other not in ring.ports:
                notes.append(f"{ring.label(key)} faces {other[0]} {other[1]}, which is not a ring port "
                             '(a node outside the ring, or a port fabric_rails does not name)')
                continue
            keys.append(other)
        keys = sorted(set(keys))
        if len(keys) > 1:
            notes.append(f"{ring.label(key)} hears several ports ({', '.join(ring.label(k) for k in keys)}): "
                         'it is on a switch or a splitter, not on one cable')
            keys = []
        heard[key] = keys[0] if keys else None
    cables = []
    used = set()
    for key, other in sorted(heard.items(), key=lambda item: (ring.hosts.index(item[0][0]), item[0][1])):
        if other is None or key in used or other in used:
            continue
        if heard.get(other) in (key, None):
            cables.append(tuple(sorted((key, other), key=lambda k: (ring.hosts.index(k[0]), k[1]))))
            used.update((key, other))
            if heard.get(other) is None:
                notes.append(f'{ring.label(other)} hears nobody, though {ring.label(key)} hears it: the cable '
                             'between them carries one direction only (a bad cable or transceiver: reseat or '
                             'replace it)')
    return cables, heard, notes


def _assign(cables, targets):
    """The cheapest match of the present cables to the ring's cables (bitmask dynamic programming).

    Returns (cost, pairs): pairs maps each present cable's position to a target's position; cost counts the
    cable ends to plug (a kept end 0, a moved end 1, a ring cable no present cable becomes 2)."""
    count = len(targets)
    if len(cables) > count:
        raise RingCablingError('more cables than the ring has ports for')
    overlap = [[len(set(cable) & set(target)) for target in targets] for cable in cables]
    best = {0: (0, ())}
    for position in range(len(cables)):
        nxt = {}
        for mask, (cost, pairs) in sorted(best.items()):
            for target in range(count):
                if mask & (1 << target):
                    continue
                entry = (cost + 2 - overlap[position][target], (*pairs, target))
                key = mask | (1 << target)
                if key not in nxt or entry < nxt[key]:
                    nxt[key] = entry
        best = nxt
    cost, pairs = min(best.values())
    return cost + 2 * (count - len(cables)), dict(enumerate(pairs))


def _moves(ring, cables, targets, pairs, carrier):
    """One line per cable end to move, or per cable to plug in; and the steps: (from, to) per moved end, where
    from and to are (host, interface), and (None, (end, end)) per cable to plug in."""
    lines = []
    moved = []
    covered = set(pairs.values())
    for position, cable in enumerate(cables):
        target = targets[pairs[position]]
        going = [end for end in cable if end not in target]
        free = [end for end in target if end not in cable]
        for end, dest in zip(going, free):
            stays = [other for other in cable if other != end]
            moved.append((end, dest))
            lines.append(f"move: {ring.label(end)} -> {ring.label(dest)}  (the cable whose other end is in "
                         f"{ring.short(stays[0])})")
    for position, target in enumerate(targets):
        if position in covered:
            continue
        dark = [end for end in target if (carrier or {}).get(end) is False]
        why = ('no link at either end: the cable is pulled' if len(dark) == 2 else
               f'no link at {ring.short(dark[0])}: the cable is pulled there' if dark else
               'no cable joins them')
        moved.append((None, target))
        lines.append(f"plug: a cable between {ring.label(target[0])} and {ring.label(target[1])}  ({why})")
    return lines, moved


def _diagnosis(ring, heard, cables, carrier, order):
    """What each wrong port faces, in ring order, one line each."""
    want = {}
    for end0, end1 in ring.targets(order):
        want[end0], want[end1] = end1, end0
    lines = []
    for host in ring.hosts:
        for key in (ring.p0(host), ring.p1(host)):
            other = heard.get(key)
            partner = next((c[0] if c[1] == key else c[1] for c in cables if key in c), other)
            if partner == want[key]:
                continue
            if partner is not None and partner[0] == host:
                if key == ring.p0(host):
                    lines.append(f"{ring.label(key)} and {ring.ports[partner]['name']} ({partner[1]}) are cabled to "
                                 'each other: a loop on one node; the ring wants '
                                 f'{ring.label(want[key])} and {ring.label(want[partner])} on them')
                continue
            if partner is not None:
                lines.append(f"{ring.label(key)} faces {ring.label(partner)}; the ring wants {ring.label(want[key])}")
            elif (carrier or {}).get(key) is False:
                lines.append(f"{ring.label(key)} has no link (no carrier): its cable to {ring.label(want[key])} is "
                             'pulled, or the other end is down')
            elif (carrier or {}).get(key) is True:
                lines.append(f"{ring.label(key)} has a link but hears no node of the ring: the node at the other "
                             f"end is not in this run, or is not {ring.short(want[key])}")
            else:
                lines.append(f"{ring.label(key)} hears no neighbour (cable unplugged, link down or the peer not "
                             f"running); the ring wants it cabled to {ring.label(want[key])}")
    return lines


def _walk_order(ring, cables):
    """The ring order the cables describe, from the head (port 0 to the next node's port 1), when they close
    one ring through every node; else None."""
    partner = {}
    for end0, end1 in cables:
        partner[end0], partner[end1] = end1, end0
    order = [ring.hosts[0]]
    while True:
        nxt = partner.get(ring.p0(order[-1]))
        if nxt is None or nxt != ring.p1(nxt[0]):
            return None
        if nxt[0] == ring.hosts[0]:
            return order if len(order) == len(ring.hosts) else None
        if nxt[0] in order:
            return None
        order.append(nxt[0])


def _swap_summary(ring, moves_keys):
    """'spark-b: swap its two cables' when the moves are exactly one node's two ends into each other's port."""
    if len(moves_keys) != 2 or None in (moves_keys[0][0], moves_keys[1][0]):
        return None
    (src_a, dst_a), (src_b, dst_b) = moves_keys
    if src_a == dst_b and src_b == dst_a and src_a[0] == src_b[0]:
        return f"{src_a[0]}: its two cables are in each other's port: swap them"
    return None


def ring_cabling(observed, ring, carrier=None):
    """Judge a ring's cabling; see the module docstring.

    ``observed``: host -> interface -> [{host, interface}, ...] heard on that port (fabric_neighbors).
    ``ring``: the nodes in the order of fabric_host_index, each {host, ports: [port0, port1]} (a port:
    {name, interface}). ``carrier``: host -> interface -> True/False (link), optional.
    Returns {ok, problems, moves, renumber, cost, lines, cables, steps, renumber_steps}: ``lines`` is the whole
    explanation, one line each (empty when the ring is right); ``cables`` the cables observed; ``steps`` the moves
    as data (see _moves); ``renumber`` host -> its new fabric_host_index when that needs fewer moves (then
    ``renumber_steps`` the moves left after it).
    """
    ring = Ring(ring)
    carrier_keys = {(host, interface): value for host, ports in (carrier or {}).items()
                    for interface, value in (ports or {}).items()}
    cables, heard, notes = observed_cables(ring, observed)
    identity = list(ring.hosts)
    targets = ring.targets(identity)
    cost, pairs = _assign(cables, targets)
    result = {'ok': cost == 0 and not notes, 'cost': cost, 'renumber': None, 'moves': [], 'problems': [],
              'lines': [], 'cables': cables, 'steps': [], 'renumber_steps': []}
    if result['ok']:
        return result
    problems = _diagnosis(ring, heard, cables, carrier_keys, identity) + notes
    moves, moved = _moves(ring, cables, targets, pairs, carrier_keys)

    # A renumbering of fabric_host_index (the head keeps 1): every order when the ring is small, else the order
    # the cables describe.
    orders = ([[identity[0], *rest] for rest in itertools.permutations(identity[1:])]
              if len(identity) <= RENUMBER_ALL_UP_TO else [o for o in [_walk_order(ring, cables)] if o])
    best = None
    for order in orders:
        if order == identity:
            continue
        order_cost, order_pairs = _assign(cables, ring.targets(order))
        if order_cost < cost and (best is None or order_cost < best[0]):
            best = (order_cost, order, order_pairs)

    lines = list(problems)
    swap = _swap_summary(ring, moved)
    if best is not None:
        order_cost, order, order_pairs = best
        renumber = {host: order.index(host) + 1 for host in order}
        order_moves, result['renumber_steps'] = _moves(ring, cables, ring.targets(order), order_pairs, carrier_keys)
        result['renumber'] = renumber
        lines.append(f'Cheapest fix: renumber the nodes ({order_cost} cable end(s) to move instead of {cost}): set '
                     'fabric_host_index in the inventory (host_vars), list the workers group in the same order (the '
                     'ranks follow it), then run site.yml again:')
        lines.extend(f'  fabric_host_index: {renumber[host]}   # {host} (now {identity.index(host) + 1})'
                     for host in order if renumber[host] != identity.index(host) + 1)
        lines.extend(f'  {line}' for line in order_moves)
        lines.append(f'Or keep the numbering and move {cost} cable end(s):')
    else:
        lines.append(f'Fewest cable moves ({cost} cable end(s)): take out every end named, then plug each where it '
                     'goes, and run the play again:')
    if swap:
        lines.append(f'  ({swap})')
    lines.extend(f'  {line}' for line in moves)
    lines.append('  (the ring: ' + '; '.join(f'{ring.short(end0)} -> {ring.short(end1)}' for end0, end1 in targets)
                 + ')')
    result.update(problems=problems, moves=moves, lines=lines, steps=moved)
    return result
