# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""hub_snapshot's transfer option: which files go to huggingface_hub's Xet path, which over our HTTP.

No Xet storage (CAS) server can run here, so hf_xet's transport is faked: huggingface_hub.file_download.xet_get,
the one function through which hf_hub_download hands a Xet-backed file to hf_xet, is replaced by a fake that
records the call, writes the file's bytes and reports progress through the library's Xet progress reporter.
Everything before it is the real library: hf_hub_download asks the test Hub (tests/hub/server.py) for the file,
reads the Xet hash and the xet-auth link the Hub answers for a Xet-backed file (its listing has `xetHash`), and
chooses its Xet path itself.
"""

import datetime
import errno
import json
import logging
import os
import time
import types

import hf_xet
import httpx2
import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import hub_download
from huggingface_hub import constants as hf_constants
from huggingface_hub import file_download
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils._xet_progress_reporting import XetDownloadProgressReporter

from tests.hub import fixtures
from tests.hub.fixtures import quant_args as quant

SHARD = "model-00001-of-00003.safetensors"
XET_HASH = "a5" * 32


@pytest.fixture
def xet(monkeypatch, hub_server, hub_data):
    """SHARD of the quant stored with Xet on the test Hub; hf_xet enabled; xet_get faked. Returns its calls."""
    entry = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN)
    hub_server.xet[f"{fixtures.QUANT}/{SHARD}"] = XET_HASH
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_XET", False)  # the unit tests' environment disables it
    for name in hub_download.XET_BOUNDS:  # unset here, and again after the test (a run sets them in-process)
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    calls = []
    spoil = []  # append True: the fake writes other bytes than the file's
    on_half = []  # a function to call when half the file is written
    fail = []  # an exception to raise once half the file is written, as hf_xet raises its errors

    def fake_xet_get(*, incomplete_path, xet_file_data, headers, expected_size=None, tqdm_class=None, **_kwargs):
        config = hf_xet.XetConfig()  # what the session huggingface_hub makes now would be given (hf_xet reads it)
        calls.append({"path": str(incomplete_path), "hash": xet_file_data.file_hash,
                      "refresh": xet_file_data.refresh_route, "size": expected_size,
                      "bounds": {key: config.get(f"client.{key}")
                                 for key in ("read_timeout", "connect_timeout", "retry_max_attempts")}})
        data = hub_data.read(entry.sha256)
        half = len(data) // 2
        # progress as hf_xet reports it, through the library's own reporter and the tqdm_class it was given:
        # bytes written to the file (update) and, fewer, network bytes (update_transfer)
        with XetDownloadProgressReporter(reconstruction_desc=SHARD, total=expected_size, log_level=logging.INFO,
                                         tqdm_class=tqdm_class) as reporter, open(incomplete_path, "wb") as handle:
            handle.write(data[:half])
            if on_half:
                time.sleep(0.6)  # the progress file is rewritten at most twice a second, when bytes are counted
            reporter.update_progress(group_report(half, half // 3, len(data)))
            if on_half:
                on_half[0]()
            if fail:
                raise fail[0]
            handle.write(data[half:])
            reporter.update_progress(group_report(len(data), len(data) // 3, len(data)))
        if spoil:
            with open(incomplete_path, "r+b") as handle:
                handle.write(b"\0")

    monkeypatch.setattr(file_download, "xet_get", fake_xet_get)
    fake_xet_get.calls = calls
    fake_xet_get.spoil = spoil
    fake_xet_get.on_half = on_half
    fake_xet_get.fail = fail
    return fake_xet_get


def group_report(written, transferred, total):
    """hf_xet's progress report of a download group (the fields huggingface_hub's reporter reads)."""
    return types.SimpleNamespace(total_bytes_completed=written, total_transfer_bytes_completed=transferred,
                                 total_bytes=total, total_bytes_completion_rate=None,
                                 total_transfer_bytes_completion_rate=None)


def resolve_gets(hub_server, path):
    return hub_server.file_gets(fixtures.QUANT, path)


def test_listing_of_the_test_hub_describes_the_xet_file(hub_server, xet):
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub_server.url, token=False)
    info = {f.path: f for f in api.get_paths_info(fixtures.QUANT, [SHARD, "config.json"], revision=fixtures.QUANT_PIN)}
    assert info[SHARD].xet_hash == XET_HASH
    assert info["config.json"].xet_hash is None


def test_auto_hands_a_xet_file_to_the_library_and_the_rest_to_http(run, store, hub_server, hub_data, xet):
    entry = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN)
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert result["xet_files"] == [SHARD]
    assert len(xet.calls) == 1
    call = xet.calls[0]
    assert call["hash"] == XET_HASH and call["size"] == entry.size
    assert f"/api/models/{fixtures.QUANT}/xet-read-token/{fixtures.QUANT_PIN}" in call["refresh"]
    assert call["path"].startswith(str(store / ".cache" / "huggingface" / "xet") + os.sep)  # staged beside the store
    assert resolve_gets(hub_server, SHARD) == []  # its bytes did not come over HTTP
    others = [f for f in result["files"] if f["path"] != SHARD]
    assert others and all(resolve_gets(hub_server, f["path"]) for f in others)
    assert (store / SHARD).read_bytes() == hub_data.file_bytes(fixtures.QUANT, SHARD, fixtures.QUANT_PIN)
    assert not (store / ".cache" / "huggingface" / "xet").exists()  # the library's bookkeeping is gone
    total = sum(f["size"] for f in result["files"])
    assert result["downloaded_bytes"] == total

    kind, result = run(quant(store))  # verified and recorded like any other file
    assert kind == "exit" and result["changed"] is False, result
    assert len(xet.calls) == 1


def test_http_fetches_the_xet_file_over_the_hubs_http_bridge(run, store, hub_server, xet):
    kind, result = run(quant(store, transfer="http"))
    assert kind == "exit", result
    assert xet.calls == [] and result["xet_files"] == []
    assert [g["range"] for g in resolve_gets(hub_server, SHARD)] == [None]


def test_auto_without_xet_enabled_goes_over_http(run, store, hub_server, xet, monkeypatch):
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_XET", True)
    kind, result = run(quant(store, allow_patterns=[SHARD]))
    assert kind == "exit", result
    assert xet.calls == [] and result["xet_files"] == []
    assert len(resolve_gets(hub_server, SHARD)) == 1


def test_a_xet_download_with_other_bytes_is_never_put_in_place(run, store, xet):
    xet.spoil.append(True)
    kind, result = run(quant(store, allow_patterns=[SHARD]))
    assert kind == "fail", result
    assert result["kind"] == "hash_mismatch"
    assert SHARD in result["msg"] and "transfer=http" in result["msg"]
    assert not (store / SHARD).exists()


def test_the_progress_file_counts_a_xet_file_as_it_is_written(run, store, tmp_path, hub_data, xet):
    entry = hub_data.file(fixtures.QUANT, SHARD, fixtures.QUANT_PIN)
    progress = tmp_path / "progress.json"
    seen = []

    xet.on_half.append(lambda: seen.append(json.loads(progress.read_text())))
    kind, result = run(quant(store, allow_patterns=[SHARD], progress_file=str(progress)))
    assert kind == "exit", result
    assert seen and seen[0]["phase"] == "downloading" and seen[0]["bytes_done"] == entry.size // 2
    assert result["downloaded_bytes"] == entry.size  # counted once, not again at the end
    assert json.loads(progress.read_text())["bytes_done"] == entry.size


def test_a_failed_xet_download_names_the_file_and_what_the_next_run_does(run, store, hub_data, xet):
    """hf_xet's error (a RuntimeError from its Rust side) half-way through the shard: the message names the file
    and the Xet path, says nothing of it is kept and how to fetch it over HTTP instead; the other files are
    in place, the shard is pending in the manifest, and the next run fetches it."""
    xet.fail.append(RuntimeError("Data processing error: CAS service error : Request failed after 5 retries"))
    kind, result = run(quant(store))
    assert kind == "fail", result
    assert result["kind"] == "xet"
    message = result["msg"]
    assert f"{SHARD}: the Xet download" in message and "Request failed after 5 retries" in message
    assert "next run fetches" in message and "transfer=http" in message
    assert "could not reach the Hub" not in message and "Partial downloads are kept" not in message
    assert not (store / SHARD).exists()
    assert not list((store / ".cache" / "huggingface").rglob("*.incomplete"))  # the library removed its partial
    listing = hub_data.repos[fixtures.QUANT].files(fixtures.QUANT_PIN)
    others = sum(f.size for path, f in listing.items() if path != SHARD)
    assert result["downloaded_bytes"] == others  # the half the fake wrote is not counted
    manifest = json.loads((store / ".sparkfold-manifest.json").read_text())
    assert manifest["pending"] == [SHARD]

    xet.fail.clear()
    kind, result = run(quant(store))
    assert kind == "exit", result
    assert result["xet_files"] == [SHARD] and (store / SHARD).exists()


def test_a_full_disk_under_the_xet_path_is_told_as_one(run, store, xet):
    xet.fail.append(OSError(errno.ENOSPC, "No space left on device"))
    kind, result = run(quant(store, allow_patterns=[SHARD]))
    assert kind == "fail", result
    assert result["kind"] == "io"
    assert f"{SHARD}: [Errno {errno.ENOSPC}] No space left on device" in result["msg"]
    assert "could not reach the Hub" not in result["msg"]


def test_an_error_of_the_hub_on_the_xet_path_keeps_its_kind_and_names_the_file(run, store, hub_server, xet):
    """What huggingface_hub raises when the Hub refuses the Xet token it asks for (refresh_xet_connection_info)."""
    url = f"{hub_server.url}/api/models/{fixtures.QUANT}/xet-read-token/{fixtures.QUANT_PIN}"
    response = httpx2.Response(401, request=httpx2.Request("GET", url))
    xet.fail.append(HfHubHTTPError("401 Unauthorized", response=response))
    kind, result = run(quant(store, allow_patterns=[SHARD]))
    assert kind == "fail", result
    assert result["kind"] == "bad_token"  # fatal: the message is its own, the file named
    assert result["msg"].startswith(f"{SHARD}: the Hub at {hub_server.url} refused the token (401)"), result["msg"]


@pytest.mark.parametrize(
    ("options", "read"),
    [
        ({"stall_timeout": 7.5, "read_timeout": 20}, 7.5),
        ({"stall_timeout": 7.5, "read_timeout": 4}, 4),  # the lower one, as the HTTP path reads
    ],
)
def test_the_modules_bounds_become_hf_xets_own(run, store, xet, options, read):
    """hf_xet reads its bounds from the environment (hf_xet.XetConfig, as its session is made): no byte within the
    read timeout and a connection counts as stalled; download_retries retries of one request."""
    kind, result = run(quant(store, allow_patterns=[SHARD], connect_timeout=3, download_retries=2, **options))
    assert kind == "exit", result
    assert xet.calls[0]["bounds"] == {"read_timeout": datetime.timedelta(seconds=read),
                                      "connect_timeout": datetime.timedelta(seconds=3), "retry_max_attempts": 2}


def test_the_tasks_environment_wins_over_the_modules_bounds(run, store, xet, monkeypatch):
    monkeypatch.setenv("HF_XET_CLIENT_READ_TIMEOUT", "2m")
    kind, result = run(quant(store, allow_patterns=[SHARD], stall_timeout=7.5, connect_timeout=3))
    assert kind == "exit", result
    assert xet.calls[0]["bounds"]["read_timeout"] == datetime.timedelta(minutes=2)
    assert xet.calls[0]["bounds"]["connect_timeout"] == datetime.timedelta(seconds=3)


def test_http_leaves_hf_xets_environment_alone(run, store, xet):
    kind, result = run(quant(store, allow_patterns=[SHARD], transfer="http", stall_timeout=7.5))
    assert kind == "exit", result
    assert not any(name in os.environ for name in hub_download.XET_BOUNDS)


@pytest.fixture
def xet_switch(monkeypatch, hub_server, hub_data):
    """shard-2 of the SWITCH repo stored with Xet on the test Hub (revision b's bytes behind its Xet hash); hf_xet
    enabled; xet_get faked as in ``xet``. Returns the fake: .fail (an exception to raise), .calls."""
    path = "shard-2.safetensors"
    xet_hash = "b7" * 32
    data = hub_data.file_bytes(fixtures.SWITCH, path, fixtures.SWITCH_B)
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_XET", False)
    for name in hub_download.XET_BOUNDS:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    calls, fail = [], []

    def fake_xet_get(*, incomplete_path, xet_file_data, headers, expected_size=None, tqdm_class=None, **_kwargs):
        calls.append(xet_file_data.file_hash)
        assert xet_file_data.file_hash == xet_hash
        with open(incomplete_path, "wb") as handle:
            handle.write(data[: len(data) // 2])
            if fail:
                raise fail[0]
            handle.write(data[len(data) // 2 :])

    monkeypatch.setattr(file_download, "xet_get", fake_xet_get)
    fake_xet_get.mark = lambda: hub_server.xet.__setitem__(f"{fixtures.SWITCH}/{path}", xet_hash)
    fake_xet_get.calls, fake_xet_get.fail, fake_xet_get.path = calls, fail, path
    return fake_xet_get


def switch_files(store):
    """{path: bytes} of the store's files, its bookkeeping (.cache) left out."""
    return {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*")
            if p.is_file() and ".cache" not in p.relative_to(store).parts}


def test_a_switch_stages_a_xet_file_and_a_failed_one_leaves_the_old_revision(run, store, hub_data, xet_switch):
    """The switch is ours around the library: revision b's Xet file waits staged like any other, and a Xet
    download that fails leaves revision a complete, with its manifest, until a run completes the switch."""
    switch = {"repo_id": fixtures.SWITCH, "local_dir": str(store)}
    kind, result = run({**switch, "revision": fixtures.SWITCH_A})
    assert kind == "exit", result
    before = switch_files(store)
    xet_switch.mark()
    xet_switch.fail.append(RuntimeError("Data processing error: CAS service error"))
    kind, result = run({**switch, "revision": fixtures.SWITCH_B})
    assert kind == "fail", result
    assert result["kind"] == "xet" and f"still holds {fixtures.SWITCH_A} as it was" in result["msg"]
    assert switch_files(store) == before  # the manifest included: a is as it was
    assert len(xet_switch.calls) == 1

    xet_switch.fail.clear()
    kind, result = run({**switch, "revision": fixtures.SWITCH_B})
    assert kind == "exit", result
    assert result["xet_files"] == [xet_switch.path] and result["previous_commit"] == fixtures.SWITCH_A
    after = switch_files(store)
    expected = {path: hub_data.file_bytes(fixtures.SWITCH, path, fixtures.SWITCH_B)
                for path in hub_data.expected_sha256(fixtures.SWITCH, fixtures.SWITCH_B)}
    assert {path: data for path, data in after.items() if path != ".sparkfold-manifest.json"} == expected
    assert json.loads(after[".sparkfold-manifest.json"])["commit"] == fixtures.SWITCH_B
