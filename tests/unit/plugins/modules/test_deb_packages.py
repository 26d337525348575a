# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the sparkfold.cluster.deb_packages module (AnsibleModule run in-process).

One test reads this machine's real dpkg database. The others put a stand-in dpkg-query and apt-get first on the
PATH: the stand-in dpkg-query prints dpkg-query's -W -f output for a database kept in a JSON file, the stand-in
apt-get logs its command lines and installs from a JSON list of what the apt sources carry.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import deb_packages

from tests.unit.module_runner import module_runner

DPKG_QUERY = r'''#!PYTHON
import json, os, sys
db = json.load(open(os.environ["FAKE_DPKG_DB"]))
args = sys.argv[1:]
assert args[:3] == ["-W", "-f", "${Package}\t${Architecture}\t${db:Status-Abbrev}\t${Version}\n"], args
assert args[3] == "--", args
missing = False
for name in args[4:]:
    base = name.split(":")[0]
    if base in db:
        entry = db[base]
        fields = (base, entry.get("arch", "amd64"), entry.get("status", "ii "), entry["version"])
        sys.stdout.write("\t".join(fields) + "\n")
    else:
        sys.stderr.write("dpkg-query: no packages found matching %s\n" % name)
        missing = True
sys.exit(1 if missing else 0)
'''

APT_GET = r'''#!PYTHON
import json, os, sys
with open(os.environ["FAKE_APT_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
args = sys.argv[1:]
if "update" in args:
    sys.exit(int(os.environ.get("FAKE_APT_UPDATE_RC", "0")))
db = json.load(open(os.environ["FAKE_DPKG_DB"]))
repo = json.load(open(os.environ["FAKE_APT_REPO"]))
wanted = args[args.index("--") + 1:]
for spec in wanted:
    name, _, version = spec.partition("=")
    if name not in repo:
        sys.stderr.write("E: Unable to locate package %s\n" % name)
        sys.exit(100)
for spec in wanted:
    name, _, version = spec.partition("=")
    if repo[name] == "virtual":
        continue
    db[name] = {"version": version or repo[name]}
json.dump(db, open(os.environ["FAKE_DPKG_DB"], "w"))
print("Setting up %s" % " ".join(wanted))
'''


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, deb_packages.main)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A stand-in dpkg database and apt: fake.db(dict), fake.repo(dict), fake.calls() -> apt-get's command lines."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("dpkg-query", DPKG_QUERY), ("apt-get", APT_GET)):
        path = bin_dir / name
        path.write_text(text.replace("PYTHON", sys.executable, 1))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", "{}:{}".format(bin_dir, os.environ["PATH"]))
    lists = tmp_path / "lists"
    lists.mkdir()
    monkeypatch.setattr(deb_packages, "_LISTS_DIR", str(lists))
    monkeypatch.setattr(deb_packages, "_UPDATE_STAMPS", (str(tmp_path / "update-success-stamp"), str(lists)))

    class Fake:
        def db(self, content):
            (tmp_path / "db.json").write_text(json.dumps(content))
            monkeypatch.setenv("FAKE_DPKG_DB", str(tmp_path / "db.json"))

        def repo(self, content):
            (tmp_path / "repo.json").write_text(json.dumps(content))
            monkeypatch.setenv("FAKE_APT_REPO", str(tmp_path / "repo.json"))

        def calls(self):
            log = tmp_path / "apt.log"
            return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

        def fresh_lists(self):
            (lists / "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages").write_text("")

        def db_now(self):
            return json.loads((tmp_path / "db.json").read_text())

    monkeypatch.setenv("FAKE_APT_LOG", str(tmp_path / "apt.log"))
    fake = Fake()
    fake.db({})
    fake.repo({})
    return fake


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs a Debian-family machine's dpkg-query")
def test_installed_on_this_machine_is_no_change_and_runs_no_apt(run, tmp_path, monkeypatch):
    # apt-get first on the PATH fails the test if anything calls it.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(f"#!/bin/sh\necho called >> {tmp_path}/apt-called\nexit 1\n")
    (bin_dir / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", "{}:{}".format(bin_dir, os.environ["PATH"]))
    kind, result, _w = run({"names": ["dpkg", "libc6:amd64"], "_ansible_diff": True})
    assert kind == "exit", result
    assert result["changed"] is False and result["missing"] == []
    assert set(result["installed"]) == {"dpkg", "libc6:amd64"} and all(result["installed"].values())
    assert "diff" not in result
    assert not (tmp_path / "apt-called").exists()


def test_missing_installed_once_then_no_change(run, fake):
    fake.db({"rsync": {"version": "3.2.7-1"}})
    fake.repo({"rsync": "3.2.7-1", "rdma-core": "44.0-2", "ibverbs-utils": "44.0-2"})
    kind, result, _w = run({"names": ["rsync", "rdma-core", "ibverbs-utils"], "_ansible_diff": True})
    assert kind == "exit", result
    assert result["changed"] is True
    assert result["missing"] == ["rdma-core", "ibverbs-utils"]
    assert result["installed"] == {"rsync": "3.2.7-1", "rdma-core": "44.0-2", "ibverbs-utils": "44.0-2"}
    assert result["updated_cache"] is True  # no package lists at all: refreshed first
    calls = fake.calls()
    assert calls[0][:2] == ["-q", "update"]
    install = calls[1]
    assert install[:3] == ["-y", "-q", "install"]
    assert install[install.index("--") + 1:] == ["rdma-core", "ibverbs-utils"]
    assert result["diff"]["before"] == "ibverbs-utils (not installed)\nrdma-core (not installed)\nrsync 3.2.7-1\n"
    assert result["diff"]["after"] == "ibverbs-utils 44.0-2\nrdma-core 44.0-2\nrsync 3.2.7-1\n"

    kind, again, _w = run({"names": ["rsync", "rdma-core", "ibverbs-utils"]})
    assert kind == "exit" and again["changed"] is False and again["missing"] == []
    assert len(fake.calls()) == 2  # apt-get did not run again


def test_fresh_lists_are_not_refreshed(run, fake):
    fake.fresh_lists()
    fake.repo({"earlyoom": "1.7-1"})
    kind, result, _w = run({"names": ["earlyoom"]})
    assert kind == "exit" and result["changed"] and result["updated_cache"] is False
    assert [c[2] for c in fake.calls()] == ["install"]
    kind, result, _w = run({"names": ["podman"], "cache_valid_time": 0})
    assert kind == "fail"  # podman is not in the stand-in sources
    assert fake.calls()[1][:2] == ["-q", "update"]  # cache_valid_time 0 refreshes before the install


def test_check_mode_reports_and_runs_nothing(run, fake):
    fake.db({"rsync": {"version": "3.2.7-1"}})
    fake.repo({"nfs-common": "1:2.6.2-4"})
    kind, result, _w = run({"names": ["rsync", "nfs-common"], "_ansible_check_mode": True, "_ansible_diff": True})
    assert kind == "exit", result
    assert result["changed"] is True and result["missing"] == ["nfs-common"]
    assert result["diff"]["after"] == "nfs-common (to be installed)\nrsync 3.2.7-1\n"
    assert fake.calls() == [] and "nfs-common" not in fake.db_now()


def test_pinned_version_installs_that_version_allowing_a_downgrade(run, fake):
    fake.fresh_lists()
    fake.db({"libnccl2": {"version": "2.29.1-1+cuda13.0"}})
    fake.repo({"libnccl2": "2.29.1-1+cuda13.0"})
    kind, result, _w = run({"names": ["libnccl2=2.28.9-1+cuda13.0"]})
    assert kind == "exit", result
    assert result["changed"] and result["missing"] == ["libnccl2=2.28.9-1+cuda13.0"]
    assert result["installed"] == {"libnccl2": "2.28.9-1+cuda13.0"}
    install = fake.calls()[0]
    assert "--allow-downgrades" in install and install[-1] == "libnccl2=2.28.9-1+cuda13.0"
    kind, again, _w = run({"names": ["libnccl2=2.28.9-1+cuda13.0"]})
    assert kind == "exit" and again["changed"] is False


def test_a_package_known_but_not_installed_counts_as_missing(run, fake):
    fake.fresh_lists()
    fake.db({"earlyoom": {"version": "1.7-1", "status": "rc "}})  # removed, its configuration kept
    fake.repo({"earlyoom": "1.7-1"})
    kind, result, _w = run({"names": ["earlyoom"]})
    assert kind == "exit" and result["missing"] == ["earlyoom"] and result["changed"]


def test_a_virtual_package_fails_naming_it(run, fake):
    fake.fresh_lists()
    fake.repo({"mail-transport-agent": "virtual"})
    kind, result, _w = run({"names": ["mail-transport-agent"]})
    assert kind == "fail"
    assert result["msg"].startswith(
        "apt-get installed without error, yet dpkg does not hold mail-transport-agent as asked")
    assert "name the real package that provides it" in result["msg"]


def test_apt_failure_names_the_packages_and_what_to_run(run, fake):
    fake.fresh_lists()
    fake.repo({})
    kind, result, _w = run({"names": ["rdma-cor"]})
    assert kind == "fail"
    assert result["msg"].startswith("apt-get install rdma-cor failed (rc 100): E: Unable to locate package rdma-cor.")
    assert "Run `apt-get install rdma-cor` on the node to see why" in result["msg"]


def test_a_failed_refresh_says_so_before_installing(run, fake, monkeypatch):
    monkeypatch.setenv("FAKE_APT_UPDATE_RC", "100")
    fake.repo({"rsync": "3.2.7-1"})
    kind, result, _w = run({"names": ["rsync"]})
    assert kind == "fail"
    assert result["msg"].startswith("apt-get update failed (rc 100) before installing rsync")
    assert len(fake.calls()) == 1


@pytest.mark.parametrize("names, message", [
    (["rsync", "rsync=3.2.7-1"], "rsync is named twice in names ('rsync' and 'rsync=3.2.7-1'): keep one"),
    ([" "], "names is empty: list the packages to install, e.g. names: [rsync]"),
    (["=1.0"], "'=1.0' names no package: write name, name:arch or name=version"),
])
def test_bad_names_fail_before_anything_runs(run, fake, names, message):
    kind, result, _w = run({"names": names})
    assert kind == "fail" and result["msg"] == message
    assert fake.calls() == []


def test_install_recommends_is_passed_only_when_set(run, fake):
    fake.fresh_lists()
    fake.repo({"a": "1", "b": "1"})
    run({"names": ["a"]})
    run({"names": ["b"], "install_recommends": False})
    first, second = fake.calls()
    assert not any(arg.startswith("APT::Install-Recommends") for arg in first)
    assert "APT::Install-Recommends=false" in second
