# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inputs of the capacity_plan filter (plugins/filter/capacity.py), read and checked.

Numbers come as numbers or decimal strings, never booleans; a key is given unless it is absent, None,
blank or Ansible's omit placeholder. A wrong input raises :class:`CapacityError` saying what is wrong;
the filter turns it into its own error, prefixed ``capacity_plan:``.
"""

from __future__ import annotations

import math
import re

from ansible.module_utils.common.text.converters import to_text

GIB = 1024 ** 3
KIB = 1024

_NUMBER_RE = re.compile(r'^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$')
# What Ansible puts in place of `omit` when it is used inside a dict rather than as a module option.
_OMIT_PREFIX = '__omit_place_holder__'


class CapacityError(ValueError):
    """An input of a capacity plan is missing or wrong; the message says which and why."""


def to_number(value, what):
    """Return value as int or float; accept numbers and decimal strings, never bools."""
    if isinstance(value, bool):
        raise CapacityError(f'{what} must be a number, got boolean {value}')
    if isinstance(value, (int, float)):
        number = value
    elif isinstance(value, str) and _NUMBER_RE.match(value.strip()):
        text = value.strip()
        number = float(text) if '.' in text else int(text)
    else:
        raise CapacityError(f"{what} must be a number, got '{to_text(value)}'")
    if isinstance(number, float) and not math.isfinite(number):
        raise CapacityError(f'{what} must be a finite number, got {number}')
    if number < 0:
        raise CapacityError(f'{what} must be >= 0, got {number}')
    return number


def to_count(value, what, minimum=0):
    """Return value as a whole number >= minimum (an integral float such as 4.0 is accepted)."""
    number = to_number(value, what)
    if isinstance(number, float):
        if not number.is_integer():
            raise CapacityError(f'{what} must be a whole number, got {number}')
        number = int(number)
    if number < minimum:
        raise CapacityError(f'{what} must be >= {minimum}, got {number}')
    return number


def is_given(recipe, key):
    """A key is given unless it is absent, None, blank, or Ansible's omit placeholder."""
    value = recipe.get(key)
    if value is None:
        return False
    if isinstance(value, str):
        text = value.strip()
        return bool(text) and not text.startswith(_OMIT_PREFIX)
    return True


def required(recipe, key):
    if not is_given(recipe, key):
        raise CapacityError(f'{key} is missing')
    return recipe[key]


def optional_count(recipe, key, default=0, minimum=0):
    return to_count(recipe[key], key, minimum) if is_given(recipe, key) else default


def memory_inputs(recipe):
    """(weights, engram, node memory, floor) in bytes."""
    return (
        to_count(required(recipe, 'weights_bytes_per_node'), 'weights_bytes_per_node'),
        optional_count(recipe, 'engram_bytes_per_node'),
        to_count(required(recipe, 'node_memory_bytes'), 'node_memory_bytes', minimum=1),
        optional_count(recipe, 'memory_floor_bytes'),
    )


def kv_bytes_per_token(recipe):
    has_bytes = is_given(recipe, 'kv_bytes_per_token')
    has_kib = is_given(recipe, 'kv_kib_per_token')
    if has_bytes and has_kib:
        raise CapacityError(
            'give kv_bytes_per_token or kv_kib_per_token, not both')
    if has_bytes:
        kv = to_number(recipe['kv_bytes_per_token'], 'kv_bytes_per_token')
    elif has_kib:
        kv = to_number(recipe['kv_kib_per_token'], 'kv_kib_per_token') * KIB
    else:
        raise CapacityError(
            'kv_bytes_per_token (or kv_kib_per_token) is missing')
    if kv <= 0:
        raise CapacityError(f'the KV cache cost per token must be > 0, got {kv}')
    return kv


def kv_pool(recipe, kv):
    """(pool_tokens, pool_bytes) from pool_tokens or pool_gib."""
    has_tokens = is_given(recipe, 'pool_tokens')
    has_gib = is_given(recipe, 'pool_gib')
    if has_tokens and has_gib:
        raise CapacityError('give pool_tokens or pool_gib, not both')
    if has_tokens:
        tokens = to_count(recipe['pool_tokens'], 'pool_tokens')
        return tokens, math.ceil(tokens * kv)
    if has_gib:
        pool_bytes = round(to_number(recipe['pool_gib'], 'pool_gib') * GIB)
        # A token either fits in the pool or it does not: round the token count down.
        return int(pool_bytes // kv), pool_bytes
    raise CapacityError('the KV pool size is missing: give pool_tokens or pool_gib')
