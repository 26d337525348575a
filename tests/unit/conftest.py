# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared pytest setup for sparkfold.cluster unit tests.

`scripts/setup` links this checkout as .collections/ansible_collections/sparkfold/cluster.
Putting .collections on sys.path lets tests import the collection by its real name
(`ansible_collections.sparkfold.cluster.plugins...`), exactly as modules import it on a
target. Under `ansible-test units` the collection already sits in an ansible_collections
tree and .collections does not exist, so nothing is added.
"""

import os
import sys

import pytest

_REPO_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
)
_COLLECTIONS = os.path.join(_REPO_ROOT, ".collections")

if os.path.isdir(_COLLECTIONS) and _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)

_FIXTURES_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "fixtures")


@pytest.fixture
def fixtures_dir():
    """Absolute path of tests/unit/fixtures (data files shared by all unit tests)."""
    return _FIXTURES_DIR
