# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster.unit_verify: a stand-in systemd-analyze first on PATH says what the tests need."""

import json
import stat

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import unit_verify

from tests.unit.module_runner import module_runner

ANALYZE = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["FAKE_ANALYZE_LOG"], "w") as log:
    json.dump({"argv": sys.argv[1:], "unit_path": os.environ.get("SYSTEMD_UNIT_PATH")}, log)
sys.stderr.write(os.environ.get("FAKE_ANALYZE_SAYS", ""))
sys.exit(int(os.environ.get("FAKE_ANALYZE_RC", "0")))
"""


@pytest.fixture
def run(monkeypatch, tmp_path):
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "systemd-analyze"
    fake.write_text(ANALYZE)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_ANALYZE_LOG", str(tmp_path / "analyze.json"))
    return module_runner(monkeypatch, unit_verify.main)


def test_clean_units_pass_and_others_units_messages_do_not_count(run, monkeypatch, tmp_path):
    # What the engine's install.yml verifies: staged units, looked up in the staging directory first.
    monkeypatch.setenv("FAKE_ANALYZE_SAYS", "/lib/systemd/system/snapd.service:23: Unknown key name 'X', ignoring.\n")
    kind, result, _w = run({"units": ["sparkfold-engine@0.service", "sparkfold-engine.target"],
                            "unit_path": "/var/lib/sparkfold/units-staged:"})
    assert kind == "exit", result
    assert (result["changed"], result["rc"], result["problems"]) == (False, 0, [])
    assert result["messages"] == ["/lib/systemd/system/snapd.service:23: Unknown key name 'X', ignoring."]
    called = json.loads((tmp_path / "analyze.json").read_text())
    assert called == {"argv": ["verify", "--man=no", "sparkfold-engine@0.service", "sparkfold-engine.target"],
                      "unit_path": "/var/lib/sparkfold/units-staged:"}


def test_a_message_about_a_unit_fails_though_systemd_analyze_exits_0(run, monkeypatch):
    said = "/etc/systemd/system/sparkfold-watchdog.service:9: Unknown key name 'Xyz' in section 'Unit', ignoring."
    monkeypatch.setenv("FAKE_ANALYZE_SAYS", f"{said}\n/lib/systemd/system/other.service:1: fine\n")
    units = ["/etc/systemd/system/sparkfold-watchdog.service", "/etc/systemd/system/sparkfold-watchdog.timer"]
    kind, result, _w = run({"units": units})
    assert kind == "fail"
    assert result["problems"] == [said] and result["rc"] == 0
    assert result["msg"] == (f"systemd-analyze verify found problems in {', '.join(units)}: {said}; fix the unit"
                             " (its template or the variables it is rendered from) and run again")


def test_a_non_zero_exit_fails_with_its_last_messages_and_match_narrows_what_counts(run, monkeypatch):
    monkeypatch.setenv("FAKE_ANALYZE_SAYS", "Failed to prepare filename x: Invalid argument\n")
    monkeypatch.setenv("FAKE_ANALYZE_RC", "1")
    kind, result, _w = run({"units": ["x"], "match": ["nothing-says-this"]})
    assert kind == "fail" and result["problems"] == []
    assert "found problems in x: Failed to prepare filename x: Invalid argument;" in result["msg"]
    monkeypatch.setenv("FAKE_ANALYZE_RC", "0")
    monkeypatch.setenv("FAKE_ANALYZE_SAYS", "sparkfold-engine@0.service: Command /opt/x is not executable\n")
    assert run({"units": ["sparkfold-engine@0.service"], "match": ["sparkfold-watchdog"]})[0] == "exit"
    assert run({"units": ["sparkfold-engine@0.service"]})[0] == "fail"


def test_default_match_is_each_units_stem_once():
    assert unit_verify.default_match(["/etc/systemd/system/sparkfold-watchdog.service", "sparkfold-watchdog.timer",
                                      "sparkfold-engine@0.service", "sparkfold-engine.target"]) == [
        "sparkfold-watchdog", "sparkfold-engine"]


def test_no_systemd_analyze_fails_saying_what_to_install(run, monkeypatch, tmp_path):
    monkeypatch.setattr(unit_verify.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)
    kind, result, _w = run({"units": ["a.service"]})
    assert (kind, result["msg"]) == ("fail", "systemd-analyze is not on the PATH of this node: install systemd"
                                             " (it verifies units)")
