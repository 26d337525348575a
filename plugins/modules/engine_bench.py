#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_bench
short_description: Measure decode, prefill, concurrency and long-context recall of an OpenAI-compatible server
version_added: "0.1.0"
description:
  - Benchmarks a served model the way the published DGX Spark recipes do, against any OpenAI-compatible server
    (TensorFold, vLLM, SGLang, llama.cpp server, the lab engine), with streamed requests only.
  - "Single-stream decode (O(decode_cases), each O(decode_repeats) times, one request at a time): decode tok/s =
    (n - 1) / (t_last_chunk - t_first_chunk), n = completion tokens (the server's C(usage) when it sends one, else
    the content chunks); TTFT = first content chunk - request sent. Median, min, max and spread per case."
  - "Every timed prompt (every stream of every concurrency round too) starts with a nonce of its own, its random
    digits the very first text, so no prompt cache answers it, and one untimed warm-up request goes first. The prompt
    tokens the server says came from its cache (C(usage.prompt_tokens_details.cached_tokens), llama.cpp's
    C(timings.cache_n)) are kept as C(cached_tokens) on every run, round and needle that has them."
  - "Prefill ladder (O(prefill_tokens)): O(prefill_repeats) prompts per length, built to that exact token count and
    sent to C(/v1/completions); prefill tok/s = prompt tokens / TTFT; median, min, max and spread per length."
  - "Decode at depth (O(depth_tokens)): a prompt of that many tokens of history ending with the prose task, one
    chat stream each; its decode tok/s is the speed with that much already in the context."
  - "Concurrency grid (O(concurrency_streams)): that many chat streams started together, each with a prompt of its
    own (the same task behind its own nonce), in O(concurrency_repeats) rounds; aggregate tok/s = total output
    tokens / wall time (first request sent to last stream done), none for a round in which a stream failed;
    per-stream tok/s = median decode tok/s of the streams; completed / sent; a garble check: an empty output, or
    one ending in a token (or a cycle of up to 4) repeated O(garble_min_tokens) times, or one where a single token
    is half the output."
  - "Needle test (O(needle_tokens)): passphrases planted at depths of a long prompt must all come back in order
    (the smoke test's check, from the engine_needle module_utils). A prompt that does not fit the served context
    with its reply is not sent, and one the server refuses for lack of context (its context could not be read, or
    the chat template's tokens tipped it over) was not answered: either way the needle is not measured
    (C(skipped) says why), never failed."
  - "Prompt lengths are counted with the server's C(/tokenize) when it has one, else with O(tokenizer_path)
    (C(tokenizer.json)) when the python running the module has the C(tokenizers) package, else estimated at 4
    characters per token; C(token_counter) in RV(measurements) says which, and why the better ones were not used."
  - Writes its progress to O(progress_file) (JSON, replaced atomically) so that a role running it with C(async)
    can print progress lines while it runs.
  - A failed or garbled request is recorded in the results, never a module failure; the module fails only when the
    server cannot be asked at all (nothing listening, key refused, unknown model) or an option is wrong.
  - Standard library only (plus this collection's module_utils), so it runs with the system C(python3) of the node.
  - Never reports a change.
author:
  - sparkfold developers (@sparkfold)
options:
  url:
    description:
      - Base URL of the server, like C(http://127.0.0.1:8000) (a trailing C(/v1) is accepted).
    type: str
    required: true
  api_key:
    description:
      - Sent as C(Authorization Bearer) when set.
    type: str
  model:
    description:
      - Served model name to put in the requests. Must be one of those C(/v1/models) lists.
      - Default the first model the server lists.
    type: str
  phases:
    description:
      - Which measurements to run, always in the order decode, prefill, depth, concurrency, needle.
    type: list
    elements: str
    choices: [decode, prefill, depth, concurrency, needle]
    default: [decode, prefill, depth, concurrency, needle]
  decode_cases:
    description:
      - The single-stream decode cases. The default measures the three published cases of the DeepSeek-V4.1-Flash
        recipes.
    type: list
    elements: dict
    default:
      - {name: prose_t0.7_thinking, prompt: prose, temperature: 0.7, thinking: true}
      - {name: prose_t0, prompt: prose, temperature: 0.0, thinking: false}
      - {name: code_t0, prompt: code, temperature: 0.0, thinking: false}
    suboptions:
      name:
        description:
          - Name of the case, as the report and the recipe expectations refer to it.
        type: str
        required: true
      prompt:
        description:
          - V(prose) (a long essay) or V(code) (a Python module with tests).
        type: str
        choices: [prose, code]
        default: prose
      temperature:
        description:
          - Sampling temperature.
        type: float
        default: 0.0
      thinking:
        description:
          - "Sent as C(chat_template_kwargs) C({<thinking_key>: <thinking>}); omit to send nothing."
        type: bool
  decode_repeats:
    description:
      - Runs of each decode case.
    type: int
    default: 3
  decode_max_tokens:
    description:
      - C(max_tokens) of each decode request.
    type: int
    default: 512
  thinking_key:
    description:
      - Key of C(chat_template_kwargs) that switches thinking (C(thinking) for DeepSeek-V4's template,
        C(enable_thinking) for Qwen3's).
    type: str
    default: thinking
  extra_body:
    description:
      - Fields merged into the body of every generation request (for example C(top_p), or C(ignore_eos) on vLLM).
    type: dict
    default: {}
  prefill_tokens:
    description:
      - Prompt lengths of the prefill ladder, in tokens. Lengths that do not fit the server's context are
        skipped and said so. The context is read from C(/health) C(context_length) (TensorFold), C(/v1/models)
        C(max_model_len) (TensorFold, vLLM), or llama.cpp's C(/v1/models) C(meta.n_ctx) and C(/props)
        C(default_generation_settings.n_ctx) (one slot's window).
    type: list
    elements: int
    default: [4096, 8192, 16384, 32768, 65536, 131072, 262144]
  prefill_max_tokens:
    description:
      - C(max_tokens) of each prefill request (only the first token is timed).
    type: int
    default: 4
  prefill_repeats:
    description:
      - Prompts sent per prefill length, each new to the server.
    type: int
    default: 3
  depth_tokens:
    description:
      - Depths of the decode-at-depth phase, in tokens of history. A depth over O(depth_limit), or whose prompt
        and reply do not fit the served context, is skipped and said so, never sent.
    type: list
    elements: int
    default: [8192, 32768, 131072, 262144, 524288, 1000000]
  depth_limit:
    description:
      - The deepest depth measured (a 1M-token prefill takes about ten minutes on a Spark pair); V(0) measures up
        to the served context.
    type: int
    default: 262144
  depth_max_tokens:
    description:
      - C(max_tokens) of each decode-at-depth request.
    type: int
    default: 256
  depth_repeats:
    description:
      - Runs per depth.
    type: int
    default: 1
  token_counter:
    description:
      - How prompt lengths are counted. V(auto) takes the first that works of V(server) (C(POST /tokenize)),
        V(tokenizer) (O(tokenizer_path) with the C(tokenizers) package) and V(estimate) (4 characters per token).
      - Naming one method fails the module when it is not available, saying why.
    type: str
    choices: [auto, server, tokenizer, estimate]
    default: auto
  tokenizer_path:
    description:
      - The model's C(tokenizer.json) on the node, used when the server has no C(/tokenize).
    type: path
  concurrency_streams:
    description:
      - Stream counts of the concurrency grid, each run after the previous one finished.
    type: list
    elements: int
    default: [1, 2, 3, 4, 8, 16, 32, 64, 128]
  concurrency_max_tokens:
    description:
      - C(max_tokens) of each stream of the grid.
    type: int
    default: 256
  concurrency_repeats:
    description:
      - Rounds per stream count; the aggregate is the median of the rounds in which every stream completed.
    type: int
    default: 3
  concurrency_temperature:
    description:
      - Temperature of the grid's streams. C(distinct_outputs) in RV(measurements) counts their different outputs
        (each stream's prompt has a nonce of its own, so at 0 they agree only where the model ignores it).
    type: float
    default: 0.0
  garble_min_tokens:
    description:
      - An output of at least this many tokens whose last this-many tokens are one token or a cycle of up to four
        repeated is garbled.
    type: int
    default: 16
  needle_tokens:
    description:
      - Length of the needle prompt in tokens.
    type: int
    default: 65536
  needle_count:
    description:
      - Passphrases planted, evenly from depth 0.1 to 0.9.
    type: int
    default: 3
  needle_seed:
    description:
      - Seed of the passphrases and the filler text.
    type: int
    default: 0
  timeout_s:
    description:
      - Longest wait for any byte from the server (connect, headers, each chunk). Must exceed the TTFT of the longest
        prompt (about 555 s at 1M tokens on a Spark pair).
    type: float
    default: 900
  request_timeout_s:
    description:
      - Longest time one streamed request may take in all.
    type: float
    default: 3600
  progress_file:
    description:
      - File the progress is written to (JSON with C(phase), C(step), C(done), C(total), C(last), C(elapsed_s)
        and C(pid), the module's process), replaced atomically after every step. Its directory must exist.
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Measures nothing and sends no request; returns RV(skipped) and says so.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Run it on the head, next to the server, so the network between does not enter the figures; the
    C(sparkfold.cluster.bench) role runs it with C(async) and follows O(progress_file).
  - The lab engine is a simulator; its figures are the rates it is configured with, not a Spark's.
seealso:
  - module: sparkfold.cluster.engine_bench_report
"""

EXAMPLES = r"""
- name: Full benchmark of the served model
  sparkfold.cluster.engine_bench:
    url: http://127.0.0.1:8000
    model: deepseek-v4.1-flash
    tokenizer_path: /srv/models/dsv41-flash-exl3/tokenizer.json
    progress_file: /var/tmp/sparkfold-bench-progress.json
  register: bench

- name: A quick look at decode and 1 to 4 streams only
  sparkfold.cluster.engine_bench:
    url: http://127.0.0.1:8000
    phases: [decode, concurrency]
    decode_repeats: 1
    decode_max_tokens: 128
    concurrency_streams: [1, 2, 4]
    concurrency_max_tokens: 64
  register: quick

- name: Show the single-stream decode medians
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.decode_tok_s.median | round(1) }} tok/s"
  loop: "{{ quick.measurements.decode }}"
  loop_control:
    label: "{{ item.name }}"
"""

RETURN = r"""
skipped:
  description: True in check mode, when nothing was measured.
  returned: check mode
  type: bool
  sample: true
summary:
  description: One line per measurement, as the progress lines show them.
  returned: success
  type: list
  elements: str
  sample: ["decode prose_t0: median 80.4 tok/s (3 runs, spread 1.2%), TTFT 212 ms"]
measurements:
  description:
    - The raw results, as the report module reads them. Every figure is a float or null; lists follow the order of
      the options.
    - C(decode) - one entry per case with C(runs) (each C(decode_tok_s), C(ttft_ms), C(completion_tokens),
      C(garbled), C(error)) and the statistics C(decode_tok_s) and C(ttft_ms) (C(n), C(median), C(mean), C(min),
      C(max), C(stdev), C(spread_pct)), C(prompt_tokens) and C(cached_tokens) per run.
    - C(warmup) - the untimed first request, C(ok) and C(error).
    - C(prefill) - one entry per length with C(target_tokens), C(counted_tokens), C(prompt_tokens) (the server's
      usage when given), C(ttft_ms) and C(prefill_tok_s) (medians; C(stats) has both statistics), C(runs),
      C(skipped), C(error).
    - C(depth) - one entry per depth with C(depth_tokens), C(runs) (each with C(prompt_tokens) and
      C(cached_tokens)), the statistics C(decode_tok_s) and C(ttft_ms), C(skipped).
    - C(concurrency) - one entry per stream count with C(sent), C(completed), C(garbled) (all rounds),
      C(aggregate_tok_s) (median of the complete rounds, None when none; C(aggregate_note) says why), C(stats),
      C(per_stream_tok_s) and C(ttft_ms) statistics, C(wall_s), C(output_tokens), C(errors), C(distinct_outputs),
      C(prompt_tokens) and C(cached_tokens) (the streams' sums, None when the server says neither),
      C(mostly_cached) (streams with more than half of their prompt tokens from the cache), C(rounds).
    - C(needle) - C(target_tokens), C(prompt_tokens), C(cached_tokens), C(passed), C(found), C(expected),
      C(detail), C(ttft_ms), C(skipped) (why it was not measured, that it does not fit the served context or
      that the server refused it for lack of context; then C(passed) is null, never a FAIL); or null when not run.
  returned: success
  type: dict
  sample:
    url: http://127.0.0.1:8000
    model: deepseek-v4.1-flash
    context_length: 1048576
    token_counter: {method: server, label: "the server's /tokenize (exact)", notes: [], exact: true}
    decode: []
    prefill: []
    depth: []
    concurrency: []
    needle: null
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_setup
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_figures import summary_lines
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_prompts import TokenCounter
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_bench import run_phases
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_checks import engine_context
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import EngineClient
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_errors import EngineError
from ansible_collections.sparkfold.cluster.plugins.module_utils.progress_file import StepProgress


def main():
    module = AnsibleModule(argument_spec=bench_setup.ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    problem = bench_setup.check_params(p)
    if problem:
        module.fail_json(msg=problem)
    if p["progress_file"] and not os.path.isdir(os.path.dirname(os.path.abspath(p["progress_file"]))):
        module.fail_json(msg=f"the directory of progress_file {p['progress_file']} does not exist; create it first")

    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: nothing measured, no request sent")

    try:
        client = EngineClient(p["url"], api_key=p["api_key"], timeout=p["timeout_s"], model=p["model"])
        health, models = bench_setup.connect(client, p["model"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    model = p["model"] or models[0]
    client.model = model
    try:
        context = engine_context(client)
    except EngineError as exc:
        context = None
        module.warn(f"the server's context length could not be read ({exc}): no prompt is skipped for length "
                    "before it is sent (a needle the server refuses for lack of context is not measured)")

    phases = [ph for ph in bench_setup.PHASES if ph in p["phases"]]
    counter = None
    if {"prefill", "depth", "needle"} & set(phases):
        try:
            counter = TokenCounter(client, p["token_counter"], p["tokenizer_path"])
        except ValueError as exc:
            module.fail_json(msg=f"token_counter={p['token_counter']} cannot be used: {exc}. Use token_counter=auto "
                                 "to fall back to the next method")
        if counter.method == "estimate":
            module.warn("prompt lengths are ESTIMATED (4 characters per token): " + "; ".join(counter.notes))

    progress = StepProgress(p["progress_file"], bench_setup.total_steps(p))
    started = time.time()
    results = {
        "schema": 2,
        "url": client.base_url,
        "model": model,
        "models": models,
        "health": health,
        "context_length": context,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "phases": phases,
        "token_counter": None if counter is None else {
            "method": counter.method, "label": counter.label, "notes": counter.notes, "exact": counter.exact},
        "options": {key: p[key] for key in (
            "decode_repeats", "decode_max_tokens", "thinking_key", "prefill_tokens", "prefill_max_tokens",
            "prefill_repeats", "depth_tokens", "depth_limit", "depth_max_tokens", "depth_repeats",
            "concurrency_streams", "concurrency_max_tokens", "concurrency_repeats", "concurrency_temperature",
            "garble_min_tokens", "needle_tokens", "needle_count", "needle_seed")},
    }
    results.update(run_phases(client, p, phases, counter, context, progress))
    finished = time.time()
    results["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(finished))
    results["duration_s"] = round(finished - started, 3)
    progress.step("done", "")
    module.exit_json(changed=False, measurements=results, summary=summary_lines(results),
                     msg=f"measured {', '.join(phases)} against {model} at {client.base_url} in "
                         f"{results['duration_s']:.0f} s")


if __name__ == "__main__":
    main()
