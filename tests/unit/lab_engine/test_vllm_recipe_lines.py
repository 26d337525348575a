# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped vLLM overlay recipe's own launch lines (roles/recipe/recipes/dsv41-flash-tp2-vllm.yml), rendered by
the recipe filters as the engine_service role renders them, against the lab engine's strict `vllm serve`: the
worker (--headless) then the head come up and the head answers vLLM's empty 200; a pool the engine refuses is
refused. Only the container paths /model and /engram-src are swapped for this test's directories."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest
import yaml
from ansible_collections.sparkfold.cluster.plugins.filter.recipe import recipe_render

from tests.labengine import ENGINE, HOST, SERVE_FAST, build, free_port, make_engram, make_model, request, wait_until

RECIPE = pathlib.Path(__file__).resolve().parents[3] / 'roles' / 'recipe' / 'recipes' / 'dsv41-flash-tp2-vllm.yml'
FAST = {**SERVE_FAST, 'SIM_RENDEZVOUS_TIMEOUT_S': '5'}


@pytest.fixture(scope='module')
def vllm(tmp_path_factory):
    return build(ENGINE, tmp_path_factory.mktemp('containers-out'), extra=('containers',)) / 'vllm'


def line(rank, model, engram, mport, hport, **serve):
    recipe = yaml.safe_load(RECIPE.read_text())
    recipe['serve'].update(serve)
    launch = recipe['launch']['rank0' if rank == 0 else 'follower']
    values = {'served_name': 'deepseek-v4.1-flash', 'host': HOST, 'port': hport, 'world': recipe['world'],
              'rank': rank, 'master': HOST, 'rendezvous_port': mport,
              'headless_args': [] if rank == 0 else ['--headless'],
              'context': recipe['serve']['context'], 'parallel': recipe['serve']['parallel'],
              'kv_pool_bytes': recipe['serve']['kv_pool_bytes']}
    args = recipe_render(launch['args'], values)
    engram_json = json.dumps({'engram_table_dir': str(engram)}, separators=(',', ':'))
    swap = {'/model': str(model), '{"engram_table_dir":"/engram-src"}': engram_json,
            '/opt/dsv41/chat_template.jinja': str(model / 'config.json')}
    return [swap.get(a, a) for a in args]


def test_the_recipes_worker_then_head_serve(vllm, tmp_path):
    model, engram = make_model(tmp_path / 'model'), make_engram(tmp_path / 'engram-src')
    mport, hport = free_port(), free_port()
    # the names the lab engine checks against vLLM's registries (quantization on every node, tokenizer mode and parsers
    # on the head): the recipe's must be among them, so both ranks serving below is their acceptance
    args = line(0, model, engram, mport, hport)
    for flag, value in (('--quantization', 'exl3'), ('--tokenizer-mode', 'deepseek_v41'),
                        ('--tool-call-parser', 'deepseek_v41'), ('--reasoning-parser', 'deepseek_v41')):
        assert args[args.index(flag) + 1] == value
    env = {**os.environ, **FAST}
    worker = subprocess.Popen([str(vllm), *line(1, model, engram, mport, free_port())], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    head = subprocess.Popen([str(vllm), *line(0, model, engram, mport, hport)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def healthy():
            try:
                return request(hport, 'GET', '/health', timeout=2)[:1] == (200,)
            except OSError:
                return head.poll() is not None
        wait_until(healthy, 20)
        assert head.poll() is None, head.stderr.read()
        assert request(hport, 'GET', '/health') == (200, '')
        assert worker.poll() is None
    finally:
        for proc in (head, worker):
            proc.kill()
            proc.wait(timeout=10)


def test_a_pool_that_cannot_hold_one_sequence_is_refused(vllm, tmp_path):
    model, engram = make_model(tmp_path / 'model'), make_engram(tmp_path / 'engram-src')
    # 1 GiB at 3,466 bytes a token holds ~309,000 tokens, less than the recipe's 600,000.
    proc = subprocess.run([str(vllm), *line(0, model, engram, free_port(), free_port(), kv_pool_bytes=1073741824)],
                          env={**os.environ, **FAST}, capture_output=True, text=True, timeout=20, check=False)
    assert proc.returncode != 0
    assert 'KV cache is needed' in proc.stderr
