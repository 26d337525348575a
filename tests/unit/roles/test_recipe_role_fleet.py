# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The recipe role on a fleet: two pairs in one inventory (groups cluster_a and cluster_b, each head in the group
head), local connections (no lab: the role only reads). Each host gets its own cluster's facts; a play over both
clusters runs only where it says its roles are per cluster (recipe_fleet_play), else it names the ways to run them;
bad input is refused once, before the play's next task changes anything."""

from __future__ import annotations

import json
import sys

import pytest

from tests.unit.playbook import run_playbook

PLAYBOOK = '''
- name: Load the recipe as every playbook does
  hosts: sparks
  gather_facts: false
  roles:
    - role: sparkfold.cluster.recipe
  tasks:
    - name: Show what the ranks get
      ansible.builtin.debug:
        msg: >-
          FACTS {{ recipe_cluster_name }} RANK {{ recipe_rank }} MASTER {{ recipe_master_address }}
          NODES {{ recipe_nodes | join(',') }} RECIPE {{ recipe_spec.name }}
    - name: Change something
      ansible.builtin.copy:
        content: changed
        dest: "{{ changed_dir }}/{{ inventory_hostname }}"
        mode: "0644"
      delegate_to: localhost
'''

RAILS = [{'name': 'rail0', 'interface': 'enp1s0f1np1', 'cidr': '192.168.{}.0/24', 'rdma_device': 'rocep1s0f1'},
         {'name': 'rail1', 'interface': 'enP2p1s0f1np1', 'cidr': '192.168.{}.0/24', 'rdma_device': 'roceP2p1s0f1'}]


def _rails(first):
    return [dict(rail, cidr=rail['cidr'].format(first + i)) for i, rail in enumerate(RAILS)]


def _vars(rails, recipe):
    return {'fabric_group': 'cluster_b', 'fabric_rails': _rails(rails), 'recipe_name': recipe}


def fleet(**change):
    """Two pairs, cluster_a (a1 head, a2) on 192.168.100-101 and cluster_b (b1 head, b2) on 192.168.110-111, the
    TP2 Zig recipe each; ``change`` replaces parts of the inventory."""
    inventory = {'sparks': {'children': {
        'head': {'hosts': {'a1': {}, 'b1': {}}},
        'workers': {'hosts': {'a2': {}, 'b2': {}}},
        'cluster_a': {'hosts': {'a1': {}, 'a2': {}},
                      'vars': {'fabric_group': 'cluster_a', 'fabric_rails': _rails(100),
                               'recipe_name': 'dsv41-flash-tp2-zig'}},
        'cluster_b': {'hosts': {'b1': {}, 'b2': {}},
                      'vars': {'fabric_group': 'cluster_b', 'fabric_rails': _rails(110),
                               'recipe_name': 'dsv41-flash-tp2-zig'}},
    }}}
    children = inventory['sparks']['children']
    for path, value in change.items():
        group, key = path.split('__')
        children[group][key] = value
    return inventory


def run(tmp_path, inventory, args=()):
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    (tmp_path / 'hosts.yml').write_text(json.dumps(inventory))
    (tmp_path / 'changed').mkdir(exist_ok=True)
    variables = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
                 'changed_dir': str(tmp_path / 'changed')}
    result = run_playbook(tmp_path / 'play.yml', tmp_path / 'hosts.yml', tmp_path,
                          args=['-e', json.dumps(variables), *args])
    changed = sorted(path.name for path in (tmp_path / 'changed').iterdir())
    return result, ' '.join(result.stdout.split()).replace("''", "'"), changed


def test_each_cluster_gets_its_own_facts_in_one_play(tmp_path):
    result, text, changed = run(tmp_path, fleet(), ['-e', 'recipe_fleet_play=true'])
    assert result.returncode == 0, result.stdout[-3000:]
    for line in ('FACTS cluster_a RANK 0 MASTER 192.168.100.1 NODES a1,a2',
                 'FACTS cluster_a RANK 1 MASTER 192.168.100.1 NODES a1,a2',
                 'FACTS cluster_b RANK 0 MASTER 192.168.110.1 NODES b1,b2',
                 'FACTS cluster_b RANK 1 MASTER 192.168.110.1 NODES b1,b2'):
        assert line in text, text[-3000:]
    assert changed == ['a1', 'a2', 'b1', 'b2']


def test_a_play_over_two_clusters_names_the_ways_to_run_them_and_one_runs_alone(tmp_path):
    result, text, changed = run(tmp_path, fleet())
    assert result.returncode != 0
    assert ('This play runs the hosts of 2 clusters (cluster_a, cluster_b), and its roles compute each cluster\'s '
            'steps once a play: run every cluster at once, one run each, with site.yml (which does so by itself) '
            'or ansible-playbook sparkfold.cluster.fleet -e fleet_playbook=<this playbook, e.g. '
            'sparkfold.cluster.engine> (docs/operations.md "A fleet"), or one cluster with `--limit cluster_a`; '
            'playbooks/doctor.yml reads the whole fleet in one run') in text, text[-3000:]
    assert changed == []
    result, text, changed = run(tmp_path, fleet(), ['--limit', 'cluster_b'])
    assert result.returncode == 0, result.stdout[-3000:]
    assert 'FACTS cluster_b RANK 1 MASTER 192.168.110.1 NODES b1,b2 RECIPE dsv41-flash-tp2-zig' in text
    assert changed == ['b1', 'b2']


@pytest.mark.parametrize(('change', 'message'), [
    ({'cluster_b__hosts': {'b1': {}, 'b2': {}, 'a2': {}}},
     "The inventory's clusters are refused: a2 is in 2 clusters (cluster_a, cluster_b): a Spark belongs to one "
     "cluster, keep it in one cluster_* group"),
    ({'head__hosts': {'a1': {}}, 'workers__hosts': {'a2': {}, 'b1': {}, 'b2': {}}},
     "The inventory's clusters are refused: cluster_b has no head: put one of its hosts (b1, b2) in the group head "
     "(rank 0)"),
    ({'cluster_b__vars': _vars(101, 'dsv41-flash-tp2-zig')},
     "The inventory's clusters are refused: cluster_a and cluster_b share a rail subnet (rail1 192.168.101.0/24, "
     "rail0 192.168.101.0/24)"),
    ({'cluster_b__vars': _vars(110, 'dsv41-flash-tp4-zig')},
     "cluster_b does not fit its recipe 'dsv41-flash-tp4-zig': the recipe runs 4 ranks, the inventory has 2 "
     "(head + workers)"),
    # the first host's recipe was the only one looked at: cluster_b's unknown recipe got Ansible's include_vars error
    ({'cluster_b__vars': _vars(110, 'nope')},
     "recipe 'nope' does not exist (cluster_b); the shipped recipes are: dsv41-flash-tp2-tfpy"),
], ids=['host-in-two-clusters', 'cluster-without-head', 'shared-rail-subnet', 'world-mismatch', 'unknown-recipe'])
def test_bad_input_is_refused_before_anything_changes(tmp_path, change, message):
    result, text, changed = run(tmp_path, fleet(**change), ['-e', 'recipe_fleet_play=true'])
    assert result.returncode != 0
    assert message in text, text[-3000:]
    assert changed == []
