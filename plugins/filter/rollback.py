# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The automatic rollback's plan (engine_service role, tasks/rollback.yml).

Documentation lives in the sidecar file engine_rollback_plan.yml next to this one.
"""

from __future__ import annotations

import posixpath

from ansible.errors import AnsibleFilterError


def _build_id(path):
    return posixpath.basename(path.rstrip('/')) if path else ''


def engine_rollback_plan(nodes):
    """What the rollback changes on each node, or why it cannot roll back (problems)."""
    if not isinstance(nodes, list) or not nodes:
        raise AnsibleFilterError(f'engine_rollback_plan: expects a non-empty list of nodes, got {nodes!r}')
    problems = []
    hosts = {}
    unrecorded = []
    for node in nodes:
        if not isinstance(node, dict) or 'host' not in node:
            raise AnsibleFilterError(f'engine_rollback_plan: every node needs a host, got {node!r}')
        host = node['host']
        record = node.get('record') or {}
        current = node.get('current') or ''
        serving = record.get('build') or ''
        if not serving:
            unrecorded.append(host)
            continue
        if not node.get('build_ok'):
            problems.append(f'{host}: the build that served, {serving}, is no longer installed (it has no stamp)')
        files = [dict(zip(('name', 'live', 'kept'), f)) if isinstance(f, (list, tuple)) else f
                 for f in node.get('files') or []]
        lost = [f['name'] for f in files if not f.get('kept')]
        if lost:
            problems.append(f"{host}: the record of what served lacks {', '.join(lost)}")
        hosts[host] = {
            'serving_build': serving,
            'failed_build': current,
            'relink': current != serving,
            'restore': [f['name'] for f in files if f.get('kept') and f.get('live') != f.get('kept')],
        }
    if unrecorded:
        problems.append(
            f"{', '.join(unrecorded)}: no record of an engine that served and passed the smoke test (serving.json): "
            'a first install has nothing to go back to')
    builds = sorted({_build_id(h['serving_build']) for h in hosts.values()})
    if len(builds) > 1:
        named = ', '.join(f"{host}: {_build_id(h['serving_build'])}" for host, h in sorted(hosts.items()))
        problems.append(f'the nodes last served different builds ({named})')
    changes = any(h['relink'] or h['restore'] for h in hosts.values())
    if not problems and not changes:
        problems.append(
            f'what runs now is what last served and passed the smoke test (build {builds[0]}, the same units and '
            'engine.env): there is nothing to roll back to')
    failed = sorted({_build_id(h['failed_build']) for h in hosts.values() if h['relink'] and h['failed_build']})
    return {
        'problems': problems,
        'hosts': hosts,
        'changes': changes,
        'serving_build_id': builds[0] if len(builds) == 1 else '',
        'failed_build_ids': failed,
        'restores_files': sorted({name for h in hosts.values() for name in h['restore']}),
    }


class FilterModule:
    def filters(self):
        return {'engine_rollback_plan': engine_rollback_plan}
