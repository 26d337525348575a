# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the weights role's store states (plugins/filter/weights.py)."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfold.cluster.plugins.filter.weights import (
    FilterModule,
    weights_store_resolved,
    weights_store_state,
    weights_store_verified,
)

RECORD = '.sparkfold-weights.json'
PIN = 'd17a1af21a75dff84c12b89ae207cd43c05865a7'
OTHER = 'a0486eef397af089efba94660d90cfc9b8d41997'
BASE_PIN = 'b' * 40
SELECTION = {'allow_patterns': [], 'ignore_patterns': []}
TOKENIZER = {'base_repo_id': 'org/base', 'base_commit': BASE_PIN, 'files': {'tokenizer.json': 'c' * 64}}


def model(revision=PIN):
    return {'name': 'model', 'repo_id': 'org/quant', 'revision': revision, 'dir': '/srv/models/q',
            'selection': SELECTION, 'pin_var': 'weights_revision', 'require_index': True,
            'tokenizer': {'base_repo_id': '', 'base_revision': BASE_PIN}}


def kit(revision='main'):
    return {'name': 'kernel kit', 'repo_id': 'org/kit', 'revision': revision, 'dir': '/opt/kit',
            'selection': {'allow_patterns': ['kit/*'], 'ignore_patterns': []},
            'pin_var': 'recipe_overrides.kit.revision', 'require_index': False}


def files(**records):
    """read_files' files for the model (/srv/models/q) and the kit (/opt/kit) records; None: absent."""
    out = {}
    for name, directory in (('model', '/srv/models/q'), ('kit', '/opt/kit')):
        record = records.get(name)
        path = f'{directory}/{RECORD}'
        out[path] = {'exists': False, 'type': 'absent'} if record is None else {
            'exists': True, 'type': 'file', 'content': record if isinstance(record, str) else json.dumps(record)}
    return out


def model_record(**extra):
    record = {'repo_id': 'org/quant', 'commit': PIN, 'selection': SELECTION, 'tokenizer': TOKENIZER}
    record.update(extra)
    return record


def kit_record(commit=OTHER):
    return {'repo_id': 'org/kit', 'commit': commit, 'selection': {'allow_patterns': ['kit/*'], 'ignore_patterns': []},
            'tokenizer': None}


def test_a_full_pin_the_record_names_is_verified_with_its_tokenizer_files():
    (state,) = weights_store_state([model()], files(model=model_record()), RECORD, 'none')
    assert (state['why'], state['branch'], state['pinnable'], state['complete']) == ('', False, True, False)
    assert state['check'] == {'path': '/srv/models/q', 'verify': 'manifest', 'repo_id': 'org/quant', 'commit': PIN,
                              'extra_files': [{'path': 'tokenizer.json', 'sha256': 'c' * 64}],
                              'require_safetensors_index': True}


@pytest.mark.parametrize('store, record, why', [
    (model('main'), model_record(), 'the pin main is a branch or tag, not a full commit: only the Hub resolves it'),
    (model(), None, '/srv/models/q has no record of a completed download'),
    (model(OTHER), model_record(), f'/srv/models/q holds org/quant@{PIN}, not org/quant@{OTHER}'),
    (model(), model_record(selection={'allow_patterns': ['*.json'], 'ignore_patterns': []}),
     'its files were chosen with other allow_patterns or ignore_patterns'),
    (model(), model_record(tokenizer=None), 'no tokenizer files are recorded for it'),
    (model(), model_record(tokenizer=dict(TOKENIZER, base_commit='d' * 40)),
     f"its tokenizer came from org/base@{'d' * 40}, the base model is pinned to the model card base_model@{BASE_PIN}"
     ' (set weights_base_repo_id and weights_base_revision, or recipe_overrides.weights.tokenizer, to the first)'),
])
def test_why_the_record_does_not_prove_the_store(store, record, why):
    (state,) = weights_store_state([store], files(model=record), RECORD, 'manifest')
    assert state['why'] == why == state['why_hub']


def test_a_record_that_is_not_json_is_named():
    with pytest.raises(AnsibleFilterError, match=f'/srv/models/q/{RECORD} is not a valid record of a download'):
        weights_store_state([model()], files(model='{'), RECORD, 'manifest')


def test_verified_stores_are_complete_offline_or_say_why_not():
    states = weights_store_state([model(), kit(PIN)], files(model=model_record(), kit=kit_record(PIN)), RECORD, 'full')
    result = {'stores': [{'path': '/srv/models/q', 'ok': True, 'files_checked': 4, 'safetensors': 3},
                         {'path': '/opt/kit', 'ok': False, 'msg': 'store /opt/kit failed verification: missing'}]}
    good, bad = weights_store_verified(states, result)
    assert (good['complete'], good['offline'], good['commit'], good['verified']['safetensors']) == (True, True, PIN, 3)
    assert (bad['complete'], bad['offline'], bad['commit']) == (False, False, '')
    assert bad['why'] == bad['why_hub'] == (
        'store_verify found it incomplete: store /opt/kit failed verification: missing')
    # a skipped verification changes nothing
    assert weights_store_verified(states, {'skipped': True}) == states


def test_a_branch_the_hub_resolves_to_the_held_commit_is_verified_at_that_commit():
    states = weights_store_state([model(), kit()], files(model=model_record(), kit=kit_record()), RECORD, 'manifest')
    assert [s['branch'] for s in states] == [False, True]
    hub = [{'item': states[1], 'commit': OTHER}]
    model_state, kit_state = weights_store_resolved(states, hub, 'manifest')
    assert model_state == states[0]
    assert (kit_state['commit'], kit_state['pin'], kit_state['why']) == (OTHER, OTHER, '')
    assert kit_state['check']['commit'] == OTHER
    assert kit_state['why_hub'].startswith('the pin main is a branch or tag')
    kit_state = weights_store_verified([model_state, kit_state], {'stores': [{'path': '/opt/kit', 'ok': True}]})[1]
    assert (kit_state['complete'], kit_state['offline'], kit_state['commit']) == (True, False, OTHER)


def test_a_hub_that_failed_or_was_skipped_leaves_no_commit():
    states = weights_store_state([kit()], files(kit=kit_record()), RECORD, 'manifest')
    failed = {'item': states[0], 'failed': True, 'msg': 'Connection refused'}
    for result in (failed, {'item': states[0], 'skipped': True}):
        (state,) = weights_store_resolved(states, [result], 'manifest')
        assert (state['commit'], state['pin'], state['complete']) == ('', 'main', False)
        assert state['why'].startswith('the pin main is a branch or tag')


def test_a_complete_store_is_not_touched_by_the_hub():
    states = weights_store_verified(weights_store_state([model()], files(model=model_record()), RECORD, 'manifest'),
                                    {'stores': [{'path': '/srv/models/q', 'ok': True}]})
    assert weights_store_resolved(states, [{'item': states[0], 'commit': OTHER}], 'manifest') == states


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {'weights_store_state', 'weights_store_verified', 'weights_store_resolved'}


def test_a_branch_pin_is_held_at_the_commit_recorded_at_its_first_install():
    # The kit's Hub repository publishes no commit: the recipe pins main, the first install records the
    # commit main resolved to, and later runs hold the store there without the Hub.
    states = weights_store_state([model(), kit()], files(model=model_record(), kit=kit_record(OTHER) | {
        'revision': 'main'}), RECORD, 'manifest')
    kit_state = states[1]
    assert (kit_state['held'], kit_state['branch'], kit_state['revision'], kit_state['requested']) == (
        True, False, OTHER, 'main')
    assert (kit_state['pin'], kit_state['why'], kit_state['check']['commit']) == (OTHER, '', OTHER)
    kit_state = weights_store_verified(states, {'stores': [{'path': '/opt/kit', 'ok': True}]})[1]
    assert (kit_state['complete'], kit_state['offline'], kit_state['commit']) == (True, True, OTHER)


@pytest.mark.parametrize('record, follow', [
    (kit_record(OTHER), False),  # a record of an older release names no revision: the Hub resolves main
    (kit_record(OTHER) | {'revision': 'v1'}, False),  # resolved from another branch or tag
    (kit_record(OTHER) | {'revision': 'main', 'repo_id': 'org/other'}, False),
    (kit_record('main') | {'revision': 'main'}, False),  # not a commit
    (kit_record(OTHER) | {'revision': 'main'}, True),  # weights_follow_branches: ask the Hub where main is now
])
def test_a_branch_pin_goes_to_the_hub_unless_its_record_holds_it(record, follow):
    (state,) = weights_store_state([kit()], files(kit=record), RECORD, 'manifest', follow)
    assert (state['held'], state['branch'], state['revision'], state['requested']) == (False, True, 'main', 'main')
    assert state['why'].startswith('the pin main is a branch or tag')


def test_a_full_commit_pin_is_never_held_elsewhere():
    (state,) = weights_store_state([kit(PIN)], files(kit=kit_record(OTHER) | {'revision': 'main'}), RECORD, 'manifest')
    assert (state['held'], state['revision'], state['why']) == (
        False, PIN, f'/opt/kit holds org/kit@{OTHER}, not org/kit@{PIN}')
