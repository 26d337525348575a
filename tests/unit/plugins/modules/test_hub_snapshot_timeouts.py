# SPDX-License-Identifier: GPL-3.0-or-later
"""hub_snapshot against a Hub or CDN that hangs or trickles (fault modes of tests/hub/server.py).

Tiny deadlines keep the tests fast; each asserts that the run gave up within its deadline (plus slack for a
slow machine) and that the message names the host, the wait and the option to change.
"""

import os

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import hub_download
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


@pytest.fixture
def quick_retries(monkeypatch):
    """Attempts 50 ms apart instead of 1-8 s: the count of attempts is what these tests look at."""
    monkeypatch.setattr(hub_download, "RETRY_DELAYS", (0.05,) * 5)


def test_a_cdn_that_drops_every_attempt_after_a_few_kib_is_given_up(run, store, hub_server, hub_data, quick_retries):
    """Issue 26 item 2: 4 KiB, silence, then the connection closes, on every attempt. Each attempt brought bytes,
    so the downloader used to count it as progress and try again until the 256 KiB shard was in, 4 KiB at a time
    (64 attempts; 5 GB would never end). Attempts that bring less than 1 MiB are not progress now."""
    size = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN).size
    assert size > 40 * 4096  # far more attempts than download_retries allows
    fault = hub_server.add_fault(rf"/resolve/[^/]+/{SHARD}$", "drop", methods=("GET",), after=4096, interval=0.05)
    kind, result, took = run(quant(store, allow_patterns=[SHARD], download_retries=3))
    assert kind == "fail", result
    assert fault.hits == 4  # the first attempt and download_retries more
    assert result["kind"] == "network"
    msg = result["msg"]
    assert SHARD in msg and host_of(hub_server) in msg  # the file and the host
    assert "4 attempts in a row without progress" in msg and "4.00 KiB" in msg  # what was seen
    assert "download_retries=3" in msg and f"given up at {4 * 4096} of {size} bytes" in msg
    assert took < 4 * 0.1 + SLACK

    hub_server.faults.remove(fault)  # the CDN is back: the next run resumes
    kind, result, _took = run(quant(store, allow_patterns=[SHARD]))
    assert kind == "exit", result
    assert result["downloaded_bytes"] == size - 4 * 4096


def test_a_file_below_min_rate_over_the_window_is_given_up(run, store, hub_server, hub_data):
    """4 KiB every 50 ms (80 KiB/s) passes the stall deadline, yet is below min_rate: given up after the window."""
    size = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN).size
    hub_server.add_fault(rf"/resolve/[^/]+/{SHARD}$", "trickle", methods=("GET",), step=4096, interval=0.05)
    kind, result, took = run(quant(store, allow_patterns=[SHARD], stall_timeout=30, min_rate=1048576,
                                   rate_window=0.5))
    assert kind == "fail", result
    assert result["kind"] == "slow"
    msg = result["msg"]
    assert SHARD in msg and host_of(hub_server) in msg and "in the last 0.5 s" in msg
    assert "min_rate=1048576" in msg and "rate_window=0.5" in msg and "the next run resumes" in msg
    assert took < 0.5 + SLACK
    assert hub_server.bytes_served < size / 2


def test_drops_after_a_mebibyte_each_are_progress(run, store, hub_server, hub_data, quick_retries, monkeypatch):
    """Connections that each bring PROGRESS_BYTES (1 MiB; 32 KiB here, for the 256 KiB shard) count as progress:
    download_retries=0 does not limit their number."""
    monkeypatch.setattr(hub_download, "PROGRESS_BYTES", 32 * 1024)
    entry = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN)
    hub_server.add_fault(rf"/resolve/[^/]+/{SHARD}$", "drop", methods=("GET",), after=32 * 1024, times=3,
                         interval=0.01)
    kind, result, _took = run(quant(store, allow_patterns=[SHARD], download_retries=0))
    assert kind == "exit", result
    ranges = [g["range"] for g in hub_server.file_gets(fixtures.QUANT, SHARD)]
    assert ranges == [None] + [f"bytes={n * 32 * 1024}-" for n in (1, 2, 3)]
    assert (store / SHARD).stat().st_size == entry.size


@pytest.mark.parametrize(("option", "value"), [("download_retries", -1), ("min_rate", -1), ("rate_window", 0)])
def test_transfer_bounds_are_checked_before_anything(run, store, option, value):
    kind, result, _took = run(quant(store, **{option: value}))
    assert kind == "fail" and result["kind"] == "args", result
    assert option in result["msg"]
    assert not os.path.exists(store)
