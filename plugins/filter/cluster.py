# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster one recipe runs on, computed once from the hosts of that cluster and the checked recipe.

Every fact more than one role needs is here: the head, the ranks, the world, the topology, each node's fabric
plan and addresses, the rendezvous address, the RDMA devices, the worker store mode, the start order, the start
budget and where each worker copies from. The recipe role sets the result as the fact ``recipe_cluster`` once a
run; the other roles read it. Documentation lives in the sidecar files recipe_cluster.yml and
recipe_cluster_problems.yml.

The input is the hosts of ONE cluster (the head's names, the workers' names, the hosts' variables), so an
inventory of many clusters can call it once per cluster.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text
from ansible_collections.sparkfold.cluster.plugins.filter.fabric import fabric_plan, weights_sources
from ansible_collections.sparkfold.cluster.plugins.filter.recipe import CONTAINER_FLAVOURS

# The fabric role's defaults for what an inventory may leave out (roles/fabric/defaults/main.yml): the
# ring's supernet; fabric_topology is `pair` for two nodes, else `switch`; fabric_host_index is the node's
# place in the cluster (the head first, then the workers in inventory order), 1-based.
RING_CIDR = '10.10.0.0/16'
WORKER_STORES = ('copy', 'nfs')
START_ORDERS = ('followers_first', 'ascending', 'descending')


def _vars(hostvars, host):
    """The variables of ``host`` (a mapping), from Ansible's hostvars or a plain dict."""
    try:
        found = hostvars[host]
    except (KeyError, TypeError):
        found = None
    if not isinstance(found, Mapping):
        raise AnsibleFilterError(f'recipe_cluster: no variables for host {to_text(host)!r} in hostvars')
    return found


def _get(found, name, default=None):
    return found.get(name, default)


def _names(value, what):
    if value is None:
        return []
    if isinstance(value, (str, Mapping)) or not isinstance(value, (list, tuple)):
        raise AnsibleFilterError(f'recipe_cluster: {what} must be a list of host names, got {to_text(value)!r}')
    return [to_text(name) for name in value]


def _topology(head_vars, world):
    return to_text(_get(head_vars, 'fabric_topology', 'pair' if world == 2 else 'switch'))


def recipe_cluster_problems(heads, workers, hostvars, spec):
    """What does not fit between the inventory's cluster and the recipe, one sentence each; [] when it fits."""
    heads, workers = _names(heads, 'heads'), _names(workers, 'workers')
    problems = []
    if len(heads) != 1:
        problems.append(f'the group head must hold exactly one host (rank 0), it holds {len(heads)}')
    nodes = heads[:1] + workers
    world = spec.get('world')
    if len(nodes) != world:
        problems.append(f'the recipe runs {world} ranks, the inventory has {len(nodes)} (head + workers)')
    found = {host: _vars(hostvars, host) for host in nodes}
    problems.extend(f"{host} has no fabric_rails (the fabric role plans the ranks' addresses from them)"
                    for host in nodes if 'fabric_rails' not in found[host])
    wanted = (spec.get('fabric') or {}).get('topology')
    if wanted is not None:
        # The hosts without the variable, then those with another value, as the recipe role has said it.
        cabled = [host for host in nodes if 'fabric_topology' not in found[host]]
        cabled += [host for host in nodes if 'fabric_topology' in found[host]
                   and to_text(found[host]['fabric_topology']) != wanted]
        problems.extend(f'{host} is not cabled as the recipe needs: set fabric_topology: {wanted} (the recipe is '
                        f'written for a {wanted}, docs/fabric.md)' for host in cabled)
    return problems


def _plan(found, index, world, topology):
    kwargs = {'min_hosts': world, 'topology': topology,
              'ring_cidr': to_text(_get(found, 'fabric_ring_cidr', RING_CIDR))}
    if 'fabric_mtu' in found:
        kwargs['mtu'] = found['fabric_mtu']
    return fabric_plan(found['fabric_rails'], index, **kwargs)


def _start_order(order, world):
    """The ranks in the order they start: the followers (all at once for followers_first, listed ascending),
    then rank 0, always last."""
    if order not in START_ORDERS:
        raise AnsibleFilterError(f"recipe_cluster: launch.order must be one of {', '.join(START_ORDERS)}, "
                                 f'got {to_text(order)!r}')
    followers = list(range(1, world))
    if order == 'descending':
        followers.reverse()
    return [*followers, 0]


def start_budget(spec, world):
    """What one start of a rank's unit waits for, from the checked recipe (systemd's TimeoutStartSec covers
    ExecStartPre, ExecStart and ExecStartPost; roles/engine_service/templates/sparkfold-engine@.service.j2,
    rank.conf.j2 and files/sparkfold-engine-gate.py), and what the starts of one ordered restart add up to.

    pre_s   ExecStartPre: nvidia-modprobe, the memory gate's sync, page-cache drop and compaction before its wait
            (60 s); a container recipe's `<runtime> rm --force` of a container left by a killed run, which stops
            it within container.options.stop_timeout.
    gate_s  the memory gate's wait, memory.gate_timeout_s.
    ready_s rank 0's ready gate (ExecStartPost): the source's own wait, ready.timeout_s.
    post_s  the ready gate's last round, begun before its deadline: /health, the models list and the container log,
            10 s each at most, and the one chat check (120 s at most) where the recipe has ready.chat.
    needed_s  the sum: rank 0's start, and every unit's TimeoutStartSec.
    follower_s  a follower's start (Type=exec, no ready gate): pre_s + gate_s.
    restart_s  the starts of one ordered restart, one after the other (the engine_service role and the watchdog
            start each follower, then rank 0): (world - 1) x follower_s + needed_s.
    """
    container = spec.get('flavour') in CONTAINER_FLAVOURS
    stop_timeout = int(((spec.get('container') or {}).get('options') or {}).get('stop_timeout', 0)) if container else 0
    ready = spec.get('ready') or {}
    waits = {
        'pre_s': 60 + stop_timeout,
        'gate_s': int((spec.get('memory') or {}).get('gate_timeout_s', 0)),
        'ready_s': int(ready.get('timeout_s', 0)),
        'post_s': 30 + (120 if 'chat' in ready else 0),
    }
    needed = sum(waits.values())
    follower = waits['pre_s'] + waits['gate_s']
    return {**waits, 'needed_s': needed, 'follower_s': follower,
            'restart_s': (int(world) - 1) * follower + needed}


def recipe_cluster(heads, workers, hostvars, spec, worker_store='copy'):
    """The cluster facts of one cluster: see recipe_cluster.yml."""
    if not isinstance(spec, Mapping):
        raise AnsibleFilterError(f'recipe_cluster: spec must be the checked recipe (recipe_spec), got {spec!r}')
    problems = recipe_cluster_problems(heads, workers, hostvars, spec)
    if problems:
        raise AnsibleFilterError(f"the inventory does not fit recipe '{spec.get('name')}': {'; '.join(problems)}")
    worker_store = to_text(worker_store)
    if worker_store not in WORKER_STORES:
        raise AnsibleFilterError(f"recipe_cluster: the worker store is {worker_store!r}; use nfs or copy")
    nodes = _names(heads, 'heads')[:1] + _names(workers, 'workers')
    world = len(nodes)
    found = {host: _vars(hostvars, host) for host in nodes}
    head = nodes[0]
    topology = _topology(found[head], world)
    hosts = {}
    for rank, host in enumerate(nodes):
        index = int(_get(found[host], 'fabric_host_index', rank + 1))
        plan = _plan(found[host], index, world, topology)
        hosts[host] = {
            'rank': rank,
            'index': index,
            'plan': plan,
            'addresses': [rail['address'] for rail in plan],
            # A ring's ports face two neighbours on two cables: no one fabric address names the node there.
            'fabric_address': '' if topology == 'ring' else plan[0]['address'],
            'management_address': to_text(_get(found[host], 'sparkfold_management_address',
                                               _get(found[host], 'ansible_host', host))),
            'rdma_devices': [rail['rdma_device'] for rail in plan if rail['rdma_device']],
        }
    # A ring has no fabric path from the head to the opposite node: the rendezvous goes over the management
    # network there, as the ring recipes bootstrap (MiaAI .env.tp4.example NCCL_SOCKET_IFNAME=enP7s7; jnardiello
    # cluster.env.example MASTER_IP = rank 0's management address).
    head_fabric_address = hosts[head]['plan'][0]['address']
    rendezvous = hosts[head]['management_address'] if topology == 'ring' else head_fabric_address
    plans = {host: hosts[host]['plan'] for host in nodes}
    sources = weights_sources(nodes, topology, plans) if world > 1 else {}
    return {
        'head': head,
        'workers': nodes[1:],
        'nodes': nodes,
        'world': world,
        'topology': topology,
        'head_fabric_address': head_fabric_address,
        'rendezvous_address': rendezvous,
        'worker_store': worker_store,
        'start_order': _start_order((spec.get('launch') or {}).get('order', 'followers_first'), world),
        'start_budget': start_budget(spec, world),
        'sources': sources,
        'waves': max((plan['wave'] for plan in sources.values()), default=0),
        'hosts': hosts,
    }


class FilterModule:
    """sparkfold cluster filters."""

    def filters(self):
        return {
            'recipe_cluster': recipe_cluster,
            'recipe_cluster_problems': recipe_cluster_problems,
        }
