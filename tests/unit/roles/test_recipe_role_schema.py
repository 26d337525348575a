# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The recipe role refuses a recipe or an override with a field the recipe format does not know, or of the wrong
type, in one short line before anything runs (not Ansible's "Finalization of task args" chain around a filter's
error); local connections, no lab: the role only reads."""

from __future__ import annotations

import json
import sys

from tests.unit.playbook import REPO, run_playbook

PLAYBOOK = '''
- name: Load the recipe as every playbook does
  hosts: sparks
  gather_facts: false
  roles:
    - role: sparkfold.cluster.recipe
'''
HOSTS = ('sparks:\n  children:\n    head: {hosts: {spark-a: {}}}\n    workers: {hosts: {spark-b: {}}}\n')


def run(tmp_path, **variables):
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    (tmp_path / 'hosts.yml').write_text(HOSTS)
    variables = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable, **variables}
    return run_playbook(tmp_path / 'play.yml', tmp_path / 'hosts.yml', tmp_path, args=['-e', json.dumps(variables)])


def failure_messages(result):
    """The msg of every failed task result in the output (ANSIBLE_CALLBACK_RESULT_FORMAT=json)."""
    out, decoder, text, marker = [], json.JSONDecoder(), result.stdout, 'FAILED! => '
    start = text.find(marker)
    while start >= 0:
        out.append(decoder.raw_decode(text, start + len(marker))[0].get('msg'))
        start = text.find(marker, start + 1)
    return out


def test_a_misspelled_override_is_refused_in_one_line(tmp_path):
    result = run(tmp_path, recipe_run_overrides={'serve': {'contex': 524288}})
    assert result.returncode != 0
    want = "recipe 'dsv41-flash-tp2-zig' is refused: serve.contex is not a recipe field: did you mean serve.context?"
    assert failure_messages(result) == [want, want], result.stdout[-3000:]
    assert 'Finalization' not in result.stdout and 'caused by' not in result.stdout


def test_a_recipe_file_of_the_wrong_type_is_refused_in_one_line(tmp_path):
    recipe = (REPO / 'roles' / 'recipe' / 'recipes' / 'dsv41-flash-tp2-zig.yml').read_text()
    own = tmp_path / 'mine.yml'
    own.write_text(recipe.replace('  context: 1048576\n', '  context: big\n') + 'zzz: 1\n')
    result = run(tmp_path, recipe_file=str(own))
    assert result.returncode != 0
    want = (f"recipe '{own}' is refused: serve.context must be a whole number, got 'big'; zzz is not a recipe "
            'field: the fields are ')
    messages = failure_messages(result)
    assert len(messages) == 2 and all(m.startswith(want) for m in messages), result.stdout[-3000:]
    assert 'Finalization' not in result.stdout
