# SPDX-License-Identifier: GPL-3.0-or-later
"""The sparkfold.cluster.engine_bench module in-process against the lab engine (a TensorFold simulator,
tests/labengine.py) with a tiny configuration, and against fake servers for the failure paths."""

import json

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import engine_bench

from tests.labengine import Cluster, free_port
from tests.unit.fake_openai import (
    FakeEngine,
    chat_chunks,
    llama_cpp_models,
    llama_cpp_props,
    models_list,
    tokenize_llama_cpp,
)
from tests.unit.module_runner import module_runner

DECODE_TOK_S = 100.0  # tests/labengine.py SIM_ENV
TTFT_BASE_MS = 20.0
PREFILL_TOK_S = 20000.0
KEY = "bench-test-key"


@pytest.fixture(scope="module")
def cluster(engine_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench-cluster")
    (tmp / "key").write_text(KEY)
    c = Cluster(engine_bin, tmp, parallel=2, context=8192, extra_args=("--api-key-file", str(tmp / "key")),
                env={"SIM_PREFILL_TOK_S": str(int(PREFILL_TOK_S)), "SIM_LOAD_DELAY_S": "0"}).start()
    yield c
    c.stop()


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, engine_bench.main)


TINY = {
    "decode_cases": [{"name": "prose_t0", "prompt": "prose", "temperature": 0.0, "thinking": False},
                     {"name": "code_t0", "prompt": "code"}],
    "decode_repeats": 2,
    "decode_max_tokens": 24,
    "prefill_tokens": [500, 2000, 9000],
    "prefill_repeats": 2,
    "depth_tokens": [1000, 9000],
    "depth_max_tokens": 24,
    "concurrency_streams": [1, 2, 3],
    "concurrency_max_tokens": 20,
    "concurrency_repeats": 1,
    "needle_tokens": 1500,
}


def within_pacing(measured, paced):
    """A rate measured on a busy machine: the lab engine paces tokens, load only slows them (and a late first
    chunk can make the span look shorter), so the bounds are wide; a figure off by an order of magnitude fails.
    Time bounds in these tests are lower bounds only: CI (stop 33) saw 0.3 s added to a 0.02 s TTFT."""
    return paced / 4 < measured < paced * 2


def test_tiny_run_against_the_lab_engine(cluster, run, tmp_path):
    progress = tmp_path / "progress.json"
    kind, result, warnings = run({"url": f"http://127.0.0.1:{cluster.port}", "api_key": KEY, "model": "dsv41-sim",
                                  "progress_file": str(progress), **TINY})
    assert kind == "exit", result
    assert result["changed"] is False
    assert warnings == []
    m = result["measurements"]
    assert m["model"] == "dsv41-sim" and m["context_length"] == 8192  # from /v1/models (/health is terse with a key)
    assert m["token_counter"]["method"] == "server"

    decode = {c["name"]: c for c in m["decode"]}
    assert set(decode) == {"prose_t0", "code_t0"}
    for case in decode.values():
        assert case["ok"] == 2 and case["failed"] == 0
        assert within_pacing(case["decode_tok_s"]["median"], DECODE_TOK_S)
        assert case["ttft_ms"]["median"] >= TTFT_BASE_MS * 0.9
        assert all(r["completion_tokens"] == 24 and r["garbled"] is None for r in case["runs"])

    rows = {r["target_tokens"]: r for r in m["prefill"]}
    for target in (500, 2000):
        assert rows[target]["prompt_tokens"] == rows[target]["counted_tokens"] == target
        expected_ttft = target / PREFILL_TOK_S * 1000 + TTFT_BASE_MS
        assert rows[target]["ttft_ms"] >= expected_ttft * 0.9
    assert rows[9000]["skipped"] == "9000 + 4 tokens exceeds the server's context of 8192"
    assert all(rows[t]["stats"]["prefill_tok_s"]["n"] == 2 for t in (500, 2000))

    shallow, deep = m["depth"]
    assert within_pacing(shallow["decode_tok_s"]["median"], DECODE_TOK_S)
    assert shallow["ttft_ms"]["median"] >= (1000 / PREFILL_TOK_S * 1000 + TTFT_BASE_MS) * 0.9
    assert deep["skipped"] == "9000 + 24 tokens exceeds the server's context of 8192" and deep["runs"] == []
    assert m["warmup"]["ok"] is True

    points = {p["streams"]: p for p in m["concurrency"]}
    assert all(p["completed"] == p["sent"] and p["garbled"] == 0 for p in points.values())
    # parallel=2: two streams decode together, so the aggregate is about twice one stream's (a serial engine: once).
    # Load stretches one stream more than the other (CI beside molecule: 1.6x), so the bound sits between the two.
    assert points[2]["aggregate_tok_s"] > 1.3 * points[1]["aggregate_tok_s"]
    # parallel=2: the third stream queues behind the first two, so 3 streams take two rounds.
    assert points[3]["wall_s"] > 1.7 * points[2]["wall_s"]
    assert points[3]["ttft_ms"]["max"] > 150
    assert points[3]["distinct_outputs"] == 1

    assert m["needle"]["passed"] is True and m["needle"]["found"] == 3
    assert len(result["summary"]) == 2 + 3 + 2 + 3 + 1
    final = json.loads(progress.read_text())
    assert final["phase"] == "done" and final["done"] == final["total"] == 1 + 2 * 2 + 3 + 2 + 3 + 1


def test_check_mode_measures_nothing(run):
    kind, result, _w = run({"url": "http://127.0.0.1:1", "_ansible_check_mode": True})
    assert kind == "exit"
    assert result == {"changed": False, "skipped": True, "msg": "check mode: nothing measured, no request sent"}


def test_nothing_listening(run):
    kind, result, _w = run({"url": f"http://127.0.0.1:{free_port()}", "phases": ["decode"]})
    assert kind == "fail"
    assert result["msg"].startswith("nothing answers at http://127.0.0.1:")
    assert "start the engine (sparkfold-engine.target)" in result["msg"]


def test_wrong_key_and_wrong_model(cluster, run):
    url = f"http://127.0.0.1:{cluster.port}"
    kind, result, _w = run({"url": url, "api_key": "wrong", "phases": ["decode"]})
    assert kind == "fail"
    assert "refused the API key (GET /v1/models answered 401" in result["msg"]
    assert "set api_key (bench_api_key) to the engine's key" in result["msg"]
    assert "wrong" not in result["msg"]  # the key itself is never shown
    kind, result, _w = run({"url": url, "api_key": KEY, "model": "other", "phases": ["decode"]})
    assert kind == "fail"
    assert result["msg"] == f"{url} serves dsv41-sim, not other: set model (bench_served_name) to the engine's --name"


def test_bad_options(run):
    kind, result, _w = run({"url": "http://127.0.0.1:1", "concurrency_streams": [1, 0]})
    assert kind == "fail" and result["msg"].startswith("concurrency_streams must hold positive integers; got [0]")
    kind, result, _w = run({"url": "http://127.0.0.1:1", "decode_cases": [{"name": "a"}, {"name": "a"}]})
    assert kind == "fail" and result["msg"] == "decode_cases names must be distinct; got ['a', 'a']"
    kind, result, _w = run({"url": "http://127.0.0.1:1", "progress_file": "/nonexistent/dir/p.json"})
    assert kind == "fail" and "the directory of progress_file /nonexistent/dir/p.json does not exist" in result["msg"]


def _fake(replies):
    fake = FakeEngine()
    fake.route("GET", "/health", lambda body, n: (200, {"ok": True}))
    fake.route("GET", "/v1/models", lambda body, n: (200, models_list("m")))
    fake.route("POST", "/v1/chat/completions", lambda body, n: (200, replies[(n - 1) % len(replies)]))
    return fake


def test_garbled_streams_from_a_fake_server(run):
    empty = chat_chunks("")
    repeated = chat_chunks("Here " + " ".join(["</s>"] * 40))
    good = chat_chunks("The keeper lit the lamp and watched the sea until the morning came over the rocks.")
    with _fake([good, empty, repeated, good]) as fake:
        kind, result, _w = run({"url": fake.url, "phases": ["concurrency"], "concurrency_streams": [4],
                                "concurrency_repeats": 1})
    assert kind == "exit", result
    (point,) = result["measurements"]["concurrency"]
    assert point["sent"] == 4
    # An empty stream has no content chunk: it is not completed; the repeated one completes, garbled.
    assert point["completed"] == 3
    assert point["garbled"] == 1
    assert point["garbled_streams"][0]["reason"].startswith("repeated token '</s>'")
    assert point["errors"] == [{"error": "no content chunk in the stream", "count": 1}]


def test_estimate_without_tokenize_is_said(run, tmp_path):
    with _fake([chat_chunks("x")]) as fake:
        fake.route("POST", "/v1/completions", lambda body, n: (200, [
            {"choices": [{"index": 0, "text": "ready", "finish_reason": None}]},
            {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 1010, "completion_tokens": 1}}, "[DONE]"]))
        kind, result, warnings = run({"url": fake.url, "phases": ["prefill"], "prefill_tokens": [1000],
                                      "tokenizer_path": str(tmp_path / "tokenizer.json")})
    assert kind == "exit", result
    counter = result["measurements"]["token_counter"]
    assert counter["method"] == "estimate" and not counter["exact"]
    assert warnings == [f"prompt lengths are ESTIMATED (4 characters per token): the server has no /tokenize; "
                        f"tokenizer file {tmp_path / 'tokenizer.json'} does not exist"]
    (row,) = result["measurements"]["prefill"]
    assert row["prompt_tokens"] == 1010 and row["prompt_tokens_source"] == "server usage"
    assert row["exact"] is False


def test_prompts_over_llama_cpps_served_context_are_skipped(run):
    # llama.cpp says its served window in /props (one slot's n_ctx); /v1/models' meta has only the trained one.
    done = [{"choices": [{"index": 0, "text": "ok", "finish_reason": None}]},
            {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 1000, "completion_tokens": 1}}, "[DONE]"]
    with FakeEngine() as fake:
        fake.route("GET", "/health", lambda body, n: (200, {"status": "ok"}))
        fake.route("GET", "/v1/models", lambda body, n: (200, llama_cpp_models("model.gguf")))
        fake.route("GET", "/props", lambda body, n: (200, llama_cpp_props(2048)))
        fake.route("POST", "/tokenize", tokenize_llama_cpp)
        fake.route("POST", "/v1/completions", lambda body, n: (200, done))
        fake.route("POST", "/v1/chat/completions", lambda body, n: (200, chat_chunks("The keeper lit the lamp")))
        kind, result, warnings = run({"url": fake.url, "phases": ["prefill", "depth"], "prefill_tokens": [1000, 4096],
                                      "prefill_repeats": 1, "depth_tokens": [1000, 4096], "depth_limit": 0})
    assert kind == "exit", result
    assert warnings == []
    m = result["measurements"]
    assert m["context_length"] == 2048 and m["token_counter"]["method"] == "server"
    small, big = m["prefill"]
    assert small["ok"] and small["skipped"] is None
    assert big["skipped"] == "4096 + 4 tokens exceeds the server's context of 2048"
    assert sum(1 for c in fake.calls if c[1] == "/v1/completions") == 1
    shallow, deep = m["depth"]
    assert shallow["skipped"] is None and len(shallow["runs"]) == 1
    assert deep["skipped"] == "4096 + 256 tokens exceeds the server's context of 2048"
    assert sum(1 for c in fake.calls if c[1] == "/v1/chat/completions") == 1 + 1  # the warm-up, depth 1000
