# SPDX-License-Identifier: GPL-3.0-or-later
"""The bench module_utils: statistics and garble check (bench_figures), prompts to exact token counts and
token counters (bench_prompts), progress file and phases (engine_bench), and the concurrency point
against fake servers that garble."""

import json
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
    assert not out["passed"] and out["expected"] == 3 and out["counted_tokens"] is None
    assert out["detail"] == ("a 50000-token prompt plus a 256-token reply does not fit the engine's context of "
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
    assert bf.summary_lines({"needle": needle})[0].startswith("needle 50000: FAIL, a 50000-token prompt")
