# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab engine's `vllm serve` personality (lab/engine/src/vllm_serve.zig), run the way the vLLM overlay recipe
(MiaAI-Lab/DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks start.sh) runs it: the --headless worker first, then the head;
/health (vLLM's empty 200), the OpenAI routes, the API key, and each refusal."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.labengine import HOST, SERVE_FAST, free_port, make_engram, make_model, request, stream, wait_until
from tests.labengine import health_ok as healthy
from tests.labengine import stop_procs as stop

FAST = SERVE_FAST
# 2.5 GiB, MiaAI's pool (README: "2.5 GiB per rank = 774,400 tokens ... ~3.4 KiB/token").
POOL = "2684354560"


@pytest.fixture
def bins(container_engine_bin):
    """OUT/bin with vllm and tensorfold (`zig build containers`, built once per session: tests/unit/conftest.py)."""
    return container_engine_bin


@pytest.fixture
def inputs(tmp_path):
    return make_model(tmp_path / "model"), make_engram(tmp_path / "engram-src")


def vllm_args(model, engram, rank, master_port, http_port, extra=()):
    """The recipe's `vllm serve` arguments for one node (MiaAI start.sh head/worker ARGS)."""
    args = [str(model), "--served-model-name", "DeepSeek-v4.1-Flash-EXL3", "--host", HOST, "--port", str(http_port),
            "--tensor-parallel-size", "2", "--nnodes", "2", "--node-rank", str(rank), "--master-addr", HOST,
            "--master-port", str(master_port), "--distributed-executor-backend", "mp",
            "--tokenizer-mode", "deepseek_v41", "--tool-call-parser", "deepseek_v41", "--reasoning-parser",
            "deepseek_v41", "--enable-auto-tool-choice", "--enable-prefix-caching", "--no-enable-flashinfer-autotune",
            "--hf-overrides", json.dumps({"engram_table_dir": str(engram)}), "--quantization", "exl3",
            "--max-model-len", "600000", "--gpu-memory-utilization", "0.88", "--max-num-seqs", "2",
            "--max-num-batched-tokens", "1024", "--long-prefill-token-threshold", "1792",
            "--kv-cache-memory-bytes", POOL, "--block-size", "64",
            "--speculative-config", '{"method":"dspark","num_speculative_tokens":3}', "--language-model-only",
            "--cudagraph-capture-sizes", "1", "2", "3", "4", "6", "8", "12", "18", "24"]
    if rank:
        args.append("--headless")
    return args + list(extra)


def run(bins, args, env=None, timeout=15):
    return subprocess.run([str(bins / "vllm"), "serve", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **FAST, **(env or {})}, timeout=timeout, check=False)


def start(bins, args, env=None):
    return subprocess.Popen([str(bins / "vllm"), "serve", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **FAST, **(env or {})})


def test_worker_then_head_serve_the_openai_api_behind_the_key(bins, inputs):
    model, engram = inputs
    mport, hport = free_port(), free_port()
    worker = start(bins, vllm_args(model, engram, 1, mport, free_port()))
    head = start(bins, vllm_args(model, engram, 0, mport, hport), env={"VLLM_API_KEY": "sk-lab"})
    try:
        assert wait_until(lambda: healthy(hport), 15), head.stderr.read() if head.poll() is not None else "no /health"
        assert request(hport, "GET", "/health") == (200, "")  # vLLM's /health: an empty 200
        assert request(hport, "GET", "/v1/models") == (401, {"error": "Unauthorized"})
        key = {"Authorization": "Bearer sk-lab"}
        status, models = request(hport, "GET", "/v1/models", headers=key)
        assert status == 200 and [m["id"] for m in models["data"]] == ["DeepSeek-v4.1-Flash-EXL3"]
        assert models["data"][0]["max_model_len"] == 600000
        body = {"model": "DeepSeek-v4.1-Flash-EXL3", "max_tokens": 8,
                "messages": [{"role": "user", "content": "What is 17*19? Reply with the integer only."}]}
        status, reply = request(hport, "POST", "/v1/chat/completions", body, headers=key)
        assert status == 200 and reply["choices"][0]["message"]["content"]
        assert reply["usage"]["completion_tokens"] <= 8
        # the prompt is over --max-model-len: vLLM's 400
        long = dict(body, messages=[{"role": "user", "content": "w " * 600001}])
        status, err = request(hport, "POST", "/v1/chat/completions", long, headers=key)
        assert status == 400
        assert err["error"]["message"].startswith("This model's maximum context length is 600000 tokens. "
                                                  "However, your request has 600001 input tokens.")
        assert worker.poll() is None
    finally:
        stop(head, worker)


def test_streaming_without_a_key_on_one_node(bins, inputs):
    model = inputs[0]
    hport = free_port()
    head = start(bins, [model, "--port", str(hport), "--host", HOST, "--max-model-len", "4096"])
    try:
        assert wait_until(lambda: healthy(hport), 10)
        status, events = stream(hport, "/v1/chat/completions",
                                {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4})
        assert status == 200 and events[-1][1] == "[DONE]"
        assert json.loads(events[0][1])["model"] == str(model)  # no --served-model-name: the model path
    finally:
        stop(head)


def test_sigterm_is_a_graceful_exit(bins, inputs):
    """As PID 1 of its container the kernel drops a signal the program does not handle: `podman stop` waited its whole
    --time and killed. vLLM's server (uvicorn) shuts down on SIGTERM; so does the lab's, with status 0 (the old
    program, not PID 1 here, died of the signal: returncode -15)."""
    hport = free_port()
    head = start(bins, [inputs[0], "--port", str(hport), "--host", HOST, "--max-model-len", "4096"])
    try:
        assert wait_until(lambda: healthy(hport), 10)
        head.terminate()
        assert head.wait(timeout=10) == 0
    finally:
        stop(head)


def test_the_head_fails_clearly_without_its_worker(bins, inputs):
    model, engram = inputs
    mport, hport = free_port(), free_port()
    done = run(bins, vllm_args(model, engram, 0, mport, hport))
    assert done.returncode == 1
    assert "Timed out after 3 seconds waiting for clients. 1/2 clients joined." in done.stderr
    assert "start the --headless worker first" in done.stderr


def refused(done, text, status=2):
    assert done.returncode == status, (done.returncode, done.stderr)
    assert text in done.stderr, done.stderr


def test_argparse_refusals(bins, inputs):
    model, engram = inputs
    base = vllm_args(model, engram, 0, free_port(), free_port())
    refused(run(bins, [*base, "--bogus", "1"]), "vllm serve: error: unrecognized arguments: --bogus 1")
    refused(run(bins, [*base, "--port", "x"]), "vllm serve: error: argument --port: invalid int value: 'x'")
    refused(run(bins, [*base, "--enforce-eager=1"]), "argument --enforce-eager: ignored explicit argument '1'")
    refused(run(bins, [*base, "--hf-overrides", "{oops"]), "argument --hf-overrides: invalid loads value: '{oops'")
    refused(run(bins, [*base, "--distributed-executor-backend", "bogus"]),
            "argument --distributed-executor-backend: invalid choice: 'bogus' "
            "(choose from ray, mp, uni, external_launcher)")
    refused(run(bins, ["--port", "1"]), "the following arguments are required: model_tag")
    assert "usage: vllm serve [model_tag] [options]" in run(bins, [*base, "--bogus"]).stderr
    # FlexibleArgumentParser: underscores are dashes
    refused(run(bins, [*base, "--kv_cache_dtype", "fp8"]), "--kv-cache-dtype fp8: this recipe must not pass it")


def test_inconsistent_nodes_are_refused(bins, inputs):
    model, engram = inputs
    base = vllm_args(model, engram, 0, free_port(), free_port())
    refused(run(bins, [*base, "--tensor-parallel-size", "3"]),
            "AssertionError: world_size=3 must be divisible by nnodes=2.", 1)
    refused(run(bins, [*base, "--node-rank", "2", "--headless"]),
            "AssertionError: node_rank=2 must be less than nnodes=2.", 1)
    refused(run(bins, [*base, "--nnodes", "1"]),
            "ValueError: World size (2) is larger than the number of available GPUs (1)", 1)
    refused(run(bins, [*base, "--distributed-executor-backend", "ray"]),
            "ValueError: nnodes > 1 can only be set when distributed executor backend is mp, uni or external_launcher.",
            1)
    refused(run(bins, [*base, "--headless", "--node-rank", "1", "--api-server-count", "1"]),
            "ValueError: --api-server-count=1 cannot be used with --headless", 1)
    refused(run(bins, [*base, "--node-rank", "1"]), "--node-rank 1 without --headless: only node 0 serves the API")
    refused(run(bins, [*base, "--headless"]), "--headless on --node-rank 0")


# vllm-project/vllm registries @0064cc9cb1ae57b1308015d48a57462fa27a68f2 (vllm/tool_parsers/__init__.py,
# vllm/reasoning/__init__.py) plus the recipe's deepseek_v41 (its modules: vllm/tool_parsers/
# deepseekv41_engine_tool_parser.py @a13f7de0, vllm/reasoning/deepseek_v41_engine_reasoning_parser.py @810ed01e);
# list_registered() sorts them.
TOOL_PARSERS = sorted([
    "deepseek_v3", "deepseek_v31", "deepseek_v32", "deepseek_v4", "deepseek_v41", "cohere_command3", "cohere_command4",
    "ernie45", "glm45", "glm47", "granite-20b-fc", "granite", "granite4", "hermes", "poolside_v1", "hunyuan_a13b",
    "hy_v3", "internlm", "jamba", "lfm2", "kimi_k2", "kimi_k3", "llama3_json", "llama4_json", "llama4_pythonic",
    "longcat", "mimo", "minimax_m2", "minimax_m3", "minicpm5", "mistral", "olmo3", "openai", "phi4_mini_json",
    "pythonic", "qwen3_coder", "qwen3_xml", "seed_oss", "step3", "step3p5", "inkling", "xlam", "gigachat3",
    "functiongemma", "gemma4", "apertus", "solar_open2",
])
REASONING_PARSERS = sorted([
    "deepseek_r1", "deepseek_v3", "deepseek_v4", "deepseek_v41", "poolside_v1", "cohere_command3", "cohere_command4",
    "ernie45", "gemma4", "glm45", "glm47", "openai_gptoss", "granite", "holo2", "hunyuan_a13b", "hy_v3", "kimi_k2",
    "kimi_k3", "mimo", "minimax_m2", "minimax_m2_append_think", "minimax_m3", "mistral", "nemotron_v3", "olmo3",
    "qwen3", "seed_oss", "step3", "step3p5", "inkling", "solar_open2",
])


def _replace(args, flag, value):
    i = args.index(flag)
    return [*args[:i + 1], value, *args[i + 2:]]


def test_a_misspelled_parser_name_is_vllms_key_error_on_the_head(bins, inputs):
    """api_server.py @0001948b validate_api_server_args: the head's API server refuses a name no parser is
    registered under, before the engine starts; the tool parser only with --enable-auto-tool-choice."""
    model, engram = inputs
    base = vllm_args(model, engram, 0, free_port(), free_port())
    refused(run(bins, _replace(base, "--reasoning-parser", "deepseek_v4l")),
            "KeyError: 'invalid reasoning parser: deepseek_v4l (chose from { "
            f"{','.join(REASONING_PARSERS)} }})'", 1)
    refused(run(bins, _replace(base, "--tool-call-parser", "deepseek-v41")),
            f"KeyError: 'invalid tool call parser: deepseek-v41 (chose from {{ {','.join(TOOL_PARSERS)} }})'", 1)
    # without --enable-auto-tool-choice the API server does not look the tool parser up: the head goes on and waits
    # for its worker (SERVE_FAST's 3 s)
    quiet = [a for a in _replace(base, "--tool-call-parser", "deepseek-v41") if a != "--enable-auto-tool-choice"]
    done = run(bins, quiet)
    assert done.returncode == 1 and "Timed out after 3 seconds waiting for clients" in done.stderr, done.stderr
    assert "KeyError" not in done.stderr


# vllm-project/vllm vllm/model_executor/layers/quantization/__init__.py @05d909563e1d1ada39a13b67e7b9a4cbca1d6a8e
# (QuantizationMethods, in order) with the overlay's exl3 first (MiaAI Dockerfile @8828d0f4).
QUANTIZATION_METHODS = [
    "exl3", "awq", "fp8", "ptpc_fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "bitblas", "gguf",
    "gptq_marlin_24", "gptq_marlin", "gptq_bitblas", "awq_marlin", "gptq", "compressed-tensors", "bitsandbytes",
    "experts_int8", "ipex", "quark", "moe_wna16", "torchao", "inc", "mxfp4", "mxfp8", "petit_nvfp4", "cpu_awq",
]


def test_an_unknown_quantization_method_is_model_configs_error_on_every_node(bins, inputs):
    """vllm/config/model.py _verify_quantization: argparse takes any string (QuantizationMethods | str), ModelConfig
    lowercases it and refuses a method QUANTIZATION_METHODS does not list, as pydantic's ValidationError, exit 1; the
    --headless worker builds the engine config too, so it dies the same way before it joins."""
    model, engram = inputs
    words = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
             "  Value error, Unknown quantization method: exl2. Must be one of "
             f"[{', '.join(repr(m) for m in QUANTIZATION_METHODS)}]. [type=value_error")
    for rank in (0, 1):
        base = vllm_args(model, engram, rank, free_port(), free_port())
        refused(run(bins, _replace(base, "--quantization", "exl2")), words, 1)
    # the parser names are the head's API server's first check, before the engine config
    head = _replace(_replace(vllm_args(model, engram, 0, free_port(), free_port()), "--quantization", "exl2"),
                    "--reasoning-parser", "deepseek_v4l")
    refused(run(bins, head), "KeyError: 'invalid reasoning parser: deepseek_v4l", 1)
    # lowercased first: EXL3 is the overlay's exl3 (the head goes on and waits for its worker: SERVE_FAST's 3 s)
    done = run(bins, _replace(vllm_args(model, engram, 0, free_port(), free_port()), "--quantization", "EXL3"))
    assert done.returncode == 1 and "Timed out after 3 seconds waiting for clients" in done.stderr, done.stderr
    assert "ValidationError" not in done.stderr


def test_an_unregistered_tokenizer_mode_is_the_tokenizer_registrys_error_on_the_head(bins, inputs):
    """vllm/tokenizers/registry.py @01746e27 load_tokenizer_cls: `ValueError: No tokenizer registered for
    tokenizer_mode='...'` (the mode lowercased by ModelConfig) when the head's engine client loads the tokenizer,
    exit 1; a --headless worker loads no tokenizer and joins as before."""
    model, engram = inputs
    refused(run(bins, _replace(vllm_args(model, engram, 0, free_port(), free_port()), "--tokenizer-mode",
                               "DeepSeek-V41")),
            "ValueError: No tokenizer registered for tokenizer_mode='deepseek-v41'.", 1)
    mport = free_port()
    worker = run(bins, _replace(vllm_args(model, engram, 1, mport, free_port()), "--tokenizer-mode", "deepseek-v41"),
                 env={"SIM_RENDEZVOUS_TIMEOUT_S": "1"})
    assert "No tokenizer registered" not in worker.stderr, worker.stderr
    assert "headless worker: node 1 of 2" in worker.stderr, worker.stderr


def test_a_worker_with_other_engine_arguments_is_refused(bins, inputs):
    model, engram = inputs
    mport, hport = free_port(), free_port()
    head = start(bins, vllm_args(model, engram, 0, mport, hport), env={"SIM_RENDEZVOUS_TIMEOUT_S": "10"})
    try:
        worker = run(bins, vllm_args(model, engram, 1, mport, free_port(), ["--max-model-len", "500000"]))
        refused(worker, "rank 0 refused rank 1: rank 1 was started with other engine arguments")
        assert head.wait(timeout=10) == 2
    finally:
        stop(head)


def test_max_model_len_600k_is_600000_as_vllm_reads_it(bins, inputs):
    """vllm-project/vllm vllm/engine/arg_utils.py @99d7eb5: max_model_len, max_num_batched_tokens and
    kv_cache_memory_bytes take `human_readable_int` (k = 1000, K = 1024; decimals only with k/m/g)."""
    model = inputs[0]
    hport = free_port()
    head = start(bins, [model, "--port", str(hport), "--host", HOST, "--max-model-len", "600k",
                        "--max-num-batched-tokens", "1K"])
    try:
        assert wait_until(lambda: healthy(hport), 10), head.stderr.read() if head.poll() is not None else "no /health"
        status, models = request(hport, "GET", "/v1/models")
        assert status == 200 and models["data"][0]["max_model_len"] == 600000
    finally:
        stop(head)
    refused(run(bins, [model, "--max-model-len", "1.5K"]),
            "vllm serve: error: argument --max-model-len: invalid human_readable_int value: '1.5K'")
    # 2G is 2 GiB: the pool check reads the same bytes as 2147483648 (test_bad_inputs_and_a_pool_too_small)
    model_engram = vllm_args(model, inputs[1], 0, free_port(), free_port())
    done = run(bins, [*model_engram, "--kv-cache-memory-bytes", "2G", "--max-model-len", "700k"])
    refused(done, "the estimated maximum model length is 619584.", 1)


def test_dotted_speculative_config_is_one_json_object(bins, inputs):
    """vllm-project/vllm vllm/utils/argparse_utils.py @c836a6f (FlexibleArgumentParser.parse_args): dotted options of
    one name are merged into one JSON object, each value JSON when it parses."""
    model = inputs[0]
    hport = free_port()
    head = start(bins, [model, "--port", str(hport), "--host", HOST, "--max-model-len", "4096",
                        "--speculative-config.method", "dspark", "--speculative-config.num_speculative_tokens=3"])
    try:
        assert wait_until(lambda: healthy(hport), 10), head.stderr.read() if head.poll() is not None else "no /health"
    finally:
        stop(head)
    # the object is what --speculative-config reads: without a method it is refused as the JSON one is
    refused(run(bins, [model, "--max-model-len", "4096", "--speculative-config.num_speculative_tokens", "3"]),
            '--speculative-config must be a JSON object with a "method", got {"num_speculative_tokens":3}', 1)


def test_bad_inputs_and_a_pool_too_small(bins, inputs, tmp_path):
    model, engram = inputs
    base = vllm_args(model, engram, 0, free_port(), free_port())
    (model / "model-00002-of-00002.safetensors").unlink()
    refused(run(bins, base), "model-00002-of-00002.safetensors is missing")
    model2 = make_model(tmp_path / "model2")
    base = vllm_args(model2, tmp_path / "no-engram", 0, free_port(), free_port())
    refused(run(bins, base), "--hf-overrides engram_table_dir")
    base = vllm_args(model2, engram, 0, free_port(), free_port())
    # 2 GiB holds 619,584 tokens at 3,466 B in blocks of 64: 600,000 fits, 700,000 does not
    done = run(bins, [*base, "--kv-cache-memory-bytes", str(2 << 30), "--max-model-len", "700000"])
    refused(done, "ValueError: To serve at least one request with the model's max seq len (700000), (2.26 GiB KV "
                  "cache is needed, which is larger than the available KV cache memory (2.00 GiB). Based on the "
                  "available memory, the estimated maximum model length is 619584.", 1)


def test_an_engram_folder_whose_index_names_absent_shards_is_refused(bins, inputs, tmp_path):
    # The raw download of deepseek-ai/DeepSeek-V4.1-Flash's Engram files (the lab Hub's real-format copy): config.json,
    # shards 47 and 48 and the index of all 48 shards. MiaAI's start.sh mounts the slim folder instead (issue 25 A2).
    from tests.hub import fixtures

    model, slim = inputs
    raw = tmp_path / "engram-download"
    raw.mkdir()
    for name, data in fixtures._original_files().items():
        (raw / name).write_bytes(data)
    done = run(bins, vllm_args(model, raw, 0, free_port(), free_port()))
    refused(done, f"--hf-overrides engram_table_dir {raw}: model.safetensors.index.json names 46 of 48 shards that "
                  "are not in the folder (first: model-00001-of-00048.safetensors); mount the slim Engram folder")
    # the folder the slim step makes from that download starts
    from ansible_collections.sparkfold.cluster.plugins.modules.engram_slim import slim_index

    text, _tensors = slim_index(str(raw), ["model-00047-of-00048.safetensors", "model-00048-of-00048.safetensors"],
                                [".engram.embed.weight", ".engram.embed.scale"])
    (slim / "model.safetensors.index.json").write_text(text)
    hport = free_port()
    head = start(bins, [model, "--port", str(hport), "--host", HOST, "--max-model-len", "4096",
                        "--hf-overrides", json.dumps({"engram_table_dir": str(slim)})])
    try:
        assert wait_until(lambda: healthy(hport), 15), head.stderr.read() if head.poll() is not None else "no /health"
    finally:
        stop(head)
