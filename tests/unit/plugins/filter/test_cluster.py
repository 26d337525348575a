# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""recipe_cluster: the cluster computed once from the hosts of one cluster and the checked recipe, fed the lab
inventories' own host variables (as Ansible's inventory loads them) and the shipped recipes."""

from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.manager import VariableManager
from ansible_collections.sparkfold.cluster.plugins.filter.cluster import (
    recipe_cluster,
    recipe_cluster_problems,
    start_budget,
)
from ansible_collections.sparkfold.cluster.plugins.filter.recipe import recipe_check

REPO = pathlib.Path(__file__).resolve().parents[4]


def _inventory(name):
    """The groups head and workers and every host's variables, as the inventory gives them."""
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(REPO / 'inventory' / name)])
    variables = VariableManager(loader=loader, inventory=inventory)
    hostvars = {host.name: variables.get_vars(host=host, include_hostvars=False) for host in inventory.get_hosts()}
    groups = inventory.get_groups_dict()
    return groups['head'], groups.get('workers', []), hostvars


def _recipe(name):
    with open(REPO / 'roles' / 'recipe' / 'recipes' / f'{name}.yml', encoding='utf-8') as handle:
        return recipe_check(yaml.safe_load(handle), name)


def test_the_lab_pair():
    heads, workers, hostvars = _inventory('lab')
    cluster = recipe_cluster(heads, workers, hostvars, _recipe('dsv41-flash-tp2-zig'), 'copy')
    assert cluster['head'] == 'spark-a'
    assert cluster['workers'] == ['spark-b']
    assert cluster['nodes'] == ['spark-a', 'spark-b']
    assert cluster['world'] == 2
    assert cluster['topology'] == 'pair'
    assert cluster['head_fabric_address'] == '192.168.100.1'
    assert cluster['rendezvous_address'] == '192.168.100.1'
    assert cluster['worker_store'] == 'copy'
    assert cluster['start_order'] == [1, 0]
    head, worker = cluster['hosts']['spark-a'], cluster['hosts']['spark-b']
    assert (head['rank'], head['index'], worker['rank'], worker['index']) == (0, 1, 1, 2)
    assert worker['addresses'] == ['192.168.100.2', '192.168.101.2']
    assert worker['fabric_address'] == '192.168.100.2'
    assert worker['management_address'] == '10.231.0.12'
    assert worker['rdma_devices'] == ['rocep1s0f1', 'roceP2p1s0f1']
    assert [rail['address_cidr'] for rail in worker['plan']] == ['192.168.100.2/24', '192.168.101.2/24']
    assert worker['plan'][0]['mtu'] == 9000
    assert cluster['sources'] == {'spark-b': {'source': 'spark-a', 'addresses': ['192.168.100.1', '192.168.101.1'],
                                              'interfaces': ['enp1s0f1np1', 'enP2p1s0f1np1'], 'wave': 1}}


def test_the_lab_ring_rendezvous_is_the_heads_management_address_and_the_copy_is_relayed():
    heads, workers, hostvars = _inventory('lab-ring')
    cluster = recipe_cluster(heads, workers, hostvars, _recipe('dsv41-flash-tp4-ring-sglang'), 'copy')
    assert cluster['topology'] == 'ring'
    assert cluster['nodes'] == ['spark-a', 'spark-b', 'spark-c', 'spark-d']
    assert cluster['rendezvous_address'] == '10.231.0.11'
    # Port 0 of the head, on cable 1 (10.10.1.0/24); a ring node has no single fabric address.
    assert cluster['head_fabric_address'] == '10.10.1.1'
    assert {host['fabric_address'] for host in cluster['hosts'].values()} == {''}
    assert cluster['hosts']['spark-c']['addresses'] == ['10.10.3.3', '10.10.2.3']
    assert cluster['start_order'] == [1, 2, 3, 0]
    assert {host: (plan['source'], plan['wave']) for host, plan in cluster['sources'].items()} == {
        'spark-b': ('spark-a', 1), 'spark-d': ('spark-a', 1), 'spark-c': ('spark-b', 2)}


def test_the_lab_ring_s_start_budget_is_the_sglang_sources_waits():
    """The engine_service role's units and the watchdog read one start budget: the SGLang ring's is the roles' 600 s
    memory gate + start.sh's READY_TIMEOUT 360 x 10 s (MiaAI DGX-Sparks start.sh @e0985205) + 60 s ExecStartPre,
    the container's 10 s stop timeout (rm --force of a left container) and 30 s of the ready gate's last probes."""
    heads, workers, hostvars = _inventory('lab-ring')
    budget = recipe_cluster(heads, workers, hostvars, _recipe('dsv41-flash-tp4-ring-sglang'), 'copy')['start_budget']
    assert budget == {'pre_s': 70, 'gate_s': 600, 'ready_s': 3600, 'post_s': 30, 'needed_s': 4300,
                      'follower_s': 670, 'restart_s': 3 * 670 + 4300}


@pytest.mark.parametrize(('name', 'needed', 'follower'), [
    ('dsv41-flash-tp2-zig', 60 + 240 + 1800 + 30, 300),  # no published readiness wait: the format's 1800 s
    ('dsv41-flash-tp2-vllm', 60 + 60 + 600 + 1500 + 30, 720),  # a 60 s container stop timeout
    ('dsv41-flash-tp2-tfpy', 60 + 30 + 600 + 1800 + 30, 690),
    ('dsv41-flash-tp4-zig', 60 + 240 + 1200 + 30 + 120, 300),  # 120 s more for the ready.chat check
    ('dsv41-flash-tp4-ring-sglang', 60 + 10 + 600 + 3600 + 30, 670),
])
def test_every_recipe_s_start_budget_sums_its_waits(name, needed, follower):
    for world in (1, 2, 4):
        budget = start_budget(_recipe(name), world)
        assert budget['needed_s'] == needed == sum(budget[key] for key in ('pre_s', 'gate_s', 'ready_s', 'post_s'))
        assert budget['follower_s'] == follower
        # The starts of one ordered restart, one after the other: each follower's, then rank 0's whole budget.
        assert budget['restart_s'] == (world - 1) * follower + needed


def test_a_recipe_override_moves_the_start_budget():
    spec = _recipe('dsv41-flash-tp4-ring-sglang')
    spec['ready']['timeout_s'] = 600
    spec['memory']['gate_timeout_s'] = 300
    assert start_budget(spec, 2)['needed_s'] == 70 + 300 + 600 + 30


def test_the_lab_tp4_switch_starts_the_followers_descending():
    heads, workers, hostvars = _inventory('lab-tp4')
    cluster = recipe_cluster(heads, workers, hostvars, _recipe('dsv41-flash-tp4-zig'), 'nfs')
    assert cluster['topology'] == 'switch'
    assert cluster['world'] == 4
    assert cluster['worker_store'] == 'nfs'
    assert cluster['start_order'] == [3, 2, 1, 0]
    assert cluster['hosts']['spark-d']['fabric_address'] == '192.168.100.4'
    assert {plan['source'] for plan in cluster['sources'].values()} == {'spark-a'}


def test_the_host_index_defaults_to_the_place_in_the_cluster():
    heads, workers, hostvars = _inventory('lab')
    for found in hostvars.values():
        del found['fabric_host_index']
    cluster = recipe_cluster(heads, workers, hostvars, _recipe('dsv41-flash-tp2-zig'))
    assert [cluster['hosts'][host]['index'] for host in cluster['nodes']] == [1, 2]


def test_an_inventory_that_does_not_fit_is_refused_naming_each_problem():
    heads, workers, hostvars = _inventory('lab')
    del hostvars['spark-b']['fabric_rails']
    spec = _recipe('dsv41-flash-tp4-ring-sglang')
    problems = recipe_cluster_problems(heads + workers, [], hostvars, spec)
    assert problems == [
        'the group head must hold exactly one host (rank 0), it holds 2',
        'the recipe runs 4 ranks, the inventory has 1 (head + workers)',
        'spark-a is not cabled as the recipe needs: set fabric_topology: ring (the recipe is written for a ring, '
        'docs/fabric.md)']
    problems = recipe_cluster_problems(heads, workers, hostvars, _recipe('dsv41-flash-tp2-zig'))
    assert problems == ["spark-b has no fabric_rails (the fabric role plans the ranks' addresses from them)"]
    with pytest.raises(AnsibleFilterError, match="does not fit recipe 'dsv41-flash-tp2-zig': spark-b has no"):
        recipe_cluster(heads, workers, hostvars, _recipe('dsv41-flash-tp2-zig'))


def test_a_wrong_worker_store_is_refused():
    heads, workers, hostvars = _inventory('lab')
    with pytest.raises(AnsibleFilterError, match="the worker store is 'rsync'; use nfs or copy"):
        recipe_cluster(heads, workers, hostvars, _recipe('dsv41-flash-tp2-zig'), 'rsync')
