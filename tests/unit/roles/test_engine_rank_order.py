# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The order the engine_service role starts the ranks in (roles/engine_service/tasks/ranks.yml), by the recipe's
launch.order: four local hosts, each holding one rank's unit directory, and a stand-in `systemctl` first on PATH that
records every start (and answers `show` as systemd does for an inactive unit)."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap

import pytest

from tests.unit.playbook import REPO, run_playbook

SYSTEMCTL = r'''#!/usr/bin/env python3
import os, sys, time
log = os.environ["FAKE_SYSTEMCTL_LOG"]
args = [a for a in sys.argv[1:] if not a.startswith("--")]
if args[:1] == ["show"]:
    unit = args[1]
    started = os.path.exists(log) and any(line.split()[2] == unit for line in open(log))
    state = "active" if started else "inactive"
    print(f"Id={unit}\nNames={unit}\nLoadState=loaded\nActiveState={state}\nSubState={'running' if started else 'dead'}"
          f"\nUnitFileState=static\nMainPID=0\nExecMainPID=0")
    sys.exit(0)
if args[:1] in (["start"], ["restart"], ["stop"]):
    began = time.time()
    time.sleep(0.5)
    with open(log, "a") as handle:
        handle.write(f"{began:.6f} {time.time():.6f} {args[1]} {args[0]}\n")
sys.exit(0)
'''

# The gate stand-in: `memory` calls are logged as "<began> <ended> gate@memory <args>" (rank 0's pre-gate), and exit
# with FAKE_GATE_RC; `watch` passes.
GATE = r'''import os, sys, time
if sys.argv[1:2] == ["memory"]:
    began = time.time()
    time.sleep(0.5)
    with open(os.environ["FAKE_SYSTEMCTL_LOG"], "a") as handle:
        handle.write(f"{began:.6f} {time.time():.6f} gate@memory {'_'.join(sys.argv[2:])}\n")
    if os.environ.get("FAKE_GATE_RC", "0") != "0":
        print("sparkfold-engine-gate: memory gate not met: MemAvailable is 80.0 GiB after 5 s", file=sys.stderr)
    sys.exit(int(os.environ.get("FAKE_GATE_RC", "0")))
sys.exit(0)
'''

PLAYBOOK = '''
- name: Start the ranks as the engine_service role does
  hosts: sparks
  gather_facts: false
  vars:
    recipe_spec: >-
      {{ {'world': 4, 'memory': {'gate_gib': 1, 'gate_timeout_s': 5},
          'launch': {'order': rank_order} | combine(launch_extra | default({}))} }}
    # The start order as the recipe role computes it for the cluster.
    recipe_cluster: >-
      {{ ['spark-a'] | sparkfold.cluster.recipe_cluster(['spark-b', 'spark-c', 'spark-d'], hostvars, recipe_spec) }}
    recipe_world: 4
    recipe_nodes: [spark-a, spark-b, spark-c, spark-d]
    engine_service_unit_dir: "{{ units_root }}/{{ inventory_hostname }}"
    engine_service_gate: "{{ gate }}"
    engine_service_follower_watch_s: 0
    engine_service_journal_lines: 1
    engine_service_ranks_action: started
  tasks:
    - name: Run the role's rank tasks
      ansible.builtin.include_tasks: "{{ ranks_yml }}"
      vars:
        engine_service_ranks_read: >-
          {{ ranks_read_all | default({}) | dict2items
             | selectattr('key', 'equalto', 'sparkfold-engine@' ~ recipe_nodes.index(inventory_hostname) ~ '.service')
             | items2dict }}
'''


@pytest.fixture()
def lab(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_ins = (("systemctl", SYSTEMCTL), ("gate", GATE), ("journalctl", "#!/bin/sh\nexit 0\n"))
    for name, body in stand_ins:
        path = bin_dir / name
        path.write_text(body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    units = tmp_path / "units"
    for rank, host in enumerate(("spark-a", "spark-b", "spark-c", "spark-d")):
        (units / host / f"sparkfold-engine@{rank}.service.d").mkdir(parents=True)
    python = os.environ.get("SPARKFOLD_TEST_PYTHON", sys.executable)
    (tmp_path / "hosts.yml").write_text(textwrap.dedent(f"""\
        all:
          children:
            sparks:
              hosts:
                spark-a: {{}}
                spark-b: {{}}
                spark-c: {{}}
                spark-d: {{}}
              vars:
                ansible_connection: local
                ansible_python_interpreter: {python}
                fabric_rails: [{{name: rail0, interface: enp1s0f1np1, cidr: 192.168.100.0/24}}]
        """))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    return tmp_path, bin_dir, units


def started(tmp_path, order, read=None, window=None, gate_rc=0, result_out=None):
    """The starts (began, ended, rank, action) of one run; read: what main.yml's read found, by rank (ActiveState);
    window: the recipe's launch.follower_connect_window_s; gate_rc: what rank 0's memory gate answers."""
    tmp, bin_dir, units = tmp_path
    log = tmp / "systemctl.log"
    if log.exists():
        log.unlink()
    extra = {"rank_order": order, "units_root": str(units), "gate": str(bin_dir / "gate"),
             "ranks_yml": str(REPO / "roles" / "engine_service" / "tasks" / "ranks.yml")}
    if window is not None:
        extra["launch_extra"] = {"follower_connect_window_s": window}
    if result_out is not None:  # a failure is kept for the caller (the automatic rollback's way), not raised
        extra["engine_service_ranks_keep_going"] = True
    if read is not None:
        # as main.yml passes it: every host sees the whole read, and keeps its own rank's part
        extra["ranks_read_all"] = {f"sparkfold-engine@{rank}.service": {"ActiveState": state}
                                   for rank, state in read.items()}
    result = run_playbook(
        tmp / "play.yml", tmp / "hosts.yml", tmp,
        args=["-e", json.dumps(extra)] + (["-v"] if result_out is not None else []),
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SYSTEMCTL_LOG": str(log), "FAKE_GATE_RC": str(gate_rc)})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    if result_out is not None:
        result_out.append(result.stdout)
    lines = sorted(line.split() for line in log.read_text().splitlines()) if log.exists() else []
    return [(float(began), float(ended), unit.split("@")[1].split(".")[0], action)
            for began, ended, unit, action in lines]


@pytest.mark.parametrize(("order", "ranks"), [("descending", ["3", "2", "1", "0"]),
                                              ("ascending", ["1", "2", "3", "0"])])
def test_followers_start_one_after_the_other_in_the_recipes_order_rank_0_last(lab, order, ranks):
    starts = started(lab, order)
    assert [rank for _b, _e, rank, action in starts if action == "start"] == ranks
    # Strictly one after the other: each start begins after the one before it returned.
    assert all(later[0] >= earlier[1] for earlier, later in zip(starts, starts[1:])), starts


def test_followers_first_still_starts_every_follower_before_rank_0(lab):
    starts = started(lab, "followers_first")
    ranks = [rank for _b, _e, rank, action in starts if action == "start"]
    assert sorted(ranks[:3]) == ["1", "2", "3"] and ranks[3] == "0"
    assert starts[3][0] >= max(ended for _b, ended, _rank, _action in starts[:3])


@pytest.mark.parametrize("order", ["descending", "followers_first"])
def test_a_start_leaves_running_ranks_alone_and_starts_the_rest_in_order(lab, order):
    """main.yml's read says which ranks run: a pair that serves asks nothing of systemd; a stopped follower is started,
    and a rank 0 that runs is not started again (systemd's start would do nothing either)."""
    assert started(lab, order, read={0: "active", 1: "active", 2: "activating", 3: "active"}) == []
    starts = started(lab, order, read={0: "active", 1: "inactive", 2: "active", 3: "failed"})
    ranks = [rank for _b, _e, rank, _action in starts]
    assert ranks == ["3", "1"] if order == "descending" else sorted(ranks) == ["1", "3"]


@pytest.mark.parametrize("order", ["descending", "followers_first"])
def test_rank_0s_memory_gate_passes_before_any_follower_loads_when_their_window_is_short(lab, order):
    """The dsv41 Zig followers retry rank 0 for 300 s after loading (prompt2d.zig `Link.connect(..., 300)`), and rank 0
    loads before it listens: its memory gate runs first, on its node (spark-a), with the recipe's gate."""
    starts = started(lab, order, window=300)
    assert starts[0][2:] == ("memory", "--gib_1_--timeout_5"), starts
    assert [rank for _b, _e, rank, action in starts[1:]][-1] == "0"
    assert all(later[0] >= starts[0][1] for later in starts[1:]), starts
    # without a window (the container recipes), no gate before the followers
    assert [s for s in started(lab, order) if s[2] == "memory"] == []


def test_rank_0s_memory_gate_not_met_starts_no_rank(lab):
    out = []
    starts = started(lab, "descending", window=300, gate_rc=1, result_out=out)
    assert [s[2] for s in starts] == ["memory"], starts
    assert ("spark-a: rank 0's memory gate, passed before the followers start: sparkfold-engine-gate: memory gate "
            "not met: MemAvailable is 80.0 GiB after 5 s") in out[0], out[0][-3000:]
