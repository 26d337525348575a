# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped SGLang ring recipe's own launch (roles/recipe/recipes/dsv41-flash-tp4-ring-sglang.yml): its entry
point and environment rendered by the recipe filters as the engine_service role renders them, run against the lab
engine's SGLang personality (the image's boot.py building its sglang.launch_server line, then SGLang's checks):
workers 1, 2, 3 then rank 0 come up and rank 0 answers; a stock NCCL, a second NCCL on LD_LIBRARY_PATH, a ring
without the ring-only switch, an unknown flag, a TP that the nodes do not divide, a rank 0 whose workers never come
and a worker started with other settings are refused with the words of the program that refuses them. Only the
model path (MODEL_PATH, the container's /models/DeepSeek-V4.1-Flash) and the pip NCCL path (SIM_NCCL_PIP_SO, the
mount target) are swapped for this test's files."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest
import yaml
from ansible_collections.sparkfold.cluster.plugins.filter.recipe import recipe_render

from tests.labengine import ENGINE, HOST, SERVE_FAST, build, free_port, make_model, request, stop_procs, wait_until

RECIPES = pathlib.Path(__file__).resolve().parents[3] / 'roles' / 'recipe' / 'recipes'
RECIPE = RECIPES / 'dsv41-flash-tp4-ring-sglang.yml'
FAST = {**SERVE_FAST, 'SIM_RENDEZVOUS_TIMEOUT_S': '5'}


@pytest.fixture(scope='module')
def sglang(tmp_path_factory):
    return build(ENGINE, tmp_path_factory.mktemp('containers-out'), extra=('containers',)) / 'sglang'


@pytest.fixture()
def node(tmp_path):
    model = make_model(tmp_path / 'model')
    nccl = tmp_path / 'nccl' / 'libnccl.so.2'
    nccl.parent.mkdir()
    nccl.write_bytes(b'\x7fELF lab stand-in: NCCL_SWITCHLESS_RING_ONLY NCCL_SKIP_TREE_CONNECT\n')
    return model, nccl


def launch(rank, model, nccl, dist_port, http_port, env=None, **serve):
    """(argv, environment) of one rank, as the role renders them (the recipe's values in the lab's sizes)."""
    recipe = yaml.safe_load(RECIPE.read_text())
    recipe['serve'].update(serve)
    side = recipe['launch']['rank0' if rank == 0 else 'follower']
    values = {'rank': rank, 'world': recipe['world'], 'master': HOST, 'rendezvous_port': dist_port,
              'node_address': HOST, 'host': HOST, 'port': http_port, 'served_name': 'deepseek-v4.1-flash',
              'context': recipe['serve']['context'], 'parallel': recipe['serve']['parallel'],
              'max_total_tokens': recipe['serve']['max_total_tokens'], 'rdma_devices': 'rocep1s0f0,rocep1s0f1',
              'bootstrap_interface': 'eth0'}
    rendered = recipe_render({**recipe['launch']['env'], **side['env']}, values)
    rendered.update(MODEL_PATH=str(model), SIM_NCCL_PIP_SO=str(nccl), SIM_FABRIC_TOPOLOGY='ring', **FAST)
    rendered.update(env or {})
    argv = [recipe['container']['entrypoint'], *recipe_render(side['args'], values)]
    return argv, {'PATH': os.environ['PATH'], **rendered}


def start(sglang, rank, *args, **kw):
    argv, env = launch(rank, *args, **kw)
    assert argv[0] == 'python3'
    return subprocess.Popen([str(sglang), *argv[1:]], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def run(sglang, rank, *args, timeout=20, **kw):
    argv, env = launch(rank, *args, **kw)
    return subprocess.run([str(sglang), *argv[1:]], env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_the_recipes_workers_then_rank_0_serve(sglang, node):
    model, nccl = node
    dist, port = free_port(), free_port()
    workers = [start(sglang, rank, model, nccl, dist, free_port()) for rank in (1, 2, 3)]
    head = start(sglang, 0, model, nccl, dist, port)
    try:
        def healthy():
            try:
                return request(port, 'GET', '/health', timeout=2)[:1] == (200,)
            except OSError:
                return head.poll() is not None
        wait_until(healthy, 30)
        assert head.poll() is None, head.stderr.read()
        assert request(port, 'GET', '/health') == (200, '')
        # The smoke role's probe (roles/smoke/tasks/probe.yml: 17 * 23), which the lab's answers know.
        status, body = request(port, 'POST', '/v1/chat/completions', {
            'model': 'deepseek-v4.1-flash', 'max_tokens': 32, 'temperature': 0,
            'messages': [{'role': 'user', 'content': 'What is 17 * 23?'}]})
        assert status == 200, body
        assert '391' in body['choices'][0]['message']['content'], body
        assert all(w.poll() is None for w in workers)
    finally:
        stop_procs(head, *workers)
    # boot.py's banner, the line start.sh (and the unit's ready gate, recipe ready.log_line) waits for, at line start
    log = head.stderr.read()
    assert re.search(f'^Ready: API on port {port} \\(rank 0\\), no API key\\.$', log, re.MULTILINE), log


def test_sigterm_is_a_graceful_exit(sglang, node):
    """As PID 1 of its container the kernel drops a signal the program does not handle: `podman stop` waited its whole
    --time and killed. SGLang's server (uvicorn) shuts down on SIGTERM; so does the lab's, with status 0 (the old
    program, not PID 1 here, died of the signal: returncode -15)."""
    model, nccl = node
    dist, port = free_port(), free_port()
    ranks = [start(sglang, rank, model, nccl, dist, free_port() if rank else port) for rank in (1, 2, 3, 0)]
    try:
        def up():
            try:
                return request(port, 'GET', '/health', timeout=2)[:1] == (200,)
            except OSError:
                return ranks[-1].poll() is not None
        wait_until(up, 30)
        assert ranks[-1].poll() is None, ranks[-1].stderr.read()
        for rank in ranks:  # all at once: a rank left alone fails when it loses the others
            rank.terminate()
        assert [rank.wait(timeout=10) for rank in ranks] == [0, 0, 0, 0]
    finally:
        stop_procs(*ranks)


@pytest.mark.parametrize(('env', 'words'), [
    ({'SIM_NCCL_PIP_SO': '{stock}'}, 'is a stock NCCL, which ignores NCCL_SWITCHLESS_RING_ONLY'),
    ({'NCCL_SWITCHLESS_RING_ONLY': '0'}, 'NCCL error: unhandled system error (ncclTransportTreeConnect'),
    ({'LD_LIBRARY_PATH': '{nccl_dir}'}, 'AssertionError: Duplicate NCCL runtime found in the current system'),
    ({'SIM_NCCL_PIP_SO': '/nonexistent/libnccl.so.2'}, 'libnccl.so.2: cannot open shared object file'),
    ({'TP_SIZE': '3'}, 'AssertionError: tp_size must be divisible by number of nodes'),
    ({'CONTEXT_LENGTH': '2048'}, 'AssertionError: Context must be 4096 through the model limit 1048576'),
    ({'OFFLOAD_MODE': 'disk'}, 'AssertionError: OFFLOAD_MODE must be nvme or ram'),
    ({'DIST_INIT_ADDR': ''}, 'AssertionError: DIST_INIT_ADDR is required when NNODES>1'),
    ({'MODEL_PATH': '/nonexistent/model'}, 'AssertionError: missing /nonexistent/model/config.json'),
])
def test_what_the_ring_refuses_at_start(sglang, node, tmp_path, env, words):
    model, nccl = node
    stock = tmp_path / 'stock.so.2'
    stock.write_bytes(b'\x7fELF lab stand-in: stock NCCL 2.30.7\n')
    env = {k: v.format(stock=stock, nccl_dir=nccl.parent) for k, v in env.items()}
    proc = run(sglang, 0, model, nccl, free_port(), free_port(), env=env)
    assert proc.returncode == 1, proc.stderr
    assert words in proc.stderr


def test_an_unknown_flag_is_refused_in_argparses_words(sglang, node):
    model, nccl = node
    proc = run(sglang, 1, model, nccl, free_port(), free_port(),
               env={'EXTRA_SGLANG_ARGS': '--fp8-gemm-backend flashinfer_cutlass --enable-magic'})
    assert proc.returncode == 2
    assert 'launch_server.py: error: unrecognized arguments: --enable-magic' in proc.stderr


# sgl-project/sglang python/sglang/srt/server_args.py @001067fffe33427bee0ed2f007fb7551a1d76b44, in its order.
ATTENTION_BACKENDS = ('triton, torch_native, flex_attention, dsa, nsa, dsv4, compressed, cutlass_mla, fa3, fa4, '
                      'flashinfer, flashmla, trtllm_mla, cutedsl_mla, tokenspeed_mla, trtllm_mha, '
                      'dual_chunk_flash_attn, hpc_ops, minicpm_flashattn, minicpm_flashinfer, aiter, wave, intel_amx, '
                      'ascend, intel_xpu')
MOE_RUNNER_BACKENDS = ('auto, deep_gemm, triton, triton_kernel, flashinfer_trtllm, experimental_sgl_trtllm, '
                       'flashinfer_trtllm_routed, flashinfer_cutlass, flashinfer_mxfp4, flashinfer_cutedsl, cutlass, '
                       'aiter, marlin, humming, experimental_sgl_marlin, hpc_ops, megamoe')
FP8_GEMM_BACKENDS = ('auto, deep_gemm, flashinfer_trtllm, flashinfer_cutlass, flashinfer_deepgemm, flashinfer_cutedsl, '
                     'cutlass, triton, aiter')


@pytest.mark.parametrize(('env', 'words'), [
    ({'ATTENTION_BACKEND': 'dsv41'},
     f"argument --attention-backend: invalid choice: 'dsv41' (choose from {ATTENTION_BACKENDS})"),
    ({'MOE_RUNNER_BACKEND': 'flashinfer-mxfp4'},
     f"argument --moe-runner-backend: invalid choice: 'flashinfer-mxfp4' (choose from {MOE_RUNNER_BACKENDS})"),
    ({'EXTRA_SGLANG_ARGS': '--fp8-gemm-backend flashinfer_cutlas --watchdog-timeout 1800'},
     f"argument --fp8-gemm-backend: invalid choice: 'flashinfer_cutlas' (choose from {FP8_GEMM_BACKENDS})"),
])
def test_a_misspelled_backend_is_refused_as_argparse_refuses_it(sglang, node, env, words):
    """The recipe's backends (boot.py's --attention-backend dsv4 and --moe-runner-backend flashinfer_mxfp4, the
    recipe's EXTRA_SGLANG_ARGS --fp8-gemm-backend flashinfer_cutlass) take their names from server_args.py's
    choice lists: a typo stops the launch in argparse's words on every rank, here a worker."""
    model, nccl = node
    proc = run(sglang, 1, model, nccl, free_port(), free_port(), env=env)
    assert proc.returncode == 2, proc.stderr
    assert f'launch_server.py: error: {words}' in proc.stderr


# sgl-project/sglang python/sglang/srt/function_call/parser_names.py @43a854243bded5504df4357cd3540beb839bf26e and
# python/sglang/srt/parser/reasoning_parser_names.py @7dda59b24f8069b4561771e5ad51faefb832cdd2 plus the recipe's
# deepseek-v41 (UNVERIFIED: no stored names list has it), in their order.
TOOL_CALL_PARSERS = ', '.join([
    'apertus2509', 'cohere_command4', 'deepseekv3', 'deepseekv31', 'deepseekv32', 'deepseekv4', 'deepseekv41', 'dots',
    'glm', 'glm45', 'glm47', 'gpt-oss', 'k2_horizon', 'kimi_k2', 'kimi_k3', 'lfm2', 'ling3', 'llama3', 'mimo',
    'minicpm5', 'mistral', 'muse', 'poolside_v1', 'pythonic', 'qwen', 'qwen25', 'qwen3_coder', 'spark25', 'step3',
    'step3p5', 'minimax-m2', 'minimax-m3', 'nanbeige', 'trinity', 'interns1', 'hermes', 'hunyuan', 'gigachat3',
    'gigachat35', 'gemma4', 'inkling',
])
REASONING_PARSERS = ', '.join([
    'apertus2509', 'deepseek-r1', 'deepseek-v3', 'deepseek-v4', 'dots', 'glm45', 'ling3', 'hunyuan', 'gpt-oss',
    'k2_horizon', 'kimi', 'kimi_k2', 'kimi_k3', 'mimo', 'muse', 'poolside_v1', 'qwen3', 'qwen3-thinking', 'minimax',
    'minimax-append-think', 'minimax-m3', 'nanbeige', 'step3', 'step3p5', 'mistral', 'nemotron_3', 'interns1', 'gemma4',
    'inkling', 'cohere_command4', 'granite_thinking_parser', 'deepseek-v41',
])


@pytest.mark.parametrize(('env', 'words'), [
    ({'TOOL_CALL_PARSER': 'deepseek-v41'},
     f"argument --tool-call-parser: invalid choice: 'deepseek-v41' (choose from {TOOL_CALL_PARSERS})"),
    ({'REASONING_PARSER': 'deepseekv41'},
     f"argument --reasoning-parser: invalid choice: 'deepseekv41' (choose from {REASONING_PARSERS})"),
])
def test_a_misspelled_parser_is_refused_as_argparse_refuses_it(sglang, node, env, words):
    """boot.py passes --tool-call-parser deepseekv41 and --reasoning-parser deepseek-v41 (TOOL_CALL_PARSER and
    REASONING_PARSER override them): server_args.py declares both with choices, so the other spelling of each stops
    every rank in argparse's words; the shipped values serve (test_the_recipes_workers_then_rank_0_serve)."""
    model, nccl = node
    proc = run(sglang, 1, model, nccl, free_port(), free_port(), env=env)
    assert proc.returncode == 2, proc.stderr
    assert f'launch_server.py: error: {words}' in proc.stderr


def test_a_rank_beyond_the_nodes_is_refused(sglang, node):
    model, nccl = node
    proc = run(sglang, 4, model, nccl, free_port(), free_port())
    assert proc.returncode == 2 and '--node-rank 4 is not below --nnodes 4' in proc.stderr


def test_rank_0_whose_workers_never_come_fails(sglang, node):
    model, nccl = node
    proc = run(sglang, 0, model, nccl, free_port(), free_port(), env={'SIM_RENDEZVOUS_TIMEOUT_S': '1'})
    assert proc.returncode == 1
    assert 'DistStoreError: Timed out after 1 seconds waiting for clients. 1/4 clients joined.' in proc.stderr
    assert '(start the workers first: they join 127.0.0.1:' in proc.stderr


def test_a_worker_with_other_settings_is_refused_by_rank_0(sglang, node):
    model, nccl = node
    dist, port = free_port(), free_port()
    head = start(sglang, 0, model, nccl, dist, port)
    try:
        odd = run(sglang, 2, model, nccl, dist, free_port(), env={'CONTEXT_LENGTH': '524288'})
        assert odd.returncode == 2
        assert 'rank 0 refused rank 2: rank 2 was started with other engine arguments' in odd.stderr
    finally:
        stop_procs(head)
