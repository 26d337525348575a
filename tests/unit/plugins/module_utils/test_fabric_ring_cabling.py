# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A ring's cabling judged from what its ports heard (module_utils/fabric_ring.py), whatever the mistake.

Every cabling of a four-node ring's eight ports that a technician can make (each port on one cable, or on
none: a pulled cable) is judged: the steps given, applied to the cables, give the ring; their count is the
least any assignment of the cables present to the ring's cables needs (checked by brute force); and a
renumbering is offered exactly when it needs fewer.
"""

from __future__ import annotations

import itertools
import random

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import fabric_ring

HOSTS = ('spark-a', 'spark-b', 'spark-c', 'spark-d')
P0, P1 = 'enp1s0f0np0', 'enp1s0f1np1'
RING = [{'host': h, 'ports': [{'name': 'port0', 'interface': P0}, {'name': 'port1', 'interface': P1}]} for h in HOSTS]
PORTS = [(h, p) for h in HOSTS for p in (P0, P1)]


def ring_cables(order=HOSTS):
    return {frozenset(((order[i], P0), (order[(i + 1) % len(order)], P1))) for i in range(len(order))}


def observe(cables, hosts=HOSTS):
    """What each port hears: the other end of its cable (a port without a cable hears nobody)."""
    heard = {h: {P0: [], P1: []} for h in hosts}
    for cable in cables:
        a, b = sorted(cable)
        heard[a[0]][a[1]].append({'host': b[0], 'interface': b[1], 'mac': '02:00:00:00:00:01'})
        heard[b[0]][b[1]].append({'host': a[0], 'interface': a[1], 'mac': '02:00:00:00:00:02'})
    return heard


def carrier_of(cables):
    cabled = {end for cable in cables for end in cable}
    return {h: {p: (h, p) in cabled for p in (P0, P1)} for h in HOSTS}


def apply(cables, steps):
    """Apply the steps as the message says: take out every end named first, then plug each where it goes."""
    result = [set(cable) for cable in cables]
    taken = [(next(c for c in result if source in c), source, dest) for source, dest in steps if source is not None]
    for cable, source, _dest in taken:
        cable.discard(source)
    for cable, _source, dest in taken:
        assert not any(dest in c for c in result), f'{dest} is still taken'
        cable.add(dest)
    result.extend(set(dest) for source, dest in steps if source is None)
    assert len({end for c in result for end in c}) == sum(len(c) for c in result), 'a port holds two cables'
    return {frozenset(cable) for cable in result}


def brute_cost(cables, order=HOSTS):
    targets = [set(t) for t in ring_cables(order)]
    best = None
    for chosen in itertools.permutations(range(len(targets)), len(cables)):
        cost = sum(2 - len(set(cable) & targets[t]) for cable, t in zip(cables, chosen))
        cost += 2 * (len(targets) - len(cables))
        best = cost if best is None else min(best, cost)
    return best


def matchings(ports):
    """Every partial matching of the ports (each port on at most one cable)."""
    if not ports:
        yield []
        return
    first, rest = ports[0], ports[1:]
    yield from matchings(rest)  # first has no cable
    for i, other in enumerate(rest):
        for tail in matchings(rest[:i] + rest[i + 1:]):
            yield [frozenset((first, other)), *tail]


ALL = list(matchings(PORTS))
AB = frozenset({('spark-a', P0), ('spark-b', P1)})  # the ring's first two cables
BC = frozenset({('spark-b', P0), ('spark-c', P1)})


def test_every_cabling_of_four_nodes_is_judged_and_its_fix_gives_the_ring():
    # 764 partial matchings of 8 ports: every swap, cross, diagonal, loop on one node and pulled cable.
    assert len(ALL) == 764
    wrong = 0
    for cables in ALL:
        result = fabric_ring.ring_cabling(observe(cables), RING, carrier_of(cables))
        if set(cables) == ring_cables():
            assert result['ok'] and result['lines'] == []
            continue
        wrong += 1
        assert not result['ok'] and result['lines']
        assert apply(result['cables'], result['steps']) == ring_cables(), cables
        assert result['cost'] == brute_cost(result['cables']), cables
        assert result['cost'] == sum(1 if src else 2 for src, _dest in result['steps'])
        renumbered = min(brute_cost(result['cables'], ['spark-a', *rest]) for rest in itertools.permutations(HOSTS[1:]))
        if renumbered < result['cost']:
            order = sorted(result['renumber'], key=result['renumber'].get)
            assert order[0] == 'spark-a'  # the head keeps index 1
            assert apply(result['cables'], result['renumber_steps']) == ring_cables(order)
            assert sum(1 if s else 2 for s, _d in result['renumber_steps']) == renumbered
        else:
            assert result['renumber'] is None
        moves = [line for line in result['lines'] if line.startswith(('  move: ', '  plug: '))]
        assert len(moves) == len(result['steps']) + len(result['renumber_steps'])
    assert wrong == 763


def test_a_swap_is_two_moves_and_named_a_swap():
    cables = (ring_cables() - {AB, BC}) \
        | {frozenset({('spark-a', P0), ('spark-b', P0)}), frozenset({('spark-b', P1), ('spark-c', P1)})}
    result = fabric_ring.ring_cabling(observe(cables), RING)
    assert result['cost'] == 2 and result['renumber'] is None
    assert "  (spark-b: its two cables are in each other's port: swap them)" in result['lines']


def test_nodes_in_the_wrong_places_are_renumbered_instead_of_moving_cables():
    # spark-b and spark-c cabled in each other's place: a -> c -> b -> d. Three cable ends would have to move.
    result = fabric_ring.ring_cabling(observe(ring_cables(['spark-a', 'spark-c', 'spark-b', 'spark-d'])), RING)
    assert result['renumber'] == {'spark-a': 1, 'spark-c': 2, 'spark-b': 3, 'spark-d': 4}
    assert result['renumber_steps'] == [] and result['cost'] == 3
    text = '\n'.join(result['lines'])
    assert 'Cheapest fix: renumber the nodes (0 cable end(s) to move instead of 3)' in text
    assert '  fabric_host_index: 2   # spark-c (now 3)' in result['lines']
    assert 'Or keep the numbering and move 3 cable end(s):' in text


def test_a_loop_on_one_node_is_named_as_a_loop():
    cables = (ring_cables() - {AB, BC}) \
        | {frozenset({('spark-b', P0), ('spark-b', P1)})}
    lines = fabric_ring.ring_cabling(observe(cables), RING, carrier_of(cables))['lines']
    assert lines[1] == ('spark-b port0 (enp1s0f0np0) and port1 (enp1s0f1np1) are cabled to each other: a loop on one '
                        'node; the ring wants spark-c port1 (enp1s0f1np1) and spark-a port0 (enp1s0f0np0) on them')
    assert lines[0] == ('spark-a port0 (enp1s0f0np0) has no link (no carrier): its cable to spark-b port1 '
                        '(enp1s0f1np1) is pulled, or the other end is down')


def test_a_pulled_cable_is_named_pulled_and_a_silent_peer_is_not():
    cables = ring_cables() - {frozenset({('spark-c', P0), ('spark-d', P1)})}
    pulled = fabric_ring.ring_cabling(observe(cables), RING, carrier_of(cables))
    assert pulled['lines'][0].startswith('spark-c port0 (enp1s0f0np0) has no link (no carrier): its cable to spark-d')
    assert '  plug: a cable between spark-c port0 (enp1s0f0np0) and spark-d port1 (enp1s0f1np1)  (no link at ' \
        'either end: the cable is pulled)' in pulled['lines']
    # the link is up at both ends, but spark-d is not in the run: not a pulled cable
    observed = observe(ring_cables())
    observed['spark-c'][P0] = []
    observed['spark-a'][P1] = []
    observed.pop('spark-d')
    silent = fabric_ring.ring_cabling(observed, RING, {'spark-c': {P0: True}, 'spark-a': {P1: True}})
    assert silent['lines'][0].startswith('spark-a port1 (enp1s0f1np1) has a link but hears no node of the ring')
    assert not any('pulled' in line for line in silent['lines'])


def test_ports_on_something_else_than_a_cable_are_refused():
    observed = observe(ring_cables())
    observed['spark-a'][P0].append({'host': 'spark-c', 'interface': P1})  # a switch between them
    observed['spark-b'][P0] = [{'host': 'spark-x', 'interface': 'eth9'}]
    result = fabric_ring.ring_cabling(observed, RING)
    assert not result['ok']
    text = '\n'.join(result['lines'])
    assert 'spark-a port0 (enp1s0f0np0) hears several ports' in text
    assert 'spark-b port0 (enp1s0f0np0) faces spark-x eth9, which is not a ring port' in text


@pytest.mark.parametrize('count', [3, 5, 8])
def test_other_ring_sizes_random_cablings(count):
    hosts = [f'n{i}' for i in range(count)]
    ring = [{'host': h, 'ports': [{'name': 'port0', 'interface': P0}, {'name': 'port1', 'interface': P1}]}
            for h in hosts]
    ports = [(h, p) for h in hosts for p in (P0, P1)]
    rng = random.Random(count)
    for _attempt in range(40):
        shuffled = rng.sample(ports, len(ports))
        cables = [frozenset(shuffled[i:i + 2]) for i in range(0, len(shuffled) - 2 * rng.randint(0, 1), 2)]
        heard = {h: {P0: [], P1: []} for h in hosts}
        for cable in cables:
            a, b = sorted(cable)
            heard[a[0]][a[1]].append({'host': b[0], 'interface': b[1]})
            heard[b[0]][b[1]].append({'host': a[0], 'interface': a[1]})
        result = fabric_ring.ring_cabling(heard, ring)
        want = {frozenset(((hosts[i], P0), (hosts[(i + 1) % count], P1))) for i in range(count)}
        if set(cables) == want:
            assert result['ok']
            continue
        assert apply(result['cables'], result['steps']) == want


def test_an_unusable_ring_description_is_an_error():
    with pytest.raises(fabric_ring.RingCablingError, match='at least 3 nodes'):
        fabric_ring.ring_cabling({}, RING[:2])
    with pytest.raises(fabric_ring.RingCablingError, match='must be'):
        fabric_ring.ring_cabling({}, [*RING[:2], {'host': 'x', 'ports': []}])
