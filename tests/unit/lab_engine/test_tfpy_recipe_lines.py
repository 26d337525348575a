# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped TensorFold Python engine recipe's own launch lines (roles/recipe/recipes/dsv41-flash-tp2-tfpy.yml),
rendered by the recipe filters as the engine_service role renders them (recipe_check, recipe_render, container_run:
the entry point and arguments after the image), with its launch environment, against the lab engine's strict
`tensorfold serve --tp 2` personality: rank 1 then rank 0 come up, /health answers JSON with ok true (what the
unit's gate waits for with SPARKFOLD_READY_JSON) with the recipe's 4 lanes, the API key reaches the engine through
the recipe's variable and a chat completion answers the recipe's smoke question (17*19, sfxnz README @38a06077). An
inconsistent line is refused by recipe_check and by the engine. Only the container path of the snapshot is swapped
for this test's directory (the sfxnz pack carries its Engram tables in its own shards: no Engram folder)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfold.cluster.plugins.filter.recipe import container_run, recipe_check, recipe_render

from tests.labengine import HOST, SERVE_FAST, free_port, make_model, request, wait_until
from tests.labengine import stop_procs as stop

ROOT = pathlib.Path(__file__).resolve().parents[3]
RECIPE = ROOT / 'roles' / 'recipe' / 'recipes' / 'dsv41-flash-tp2-tfpy.yml'
GATE = ROOT / 'roles' / 'engine_service' / 'files' / 'sparkfold-engine-gate.py'
FAST = {**SERVE_FAST, 'SIM_RENDEZVOUS_TIMEOUT_S': '5'}
NAME = 'deepseek-ai/DeepSeek-V4.1-Flash'
KEY = 'sk-lab-tfpy'


@pytest.fixture
def bins(container_engine_bin):
    """OUT/bin with tensorfold (`zig build containers`, built once per session: tests/unit/conftest.py)."""
    return container_engine_bin


def load(**serve):
    recipe = yaml.safe_load(RECIPE.read_text())
    recipe['serve'].update(serve)
    return recipe_check(recipe)


def line(recipe, rank, model, mport, hport):
    """(program, argv) of one rank: container_run's entry point and arguments after the image, as the unit runs."""
    launch = recipe['launch']['rank0' if rank == 0 else 'follower']
    serve = recipe['serve']
    values = {'served_name': NAME, 'host': HOST, 'port': hport, 'world': recipe['world'], 'rank': rank,
              'master': HOST, 'rendezvous_port': mport, 'context': serve['context'], 'parallel': serve['parallel'],
              'mtp_drafts': serve['mtp_drafts'],
              'top_p': serve['top_p'], 'max_tokens': serve['max_tokens'],
              'thinking_args': ['--thinking'] if serve['thinking'] else ['--no-thinking']}
    args = recipe_render(launch['args'], values)
    cmd = container_run(recipe['container'], f'sparkfold-engine-{rank}', 'localhost/sparkfold-engine:t', '/e.env',
                        args, values={'model_dir': str(model), 'cache_dir': '/unused'})
    entry = cmd.index('--entrypoint')
    assert cmd[entry + 2] == 'localhost/sparkfold-engine:t'
    weights = recipe['container']['mounts'][0]['dest']
    return cmd[entry + 1], [str(model) if a == weights else a for a in cmd[entry + 3:]]


def environment(recipe, rank):
    """The container's environment as engine-container.env.j2 writes it: the launch env, the key on rank 0."""
    env = recipe_render({**recipe['launch']['env'], **recipe['launch']['rank0' if rank == 0 else 'follower']['env']},
                        {'fabric_interface': 'lo', 'rdma_devices': 'rocep1s0f1,roceP2p1s0f1'})
    if rank == 0:
        env[recipe['container']['api_key_env']] = KEY
    return {**os.environ, **env, **FAST}


def start(bins, program, argv, env):
    return subprocess.Popen([str(bins / program), *argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def test_the_recipes_rank1_then_rank0_serve(bins, tmp_path):
    recipe = load()
    model = make_model(tmp_path / 'model')
    mport, hport = free_port(), free_port()
    program1, argv1 = line(recipe, 1, model, mport, 0)
    program0, argv0 = line(recipe, 0, model, mport, hport)
    assert program0 == program1 == 'tensorfold'
    assert argv0[argv0.index('--mtp-drafts') + 1] == argv1[argv1.index('--mtp-drafts') + 1] == '5'
    assert '--port' not in argv1 and argv1[argv1.index('--rank') + 1] == '1'
    assert argv0[argv0.index('--parallel') + 1] == argv1[argv1.index('--parallel') + 1] == '4'
    spec = importlib.util.spec_from_file_location('sparkfold_engine_gate', GATE)
    gate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gate)
    url = f'http://{HOST}:{hport}/health'
    rank1 = start(bins, program1, argv1, environment(recipe, 1))
    rank0 = start(bins, program0, argv0, environment(recipe, 0))
    try:
        assert wait_until(lambda: gate.health_state(url, 2, json_only=True)[0] or rank0.poll() is not None, 20)
        assert rank0.poll() is None, rank0.stderr.read()
        # With the key set, /health stays open and answers the JSON ready form; the rest needs the Bearer key.
        assert request(hport, 'GET', '/health') == (200, {'status': 'ok'})
        assert request(hport, 'GET', '/v1/models')[0] == 401
        auth = {'Authorization': f'Bearer {KEY}'}
        status, models = request(hport, 'GET', '/v1/models', headers=auth)
        assert status == 200 and [m['id'] for m in models['data']] == [NAME]
        body = {'model': NAME, 'max_tokens': 32, 'temperature': 0,
                'messages': [{'role': 'user', 'content': recipe['smoke']['prompt']}]}
        status, reply = request(hport, 'POST', '/v1/chat/completions', body, headers=auth)
        assert status == 200, reply
        assert recipe['smoke']['answer'] in reply['choices'][0]['message']['content']
        assert rank1.poll() is None
    finally:
        stop(rank0, rank1)


def test_without_a_key_health_says_ok_true(bins, tmp_path):
    recipe = load()
    model = make_model(tmp_path / 'model')
    mport, hport = free_port(), free_port()
    env0 = environment(recipe, 0)
    del env0[recipe['container']['api_key_env']]
    rank1 = start(bins, *line(recipe, 1, model, mport, 0), environment(recipe, 1))
    rank0 = start(bins, *line(recipe, 0, model, mport, hport), env0)
    try:
        assert _listening(hport, rank0), rank0.stderr.read() if rank0.poll() is not None else 'no /health'
        status, health = request(hport, 'GET', '/health')
        assert status == 200 and health['ok'] is True and health['context_length'] == recipe['serve']['context']
        assert health['streams']['max'] == recipe['serve']['parallel'] == 4
    finally:
        stop(rank0, rank1)


def _listening(port, proc):
    def up():
        if proc.poll() is not None:
            return True
        try:
            return request(port, 'GET', '/health', timeout=2)[0] == 200
        except OSError:
            return False
    return wait_until(up, 20) and proc.poll() is None


def run_rank0_with(bins, tmp_path, **serve):
    """Rank 0 run once by the recipe's line with serve settings changed, as the roles would render it."""
    recipe = yaml.safe_load(RECIPE.read_text())
    recipe['serve'].update(serve)
    model = make_model(tmp_path / 'model')
    return subprocess.run([str(bins / 'tensorfold'), *line(recipe, 0, model, free_port(), free_port())[1]],
                          env=environment(recipe, 0), capture_output=True, text=True, timeout=20, check=False)


def test_more_than_five_drafts_is_refused_by_the_check_and_by_the_engine(bins, tmp_path):
    with pytest.raises(AnsibleFilterError, match=re.escape('serve.mtp_drafts must be 0 to 5, got 6')):
        load(mtp_drafts=6)
    done = run_rank0_with(bins, tmp_path, mtp_drafts=6)
    assert done.returncode == 2, done.stderr
    assert '--mtp-drafts 6: DSpark drafts at most 5 tokens a round' in done.stderr


def test_a_rank1_line_that_differs_is_refused_by_the_check_and_by_rank0(bins, tmp_path):
    recipe = yaml.safe_load(RECIPE.read_text())
    args = recipe['launch']['follower']['args']
    args[args.index('--context') + 1] = '4096'
    with pytest.raises(AnsibleFilterError, match=re.escape('launch.follower.args must be launch.rank0.args')):
        recipe_check(recipe)
    model = make_model(tmp_path / 'model')
    mport = free_port()
    rank0 = start(bins, *line(recipe, 0, model, mport, free_port()), environment(recipe, 0))
    try:
        program, argv = line(recipe, 1, model, mport, 0)
        done = subprocess.run([str(bins / program), *argv], env=environment(recipe, 1), capture_output=True,
                              text=True, timeout=20, check=False)
        assert done.returncode == 2, done.stderr
        assert 'rank 0 refused rank 1: rank 1 was started with other serve flags' in done.stderr
    finally:
        stop(rank0)


def test_more_than_four_lanes_is_refused_by_the_check_and_by_the_engine(bins, tmp_path):
    """sfxnz run.sh @38a06077: PARALLEL "must be 1, 2, 3 or 4: the family decodes at most 4 requests together
    (MAX_LANES)"; sfxnz/TensorFold cuda/lanes.py @2258b00d: `lanes: {slots} slots, 1 to {MAX_LANES}` (ValueError)."""
    with pytest.raises(AnsibleFilterError, match=re.escape('serve.parallel must be 1 to 4, got 5')):
        load(parallel=5)
    done = run_rank0_with(bins, tmp_path, parallel=5)
    assert done.returncode == 1, done.stderr
    assert 'tensorfold: lanes: 5 slots, 1 to 4' in done.stderr
