# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures the hub_snapshot tests share (test_hub_snapshot*.py)."""

from __future__ import annotations

import time

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import hub_snapshot

from tests.unit.module_runner import module_runner


@pytest.fixture
def snapshot(monkeypatch, hub_server):
    """snapshot(args) -> (kind, result, seconds): hub_snapshot.main() in-process against the test Hub
    (endpoint set unless args give one); snapshot.warnings holds the last run's warnings."""
    run_module = module_runner(monkeypatch, hub_snapshot.main)

    def _run(args):
        args = dict(args)
        args.setdefault("endpoint", hub_server.url)
        start = time.monotonic()
        kind, result, _warnings = run_module(args)
        return kind, result, time.monotonic() - start

    _run.warnings = run_module.warnings
    return _run


@pytest.fixture
def run(snapshot):
    """run(args) -> (kind, result): hub_snapshot.main() in-process, endpoint = the test Hub; run.warnings."""

    def _run(args):
        return snapshot(args)[:2]

    _run.warnings = snapshot.warnings
    return _run


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store"
