# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the weights role: whether each store on the head is complete, decided on the controller.

The head reads every store's record in one module run (sparkfold.cluster.read_files), verifies every
store that may be complete in one run (sparkfold.cluster.store_verify with ``stores``), and asks the Hub
only about the stores that are not; these filters carry each store's state between those steps, one
``set_fact`` each instead of a round of tasks per store.

A store (the role's ``weights_stores``) is a dict of name, repo_id, revision, dir, selection,
pin_var, require_index, and tokenizer for the model. Its state adds:

- ``record``: the record of its last completed download ({} when none);
- ``pinnable``: the record describes this store (repository, selection, tokenizer), so pinning
  its commit would let a run go without the Hub;
- ``pin``: the commit checked against the record: the revision, then the commit the Hub named;
- ``why``: why the store is not proved complete at ``pin`` without the Hub ('' when it may be or is);
- ``why_hub``: why the Hub was needed (``why`` at the revision), for the error that names the Hub;
- ``check``: the store's arguments for store_verify at ``pin``;
- ``verified``: store_verify's result when it ran; ``complete``: proved complete at ``pin``;
- ``offline``: complete at the revision itself, so no Hub was asked;
- ``branch``: the revision is a branch or tag (not a full commit), which only the Hub resolves;
- ``requested``: the revision the recipe gives (recorded with the download);
- ``held``: the revision is a branch or tag that the store's record says it was resolved from at its
  first install: the store is held at that recorded commit (``revision`` is then that commit), so the
  run needs no Hub and an upstream change of the branch does not change the deployment until the
  branch is followed (``follow_branches``) or the recipe pins another commit;
- ``commit``: the commit passed on ('' until known; the revision when offline).
"""

from __future__ import annotations

import json
import re

from ansible.errors import AnsibleFilterError

FULL_COMMIT = re.compile(r'^[0-9a-f]{40}$')


def _tokenizer_why(store, record):
    if 'tokenizer' not in store:
        return ''
    tokenizer = record.get('tokenizer') or {}
    if not tokenizer.get('files'):
        return 'no tokenizer files are recorded for it'
    if not tokenizer.get('base_repo_id'):
        return ''
    wanted = store['tokenizer']
    came = f"{tokenizer.get('base_repo_id')}@{tokenizer.get('base_commit')}"
    if (wanted.get('base_repo_id') not in ('', tokenizer.get('base_repo_id'))
            or wanted.get('base_revision') != tokenizer.get('base_commit')):
        return (f"its tokenizer came from {came}, the base model is pinned to "
                f"{wanted.get('base_repo_id') or 'the model card base_model'}@{wanted.get('base_revision')}"
                ' (set weights_base_repo_id and weights_base_revision, or recipe_overrides.weights.tokenizer,'
                ' to the first)')
    return ''


def _why(store, record, pin):
    """Why ``record`` does not prove ``store`` complete at ``pin`` ('' when only its files remain to verify)."""
    if not FULL_COMMIT.match(pin or ''):
        return f'the pin {pin} is a branch or tag, not a full commit: only the Hub resolves it'
    if not record:
        return f"{store['dir']} has no record of a completed download"
    if [record.get('repo_id'), record.get('commit')] != [store['repo_id'], pin]:
        return f"{store['dir']} holds {record.get('repo_id')}@{record.get('commit')}, not {store['repo_id']}@{pin}"
    if record.get('selection') != store['selection']:
        return 'its files were chosen with other allow_patterns or ignore_patterns'
    return _tokenizer_why(store, record)


def _check(store, record, pin, verify):
    tokenizer = record.get('tokenizer') or {}
    return {
        'path': store['dir'],
        'verify': 'manifest' if verify == 'none' else verify,
        'repo_id': store['repo_id'],
        'commit': pin,
        'extra_files': [{'path': path, 'sha256': sha} for path, sha in sorted((tokenizer.get('files') or {}).items())],
        'require_safetensors_index': bool(store.get('require_index', True)),
    }


def _record(store, files, record_file):
    path = f"{store['dir'].rstrip('/')}/{record_file}"
    entry = files.get(path)
    if entry is None:
        raise AnsibleFilterError(f'weights_store_state: {path} was not read')
    if not entry.get('exists') or 'content' not in entry:
        return {}
    try:
        record = json.loads(entry['content'])
    except ValueError as exc:
        raise AnsibleFilterError(
            f'{path} is not a valid record of a download (not JSON: {exc}); remove it and run again') from exc
    if not isinstance(record, dict):
        raise AnsibleFilterError(
            f'{path} is not a valid record of a download (not a JSON object); remove it and run again')
    return record


def _held_commit(store, record, pinnable):
    """The commit a branch or tag pin is held at: the one its record says that revision resolved to ('' if none)."""
    requested = store['revision']
    if FULL_COMMIT.match(requested or '') or not pinnable or record.get('revision') != requested:
        return ''
    commit = record.get('commit') or ''
    return commit if FULL_COMMIT.match(commit) else ''


def weights_store_state(stores, files, record_file, verify, follow_branches=False):
    """Each store's state from its record alone (read_files' ``files``), at its revision.

    A branch or tag pin whose record says the store was resolved from that same revision is held at the
    recorded commit unless ``follow_branches``: the run then needs no Hub, and the branch moving upstream
    changes nothing until it is followed on purpose."""
    if not isinstance(stores, list) or not isinstance(files, dict):
        raise AnsibleFilterError('weights_store_state: give the stores (a list) and read_files\' files (a dict)')
    states = []
    for store in stores:
        record = _record(store, files, record_file)
        pinnable = (bool(record) and record.get('repo_id') == store['repo_id']
                    and record.get('selection') == store['selection'] and _tokenizer_why(store, record) == '')
        held = '' if follow_branches else _held_commit(store, record, pinnable)
        pin = held or store['revision']
        why = _why(store, record, pin)
        states.append(dict(
            store, revision=pin, requested=store['revision'], held=bool(held),
            record=record, pin=pin, why=why, why_hub=why, commit='', complete=False, offline=False,
            branch=not FULL_COMMIT.match(pin or ''),
            verified=None, pinnable=pinnable, check=_check(store, record, pin, verify),
        ))
    return states


def weights_store_verified(states, result):
    """Apply a store_verify result (``stores``) to the states it verified: complete, or why not."""
    by_path = {entry['path']: entry for entry in (result or {}).get('stores', [])}
    updated = []
    for state in states:
        entry = by_path.get(state['dir'])
        if state['complete'] or state['why'] or entry is None:
            updated.append(state)
            continue
        state = dict(state, verified=entry)
        if entry.get('ok'):
            state.update(complete=True)
            if state['pin'] == state['revision']:
                state.update(offline=True, commit=state['revision'])
        else:
            state.update(why=f"store_verify found it incomplete: {entry.get('msg', 'unknown')}")
            if state['pin'] == state['revision']:
                state.update(why_hub=state['why'])
        updated.append(state)
    return updated


def weights_store_resolved(states, results, verify):
    """Apply hub_revision's results (a loop over the stores that were not complete) to the states: the commit
    to pass on, and whether the store may hold it complete (to verify next) when the Hub named another commit."""
    by_name = {}
    for result in results or []:
        by_name[result['item']['name']] = result
    updated = []
    for state in states:
        result = by_name.get(state['name'])
        if state['complete'] or result is None:
            updated.append(state)
            continue
        commit = result.get('commit') or ''
        state = dict(state, commit=commit)
        if commit and commit != state['revision']:
            state.update(pin=commit, why=_why(state, state['record'], commit), verified=None,
                         check=_check(state, state['record'], commit, verify))
        updated.append(state)
    return updated


class FilterModule:
    """sparkfold weights filters."""

    def filters(self):
        return {
            'weights_store_state': weights_store_state,
            'weights_store_verified': weights_store_verified,
            'weights_store_resolved': weights_store_resolved,
        }
