# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The switchless ring: its address plan, its directed links, a mis-cabled ring explained, and
where each worker takes the weights from (plugins/filter/fabric.py)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfold.cluster.plugins.filter.fabric import (
    fabric_links,
    fabric_plan,
    fabric_plan_problems,
    fabric_ring_cabling,
    weights_sources,
)

PORTS = [
    {'name': 'port0', 'interface': 'enp1s0f0np0', 'rdma_device': 'rocep1s0f0'},
    {'name': 'port1', 'interface': 'enp1s0f1np1', 'rdma_device': 'rocep1s0f1'},
]
SWITCH_RAILS = [
    {'name': 'rail0', 'interface': 'enp1s0f1np1', 'cidr': '192.168.100.0/24', 'rdma_device': 'rocep1s0f1'},
    {'name': 'rail1', 'interface': 'enP2p1s0f1np1', 'cidr': '192.168.101.0/24', 'rdma_device': 'roceP2p1s0f1'},
]
HOSTS = ['spark-a', 'spark-b', 'spark-c', 'spark-d']


def ring_plan(index, count=4):
    return fabric_plan(PORTS, index, topology='ring', ring_cidr='10.10.0.0/16', min_hosts=count)


def ring_plans():
    return {host: ring_plan(i + 1) for i, host in enumerate(HOSTS)}


def test_ring_addresses_follow_the_published_plan():
    # jnardiello docs/fabric.md / cluster.env.example: FABRIC_TARGETS=("10.10.1.2 10.10.4.4"
    # "10.10.1.1 10.10.2.3" "10.10.2.2 10.10.3.4" "10.10.3.3 10.10.4.1")
    plans = ring_plans()
    assert [[p['address_cidr'] for p in plans[h]] for h in HOSTS] == [
        ['10.10.1.1/24', '10.10.4.1/24'], ['10.10.2.2/24', '10.10.1.2/24'],
        ['10.10.3.3/24', '10.10.2.3/24'], ['10.10.4.4/24', '10.10.3.4/24']]
    assert [[p['peer_address'] for p in plans[h]] for h in HOSTS] == [
        ['10.10.1.2', '10.10.4.4'], ['10.10.2.3', '10.10.1.1'],
        ['10.10.3.4', '10.10.2.2'], ['10.10.4.1', '10.10.3.3']]
    assert all(p['mtu'] == 9000 for h in HOSTS for p in plans[h])
    assert [p['interface'] for p in plans['spark-a']] == ['enp1s0f0np0', 'enp1s0f1np1']


def test_eight_directed_links_on_a_ring_and_every_peer_on_every_rail_otherwise():
    plans = ring_plans()
    links = [link for host in HOSTS for link in fabric_links(
        plans[host], [{'host': h, 'plan': plans[h]} for h in HOSTS if h != host])]
    assert len(links) == 8
    a_links = [(x['peer'], x['interface'], x['address']) for x in links[:2]]
    assert a_links == [('spark-b', 'enp1s0f0np0', '10.10.1.2'), ('spark-d', 'enp1s0f1np1', '10.10.4.4')]
    switch = {h: fabric_plan(SWITCH_RAILS, i + 1, min_hosts=4) for i, h in enumerate(HOSTS)}
    a_switch = fabric_links(switch['spark-a'], [{'host': h, 'plan': switch[h]} for h in HOSTS[1:]])
    assert len(a_switch) == 6
    assert (a_switch[0]['peer'], a_switch[0]['interface'], a_switch[0]['address']) == \
        ('spark-b', 'enp1s0f1np1', '192.168.100.2')


@pytest.mark.parametrize('kwargs, message', [
    ({'count': 2}, 'a ring needs at least 3 nodes'),
    ({'rails': PORTS[:1]}, 'exactly two ports'),
    ({'rails': [dict(PORTS[0], cidr='10.10.1.0/24'), PORTS[1]]}, 'has no cidr of its own'),
    ({'rails': [PORTS[0], dict(PORTS[1], interface='enp1s0f0np0')]}, 'must differ'),
    ({'ring_cidr': '10.10.1.0/24'}, 'must be wider than a /24'),
    ({'ring_cidr': '10.10.0.0/22'}, 'holds 3 cable subnets'),
    ({'management': ['10.10.7.5/24']}, 'overlaps management network'),
    ({'index': 5}, 'past the 4 nodes'),
])
def test_bad_ring_inputs_are_refused_with_a_reason(kwargs, message):
    with pytest.raises(AnsibleFilterError, match=message):
        fabric_plan(kwargs.get('rails', PORTS), kwargs.get('index', 1), kwargs.get('management'),
                    topology='ring', ring_cidr=kwargs.get('ring_cidr', '10.10.0.0/16'),
                    min_hosts=kwargs.get('count', 4))


def test_problems_name_the_variable_and_an_unknown_topology_is_refused():
    names = {'topology': 'fabric_topology', 'ring_cidr': 'fabric_ring_cidr'}
    assert fabric_plan_problems(PORTS, 1, topology='mesh', names=names)[0].startswith(
        "fabric_topology: topology must be one of pair, switch, ring, got 'mesh'")
    assert fabric_plan_problems(PORTS, 1, min_hosts=4, topology='ring', ring_cidr='10.10.0.0', names=names)[0] \
        .startswith('fabric_ring_cidr: ')
    assert fabric_plan_problems(PORTS, 1, min_hosts=4, topology='ring', ring_cidr='10.10.0.0/16') == []
    # pair and switch stay what they were
    assert fabric_plan(SWITCH_RAILS, 2) == fabric_plan(SWITCH_RAILS, 2, topology='switch')


RING = [{'host': h, 'ports': [{'name': 'port0', 'interface': 'enp1s0f0np0'},
                              {'name': 'port1', 'interface': 'enp1s0f1np1'}]} for h in HOSTS]


def seen(host, interface):
    return [{'host': host, 'interface': interface, 'mac': '02:00:00:00:00:01'}]


def good_observation():
    return {h: {'enp1s0f0np0': seen(HOSTS[(i + 1) % 4], 'enp1s0f1np1'),
                'enp1s0f1np1': seen(HOSTS[i - 1], 'enp1s0f0np0')} for i, h in enumerate(HOSTS)}


def test_a_well_cabled_ring_has_no_problem():
    assert fabric_ring_cabling(good_observation(), RING) == []


def test_swapped_cables_on_one_node_are_named_with_the_fix():
    observed = good_observation()
    # spark-b's two cables sit in each other's port: what `scripts/lab miscable swap` makes.
    observed['spark-a']['enp1s0f0np0'] = seen('spark-b', 'enp1s0f0np0')
    observed['spark-b'] = {'enp1s0f0np0': seen('spark-a', 'enp1s0f0np0'),
                           'enp1s0f1np1': seen('spark-c', 'enp1s0f1np1')}
    observed['spark-c']['enp1s0f1np1'] = seen('spark-b', 'enp1s0f1np1')
    problems = fabric_ring_cabling(observed, RING)
    assert problems[0] == ('spark-a port0 (enp1s0f0np0) faces spark-b port0 (enp1s0f0np0); '
                           'the ring wants spark-b port1 (enp1s0f1np1)')
    assert "  (spark-b: its two cables are in each other's port: swap them)" in problems
    assert [line for line in problems if line.startswith('  move: ')] == [
        '  move: spark-b port0 (enp1s0f0np0) -> spark-b port1 (enp1s0f1np1)  (the cable whose other end is in '
        'spark-a port0)',
        '  move: spark-b port1 (enp1s0f1np1) -> spark-b port0 (enp1s0f0np0)  (the cable whose other end is in '
        'spark-c port1)']
    assert problems[-1].startswith('  (the ring: spark-a port0 -> spark-b port1; spark-b port0 -> spark-c port1')


def test_a_diagonal_and_a_silent_port_are_explained():
    observed = good_observation()
    observed['spark-a']['enp1s0f0np0'] = seen('spark-c', 'enp1s0f1np1')
    observed['spark-d']['enp1s0f1np1'] = []
    problems = fabric_ring_cabling(observed, RING)
    assert problems[0] == ('spark-a port0 (enp1s0f0np0) faces spark-c port1 (enp1s0f1np1); '
                           'the ring wants spark-b port1 (enp1s0f1np1)')
    assert 'spark-d port1 (enp1s0f1np1) hears nobody, though spark-c port0 (enp1s0f0np0) hears it: the cable ' \
        'between them carries one direction only (a bad cable or transceiver: reseat or replace it)' in problems
    assert not any('swap them' in p for p in problems)


def test_the_lab_refusal_is_one_message_a_line():
    """The role joins the lines with newlines: every move on a line of its own."""
    observed = good_observation()
    observed['spark-d']['enp1s0f0np0'] = []
    observed['spark-a']['enp1s0f1np1'] = []
    lines = fabric_ring_cabling(observed, RING, {'spark-d': {'enp1s0f0np0': False}, 'spark-a': {'enp1s0f1np1': False}})
    assert all('\n' not in line and ';' not in line.split('(the ring:')[0] for line in lines)
    assert '  plug: a cable between spark-d port0 (enp1s0f0np0) and spark-a port1 (enp1s0f1np1)  (no link at either ' \
        'end: the cable is pulled)' in lines


def test_bad_ring_descriptions_are_refused():
    with pytest.raises(AnsibleFilterError, match='at least 3 nodes'):
        fabric_ring_cabling({}, RING[:2])
    with pytest.raises(AnsibleFilterError, match='spark-a is twice'):
        fabric_ring_cabling({}, [RING[0], RING[0], RING[1]])


def test_weights_relay_along_the_ring_and_come_from_the_head_otherwise():
    plans = ring_plans()
    ring = weights_sources(HOSTS, 'ring', plans)
    assert {h: (v['source'], v['addresses'], v['wave']) for h, v in ring.items()} == {
        'spark-b': ('spark-a', ['10.10.1.1'], 1),
        'spark-c': ('spark-b', ['10.10.2.2'], 2),
        'spark-d': ('spark-a', ['10.10.4.1'], 1),
    }
    switch = {h: fabric_plan(SWITCH_RAILS, i + 1, min_hosts=4) for i, h in enumerate(HOSTS)}
    sources = weights_sources(HOSTS, 'switch', switch)
    assert sources['spark-c'] == {'source': 'spark-a', 'addresses': ['192.168.100.1', '192.168.101.1'],
                                  'interfaces': ['enp1s0f1np1', 'enP2p1s0f1np1'], 'wave': 1}
    pair = {h: fabric_plan(SWITCH_RAILS, i + 1) for i, h in enumerate(HOSTS[:2])}
    assert weights_sources(HOSTS[:2], 'pair', pair)['spark-b']['addresses'] == ['192.168.100.1', '192.168.101.1']


def test_weights_sources_refuse_a_worker_without_a_link_to_its_source():
    plans = ring_plans()
    plans['spark-e'] = fabric_plan(SWITCH_RAILS, 1)  # on another fabric: no path from the head
    with pytest.raises(AnsibleFilterError, match='spark-e shares no fabric subnet with the nodes reached'):
        weights_sources([*HOSTS, 'spark-e'], 'ring', plans)
    # a dict of plans works as the list of {host, plan}
    assert fabric_links(plans['spark-a'], {'spark-b': plans['spark-b']})[0]['address'] == '10.10.1.2'


def test_doctor_pings_only_the_neighbour_on_each_ring_cable():
    from ansible_collections.sparkfold.cluster.plugins.filter.doctor import doctor_pings
    plans = ring_plans()
    pings = doctor_pings(plans['spark-a'], {h: plans[h] for h in HOSTS[1:]})
    assert [(p['peer'], p['interface'], p['address'], p['size']) for p in pings] == [
        ('spark-b', 'enp1s0f0np0', '10.10.1.2', 8972), ('spark-d', 'enp1s0f1np1', '10.10.4.4', 8972)]
