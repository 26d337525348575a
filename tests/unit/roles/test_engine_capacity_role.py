# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine_capacity role (split out of engine_service), run as engine_service includes it on the lab's vLLM pair
(inventory/lab-vllm, local connections: the roles only read): a node of the lab's memory (24 GiB) passes, a smaller one
stops the play once, naming every node's problem with the capacity model's arithmetic, and Ansible checks the role's
arguments against its spec."""

from __future__ import annotations

import json
import sys

from tests.unit.playbook import REPO, run_playbook

PLAYBOOK = '''
- name: Check the recipe against the nodes as engine_service does
  hosts: sparks
  gather_facts: false
  roles:
    - role: sparkfold.cluster.recipe
  tasks:
    - name: Check the recipe fits the nodes
      ansible.builtin.include_role:
        name: sparkfold.cluster.engine_capacity
      vars:
        engine_capacity_mem_total_kib: "{{ mem_kib }}"
        engine_capacity_store_weights_bytes: 0
        engine_capacity_floor_gib: "{{ recipe_spec.memory.serving_floor_gib }}"
    - name: Say the check passed
      ansible.builtin.debug:
        msg: "FITS {{ inventory_hostname }}"
'''


def _run(tmp_path, mem_kib):
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    variables = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable, 'mem_kib': mem_kib}
    result = run_playbook(tmp_path / 'play.yml', REPO / 'inventory' / 'lab-vllm', tmp_path,
                          args=['-e', json.dumps(variables)])
    return result, ' '.join(result.stdout.split())


def test_a_spark_fits_the_vllm_recipe(tmp_path):
    result, text = _run(tmp_path, 24 * 1024 * 1024)
    assert result.returncode == 0, text[-3000:]
    assert 'FITS spark-a' in text and 'FITS spark-b' in text


def test_a_smaller_node_is_refused_once_with_every_problem(tmp_path):
    result, text = _run(tmp_path, 2 * 1024 * 1024)
    assert result.returncode != 0
    refusal = 'Recipe dsv41-flash-tp2-vllm does not fit these nodes: 2 problem(s) on spark-a, spark-b'
    assert refusal in text, text[-3000:]
    assert '- spark-a: ' in text and '- spark-b: ' in text
    assert 'FITS' not in text


def test_ansible_checks_the_role_arguments(tmp_path):
    result, text = _run(tmp_path, 'lots')
    assert result.returncode != 0
    assert 'engine_capacity_mem_total_kib' in text and 'FITS' not in text, text[-3000:]
