# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the fabric filters (plugins/filter/fabric.py)."""

from __future__ import annotations

import copy

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfold.cluster.plugins.filter import fabric
from ansible_collections.sparkfold.cluster.plugins.filter.fabric import (
    FilterModule,
    fabric_plan,
    nccl_addr_range,
    nccl_ib_hca,
    roce_gid_index,
)

RAIL0 = {
    'name': 'rail0',
    'interface': 'enp1s0f1np1',
    'cidr': '192.168.100.0/24',
    'rdma_device': 'rocep1s0f1',
}
RAIL1 = {
    'name': 'rail1',
    'interface': 'enP2p1s0f1np1',
    'cidr': '192.168.101.0/24',
    'rdma_device': 'roceP2p1s0f1',
}


def rails(*overrides):
    """The NVIDIA default pair of rails, each dict updated with the matching override."""
    result = [copy.deepcopy(RAIL0), copy.deepcopy(RAIL1)]
    for rail, override in zip(result, overrides):
        rail.update(override)
    return result


def rail(**fields):
    result = copy.deepcopy(RAIL0)
    result.update(fields)
    return result


def error_of(func, *args, **kwargs):
    with pytest.raises(AnsibleFilterError) as excinfo:
        func(*args, **kwargs)
    return str(excinfo.value)


# --------------------------------------------------------------------------- registration


def test_filters_are_registered():
    assert FilterModule().filters() == {
        'fabric_plan': fabric_plan,
        'fabric_plan_problems': fabric.fabric_plan_problems,
        'roce_gid_index': roce_gid_index,
        'nccl_ib_hca': nccl_ib_hca,
        'nccl_addr_range': nccl_addr_range,
        'fabric_addresses': fabric.fabric_addresses,
        'outside_rails': fabric.outside_rails,
        'fabric_links': fabric.fabric_links,
        'fabric_ring_cabling': fabric.fabric_ring_cabling,
        'weights_sources': fabric.weights_sources,
        'fabric_file_differs': fabric.fabric_file_differs,
    }


# --------------------------------------------------------------------------- fabric_plan: success


def test_fabric_plan_first_host_of_default_pair():
    assert fabric_plan(rails(), 1) == [
        {
            'name': 'rail0',
            'interface': 'enp1s0f1np1',
            'rdma_device': 'rocep1s0f1',
            'cidr': '192.168.100.0/24',
            'address': '192.168.100.1',
            'prefix': 24,
            'address_cidr': '192.168.100.1/24',
            'network': '192.168.100.0',
            'mtu': 9000,
        },
        {
            'name': 'rail1',
            'interface': 'enP2p1s0f1np1',
            'rdma_device': 'roceP2p1s0f1',
            'cidr': '192.168.101.0/24',
            'address': '192.168.101.1',
            'prefix': 24,
            'address_cidr': '192.168.101.1/24',
            'network': '192.168.101.0',
            'mtu': 9000,
        },
    ]


def test_fabric_plan_second_host_gets_second_address_on_every_rail():
    plan = fabric_plan(rails(), 2)
    assert [entry['address_cidr'] for entry in plan] == ['192.168.100.2/24', '192.168.101.2/24']


def test_fabric_plan_does_not_modify_its_input():
    given = rails()
    fabric_plan(given, 1)
    assert given == rails()


@pytest.mark.parametrize(('cidr', 'index', 'address'), [
    ('192.168.100.0/24', 254, '192.168.100.254'),   # last usable, broadcast .255 skipped
    ('172.16.0.0/16', 256, '172.16.1.0'),           # .1.0 is a host address in a /16
    ('172.16.0.0/16', 300, '172.16.1.44'),
    ('10.77.0.0/30', 1, '10.77.0.1'),                # network address .0 skipped
    ('10.77.0.0/30', 2, '10.77.0.2'),
    ('10.77.0.0/31', 1, '10.77.0.0'),                # RFC 3021: both /31 addresses usable
    ('10.77.0.0/31', 2, '10.77.0.1'),
])
def test_fabric_plan_index_th_usable_host(cidr, index, address):
    plan = fabric_plan([rail(cidr=cidr)], index)
    prefix = int(cidr.split('/')[1])
    assert plan[0]['address'] == address
    assert plan[0]['prefix'] == prefix
    assert plan[0]['address_cidr'] == f'{address}/{prefix}'
    assert plan[0]['network'] == cidr.split('/')[0]
    assert plan[0]['cidr'] == cidr


def test_fabric_plan_normalises_netmask_and_whitespace():
    plan = fabric_plan([rail(cidr=' 192.168.100.0/255.255.255.0 ')], 1)
    assert plan[0]['cidr'] == '192.168.100.0/24'
    assert plan[0]['prefix'] == 24
    assert plan[0]['address_cidr'] == '192.168.100.1/24'


@pytest.mark.parametrize('missing', [None, '', '  '])
def test_fabric_plan_rdma_device_is_optional(missing):
    plan = fabric_plan([rail(rdma_device=missing)], 1)
    assert plan[0]['rdma_device'] is None


def test_fabric_plan_rdma_device_absent():
    given = rail()
    del given['rdma_device']
    assert fabric_plan([given], 1)[0]['rdma_device'] is None


def test_fabric_plan_ignores_unknown_rail_keys():
    plan = fabric_plan([rail(comment='QSFP port 1, lower twin')], 1)
    assert 'comment' not in plan[0]


def test_fabric_plan_accepts_decimal_strings():
    plan = fabric_plan(rails(), '2', mtu='1500', min_hosts='2')
    assert [entry['address'] for entry in plan] == ['192.168.100.2', '192.168.101.2']
    assert [entry['mtu'] for entry in plan] == [1500, 1500]


@pytest.mark.parametrize('mtu', [576, 1500, 9000, 9216])
def test_fabric_plan_mtu_bounds_accepted(mtu):
    assert [entry['mtu'] for entry in fabric_plan(rails(), 1, mtu=mtu)] == [mtu, mtu]


def test_fabric_plan_min_hosts_one_allows_single_host_slash_31():
    plan = fabric_plan([rail(cidr='10.77.0.0/31')], 1, min_hosts=1)
    assert plan[0]['address'] == '10.77.0.0'


@pytest.mark.parametrize('management', [
    None,
    [],
    ['10.0.0.0/24'],
    '10.0.0.0/24',                          # a single CIDR string
    ['10.0.0.5/24', '', None],               # host bits allowed, blanks skipped
    ['fd00::/64'],                           # IPv6 never overlaps an IPv4 rail
    ['192.168.102.0/24', '192.168.99.0/24'],  # touching but not overlapping
])
def test_fabric_plan_disjoint_management_networks(management):
    plan = fabric_plan(rails(), 1, management_cidrs=management)
    assert [entry['address'] for entry in plan] == ['192.168.100.1', '192.168.101.1']


def test_fabric_plan_adjacent_rails_do_not_overlap():
    plan = fabric_plan(rails({'cidr': '10.77.0.0/25'}, {'cidr': '10.77.0.128/25'}), 1)
    assert [entry['address'] for entry in plan] == ['10.77.0.1', '10.77.0.129']


def test_fabric_plan_four_rails():
    given = [
        {'name': f'rail{n}', 'interface': f'if{n}', 'cidr': f'192.168.10{n}.0/24', 'rdma_device': f'dev{n}'}
        for n in range(4)
    ]
    plan = fabric_plan(given, 3)
    assert [entry['address'] for entry in plan] == [
        '192.168.100.3', '192.168.101.3', '192.168.102.3', '192.168.103.3']


# --------------------------------------------------------------------------- fabric_plan: errors


@pytest.mark.parametrize(('given', 'message'), [
    ([], 'fabric_plan: rails is empty; at least one rail (CX7 twin) is needed'),
    (None, 'fabric_plan: rails must be a list of rail dicts, got NoneType'),
    ('rail0', 'fabric_plan: rails must be a list of rail dicts, got str'),
    (RAIL0, 'fabric_plan: rails must be a list of rail dicts, got dict'),
])
def test_fabric_plan_rejects_missing_rails(given, message):
    assert error_of(fabric_plan, given, 1) == message


def test_fabric_plan_rejects_non_dict_rail():
    assert error_of(fabric_plan, [RAIL0, 'rail1'], 1) == (
        "rails[1] must be a dict with name, interface and cidr, got 'rail1'")


@pytest.mark.parametrize(('fields', 'message'), [
    ({'name': None}, 'rails[0]: name is missing or not a string'),
    ({'name': ''}, 'rails[0]: name is missing or not a string'),
    ({'name': 7}, 'rails[0]: name is missing or not a string'),
    ({'interface': None}, 'rail0: interface is missing or not a string'),
    ({'interface': ['enp1s0f1np1']}, 'rail0: interface is missing or not a string'),
])
def test_fabric_plan_rejects_missing_name_or_interface(fields, message):
    assert error_of(fabric_plan, [rail(**fields)], 1) == message


@pytest.mark.parametrize(('cidr', 'message'), [
    (None, 'rail0 (enp1s0f1np1): cidr is missing'),
    ('', 'rail0 (enp1s0f1np1): cidr is missing'),
    (24, ("rail0 (enp1s0f1np1): cidr '24' is not a valid IPv4 network "
          '(expected a string such as 192.168.100.0/24)')),
    ('192.168.100.0', ("rail0 (enp1s0f1np1): cidr '192.168.100.0' is not a valid IPv4 network: "
                       'it has no prefix length (write it as network/prefix, for example 192.168.100.0/24)')),
    ('192.168.300.0/24', "rail0 (enp1s0f1np1): cidr '192.168.300.0/24' is not a valid IPv4 network"),
    ('192.168.100.0/33', "rail0 (enp1s0f1np1): cidr '192.168.100.0/33' is not a valid IPv4 network"),
    ('rail0-subnet/24', "rail0 (enp1s0f1np1): cidr 'rail0-subnet/24' is not a valid IPv4 network"),
    ('fd00:100::/64', ("rail0 (enp1s0f1np1): cidr 'fd00:100::/64' is an IPv6 network; rails must be "
                       'IPv4 (RoCE v2 uses the IPv4-mapped GID ::ffff:<ipv4>)')),
])
def test_fabric_plan_rejects_invalid_cidr(cidr, message):
    assert error_of(fabric_plan, [rail(cidr=cidr)], 1) == message


@pytest.mark.parametrize(('cidr', 'network'), [
    ('192.168.100.1/24', '192.168.100.0/24'),
    ('192.168.101.77/23', '192.168.100.0/23'),
    ('10.77.0.3/30', '10.77.0.0/30'),
])
def test_fabric_plan_rejects_host_bits_and_names_the_network(cidr, network):
    assert error_of(fabric_plan, [rail(cidr=cidr)], 1) == (
        f"rail0 (enp1s0f1np1): cidr '{cidr}' has host bits set; the network address is {network}")


def test_fabric_plan_rejects_slash_32():
    assert error_of(fabric_plan, [rail(cidr='192.168.100.7/32')], 1, min_hosts=1) == (
        'rail0 (enp1s0f1np1): 192.168.100.7/32 is a single address; a rail subnet must hold '
        'both ends of the link (use a /31 or wider)')


def test_fabric_plan_rejects_index_beyond_subnet():
    assert error_of(fabric_plan, [rail(cidr='192.168.100.0/30')], 3) == (
        'rail0 (enp1s0f1np1): 192.168.100.0/30 holds 2 host addresses; host index 3 needs at least 3')


def test_fabric_plan_rejects_index_beyond_slash_24():
    assert error_of(fabric_plan, rails(), 255) == (
        'rail0 (enp1s0f1np1): 192.168.100.0/24 holds 254 host addresses; '
        'host index 255 needs at least 255')


def test_fabric_plan_rejects_index_beyond_slash_31():
    assert error_of(fabric_plan, [rail(cidr='10.77.0.0/31')], 3) == (
        'rail0 (enp1s0f1np1): 10.77.0.0/31 holds 2 host addresses; host index 3 needs at least 3')


def test_fabric_plan_min_hosts_applies_to_every_index():
    assert error_of(fabric_plan, rails({}, {'cidr': '10.77.0.0/30'}), 1, min_hosts=4) == (
        'rail1 (enP2p1s0f1np1): 10.77.0.0/30 holds 2 host addresses; min_hosts=4 needs at least 4')


def test_fabric_plan_rejects_overlapping_rails_naming_both():
    given = rails({}, {'cidr': '192.168.100.0/24'})
    assert error_of(fabric_plan, given, 1) == (
        'rail0 (enp1s0f1np1) 192.168.100.0/24 overlaps rail1 (enP2p1s0f1np1) 192.168.100.0/24; '
        'each CX7 twin needs its own subnet (one subnet on both twins breaks routing and NCCL)')


def test_fabric_plan_rejects_rail_inside_another_rail():
    given = rails({'cidr': '192.168.100.0/23'}, {})
    assert error_of(fabric_plan, given, 1) == (
        'rail0 (enp1s0f1np1) 192.168.100.0/23 overlaps rail1 (enP2p1s0f1np1) 192.168.101.0/24; '
        'each CX7 twin needs its own subnet (one subnet on both twins breaks routing and NCCL)')


@pytest.mark.parametrize(('management', 'culprit', 'network', 'mgmt'), [
    (['192.168.0.0/16'], 'rail0 (enp1s0f1np1)', '192.168.100.0/24', '192.168.0.0/16'),
    ('192.168.101.20/24', 'rail1 (enP2p1s0f1np1)', '192.168.101.0/24', '192.168.101.0/24'),
    (['10.0.0.0/8', '192.168.101.128/25'], 'rail1 (enP2p1s0f1np1)', '192.168.101.0/24',
     '192.168.101.128/25'),
])
def test_fabric_plan_rejects_overlap_with_management(management, culprit, network, mgmt):
    assert error_of(fabric_plan, rails(), 1, management_cidrs=management) == (
        f'{culprit}: {network} overlaps management network {mgmt}; the fabric subnets must be '
        'disjoint from the management network, or the kernel routes one network\'s traffic '
        "through the other's interface")


@pytest.mark.parametrize(('management', 'message'), [
    (['10.0.0.0/24', 'lan'], "management_cidrs: 'lan' is not a valid IP network"),
    (['10.0.0.0/40'], "management_cidrs: '10.0.0.0/40' is not a valid IP network"),
    ({'lan': '10.0.0.0/24'}, 'management_cidrs must be a list of CIDRs, got dict'),
    (10, 'management_cidrs must be a list of CIDRs, got int'),
])
def test_fabric_plan_rejects_invalid_management(management, message):
    assert error_of(fabric_plan, rails(), 1, management_cidrs=management) == message


def test_fabric_plan_rejects_shared_interface():
    given = rails({}, {'interface': 'enp1s0f1np1'})
    assert error_of(fabric_plan, given, 1) == (
        'rails rail0 and rail1 both use interface enp1s0f1np1; each rail needs its own CX7 twin')


def test_fabric_plan_rejects_shared_name():
    given = rails({}, {'name': 'rail0'})
    assert error_of(fabric_plan, given, 1) == (
        "rails rail0 (enp1s0f1np1) and rail0 (enP2p1s0f1np1) share the name 'rail0'; "
        'rail names must be unique')


def test_fabric_plan_rejects_shared_rdma_device():
    given = rails({}, {'rdma_device': 'rocep1s0f1'})
    assert error_of(fabric_plan, given, 1) == (
        'rails rail0 (enp1s0f1np1) and rail1 (enP2p1s0f1np1) both use rdma_device rocep1s0f1; '
        'each CX7 twin has its own RDMA device')


@pytest.mark.parametrize('device', ['=rocep1s0f1', 'rocep1s0f1,roceP2p1s0f1', 'roce p1', 3])
def test_fabric_plan_rejects_bad_rdma_device(device):
    assert error_of(fabric_plan, [rail(rdma_device=device)], 1) == (
        f"rail0 (enp1s0f1np1): rdma_device '{device}' is not an RDMA device name (such as rocep1s0f1)")


@pytest.mark.parametrize(('index', 'message'), [
    (0, 'index must be the 1-based position of the host in the cluster (>= 1), got 0'),
    (-1, 'index must be the 1-based position of the host in the cluster (>= 1), got -1'),
    ('0', 'index must be the 1-based position of the host in the cluster (>= 1), got 0'),
    (True, 'index must be an integer, got boolean True'),
    (1.5, "index must be an integer, got '1.5'"),
    ('first', "index must be an integer, got 'first'"),
    (None, "index must be an integer, got 'None'"),
])
def test_fabric_plan_rejects_bad_index(index, message):
    assert error_of(fabric_plan, rails(), index) == message


@pytest.mark.parametrize(('mtu', 'message'), [
    (575, 'mtu 575 is outside 576..9216 (use 9000 on both ends of every rail)'),
    (9217, 'mtu 9217 is outside 576..9216 (use 9000 on both ends of every rail)'),
    (0, 'mtu 0 is outside 576..9216 (use 9000 on both ends of every rail)'),
    ('jumbo', "mtu must be an integer, got 'jumbo'"),
    (False, 'mtu must be an integer, got boolean False'),
])
def test_fabric_plan_rejects_bad_mtu(mtu, message):
    assert error_of(fabric_plan, rails(), 1, mtu=mtu) == message


@pytest.mark.parametrize(('min_hosts', 'message'), [
    (0, 'min_hosts must be >= 1, got 0'),
    ('two', "min_hosts must be an integer, got 'two'"),
])
def test_fabric_plan_rejects_bad_min_hosts(min_hosts, message):
    assert error_of(fabric_plan, rails(), 1, min_hosts=min_hosts) == message


def test_fabric_plan_checks_rails_before_arguments():
    # An empty rail list is reported even when the other arguments are wrong too.
    assert error_of(fabric_plan, [], 0, mtu=1) == (
        'fabric_plan: rails is empty; at least one rail (CX7 twin) is needed')


def test_filters_report_missing_netaddr(monkeypatch):
    monkeypatch.setattr(fabric, 'NETADDR_IMPORT_ERROR', ImportError('No module named netaddr'))
    for func, args in (
        (fabric_plan, (rails(), 1)),
        (roce_gid_index, ({}, '192.168.100.1')),
        (nccl_addr_range, (rails(),)),
    ):
        assert error_of(func, *args) == (
            f'{func.__name__} requires the Python library netaddr on the Ansible controller '
            '(pip install netaddr): No module named netaddr')
    # nccl_ib_hca does no address math and works without netaddr.
    assert nccl_ib_hca(rails()) == '=rocep1s0f1,roceP2p1s0f1'


# --------------------------------------------------------------------------- roce_gid_index

IPV4_GIDS = {
    '192.168.100.1': {'device': 'rocep1s0f1', 'port': 1, 'index': 3,
                      'netdev': 'enp1s0f1np1', 'gid': '::ffff:192.168.100.1'},
    '192.168.101.1': {'device': 'roceP2p1s0f1', 'port': 1, 'index': 4,
                      'netdev': 'enP2p1s0f1np1', 'gid': '::ffff:192.168.101.1'},
}


@pytest.mark.parametrize(('address', 'index'), [
    ('192.168.100.1', 3),
    ('192.168.101.1', 4),
    ('192.168.101.1/24', 4),    # an address_cidr from fabric_plan
    (' 192.168.100.1 ', 3),
])
def test_roce_gid_index_found(address, index):
    assert roce_gid_index(IPV4_GIDS, address) == index


def test_roce_gid_index_checks_device_when_given():
    assert roce_gid_index(IPV4_GIDS, '192.168.100.1', device='rocep1s0f1') == 3
    assert roce_gid_index(IPV4_GIDS, '192.168.100.1', device='') == 3
    assert error_of(roce_gid_index, IPV4_GIDS, '192.168.100.1', device='roceP2p1s0f1') == (
        'the RoCE v2 GID of 192.168.100.1 is on rocep1s0f1 (index 3), not roceP2p1s0f1; '
        'the address sits on the wrong CX7 twin')


def test_roce_gid_index_accepts_string_index_and_skips_unparseable_keys():
    gids = {'not-an-ip': {'index': 9}, '192.168.100.1': {'device': 'rocep1s0f1', 'index': '5'}}
    assert roce_gid_index(gids, '192.168.100.1') == 5


def test_roce_gid_index_not_found():
    assert error_of(roce_gid_index, IPV4_GIDS, '192.168.100.2') == (
        'no RoCE v2 GID carries 192.168.100.2; is the address applied to the CX7 netdev? '
        '(IPv4 addresses that have a RoCE v2 GID: 192.168.100.1, 192.168.101.1)')


@pytest.mark.parametrize('gids', [{}, None])
def test_roce_gid_index_not_found_in_empty_facts(gids):
    assert error_of(roce_gid_index, gids, '192.168.100.1/24') == (
        'no RoCE v2 GID carries 192.168.100.1; is the address applied to the CX7 netdev? '
        '(IPv4 addresses that have a RoCE v2 GID: none)')


@pytest.mark.parametrize(('gids', 'address', 'message'), [
    ([], '192.168.100.1',
     'roce_gid_index: ipv4_gids must be the ipv4_gids dict of the RoCE facts, got list'),
    (IPV4_GIDS, '192.168.100.300', "roce_gid_index: '192.168.100.300' is not an IPv4 address"),
    (IPV4_GIDS, 'fd00::1', "roce_gid_index: 'fd00::1' is not an IPv4 address"),
    (IPV4_GIDS, '', "roce_gid_index: '' is not an IPv4 address"),
    (IPV4_GIDS, None, "roce_gid_index: 'None' is not an IPv4 address"),
    ({'192.168.100.1': {'device': 'rocep1s0f1'}}, '192.168.100.1',
     "roce_gid_index: the ipv4_gids entry for 192.168.100.1 has no index: '{'device': 'rocep1s0f1'}'"),
    ({'192.168.100.1': 3}, '192.168.100.1',
     "roce_gid_index: the ipv4_gids entry for 192.168.100.1 has no index: '3'"),
    ({'192.168.100.1': {'index': 'three'}}, '192.168.100.1',
     "roce_gid_index: the GID index of 192.168.100.1 must be an integer, got 'three'"),
    ({'192.168.100.1': {'index': -1}}, '192.168.100.1',
     'roce_gid_index: the GID index of 192.168.100.1 must be >= 0, got -1'),
])
def test_roce_gid_index_errors(gids, address, message):
    assert error_of(roce_gid_index, gids, address) == message


# --------------------------------------------------------------------------- nccl_ib_hca


def test_nccl_ib_hca_lists_both_twins_exactly():
    assert nccl_ib_hca(rails()) == '=rocep1s0f1,roceP2p1s0f1'


def test_nccl_ib_hca_keeps_rail_order_and_accepts_a_plan():
    assert nccl_ib_hca(fabric_plan(list(reversed(rails())), 1)) == '=roceP2p1s0f1,rocep1s0f1'


def test_nccl_ib_hca_single_rail():
    assert nccl_ib_hca([RAIL0]) == '=rocep1s0f1'


@pytest.mark.parametrize('missing', [None, ''])
def test_nccl_ib_hca_rejects_rail_without_device(missing):
    assert error_of(nccl_ib_hca, rails({}, {'rdma_device': missing})) == (
        'nccl_ib_hca: rail1 (enP2p1s0f1np1) has no rdma_device; NCCL_IB_HCA must list every '
        'CX7 twin, else NCCL runs at half bandwidth')


def test_nccl_ib_hca_rejects_plan_entry_without_device():
    plan = fabric_plan(rails({}, {'rdma_device': None}), 1)
    assert 'rail1 (enP2p1s0f1np1) has no rdma_device' in error_of(nccl_ib_hca, plan)


def test_nccl_ib_hca_names_unnamed_rail_by_position():
    assert error_of(nccl_ib_hca, [RAIL0, {'cidr': '192.168.101.0/24'}]) == (
        'nccl_ib_hca: rails[1] has no rdma_device; NCCL_IB_HCA must list every CX7 twin, '
        'else NCCL runs at half bandwidth')


@pytest.mark.parametrize(('given', 'message'), [
    ([], 'nccl_ib_hca: rails is empty; at least one rail (CX7 twin) is needed'),
    ('rocep1s0f1', 'nccl_ib_hca: rails must be a list of rail dicts, got str'),
    ([RAIL0, 'roceP2p1s0f1'],
     "nccl_ib_hca: rails[1] must be a dict with rdma_device, got 'roceP2p1s0f1'"),
    (rails({}, {'rdma_device': 'rocep1s0f1'}),
     ('nccl_ib_hca: rail1 (enP2p1s0f1np1) repeats rdma_device rocep1s0f1; '
     'each rail must name its own twin')),
    (rails({'rdma_device': '^mlx5'}),
     ("nccl_ib_hca: rail0 (enp1s0f1np1): rdma_device '^mlx5' is not an RDMA device name "
     '(such as rocep1s0f1)')),
    (rails({'rdma_device': 'rocep1s0f1:1'}),
     ("nccl_ib_hca: rail0 (enp1s0f1np1): rdma_device 'rocep1s0f1:1' is not an RDMA device name "
     '(such as rocep1s0f1)')),
])
def test_nccl_ib_hca_errors(given, message):
    assert error_of(nccl_ib_hca, given) == message


# --------------------------------------------------------------------------- nccl_addr_range


@pytest.mark.parametrize(('given', 'expected'), [
    (rails(), '192.168.100.0/23'),
    (list(reversed(rails())), '192.168.100.0/23'),
    ([RAIL0], '192.168.100.0/24'),
    (rails({}, {'cidr': '192.168.102.0/24'}), '192.168.100.0/22'),   # covers .101 and .103 too
    (rails({'cidr': '192.168.101.0/24'}, {'cidr': '192.168.102.0/24'}), '192.168.100.0/22'),
    (['10.77.0.0/25', '10.77.0.128/25'], '10.77.0.0/24'),
    (['10.77.0.0/31', '10.77.0.2/31'], '10.77.0.0/30'),
    (['10.0.0.0/24', '192.168.100.0/24'], '0.0.0.0/0'),
])
def test_nccl_addr_range_smallest_covering_network(given, expected):
    assert nccl_addr_range(given) == expected


def test_nccl_addr_range_accepts_a_plan():
    assert nccl_addr_range(fabric_plan(rails(), 2)) == '192.168.100.0/23'


@pytest.mark.parametrize(('given', 'message'), [
    ([], 'nccl_addr_range: rails is empty; at least one rail (CX7 twin) is needed'),
    ({'cidr': '192.168.100.0/24'}, 'nccl_addr_range: rails must be a list of rail dicts, got dict'),
    ([RAIL0, 42], "nccl_addr_range: rails[1] must be a rail dict or a CIDR string, got '42'"),
    (rails({}, {'cidr': None}), 'nccl_addr_range: rail1 (enP2p1s0f1np1): cidr is missing'),
    (rails({'cidr': '192.168.100.1/24'}),
     ("nccl_addr_range: rail0 (enp1s0f1np1): cidr '192.168.100.1/24' has host bits set; "
     'the network address is 192.168.100.0/24')),
    (['192.168.100.0/24', 'fd00::/64'],
     ("nccl_addr_range: rails[1]: cidr 'fd00::/64' is an IPv6 network; rails must be IPv4 "
     '(RoCE v2 uses the IPv4-mapped GID ::ffff:<ipv4>)')),
    (['192.168.100.0/24', 'nope/24'], "nccl_addr_range: rails[1]: cidr 'nope/24' is not a valid IPv4 network"),
])
def test_nccl_addr_range_errors(given, message):
    assert error_of(nccl_addr_range, given) == message


def test_fabric_addresses_of_a_worker():
    assert fabric.fabric_addresses(2, rails()) == ['192.168.100.2', '192.168.101.2']


def test_fabric_addresses_keeps_fabric_plan_checks():
    with pytest.raises(AnsibleFilterError, match='overlaps management network'):
        fabric.fabric_addresses(2, rails(), management_cidrs=['192.168.100.0/23'])


def test_outside_rails_returns_everything_but_fabric_addresses():
    given = ['192.168.100.2', '192.168.101.2', '*', 'spark-b', '10.0.0.22', '192.168.100.0/24', '8.8.8.8',
             '192.168.102.2']
    assert fabric.outside_rails(given, rails()) == [
        '*', 'spark-b', '10.0.0.22', '192.168.100.0/24', '8.8.8.8', '192.168.102.2']


def test_outside_rails_of_fabric_addresses_is_empty():
    assert fabric.outside_rails(['192.168.100.1', '192.168.101.254'], rails()) == []


def test_outside_rails_wants_a_list():
    with pytest.raises(AnsibleFilterError, match='expected a list of addresses, got str'):
        fabric.outside_rails('192.168.100.2', rails())


NAMES = {'rails': 'fabric_rails', 'index': 'fabric_host_index', 'mtu': 'fabric_mtu',
         'management_cidrs': 'fabric_management_cidrs', 'min_hosts': 'fabric_group'}


@pytest.mark.parametrize(('kwargs', 'expected'), [
    ({'mtu': '90000'}, 'fabric_mtu: mtu 90000 is outside 576..9216'),
    ({'mtu': '9k'}, "fabric_mtu: mtu must be an integer, got '9k'"),
    ({'index': 0}, 'fabric_host_index: index must be the 1-based position'),
    ({'management_cidrs': ['10.0.0.0/33']}, "fabric_management_cidrs: management_cidrs: '10.0.0.0/33' is not"),
    ({'rails': rails({'cidr': '192.168.100.0/33'})},
     "fabric_rails: rail0 (enp1s0f1np1): cidr '192.168.100.0/33' is not a valid IPv4 network"),
    ({'rails': rails({}, {'cidr': '192.168.100.0/25'})}, 'fabric_rails: rail0 (enp1s0f1np1) 192.168.100.0/24 overlaps'),
])
def test_fabric_plan_problems_names_the_variable_at_fault(kwargs, expected):
    args = {'rails': rails(), 'index': 1, 'mtu': 9000, 'management_cidrs': []}
    args.update(kwargs)
    problems = fabric.fabric_plan_problems(args['rails'], args['index'], management_cidrs=args['management_cidrs'],
                                           mtu=args['mtu'], names=NAMES)
    assert len(problems) == 1
    assert problems[0].startswith(expected), problems


def test_fabric_plan_problems_is_empty_when_fabric_plan_accepts():
    assert fabric.fabric_plan_problems(rails(), '2', management_cidrs=['10.0.0.0/24'], mtu='9000', names=NAMES) == []


def test_fabric_plan_problems_without_names_uses_the_option_name():
    assert fabric.fabric_plan_problems(rails(), 1, mtu=100) == [
        'mtu: mtu 100 is outside 576..9216 (use 9000 on both ends of every rail)']


# --- fabric_file_differs ---------------------------------------------------

SAME = {'exists': True, 'type': 'file', 'mode': '0644', 'owner': 'root', 'group': 'root', 'content': 'A=1\n'}


def test_fabric_file_differs_is_false_when_the_write_would_change_nothing():
    assert fabric.fabric_file_differs(SAME, 'A=1\n', 'root', 'root', '0644') is False


@pytest.mark.parametrize('entry', [
    {'exists': False, 'type': 'absent'},
    dict(SAME, type='directory'),
    dict(SAME, content='A=1'),          # a newline lost counts
    dict(SAME, content='A=2\n'),
    dict(SAME, owner='spark'),
    dict(SAME, group='adm'),
    dict(SAME, mode='0600'),
])
def test_fabric_file_differs_on_any_difference_of_text_owner_group_or_mode(entry):
    assert fabric.fabric_file_differs(entry, 'A=1\n', 'root', 'root', '0644') is True


def test_fabric_file_differs_refuses_a_bad_mode_or_entry():
    with pytest.raises(AnsibleFilterError, match='mode 644 is not four octal digits'):
        fabric.fabric_file_differs(SAME, 'A=1\n', 'root', 'root', 644)
    with pytest.raises(AnsibleFilterError, match='expected an entry of fabric_facts files'):
        fabric.fabric_file_differs(None, 'A=1\n', 'root', 'root', '0644')
