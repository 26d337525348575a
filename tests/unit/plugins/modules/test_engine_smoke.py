# SPDX-License-Identifier: GPL-3.0-or-later
"""engine_smoke (run in-process) against the lab engine (a TensorFold simulator) and fakes that answer wrong."""

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import engine_smoke

from tests.labengine import Cluster, free_port
from tests.unit.fake_openai import FakeEngine, chat_chunks, models_list, thinking_chat
from tests.unit.module_runner import module_runner


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, engine_smoke.main)


@pytest.fixture(scope="module")
def pair(engine_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("smoke-pair")
    (tmp / "key").write_text("lab-key\n")
    c = Cluster(engine_bin, tmp, context=20000, extra_args=["--api-key-file", str(tmp / "key")],
                env={"SIM_PREFILL_TOK_S": "100000", "SIM_DECODE_TOK_S": "500"}).start()
    yield c
    c.stop()


def args(pair, **extra):
    result = {"url": f"http://127.0.0.1:{pair.port}", "api_key": "lab-key", "served_name": "dsv41-sim",
              "needle_tokens": 8000, "timeout": 20}
    result.update(extra)
    return result


def test_all_checks_pass_on_the_pair(run, pair):
    all_checks = ["arithmetic", "needle", "determinism", "count"]
    kind, result, _warnings = run(args(pair, checks=all_checks, _ansible_check_mode=True))
    assert kind == "exit", result.get("msg")
    assert result["passed"] and result["changed"] is False
    assert [c["name"] for c in result["checks"]] == ["arithmetic", "needle", "determinism", "count"]
    assert all(c["passed"] and c["seconds"] >= 0 for c in result["checks"])
    assert result["table_lines"][0].split() == ["check", "result", "seconds", "detail"]
    assert result["table"] == "\n".join(result["table_lines"])
    # one row per check; a long detail continues on lines under the detail column
    assert [line.split()[1] for line in result["table_lines"][1:] if not line.startswith(" ")] == ["PASS"] * 4
    assert max(len(line) for line in result["table_lines"]) <= 92
    assert result["needle"]["token_source"] == "tokenize" and abs(result["needle"]["prompt_tokens"] - 8000) <= 80
    assert result["context_length"] == 20000 and result["ttft_s"] > 0
    assert "lab-key" not in str({k: v for k, v in result.items() if k != "invocation"})


def test_needle_that_cannot_fit_fails_with_the_table(run, pair):
    kind, result, _warnings = run(args(pair, checks=["arithmetic", "needle"], needle_tokens=30000))
    assert kind == "fail" and not result["passed"]
    assert "1 of 2 checks failed (needle)" in result["msg"]
    rows = [line.split()[:2] for line in result["msg"].splitlines()[2:4]]
    assert rows == [["arithmetic", "PASS"], ["needle", "FAIL"]]
    assert "does not fit the engine's context of 20000 tokens" in result["msg"]


def test_bad_options(run, pair):
    kind, result, _warnings = run(args(pair, needle_depths=[0.2, 1.5], needle_count=3, determinism_streams=1))
    assert kind == "fail"
    assert "needle_depths has 2 entries but needle_count is 3" in result["msg"]
    assert "needle_depths are fractions from 0.0 to 1.0, got [1.5]" in result["msg"]
    assert "determinism_streams must be at least 2" in result["msg"]


def test_engine_down(run):
    kind, result, _warnings = run({"url": f"http://127.0.0.1:{free_port()}"})
    assert kind == "fail" and "does not answer (connection refused" in result["msg"]
    assert "engine_health" in result["msg"]


def test_fake_engine_wrong_order_and_nondeterminism(run):
    def chat(body, n):
        text = body["messages"][-1]["content"]
        if "passphrase" in text:
            words = [w.split()[0].rstrip(".") for w in text.split("passphrase: ")[1:]]
            return 200, chat_chunks(", ".join(reversed(words)))
        return 200, chat_chunks(f"reply number {n}")

    with FakeEngine() as fake:
        fake.route("GET", "/health", lambda body, n: (200, ""))
        fake.route("GET", "/v1/models", lambda body, n: (200, models_list("m")))
        fake.route("POST", "/v1/chat/completions", chat)
        kind, result, _warnings = run({"url": fake.url, "checks": ["needle", "determinism"], "needle_tokens": 2000,
                                       "needle_depths": [0.3, 0.6], "needle_count": 2})
    assert kind == "fail"
    by_name = {c["name"]: c for c in result["checks"]}
    assert not by_name["needle"]["passed"] and "out of order" in by_name["needle"]["detail"]
    assert "(estimate)" in by_name["needle"]["detail"]  # the fake has no /tokenize
    assert not by_name["determinism"]["passed"] and "differs from stream 0" in by_name["determinism"]["detail"]
    assert "2 of 2 checks failed (needle, determinism)" in result["msg"]


def sglang_reply(body):
    """What the SGLang ring's model answers once it stops thinking: the smoke's sum, passphrases in order, counting."""
    text = body["messages"][-1]["content"]
    if "passphrase" in text:
        return ", ".join(w.split()[0].rstrip(".") for w in text.split("passphrase: ")[1:])
    if "19 + 23" in text:
        return "42"
    if "count from 1 to" in text:
        return " ".join(str(i) for i in range(1, 21))
    return "Lighthouse keepers trim the wick and wind the clockwork that turns the lens."


def test_a_thinking_engine_passes_every_check_with_the_recipe_switch(run):
    # The SGLang ring recipe: thinking on by default and switched off per request with chat_template_kwargs
    # {thinking: false} (MiaAI start.sh @e098520 cmd_smoke, boot.py smoke()); 300 words of thinking otherwise.
    thinking = " ".join(["First I restate the question and consider it carefully."] * 30)
    chat = thinking_chat(sglang_reply, thinking, switch="thinking")
    with FakeEngine() as fake:
        fake.route("GET", "/health", lambda body, n: (200, ""))
        fake.route("GET", "/v1/models", lambda body, n: (200, models_list("deepseek-v4.1-flash")))
        fake.route("POST", "/v1/chat/completions", chat)
        asked = {"url": fake.url, "served_name": "deepseek-v4.1-flash", "needle_tokens": 2000, "count_to": 20,
                 "checks": ["arithmetic", "needle", "determinism", "count"],
                 "arithmetic_question": "What is 19 + 23? Reply only with the number.", "arithmetic_answer": "42"}
        kind, result, _warnings = run(dict(asked, chat_fields={"chat_template_kwargs": {"thinking": False}}))
        switched = [c[2] for c in fake.calls if c[1] == "/v1/chat/completions"]
        kind_on, thought, _warnings = run(asked)
    assert kind == "exit", result["msg"]
    assert [c["name"] for c in result["checks"] if c["passed"]] == ["arithmetic", "needle", "determinism", "count"]
    assert all(b["chat_template_kwargs"] == {"thinking": False} for b in switched) and len(switched) == 1 + 1 + 4 + 1
    assert switched[0]["messages"][0]["content"] == "What is 19 + 23? Reply only with the number."
    # left thinking, every reply is cut inside the thinking: the arithmetic, needle and count checks fail on it
    # (determinism compares the thinking, which is the same text on every stream)
    assert kind_on == "fail"
    failed = {c["name"]: c["detail"] for c in thought["checks"] if not c["passed"]}
    assert sorted(failed) == ["arithmetic", "count", "needle"]
    assert failed["arithmetic"].startswith("expected 42 in the answer, got '' after thinking 'First I restate")


def test_chat_fields_and_the_question_are_checked_before_anything_is_sent(run):
    kind, result, _warnings = run({"url": "http://127.0.0.1:1", "chat_fields": {"stream": False},
                                   "arithmetic_answer": " "})
    assert kind == "fail"
    assert result["msg"] == ("chat_fields may not set stream: the checks set them themselves; arithmetic_answer is "
                             "empty: give the recipe's smoke prompt and the answer it must hold")
