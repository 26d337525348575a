# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run ansible-playbook from the unit tests (roles against local hosts, no lab), one way for all of them."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).parent / "ansible-playbook"


def collections_path():
    """Where this collection is installed: .collections (scripts/setup), or the ansible-test tree; then the
    caller's ANSIBLE_COLLECTIONS_PATH (`scripts/test newest` names there the collections its venv lacks)."""
    linked = REPO / ".collections"
    own = str(linked) if linked.is_dir() else str(REPO.parents[2])  # .../ansible_collections/sparkfold/cluster
    extra = [path for path in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if path and path != own]
    return os.pathsep.join([own, *extra])


def run_playbook(playbook, inventory, tmp, args=(), env=None, timeout=300, quiet=False):
    """ansible-playbook -i INVENTORY PLAYBOOK ARGS with the repository's ansible.cfg, plain text and JSON
    results, temporary files under ``tmp``; returns the CompletedProcess (never raises on failure).

    Every ok and skipped result is shown (the tests read them), unless ``quiet``: then ansible.cfg's own
    output settings apply (ok and skipped results hidden), as for a user."""
    full_env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=collections_path(),
                    ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
                    ANSIBLE_LOCAL_TEMP=str(pathlib.Path(tmp) / "ansible-tmp"),
                    ANSIBLE_HOME=str(pathlib.Path(tmp) / "ansible-home"))
    for name in ("ANSIBLE_DISPLAY_OK_HOSTS", "ANSIBLE_DISPLAY_SKIPPED_HOSTS"):
        if quiet:
            full_env.pop(name, None)
        else:
            full_env[name] = "true"
    full_env.update(env or {})
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(playbook), *args],
        cwd=tmp, env=full_env, capture_output=True, text=True, timeout=timeout, check=False)


def task_result(out, name, role):
    """The result of ``role``'s task named ``name`` in a run's output (ok, changed, skipping, fatal), or "left out"
    when it did not run."""
    found = re.search(rf"TASK \[sparkfold\.cluster\.{role} : {re.escape(name)}\][^\n]*\n(?:(?!TASK \[).*\n)*?"
                      r"(ok|changed|skipping|fatal): ", out)
    return found.group(1) if found else "left out"


def changed_count(proc, host="node"):
    """The changed= count of ``host`` in a run's recap."""
    found = re.search(rf"{re.escape(host)}\s+: ok=\d+\s+changed=(\d+) ", proc.stdout)
    assert found, proc.stdout[-3000:]
    return int(found.group(1))
