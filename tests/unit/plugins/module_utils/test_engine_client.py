# SPDX-License-Identifier: GPL-3.0-or-later
"""engine_client against the lab engine (a TensorFold simulator) and small fake servers."""

import threading
import time

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import (
    EngineClient,
    EngineError,
    health_streams,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_errors import error_in, error_message, shorten
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_stream import together

from tests.labengine import Cluster, free_port
from tests.unit.fake_openai import (
    FakeEngine,
    chat_chunks,
    silent_server,
    tensorfold_health,
    tokenize_llama_cpp,
    tokenize_vllm,
)

DECODE_TOK_S = 100.0  # tests/labengine.py SIM_ENV
TTFT_BASE_S = 0.020


@pytest.fixture(scope="module")
def cluster(engine_bin, tmp_path_factory):
    c = Cluster(engine_bin, tmp_path_factory.mktemp("client-cluster")).start()
    yield c
    c.stop()


@pytest.fixture
def client(cluster):
    return EngineClient(f"http://127.0.0.1:{cluster.port}", model="dsv41-sim", timeout=10)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1",
                                 "http://127.0.0.1:8000/v1/", "127.0.0.1:8000"])
def test_url_forms(url):
    c = EngineClient(url)
    assert (c.host, c.port, c.prefix, c.base_url) == ("127.0.0.1", 8000, "", "http://127.0.0.1:8000")


def test_bad_url():
    with pytest.raises(ValueError, match="must be like"):
        EngineClient("ftp://x")


def test_health_models_tokenize(client):
    resp = client.health()
    assert resp.status == 200 and resp.json["ok"] is True
    assert resp.headers["content-type"].startswith("application/json")
    assert client.models() == ["dsv41-sim"]
    assert client.tokenize("one two three") == 3


def test_http_errors_are_responses_not_raised(client):
    resp = client.request("GET", "/no/such/route")
    assert resp.status == 404 and resp.json["error"]["code"] == 404


def test_stream_timings_match_the_simulated_rates(client):
    """The client's clocks against the engine's pacing, in the directions a loaded machine cannot break.

    A busy machine only makes things later, so the test bounds what the engine guarantees (60 tokens take
    at least TTFT + 59 decode steps) and what the client's own clock readings must satisfy (inside the call,
    in order), never an upper bound on wall time: the CI run of stop 33 saw a TTFT of 0.32 s for a 0.02 s one.
    """
    before = time.monotonic()
    r = client.stream_completion("count from 1 to 60", 80)
    after = time.monotonic()
    assert r.ok and r.finish_reason == "stop" and r.done
    assert r.text.split() == [str(i) for i in range(1, 61)]
    assert r.chunks == 60 and r.completion_tokens == 60 and r.prompt_tokens == 5
    assert before <= r.t_start < r.t_first <= r.t_last <= after
    assert r.ttft_s == r.t_first - r.t_start and r.ttft_s > TTFT_BASE_S * 0.5
    assert r.t_last - r.t_start >= (TTFT_BASE_S + 59 / DECODE_TOK_S) * 0.9
    assert r.decode_tok_s == pytest.approx(59 / (r.t_last - r.t_first))


def test_stream_chat_answers_arithmetic(client):
    r = client.stream_chat([{"role": "user", "content": "What is 17 * 23?"}], 32)
    assert r.ok and r.text == "17 * 23 = 391"
    assert r.as_dict()["completion_tokens"] == 5


def test_stream_error_status(client):
    r = client.stream_chat([{"role": "user", "content": "hi"}], 10 ** 6)
    assert r.status == 400 and "maximum context length" in r.error and r.chunks == 0


def test_api_key(engine_bin, tmp_path):
    (tmp_path / "key").write_text("s3cret\n")
    c = Cluster(engine_bin, tmp_path, extra_args=["--api-key-file", str(tmp_path / "key")]).start()
    try:
        anonymous = EngineClient(f"http://127.0.0.1:{c.port}")
        with pytest.raises(EngineError) as err:
            anonymous.models()
        assert err.value.kind == "http" and err.value.status == 401 and "401" in str(err.value)
        assert EngineClient(f"http://127.0.0.1:{c.port}", api_key="s3cret").models() == ["dsv41-sim"]
        assert anonymous.health().json == {"status": "ok"}
    finally:
        c.stop()


def test_refused():
    port = free_port()
    with pytest.raises(EngineError) as err:
        EngineClient(f"http://127.0.0.1:{port}").health()
    assert err.value.kind == "refused" and str(err.value) == f"connection refused on 127.0.0.1:{port}"


def test_a_server_that_never_answers_times_out():
    with silent_server() as url:
        c = EngineClient(url, timeout=0.5)
        t0 = time.monotonic()
        with pytest.raises(EngineError) as err:
            c.health()
        assert err.value.kind == "timeout" and "within 0.5 s" in str(err.value)
        with pytest.raises(EngineError) as err:
            c.stream_chat([{"role": "user", "content": "x"}], 4)
        assert err.value.kind == "timeout"
        assert time.monotonic() - t0 < 3


def test_sse_comments_no_usage_and_error_mid_stream():
    with FakeEngine() as fake:
        events = [": keep-alive", *chat_chunks("a b c d", usage=False)]
        fake.route("POST", "/v1/chat/completions", lambda body, n: (200, events if n == 1 else [
            *chat_chunks("x y", done=False)[:2], {"error": {"message": "follower rank 1 lost", "code": 503}}]))
        c = EngineClient(fake.url + "/v1", api_key="k")
        r = c.stream_chat([{"role": "user", "content": "q"}], 8)
        assert r.ok and r.text == "a b c d" and r.chunks == 4 and r.completion_tokens == 4 and r.prompt_tokens is None
        body, headers = fake.calls[0][2], fake.calls[0][3]
        assert body["stream"] is True and body["temperature"] == 0.0 and body["max_tokens"] == 8
        assert headers["Authorization"] == "Bearer k"
        r = c.stream_chat([{"role": "user", "content": "q"}], 8)
        assert r.text == "x y" and "follower rank 1 lost" in r.error and not r.ok


def test_stream_cut_before_done():
    with FakeEngine() as fake:
        fake.route("POST", "/v1/completions", lambda body, n: (200, [{"choices": [{"text": "half"}]}]))
        r = EngineClient(fake.url).stream_completion("p", 8)
        assert r.text == "half" and "ended before 'data: [DONE]'" in r.error


def test_tokenize_absent_and_models_error():
    with FakeEngine() as fake:
        fake.route("GET", "/v1/models", lambda body, n: (503, {"error": {"message": "Loading model"}}))
        c = EngineClient(fake.url)
        assert c.tokenize("a b") is None
        with pytest.raises(EngineError) as err:
            c.models()
        assert err.value.kind == "http" and err.value.status == 503 and "Loading model" in str(err.value)


def test_sse_parsing_is_cheap():
    """More than 5,000 chunks a second on one core (a benchmark client's need); in practice far more."""
    import io
    import json

    from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_stream import StreamResult, read_sse

    event = json.dumps({"object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": {"content": " word"}, "finish_reason": None}]})
    data = (("data: " + event + "\n\n") * 20000 + "data: [DONE]\n\n").encode()

    class Resp:
        readline = io.BufferedReader(io.BytesIO(data)).readline

    result = StreamResult(time.monotonic())
    t0 = time.perf_counter()
    read_sse(Resp, result, True, "/v1/chat/completions", None, 30.0)
    rate = result.chunks / (time.perf_counter() - t0)
    assert result.chunks == 20000 and result.done and rate > 5000


def test_thinking_chunks_count_for_timing_but_not_text():
    def think(word):
        return {"choices": [{"index": 0, "delta": {"reasoning_content": word}, "finish_reason": None}]}

    with FakeEngine() as fake:
        fake.route("POST", "/v1/chat/completions",
                   lambda body, n: (200, [think("Let"), think(" me think."), *chat_chunks("391")]))
        r = EngineClient(fake.url).stream_chat([{"role": "user", "content": "What is 17 * 23?"}], 64)
    assert r.ok and r.text == "391" and r.reasoning == "Let me think."
    assert r.chunks == 3 and r.completion_tokens == 1  # usage of the fake counts the answer only
    assert r.t_first <= r.t_last


# --- /tokenize: vLLM's fields first (TensorFold, vLLM), llama.cpp's content only when prompt is not read ---


def tokenize_calls(fake):
    return [(c[2], c[3].get("Authorization")) for c in fake.calls if c[1] == "/tokenize"]


def test_tokenize_sends_vllms_prompt_with_the_model_and_key_and_reads_count():
    def tensorfold(body, n):  # count is what counts: here it differs from the token list on purpose
        return 200, {"count": 7, "max_model_len": 1048576, "tokens": [1, 2, 3]}

    with FakeEngine() as fake:
        fake.route("POST", "/tokenize", tensorfold)
        assert EngineClient(fake.url, api_key="k", model="deepseek-v4.1-flash").tokenize("a b c") == 7
    assert tokenize_calls(fake) == [({"prompt": "a b c", "model": "deepseek-v4.1-flash"}, "Bearer k")]


def test_tokenize_vllm_without_a_model_name():
    with FakeEngine() as fake:
        fake.route("POST", "/tokenize", tokenize_vllm(max_model_len=614400))
        assert EngineClient(fake.url).tokenize("one two three four") == 4
    assert tokenize_calls(fake) == [({"prompt": "one two three four"}, None)]


def test_tokenize_llama_cpp_reads_content_only():
    # llama.cpp answers a body without content with an empty token list, not an error; once seen, the
    # client sends content only.
    with FakeEngine() as fake:
        fake.route("POST", "/tokenize", tokenize_llama_cpp)
        c = EngineClient(fake.url, api_key="k")
        assert c.tokenize("one two three") == 3
        assert c.tokenize("four five") == 2
        assert EngineClient(fake.url).tokenize("") == 0  # an empty text has no tokens: nothing to tell
    assert tokenize_calls(fake) == [
        ({"prompt": "one two three"}, "Bearer k"),
        ({"content": "one two three"}, "Bearer k"),
        ({"content": "four five"}, "Bearer k"),
        ({"prompt": ""}, None),
    ]


def test_tokenize_falls_back_to_content_on_400_or_422():
    for status in (400, 422):
        with FakeEngine() as fake:
            fake.route("POST", "/tokenize", lambda body, n, status=status: (
                (200, {"tokens": body["content"].split()}) if "content" in body
                else (status, {"error": "missing string content"})))
            assert EngineClient(fake.url).tokenize("a b") == 2
        assert [body for body, _key in tokenize_calls(fake)] == [{"prompt": "a b"}, {"content": "a b"}]


def test_tokenize_errors():
    with FakeEngine() as fake:
        fake.route("POST", "/tokenize", lambda body, n: (401, {"error": {"message": "invalid API key"}}))
        with pytest.raises(EngineError) as err:
            EngineClient(fake.url).tokenize("a")
        assert err.value.kind == "http" and err.value.status == 401 and "invalid API key" in str(err.value)
        fake.route("POST", "/tokenize", lambda body, n: (200, {"ids": [1]}))
        with pytest.raises(EngineError) as err:
            EngineClient(fake.url).tokenize("a")
        assert err.value.kind == "protocol" and "without a count or a token list" in str(err.value)


# --- /health streams: TensorFold's {decoding, prefilling, max} ---------------------------------------------


def test_health_streams_reads_tensorfolds_shape_only():
    assert health_streams(tensorfold_health(1048576, parallel=4, decoding=2, prefilling=1)) == (
        {"decoding": 2, "prefilling": 1, "max": 4}, None)
    assert health_streams(tensorfold_health()) == (None, None)  # one request at a time: no streams
    assert health_streams({"status": "ok"}) == (None, None)
    assert health_streams({}) == (None, None)
    streams, note = health_streams({"ok": True, "streams": {"active": 0, "queued": 0, "slots": 4}})
    assert streams is None
    assert note == ("/health's streams is not TensorFold's {decoding, prefilling, max} and was not read: "
                    '{"active": 0, "queued": 0, "slots": 4}')


# --- error bodies and streams started together -------------------------------------------------------------


def test_error_messages_of_every_engine_shape():
    assert error_message('{"error": {"message": "Loading model", "code": 503}}') == "Loading model"
    assert error_message('{"ok": false, "error": "follower rank 1 lost"}') == "follower rank 1 lost"
    assert error_message('{"message": "bad"}') == "bad" and error_message('{"detail": "Not Found"}') == "Not Found"
    assert error_message("") == "(empty body)" and error_message("x" * 400) == "x" * 300
    assert error_in({"ok": True}) is None and error_in("not a dict") is None
    assert shorten("a  b\n c") == "a b c" and shorten("x" * 10, 8) == "xxxxx..."


def test_together_releases_the_threads_at_once():
    started = [None] * 4
    gate = threading.Barrier(4, timeout=5)

    def work(i):
        started[i] = time.monotonic()
        gate.wait()  # every thread runs at the same time, or this breaks
        return i * 10

    results, t0 = together(4, work, timeout=5)
    assert results == [0, 10, 20, 30]
    assert all(t0 <= s < t0 + 1 for s in started)


def test_together_gives_up_on_a_thread_after_join_timeout():
    release = threading.Event()
    results, _t0 = together(2, lambda i: release.wait(5) if i else "done", join_timeout=0.2)
    snapshot = list(results)
    release.set()
    assert snapshot == ["done", None]
