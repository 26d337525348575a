# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkfold.cluster.preflight against local hosts (no lab): everything it checks is read in one raw command
per node (templates/gather.sh.j2) and judged on the controller; the problems of every host fail once.

The lab test (molecule/pair verify.yml) checks the same messages on the lab pair.
"""

from __future__ import annotations

import json
import re
import sys

from tests.unit.playbook import run_playbook

PLAY = """
- name: Preflight
  hosts: sparks
  gather_facts: false
  roles:
    - role: sparkfold.cluster.preflight
"""


def _run(tmp_path, extra, args=()):
    # Two inventory hosts that are this machine (getent resolves both names), and one that resolves nowhere.
    (tmp_path / "inventory.yml").write_text(
        "sparks:\n  hosts:\n" + "".join(
            f"    {h}:\n      ansible_connection: local\n      ansible_python_interpreter: {sys.executable}\n"
            for h in ("localhost", "127.0.0.1"))
        + "others:\n  hosts:\n    nosuch.invalid:\n      ansible_host: nosuch.invalid\n")
    (tmp_path / "play.yml").write_text(PLAY)
    lab = {"preflight_lab": True, "preflight_lab_os": [{"distribution": "Debian", "version": "12"},
                                                       {"distribution": "Ubuntu", "version": "24.04"}],
           "preflight_model_store_dir": str(tmp_path / "store" / "not" / "yet"),
           "preflight_model_store_required_gib": 1, "preflight_min_memory_gib": 1,
           "preflight_interfaces": ["lo"], "preflight_peers": ["localhost"]}
    return run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path,
                        ["-e", json.dumps({**lab, **extra}), *args])


def _fatals(out):
    return [json.loads(m) for m in re.findall(r"^fatal: \[[^\]]+\]: FAILED! => (\{.*\})$", out, re.MULTILINE)]


def test_a_fit_node_passes_and_the_summary_names_what_was_measured(tmp_path):
    proc = _run(tmp_path, {}, ["--limit", "localhost"])
    assert proc.returncode == 0, proc.stdout[-4000:]
    after = proc.stdout[proc.stdout.index("Summarise what was checked"):]
    summary = json.JSONDecoder().raw_decode(after[after.index("{"):])[0]
    passed = "\n".join(summary["msg"]["passed"])
    # the store's nearest existing parent was measured
    assert re.search(rf"localhost: [0-9.]+ GiB free for {tmp_path}/store/not/yet \(measured at {tmp_path}\)",
                     passed), passed
    assert re.search(r"localhost: [0-9.]+ GiB memory \(MemTotal\), needs 1 GiB", passed), passed
    assert "localhost: interfaces present: lo" in passed
    assert re.search(r"localhost: resolves localhost=(127\.0\.0\.1|::1)", passed), passed
    assert "localhost: reaches by ping: no other node" in passed
    assert re.search(r"localhost: clock differs from the controller's by -?[0-9.]+ s", passed), passed
    assert any("NTP synchronisation: not available in the lab" in n for n in summary["msg"]["not_available_in_the_lab"])


def test_every_problem_of_every_host_in_one_failure(tmp_path):
    proc = _run(tmp_path, {"preflight_model_store_required_gib": 999999, "preflight_min_memory_gib": 9999,
                           "preflight_interfaces": ["lo", "ethX"],
                           "preflight_peers": ["localhost", "127.0.0.1", "nosuch.invalid"]})
    assert proc.returncode == 2, proc.stdout[-4000:]
    fatals = _fatals(proc.stdout)
    assert len(fatals) == 1, proc.stdout[-4000:]
    msg = fatals[0]["msg"]
    # 10 problems, 12 on a controller without ping (then the pings between the two names fail too)
    assert re.match(r"Preflight: 1[02] problem\(s\) on localhost, 127\.0\.0\.1:", msg), msg
    for host in ("localhost", "127.0.0.1"):
        assert re.search(rf"- {re.escape(host)}: interface ethX not found \(have: .*\blo\b", msg), msg
        assert re.search(rf"- {re.escape(host)}: [0-9.]+ GiB memory \(MemTotal\), at least 9999 GiB required", msg), msg
        assert re.search(rf"- {re.escape(host)}: [0-9.]+ GiB free under {tmp_path} \(measured at {tmp_path},"
                         rf" filesystem \S+, store {tmp_path}/store/not/yet\), the recipe needs 999999 GiB", msg), msg
        assert f"- {host}: inventory host nosuch.invalid does not resolve (getent hosts nosuch.invalid exited 2)" in msg
        # no ping on the machine or an unknown name: either way ping failed, and says why
        assert (f"- {host}: cannot reach nosuch.invalid at nosuch.invalid on the management network"
                " (ping failed: ") in msg


def test_a_clock_outside_the_limit_is_a_problem(tmp_path):
    # No clock fits a negative limit: the problem names the difference and the interval it was measured in.
    proc = _run(tmp_path, {"preflight_max_clock_skew_s": -200}, ["--limit", "localhost"])
    fatals = _fatals(proc.stdout)
    assert len(fatals) == 1 and re.search(
        r"localhost: clock differs from the controller's by -?[0-9.]+ s \(node minus controller, between -?[0-9.]+ and"
        r" -?[0-9.]+ s\), more than the -200 s allowed", fatals[0]["msg"]), \
        proc.stdout[-4000:]
