# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Smoke checks of a served model, the ones the upstream recipes use, standard library only.

- arithmetic: "What is 17 * 23?" must be answered with 391;
- needle: passphrases (``passphrase: WORD``) planted at fractional depths of a filler text of a
  chosen token length must all come back, in order;
- determinism: the same greedy request sent by several streams at once gives the same text;
- count: "count from 1 to N" comes back losslessly.

Each ``run_*`` function takes an :class:`engine_client.EngineClient` and returns a dict
``{name, passed, detail, seconds, ...}``; an :class:`EngineError` during a check fails that check
(its message is the detail) instead of raising. The building blocks (passphrase generation, the
needle prompt, the checkers) are usable on their own, for example by the benchmark.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import random
import re
import threading
import time

from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import EngineError

ARITHMETIC_QUESTION = "What is 17 * 23?"
ARITHMETIC_ANSWER = "391"
CHECK_NAMES = ("arithmetic", "needle", "determinism", "count")
DEFAULT_DEPTHS = (0.1, 0.5, 0.9)

# Estimate used when the server has no /tokenize: about 4 characters per token, the usual figure
# for English prose with the BPE tokenizers of current models (DeepSeek's included).
CHARS_PER_TOKEN = 4.0

_ADJECTIVES = (
    "amber", "brisk", "cobalt", "dusky", "ember", "fallow", "gilded", "hollow", "ivory", "jade", "kindled",
    "lunar", "misty", "nimble", "ochre", "pale", "quiet", "russet", "silver", "tawny", "umber", "velvet",
    "woven", "young", "zealous", "copper", "scarlet", "frosted", "hidden", "sunlit",
)
_NOUNS = (
    "falcon", "harbor", "lantern", "meadow", "orchid", "pebble", "quarry", "river", "saddle", "thistle",
    "valley", "willow", "anchor", "beacon", "canyon", "delta", "ember", "fjord", "glacier", "heron",
    "island", "juniper", "kestrel", "lagoon", "marble", "nectar", "otter", "prairie", "summit", "tundra",
)
_VERBS = (
    "follows", "crosses", "watches", "circles", "passes", "reaches", "leaves", "finds", "guards", "joins",
    "shelters", "outlines", "borders", "greets", "echoes",
)
_PLACES = (
    "old mill", "northern ridge", "quiet station", "stone bridge", "harbor wall", "eastern field",
    "market square", "forest edge", "river bend", "lighthouse", "orchard gate", "mountain pass",
)
_TAILS = (
    "before the evening bell", "while the wind turns west", "as the tide comes in", "under a grey sky",
    "long after the rain", "without a sound", "at the first light", "in the late afternoon",
)


# --- small helpers ----------------------------------------------------------------------------
def estimate_tokens(text):
    """Token estimate without a tokenizer: ceil(characters / 4)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _result(name, passed, detail, started, **extra):
    result = {"name": name, "passed": bool(passed), "detail": detail, "seconds": round(time.monotonic() - started, 3)}
    result.update(extra)
    return result


def _short(text, limit=120):
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _stream_problem(stream):
    """A message when a stream did not complete, else None."""
    if stream.error:
        return stream.error
    if stream.status != 200:
        return f"status {stream.status}"
    return None


# --- arithmetic -------------------------------------------------------------------------------
def check_arithmetic_answer(text, expected=ARITHMETIC_ANSWER):
    """(passed, detail): ``expected`` appears in ``text`` as a number of its own (not in 3910 or 1391)."""
    if re.search(r"(?<![\d.])" + re.escape(expected) + r"(?![\d])", text or ""):
        return True, f"answered {_short(text, 80)!r}"
    return False, f"expected {expected} in the answer, got {_short(text, 120)!r}"


def run_arithmetic(client, max_tokens=256, extra=None):
    """Ask "What is 17 * 23?" (streamed, temperature 0); passes when the answer contains 391.

    Also returns ``ttft_s``, ``decode_tok_s`` and ``reply``.
    """
    started = time.monotonic()
    try:
        stream = client.stream_chat([{"role": "user", "content": ARITHMETIC_QUESTION}], max_tokens, 0.0, extra)
    except EngineError as exc:
        return _result("arithmetic", False, str(exc), started, ttft_s=None, decode_tok_s=None, reply=None)
    figures = {"ttft_s": stream.ttft_s, "decode_tok_s": stream.decode_tok_s, "reply": stream.text}
    problem = _stream_problem(stream)
    if problem:
        return _result("arithmetic", False, problem, started, **figures)
    passed, detail = check_arithmetic_answer(stream.text)
    return _result("arithmetic", passed, detail, started, **figures)


# --- passphrases and the needle prompt -------------------------------------------------------
def make_passphrases(count, seed=0):
    """``count`` distinct passphrases like ``amber-falcon-42``, the same for the same seed.

    Each is one whitespace-free word, so it survives any tokenizer and the simple parsers of the
    lab engine.
    """
    rng = random.Random(f"sparkfold-passphrases-{seed}")
    seen = []
    while len(seen) < count:
        word = f"{rng.choice(_ADJECTIVES)}-{rng.choice(_NOUNS)}-{rng.randint(10, 99)}"
        if word not in seen:
            seen.append(word)
    return seen


class FillerText:
    """An endless, deterministic supply of plain filler sentences (no digits, no passphrases)."""

    def __init__(self, seed=0):
        self.rng = random.Random(f"sparkfold-filler-{seed}")
        self.words = []
        self.ends = []  # word counts at which a sentence ends

    def _sentence(self):
        rng = self.rng
        return (
            f"The {rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)} {rng.choice(_VERBS)} the "
            f"{rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)} near the {rng.choice(_PLACES)} {rng.choice(_TAILS)}."
        )

    def take(self, n):
        """The first ``n`` words (a list), generating more sentences when needed."""
        while len(self.words) < n:
            self.words.extend(self._sentence().split())
            self.ends.append(len(self.words))
        return self.words[:n]

    def boundary(self, position):
        """The sentence end closest to word ``position`` (0 for the very start)."""
        if position <= 0 or not self.ends:
            return 0
        i = bisect.bisect_left(self.ends, position)
        candidates = [0] + [self.ends[j] for j in (i - 1, i) if 0 <= j < len(self.ends)]
        return min(candidates, key=lambda end: (abs(end - position), end))


NEEDLE_INTRO = (
    "Below is a long text. A few of its sentences each hold a passphrase. Read all of it; a question "
    "follows at the end.\n\n"
)
NEEDLE_QUESTION = (
    "\n\nQuestion: which passphrases does the text above contain? Reply with every passphrase, "
    "exactly as written, in the order they appear in the text, separated by commas, and nothing else."
)


class NeedlePrompt:
    """A built needle prompt: ``text``, ``tokens`` (as counted), ``target_tokens``, ``passphrases``,
    ``depths`` (asked) and ``positions`` (the filler word each passphrase sentence follows)."""

    def __init__(self, text, tokens, target_tokens, passphrases, depths, positions, filler_words, rounds):
        self.text = text
        self.tokens = tokens
        self.target_tokens = target_tokens
        self.passphrases = list(passphrases)
        self.depths = list(depths)
        self.positions = list(positions)
        self.filler_words = filler_words
        self.rounds = rounds

    @property
    def error(self):
        """Relative difference between the tokens counted and the target."""
        return abs(self.tokens - self.target_tokens) / max(self.target_tokens, 1)


def _assemble(filler, n_words, depths, passphrases):
    words = filler.take(n_words)
    positions = [filler.boundary(round(d * n_words)) for d in depths]
    positions = [min(p, n_words) for p in positions]
    order = sorted(range(len(passphrases)), key=lambda i: (positions[i], i))
    parts = [NEEDLE_INTRO]
    at = 0
    for i in order:
        if positions[i] > at:
            parts.append(" ".join(words[at:positions[i]]))
            at = positions[i]
        parts.append(f"Remember this passphrase: {passphrases[i]}.")
    if at < n_words:
        tail = " ".join(words[at:n_words])
        parts.append(tail if tail.endswith(".") else tail + ".")
    text = " ".join(p for p in parts[1:] if p)
    return parts[0] + text + NEEDLE_QUESTION, positions


def build_needle_prompt(target_tokens, depths, passphrases, count_tokens, seed=0, tolerance=0.01, max_rounds=8):
    """A prompt of ``target_tokens`` tokens with ``passphrases`` planted at fractional ``depths``.

    The prompt is one user message: an intro, filler sentences with one sentence
    ``Remember this passphrase: WORD.`` per passphrase inserted at the sentence boundary nearest
    to its depth (0.0 = start of the filler, 1.0 = end), then the question.

    ``count_tokens(text) -> int`` counts tokens: the engine's tokenizer (``EngineClient.tokenize``,
    which counts the text without the chat template, a few tokens less than the request's
    ``prompt_tokens``) or :func:`estimate_tokens` when the server has no /tokenize. The filler is
    sized by the secant method on word counts, calling ``count_tokens`` a few times (at most
    ``max_rounds`` + 2), until the count is exactly ``target_tokens``, no word more or less can get
    closer, or the rounds run out; the closest prompt is returned (a :class:`NeedlePrompt`; its
    ``error`` is usually far below ``tolerance``). Raises ValueError on bad input or when the
    question and passphrases alone exceed the target.
    """
    depths = [float(d) for d in depths]
    if len(depths) != len(passphrases):
        raise ValueError(f"{len(passphrases)} passphrases but {len(depths)} depths")
    if any(not 0.0 <= d <= 1.0 for d in depths):
        raise ValueError(f"depths are fractions of the prompt, from 0.0 to 1.0; got {depths}")
    target_tokens = int(target_tokens)
    filler = FillerText(seed)

    def measure(n):
        text, positions = _assemble(filler, n, depths, passphrases)
        return text, positions, int(count_tokens(text))

    text0, pos0, base = measure(0)
    if base > target_tokens:
        raise ValueError(
            f"the question and {len(passphrases)} passphrases alone take {base} tokens, more than the "
            f"target of {target_tokens}"
        )
    best = (abs(base - target_tokens), 0, text0, pos0, base)
    rounds = 1
    if base < target_tokens:
        # Rate of tokens per filler word, from a sample of the filler.
        sample = 2000
        rate = max(count_tokens(" ".join(filler.take(sample))) / sample, 1e-3)
        rounds += 1
        prev = (0, base)
        tried = {0}
        n = max(1, round((target_tokens - base) / rate))
        for _round in range(max_rounds):
            text, positions, tokens = measure(n)
            tried.add(n)
            rounds += 1
            if abs(tokens - target_tokens) < best[0]:
                best = (abs(tokens - target_tokens), n, text, positions, tokens)
            if tokens == target_tokens:
                break
            if n != prev[0] and tokens != prev[1]:
                rate = min(max((tokens - prev[1]) / (n - prev[0]), 0.05), 20.0)
            next_n = max(0, n + round((target_tokens - tokens) / rate))
            if next_n in tried:
                break  # less than one word away, or oscillating between two counts: the closest is kept
            prev = (n, tokens)
            n = next_n
    _diff, n_best, text, positions, tokens = best
    return NeedlePrompt(text, tokens, target_tokens, passphrases, depths, positions, n_best, rounds)


def check_passphrases(reply, passphrases):
    """(passed, detail): every passphrase appears in ``reply`` and they appear in order."""
    low = (reply or "").lower()
    found = []
    missing = []
    for word in passphrases:
        at = low.find(word.lower())
        if at < 0:
            missing.append(word)
        else:
            found.append((at, word))
    if missing:
        return False, (f"{len(passphrases) - len(missing)} of {len(passphrases)} passphrases returned; missing "
                       f"{', '.join(missing)}; reply {_short(reply)!r}")
    order = [word for _at, word in sorted(found)]
    if order != list(passphrases):
        return False, (f"all {len(passphrases)} passphrases returned but out of order: expected "
                       f"{', '.join(passphrases)}, got {', '.join(order)}")
    return True, f"all {len(passphrases)} passphrases returned in order"


def depths_for(count, depths=None):
    """The depths to use: ``depths`` when given (its length must be ``count``), else evenly 0.1..0.9."""
    if depths:
        if count is not None and len(depths) != count:
            raise ValueError(f"needle_count is {count} but needle_depths has {len(depths)} entries")
        return [float(d) for d in depths]
    if count is None:
        return list(DEFAULT_DEPTHS)
    if count == 1:
        return [0.5]
    return [round(0.1 + 0.8 * i / (count - 1), 4) for i in range(count)]


def run_needle(client, target_tokens, depths, count=None, seed=0, use_tokenize=True, max_tokens=256,
               context=None, extra=None):
    """The needle test: plant passphrases, ask for them, check they all come back in order.

    ``use_tokenize``: count tokens with the server's /tokenize (falling back to the estimate when it
    has none); False: always the estimate. ``context``: the engine's context length when known, to
    refuse a prompt that cannot fit before sending it. Returns also ``prompt_tokens`` (as counted),
    ``token_source`` ("tokenize" or "estimate"), ``passphrases`` and ``reply``.
    """
    started = time.monotonic()
    figures = {"prompt_tokens": None, "token_source": None, "passphrases": [], "reply": None}
    try:
        depths = depths_for(count, depths)
        passphrases = make_passphrases(len(depths), seed)
        figures["passphrases"] = passphrases
        counter, source = estimate_tokens, "estimate"
        if use_tokenize and client.tokenize("probe") is not None:
            counter, source = client.tokenize, "tokenize"
        figures["token_source"] = source
        if context and target_tokens + max_tokens > context:
            return _result(
                "needle", False,
                f"a {target_tokens}-token prompt plus a {max_tokens}-token reply does not fit the engine's context "
                f"of {context} tokens; lower needle_tokens or raise the engine's context", started, **figures)
        prompt = build_needle_prompt(target_tokens, depths, passphrases, counter, seed=seed)
        figures["prompt_tokens"] = prompt.tokens
        stream = client.stream_chat([{"role": "user", "content": prompt.text}], max_tokens, 0.0, extra)
    except ValueError as exc:
        return _result("needle", False, str(exc), started, **figures)
    except EngineError as exc:
        return _result("needle", False, str(exc), started, **figures)
    figures["reply"] = stream.text
    problem = _stream_problem(stream)
    if problem:
        return _result("needle", False, problem, started, **figures)
    passed, detail = check_passphrases(stream.text, passphrases)
    size = f"{prompt.tokens}-token prompt ({source}), depths {', '.join(f'{d:g}' for d in depths)}"
    if prompt.error > 0.01:
        size += f", {prompt.error:.1%} off the {target_tokens} asked"
    return _result("needle", passed, f"{detail}; {size}", started, **figures)


# --- determinism ------------------------------------------------------------------------------
DETERMINISM_PROMPT = (
    "Write a short paragraph about lighthouses: who keeps them, how their lamps turn, and why ships need them."
)


def concurrent_streams(client, messages, streams, max_tokens, extra=None, deadline=None):
    """Send the same chat request on ``streams`` threads at once; a list of StreamResult or EngineError."""
    results = [None] * streams
    barrier = threading.Barrier(streams)

    def one(i):
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=client.timeout)
        try:
            results[i] = client.stream_chat(messages, max_tokens, 0.0, extra, deadline=deadline)
        except EngineError as exc:
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,), name=f"engine-stream-{i}", daemon=True) for i in range(streams)]
    for t in threads:
        t.start()
    limit = None if deadline is None else deadline + client.timeout + 5
    for t in threads:
        t.join(limit)
    return [r if r is not None else EngineError("the stream did not finish in time", "timeout") for r in results]


def compare_texts(texts):
    """(passed, detail): all ``texts`` equal; else where the first different one departs from text 0."""
    first = texts[0]
    for i, text in enumerate(texts[1:], start=1):
        if text != first:
            at = next((k for k, (a, b) in enumerate(zip(first, text)) if a != b), min(len(first), len(text)))
            return False, (f"stream {i} differs from stream 0 at character {at}: "
                           f"{_short(first[at:at + 40], 40)!r} vs {_short(text[at:at + 40], 40)!r}")
    return True, f"{len(texts)} concurrent greedy streams gave the same {len(first.split())}-word text"


def run_determinism(client, streams=4, max_tokens=64, prompt=DETERMINISM_PROMPT, extra=None):
    """``streams`` identical greedy requests at once; passes when every text is the same (and not empty)."""
    started = time.monotonic()
    results = concurrent_streams(client, [{"role": "user", "content": prompt}], streams, max_tokens, extra)
    problems = []
    for i, r in enumerate(results):
        if isinstance(r, EngineError):
            problems.append(f"stream {i}: {r}")
        elif _stream_problem(r):
            problems.append(f"stream {i}: {_stream_problem(r)}")
    if problems:
        return _result("determinism", False, "; ".join(problems), started, texts=[])
    texts = [r.text for r in results]
    if not texts[0].strip():
        return _result("determinism", False, "the replies are empty", started, texts=texts)
    passed, detail = compare_texts(texts)
    return _result("determinism", passed, detail, started, texts=texts)


# --- count ------------------------------------------------------------------------------------
def check_count(text, upto):
    """(passed, detail): the numbers in ``text`` are exactly 1..upto, in order."""
    numbers = [int(n) for n in re.findall(r"\d+", text or "")]
    expected = list(range(1, upto + 1))
    if numbers == expected:
        return True, f"counted 1 to {upto} without a gap"
    at = next((i for i, (a, b) in enumerate(zip(numbers, expected)) if a != b), min(len(numbers), upto))
    got = numbers[at] if at < len(numbers) else "the end of the reply"
    return False, f"{len(numbers)} numbers; the first wrong one is at position {at + 1}: expected {at + 1}, got {got}"


def run_count(client, upto=200, max_tokens=None, extra=None):
    """Ask to "count from 1 to <upto>"; passes when the reply is every number, in order."""
    started = time.monotonic()
    max_tokens = max_tokens or upto * 4 + 64
    question = f"Please count from 1 to {upto}, numbers separated by single spaces, and nothing else."
    try:
        stream = client.stream_chat([{"role": "user", "content": question}], max_tokens, 0.0, extra)
    except EngineError as exc:
        return _result("count", False, str(exc), started)
    problem = _stream_problem(stream)
    if problem:
        return _result("count", False, problem, started)
    passed, detail = check_count(stream.text, upto)
    return _result("count", passed, detail, started)


# --- report -----------------------------------------------------------------------------------
def table_lines(checks, detail_width=90):
    """A short fixed-width table of ``checks`` ({name, passed, detail, seconds}) as a list of lines."""
    width = max([len("check")] + [len(c["name"]) for c in checks])
    lines = [f"{'check':<{width}}  result  seconds  detail"]
    for c in checks:
        detail = _short(c.get("detail") or "", detail_width)
        mark = "PASS" if c["passed"] else "FAIL"
        lines.append(f"{c['name']:<{width}}  {mark:<6}  {c.get('seconds') or 0:7.2f}  {detail}")
    return lines


def _positive_int(value):
    """``value`` when it is a whole number > 0 (not a bool), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def engine_context(client):
    """The context length the engine serves, in tokens; None when it does not say.

    Read, in this order, from:

    - /health ``context_length``: TensorFold ("`context_length` is the served window", ashhart/TensorFold
      docs/api.md @01ecc8d); with API keys on its /health is only ``{"status": "ok"}``;
    - /v1/models ``data[].max_model_len``: TensorFold and vLLM;
    - llama.cpp: /v1/models ``data[].meta.n_ctx`` (some builds; never ``n_ctx_train``, the trained window)
      and /props ``default_generation_settings.n_ctx`` (one slot's window: with ``--parallel`` each slot
      gets a share of the context); when both answer, the smaller, since one request runs in one slot.

    Only the entry of ``client.model`` counts when the client has one. Raises EngineError when the engine
    does not answer /health or /v1/models at all.
    """
    resp = client.health()
    if resp.status == 200 and isinstance(resp.json, dict) and _positive_int(resp.json.get("context_length")):
        return resp.json["context_length"]
    resp = client.request("GET", "/v1/models")
    data = resp.json.get("data") if resp.status == 200 and isinstance(resp.json, dict) else None
    n_ctx = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict) or (client.model is not None and item.get("id") != client.model):
            continue
        if _positive_int(item.get("max_model_len")):
            return item["max_model_len"]
        meta = item.get("meta")
        if isinstance(meta, dict) and _positive_int(meta.get("n_ctx")):
            n_ctx.append(meta["n_ctx"])
    try:
        resp = client.request("GET", "/props")
    except EngineError:
        resp = None
    if resp is not None and resp.status == 200 and isinstance(resp.json, dict):
        settings = resp.json.get("default_generation_settings")
        if isinstance(settings, dict) and _positive_int(settings.get("n_ctx")):
            n_ctx.append(settings["n_ctx"])
    return min(n_ctx) if n_ctx else None
