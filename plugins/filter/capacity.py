# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter that checks a serving recipe's KV pool and node memory before anything boots.

Documentation lives in the sidecar file next to this one (capacity_plan.yml).
The rule is the one the recipes learned the hard way: pool >= slots x window + reply.
A pool below it boots fine and dies mid-prompt ("needs 3343 KV pool pages, the pool has 2400").
"""

from __future__ import annotations

import math
import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

GIB = 1024 ** 3
KIB = 1024

_NUMBER_RE = re.compile(r'^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$')


def _number(value, what):
    """Return value as int or float; accept numbers and decimal strings, never bools."""
    if isinstance(value, bool):
        raise AnsibleFilterError(f'capacity_plan: {what} must be a number, got boolean {value}')
    if isinstance(value, (int, float)):
        number = value
    elif isinstance(value, str) and _NUMBER_RE.match(value.strip()):
        text = value.strip()
        number = float(text) if '.' in text else int(text)
    else:
        raise AnsibleFilterError(f"capacity_plan: {what} must be a number, got '{to_text(value)}'")
    if isinstance(number, float) and not math.isfinite(number):
        raise AnsibleFilterError(f'capacity_plan: {what} must be a finite number, got {number}')
    if number < 0:
        raise AnsibleFilterError(f'capacity_plan: {what} must be >= 0, got {number}')
    return number


def _count(value, what, minimum=0):
    """Return value as a whole number >= minimum (an integral float such as 4.0 is accepted)."""
    number = _number(value, what)
    if isinstance(number, float):
        if not number.is_integer():
            raise AnsibleFilterError(f'capacity_plan: {what} must be a whole number, got {number}')
        number = int(number)
    if number < minimum:
        raise AnsibleFilterError(f'capacity_plan: {what} must be >= {minimum}, got {number}')
    return number


def _present(recipe, key):
    return recipe.get(key) is not None and not (isinstance(recipe[key], str) and not recipe[key].strip())


def _required(recipe, key):
    if not _present(recipe, key):
        raise AnsibleFilterError(f'capacity_plan: {key} is missing')
    return recipe[key]


def _decimals(value):
    """A size with 1-2 decimals: 2.5, 3.4, 1.95, 121.0."""
    text = f'{value:.2f}'
    if text.endswith('0'):
        text = text[:-1]
    return text


def _gib(num_bytes):
    return f'{_decimals(num_bytes / GIB)} GiB'


def _plural(count, word):
    return f'{count:,} {word}' if count == 1 else f'{count:,} {word}s'


def _kv_bytes_per_token(recipe):
    has_bytes = _present(recipe, 'kv_bytes_per_token')
    has_kib = _present(recipe, 'kv_kib_per_token')
    if has_bytes and has_kib:
        raise AnsibleFilterError(
            'capacity_plan: give kv_bytes_per_token or kv_kib_per_token, not both')
    if has_bytes:
        kv = _number(recipe['kv_bytes_per_token'], 'kv_bytes_per_token')
    elif has_kib:
        kv = _number(recipe['kv_kib_per_token'], 'kv_kib_per_token') * KIB
    else:
        raise AnsibleFilterError(
            'capacity_plan: kv_bytes_per_token (or kv_kib_per_token) is missing')
    if kv <= 0:
        raise AnsibleFilterError(f'capacity_plan: the KV cache cost per token must be > 0, got {kv}')
    return kv


def _pool(recipe, kv):
    """(pool_tokens, pool_bytes) from pool_tokens or pool_gib."""
    has_tokens = _present(recipe, 'pool_tokens')
    has_gib = _present(recipe, 'pool_gib')
    if has_tokens and has_gib:
        raise AnsibleFilterError('capacity_plan: give pool_tokens or pool_gib, not both')
    if has_tokens:
        tokens = _count(recipe['pool_tokens'], 'pool_tokens')
        return tokens, math.ceil(tokens * kv)
    if has_gib:
        pool_bytes = round(_number(recipe['pool_gib'], 'pool_gib') * GIB)
        # A token either fits in the pool or it does not: round the token count down.
        return int(pool_bytes // kv), pool_bytes
    raise AnsibleFilterError('capacity_plan: the KV pool size is missing: give pool_tokens or pool_gib')


def capacity_plan(recipe, fail=True):
    """Check pool >= slots x window + reply, and weights + engram + pool + floor <= node memory."""
    if not isinstance(recipe, dict):
        raise AnsibleFilterError(f'capacity_plan: expected a recipe dict, got {type(recipe).__name__}')
    kv = _kv_bytes_per_token(recipe)
    pool_tokens, pool_bytes = _pool(recipe, kv)
    slots = _count(_required(recipe, 'slots'), 'slots', minimum=1)
    context = _count(_required(recipe, 'context'), 'context', minimum=1)
    reply = _count(recipe.get('reply_tokens') or 0, 'reply_tokens')
    page_tokens = None
    if _present(recipe, 'page_tokens'):
        page_tokens = _count(recipe['page_tokens'], 'page_tokens', minimum=1)
    weights = _count(_required(recipe, 'weights_bytes_per_node'), 'weights_bytes_per_node')
    engram = _count(recipe.get('engram_bytes_per_node') or 0, 'engram_bytes_per_node')
    node_memory = _count(_required(recipe, 'node_memory_bytes'), 'node_memory_bytes', minimum=1)
    floor = _count(recipe.get('memory_floor_bytes') or 0, 'memory_floor_bytes')

    needed_tokens = slots * context + reply
    needed_pool_bytes = math.ceil(needed_tokens * kv)
    problems = []

    tokens_short = pool_tokens < needed_tokens
    if page_tokens is not None:
        pool_pages = pool_tokens // page_tokens
        needed_pages = -(-needed_tokens // page_tokens)
        tokens_short = pool_pages < needed_pages
    if tokens_short:
        message = (
            f'pool {_gib(pool_bytes)} holds {pool_tokens:,} tokens at {_decimals(kv / KIB)} KiB/token; '
            f'{_plural(slots, "slot")} x {context:,} + {reply:,} reply = {needed_tokens:,} tokens '
            f'needs {_gib(needed_pool_bytes)} ({needed_pool_bytes:,} bytes)')
        if page_tokens is not None:
            message += (
                f'; needs {needed_pages} KV pool pages, the pool has {pool_pages} '
                f'(pages of {page_tokens:,} tokens)')
        problems.append(message)

    memory_used = weights + engram + pool_bytes
    memory_left = node_memory - memory_used
    if memory_used + floor > node_memory:
        problems.append(
            f'weights {_gib(weights)} + engram {_gib(engram)} + KV pool {_gib(pool_bytes)} '
            f'+ floor {_gib(floor)} = {_gib(memory_used + floor)} exceeds node memory '
            f'{_gib(node_memory)} by {_gib(memory_used + floor - node_memory)} '
            f'({memory_used + floor - node_memory:,} bytes)')

    if problems and fail:
        raise AnsibleFilterError('capacity_plan: the recipe does not fit: ' + '; and '.join(problems))
    return {
        'fits': not problems,
        'pool_tokens': pool_tokens,
        'needed_tokens': needed_tokens,
        'pool_bytes': pool_bytes,
        'needed_pool_bytes': needed_pool_bytes,
        'memory_used_bytes': memory_used,
        'memory_left_bytes': memory_left,
        'problems': problems,
    }


class FilterModule:
    """sparkfold capacity filters."""

    def filters(self):
        return {'capacity_plan': capacity_plan}
