# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine's watchdog: probe rank 0's health, restart the ranks in the recipe's order after N failures.

One run (the oneshot sparkfold-watchdog.service, started by its timer) does, in this order:

1. read its state (consecutive failures, the last restart) from the state file;
2. probe the health URL rank 0's readiness gate uses (SPARKFOLD_READY_URL of engine.env), with the gate's own
   judgement of the answer (sparkfold-engine-gate.py's health_state: the same program decides "ready" at a start);
3. a probe that fails while rank 0 is activating (loading the model) or stopped on purpose is not counted;
4. after `failures` consecutive failures, unless a run of site.yml holds the cluster's lock (its lease in
   `lock_file` has not expired) or a restart happened less than `window_s` ago, restart the ranks as the
   engine_service role does: rank 0 stops, the followers restart (the recipe's launch.order: all at once, or one
   after the other ascending or descending), each must stay up for `follower_watch_s` (the gate's `watch`), then
   rank 0 starts (its start returns when it serves);
5. write the state and, when `textfile` is set, node_exporter's textfile (atomically: a temporary file renamed).

Its lines go to the journal (stdout of a systemd service), each with its syslog priority as `<N>`.
Exit status: 0 healthy or nothing to do, 1 unhealthy (counted, held back, or restarted), 2 a bad configuration.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

ERR, WARNING, NOTICE, INFO = 3, 4, 5, 6


def log(priority, message):
    print(f"<{priority}>{message}", flush=True)


class ConfigError(Exception):
    pass


REQUIRED = ("engine_env", "gate", "state_file", "lock_file", "failures", "window_s", "order", "ranks")


def load_config(path):
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the watchdog's configuration {path}: {exc}") from exc
    missing = [key for key in REQUIRED if key not in config]
    if missing:
        raise ConfigError(f"{path} lacks {', '.join(missing)}; run the playbook again (the watchdog role writes it)")
    if config["order"] not in ("followers_first", "ascending", "descending"):
        raise ConfigError(f"{path}: order {config['order']!r} is not followers_first, ascending or descending")
    if int(config["failures"]) < 1:
        raise ConfigError(f"{path}: failures is {config['failures']}, it must be 1 or more")
    ranks = sorted(int(rank["rank"]) for rank in config["ranks"])
    if ranks != list(range(len(ranks))) or not ranks:
        raise ConfigError(f"{path}: the ranks are {ranks}, not 0..N-1")
    return config


def read_env_file(path):
    """KEY=VALUE lines of a systemd EnvironmentFile (comments and blank lines left out)."""
    values = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith(("#", ";")) or "=" not in line:
                continue
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def load_gate(path):
    spec = importlib.util.spec_from_file_location("sparkfold_engine_gate", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"the engine's gate {path} cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except (OSError, SyntaxError) as exc:
        raise ConfigError(f"the engine's gate {path} cannot be loaded: {exc}") from exc
    return module


def read_json(path, default):
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return default
    return value if isinstance(value, type(default)) else default


def write_atomic(path, text, mode=0o644):
    """Write ``text`` to a temporary file beside ``path``, then rename it over ``path``: a reader (node_exporter)
    sees the old file or the new one, never half of one."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def lock_holder(path, now):
    """The holder of the cluster's lock (site.yml's lease) when it is held and has not expired, else None."""
    lease = read_json(path, {})
    if not lease:
        return None
    try:
        expires = float(lease.get("expires", 0))
    except (TypeError, ValueError):
        expires = 0.0
    if expires <= now:
        return None
    until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(expires))
    return f"{lease.get('holder', 'a playbook')} from {lease.get('controller', 'a controller')} until {until}"


class Ranks:
    """systemctl on the node of each rank: this node's directly, another's through its `via` command (ssh)."""

    def __init__(self, config):
        self.systemctl = config.get("systemctl", "systemctl")
        self.python = config.get("python", "/usr/bin/python3")
        self.gate = config["gate"]
        self.via = {int(rank["rank"]): list(rank.get("via", [])) for rank in config["ranks"]}
        self.node = {int(rank["rank"]): rank.get("node", f"rank {rank['rank']}") for rank in config["ranks"]}
        self.timeout_s = float(config.get("command_timeout_s", 3600))

    @staticmethod
    def unit(rank):
        return f"sparkfold-engine@{rank}.service"

    def run(self, rank, argv):
        command = self.via[rank] + argv
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=self.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return 1, str(exc)
        return done.returncode, (done.stdout + done.stderr).strip()

    def systemctl_do(self, rank, action):
        return self.run(rank, [self.systemctl, action, self.unit(rank)])

    def active_state(self, rank):
        code, out = self.run(rank, [self.systemctl, "show", "--property=ActiveState", "--value", self.unit(rank)])
        return out.splitlines()[-1].strip() if code == 0 and out else "unknown"


def follower_sequence(order, world):
    """The followers in the order they (re)start: one step of all of them (followers_first) or one step each."""
    followers = list(range(1, world))
    if order == "followers_first":
        return [followers] if followers else []
    if order == "descending":
        followers.reverse()
    return [[rank] for rank in followers]


def restart_in_order(config, ranks, reason):
    """Rank 0 stops, the followers restart in the recipe's order and must stay up, rank 0 starts.
    Returns (ok, what failed)."""
    world = len(config["ranks"])
    watch_s = str(config.get("follower_watch_s", 5))
    log(WARNING, f"restarting the ranks in order ({config['order']}): {reason}")
    code, out = ranks.run(0, [ranks.systemctl, "reset-failed", ranks.unit(0)])
    code, out = ranks.systemctl_do(0, "stop")
    if code != 0:
        return False, f"stopping rank 0 on {ranks.node[0]} failed: {out}"
    log(NOTICE, f"rank 0 stopped on {ranks.node[0]}")
    for step in follower_sequence(config["order"], world):
        for rank in step:
            ranks.run(rank, [ranks.systemctl, "reset-failed", ranks.unit(rank)])
            code, out = ranks.systemctl_do(rank, "restart")
            if code != 0:
                return False, f"restarting rank {rank} on {ranks.node[rank]} failed: {out}"
            log(NOTICE, f"rank {rank} restarted on {ranks.node[rank]}")
        for rank in step:
            code, out = ranks.run(rank, [ranks.python, ranks.gate, "watch", ranks.unit(rank), "--seconds", watch_s])
            if code != 0:
                return False, f"rank {rank} on {ranks.node[rank]} did not stay up: {out}"
    code, out = ranks.systemctl_do(0, "start")
    if code != 0:
        return False, f"starting rank 0 on {ranks.node[0]} failed: {out}"
    log(NOTICE, f"rank 0 started on {ranks.node[0]} and serves")
    return True, ""


def _label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def build_of(config):
    """The engine build that runs: the target of the `current` link (native builds) or the image's tag."""
    link = config.get("build_link", "")
    if link:
        try:
            return os.path.basename(os.readlink(link).rstrip("/"))
        except OSError:
            pass
    image = config.get("image_record", "")
    if image:
        record = read_json(image, {})
        if record.get("tag"):
            return str(record["tag"])
    return ""


def textfile(config, state, healthy, held, now):
    """node_exporter's textfile collector format (Prometheus text exposition 0.0.4)."""
    weights = read_json(config.get("weights_record", ""), {}) if config.get("weights_record") else {}
    labels = f'recipe="{_label(config.get("recipe", ""))}"'
    lines = []

    def metric(name, kind, help_text, samples):
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for extra, value in samples:
            all_labels = labels + ("," + extra if extra else "")
            lines.append(f"{name}{{{all_labels}}} {value}")

    metric("sparkfold_engine_healthy", "gauge", "1 when rank 0's health probe answered ready at the last run.",
           [("", 1 if healthy else 0)])
    metric("sparkfold_engine_health_failures", "gauge", "Consecutive failed health probes.",
           [("", int(state.get("failures", 0)))])
    metric("sparkfold_engine_build_info", "gauge", "The engine build (native build directory or image tag) that runs.",
           [(f'build="{_label(build_of(config))}"', 1)])
    metric("sparkfold_weights_info", "gauge", "The weights repository and the commit on disk.",
           [(f'repo_id="{_label(weights.get("repo_id", ""))}",revision="{_label(weights.get("commit", ""))}"', 1)])
    metric("sparkfold_watchdog_restarts_total", "counter", "Restarts of the ranks by the watchdog.",
           [("", int(state.get("restarts", 0)))])
    last = state.get("last_restart") or {}
    metric("sparkfold_watchdog_last_restart_timestamp_seconds", "gauge",
           "When the watchdog last restarted the ranks (0: never).", [("", float(last.get("time", 0)))])
    metric("sparkfold_watchdog_last_restart_info", "gauge", "Why and how the last restart by the watchdog went.",
           [(f'reason="{_label(last.get("reason", ""))}",result="{_label(last.get("result", ""))}"', 1)])
    metric("sparkfold_watchdog_lock_held", "gauge", "1 when a site.yml run held the cluster's lock at the last run.",
           [("", 1 if held else 0)])
    metric("sparkfold_watchdog_last_run_timestamp_seconds", "gauge", "When the watchdog last ran.", [("", now)])
    return "\n".join(lines) + "\n"


def run_once(config, now=None):
    now = time.time() if now is None else now
    state = read_json(config["state_file"], {})
    state.setdefault("failures", 0)
    state.setdefault("restarts", 0)
    gate = load_gate(config["gate"])
    env = read_env_file(config["engine_env"])
    url = env.get("SPARKFOLD_READY_URL", "")
    if not url:
        raise ConfigError(f"{config['engine_env']} has no SPARKFOLD_READY_URL: this node does not run rank 0")
    ready, fatal, detail = gate.health_state(url, float(config.get("probe_timeout_s", 10)),
                                             json_only=env.get("SPARKFOLD_READY_JSON") == "1")
    ranks = Ranks(config)
    held_by = lock_holder(config["lock_file"], now)
    status = 0
    if ready:
        if state["failures"]:
            log(NOTICE, f"{url} is ready again after {state['failures']} failed probe(s): {detail}")
        state["failures"] = 0
    else:
        rank0 = ranks.active_state(0)
        if rank0 in ("activating", "reloading"):
            log(INFO, f"{url} is not ready ({detail}); rank 0 is {rank0} (loading): not counted")
        elif rank0 in ("inactive", "deactivating"):
            log(INFO, f"{url} is not ready ({detail}); rank 0 was stopped (systemctl): not counted, left alone")
            state["failures"] = 0
        else:
            status = 1
            state["failures"] += 1
            what = "fatal" if fatal else "not ready"
            log(WARNING, f"{url} {what} ({detail}); rank 0 is {rank0}; failure {state['failures']} of "
                         f"{config['failures']}")
            if state["failures"] >= int(config["failures"]):
                last = state.get("last_restart") or {}
                since = now - float(last.get("time", 0))
                if held_by:
                    log(NOTICE, f"not restarting: the cluster's lock is held by {held_by}")
                elif since < float(config["window_s"]):
                    log(WARNING, f"not restarting: the last restart was {since:.0f} s ago, less than the window of "
                                 f"{float(config['window_s']):.0f} s ({last.get('reason', '')})")
                else:
                    reason = f"{state['failures']} failed health probes: {what} ({detail})"
                    ok, failure = restart_in_order(config, ranks, reason)
                    state["restarts"] += 1
                    state["last_restart"] = {"time": now, "reason": reason[:200],
                                             "result": "ok" if ok else failure[:200]}
                    state["failures"] = 0
                    if ok:
                        log(NOTICE, "the ranks restarted in order and rank 0 serves")
                    else:
                        log(ERR, f"the restart failed: {failure}; see journalctl -u 'sparkfold-engine@*'")
    write_atomic(config["state_file"], json.dumps(state, sort_keys=True) + "\n", 0o600)
    if config.get("textfile"):
        write_atomic(config["textfile"], textfile(config, state, ready, held_by is not None, now))
    return status


def main(argv=None):
    parser = argparse.ArgumentParser(prog="sparkfold-watchdog", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--config", default="/etc/sparkfold/watchdog.json")
    args = parser.parse_args(argv)
    try:
        return run_once(load_config(args.config))
    except ConfigError as exc:
        log(ERR, str(exc))
        return 2


if __name__ == "__main__":
    sys.exit(main())
