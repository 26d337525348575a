# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkfold.cluster.render gives the text ansible.builtin.template's lookup gives (the roles compare it with
the files on the nodes: one character more would rewrite them and restart the engine), run in a real
ansible-playbook with a local connection."""

from __future__ import annotations

import json

from tests.unit.playbook import run_playbook

# What the roles' templates use: ansible_managed, a loop, an expression with a backslash escape, a filter, an
# include beside the template, a variable of the host and one of the play, a blank last line.
TEMPLATE = '''# {{ ansible_managed }}
{% for rail in rails %}
RAIL_{{ loop.index0 }}={{ rail.name }}:{{ rail.mtu | int + 0 }}
{% endfor %}
JOINED={{ rails | map(attribute='name') | join('\\t') }}
{% include 'part.j2' %}
HOST={{ inventory_hostname }} WHERE={{ where }}

'''
PART = 'PART={{ rails | length }}\n'

PLAYBOOK = '''
- name: Render with both lookups
  hosts: node
  gather_facts: false
  vars:
    rails: [{name: rail0, mtu: '9000'}, {name: rail1, mtu: 1500}]
    where: play
  tasks:
    - name: Show both texts
      ansible.builtin.debug:
        msg:
          builtin: "{{ lookup('ansible.builtin.template', 'unit.j2') }}"
          render: "{{ lookup('sparkfold.cluster.render', 'unit.j2') }}"
    - name: The task's variables are left as they were
      ansible.builtin.assert:
        that:
          - template_path is not defined
          - rails[0].mtu == '9000'
'''


def _play(tmp_path, playbook, extra=()):
    (tmp_path / 'templates').mkdir(exist_ok=True)
    (tmp_path / 'templates' / 'unit.j2').write_text(TEMPLATE)
    (tmp_path / 'templates' / 'part.j2').write_text(PART)
    (tmp_path / 'play.yml').write_text(playbook)
    (tmp_path / 'hosts.yml').write_text('all:\n  hosts:\n    node:\n      ansible_connection: local\n')
    return run_playbook(tmp_path / 'play.yml', tmp_path / 'hosts.yml', tmp_path, args=list(extra))


def _msg(result):
    for line in result.stdout.splitlines():
        if '"builtin"' in line and '"render"' in line:
            return json.loads(line[line.index('{'):])['msg']
    start = result.stdout.index('"msg": {')
    return json.loads(result.stdout[result.stdout.index('{', start):result.stdout.index('}', start) + 1])


def test_the_text_is_the_builtin_lookups(tmp_path):
    result = _play(tmp_path, PLAYBOOK)
    assert result.returncode == 0, result.stdout[-3000:]
    texts = _msg(result)
    assert texts['render'] == texts['builtin']
    assert texts['render'] == (
        # Jinja drops the included template's last newline
        '# Ansible managed\nRAIL_0=rail0:9000\nRAIL_1=rail1:1500\nJOINED=rail0\trail1\nPART=2'
        'HOST=node WHERE=play\n\n')


def test_a_set_ansible_managed_is_kept(tmp_path):
    result = _play(tmp_path, PLAYBOOK, ['-e', 'ansible_managed="kept by hand"'])
    assert result.returncode == 0, result.stdout[-3000:]
    texts = _msg(result)
    assert texts['render'] == texts['builtin']
    assert texts['render'].startswith('# kept by hand\n')


def test_a_missing_template_and_an_option_are_refused(tmp_path):
    missing = PLAYBOOK.replace("lookup('sparkfold.cluster.render', 'unit.j2')",
                               "lookup('sparkfold.cluster.render', 'nope.j2')")
    result = _play(tmp_path, missing)
    assert result.returncode != 0
    assert "sparkfold.cluster.render found no template 'nope.j2'" in result.stdout
    option = PLAYBOOK.replace("lookup('sparkfold.cluster.render', 'unit.j2')",
                              "lookup('sparkfold.cluster.render', 'unit.j2', trim_blocks=false)")
    result = _play(tmp_path, option)
    assert result.returncode != 0
    assert 'sparkfold.cluster.render takes no options (got trim_blocks)' in result.stdout
