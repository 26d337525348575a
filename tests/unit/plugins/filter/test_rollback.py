# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the automatic rollback's plan (plugins/filter/rollback.py)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfold.cluster.plugins.filter.rollback import FilterModule, engine_rollback_plan

ROOT = '/opt/sparkfold/engine'
GOOD = ROOT + '/1111111111111111'
BAD = ROOT + '/2222222222222222'
RANK_CONF = 'sparkfold-engine@0.service.d/10-rank.conf'
FILES = ['sparkfold-engine@.service', RANK_CONF, 'sparkfold-engine.target', 'engine.env']


def node(host, current=BAD, served=GOOD, build_ok=True, changed=(), lost=()):
    """A node whose record says `served` served; the files named in `changed` differ from their copies."""
    files = [[name, ('new-' if name in changed else 'same-') + name, '' if name in lost else 'same-' + name]
             for name in FILES]
    return {'host': host, 'record': {'build': served, 'files': FILES} if served else {}, 'build_ok': build_ok,
            'current': current, 'files': files}


def test_filter_is_registered():
    assert FilterModule().filters() == {'engine_rollback_plan': engine_rollback_plan}


def test_new_build_goes_back_to_the_build_that_served():
    plan = engine_rollback_plan([node('spark-a'), node('spark-b')])
    assert plan['problems'] == []
    assert plan['changes'] is True
    assert plan['serving_build_id'] == '1111111111111111'
    assert plan['failed_build_ids'] == ['2222222222222222']
    assert plan['hosts']['spark-a'] == {'serving_build': GOOD, 'failed_build': BAD, 'relink': True, 'restore': []}
    assert plan['restores_files'] == []


def test_a_recipe_change_restores_the_files_that_differ_and_keeps_the_build():
    plan = engine_rollback_plan([node('spark-a', current=GOOD, changed=['engine.env', RANK_CONF]),
                                 node('spark-b', current=GOOD, changed=['engine.env'])])
    assert plan['problems'] == []
    assert plan['hosts']['spark-a']['relink'] is False
    assert plan['hosts']['spark-a']['restore'] == [RANK_CONF, 'engine.env']
    assert plan['hosts']['spark-b']['restore'] == ['engine.env']
    assert plan['failed_build_ids'] == []
    assert plan['restores_files'] == ['engine.env', RANK_CONF]


def test_a_first_install_has_nothing_to_go_back_to():
    plan = engine_rollback_plan([node('spark-a', served=''), node('spark-b', served='')])
    assert len(plan['problems']) == 1
    assert plan['problems'][0].startswith(
        'spark-a, spark-b: no record of an engine that served and passed the smoke test')
    assert 'first install' in plan['problems'][0]


def test_one_node_without_record_stops_the_rollback_everywhere():
    plan = engine_rollback_plan([node('spark-a'), node('spark-b', served='')])
    assert [p.split(':')[0] for p in plan['problems']] == ['spark-b']


def test_a_served_build_that_was_removed_is_named():
    plan = engine_rollback_plan([node('spark-a', build_ok=False), node('spark-b')])
    assert plan['problems'] == [f'spark-a: the build that served, {GOOD}, is no longer installed (it has no stamp)']


def test_a_record_that_lost_a_file_is_named():
    plan = engine_rollback_plan([node('spark-a', lost=['engine.env']), node('spark-b')])
    assert plan['problems'] == ['spark-a: the record of what served lacks engine.env']
    assert 'engine.env' not in plan['hosts']['spark-a']['restore']


def test_nodes_that_served_different_builds_are_not_rolled_back():
    plan = engine_rollback_plan([node('spark-a'), node('spark-b', served=ROOT + '/3333333333333333')])
    assert plan['problems'] == [
        'the nodes last served different builds (spark-a: 1111111111111111, spark-b: 3333333333333333)']
    assert plan['serving_build_id'] == ''


def test_nothing_differs_means_nothing_to_roll_back_to():
    plan = engine_rollback_plan([node('spark-a', current=GOOD), node('spark-b', current=GOOD)])
    assert plan['changes'] is False
    assert plan['problems'] == [
        'what runs now is what last served and passed the smoke test (build 1111111111111111, the same units and '
        'engine.env): there is nothing to roll back to']


def test_no_current_link_relinks():
    plan = engine_rollback_plan([node('spark-a', current='')])
    assert plan['hosts']['spark-a']['relink'] is True
    assert plan['failed_build_ids'] == []


@pytest.mark.parametrize('bad', [[], None, 'spark-a', [{'record': {}}]])
def test_bad_input_is_refused(bad):
    with pytest.raises(AnsibleFilterError, match='engine_rollback_plan'):
        engine_rollback_plan(bad)
