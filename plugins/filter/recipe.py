# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that check a deployment recipe and render its launch lines.

Documentation lives in the sidecar files next to this one (recipe_check.yml, recipe_render.yml,
recipe_placeholders.yml).
A recipe is one data file per published system (roles/recipe/recipes/<name>.yml): the engine, its
build, the kit, the per-node inputs, the weights, the launch lines of every rank, the capacity
model, the memory thresholds, the smoke test and the published figures, each with its source.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import os
import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

# The flavours whose ranks run in containers (the container section, the image, the env file).
CONTAINER_FLAVOURS = ('vllm-container', 'tfpy-container', 'sglang-container')
_DIGEST_RE = re.compile(r'^sha256:[0-9a-f]{64}$')
# SGLang on a switchless ring (MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks files/nccl.sh @e098520 nccl_validate_config,
# switchless_ring_args): the environment every rank of a ring must carry, and its world.
SGLANG_RING_WORLD = 4
SGLANG_RING_ENV = {'NCCL_SWITCHLESS_RING_ONLY': '1', 'NCCL_ALGO': 'Ring', 'NCCL_NET': 'IB', 'NCCL_IB_DISABLE': '0',
                   'NCCL_IB_SUBNET_AWARE_ROUTING': '1', 'NCCL_SOCKET_IFNAME': '{bootstrap_interface}',
                   'GLOO_SOCKET_IFNAME': '{bootstrap_interface}', 'NCCL_IB_HCA': '{rdma_devices}'}
# What boot.py (the SGLang overlay image's entry point) must be given on every rank to build its sglang.launch_server
# line (1890peachypeachy/DeepSeek-v4.1-Flash-DGX-Sparks boot.py @79f656a: NNODES, NODE_RANK, TP_SIZE, EP_SIZE,
# DIST_INIT_ADDR "required when NNODES>1").
SGLANG_ENV = {'NODE_RANK': '{rank}', 'NNODES': '{world}', 'TP_SIZE': '{world}', 'EP_SIZE': '{world}',
              'DIST_INIT_ADDR': '{master}:{rendezvous_port}'}
# Two NCCL runtimes abort DeepEP (MiaAI docs/switchless-ring.md Pitfall 2): the patched one goes over the pip path.
SGLANG_NO_LOADER_ENV = ('LD_LIBRARY_PATH', 'LD_PRELOAD')
# vLLM's long-prefill cap leaves the other requests of a step this many tokens of the batch budget (MiaAI-Lab/
# DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks .env.example @1add6687: "Keep MNBT - THRESHOLD >= 256"; @cefd594b: "1280 =
# 1536 - 256 at the shipped chunk"): a threshold at or over --max-num-batched-tokens caps nothing.
VLLM_PREFILL_SHARE = 256
# TensorFold's Python engine (sfxnz/DeepSeek-V4.1-Flash-EXL3-TensorFold-2x-DGX-Spark run.sh @38a06077: MAX_MTP_DRAFTS=5,
# "DSpark drafts at most 5 tokens a round").
TFPY_MAX_MTP_DRAFTS = 5
# The deepseek_v41 family's lanes (run.sh @38a06077: "PARALLEL=... must be 1, 2, 3 or 4: the family decodes at most 4
# requests together (MAX_LANES)"; README @38a06077: "`--parallel` takes 1 to 4"; sfxnz/TensorFold
# src/tensorfold/families/deepseek_v41/cuda/lanes.py @2258b00d: `if not 0 < slots <= MAX_LANES: raise ValueError`).
TFPY_MAX_LANES = 4
# run.sh @38a06077 serve_args: `tensorfold serve` flags rank 0 alone passes (rank 1 has no HTTP port); every other
# flag must be the same on both ranks (the engine refuses a rank 1 started with other serve flags).
TFPY_RANK0_ONLY = ('--host', '--port', '--max-tokens')
_SHA_RE = re.compile(r'^[0-9a-f]{40}$')
_PLACEHOLDER_RE = re.compile(r'\{([a-z_0-9]+)\}')

# What each launch placeholder means; the roles fill them in (recipe_render).
PLACEHOLDERS = {
    'model_dir': 'the model store of this node',
    'inputs_dir': "the engine's per-node inputs directory",
    'rank_cache_dir': 'the rank cache directory (inputs_dir/<rank_cache_subdir>)',
    'token_map': "the Engram token map (inputs_dir/<token_map>)",
    'kit_dir': 'the verified kernel kit',
    'engram_dir': 'the Engram tables on local disk',
    'engram_src_dir': 'the slim Engram folder (engram.slim: shards 47/48 linked, an index of the embed tables only)',
    'cache_dir': "this node's engine cache (JIT kernels, compiled extensions), kept across restarts",
    'prefix': "the engine's current build",
    'python': 'a Python for the input tools',
    'rank': "this node's rank",
    'world': 'the number of ranks',
    'master': "rank 0's fabric address",
    'rendezvous_port': "rank 0's rendezvous port",
    'rdma_devices': "the rails' RDMA devices, comma separated",
    'host': 'the address the API listens on',
    'port': 'the API port',
    'served_name': 'the name the model is served under',
    'context': 'serve.context',
    'parallel': 'serve.parallel',
    'streams': 'serve.streams',
    'window': "serve.window (the streams' shared positions; serve.context when the recipe has none)",
    'round_rows': "serve.round_rows (a round's rows)",
    'max_tokens': 'serve.max_tokens',
    'temperature': 'serve.temperature',
    'top_p': 'serve.top_p',
    'top_k': 'serve.top_k',
    'backend': 'serve.backend',
    'api_key_args': '--api-key-file FILE when an API key is set, else nothing',
    'thinking_args': '--thinking or --no-thinking (serve.thinking)',
    'drafts_args': 'nothing, or --no-drafts when serve.drafts is off',
    'follower_drafts_args': 'nothing, or --drafts 0 when serve.drafts is off',
    'fabric_interface': "this node's rail 0 interface (the one CX7 port NCCL and Gloo use)",
    'fabric_hca': "this node's rail 0 RDMA device (one HCA per node)",
    'fabric_address': "this node's rail 0 fabric address",
    'headless_args': 'nothing on rank 0, --headless on the other ranks (vLLM)',
    'kv_pool_bytes': 'serve.kv_pool_bytes (the pinned KV pool, bytes)',
    'mtp_drafts': 'serve.mtp_drafts (DSpark drafts a round, TensorFold Python engine)',
    'max_total_tokens': 'serve.max_total_tokens (the pinned KV pool, tokens: SGLang)',
    'node_address': "this node's management address (ansible_host unless sparkfold_management_address)",
    'first_start_port': "inputs.first_start.port (rank 0's HTTP port while the engine's first start writes the inputs)",
    'bootstrap_interface': "the interface of this node's management address (a ring's NCCL/Gloo bootstrap)",
    'nccl_library': 'the NCCL library the fabric role checked on this node (fabric_nccl_library)',
}

# The recipe format: which fields exist, their types, the fields each flavour needs, the choices of the fields with
# fixed choices and the value an optional field takes when a recipe leaves it out. One JSON Schema file shipped with
# the roles (editors read it too: the yaml-language-server line at the top of every shipped recipe). Fields are
# added there; this file keeps only the rules between fields that a schema cannot say.
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'roles', 'recipe', 'files',
                           'recipe.schema.json')
# The word for each JSON Schema type in a message.
_TYPE_WORDS = {'string': 'a string', 'integer': 'a whole number', 'number': 'a number', 'boolean': 'true or false',
               'array': 'a list', 'object': 'a mapping', 'null': 'null'}
# The pattern of a field that must not be blank (an empty string is a missing value there).
_NOT_BLANK = '\\S'
# The pattern of a pip requirement the venv holds (venv_pins takes exact pins only).
_EXACT_PIN = '^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!_-]*$'
# A field whose default is another field's value (serve.window: serve.context).
_DEFAULT_FROM = 'x-default-from'


@functools.lru_cache(maxsize=None)
def recipe_schema():
    """The recipe format (roles/recipe/files/recipe.schema.json), loaded once."""
    with open(SCHEMA_PATH, encoding='utf-8') as handle:
        return json.load(handle)


@functools.lru_cache(maxsize=None)
def _validator():
    # Imported here, not with the module: every task that uses one of this collection's filters loads this file
    # in a fresh worker process, and jsonschema's import was an eighth of a no-op engine run's controller time;
    # only recipe_check validates.
    try:
        import jsonschema
    except ImportError as exc:
        raise AnsibleFilterError('recipe_check needs the Python library jsonschema on the controller '
                                 f'(pip install jsonschema, as requirements.txt pins it): {exc}') from exc
    return jsonschema.Draft7Validator(recipe_schema())


def _walk_required(schema, prefix=''):
    """The dotted paths a (sub)schema requires, nested requirements under each required section."""
    paths = []
    for key in schema.get('required', []):
        path = f'{prefix}{key}'
        paths.append(path)
        paths.extend(_walk_required(schema.get('properties', {}).get(key, {}), f'{path}.'))
    return paths


def required_fields(flavour):
    """Every field a recipe of flavour must have, as dotted paths (from the schema)."""
    schema = recipe_schema()
    paths = _walk_required(schema)
    for rule in schema.get('allOf', []):
        if rule['if']['properties']['flavour']['const'] == flavour:
            paths.extend(p for p in _walk_required(rule['then']) if p not in paths)
    return paths


def _walk_defaults(schema, prefix=''):
    out = {}
    for key, sub in schema.get('properties', {}).items():
        if 'default' in sub:
            out[f'{prefix}{key}'] = sub['default']
        elif _DEFAULT_FROM in sub:
            out[f'{prefix}{key}'] = (_DEFAULT_FROM, sub[_DEFAULT_FROM])
        out.update(_walk_defaults(sub, f'{prefix}{key}.'))
    return out


def optional_fields():
    """{dotted path: default} of every field with a default in the schema; a default taken from another field is
    (x-default-from, that field's path)."""
    return _walk_defaults(recipe_schema())


def _get(recipe, path):
    node = recipe
    for part in path.split('.'):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _is_type(value, types):
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _dotted(parts):
    out = ''
    for part in parts:
        out += f'[{part}]' if isinstance(part, int) else (f'.{part}' if out else to_text(part))
    return out


def _without_nulls(node, schema):
    """node less the null fields its schema names (a null field is a missing one: it gets its default, or is
    refused as missing when required); nulls where the schema names no field (env values, ulimits) stay."""
    if isinstance(node, dict):
        props = schema.get('properties', {})
        return {k: _without_nulls(v, props.get(k, {})) for k, v in node.items() if not (v is None and k in props)}
    if isinstance(node, list) and isinstance(schema.get('items'), dict):
        return [_without_nulls(v, schema['items']) for v in node]
    return node


def _words(types):
    types = types if isinstance(types, list) else [types]
    return ' or '.join(_TYPE_WORDS.get(t, t) for t in types)


def _say(error):
    """Short sentences naming the field for one schema error."""
    path, kind, want, value = list(error.absolute_path), error.validator, error.validator_value, error.instance
    here = _dotted(path)
    if kind == 'required':
        return [f'{_dotted([*path, key])} is missing' for key in want if key not in value]
    if kind == 'additionalProperties':
        known = list(error.schema.get('properties', {}))
        out = []
        for key in value:
            if key in known:
                continue
            near = difflib.get_close_matches(to_text(key), known, n=1, cutoff=0.6)
            where = f' of {here}' if here else ''
            hint = (f'did you mean {_dotted([*path, near[0]])}?' if near
                    else f"the fields{where} are {', '.join(known)}")
            out.append(f'{_dotted([*path, key])} is not a recipe field: {hint}')
        return out
    if kind == 'type':
        return [f'{here} must be {_words(want)}, got {value!r}']
    if kind == 'enum':
        return [f"{here} must be one of {', '.join(to_text(w) for w in want)}, got '{to_text(value)}'"]
    if kind == 'minimum':
        return [f'{here} must be at least {want}, got {value!r}']
    if kind == 'maximum':
        return [f'{here} must be at most {want}, got {value!r}']
    if kind == 'pattern' and want == _NOT_BLANK:
        return [f'{here} is missing']
    if kind == 'pattern' and want == _EXACT_PIN:
        return [f"{here} must be an exact pin, name==version, got '{to_text(value)}'"]
    return [f'{here or "the recipe"}: {error.message}']


def schema_problems(recipe):
    """The recipe's problems against the schema (roles/recipe/files/recipe.schema.json), as short sentences."""
    problems = []
    for error in _validator().iter_errors(_without_nulls(recipe, recipe_schema())):
        problems.extend(p for p in _say(error) if p not in problems)
    return problems


def _placeholders(value):
    if isinstance(value, str):
        return set(_PLACEHOLDER_RE.findall(value))
    if isinstance(value, list):
        return set().union(*[_placeholders(v) for v in value]) if value else set()
    if isinstance(value, dict):
        return set().union(*[_placeholders(v) for v in value.values()]) if value else set()
    return set()


def recipe_problems(recipe):
    """Every problem of a recipe, as short sentences naming the field; [] when it is complete."""
    if not isinstance(recipe, dict):
        return [f'a recipe is a mapping, got {type(recipe).__name__}']
    flavour = recipe.get('flavour')
    if flavour is None:
        return ['flavour is missing']
    flavours = recipe_schema()['properties']['flavour']['enum']
    if flavour not in flavours:
        return [f"flavour is '{to_text(flavour)}', one of {', '.join(flavours)} is needed"]
    # The schema first (fields, types, choices, unknown keys); the rules between fields need a recipe that passes it.
    problems = schema_problems(recipe)
    if problems:
        return problems
    if flavour == 'dsv41-zig':
        if not _SHA_RE.match(recipe['engine']['commit']):
            problems.append(f"engine.commit must be a full 40-hex commit sha, got '{recipe['engine']['commit']}'")
        for rank in ('rank0', 'follower'):
            program = recipe['launch'][rank]['program']
            if program not in recipe['engine']['programs']:
                problems.append(f"launch.{rank}.program '{program}' is not one of engine.programs "
                                f"({', '.join(sorted(recipe['engine']['programs']))})")
        inputs = recipe['inputs']
        tool = [key for key in ('script', 'args', 'env') if key in inputs]
        if 'first_start' in inputs and tool:
            problems.append(f"inputs has first_start and {', '.join(tool)}: the inputs are made either by a tool "
                            '(script, args, env) or by the engine\'s first start, not both')
        elif 'first_start' not in inputs and len(tool) != 3:
            problems.append('inputs needs script, args and env (the tool that makes them) or first_start (the engine '
                            'writes them on its first start)')
        if recipe['serve']['parallel'] > recipe['serve']['streams']:
            problems.append(f"serve.parallel {recipe['serve']['parallel']} is more than serve.streams "
                            f"{recipe['serve']['streams']}: this engine serves TF_DS_STREAMS streams at once")
        # bertholomus/TensorFold zig/src/families/dsv41/prompt2d.zig @ea990ff7 Fan.open: rank 0 listens on PORT + g - 1
        # for follower g (g = 1 .. world - 1).
        launch = recipe['launch']
        ports = [launch['rendezvous_port'] + g for g in range(recipe['world'] - 1)]
        window = launch.get('follower_connect_window_s')
        if window is not None and recipe['memory']['gate_timeout_s'] >= window:
            problems.append(f"memory.gate_timeout_s {recipe['memory']['gate_timeout_s']} is not below "
                            f"launch.follower_connect_window_s {window}: a follower that loaded its weights retries "
                            f"rank 0 for {window} s only, and rank 0 loads its own after its memory gate")
        if 'listen_ports' in launch and launch['listen_ports'] != ports:
            problems.append(f"launch.listen_ports {launch['listen_ports']} are not the ports rank 0 listens on: "
                            f"rendezvous_port + g - 1 for each follower g, {ports}")
    if recipe.get('engine', {}).get('server_packages') and flavour != 'dsv41-zig':
        problems.append('engine.server_packages are installed on the host of rank 0, where a dsv41-zig rank runs; a '
                        f'{flavour} rank runs in its container: put them in its image')
    if 'log_line' in recipe['ready'] and flavour not in CONTAINER_FLAVOURS:
        problems.append('ready.log_line reads rank 0\'s container log: only a container flavour '
                        f"({', '.join(sorted(CONTAINER_FLAVOURS))}) has one")
    if flavour in CONTAINER_FLAVOURS:
        problems.extend(_container_problems(recipe))
    if flavour == 'vllm-container':
        problems.extend(_vllm_problems(recipe))
    if flavour == 'tfpy-container':
        problems.extend(_tfpy_problems(recipe))
    if flavour == 'sglang-container':
        problems.extend(_sglang_problems(recipe))
    serve = recipe['serve']
    if serve['thinking'] and not (recipe['smoke'].get('chat_template_kwargs') or {}):
        problems.append('smoke.chat_template_kwargs is missing: serve.thinking is on, so the smoke request must switch '
                        "thinking off the way the source's smoke does (for example {enable_thinking: false}), or a "
                        'reply that ends while the engine still thinks fails a healthy engine')
    if _is_type(serve.get('window'), int) and serve['window'] < serve['context']:
        problems.append(f"serve.window {serve['window']} is less than serve.context {serve['context']}: "
                        'the streams share the window, a request takes at most the context')
    templates = [recipe['launch'], recipe.get('inputs', {}), (recipe.get('kit') or {}).get('verify', []),
                 [m.get('src') for m in (recipe.get('container') or {}).get('mounts') or [] if isinstance(m, dict)],
                 ((recipe.get('container') or {}).get('nccl_overlay') or {}).get('source', '')]
    unknown = sorted(_placeholders(templates) - set(PLACEHOLDERS))
    if unknown:
        names = ', '.join('{' + u + '}' for u in unknown)
        problems.append(f'launch, inputs or kit.verify name unknown placeholders: {names}')
    slim = (recipe.get('engram') or {}).get('slim', False)
    if 'engram_src_dir' in _placeholders(templates) and not slim:
        problems.append('{engram_src_dir} names the slim Engram folder, which only a recipe with engram.slim: true '
                        'makes: set engram.slim: true, or use {engram_dir}')
    return problems


def _container_problems(recipe):
    """The rules of every recipe whose ranks run in containers (CONTAINER_FLAVOURS)."""
    problems = []
    container = recipe['container']
    image, options = container['image'], container['options']
    obtain = image['obtain']
    if '@' in image['ref']:
        problems.append(f"container.image.ref '{image['ref']}' must be a name and tag: the digest goes in "
                        'container.image.digest')
    if obtain == 'pull' and not _DIGEST_RE.match(to_text(image.get('digest') or '')):
        problems.append(f"container.image.digest must pin the pulled image (sha256: and 64 hex digits), "
                        f"got '{to_text(image.get('digest') or '')}'")
    if obtain == 'build':
        build = image.get('build')
        if not isinstance(build, dict):
            problems.append('container.image.build is missing (base, base_digest, containerfile, context)')
        else:
            for key in ('base', 'containerfile', 'context'):
                if not isinstance(build.get(key), str) or not build[key].strip():
                    problems.append(f'container.image.build.{key} is missing')
            if build.get('base') != 'scratch' and not _DIGEST_RE.match(to_text(build.get('base_digest') or '')):
                problems.append('container.image.build.base_digest must pin the base image (sha256: and 64 hex '
                                f"digits) unless the base is scratch, got '{to_text(build.get('base_digest') or '')}'")
    for key in ('network', 'ipc'):
        if options[key] != 'host':
            problems.append(f"container.options.{key} must be host (the ranks talk over the fabric and share "
                            f"memory with the host), got '{options[key]}'")
    oom = options.get('oom_score_adj', recipe['memory']['oom_score_adjust'])
    if oom != recipe['memory']['oom_score_adjust']:
        problems.append(f"container.options.oom_score_adj {oom!r} differs from memory.oom_score_adjust "
                        f"{recipe['memory']['oom_score_adjust']}")
    for key, value in options['ulimits'].items():
        if value is not None and not (isinstance(value, (str, int)) and not isinstance(value, bool)):
            problems.append(f'container.options.ulimits.{key} must be a limit (a string or number; null = the '
                            f'runtime\'s default), got {value!r}')
    for mount in container['mounts']:
        if (not isinstance(mount, dict) or not isinstance(mount.get('src'), str) or not mount['src']
                or not isinstance(mount.get('dest'), str) or not mount['dest'].startswith('/')
                or mount.get('mode', 'ro') not in ('ro', 'rw')):
            problems.append(f'container.mounts: {mount!r} is not {{src, dest (absolute), mode ro or rw}}')
        elif mount.get('create') and (mount.get('mode', 'ro') != 'rw' or not mount['src'].startswith('{cache_dir}')):
            problems.append(f"container.mounts: {mount['src']} -> {mount['dest']} has create: true, which only a "
                            'read-write cache under {cache_dir} may have (the roles make that directory)')
    memory = recipe['memory']
    boot = memory['weights_gib_per_rank'] + memory['boot_margin_gib']
    if memory['gate_gib'] < boot:
        problems.append(f"memory.gate_gib {memory['gate_gib']} is less than weights per rank "
                        f"{memory['weights_gib_per_rank']} + boot margin {memory['boot_margin_gib']} = {boot:g} GiB")
    return problems


def _vllm_problems(recipe):
    """The vLLM overlay's own rules (flavour vllm-container)."""
    problems = []
    if recipe['capacity']['model'] != 'kv-per-token':
        problems.append(f"capacity.model must be kv-per-token for vLLM, got '{recipe['capacity']['model']}'")
    for rank in ('rank0', 'follower'):
        args = [to_text(a) for a in recipe['launch'][rank]['args']]
        if '--kv-cache-dtype' in args:
            problems.append(f'launch.{rank}.args pass --kv-cache-dtype: the overlay picks fp8_ds_mla itself')
        if '--node-rank' not in args or args[args.index('--node-rank') + 1:][:1] != ['{rank}']:
            problems.append(f'launch.{rank}.args must pass --node-rank {{rank}}')
        if '{headless_args}' not in args:
            problems.append(f'launch.{rank}.args must hold {{headless_args}} (--headless on the workers)')
        budget = _flag_int(args, '--max-num-batched-tokens')
        threshold = _flag_int(args, '--long-prefill-token-threshold')
        if budget is not None and threshold is not None and budget - threshold < VLLM_PREFILL_SHARE:
            problems.append(
                f'launch.{rank}.args: --long-prefill-token-threshold {threshold} leaves --max-num-batched-tokens '
                f'{budget} less than {VLLM_PREFILL_SHARE} tokens a step for the other requests (a threshold at or '
                f'over the budget does nothing): keep the budget - the threshold >= {VLLM_PREFILL_SHARE}, '
                f'at most {budget - VLLM_PREFILL_SHARE}')
    return problems


def _flag_int(args, flag):
    """The whole number after flag in args; None when flag is missing or its value is not a number."""
    if flag not in args[:-1]:
        return None
    value = args[args.index(flag) + 1]
    return int(value) if value.isdigit() else None


def _without(args, flags):
    """args less each of flags and the value after it."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in flags:
            skip = True
        else:
            out.append(arg)
    return out


def _tfpy_problems(recipe):
    """TensorFold's Python engine in containers (flavour tfpy-container), as sfxnz run.sh @38a06077 starts it."""
    problems = []
    if recipe['world'] != 2:
        problems.append(f"world must be 2 for TensorFold's Python engine (its --tp takes 1 or 2: one rank a Spark), "
                        f"got {recipe['world']}")
    if recipe['capacity']['model'] not in ('engine-admission', 'token-pool'):
        problems.append("capacity.model must be engine-admission or token-pool for TensorFold's Python engine, "
                        f"got '{recipe['capacity']['model']}'")
    drafts = recipe['serve']['mtp_drafts']
    if not 0 <= drafts <= TFPY_MAX_MTP_DRAFTS:
        problems.append(f'serve.mtp_drafts must be 0 to {TFPY_MAX_MTP_DRAFTS}, got {drafts}: DSpark drafts at most '
                        f'{TFPY_MAX_MTP_DRAFTS} tokens a round and the engine refuses more')
    parallel = recipe['serve']['parallel']
    if parallel > TFPY_MAX_LANES:
        problems.append(f'serve.parallel must be 1 to {TFPY_MAX_LANES}, got {parallel}: the deepseek_v41 family '
                        f'decodes at most {TFPY_MAX_LANES} requests together and refuses more lanes at start; more '
                        'requests queue for a free lane')
    memory = recipe['memory']
    if memory['gate_gib'] < memory['min_gate_gib']:
        problems.append(f"memory.gate_gib {memory['gate_gib']} is below memory.min_gate_gib {memory['min_gate_gib']}: "
                        "the engine's admission cannot fit the window below it")
    if recipe['ready']['path'] != '/health' or recipe['ready']['json'] is not True:
        problems.append(f"ready must be path /health with json true (the engine answers {{\"ok\": true}} there once "
                        f"the model is served), got path '{recipe['ready']['path']}', json {recipe['ready']['json']}")
    if recipe['container']['api_key_env'] not in ('TF_API_KEY', 'TENSORFOLD_API_KEY'):
        problems.append("container.api_key_env must be TF_API_KEY or TENSORFOLD_API_KEY (what the engine reads), "
                        f"got '{recipe['container']['api_key_env']}'")
    wants = {'--tp': '{world}', '--master': '{master}', '--master-port': '{rendezvous_port}',
             '--mtp-drafts': '{mtp_drafts}', '--parallel': '{parallel}'}
    lines = {}
    for rank, own_rank in (('rank0', '0'), ('follower', '{rank}')):
        args = [to_text(a) for a in recipe['launch'][rank]['args']]
        lines[rank] = args
        for flag, value in {**wants, '--rank': own_rank}.items():
            if flag not in args or args[args.index(flag) + 1:][:1] != [value]:
                problems.append(f'launch.{rank}.args must pass {flag} {value}')
    rank0 = _without(lines['rank0'], ('--rank', *TFPY_RANK0_ONLY))
    follower = _without(lines['follower'], ('--rank',))
    if rank0 != follower:
        extra = [a for a in follower if a not in rank0] + [a for a in rank0 if a not in follower]
        problems.append('launch.follower.args must be launch.rank0.args without --rank, '
                        f"{', '.join(TFPY_RANK0_ONLY)} (rank 0 refuses a rank 1 started with other serve flags); "
                        f"they differ in {' '.join(extra) or 'their order'}")
    return problems


SGLANG_READY_LINE = '^Ready: API on port {port}'


def _sglang_problems(recipe):
    """SGLang's overlay image in containers (flavour sglang-container), as MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks
    start-tp4.sh @12b3148 starts it: every rank runs the image's boot.py with the launch in its environment."""
    problems = []
    if recipe['capacity']['model'] != 'kv-per-token':
        problems.append(f"capacity.model must be kv-per-token for SGLang (a pinned pool of --max-total-tokens), "
                        f"got '{recipe['capacity']['model']}'")
    serve, capacity = recipe['serve'], recipe['capacity']
    pool = serve['max_total_tokens'] * capacity['kv_bytes_per_token']
    if abs(serve['kv_pool_bytes'] - pool) > 1:
        problems.append(f"serve.kv_pool_bytes {serve['kv_pool_bytes']} is not serve.max_total_tokens "
                        f"{serve['max_total_tokens']} x capacity.kv_bytes_per_token {capacity['kv_bytes_per_token']} "
                        f"= {round(pool)}: the capacity check would size another pool than the engine pins")
    if recipe['ready']['path'] != '/health':
        problems.append(f"ready.path must be /health (boot.py waits for it before its smoke test), "
                        f"got '{recipe['ready']['path']}'")
    # MiaAI start.sh @e0985205 cmd_serve: ready once boot.py printed `^Ready: API on port ${PORT}`, after its smoke
    # test and warm-up, unless the head skips the smoke (SKIP_SMOKE=1: then /health alone).
    head_env = {**recipe['launch']['env'], **recipe['launch']['rank0']['env']}
    if to_text(head_env.get('SKIP_SMOKE', '0')) != '1' and recipe['ready'].get('log_line') != SGLANG_READY_LINE:
        problems.append(f"ready.log_line must be '{SGLANG_READY_LINE}' while rank 0 runs boot.py's smoke test "
                        "(SKIP_SMOKE is not 1): start.sh calls the engine ready only once boot.py printed that banner, "
                        f"after its smoke test and warm-up; got {recipe['ready'].get('log_line')!r}")
    if recipe['container']['api_key_env'] != 'API_KEY':
        problems.append("container.api_key_env must be API_KEY (boot.py reads it and passes --api-key), "
                        f"got '{recipe['container']['api_key_env']}'")
    launch = recipe['launch']
    if [to_text(a) for a in launch['rank0']['args']] != [to_text(a) for a in launch['follower']['args']]:
        problems.append('launch.follower.args must be launch.rank0.args: every rank runs the same entry point, '
                        'the environment tells them apart')
    envs = {rank: {**launch['env'], **launch[rank]['env']} for rank in ('rank0', 'follower')}
    for rank, env in envs.items():
        for key, want in SGLANG_ENV.items():
            if to_text(env.get(key, '')) != want:
                problems.append(f'launch env of {rank} must set {key}={want} (boot.py builds --tp, --ep-size, '
                                f"--nnodes, --node-rank, --dist-init-addr from it), got '{to_text(env.get(key, ''))}'")
        for key in SGLANG_NO_LOADER_ENV:
            if key in env:
                problems.append(f'launch env of {rank} sets {key}: the patched NCCL goes over the image\'s pip NCCL '
                                '(container.nccl_overlay), a second NCCL runtime makes DeepEP abort')
    topology = recipe['fabric']['topology']
    overlay = recipe['container']['nccl_overlay']
    target = overlay['target']
    if not target.startswith('/') or ':' in target or ':' in overlay['source']:
        problems.append(f"container.nccl_overlay.target '{target}' must be an absolute path, and neither it nor the "
                        'source may hold a colon (a bind mount)')
    mounted = [m for m in recipe['container']['mounts'] if isinstance(m, dict) and m.get('dest') == target]
    if not mounted or mounted[0].get('src') != overlay['source'] or mounted[0].get('mode', 'ro') != 'ro':
        problems.append(f"container.mounts must bind {overlay['source']} over {target} read-only "
                        '(container.nccl_overlay: the patched NCCL replaces the pip one)')
    ring = topology == 'ring' or any(to_text(env.get('NCCL_SWITCHLESS_RING_ONLY', '0')) == '1' for env in envs.values())
    if ring:
        if topology != 'ring':
            problems.append(f"fabric.topology must be ring when NCCL_SWITCHLESS_RING_ONLY=1, got '{topology}'")
        if recipe['world'] != SGLANG_RING_WORLD:
            problems.append(f"world must be {SGLANG_RING_WORLD} on a ring "
                            f"(\"Ring requires NNODES=TP_SIZE=EP_SIZE=4\"), got {recipe['world']}")
        if overlay['source'] != '{nccl_library}':
            problems.append("container.nccl_overlay.source must be {nccl_library}: the library the fabric role "
                            f"checked for the switchless patch, got '{overlay['source']}'")
        for rank, env in envs.items():
            for key, want in SGLANG_RING_ENV.items():
                if to_text(env.get(key, '')) != want:
                    problems.append(f"launch env of {rank} must set {key}={want} on a ring, "
                                    f"got '{to_text(env.get(key, ''))}'")
            low, high = to_text(env.get('NCCL_MIN_NCHANNELS', '')), to_text(env.get('NCCL_MAX_NCHANNELS', ''))
            if not (low.isdigit() and high.isdigit() and 0 < int(low) <= int(high)):
                problems.append(f'launch env of {rank} must set NCCL_MIN_NCHANNELS <= NCCL_MAX_NCHANNELS, both '
                                f"positive, on a ring (a fixed channel count), got '{low}' and '{high}'")
    return problems


def _fill_defaults(node, schema, recipe):
    """Set every absent or null field of node that its schema gives a default (walking the sections node has)."""
    for key, sub in schema.get('properties', {}).items():
        if node.get(key) is None:
            if 'default' in sub:
                node[key] = copy.deepcopy(sub['default'])
            elif _DEFAULT_FROM in sub:
                node[key] = copy.deepcopy(_get(recipe, sub[_DEFAULT_FROM])[1])
        if isinstance(node.get(key), dict):
            _fill_defaults(node[key], sub, recipe)


def _plain(value):
    """A plain copy of value: dicts, lists and scalars of Python's own types. Ansible hands a filter its variables
    as lazily templated, tagged containers; copying those with copy.deepcopy costs seconds per host for a recipe."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return copy.deepcopy(value)


def recipe_defaults(recipe):
    """A copy of a complete recipe with every optional field present: the schema's default (roles/recipe/files/
    recipe.schema.json `default`, or the field `x-default-from` names), wherever the recipe has the section that holds
    the field (a recipe without a kit, inputs or an Engram download gets none of their fields)."""
    full = _plain(recipe)
    _fill_defaults(full, recipe_schema(), full)
    return full


def recipe_check(recipe, name=None):
    """Return the recipe, every optional field filled in, when it is complete; else fail naming every problem."""
    problems = recipe_problems(recipe)
    if problems:
        label = name or (recipe.get('name') if isinstance(recipe, dict) else None) or 'the recipe'
        raise AnsibleFilterError(f"recipe '{label}' is refused: {'; '.join(problems)}")
    return recipe_defaults(recipe)


def _render_one(text, values):
    def sub(match):
        key = match.group(1)
        if key not in values:
            raise AnsibleFilterError(
                f"recipe_render: no value for {{{key}}} ({PLACEHOLDERS.get(key, 'unknown')})")
        value = values[key]
        if isinstance(value, (list, tuple)):
            raise AnsibleFilterError(f'recipe_render: {{{key}}} is a list and must stand alone as an argument')
        return to_text(value)
    return _PLACEHOLDER_RE.sub(sub, to_text(text))


def recipe_render(template, values):
    """Fill a launch template in: a list of arguments (an argument that is exactly a list-valued
    placeholder is replaced by the list's items, so it may vanish) or a mapping of environment variables."""
    if not isinstance(values, dict):
        raise AnsibleFilterError('recipe_render: values must be a mapping')
    if isinstance(template, dict):
        return {to_text(k): _render_one(v, values) for k, v in template.items()}
    if not isinstance(template, list):
        raise AnsibleFilterError(
            f'recipe_render: expected a list of arguments or a mapping, got {type(template).__name__}')
    out = []
    for arg in template:
        match = _PLACEHOLDER_RE.fullmatch(to_text(arg))
        if match and isinstance(values.get(match.group(1)), (list, tuple)):
            out.extend(to_text(v) for v in values[match.group(1)])
        else:
            out.append(_render_one(arg, values))
    return out


def recipe_placeholders(template):
    """The names of the placeholders a recipe's launch template uses (a string, list or mapping, nested), sorted:
    a role asks whether a value is needed before it reads it (a ring's {bootstrap_interface})."""
    return sorted(_placeholders(template))


def container_run(container, name, image, env_file, argv, lab_extra=None, values=None, detach=False):
    """The `podman run` (or `docker run`) command line of one rank, from the recipe's container section.

    container: the recipe's container mapping, its mounts already rendered; name: the container's name;
    image: the image reference to run (pinned); env_file: the 0600 file with the rank's environment and
    secrets (never on the command line); argv: the entry point's arguments; lab_extra: more options;
    values: the launch placeholders' values, to fill in the mounts' sources ({model_dir}, ...); detach: run it in the
    background and keep it when it stops (its logs say why), instead of removing it (the engine's first start).
    """
    if not isinstance(container, dict) or not isinstance(argv, list):
        raise AnsibleFilterError('container_run: expected the recipe container mapping and a list of arguments')
    runtime = to_text(container.get('runtime'))
    runtimes = recipe_schema()['properties']['container']['properties']['runtime']['enum']
    if runtime not in runtimes:
        raise AnsibleFilterError(f"container_run: runtime must be one of {', '.join(runtimes)}, got '{runtime}'")
    opts = container.get('options') or {}
    cmd = [runtime, 'run', '--detach' if detach else '--rm', '--name', to_text(name)]
    if runtime == 'podman':
        # A container of the same name left by a killed run is replaced, not an error.
        cmd.append('--replace')
    cmd += ['--network', to_text(opts.get('network', 'host')), '--ipc', to_text(opts.get('ipc', 'host'))]
    # podman refuses --shm-size with the host's IPC namespace ("cannot set shmsize when running in the
    # host IPC Namespace"); /dev/shm is then the host's anyway. docker accepts and ignores it.
    if opts.get('shm_size') and not (runtime == 'podman' and opts.get('ipc') == 'host'):
        cmd += ['--shm-size', to_text(opts['shm_size'])]
    if opts.get('stop_timeout'):
        cmd += ['--stop-timeout', to_text(opts['stop_timeout'])]
    if opts.get('oom_score_adj') is not None:
        cmd += ['--oom-score-adj', to_text(opts['oom_score_adj'])]
    if opts.get('gpus'):
        # docker's --gpus; podman reaches the GPUs through CDI (nvidia-ctk cdi generate).
        cmd += ['--gpus', to_text(opts['gpus'])] if runtime == 'docker' else \
            ['--device', 'nvidia.com/gpu=' + to_text(opts['gpus'])]
    for device in opts.get('devices') or []:
        cmd += ['--device', to_text(device)]
    for cap in opts.get('cap_add') or []:
        cmd += ['--cap-add', to_text(cap)]
    for key, value in sorted((opts.get('ulimits') or {}).items()):
        # null: left to the runtime (an override cannot remove a key from the recipe's mapping).
        if value is not None:
            cmd += ['--ulimit', f'{to_text(key)}={to_text(value)}']
    for mount in container.get('mounts') or []:
        src = _render_one(mount['src'], values) if values is not None else to_text(mount['src'])
        cmd += ['--volume', f"{src}:{to_text(mount['dest'])}:{to_text(mount.get('mode', 'ro'))}"]
    cmd += ['--env-file', to_text(env_file)]
    cmd += [to_text(v) for v in (opts.get('extra') or [])] + [to_text(v) for v in (lab_extra or [])]
    cmd += ['--entrypoint', to_text(container.get('entrypoint')), to_text(image)]
    return cmd + [to_text(a) for a in argv]


# The --env-file format both runtimes read: one KEY=VALUE a line, the line's leading whitespace dropped, a line that
# starts with '#' or is empty skipped, the key cut at the first '=' and refused when empty or holding whitespace,
# the value taken verbatim up to the line's end (bufio.Scanner: a '\r' before the '\n' dropped). Sources:
# docker/cli pkg/kvfile/kvfile.go @3d41bbacb04b2fcfd4b4504323a46cc8da5b7681 ("quotes are considered part of the key
# or value"; "neither key, nor value, can contain newlines"), and @00155964f781d6b8a93f8dd42c979bc649d2456f, whose
# trimQuotes removes quotes around a value "if the value starts and ends with the same quote character";
# containers/podman pkg/env/env.go @238d08fafdf4ccd7b70c8cbbaaafe070f58ef74a ParseFile/parseEnv (no quote removal).
_ENV_QUOTES = ('"', "'")


def container_env_file(env, what='the environment'):
    """The text of a container runtime's --env-file holding env (a mapping), one sorted KEY=VALUE line a variable,
    read alike by podman and every docker; fails naming each variable that cannot be written so."""
    if not isinstance(env, dict):
        raise AnsibleFilterError(f'container_env_file: {what} must be a mapping of variables, got {type(env).__name__}')
    problems = []
    lines = []
    for key, value in sorted((to_text(k), v) for k, v in env.items()):
        if value is None or isinstance(value, (dict, list, tuple)):
            problems.append(f"{key or '(empty name)'} has no text value ({type(value).__name__})")
            continue
        value = to_text(value)
        if not key or key.startswith('#') or any(c in key for c in '= \t\r\n\0'):
            problems.append(f"the name {key!r} is not one a runtime reads (no '=', whitespace or NUL, "
                            f"not empty, not starting with '#')")
        if any(c in value for c in '\r\n\0'):
            problems.append(f'{key} holds a line break or NUL ({value!r}): an --env-file line ends there, '
                            f'so the container would see another value and other variables')
        elif len(value) > 1 and value[0] == value[-1] and value[0] in _ENV_QUOTES:
            problems.append(f'{key}={value} is quoted: docker since kvfile @00155964 removes the quotes, older '
                            f'docker and podman keep them, so the container would see one or the other; '
                            f'write the value without its quotes')
        lines.append(f'{key}={value}\n')
    if problems:
        raise AnsibleFilterError(f"{what} cannot be written as a container's --env-file: {'; '.join(problems)}")
    return ''.join(lines)


class FilterModule:
    def filters(self):
        return {'recipe_check': recipe_check, 'recipe_problems': recipe_problems, 'recipe_render': recipe_render,
                'recipe_placeholders': recipe_placeholders, 'container_run': container_run,
                'container_env_file': container_env_file}
