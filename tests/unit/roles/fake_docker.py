# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in `docker` for tests/unit/roles/test_engine_inputs_first_start.py: each container is a process.

Knows `image inspect` (every image but example/absent:*), `run --detach` (reads --env-file as docker does, then starts
this file as the engine, whose environment is that file's variables: it writes rank<R>of2-fake.bin in the directory
TF_DS_RANK_CACHE names, and with TF_DS_ENGRAM dsv41_token_map.json in $HOME/.cache, each path inside the container
mapped through the --volume mounts, then rank 0 answers GET /v1/models with 200 on --port; FAKE_EXIT makes it print
`error: <value>` and exit 1), `container inspect`, `logs`, `stop`, `rm`. Every call is logged in
$FAKE_DOCKER_STATE/calls.log, and the environment each container saw in $FAKE_DOCKER_STATE/<name>.environ.json.
"""

from __future__ import annotations

import http.server
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

STATE = pathlib.Path(os.environ.get("FAKE_DOCKER_STATE", "/tmp/fake-docker"))


def env_file(path):
    """The variables docker reads from an --env-file (docker/cli pkg/kvfile/kvfile.go
    @3d41bbacb04b2fcfd4b4504323a46cc8da5b7681): a line's leading whitespace dropped, empty and '#' lines skipped, the
    name up to the first '=' (empty or with whitespace: an error), the value verbatim to the line's end, quotes and
    backslashes included; a name without '=' takes the caller's value, or is left out."""
    env = {}
    # bufio.ScanLines: lines end at '\n', a '\r' before it dropped
    for line in pathlib.Path(path).read_text(encoding="utf-8").split("\n"):
        line = line.removesuffix("\r").lstrip()
        if not line or line.startswith("#"):
            continue
        key, equals, value = line.partition("=")
        if not key or any(c in key for c in " \t"):
            raise ValueError(f"invalid env file ({path}): variable '{key}' contains whitespaces or is empty")
        if equals:
            env[key] = value
        elif key in os.environ:
            env[key] = os.environ[key]
    return env


def host_path(argv, inside):
    """The host path of a path inside the container, through its --volume mounts (None when no mount holds it)."""
    for i, value in enumerate(argv):
        if argv[i - 1] != "--volume":
            continue
        src, dest = value.split(":")[:2]
        if inside == dest or inside.startswith(dest.rstrip("/") + "/"):
            return pathlib.Path(src + inside[len(dest.rstrip("/")):])
    return None


def engine(log, argv):
    """The container's process: argv is `docker run`'s; its environment is what `run` read from the --env-file."""
    name = argv[argv.index("--name") + 1]
    env = json.loads((STATE / f"{name}.environ.json").read_text(encoding="utf-8"))
    with open(log, "a", encoding="utf-8") as out:
        if "FAKE_EXIT" in env:
            out.write(f"error: {env['FAKE_EXIT']}\n")
            sys.exit(1)
        rank = argv[argv.index("--rank") + 1]
        # The deepseek-v41-tp2 engine's first start (build_inputs.sh @5e10970a): the rank cache where TF_DS_RANK_CACHE
        # says, the token map in $HOME/.cache only with Engram tables (TF_DS_ENGRAM).
        if "TF_DS_RANK_CACHE" in env:
            ranks = host_path(argv, env["TF_DS_RANK_CACHE"])
            ranks.mkdir(parents=True, exist_ok=True)
            (ranks / f"rank{rank}of2-fake.bin").write_bytes(b"\0" * 16)
        else:
            out.write(f"rank {rank}: no TF_DS_RANK_CACHE, no rank cache written\n")
        if "TF_DS_ENGRAM" in env:
            host_path(argv, env["HOME"] + "/.cache/dsv41_token_map.json").write_text("{}")
        else:
            out.write(f"rank {rank}: WARNING: no Engram tables (TF_DS_ENGRAM)\n")
        out.write(f"rank {rank}: first start done\n")
    if rank != "0":
        while True:
            time.sleep(1)

    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    http.server.HTTPServer(("127.0.0.1", int(argv[argv.index("--port") + 1])), Models).serve_forever()


def main(argv):
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "calls.log", "a", encoding="utf-8") as calls:
        calls.write(json.dumps(argv) + "\n")
    if argv[:1] == ["--engine"]:
        engine(argv[1], argv[2:])
        return 0
    if argv[:2] == ["image", "inspect"]:
        if argv[-1].startswith("example/absent"):
            sys.stderr.write(f"Error: No such image: {argv[-1]}\n")
            return 1
        print("sha256:" + "a" * 64)
        return 0
    if argv[:1] == ["run"]:
        name = argv[argv.index("--name") + 1]
        # docker reads the file when it creates the container (root's HOME is /root)
        try:
            env = {"HOME": "/root", **env_file(argv[argv.index("--env-file") + 1])}
        except (OSError, ValueError) as exc:
            sys.stderr.write(f"docker: {exc}\n")
            return 125
        (STATE / f"{name}.environ.json").write_text(json.dumps(env, sort_keys=True), encoding="utf-8")
        log = STATE / f"{name}.log"
        proc = subprocess.Popen([sys.executable, __file__, "--engine", str(log), *argv],  # pylint: disable=consider-using-with
                                start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (STATE / f"{name}.pid").write_text(str(proc.pid))
        print("f" * 64)
        return 0
    name = argv[-1]
    pid_file = STATE / f"{name}.pid"
    pid = int(pid_file.read_text()) if pid_file.exists() else None

    def alive():
        if pid is None:
            return False
        try:
            waited = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            waited = (0, 0)
        if waited[0] == pid:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        state = pathlib.Path(f"/proc/{pid}/stat")
        return state.exists() and state.read_text().split()[2] != "Z"

    if argv[:2] == ["container", "inspect"]:
        if pid is None:
            return 1
        print("true" if alive() else "false")
        return 0
    if argv[:1] == ["logs"]:
        log = STATE / f"{name}.log"
        sys.stdout.write(log.read_text() if log.exists() else "")
        return 0 if pid is not None else 1
    if argv[:1] == ["stop"]:
        if pid is not None and alive():
            os.killpg(pid, signal.SIGTERM)
        return 0 if pid is not None else 1
    if argv[:1] == ["rm"]:
        if pid is not None and alive():
            if "--force" not in argv:
                return 1
            os.killpg(pid, signal.SIGKILL)
        existed = pid_file.exists()
        pid_file.unlink(missing_ok=True)
        return 0 if existed or "--force" in argv else 1
    sys.stderr.write(f"fake docker: unknown call {argv}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
