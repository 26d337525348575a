# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the sparkfold.cluster.engine_node_facts module (AnsibleModule run in-process).

The node's real /proc/meminfo, a model store made of sparse files, and a stand-in systemctl first on the PATH that
names this test's own process as the unit's main process (its /proc/PID/exe is this Python).
"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils.env_file import parse_env
from ansible_collections.sparkfold.cluster.plugins.modules import engine_node_facts

from tests.unit.module_runner import module_runner


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, engine_node_facts.main)


@pytest.fixture
def systemctl(tmp_path, monkeypatch):
    """A stand-in systemctl whose `show --property=MainPID --value UNIT` prints $FAKE_MAINPID."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "systemctl"
    script.write_text('#!/bin/sh\n[ "$1 $2 $3" = "show --property=MainPID --value" ] || exit 3\necho "$FAKE_MAINPID"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MAINPID", "0")
    return monkeypatch


def _store(tmp_path):
    store = tmp_path / "model"
    store.mkdir()
    for name, size in (("model-00001-of-00002.safetensors", 3000), ("model-00002-of-00002.safetensors", 500),
                       (".model-00003-of-00003.safetensors", 7), ("config.json", 11)):
        with open(store / name, "wb") as handle:
            handle.truncate(size)
    (store / "sub").mkdir()
    with open(store / "sub" / "x.safetensors", "wb") as handle:
        handle.truncate(13)
    return store


def _mem_total():
    with open("/proc/meminfo") as handle:
        return int(next(line for line in handle if line.startswith("MemTotal:")).split()[1])


def test_reads_memory_weights_running_program_and_record(run, tmp_path, systemctl):
    systemctl.setenv("FAKE_MAINPID", str(os.getpid()))
    record = tmp_path / "serving.json"
    record.write_text(json.dumps({"build": "3c0666ef046d38c4", "units": {}}))
    kind, result, _w = run({"model_dir": str(_store(tmp_path)), "unit": "sparkfold-engine@0.service",
                            "record": str(record), "_ansible_check_mode": True})
    assert kind == "exit", result
    assert result["changed"] is False
    assert result["mem_total_kib"] == _mem_total()
    assert result["weights_bytes"] == 3500  # the two shards only: not hidden, not config, not in a subdirectory
    assert result["running_exe"] == os.path.realpath(sys.executable)
    assert result["record"] == {"build": "3c0666ef046d38c4", "units": {}}


def test_nothing_running_no_store_no_record(run, tmp_path, systemctl):
    kind, result, _w = run({"model_dir": str(tmp_path / "absent"), "unit": "sparkfold-engine@1.service",
                            "record": str(tmp_path / "none.json")})
    assert kind == "exit", result
    assert result["weights_bytes"] == 0 and result["running_exe"] == "" and result["record"] is None


@pytest.mark.parametrize("text, message", [
    ("{not json", "is not JSON"),
    ("[1, 2]", "is not a JSON object"),
])
def test_a_broken_record_fails_saying_what_to_do(run, tmp_path, systemctl, text, message):
    record = tmp_path / "serving.json"
    record.write_text(text)
    kind, result, _w = run({"model_dir": str(tmp_path), "unit": "u.service", "record": str(record)})
    assert kind == "fail"
    assert message in result["msg"] and "remove it, and the next run records what serves again" in result["msg"]


def test_meminfo_parsing(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       130799076 kB\nMemFree:         1000 kB\n")
    assert engine_node_facts.mem_total_kib(str(meminfo)) == 130799076
    meminfo.write_text("MemFree:         1000 kB\n")
    with pytest.raises(ValueError, match="no MemTotal line"):
        engine_node_facts.mem_total_kib(str(meminfo))


# The fabric role's fabric.env on a ring (roles/fabric/templates/fabric.env.j2), as it writes it.
RING_FABRIC_ENV = """\
# Ansible managed
# Fabric environment of spark-a for the engine ranks (EnvironmentFile=).
SPARKFOLD_FABRIC_INDEX=0
SPARKFOLD_BOOTSTRAP_IFNAME=enP7s7
NCCL_SOCKET_IFNAME==enP7s7
GLOO_SOCKET_IFNAME=enP7s7

NCCL_IB_HCA==rocep1s0f0,rocep1s0f1
"""


def test_reads_the_environment_file_as_systemd_does(run, tmp_path, systemctl):
    env_file = tmp_path / "fabric.env"
    env_file.write_text(RING_FABRIC_ENV)
    kind, result, _w = run({"model_dir": str(tmp_path), "unit": "u.service", "record": str(tmp_path / "none.json"),
                            "env_file": str(env_file), "_ansible_check_mode": True})
    assert kind == "exit", result
    assert result["changed"] is False
    assert result["env"] == {"SPARKFOLD_FABRIC_INDEX": "0", "SPARKFOLD_BOOTSTRAP_IFNAME": "enP7s7",
                             "NCCL_SOCKET_IFNAME": "=enP7s7", "GLOO_SOCKET_IFNAME": "enP7s7",
                             "NCCL_IB_HCA": "=rocep1s0f0,rocep1s0f1"}


def test_a_missing_environment_file_and_none_asked_read_null(run, tmp_path, systemctl):
    for extra in ({"env_file": str(tmp_path / "absent.env")}, {}):
        kind, result, _w = run({"model_dir": str(tmp_path), "unit": "u.service", "record": str(tmp_path / "n.json"),
                                **extra})
        assert kind == "exit", result
        assert result["env"] is None


def test_a_broken_environment_file_fails_naming_the_line_and_the_fix(run, tmp_path, systemctl):
    env_file = tmp_path / "fabric.env"
    env_file.write_text("SPARKFOLD_FABRIC_INDEX=0\nenP7s7\n")
    kind, result, _w = run({"model_dir": str(tmp_path), "unit": "u.service", "record": str(tmp_path / "n.json"),
                            "env_file": str(env_file)})
    assert kind == "fail"
    assert f"the environment file {env_file} is not an environment file: line 2 is not KEY=VALUE: 'enP7s7'" \
        in result["msg"]
    assert "site.yml without --tags writes it again" in result["msg"]


@pytest.mark.parametrize("text, expected", [
    ("", {}),
    ("# comment\n; comment too\n\n   \n", {}),
    ("A=1\nA=2\n", {"A": "2"}),                        # the last assignment wins
    ("  KEY = spaced value  \n", {"KEY": "spaced value"}),
    ("Q=\"in quotes\"\nS='single'\nH=\"half\n", {"Q": "in quotes", "S": "single", "H": "\"half"}),
    ("EMPTY=\nEQ==x=y\n", {"EMPTY": "", "EQ": "=x=y"}),  # only the first = separates; NCCL's exact-match =
    ("_X1=a#b\n", {"_X1": "a#b"}),                     # a # inside a value is the value's
])
def test_env_file_parsing(text, expected):
    assert parse_env(text) == expected


@pytest.mark.parametrize("text, message", [
    ("A=1\nnot an assignment\n", "line 2 is not KEY=VALUE: 'not an assignment'"),
    ("=value\n", "line 1 is not KEY=VALUE"),
    ("1A=x\n", "line 1 is not KEY=VALUE"),
    ("A B=x\n", "line 1 is not KEY=VALUE"),
])
def test_env_file_parsing_names_a_line_that_is_not_an_assignment(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_env(text)
