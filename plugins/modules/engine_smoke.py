#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_smoke
short_description: Smoke-test a served model (arithmetic, needle in a long prompt, determinism, counting)
version_added: "0.1.0"
description:
  - Runs the smoke checks the upstream recipes use against an OpenAI-compatible engine (TensorFold, vLLM,
    llama.cpp), one after the other, each with streamed requests at temperature 0.
  - V(arithmetic) asks O(arithmetic_question) (by default C(What is 17 * 23?)) and expects O(arithmetic_answer)
    (391) in the answer, as a number of its own.
  - >-
    Every request carries O(chat_fields), the recipe's chat settings: the switch that turns thinking off the way
    the recipe's own smoke request does (vLLM C({"chat_template_kwargs": {"enable_thinking": false}}), SGLang
    C({"chat_template_kwargs": {"thinking": false}})). A reply is read where the engine puts it: its content and,
    when the content is empty or lacks the answer, the thinking a reasoning parser splits off
    (C(reasoning_content) in vLLM's and SGLang's chat deltas, C(reasoning) in later vLLM), so a healthy engine
    whose reply ended while it was still thinking is not failed.
  - >-
    V(needle) plants O(needle_count) passphrases (sentences C(Remember this passphrase: WORD.)) at the fractional
    depths O(needle_depths) of a filler text of O(needle_tokens) tokens and asks for them; every passphrase
    must come back, in order. The prompt is sized with the engine's C(/tokenize) when it has one (the count of the
    message text, without the chat template), else with an estimate of 4 characters per token; the detail says
    which. A prompt that cannot fit the engine's context (C(/health) C(context_length), C(/v1/models)
    C(max_model_len), or llama.cpp's C(meta.n_ctx) and C(/props) C(default_generation_settings.n_ctx)) fails the
    check before it is sent.
  - V(determinism) sends the same greedy request on O(determinism_streams) streams at once; every reply must be
    the same text.
  - V(count) asks to count from 1 to O(count_to) and expects every number, in order.
  - Returns every check with whether it passed, what was seen and how long it took, and a short pass/fail table.
    Fails when any check fails, with the table in the message. A check that breaks (timeout, error status,
    error event mid-stream) fails with that reason; the other checks still run.
  - >-
    Expects a ready engine: wait for it with M(sparkfold.cluster.engine_health) first.
  - Needs nothing beyond the Python standard library, so it runs with the system C(python3) of the node.
  - Read-only; never reports a change.
author:
  - sparkfold developers (@sparkfold)
options:
  served_name:
    description:
      - The model id sent as C(model) in every request (TensorFold's C(--name)). Left out of the requests when
        empty.
    type: str
  checks:
    description:
      - The checks to run, in this order.
    type: list
    elements: str
    choices: [arithmetic, needle, determinism, count]
    default: [arithmetic, needle, determinism]
  timeout:
    description:
      - Seconds each request may wait for a byte (connect, the first token after prefill, each later chunk).
        A long needle prompt needs its whole prefill within this (about 15 s for 32768 tokens at 2,150 tok/s).
    type: float
    default: 300.0
  arithmetic_question:
    description:
      - The question V(arithmetic) asks (the recipe's C(smoke.prompt)).
    type: str
    default: What is 17 * 23?
  arithmetic_answer:
    description:
      - The number the V(arithmetic) reply must hold (the recipe's C(smoke.answer)).
    type: str
    default: "391"
  chat_fields:
    description:
      - >-
        Fields merged into the body of every request the checks send (the recipe's C(smoke.chat_template_kwargs)
        goes here as C({"chat_template_kwargs": ...})). They cannot replace the fields the checks set themselves
        (C(messages), C(max_tokens), C(temperature), C(stream), C(stream_options), C(model)).
    type: dict
    default: {}
  reply_tokens:
    description:
      - Most tokens the replies of V(arithmetic) and V(needle) may have. Leave room for thinking when the engine
        thinks first.
    type: int
    default: 256
  needle_tokens:
    description:
      - Length of the needle prompt in tokens. It and O(reply_tokens) must fit the engine's context.
    type: int
    default: 32768
  needle_count:
    description:
      - How many passphrases to plant. With O(needle_depths) it must equal the number of depths.
    type: int
    default: 3
  needle_depths:
    description:
      - Where to plant them, as fractions of the filler (V(0.0) its start, V(1.0) its end), one per passphrase.
      - When empty, O(needle_count) depths spread evenly from 0.1 to 0.9 (V([0.1, 0.5, 0.9]) for three).
    type: list
    elements: float
    default: []
  needle_tokenizer:
    description:
      - V(server) sizes the prompt with the engine's C(/tokenize), falling back to the estimate when it has none;
        V(estimate) always uses the estimate (4 characters per token).
    type: str
    choices: [server, estimate]
    default: server
  seed:
    description:
      - Seed of the passphrases and the filler text; the same seed gives the same prompt.
    type: int
    default: 0
  determinism_streams:
    description:
      - Identical greedy requests sent at once by V(determinism). More than the engine's slots queue, and still
        must give the same text.
    type: int
    default: 4
  determinism_tokens:
    description:
      - Tokens each V(determinism) reply may have.
    type: int
    default: 64
  count_to:
    description:
      - V(count) asks to count from 1 to this number.
    type: int
    default: 200
extends_documentation_fragment:
  - sparkfold.cluster.engine
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The checks only send requests and read the answers, so they run in check mode as in a normal run.
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: sparkfold.cluster.engine_health
"""

EXAMPLES = r"""
- name: Smoke-test the served model
  sparkfold.cluster.engine_smoke:
    url: http://127.0.0.1:8000
    served_name: deepseek-v4.1-flash
  register: smoke

- name: Show the table
  ansible.builtin.debug:
    msg: "{{ smoke.table }}"

- name: A needle test only, five passphrases in a 128k prompt
  sparkfold.cluster.engine_smoke:
    url: http://127.0.0.1:8000
    served_name: deepseek-v4.1-flash
    checks: [needle]
    needle_tokens: 131072
    needle_depths: [0.05, 0.25, 0.5, 0.75, 0.95]
    needle_count: 5
    timeout: 600
"""

RETURN = r"""
checks:
  description: Every check run, in order, with C(name), C(passed), C(detail) (what was seen) and C(seconds).
  returned: always
  type: list
  elements: dict
  sample:
    - {name: arithmetic, passed: true, detail: "answered '17 * 23 = 391'", seconds: 0.31}
    - {name: needle, passed: true, seconds: 16.2,
       detail: "all 3 passphrases returned in order; 32768-token prompt (tokenize), depths 0.1, 0.5, 0.9"}
    - {name: determinism, passed: true, detail: 4 concurrent greedy streams gave the same 52-word text, seconds: 1.9}
passed:
  description: Whether every check passed.
  returned: always
  type: bool
  sample: true
table:
  description: >-
    The checks as a short fixed-width table under a header, one line per check, a long detail wrapped under the
    detail column; no line is wider than 92 columns (printed by C(ansible.builtin.debug) it fits 100).
  returned: always
  type: str
  sample: |-
    check        result  seconds  detail
    arithmetic   PASS       0.31  answered '17 * 23 = 391'
table_lines:
  description: The lines of RV(table), for C(ansible.builtin.debug).
  returned: always
  type: list
  elements: str
  sample: ["check        result  seconds  detail", "arithmetic   PASS       0.31  answered '17 * 23 = 391'"]
ttft_s:
  description: Time to first token of the V(arithmetic) reply (seconds); null when it did not run.
  returned: always
  type: float
  sample: 0.214
decode_tok_s:
  description: Decode speed of the V(arithmetic) reply, (n - 1) / (t_last - t_first); null when it did not run.
  returned: always
  type: float
  sample: 80.7
needle:
  description: The V(needle) prompt's C(prompt_tokens) (as counted), C(token_source) (V(tokenize) or V(estimate))
    and C(passphrases); V({}) when it did not run.
  returned: always
  type: dict
  sample: {prompt_tokens: 32768, token_source: tokenize, passphrases: [amber-falcon-42, quiet-otter-26, jade-river-17]}
elapsed_s:
  description: Seconds the checks took together.
  returned: always
  type: float
  sample: 21.7
context_length:
  description: The engine's context length as it reports it; null when it does not say.
  returned: always
  type: int
  sample: 1048576
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils import engine_checks
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import (
    ENGINE_ENDPOINT_ARG_SPEC,
    EngineClient,
    EngineError,
)

DEFAULT_CHECKS = ["arithmetic", "needle", "determinism"]


def run_checks(client, p, context):
    """Run the checks of ``p["checks"]``; return (list of check dicts with extras, extras for the result)."""
    results = []
    extras = {"ttft_s": None, "decode_tok_s": None, "needle": {}}
    for name in p["checks"]:
        extra = p["chat_fields"] or None
        if name == "arithmetic":
            r = engine_checks.run_arithmetic(client, max_tokens=p["reply_tokens"], extra=extra,
                                             question=p["arithmetic_question"], answer=p["arithmetic_answer"])
            extras["ttft_s"], extras["decode_tok_s"] = r["ttft_s"], r["decode_tok_s"]
        elif name == "needle":
            r = engine_checks.run_needle(
                client, p["needle_tokens"], p["needle_depths"] or None, p["needle_count"], seed=p["seed"],
                use_tokenize=p["needle_tokenizer"] == "server", max_tokens=p["reply_tokens"], context=context,
                extra=extra,
            )
            extras["needle"] = {k: r[k] for k in ("prompt_tokens", "token_source", "passphrases")}
        elif name == "determinism":
            r = engine_checks.run_determinism(client, p["determinism_streams"], p["determinism_tokens"], extra=extra)
        else:
            r = engine_checks.run_count(client, p["count_to"], extra=extra)
        results.append(r)
    return results, extras


def main():
    # "no_log": False on the *_tokens options: they count tokens, they are not secrets.
    module = AnsibleModule(
        argument_spec={
            **ENGINE_ENDPOINT_ARG_SPEC,
            "served_name": {"type": "str"},
            "checks": {"type": "list", "elements": "str", "default": DEFAULT_CHECKS,
                       "choices": list(engine_checks.CHECK_NAMES)},
            "timeout": {"type": "float", "default": 300.0},
            "arithmetic_question": {"type": "str", "default": engine_checks.ARITHMETIC_QUESTION},
            "arithmetic_answer": {"type": "str", "default": engine_checks.ARITHMETIC_ANSWER},
            "chat_fields": {"type": "dict", "default": {}},
            "reply_tokens": {"type": "int", "default": 256, "no_log": False},
            "needle_tokens": {"type": "int", "default": 32768, "no_log": False},
            "needle_count": {"type": "int", "default": 3},
            "needle_depths": {"type": "list", "elements": "float", "default": []},
            "needle_tokenizer": {"type": "str", "default": "server", "choices": ["server", "estimate"]},
            "seed": {"type": "int", "default": 0},
            "determinism_streams": {"type": "int", "default": 4},
            "determinism_tokens": {"type": "int", "default": 64, "no_log": False},
            "count_to": {"type": "int", "default": 200},
        },
        supports_check_mode=True,
    )
    p = module.params
    problems = []
    for name, least in (("reply_tokens", 1), ("needle_tokens", 64), ("needle_count", 1), ("determinism_streams", 2),
                        ("determinism_tokens", 1), ("count_to", 1)):
        if p[name] < least:
            problems.append(f"{name} must be at least {least}, got {p[name]}")
    if p["timeout"] <= 0:
        problems.append(f"timeout must be more than 0 seconds, got {p['timeout']}")
    if p["needle_depths"]:
        if len(p["needle_depths"]) != p["needle_count"]:
            problems.append(f"needle_depths has {len(p['needle_depths'])} entries but needle_count is "
                            f"{p['needle_count']}: give one depth per passphrase")
        bad = [d for d in p["needle_depths"] if not 0.0 <= d <= 1.0]
        if bad:
            problems.append(f"needle_depths are fractions from 0.0 to 1.0, got {bad}")
    problems.extend(engine_checks.chat_fields_problems(p["chat_fields"]))
    for name in ("arithmetic_question", "arithmetic_answer"):
        if not p[name].strip():
            problems.append(f"{name} is empty: give the recipe's smoke prompt and the answer it must hold")
    if not p["checks"]:
        problems.append("checks is empty: name at least one of " + ", ".join(engine_checks.CHECK_NAMES))
    if problems:
        module.fail_json(msg="; ".join(problems), changed=False)
    try:
        client = EngineClient(p["url"], api_key=p["api_key"], timeout=p["timeout"], model=p["served_name"])
    except ValueError as exc:
        module.fail_json(msg=str(exc), changed=False)

    start = time.monotonic()
    try:
        context = engine_checks.engine_context(client)
    except EngineError as exc:
        module.fail_json(
            msg=f"the engine at {client.base_url} does not answer ({exc}); wait for it with "
                f"sparkfold.cluster.engine_health (wait: seconds) before the smoke test",
            changed=False, checks=[], passed=False, table="", table_lines=[],
        )
    results, extras = run_checks(client, p, context)
    checks = [{k: r[k] for k in ("name", "passed", "detail", "seconds")} for r in results]
    lines = engine_checks.table_lines(checks)
    passed = all(c["passed"] for c in checks)
    result = {
        "changed": False,
        "checks": checks,
        "passed": passed,
        "table": "\n".join(lines),
        "table_lines": lines,
        "context_length": context,
        "elapsed_s": round(time.monotonic() - start, 3),
        **extras,
    }
    if not passed:
        failed = [c["name"] for c in checks if not c["passed"]]
        module.fail_json(
            msg=f"smoke test of {client.base_url}: {len(failed)} of {len(checks)} checks failed "
                f"({', '.join(failed)}):\n" + result["table"] + "\n"
                + "\n".join(f"{c['name']}: {c['detail']}" for c in checks if not c["passed"]),
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
