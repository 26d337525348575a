# SPDX-License-Identifier: GPL-3.0-or-later
"""engine_checks: the arithmetic, needle, determinism and count checks and the served context, against the lab
engine and fakes (the needle's parts: test_engine_needle.py)."""

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import engine_checks as ec
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import EngineClient

from tests.labengine import Cluster
from tests.unit.fake_openai import (
    FakeEngine,
    chat_chunks,
    llama_cpp_models,
    llama_cpp_props,
    models_list,
    tensorfold_health,
    tokenize_vllm,
)


@pytest.fixture(scope="module")
def cluster(engine_bin, tmp_path_factory):
    c = Cluster(engine_bin, tmp_path_factory.mktemp("checks-cluster"), context=40000,
                env={"SIM_PREFILL_TOK_S": "200000", "SIM_DECODE_TOK_S": "400"}).start()
    yield c
    c.stop()


@pytest.fixture
def client(cluster):
    return EngineClient(f"http://127.0.0.1:{cluster.port}", model="dsv41-sim", timeout=10)


def test_other_checkers():
    assert ec.check_arithmetic_answer("17 * 23 = 391")[0]
    assert not ec.check_arithmetic_answer("It is 3910.")[0]
    assert ec.check_count(" ".join(str(i) for i in range(1, 201)), 200)[0]
    ok, detail = ec.check_count("1 2 3 5", 200)
    assert not ok and "position 4: expected 4, got 5" in detail
    lines = ec.table_lines([{"name": "arithmetic", "passed": True, "detail": "ok", "seconds": 0.25}])
    assert lines[1].split()[:3] == ["arithmetic", "PASS", "0.25"]


def test_a_long_detail_wraps_under_its_column_within_92_columns():
    detail = ("expected 'passphrase-3' at depth 0.9 of a 131072-token prompt; the reply was: " + "word " * 60
              + "END")
    lines = ec.table_lines([{"name": "arithmetic", "passed": True, "detail": "answered '17 * 23 = 391'",
                             "seconds": 0.19},
                            {"name": "needle", "passed": False, "detail": detail, "seconds": 12.5}])
    assert max(len(line) for line in lines) <= 92, [len(line) for line in lines]
    at = lines[0].index("detail")
    assert lines[2].split()[:3] == ["needle", "FAIL", "12.50"] and lines[2][at:].startswith("expected 'passphrase-3'")
    assert len(lines) > 3 and all(line[:at].strip() == "" for line in lines[3:])  # under the detail column
    assert " ".join(" ".join(lines[2:])[at:].split()).endswith("word word END")  # nothing cut


def test_all_checks_pass_on_the_lab_engine(client):
    results = [
        ec.run_arithmetic(client),
        ec.run_needle(client, 4000, [0.2, 0.5, 0.8], seed=5, context=40000),
        ec.run_needle(client, 4000, None, 4, use_tokenize=False),
        ec.run_determinism(client, streams=4, max_tokens=24),
        ec.run_count(client, 200),
    ]
    assert [r["passed"] for r in results] == [True] * 5, results
    assert results[1]["token_source"] == "tokenize" and abs(results[1]["prompt_tokens"] - 4000) <= 40
    assert results[2]["token_source"] == "estimate" and len(results[2]["passphrases"]) == 4
    assert ec.engine_context(client) == 40000


def test_needle_too_long_for_the_context(client):
    r = ec.run_needle(client, 50000, None, 3, context=40000)
    assert not r["passed"] and "does not fit the engine's context of 40000" in r["detail"]


def _fake_passphrase_server(reply_for):
    fake = FakeEngine()
    fake.route("POST", "/tokenize", tokenize_vllm())

    def chat(body, n):
        text = body["messages"][-1]["content"]
        found = [w.rstrip(".") for w in text.split("passphrase: ")[1:]]
        return 200, chat_chunks(reply_for([w.split()[0].rstrip(".") for w in found]))

    fake.route("POST", "/v1/chat/completions", chat)
    return fake


def test_needle_reply_out_of_order_or_missing_is_caught():
    with _fake_passphrase_server(lambda words: ", ".join(reversed(words))) as fake:
        r = ec.run_needle(EngineClient(fake.url), 1500, None, 3)
        assert not r["passed"] and "out of order" in r["detail"]
    with _fake_passphrase_server(lambda words: ", ".join(words[:-1])) as fake:
        r = ec.run_needle(EngineClient(fake.url), 1500, None, 3)
        assert not r["passed"] and "missing" in r["detail"]
    with _fake_passphrase_server(", ".join) as fake:
        assert ec.run_needle(EngineClient(fake.url), 1500, None, 3)["passed"]


def test_determinism_mismatch_is_caught():
    with FakeEngine() as fake:
        fake.route("POST", "/v1/chat/completions",
                   lambda body, n: (200, chat_chunks("the lamp turns" + (" slowly" if n == 3 else " fast"))))
        r = ec.run_determinism(EngineClient(fake.url), streams=4, max_tokens=8)
    assert not r["passed"] and "differs from stream 0 at character 15" in r["detail"]


# --- the served context: TensorFold, vLLM and llama.cpp shapes ---------------------------------------------


def _context_server(health, models=None, props=None):
    fake = FakeEngine()
    fake.route("GET", "/health", lambda body, n: health)
    if models is not None:
        fake.route("GET", "/v1/models", lambda body, n: (200, models))
    if props is not None:
        fake.route("GET", "/props", lambda body, n: (200, props))
    return fake


def paths(fake):
    return [c[1] for c in fake.calls]


def test_engine_context_tensorfold_health():
    with _context_server((200, tensorfold_health(1048576, parallel=4))) as fake:
        assert ec.engine_context(EngineClient(fake.url)) == 1048576
    assert paths(fake) == ["/health"]


def test_engine_context_vllm_max_model_len_of_the_served_model():
    models = models_list("other", "deepseek-v4.1-flash")
    models["data"][0]["max_model_len"] = 4096
    models["data"][1]["max_model_len"] = 614400
    with _context_server((200, ""), models) as fake:
        assert ec.engine_context(EngineClient(fake.url, model="deepseek-v4.1-flash")) == 614400
    assert paths(fake) == ["/health", "/v1/models"]


def test_engine_context_llama_cpp_props_is_one_slots_window():
    # meta has the trained window (n_ctx_train), not the served one; /props has one slot's n_ctx.
    with _context_server((200, {"status": "ok"}), llama_cpp_models("model.gguf"), llama_cpp_props(8192)) as fake:
        assert ec.engine_context(EngineClient(fake.url)) == 8192
    assert paths(fake) == ["/health", "/v1/models", "/props"]


def test_engine_context_llama_cpp_meta_n_ctx():
    with _context_server((200, {"status": "ok"}), llama_cpp_models("model.gguf", n_ctx=32768)) as fake:
        assert ec.engine_context(EngineClient(fake.url)) == 32768  # no /props: 404
    # with --parallel 4 a slot gets a quarter: the smaller figure is what one request can use
    with _context_server((200, {"status": "ok"}), llama_cpp_models("model.gguf", n_ctx=32768),
                         llama_cpp_props(8192)) as fake:
        assert ec.engine_context(EngineClient(fake.url)) == 8192


def test_engine_context_unknown():
    with _context_server((200, {"status": "ok"}), llama_cpp_models("model.gguf")) as fake:
        assert ec.engine_context(EngineClient(fake.url)) is None
    with _context_server((200, {"ok": True, "context_length": True}), models_list("m")) as fake:
        assert ec.engine_context(EngineClient(fake.url)) is None
