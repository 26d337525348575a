# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Who is on the other end of a cable: broadcast Ethernet frames that carry the sender's name and port.

Works below IP (no address needed, so before and after the fabric is addressed), on the link only:
a frame is never routed, so what a port hears is the node at the other end of its cable.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import time

# IEEE 802 "local experimental" EtherType: never forwarded by anything that routes.
ETHERTYPE = 0x88B5
MAGIC = b'SPARKFOLD-CABLE1 '
BROADCAST = b'\xff' * 6


def encode(src_mac, host, interface, cluster):
    """One probe frame: Ethernet header, the magic, then JSON {host, interface, cluster}."""
    payload = MAGIC + json.dumps({'host': host, 'interface': interface, 'cluster': cluster},
                                 sort_keys=True).encode('utf-8')
    frame = BROADCAST + src_mac + struct.pack('!H', ETHERTYPE) + payload
    return frame + b'\0' * max(0, 60 - len(frame))


def decode(frame, cluster):
    """{host, interface, mac} of a probe frame of this cluster, else None (anything else on the wire)."""
    if len(frame) < 14 + len(MAGIC) or struct.unpack('!H', frame[12:14])[0] != ETHERTYPE:
        return None
    body = frame[14:].rstrip(b'\0')
    if not body.startswith(MAGIC):
        return None
    try:
        data = json.loads(body[len(MAGIC):].decode('utf-8'))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or data.get('cluster') != cluster:
        return None
    host, interface = data.get('host'), data.get('interface')
    if not isinstance(host, str) or not isinstance(interface, str):
        return None
    return {'host': host, 'interface': interface, 'mac': ':'.join(f'{b:02x}' for b in frame[6:12])}


def mac_of(sysfs_root, interface):
    with open(f'{sysfs_root}/class/net/{interface}/address', encoding='ascii') as handle:
        return bytes(int(part, 16) for part in handle.read().strip().split(':'))


def link_state(sysfs_root, interface):
    """{carrier, operstate, up} of an interface from sysfs: carrier True/False (None while the interface is
    administratively down: the kernel refuses to read it then), up whether it is administratively up."""
    base = f'{sysfs_root}/class/net/{interface}'
    state = {'carrier': None, 'operstate': 'unknown', 'up': False}
    with contextlib.suppress(OSError, ValueError), open(f'{base}/operstate', encoding='ascii') as handle:
        state['operstate'] = handle.read().strip()
    with contextlib.suppress(OSError, ValueError), open(f'{base}/flags', encoding='ascii') as handle:
        state['up'] = bool(int(handle.read().strip(), 16) & 0x1)  # IFF_UP
    with contextlib.suppress(OSError, ValueError), open(f'{base}/carrier', encoding='ascii') as handle:
        state['carrier'] = handle.read().strip() == '1'
    return state


def listen(interfaces, host, cluster, seconds, interval=0.2, sysfs_root='/sys', clock=time.monotonic, extend=2,
           linger=None):
    """Announce this host on every interface every ``interval`` seconds for ``seconds`` and collect what
    each interface hears: interface -> sorted list of {host, interface, mac}. Its own frames are left out,
    but not those of its other ports: a port that hears this host's other port is cabled to it (a loop).

    A node that started late hears the others only while they still announce: every node keeps
    announcing ``linger`` seconds (default ``seconds``) past the moment all its interfaces heard someone,
    and while an interface has heard nobody the window grows by ``seconds``, up to ``extend`` times (a port
    without a peer costs ``seconds * (1 + extend)``). A well cabled node is done once its last neighbour
    started, plus ``linger``."""
    linger = seconds if linger is None else linger
    sockets = {}
    try:
        for interface in interfaces:
            # Protocol 0: a packet socket made with a protocol reads every interface's frames until bind() narrows
            # it to one, so a port could be credited with a frame another port heard (seen under load: a pulled
            # cable's port "hearing" the other port's peer). bind() sets the interface and the protocol at once.
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            sock.bind((interface, ETHERTYPE))
            sock.setblocking(False)
            sockets[sock] = (interface, encode(mac_of(sysfs_root, interface), host, interface, cluster))
        heard = {interface: {} for interface in interfaces}
        start = clock()
        deadline = start + seconds
        extended = 0
        all_since = None  # when every interface had heard someone: keep announcing `seconds` past it
        next_send = 0.0
        while True:
            now = clock()
            if all_since is None and all(heard.values()):
                all_since = now
            if all_since is not None and now - all_since >= linger:
                break
            if now >= deadline:
                if all_since is None and extended >= extend:
                    break
                if all_since is None:
                    extended += 1
                deadline = all_since + linger if all_since is not None else deadline + seconds
            now = clock()
            if now >= next_send:
                for sock, (_interface, frame) in sockets.items():
                    # a link without carrier: it hears nothing either, and says so
                    with contextlib.suppress(OSError):
                        sock.send(frame)
                next_send = now + interval
            until = min(next_send, deadline, all_since + linger) if all_since is not None else min(next_send, deadline)
            ready, _w, _x = select.select(list(sockets), [], [], max(0.0, until - clock()))
            for sock in ready:
                try:
                    frame, address = sock.recvfrom(2048)
                except OSError:
                    continue
                here = sockets[sock][0]
                if address[0] != here:  # the interface the kernel says the frame came in on (sockaddr_ll)
                    continue
                seen = decode(frame, cluster)
                # a packet socket also reads what its own interface sends; this host's other port is a loop
                if seen and (seen['host'], seen['interface']) != (host, here):
                    heard[here][(seen['host'], seen['interface'])] = seen
        return {interface: [found[key] for key in sorted(found)] for interface, found in heard.items()}
    finally:
        for sock in sockets:
            sock.close()
