# SPDX-License-Identifier: GPL-3.0-or-later
"""What a fleet costs the controller (docs/operations.md, "A fleet at scale"): no nodes, local connections.

Two measurements, each printed as one line per size:
- one run over a whole fleet: the recipe role (every playbook's first work: the fleet's refusals, each host's own
  cluster facts) on N made-up pairs in one play, as playbooks/doctor.yml reads a fleet; wall time and the peak
  memory of ansible-playbook and its forks together;
- one run per cluster: the fixed cost of one ansible-playbook process (start, inventory, one trivial play), which
  playbooks/fleet.yml pays once per cluster.
Figures, not a test.

    .venv/bin/python benchmarks/fleet_controller.py --clusters 10,50
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.unit.playbook import run_playbook  # noqa: E402  (after the path set-up)

RECIPE_PLAY = """
- name: Load the recipe as every playbook does
  hosts: sparks
  gather_facts: false
  vars:
    recipe_fleet_play: true
  roles:
    - role: sparkfold.cluster.recipe
"""

TRIVIAL_PLAY = """
- name: One trivial play
  hosts: sparks
  gather_facts: false
  tasks:
    - name: Nothing
      ansible.builtin.debug:
        msg: ok
"""


def fleet_inventory(clusters):
    children = {'head': {'hosts': {}}, 'workers': {'hosts': {}}}
    for n in range(clusters):
        name = f'cluster_{n:03d}'
        head, worker = f'{name}-a', f'{name}-b'
        children['head']['hosts'][head] = {}
        children['workers']['hosts'][worker] = {}
        # rails 10.<100 + n/64>.<(n%64)*4 and +1>.0/24: every cluster on subnets of its own
        prefix, third = f'10.{100 + n // 64}', (n % 64) * 4
        rails = [{'name': 'rail0', 'interface': 'enp1s0f1np1', 'cidr': f'{prefix}.{third}.0/24',
                  'rdma_device': 'rocep1s0f1'},
                 {'name': 'rail1', 'interface': 'enP2p1s0f1np1', 'cidr': f'{prefix}.{third + 1}.0/24',
                  'rdma_device': 'roceP2p1s0f1'}]
        children[name] = {'hosts': {head: {}, worker: {}},
                          'vars': {'fabric_group': name, 'fabric_rails': rails, 'recipe_name': 'dsv41-flash-tp2-zig'}}
    return {'sparks': {'children': children,
                       'vars': {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}}}


def measure(play, inventory, tmp):
    (tmp / 'play.yml').write_text(play)
    (tmp / 'hosts.yml').write_text(json.dumps(inventory))
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.monotonic()
    result = run_playbook(tmp / 'play.yml', tmp / 'hosts.yml', tmp, timeout=3600, quiet=True)
    wall = time.monotonic() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if result.returncode != 0:
        raise SystemExit(result.stdout[-3000:])
    return wall, max(peak, before) / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--clusters', default='10,50', help='fleet sizes (pairs), comma-separated')
    args = parser.parse_args()
    version = subprocess.run([sys.executable, '-m', 'ansible', 'playbook', '--version'], capture_output=True,
                             text=True, check=True).stdout.splitlines()[0]
    print(f'# {version}; forks as ansible.cfg sets them; peak RSS is the largest single process seen so far')
    for clusters in [int(n) for n in args.clusters.split(',')]:
        with tempfile.TemporaryDirectory() as tmp:
            wall, rss = measure(RECIPE_PLAY, fleet_inventory(clusters), pathlib.Path(tmp))
        print(f'one run, recipe role over {clusters} pairs ({2 * clusters} hosts): {wall:.1f} s, '
              f'peak RSS {rss:.0f} MiB')
    with tempfile.TemporaryDirectory() as tmp:
        wall, rss = measure(TRIVIAL_PLAY, fleet_inventory(1), pathlib.Path(tmp))
    print(f'one run per cluster, fixed cost of one ansible-playbook (1 pair, 1 trivial task): {wall:.1f} s, '
          f'peak RSS {rss:.0f} MiB')


if __name__ == '__main__':
    main()
