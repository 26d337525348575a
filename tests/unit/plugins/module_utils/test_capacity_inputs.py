# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""capacity_inputs: the capacity_plan filter's inputs raise CapacityError (a ValueError) saying what is wrong;
the filter (test_capacity.py) turns it into its own error, prefixed ``capacity_plan:``."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfold.cluster.plugins.filter.capacity import capacity_plan
from ansible_collections.sparkfold.cluster.plugins.module_utils import capacity_inputs as ci

GIB = 1024 ** 3


def test_numbers_and_counts():
    assert ci.to_number(' 2.5 ', 'x') == 2.5 and ci.to_number('7', 'x') == 7 and ci.to_count(4.0, 'x') == 4
    for value, message in ((True, 'x must be a number, got boolean True'), ('many', "x must be a number, got 'many'"),
                           (float('inf'), 'x must be a finite number, got inf'), (-1, 'x must be >= 0, got -1')):
        with pytest.raises(ci.CapacityError) as err:
            ci.to_number(value, 'x')
        assert str(err.value) == message and isinstance(err.value, ValueError)
    with pytest.raises(ci.CapacityError, match=r'^x must be a whole number, got 2.5$'):
        ci.to_count(2.5, 'x')


def test_given_required_optional():
    recipe = {'a': 3, 'blank': ' ', 'omitted': '__omit_place_holder__abc', 'none': None}
    assert [ci.is_given(recipe, key) for key in ('a', 'blank', 'omitted', 'none', 'absent')] == [
        True, False, False, False, False]
    assert ci.required(recipe, 'a') == 3 and ci.optional_count(recipe, 'omitted', 9) == 9
    with pytest.raises(ci.CapacityError, match=r'^blank is missing$'):
        ci.required(recipe, 'blank')


def test_kv_and_pool():
    assert ci.kv_bytes_per_token({'kv_kib_per_token': 3.4}) == pytest.approx(3481.6)
    assert ci.kv_pool({'pool_gib': 2.5}, 3481.6) == (771011, round(2.5 * GIB))
    with pytest.raises(ci.CapacityError, match=r'^give pool_tokens or pool_gib, not both$'):
        ci.kv_pool({'pool_tokens': 1, 'pool_gib': 1}, 1)


def test_the_filter_names_itself_in_front_of_the_inputs_message():
    with pytest.raises(AnsibleFilterError) as err:
        capacity_plan({'model': 'token-pool', 'kv_kib_per_token': 3.4, 'pool_tokens': 'many', 'slots': 1,
                       'context': 1, 'weights_bytes_per_node': 1, 'node_memory_bytes': 1})
    assert str(err.value) == "capacity_plan: pool_tokens must be a number, got 'many'"
    assert isinstance(err.value.__cause__, ci.CapacityError)
