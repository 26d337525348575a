# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""fabric_neighbors: a port that is down is brought up for the probe and down again, whatever happens; each
port's link is returned; the neighbours' pings run in the same module run (the probe itself: test_fabric_probe)."""

from __future__ import annotations

import pytest
from ansible.module_utils import basic
from ansible_collections.sparkfold.cluster.plugins.modules import fabric_neighbors

from tests.unit.module_runner import module_runner

PORTS = ['enp1s0f0np0', 'enp1s0f1np1']


@pytest.fixture
def node(monkeypatch, tmp_path):
    """A node whose port 1 is administratively down; records the commands the module runs."""
    net = tmp_path / 'class' / 'net'
    for name, flags in (('enp1s0f0np0', '0x1003'), ('enp1s0f1np1', '0x1002')):
        (net / name).mkdir(parents=True)
        (net / name / 'flags').write_text(flags + '\n')
        (net / name / 'operstate').write_text('up\n' if flags.endswith('3') else 'down\n')
        (net / name / 'carrier').write_text('1\n')
    commands = []

    def run_command(self, argv, **_kwargs):
        commands.append(argv)
        if argv[-1] == 'up':  # `ip link set dev X up`
            (net / argv[-2] / 'flags').write_text('0x1003\n')
        if argv[-1] == 'down':
            (net / argv[-2] / 'flags').write_text('0x1002\n')
        if argv[0].endswith('ping'):
            return (0, '1 packets transmitted, 1 received', '') if argv[-1] == '10.10.1.2' else \
                (1, '1 packets transmitted, 0 received, 100% packet loss', '')
        return 0, '', ''

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, **_kw: f'/usr/sbin/{name}')
    return tmp_path, commands


def test_a_down_port_is_brought_up_for_the_probe_then_down_again_and_pings_ride_along(monkeypatch, node):
    root, commands = node
    during = {}

    def listen(interfaces, host, cluster, seconds, sysfs_root, linger):
        during.update({name: (root / 'class' / 'net' / name / 'flags').read_text().strip() for name in interfaces})
        return {'enp1s0f0np0': [{'host': 'spark-b', 'interface': 'enp1s0f1np1', 'mac': '02:00:00:00:00:02'}],
                'enp1s0f1np1': []}

    monkeypatch.setattr(fabric_neighbors, 'listen', listen)
    run = module_runner(monkeypatch, fabric_neighbors.main)
    kind, result, _w = run({'interfaces': PORTS, 'host': 'spark-a', 'sysfs_root': str(root), 'linger': 1.0,
                            'pings': [{'interface': 'enp1s0f0np0', 'address': '10.10.1.2', 'size': 8972,
                                       'peer': 'spark-b'},
                                      {'interface': 'enp1s0f1np1', 'address': '10.10.4.4', 'size': 8972,
                                       'peer': 'spark-d'}]})
    assert kind == 'exit' and result['changed'] is False
    assert during == {'enp1s0f0np0': '0x1003', 'enp1s0f1np1': '0x1003'}  # both up while probing
    assert ['/usr/sbin/ip', 'link', 'set', 'dev', 'enp1s0f1np1', 'up'] in commands
    assert commands[commands.index(['/usr/sbin/ip', 'link', 'set', 'dev', 'enp1s0f1np1', 'up']) + 1] == \
        ['/usr/sbin/ip', 'link', 'set', 'dev', 'enp1s0f1np1', 'down']
    assert (root / 'class' / 'net' / 'enp1s0f1np1' / 'flags').read_text().strip() == '0x1002'  # down again
    assert result['links']['enp1s0f1np1']['brought_up'] is True
    assert result['links']['enp1s0f0np0'] == {'carrier': True, 'operstate': 'up', 'up': True, 'brought_up': False}
    assert [(p['peer'], p['ok']) for p in result['pings']] == [('spark-b', True), ('spark-d', False)]
    assert '100% packet loss' in result['pings'][1]['detail']


def test_a_port_brought_up_goes_down_again_when_the_probe_fails(monkeypatch, node):
    root, commands = node

    def listen(*_args, **_kwargs):
        raise PermissionError('Operation not permitted')

    monkeypatch.setattr(fabric_neighbors, 'listen', listen)
    run = module_runner(monkeypatch, fabric_neighbors.main)
    kind, result, _w = run({'interfaces': PORTS, 'host': 'spark-a', 'sysfs_root': str(root)})
    assert kind == 'fail' and result['msg'].startswith('a raw packet socket needs root (become: true)')
    assert commands[-1] == ['/usr/sbin/ip', 'link', 'set', 'dev', 'enp1s0f1np1', 'down']
    # read-only: without bring_up a down port stays down and is probed as it is
    commands.clear()
    monkeypatch.setattr(fabric_neighbors, 'listen', lambda *a, **k: {name: [] for name in PORTS})
    kind, result, _w = run({'interfaces': PORTS, 'host': 'spark-a', 'sysfs_root': str(root), 'bring_up': False})
    assert kind == 'exit' and commands == [] and result['links']['enp1s0f1np1']['carrier'] is True
