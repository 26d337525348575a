# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a run of sparkfold.cluster.engine_bench needs before it measures, standard library only.

- :data:`ARGUMENT_SPEC`: the module's options (documented in the module), with :data:`PHASES` and
  :data:`DEFAULT_DECODE_CASES`;
- :func:`total_steps`: how many steps the progress file counts for those options;
- :func:`connect`: the server's health and model list, or why it cannot be benchmarked at all.
"""

from __future__ import annotations

from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_errors import EngineError, error_message

PHASES = ("decode", "prefill", "concurrency", "needle")

DEFAULT_DECODE_CASES = (
    {"name": "prose_t0.7_thinking", "prompt": "prose", "temperature": 0.7, "thinking": True},
    {"name": "prose_t0", "prompt": "prose", "temperature": 0.0, "thinking": False},
    {"name": "code_t0", "prompt": "code", "temperature": 0.0, "thinking": False},
)

_CASE_SPEC = {
    "name": {"type": "str", "required": True},
    "prompt": {"type": "str", "choices": ["prose", "code"], "default": "prose"},
    "temperature": {"type": "float", "default": 0.0},
    "thinking": {"type": "bool"},
}

# "no_log": False on the *_tokens options and thinking_key: they count tokens or name a key, they are not secrets.
ARGUMENT_SPEC = {
    "url": {"type": "str", "required": True},
    "api_key": {"type": "str", "no_log": True},
    "model": {"type": "str"},
    "phases": {"type": "list", "elements": "str", "choices": list(PHASES), "default": list(PHASES)},
    "decode_cases": {"type": "list", "elements": "dict", "options": _CASE_SPEC,
                     "default": [dict(c) for c in DEFAULT_DECODE_CASES]},
    "decode_repeats": {"type": "int", "default": 3},
    "decode_max_tokens": {"type": "int", "no_log": False, "default": 512},
    "thinking_key": {"type": "str", "default": "thinking", "no_log": False},
    "extra_body": {"type": "dict", "default": {}},
    "prefill_tokens": {"type": "list", "elements": "int", "no_log": False,
                       "default": [4096, 8192, 16384, 32768, 65536, 131072, 262144]},
    "prefill_max_tokens": {"type": "int", "no_log": False, "default": 4},
    "token_counter": {"type": "str", "choices": ["auto", "server", "tokenizer", "estimate"], "default": "auto"},
    "tokenizer_path": {"type": "path"},
    "concurrency_streams": {"type": "list", "elements": "int", "default": [1, 2, 3, 4, 8, 16, 32, 64, 128]},
    "concurrency_max_tokens": {"type": "int", "no_log": False, "default": 256},
    "concurrency_temperature": {"type": "float", "default": 0.0},
    "garble_min_tokens": {"type": "int", "no_log": False, "default": 16},
    "needle_tokens": {"type": "int", "no_log": False, "default": 65536},
    "needle_count": {"type": "int", "default": 3},
    "needle_seed": {"type": "int", "default": 0},
    "timeout_s": {"type": "float", "default": 900.0},
    "request_timeout_s": {"type": "float", "default": 3600.0},
    "progress_file": {"type": "path"},
}


def total_steps(params):
    """The steps of a run with the module's options ``params``: one per decode run, length, stream count, needle."""
    phases = params["phases"]
    total = 0
    if "decode" in phases:
        total += len(params["decode_cases"]) * params["decode_repeats"]
    if "prefill" in phases:
        total += len(params["prefill_tokens"])
    if "concurrency" in phases:
        total += len(params["concurrency_streams"])
    if "needle" in phases:
        total += 1
    return total


def connect(client, wanted_model):
    """(the /health body or None, the model ids) of the server; ValueError saying what to do when it cannot be used."""
    url = client.base_url
    try:
        health = client.health()
        models = client.models()
    except EngineError as exc:
        if exc.kind == "refused":
            raise ValueError(f"nothing answers at {url} ({exc}): start the engine (sparkfold-engine.target) "
                             "and wait until it has loaded, or point url (bench_url) at the served endpoint") from None
        if exc.kind == "http" and exc.status in (401, 403):
            raise ValueError(f"{url} refused the API key (GET /v1/models answered {exc.status}: "
                             f"{error_message(exc.body)}): set api_key (bench_api_key) to the engine's key") from None
        raise ValueError(f"cannot use the server at {url}: {exc}") from None
    if health.status != 200:
        raise ValueError(f"{url}/health answered {health.status} ({error_message(health.text)}): the engine is not "
                         "healthy; look at its journal (journalctl -u 'sparkfold-engine*') before benchmarking")
    if not models:
        raise ValueError(f"{url}/v1/models lists no model; the engine has not loaded one")
    if wanted_model and wanted_model not in models:
        raise ValueError(f"{url} serves {', '.join(models)}, not {wanted_model}: set model (bench_served_name) "
                         "to the engine's --name")
    return (health.json if isinstance(health.json, dict) else None), models
