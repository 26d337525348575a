# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab engine (lab/engine): a SIMULATOR of TensorFold's command line and HTTP API.

The harness (build, Cluster, HTTP helpers) is tests/labengine.py; `engine_bin` is built once per
session (tests/unit/conftest.py). These tests run rank 0 and a follower on 127.0.0.1 and drive the API.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from tests.labengine import (
    ENGINE,
    HOST,
    Cluster,
    build,
    connect_refused,
    free_port,
    make_model,
    request,
    stream,
    wait_until,
)


@pytest.fixture(scope="module")
def cluster(engine_bin, tmp_path_factory):
    c = Cluster(engine_bin, tmp_path_factory.mktemp("cluster")).start()
    yield c
    c.stop()


def chat(port, content, **kw):
    body = dict({"messages": [{"role": "user", "content": content}]}, **kw)
    return request(port, "POST", "/v1/chat/completions", body)


# --- build and command line -----------------------------------------------------------------


def test_version_names_the_simulator_and_records_build_options(engine_bin):
    for name in ("tensorfold-native", "tf-dsv41-lanes"):
        out = subprocess.run(
            [str(engine_bin / name), "--version"], capture_output=True, text=True, timeout=10, check=False
        )
        assert out.returncode == 0
        assert "SIMULATOR" in out.stdout
        assert "nvcc=/usr/local/cuda/bin/nvcc" in out.stdout
        assert "sm=121" in out.stdout
        assert "zig=0.17.0" in out.stdout


def test_zig_version_file_is_pinned():
    assert (ENGINE / ".zig-version").read_text().strip() == "0.17.0"
    assert "builtin.zig_version" in (ENGINE / "build.zig").read_text()


@pytest.mark.parametrize(
    "missing", ["config.json", "tokenizer.json", "model-00002-of-00002.safetensors"]
)
def test_both_binaries_refuse_an_incomplete_model(engine_bin, tmp_path, missing):
    model = make_model(tmp_path / "model", skip=missing)
    rank0 = subprocess.run(
        [str(engine_bin / "tensorfold-native"), "serve", str(model), "--host", HOST, "--port", str(free_port())],
        capture_output=True, text=True, timeout=10, env=dict(os.environ, TF_TP_WORLD="1"), check=False)
    follower = subprocess.run(
        [str(engine_bin / "tf-dsv41-lanes"), str(model), str(tmp_path), "1", "2", HOST, str(free_port()), "kit"],
        capture_output=True, text=True, timeout=10, check=False)
    for done in (rank0, follower):
        assert done.returncode == 2, done.stderr
        assert f"{model}/{missing}" in done.stderr
        assert "missing" in done.stderr


# --- API -------------------------------------------------------------------------------------


def test_health_and_models(cluster):
    status, body = request(cluster.port, "GET", "/health")
    assert status == 200
    assert body == {
        "ok": True, "requests_running": 0, "streams": {"active": 0, "queued": 0, "slots": 2}, "context_length": 4096,
    }
    status, body = request(cluster.port, "GET", "/v1/models")
    assert status == 200
    assert body["object"] == "list"
    assert [(m["id"], m["object"], m["max_model_len"]) for m in body["data"]] == [("dsv41-sim", "model", 4096)]
    status, body = request(cluster.port, "GET", "/metrics")
    assert status == 200
    assert "tensorfold_slots 2" in body


def test_arithmetic(cluster):
    status, body = chat(cluster.port, "What is 17 * 23?", max_tokens=64, temperature=0)
    assert status == 200
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "17 * 23 = 391"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
    status, body = request(cluster.port, "POST", "/v1/completions", {"prompt": "Q: What is 12345 * 6789? A:"})
    assert status == 200
    assert "12345 * 6789 = 83810205" in body["choices"][0]["text"]


def test_passphrases_found_in_order(cluster):
    words = ["filler"] * 300
    planted = {40: "AMBER-FOX-17", 150: "cobalt_tide", 290: "Zephyr9"}
    for at, word in planted.items():
        words[at] = f"The passphrase: {word}."
    haystack = " ".join(words)
    status, body = request(cluster.port, "POST", "/v1/chat/completions", {
        "messages": [
            {"role": "system", "content": "You answer exactly."},
            {"role": "user", "content": haystack + "\n\nList every passphrase above, in order."},
        ],
        "max_tokens": 64,
    })
    assert status == 200
    assert body["choices"][0]["message"]["content"] == "The passphrases are: AMBER-FOX-17, cobalt_tide, Zephyr9."


def test_counting_is_deterministic_and_honours_max_tokens(cluster):
    status, body = chat(cluster.port, "Say something.", max_tokens=6)
    assert status == 200
    assert body["choices"][0]["message"]["content"] == "counting 1 2 3 4 5"
    assert body["choices"][0]["finish_reason"] == "length"
    status, body = chat(cluster.port, "Count from 1 to 200, separated by spaces.", max_tokens=400)
    assert body["choices"][0]["message"]["content"] == " ".join(str(i) for i in range(1, 201))
    assert body["choices"][0]["finish_reason"] == "stop"


def test_sse_chat_stream_format_usage_and_speed(cluster):
    prompt = " ".join(["word"] * 400)  # 400 tokens: prefill 200 ms at 2000 tok/s, plus 20 ms
    sent = time.monotonic()
    status, events = stream(cluster.port, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": prompt}], "max_tokens": 21,
    })
    assert status == 200
    assert events[-1][1] == "[DONE]"
    chunks = [json.loads(text) for _when, text in events[:-1]]
    content = [c["choices"][0]["delta"].get("content") for c in chunks[:-1]]
    assert "".join(content) == "counting " + " ".join(str(i) for i in range(1, 21))
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "dsv41-sim" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    final = chunks[-1]
    assert final["choices"][0]["finish_reason"] == "length"
    assert final["usage"] == {"prompt_tokens": 400, "completion_tokens": 21, "total_tokens": 421}
    times = [t for t, _text in events[:-2]]
    assert times[0] - sent >= 0.2  # TTFT includes the simulated prefill
    decode = (len(times) - 1) / (times[-1] - times[0])
    assert 60 <= decode <= 130, decode  # SIM_DECODE_TOK_S=100


def test_sse_completion_stream(cluster):
    status, events = stream(cluster.port, "/v1/completions", {"prompt": "What is 6 * 7?", "max_tokens": 16})
    assert status == 200
    assert events[-1][1] == "[DONE]"
    chunks = [json.loads(text) for _when, text in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == "6 * 7 = 42"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] == 5


def test_requests_beyond_parallel_queue_and_greedy_output_is_identical(cluster):
    n_requests = 5
    results = [None] * n_requests
    samples = []

    def run(i):
        results[i] = chat(cluster.port, "Write a poem.", max_tokens=30, temperature=0)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n_requests)]
    started = time.monotonic()
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        samples.append(request(cluster.port, "GET", "/health")[1])
        time.sleep(0.02)
    for t in threads:
        t.join(timeout=10)
    elapsed = time.monotonic() - started

    assert all(r is not None and r[0] == 200 for r in results)
    assert len({r[1]["choices"][0]["message"]["content"] for r in results}) == 1
    assert max(s["streams"]["active"] for s in samples) == 2
    assert max(s["streams"]["queued"] for s in samples) >= 2
    assert max(s["requests_running"] for s in samples) >= 4
    # 5 requests of ~0.31 s through 2 slots need 3 rounds.
    assert elapsed >= 0.85
    assert request(cluster.port, "GET", "/health")[1]["requests_running"] == 0


def test_tokenize_and_context_limit(cluster):
    status, body = request(cluster.port, "POST", "/tokenize", {"content": "one two  three\nfour"})
    assert status == 200
    assert len(body["tokens"]) == 4
    assert all(isinstance(t, int) for t in body["tokens"])
    status, body = chat(cluster.port, "hello", max_tokens=5000)
    assert status == 400
    assert "maximum context length is 4096" in body["error"]["message"]


def test_unknown_route_is_404(cluster):
    assert request(cluster.port, "GET", "/v1/nothing")[0] == 404


def test_logs_one_line_per_event(cluster):
    log = cluster.log()
    for needle in ("started", "follower joined: rank 1", "HTTP open on", "request done: id=chatcmpl-sim-"):
        assert needle in log
    assert "joined rank 0" in cluster.log(1)


def test_api_key(engine_bin, tmp_path):
    key_file = tmp_path / "api-key"
    key_file.write_text("sk-lab-123\n")
    key_args = ("--api-key-file", str(key_file))
    c = Cluster(engine_bin, tmp_path, world=1, extra_args=key_args, env={"SIM_LOAD_DELAY_S": "0"})
    try:
        c.start()
        assert request(c.port, "GET", "/health") == (200, {"status": "ok"})
        assert request(c.port, "GET", "/v1/models")[0] == 401
        assert request(c.port, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert chat(c.port, "What is 2 * 3?")[0] == 401
        auth = {"Authorization": "Bearer sk-lab-123"}
        assert request(c.port, "GET", "/v1/models", headers=auth)[0] == 200
        status, body = request(c.port, "POST", "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "What is 2 * 3?"}]}, headers=auth)
        assert status == 200
        assert body["choices"][0]["message"]["content"] == "2 * 3 = 6"
    finally:
        c.stop()


# --- life cycle ------------------------------------------------------------------------------


def test_http_opens_only_after_followers_joined_and_loading(engine_bin, tmp_path):
    c = Cluster(engine_bin, tmp_path)
    try:
        c.start_rank0()
        time.sleep(1.5)  # longer than SIM_LOAD_DELAY_S: still refused without the follower
        assert c.rank0.poll() is None
        assert connect_refused(c.port)
        joined_at = time.monotonic()
        c.start_follower(1)
        assert wait_until(lambda: "follower joined" in c.log(), 10)
        assert connect_refused(c.port)  # loading
        c.wait_ready()
        assert time.monotonic() - joined_at >= 0.9  # SIM_LOAD_DELAY_S=1
        assert request(c.port, "GET", "/health")[0] == 200

        # A lost follower: /health 503 at once, then rank 0 exits non-zero after the grace period.
        c.followers[1].send_signal(signal.SIGKILL)
        c.followers[1].wait(timeout=10)
        killed_at = time.monotonic()

        def unhealthy():
            status, body = request(c.port, "GET", "/health")
            return status == 503 and body["ok"] is False and "rank 1" in body["error"]

        assert wait_until(unhealthy, 3)
        assert c.rank0.wait(timeout=10) != 0
        assert time.monotonic() - killed_at >= 1.0  # SIM_FOLLOWER_GRACE_S=1.5
        assert "follower rank 1 lost" in c.log()
    finally:
        c.stop()


def test_follower_waits_for_rank0_and_exits_when_it_goes_away(engine_bin, tmp_path):
    c = Cluster(engine_bin, tmp_path, env={"SIM_LOAD_DELAY_S": "0"})
    try:
        c.start_follower(1)  # the recipes start followers first
        time.sleep(0.6)
        assert c.followers[1].poll() is None
        c.start_rank0()
        c.wait_ready()
        assert wait_until(lambda: "rank 0 is serving" in c.log(1), 5)
        c.rank0.send_signal(signal.SIGKILL)
        assert c.followers[1].wait(timeout=10) == 1
        assert "rank 0 went away" in c.log(1)
    finally:
        c.stop()


# --- recipe patch ----------------------------------------------------------------------------


def test_recipe_patch_applies_and_changes_the_default_name(engine_bin, tmp_path):
    patches = sorted((ENGINE / "patches").glob("0001-*.patch"))
    assert len(patches) == 1
    tree = tmp_path / "tree"
    shutil.copytree(ENGINE, tree, ignore=shutil.ignore_patterns(".zig-cache", "zig-out"))
    done = subprocess.run(["git", "apply", "--verbose", str(patches[0])], cwd=tree, capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    bin_dir = build(tree, tmp_path / "out")
    version = subprocess.run([str(bin_dir / "tensorfold-native"), "--version"], capture_output=True, text=True,
                             timeout=10, check=False).stdout
    assert "patches=0001-dsv41-served-name" in version

    c = Cluster(bin_dir, tmp_path, world=1, env={"SIM_LOAD_DELAY_S": "0"}, name=None)
    try:
        c.start()
        assert request(c.port, "GET", "/v1/models")[1]["data"][0]["id"] == "deepseek-v4.1-flash"
        assert "patches=0001-dsv41-served-name" in c.log()
    finally:
        c.stop()
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(tree)
