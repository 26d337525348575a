# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet: the clusters of one inventory, each with its own head, workers and recipe (docs/operations.md, "A fleet").

A cluster is a group named ``cluster_<name>`` (any depth under ``sparks``); its head is its host in the group
``head``, its workers its hosts in the group ``workers``, in that group's order (rank 1, 2, ...). The groups
``head`` and ``workers`` keep their meaning across the fleet: every cluster's head is in ``head``, so
``hosts: head`` (smoke, bench) runs on every head at once. An inventory without any ``cluster_*`` group is a fleet
of one cluster, named ``sparks``, made of the groups ``head`` and ``workers`` as before.

fleet_clusters lays the clusters out; fleet_problems refuses the inventories no cluster can be made from (a host in
two clusters, a cluster without a head or with two, a host of a cluster in neither head nor workers, a Spark in no
cluster, two clusters on one rail subnet, a cluster whose fabric plan reads another group); fleet_recipe_problems
checks each cluster against its own recipe (recipe_cluster_problems, world included). fleet_limits names the
--limit of each cluster with a host in a play, so that site.yml runs a play over several clusters as one run per
cluster; fleet_not_dispatched leaves the hosts so handed on out of that run's later plays. Documentation lives in
the sidecar files fleet_clusters.yml, fleet_limits.yml, fleet_problems.yml and so on, one per filter.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text
from ansible_collections.sparkfold.cluster.plugins.filter.cluster import RING_CIDR, recipe_cluster_problems

PREFIX = 'cluster_'
SINGLE = 'sparks'
# The hosts that site.yml's first play handed to one run per cluster (the fleet role's tasks/site.yml adds them): the
# run's later plays leave them out (fleet_not_dispatched).
DISPATCHED = 'sparkfold_fleet_dispatched'


def _groups(groups):
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError(f'fleet_clusters: expects the inventory groups (groups), got {to_text(groups)!r}')
    return {to_text(name): [to_text(host) for host in hosts or []] for name, hosts in groups.items()}


def _cluster_groups(groups):
    return [name for name in groups if name.startswith(PREFIX) and len(name) > len(PREFIX)]


def fleet_clusters(groups):
    """{cluster: {'heads': [...], 'workers': [...], 'hosts': [...]}}, in the inventory's order; see
    fleet_clusters.yml. ``heads`` holds every host of the cluster in the group head (one when the inventory is
    right: fleet_problems says otherwise)."""
    groups = _groups(groups)
    heads, workers = groups.get('head', []), groups.get('workers', [])
    names = _cluster_groups(groups)
    if not names:
        return {SINGLE: {'heads': list(heads), 'workers': list(workers), 'hosts': [*heads[:1], *workers]}}
    clusters = {}
    for name in names:
        members = groups[name]
        mine = [host for host in heads if host in members]
        theirs = [host for host in workers if host in members]
        clusters[name] = {'heads': mine, 'workers': theirs, 'hosts': [*mine[:1], *theirs]}
    return clusters


def fleet_cluster_of(groups, host):
    """The name of the cluster ``host`` belongs to (the first one, when it is wrongly in two), or ''."""
    groups = _groups(groups)
    host = to_text(host)
    names = _cluster_groups(groups)
    if not names:
        return SINGLE if host in groups.get('head', []) + groups.get('workers', []) else ''
    return next((name for name in names if host in groups[name]), '')


def fleet_limits(groups, hosts):
    """{cluster: its --limit} for each cluster with a host in ``hosts`` (a play's), in the inventory's order: the
    cluster's group when all its hosts are in ``hosts``, else those that are, comma-joined. Hosts of no cluster
    are left out. See fleet_limits.yml."""
    groups = _groups(groups)
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, Sequence):
        raise AnsibleFilterError('fleet_limits: expects a list of hosts (ansible_play_hosts_all), got '
                                 f'{to_text(hosts)!r}')
    names = _cluster_groups(groups)
    members = {name: groups[name] for name in names} or \
        {SINGLE: [*groups.get('head', []), *groups.get('workers', [])]}
    owner = {}  # each host's cluster, the first one as fleet_cluster_of says
    for name, found in members.items():
        for host in found:
            owner.setdefault(host, name)
    mine = {}
    for host in dict.fromkeys(to_text(host) for host in hosts):
        if host in owner:
            mine.setdefault(owner[host], []).append(host)
    return {name: name if set(members[name]) <= set(mine[name]) else ','.join(mine[name])
            for name in members if name in mine}


def fleet_not_dispatched(pattern, groups):
    """``pattern`` less the hosts site.yml's first play handed to runs of their own (the group
    sparkfold_fleet_dispatched): a later play of that run then has no host. ``pattern`` itself when there is no
    such group, as in every run over one cluster. See fleet_not_dispatched.yml."""
    pattern = to_text(pattern)
    return f'{pattern}:!{DISPATCHED}' if DISPATCHED in _groups(groups) else pattern


def _subnets(found):
    """(rail name, ip_network) for each rail of one host's variables; a ring's rails share fabric_ring_cidr."""
    rails = found.get('fabric_rails') if isinstance(found, Mapping) else None
    if not isinstance(rails, list):
        return []
    out = []
    for rail in rails:
        if not isinstance(rail, Mapping):
            continue
        cidr = rail.get('cidr') or (found.get('fabric_ring_cidr', RING_CIDR)
                                    if to_text(found.get('fabric_topology', '')) == 'ring' else None)
        try:
            out.append((to_text(rail.get('name', '?')), ipaddress.ip_network(to_text(cidr), strict=False)))
        except ValueError:
            continue  # no cidr, or a wrong one: the fabric role's own checks name it
    return out


def _vars(hostvars, host):
    try:
        found = hostvars[host]
    except (KeyError, TypeError):
        return {}
    return found if isinstance(found, Mapping) else {}


def fleet_problems(groups, hostvars):
    """What no fleet can be made from, one sentence each; [] when every cluster is sound. See fleet_problems.yml."""
    groups = _groups(groups)
    names = _cluster_groups(groups)
    if not names:
        return []  # a fleet of one: the recipe role's recipe_cluster_problems checks head and workers
    problems = []
    heads, workers = groups.get('head', []), groups.get('workers', [])
    member_of = {}
    for name in names:
        for host in groups[name]:
            member_of.setdefault(host, []).append(name)
    problems.extend(f"{host} is in {len(found)} clusters ({', '.join(found)}): a Spark belongs to one cluster, "
                    f"keep it in one cluster_* group" for host, found in member_of.items() if len(found) > 1)
    spares = [host for host in dict.fromkeys([*groups.get('sparks', []), *heads, *workers]) if host not in member_of]
    problems.extend(f'{host} is in no cluster: put it in the cluster_* group of its cluster (the fleet\'s '
                    f'clusters are {", ".join(names)})' for host in spares)
    clusters = fleet_clusters(groups)
    for name in names:
        cluster = clusters[name]
        if not cluster['heads']:
            problems.append(f'{name} has no head: put one of its hosts ({", ".join(groups[name]) or "none"}) '
                            f'in the group head (rank 0)')
        elif len(cluster['heads']) > 1:
            problems.append(f'{name} has {len(cluster["heads"])} heads ({", ".join(cluster["heads"])}): '
                            f'one host of a cluster is in the group head, the others in workers')
        problems.extend(f'{host} of {name} is in neither head nor workers: put it in one of them'
                        for host in groups[name] if host not in heads and host not in workers)
        problems.extend(f"{host} of {name} plans its fabric from the group "
                        f"{to_text(_vars(hostvars, host).get('fabric_group', 'sparks'))}: set fabric_group: {name} "
                        f"in group_vars/{name}.yml (the fabric role's peers are that group's hosts)"
                        for host in groups[name] if host in heads + workers
                        and to_text(_vars(hostvars, host).get('fabric_group', 'sparks')) != name)
    # Rails: no two clusters on one subnet (one cluster may reuse its own subnet on every node, as a pair does).
    seen = []
    for name in names:
        mine = {}
        for host in clusters[name]['hosts']:
            for rail, net in _subnets(_vars(hostvars, host)):
                mine.setdefault(net, rail)
        for net, rail in mine.items():
            for other, other_rail, other_net in seen:
                if other != name and net.version == other_net.version and net.overlaps(other_net):
                    problems.append(f'{other} and {name} share a rail subnet ({other_rail} {other_net}, {rail} {net}): '
                                    f'give each cluster subnets of its own (fabric_rails cidr, or fabric_ring_cidr '
                                    f'for a ring, in group_vars/{name}.yml)')
        seen.extend((name, rail, net) for net, rail in mine.items())
    return list(dict.fromkeys(problems))


def fleet_recipe_problems(clusters, hostvars, hosts):
    """Each cluster against its own recipe, for the clusters with a host in ``hosts`` (the play's); see
    fleet_recipe_problems.yml. A fleet of one says its problems as recipe_cluster_problems does."""
    if not isinstance(clusters, Mapping):
        raise AnsibleFilterError('fleet_recipe_problems: expects the fleet (fleet_clusters), got '
                                 f'{to_text(clusters)!r}')
    hosts = [to_text(host) for host in hosts or []]
    out = []
    for name, cluster in clusters.items():
        members = [*cluster['heads'], *cluster['workers']]
        present = [host for host in members if host in hosts]
        if not present:
            continue
        specs = {}
        for host in present:
            spec = _vars(hostvars, host).get('recipe_spec')
            if isinstance(spec, Mapping):
                specs.setdefault(to_text(spec.get('name')), (host, spec))
        if not specs:
            continue
        if len(specs) > 1:
            out.append(f"{name}: its hosts load different recipes ({', '.join(sorted(specs))}): one cluster runs "
                       f"one recipe, set recipe_name in group_vars/{name}.yml")
            continue
        recipe, (_host, spec) = next(iter(specs.items()))
        found = recipe_cluster_problems(cluster['heads'], cluster['workers'], hostvars, spec)
        if not found:
            continue
        if len(clusters) == 1:
            out.append(f"The inventory does not fit recipe '{recipe}': {'; '.join(found)}")
        else:
            out.append(f"{name} does not fit its recipe '{recipe}': {'; '.join(found)}")
    return out


def fleet_recap(stdout):
    """The PLAY RECAP lines of one run's output (``host : ok=.. changed=.. failed=..``), without the padding."""
    lines = to_text(stdout or '').splitlines()
    start = max((i for i, line in enumerate(lines) if line.startswith('PLAY RECAP')), default=None)
    if start is None:
        return []
    return [' '.join(line.split()) for line in lines[start + 1:] if ' : ok=' in line]


def fleet_recap_line(outcome):
    """One cluster's line of the fleet's recap: its name, ok or FAILED (the exit status), the hosts that failed or
    were unreachable, its log."""
    if not isinstance(outcome, Mapping):
        raise AnsibleFilterError(f'fleet_recap_line: expects a dict (cluster, rc, log, recap), got {outcome!r}')
    rc = outcome.get('rc')
    bad = [line.split(' : ', 1)[0] for line in outcome.get('recap') or []
           if 'failed=0' not in line.split() or 'unreachable=0' not in line.split()]
    state = 'ok' if rc == 0 else f'FAILED (exit status {rc})'
    hosts = f", failed or unreachable: {', '.join(bad)}" if bad else ''
    return f"{to_text(outcome.get('cluster'))}: {state}{hosts}; log {to_text(outcome.get('log'))}"


class FilterModule:
    """sparkfold fleet filters."""

    def filters(self):
        return {
            'fleet_clusters': fleet_clusters,
            'fleet_cluster_of': fleet_cluster_of,
            'fleet_limits': fleet_limits,
            'fleet_not_dispatched': fleet_not_dispatched,
            'fleet_problems': fleet_problems,
            'fleet_recipe_problems': fleet_recipe_problems,
            'fleet_recap': fleet_recap,
            'fleet_recap_line': fleet_recap_line,
        }
