# SPDX-License-Identifier: GPL-3.0-or-later
"""hub_snapshot against a Hub or CDN that hangs or trickles (fault modes of tests/hub/server.py).

Tiny deadlines keep the tests fast; each asserts that the run gave up within its deadline (plus slack for a
slow machine) and that the message names the host, the wait and the option to change.
"""

import os

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_download import STALL_ATTEMPTS

from tests.hub import fixtures
from tests.hub.fixtures import quant_args as quant

SHARD = "model-00001-of-00003.safetensors"
SLACK = 3.0  # seconds a slow CI machine may add to a deadline


@pytest.fixture
def run(snapshot):
    """run(args) -> (kind, result, seconds the run took)."""
    return snapshot


def host_of(server):
    return server.url.split("://", 1)[1]


def test_a_hub_that_never_answers_fails_after_read_timeout(run, store, hub_server):
    fault = hub_server.add_fault(r"^/api/models/", "hang")
    kind, result, took = run(quant(store, read_timeout=0.5))
    assert kind == "fail", result
    assert fault.hits == 1  # one call, cut off; not retried for ever
    assert took < 0.5 + SLACK
    assert result["kind"] == "timeout"
    msg = result["msg"]
    assert f"an answer from {host_of(hub_server)}" in msg
    assert "0.5 s" in msg and "read_timeout=0.5" in msg
    assert "reachable" in msg  # what to do
    assert not store.exists()


def test_a_file_download_that_hangs_is_given_up_and_resumed_later(run, store, hub_server, hub_data):
    entry = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN)
    hub_server.add_fault(rf"/resolve/[^/]+/{SHARD}$", "stall", methods=("GET",), after=1000, times=1, hold=10)
    hub_server.add_fault(rf"/resolve/[^/]+/{SHARD}$", "stall", methods=("GET",), times=1, hold=10)
    kind, result, took = run(quant(store, allow_patterns=[SHARD], stall_timeout=0.5))
    assert kind == "fail", result
    assert took < STALL_ATTEMPTS * 0.5 + SLACK
    assert result["kind"] == "timeout"
    msg = result["msg"]
    assert SHARD in msg and f"an answer from {host_of(hub_server)}" in msg
    assert "stall_timeout=0.5" in msg and "the next run resumes" in msg
    ranges = [g["range"] for g in hub_server.file_gets(fixtures.QUANT, SHARD)]
    assert ranges == [None, "bytes=1000-"]  # the second attempt went on from the bytes of the first
    assert not (store / SHARD).exists()

    kind, result, _took = run(quant(store, allow_patterns=[SHARD]))
    assert kind == "exit", result
    assert result["downloaded_bytes"] == entry.size - 1000
    assert (store / SHARD).stat().st_size == entry.size


def test_a_trickling_cdn_is_cut_off_by_the_stall_deadline(run, store, hub_server, hub_data):
    size = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN).size
    # 512 bytes every 50 ms (10 KiB/s): the 256 KiB shard would take half a minute
    fault = hub_server.add_fault(rf"/resolve/[^/]+/{SHARD}$", "trickle", methods=("GET",), step=512, interval=0.05)
    kind, result, took = run(quant(store, allow_patterns=[SHARD], stall_timeout=0.5))
    assert kind == "fail", result
    assert fault.hits == STALL_ATTEMPTS
    assert took < STALL_ATTEMPTS * 0.5 + SLACK
    assert result["kind"] == "stalled"
    msg = result["msg"]
    assert SHARD in msg and host_of(hub_server) in msg and "sent only" in msg
    assert "stall_timeout=0.5" in msg and "raise stall_timeout" in msg
    assert hub_server.bytes_served < size / 4


def test_a_slow_but_steady_download_is_not_cut(run, store, hub_server, hub_data):
    """A stall deadline is about progress: 64 KiB every 20 ms passes a 1 s deadline."""
    hub_server.add_fault(rf"/resolve/[^/]+/{SHARD}$", "trickle", methods=("GET",), step=64 * 1024, interval=0.02)
    kind, result, _took = run(quant(store, allow_patterns=[SHARD], stall_timeout=1))
    assert kind == "exit", result


@pytest.mark.parametrize("option", ["connect_timeout", "read_timeout", "stall_timeout"])
def test_timeouts_must_be_positive(run, store, option):
    kind, result, _took = run(quant(store, **{option: 0}))
    assert kind == "fail" and result["kind"] == "args", result
    assert option in result["msg"]
    assert not os.path.exists(store)
