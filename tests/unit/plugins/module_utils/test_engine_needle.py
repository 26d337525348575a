# SPDX-License-Identifier: GPL-3.0-or-later
"""engine_needle: passphrases, the needle prompt sized to a token count (with the lab engine's tokenizer and
others), the reply's check, and the Needle that the smoke checks and the benchmark both run."""

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import engine_needle as en
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import EngineClient

from tests.labengine import Cluster
from tests.unit.fake_openai import FakeEngine, chat_chunks


@pytest.fixture(scope="module")
def cluster(engine_bin, tmp_path_factory):
    c = Cluster(engine_bin, tmp_path_factory.mktemp("needle-cluster"), context=40000,
                env={"SIM_PREFILL_TOK_S": "200000", "SIM_DECODE_TOK_S": "400"}).start()
    yield c
    c.stop()


@pytest.fixture
def client(cluster):
    return EngineClient(f"http://127.0.0.1:{cluster.port}", model="dsv41-sim", timeout=10)


def test_passphrases_are_seeded_distinct_single_words():
    a = en.make_passphrases(5, seed=3)
    assert a == en.make_passphrases(5, seed=3) and a != en.make_passphrases(5, seed=4)
    assert len(set(a)) == 5 and all(" " not in w for w in a)


@pytest.mark.parametrize("target", [600, 5000, 30000])
def test_needle_prompt_has_the_token_count_asked_with_the_engine_tokenizer(client, target):
    words = en.make_passphrases(3, seed=1)
    prompt = en.build_needle_prompt(target, [0.1, 0.5, 0.9], words, client.tokenize, seed=1)
    assert abs(prompt.tokens - target) <= target * 0.01
    assert client.tokenize(prompt.text) == prompt.tokens
    at = [prompt.text.index(f"passphrase: {w}.") for w in words]
    assert at == sorted(at)
    # depths are fractions of the filler: 0.1 lies in the first fifth, 0.9 in the last fifth
    assert at[0] < len(prompt.text) * 0.2 and at[2] > len(prompt.text) * 0.8
    assert prompt.rounds <= 10


@pytest.mark.parametrize("tokens_per_word", [1.0, 1.37, 2.6])
def test_needle_prompt_with_other_tokenizers(tokens_per_word):
    def count(text):
        return int(len(text.split()) * tokens_per_word + text.count(".") * 0.4)

    for target in (1000, 32768):
        prompt = en.build_needle_prompt(target, [0.25, 0.75], ["alpha-one-11", "beta-two-22"], count)
        assert abs(prompt.tokens - target) <= target * 0.01, (target, prompt.tokens)


def test_needle_prompt_estimate_and_bad_input():
    prompt = en.build_needle_prompt(2000, [0.5], ["amber-falcon-42"], en.estimate_tokens)
    assert abs(en.estimate_tokens(prompt.text) - 2000) <= 20
    with pytest.raises(ValueError, match="2 depths"):
        en.build_needle_prompt(2000, [0.1, 0.2], ["a-b-1"], en.estimate_tokens)
    with pytest.raises(ValueError, match="more than the target"):
        en.build_needle_prompt(10, [0.5], ["a-b-1"], en.estimate_tokens)


def test_check_passphrases():
    words = ["amber-falcon-42", "quiet-otter-26", "jade-river-17"]
    assert en.check_passphrases("The passphrases are: amber-falcon-42, quiet-otter-26, jade-river-17.", words)[0]
    ok, detail = en.check_passphrases("quiet-otter-26, amber-falcon-42, jade-river-17", words)
    assert not ok and "out of order" in detail
    ok, detail = en.check_passphrases("amber-falcon-42, jade-river-17", words)
    assert not ok and "2 of 3" in detail and "missing quiet-otter-26" in detail


def test_depths_for():
    assert en.depths_for(3) == [0.1, 0.5, 0.9] and en.depths_for(1) == [0.5]
    assert en.depths_for(None) == [0.1, 0.5, 0.9] and en.depths_for(2, [0.2, 0.8]) == [0.2, 0.8]
    with pytest.raises(ValueError, match="needle_count is 2 but needle_depths has 1 entries"):
        en.depths_for(2, [0.5])


def test_needle_fit_names_the_option_to_lower():
    needle = en.Needle(50000, 3, seed=2)
    assert needle.depths == [0.1, 0.5, 0.9] and needle.passphrases == en.make_passphrases(3, 2)
    needle.fit(256, None)  # context unknown: nothing to refuse
    needle.fit(256, 50256)
    with pytest.raises(ValueError) as err:
        needle.fit(256, 40000)
    assert str(err.value) == ("a 50000-token prompt plus a 256-token reply does not fit the engine's context of "
                              "40000 tokens; lower needle_tokens or raise the engine's context")
    with pytest.raises(ValueError, match="needle_count is 3 but needle_depths has 1 entries"):
        en.Needle(1000, 3, [0.5])


def test_needle_asks_one_greedy_user_message_and_checks_the_reply():
    needle = en.Needle(1500, 2, seed=4)
    prompt = needle.build(en.estimate_tokens)
    assert prompt is needle.prompt and abs(prompt.tokens - 1500) <= 15
    with FakeEngine() as fake:
        fake.route("POST", "/v1/chat/completions", lambda body, n: (200, chat_chunks(", ".join(needle.passphrases))))
        reply = needle.ask(EngineClient(fake.url, model="m"), 64, {"top_p": 0.5}, deadline=30)
    body = fake.calls[0][2]
    assert body["messages"] == [{"role": "user", "content": prompt.text}]
    assert body["model"] == "m" and body["temperature"] == 0.0 and body["max_tokens"] == 64 and body["top_p"] == 0.5
    assert needle.check(reply.text) == (True, "all 2 passphrases returned in order")
    assert not needle.check(", ".join(reversed(needle.passphrases)))[0]
