# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine role reads the recipe's patches on the controller (tasks/patch_sums.yml): each one's sha256 is
sha256sum's, whatever bytes it holds (a patch need not be UTF-8, and may carry CRLF and trailing blank lines), so
its name on the node is <first 16 hex>-<name>; a relative path is taken from where ansible-playbook runs and a
leading ~ is expanded; a patch the controller lacks is refused, named, before anything else."""

from __future__ import annotations

import hashlib
import json
import os

from tests.unit.playbook import run_playbook

PLAYBOOK = """
- name: Read the patches
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Read them as the engine role does
      ansible.builtin.import_role:
        name: sparkfold.cluster.engine
        tasks_from: patch_sums.yml
    - name: Show what the role noted
      ansible.builtin.debug:
        msg: "SUMS {{ {'sha256': engine_patch_sha256, 'node_files': engine_patch_node_files} | to_json }}"
"""


def _run(tmp_path, patches):
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    variables = {"engine_patches": patches, "engine_patch_dir": "/opt/patches"}
    return run_playbook(tmp_path / "play.yml", "localhost,", tmp_path, args=["-e", json.dumps(variables)],
                        env={"HOME": str(tmp_path)})


def _noted(result):
    line = next(line for line in result.stdout.splitlines() if '"msg": "SUMS ' in line)
    message = json.loads(line.split('"msg": ', 1)[1].rstrip().rstrip(","))
    return json.loads(message.removeprefix("SUMS "))


def test_each_patch_is_named_by_the_sha256_of_its_bytes(tmp_path):
    raw = b"--- a/x\r\n+++ b/x\r\n@@ -1 +1 @@\r\n-caf\xe9\r\n+caf\xff\xfe\r\n\n\n"
    (tmp_path / "latin1.patch").write_bytes(raw)
    (tmp_path / "home.patch").write_bytes(b"plain\n")
    result = _run(tmp_path, ["latin1.patch", "~/home.patch"])
    assert result.returncode == 0, result.stdout[-3000:]
    noted = _noted(result)
    sums = [hashlib.sha256(raw).hexdigest(), hashlib.sha256(b"plain\n").hexdigest()]
    assert noted["sha256"] == sums
    assert noted["node_files"] == [
        f"/opt/patches/{sums[0][:16]}-latin1.patch",
        f"/opt/patches/{sums[1][:16]}-home.patch",
    ]


def test_a_patch_the_controller_lacks_is_refused_by_name(tmp_path):
    (tmp_path / "here.patch").write_text("x\n")
    os.mkdir(tmp_path / "a-directory.patch")
    result = _run(tmp_path, ["here.patch", "missing.patch", "a-directory.patch"])
    assert result.returncode != 0
    assert "engine_patches: not a file on the controller: missing.patch, a-directory.patch" in result.stdout
    assert "SUMS" not in result.stdout
