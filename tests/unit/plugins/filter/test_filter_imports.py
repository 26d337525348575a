# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What loading the collection's filter files costs a task.

Ansible runs each task in a worker process forked for it, and a worker loads a filter's file the first time a
template names one of its filters, so every task that templates `sparkfold.cluster.recipe_cluster` (most of them,
through the roles' variables) imports that file and what it imports. jsonschema's import was an eighth of a no-op
`playbooks/engine.yml` run's controller time on the lab pair (py-spy, every process): only recipe_check needs it.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from ansible_collections.sparkfold.cluster.plugins.filter import recipe

ROOT = pathlib.Path(__file__).resolve().parents[4]
FILTERS = sorted(path.stem for path in (ROOT / "plugins" / "filter").glob("*.py"))
LOAD = """
import importlib, json, sys
importlib.import_module("ansible_collections.sparkfold.cluster.plugins.filter." + sys.argv[1]).FilterModule().filters()
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("name", FILTERS)
def test_loading_a_filter_file_does_not_import_jsonschema(name):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path for path in sys.path if path))  # this collection, as here
    proc = subprocess.run([sys.executable, "-c", LOAD, name], env=env, capture_output=True, text=True, check=True,
                          timeout=120)
    imported = json.loads(proc.stdout)
    assert not [module for module in imported if module.split(".")[0] == "jsonschema"], name


def test_recipe_check_still_validates_with_jsonschema():
    recipe._validator.cache_clear()
    assert type(recipe._validator()).__module__.startswith("jsonschema")
