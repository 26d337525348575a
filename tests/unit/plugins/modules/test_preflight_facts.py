# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster.preflight_facts: stand-ins for getent, ping and timedatectl first on PATH, a
meminfo and a sysfs tree of the test's own."""

import os
import time

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import preflight_facts

from tests.unit.module_runner import module_runner

PROGRAMS = {
    "getent": """#!/bin/sh
case "$2" in
  spark-b) echo "10.0.0.12       spark-b spark-b.lan";;
  *) exit 2;;
esac
""",
    "ping": """#!/bin/sh
echo "$*" >> "$FAKE_LOG"
case "$*" in
  *10.0.0.12*) echo "1 packets transmitted, 1 received, 0% packet loss"; exit 0;;
  *10.0.0.13*) echo "1 packets transmitted, 0 received, 100% packet loss"; exit 1;;
  *) echo "ping: nosuch.invalid: Name or service not known" >&2; exit 2;;
esac
""",
    "timedatectl": """#!/bin/sh
[ -n "$FAKE_NTP_FAILS" ] && { echo "System has not been booted with systemd as init system (PID 1)." >&2; exit 1; }
echo "$*" >> "$FAKE_LOG"; echo yes
""",
}


@pytest.fixture
def node(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    for name, body in PROGRAMS.items():
        (tmp_path / "bin" / name).write_text(body)
        (tmp_path / "bin" / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    (tmp_path / "meminfo").write_text("MemTotal:       127824516 kB\nMemFree:         1000 kB\n")
    for name in ("lo", "enp1s0f1np1", "enP2p1s0f1np1"):
        (tmp_path / "sys" / "class" / "net" / name).mkdir(parents=True)
    return tmp_path


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, preflight_facts.main)


def test_everything_is_read_as_data_in_one_run(run, node):
    before = time.time()
    kind, result, _w = run({
        "controller_time": before, "store_dir": str(node / "store" / "not" / "yet"),
        "resolve": ["spark-b", "nosuch.invalid"],
        "pings": [{"peer": "spark-b", "address": "10.0.0.12"}, {"peer": "spark-c", "address": "10.0.0.13"},
                  {"peer": "nosuch.invalid", "address": "nosuch.invalid"}],
        "ping_timeout_s": 3, "meminfo_path": str(node / "meminfo"), "sysfs_root": str(node / "sys")})
    assert kind == "exit" and result["changed"] is False
    assert result["clock"]["controller"] == before <= result["clock"]["node"] <= result["clock"]["node_end"]
    assert result["ntp"] == {"ok": True, "value": "yes", "error": None}
    assert result["memory"] == {"total_kib": 127824516, "error": None}
    assert result["netdevs"] == {"names": ["enP2p1s0f1np1", "enp1s0f1np1", "lo"], "error": None}
    store = result["store"]
    assert store["measured_at"] == str(node) and store["error"] is None
    usage = os.statvfs(node)
    assert abs(store["free_bytes"] - usage.f_bavail * usage.f_frsize) < 1024 ** 3 and store["mount_point"]
    assert result["resolve"] == [{"name": "spark-b", "rc": 0, "address": "10.0.0.12", "error": None},
                                 {"name": "nosuch.invalid", "rc": 2, "address": None, "error": None}]
    assert result["pings"] == [
        {"peer": "spark-b", "address": "10.0.0.12", "rc": 0, "error": None},
        {"peer": "spark-c", "address": "10.0.0.13", "rc": 1,
         "error": "1 packets transmitted, 0 received, 100% packet loss"},
        {"peer": "nosuch.invalid", "address": "nosuch.invalid", "rc": 2,
         "error": "ping: nosuch.invalid: Name or service not known"}]
    calls = (node / "calls.log").read_text()
    assert "-n -q -c 1 -w 3 10.0.0.12" in calls and "show --property=NTPSynchronized --value" in calls


def test_what_cannot_be_read_says_why_and_fails_nothing(run, node, monkeypatch):
    monkeypatch.setenv("FAKE_NTP_FAILS", "1")
    (node / "bin" / "ping").unlink()
    kind, result, _w = run({"pings": [{"peer": "spark-b", "address": "10.0.0.12"}],
                            "meminfo_path": str(node / "no-meminfo"), "sysfs_root": str(node / "no-sys")})
    assert kind == "exit"
    assert result["ntp"] == {"ok": False, "value": None,
                             "error": "System has not been booted with systemd as init system (PID 1)."}
    assert result["memory"]["total_kib"] is None and "no-meminfo" in result["memory"]["error"]
    assert result["netdevs"]["names"] is None and "no-sys" in result["netdevs"]["error"]
    assert result["store"] is None and result["clock"]["controller"] is None
    if not any(os.access(os.path.join(d, "ping"), os.X_OK) for d in ("/usr/bin", "/bin", "/usr/sbin", "/sbin")):
        assert result["pings"] == [{"peer": "spark-b", "address": "10.0.0.12", "rc": 127,
                                    "error": "ping: not found on PATH"}]
    else:
        assert result["pings"][0]["rc"] != 0


def test_a_relative_store_dir_is_refused(run):
    kind, result, _w = run({"store_dir": "srv/models"})
    assert (kind, result["msg"]) == ("fail", "store_dir must be an absolute path, got srv/models")
