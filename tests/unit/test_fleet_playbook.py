# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/fleet.yml on a fleet of two clusters of local hosts: one ansible-playbook per cluster (--limit), all at
once; a cluster that fails does not stop the other, and the fleet's recap names the failed cluster. An inventory no
fleet can be made from is refused before any run starts."""

from __future__ import annotations

import json
import re
import sys

from tests.unit.playbook import REPO, run_playbook

# The playbook each cluster runs: cluster_b's hosts fail, then every host still in the run writes its marker, late
# (cluster_a's run ends after cluster_b's failure: a failure elsewhere stopped nothing here).
CHILD = '''
- name: A cluster's run
  hosts: sparks
  gather_facts: false
  tasks:
    - name: Fail on cluster_b
      ansible.builtin.fail:
        msg: cluster_b breaks
      when: inventory_hostname.startswith('b')
    - name: Take a while
      ansible.builtin.pause:
        seconds: 3
    - name: Leave a marker
      ansible.builtin.copy:
        content: "{{ ansible_play_hosts | join(',') }}"
        dest: "{{ marker_dir }}/{{ inventory_hostname }}"
        mode: "0644"
'''


# A playbook that changes nothing on any cluster.
NOOP = '''
- name: A cluster's run that changes nothing
  hosts: sparks
  gather_facts: false
  tasks:
    - name: Read the host's name
      ansible.builtin.command: hostname
      changed_when: false
'''


def _inventory(tmp_path, extra_b=()):
    local = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
             'marker_dir': str(tmp_path / 'markers')}
    children = {
        'head': {'hosts': {'a1': {}, 'b1': {}}},
        'workers': {'hosts': {'a2': {}, 'b2': {}}},
        'cluster_a': {'hosts': {'a1': {}, 'a2': {}}, 'vars': {'fabric_group': 'cluster_a'}},
        'cluster_b': {'hosts': {'b1': {}, 'b2': {}, **{host: {} for host in extra_b}},
                      'vars': {'fabric_group': 'cluster_b'}},
    }
    path = tmp_path / 'hosts.yml'
    path.write_text(json.dumps({'sparks': {'children': children, 'vars': local}}))
    (tmp_path / 'markers').mkdir()
    (tmp_path / 'child.yml').write_text(CHILD)
    return path


def _run(tmp_path, inventory, child='child.yml'):
    variables = {'fleet_playbook': str(tmp_path / child), 'fleet_log_root': str(tmp_path / 'logs'),
                 'fleet_poll_s': 1}
    return run_playbook(REPO / 'playbooks' / 'fleet.yml', inventory, tmp_path, args=['-e', json.dumps(variables)])


def test_a_failed_cluster_stops_only_itself_and_the_recap_names_it(tmp_path):
    result = _run(tmp_path, _inventory(tmp_path))
    out = result.stdout
    assert result.returncode == 2, out[-3000:] + result.stderr[-2000:]
    assert 'FLEET RECAP: 1 of 2 clusters ok, failed: cluster_b' in out, out[-3000:]
    # the recap's lines, each on its own line of the output
    assert re.search(r'^FLEET RECAP: 1 of 2 clusters ok, failed: cluster_b$', out, re.MULTILINE), out[-3000:]
    assert re.search(r'^cluster_a: ok; log \S+/cluster_a\.log$', out, re.MULTILINE)
    assert re.search(r'^cluster_b: FAILED \(exit status 2\), failed or unreachable: b1, b2; log \S+/cluster_b\.log$',
                     out, re.MULTILINE)
    # cluster_a ran to its end, alone in its run (its hosts only)
    assert sorted(p.name for p in (tmp_path / 'markers').iterdir()) == ['a1', 'a2']
    assert (tmp_path / 'markers' / 'a1').read_text() == 'a1,a2'
    logs = list((tmp_path / 'logs').glob('*/cluster_b.log'))
    assert logs and 'cluster_b breaks' in logs[0].read_text()


def test_an_inventory_no_fleet_can_be_made_from_starts_no_run(tmp_path):
    result = _run(tmp_path, _inventory(tmp_path, extra_b=['a2']))
    assert result.returncode == 2, result.stdout[-3000:]
    assert "a2 is in 2 clusters (cluster_a, cluster_b)" in result.stdout
    assert not (tmp_path / 'logs').exists()
    assert list((tmp_path / 'markers').iterdir()) == []


def test_a_fleet_that_changes_nothing_reports_no_change(tmp_path):
    inventory = _inventory(tmp_path)
    (tmp_path / 'noop.yml').write_text(NOOP)
    result = _run(tmp_path, inventory, child='noop.yml')
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert 'FLEET RECAP: 2 of 2 clusters ok' in result.stdout
    assert re.search(r'localhost\s+: ok=\d+\s+changed=0 ', result.stdout), result.stdout[-1500:]
