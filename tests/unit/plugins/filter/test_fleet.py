# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet filters: the clusters of one inventory, what no fleet can be made from, each cluster against its own
recipe. Fed the lab inventories as Ansible's inventory loads them (a pair is a fleet of one), and made-up fleets."""

from __future__ import annotations

import copy
import pathlib

import pytest
import yaml
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.manager import VariableManager
from ansible_collections.sparkfold.cluster.plugins.filter.fleet import (
    fleet_cluster_of,
    fleet_clusters,
    fleet_limits,
    fleet_not_dispatched,
    fleet_problems,
    fleet_recap,
    fleet_recap_line,
    fleet_recipe_problems,
)
from ansible_collections.sparkfold.cluster.plugins.filter.recipe import recipe_check

REPO = pathlib.Path(__file__).resolve().parents[4]

RAILS_A = [{'name': 'rail0', 'interface': 'enp1s0f1np1', 'cidr': '192.168.100.0/24', 'rdma_device': 'rocep1s0f1'},
           {'name': 'rail1', 'interface': 'enP2p1s0f1np1', 'cidr': '192.168.101.0/24', 'rdma_device': 'roceP2p1s0f1'}]
RAILS_B = [dict(rail, cidr=rail['cidr'].replace('.10', '.11', 1)) for rail in RAILS_A]  # 192.168.110/111


def _inventory(path):
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(path)])
    variables = VariableManager(loader=loader, inventory=inventory)
    hostvars = {host.name: variables.get_vars(host=host, include_hostvars=False) for host in inventory.get_hosts()}
    return inventory.get_groups_dict(), hostvars


def _recipe(name):
    with open(REPO / 'roles' / 'recipe' / 'recipes' / f'{name}.yml', encoding='utf-8') as handle:
        return recipe_check(yaml.safe_load(handle), name)


def _fleet():
    """Two pairs: cluster_a (a1 head, a2) and cluster_b (b1 head, b2), each on rails of its own."""
    groups = {'all': ['a1', 'a2', 'b1', 'b2'], 'sparks': ['a1', 'a2', 'b1', 'b2'], 'head': ['a1', 'b1'],
              'workers': ['a2', 'b2'], 'cluster_a': ['a1', 'a2'], 'cluster_b': ['b1', 'b2']}
    hostvars = {}
    for host in groups['sparks']:
        name = 'cluster_' + host[0]
        hostvars[host] = {'fabric_group': name, 'fabric_rails': copy.deepcopy(RAILS_A if host[0] == 'a' else RAILS_B)}
    return groups, hostvars


def test_a_pair_is_a_fleet_of_one():
    groups, hostvars = _inventory(REPO / 'inventory' / 'lab')
    assert fleet_clusters(groups) == {'sparks': {'heads': ['spark-a'], 'workers': ['spark-b'],
                                                 'hosts': ['spark-a', 'spark-b']}}
    assert fleet_cluster_of(groups, 'spark-b') == 'sparks'
    assert fleet_problems(groups, hostvars) == []
    assert fleet_recipe_problems(fleet_clusters(groups), {h: dict(v, recipe_spec=_recipe('dsv41-flash-tp2-zig'))
                                                          for h, v in hostvars.items()}, ['spark-a', 'spark-b']) == []


def test_the_lab_fleet_is_two_pairs_on_rails_of_their_own():
    groups, hostvars = _inventory(REPO / 'inventory' / 'lab-fleet')
    assert fleet_clusters(groups) == {
        'cluster_zig': {'heads': ['spark-a'], 'workers': ['spark-b'], 'hosts': ['spark-a', 'spark-b']},
        'cluster_vllm': {'heads': ['spark-c'], 'workers': ['spark-d'], 'hosts': ['spark-c', 'spark-d']}}
    assert fleet_problems(groups, hostvars) == []
    assert [hostvars[host]['recipe_name'] for host in ('spark-b', 'spark-d')] == ['dsv41-flash-tp2-zig',
                                                                                  'dsv41-flash-tp2-vllm']


def test_each_cluster_is_its_own():
    groups, hostvars = _fleet()
    clusters = fleet_clusters(groups)
    assert clusters == {'cluster_a': {'heads': ['a1'], 'workers': ['a2'], 'hosts': ['a1', 'a2']},
                        'cluster_b': {'heads': ['b1'], 'workers': ['b2'], 'hosts': ['b1', 'b2']}}
    assert [fleet_cluster_of(groups, host) for host in ('a2', 'b1', 'nobody')] == ['cluster_a', 'cluster_b', '']
    assert fleet_problems(groups, hostvars) == []


def test_each_cluster_with_a_host_in_the_play_gets_its_limit():
    groups, _hostvars = _fleet()
    groups = dict(groups, sparks=[*groups['sparks'], 'spare'])
    # a cluster all in the play: its group; else its hosts in the play, in the play's order; a spare: no cluster
    assert fleet_limits(groups, ['b2', 'a1', 'a2', 'b1', 'spare']) == \
        {'cluster_a': 'cluster_a', 'cluster_b': 'cluster_b'}
    assert fleet_limits(groups, ['b2', 'a1', 'b1']) == {'cluster_a': 'a1', 'cluster_b': 'cluster_b'}
    assert fleet_limits(groups, ['a2', 'spare']) == {'cluster_a': 'a2'}
    assert fleet_limits(groups, ['spare']) == {}
    # a pair (no cluster_* group) is one cluster, whatever the play
    pair = {'all': ['s1', 's2', 'x'], 'sparks': ['s1', 's2', 'x'], 'head': ['s1'], 'workers': ['s2']}
    assert fleet_limits(pair, ['s1', 's2', 'x']) == {'sparks': 'sparks'}
    assert fleet_limits(pair, ['s2']) == {'sparks': 's2'}
    with pytest.raises(Exception, match='fleet_limits: expects a list of hosts'):
        fleet_limits(groups, 'a1')


def test_a_dispatched_run_leaves_its_hosts_out_of_its_later_plays():
    groups, _hostvars = _fleet()
    assert fleet_not_dispatched('sparks', groups) == 'sparks'
    groups['sparkfold_fleet_dispatched'] = ['a1', 'a2', 'b1', 'b2']
    assert fleet_not_dispatched('head', groups) == 'head:!sparkfold_fleet_dispatched'


def test_a_host_in_two_clusters_is_refused():
    groups, hostvars = _fleet()
    groups['cluster_b'].append('a2')
    assert 'a2 is in 2 clusters (cluster_a, cluster_b): a Spark belongs to one cluster' in \
        ' '.join(fleet_problems(groups, hostvars))


def test_a_cluster_without_a_head_or_with_two_is_refused():
    groups, hostvars = _fleet()
    groups['head'] = ['a1']
    groups['workers'] = ['a2', 'b1', 'b2']
    assert 'cluster_b has no head: put one of its hosts (b1, b2) in the group head (rank 0)' in \
        fleet_problems(groups, hostvars)
    groups['head'] = ['a1', 'a2', 'b1']
    groups['workers'] = ['b2']
    assert any(p.startswith('cluster_a has 2 heads (a1, a2)') for p in fleet_problems(groups, hostvars))


def test_a_spark_in_no_cluster_and_a_host_in_neither_group_are_refused():
    groups, hostvars = _fleet()
    groups['sparks'].append('c1')
    groups['workers'].append('c1')
    groups['cluster_b'].append('b3')
    problems = fleet_problems(groups, dict(hostvars, c1={}, b3={}))
    assert 'c1 is in no cluster: put it in the cluster_* group of its cluster (the fleet\'s clusters are ' \
           'cluster_a, cluster_b)' in problems
    assert 'b3 of cluster_b is in neither head nor workers: put it in one of them' in problems


def test_two_clusters_sharing_a_rail_subnet_are_refused():
    groups, hostvars = _fleet()
    assert fleet_problems(groups, hostvars) == []
    hostvars['b1']['fabric_rails'][1]['cidr'] = '192.168.101.128/25'  # inside cluster_a's rail1
    problems = fleet_problems(groups, hostvars)
    assert problems == ['cluster_a and cluster_b share a rail subnet (rail1 192.168.101.0/24, rail1 '
                        '192.168.101.128/25): give each cluster subnets of its own (fabric_rails cidr, or '
                        'fabric_ring_cidr for a ring, in group_vars/cluster_b.yml)']


def test_two_rings_on_the_default_ring_supernet_are_refused():
    groups, hostvars = _fleet()
    for found in hostvars.values():
        found['fabric_topology'] = 'ring'
        for rail in found['fabric_rails']:
            del rail['cidr']
    assert any('share a rail subnet (rail0 10.10.0.0/16' in p for p in fleet_problems(groups, hostvars))
    for host in ('b1', 'b2'):
        hostvars[host]['fabric_ring_cidr'] = '10.20.0.0/16'
    assert fleet_problems(groups, hostvars) == []


def test_a_cluster_planning_its_fabric_from_another_group_is_refused():
    groups, hostvars = _fleet()
    del hostvars['b2']['fabric_group']
    assert fleet_problems(groups, hostvars) == [
        'b2 of cluster_b plans its fabric from the group sparks: set fabric_group: cluster_b in '
        "group_vars/cluster_b.yml (the fabric role's peers are that group's hosts)"]


def test_a_recipe_whose_world_does_not_match_its_cluster_is_refused_for_that_cluster():
    groups, hostvars = _fleet()
    tp2, tp4 = _recipe('dsv41-flash-tp2-zig'), _recipe('dsv41-flash-tp4-zig')
    for host in hostvars:
        hostvars[host]['recipe_spec'] = tp2 if host[0] == 'a' else tp4
    clusters = fleet_clusters(groups)
    assert fleet_recipe_problems(clusters, hostvars, ['a1', 'a2', 'b1', 'b2']) == [
        "cluster_b does not fit its recipe 'dsv41-flash-tp4-zig': the recipe runs 4 ranks, the inventory has 2 "
        "(head + workers)"]
    # --limit cluster_a: cluster_b is not in the play, nothing of it is checked
    assert fleet_recipe_problems(clusters, hostvars, ['a1', 'a2']) == []


def test_one_cluster_with_two_recipes_is_refused():
    groups, hostvars = _fleet()
    for host in hostvars:
        hostvars[host]['recipe_spec'] = _recipe('dsv41-flash-tp2-zig')
    hostvars['a2']['recipe_spec'] = _recipe('dsv41-flash-tp2-vllm')
    assert fleet_recipe_problems(fleet_clusters(groups), hostvars, list(hostvars)) == [
        'cluster_a: its hosts load different recipes (dsv41-flash-tp2-vllm, dsv41-flash-tp2-zig): one cluster runs '
        'one recipe, set recipe_name in group_vars/cluster_a.yml']


@pytest.mark.parametrize('bad', [None, 'sparks', ['a1']])
def test_wrong_input_is_refused(bad):
    with pytest.raises(Exception, match='fleet_clusters: expects the inventory groups'):
        fleet_clusters(bad)


def test_the_recap_of_a_run_and_a_cluster_s_line():
    out = ('PLAY [x] ***\n\nPLAY RECAP *********\n'
           'b1                         : ok=1    changed=0    unreachable=0    failed=1    skipped=0\n'
           'b2                         : ok=1    changed=0    unreachable=1    failed=0    skipped=0\n'
           'b3                         : ok=4    changed=2    unreachable=0    failed=0    skipped=0\n\n')
    recap = fleet_recap(out)
    assert recap[0] == 'b1 : ok=1 changed=0 unreachable=0 failed=1 skipped=0'
    assert fleet_recap_line({'cluster': 'cluster_b', 'rc': 4, 'log': 'x.log', 'recap': recap}) == \
        'cluster_b: FAILED (exit status 4), failed or unreachable: b1, b2; log x.log'
    assert fleet_recap_line({'cluster': 'cluster_a', 'rc': 0, 'log': 'a.log', 'recap': recap[2:]}) == \
        'cluster_a: ok; log a.log'
    assert fleet_recap('no recap: the run stopped early') == []
