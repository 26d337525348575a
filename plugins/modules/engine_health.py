#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_health
short_description: Wait until an OpenAI-compatible inference engine is ready, and probe it
version_added: "0.1.0"
description:
  - Probes the engine at O(url) until it is ready or O(wait) seconds have passed, then checks that
    C(/v1/models) lists O(served_name) and, with O(chat_check), that a streamed chat request answers
    O(chat_question) (C(What is 17 * 23?)) with O(chat_answer) (391).
  - >-
    Reads C(/health) as TensorFold, vLLM and llama.cpp answer it. Connection refused means the engine is
    still loading (TensorFold opens HTTP only once the model is loaded). TensorFold's
    C({"ok": true, "backend": "tensorfold", "busy": false, ..., "context_length": N}) (a C(--parallel) server adds
    C("streams": {"decoding": d, "prefilling": p, "max": N})) or, with API keys on, C({"status": "ok"}) means
    ready; a 503 with
    C({"ok": false, "error": ...}) is fatal (a rank was lost; the engine exits and its service restarts it);
    vLLM's empty 200 means ready; llama.cpp's 503 C({"error": {"message": "Loading model"}}) means still
    loading, its C({"status": "ok"}) ready. A server without C(/health) (404) is judged by C(/v1/models).
  - >-
    While not ready it keeps probing every O(interval) seconds; on timeout it fails with the last state seen and
    how long it lasted, for example C(still loading: connection refused on 127.0.0.1:8000 for 600 s) or
    C(503 from /health: follower rank 1 lost: connection closed). Every request has a timeout, so the module
    never hangs; it returns within about O(wait) + O(timeout) seconds.
  - >-
    An engine that wants an API key (401 or 403) and a served name the engine does not serve fail at once:
    waiting does not change them.
  - >-
    With O(api_key) (and O(api_key_check), on by default), once the engine is ready it asks C(/v1/models) once more,
    without the key, and fails unless the engine refuses that (401 or 403): an engine that serves it did not read
    the key it was given (a key variable or flag this engine build does not know), and its API is open to anyone who
    reaches its port. Any other answer proves nothing and fails too. Without O(api_key) nothing more is asked.
  - Needs nothing beyond the Python standard library, so it runs with the system C(python3) of the node.
  - Read-only; never reports a change.
author:
  - sparkfold developers (@sparkfold)
options:
  served_name:
    description:
      - The model id C(/v1/models) must list (TensorFold's C(--name)). Not checked when empty.
      - Also sent as C(model) in the chat request of O(chat_check).
    type: str
  wait:
    description:
      - Seconds to wait for the engine to become ready. V(0) probes once and fails if it is not ready.
      - Loading the real model takes minutes (TensorFold opens HTTP only once all ranks are loaded).
    type: int
    default: 0
  interval:
    description:
      - Seconds between probes while waiting.
    type: float
    default: 2.0
  timeout:
    description:
      - Seconds each request may take (connect, and each read). While waiting, a probe never runs past the end
        of O(wait) by more than 1 second.
    type: float
    default: 30.0
  api_key_check:
    description:
      - >-
        With O(api_key), once the engine is ready, ask C(/v1/models) without the key and fail unless the engine
        refuses it with 401 or 403 (TensorFold, vLLM and SGLang refuse C(/v1/) requests without a key so). Returns
        whether it did in RV(key_enforced). Has no effect without O(api_key).
      - >-
        V(false) only to probe an engine whose key is known not to matter here, for example to see whether an
        engine runs at all.
    type: bool
    default: true
  chat_check:
    description:
      - Once ready, ask O(chat_question) (streamed, temperature 0, O(chat_fields) in the body) and fail unless
        the reply holds O(chat_answer) as a number of its own. Returns the time to first token and the decode speed
        of that reply.
      - >-
        The reply is read where the engine puts it: its content and, when that lacks the answer, the thinking a
        reasoning parser splits off (C(reasoning_content) in vLLM's and SGLang's chat deltas, C(reasoning) in later
        vLLM), so a healthy engine whose reply ended while it was still thinking is not failed for it.
    type: bool
    default: false
  chat_question:
    description:
      - The question of O(chat_check) (the recipe's C(smoke.prompt)).
    type: str
    default: What is 17 * 23?
  chat_answer:
    description:
      - The number the O(chat_check) reply must hold (the recipe's C(smoke.answer)).
    type: str
    default: "391"
  chat_fields:
    description:
      - >-
        Fields merged into the body of the O(chat_check) request, the recipe's chat settings, such as the switch
        that turns thinking off as the recipe's own smoke request does
        (C({"chat_template_kwargs": {"enable_thinking": false}}) for vLLM and TensorFold,
        C({"chat_template_kwargs": {"thinking": false}}) for the SGLang ring). They cannot replace the fields the
        check sets itself (C(messages), C(max_tokens), C(temperature), C(stream), C(stream_options), C(model)).
    type: dict
    default: {}
  chat_max_tokens:
    description:
      - Most tokens the reply of O(chat_check) may have. Leave room for thinking when the engine thinks first.
    type: int
    default: 256
extends_documentation_fragment:
  - sparkfold.cluster.engine
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The probes only read, so they run in check mode exactly as in a normal run.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Run it on the node that serves (the head) against C(127.0.0.1), or anywhere the engine's port is reachable.
  - >-
    TensorFold's C(/health) hides the reason of a fatal state when API keys are on (C({"status": "error"}));
    the engine's journal then tells what happened.
seealso:
  - module: sparkfold.cluster.engine_smoke
"""

EXAMPLES = r"""
- name: Wait up to 15 minutes for the engine to load, then ask it 17 * 23
  sparkfold.cluster.engine_health:
    url: http://127.0.0.1:8000
    served_name: deepseek-v4.1-flash
    wait: 900
    chat_check: true
  register: engine

- name: Show the probe's figures
  ansible.builtin.debug:
    msg: "ready; TTFT {{ engine.ttft_s | round(3) }} s, decode {{ engine.decode_tok_s | round(1) }} tok/s"

- name: One probe of an engine with API keys, without failing when it is not ready
  sparkfold.cluster.engine_health:
    url: http://127.0.0.1:8000
    api_key: "{{ engine_api_key }}"
  register: probe
  failed_when: false
  no_log: true

- name: Say whether the key is enforced (the probe asked /v1/models without it too)
  ansible.builtin.debug:
    msg: "{{ 'API key enforced' if probe.key_enforced else probe.state_detail }}"
"""

RETURN = r"""
ready:
  description: Whether the engine answered ready (and passed the checks asked for).
  returned: always
  type: bool
  sample: true
state:
  description:
    - The last state seen. V(ready); V(loading) (connection refused, or a 503 that says it is loading);
      V(fatal) (a 503 that reports an error); V(unavailable) (another error status); V(timeout) (no answer
      within O(timeout)); V(unauthorized) (401 or 403); V(wrong_model) (O(served_name) not listed);
      V(key_not_enforced) (with O(api_key), C(/v1/models) answered without the key);
      V(key_unknown) (with O(api_key), C(/v1/models) without the key answered neither 200 nor 401/403, or not at all);
      V(chat_failed) (the O(chat_check) answer was wrong or broke off).
  returned: always
  type: str
  sample: ready
state_detail:
  description: The last state in words, as it appears in the failure message.
  returned: always
  type: str
  sample: "still loading: connection refused on 127.0.0.1:8000"
health:
  description:
    - >-
      The parsed body of the last C(/health) answer; an empty dict for an empty body (vLLM); C({"text": ...}) for
      a body that is not JSON; an empty dict when C(/health) never answered.
  returned: always
  type: dict
  sample:
    ok: true
    backend: tensorfold
    busy: false
    requests_running: 0
    requests_total: 32
    streams: {decoding: 0, prefilling: 0, max: 4}
    context_length: 1048576
streams:
  description:
    - >-
      TensorFold's C(streams) from the last C(/health) answer of a C(--parallel) server: C(decoding), C(prefilling)
      and C(max) (the C(--parallel) it serves). Null when C(/health) has none (one request at a time, API keys on,
      vLLM, llama.cpp). A C(streams) of another shape is not read; a warning says so.
  returned: always
  type: dict
  sample: {decoding: 1, prefilling: 0, max: 4}
key_enforced:
  description:
    - >-
      With O(api_key) and O(api_key_check), once the engine was ready: V(true) when it refused C(/v1/models) without
      the key (401 or 403), V(false) when it served it. Null without O(api_key), with O(api_key_check) V(false),
      when the engine never became ready, or when the answer without the key proved nothing (state V(key_unknown)).
  returned: always
  type: bool
  sample: true
models:
  description: The model ids C(/v1/models) listed (empty when it was not reached).
  returned: always
  type: list
  elements: str
  sample: [deepseek-v4.1-flash]
ttft_s:
  description: Seconds from sending the O(chat_check) request to its first content chunk; null without O(chat_check).
  returned: always
  type: float
  sample: 0.214
decode_tok_s:
  description:
    - Decode speed of the O(chat_check) reply, (n - 1) / (t_last - t_first) with n its completion tokens;
      null without O(chat_check) or when the reply had fewer than 2 tokens.
  returned: always
  type: float
  sample: 80.7
reply:
  description: The text of the O(chat_check) answer; null without O(chat_check).
  returned: always
  type: str
  sample: 17 * 23 = 391
elapsed_s:
  description: Seconds the module spent, probes and waiting included.
  returned: always
  type: float
  sample: 312.4
probes:
  description: How many times C(/health) was asked.
  returned: always
  type: int
  sample: 157
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_checks import (
    ARITHMETIC_ANSWER,
    ARITHMETIC_QUESTION,
    chat_fields_problems,
    run_arithmetic,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import (
    ENGINE_ENDPOINT_ARG_SPEC,
    EngineClient,
    health_streams,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_readiness import HINTS, Final, Probe, wait_ready


def main():
    # "no_log": False on the *_tokens options: they count tokens, they are not secrets.
    module = AnsibleModule(
        argument_spec={
            **ENGINE_ENDPOINT_ARG_SPEC,
            "served_name": {"type": "str"},
            "wait": {"type": "int", "default": 0},
            "interval": {"type": "float", "default": 2.0},
            "timeout": {"type": "float", "default": 30.0},
            "api_key_check": {"type": "bool", "default": True},
            "chat_check": {"type": "bool", "default": False},
            "chat_max_tokens": {"type": "int", "default": 256, "no_log": False},
            "chat_question": {"type": "str", "default": ARITHMETIC_QUESTION},
            "chat_answer": {"type": "str", "default": ARITHMETIC_ANSWER},
            "chat_fields": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["wait"] < 0:
        module.fail_json(msg=f"wait must be 0 or more seconds, got {p['wait']}")
    if p["interval"] <= 0 or p["timeout"] <= 0:
        module.fail_json(
            msg=f"interval and timeout must be more than 0 seconds, got {p['interval']} and {p['timeout']}"
        )
    if p["chat_max_tokens"] < 1:
        module.fail_json(msg=f"chat_max_tokens must be at least 1, got {p['chat_max_tokens']}")
    bad_chat = chat_fields_problems(p["chat_fields"])
    if not p["chat_question"].strip() or not p["chat_answer"].strip():
        bad_chat.append("chat_question and chat_answer must not be empty: give the recipe's smoke prompt and answer")
    if bad_chat:
        module.fail_json(msg="; ".join(bad_chat))
    try:
        client = EngineClient(p["url"], api_key=p["api_key"], timeout=p["timeout"], model=p["served_name"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))

    start = time.monotonic()
    probe = Probe(client, p["url"])
    result = {"changed": False, "ready": False, "key_enforced": None, "ttft_s": None, "decode_tok_s": None,
              "reply": None}

    def finish(ok, msg=None):
        streams, note = health_streams(probe.health)
        if note:
            module.warn(note)
        result.update({
            "state": probe.state or "unknown",
            "state_detail": probe.detail,
            "health": probe.health,
            "streams": streams,
            "models": probe.models,
            "probes": probe.probes,
            "elapsed_s": round(time.monotonic() - start, 3),
        })
        if ok:
            module.exit_json(**result)
        module.fail_json(msg=msg, **result)

    try:
        ready = wait_ready(probe, p["wait"], p["interval"], p["timeout"], p["served_name"], bool(p["api_key"]))
    except Final as exc:
        finish(False, str(exc))
    if not ready:
        lasted = time.monotonic() - probe.since
        msg = f"the engine at {client.base_url} is not ready after {time.monotonic() - start:.0f} s: {probe.detail}"
        if p["wait"] > 0:
            msg += f" for {lasted:.0f} s"
        if probe.earlier and probe.earlier != probe.detail:
            msg += f" (before that: {probe.earlier})"
        hint = HINTS.get(probe.state)
        if hint:
            msg += f"; {hint}"
        finish(False, msg)

    # A key that is set must be enforced: an engine that serves /v1/ without it is open to whoever reaches its port.
    # Asked before the chat, which would only load an engine open to anyone.
    if p["api_key"] and p["api_key_check"]:
        enforced = probe.read_key_enforced(p["timeout"])
        result["key_enforced"] = enforced
        if not enforced:
            finish(False, f"{probe.detail}; {HINTS[probe.state]}")

    if p["chat_check"]:
        client.timeout = p["timeout"]
        check = run_arithmetic(client, max_tokens=p["chat_max_tokens"], extra=p["chat_fields"] or None,
                               question=p["chat_question"], answer=p["chat_answer"])
        result.update({"ttft_s": check["ttft_s"], "decode_tok_s": check["decode_tok_s"], "reply": check["reply"]})
        if not check["passed"]:
            probe.set("chat_failed", f"chat check failed: {check['detail']}")
            finish(False, f"the engine at {client.base_url} is up but its chat check failed: asked "
                          f"{p['chat_question']!r}, {check['detail']}; look at the engine's journal")
    result["ready"] = True
    finish(True)


if __name__ == "__main__":
    main()
