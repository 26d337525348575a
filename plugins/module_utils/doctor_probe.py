# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the doctor reads on one node, in one pass; standard library only, read-only.

Each reader returns plain data and never raises for what it finds: a missing file, a failed
command or an engine that does not answer is a finding, returned with the reason. The readers
that run commands take ``run(argv) -> (rc, stdout, stderr)`` (AnsibleModule.run_command in the
module, a fake in the tests). The judging is the ``doctor_report`` filter's, on the controller.
"""

from __future__ import annotations

import json
import os
import platform
import re
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import EngineClient
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_readiness import Final, Probe, wait_ready
from ansible_collections.sparkfold.cluster.plugins.module_utils.gpu import (
    NO_DEVICES,
    QUERY_ARGS,
    GpuParseError,
    gpu_facts,
    parse_meminfo,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.roce import SysfsError, gather_roce_facts
from ansible_collections.sparkfold.cluster.plugins.module_utils.store_check import StoreError, verify_store

UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts")
NETWORK_FILESYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "fuse.sshfs", "ceph", "glusterfs", "9p")
_PING_LOSS_RE = re.compile(r"\d+% packet loss|Frag|too long|nreachable|Cannot assign|No route")


def _text(value):
    return " ".join(str(value or "").split())


def read_memory(meminfo_path):
    """MemTotal and MemAvailable in bytes (None when unreadable), with the reason."""
    try:
        with open(meminfo_path, encoding="utf-8", errors="replace") as handle:
            values = parse_meminfo(handle.read())
    except OSError as exc:
        return {"total_bytes": None, "available_bytes": None, "error": f"cannot read {meminfo_path}: {exc}"}
    total, available = values.get("MemTotal"), values.get("MemAvailable")
    return {
        "total_bytes": None if total is None else total * 1024,
        "available_bytes": None if available is None else available * 1024,
        "error": None if available is not None else f"{meminfo_path} has no MemAvailable line",
    }


def read_mounts(mounts_path="/proc/mounts"):
    """[(mount point, filesystem type)], longest mount point first."""
    mounts = []
    try:
        with open(mounts_path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) >= 3:
                    mounts.append((fields[1].replace("\\040", " "), fields[2]))
    except OSError:
        return []
    return sorted(mounts, key=lambda item: len(item[0]), reverse=True)


def mount_of(path, mounts):
    """The (mount point, filesystem type) that holds ``path``; (None, None) when unknown."""
    for point, fstype in mounts:
        if path == point or path.startswith(point.rstrip("/") + "/"):
            return point, fstype
    return None, None


def read_space(path, mounts):
    """Free and total bytes of the filesystem under ``path`` (its nearest existing parent)."""
    measured = os.path.abspath(path)
    while not os.path.exists(measured) and measured != os.path.dirname(measured):
        measured = os.path.dirname(measured)
    result = {"path": path, "measured": measured, "exists": os.path.exists(path)}
    try:
        st = os.statvfs(measured)
    except OSError as exc:
        result.update(free_bytes=None, total_bytes=None, mount=None, fstype=None, error=f"statvfs {measured}: {exc}")
        return result
    point, fstype = mount_of(os.path.realpath(measured), mounts)
    result.update(free_bytes=st.f_bavail * st.f_frsize, total_bytes=st.f_blocks * st.f_frsize,
                  mount=point, fstype=fstype, error=None)
    return result


def read_store(spec, mounts):
    """A store checked against its manifest (size and mtime; no hashing of unchanged files)."""
    path = spec["path"]
    point, fstype = mount_of(os.path.realpath(path), mounts) if os.path.exists(path) else (None, None)
    result = {"name": spec["name"], "path": path, "mount": point, "fstype": fstype,
              "network_fs": fstype in NETWORK_FILESYSTEMS}
    try:
        found, msg = verify_store(path, verify="manifest", max_workers=4, repo_id=spec.get("repo_id") or None,
                                  commit=spec.get("commit") or None,
                                  require_safetensors_index=spec.get("require_safetensors_index", True))
    except StoreError as exc:
        result.update(ok=False, error=_text(exc), problems=[], shards=None, commit=None, files_checked=0)
        return result
    result.update(ok=msg is None, error=None, problems=found.get("problems", []), shards=found["shards"],
                  commit=found["commit"], files_checked=found["files_checked"])
    return result


def read_addresses(run):
    """IPv4 addresses (``a.b.c.d/nn``) of every interface, from ``ip -json address show``."""
    rc, out, err = run(["ip", "-json", "address", "show"])
    if rc != 0:
        return {}, f"ip -json address show failed (rc {rc}): {_text(err or out)}"
    try:
        links = json.loads(out or "[]")
    except ValueError as exc:
        return {}, f"ip -json address show: not JSON: {exc}"
    found = {}
    for link in links:
        found[link.get("ifname")] = [f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])
                                     if a.get("family") == "inet" and "local" in a]
    return found, None


def ping(run, item, timeout_s, count=1):
    """``count`` don't-fragment pings of ``size`` payload bytes to ``address`` through ``interface``."""
    argv = ["ping", "-n", "-M", "do", "-s", str(item["size"]), "-c", str(count), "-W", str(timeout_s),
            "-I", item["interface"], item["address"]]
    rc, out, err = run(argv)
    why = [line.strip() for line in (out or "").splitlines() if _PING_LOSS_RE.search(line)]
    why += [line.strip() for line in (err or "").splitlines() if line.strip()]
    return dict(item, ok=rc == 0, detail="" if rc == 0 else "; ".join(why) or f"ping exited {rc}")


def ping_all(run, items, timeout_s, count=1):
    """Every ping at once (threads), in the order given."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        return list(pool.map(lambda item: ping(run, item, timeout_s, count), items))


def route_dev(run, address):
    """(interface, error): the interface the kernel routes ``address`` by (``ip -json route get``), or None and why."""
    rc, out, err = run(["ip", "-json", "route", "get", address])
    if rc != 0:
        return None, f"ip route get {address} failed (rc {rc}): {_text(err or out)}"
    try:
        routes = json.loads(out or "[]")
    except ValueError as exc:
        return None, f"ip -json route get {address}: not JSON: {exc}"
    dev = routes[0].get("dev") if routes and isinstance(routes[0], dict) else None
    return dev, None if dev else f"ip route get {address} names no interface"


def read_unit(run, unit, journal_lines):
    """A systemd unit's state; the last journal lines when it is not active."""
    rc, out, err = run(["systemctl", "show", unit, "--property=" + ",".join(UNIT_PROPERTIES)])
    props = dict(line.split("=", 1) for line in (out or "").splitlines() if "=" in line)
    state = {"unit": unit, "error": None if rc == 0 else f"systemctl show failed (rc {rc}): {_text(err)}"}
    for key in UNIT_PROPERTIES:
        state[key] = props.get(key)
    state["journal"] = []
    if state["ActiveState"] != "active" and journal_lines > 0:
        argv = ["journalctl", "--no-pager", "--output=cat", f"--lines={journal_lines}", f"--unit={unit}"]
        jrc, jout, _jerr = run(argv)
        if jrc == 0:
            state["journal"] = [line for line in (jout or "").splitlines() if line.strip()]
    return state


def read_health(url, api_key, served_name, timeout_s):
    """One probe of the engine's /health and /v1/models (no waiting)."""
    probe = Probe(EngineClient(url, api_key=api_key or None, timeout=timeout_s), url)
    try:
        ready = wait_ready(probe, 0, 1.0, timeout_s, served_name or None, bool(api_key))
    except Final as exc:
        return {"url": url, "ready": False, "state": probe.state, "detail": _text(exc), "health": probe.health}
    return {"url": url, "ready": bool(ready), "state": probe.state, "detail": probe.detail, "health": probe.health}


def read_gpu(run, nvidia_smi):
    """Driver, CUDA version and GPUs from nvidia-smi, or the reason there are none."""
    if not nvidia_smi:
        return {"error": "nvidia-smi not found on PATH"}
    rc, query, err = run([nvidia_smi, *QUERY_ARGS])
    if rc != 0 and NO_DEVICES not in (query or "") + (err or ""):
        return {"error": f"nvidia-smi failed (rc {rc}): {_text(err or query)}"}
    plain = ""
    if NO_DEVICES not in (query or ""):
        _rc, plain, _err = run([nvidia_smi])
    try:
        facts = gpu_facts(query or "", plain or "", "MemTotal: 0 kB\n")
    except GpuParseError as exc:
        return {"error": f"nvidia-smi output not understood: {exc}"}
    return {"error": None, "count": facts["count"], "driver_version": facts["driver_version"],
            "cuda_version": facts["cuda_version"], "names": [gpu["name"] for gpu in facts["gpus"]]}


def read_package(run, name):
    """The installed version of a Debian package, or None."""
    rc, out, _err = run(["dpkg-query", "-W", "-f", "${Status}\t${Version}", name])
    status, _tab, version = (out or "").partition("\t")
    return version.strip() if rc == 0 and status.endswith(" installed") else None


def read_roce(sysfs_root):
    try:
        facts, warnings = gather_roce_facts(sysfs_root)
    except SysfsError as exc:
        return {"error": _text(exc), "rdma_available": False, "devices": {}, "netdevs": {}, "ipv4_gids": {}}
    facts["error"] = None
    facts["warnings"] = warnings
    return facts


def gather(run, params):
    """Everything the doctor reads on this node, as one dict (the module's sparkfold_doctor fact)."""
    mounts = read_mounts(params.get("mounts_path") or "/proc/mounts")
    addresses, address_error = read_addresses(run)
    health = params.get("health") or {}
    return {
        "machine": platform.machine(),
        "roce": read_roce(params["sysfs_root"]),
        "addresses": addresses,
        "addresses_error": address_error,
        "pings": ping_all(run, params.get("pings") or [], params["ping_timeout_s"]),
        "memory": read_memory(params["meminfo_path"]),
        "space": [read_space(path, mounts) for path in params.get("space_paths") or []],
        "stores": [read_store(spec, mounts) for spec in params.get("stores") or []],
        "units": [read_unit(run, unit, params["journal_lines"]) for unit in params.get("units") or []],
        "health": read_health(health["url"], health.get("api_key"), health.get("served_name"),
                              params["health_timeout_s"]) if health.get("url") else None,
        "gpu": read_gpu(run, params.get("nvidia_smi")) if params.get("gpu") else None,
        "packages": {name: read_package(run, name) for name in params.get("packages") or []},
    }
