# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Smoke checks of a served model, the ones the upstream recipes use, standard library only.

- arithmetic: "What is 17 * 23?" must be answered with 391 (or the recipe's own question and answer);
- needle: passphrases (``passphrase: WORD``) planted at fractional depths of a filler text of a
  chosen token length must all come back, in order (its parts: engine_needle);
- determinism: the same greedy request sent by several streams at once gives the same text;
- count: "count from 1 to N" comes back losslessly.

Each ``run_*`` function takes an :class:`engine_client.EngineClient` and returns a dict
``{name, passed, detail, seconds, ...}``; an :class:`EngineError` during a check fails that check
(its message is the detail) instead of raising. ``extra`` is merged into every request body: the
recipe's chat settings, such as the switch that turns thinking off (``chat_template_kwargs``).
:func:`engine_context` reads the context length the engine serves, for the smoke test and the
benchmark alike.

A reply is read where the engine puts it: its content, and the thinking a reasoning parser splits off
(``reasoning_content`` in vLLM's and SGLang's chat deltas, vLLM's later ``reasoning``: engine_stream),
so a healthy engine whose reply ended while it was still thinking is not failed for it.
"""

from __future__ import annotations

import re
import textwrap
import time

from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_errors import EngineError, shorten
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_needle import Needle, estimate_tokens
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_stream import together

ARITHMETIC_QUESTION = "What is 17 * 23?"
ARITHMETIC_ANSWER = "391"
CHECK_NAMES = ("arithmetic", "needle", "determinism", "count")


# The body fields the checks set themselves (engine_client): chat_fields may not replace them.
OWN_FIELDS = ("messages", "prompt", "model", "max_tokens", "temperature", "stream", "stream_options")


def chat_fields_problems(fields):
    """Problems of ``fields`` (the recipe's chat settings merged into every request body), as sentences."""
    taken = sorted(k for k in fields or {} if k in OWN_FIELDS)
    if taken:
        return [f"chat_fields may not set {', '.join(taken)}: the checks set them themselves"]
    return []


def _result(name, passed, detail, started, **extra):
    result = {"name": name, "passed": bool(passed), "detail": detail, "seconds": round(time.monotonic() - started, 3)}
    result.update(extra)
    return result


def _stream_problem(stream):
    """A message when a stream did not complete, else None."""
    if stream.error:
        return stream.error
    if stream.status != 200:
        return f"status {stream.status}"
    return None


# --- arithmetic -------------------------------------------------------------------------------
def _holds(expected, text):
    """``expected`` appears in ``text`` as a number of its own (not in 3910 or 1391)."""
    return re.search(r"(?<![\d.])" + re.escape(expected) + r"(?![\d])", text or "") is not None


def check_arithmetic_answer(text, expected=ARITHMETIC_ANSWER, reasoning=""):
    """(passed, detail): ``expected`` appears in the answer ``text``, or else in the thinking ``reasoning`` (a
    reply whose tokens ran out while the engine was still thinking), as a number of its own."""
    if _holds(expected, text):
        return True, f"answered {shorten(text, 80)!r}"
    if _holds(expected, reasoning):
        return True, (f"{expected} in the thinking (reasoning content), the answer itself "
                      f"{shorten(text, 40)!r}: {shorten(reasoning, 80)!r}")
    got = f"expected {expected} in the answer, got {shorten(text, 120)!r}"
    if reasoning:
        got += f" after thinking {shorten(reasoning, 80)!r}"
    return False, got


def reply_text(stream):
    """What a reply says: its content, or its thinking (reasoning content) when the content is empty."""
    return stream.text if stream.text.strip() else stream.reasoning


def run_arithmetic(client, max_tokens=256, extra=None, question=ARITHMETIC_QUESTION, answer=ARITHMETIC_ANSWER):
    """Ask ``question`` (streamed, temperature 0, ``extra`` in the body); passes when the reply holds ``answer``.

    Also returns ``ttft_s``, ``decode_tok_s`` and ``reply``.
    """
    started = time.monotonic()
    try:
        stream = client.ask(question, max_tokens, 0.0, extra)
    except EngineError as exc:
        return _result("arithmetic", False, str(exc), started, ttft_s=None, decode_tok_s=None, reply=None)
    figures = {"ttft_s": stream.ttft_s, "decode_tok_s": stream.decode_tok_s, "reply": reply_text(stream)}
    problem = _stream_problem(stream)
    if problem:
        return _result("arithmetic", False, problem, started, **figures)
    passed, detail = check_arithmetic_answer(stream.text, answer, stream.reasoning)
    return _result("arithmetic", passed, detail, started, **figures)


# --- needle (its parts: engine_needle) ----------------------------------------------------------
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
        needle = Needle(target_tokens, count, depths, seed)
        figures["passphrases"] = needle.passphrases
        counter, source = estimate_tokens, "estimate"
        if use_tokenize and client.tokenize("probe") is not None:
            counter, source = client.tokenize, "tokenize"
        figures["token_source"] = source
        needle.fit(max_tokens, context)
        prompt = needle.build(counter)
        figures["prompt_tokens"] = prompt.tokens
        stream = needle.ask(client, max_tokens, extra)
    except (ValueError, EngineError) as exc:
        return _result("needle", False, str(exc), started, **figures)
    figures["reply"] = reply_text(stream)
    problem = _stream_problem(stream)
    if problem:
        return _result("needle", False, problem, started, **figures)
    passed, detail = needle.check(figures["reply"])
    size = f"{prompt.tokens}-token prompt ({source}), depths {', '.join(f'{d:g}' for d in needle.depths)}"
    if prompt.error > 0.01:
        size += f", {prompt.error:.1%} off the {target_tokens} asked"
    return _result("needle", passed, f"{detail}; {size}", started, **figures)


# --- determinism ------------------------------------------------------------------------------
DETERMINISM_PROMPT = (
    "Write a short paragraph about lighthouses: who keeps them, how their lamps turn, and why ships need them."
)


def concurrent_streams(client, messages, streams, max_tokens, extra=None, deadline=None):
    """Send the same chat request on ``streams`` threads at once; a list of StreamResult or EngineError.

    A stream still running ``deadline`` + the client's timeout + 5 s after the start is an EngineError.
    """

    def one(_i):
        try:
            return client.stream_chat(messages, max_tokens, 0.0, extra, deadline=deadline)
        except EngineError as exc:
            return exc

    limit = None if deadline is None else deadline + client.timeout + 5
    results, _t0 = together(streams, one, client.timeout, limit)
    return [r if r is not None else EngineError("the stream did not finish in time", "timeout") for r in results]


def compare_texts(texts):
    """(passed, detail): all ``texts`` equal; else where the first different one departs from text 0."""
    first = texts[0]
    for i, text in enumerate(texts[1:], start=1):
        if text != first:
            at = next((k for k, (a, b) in enumerate(zip(first, text)) if a != b), min(len(first), len(text)))
            return False, (f"stream {i} differs from stream 0 at character {at}: "
                           f"{shorten(first[at:at + 40], 40)!r} vs {shorten(text[at:at + 40], 40)!r}")
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
    texts = [reply_text(r) for r in results]
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
        stream = client.ask(question, max_tokens, 0.0, extra)
    except EngineError as exc:
        return _result("count", False, str(exc), started)
    problem = _stream_problem(stream)
    if problem:
        return _result("count", False, problem, started)
    passed, detail = check_count(reply_text(stream), upto)
    return _result("count", passed, detail, started)


# --- report -----------------------------------------------------------------------------------
# The widest line of the smoke table: Ansible's default callback (result_format yaml) prints a multi-line msg
# 8 columns in, so every line fits a terminal of 100 columns.
TABLE_WIDTH = 92


def table_lines(checks, width=TABLE_WIDTH, detail_max=400):
    """A short fixed-width table of ``checks`` ({name, passed, detail, seconds}) as a list of lines of at most
    ``width`` columns: a long detail (cut at ``detail_max`` characters) wraps under the detail column."""
    name_width = max([len("check")] + [len(c["name"]) for c in checks])
    lead = " " * (name_width + 19)
    lines = [f"{'check':<{name_width}}  result  seconds  detail"]
    for c in checks:
        detail = shorten(c.get("detail") or "", detail_max)
        mark = "PASS" if c["passed"] else "FAIL"
        first = f"{c['name']:<{name_width}}  {mark:<6}  {c.get('seconds') or 0:7.2f}  "
        lines.extend(textwrap.wrap(detail, width, initial_indent=first, subsequent_indent=lead,
                                   break_on_hyphens=False) or [first.rstrip()])
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
