# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter that checks a serving recipe's KV pool and node memory before anything boots.

Documentation lives in the sidecar file next to this one (capacity_plan.yml).

Each engine sizes its KV cache its own way, so the recipe names its ``model``:

``zig-pool``
    TensorFold's native Zig engine (bertholomus/TensorFold zig/src/families/dsv41/native.zig
    @1a3d97e30112d58ffdb4dc07677d7222fa6af3c5): "The pool holds --context positions for every stream
    together (each takes an extent: its prompt, its max_tokens and a round's rows)"; it serves
    TF_DS_STREAMS streams (default 4, 1..16) and refuses more with "this engine serves TF_DS_STREAMS
    streams at once (default 4): --parallel at most that"; "the pool is the model's (preallocated): a
    stream takes no device memory of its own". Its cost per position was measured by an older
    version of that file: "about 3.4 GiB a 262,144 positions (measured: 3.37 GB at 262,144 with four
    slots and the drafter)". No pages, and no slots x window rule: the streams share the pool.
``kv-per-token``
    The vLLM overlay (MiaAI-Lab/DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks README @145bb98): "2.5 GiB
    per rank = 774,400 tokens at MAX_MODEL_LEN=614400, i.e. ~3.4 KiB/token". One full-length
    sequence must fit the pool; its failure mode is memory, not pool arithmetic: "a 3 GiB pool boots
    and passes the smoke test but dies at ~470k of a 600k prompt", because a long prefill needs
    memory beyond the pool (``prefill_floor_bytes``).
``token-pool``
    The jayleaton/ZackO2o Python engine (``TF_DSV41_POOL_TOKENS``), ZackO2o README: "pool >= slots x
    window + reply budget"; a pool below it boots fine and refuses a long request mid-way ("the
    request needs 3343 KV pool pages, the pool has 2400").
``engine-admission``
    TensorFold's Python engine as sfxnz/DeepSeek-V4.1-Flash-EXL3-TensorFold-2x-DGX-Spark run.sh
    @13a26f7f4f1c3458e4b9520fb9be92175c6ad761 runs it: no pool to pin; the engine sizes its own window at
    start ("Admission grants MemAvailable less max(4 GiB, MemTotal / 10), 12.1 GiB on a Spark") and refuses
    what will not fit. What can be checked before boot: weights + Engram + the admission's reserve + the
    serving floor fit the node.
"""

from __future__ import annotations

import math

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text
from ansible_collections.sparkfold.cluster.plugins.module_utils.capacity_inputs import (
    GIB,
    KIB,
    CapacityError,
    is_given,
    kv_bytes_per_token,
    kv_pool,
    memory_inputs,
    optional_count,
    required,
    to_count,
    to_number,
)

# Zig engine: the measured pool cost (3.37 GB at 262,144 positions, four slots and the drafter),
# TF_DS_STREAMS' default and range, TF_DS_ROUND_ROWS' default and range.
ZIG_MEASURED_BYTES = 3370000000
ZIG_MEASURED_POSITIONS = 262144
ZIG_STREAMS_DEFAULT = 4
ZIG_STREAMS_MAX = 16
ZIG_ROUND_ROWS_DEFAULT = 16
ZIG_ROUND_ROWS_RANGE = (16, 48)

_MEMORY_KEYS = ('weights_bytes_per_node', 'engram_bytes_per_node', 'node_memory_bytes', 'memory_floor_bytes')
_KV_KEYS = ('kv_bytes_per_token', 'kv_kib_per_token', 'pool_tokens', 'pool_gib')
INPUTS = {
    'zig-pool': ('context', 'slots', 'streams', 'round_rows', 'bytes_per_position', 'measured_bytes',
                 'measured_positions', 'reply_tokens', *_MEMORY_KEYS),
    'kv-per-token': (*_KV_KEYS, 'max_model_len', 'max_num_seqs', 'prefill_floor_bytes', 'prefill_pool_factor',
                     *_MEMORY_KEYS),
    'token-pool': (*_KV_KEYS, 'slots', 'context', 'reply_tokens', 'page_tokens', *_MEMORY_KEYS),
    'engine-admission': ('admission_reserve_gib', *_MEMORY_KEYS),
}
MODELS = tuple(INPUTS)
_ALL_INPUTS = frozenset(key for keys in INPUTS.values() for key in keys)
_MODEL_WORDS = {
    'zig-pool': "TensorFold's Zig engine: --context positions shared by every stream",
    'kv-per-token': "the vLLM overlay: KV bytes per token, one max_model_len sequence in the pool",
    'token-pool': "the Python engine's TF_DSV41_POOL_TOKENS: pool >= slots x window + reply",
    'engine-admission': "TensorFold's Python engine sizing its own window: weights + reserve + floor <= node",
}


def _decimals(value):
    """A size with 1-2 decimals: 2.5, 3.4, 1.95, 121.0."""
    text = f'{value:.2f}'
    if text.endswith('0'):
        text = text[:-1]
    return text


def _gib(num_bytes):
    return f'{_decimals(num_bytes / GIB)} GiB'


def _rate(value):
    """Bytes per position: 12,855.53; a whole number without decimals."""
    return f'{int(value):,}' if float(value).is_integer() else f'{value:,.2f}'


def _plural(count, word):
    return f'{count:,} {word}' if count == 1 else f'{count:,} {word}s'


def _model(recipe):
    if not is_given(recipe, 'model'):
        raise CapacityError(
            'model is missing: give one of '
            + '; '.join(f'{name} ({words})' for name, words in _MODEL_WORDS.items()))
    model = to_text(recipe['model']).strip()
    if model not in INPUTS:
        raise CapacityError(f"model '{model}' is not one of {', '.join(MODELS)}")
    unknown = sorted(key for key in recipe if key != 'model' and key not in _ALL_INPUTS)
    if unknown:
        raise CapacityError(
            f"no capacity model takes {', '.join(unknown)}; "
            f"the inputs of {model} are {', '.join(INPUTS[model])}")
    # The inputs of the other models are left alone, so one set of facts can feed every model.
    ignored = sorted(key for key in recipe if key != 'model' and key not in INPUTS[model] and is_given(recipe, key))
    return model, ignored


def _memory_line(parts):
    """'weights 99.0 GiB + ... = 116.55 GiB' and the total, from (label, bytes) pairs."""
    total = sum(size for _label, size in parts)
    terms = ' + '.join(f'{label} {_gib(size)}' for label, size in parts)
    return f'{terms} = {_gib(total)}', total


def _memory_problem(parts, node_memory):
    line, total = _memory_line(parts)
    if total <= node_memory:
        return None
    return (f'{line} exceeds node memory {_gib(node_memory)} by {_gib(total - node_memory)} '
            f'({total - node_memory:,} bytes)')


def _memory_fields(weights, engram, pool_bytes, floor, node_memory, prefill=0):
    """The result's memory figures, the same for every model (prefill: what a long prefill takes beyond the pool)."""
    used = weights + engram + pool_bytes
    return {'memory_used_bytes': used, 'memory_needed_bytes': used + prefill + floor,
            'memory_left_bytes': node_memory - used}


def _memory_summary(parts, node_memory):
    line, total = _memory_line(parts)
    if total <= node_memory:
        return f'{line} of {_gib(node_memory)} node memory, {_gib(node_memory - total)} spare'
    return f'{line} exceeds {_gib(node_memory)} node memory by {_gib(total - node_memory)}'


def _bytes_per_position(recipe):
    """(a function: positions -> pool bytes, bytes per position) of the Zig engine's pool."""
    has_rate = is_given(recipe, 'bytes_per_position')
    measured = [key for key in ('measured_bytes', 'measured_positions') if is_given(recipe, key)]
    if has_rate and measured:
        raise CapacityError(
            'give bytes_per_position or measured_bytes and measured_positions, not both')
    if has_rate:
        rate = to_number(recipe['bytes_per_position'], 'bytes_per_position')
        if rate <= 0:
            raise CapacityError(f'bytes_per_position must be > 0, got {rate}')
        return (lambda positions: math.ceil(positions * rate)), rate
    if len(measured) == 1:
        other = 'measured_positions' if measured[0] == 'measured_bytes' else 'measured_bytes'
        raise CapacityError(f'{measured[0]} is given without {other}')
    if measured:
        num = to_count(recipe['measured_bytes'], 'measured_bytes', minimum=1)
        den = to_count(recipe['measured_positions'], 'measured_positions', minimum=1)
    else:
        num, den = ZIG_MEASURED_BYTES, ZIG_MEASURED_POSITIONS
    # Whole numbers: exact, rounded up to a whole byte.
    return (lambda positions: -(-positions * num // den)), num / den


def _zig_pool(recipe):
    """TensorFold's Zig engine: --context positions shared by the streams; weights + pool + floor <= node."""
    context = to_count(required(recipe, 'context'), 'context', minimum=1)
    slots = to_count(required(recipe, 'slots'), 'slots', minimum=1)
    streams = optional_count(recipe, 'streams', ZIG_STREAMS_DEFAULT, minimum=1)
    if streams > ZIG_STREAMS_MAX:
        raise CapacityError(
            f'streams (TF_DS_STREAMS) is the pool\'s streams, 1 .. {ZIG_STREAMS_MAX}; got {streams}')
    rows = optional_count(recipe, 'round_rows', ZIG_ROUND_ROWS_DEFAULT)
    low, high = ZIG_ROUND_ROWS_RANGE
    if not low <= rows <= high:
        raise CapacityError(
            f'round_rows (TF_DS_ROUND_ROWS) is a round\'s rows at most, {low} .. {high}; got {rows}')
    reply = optional_count(recipe, 'reply_tokens')
    pool_bytes_of, rate = _bytes_per_position(recipe)
    weights, engram, node_memory, floor = memory_inputs(recipe)
    pool_bytes = pool_bytes_of(context)

    problems = []
    if slots > streams:
        problems.append(
            f'--parallel {slots} is more than the {streams} streams the pool serves: this engine serves '
            f'TF_DS_STREAMS streams at once (default {ZIG_STREAMS_DEFAULT}): --parallel at most that')
    if reply + rows >= context:
        problems.append(
            f'one stream takes an extent of its prompt, its max_tokens and a round\'s rows: --max-tokens '
            f'{reply:,} + {rows} rows leaves no room for a prompt in a pool of {context:,} positions; '
            f'--max-tokens at most {max(context - rows - 1, 0):,}')
    parts = [('weights', weights), ('engram', engram), ('pool', pool_bytes), ('floor', floor)]
    memory = _memory_problem(parts, node_memory)
    room = node_memory - weights - engram - floor
    context_max = max(0, int(room // rate)) if room > 0 else 0
    while context_max > 0 and pool_bytes_of(context_max) > room:
        context_max -= 1
    if memory:
        problems.append(
            f'{memory}: the pool of {context:,} positions x {_rate(rate)} bytes takes {_gib(pool_bytes)}; '
            f'at most {context_max:,} positions fit')
    summary = (
        f'zig-pool: {context:,} positions x {_rate(rate)} bytes = {_gib(pool_bytes)} pool shared by '
        f'--parallel {slots} (of {streams} streams); {_memory_summary(parts, node_memory)}')
    return problems, summary, {
        'pool_positions': context,
        'bytes_per_position': rate,
        'pool_bytes': pool_bytes,
        'slots': slots,
        'streams': streams,
        'context_max_positions': context_max,
        **_memory_fields(weights, engram, pool_bytes, floor, node_memory),
    }


def _kv_per_token(recipe):
    """The vLLM overlay: one max_model_len sequence fits the pool; weights + pool + prefill + floor <= node."""
    kv = kv_bytes_per_token(recipe)
    pool_tokens, pool_bytes = kv_pool(recipe, kv)
    max_model_len = to_count(required(recipe, 'max_model_len'), 'max_model_len', minimum=1)
    max_num_seqs = optional_count(recipe, 'max_num_seqs', 1, minimum=1)
    prefill = optional_count(recipe, 'prefill_floor_bytes')
    # During a long prefill the pool costs more than itself: MiaAI README @145bb98 "Every extra 0.5 GiB
    # of KV pool costs ~1 GiB of head prefill margin" (factor 2). 1 = the pool counts once.
    factor = to_number(recipe['prefill_pool_factor'], 'prefill_pool_factor') \
        if is_given(recipe, 'prefill_pool_factor') else 1
    if factor < 1:
        raise CapacityError(f'prefill_pool_factor must be at least 1, got {factor}')
    weights, engram, node_memory, floor = memory_inputs(recipe)
    needed_pool_bytes = math.ceil(max_model_len * kv)

    problems = []
    if pool_tokens < max_model_len:
        problems.append(
            f'pool {_gib(pool_bytes)} holds {pool_tokens:,} tokens at {_decimals(kv / KIB)} KiB/token, '
            f'less than one sequence of max_model_len {max_model_len:,} tokens, which needs '
            f'{_gib(needed_pool_bytes)} ({needed_pool_bytes:,} bytes)')
    growth = round((factor - 1) * pool_bytes)
    parts = [('weights', weights), ('engram', engram), ('KV pool', pool_bytes), ('prefill floor', prefill),
             *([(f'prefill pool growth ({_decimals(factor - 1)} x pool)', growth)] if growth else []),
             ('floor', floor)]
    memory = _memory_problem(parts, node_memory)
    if memory:
        problems.append(memory)
    full = pool_tokens // max_model_len
    summary = (
        f'kv-per-token: pool {_gib(pool_bytes)} / {_decimals(kv / KIB)} KiB/token = {pool_tokens:,} tokens, '
        f'{_plural(full, "full-length sequence")} of {max_model_len:,} at once (max_num_seqs {max_num_seqs}); '
        f'{_memory_summary(parts, node_memory)}')
    return problems, summary, {
        'kv_bytes_per_token': kv,
        'pool_tokens': pool_tokens,
        'pool_bytes': pool_bytes,
        'needed_tokens': max_model_len,
        'needed_pool_bytes': needed_pool_bytes,
        'full_sequences': full,
        'max_num_seqs': max_num_seqs,
        **_memory_fields(weights, engram, pool_bytes, floor, node_memory, prefill + growth),
    }


def _token_pool(recipe):
    """The Python engine: pool >= slots x window + reply; weights + pool + floor <= node.

    Pages: with page_tokens the engine hands out whole pages, so both sides are counted in whole
    pages, each rounded up: the need is ceil(need_tokens / page) pages, and the pool of pool_tokens
    is ceil(pool_tokens / page) pages (whole pages cover the tokens it is given). A pool of exactly
    the rule's tokens therefore always fits, and the published pools are whole pages anyway
    (614,400 = 2,400 x 256; 1,638,400 = 6,400 x 256).
    """
    kv = kv_bytes_per_token(recipe)
    pool_tokens, pool_bytes = kv_pool(recipe, kv)
    slots = to_count(required(recipe, 'slots'), 'slots', minimum=1)
    context = to_count(required(recipe, 'context'), 'context', minimum=1)
    reply = optional_count(recipe, 'reply_tokens')
    page_tokens = optional_count(recipe, 'page_tokens', None, minimum=1)
    weights, engram, node_memory, floor = memory_inputs(recipe)

    needed_tokens = slots * context + reply
    needed_pool_bytes = math.ceil(needed_tokens * kv)
    problems = []

    pool_pages = needed_pages = None
    short = pool_tokens < needed_tokens
    if page_tokens is not None:
        pool_pages = -(-pool_tokens // page_tokens)
        needed_pages = -(-needed_tokens // page_tokens)
        short = pool_pages < needed_pages
    if short:
        message = (
            f'pool {_gib(pool_bytes)} holds {pool_tokens:,} tokens at {_decimals(kv / KIB)} KiB/token; '
            f'{_plural(slots, "slot")} x {context:,} + {reply:,} reply = {needed_tokens:,} tokens '
            f'needs {_gib(needed_pool_bytes)} ({needed_pool_bytes:,} bytes)')
        if page_tokens is not None:
            message += (
                f'; needs {needed_pages} KV pool pages, the pool has {pool_pages} '
                f'(pages of {page_tokens:,} tokens)')
        problems.append(message)
    parts = [('weights', weights), ('engram', engram), ('KV pool', pool_bytes), ('floor', floor)]
    memory = _memory_problem(parts, node_memory)
    if memory:
        problems.append(memory)
    pages = '' if page_tokens is None else f' ({needed_pages:,} of {pool_pages:,} pages of {page_tokens:,})'
    summary = (
        f'token-pool: {_plural(slots, "slot")} x {context:,} + {reply:,} reply = {needed_tokens:,} tokens '
        f'{"<=" if not short else ">"} pool {pool_tokens:,} tokens{pages} = {_gib(pool_bytes)} at '
        f'{_decimals(kv / KIB)} KiB/token; {_memory_summary(parts, node_memory)}')
    return problems, summary, {
        'kv_bytes_per_token': kv,
        'pool_tokens': pool_tokens,
        'pool_bytes': pool_bytes,
        'needed_tokens': needed_tokens,
        'needed_pool_bytes': needed_pool_bytes,
        'page_tokens': page_tokens,
        'pool_pages': pool_pages,
        'needed_pages': needed_pages,
        **_memory_fields(weights, engram, pool_bytes, floor, node_memory),
    }


def _engine_admission(recipe):
    """The Python engine sizes its window itself: weights + Engram + its admission reserve + floor <= node."""
    reserve_gib = to_number(required(recipe, 'admission_reserve_gib'), 'admission_reserve_gib')
    reserve = round(reserve_gib * GIB)
    weights, engram, node_memory, floor = memory_inputs(recipe)
    parts = [('weights', weights), ('engram', engram), ('admission reserve', reserve), ('floor', floor)]
    memory = _memory_problem(parts, node_memory)
    summary = (f'engine-admission: the engine sizes its own window from what is left; '
               f'{_memory_summary(parts, node_memory)}')
    return ([memory] if memory else []), summary, {
        'admission_reserve_bytes': reserve,
        **_memory_fields(weights, engram, reserve, floor, node_memory),
    }


_PLANS = {'zig-pool': _zig_pool, 'kv-per-token': _kv_per_token, 'token-pool': _token_pool,
          'engine-admission': _engine_admission}


def capacity_plan(recipe, fail=True):
    """Check a recipe by the capacity model of its engine (recipe['model']); see capacity_plan.yml."""
    if not isinstance(recipe, dict):
        raise AnsibleFilterError(f'capacity_plan: expected a recipe dict, got {type(recipe).__name__}')
    try:
        model, ignored = _model(recipe)
        problems, summary, figures = _PLANS[model](recipe)
    except CapacityError as exc:
        raise AnsibleFilterError(f'capacity_plan: {exc}') from exc
    if problems and fail:
        raise AnsibleFilterError(
            f'capacity_plan: the recipe does not fit ({model}): ' + '; and '.join(problems))
    result = {'model': model, 'fits': not problems, 'problems': problems, 'summary': summary}
    result.update(figures)
    result['ignored'] = ignored
    return result


class FilterModule:
    """sparkfold capacity filters."""

    def filters(self):
        return {'capacity_plan': capacity_plan}
