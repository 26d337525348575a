# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the capacity filter (plugins/filter/capacity.py): one capacity model per engine."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfold.cluster.plugins.filter.capacity import FilterModule, capacity_plan

GIB = 1024 ** 3
KV_3_4_KIB = 3.4 * 1024  # 3481.6 bytes per token, the vLLM overlay's published KV cost
MIB_1 = 1048576  # TensorFold's 1,048,576-token window
SPARK = round(121.7 * GIB)  # a DGX Spark's MemTotal, about 121.7 GiB
OMIT = '__omit_place_holder__0123456789abcdef'


def error_of(*args, **kwargs):
    with pytest.raises(AnsibleFilterError) as excinfo:
        capacity_plan(*args, **kwargs)
    return str(excinfo.value)


def test_filter_is_registered():
    assert FilterModule().filters() == {'capacity_plan': capacity_plan}


# =========================================================================== zig-pool
# bertholomus/TensorFold zig/src/families/dsv41/native.zig: the pool holds --context positions for
# every stream together; measured 3.37 GB at 262,144 positions with four slots and the drafter.


def zig(**fields):
    """TP2 on two Sparks: ~99 GiB of weights a node, a 5 GiB floor."""
    result = {
        'model': 'zig-pool',
        'context': MIB_1,
        'slots': 4,
        'weights_bytes_per_node': 99 * GIB,
        'node_memory_bytes': SPARK,
        'memory_floor_bytes': 5 * GIB,
    }
    result.update(fields)
    return result


def test_zig_pool_tp2_1m_positions_4_slots_fits():
    plan = capacity_plan(zig())
    # 1,048,576 positions x 3,370,000,000 / 262,144 bytes = 13,480,000,000 bytes (~13.5 GB, 12.55 GiB)
    assert plan == {
        'model': 'zig-pool',
        'fits': True,
        'problems': [],
        'summary': (
            'zig-pool: 1,048,576 positions x 12,855.53 bytes = 12.55 GiB pool shared by --parallel 4 '
            '(of 4 streams); weights 99.0 GiB + engram 0.0 GiB + pool 12.55 GiB + floor 5.0 GiB = 116.55 GiB '
            'of 121.7 GiB node memory, 5.15 GiB spare'),
        'pool_positions': MIB_1,
        'bytes_per_position': 3370000000 / 262144,
        'pool_bytes': 13480000000,
        'slots': 4,
        'streams': 4,
        'context_max_positions': 1478370,
        'memory_used_bytes': 99 * GIB + 13480000000,
        'memory_needed_bytes': 104 * GIB + 13480000000,
        'memory_left_bytes': SPARK - 99 * GIB - 13480000000,
        'ignored': [],
    }


def test_zig_pool_the_pool_does_not_grow_with_the_slots():
    # The streams share the pool: one slot or four, 1,048,576 positions cost the same.
    assert capacity_plan(zig(slots=1))['pool_bytes'] == capacity_plan(zig(slots=4))['pool_bytes'] == 13480000000


def test_zig_pool_tp2_2m_positions_is_refused_with_the_arithmetic():
    message = error_of(zig(context=2 * MIB_1))
    assert message == (
        'capacity_plan: the recipe does not fit (zig-pool): weights 99.0 GiB + engram 0.0 GiB + pool 25.11 GiB '
        '+ floor 5.0 GiB = 129.11 GiB exceeds node memory 121.7 GiB by 7.41 GiB (7,954,769,715 bytes): the pool '
        'of 2,097,152 positions x 12,855.53 bytes takes 25.11 GiB; at most 1,478,370 positions fit')
    plan = capacity_plan(zig(context=2 * MIB_1), fail=False)
    assert plan['fits'] is False and plan['pool_bytes'] == 26960000000
    assert plan['memory_left_bytes'] + plan['memory_used_bytes'] == SPARK
    assert plan['summary'].endswith('= 129.11 GiB exceeds 121.7 GiB node memory by 7.41 GiB')
    # the largest context that fits does fit, one more position does not
    assert capacity_plan(zig(context=1478370))['fits']
    assert not capacity_plan(zig(context=1478371), fail=False)['fits']


def test_zig_pool_parallel_at_most_the_streams():
    message = error_of(zig(slots=5))
    assert message == (
        'capacity_plan: the recipe does not fit (zig-pool): --parallel 5 is more than the 4 streams the pool '
        'serves: this engine serves TF_DS_STREAMS streams at once (default 4): --parallel at most that')
    plan = capacity_plan(zig(slots=8, streams=8))
    assert plan['fits'] and plan['streams'] == 8


def test_zig_pool_one_streams_extent_must_fit_the_pool():
    # An extent: the prompt, max_tokens and a round's rows (16 by default).
    message = error_of(zig(context=65536, reply_tokens=65520))
    assert message == (
        "capacity_plan: the recipe does not fit (zig-pool): one stream takes an extent of its prompt, its "
        "max_tokens and a round's rows: --max-tokens 65,520 + 16 rows leaves no room for a prompt in a pool of "
        "65,536 positions; --max-tokens at most 65,519")
    assert capacity_plan(zig(context=65536, reply_tokens=65519))['fits']
    assert not capacity_plan(zig(context=65536, reply_tokens=65519, round_rows=48), fail=False)['fits']


def test_zig_pool_cost_per_position_given_other_ways():
    assert capacity_plan(zig(bytes_per_position=13000))['pool_bytes'] == 13000 * MIB_1
    plan = capacity_plan(zig(measured_bytes=3000000000, measured_positions=262144))
    assert plan['pool_bytes'] == 12000000000
    assert '11.18 GiB pool' in plan['summary']
    assert capacity_plan(zig(bytes_per_position=12000))['summary'].startswith(
        'zig-pool: 1,048,576 positions x 12,000 bytes = 11.72 GiB pool')


@pytest.mark.parametrize(('fields', 'expected'), [
    ({'bytes_per_position': 1, 'measured_bytes': 1},
     'capacity_plan: give bytes_per_position or measured_bytes and measured_positions, not both'),
    ({'measured_bytes': 3370000000}, 'capacity_plan: measured_bytes is given without measured_positions'),
    ({'measured_positions': 262144}, 'capacity_plan: measured_positions is given without measured_bytes'),
    ({'bytes_per_position': 0}, 'capacity_plan: bytes_per_position must be > 0, got 0'),
    ({'streams': 17}, "capacity_plan: streams (TF_DS_STREAMS) is the pool's streams, 1 .. 16; got 17"),
    ({'streams': 0}, 'capacity_plan: streams must be >= 1, got 0'),
    ({'round_rows': 8}, "capacity_plan: round_rows (TF_DS_ROUND_ROWS) is a round's rows at most, 16 .. 48; got 8"),
    ({'context': None}, 'capacity_plan: context is missing'),
    ({'slots': 0}, 'capacity_plan: slots must be >= 1, got 0'),
    ({'pages': 256, 'slot': 4},
     'capacity_plan: no capacity model takes pages, slot; the inputs of zig-pool are context, slots, '
     'streams, round_rows, bytes_per_position, measured_bytes, measured_positions, reply_tokens, '
     'weights_bytes_per_node, engram_bytes_per_node, node_memory_bytes, memory_floor_bytes'),
])
def test_zig_pool_bad_input(fields, expected):
    assert error_of(zig(**fields)) == expected


# =========================================================================== kv-per-token
# MiaAI-Lab/DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks README @145bb98: "2.5 GiB per rank = 774,400 tokens at
# MAX_MODEL_LEN=614400, i.e. ~3.4 KiB/token"; 99.5 GiB of EXL3 weights per rank; MemAvailable at its
# lowest 2.1 GiB at the end of a 601k prefill with the 2.5 GiB pool, and "every extra 0.5 GiB of KV pool
# costs ~1 GiB of head prefill margin: a 3 GiB pool boots and passes the smoke test but dies at ~470k of
# a 600k prompt". The prefill floor below is what that prefill took beyond weights and pool:
# 121.7 - 99.5 - 2.5 - 2.1 = 17.6 GiB; the 1.5 GiB floor is the overlay's memory guard.
OVERLAY_KV = 2.5 * GIB / 774400  # 3,466.37 bytes, ~3.4 KiB per token


def kv(**fields):
    result = {
        'model': 'kv-per-token',
        'kv_bytes_per_token': OVERLAY_KV,
        'pool_gib': 2.5,
        'max_model_len': 614400,
        'max_num_seqs': 2,
        'weights_bytes_per_node': round(99.5 * GIB),
        'node_memory_bytes': SPARK,
        'prefill_floor_bytes': round(17.6 * GIB),
        'memory_floor_bytes': round(1.5 * GIB),
    }
    result.update(fields)
    return result


def test_kv_per_token_the_shipped_2_5_gib_pool_fits():
    plan = capacity_plan(kv())
    assert plan['fits'] is True and plan['model'] == 'kv-per-token'
    assert plan['pool_tokens'] == 774400 and plan['needed_tokens'] == 614400
    assert plan['full_sequences'] == 1 and plan['max_num_seqs'] == 2
    assert plan['summary'] == (
        'kv-per-token: pool 2.5 GiB / 3.39 KiB/token = 774,400 tokens, 1 full-length sequence of 614,400 at '
        'once (max_num_seqs 2); weights 99.5 GiB + engram 0.0 GiB + KV pool 2.5 GiB + prefill floor 17.6 GiB '
        '+ floor 1.5 GiB = 121.1 GiB of 121.7 GiB node memory, 0.6 GiB spare')
    assert plan['memory_used_bytes'] == round(99.5 * GIB) + round(2.5 * GIB)
    assert plan['memory_left_bytes'] + plan['memory_used_bytes'] == SPARK


def test_kv_per_token_a_3_gib_pool_fails_on_memory_during_the_long_prefill():
    # The pool arithmetic passes (929,280 tokens >= 614,400): the failure is the prefill's memory.
    message = error_of(kv(pool_gib=3, prefill_floor_bytes=round(18.6 * GIB)))
    assert message == (
        'capacity_plan: the recipe does not fit (kv-per-token): weights 99.5 GiB + engram 0.0 GiB + KV pool '
        '3.0 GiB + prefill floor 18.6 GiB + floor 1.5 GiB = 122.6 GiB exceeds node memory 121.7 GiB by 0.9 GiB '
        '(966,367,641 bytes)')
    plan = capacity_plan(kv(pool_gib=3, prefill_floor_bytes=round(18.6 * GIB)), fail=False)
    assert plan['pool_tokens'] == 929280 and len(plan['problems']) == 1


def test_kv_per_token_one_full_length_sequence_must_fit_the_pool():
    message = error_of(kv(kv_bytes_per_token=None, kv_kib_per_token=3.4, max_model_len=MIB_1))
    assert message == (
        'capacity_plan: the recipe does not fit (kv-per-token): pool 2.5 GiB holds 771,011 tokens at '
        '3.4 KiB/token, less than one sequence of max_model_len 1,048,576 tokens, which needs 3.4 GiB '
        '(3,650,722,202 bytes)')
    # slots do not multiply the need: vLLM shares the pool between its max_num_seqs sequences
    assert capacity_plan(kv(max_model_len=774400, max_num_seqs=4))['fits']
    assert capacity_plan(kv(pool_gib=None, pool_tokens=2 * 614400), fail=False)['full_sequences'] == 2


def test_kv_per_token_leaves_the_other_models_inputs_alone():
    # One set of facts (context, slots, streams, reply_tokens) can feed every model.
    plan = capacity_plan(kv(slots=4, context=MIB_1, streams=4, reply_tokens=8192, page_tokens=None))
    assert plan['fits'] and plan['ignored'] == ['context', 'reply_tokens', 'slots', 'streams']
    assert error_of(kv(max_model_length=614400)) == (
        'capacity_plan: no capacity model takes max_model_length; the inputs of kv-per-token are '
        'kv_bytes_per_token, kv_kib_per_token, pool_tokens, pool_gib, max_model_len, max_num_seqs, '
        'prefill_floor_bytes, prefill_pool_factor, weights_bytes_per_node, engram_bytes_per_node, node_memory_bytes, '
        'memory_floor_bytes')
    assert error_of(kv(max_model_len=None)) == 'capacity_plan: max_model_len is missing'


# =========================================================================== token-pool
# ZackO2o/deepseek-v41-tensorfold-spark README: "pool >= slots x window + reply budget", and the refusal
# "the request needs 3343 KV pool pages, the pool has 2400" (POOL_TOKENS=614400: 2,400 pages of 256).


def recipe(**fields):
    """A token-pool recipe whose memory is ample, so only the KV pool rule decides."""
    result = {
        'model': 'token-pool',
        'kv_kib_per_token': 3.4,
        'pool_gib': 2.5,
        'slots': 1,
        'context': 600000,
        'weights_bytes_per_node': 100 * GIB,
        'node_memory_bytes': 128 * 1000 ** 3,
    }
    result.update(fields)
    return result


def test_token_pool_2_5_gib_pool_holds_600k_by_the_rule():
    # 2.5 GiB / 3481.6 bytes = 771,011.76 tokens: by the rule a 600k window fits (needs 1.95 GiB).
    plan = capacity_plan(recipe())
    assert plan == {
        'model': 'token-pool',
        'fits': True,
        'problems': [],
        'summary': (
            'token-pool: 1 slot x 600,000 + 0 reply = 600,000 tokens <= pool 771,011 tokens = 2.5 GiB at '
            '3.4 KiB/token; weights 100.0 GiB + engram 0.0 GiB + KV pool 2.5 GiB + floor 0.0 GiB = 102.5 GiB '
            'of 119.21 GiB node memory, 16.71 GiB spare'),
        'kv_bytes_per_token': KV_3_4_KIB,
        'pool_tokens': 771011,
        'needed_tokens': 600000,
        'pool_bytes': 2684354560,
        'needed_pool_bytes': 2088960000,
        'page_tokens': None,
        'pool_pages': None,
        'needed_pages': None,
        'memory_used_bytes': 100 * GIB + 2684354560,
        'memory_needed_bytes': 100 * GIB + 2684354560,
        'memory_left_bytes': 128 * 1000 ** 3 - 100 * GIB - 2684354560,
        'ignored': [],
    }


def test_token_pool_one_slot_of_the_full_window_in_2_5_gib_pool():
    message = error_of(recipe(context=MIB_1))
    assert message == (
        'capacity_plan: the recipe does not fit (token-pool): pool 2.5 GiB holds 771,011 tokens at 3.4 KiB/token; '
        '1 slot x 1,048,576 + 0 reply = 1,048,576 tokens needs 3.4 GiB (3,650,722,202 bytes)')


def test_token_pool_fail_false_returns_the_plan_with_problems():
    plan = capacity_plan(recipe(context=MIB_1), fail=False)
    assert plan['fits'] is False
    assert plan['pool_tokens'] == 771011
    assert plan['needed_tokens'] == MIB_1
    assert plan['needed_pool_bytes'] == 3650722202
    assert len(plan['problems']) == 1
    assert plan['problems'][0].startswith('pool 2.5 GiB holds 771,011 tokens')
    assert ' > pool 771,011 tokens' in plan['summary']


def test_token_pool_pages_3343_needed_2400_in_the_pool():
    # 2400 pages of 256 tokens = 614,400 tokens; 855,800 tokens round up to 3343 pages.
    message = error_of(recipe(pool_gib=None, pool_tokens=2400 * 256, page_tokens=256,
                              context=855000, reply_tokens=800))
    assert message == (
        'capacity_plan: the recipe does not fit (token-pool): pool 1.99 GiB holds 614,400 tokens at 3.4 KiB/token; '
        '1 slot x 855,000 + 800 reply = 855,800 tokens needs 2.77 GiB (2,979,553,280 bytes); '
        'needs 3343 KV pool pages, the pool has 2400 (pages of 256 tokens)')


def test_token_pool_a_pool_of_exactly_the_rules_tokens_fits_in_pages():
    # The bug report: page 256, context 100,000, 4 slots, reply 4,096 and a pool of exactly
    # 4 x 100,000 + 4,096 = 404,096 tokens (1,578.5 pages). The old filter rounded the need up
    # (1579 pages) and the pool down (1578) and refused the rule's own pool.
    plan = capacity_plan(recipe(pool_gib=None, pool_tokens=404096, page_tokens=256, slots=4, context=100000,
                                reply_tokens=4096))
    assert plan['fits'] is True
    assert (plan['needed_pages'], plan['pool_pages'], plan['page_tokens']) == (1579, 1579, 256)
    assert '(1,579 of 1,579 pages of 256)' in plan['summary']
    # one page short is refused, in pages
    plan = capacity_plan(recipe(pool_gib=None, pool_tokens=1578 * 256, page_tokens=256, slots=4, context=100000,
                                reply_tokens=4096), fail=False)
    assert plan['fits'] is False
    assert plan['problems'][0].endswith('needs 1579 KV pool pages, the pool has 1578 (pages of 256 tokens)')


def test_token_pool_pages_round_both_sides_up():
    # A pool of 614,401 tokens is 2401 whole pages; the need of 614,657 tokens is 2402.
    assert capacity_plan(recipe(pool_gib=None, pool_tokens=614401, page_tokens=256, context=614656))['fits']
    plan = capacity_plan(recipe(pool_gib=None, pool_tokens=614401, page_tokens=256, context=614657), fail=False)
    assert plan['fits'] is False
    assert plan['problems'][0].endswith('needs 2402 KV pool pages, the pool has 2401 (pages of 256 tokens)')


def test_token_pool_four_full_windows_fit_in_14_gib():
    plan = capacity_plan(recipe(pool_gib=14, slots=4, context=MIB_1, reply_tokens=8192))
    assert plan['fits'] is True
    assert plan['pool_tokens'] == 4317665
    assert plan['needed_tokens'] == 4202496
    assert plan['needed_pool_bytes'] == 14631410074


def test_token_pool_four_full_windows_do_not_fit_in_13_gib():
    message = error_of(recipe(pool_gib=13, slots=4, context=MIB_1, reply_tokens=8192))
    assert message == (
        'capacity_plan: the recipe does not fit (token-pool): pool 13.0 GiB holds 4,009,261 tokens at '
        '3.4 KiB/token; 4 slots x 1,048,576 + 8,192 reply = 4,202,496 tokens needs 13.63 GiB (14,631,410,074 bytes)')


def test_token_pool_in_tokens_exactly_at_the_rule_fits():
    plan = capacity_plan(recipe(pool_gib=None, pool_tokens=4 * MIB_1, slots=4, context=MIB_1,
                                kv_kib_per_token=None, kv_bytes_per_token=3482))
    assert plan['fits'] is True
    assert plan['pool_bytes'] == plan['needed_pool_bytes'] == 4 * MIB_1 * 3482
    plan = capacity_plan(recipe(pool_gib=None, pool_tokens=4 * MIB_1, slots=4, context=MIB_1,
                                reply_tokens=1, kv_kib_per_token=None, kv_bytes_per_token=3482), fail=False)
    assert plan['fits'] is False


def test_token_pool_memory_weights_engram_pool_floor_over_node_memory():
    fields = {
        'pool_gib': 14, 'slots': 4, 'context': MIB_1,
        'weights_bytes_per_node': 100 * GIB, 'engram_bytes_per_node': 6 * GIB,
        'node_memory_bytes': 128 * 1000 ** 3, 'memory_floor_bytes': 8 * GIB,
    }
    message = error_of(recipe(**fields))
    assert message == (
        'capacity_plan: the recipe does not fit (token-pool): weights 100.0 GiB + engram 6.0 GiB + KV pool 14.0 GiB '
        '+ floor 8.0 GiB = 128.0 GiB exceeds node memory 119.21 GiB by 8.79 GiB (9,438,953,472 bytes)')
    plan = capacity_plan(recipe(**fields), fail=False)
    assert plan['memory_used_bytes'] == 120 * GIB
    assert plan['memory_needed_bytes'] == 128 * GIB
    assert plan['memory_left_bytes'] == 128 * 1000 ** 3 - 120 * GIB
    fields['memory_floor_bytes'] = 0
    fields['engram_bytes_per_node'] = 0
    plan = capacity_plan(recipe(**fields))
    assert plan['fits'] is True
    assert plan['memory_left_bytes'] == 128 * 1000 ** 3 - 114 * GIB


def test_token_pool_both_problems_are_reported_together():
    plan = capacity_plan(recipe(context=MIB_1, weights_bytes_per_node=128 * 1000 ** 3), fail=False)
    assert plan['fits'] is False
    assert len(plan['problems']) == 2
    assert plan['problems'][1].startswith('weights 119.21 GiB + engram 0.0 GiB + KV pool 2.5 GiB + floor 0.0 GiB')


# =========================================================================== bad input


def test_model_is_required_and_named():
    fields = recipe()
    del fields['model']
    assert error_of(fields) == (
        "capacity_plan: model is missing: give one of zig-pool (TensorFold's Zig engine: --context positions "
        "shared by every stream); kv-per-token (the vLLM overlay: KV bytes per token, one max_model_len sequence "
        "in the pool); token-pool (the Python engine's TF_DSV41_POOL_TOKENS: pool >= slots x window + reply); "
        "engine-admission (TensorFold's Python engine sizing its own window: weights + reserve + floor <= node)")
    assert error_of(recipe(model='paged')) == (
        "capacity_plan: model 'paged' is not one of zig-pool, kv-per-token, token-pool, engine-admission")


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
    ({'reply': 800}, 'capacity_plan: no capacity model takes reply; the inputs of token-pool are '
                     'kv_bytes_per_token, kv_kib_per_token, pool_tokens, pool_gib, slots, context, '
                     'reply_tokens, page_tokens, weights_bytes_per_node, engram_bytes_per_node, '
                     'node_memory_bytes, memory_floor_bytes'),
])
def test_bad_input(fields, expected):
    assert error_of(recipe(**fields)) == expected


def test_not_a_dict():
    assert error_of(['pool_gib', 2.5]) == 'capacity_plan: expected a recipe dict, got list'


def test_decimal_strings_are_accepted():
    plan = capacity_plan(recipe(slots='1', context='600000', pool_gib='2.5'))
    assert plan['pool_tokens'] == 771011


def test_omitted_and_empty_values_are_absent():
    # `omit` inside a dict stays Ansible's placeholder string; None and '' are not given either.
    plan = capacity_plan(recipe(page_tokens=OMIT, reply_tokens='', engram_bytes_per_node=None))
    assert plan['fits'] and plan['page_tokens'] is None
    plan = capacity_plan(zig(streams=OMIT, page_tokens=OMIT))
    assert plan['streams'] == 4 and plan['ignored'] == []


def test_kv_per_token_the_pool_counts_twice_during_a_long_prefill():
    """MiaAI README @145bb98: a 3 GiB pool dies at ~470k of a 600k prompt; 2.5 GiB ends at 2.1 GiB free."""
    shipped = kv(prefill_floor_bytes=round(15.1 * GIB), prefill_pool_factor=2)
    plan = capacity_plan(shipped)
    assert plan['fits'] is True
    assert 'prefill pool growth (1.0 x pool) 2.5 GiB' in plan['summary']
    message = error_of(dict(shipped, pool_gib=3))
    assert message == (
        'capacity_plan: the recipe does not fit (kv-per-token): weights 99.5 GiB + engram 0.0 GiB + KV pool '
        '3.0 GiB + prefill floor 15.1 GiB + prefill pool growth (1.0 x pool) 3.0 GiB + floor 1.5 GiB = 122.1 GiB '
        'exceeds node memory 121.7 GiB by 0.4 GiB (429,496,729 bytes)')
    with pytest.raises(AnsibleFilterError, match='prefill_pool_factor must be at least 1'):
        capacity_plan(dict(shipped, prefill_pool_factor=0.5))


# =========================================================================== engine-admission
# sfxnz/DeepSeek-V4.1-Flash-EXL3-TensorFold-2x-DGX-Spark run.sh @13a26f7: "Admission grants MemAvailable less
# max(4 GiB, MemTotal / 10), 12.1 GiB on a Spark": the engine sizes its own window; the weights, the reserve and
# the floor must fit the node.


def admission(**fields):
    result = {'model': 'engine-admission', 'admission_reserve_gib': 12.1, 'weights_bytes_per_node': round(99.5 * GIB),
              'node_memory_bytes': SPARK, 'memory_floor_bytes': 3 * GIB}
    result.update(fields)
    return result


def test_engine_admission_tp2_on_a_spark_fits():
    plan = capacity_plan(admission())
    assert plan['fits'] and plan['problems'] == []
    assert plan['admission_reserve_bytes'] == round(12.1 * GIB)
    assert plan['memory_needed_bytes'] == round(99.5 * GIB) + round(12.1 * GIB) + 3 * GIB
    assert plan['summary'].startswith('engine-admission: the engine sizes its own window')
    assert 'weights 99.5 GiB + engram 0.0 GiB + admission reserve 12.1 GiB + floor 3.0 GiB' in plan['summary']


def test_engine_admission_weights_that_leave_no_room_are_refused_with_the_arithmetic():
    message = error_of(admission(weights_bytes_per_node=110 * GIB))
    assert 'the recipe does not fit (engine-admission)' in message
    assert 'weights 110.0 GiB + engram 0.0 GiB + admission reserve 12.1 GiB + floor 3.0 GiB = 125.1 GiB exceeds ' \
           'node memory 121.7 GiB by 3.4 GiB' in message


def test_engine_admission_needs_its_reserve():
    assert 'admission_reserve_gib' in error_of(admission(admission_reserve_gib=None))
    assert 'admission_reserve_gib must be >= 0, got -1' in error_of(admission(admission_reserve_gib=-1))
    assert 'no capacity model takes page_size' in error_of(admission(page_size=256))
