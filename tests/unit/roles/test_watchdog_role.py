# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkfold.cluster.watchdog as community.general's integration targets test a module: check mode reports a change
and writes nothing, the run changes, the next run changes nothing; turned off, it takes everything away, once.

The head is this machine (ansible_connection local) with every path under the test's directory, and stand-ins for
`systemctl` (its units' enabled and active states kept in a JSON file) and `systemd-analyze` first on PATH."""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat
import sys

import pytest
import yaml
from ansible_collections.sparkfold.cluster.plugins.filter.cluster import start_budget
from ansible_collections.sparkfold.cluster.plugins.filter.recipe import recipe_check

from tests.unit.playbook import run_playbook

RECIPES = pathlib.Path(__file__).resolve().parents[3] / "roles" / "recipe" / "recipes"


def cluster(recipe, world):
    """The cluster facts the watchdog reads, as the recipe role computes them from a shipped recipe."""
    spec = recipe_check(yaml.safe_load((RECIPES / f"{recipe}.yml").read_text()), recipe)
    return {"world": world, "start_budget": start_budget(spec, world)}


SYSTEMCTL = r'''#!/usr/bin/env python3
import json, os, sys
path = os.environ["FAKE_SYSTEMD_STATE"]
state = json.load(open(path)) if os.path.exists(path) else {}
with open(os.environ["FAKE_SYSTEMD_LOG"], "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\n")
args = [a for a in sys.argv[1:] if not a.startswith("--")]
verb, units = (args[0], args[1:]) if args else ("", [])
unit = units[0] if units else ""
known = state.setdefault(unit, {"enabled": False, "active": False}) if unit else {}
if verb == "show":
    print(f"Id={unit}\nNames={unit}\nLoadState=loaded\nActiveState={'active' if known['active'] else 'inactive'}"
          f"\nSubState={'waiting' if known['active'] else 'dead'}"
          f"\nUnitFileState={'enabled' if known['enabled'] else 'disabled'}")
elif verb == "is-enabled":
    print("enabled" if known["enabled"] else "disabled")
    sys.exit(0 if known["enabled"] else 1)
elif verb == "is-active":
    print("active" if known["active"] else "inactive")
    sys.exit(0 if known["active"] else 3)
elif verb in ("enable", "disable"):
    known["enabled"] = verb == "enable"
elif verb in ("start", "restart"):
    known["active"] = True
elif verb == "stop":
    known["active"] = False
json.dump(state, open(path, "w"))
'''

PLAY = """
- name: The watchdog on a head
  hosts: node
  gather_facts: false
  roles:
    - role: sparkfold.cluster.watchdog
"""


@pytest.fixture
def head(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    analyze = ('#!/bin/sh\necho "$@" >> "$FAKE_SYSTEMD_LOG"\n'
               '[ -z "$FAKE_ANALYZE_SAYS" ] || echo "$FAKE_ANALYZE_SAYS" >&2\n')
    for name, body in (("systemctl", SYSTEMCTL), ("systemd-analyze", analyze)):
        path = bin_dir / name
        path.write_text(body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "inventory.yml").write_text(
        "all:\n  hosts:\n    node:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "root" / "units").mkdir(parents=True)  # as /etc/systemd/system is on every node
    return tmp_path


def run(head, args=(), analyze_says="", expect_failure=False, **extra):
    root = head / "root"
    given = {
        "recipe_spec": {"name": "dsv41-flash-tp2-zig", "launch": {"order": "followers_first"}},
        "recipe_nodes": ["node", "spark-b"], "recipe_cluster": cluster("dsv41-flash-tp2-zig", 2),
        "recipe_head": "node", "recipe_engine_prefix_root": str(root / "engine"),
        "recipe_model_dir": str(root / "models" / "dsv41") + "/",
        "watchdog_program": str(root / "libexec" / "sparkfold-watchdog.py"),
        "watchdog_config_file": str(root / "etc" / "watchdog.json"), "watchdog_state_dir": str(root / "state"),
        "watchdog_unit_dir": str(root / "units"), "watchdog_textfile_dir": str(root / "textfile"),
        "watchdog_lock_file": str(root / "run" / "cluster.lock"),
        "engine_service_env_file": str(root / "etc" / "engine.env"), "engine_service_gate": str(root / "gate.py"),
        **extra}
    proc = run_playbook(head / "play.yml", head / "inventory.yml", head, ["-e", json.dumps(given), *args],
                        env={"PATH": f"{head / 'bin'}{os.pathsep}{os.environ['PATH']}",
                             "FAKE_SYSTEMD_STATE": str(head / "systemd.json"),
                             "FAKE_SYSTEMD_LOG": str(head / "systemd.log"), "FAKE_ANALYZE_SAYS": analyze_says})
    if analyze_says or expect_failure:
        return proc, root
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return int(re.search(r"node\s+: ok=\d+\s+changed=(\d+) ", proc.stdout).group(1)), root


def timer(head):
    return json.loads((head / "systemd.json").read_text())["sparkfold-watchdog.timer"]


def test_check_mode_then_install_then_nothing_to_do(head):
    changed, root = run(head, ["--check"])
    assert changed > 0
    assert not any((root / "units").iterdir()) and not (head / "systemd.json").exists(), "check mode wrote nothing"
    assert not (root / "libexec").exists()

    changed, root = run(head)
    assert changed > 0
    assert timer(head) == {"enabled": True, "active": True}
    config = json.loads((root / "etc" / "watchdog.json").read_text())
    assert config["order"] == "followers_first"
    assert config["ranks"] == [{"rank": 0, "node": "node", "via": []},
                               {"rank": 1, "node": "spark-b", "via": ["ssh", "spark-b-fabric"]}]
    assert config["failures"] == 3 and config["window_s"] == 3600
    assert config["weights_record"] == str(root / "models" / "dsv41" / ".sparkfold-weights.json")
    assert config["textfile"] == str(root / "textfile" / "sparkfold.prom")
    service = (root / "units" / "sparkfold-watchdog.service").read_text()
    assert f"ExecStart=/usr/bin/python3 {root / 'libexec' / 'sparkfold-watchdog.py'} --config " in service
    assert "Type=oneshot" in service and "ProtectSystem=strict" in service
    assert f"ReadWritePaths={root / 'state'}" in service
    assert "OnUnitInactiveSec=120s" in (root / "units" / "sparkfold-watchdog.timer").read_text()
    assert oct((root / "libexec" / "sparkfold-watchdog.py").stat().st_mode & 0o777) == "0o755"
    assert "verify --man=no" in (head / "systemd.log").read_text()

    assert run(head)[0] == 0
    assert run(head, ["--check"])[0] == 0


def test_a_changed_setting_rewrites_the_configuration_only(head):
    run(head)
    changed, root = run(head, watchdog_failures=2, recipe_spec={"name": "tp4", "launch": {"order": "descending"}},
                        recipe_nodes=["node", "b", "c", "d"], watchdog_ssh_hosts={"c": "b-fabric-hop"})
    assert changed == 1
    config = json.loads((root / "etc" / "watchdog.json").read_text())
    assert config["failures"] == 2 and config["order"] == "descending"
    assert [rank["via"] for rank in config["ranks"]] == [[], ["ssh", "b-fabric"], ["ssh", "b-fabric-hop"],
                                                         ["ssh", "d-fabric"]]


def test_turned_off_it_is_taken_away_once(head):
    run(head)
    changed, root = run(head, watchdog_enabled=False)
    assert changed > 0
    assert timer(head) == {"enabled": False, "active": False}
    assert not (root / "units" / "sparkfold-watchdog.timer").exists()
    assert not (root / "libexec" / "sparkfold-watchdog.py").exists()
    assert (root / "state").is_dir(), "the state (and its record of restarts) stays"
    assert run(head, watchdog_enabled=False)[0] == 0


def test_a_unit_systemd_analyze_warns_about_stops_the_run_before_the_timer_starts(head):
    # systemd-analyze exits 0 on a key it ignores; the message names the unit, so the run stops (unit_verify) and
    # the timer is not started with a unit that lacks the setting.
    service = head / "root" / "units" / "sparkfold-watchdog.service"
    said = f"{service}:9: Unknown key name 'Xyz' in section 'Unit', ignoring."
    proc, _root = run(head, analyze_says=said)
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert f"systemd-analyze verify found problems in {service}" in proc.stdout
    assert said in proc.stdout
    assert not (head / "systemd.json").exists() or "sparkfold-watchdog.timer" not in (head / "systemd.json").read_text()
    # a message about another unit does not
    proc, _root = run(head, analyze_says="/lib/systemd/system/snapd.service:23: Unknown key name 'X', ignoring.")
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_the_sglang_ring_s_watchdog_outlasts_its_ordered_restart(head):
    # The SGLang ring's rank 0 may take its whole start budget (600 s gate + 3600 s of boot.py + 100 s, the engine's
    # TimeoutStartSec 4300) after three followers' starts (70 s ExecStartPre + 600 s gate each): the old fixed
    # 2400 s stopped the watchdog, and its `systemctl start` of rank 0, half-way through a legitimate start.
    _changed, root = run(head, recipe_spec={"name": "dsv41-flash-tp4-ring-sglang", "launch": {"order": "ascending"}},
                         recipe_nodes=["node", "b", "c", "d"], recipe_cluster=cluster("dsv41-flash-tp4-ring-sglang", 4))
    timeout = int(re.search(r"^TimeoutStartSec=(\d+)$",
                            (root / "units" / "sparkfold-watchdog.service").read_text(), re.M).group(1))
    config = json.loads((root / "etc" / "watchdog.json").read_text())
    assert timeout >= 4300 and config["command_timeout_s"] >= 4300
    # 3 x (70 + 600) follower starts + 4300 rank 0 + 3 x 5 s watches + 10 s probe, and 600 s for the stops.
    assert timeout == config["command_timeout_s"] == 3 * 670 + 4300 + 15 + 10 + 600


def test_a_watchdog_timeout_below_one_ordered_restart_is_refused(head):
    proc, root = run(head, recipe_spec={"name": "dsv41-flash-tp4-ring-sglang", "launch": {"order": "ascending"}},
                     recipe_nodes=["node", "b", "c", "d"], recipe_cluster=cluster("dsv41-flash-tp4-ring-sglang", 4),
                     watchdog_timeout_s=2400, expect_failure=True)
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert ("watchdog_timeout_s is 2400: one ordered restart of recipe dsv41-flash-tp4-ring-sglang on 4 ranks can "
            "take 6335 s") in proc.stdout
    assert "Set watchdog_timeout_s to at least 6335" in proc.stdout
    assert not (root / "units" / "sparkfold-watchdog.service").exists(), "nothing is written before the check"


def test_a_site_s_longer_watchdog_timeout_is_kept(head):
    _changed, root = run(head, watchdog_timeout_s=9000)
    assert "TimeoutStartSec=9000" in (root / "units" / "sparkfold-watchdog.service").read_text()
    assert json.loads((root / "etc" / "watchdog.json").read_text())["command_timeout_s"] == 9000
