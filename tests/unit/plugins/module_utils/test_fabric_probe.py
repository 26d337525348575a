# SPDX-License-Identifier: GPL-3.0-or-later
"""The cable probe's frames: what one node sends is what the node at the other end reads."""

import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import fabric_probe

MAC = bytes.fromhex('020000000001')


def test_a_frame_round_trips_and_is_padded_to_the_ethernet_minimum():
    frame = fabric_probe.encode(MAC, 'spark-a', 'enp1s0f0np0', 'lab')
    assert len(frame) >= 60
    assert frame[:6] == b'\xff' * 6 and frame[12:14] == b'\x88\xb5'
    assert fabric_probe.decode(frame, 'lab') == {'host': 'spark-a', 'interface': 'enp1s0f0np0',
                                                 'mac': '02:00:00:00:00:01'}


def test_other_clusters_and_other_traffic_are_ignored():
    frame = fabric_probe.encode(MAC, 'spark-a', 'enp1s0f0np0', 'lab')
    assert fabric_probe.decode(frame, 'other') is None
    assert fabric_probe.decode(frame[:12] + b'\x08\x00' + frame[14:], 'lab') is None
    assert fabric_probe.decode(frame[:14] + b'SPARKFOLD-CABLE1 {not json', 'lab') is None


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_listen_extends_while_a_port_is_silent_and_lingers_after_the_last_port_hears(monkeypatch, tmp_path):
    """A late peer: the port hears it at t=5 (after the 4 s window), then the node keeps announcing 4 s more."""
    clock = FakeClock()
    sent = []
    peer = fabric_probe.encode(MAC, 'spark-b', 'enp1s0f1np1', 'lab')

    class Sock:
        def __init__(self, *_args):
            self.pending = []

        def bind(self, _addr):
            pass

        def setblocking(self, _flag):
            pass

        def send(self, frame):
            sent.append(clock.now)

        def recvfrom(self, _size):
            return self.pending.pop(), ('enp1s0f0np0', fabric_probe.ETHERTYPE, 0, 0, b'')

        def close(self):
            pass

    sock = Sock()

    def select(readers, _w, _x, timeout):
        clock.now += max(timeout, 0.05)
        if 5.0 <= clock.now < 5.3 and not sock.pending:
            sock.pending.append(peer)
        return ([sock] if sock.pending else []), [], []

    net = tmp_path / 'class' / 'net' / 'enp1s0f0np0'
    net.mkdir(parents=True)
    (net / 'address').write_text('02:00:00:00:00:01\n')
    monkeypatch.setattr(fabric_probe.socket, 'socket', lambda *a: sock)
    monkeypatch.setattr(fabric_probe.select, 'select', select)
    heard = fabric_probe.listen(['enp1s0f0np0'], 'spark-a', 'lab', 4.0, sysfs_root=str(tmp_path), clock=clock)
    assert [h['host'] for h in heard['enp1s0f0np0']] == ['spark-b']
    assert 9.0 <= clock.now < 12.5  # heard at ~5 s, announced 4 s past it
    assert max(sent) >= 9.0
    # nobody at all: the window grows twice, then the port is reported silent
    clock.now = 0.0

    def silent(_r, _w, _x, timeout):
        clock.now += max(timeout, 0.05)
        return [], [], []

    monkeypatch.setattr(fabric_probe.select, 'select', silent)
    silence = fabric_probe.listen(['enp1s0f0np0'], 'spark-a', 'lab', 4.0, sysfs_root=str(tmp_path), clock=clock)
    assert silence == {'enp1s0f0np0': []}
    assert 12.0 <= clock.now < 12.5


def fake_ports(monkeypatch, tmp_path, clock, inbox):
    """Two ports whose sockets read what ``inbox`` (interface -> frames) holds once the clock passes 0.5 s."""
    for name in ('enp1s0f0np0', 'enp1s0f1np1'):
        net = tmp_path / 'class' / 'net' / name
        net.mkdir(parents=True)
        (net / 'address').write_text('02:00:00:00:00:01\n')
    socks = []

    class Sock:
        def __init__(self, *args):
            self.args = args
            self.name = None
            self.pending = []
            socks.append(self)

        def bind(self, addr):
            self.name = addr[0]

        def setblocking(self, _flag):
            pass

        def send(self, frame):
            self.pending.append((frame, self.name))  # a packet socket reads what its own interface sends

        def recvfrom(self, _size):
            frame, came_in_on = self.pending.pop()
            return frame, (came_in_on, fabric_probe.ETHERTYPE, 0, 0, b'')

        def close(self):
            pass

    def select(readers, _w, _x, timeout):
        clock.now += max(timeout, 0.05)
        if clock.now >= 0.5:
            for sock in readers:
                # inbox: interface -> frames, each (frame, the interface it came in on) or a frame of that interface
                sock.pending.extend(f if isinstance(f, tuple) else (f, sock.name) for f in inbox.pop(sock.name, []))
        return [s for s in readers if s.pending], [], []

    monkeypatch.setattr(fabric_probe.socket, 'socket', Sock)
    monkeypatch.setattr(fabric_probe.select, 'select', select)
    return socks


def test_a_port_cabled_to_the_same_nodes_other_port_is_heard_as_a_loop(monkeypatch, tmp_path):
    """Its own frames are left out; those of its other port are not: the two ports are cabled to each other."""
    clock = FakeClock()
    loop = {'enp1s0f0np0': [fabric_probe.encode(MAC, 'spark-b', 'enp1s0f1np1', 'lab')],
            'enp1s0f1np1': [fabric_probe.encode(MAC, 'spark-b', 'enp1s0f0np0', 'lab')]}
    fake_ports(monkeypatch, tmp_path, clock, loop)
    heard = fabric_probe.listen(['enp1s0f0np0', 'enp1s0f1np1'], 'spark-b', 'lab', 4.0, sysfs_root=str(tmp_path),
                                clock=clock, linger=1.0)
    assert [(h['host'], h['interface']) for h in heard['enp1s0f0np0']] == [('spark-b', 'enp1s0f1np1')]
    assert [(h['host'], h['interface']) for h in heard['enp1s0f1np1']] == [('spark-b', 'enp1s0f0np0')]
    # heard at 0.5 s, then announced 1 s more (linger), not the whole 4 s window
    assert 1.5 <= clock.now < 2.0


def test_a_frame_of_another_interface_is_not_credited_to_this_port(monkeypatch, tmp_path):
    """A packet socket made with a protocol reads every interface until bind() narrows it: CI's real-socket test saw
    a pulled cable's port 'hear' the other port's peer. The socket is made with protocol 0 (it reads nothing until
    bind sets interface and protocol together), and a frame the kernel says came in on another interface is dropped."""
    clock = FakeClock()
    peer = fabric_probe.encode(MAC, 'spark-b', 'enp1s0f1np1', 'lab')
    inbox = {'enp1s0f0np0': [peer], 'enp1s0f1np1': [(peer, 'enp1s0f0np0')]}
    socks = fake_ports(monkeypatch, tmp_path, clock, inbox)
    heard = fabric_probe.listen(['enp1s0f0np0', 'enp1s0f1np1'], 'spark-a', 'lab', 1.0, sysfs_root=str(tmp_path),
                                clock=clock, extend=0)
    assert [(h['host'], h['interface']) for h in heard['enp1s0f0np0']] == [('spark-b', 'enp1s0f1np1')]
    assert heard['enp1s0f1np1'] == []
    assert all(sock.args[2] == 0 for sock in socks)


def test_link_state_tells_a_pulled_cable_from_a_port_that_is_down(tmp_path):
    net = tmp_path / 'class' / 'net'
    for name, flags, operstate, carrier in (('pulled', '0x1003', 'down', '0'), ('cabled', '0x1003', 'up', '1'),
                                            ('off', '0x1002', 'down', None)):
        (net / name).mkdir(parents=True)
        (net / name / 'flags').write_text(flags + '\n')
        (net / name / 'operstate').write_text(operstate + '\n')
        if carrier is not None:  # the kernel refuses to read carrier while the interface is down
            (net / name / 'carrier').write_text(carrier + '\n')
    assert fabric_probe.link_state(str(tmp_path), 'pulled') == {'carrier': False, 'operstate': 'down', 'up': True}
    assert fabric_probe.link_state(str(tmp_path), 'cabled') == {'carrier': True, 'operstate': 'up', 'up': True}
    assert fabric_probe.link_state(str(tmp_path), 'off') == {'carrier': None, 'operstate': 'down', 'up': False}


REAL = '''
import json, sys, threading
from ansible_collections.sparkfold.cluster.plugins.module_utils import fabric_probe as p
res = {}
def run(host, ifs):
    res[host] = {'heard': {i: [(x['host'], x['interface']) for x in v] for i, v in p.listen(ifs, host, 'test', 2.0,
                 linger=0.5).items()}, 'carrier': {i: p.link_state('/sys', i)['carrier'] for i in ifs}}
threads = [threading.Thread(target=run, args=a) for a in (('A', ['a0', 'a1']), ('B', ['b1']), ('C', ['c0', 'c1']))]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps(res))
'''


def test_real_sockets_a_cable_a_loop_and_a_pulled_cable(tmp_path):
    """Kernel packet sockets in a network namespace of the test's own (root only): veth pairs as cables.
    A's port 0 cabled to B's port 1, C's two ports to each other (a loop), A's port 1 pulled (the far end down)."""
    if os.geteuid() != 0 or shutil.which('ip') is None:
        pytest.skip('needs root and iproute2 (a network namespace of its own)')
    netns = f'sftest{uuid.uuid4().hex[:8]}'
    if subprocess.run(['ip', 'netns', 'add', netns], capture_output=True, check=False).returncode != 0:
        pytest.skip('this kernel or container cannot make a network namespace')
    try:
        setup = ('ip link add a0 type veth peer name b1 && ip link add c0 type veth peer name c1 && '
                 'ip link add a1 type veth peer name xx && for i in a0 b1 c0 c1 a1; do ip link set $i up; done')
        subprocess.run(['ip', 'netns', 'exec', netns, 'sh', '-c', setup], check=True, capture_output=True)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run(['ip', 'netns', 'exec', netns, sys.executable, '-c', REAL], check=True,
                             capture_output=True, text=True, env=env, timeout=60).stdout
    finally:
        subprocess.run(['ip', 'netns', 'del', netns], check=False)
    seen = json.loads(out)
    assert seen['A'] == {'heard': {'a0': [['B', 'b1']], 'a1': []}, 'carrier': {'a0': True, 'a1': False}}
    assert seen['B']['heard'] == {'b1': [['A', 'a0']]}
    assert seen['C']['heard'] == {'c0': [['C', 'c1']], 'c1': [['C', 'c0']]}
