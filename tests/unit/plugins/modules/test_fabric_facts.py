# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.fabric_facts module (AnsibleModule run in-process).

sysfs comes from the fixture trees (laid out like /sys on a Spark); `ip` and `ssh-keygen` are faked at
AnsibleModule.run_command, the fabric account's passwd entry at pwd.getpwnam (its home is a tmp dir).
"""

from __future__ import annotations

import grp
import json
import os
import pwd

import pytest
from ansible.module_utils import basic
from ansible_collections.sparkfold.cluster.plugins.module_utils.roce import gather_roce_facts
from ansible_collections.sparkfold.cluster.plugins.modules import fabric_facts

from tests.unit.module_runner import module_runner

PUBLIC = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMyMT4vBekf9ZqDK49KAf2230vYUnBg9Es/9MDUgxAFx"
IP_LINKS = [
    {"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP"], "mtu": 65536,
     "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
    {"ifindex": 5, "ifname": "enp1s0f1np1", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "mtu": 9000,
     "min_mtu": 68, "max_mtu": 9978,
     "addr_info": [{"family": "inet", "local": "192.168.100.2", "prefixlen": 24}]},
]
ME = {"owner": pwd.getpwuid(os.getuid()).pw_name, "group": grp.getgrgid(os.getgid()).gr_name}


@pytest.fixture
def node(monkeypatch, tmp_path, fixtures_dir):
    """A fake node: the spark-a sysfs tree, an account 'fabric' whose home is tmp_path/home, and the commands
    the module runs answered from node.commands (argv[0] basename -> (rc, out, err)); node.run(args)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    real_getpwnam = pwd.getpwnam

    def getpwnam(name):
        if name == "fabric":
            return pwd.struct_passwd(("fabric", "x", 4242, 4343, "", str(home), "/bin/sh"))
        return real_getpwnam(name)

    class Node:
        pass

    state = Node()
    state.home = home
    state.calls = []
    state.commands = {"ip": (0, json.dumps(IP_LINKS), ""),
                      "ssh-keygen": (0, PUBLIC + " sparkfold-fabric@spark-a\n", "")}

    def run_command(self, args, **_kwargs):
        state.calls.append(list(args))
        return state.commands[os.path.basename(args[0])]

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return f"/usr/bin/{name}" if name in state.commands else None

    monkeypatch.setattr(fabric_facts.pwd, "getpwnam", getpwnam)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    runner = module_runner(monkeypatch, fabric_facts.main)
    sysfs = os.path.join(fixtures_dir, "sysfs", "spark-a")

    def run(args):
        args = dict(args)
        args.setdefault("sysfs_root", sysfs)
        args.setdefault("ssh_user", "fabric")
        return runner(args)

    state.run = run
    state.sysfs = sysfs
    return state


def test_one_run_reads_sysfs_the_live_interfaces_the_account_and_the_files(node, tmp_path):
    key = node.home / ".ssh" / "sparkfold_fabric"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n-----END OPENSSH PRIVATE KEY-----\n")
    key.chmod(0o600)
    (node.home / ".ssh" / "sparkfold_fabric.pub").write_text(PUBLIC + " sparkfold-fabric@spark-a\n")
    (node.home / ".ssh" / "known_hosts").write_text("192.168.100.1 ssh-ed25519 AAAA\n")
    env = tmp_path / "fabric.env"
    env.write_text("SPARKFOLD_FABRIC_INDEX=2\n")
    env.chmod(0o644)
    kind, result, warnings = node.run({"paths": [str(env), str(tmp_path / "absent.yaml"), str(tmp_path)]})
    assert kind == "exit", result
    assert warnings == []
    assert result["changed"] is False
    # sysfs exactly as roce_facts returns it
    assert result["ansible_facts"]["sparkfold_roce"] == gather_roce_facts(node.sysfs)[0]
    assert result["ip_links"] == IP_LINKS
    ssh = result["ssh"]
    assert (ssh["user"], ssh["uid"], ssh["gid"], ssh["home"]) == ("fabric", 4242, 4343, str(node.home))
    assert ssh["dir"]["type"] == "directory" and "content" not in ssh["dir"]
    # the private key's state but never its text; its public half derived with ssh-keygen -y
    assert ssh["key"] == {"exists": True, "type": "file", "mode": "0600", **ME}
    assert ssh["key_public"] == PUBLIC
    assert ["/usr/bin/ssh-keygen", "-y", "-P", "", "-f", str(key)] in node.calls
    assert ssh["key_pub"]["content"] == PUBLIC + " sparkfold-fabric@spark-a\n"
    assert ssh["known_hosts"]["content"] == "192.168.100.1 ssh-ed25519 AAAA\n"
    assert ssh["authorized_keys"] == {"exists": False, "type": "absent"}
    assert result["files"] == {
        str(env): {"exists": True, "type": "file", "mode": "0644", "content": "SPARKFOLD_FABRIC_INDEX=2\n", **ME},
        str(tmp_path / "absent.yaml"): {"exists": False, "type": "absent"},
        str(tmp_path): {"exists": True, "type": "directory", "mode": f"{os.stat(tmp_path).st_mode & 0o7777:04o}", **ME},
    }
    assert ["/usr/bin/ip", "-json", "-details", "addr", "show"] in node.calls


def test_check_mode_reads_the_same(node):
    kind, result, _warnings = node.run({"_ansible_check_mode": True})
    assert kind == "exit" and result["changed"] is False
    assert result["ip_links"] == IP_LINKS


def test_no_key_no_public_half_and_ssh_keygen_not_run(node):
    kind, result, _warnings = node.run({})
    assert kind == "exit"
    assert result["ssh"]["key"] == {"exists": False, "type": "absent"}
    assert result["ssh"]["key_public"] is None
    assert not [c for c in node.calls if c[0].endswith("ssh-keygen")]


@pytest.mark.parametrize("answer", [(255, "", "Load key: incorrect passphrase supplied"), (0, "", "")])
def test_a_key_ssh_keygen_cannot_read_has_no_public_half(node, answer):
    (node.home / ".ssh" / "sparkfold_fabric").write_text("broken")
    node.commands["ssh-keygen"] = answer
    kind, result, _warnings = node.run({})
    assert kind == "exit"
    assert result["ssh"]["key"]["type"] == "file"
    assert result["ssh"]["key_public"] is None


def test_without_ssh_keygen_no_public_half(node):
    (node.home / ".ssh" / "sparkfold_fabric").write_text("key")
    del node.commands["ssh-keygen"]
    kind, result, _warnings = node.run({})
    assert kind == "exit" and result["ssh"]["key_public"] is None


def test_an_unknown_account_fails_naming_it(node):
    kind, result, _warnings = node.run({"ssh_user": "nobody-here-4242"})
    assert kind == "fail"
    assert result["msg"].startswith("no account nobody-here-4242 in the passwd database (fabric_ssh_user)")


def test_ip_failing_fails_with_its_error(node):
    node.commands["ip"] = (255, "", "Option \"-json\" is unknown, try \"ip -help\".\n")
    kind, result, _warnings = node.run({})
    assert kind == "fail"
    assert result["msg"] == 'ip -json -details addr show failed (rc 255): Option "-json" is unknown, try "ip -help".'


def test_ip_printing_no_json_fails(node):
    node.commands["ip"] = (0, "1: lo: <LOOPBACK,UP> mtu 65536", "")
    kind, result, _warnings = node.run({})
    assert kind == "fail"
    assert result["msg"].startswith("ip -json -details addr show printed no JSON")


def test_relative_paths_and_a_key_name_with_a_slash_are_refused(node):
    kind, result, _warnings = node.run({"paths": ["etc/netplan/40-cx7.yaml"]})
    assert (kind, result["msg"]) == ("fail", "paths must be absolute: etc/netplan/40-cx7.yaml")
    kind, result, _warnings = node.run({"ssh_key_name": "../id"})
    assert kind == "fail" and "must be a file name under ~/.ssh" in result["msg"]


def test_a_sysfs_root_without_class_fails(node, tmp_path):
    kind, result, _warnings = node.run({"sysfs_root": str(tmp_path)})
    assert kind == "fail" and result["msg"].startswith(f"sysfs_root {tmp_path} has no class/ directory")


def test_a_file_too_large_fails_naming_it(node, tmp_path):
    big = tmp_path / "big"
    big.write_text("x" * 100)
    kind, result, _warnings = node.run({"paths": [str(big)], "max_bytes": 10})
    assert kind == "fail"
    assert result["msg"] == (f"cannot read {big} holds 100 bytes, more than max_bytes (10)"
                             " (run as root, or check the files)")
