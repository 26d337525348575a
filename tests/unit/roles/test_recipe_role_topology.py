# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The recipe role refuses an inventory cabled otherwise than the recipe's fabric.topology (the SGLang ring recipe
wants fabric_topology: ring), before anything is pulled or started; the ring lab's inventory (inventory/lab-ring) is
loaded as it is, with local connections (no lab needed: the role only reads)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.unit.playbook import REPO, run_playbook

PLAYBOOK = '''
- name: Load the recipe as every playbook does
  hosts: sparks
  gather_facts: false
  roles:
    - role: sparkfold.cluster.recipe
  tasks:
    - name: Show what the ranks get
      ansible.builtin.debug:
        msg: "RANK {{ recipe_rank }} MASTER {{ recipe_master_address }} HCA {{ recipe_values.rdma_devices }}"
'''


@pytest.mark.parametrize(('extra', 'ok'), [({}, True), ({'fabric_topology': 'switch'}, False)])
def test_the_ring_recipe_wants_a_ring(tmp_path, extra, ok):
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    variables = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable, **extra}
    result = run_playbook(tmp_path / 'play.yml', REPO / 'inventory' / 'lab-ring', tmp_path,
                          args=['-e', json.dumps(variables)])
    if ok:
        assert result.returncode == 0, result.stdout[-3000:]
        assert 'RANK 3 MASTER 10.231.0.11 HCA rocep1s0f0,rocep1s0f1' in result.stdout
    else:
        assert result.returncode != 0
        assert ("The inventory does not fit recipe 'dsv41-flash-tp4-ring-sglang': spark-a is not cabled as the "
                "recipe needs: set fabric_topology: ring") in ' '.join(result.stdout.split()).replace("''", "'")


def test_a_node_without_fabric_rails_is_named(tmp_path):
    # the message once printed a literal "\1" where the host's name belongs
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    (tmp_path / 'hosts.yml').write_text(
        'sparks:\n  children:\n    head: {hosts: {spark-a: {}}}\n    workers: {hosts: {spark-b: {}}}\n'
        '  vars: {recipe_name: dsv41-flash-tp2-zig}\n'
    )
    variables = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}
    result = run_playbook(tmp_path / 'play.yml', tmp_path / 'hosts.yml', tmp_path, args=['-e', json.dumps(variables)])
    assert result.returncode != 0
    text = ' '.join(result.stdout.split())
    assert "spark-a has no fabric_rails (the fabric role plans the ranks' addresses from them)" in text, text[-2000:]
    assert '\\1' not in text
