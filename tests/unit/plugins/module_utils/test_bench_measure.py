# SPDX-License-Identifier: GPL-3.0-or-later
"""The bench module_utils: statistics and garble check (bench_figures), prompts to exact token counts and
token counters (bench_prompts), progress file and phases (engine_bench), and the concurrency point
against fake servers that garble."""

import json
import re
import sys
from types import SimpleNamespace

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_figures as bf
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_prompts as bp
from ansible_collections.sparkfold.cluster.plugins.module_utils import engine_bench as eb
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import EngineClient
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_needle import estimate_tokens
from ansible_collections.sparkfold.cluster.plugins.module_utils.progress_file import StepProgress

from tests.unit.fake_openai import FakeEngine, chat_chunks, models_list, tokenize_vllm


def test_summarize():
    s = bf.summarize([10, 12, None, 11, float("nan")])
    assert s["n"] == 3
    assert s["median"] == 11
    assert s["min"] == 10 and s["max"] == 12
    assert s["mean"] == pytest.approx(11)
    assert s["stdev"] == pytest.approx(1.0)
    assert s["spread_pct"] == pytest.approx(100 * 2 / 11)
    assert bf.summarize([5])["stdev"] == 0.0
    empty = bf.summarize([None])
    assert empty["n"] == 0 and empty["median"] is None and empty["spread_pct"] is None


@pytest.mark.parametrize("text, reason", [
    ("", "empty output"),
    ("  \n ", "empty output"),
    ("Once upon a time " + "the " * 20, "repeated token 'the'"),
    ("A list: " + "foo bar " * 10, "repeated cycle 'foo bar'"),
    ("x " * 10 + " ".join(f"w{i}" for i in range(8)), "token 'x' is 10 of 18"),
])
def test_garbled(text, reason):
    assert reason in bf.garble_reason(text)


@pytest.mark.parametrize("text", [
    "counting 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
    "the the the",  # too short to judge
    "The lighthouse keeper climbed the stairs of the tower every night to light the lamp and watch the sea.",
])
def test_not_garbled(text):
    assert bf.garble_reason(text) is None


def test_prompt_of_tokens_exact_with_a_word_tokenizer():
    def count(text):  # the lab engine's tokenizer: one token per word
        return len(text.split())

    for target in (50, 1000, 4096):
        text, counted, rounds = bp.prompt_of_tokens(target, count, "[nonce 1]")
        assert counted == target == count(text)
        assert text.startswith("[nonce 1]\n")
        assert rounds <= 6


def test_prompt_of_tokens_with_multi_token_words():
    # Every word of 5+ letters counts 2 tokens: whole words still get to the target or one below.
    def count(text):
        return sum(2 if len(w) >= 5 else 1 for w in text.split())

    text, counted, _rounds = bp.prompt_of_tokens(3000, count, "[n]")
    assert counted == count(text)
    assert 2999 <= counted <= 3000


def test_filler_is_deterministic():
    assert bp.filler_text(200, "a") == bp.filler_text(200, "a")
    assert bp.filler_text(200, "a") != bp.filler_text(200, "b")
    assert len(bp.filler_text(200, "a").split()) == 200


def _fake_with_tokenize(fake):
    fake.route("POST", "/tokenize", tokenize_vllm())
    return fake


def test_token_counter_server():
    with _fake_with_tokenize(FakeEngine()) as fake:
        counter = bp.TokenCounter(EngineClient(fake.url), "auto")
        assert counter.method == "server" and counter.exact
        assert counter.count("a b c") == 3


def test_token_counter_falls_back_to_an_estimate_and_says_why(tmp_path):
    with FakeEngine() as fake:  # no /tokenize: 404
        counter = bp.TokenCounter(EngineClient(fake.url), "auto", str(tmp_path / "tokenizer.json"))
    assert counter.method == "estimate" and not counter.exact
    assert "ESTIMATE" in counter.label
    assert counter.notes[0] == "the server has no /tokenize"
    assert "does not exist" in counter.notes[1]
    assert counter.count("x" * 400) == 100
    assert counter.count("x" * 401) == estimate_tokens("x" * 401) == 101  # one estimate: the needle's


def test_token_counter_tokenizer_without_the_package(tmp_path, monkeypatch):
    path = tmp_path / "tokenizer.json"
    path.write_text("{}")
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import fails
    with FakeEngine() as fake, pytest.raises(ValueError, match="tokenizers package is not installed"):
        bp.TokenCounter(EngineClient(fake.url), "tokenizer", str(path))


def _chat_route(fake, replies):
    """Stream reply[i % len] to the i-th chat request."""
    fake.route("GET", "/v1/models", lambda body, n: (200, models_list("m")))
    fake.route("POST", "/v1/chat/completions", lambda body, n: (200, replies[(n - 1) % len(replies)]))
    return fake


def test_concurrency_point_counts_garbled_streams():
    good = chat_chunks("counting " + " ".join(str(i) for i in range(1, 30)))
    repeated = chat_chunks("Sure " + " ".join(["the"] * 30))
    blank = {"index": 0, "delta": {"content": " "}, "finish_reason": None}
    empty = [{"object": "chat.completion.chunk", "choices": [blank]},
             {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
             "[DONE]"]
    with _chat_route(FakeEngine(), [good, repeated, empty, good]) as fake:
        point = eb.run_concurrency_point(EngineClient(fake.url, model="m"), 4, "hello", 64)
    assert point["sent"] == 4 and point["completed"] == 4
    assert point["garbled"] == 2
    reasons = sorted(g["reason"] for g in point["garbled_streams"])
    assert reasons[0] == "empty output"
    assert reasons[1].startswith("repeated token 'the'")
    assert point["distinct_outputs"] == 3
    assert point["aggregate_tok_s"] > 0


def test_concurrency_point_counts_failed_streams():
    def answer(body, n):
        if n == 2:
            return 500, {"error": {"message": "out of KV pool pages", "code": 500}}
        return 200, chat_chunks("counting 1 2 3 4 5")

    with FakeEngine() as fake:
        fake.route("POST", "/v1/chat/completions", answer)
        point = eb.run_concurrency_point(EngineClient(fake.url), 3, "hello", 8)
    assert point["completed"] == 2 and point["sent"] == 3
    assert point["errors"][0]["count"] == 1
    assert "out of KV pool pages" in point["errors"][0]["error"]


def test_thinking_extra():
    assert eb.thinking_extra(None) == {}
    assert eb.thinking_extra(True) == {"chat_template_kwargs": {"thinking": True}}
    assert eb.thinking_extra(False, "enable_thinking", {"top_p": 0.9, "chat_template_kwargs": {"x": 1}}) == {
        "top_p": 0.9, "chat_template_kwargs": {"x": 1, "enable_thinking": False}}


def test_decode_times_reasoning_and_reads_it_for_garble():
    def think(word):
        return {"object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"reasoning_content": word}, "finish_reason": None}]}

    stream = [think("hmm ") for _i in range(20)] + chat_chunks("ok")
    with _chat_route(FakeEngine(), [stream]) as fake:
        cases = [{"name": "t", "prompt": "prose", "temperature": 0.7, "thinking": True}]
        out = eb.run_decode(EngineClient(fake.url, model="m"), cases, 1, 32)
        body = fake.calls[-1][2]
    assert body["chat_template_kwargs"] == {"thinking": True}
    assert body["temperature"] == 0.7
    run = out[0]["runs"][0]
    assert run["ok"]
    assert run["garbled"] == "token 'hmm' is 20 of 21 tokens"


def test_needle_too_long_for_the_context_names_the_option():
    counter = SimpleNamespace(method="estimate", count=estimate_tokens)
    out = eb.run_needle(EngineClient("http://127.0.0.1:1"), counter, 50000, context_length=40000)
    assert out["passed"] is None and out["expected"] == 3 and out["counted_tokens"] is None  # not sent: not measured
    assert out["skipped"] == ("a 50000-token prompt plus a 256-token reply does not fit the engine's context of "
                              "40000 tokens; lower needle_tokens or raise the engine's context")


def test_progress_lines_read_as_the_summary(tmp_path):
    path = tmp_path / "progress.json"
    counter = SimpleNamespace(method="server", exact=True, count=len)
    client = EngineClient("http://127.0.0.1:1")
    rows = eb.run_prefill(client, counter, [9000], context_length=8192, progress=StepProgress(str(path), 1))
    assert json.loads(path.read_text())["last"] == bf.summary_lines({"prefill": rows})[0] == (
        "prefill 9000: skipped, 9000 + 4 tokens exceeds the server's context of 8192")
    needle = eb.run_needle(client, counter, 50000, context_length=40000, progress=StepProgress(str(path), 1))
    assert json.loads(path.read_text())["last"] == bf.summary_lines({"needle": needle})[0]
    assert bf.summary_lines({"needle": needle})[0].startswith("needle 50000: not measured, skipped: a 50000-token")


# --- issue 16: every timed request new to the server, repeats, no aggregate over failed streams, depth ---------
def _params(**overrides):
    from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_setup import ARGUMENT_SPEC

    params = {key: spec.get("default") for key, spec in ARGUMENT_SPEC.items()}
    params.update(overrides)
    return params


def _user_texts(fake, path="/v1/chat/completions"):
    return [call[2]["messages"][0]["content"] for call in fake.calls if call[1] == path]


def test_decode_runs_are_new_to_the_server_after_one_untimed_warm_up():
    # A llama.cpp server says how much of the prompt came from its cache (timings.cache_n): it is recorded.
    reply = chat_chunks("The keeper lit the lamp")
    reply[-2]["timings"] = {"cache_n": 3, "prompt_n": 71}
    with _chat_route(FakeEngine(), [reply]) as fake:
        cases = [{"name": "prose_t0", "prompt": "prose", "temperature": 0.0, "thinking": False}]
        out = eb.run_phases(EngineClient(fake.url, model="m"), _params(decode_cases=cases, decode_repeats=3),
                            ["decode"], None, None, None)
        texts = _user_texts(fake)
    assert len(texts) == 4  # the warm-up, then three timed runs
    assert out["warmup"]["ok"] is True
    timed = texts[1:]
    assert len(set(texts)) == 4  # no prompt sent twice: no prompt cache can answer one
    for text in timed:
        nonce, rest = text.split("\n", 1)
        assert rest == bp.PROMPTS["prose"]
        assert re.fullmatch(r"[0-9a-f]{12} \(prose_t0 run \d\)", nonce)  # its random part first: no shared prefix
    assert len({text.split("\n", 1)[0][:13] for text in timed}) == 3
    (case,) = out["decode"]
    assert case["ok"] == 3 and [run["cached_tokens"] for run in case["runs"]] == [3, 3, 3]


def _completions(fake, prompt_tokens=None):
    def answer(body, _n):
        usage = {"prompt_tokens": prompt_tokens or len(body["prompt"].split()), "completion_tokens": 1,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        return 200, [{"choices": [{"index": 0, "text": "ready", "finish_reason": None}]},
                     {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}], "usage": usage}, "[DONE]"]

    fake.route("POST", "/v1/completions", answer)
    return fake


def test_prefill_is_repeated_with_new_prompts_and_statistics():
    counter = SimpleNamespace(method="server", exact=True, count=lambda text: len(text.split()))
    with _completions(FakeEngine()) as fake:
        (row,) = eb.run_prefill(EngineClient(fake.url), counter, [300], repeats=3)
        prompts = [call[2]["prompt"] for call in fake.calls if call[1] == "/v1/completions"]
    assert len(prompts) == 3 and len(set(prompts)) == 3
    assert [run["prompt_tokens"] for run in row["runs"]] == [300, 300, 300]
    assert [run["cached_tokens"] for run in row["runs"]] == [0, 0, 0]
    stats = row["stats"]["prefill_tok_s"]
    assert stats["n"] == 3 and stats["median"] == row["prefill_tok_s"] and stats["spread_pct"] is not None
    assert row["ttft_ms"] == row["stats"]["ttft_ms"]["median"] and row["ok"] is True
    assert bf.prefill_line(row).endswith(f"({3} of 3 runs, spread {stats['spread_pct']:.1f}%)")


def test_concurrency_is_repeated_in_rounds_with_statistics():
    with _chat_route(FakeEngine(), [chat_chunks("counting 1 2 3 4 5 6")]) as fake:
        (point,) = eb.run_concurrency(EngineClient(fake.url, model="m"), [2], 8, repeats=3)
        texts = _user_texts(fake)
    assert point["repeats"] == 3 and point["sent"] == point["completed"] == 6
    assert len(point["rounds"]) == 3 and point["stats"]["aggregate_tok_s"]["n"] == 3
    assert point["aggregate_tok_s"] == point["stats"]["aggregate_tok_s"]["median"]
    assert point["per_stream_tok_s"]["n"] == 6
    assert len(set(texts)) == 6  # one prompt per stream of every round
    assert point["aggregate_note"] is None


def test_no_aggregate_when_a_stream_failed():
    def answer(body, n):
        if n == 2:
            return 500, {"error": {"message": "out of KV pool pages", "code": 500}}
        return 200, chat_chunks("counting 1 2 3 4 5")

    with FakeEngine() as fake:
        fake.route("POST", "/v1/chat/completions", answer)
        (point,) = eb.run_concurrency(EngineClient(fake.url), [3], 8, repeats=2)
    assert point["completed"] == 5 and point["sent"] == 6
    round1, round2 = point["rounds"]
    assert round1["aggregate_tok_s"] is None and round1["aggregate_note"] == "not reported: 1 of 3 streams failed"
    assert round2["aggregate_tok_s"] is not None
    assert point["aggregate_note"] == "from 1 of 2 rounds; round 1: not reported: 1 of 3 streams failed"
    assert "(from 1 of 2 rounds; round 1: not reported" in bf.concurrency_line(point)


def test_decode_at_depth_skips_what_does_not_fit_and_never_sends_it():
    from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_depth import run_depth

    counter = SimpleNamespace(method="server", exact=True, count=lambda text: len(text.split()))
    with _chat_route(FakeEngine(), [chat_chunks("The keeper lit the lamp and watched the sea")]) as fake:
        rows = run_depth(EngineClient(fake.url, model="m"), counter, [300, 600, 5000], max_tokens=64, limit=1000,
                         context_length=4096)
        texts = _user_texts(fake)
    shallow, mid, deep = rows
    assert [len(text.split()) for text in texts] == [300, 600]  # built to the depth; 5000 never sent
    assert deep["skipped"] == "5000 tokens is above depth_limit 1000" and deep["runs"] == []
    assert shallow["decode_tok_s"]["n"] == 1 and shallow["decode_tok_s"]["median"] > 0
    assert texts[0].endswith(bp.PROMPTS["prose"])
    assert mid["prompt_tokens"] == 7  # the server's usage figure (the fake's)
    rows = run_depth(EngineClient("http://127.0.0.1:1"), counter, [5000], max_tokens=64, limit=0, context_length=4096)
    assert rows[0]["skipped"] == "5000 + 64 tokens exceeds the server's context of 4096"
    assert bf.depth_line(rows[0]) == "depth 5000: skipped, 5000 + 64 tokens exceeds the server's context of 4096"
