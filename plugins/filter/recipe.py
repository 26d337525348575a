# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that check a deployment recipe and render its launch lines.

Documentation lives in the sidecar files next to this one (recipe_check.yml, recipe_render.yml).
A recipe is one data file per published system (roles/recipe/recipes/<name>.yml): the engine, its
build, the kit, the per-node inputs, the weights, the launch lines of every rank, the capacity
model, the memory thresholds, the smoke test and the published figures, each with its source.
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

FLAVOURS = ('dsv41-zig',)
# The roles start followers first, then rank 0 (roles/engine_service/tasks/ranks.yml); no other order is built yet.
ORDERS = ('followers_first',)
CAPACITY_MODELS = ('zig-pool', 'kv-per-token', 'token-pool')
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
}

# (path, type) of every field a recipe of a flavour must have; type None = any non-empty value.
_COMMON = [
    ('name', str), ('title', str), ('flavour', str), ('world', int), ('sources', list),
    ('weights.repo_id', str), ('weights.revision', str), ('weights.shards', int),
    ('weights.tokenizer.repo_id', str), ('weights.tokenizer.revision', str),
    ('serve.context', int), ('serve.parallel', int), ('serve.thinking', bool),
    ('launch.order', str), ('launch.rendezvous_port', int),
    ('launch.rank0.program', str), ('launch.rank0.args', list), ('launch.rank0.env', dict),
    ('launch.follower.program', str), ('launch.follower.args', list), ('launch.follower.env', dict),
    ('ready.path', str), ('capacity.model', str),
    ('memory.gate_gib', (int, float)), ('memory.gate_timeout_s', int), ('memory.serving_floor_gib', (int, float)),
    ('memory.earlyoom_mem_percent', (str, int)), ('memory.earlyoom_swap_percent', int),
    ('memory.oom_score_adjust', int),
    ('smoke.prompt', str), ('smoke.answer', str),
]
REQUIRED = {
    'dsv41-zig': [
        *_COMMON,
        ('engine.repo_url', str), ('engine.commit', str), ('engine.patches', list), ('engine.zig_version', str),
        ('engine.build_args', list), ('engine.programs.server', str), ('engine.programs.follower', str),
        ('engine.programs.rank_cache', str),
        ('kit.repo_id', str), ('kit.revision', str), ('kit.subdir', str), ('kit.verify', list),
        ('inputs.script', str), ('inputs.args', list), ('inputs.env', dict), ('inputs.rank_cache_subdir', str),
        ('inputs.token_map', str),
        ('engram.repo_id', str), ('engram.revision', str), ('engram.files', list),
        ('serve.drafts', bool), ('serve.max_tokens', int), ('serve.streams', int), ('serve.backend', str),
        ('capacity.measured_bytes', int), ('capacity.measured_positions', int),
    ],
}


def _type_name(types):
    types = types if isinstance(types, tuple) else (types,)
    names = {str: 'a string', int: 'a whole number', float: 'a number', bool: 'true or false',
             list: 'a list', dict: 'a mapping'}
    return ' or '.join(names[t] for t in types)


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
    if flavour not in REQUIRED:
        return [f"flavour is '{to_text(flavour)}', one of {', '.join(FLAVOURS)} is needed"]
    problems = []
    for path, types in REQUIRED[flavour]:
        found, value = _get(recipe, path)
        if not found or value is None or (isinstance(value, str) and not value.strip()):
            problems.append(f'{path} is missing')
        elif not _is_type(value, types):
            problems.append(f'{path} must be {_type_name(types)}, got {value!r}')
    if problems:
        return problems
    if recipe['world'] < 2:
        problems.append(f"world must be at least 2 (a tensor-parallel group), got {recipe['world']}")
    if recipe['launch']['order'] not in ORDERS:
        problems.append(f"launch.order must be one of {', '.join(ORDERS)}, got '{recipe['launch']['order']}'")
    if recipe['capacity']['model'] not in CAPACITY_MODELS:
        problems.append(f"capacity.model must be one of {', '.join(CAPACITY_MODELS)}, "
                        f"got '{recipe['capacity']['model']}'")
    if flavour == 'dsv41-zig':
        if not _SHA_RE.match(recipe['engine']['commit']):
            problems.append(f"engine.commit must be a full 40-hex commit sha, got '{recipe['engine']['commit']}'")
        for rank in ('rank0', 'follower'):
            program = recipe['launch'][rank]['program']
            if program not in recipe['engine']['programs']:
                problems.append(f"launch.{rank}.program '{program}' is not one of engine.programs "
                                f"({', '.join(sorted(recipe['engine']['programs']))})")
        if recipe['serve']['parallel'] > recipe['serve']['streams']:
            problems.append(f"serve.parallel {recipe['serve']['parallel']} is more than serve.streams "
                            f"{recipe['serve']['streams']}: this engine serves TF_DS_STREAMS streams at once")
    serve = recipe['serve']
    for key in ('window', 'round_rows'):
        if key in serve and (not _is_type(serve[key], int) or serve[key] < 1):
            problems.append(f'serve.{key} must be a whole number, got {serve[key]!r}')
    if _is_type(serve.get('window'), int) and serve['window'] < serve['context']:
        problems.append(f"serve.window {serve['window']} is less than serve.context {serve['context']}: "
                        'the streams share the window, a request takes at most the context')
    templates = [recipe['launch'], recipe.get('inputs', {}), (recipe.get('kit') or {}).get('verify', [])]
    unknown = sorted(_placeholders(templates) - set(PLACEHOLDERS))
    if unknown:
        names = ', '.join('{' + u + '}' for u in unknown)
        problems.append(f'launch, inputs or kit.verify name unknown placeholders: {names}')
    return problems


def recipe_check(recipe, name=None):
    """Return the recipe when it is complete; else fail naming every missing or wrong field."""
    problems = recipe_problems(recipe)
    if problems:
        label = name or (recipe.get('name') if isinstance(recipe, dict) else None) or 'the recipe'
        raise AnsibleFilterError(f"recipe '{label}' is incomplete: {'; '.join(problems)}")
    return recipe


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


class FilterModule:
    def filters(self):
        return {'recipe_check': recipe_check, 'recipe_render': recipe_render}
