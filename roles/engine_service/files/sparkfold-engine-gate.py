# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start gates of the sparkfold engine units (installed by the engine_service role).

Run with python3 (the units call /usr/bin/python3 <engine_service_gate> ...):

  sparkfold-engine-gate memory   ExecStartPre of every rank: sync, drop the page cache, compact
                                 memory, then wait until MemAvailable reaches the recipe's gate.
  sparkfold-engine-gate ready    ExecStartPost of rank 0: wait until the engine is ready as its recipe's
                                 source decides (/health; then, where the recipe says so, /v1/models listing
                                 the served name, one short chat, or the line rank 0 logs once its own checks
                                 passed), so the unit is active only once the model is served.
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
  SPARKFOLD_READY_MODELS_URL       --models-url    then this models list must name the served name
  SPARKFOLD_READY_SERVED_NAME      --served-name   (TP4's serve.sh: /v1/models | grep SERVED_NAME)
  SPARKFOLD_READY_CHAT             --chat          then POST this JSON body to --chat-url once: a 200 with
  SPARKFOLD_READY_CHAT_URL         --chat-url      choices is ready, anything else fails the start (serve.sh check)
  SPARKFOLD_READY_API_KEY_FILE     --api-key-file  the engine's key (a file holding it) for the two above
  SPARKFOLD_READY_LOG_PATTERN      --log-pattern   then a line of rank 0's container log must match this regular
  SPARKFOLD_READY_LOG_CONTAINER    --log-container  expression (SGLang's boot.py prints "Ready: API on port N"
  SPARKFOLD_READY_LOG_RUNTIME      --log-runtime    after its own smoke test and warm-up): `<runtime> logs <name>`

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
import re
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


def _request(url, timeout_s, api_key=None, body=None):
    """(status, text) of a GET (or a POST of the JSON ``body``); status None with the reason when nothing answered."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as exc:
        return None, f"not answering ({getattr(exc, 'reason', exc)})"


def models_state(url, served_name, timeout_s, api_key=None):
    """(listed, description): whether the models list at ``url`` names ``served_name`` (OpenAI's {"data": [{"id"}]})."""
    status, text = _request(url, timeout_s, api_key)
    if status != 200:
        return False, f"{url}: {'HTTP ' + str(status) if status else ''} {text[:200]}".replace(":  ", ": ")
    try:
        ids = [entry.get("id") for entry in json.loads(text).get("data", []) if isinstance(entry, dict)]
    except (ValueError, AttributeError):
        return False, f"{url}: HTTP 200 but not a models list: {text[:200]}"
    if served_name in ids:
        return True, f"{url} lists {served_name}"
    return False, f"{url} lists {', '.join(map(str, ids)) or 'nothing'}, not {served_name}"


def chat_state(url, body, timeout_s, api_key=None):
    """(answered, description): one chat request; answered when a 200 carries a non-empty choices list."""
    status, text = _request(url, timeout_s, api_key, body)
    if status != 200:
        return False, f"{url}: {'HTTP ' + str(status) if status else ''} {text[:300]}".replace(":  ", ": ")
    try:
        choices = json.loads(text).get("choices")
    except (ValueError, AttributeError):
        choices = None
    if isinstance(choices, list) and choices:
        return True, f"{url} answered: {text[:200]}"
    return False, f"{url}: HTTP 200 without choices: {text[:300]}"


def log_state(runtime, container, pattern, timeout_s):
    """(found, description): whether a line of ``<runtime> logs <container>`` (stdout, stderr) matches ``pattern``."""
    try:
        done = subprocess.run([runtime, "logs", container], capture_output=True, text=True, errors="replace",
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"`{runtime} logs {container}` could not run: {exc}"
    if done.returncode != 0:
        return False, f"`{runtime} logs {container}` failed: {done.stderr.strip()[:200]}"
    regex = re.compile(pattern)
    for line in (done.stdout + "\n" + done.stderr).splitlines():
        if regex.search(line):
            return True, f"{container} logged: {line.strip()[:200]}"
    return False, f"no line of `{runtime} logs {container}` matches {pattern!r} yet"


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


class Then:
    """What the recipe's source waits for after /health (each None when it does not)."""

    def __init__(self, models_url=None, served_name=None, chat_url=None, chat=None, api_key=None,
                 log_runtime=None, log_container=None, log_pattern=None):
        self.models_url, self.served_name = models_url, served_name
        self.chat_url, self.chat, self.api_key = chat_url, chat, api_key
        self.log_runtime, self.log_container, self.log_pattern = log_runtime, log_container, log_pattern


def ready_gate(url, timeout_s, interval_s, main_pid=None, json_only=False, then=None):
    then = then or Then()
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    fatal_seen = 0
    while True:
        # systemd keeps waiting for ExecStartPost after the main process died: stop at once.
        if main_pid_gone(main_pid):
            log(f"the engine (pid {main_pid}) exited before it was ready; its reason is in the journal above")
            return 1
        probe_s = max(1.0, min(10.0, timeout_s))
        ready, fatal, last = health_state(url, probe_s, json_only)
        if ready and then.models_url:
            ready, last = models_state(then.models_url, then.served_name, probe_s, then.api_key)
        if ready and then.log_pattern:
            ready, last = log_state(then.log_runtime, then.log_container, then.log_pattern, probe_s)
        if ready and then.chat is not None:
            # Once, as TP4's serve.sh `check` after /v1/models lists the name: a failed chat fails the start.
            answered, said = chat_state(then.chat_url, then.chat, max(probe_s, 120.0), then.api_key)
            if not answered:
                log(f"engine up, but its chat check failed: {said}")
                return 1
            last = f"{last}; {said}"
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
    ready.add_argument("--models-url", default=os.environ.get("SPARKFOLD_READY_MODELS_URL") or None)
    ready.add_argument("--served-name", default=os.environ.get("SPARKFOLD_READY_SERVED_NAME") or None)
    ready.add_argument("--chat", default=os.environ.get("SPARKFOLD_READY_CHAT") or None,
                       help="the JSON body of the one chat request")
    ready.add_argument("--chat-url", default=os.environ.get("SPARKFOLD_READY_CHAT_URL") or None)
    ready.add_argument("--api-key-file", default=os.environ.get("SPARKFOLD_READY_API_KEY_FILE") or None)
    ready.add_argument("--log-pattern", default=os.environ.get("SPARKFOLD_READY_LOG_PATTERN") or None)
    ready.add_argument("--log-container", default=os.environ.get("SPARKFOLD_READY_LOG_CONTAINER") or None)
    ready.add_argument("--log-runtime", default=os.environ.get("SPARKFOLD_READY_LOG_RUNTIME") or None)
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
    try:
        then = ready_then(args)
    except ValueError as exc:
        log(str(exc))
        return 2
    return ready_gate(args.url, args.timeout, args.interval, os.environ.get("MAINPID"), args.json, then)


def ready_then(args):
    """The Then of the ready gate's arguments; ValueError naming what is missing or wrong."""
    if bool(args.models_url) != bool(args.served_name):
        raise ValueError("--models-url (SPARKFOLD_READY_MODELS_URL) and --served-name (SPARKFOLD_READY_SERVED_NAME) "
                         "go together")
    chat = None
    if args.chat:
        if not args.chat_url:
            raise ValueError("--chat (SPARKFOLD_READY_CHAT) needs --chat-url (SPARKFOLD_READY_CHAT_URL)")
        try:
            chat = json.loads(args.chat)
        except ValueError as exc:
            raise ValueError(f"--chat (SPARKFOLD_READY_CHAT) is not JSON: {exc}") from None
    if args.log_pattern and not (args.log_container and args.log_runtime):
        raise ValueError("--log-pattern (SPARKFOLD_READY_LOG_PATTERN) needs --log-container and --log-runtime")
    if args.log_pattern:
        try:
            re.compile(args.log_pattern)
        except re.error as exc:
            raise ValueError(f"--log-pattern {args.log_pattern!r} is not a regular expression: {exc}") from None
    api_key = None
    if args.api_key_file:
        try:
            with open(args.api_key_file, encoding="utf-8") as handle:
                api_key = handle.read().strip()
        except OSError as exc:
            raise ValueError(f"cannot read the API key file {args.api_key_file}: {exc.strerror or exc}") from None
    return Then(args.models_url, args.served_name, args.chat_url, chat, api_key,
                args.log_runtime, args.log_container, args.log_pattern)


if __name__ == "__main__":
    sys.exit(main())
