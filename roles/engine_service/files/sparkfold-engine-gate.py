# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start gates of the sparkfold engine units (installed by the engine_service role).

Run with python3 (the units call /usr/bin/python3 <engine_service_gate> ...):

  sparkfold-engine-gate memory   ExecStartPre of every rank: sync, drop the page cache, compact
                                 memory, then wait until MemAvailable reaches the recipe's gate.
  sparkfold-engine-gate ready    ExecStartPost of rank 0: wait until the engine's /health answers
                                 ready, so the unit is active only once the model is served.
  sparkfold-engine-gate watch UNIT --seconds N
                                 after a follower started: fail at once if it stops or restarts
                                 within N seconds (a follower that refuses to start exits at once).
  sparkfold-engine-gate stale --unit-dir DIR --inputs PATH... [--units UNIT...]
                                 print (JSON) the running ranks of this node that started before one of
                                 PATH last changed (a run changed it, then stopped before the restart);
                                 with --units, also the state of every rank unit and of each UNIT
                                 (so a run reads what runs, is enabled or failed in the same round trip).

Settings come from the environment (the unit's EnvironmentFile=/etc/sparkfold/engine.env) or
the command line; the command line wins:

  SPARKFOLD_MEMORY_GATE_GIB        --gib       MemAvailable needed, in GiB (2^30 bytes)
  SPARKFOLD_MEMORY_GATE_TIMEOUT_S  --timeout   how long to wait for it
  SPARKFOLD_READY_URL              --url       the health URL, e.g. http://127.0.0.1:8000/health
  SPARKFOLD_READY_TIMEOUT_S        --timeout   how long to wait for readiness
  SPARKFOLD_READY_JSON=1           --json      only a JSON {"ok": true} (or {"status": "ok"}) is ready, not
                                               an empty or other 200 (TensorFold's Python engine)

On GB10 the driver's allocations (~113 GiB) are invisible to the OOM killer and to cgroup
limits, and cudaMemGetInfo counts the page cache as used: starting the engine while memory is
held elsewhere ends with the kernel killing desktop daemons. The memory gate refuses to start
instead, with both numbers in the message (journalctl -u sparkfold-engine@<rank>).

Exit status: 0 gate passed; 1 gate not met in time (or the engine reported a fatal state);
2 bad settings. Standard library only: it runs with the node's python3.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

GIB = 1024**3


def log(message):
    print(f"sparkfold-engine-gate: {message}", file=sys.stderr, flush=True)


def mem_available(meminfo):
    """MemAvailable in bytes from a /proc/meminfo file."""
    with open(meminfo, encoding="ascii") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                fields = line.split()
                return int(fields[1]) * 1024
    raise ValueError(f"{meminfo} has no MemAvailable line")


def release_memory(proc_sys):
    """sync, drop caches, compact memory; returns the steps that could not be done."""
    os.sync()
    skipped = []
    for name, value in (("vm/drop_caches", "3"), ("vm/compact_memory", "1")):
        path = os.path.join(proc_sys, name)
        try:
            with open(path, "w", encoding="ascii") as handle:
                handle.write(value)
        except OSError as exc:
            skipped.append(f"{path}: {exc.strerror or exc}")
    return skipped


def memory_gate(gib, timeout_s, interval_s, meminfo, proc_sys):
    need = int(gib * GIB)
    skipped = release_memory(proc_sys)
    for step in skipped:
        log(f"could not write {step} (continuing: only waiting for MemAvailable)")
    deadline = time.monotonic() + timeout_s
    while True:
        available = mem_available(meminfo)
        if available >= need:
            log(f"memory gate passed: MemAvailable {available / GIB:.1f} GiB >= {gib:g} GiB")
            return 0
        if time.monotonic() >= deadline:
            log(
                f"memory gate not met: MemAvailable is {available / GIB:.1f} GiB after {timeout_s:g} s, "
                f"the recipe needs {gib:g} GiB before the engine starts. Stop what holds the memory "
                "(another engine, containers, a desktop session) or lower the recipe's memory.gate_gib "
                "if the recipe allows it."
            )
            return 1
        time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))
        release_memory(proc_sys)


def health_state(url, timeout_s, json_only=False):
    """(ready, fatal, description) of one /health probe.

    json_only: an empty or non-JSON 200 is not ready (an engine that answers JSON once it serves).

    Ready: TensorFold's 200 {"ok": true, "backend": "tensorfold", "busy": ..., "context_length": N, ...}
    (a --parallel server adds "streams": {"decoding", "prefilling", "max"}; ashhart/TensorFold docs/api.md),
    its {"status": "ok"} with API keys on (llama.cpp's too), or vLLM's empty 200. Fatal: TensorFold's 503
    {"ok": false, "error": ...} (a lost rank), or 503 {"status": "error"}, the same state with API keys on
    (the reason is then only in the journal). Anything else: not ready yet (llama.cpp's 503 "Loading model").
    """
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            body = resp.read().decode("utf-8", "replace").strip()
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace").strip()
        fatal = False
        try:
            parsed = json.loads(body)
            fatal = isinstance(parsed, dict) and (
                parsed.get("ok") is False or (exc.code == 503 and parsed.get("status") == "error"))
        except ValueError:
            pass
        return False, fatal, f"HTTP {exc.code} {body[:200]}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, False, f"not answering yet ({reason})"
    if not body:
        return (False, False, "HTTP 200 with an empty body, not the JSON ready answer") if json_only \
            else (True, False, "HTTP 200")
    try:
        parsed = json.loads(body)
    except ValueError:
        return (not json_only), False, f"HTTP 200 {body[:200]}"
    if isinstance(parsed, dict) and (parsed.get("ok") is True or parsed.get("status") == "ok"):
        return True, False, f"HTTP 200 {body[:200]}"
    return False, False, f"HTTP 200 but not ready: {body[:200]}"


def main_pid_gone(main_pid):
    """True when the engine's main process ($MAINPID of ExecStartPost) has exited."""
    if not main_pid:
        return False
    try:
        with open(f"/proc/{int(main_pid)}/stat", encoding="ascii") as handle:
            # A zombie ("Z") has exited; systemd has not reaped it yet.
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, ValueError, IndexError):
        return True


def ready_gate(url, timeout_s, interval_s, main_pid=None, json_only=False):
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    fatal_seen = 0
    while True:
        # systemd keeps waiting for ExecStartPost after the main process died: stop at once.
        if main_pid_gone(main_pid):
            log(f"the engine (pid {main_pid}) exited before it was ready; its reason is in the journal above")
            return 1
        ready, fatal, last = health_state(url, max(1.0, min(10.0, timeout_s)), json_only)
        if ready:
            log(f"engine ready: {url} answered {last}")
            return 0
        # A 503 with ok=false (status=error with API keys on) is the engine's fatal state (a lost
        # peer): it exits on its own, but stop waiting after a few consecutive answers so the unit
        # fails with the reason.
        fatal_seen = fatal_seen + 1 if fatal else 0
        if fatal_seen >= 3:
            log(f"engine reports a fatal state: {url} answered {last}")
            return 1
        if time.monotonic() >= deadline:
            log(f"engine not ready after {timeout_s:g} s: {url} last answered {last}")
            return 1
        time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))


def unit_state(unit):
    """systemctl show's ActiveState, SubState, Result, ExecMainStatus and NRestarts of a unit."""
    done = subprocess.run(
        ["systemctl", "show", "--property=ActiveState,SubState,Result,ExecMainStatus,NRestarts", unit],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise OSError(f"systemctl show {unit} failed: {done.stderr.strip()}")
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def watch_gate(unit, seconds, interval_s):
    first = unit_state(unit)
    deadline = time.monotonic() + seconds
    while True:
        state = unit_state(unit)
        down = state.get("ActiveState") in ("failed", "inactive", "deactivating")
        down = down or state.get("SubState") == "auto-restart"
        if down or state.get("NRestarts") != first.get("NRestarts"):
            log(
                f"{unit} did not stay up: {state.get('ActiveState')}/{state.get('SubState')}, "
                f"result {state.get('Result')}, exit status {state.get('ExecMainStatus')}; "
                f"its reason is in `journalctl -u {unit}`"
            )
            return 1
        if time.monotonic() >= deadline:
            log(f"{unit} is up: {state.get('ActiveState')}/{state.get('SubState')} for {seconds:g} s")
            return 0
        time.sleep(interval_s)


def rank_units(unit_dir):
    """The sparkfold-engine@<rank>.service units the role installed in unit_dir (one drop-in directory each)."""
    names = []
    for entry in sorted(os.listdir(unit_dir)):
        if entry.startswith("sparkfold-engine@") and entry.endswith(".service.d"):
            rank = entry[len("sparkfold-engine@"):-len(".service.d")]
            if rank.isdigit():
                names.append(entry[: -len(".d")])
    return names


STATE_PROPERTIES = ("ActiveState", "SubState", "UnitFileState", "Result")


def show(unit, properties):
    """systemctl show's properties of a unit, as a dict."""
    done = subprocess.run(
        ["systemctl", "show", "--property=" + ",".join(properties), unit],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise OSError(f"systemctl show {unit} failed: {done.stderr.strip()}")
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def unit_states(unit_dir, units):
    """The state (STATE_PROPERTIES) of every rank unit of unit_dir and of each of units, by unit name."""
    return {unit: {key: value for key, value in show(unit, STATE_PROPERTIES).items() if key in STATE_PROPERTIES}
            for unit in rank_units(unit_dir) + [u for u in units if u not in rank_units(unit_dir)]}


def stale_ranks(unit_dir, inputs):
    """The running ranks that started before an input changed, with the inputs newer than their start.

    A rank's start is systemd's ActiveEnterTimestampMonotonic (microseconds of CLOCK_MONOTONIC, turned into
    the epoch here: whole seconds would call a rank started in the same second as its input stale); an input's
    change is its lstat mtime (a link re-pointed counts, its target's age does not); a directory counts for the
    files in it (one level), and each rank's drop-in directory is an input of that rank. Missing inputs are no
    error: a node holds only some of them.
    """

    def mtimes(paths):
        found = {}
        for path in paths:
            candidates = [path]
            if os.path.isdir(path) and not os.path.islink(path):
                candidates += [os.path.join(path, name) for name in sorted(os.listdir(path))]
            for candidate in candidates:
                try:
                    found[candidate] = os.lstat(candidate).st_mtime
                except FileNotFoundError:
                    continue
        return found

    shared = mtimes(inputs)
    stale = []
    for unit in rank_units(unit_dir):
        done = subprocess.run(
            ["systemctl", "show", "--property=ActiveState,ActiveEnterTimestampMonotonic", unit],
            capture_output=True, text=True, check=False,
        )
        if done.returncode != 0:
            raise OSError(f"systemctl show {unit} failed: {done.stderr.strip()}")
        state = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
        monotonic_us = state.get("ActiveEnterTimestampMonotonic", "")
        if state.get("ActiveState") not in ("active", "activating", "reloading") or not monotonic_us.isdigit():
            continue
        if int(monotonic_us) == 0:
            continue
        started = time.time() - (time.monotonic() - int(monotonic_us) / 1e6)
        changed = {**shared, **mtimes([os.path.join(unit_dir, unit + ".d")])}
        newer = sorted(path for path, mtime in changed.items() if mtime > started)
        if newer:
            stale.append({"unit": unit, "started": round(started, 3), "newer": newer})
    return stale


def env_number(name, default=None):
    value = os.environ.get(name, "")
    if value == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise SystemExit(f"sparkfold-engine-gate: {name}={value!r} is not a number") from None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="sparkfold-engine-gate", description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="gate", required=True)
    mem = sub.add_parser("memory", help="wait until MemAvailable reaches the gate")
    mem.add_argument("--gib", type=float, default=env_number("SPARKFOLD_MEMORY_GATE_GIB"))
    mem.add_argument("--timeout", type=float, default=env_number("SPARKFOLD_MEMORY_GATE_TIMEOUT_S", 300.0))
    mem.add_argument("--interval", type=float, default=2.0)
    mem.add_argument("--meminfo", default="/proc/meminfo")
    mem.add_argument("--proc-sys", default="/proc/sys")
    ready = sub.add_parser("ready", help="wait until /health answers ready")
    ready.add_argument("--url", default=os.environ.get("SPARKFOLD_READY_URL") or None)
    ready.add_argument("--timeout", type=float, default=env_number("SPARKFOLD_READY_TIMEOUT_S", 1800.0))
    ready.add_argument("--interval", type=float, default=2.0)
    ready.add_argument("--json", action="store_true", default=os.environ.get("SPARKFOLD_READY_JSON") == "1")
    watch = sub.add_parser("watch", help="fail if a unit stops or restarts within --seconds")
    watch.add_argument("unit")
    watch.add_argument("--seconds", type=float, default=5.0)
    watch.add_argument("--interval", type=float, default=0.5)
    stale = sub.add_parser("stale", help="list the running ranks that started before an input changed")
    stale.add_argument("--unit-dir", default="/etc/systemd/system")
    stale.add_argument("--inputs", nargs="+", required=True)
    stale.add_argument("--units", nargs="*", default=None,
                       help="also report the state of every rank unit and of these units")
    args = parser.parse_args(argv)
    if args.gate == "stale":
        try:
            found = {"stale": stale_ranks(args.unit_dir, args.inputs)}
            if args.units is not None:
                found["units"] = unit_states(args.unit_dir, args.units)
            print(json.dumps(found))
        except OSError as exc:
            log(str(exc))
            return 2
        return 0
    if args.gate == "watch":
        try:
            return watch_gate(args.unit, args.seconds, args.interval)
        except OSError as exc:
            log(str(exc))
            return 2
    if args.gate == "memory":
        if args.gib is None or args.gib < 0:
            log("no memory gate set: give --gib or SPARKFOLD_MEMORY_GATE_GIB (GiB of MemAvailable, 0 to skip)")
            return 2
        try:
            return memory_gate(args.gib, args.timeout, args.interval, args.meminfo, args.proc_sys)
        except (OSError, ValueError) as exc:
            log(f"cannot read available memory: {exc}")
            return 2
    if not args.url:
        log("no health URL: give --url or SPARKFOLD_READY_URL")
        return 2
    return ready_gate(args.url, args.timeout, args.interval, os.environ.get("MAINPID"), args.json)


if __name__ == "__main__":
    sys.exit(main())
