# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test harness for the lab engine (lab/engine), a SIMULATOR of TensorFold.

`build()` builds it with the `ziglang` wheel through TensorFold's build interface
(`zig build install native -Dtarget=... -Dnvcc=... -Dsm=... --prefix OUT`); `Cluster` runs rank 0
and followers on 127.0.0.1 against a small fixture model directory, as the recipes start them.
The session fixture `engine_bin` (tests/unit/conftest.py) builds it once per test session.

Zig caches: the global cache is $ZIG_GLOBAL_CACHE_DIR when set, else <repo>/.cache/zig; the
local cache is <repo>/.cache/zig-local/engine. The first build on a machine compiles zig's
build runner (about 1-2 minutes on 2 cores); later builds take seconds.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import pathlib
import platform
import socket
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENGINE = ROOT / "lab" / "engine"
HOST = "127.0.0.1"
BUILD_TIMEOUT_S = 900

# Fast simulated timings for the tests.
SIM_ENV = {
    "SIM_LOAD_DELAY_S": "1",
    "SIM_FOLLOWER_GRACE_S": "1.5",
    "SIM_DECODE_TOK_S": "100",
    "SIM_PREFILL_TOK_S": "2000",
    "SIM_TTFT_BASE_MS": "20",
    "SIM_RENDEZVOUS_TIMEOUT_S": "30",
}


def _zig_env():
    env = dict(os.environ)
    env.setdefault("ZIG_GLOBAL_CACHE_DIR", str(ROOT / ".cache" / "zig"))
    return env


def build(source, prefix, optimize="Debug"):
    """`zig build install native` with TensorFold's options; returns the bin directory."""
    if importlib.util.find_spec("ziglang") is None:
        pytest.fail("the ziglang wheel is not installed: run `make setup` (requirements.txt pins ziglang==0.17.0)")
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}[platform.machine().lower()]
    cmd = [
        sys.executable, "-m", "ziglang", "build", "install", "native",
        f"-Dtarget={arch}-linux-gnu", f"-Doptimize={optimize}",
        "-Dnvcc=/usr/local/cuda/bin/nvcc", "-Dsm=121",
        "--cache-dir", str(ROOT / ".cache" / "zig-local" / "engine"),
        "--prefix", str(prefix),
    ]
    done = subprocess.run(
        cmd, cwd=source, env=_zig_env(), capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, f"zig build failed:\n{done.stdout}\n{done.stderr}"
    return pathlib.Path(prefix) / "bin"


def make_model(path, skip=None):
    """A fixture model directory: config, tokenizer, an index naming two shards, the shards."""
    path.mkdir(parents=True, exist_ok=True)
    files = {
        "config.json": json.dumps({"model_type": "deepseek_v4", "num_hidden_layers": 2}),
        "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "BPE"}}),
        "model.safetensors.index.json": json.dumps({
            "metadata": {"total_size": 8},
            "weight_map": {
                "embed.weight": "model-00001-of-00002.safetensors",
                "lm_head.weight": "model-00002-of-00002.safetensors",
                "norm.weight": "model-00001-of-00002.safetensors",
            },
        }),
        "model-00001-of-00002.safetensors": "\0" * 4,
        "model-00002-of-00002.safetensors": "\0" * 4,
    }
    for name, text in files.items():
        if name != skip:
            (path / name).write_text(text)
    return path


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def connect_refused(port):
    with socket.socket() as s:
        s.settimeout(1)
        try:
            s.connect((HOST, port))
        except ConnectionRefusedError:
            return True
        return False


def request(port, method, path, body=None, headers=None, timeout=30):
    """(status, parsed JSON or text) of one request."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read().decode()
        if resp.getheader("Content-Type", "").startswith("application/json"):
            return resp.status, json.loads(raw)
        return resp.status, raw
    finally:
        conn.close()


def stream(port, path, body, timeout=30):
    """Streams an SSE request: (status, [(arrival time, event payload text)])."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        payload = json.dumps(dict(body, stream=True))
        conn.request("POST", path, body=payload, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.getheader("Content-Type") == "text/event-stream"
        events = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = resp.readline()
            if not line:
                break
            line = line.decode()
            if line.startswith("data: "):
                events.append((time.monotonic(), line[len("data: "):].rstrip("\n")))
            else:
                assert line == "\n", f"unexpected SSE line {line!r}"
        return resp.status, events
    finally:
        conn.close()


def wait_until(predicate, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


class Cluster:
    """Rank 0 (tensorfold-native) and followers (tf-dsv41-lanes) as the recipes start them."""

    def __init__(self, bin_dir, tmp, world=2, parallel=2, context=4096, extra_args=(), env=None, name="dsv41-sim"):
        self.bin_dir = bin_dir
        self.tmp = tmp
        self.world = world
        self.model = make_model(tmp / "model")
        self.port = free_port()
        self.tp_port = free_port()
        self.env = {**os.environ, **SIM_ENV, **(env or {})}
        self.args = [
            "serve", str(self.model), "--host", HOST, "--port", str(self.port),
            "--context", str(context), "--parallel", str(parallel), *extra_args,
        ]
        if name:
            self.args += ["--name", name]
        self.rank0 = None
        self.followers = {}

    def start_rank0(self):
        env = dict(self.env, TF_TP_WORLD=str(self.world), TF_TP_MASTER=HOST, TF_TP_PORT=str(self.tp_port))
        with open(self.tmp / "rank0.log", "w") as log:
            self.rank0 = subprocess.Popen([str(self.bin_dir / "tensorfold-native"), *self.args], env=env, stderr=log)

    def start_follower(self, rank):
        args = [
            str(self.bin_dir / "tf-dsv41-lanes"), str(self.model), str(self.tmp / "cache"), str(rank),
            str(self.world), HOST, str(self.tp_port), "kit-sim", "--pool", "4096", "--rdma", "rocep1s0f1,roceP2p1s0f1",
        ]
        with open(self.tmp / f"rank{rank}.log", "w") as log:
            self.followers[rank] = subprocess.Popen(args, env=self.env, stderr=log)

    def log(self, rank=0):
        return (self.tmp / f"rank{rank}.log").read_text()

    def wait_ready(self, timeout=15):
        def ready():
            assert self.rank0.poll() is None, f"rank 0 exited:\n{self.log()}"
            return not connect_refused(self.port)

        assert wait_until(ready, timeout), f"HTTP never opened:\n{self.log()}"

    def start(self):
        self.start_rank0()
        for rank in range(1, self.world):
            self.start_follower(rank)
        self.wait_ready()
        return self

    def stop(self):
        for proc in [self.rank0, *self.followers.values()]:
            if proc is not None and proc.poll() is None:
                proc.kill()
            if proc is not None:
                proc.wait(timeout=10)
