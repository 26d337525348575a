# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine_image role, run on the lab's vLLM pair (inventory/lab-vllm, local connections): a build whose
Containerfile is not on the controller (the lab's stand-in image not staged: scripts/lab up stages it only when
SPARKFOLD_LAB_IMAGES names it) is refused once, before anything is copied or built, naming the file and how the lab
stages it."""

from __future__ import annotations

import json
import re
import shutil
import sys

import pytest

from tests.unit.playbook import REPO, run_playbook

PLAYBOOK = '''
- name: Obtain the recipe's image as engine_service does
  hosts: sparks
  gather_facts: false
  roles:
    - role: sparkfold.cluster.recipe
  tasks:
    - name: Obtain the image
      ansible.builtin.include_role:
        name: sparkfold.cluster.engine_image
'''


@pytest.mark.skipif(shutil.which("podman") is None, reason="the role first checks for the recipe's runtime, podman")
def test_a_build_context_missing_on_the_controller_is_refused_before_anything(tmp_path):
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    variables = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
                 'sparkfold_lab_state': str(tmp_path / 'state'), 'engine_image_dir': str(tmp_path / 'images')}
    result = run_playbook(tmp_path / 'play.yml', REPO / 'inventory' / 'lab-vllm', tmp_path,
                          args=['-e', json.dumps(variables)])
    text = ' '.join(result.stdout.split())
    assert result.returncode != 0
    refusal = (f"The recipe builds its image from {tmp_path}/state/vllm-image/Containerfile, which is not on the "
               f"controller (the build context {tmp_path}/state/vllm-image is missing or empty).")
    assert refusal in text, text[-3000:]
    assert 'scripts/lab stage-vllm' in text
    # Once for the cluster (run_once on the head), not per host.
    assert re.search(r'spark-a : ok=\d+ changed=0 unreachable=0 failed=1 ', text), text[-600:]
    assert re.search(r'spark-b : ok=\d+ changed=0 unreachable=0 failed=0 ', text), text[-600:]
    assert not (tmp_path / 'images').exists()
