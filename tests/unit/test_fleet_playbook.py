# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/fleet.yml on a fleet of two clusters of local hosts: one ansible-playbook per cluster (--limit), all at
once; a cluster that fails does not stop the other, and the fleet's recap names the failed cluster. An inventory no
fleet can be made from is refused before any run starts.

site.yml over several clusters does the same by itself (its first play, the fleet role's tasks/site.yml): tested with
that very play, its task files and its vars, in a playbook whose later play stands in for a cluster's run (the real
site.yml needs the lab), and with the real site.yml as far as its first refusal: a run over one cluster runs
in-process, as before."""

from __future__ import annotations

import copy
import json
import re
import sys

import yaml

from tests.unit.playbook import REPO, run_playbook, task_result

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


def _inventory(tmp_path, extra_b=(), spares=()):
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
    sparks = {'children': children, 'vars': local, 'hosts': {host: {} for host in spares}}
    path.write_text(json.dumps({'sparks': sparks}))
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


# site.yml's later plays, as a stand-in: what a cluster's run saw, written by each of its hosts (a task tagged work,
# and one tagged other), after failing the cluster fail_cluster names. Its hosts are named as site.yml's plays name
# theirs: after the first play ran each cluster in a run of its own, none are left.
SITE_REST = '''
- name: A cluster's run of site.yml
  hosts: "{{ 'sparks' | sparkfold.cluster.fleet_not_dispatched(groups) }}"
  gather_facts: false
  tasks:
    - name: Fail the cluster fail_cluster names
      ansible.builtin.fail:
        msg: "{{ fail_cluster }} breaks"
      when: fail_cluster | default('') == groups | sparkfold.cluster.fleet_cluster_of(inventory_hostname)
    - name: Take a while
      ansible.builtin.pause:
        seconds: 3
      when: fail_cluster is defined
    - name: Write what the run saw
      ansible.builtin.copy:
        content: >-
          {{ {'hosts': ansible_play_hosts_all, 'tags': ansible_run_tags, 'skip_tags': ansible_skip_tags,
              'check': ansible_check_mode, 'diff': ansible_diff_mode, 'verbosity': ansible_verbosity,
              'seen': seen | default(None), 'from_file': from_file | default(None),
              'cluster': lookup('ansible.builtin.env', 'SPARKFOLD_FLEET_CLUSTER')} | to_json }}
        dest: "{{ marker_dir }}/{{ inventory_hostname }}"
        mode: "0644"
      check_mode: false
      tags: [work]
    - name: Write that a task tagged other ran
      ansible.builtin.copy:
        content: other
        dest: "{{ marker_dir }}/{{ inventory_hostname }}.other"
        mode: "0644"
      check_mode: false
      tags: [other]
'''


def _site(tmp_path):
    """A playbook of site.yml's first play, as it is, whose clusters' runs run this very playbook, then the stand-in
    of site.yml's later plays."""
    first = copy.deepcopy(yaml.safe_load((REPO / 'playbooks' / 'site.yml').read_text())[0])
    assert first['hosts'] == 'sparks' and first['tags'] == ['always'] and first['gather_facts'] is False
    (task,) = first['tasks']
    assert task['ansible.builtin.include_role'] == {'name': 'sparkfold.cluster.fleet', 'tasks_from': 'site'}
    path = tmp_path / 'site.yml'
    task['vars'] = {'_fleet_site_playbook': str(path)}
    path.write_text(yaml.safe_dump([first, *yaml.safe_load(SITE_REST)], sort_keys=False))
    return path


def _run_site(tmp_path, inventory, args=(), env=None):
    variables = {'fleet_log_root': str(tmp_path / 'logs'), 'fleet_poll_s': 1}
    return run_playbook(_site(tmp_path), inventory, tmp_path, args=['-e', json.dumps(variables), *args], env=env)


def _seen(tmp_path):
    """{host: what its run saw}, for each host whose run wrote it."""
    return {path.name: json.loads(path.read_text()) for path in sorted((tmp_path / 'markers').iterdir())
            if '.' not in path.name}


def test_site_over_two_clusters_runs_each_in_a_run_of_its_own_and_names_the_failed_one(tmp_path):
    result = _run_site(tmp_path, _inventory(tmp_path), ['-e', 'fail_cluster=cluster_b'])
    out = result.stdout
    assert result.returncode == 2, out[-3000:] + result.stderr[-2000:]
    assert re.search(r'^FLEET RECAP: 1 of 2 clusters ok, failed: cluster_b$', out, re.MULTILINE), out[-3000:]
    assert re.search(r'^cluster_b: FAILED \(exit status 2\), failed or unreachable: b1, b2; log \S+/cluster_b\.log$',
                     out, re.MULTILINE)
    assert 'failed clusters: cluster_b: FAILED' in out
    # cluster_a's run went to its end after cluster_b's failed (-e reached both), alone (its hosts only), a run of
    # its own; this run ran no host's stand-in play itself
    seen = _seen(tmp_path)
    assert sorted(seen) == ['a1', 'a2'], seen
    assert seen['a1']['hosts'] == ['a1', 'a2'] and seen['a1']['cluster'] == 'cluster_a'
    logs = list((tmp_path / 'logs').glob('*/cluster_b.log'))
    assert logs and 'cluster_b breaks' in logs[0].read_text()
    assert "PLAY [A cluster's run of site.yml]" not in out


def test_site_over_two_clusters_that_succeed_ends_after_the_recap(tmp_path):
    result = _run_site(tmp_path, _inventory(tmp_path))
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-2000:]
    assert re.search(r'^FLEET RECAP: 2 of 2 clusters ok$', out, re.MULTILINE), out[-3000:]
    # the later play has no host left in this run: only the clusters' runs wrote
    assert re.search(r"PLAY \[A cluster's run of site.yml\] \**\nskipping: no hosts matched", out), out[-3000:]
    seen = _seen(tmp_path)
    assert {host: found['cluster'] for host, found in seen.items()} == \
        {'a1': 'cluster_a', 'a2': 'cluster_a', 'b1': 'cluster_b', 'b2': 'cluster_b'}
    # each cluster's run, limited to it, skipped the first play's task: it starts no run of its own
    for name, head in (('cluster_a', 'a1'), ('cluster_b', 'b1')):
        (log,) = (tmp_path / 'logs').glob(f'*/{name}.log')
        assert re.search(rf'TASK \[Run each cluster in a run of its own, at once\] \**\n.*skipping: \[{head}\]',
                         log.read_text()), log.read_text()[-3000:]


def test_site_limited_to_one_cluster_runs_in_this_run(tmp_path):
    result = _run_site(tmp_path, _inventory(tmp_path), ['--limit', 'cluster_a'])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.search(r'TASK \[Run each cluster in a run of its own, at once\] \**\nskipping: \[a1\]', result.stdout), \
        result.stdout[-3000:]
    seen = _seen(tmp_path)
    assert sorted(seen) == ['a1', 'a2']
    assert seen['a1']['cluster'] == '' and seen['a1']['hosts'] == ['a1', 'a2']  # no run was started
    assert not (tmp_path / 'logs').exists()


def test_what_the_run_was_given_reaches_each_cluster_s_run(tmp_path):
    inventory = _inventory(tmp_path)
    (tmp_path / 'vars.yml').write_text('from_file: "@file read"\n')
    result = _run_site(tmp_path, inventory, ['--limit', 'a1,b1,b2', '--tags', 'work,other', '--skip-tags', 'other',
                                             '-e', '{"seen": "json, with spaces"}', '-e', '@vars.yml', '-v'])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    seen = _seen(tmp_path)
    # each run limited to its cluster's hosts in this run: a1 alone of cluster_a, cluster_b whole
    assert sorted(seen) == ['a1', 'b1', 'b2'], seen
    assert seen['a1']['hosts'] == ['a1'] and seen['b1']['hosts'] == ['b1', 'b2']
    for found in seen.values():
        assert sorted(found['tags']) == ['other', 'work'] and found['skip_tags'] == ['other'], found
        assert found['seen'] == 'json, with spaces' and found['from_file'] == '@file read', found
        assert found['verbosity'] == 1 and found['check'] is False and found['diff'] is False, found
    assert not list((tmp_path / 'markers').glob('*.other'))


def test_check_and_diff_reach_each_cluster_s_run(tmp_path):
    result = _run_site(tmp_path, _inventory(tmp_path), ['--check', '--diff'])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    seen = _seen(tmp_path)
    assert sorted(seen) == ['a1', 'a2', 'b1', 'b2']
    assert all(found['check'] is True and found['diff'] is True and found['verbosity'] == 0
               and found['tags'] == ['all'] for found in seen.values()), seen


def test_a_cluster_s_run_starts_no_fleet(tmp_path):
    """A run the fleet started (SPARKFOLD_FLEET_CLUSTER) that spans two clusters is refused before any run."""
    result = _run_site(tmp_path, _inventory(tmp_path), env={'SPARKFOLD_FLEET_CLUSTER': 'cluster_a'})
    assert result.returncode == 2, result.stdout[-3000:]
    assert 'This run is the run of cluster_a that a fleet\'s run started' in ' '.join(result.stdout.split())
    assert not (tmp_path / 'logs').exists()
    assert _seen(tmp_path) == {}


def test_the_real_site_yml_hands_a_run_over_two_clusters_to_the_fleet_and_runs_one_in_process(tmp_path):
    """playbooks/site.yml itself (its later plays need the lab, so the inventory has a Spark in no cluster: a
    refusal ends each run before the lock). Over both clusters the first play takes the run, and the fleet refuses
    the inventory before any run starts; limited to cluster_a, it skips, and the recipe role refuses it as before."""
    inventory = _inventory(tmp_path, spares=['b3'])
    site = REPO / 'playbooks' / 'site.yml'
    variables = json.dumps({'fleet_log_root': str(tmp_path / 'logs')})
    result = run_playbook(site, inventory, tmp_path, args=['-e', variables])
    out = result.stdout
    assert result.returncode == 2, out[-3000:]
    # the fleet's refusal (the fleet role, on the controller), not the recipe role's
    assert re.search(r'TASK \[sparkfold\.cluster\.fleet : Refuse an inventory no fleet can be made from\] \**\n'
                     r'(?:(?!TASK \[).*\n)*?'
                     r'fatal: \[\w+ -> localhost\]', out), out[-3000:]
    assert 'b3 is in no cluster' in out
    assert "PLAY [Hold the cluster's lock]" not in out
    assert not (tmp_path / 'logs').exists()

    result = run_playbook(site, inventory, tmp_path, args=['-e', variables, '--limit', 'cluster_a'])
    out = result.stdout
    assert result.returncode == 2, out[-3000:]
    assert re.search(r'TASK \[Run each cluster in a run of its own, at once\] \**\nskipping: \[a1\]', out), out[-3000:]
    assert task_result(out, 'Refuse an inventory no fleet can be made from', 'recipe') == 'fatal', out[-3000:]
    assert 'b3 is in no cluster' in out
    assert not (tmp_path / 'logs').exists()


def test_the_fleet_s_settings_are_the_role_s_defaults_so_a_play_s_vars_set_them(tmp_path):
    """As molecule/fleet's converge sets them: vars of the import, not -e. (vars_files in the play would win over
    them, and over the inventory: the logs would go to fleet-runs/ in the working directory.)"""
    inventory = _inventory(tmp_path)
    (tmp_path / 'noop.yml').write_text(NOOP)
    wrapper = tmp_path / 'converge.yml'
    wrapper.write_text(yaml.safe_dump([{
        'name': 'Converge the fleet', 'ansible.builtin.import_playbook': str(REPO / 'playbooks' / 'fleet.yml'),
        'vars': {'fleet_playbook': str(tmp_path / 'noop.yml'), 'fleet_log_root': str(tmp_path / 'logs'),
                 'fleet_poll_s': 1}}]))
    result = run_playbook(wrapper, inventory, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert sorted(path.name for path in (tmp_path / 'logs').glob('*/*.log')) == ['cluster_a.log', 'cluster_b.log']
    assert not (tmp_path / 'fleet-runs').exists()
