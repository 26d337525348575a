# SPDX-License-Identifier: GPL-3.0-or-later
"""engine_health (run in-process) against the lab engine (a TensorFold simulator) and fakes of vLLM and llama.cpp."""

import threading
import time

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import engine_health

from tests.labengine import Cluster, free_port, request, wait_until
from tests.unit.fake_openai import (
    FakeEngine,
    chat_chunks,
    models_list,
    silent_server,
    tensorfold_health,
    thinking_chat,
)
from tests.unit.module_runner import module_runner


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, engine_health.main)


@pytest.fixture(scope="module")
def pair(engine_bin, tmp_path_factory):
    c = Cluster(engine_bin, tmp_path_factory.mktemp("health-pair")).start()
    yield c
    c.stop()


def url(port):
    return f"http://127.0.0.1:{port}"


def test_ready_pair_with_chat_check(run, pair):
    kind, result, warnings = run({"url": url(pair.port), "served_name": "dsv41-sim", "chat_check": True})
    assert kind == "exit", result
    assert result["ready"] is True and result["changed"] is False and result["state"] == "ready"
    assert result["health"]["ok"] is True and result["health"]["backend"] == "tensorfold"
    assert result["streams"] == {"decoding": 0, "prefilling": 0, "max": 2} and warnings == []
    assert result["models"] == ["dsv41-sim"] and result["reply"] == "17 * 23 = 391"
    # Bounds load cannot break. The lab engine sends token k at first_token + k / SIM_DECODE_TOK_S (100 here), so a
    # late first chunk makes the next ones catch up and the measured rate look higher (CI saw 212 tok/s from these
    # 5 words): no upper bound on the rate. What load cannot shrink is the time to the last word: a TTFT of at least
    # 20 ms (SIM_TTFT_BASE_MS) plus 4 gaps of 10 ms; 5 ms of margin for the two clocks. The rate's arithmetic is
    # pinned in test_engine_client.py.
    assert result["ttft_s"] >= 0.015 and result["decode_tok_s"] > 5
    assert result["ttft_s"] + 4 / result["decode_tok_s"] >= 0.055


def test_check_mode_probes_too(run, pair):
    kind, result, _warnings = run({"url": url(pair.port) + "/v1", "_ansible_check_mode": True})
    assert kind == "exit" and result["ready"] and not result["changed"]


def test_served_name_missing_names_what_is_listed(run, pair):
    kind, result, _warnings = run({"url": url(pair.port), "served_name": "deepseek-v4.1-flash", "wait": 30})
    assert kind == "fail" and result["state"] == "wrong_model"
    assert "does not list served_name deepseek-v4.1-flash; it lists dsv41-sim" in result["msg"]
    assert result["elapsed_s"] < 5  # waiting does not change it


def test_refused_then_ready(run, engine_bin, tmp_path):
    cluster = Cluster(engine_bin, tmp_path)
    starter = threading.Timer(1.0, cluster.start)
    starter.start()
    try:
        kind, result, _warnings = run(
            {"url": url(cluster.port), "served_name": "dsv41-sim", "wait": 30, "interval": 0.2}
        )
    finally:
        starter.join()
        cluster.stop()
    assert kind == "exit", result
    assert result["ready"] and result["probes"] > 2 and result["elapsed_s"] > 1.0


def test_wait_timeout_names_the_last_state(run):
    port = free_port()
    t0 = time.monotonic()
    kind, result, _warnings = run({"url": url(port), "wait": 2, "interval": 0.3})
    assert time.monotonic() - t0 < 5
    assert kind == "fail" and result["ready"] is False and result["state"] == "loading"
    assert f"still loading: connection refused on 127.0.0.1:{port} for 2 s" in result["msg"]
    assert "raise wait" in result["msg"] and result["probes"] >= 3


def test_one_probe_when_wait_is_0(run):
    kind, result, _warnings = run({"url": url(free_port())})
    assert kind == "fail" and result["probes"] == 1 and result["elapsed_s"] < 1


def test_follower_lost_is_a_fatal_503(run, engine_bin, tmp_path):
    cluster = Cluster(engine_bin, tmp_path, env={"SIM_FOLLOWER_GRACE_S": "30"}).start()
    try:
        cluster.followers[1].kill()
        assert wait_until(lambda: request(cluster.port, "GET", "/health")[0] == 503, 10)
        kind, result, _warnings = run({"url": url(cluster.port), "wait": 1, "interval": 0.3})
    finally:
        cluster.stop()
    assert kind == "fail" and result["state"] == "fatal"
    assert "503 from /health: follower rank 1 lost: connection closed" in result["msg"]
    assert result["health"] == {"ok": False, "error": "follower rank 1 lost: connection closed"}


def test_api_key(run, engine_bin, tmp_path):
    (tmp_path / "key").write_text("lab-key\n")
    cluster = Cluster(engine_bin, tmp_path, extra_args=["--api-key-file", str(tmp_path / "key")]).start()
    try:
        kind, without, _warnings = run({"url": url(cluster.port), "wait": 10})
        kind_key, with_key, _warnings = run({"url": url(cluster.port), "api_key": "lab-key", "chat_check": True})
        kind_bad, bad, _warnings = run({"url": url(cluster.port), "api_key": "wrong"})
    finally:
        cluster.stop()
    assert kind == "fail" and without["state"] == "unauthorized" and without["elapsed_s"] < 5
    assert "401 from /v1/models: the engine wants an API key (none given)" in without["msg"]
    assert "set api_key" in without["msg"]
    assert without["health"] == {"status": "ok"} and without["key_enforced"] is None
    assert kind_key == "exit" and with_key["ready"] and with_key["health"] == {"status": "ok"}
    assert "lab-key" not in str(with_key) and with_key["reply"] == "17 * 23 = 391"
    # the engine was asked /v1/models without the key too, and refused it: the key is enforced
    assert with_key["key_enforced"] is True and with_key["state"] == "ready"
    assert kind_bad == "fail" and "refused the API key given" in bad["msg"]


def key_ignoring_engine():
    """An engine whose key variable was not read: it serves every route with or without a key."""
    fake = FakeEngine()
    fake.route("GET", "/health", lambda body, n: (200, tensorfold_health(1048576)))
    fake.route("GET", "/v1/models", lambda body, n: (200, models_list("deepseek-v4.1-flash")))
    fake.route("POST", "/v1/chat/completions", lambda body, n: (200, chat_chunks("17 * 23 = 391")))
    return fake


def models_calls(fake):
    """The Authorization header of each GET /v1/models the fake answered, in order (None: none sent)."""
    return [c[3].get("Authorization") for c in fake.calls if c[:2] == ("GET", "/v1/models")]


def test_a_key_the_engine_ignores_fails(run):
    # The tfpy recipe's engine most likely never reads TF_API_KEY: before, the key was sent, everything answered
    # 200, and the probe passed while the API stood open to whoever reaches the port.
    with key_ignoring_engine() as fake:
        kind, result, _warnings = run({"url": fake.url, "api_key": "site-key", "served_name": "deepseek-v4.1-flash",
                                       "chat_check": True})
    assert kind == "fail" and result["ready"] is False
    assert result["state"] == "key_not_enforced" and result["key_enforced"] is False
    assert f"the engine at {fake.url} served /v1/models without the API key" in result["msg"]
    assert "the recipe's container.api_key_env or launch flag" in result["msg"]
    assert "keep recipe_api_host on loopback or fix the recipe" in result["msg"]
    assert "site-key" not in str(result)
    # asked with the key until ready, then once without it; no chat request to an engine open to anyone
    assert models_calls(fake) == ["Bearer site-key", None]
    assert not any(c[1] == "/v1/chat/completions" for c in fake.calls)


def test_no_key_no_extra_request_and_the_check_can_be_turned_off(run):
    with key_ignoring_engine() as fake:
        kind, no_key, _warnings = run({"url": fake.url})
        asked = len(models_calls(fake))
        kind_off, off, _warnings = run({"url": fake.url, "api_key": "site-key", "api_key_check": False})
    assert kind == "exit" and no_key["ready"] and no_key["key_enforced"] is None and asked == 1
    assert kind_off == "exit" and off["ready"] and off["key_enforced"] is None
    assert models_calls(fake) == [None, "Bearer site-key"]


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusal_without_the_key_means_enforced(run, status):
    # vLLM and SGLang answer 401 {"error": "Unauthorized"} (vllm-project/vllm vllm/entrypoints/openai/server_utils.py
    # @029329a8 AuthenticationMiddleware; sgl-project/sglang python/sglang/srt/utils/auth.py @0ce3659c, 403 for an
    # admin route); 403 is taken as a refusal too. The fake answers the first (keyed) ask, refuses the second.
    with FakeEngine() as fake:
        fake.route("GET", "/health", lambda body, n: (200, ""))
        fake.route("GET", "/v1/models", lambda body, n: (200, models_list("m")) if n == 1 else
                   (status, {"error": "Unauthorized"}))
        kind, result, _warnings = run({"url": fake.url, "api_key": "k"})
    assert kind == "exit", result["msg"]
    assert result["ready"] and result["key_enforced"] is True and models_calls(fake) == ["Bearer k", None]


def test_another_answer_without_the_key_proves_nothing_and_fails(run):
    with FakeEngine() as fake:
        fake.route("GET", "/health", lambda body, n: (200, ""))
        fake.route("GET", "/v1/models", lambda body, n: (200, models_list("m")) if n == 1 else
                   (500, {"error": {"message": "internal error"}}))
        kind, result, _warnings = run({"url": fake.url, "api_key": "k"})
    assert kind == "fail" and result["ready"] is False
    assert result["state"] == "key_unknown" and result["key_enforced"] is None
    assert "could not tell whether the engine enforces the API key: GET /v1/models without it answered 500: " \
           "internal error" in result["msg"]


@pytest.mark.parametrize(
    ("health", "streams"),
    [
        (tensorfold_health(1048576, parallel=4, decoding=1, running=1), {"decoding": 1, "prefilling": 0, "max": 4}),
        (tensorfold_health(65538), None),  # one request at a time: no streams
        ({"status": "ok"}, None),  # API keys on
    ],
    ids=["parallel", "serial", "api-key-mode"],
)
def test_tensorfold_health_and_its_streams(run, health, streams):
    with FakeEngine() as fake:
        fake.route("GET", "/health", lambda body, n: (200, health))
        fake.route("GET", "/v1/models", lambda body, n: (200, models_list("deepseek-v4.1-flash")))
        kind, result, warnings = run({"url": fake.url, "served_name": "deepseek-v4.1-flash"})
    assert kind == "exit", result
    assert result["ready"] and result["health"] == health and result["streams"] == streams
    assert warnings == []


def test_streams_of_another_shape_are_reported_not_read(run):
    health = {"ok": True, "requests_running": 0, "streams": {"active": 0, "queued": 0, "slots": 2}}
    with FakeEngine() as fake:
        fake.route("GET", "/health", lambda body, n: (200, health))
        fake.route("GET", "/v1/models", lambda body, n: (200, models_list("m")))
        kind, result, warnings = run({"url": fake.url})
    assert kind == "exit" and result["ready"] and result["streams"] is None
    assert warnings == ["/health's streams is not TensorFold's {decoding, prefilling, max} and was not read: "
                        '{"active": 0, "queued": 0, "slots": 2}']


def test_vllm_empty_200(run):
    with FakeEngine() as fake:
        fake.route("GET", "/health", lambda body, n: (200, ""))
        fake.route("GET", "/v1/models", lambda body, n: (200, models_list("deepseek-v4.1-flash")))
        fake.route("POST", "/v1/chat/completions", lambda body, n: (200, chat_chunks("The answer is 391.")))
        kind, result, _warnings = run({"url": fake.url, "served_name": "deepseek-v4.1-flash", "chat_check": True})
    assert kind == "exit", result
    assert result["ready"] and result["health"] == {} and result["streams"] is None
    assert result["reply"] == "The answer is 391."
    chat = next(c for c in fake.calls if c[1] == "/v1/chat/completions")[2]
    assert chat["model"] == "deepseek-v4.1-flash" and chat["messages"][0]["content"] == "What is 17 * 23?"


def test_llama_cpp_loading_then_ok(run):
    loading = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    with FakeEngine() as fake:
        fake.route("GET", "/health", lambda body, n: (503, loading) if n <= 3 else (200, {"status": "ok"}))
        fake.route("GET", "/v1/models", lambda body, n: (200, models_list("model.gguf")))
        kind_once, once, _warnings = run({"url": fake.url})
        kind, result, _warnings = run({"url": fake.url, "wait": 10, "interval": 0.1})
    assert kind_once == "fail" and once["state"] == "loading"
    assert "still loading: 503 from /health: Loading model" in once["msg"]
    assert kind == "exit" and result["ready"] and result["health"] == {"status": "ok"}
    assert result["models"] == ["model.gguf"]


def test_wrong_chat_answer_fails(run):
    with FakeEngine() as fake:
        fake.route("GET", "/health", lambda body, n: (200, {"ok": True}))
        fake.route("GET", "/v1/models", lambda body, n: (200, models_list("m")))
        fake.route("POST", "/v1/chat/completions", lambda body, n: (200, chat_chunks("It is 3910")))
        kind, result, _warnings = run({"url": fake.url, "chat_check": True})
    assert kind == "fail" and result["state"] == "chat_failed"
    assert "expected 391 in the answer, got 'It is 3910'" in result["msg"]


def test_a_server_that_never_answers(run):
    with silent_server() as silent:
        t0 = time.monotonic()
        kind, once, _warnings = run({"url": silent, "timeout": 1})
        kind_wait, waited, _warnings = run({"url": silent, "timeout": 30, "wait": 2, "interval": 0.5})
        took = time.monotonic() - t0
    assert kind == "fail" and once["state"] == "timeout" and "no answer from /health" in once["msg"]
    assert "within 1 s" in once["msg"] and "wedged" in once["msg"]
    assert kind_wait == "fail" and waited["state"] == "timeout"
    assert took < 8  # 1 s, then at most wait + 1 s per probe, never the 30 s timeout


def vllm_fake(chat):
    """A vLLM-shaped engine (empty 200 /health) serving DeepSeek-v4.1-Flash-EXL3 with ``chat`` as its chat handler."""
    fake = FakeEngine()
    fake.route("GET", "/health", lambda body, n: (200, ""))
    fake.route("GET", "/v1/models", lambda body, n: (200, models_list("DeepSeek-v4.1-Flash-EXL3")))
    fake.route("POST", "/v1/chat/completions", chat)
    return fake


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_a_reply_cut_while_thinking_is_read_from_its_reasoning(run, key):
    # thinking on (the chat template's default), a reasoning parser: 391 is in the thinking, the tokens run out
    # before the answer, content stays empty. Before: "expected 391 in the answer, got ''" failed a healthy engine.
    thinking = "17 * 23: 17 * 20 = 340 and 17 * 3 = 51, so 391. Let me double-check: 23 * 17 = 391. Yes."
    with vllm_fake(thinking_chat("391", thinking, key=key)) as fake:
        kind, result, _warnings = run({"url": fake.url, "served_name": "DeepSeek-v4.1-Flash-EXL3", "chat_check": True,
                                       "chat_max_tokens": 20})
    assert kind == "exit", result["msg"]
    assert result["ready"] and result["reply"].startswith("17 * 23: 17 * 20 = 340")


def test_the_recipe_question_and_its_thinking_switch_are_sent(run):
    # The vLLM recipe's smoke (MiaAI README @145bb98): "What is 17*19? Reply with the integer only." -> 323 with
    # chat_template_kwargs {enable_thinking: false}; thinking on, 256 tokens of it never reach the answer.
    thinking = " ".join(["Let me think about this step by step."] * 40)
    chat = thinking_chat(lambda body: "323" if "17*19" in body["messages"][0]["content"] else "?", thinking)
    asked = {"url": None, "served_name": "DeepSeek-v4.1-Flash-EXL3", "chat_check": True,
             "chat_question": "What is 17*19? Reply with the integer only.", "chat_answer": "323"}
    with vllm_fake(chat) as fake:
        kind, result, _warnings = run(dict(asked, url=fake.url,
                                           chat_fields={"chat_template_kwargs": {"enable_thinking": False}}))
        kind_on, thought, _warnings = run(dict(asked, url=fake.url))
    assert kind == "exit", result["msg"]
    assert result["ready"] and result["reply"] == "323"
    body = next(c[2] for c in fake.calls if c[1] == "/v1/chat/completions")
    assert body["messages"] == [{"role": "user", "content": "What is 17*19? Reply with the integer only."}]
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["max_tokens"] == 256
    # without the switch the reply is all thinking: a real failure, which says so
    assert kind_on == "fail" and thought["state"] == "chat_failed"
    assert "asked 'What is 17*19? Reply with the integer only.', expected 323 in the answer, got '' after " \
           "thinking 'Let me think" in thought["msg"]


def test_chat_fields_may_not_replace_the_request(run):
    kind, result, _warnings = run({"url": "http://127.0.0.1:1", "chat_check": True,
                                   "chat_fields": {"max_tokens": 4, "messages": []}})
    assert kind == "fail"
    assert result["msg"] == "chat_fields may not set max_tokens, messages: the checks set them themselves"
