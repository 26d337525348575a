# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue 31: figures the prompt cache cannot flatter, against tests' fake server with a prompt cache
(tests/unit/fake_openai.py PrefixCache, the vLLM and llama.cpp ways of saying what came from the cache).

- every stream of every concurrency round sends a prompt of its own;
- every prompt starts with its unique part, so nothing but the chat template's own tokens is ever found in the
  cache, in one run and in the next one against the same server;
- the server's cached-token count is kept on every row (depth and concurrency included, with the concurrency
  rounds' prompt tokens), and a row served mostly from the cache is flagged in the CSV and the report;
- a needle that does not fit the served context is "not measured" with its reason, never FAIL.
"""

import csv
import io
from types import SimpleNamespace

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_figures as bf
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_report as br
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_tables as bt
from ansible_collections.sparkfold.cluster.plugins.module_utils import engine_bench as eb
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_prompts import TokenCounter
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_setup import ARGUMENT_SPEC
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import EngineClient
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_needle import estimate_tokens

from tests.unit.fake_openai import FakeEngine, PrefixCache, chat_chunks, models_list

TEMPLATE = len(PrefixCache.TEMPLATE)  # the chat template's tokens before the user message: cached every time


def _params(**overrides):
    params = {key: spec.get("default") for key, spec in ARGUMENT_SPEC.items()}
    params.update(overrides)
    return params


SMALL = _params(
    decode_cases=[{"name": "prose_t0", "prompt": "prose", "temperature": 0.0, "thinking": False},
                  {"name": "code_t0", "prompt": "code", "temperature": 0.0, "thinking": False}],
    decode_repeats=2, decode_max_tokens=8, prefill_tokens=[200, 400], prefill_repeats=2, depth_tokens=[300, 600],
    depth_limit=0, depth_max_tokens=8, concurrency_streams=[1, 3], concurrency_max_tokens=8, concurrency_repeats=2,
    needle_tokens=400)


def _csv(results):
    return list(csv.DictReader(io.StringIO(bt.results_csv(results))))


def test_every_stream_of_every_concurrency_round_sends_its_own_prompt():
    cache = PrefixCache()
    with cache.route(FakeEngine()) as fake:
        _one, three = eb.run_concurrency(EngineClient(fake.url, model="m"), [1, 3], 8, repeats=2)
    texts = [record[3] for record in cache.records]
    assert len(texts) == 2 * 1 + 2 * 3 and len(set(texts)) == len(texts)
    # Nothing but the template came from the cache (nothing at all the first time): no queued stream's TTFT
    # skipped its prefill.
    assert [record[2] for record in cache.records] == [0] + [TEMPLATE] * (len(texts) - 1)
    for rnd in three["rounds"]:
        assert rnd["cached_tokens"] == 3 * TEMPLATE and rnd["mostly_cached"] == 0
    # The rounds ran one after the other: records 2-4 are the first round of 3 streams, 5-7 the second.
    assert [rnd["prompt_tokens"] for rnd in three["rounds"]] == [
        sum(r[1] for r in cache.records[2:5]), sum(r[1] for r in cache.records[5:8])]
    assert three["cached_tokens"] == 6 * TEMPLATE and three["prompt_tokens"] > 6 * 60


@pytest.mark.parametrize("shape", ["vllm", "llama.cpp"])
def test_no_prompt_finds_more_than_the_template_in_the_cache_and_every_row_says_so(shape):
    cache = PrefixCache(shape)
    phases = ["decode", "prefill", "depth", "concurrency", "needle"]
    with cache.route(FakeEngine()) as fake:
        client = EngineClient(fake.url, model="m")
        counter = TokenCounter(client, "server")
        runs = [eb.run_phases(client, SMALL, phases, counter, 8192, None) for _i in range(2)]  # same server twice
    timed = [r for r in cache.records if r[0] == "/v1/chat/completions"]
    assert len(timed) == 2 * (1 + 4 + 2 + 2 * 1 + 2 * 3 + 1)  # warm-up, decode, depth, concurrency, needle
    assert timed[0][2] == 0  # the server's first request: an empty cache
    assert {r[2] for r in timed[1:]} == {TEMPLATE}  # the unique part first: not one token of a prompt was cached
    assert {r[2] for r in cache.records if r[0] == "/v1/completions"} == {1}  # <bos> only
    heads = [r[3].split()[0] for r in cache.records]
    assert len(set(heads)) == len(heads)  # every prompt starts with a word no other prompt has

    results = runs[1]
    rows = _csv(results)
    assert {row["phase"] for row in rows} == set(phases)
    for row in rows:
        expected = "1" if row["phase"] == "prefill" else str(TEMPLATE * int(row["streams"] or 1))
        assert row["cached_tokens"] == expected, row
        assert int(row["prompt_tokens"]) > int(row["cached_tokens"]), row
        assert "prompt cache" not in row["note"], row
    concurrency = [row for row in rows if row["phase"] == "concurrency"]
    assert [(row["streams"], row["prompt_tokens"] != "") for row in concurrency] == [
        ("1", True), ("1", True), ("3", True), ("3", True)]
    depth = results["depth"][0]["runs"][0]
    assert depth["cached_tokens"] == TEMPLATE
    assert results["needle"]["cached_tokens"] == TEMPLATE
    report = bt.render_markdown(results, {}, {}, [], [])
    assert "## Prompt cache" in report
    assert "No row was served mostly from the cache." in report


def test_a_row_served_mostly_from_the_cache_is_flagged():
    # A server whose chat template adds a long system prompt of its own: 70 of 74 prompt tokens come from the cache
    # however unique the user message is (llama.cpp's timings.cache_n).
    reply = chat_chunks("The keeper lit the lamp and watched the sea")
    reply[-2]["usage"]["prompt_tokens"] = 74
    reply[-2]["timings"] = {"cache_n": 70, "prompt_n": 4}
    with FakeEngine() as fake:
        fake.route("GET", "/v1/models", lambda body, n: (200, models_list("m")))
        fake.route("POST", "/v1/chat/completions", lambda body, n: (200, reply))
        client = EngineClient(fake.url, model="m")
        results = eb.run_phases(client, _params(decode_cases=[{"name": "prose_t0", "prompt": "prose"}],
                                                decode_repeats=1, concurrency_streams=[2], concurrency_repeats=1),
                                ["decode", "concurrency"], None, None, None)
    decode, concurrency = _csv(results)
    assert (decode["prompt_tokens"], decode["cached_tokens"]) == ("74", "70")
    assert decode["note"] == "served mostly from the prompt cache: 70 of 74 prompt tokens cached"
    assert (concurrency["prompt_tokens"], concurrency["cached_tokens"]) == ("148", "140")
    assert concurrency["note"] == ("served mostly from the prompt cache: 140 of 148 prompt tokens cached "
                                   "(2 of 2 streams)")
    report = bt.render_markdown(results, {}, {}, [], [])
    assert "| decode prose_t0 run 1 | 74 | 70 | 95% |" in report
    assert "| concurrency 2 streams round 1 | 148 | 140 | 95% |" in report
    assert "2 row(s) served mostly from the cache" in report
    assert "prompt cache: 2 row(s) served mostly from the cache (decode prose_t0 run 1; concurrency 2 streams " \
           "round 1)" in bf.summary_lines(results)


NEEDLE_FIGURE = {"figures": [{"id": "needle", "label": "Needle test", "metric": "needle.passed", "expected": 1,
                              "tolerance_abs": 0, "better": "higher"}]}
TOO_LONG = ("a 50000-token prompt plus a 256-token reply does not fit the engine's context of 40000 tokens; lower "
            "needle_tokens or raise the engine's context")


def test_a_needle_skipped_for_lack_of_context_is_not_measured_with_its_reason():
    counter = SimpleNamespace(method="estimate", exact=False, count=estimate_tokens)
    needle = eb.run_needle(EngineClient("http://127.0.0.1:1"), counter, 50000, context_length=40000)
    assert needle["skipped"] == TOO_LONG and needle["passed"] is None
    results = {"needle": needle}
    assert "needle.passed" not in br.metrics(results)
    (verdict,) = br.judge(NEEDLE_FIGURE, br.metrics(results), br.unmeasured(results))
    assert verdict["verdict"] == "not measured" and verdict["regression"] is False
    assert verdict["reason"] == "skipped: " + TOO_LONG
    assert br.regressions([verdict]) == []
    assert bf.needle_line(needle) == "needle 50000: not measured, skipped: " + TOO_LONG
    report = bt.render_markdown(results, {}, NEEDLE_FIGURE, [verdict], [])
    assert f"| Needle test | - | 1 | ±0 | not measured (skipped: {TOO_LONG}) |" in report
    assert f"| 50000 | - | - | - | not measured | skipped: {TOO_LONG} |" in report
    (row,) = _csv(results)
    assert row["ok"] == "" and row["note"] == "skipped: " + TOO_LONG


def test_a_needle_that_failed_is_still_a_fail():
    with FakeEngine() as fake:
        fake.route("POST", "/v1/chat/completions", lambda body, n: (200, chat_chunks("I do not know")))
        counter = SimpleNamespace(method="estimate", exact=False, count=estimate_tokens)
        needle = eb.run_needle(EngineClient(fake.url, model="m"), counter, 2000, context_length=40000)
    assert needle["passed"] is False and needle.get("skipped") is None
    (verdict,) = br.judge(NEEDLE_FIGURE, br.metrics({"needle": needle}), br.unmeasured({"needle": needle}))
    assert verdict["verdict"] == "below" and verdict["regression"] is True
    assert bf.needle_line(needle).startswith("needle 2000: FAIL, ")


# How each engine refuses a prompt that does not fit its window (plugins/module_utils/engine_errors.py cites the
# sources): the needle is then not measured either, with the server's own reason.
REFUSALS = {
    "tensorfold": {"error": {"message": "This server's maximum context length is 40000 tokens.",
                             "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
    "vllm": {"object": "error", "message": "This model's maximum context length is 40000 tokens. However, your request "
             "has 50010 input tokens. Please reduce the length of the input messages.", "type": "BadRequestError",
             "param": None, "code": 400},
    "sglang": {"object": "error", "message": "The input (50010 tokens) is longer than the model's context length "
               "(40000 tokens).", "type": "BadRequestError", "param": None, "code": 400},
    "llama.cpp": {"error": {"code": 400, "message": "request (50010 tokens) exceeds the available context size "
                            "(40000 tokens), try increasing it", "type": "exceed_context_size_error"}},
}


@pytest.mark.parametrize("engine", sorted(REFUSALS))
def test_a_needle_the_server_refuses_for_lack_of_context_is_not_measured(engine):
    # The bench could not read the served context (context_length None), so the prompt was sent and refused.
    body = REFUSALS[engine]
    with FakeEngine() as fake:
        fake.route("POST", "/v1/chat/completions", lambda _body, n: (400, body))
        counter = SimpleNamespace(method="estimate", exact=False, count=estimate_tokens)
        needle = eb.run_needle(EngineClient(fake.url, model="m"), counter, 2000, context_length=None)
    message = body["error"]["message"] if "error" in body else body["message"]
    reason = f"the server refused the {needle['counted_tokens']}-token prompt for lack of context: {message}"
    assert needle["skipped"] == reason and needle["passed"] is None and needle["found"] is None
    results = {"needle": needle}
    assert "needle.passed" not in br.metrics(results)
    (verdict,) = br.judge(NEEDLE_FIGURE, br.metrics(results), br.unmeasured(results))
    assert (verdict["verdict"], verdict["regression"], verdict["reason"]) == ("not measured", False,
                                                                              "skipped: " + reason)
    assert bf.needle_line(needle) == "needle 2000: not measured, skipped: " + reason
    report = bt.render_markdown(results, {}, NEEDLE_FIGURE, [verdict], [])
    assert f"| 2000 | - | - | - | not measured | skipped: {reason} |" in report
    (row,) = _csv(results)
    assert row["ok"] == "" and row["note"] == "skipped: " + reason


def test_a_needle_refused_for_another_reason_is_still_a_fail():
    body = {"error": {"message": "max_tokens must be an integer", "type": "invalid_request_error"}}
    with FakeEngine() as fake:
        fake.route("POST", "/v1/chat/completions", lambda _body, n: (400, body))
        counter = SimpleNamespace(method="estimate", exact=False, count=estimate_tokens)
        needle = eb.run_needle(EngineClient(fake.url, model="m"), counter, 2000, context_length=None)
    assert needle["passed"] is False and needle["skipped"] is None
    assert needle["detail"] == "POST /v1/chat/completions answered 400: max_tokens must be an integer"
    (verdict,) = br.judge(NEEDLE_FIGURE, br.metrics({"needle": needle}), br.unmeasured({"needle": needle}))
    assert verdict["regression"] is True


CACHED_FIGURES = {"figures": [
    {"id": "decode", "label": "Decode", "metric": "decode.prose_t0.tok_s", "expected": 10, "tolerance_abs": 1e9},
    {"id": "prefill", "label": "Prefill", "metric": "prefill.*.tok_s", "expected": 10, "tolerance_abs": 1e9},
    {"id": "depth", "label": "Depth", "metric": "depth.*.tok_s", "expected": 10, "tolerance_abs": 1e9},
    {"id": "aggregate", "label": "Aggregate", "metric": "concurrency.2.aggregate_tok_s", "expected": 10,
     "tolerance_abs": 1e9},
    {"id": "ttft", "label": "TTFT", "metric": "decode.ttft_ms", "expected": 100000, "tolerance_pct": 10,
     "better": "lower"},
]}


def test_the_report_marks_every_row_and_figure_served_mostly_from_the_cache():
    # A server that finds most of every prompt in its cache (llama.cpp's timings.cache_n): every phase's table marks
    # its rows, and every figure judged on them says so beside its verdict, on the report and on the console.
    reply = chat_chunks("The keeper lit the lamp and watched the sea")
    reply[-2]["usage"]["prompt_tokens"] = 74
    reply[-2]["timings"] = {"cache_n": 70, "prompt_n": 4}
    completion = [{"choices": [{"index": 0, "text": "ready", "finish_reason": None}]},
                  {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 201, "completion_tokens": 1, "total_tokens": 202},
                   "timings": {"cache_n": 180, "prompt_n": 21}}, "[DONE]"]
    counter = SimpleNamespace(method="estimate", exact=False, count=estimate_tokens)
    with FakeEngine() as fake:
        fake.route("POST", "/v1/chat/completions", lambda body, n: (200, reply))
        fake.route("POST", "/v1/completions", lambda body, n: (200, completion))
        client = EngineClient(fake.url, model="m")
        results = eb.run_phases(client, _params(
            decode_cases=[{"name": "prose_t0", "prompt": "prose"}], decode_repeats=2, prefill_tokens=[200],
            prefill_repeats=1, depth_tokens=[300], depth_limit=0, depth_max_tokens=8, concurrency_streams=[2],
            concurrency_repeats=1, needle_tokens=400), list(eb_phases()), counter, None, None)
    cache = br.cached(results)
    assert cache == {
        "decode.prose_t0.tok_s": "served mostly from the prompt cache: 2 of 2 runs",
        "decode.prose_t0.ttft_ms": "served mostly from the prompt cache: 2 of 2 runs",
        "decode.ttft_ms": "served mostly from the prompt cache: 2 of 2 runs",
        "prefill.200.tok_s": "served mostly from the prompt cache: 1 of 1 runs",
        "prefill.200.ttft_ms": "served mostly from the prompt cache: 1 of 1 runs",
        "depth.300.tok_s": "served mostly from the prompt cache: 1 of 1 runs",
        "depth.300.ttft_ms": "served mostly from the prompt cache: 1 of 1 runs",
        "concurrency.2.aggregate_tok_s": "served mostly from the prompt cache: 1 of 1 rounds (2 of 2 streams)",
        "concurrency.2.per_stream_tok_s": "served mostly from the prompt cache: 1 of 1 rounds (2 of 2 streams)",
        "concurrency.2.ttft_ms": "served mostly from the prompt cache: 1 of 1 rounds (2 of 2 streams)",
        "concurrency.peak.aggregate_tok_s": "served mostly from the prompt cache: 1 of 1 rounds (2 of 2 streams)",
        "needle.passed": "served mostly from the prompt cache: 1 of 1 requests",
        "needle.found_pct": "served mostly from the prompt cache: 1 of 1 requests",
    }
    verdicts = br.judge(CACHED_FIGURES, br.metrics(results), br.unmeasured(results), cache)
    assert [(v["metric"], v["verdict"], v["cached"]) for v in verdicts] == [
        ("decode.prose_t0.tok_s", "within", cache["decode.prose_t0.tok_s"]),
        ("prefill.200.tok_s", "within", cache["prefill.200.tok_s"]),
        ("depth.300.tok_s", "within", cache["depth.300.tok_s"]),
        ("concurrency.2.aggregate_tok_s", "within", cache["concurrency.2.aggregate_tok_s"]),
        ("decode.ttft_ms", "below", cache["decode.ttft_ms"]),
    ]
    assert br.verdict_lines(verdicts)[0].startswith("within       Decode: ")
    assert br.verdict_lines(verdicts)[0].endswith(" (served mostly from the prompt cache: 2 of 2 runs)")
    report = bt.render_markdown(results, {}, CACHED_FIGURES, verdicts, [])
    assert "; 0 regression(s); 5 figure(s) on runs served mostly from the prompt cache." in report
    assert "| ±1e+09 | within (**served mostly from the prompt cache: 2 of 2 runs**) |" in report
    assert "| ±10% | below (**served mostly from the prompt cache: 2 of 2 runs**) |" in report
    assert ("Served mostly from the prompt cache (their TTFT holds little or no prefill): prose_t0, 2 of 2 runs"
            in report)
    assert "| served mostly from the prompt cache: 1 of 1 runs; length estimated |" in report  # prefill
    assert "| 300 | 74 | 1/1 | " in report and "| served mostly from the prompt cache: 1 of 1 runs |" in report
    assert ("Served mostly from the prompt cache (their TTFT holds little or no prefill): 2 streams, 1 of 1 rounds "
            "(2 of 2 streams)") in report
    assert "FAIL | " in report and "; served mostly from the prompt cache: 1 of 1 requests |" in report  # needle


def test_a_figure_not_served_from_the_cache_carries_no_mark():
    cache = PrefixCache()
    with cache.route(FakeEngine()) as fake:
        client = EngineClient(fake.url, model="m")
        results = eb.run_phases(client, _params(decode_cases=[{"name": "prose_t0", "prompt": "prose"}],
                                                decode_repeats=2, concurrency_streams=[2], concurrency_repeats=1),
                                ["decode", "concurrency"], None, None, None)
    assert br.cached(results) == {}
    verdicts = br.judge(CACHED_FIGURES, br.metrics(results), br.unmeasured(results), br.cached(results))
    assert {v["cached"] for v in verdicts} == {None}
    report = bt.render_markdown(results, {}, CACHED_FIGURES, verdicts, [])
    assert "figure(s) on runs served mostly" not in report and "Served mostly from the prompt cache (" not in report


def eb_phases():
    return ("decode", "prefill", "depth", "concurrency", "needle")
