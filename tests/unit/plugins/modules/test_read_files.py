# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.read_files module (AnsibleModule run in-process)."""

import grp
import json
import os
import pwd
import shutil
import subprocess

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import read_files

from tests.unit.module_runner import module_runner


@pytest.fixture
def run(monkeypatch):
    """run(args) -> (kind, result, warnings): read_files.main() in-process."""
    return module_runner(monkeypatch, read_files.main)


def test_reads_files_links_directories_and_absent_paths_in_one_run(run, tmp_path):
    build = tmp_path / "engine" / "3f0c2a9e41b7d655"
    build.mkdir(parents=True)
    (build / "sparkfold-stamp.json").write_text(json.dumps({"build_id": "3f0c2a9e41b7d655"}))
    (tmp_path / "engine" / "current").symlink_to(build)
    (tmp_path / "engine" / "dangling").symlink_to(tmp_path / "engine" / "gone")
    paths = [
        str(tmp_path / "engine" / "current"),
        str(tmp_path / "engine" / "current" / "sparkfold-stamp.json"),
        str(tmp_path / "engine" / "previous"),
        str(tmp_path / "engine" / "dangling"),
        str(build),
    ]
    kind, result, _warnings = run({"paths": paths})
    assert kind == "exit"
    assert result["changed"] is False
    files = result["files"]
    me = {"owner": pwd.getpwuid(os.getuid()).pw_name, "group": grp.getgrgid(os.getgid()).gr_name}
    assert files[paths[0]] == {
        "exists": True,
        "type": "link",
        "mode": "0777",
        **me,
        "target": str(build),
        "resolved": str(build),
    }
    assert files[paths[1]]["type"] == "file"
    assert json.loads(files[paths[1]]["content"]) == {"build_id": "3f0c2a9e41b7d655"}
    assert files[paths[2]] == {"exists": False, "type": "absent"}
    assert files[paths[3]]["type"] == "link" and "content" not in files[paths[3]]
    os.chmod(build, 0o750)
    kind, result, _warnings = run({"paths": [str(build)]})
    assert result["files"][str(build)] == {"exists": True, "type": "directory", "mode": "0750", **me}


def test_a_relative_link_resolves_as_stat_has_it(run, tmp_path):
    (tmp_path / "b1").mkdir()
    os.symlink("b1", tmp_path / "current")
    kind, result, _warnings = run({"paths": [str(tmp_path / "current")]})
    assert kind == "exit"
    assert result["files"][str(tmp_path / "current")]["target"] == "b1"
    assert result["files"][str(tmp_path / "current")]["resolved"] == str(tmp_path / "b1")


def test_a_file_over_max_bytes_fails_naming_it(run, tmp_path):
    big = tmp_path / "big.json"
    big.write_text("x" * 100)
    kind, result, _warnings = run({"paths": [str(big)], "max_bytes": 10})
    assert kind == "fail"
    assert f"{big} holds 100 bytes, more than max_bytes (10)" in result["msg"]


def test_a_relative_path_is_refused(run):
    kind, result, _warnings = run({"paths": ["relative/stamp.json"]})
    assert kind == "fail"
    assert "paths must be absolute: relative/stamp.json" in result["msg"]


def test_check_mode_reads_the_same(run, tmp_path):
    (tmp_path / "f").write_text("hello\n")
    kind, result, _warnings = run({"paths": [str(tmp_path / "f")], "_ansible_check_mode": True})
    assert (kind, result["files"][str(tmp_path / "f")]["content"]) == ("exit", "hello\n")


def test_list_directories_lists_what_find_would_without_recursing(run, tmp_path):
    builds = tmp_path / "engine"
    (builds / "3f0c2a9e41b7d655" / "bin").mkdir(parents=True)
    (builds / "aa00bb11cc22dd33").mkdir()
    (builds / "current").symlink_to(builds / "3f0c2a9e41b7d655")
    (builds / "notes.txt").write_text("x")
    os.utime(builds / "aa00bb11cc22dd33", (1000, 1000))
    kind, result, _warnings = run({"paths": [str(builds), str(builds / "current")], "list_directories": True})
    assert kind == "exit"
    entries = result["files"][str(builds)]["entries"]
    assert [(e["name"], e["type"]) for e in entries] == [
        ("3f0c2a9e41b7d655", "directory"),
        ("aa00bb11cc22dd33", "directory"),
        ("current", "link"),
        ("notes.txt", "file"),
    ]
    assert entries[1]["path"] == str(builds / "aa00bb11cc22dd33") and entries[1]["mtime"] == 1000
    # A link to a directory is read as a link, not listed.
    assert "entries" not in result["files"][str(builds / "current")]
    # Without the option nothing is listed (the entry is as before).
    kind, result, _warnings = run({"paths": [str(builds)]})
    assert "entries" not in result["files"][str(builds)]


def test_stat_paths_are_not_read_whatever_their_size(run, tmp_path):
    program = tmp_path / "python3"
    program.write_bytes(b"\0" * 2048)
    link = tmp_path / "python"
    link.symlink_to(program)
    record = tmp_path / "record.json"
    record.write_text("{}")
    kind, result, _warnings = run({"paths": [str(record)], "stat_paths": [str(link), str(tmp_path / "none")],
                                   "max_bytes": 1024})
    assert kind == "exit"
    files = result["files"]
    assert files[str(record)]["content"] == "{}"
    assert files[str(link)]["exists"] is True
    assert files[str(link)]["type"] == "link"
    assert "content" not in files[str(link)]
    assert files[str(tmp_path / "none")] == {"exists": False, "type": "absent"}


def test_a_relative_stat_path_is_refused(run):
    kind, result, _warnings = run({"paths": [], "stat_paths": ["bin/python"]})
    assert kind == "fail"
    assert result["msg"] == "paths must be absolute: bin/python"


def _findmnt(path):
    """(target, fstype) of findmnt -T, the command the storage role read before read_files did."""
    found = subprocess.run(["findmnt", "-n", "-o", "TARGET,FSTYPE", "-T", str(path)], capture_output=True, text=True,
                           check=True).stdout.split()
    return found[0], found[1]


@pytest.mark.skipif(not shutil.which("findmnt"), reason="findmnt (util-linux) is what the result is compared with")
def test_filesystem_paths_measure_a_missing_path_at_its_nearest_existing_parent(run, tmp_path):
    store = tmp_path / "srv" / "models"
    (tmp_path / "srv").mkdir()
    (tmp_path / "file").write_text("x")
    kind, result, _warnings = run({"paths": [], "stat_paths": [str(store)],
                                   "filesystem_paths": [str(store), str(tmp_path / "file")]})
    assert kind == "exit" and result["changed"] is False
    # the store is not there (stat_paths says so); its filesystem is measured at srv, which is
    assert result["files"][str(store)] == {"exists": False, "type": "absent"}
    fs = result["filesystems"][str(store)]
    assert fs["measured_at"] == str(tmp_path / "srv")
    assert (fs["mount_point"], fs["type"]) == _findmnt(tmp_path / "srv")
    usage = os.statvfs(tmp_path / "srv")
    assert fs["size_bytes"] == usage.f_blocks * usage.f_frsize
    # free space moves while the test runs: within 64 MiB of what statvfs says now
    assert abs(fs["free_bytes"] - usage.f_bavail * usage.f_frsize) < 64 * 1024 ** 2
    assert 0 < fs["free_bytes"] <= fs["size_bytes"]
    assert result["filesystems"][str(tmp_path / "file")]["measured_at"] == str(tmp_path / "file")
    # without the option there are none
    kind, result, _warnings = run({"paths": [str(tmp_path / "file")]})
    assert result["filesystems"] == {}


def test_filesystem_paths_take_the_longest_mount_with_escapes_decoded(run, tmp_path):
    # A mount table in the kernel's format where the store's parent is a mount point with a space in its name
    # (written \040), below a mount of its parent and under a later mount of the same point (which hides it).
    point = tmp_path / "my store"
    (point / "models").mkdir(parents=True)
    (tmp_path / "my storex").mkdir()
    escaped = str(point).replace(" ", "\\040")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        f"60 27 0:50 / {tmp_path} rw,relatime shared:7 - tmpfs scratch\\040space rw\n"
        f"61 60 0:51 / {escaped} rw,relatime shared:8 master:1 - xfs /dev/sdb1 rw\n"
        f"62 61 0:52 / {escaped} rw,relatime - overlay overlay rw,lowerdir=/l\\040x,upperdir=/u\n")
    wanted = [str(point / "models" / "dsv41"), str(tmp_path / "my storex" / "models")]
    kind, result, _warnings = run({"paths": [], "filesystem_paths": wanted, "mountinfo_path": str(mountinfo)})
    assert kind == "exit", result
    fs = result["filesystems"]
    assert {k: fs[wanted[0]][k] for k in ("measured_at", "mount_point", "type", "source")} == {
        "measured_at": str(point / "models"), "mount_point": str(point), "type": "overlay", "source": "overlay"}
    # "my storex" only starts with the letters of the mount point "my store": it is on its parent's mount
    assert {k: fs[wanted[1]][k] for k in ("measured_at", "mount_point", "type", "source")} == {
        "measured_at": str(tmp_path / "my storex"), "mount_point": str(tmp_path), "type": "tmpfs",
        "source": "scratch space"}


def test_an_unreadable_mount_table_fails_naming_it(run, tmp_path):
    kind, result, _warnings = run({"paths": [], "filesystem_paths": [str(tmp_path)],
                                   "mountinfo_path": str(tmp_path / "no-mountinfo")})
    assert kind == "fail"
    assert result["msg"] == (f"cannot read {tmp_path / 'no-mountinfo'}: No such file or directory"
                             " (run as root, or check the files)")


def test_a_relative_filesystem_path_is_refused(run):
    kind, result, _warnings = run({"paths": [], "filesystem_paths": ["srv/models"]})
    assert (kind, result["msg"]) == ("fail", "paths must be absolute: srv/models")


def test_mount_points_name_the_kernel_mount_with_its_options_and_the_fstab_line(run, tmp_path):
    # What storage's client.yml checks on a worker: the head's export mounted at the store (its superblock carries
    # proto=rdma), and fstab's line for it; the kernel's later mount on the same point is the one on top.
    (tmp_path / "mountinfo").write_text(
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        "70 27 0:60 / /srv/models rw,relatime - tmpfs tmpfs rw\n"
        "71 70 0:61 / /srv/models rw,relatime - nfs4 10.77.0.1:/srv/models rw,vers=4.2,proto=rdma,port=20049\n")
    (tmp_path / "fstab").write_text("UUID=1 / ext4 defaults 0 1\n10.77.0.1:/srv/models /srv/models nfs _netdev 0 0\n")
    tables = {"mountinfo_path": str(tmp_path / "mountinfo"), "fstab_path": str(tmp_path / "fstab")}
    kind, result, _warnings = run({"paths": [], "mount_points": ["/srv/models", "/mnt"], **tables})
    assert kind == "exit" and result["changed"] is False
    top = result["mounts"]["/srv/models"]["kernel"][-1]
    assert (top["source"], top["type"]) == ("10.77.0.1:/srv/models", "nfs4")
    assert top["options"] == ["rw", "relatime", "vers=4.2", "proto=rdma", "port=20049"]
    assert [m["source"] for m in result["mounts"]["/srv/models"]["fstab"]] == ["10.77.0.1:/srv/models"]
    assert result["mounts"]["/mnt"] == {"kernel": [], "fstab": []}
    # a relative mount point is refused; without the option there are no mounts
    assert run({"paths": [], "mount_points": ["srv/models"]})[1]["msg"] == "paths must be absolute: srv/models"
    assert run({"paths": []})[1]["mounts"] == {}
