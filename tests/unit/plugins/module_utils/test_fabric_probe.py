# SPDX-License-Identifier: GPL-3.0-or-later
"""The cable probe's frames: what one node sends is what the node at the other end reads."""

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
