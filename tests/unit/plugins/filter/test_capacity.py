# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the capacity filter (plugins/filter/capacity.py)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfold.cluster.plugins.filter.capacity import FilterModule, capacity_plan

GIB = 1024 ** 3
KV_3_4_KIB = 3.4 * 1024  # 3481.6 bytes per token, the vLLM overlay's published KV cost
MIB_1 = 1048576  # TensorFold's 1,048,576-token window


def recipe(**fields):
    """A recipe whose memory is ample, so only the KV pool rule decides."""
    result = {
        'kv_kib_per_token': 3.4,
        'pool_gib': 2.5,
        'slots': 1,
        'context': 600000,
        'weights_bytes_per_node': 100 * GIB,
        'node_memory_bytes': 128 * 1000 ** 3,
    }
    result.update(fields)
    return result


def error_of(*args, **kwargs):
    with pytest.raises(AnsibleFilterError) as excinfo:
        capacity_plan(*args, **kwargs)
    return str(excinfo.value)


def test_filter_is_registered():
    assert FilterModule().filters() == {'capacity_plan': capacity_plan}


# --------------------------------------------------------------------------- published vLLM overlay cases


def test_vllm_overlay_2_5_gib_pool_holds_600k_by_the_rule():
    # 2.5 GiB / 3481.6 bytes = 771,011.76 tokens: by the rule a 600k window fits (needs 1.95 GiB).
    plan = capacity_plan(recipe())
    assert plan == {
        'fits': True,
        'pool_tokens': 771011,
        'needed_tokens': 600000,
        'pool_bytes': 2684354560,
        'needed_pool_bytes': 2088960000,
        'memory_used_bytes': 100 * GIB + 2684354560,
        'memory_left_bytes': 128 * 1000 ** 3 - 100 * GIB - 2684354560,
        'problems': [],
    }


def test_vllm_overlay_3_gib_pool_holds_925k_by_the_rule_yet_died_at_470k():
    # The rule at 3.4 KiB/token says 3 GiB holds 925,214 tokens, so 600k "fits": the smoke test
    # passed, and the run still died at ~470k. The cost actually paid was 3 GiB / 470k tokens.
    plan = capacity_plan(recipe(pool_gib=3))
    assert plan['fits'] is True
    assert plan['pool_tokens'] == 925214
    assert plan['pool_bytes'] == 3 * GIB
    assert round(3 * GIB / 470000, 2) == 6853.67  # ~6.69 KiB/token, about twice 3.4
    message = error_of(recipe(pool_gib=3, kv_kib_per_token=None, kv_bytes_per_token=6854))
    assert message == (
        'capacity_plan: the recipe does not fit: pool 3.0 GiB holds 469,977 tokens at 6.69 KiB/token; '
        '1 slot x 600,000 + 0 reply = 600,000 tokens needs 3.83 GiB (4,112,400,000 bytes)')


def test_one_slot_of_the_full_window_in_2_5_gib_pool():
    message = error_of(recipe(context=MIB_1))
    assert message == (
        'capacity_plan: the recipe does not fit: pool 2.5 GiB holds 771,011 tokens at 3.4 KiB/token; '
        '1 slot x 1,048,576 + 0 reply = 1,048,576 tokens needs 3.4 GiB (3,650,722,202 bytes)')


def test_fail_false_returns_the_plan_with_problems():
    plan = capacity_plan(recipe(context=MIB_1), fail=False)
    assert plan['fits'] is False
    assert plan['pool_tokens'] == 771011
    assert plan['needed_tokens'] == MIB_1
    assert plan['needed_pool_bytes'] == 3650722202
    assert len(plan['problems']) == 1
    assert plan['problems'][0].startswith('pool 2.5 GiB holds 771,011 tokens')


# --------------------------------------------------------------------------- pages


def test_pages_3343_needed_2400_in_the_pool():
    # 2400 pages of 256 tokens = 614,400 tokens; 855,800 tokens round up to 3343 pages.
    message = error_of(recipe(pool_gib=None, pool_tokens=2400 * 256, page_tokens=256,
                              context=855000, reply_tokens=800))
    assert message == (
        'capacity_plan: the recipe does not fit: pool 1.99 GiB holds 614,400 tokens at 3.4 KiB/token; '
        '1 slot x 855,000 + 800 reply = 855,800 tokens needs 2.77 GiB (2,979,553,280 bytes); '
        'needs 3343 KV pool pages, the pool has 2400 (pages of 256 tokens)')


def test_pages_count_whole_pages_only():
    # 614,400 tokens in 2400 pages; a pool of 614,655 tokens is still 2400 whole pages.
    assert capacity_plan(recipe(pool_gib=None, pool_tokens=614655, page_tokens=256, context=614400))['fits']
    plan = capacity_plan(recipe(pool_gib=None, pool_tokens=614655, page_tokens=256, context=614401), fail=False)
    assert plan['fits'] is False
    assert plan['problems'][0].endswith('needs 2401 KV pool pages, the pool has 2400 (pages of 256 tokens)')


# --------------------------------------------------------------------------- TensorFold 4 x 1,048,576


def test_tensorfold_four_full_windows_fit_in_14_gib():
    plan = capacity_plan(recipe(pool_gib=14, slots=4, context=MIB_1, reply_tokens=8192))
    assert plan['fits'] is True
    assert plan['pool_tokens'] == 4317665
    assert plan['needed_tokens'] == 4202496
    assert plan['needed_pool_bytes'] == 14631410074


def test_tensorfold_four_full_windows_do_not_fit_in_13_gib():
    message = error_of(recipe(pool_gib=13, slots=4, context=MIB_1, reply_tokens=8192))
    assert message == (
        'capacity_plan: the recipe does not fit: pool 13.0 GiB holds 4,009,261 tokens at 3.4 KiB/token; '
        '4 slots x 1,048,576 + 8,192 reply = 4,202,496 tokens needs 13.63 GiB (14,631,410,074 bytes)')


def test_tensorfold_pool_in_tokens_exactly_at_the_rule_fits():
    plan = capacity_plan(recipe(pool_gib=None, pool_tokens=4 * MIB_1, slots=4, context=MIB_1,
                                kv_kib_per_token=None, kv_bytes_per_token=3482))
    assert plan['fits'] is True
    assert plan['pool_bytes'] == plan['needed_pool_bytes'] == 4 * MIB_1 * 3482
    plan = capacity_plan(recipe(pool_gib=None, pool_tokens=4 * MIB_1, slots=4, context=MIB_1,
                                reply_tokens=1, kv_kib_per_token=None, kv_bytes_per_token=3482), fail=False)
    assert plan['fits'] is False


# --------------------------------------------------------------------------- node memory


def test_memory_weights_engram_pool_floor_over_node_memory():
    fields = {
        'pool_gib': 14, 'slots': 4, 'context': MIB_1,
        'weights_bytes_per_node': 100 * GIB, 'engram_bytes_per_node': 6 * GIB,
        'node_memory_bytes': 128 * 1000 ** 3, 'memory_floor_bytes': 8 * GIB,
    }
    message = error_of(recipe(**fields))
    assert message == (
        'capacity_plan: the recipe does not fit: weights 100.0 GiB + engram 6.0 GiB + KV pool 14.0 GiB '
        '+ floor 8.0 GiB = 128.0 GiB exceeds node memory 119.21 GiB by 8.79 GiB (9,438,953,472 bytes)')
    plan = capacity_plan(recipe(**fields), fail=False)
    assert plan['memory_used_bytes'] == 120 * GIB
    assert plan['memory_left_bytes'] == 128 * 1000 ** 3 - 120 * GIB
    fields['memory_floor_bytes'] = 0
    fields['engram_bytes_per_node'] = 0
    plan = capacity_plan(recipe(**fields))
    assert plan['fits'] is True
    assert plan['memory_left_bytes'] == 128 * 1000 ** 3 - 114 * GIB


def test_both_problems_are_reported_together():
    plan = capacity_plan(recipe(context=MIB_1, weights_bytes_per_node=128 * 1000 ** 3), fail=False)
    assert plan['fits'] is False
    assert len(plan['problems']) == 2
    assert plan['problems'][1].startswith('weights 119.21 GiB + engram 0.0 GiB + KV pool 2.5 GiB + floor 0.0 GiB')


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(('fields', 'expected'), [
    ({'pool_tokens': 1000}, 'capacity_plan: give pool_tokens or pool_gib, not both'),
    ({'pool_gib': None}, 'capacity_plan: the KV pool size is missing: give pool_tokens or pool_gib'),
    ({'kv_bytes_per_token': 3481.6}, 'capacity_plan: give kv_bytes_per_token or kv_kib_per_token, not both'),
    ({'kv_kib_per_token': None}, 'capacity_plan: kv_bytes_per_token (or kv_kib_per_token) is missing'),
    ({'kv_kib_per_token': 0}, 'capacity_plan: the KV cache cost per token must be > 0, got 0'),
    ({'kv_kib_per_token': -3.4}, 'capacity_plan: kv_kib_per_token must be >= 0, got -3.4'),
    ({'slots': None}, 'capacity_plan: slots is missing'),
    ({'slots': 0}, 'capacity_plan: slots must be >= 1, got 0'),
    ({'slots': 1.5}, 'capacity_plan: slots must be a whole number, got 1.5'),
    ({'slots': True}, 'capacity_plan: slots must be a number, got boolean True'),
    ({'context': 'lots'}, "capacity_plan: context must be a number, got 'lots'"),
    ({'context': -1}, 'capacity_plan: context must be >= 0, got -1'),
    ({'reply_tokens': -5}, 'capacity_plan: reply_tokens must be >= 0, got -5'),
    ({'page_tokens': 0}, 'capacity_plan: page_tokens must be >= 1, got 0'),
    ({'pool_gib': float('nan')}, 'capacity_plan: pool_gib must be a finite number, got nan'),
    ({'weights_bytes_per_node': None}, 'capacity_plan: weights_bytes_per_node is missing'),
    ({'node_memory_bytes': ''}, 'capacity_plan: node_memory_bytes is missing'),
    ({'memory_floor_bytes': -1}, 'capacity_plan: memory_floor_bytes must be >= 0, got -1'),
])
def test_bad_input(fields, expected):
    assert error_of(recipe(**fields)) == expected


def test_not_a_dict():
    assert error_of(['pool_gib', 2.5]) == 'capacity_plan: expected a recipe dict, got list'


def test_decimal_strings_are_accepted():
    plan = capacity_plan(recipe(slots='1', context='600000', pool_gib='2.5'))
    assert plan['pool_tokens'] == 771011
