# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric_copy with real rsync processes; the remote shell is a stand-in for ssh that runs the
command on this machine and logs the address it was asked for (and can cut a stream short)."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import fabric_copy

from tests.unit.module_runner import module_runner

pytestmark = pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")

FAKE_SSH = """#!/bin/sh
# [-l user] host command...: run the command here, log the host; FAKE_CUT_S cuts the streams short.
if [ "$1" = "-l" ]; then shift 2; fi
echo "$1" >> "$FAKE_SSH_LOG"
host=$1
case "$1" in unreachable*) echo "ssh: connect to host $1: No route to host" >&2; exit 255;; esac
shift
case "$*" in
  *--files-from*)
    # FAKE_REFUSE_N: the first N stream connections are dropped as sshd's MaxStartups drops a burst
    i=1
    while [ "$i" -le "${FAKE_REFUSE_N:-0}" ]; do
      if mkdir "$FAKE_SSH_LOG.refused-$i" 2>/dev/null; then
        echo "kex_exchange_identification: read: Connection reset by peer" >&2
        echo "Connection reset by $host port 22" >&2
        exit 255
      fi
      i=$((i + 1))
    done
    if [ -n "$FAKE_CUT_S" ]; then  # a slow sender, killed after FAKE_CUT_S seconds: the link is cut
      slow=$(echo "$*" | sed 's/--server/--server --bwlimit=100/')
      exec timeout -s KILL "$FAKE_CUT_S" sh -c "exec $slow"
    fi;;
esac
exec sh -c "$*"
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    fake = tmp_path / "fake-ssh"
    fake.write_text(FAKE_SSH)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "ssh.log"
    monkeypatch.setenv("FAKE_SSH_LOG", str(log))
    monkeypatch.delenv("FAKE_CUT_S", raising=False)
    monkeypatch.delenv("FAKE_REFUSE_N", raising=False)
    monkeypatch.setattr(fabric_copy, "BACKOFF_S", 0.01, raising=False)
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    for i in range(6):
        (src / f"shard-{i}.safetensors").write_bytes(os.urandom(200_000 + i * 50_000))
    (src / "sub" / "config.json").write_text('{"a": 1}\n')
    (src / ".cache").mkdir()
    (src / ".cache" / "skip").write_text("not copied\n")
    run = module_runner(monkeypatch, fabric_copy.main)

    def copy(check=False, diff=False, **extra):
        args = {"src": str(src), "dest": str(tmp_path / "dest"), "addresses": ["rail0", "rail1"],
                "rsh": str(fake), "streams": 4, "excludes": ["/.cache/"], "_ansible_check_mode": check,
                "_ansible_diff": diff}
        args.update(extra)
        return run({key: value for key, value in args.items() if value is not None})  # None: left out

    copy.src, copy.dest, copy.log = src, tmp_path / "dest", log
    return copy


def tree(root):
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".cache"]
        for name in files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


def test_copies_over_both_addresses_then_nothing_to_do(env):
    kind, result, _warnings = env()
    assert kind == "exit", result
    assert result["changed"] is True
    assert tree(env.dest) == tree(env.src)
    assert not (env.dest / ".cache").exists()
    assert len(result["streams"]) == 4
    assert {s["address"] for s in result["streams"]} == {"rail0", "rail1"}
    assert all(s["rc"] == 0 for s in result["streams"])
    hosts = env.log.read_text().split()
    assert hosts.count("rail1") == 2  # two streams over the second rail; listing and final pass over the first
    assert sorted(result["transferred"]) == sorted(tree(env.src))

    env.log.write_text("")
    kind, result, _warnings = env()
    assert kind == "exit" and result["changed"] is False and result["streams"] == [] and result["transferred"] == []
    assert env.log.read_text().split() == ["rail0"]  # one listing, nothing else


def test_check_mode_changes_nothing_and_says_what_would(env):
    kind, result, _warnings = env(check=True, diff=True)
    assert kind == "exit", result
    assert result["changed"] is True
    assert not env.dest.exists()
    assert "send shard-5.safetensors (450000 bytes)" in result["diff"]["prepared"]
    env()
    (env.dest / "extra.bin").write_text("gone\n")
    kind, result, _warnings = env(check=True)
    assert result["changed"] is True and result["deleted"] == ["extra.bin"]
    assert (env.dest / "extra.bin").exists()
    kind, result, _warnings = env()
    assert result["changed"] is True and not (env.dest / "extra.bin").exists()


def test_a_cut_stream_keeps_what_came_and_the_next_run_resumes(env, monkeypatch):
    env()
    good = (env.dest / "shard-5.safetensors").read_bytes()
    for i in range(6):
        (env.src / f"shard-{i}.safetensors").write_bytes(os.urandom(500_000 + i))  # new sizes: rsync sees them
    monkeypatch.setenv("FAKE_CUT_S", "1")
    kind, result, _warnings = env()
    assert kind == "fail", result
    assert "rsync streams failed" in result["msg"] and "next run resumes" in result["msg"]
    # the old copy stays whole until the new one is complete; what came waits in .rsync-partial
    assert (env.dest / "shard-5.safetensors").read_bytes() == good
    partials = list(env.dest.glob(".rsync-partial/*"))
    assert partials and any(p.stat().st_size > 0 for p in partials)
    monkeypatch.delenv("FAKE_CUT_S")
    kind, result, _warnings = env()
    assert kind == "exit", result
    assert tree(env.dest) == tree(env.src)
    assert not (env.dest / ".rsync-partial").exists()


def test_streams_refused_by_sshd_at_start_are_started_again(env, monkeypatch):
    # three of four streams reset before the key exchange, as sshd's MaxStartups drops a burst (several
    # workers pulling from one head at once)
    monkeypatch.setenv("FAKE_REFUSE_N", "3")
    kind, result, _warnings = env()
    assert kind == "exit", result
    assert tree(env.dest) == tree(env.src)
    assert sum(s["attempts"] for s in result["streams"]) == len(result["streams"]) + 3
    assert all(s["rc"] == 0 for s in result["streams"])


def test_a_stream_refused_more_often_than_allowed_fails_naming_sshd(env, monkeypatch):
    monkeypatch.setenv("FAKE_REFUSE_N", "50")
    kind, result, _warnings = env(streams=1, connect_retries=2)
    assert kind == "fail", result
    assert result["streams"][0]["attempts"] == 3
    assert "Connection reset by rail" in result["msg"]
    assert "rsync streams failed" in result["msg"] and "next run resumes" in result["msg"]


def test_listing_falls_back_to_the_next_address(env):
    kind, result, _warnings = env(addresses=["unreachable0", "rail1"], streams=1)
    assert kind == "exit", result
    assert result["address"] == "rail1"
    assert {s["address"] for s in result["streams"]} == {"rail1"}
    assert tree(env.dest) == tree(env.src)


def test_no_address_reaches_the_source(env):
    kind, result, _warnings = env(addresses=["unreachable0", "unreachable1"])
    assert kind == "fail" and result["kind"] == "unreachable"
    assert "unreachable0, unreachable1" in result["msg"]


def test_missing_source_fails_except_in_check_mode(env, tmp_path):
    kind, result, warnings = env(check=True, src=str(tmp_path / "nothing"))
    assert kind == "exit" and result["source_missing"] is True and result["changed"] is False
    assert any("does not exist" in w for w in warnings)
    kind, result, _warnings = env(src=str(tmp_path / "nothing"))
    assert kind == "fail" and "does not exist on the source node" in result["msg"]


@pytest.mark.parametrize(
    "args, message",
    [
        ({"addresses": [" "]}, "addresses is empty"),
        ({"streams": 0}, "streams is 0"),
        ({"connect_retries": -1}, "connect_retries is -1"),
        ({"dest": "relative/dir"}, "dest must be an absolute path"),
    ],
)
def test_bad_input_is_refused_before_any_copy(env, args, message):
    kind, result, _warnings = env(**args)
    assert kind == "fail" and message in result["msg"]
    assert not env.log.exists()


def test_several_copies_in_one_run_list_at_once_then_copy(env, tmp_path):
    other = tmp_path / "kit"
    (other / "tools").mkdir(parents=True)
    (other / "tools" / "verify_kit.sh").write_text("echo ok\n")
    (other / ".cache").mkdir()
    copies = [{"src": str(env.src), "dest": str(env.dest), "excludes": ["/.cache/"]},
              {"src": str(other), "dest": str(tmp_path / "kit-copy"), "excludes": ["/.cache/"]}]
    kind, result, _warnings = env(check=True, diff=True, src=None, dest=None, excludes=None, copies=copies)
    assert kind == "exit", result
    assert result["changed"] is True
    assert [c["changed"] for c in result["copies"]] == [True, True]
    assert not env.dest.exists() and not (tmp_path / "kit-copy").exists()
    assert result["diff"][1]["prepared"].startswith(f"{tmp_path / 'kit-copy'}:\n")
    assert "tools/verify_kit.sh" in result["diff"][1]["prepared"]

    kind, result, _warnings = env(src=None, dest=None, excludes=None, copies=copies)
    assert kind == "exit", result
    assert result["changed"] is True
    assert tree(env.dest) == tree(env.src)
    assert tree(tmp_path / "kit-copy") == tree(other)
    assert not (tmp_path / "kit-copy" / ".cache").exists()
    assert [(c["src"], c["dest"]) for c in result["copies"]] == [(c["src"], c["dest"]) for c in copies]

    env.log.write_text("")
    kind, result, _warnings = env(src=None, dest=None, excludes=None, copies=copies)
    assert kind == "exit" and result["changed"] is False
    assert [c["transferred"] for c in result["copies"]] == [[], []]
    assert env.log.read_text().split() == ["rail0", "rail0"]  # one listing each, nothing else


def test_several_copies_fail_on_a_missing_source_except_in_check_mode(env, tmp_path):
    copies = [{"src": str(env.src), "dest": str(env.dest)},
              {"src": str(tmp_path / "nothing"), "dest": str(tmp_path / "nothing-copy")}]
    kind, result, _warnings = env(check=True, src=None, dest=None, excludes=None, copies=copies)
    assert kind == "exit", result
    assert [c["source_missing"] for c in result["copies"]] == [False, True]
    kind, result, _warnings = env(src=None, dest=None, excludes=None, copies=copies)
    assert kind == "fail" and "does not exist on the source node" in result["msg"]


def test_several_copies_none_reaching_the_source(env, tmp_path):
    copies = [{"src": str(env.src), "dest": str(env.dest)}]
    kind, result, _warnings = env(src=None, dest=None, excludes=None, copies=copies,
                                  addresses=["unreachable0", "unreachable1"])
    assert kind == "fail" and result["kind"] == "unreachable"


@pytest.mark.parametrize(
    "args, message",
    [
        ({"copies": []}, "copies is empty"),
        ({"copies": [{"src": "relative", "dest": "/x"}]}, "src must be an absolute path"),
        ({"copies": [{"src": "/x", "dest": "/x"}], "src": "/x"}, "mutually exclusive"),
    ],
)
def test_bad_copies_are_refused_before_any_copy(env, args, message):
    extra = {"src": None, "dest": None, "excludes": None}
    extra.update(args)
    kind, result, _warnings = env(**extra)
    assert kind == "fail" and message in result["msg"], result
    assert not env.log.exists()
