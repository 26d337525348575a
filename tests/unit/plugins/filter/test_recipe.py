# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the recipe filters (plugins/filter/recipe.py) and the shipped recipe files."""

from __future__ import annotations

import copy
import json
import math
import pathlib
import re

import jsonschema
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.sparkfold.cluster.plugins.filter.recipe import (
    PLACEHOLDERS,
    SCHEMA_PATH,
    SGLANG_RING_ENV,
    FilterModule,
    _get,
    container_env_file,
    container_run,
    optional_fields,
    recipe_check,
    recipe_placeholders,
    recipe_problems,
    recipe_render,
    required_fields,
    schema_problems,
)

ROOT = pathlib.Path(__file__).resolve().parents[4]
RECIPES = sorted((ROOT / 'roles' / 'recipe' / 'recipes').glob('*.yml'))
TP2 = ROOT / 'roles' / 'recipe' / 'recipes' / 'dsv41-flash-tp2-zig.yml'
VLLM = ROOT / 'roles' / 'recipe' / 'recipes' / 'dsv41-flash-tp2-vllm.yml'
TFPY = ROOT / 'roles' / 'recipe' / 'recipes' / 'dsv41-flash-tp2-tfpy.yml'
RING = ROOT / 'roles' / 'recipe' / 'recipes' / 'dsv41-flash-tp4-ring-sglang.yml'


def load(path):
    return yaml.safe_load(path.read_text())


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {
        'recipe_check', 'recipe_problems', 'recipe_render', 'recipe_placeholders', 'container_run',
        'container_env_file'}


def test_placeholders_of_a_template_nested_sorted_once():
    assert recipe_placeholders({'env': {'A': '{rank}', 'B': 'x{rank}:{port}'}, 'args': ['{model_dir}', '--n', 2],
                                'n': None}) == ['model_dir', 'port', 'rank']
    assert recipe_placeholders('serve') == [] and recipe_placeholders([]) == []


@pytest.mark.parametrize('path', RECIPES, ids=[p.stem for p in RECIPES])
def test_only_the_ring_recipe_launches_with_the_bootstrap_interface(path):
    # The engine_service role needs the fabric role's record of the bootstrap interface only where the recipe's
    # launch names {bootstrap_interface}: the ring's; a pair's or a switch's recipe does not.
    recipe = load(path)
    ring = (recipe.get('fabric') or {}).get('topology') == 'ring'
    assert ('bootstrap_interface' in recipe_placeholders(recipe['launch'])) == ring


@pytest.mark.parametrize('path', RECIPES, ids=[p.stem for p in RECIPES])
def test_every_shipped_recipe_is_complete_and_named_after_its_file(path):
    recipe = load(path)
    assert recipe_problems(recipe) == []
    assert recipe['name'] == path.stem


def assert_refused_naming(recipe, change, problem):
    """A recipe changed by `change` is refused, and both recipe_problems and recipe_check name `problem`."""
    change(recipe)
    problems = recipe_problems(recipe)
    assert any(problem in p for p in problems), problems
    with pytest.raises(AnsibleFilterError, match=re.escape(problem)):
        recipe_check(recipe)


# Every flavour's required fields, each taken out of its shipped recipe in turn.
FLAVOUR_RECIPES = {'dsv41-zig': TP2, 'vllm-container': VLLM, 'tfpy-container': TFPY, 'sglang-container': RING}


@pytest.mark.parametrize(
    ('flavour', 'field'),
    [(flavour, field) for flavour in FLAVOUR_RECIPES for field in required_fields(flavour)],
)
def test_a_recipe_without_a_required_field_is_refused_naming_it(flavour, field):
    recipe = load(FLAVOUR_RECIPES[flavour])
    node = recipe
    parts = field.split('.')
    for part in parts[:-1]:
        node = node[part]
    del node[parts[-1]]
    with pytest.raises(AnsibleFilterError, match=re.escape(f'{field} is missing')):
        recipe_check(recipe, FLAVOUR_RECIPES[flavour].stem)


def test_every_problem_is_named_at_once():
    recipe = load(TP2)
    del recipe['engine']['commit']
    del recipe['kit']['repo_id']
    recipe['serve']['context'] = 'big'
    problems = recipe_problems(recipe)
    assert 'engine.commit is missing' in problems
    assert 'kit.repo_id is missing' in problems
    assert "serve.context must be a whole number, got 'big'" in problems


def test_consistency_rules():
    recipe = load(TP2)
    recipe['engine']['commit'] = 'fbbc971'
    recipe['serve']['parallel'] = 5
    recipe['launch']['rank0']['program'] = 'tensorfold'
    recipe['launch']['follower']['args'].append('{pool_size}')
    problems = recipe_problems(recipe)
    assert "engine.commit must be a full 40-hex commit sha, got 'fbbc971'" in problems
    assert any(p.startswith('serve.parallel 5 is more than serve.streams 4') for p in problems)
    assert any(p.startswith("launch.rank0.program 'tensorfold' is not one of engine.programs") for p in problems)
    assert 'launch, inputs or kit.verify name unknown placeholders: {pool_size}' in problems
    # The schema's own limits come first, alone: the rules between fields need a recipe that passes the schema.
    recipe['world'] = 1
    assert recipe_problems(recipe) == ['world must be at least 2, got 1']


def test_unknown_flavour_and_bool_for_int():
    assert recipe_problems({'flavour': 'llama'}) == [
        "flavour is 'llama', one of dsv41-zig, vllm-container, tfpy-container, sglang-container is needed"]
    recipe = load(TP2)
    recipe['world'] = True
    assert 'world must be a whole number, got True' in recipe_problems(recipe)


def test_tp2_recipe_follows_its_sources():
    """The relations the TP2 README's launch lines hold (bertholomus tp2 README @5e90ec93)."""
    r = load(TP2)
    rank0, follower = r['launch']['rank0'], r['launch']['follower']
    assert r['engine']['repo_url'] == 'https://github.com/bertholomus/TensorFold.git'
    assert r['engine']['programs']['server'] == 'native/bin/tensorfold-native'
    # the follower's --pool is rank 0's --context
    assert follower['args'][follower['args'].index('--pool') + 1] == '{context}'
    assert rank0['args'][rank0['args'].index('--context') + 1] == '{context}'
    # --engram comes with --token-map, and rank 0 reads the same files
    assert '--token-map' in follower['args'] and rank0['env']['TF_DS_TOKEN_MAP'] == '{token_map}'
    # the follower's switches mirror rank 0's
    for flag, var in (('--graphs', 'TF_DS_GRAPHS'), ('--side', 'TF_DS_HC_SIDE'), ('--prefetch', 'TF_DS_L2_PREFETCH'),
                      ('--aio', 'TF_DS_ENGRAM_AIO')):
        assert follower['args'][follower['args'].index(flag) + 1] == rank0['env'][var] == '1'
    # both ranks gather over the same RDMA devices
    assert rank0['env']['TF_RDMA_DEVICES'] == follower['args'][follower['args'].index('--rdma') + 1]
    for var in ('TF_TP_WORLD', 'TF_TP_MASTER', 'TF_TP_PORT', 'TF_DS_RANK_CACHE', 'TF_DS_KIT',
                'TENSORFOLD_CUDA_KERNELS', 'TF_DS_ENGRAM'):
        assert var in rank0['env']
    assert r['launch']['env'] == {'TF_DS_REPLAY_FLOOR': '1'}
    for flag in ('--max-tokens', '--temperature', '--top-p', '--top-k', '--backend'):
        assert flag in rank0['args']
    assert r['engram']['repo_id'] == 'deepseek-ai/DeepSeek-V4.1-Flash'
    assert r['capacity']['model'] == 'zig-pool'


def values(**extra):
    v = {k: f'<{k}>' for k in PLACEHOLDERS}
    v.update(api_key_args=[], thinking_args=['--thinking'], drafts_args=[], follower_drafts_args=[])
    v.update(extra)
    return v


def test_render_fills_in_and_splices_list_placeholders():
    r = load(TP2)
    argv = recipe_render(r['launch']['rank0']['args'], values(api_key_args=['--api-key-file', '/k'], context=1048576))
    assert argv[:2] == ['serve', '<model_dir>']
    assert argv[argv.index('--api-key-file') + 1] == '/k'
    assert argv[argv.index('--context') + 1] == '1048576'
    assert '--thinking' in argv and '{drafts_args}' not in argv
    env = recipe_render(r['launch']['rank0']['env'], values(kit_dir='/kit'))
    assert env['TENSORFOLD_CUDA_KERNELS'] == '/kit/aot'


def test_render_refuses_a_missing_value_and_a_list_inside_a_word():
    with pytest.raises(AnsibleFilterError, match=r'no value for \{rank\}'):
        recipe_render(['{rank}'], {})
    with pytest.raises(AnsibleFilterError, match='must stand alone'):
        recipe_render(['x{api_key_args}'], {'api_key_args': []})
    with pytest.raises(AnsibleFilterError, match='expected a list of arguments or a mapping'):
        recipe_render('serve', {})


def test_check_passes_the_recipe_through():
    r = load(TP2)
    checked = recipe_check(copy.deepcopy(r))
    # Every field of the recipe comes back as it was; only absent optional fields are added.

    def kept(given, returned):
        if isinstance(given, dict):
            return all(key in returned and kept(value, returned[key]) for key, value in given.items())
        return given == returned

    assert kept(r, checked)
    assert checked != r


TP4 = ROOT / 'roles' / 'recipe' / 'recipes' / 'dsv41-flash-tp4-zig.yml'

# bertholomus/deepseek-v4.1-tensorfold-tp4-4xgb10 scripts/serve.sh @6033ea48 with config.env.example @64c3d74's
# values, as the container sees its mounts (/model, /cache, /kit, /engram), for rank 3. The recipe runs the
# engine's embedded RDMA kernels (its `unverified` list says why), so `--rdma-kernels /engine/rdma_gather.fatbin`
# is left out of the follower's line and TF_DS_RDMA_KERNELS out of rank 0's environment.
TP4_FOLLOWER = (
    '/model /cache/rank-cache 3 4 $MASTER_IP 29760 /kit --pool 1048576 --engram /engram '
    '--token-map /cache/dsv41_token_map.json --rdma $RDMA_HCA --graphs 1 --side 1 --prefetch 1 --aio 1 '
    '--round-rows 48 --streams 16 --pool 2097152 --context 1048576')
TP4_RANK0 = (
    'serve /model --host 127.0.0.1 --port 18091 --name DeepSeek-V4.1-Flash-TP4 --context 1048576 --parallel 16 '
    '--thinking --max-tokens 32768 --temperature 1.0 --top-p 0.95 --top-k 20 --backend cuda')
TP4_RANK0_ENV = (
    'TF_TP_WORLD=4 TF_TP_MASTER=$MASTER_IP TF_TP_PORT=29760 TF_DS_RANK_CACHE=/cache/rank-cache TF_DS_KIT=/kit '
    'TENSORFOLD_CUDA_KERNELS=/kit/aot TF_DS_ENGRAM=/engram TF_DS_TOKEN_MAP=/cache/dsv41_token_map.json '
    'TF_DS_GRAPHS=1 TF_DS_HC_SIDE=1 TF_DS_L2_PREFETCH=1 TF_DS_ENGRAM_AIO=1 '
    'TF_DS_2D_GU=parity TF_DS_ROUND_ROWS=48 TF_DS_STREAMS=16 TF_DS_SERVED_K=solo TF_DS_WINDOW=2097152 '
    'TF_DS_ROUND_MS=14.5,17.4,19.9,22.3,24.0,25.9,27.2,28.5,29.9,31.2,32.5,33.8,35.2,36.5,37.8,39.2,40.5,41.8,'
    '43.2,44.5,45.8,47.1,48.5,49.8,51.1,52.5,53.8,55.1,56.5,57.8,59.1,60.4,61.8,63.1,64.4,65.8,67.1,68.4,69.8,'
    '71.1,72.4,73.7,75.1,76.4,77.7,79.1,80.4,81.7 TF_RDMA_DEVICES=$RDMA_HCA')


def tp4_values(rank):
    r = load(TP4)
    serve = r['serve']
    return values(
        model_dir='/model', rank_cache_dir='/cache/rank-cache', kit_dir='/kit', engram_dir='/engram',
        token_map='/cache/dsv41_token_map.json', master='$MASTER_IP', rendezvous_port=r['launch']['rendezvous_port'],
        rdma_devices='$RDMA_HCA', rank=rank, world=r['world'], host='127.0.0.1', port=18091,
        served_name='DeepSeek-V4.1-Flash-TP4', context=serve['context'], parallel=serve['parallel'],
        streams=serve['streams'], window=serve['window'], round_rows=serve['round_rows'],
        max_tokens=serve['max_tokens'], temperature=serve['temperature'], top_p=serve['top_p'], top_k=serve['top_k'],
        backend=serve['backend'])


def test_tp4_recipe_renders_the_launch_of_its_serve_script():
    r = load(TP4)
    assert recipe_render(r['launch']['follower']['args'], tp4_values(3)) == TP4_FOLLOWER.split()
    assert recipe_render(r['launch']['rank0']['args'], tp4_values(0)) == TP4_RANK0.split()
    env = recipe_render(r['launch']['env'], tp4_values(0))
    env.update(recipe_render(r['launch']['rank0']['env'], tp4_values(0)))
    assert env == dict(pair.split('=', 1) for pair in TP4_RANK0_ENV.split())
    # every rank gets ENGINE_ENV and the link's devices (serve.sh's rank() for ranks 3, 2, 1)
    follower_env = recipe_render(r['launch']['env'], tp4_values(3))
    assert follower_env['TF_DS_WINDOW'] == '2097152' and follower_env['TF_RDMA_DEVICES'] == '$RDMA_HCA'
    assert r['world'] == 4 and r['launch']['order'] == 'descending'  # serve.sh: for g in 3 2 1
    assert r['engine']['commit'] == '59402086381a42c74d53053443224eec2790b4c5'
    assert recipe_render(r['inputs']['args'], tp4_values(2)) == ['/model', '<inputs_dir>', '2']
    assert recipe_render(r['kit']['verify'], tp4_values(0)) == ['verify_kit.sh', '/model']


# bertholomus/TensorFold tools/dsv41-zig/build_inputs.sh @5e10970a1e2372313589641587bd6da85f070f05, TP2's inputs: the
# deepseek-v41-tp2 engine's first start, as it runs rank 1 (NAME is the roles' own container name; PORT its default).
TP2_FIRST_START = (
    'docker run -d --name $NAME --gpus all --network host --ipc host --ulimit memlock=-1 --ulimit stack=67108864 '
    '--cap-add IPC_LOCK --device /dev/infiniband -v $MODEL:/model:ro -v $ENGRAM:/engram:ro -v $CACHE:/root/.cache '
    '-e TF_DS_REPLAY=1 -e TF_DS_PREFILL_CHUNK=2048 -e TF_DS_RANK_CACHE=/root/.cache/tf-ds-rank '
    '-e TF_DS_RANK_CACHE_READERS=32 -e TF_DS_ENGRAM=/engram -e NCCL_IB_HCA=$HCA -e NCCL_IB_GID_INDEX=5 '
    '-e NCCL_SOCKET_IFNAME=$IFACE $IMAGE tensorfold serve /model --tp 2 --rank 1 --master $HEAD --host 127.0.0.1 '
    '--port 18891 --context 1048576 --vision --parallel 4 --mtp-drafts 5')


def docker_run_parts(argv, env=None):
    """A `docker run` line as what it runs: its options, mounts (docker's default mode rw), environment, image and
    command (the entry point first)."""
    opts, mounts, environment, command = set(), set(), dict(env or {}), []
    rest = list(argv[2:])
    while rest and rest[0].startswith('-'):
        flag = rest.pop(0)
        if flag in ('-d', '--detach'):
            opts.add(('--detach',))
        elif flag in ('-v', '--volume'):
            parts = rest.pop(0).split(':')
            mounts.add(tuple(parts) if len(parts) == 3 else (*parts, 'rw'))
        elif flag == '-e':
            key, value = rest.pop(0).split('=', 1)
            environment[key] = value
        elif flag == '--entrypoint':
            command.append(rest.pop(0))
        elif flag in ('--name', '--env-file'):
            rest.pop(0)
        else:
            opts.add((flag, rest.pop(0)))
    image = rest.pop(0)
    return {'runtime': argv[0], 'options': opts, 'mounts': mounts, 'env': environment, 'image': image,
            'command': command + rest}


def test_tp2_first_start_is_the_line_of_build_inputs_sh():
    """TP2's inputs are made as its pin makes them: the first start of build_inputs.sh, word for word."""
    r = load(TP2)
    first = r['inputs']['first_start']
    filled = values(model_dir='$MODEL', engram_dir='$ENGRAM', inputs_dir='$CACHE', rdma_devices='$HCA',
                    fabric_interface='$IFACE', master='$HEAD', rank=1, first_start_port=first['port'])
    env = recipe_render(first['env'], filled)
    argv = container_run(first, 'sparkfold-inputs-1', '$IMAGE', '/e', recipe_render(first['args'], filled),
                         values=filled, detach=True)
    assert docker_run_parts(argv, env) == docker_run_parts(TP2_FIRST_START.split())
    # build_inputs.sh: rank 0 `until ... /v1/models = 200`, `PORT=${PORT:-18891}`, `docker stop -t 30`
    assert first['ready'] == {'path': '/v1/models', 'status': 200}
    assert first['port'] == 18891 and first['stop_timeout_s'] == 30
    # "CACHE/tf-ds-rank/ ... -> TF_DS_RANK_CACHE / CACHE_DIR", "CACHE/dsv41_token_map.json ... -> TF_DS_TOKEN_MAP"
    assert r['inputs']['rank_cache_subdir'] == 'tf-ds-rank' and r['inputs']['token_map'] == 'dsv41_token_map.json'
    assert recipe_check(r)['inputs']['first_start']['image'] == ''  # published nowhere: the role refuses it empty


def test_tp2_recipe_uses_nothing_its_pinned_tree_lacks():
    """At 5e10970a the engine branch has no tools/dsv41-zig/inputs/ and no tf-dsv41-rank-cache (both only at the TP4
    branch's 59402086): the TP2 recipe copies no tree file and needs no rank-cache program or input tool."""
    r = load(TP2)
    assert r['engine']['commit'] == '5e10970a1e2372313589641587bd6da85f070f05'
    assert recipe_check(r)['engine']['tree_files'] == []
    assert sorted(r['engine']['programs']) == ['follower', 'server']
    assert not {'script', 'args', 'env', 'python_packages'} & set(r['inputs'])


def test_inputs_are_made_by_a_tool_or_by_the_first_start():
    r = load(TP2)
    r['inputs'].update(script='libexec/x.sh', args=[], env={})
    assert recipe_problems(r) == ["inputs has first_start and script, args, env: the inputs are made either by a tool "
                                  "(script, args, env) or by the engine's first start, not both"]
    r = load(TP2)
    del r['inputs']['first_start']
    assert recipe_problems(r) == ['inputs needs script, args and env (the tool that makes them) or first_start (the '
                                  'engine writes them on its first start)']


def test_container_run_detached_keeps_the_container():
    r = load(TP2)
    cmd = container_run(r['inputs']['first_start'], 'n', 'i', '/e', ['serve'], values=values(), detach=True)
    assert cmd[:4] == ['docker', 'run', '--detach', '--name'] and '--rm' not in cmd
    podman = container_run(dict(r['inputs']['first_start'], runtime='podman'), 'n', 'i', '/e', [], values=values(),
                           detach=True)
    assert podman[:6] == ['podman', 'run', '--detach', '--name', 'n', '--replace']


def docker_env_file(text):
    """The variables docker reads from an --env-file's text (docker/cli pkg/kvfile/kvfile.go @3d41bbac: lines at
    '\\n', a '\\r' before it dropped, leading whitespace dropped, '#' and empty lines skipped, the value verbatim)."""
    env = {}
    for line in text.split('\n'):
        line = line.removesuffix('\r').lstrip()
        if line and not line.startswith('#'):
            key, _sep, value = line.partition('=')
            env[key] = value
    return env


def test_container_env_file_is_one_line_a_variable_read_back_as_given():
    r = load(TP2)
    env = recipe_render(r['inputs']['first_start']['env'], values())
    text = container_env_file(env)
    assert text.endswith('\n') and text.count('\n') == len(env) == 8
    assert text.splitlines()[0] == 'NCCL_IB_GID_INDEX=5'
    assert docker_env_file(text) == env
    # spaces, '=', '#' and backslashes inside a value are the value's
    odd = {'A': 'x y', 'B': 'k=v', 'C': 'a#b', 'D': 'C:\\n', 'E': ''}
    assert docker_env_file(container_env_file(odd)) == odd


@pytest.mark.parametrize(('env', 'said'), [
    ({'TF_DS_RANK_CACHE': '/a\nTF_DS_ENGRAM=/b'}, 'TF_DS_RANK_CACHE holds a line break or NUL'),
    ({'X': 'a\r'}, 'X holds a line break or NUL'),
    ({'X': '"a b"'}, 'X="a b" is quoted: docker since kvfile @00155964 removes the quotes'),
    ({'X': "'a'"}, "X='a' is quoted"),
    ({'A B': '1'}, "the name 'A B' is not one a runtime reads"),
    ({'A=B': '1'}, "the name 'A=B' is not one a runtime reads"),
    ({'#A': '1'}, "the name '#A' is not one a runtime reads"),
    ({'': '1'}, "the name '' is not one a runtime reads"),
    ({'X': None}, 'X has no text value (NoneType)'),
    ({'X': ['a']}, 'X has no text value (list)'),
])
def test_container_env_file_refuses_what_a_runtime_reads_otherwise(env, said):
    with pytest.raises(AnsibleFilterError) as err:
        container_env_file(dict(env, GOOD='1'), "recipe 'r' inputs.first_start.env")
    assert str(err.value).startswith(
        "recipe 'r' inputs.first_start.env cannot be written as a container's --env-file: ")
    assert said in str(err.value) and 'GOOD' not in str(err.value)


def test_container_env_file_keeps_a_lone_quote_and_takes_a_mapping_only():
    assert container_env_file({'X': '"', 'Y': 'it\'s'}) == 'X="\nY=it\'s\n'
    with pytest.raises(AnsibleFilterError, match='must be a mapping of variables, got list'):
        container_env_file(['A=1'])


def test_window_and_round_rows_are_checked():
    r = load(TP4)
    r['serve']['window'] = 1000
    problems = recipe_problems(r)
    assert any(p.startswith('serve.window 1000 is less than serve.context 1048576') for p in problems)
    r['serve']['round_rows'] = 'many'
    assert recipe_problems(r) == ["serve.round_rows must be a whole number, got 'many'"]
    r = load(TP4)
    r['kit']['verify'].append('{original_dir}')
    assert 'launch, inputs or kit.verify name unknown placeholders: {original_dir}' in recipe_problems(r)


# ------------------------------------------------------------------ vllm-container (the vLLM overlay)
def test_container_rules_are_all_named_at_once():
    recipe = load(VLLM)
    container = recipe['container']
    container['image']['ref'] = 'ghcr.io/x/y@sha256:' + 'a' * 64
    container['image']['digest'] = 'latest'
    container['options']['network'] = 'bridge'
    container['options']['oom_score_adj'] = 500
    container['mounts'].append({'src': '{model_dir}', 'dest': 'model'})
    recipe['memory']['gate_gib'] = 100
    recipe['launch']['follower']['args'] = ['serve', '/model', '--kv-cache-dtype', 'fp8']
    recipe['capacity']['model'] = 'zig-pool'
    container['options']['ulimits']['stack'] = ['8m']
    problems = recipe_problems(recipe)
    assert any(p.startswith('container.options.ulimits.stack must be a limit') for p in problems)
    assert any(p.startswith("container.image.ref 'ghcr.io/x/y@sha256:") for p in problems)
    assert "container.image.digest must pin the pulled image (sha256: and 64 hex digits), got 'latest'" in problems
    assert any(p.startswith('container.options.network must be host') for p in problems)
    assert 'container.options.oom_score_adj 500 differs from memory.oom_score_adjust 1000' in problems
    assert any(p.startswith("container.mounts: {'src': '{model_dir}', 'dest': 'model'}") for p in problems)
    assert 'memory.gate_gib 100 is less than weights per rank 99.5 + boot margin 12 = 111.5 GiB' in problems
    assert 'launch.follower.args pass --kv-cache-dtype: the overlay picks fp8_ds_mla itself' in problems
    assert 'launch.follower.args must pass --node-rank {rank}' in problems
    assert 'launch.follower.args must hold {headless_args} (--headless on the workers)' in problems
    assert "capacity.model must be kv-per-token for vLLM, got 'zig-pool'" in problems
    with pytest.raises(AnsibleFilterError) as err:
        recipe_check(recipe)
    assert str(err.value).count(';') >= 10
    container['runtime'] = 'lxc'
    assert recipe_problems(recipe) == ["container.runtime must be one of podman, docker, got 'lxc'"]


def test_container_build_needs_a_pinned_base_unless_scratch():
    recipe = load(VLLM)
    recipe['container']['image'] = {'obtain': 'build', 'ref': 'localhost/x:1', 'build': {'base': 'vllm/vllm-openai:t'}}
    problems = recipe_problems(recipe)
    assert 'container.image.build.containerfile is missing' in problems
    assert any(p.startswith('container.image.build.base_digest must pin the base image') for p in problems)
    recipe['container']['image']['build'] = {'base': 'scratch', 'containerfile': '/c', 'context': '/d'}
    assert recipe_problems(recipe) == []


def test_vllm_recipe_follows_start_sh():
    """start.sh @145bb98: the head and the --headless worker run one line; ENV's settings."""
    r = load(VLLM)
    args = r['launch']['rank0']['args']
    assert r['launch']['follower']['args'] == args
    assert args[:2] == ['serve', '/model']
    flags = dict(zip(args, args[1:]))
    assert flags['--kv-cache-memory-bytes'] == '{kv_pool_bytes}' and r['serve']['kv_pool_bytes'] == 2684354560
    assert flags['--max-model-len'] == '{context}' and r['serve']['context'] == 600000
    assert flags['--max-num-seqs'] == '{parallel}' and r['serve']['parallel'] == 2
    assert flags['--block-size'] == '64' and flags['--master-port'] == '{rendezvous_port}'
    assert flags['--speculative-config'] == '{"method":"dspark","num_speculative_tokens":3}'
    assert flags['--hf-overrides'] == '{"engram_table_dir":"/engram-src"}'
    assert '--language-model-only' in args and '--kv-cache-dtype' not in args
    assert r['launch']['rendezvous_port'] == 29521 and r['launch']['order'] == 'followers_first'
    env = r['launch']['env']
    assert env['NCCL_IB_HCA'] == '{fabric_hca}' and env['NCCL_SOCKET_IFNAME'] == env['GLOO_SOCKET_IFNAME']
    assert 'NCCL_IB_GID_INDEX' not in env  # per NIC: read on each node by the roles
    assert r['container']['options']['stop_timeout'] == 60 and r['memory']['oom_score_adjust'] == 1000
    assert r['memory']['gate_gib'] == r['memory']['weights_gib_per_rank'] + r['memory']['boot_margin_gib']
    worker = recipe_render(args, values(headless_args=['--headless'], rank='1'))
    assert worker[worker.index('--node-rank') + 1] == '1' and '--headless' in worker
    head = recipe_render(args, values(headless_args=[], rank='0'))
    assert '--headless' not in head and head[head.index('--node-rank') + 1] == '0'


def test_container_run_podman_and_docker():
    r = load(VLLM)
    container = dict(r['container'], mounts=[{'src': '/srv/m', 'dest': '/model', 'mode': 'ro'}],
                     options=dict(r['container']['options'], oom_score_adj=1000))
    cmd = container_run(container, 'sparkfold-engine-0', 'img@sha256:' + 'b' * 64, '/etc/e.env', ['serve', '/model'])
    assert cmd[:6] == ['podman', 'run', '--rm', '--name', 'sparkfold-engine-0', '--replace']
    assert '--shm-size' not in cmd  # podman refuses it with --ipc host
    assert cmd[cmd.index('--oom-score-adj') + 1] == '1000'
    gpu = cmd.index('nvidia.com/gpu=all')
    assert cmd[gpu - 1] == '--device'
    assert '--ulimit' in cmd and 'memlock=-1' in cmd and '/srv/m:/model:ro' in cmd
    assert cmd[-5:] == ['--entrypoint', 'vllm', 'img@sha256:' + 'b' * 64, 'serve', '/model']
    assert cmd[cmd.index('--env-file') + 1] == '/etc/e.env'
    docker = container_run(dict(container, runtime='docker'), 'n', 'i', '/e', [], ['--cgroups=disabled'])
    assert '--replace' not in docker and docker[docker.index('--gpus') + 1] == 'all'
    assert docker[docker.index('--shm-size') + 1] == '32g' and '--cgroups=disabled' in docker
    no_limits = dict(container, options=dict(container['options'], ulimits={'memlock': None, 'stack': None}))
    assert '--ulimit' not in container_run(no_limits, 'n', 'i', '/e', [])
    with pytest.raises(AnsibleFilterError, match='runtime must be one of podman, docker'):
        container_run(dict(container, runtime='lxc'), 'n', 'i', '/e', [])


def test_container_run_fills_the_mounts_in():
    r = load(VLLM)
    # The slim Engram folder (engram.slim) is what the vLLM overlay mounts at /engram-src.
    paths = {'model_dir': '/srv/m', 'engram_src_dir': '/var/e', 'cache_dir': '/var/c'}
    cmd = container_run(r['container'], 'n', 'i', '/e', [], values=paths)
    assert '/srv/m:/model:ro' in cmd and '/var/e:/engram-src:ro' in cmd
    # start.sh @145bb98's JIT caches, read-write, kept on the host (issue 25 B13)
    volumes = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == '--volume']
    assert volumes[2:] == ['/var/c:/root/.cache/vllm:rw', '/var/c/triton:/root/.triton/cache:rw',
                           '/var/c/tilelang:/root/.tilelang/cache:rw']
    with pytest.raises(AnsibleFilterError, match=re.escape('no value for {engram_src_dir}')):
        container_run(r['container'], 'n', 'i', '/e', [], values={'model_dir': '/srv/m'})


@pytest.mark.parametrize('path', RECIPES, ids=[p.stem for p in RECIPES])
def test_no_shipped_recipe_holds_template_syntax(path):
    # include_vars templates every string of the recipe: '{{' or '{%' in a comment-free value fails the load.
    def strings(node):
        if isinstance(node, dict):
            return [s for v in node.values() for s in strings(v)]
        if isinstance(node, list):
            return [s for v in node for s in strings(v)]
        return [node] if isinstance(node, str) else []
    assert [s for s in strings(load(path)) if '{{' in s or '{%' in s or '{#' in s] == []


# ------------------------------------------------------------------ tfpy-container (TensorFold's Python engine)
def test_tfpy_needs_no_vllm_only_field():
    recipe = load(TFPY)
    assert 'kv_pool_bytes' not in recipe['serve'] and 'kv_bytes_per_token' not in recipe['capacity']
    assert '--node-rank' not in recipe['launch']['rank0']['args'] and recipe_problems(recipe) == []


@pytest.mark.parametrize(('change', 'problem'), [
    (lambda r: r['serve'].update(mtp_drafts=6),
     'serve.mtp_drafts must be 0 to 5, got 6: DSpark drafts at most 5 tokens a round and the engine refuses more'),
    (lambda r: r['serve'].update(mtp_drafts=-1), 'serve.mtp_drafts must be 0 to 5, got -1'),
    (lambda r: r['memory'].update(gate_gib=90, weights_gib_per_rank=70),
     "memory.gate_gib 90 is below memory.min_gate_gib 95: the engine's admission cannot fit the window below it"),
    (lambda r: r['memory'].update(weights_gib_per_rank=82),
     'memory.gate_gib 100 is less than weights per rank 82 + boot margin 18.66 = 100.66 GiB'),
    # sfxnz run.sh @38a06077: PARALLEL "must be 1, 2, 3 or 4: the family decodes at most 4 requests together
    # (MAX_LANES)"; sfxnz/TensorFold cuda/lanes.py @2258b00d refuses more slots at start
    (lambda r: r['serve'].update(parallel=5),
     'serve.parallel must be 1 to 4, got 5: the deepseek_v41 family decodes at most 4 requests together and refuses '
     'more lanes at start'),
    (lambda r: r['launch']['rank0']['args'].__setitem__(r['launch']['rank0']['args'].index('{parallel}'), '4'),
     'launch.rank0.args must pass --parallel {parallel}'),
    (lambda r: r['ready'].update(json=False), "ready must be path /health with json true"),
    (lambda r: r['ready'].update(path='/v1/models'), "got path '/v1/models', json True"),
    (lambda r: r['container'].update(api_key_env='VLLM_API_KEY'),
     "container.api_key_env must be TF_API_KEY or TENSORFOLD_API_KEY (what the engine reads), got 'VLLM_API_KEY'"),
    (lambda r: r.update(world=4), "world must be 2 for TensorFold's Python engine"),
    (lambda r: r['capacity'].update(model='kv-per-token'),
     "capacity.model must be engine-admission or token-pool for TensorFold's Python engine, got 'kv-per-token'"),
    (lambda r: r['launch'].update(order='rank0_first'),
     "launch.order must be one of followers_first, ascending, descending, got 'rank0_first'"),
    (lambda r: r['launch']['rank0']['args'].__setitem__(r['launch']['rank0']['args'].index('{mtp_drafts}'), '5'),
     'launch.rank0.args must pass --mtp-drafts {mtp_drafts}'),
    (lambda r: r['launch']['follower']['args'].__setitem__(r['launch']['follower']['args'].index('{rank}'), '0'),
     'launch.follower.args must pass --rank {rank}'),
    (lambda r: r['launch']['rank0']['args'].__setitem__(r['launch']['rank0']['args'].index('{master}'), '10.0.0.1'),
     'launch.rank0.args must pass --master {master}'),
    (lambda r: r['launch']['follower']['args'].extend(['--port', '{port}']),
     'launch.follower.args must be launch.rank0.args without --rank, --host, --port, --max-tokens (rank 0 refuses '
     'a rank 1 started with other serve flags); they differ in --port {port}'),
    (lambda r: r['launch']['follower']['args'].remove('--no-update-check'), 'they differ in --no-update-check'),
])
def test_tfpy_rules_name_what_is_wrong(change, problem):
    assert_refused_naming(load(TFPY), change, problem)


# sfxnz/DeepSeek-V4.1-Flash-EXL3-TensorFold-2x-DGX-Spark @38a06077, the one published system the tfpy recipe is.
SFX_SNAPSHOT = '/cache/huggingface/hub/models--sfxnz--DeepSeek-V4.1-Flash-EXL3/snapshots/' \
               '982b70452f399814f56b46272fd30394ae10d58c'


def test_tfpy_recipe_follows_run_sh():
    """run.sh @38a06077 serve_args: both ranks `tensorfold serve SNAPSHOT_IN_CONTAINER --tp 2 --rank R --master HEAD
    --master-port 29571 --name N --context 1048576 --parallel 4 --mtp-drafts 5 --top-p 1.0 --no-update-check
    --decode-share 0.5 --mtp-confidence 0.15 --no-thinking`, rank 0 adding --host, --port, --max-tokens 4096;
    rank 1 first."""
    r = load(TFPY)
    assert r['launch']['order'] == 'followers_first' and r['launch']['rendezvous_port'] == 29571
    assert (r['serve']['context'], r['serve']['parallel'], r['serve']['mtp_drafts']) == (1048576, 4, 5)
    assert r['memory']['gate_gib'] >= r['memory']['weights_gib_per_rank'] + r['memory']['boot_margin_gib']
    assert r['ready'] == {'path': '/health', 'json': True, 'models_path': '/v1/models', 'timeout_s': 1800}
    assert r['container']['entrypoint'] == 'tensorfold' and r['container']['api_key_env'] == 'TF_API_KEY'
    # smoke_chat.py @0495bf5 (sfxnz's vLLM sibling, whose probes the README says it takes unchanged)
    assert (r['smoke']['prompt'], r['smoke']['answer']) == ('What is 17*19? Return only the integer.', '323')
    # run.sh `-v "${TF_CACHE}/${TF_SHA}:/cache/tf"`: one kernel cache per engine commit (README: "A new `TF_SHA`
    # starts a new cache")
    assert r['container']['mounts'][1] == {'src': '{cache_dir}/' + r['engine']['commit'], 'dest': '/cache/tf',
                                           'mode': 'rw', 'create': True}
    v = values(thinking_args=['--no-thinking'], mtp_drafts='5', top_p='1.0', max_tokens='4096', master='192.168.100.1',
               world='2', context='1048576', parallel='4', served_name='deepseek-ai/DeepSeek-V4.1-Flash',
               rendezvous_port='29571')
    head = recipe_render(r['launch']['rank0']['args'], {**v, 'rank': '0'})
    worker = recipe_render(r['launch']['follower']['args'], {**v, 'rank': '1'})
    assert worker == ['serve', SFX_SNAPSHOT, '--tp', '2', '--rank', '1', '--master', '192.168.100.1', '--master-port',
                      '29571', '--name', 'deepseek-ai/DeepSeek-V4.1-Flash', '--context', '1048576', '--parallel', '4',
                      '--mtp-drafts', '5', '--top-p', '1.0', '--no-update-check', '--decode-share', '0.5',
                      '--mtp-confidence', '0.15', '--no-thinking']
    assert head == [*worker[:5], '0', *worker[6:], '--host', '<host>', '--port', '<port>', '--max-tokens', '4096']
    # run.sh container_env, identical on both ranks (the caches under /cache/tf, the HF cache read-only)
    assert r['launch']['env'] == {
        'HF_HOME': '/cache/huggingface', 'HF_HUB_OFFLINE': '1', 'TENSORFOLD_NO_UPDATE_CHECK': '1',
        'PYTHONUNBUFFERED': '1', 'PYTHONDONTWRITEBYTECODE': '1', 'TORCH_EXTENSIONS_DIR': '/cache/tf/torch_extensions',
        'TRITON_CACHE_DIR': '/cache/tf/triton', 'CUDA_CACHE_PATH': '/cache/tf/nv',
        'TORCH_ALLOW_TF32_CUBLAS_OVERRIDE': '0',
        'NCCL_SOCKET_IFNAME': '{fabric_interface}', 'NCCL_IB_HCA': '{rdma_devices}', 'NCCL_DEBUG': 'WARN'}
    assert r['launch']['rank0']['env'] == r['launch']['follower']['env'] == {}


def test_tfpy_is_one_published_system():
    """Issue 25 B9: every pin of the recipe is sfxnz @38a06077's (run.sh, docker/Dockerfile, README), none the vLLM
    recipe's or ashhart's 2.9 bpw deployment's: the pack's own repo and revision, its tokenizer in the same snapshot,
    its Engram tables in its shards 47/48 (no separate download), the engine the Dockerfile installs."""
    r = load(TFPY)
    assert r['weights'] == {
        'repo_id': 'sfxnz/DeepSeek-V4.1-Flash-EXL3', 'revision': '982b70452f399814f56b46272fd30394ae10d58c',
        'shards': 48, 'tokenizer': {'repo_id': 'sfxnz/DeepSeek-V4.1-Flash-EXL3',
                                    'revision': '982b70452f399814f56b46272fd30394ae10d58c'},
        'snapshot_checks': ['index_names_every_shard', 'safetensors_header_ends_at_file_size']}
    assert 'engram' not in r and recipe_problems(load(TFPY)) == []
    assert r['engine'] == {'repo_url': 'https://github.com/sfxnz/TensorFold.git',
                           'commit': 'b86514a5ac8700b32e7b24f1095349df4ce2b922'}
    image = r['container']['image']
    assert (image['obtain'], image['ref']) == ('build', 'localhost/tf-dsv41-flash:0.6.4-b86514a')
    assert (image['build']['base'], image['build']['base_digest']) == (
        'nvcr.io/nvidia/pytorch:26.07-py3', 'sha256:2140e699b3beaf7f96a0081fd9c9406bc3832b435cdb60dfa2d261f7d2f34a1c')
    assert [m['dest'] for m in r['container']['mounts']] == [SFX_SNAPSHOT, '/cache/tf']
    assert r['launch']['rank0']['args'][1] == r['launch']['follower']['args'][1] == SFX_SNAPSHOT
    assert 'shm_size' not in r['container']['options']
    vllm = load(VLLM)
    assert r['weights']['repo_id'] != vllm['weights']['repo_id']
    assert (r['serve']['served_name'], r['serve']['port']) == ('deepseek-ai/DeepSeek-V4.1-Flash', 8000)


def _run_sh_min_gate_gib(parallel, context):
    """run.sh @38a06077 MIN_MEM_GATE_GIB, its integer arithmetic in GiB/100 x 1048576: resident 75.99 + max(staging
    5.33, geometry 3.71 + 0.95 a further lane per 1048576-token window) + the reserve 12.10, rounded up."""
    floor = 371 * 1048576 + 95 * (parallel - 1) * context
    floor = max(floor, 533 * 1048576)
    return ((7599 + 1210) * 1048576 + floor + 100 * 1048576 - 1) // (100 * 1048576)


def test_tfpy_memory_is_run_shs_floor_at_the_recipes_lanes():
    """README @38a06077: "it refuses below 95 at the defaults, 94 at --parallel 1"; the preflight's weights + margin
    is the same floor before its rounding."""
    r = load(TFPY)
    assert (_run_sh_min_gate_gib(4, 1048576), _run_sh_min_gate_gib(1, 1048576)) == (95, 94)
    assert r['memory']['min_gate_gib'] == _run_sh_min_gate_gib(r['serve']['parallel'], r['serve']['context'])
    assert (r['memory']['gate_gib'], r['memory']['gate_timeout_s']) == (100, 600)
    assert r['memory']['weights_gib_per_rank'] == 75.99
    assert r['memory']['boot_margin_gib'] == round(max(5.33, 3.71 + 0.95 * 3) + 12.1, 2)
    assert math.ceil(r['memory']['weights_gib_per_rank'] + r['memory']['boot_margin_gib']) == 95
    assert 'engine_floor_gib' not in r['memory']


# ------------------------------------------------------------------ sglang-container (SGLang on the switchless ring)
def test_sglang_needs_no_separate_engram_download():
    recipe = load(RING)
    assert 'engram' not in recipe and recipe_problems(recipe) == []


def _env(name, value):
    def change(r):
        r['launch']['env'][name] = value
    return change


def _drop_env(name):
    def change(r):
        del r['launch']['env'][name]
    return change


@pytest.mark.parametrize(('change', 'problem'), [
    (lambda r: r.update(world=3),
     'world must be 4 on a ring ("Ring requires NNODES=TP_SIZE=EP_SIZE=4"), got 3'),
    (_env('EP_SIZE', '2'), "launch env of rank0 must set EP_SIZE={world} (boot.py builds --tp, --ep-size, --nnodes, "
                           "--node-rank, --dist-init-addr from it), got '2'"),
    (_env('NNODES', '4'), "launch env of follower must set NNODES={world}"),
    (_drop_env('DIST_INIT_ADDR'), "launch env of rank0 must set DIST_INIT_ADDR={master}:{rendezvous_port}"),
    (lambda r: r['launch']['follower']['env'].update(NODE_RANK='1'),
     "launch env of follower must set NODE_RANK={rank}"),
    (_env('NCCL_ALGO', 'Tree'), "launch env of rank0 must set NCCL_ALGO=Ring on a ring, got 'Tree'"),
    (_env('NCCL_NET', 'Socket'), "launch env of follower must set NCCL_NET=IB on a ring, got 'Socket'"),
    (_env('NCCL_IB_DISABLE', '1'), "must set NCCL_IB_DISABLE=0 on a ring"),
    (_env('NCCL_SOCKET_IFNAME', '{fabric_interface}'),
     "must set NCCL_SOCKET_IFNAME={bootstrap_interface} on a ring, got '{fabric_interface}'"),
    (_drop_env('GLOO_SOCKET_IFNAME'), "must set GLOO_SOCKET_IFNAME={bootstrap_interface} on a ring, got ''"),
    (_env('NCCL_IB_HCA', '{fabric_hca}'), "must set NCCL_IB_HCA={rdma_devices} on a ring"),
    (_drop_env('NCCL_SWITCHLESS_RING_ONLY'), "must set NCCL_SWITCHLESS_RING_ONLY=1 on a ring"),
    (_env('NCCL_MIN_NCHANNELS', '8'), "must set NCCL_MIN_NCHANNELS <= NCCL_MAX_NCHANNELS, both positive, on a ring "
                                      "(a fixed channel count), got '8' and '4'"),
    (_env('LD_LIBRARY_PATH', '/nccl'), "launch env of rank0 sets LD_LIBRARY_PATH: the patched NCCL goes over the "
                                       "image's pip NCCL (container.nccl_overlay)"),
    (lambda r: r['launch']['follower']['env'].update(LD_PRELOAD='/nccl/libnccl.so.2'),
     'launch env of follower sets LD_PRELOAD'),
    (lambda r: r['container'].update(mounts=r['container']['mounts'][:1]),
     'container.mounts must bind {nccl_library} over /opt/sglang/lib/python3.12/site-packages/nvidia/nccl/lib/'
     'libnccl.so.2 read-only'),
    (lambda r: r['container']['mounts'][1].update(mode='rw'), 'container.mounts must bind {nccl_library} over'),
    (lambda r: r['container']['nccl_overlay'].update(target='opt/libnccl.so.2'),
     "container.nccl_overlay.target 'opt/libnccl.so.2' must be an absolute path"),
    (lambda r: (r['container']['nccl_overlay'].update(source='/opt/nccl/libnccl.so.2'),
                r['container']['mounts'][1].update(src='/opt/nccl/libnccl.so.2')),
     "container.nccl_overlay.source must be {nccl_library}: the library the fabric role checked"),
    (lambda r: r['fabric'].update(topology='switch'),
     "fabric.topology must be ring when NCCL_SWITCHLESS_RING_ONLY=1, got 'switch'"),
    (lambda r: r['fabric'].update(topology='mesh'), "fabric.topology must be one of pair, switch, ring, got 'mesh'"),
    (lambda r: r['serve'].update(max_total_tokens=4000000),
     'serve.kv_pool_bytes 13366000000 is not serve.max_total_tokens 4000000 x capacity.kv_bytes_per_token 1670.75 '
     '= 6683000000'),
    (lambda r: r['capacity'].update(model='token-pool'), "capacity.model must be kv-per-token for SGLang"),
    (lambda r: r['ready'].update(path='/v1/models'), "ready.path must be /health"),
    (lambda r: r['ready'].pop('log_line'),
     "ready.log_line must be '^Ready: API on port {port}' while rank 0 runs boot.py's smoke test"),
    (lambda r: r['ready'].update(log_line='^Ready'), "ready.log_line must be '^Ready: API on port {port}'"),
    (lambda r: r['container'].update(api_key_env='VLLM_API_KEY'), "container.api_key_env must be API_KEY"),
    (lambda r: r['launch']['follower'].update(args=['-u', '/opt/dsv41/boot.py', 'health']),
     'launch.follower.args must be launch.rank0.args'),
    (lambda r: r['launch'].update(order='rank0_first'),
     "launch.order must be one of followers_first, ascending, descending, got 'rank0_first'"),
    (lambda r: r['launch']['env'].update(NCCL_IB_HCA='{rdma_device}'), 'name unknown placeholders: {rdma_device}'),
])
def test_sglang_rules_name_what_is_wrong(change, problem):
    assert_refused_naming(load(RING), change, problem)


def test_sglang_switched_fabric_needs_no_ring_settings():
    """Off the ring (NCCL_SWITCHLESS_RING_ONLY unset) start.sh injects none of the ring settings."""
    recipe = load(RING)
    recipe['fabric']['topology'] = 'switch'
    for key in ('NCCL_SWITCHLESS_RING_ONLY', 'NCCL_ALGO', 'NCCL_MIN_NCHANNELS', 'NCCL_SKIP_TREE_CONNECT'):
        del recipe['launch']['env'][key]
    recipe['launch']['env']['NCCL_SOCKET_IFNAME'] = '{fabric_interface}'
    recipe['world'] = 2
    assert recipe_problems(recipe) == []


def test_ring_recipe_follows_start_tp4_sh():
    """start.sh @e098520 + .env.tp4.example @12b3148 + files/nccl.sh: the environment boot.py reads, on every rank."""
    r = load(RING)
    assert r['world'] == 4 and r['fabric']['topology'] == 'ring'
    assert r['launch']['order'] == 'ascending' and r['launch']['rendezvous_port'] == 20000
    assert r['container']['entrypoint'] == 'python3'
    assert r['launch']['rank0']['args'] == r['launch']['follower']['args'] == ['-u', '/opt/dsv41/boot.py', 'run']
    env = r['launch']['env']
    for key, want in SGLANG_RING_ENV.items():
        assert env[key] == want
    ring_only = (env['NCCL_SKIP_TREE_CONNECT'], env['NCCL_IB_SUBNET_PREFIX_LEN'], env['NCCL_P2P_LEVEL'])
    assert ring_only == ('1', '24', 'SYS')
    assert (env['NCCL_MIN_NCHANNELS'], env['NCCL_MAX_NCHANNELS']) == ('4', '4')
    assert (env['MEM_FRACTION_STATIC'], env['CHUNKED_PREFILL_SIZE'], env['DSPARK_BLOCK_SIZE']) == ('0.80', '1024', '3')
    serve = r['serve']
    assert serve['context'] == 1048576 and serve['parallel'] == 8 and serve['max_total_tokens'] == 8000000
    assert r['launch']['rank0']['env']['SKIP_SMOKE'] == '0' and r['launch']['follower']['env']['SKIP_SMOKE'] == '1'
    overlay = r['container']['nccl_overlay']
    assert overlay['target'] == '/opt/sglang/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2'
    assert {'src': '{nccl_library}', 'dest': overlay['target'], 'mode': 'ro'} in r['container']['mounts']
    assert not any(k in env for k in ('LD_LIBRARY_PATH', 'LD_PRELOAD'))
    base = r['container']['image']['build']['base_digest']
    assert base == 'sha256:3dbc313030a6ef2c5d7de8ecf48e9aece722694a82182cb618cc82b588816349'
    assert (r['smoke']['prompt'], r['smoke']['answer']) == ('What is 19 + 23? Reply only with the number.', '42')
    rendered = recipe_render(env, values(rank='3', world='4', master='192.168.1.11', rendezvous_port='20000'))
    assert (rendered['NODE_RANK'], rendered['NNODES'], rendered['TP_SIZE']) == ('3', '4', '4')
    assert rendered['DIST_INIT_ADDR'] == '192.168.1.11:20000'
    run = container_run(dict(r['container'], options=dict(r['container']['options'], oom_score_adj=1000)),
                        'sparkfold-engine-3', 'img:1', '/etc/e.env', r['launch']['follower']['args'],
                        values=values(model_dir='/srv/models/dsv41', nccl_library='/opt/nccl/libnccl.so.2.30.7'))
    assert '/opt/nccl/libnccl.so.2.30.7:' + overlay['target'] + ':ro' in run
    assert run[-4:] == ['img:1', '-u', '/opt/dsv41/boot.py', 'run'] and '--privileged' in run
    assert run[run.index('--entrypoint') + 1] == 'python3'


@pytest.mark.parametrize('path', RECIPES, ids=[p.stem for p in RECIPES])
def test_recipe_check_fills_in_every_optional_field(path):
    recipe = load(path)
    checked = recipe_check(copy.deepcopy(recipe))
    # Every field with a default in the schema is there, wherever the recipe has the section that holds it.
    for field in optional_fields():
        section = field.rpartition('.')[0]
        if _get(checked, section)[0]:
            assert _get(checked, field)[0], field
    # The defaults are values the schema itself accepts: a checked recipe passes the schema.
    assert schema_problems(checked) == []
    # A field the recipe sets keeps its value; the recipe passed in is not changed.
    assert checked['serve']['context'] == recipe['serve']['context']
    assert recipe == load(path)
    if 'container' in recipe:
        assert _get(checked, 'container.image.digest')[0]
        assert _get(checked, 'container.api_key_env')[0]
    if 'engine' in recipe:
        assert isinstance(checked['engine']['tree_files'], list)


def test_recipe_check_defaults_are_the_documented_ones():
    recipe = load(VLLM)
    for field in ('window', 'round_rows', 'streams', 'max_tokens', 'drafts'):
        recipe['serve'].pop(field, None)
    recipe['launch'].pop('env', None)
    recipe['container'].pop('api_key_env', None)
    checked = recipe_check(recipe)
    assert checked['serve']['window'] == recipe['serve']['context']
    # One default for the streams, the Zig engine's own (a role once read 4 here and 1 there).
    assert checked['serve']['streams'] == 4
    assert checked['serve']['round_rows'] == 16
    assert checked['serve']['max_tokens'] == 0
    assert checked['serve']['drafts'] is True
    assert checked['launch']['env'] == {}
    assert checked['container']['api_key_env'] == 'VLLM_API_KEY'
    # A section only some recipes have is not made up for a recipe without it.
    assert 'engine' not in checked and 'kit' not in checked and 'inputs' not in checked


def test_recipe_check_keeps_a_recipe_value_over_the_default():
    recipe = load(TP2)
    recipe['serve']['streams'] = 2
    recipe['serve']['parallel'] = 2
    recipe['serve']['window'] = recipe['serve']['context'] * 2
    checked = recipe_check(recipe)
    assert checked['serve']['streams'] == 2
    assert checked['serve']['window'] == recipe['serve']['context'] * 2


def test_the_vllm_recipe_mounts_the_slim_engram_folder_it_makes():
    # MiaAI's start.sh mounts the folder prepare_engram_src.py builds, never the raw download (issue 25 A2).
    r = load(VLLM)
    assert r['engram']['slim'] is True
    mounts = {m['dest']: m['src'] for m in r['container']['mounts']}
    assert mounts['/engram-src'] == '{engram_src_dir}'
    assert recipe_problems(r) == []
    r['engram']['slim'] = False
    assert ('{engram_src_dir} names the slim Engram folder, which only a recipe with engram.slim: true makes: set '
            'engram.slim: true, or use {engram_dir}') in recipe_problems(r)
    r['engram']['slim'] = 'yes'
    assert "engram.slim must be true or false, got 'yes'" in recipe_problems(r)


# ------------------------------------------------------------------ the recipe format (JSON Schema)
def test_the_schema_is_a_valid_draft_7_schema():
    schema = json.loads(pathlib.Path(SCHEMA_PATH).read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    assert schema['$schema'] == 'http://json-schema.org/draft-07/schema#'
    # Shipped with the collection, next to the recipes (roles/ is in what ansible-galaxy collection build packs).
    assert pathlib.Path(SCHEMA_PATH).resolve() == ROOT / 'roles' / 'recipe' / 'files' / 'recipe.schema.json'


@pytest.mark.parametrize('path', RECIPES, ids=[p.stem for p in RECIPES])
def test_every_shipped_recipe_validates_and_names_the_schema_for_editors(path):
    assert schema_problems(load(path)) == []
    first = path.read_text().splitlines()[0]
    assert first == '# yaml-language-server: $schema=../files/recipe.schema.json'
    assert (path.parent / '../files/recipe.schema.json').resolve() == pathlib.Path(SCHEMA_PATH).resolve()


@pytest.mark.parametrize(('change', 'problem'), [
    # an unknown field, top level and nested, named with its path and the nearest known field
    (lambda r: r.update(titel='x'), 'titel is not a recipe field: did you mean title?'),
    (lambda r: r['serve'].update(contex=524288), 'serve.contex is not a recipe field: did you mean serve.context?'),
    (lambda r: r['launch']['rank0'].update(argv=[]),
     'launch.rank0.argv is not a recipe field: did you mean launch.rank0.args?'),
    (lambda r: r['engine'].update(tree_files=[{'src': 'tools/x.sh', 'dest': 'libexec/x.sh', 'mod': '0755'}]),
     'engine.tree_files[0].mod is not a recipe field: did you mean engine.tree_files[0].mode?'),
    (lambda r: r['weights']['tokenizer'].update(zzz=1),
     'weights.tokenizer.zzz is not a recipe field: the fields of weights.tokenizer are repo_id, revision'),
    # a wrong type
    (lambda r: r['serve'].update(context='524288'), "serve.context must be a whole number, got '524288'"),
    (lambda r: r['serve'].update(thinking='yes'), "serve.thinking must be true or false, got 'yes'"),
    (lambda r: r['engine'].update(build_args='install native'),
     "engine.build_args must be a list, got 'install native'"),
    (lambda r: r['launch']['rank0']['env'].update(TF_DS_GRAPHS=['1']),
     "launch.rank0.env.TF_DS_GRAPHS must be a string or a number or true or false, got ['1']"),
    (lambda r: r['memory'].update(gate_gib=True), 'memory.gate_gib must be a number, got True'),
    # a bad choice
    (lambda r: r['capacity'].update(model='zig'),
     "capacity.model must be one of zig-pool, kv-per-token, token-pool, engine-admission, got 'zig'"),
    (lambda r: r['launch'].update(order='rank0_first'),
     "launch.order must be one of followers_first, ascending, descending, got 'rank0_first'"),
    # limits, and a blank or null required field
    (lambda r: r['launch'].update(rendezvous_port=70000), 'launch.rendezvous_port must be at most 65535, got 70000'),
    (lambda r: r['kit'].update(repo_id='  '), 'kit.repo_id is missing'),
    (lambda r: r['kit'].update(repo_id=None), 'kit.repo_id is missing'),
    # a tool's package that is not an exact pin (the hf_cli venv holds exact pins only: venv_pins)
    (lambda r: r['inputs'].update(python_packages=['tokenizers>=0.23']),
     "inputs.python_packages[0] must be an exact pin, name==version, got 'tokenizers>=0.23'"),
])
def test_the_schema_refuses_with_one_exact_message(change, problem):
    recipe = load(TP2)
    change(recipe)
    assert recipe_problems(recipe) == [problem]
    with pytest.raises(AnsibleFilterError) as err:
        recipe_check(recipe, 'tp2')
    assert str(err.value) == f"recipe 'tp2' is refused: {problem}"


def test_an_override_is_checked_as_the_recipe_is():
    # the role merges the overrides in first (combine recursive); a misspelled override is no silent no-op
    recipe = load(VLLM)
    recipe['container']['options']['stop_timout'] = 30
    recipe['serve']['context'] = None  # a null field is a missing one
    assert recipe_problems(recipe) == [
        'serve.context is missing',
        'container.options.stop_timout is not a recipe field: did you mean container.options.stop_timeout?']


def test_a_flavour_narrows_a_type_and_needs_its_own_fields():
    recipe = load(TFPY)
    recipe['serve']['mtp_drafts'] = ''
    del recipe['container']['api_key_env']
    assert recipe_problems(recipe) == ['container.api_key_env is missing',
                                       "serve.mtp_drafts must be a whole number, got ''"]


def test_a_null_optional_field_gets_its_default():
    recipe = load(VLLM)
    recipe['serve']['streams'] = None
    recipe['serve']['window'] = None
    checked = recipe_check(recipe)
    assert checked['serve']['streams'] == 4 and checked['serve']['window'] == recipe['serve']['context']


def _container_types(value):
    if isinstance(value, dict):
        return {type(value)}.union(*[_container_types(item) for item in value.values()])
    if isinstance(value, list):
        return {type(value)}.union(*[_container_types(item) for item in value])
    return set()


def test_recipe_check_through_ansible_returns_plain_containers():
    """Ansible hands the filter its variables as lazily templated containers; the checked recipe is plain dicts and
    lists (a deep copy of the lazy containers kept them lazy and cost about 6 s per host in every playbook run)."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    returned = []

    def check(recipe, name):
        returned.append(recipe_check(recipe, name))
        return returned[-1]

    templar = Templar(loader=DataLoader(), variables={'recipe_loaded': load(TP2)})
    templar.environment.filters['recipe_check'] = check
    templar.template(trust_as_template("{{ recipe_loaded | combine({}) | recipe_check('tp2') }}"))
    assert _container_types(returned[0]) == {dict, list}


# ------------------------------------------------------------ the smoke request follows each recipe (issue 25 B11)
@pytest.mark.parametrize(('path', 'switch'), [
    # MiaAI-Lab/DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks README @145bb98 smoke:
    # "chat_template_kwargs":{"enable_thinking":false}
    (VLLM, {'enable_thinking': False}),
    # MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks start.sh @e098520 cmd_smoke, boot.py smoke(): {"thinking": false}
    (RING, {'thinking': False}),
    # bertholomus/deepseek-v4.1-tensorfold-tp4-4xgb10 scripts/serve.sh @6033ea48 check: {"enable_thinking": false}
    (TP2, {'enable_thinking': False}),
    (ROOT / 'roles' / 'recipe' / 'recipes' / 'dsv41-flash-tp4-zig.yml', {'enable_thinking': False}),
    # sfxnz run.sh @38a06077 THINKING=0: the server does not think, the request needs no switch
    (TFPY, {}),
], ids=['vllm', 'ring', 'tp2', 'tp4', 'tfpy'])
def test_each_recipe_smoke_switches_thinking_off_as_its_source(path, switch):
    r = recipe_check(load(path))
    assert r['smoke']['chat_template_kwargs'] == switch
    assert bool(switch) == r['serve']['thinking']


def test_a_thinking_recipe_without_the_smoke_switch_is_refused():
    recipe = load(VLLM)
    del recipe['smoke']['chat_template_kwargs']
    assert recipe_problems(recipe) == [
        'smoke.chat_template_kwargs is missing: serve.thinking is on, so the smoke request must switch thinking off '
        "the way the source's smoke does (for example {enable_thinking: false}), or a reply that ends while the "
        'engine still thinks fails a healthy engine']
    recipe['serve']['thinking'] = False
    assert recipe_problems(recipe) == []


# ------------------------------------------------------------------ vLLM scheduling and caches (issue 25 B13)
def test_the_vllm_long_prefill_cap_leaves_the_budget_256_tokens():
    """.env.example @cefd594: MAX_NUM_BATCHED_TOKENS=1536, LONG_PREFILL_TOKEN_THRESHOLD=1280 ("Keep MNBT - THRESHOLD
    >= 256"); the 1024/1792 pair of @1add668 capped nothing (vLLM cuts to the threshold, then to the budget)."""
    r = load(VLLM)
    flags = dict(zip(r['launch']['rank0']['args'], r['launch']['rank0']['args'][1:]))
    assert (flags['--max-num-batched-tokens'], flags['--long-prefill-token-threshold']) == ('1536', '1280')
    args = r['launch']['rank0']['args']
    args[args.index('--max-num-batched-tokens') + 1] = '1024'
    args[args.index('--long-prefill-token-threshold') + 1] = '1792'
    assert recipe_problems(r) == [
        f'launch.{rank}.args: --long-prefill-token-threshold 1792 leaves --max-num-batched-tokens 1024 less than 256 '
        'tokens a step for the other requests (a threshold at or over the budget does nothing): keep the budget - '
        'the threshold >= 256, at most 768' for rank in ('rank0', 'follower')]


def test_only_a_read_write_cache_under_cache_dir_is_created():
    r = load(VLLM)
    r['container']['mounts'][0]['create'] = True
    r['container']['mounts'][2]['mode'] = 'ro'
    assert recipe_problems(r) == [
        'container.mounts: {model_dir} -> /model has create: true, which only a read-write cache under {cache_dir} '
        'may have (the roles make that directory)',
        'container.mounts: {cache_dir} -> /root/.cache/vllm has create: true, which only a read-write cache under '
        '{cache_dir} may have (the roles make that directory)']


# ------------------------------------------------------------ memory figures from their own sources (issue 25 B12)
TP4 = ROOT / 'roles' / 'recipe' / 'recipes' / 'dsv41-flash-tp4-zig.yml'


@pytest.mark.parametrize(('path', 'borrowed', 'source'), [
    # no TP2 source publishes a gate: the Python deployment's Makefile does (ashhart deploy/dsv41-tp2 @43aee467); the
    # wait is derived from the followers' connect window (its own unverified entry)
    (TP2, ['memory.gate_gib 112'], 'MEM_READY_GIB ?= 112'),
    # TP4 publishes only its lowest free memory at 500K; the gate is derived, the floor is TP2's
    (TP4, ['memory.gate_gib 80', 'memory.serving_floor_gib 5'], '50 / 51 / 52 / 52 GiB'),
], ids=['tp2', 'tp4'])
def test_memory_figures_no_source_of_the_recipe_shows_are_unverified_with_their_reason(path, borrowed, source):
    recipe = load(path)
    entry = next(u for u in recipe['unverified'] if 'memory.gate_gib' in u)
    for figure in borrowed:
        field, value = figure.rsplit(' ', 1)
        assert figure in ' '.join(entry.split()) and str(_get(recipe, field)[1]) == value
    assert source in entry


# ------------------------------------------------------------ citations that quote their source (issue 25 B14)
def test_no_recipe_quotes_config_json_inside_download_sh_engram_files():
    """MiaAI-Lab/DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks download.sh @64e2ad62: ENGRAM_FILES holds the two shards and
    the index; config.json is fetched by name after them. A quote with config.json inside the array is wrong."""
    quoted = re.compile(r'ENGRAM_FILES=\(\s*"config\.json"')
    for path in [*RECIPES, ROOT / 'docs' / 'recipes.md']:
        text = ' '.join(line.lstrip('# ') for line in path.read_text().splitlines())
        assert not quoted.search(text), path.name
    assert 'config.json fetched by name after them' in ' '.join(
        line.lstrip('# ') for line in TP2.read_text().splitlines())


# ------------------------------------------------------------ tfpy: the CUDA-extension cache (issue 25 B9)
def test_tfpy_keeps_its_cuda_extension_cache_on_the_host():
    """sfxnz run.sh @38a06077: `-v "${TF_CACHE}/${TF_SHA}:/cache/tf"` with TORCH_EXTENSIONS_DIR, TRITON_CACHE_DIR and
    CUDA_CACHE_PATH under it; a --rm container without it compiles next to the loaded model on every start."""
    r = load(TFPY)
    assert {'src': '{cache_dir}/' + r['engine']['commit'], 'dest': '/cache/tf', 'mode': 'rw', 'create': True} \
        in r['container']['mounts']
    assert all(r['launch']['env'][k].startswith('/cache/tf/')
               for k in ('TORCH_EXTENSIONS_DIR', 'TRITON_CACHE_DIR', 'CUDA_CACHE_PATH'))
    cmd = container_run(r['container'], 'n', 'i', '/e', [],
                        values={'model_dir': '/m', 'cache_dir': '/var/lib/sparkfold/engine-cache'})
    assert f"/var/lib/sparkfold/engine-cache/{r['engine']['commit']}:/cache/tf:rw" in cmd
    assert f'/m:{SFX_SNAPSHOT}:ro' in cmd


TP4 = ROOT / 'roles' / 'recipe' / 'recipes' / 'dsv41-flash-tp4-zig.yml'


def test_zig_recipes_record_the_fixed_rdma_gid_index_and_rank_0s_listen_ports():
    """model.zig @09bc7166: the decode ring's `.gid_index = 5` on TP2 and TP4; prompt2d.zig @ea990ff7 Fan.open: rank 0
    listens on PORT + g - 1 for follower g (TP4: 29760-29762; TP2: the rendezvous port alone)."""
    tp2, tp4 = load(TP2), load(TP4)
    assert tp2['launch']['rdma_gid_index'] == 5 and tp4['launch']['rdma_gid_index'] == 5
    assert tp4['launch']['listen_ports'] == [29760, 29761, 29762]
    assert 'listen_ports' not in tp2['launch']
    for recipe in (load(VLLM), load(TFPY), load(RING)):
        assert 'rdma_gid_index' not in recipe['launch']
    assert recipe_problems(tp4) == []
    tp4['launch']['listen_ports'] = [29760]
    assert ('launch.listen_ports [29760] are not the ports rank 0 listens on: rendezvous_port + g - 1 for each '
            'follower g, [29760, 29761, 29762]') in recipe_problems(tp4)
    tp2['launch']['rdma_gid_index'] = 256
    assert any(p.startswith('launch.rdma_gid_index') for p in recipe_problems(tp2)), recipe_problems(tp2)


def test_readiness_follows_each_recipes_source():
    """TP4 serve.sh @6033ea48: /v1/models lists the name, then a 4-token chat, thinking off; SGLang start.sh @e0985205:
    boot.py's banner after its smoke test and warm-up; a head that skips the smoke (SKIP_SMOKE=1) is /health alone."""
    tp4, ring, tp2 = load(TP4), load(RING), load(TP2)
    # The waits the sources give: serve.sh's 240 x 5 s, start.sh's READY_TIMEOUT 360 x 10 s (the units' start budget
    # is computed from them, tests/unit/roles/test_engine_start_budget.py); TP2 publishes none: the format's default.
    assert 'timeout_s' not in tp2['ready']
    assert recipe_check(copy.deepcopy(tp2))['ready']['timeout_s'] == 1800
    assert tp4['ready'] == {'path': '/health', 'models_path': '/v1/models',
                            'chat': {'prompt': 'Say OK.', 'max_tokens': 4,
                                     'chat_template_kwargs': {'enable_thinking': False}}, 'timeout_s': 1200}
    assert ring['ready'] == {'path': '/health', 'log_line': '^Ready: API on port {port}', 'timeout_s': 3600}
    assert recipe_problems(ring) == []
    ring['ready'].pop('log_line')
    ring['launch']['rank0']['env']['SKIP_SMOKE'] = '1'
    assert recipe_problems(ring) == []
    tp2['ready']['log_line'] = '^Ready'
    assert any(p.startswith("ready.log_line reads rank 0's container log: only a container flavour")
               for p in recipe_problems(tp2)), recipe_problems(tp2)
    tp4['ready']['chat']['max_tokens'] = 0
    assert any(p.startswith('ready.chat.max_tokens') for p in recipe_problems(tp4)), recipe_problems(tp4)


def test_zig_followers_connect_window_bounds_the_memory_gate():
    """prompt2d.zig @ea990ff7: a follower retries rank 0 for 300 s after its own load; rank 0 loads after its memory
    gate, so the gate's wait must stay below the window (the Makefile's 600 s did not)."""
    for path in (TP2, TP4):
        recipe = load(path)
        assert recipe['launch']['follower_connect_window_s'] == 300
        assert recipe['memory']['gate_timeout_s'] == 240
        assert recipe_problems(recipe) == []
        recipe['memory']['gate_timeout_s'] = 600
        assert ('memory.gate_timeout_s 600 is not below launch.follower_connect_window_s 300: a follower that loaded '
                'its weights retries rank 0 for 300 s only, and rank 0 loads its own after its memory gate'
                ) in recipe_problems(recipe)


# ------------------------------------------------------------ fc25: the container recipes against start.sh again
def test_sglang_ring_mounts_the_host_directories_start_sh_mounts():
    """MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks start.sh @e0985205 docker_common_args (head) and cmd_serve (workers):
    `-v "$HOME/.cache:/root/.cache"`, `-v "$STATE_DIR:/state"` (STATE_PATH, the DSpark SPS/STS tables) and
    `-v "$ENGRAM_DIR:/engram"` (DSV41_PACKED_DIR) on every rank. The recipe mounted none of them: every start of the
    --rm container began with an empty cache and no place for the tables or the packed shards."""
    r = load(RING)
    mounts = {m['dest']: m for m in r['container']['mounts']}
    for dest, src in (('/root/.cache', '{cache_dir}/cache'), ('/state', '{cache_dir}/state'),
                      ('/engram', '{cache_dir}/engram')):
        assert mounts[dest] == {'src': src, 'dest': dest, 'mode': 'rw', 'create': True}, dest
    env = r['launch']['env']
    assert (env['STATE_PATH'], env['DSV41_PACKED_DIR']) == ('/state', '/engram')
    assert env['DSPARK_SPS_TABLE'].startswith('/state/') and env['DSPARK_STS_TABLE'].startswith('/state/')
    assert recipe_problems(r) == []
    cmd = container_run(r['container'], 'n', 'i', '/e', [],
                        values={'model_dir': '/m', 'nccl_library': '/n/libnccl.so.2', 'cache_dir': '/var/c'})
    volumes = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == '--volume']
    assert volumes[2:] == ['/var/c/cache:/root/.cache:rw', '/var/c/state:/state:rw', '/var/c/engram:/engram:rw']


def test_container_recipes_record_the_sources_readiness_waits():
    """The readiness waits of the launch scripts: MiaAI EXL3 start.sh @145bb98 `READY_TIMEOUT="${READY_TIMEOUT:-1500}"`
    (.env.example sets none), MiaAI DGX-Sparks start.sh @e0985205 `${READY_TIMEOUT:-360}` rounds of `sleep 10`."""
    assert load(VLLM)['ready'] == {'path': '/health', 'timeout_s': 1500}
    assert load(RING)['ready']['timeout_s'] == 3600


def test_the_zig_recipes_install_pillow_on_rank_0_s_host_and_a_container_recipe_may_not():
    """pil.zig @24bbde8e: rank 0 decodes every image format but PNG in a `python3 -I` child with Pillow; the Zig ranks
    run on the host, so the distribution's python3-pil goes to rank 0's node (engine.server_packages). A container
    recipe's ranks run in their image: host packages would change nothing, and are refused."""
    for path in (TP2, TP4):
        assert load(path)['engine']['server_packages'] == ['python3-pil'], path
    assert recipe_check(load(TFPY))['engine']['server_packages'] == []
    tfpy = load(TFPY)
    tfpy['engine']['server_packages'] = ['python3-pil']
    assert any(p.startswith('engine.server_packages are installed on the host of rank 0')
               for p in recipe_problems(tfpy)), recipe_problems(tfpy)
    tp4 = load(TP4)
    tp4['engine']['server_packages'] = ['Python3 Pil']
    assert any('server_packages' in p for p in recipe_problems(tp4)), recipe_problems(tp4)
