# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test harness for the lab engine (lab/engine), a SIMULATOR of TensorFold.

`build()` builds it with the `ziglang` wheel through TensorFold's build interface
(`zig build install native -Dtarget=... -Dnvcc=... -Dsm=... --prefix OUT`) and returns OUT/bin
(tf-dsv41-lanes, tf-dsv41-rank-cache); rank 0 is OUT/native/bin/tensorfold-native (`native_bin`), the
input tools OUT/libexec/dsv41-inputs (`inputs_dir`). `Cluster` runs rank 0 and followers on 127.0.0.1
against small fixture inputs (model, kit, Engram directory, rank caches, token maps), as the TP2 recipe
starts them. The session fixture `engine_bin` (tests/unit/conftest.py) builds it once per test session.

Zig caches: the global cache is $ZIG_GLOBAL_CACHE_DIR when set, else <repo>/.cache/zig; the
local cache is <repo>/.cache/zig-local/engine. The first build on a machine compiles zig's
build runner (about 1-2 minutes on 2 cores); later builds take seconds.
"""

from __future__ import annotations

import hashlib
import http.client
import importlib.util
import json
import os
import pathlib
import platform
import random
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


def build(source, prefix, optimize="Debug", extra=()):
    """`zig build install native` with TensorFold's options (and `extra` ones, e.g. the lab's -Dfamily=tp4);
    returns the bin directory (<prefix>/bin)."""
    if importlib.util.find_spec("ziglang") is None:
        pytest.fail("the ziglang wheel is not installed: run `make setup` (requirements.txt pins ziglang==0.17.0)")
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}[platform.machine().lower()]
    cmd = [
        sys.executable, "-m", "ziglang", "build", "install", "native",
        f"-Dtarget={arch}-linux-gnu", f"-Doptimize={optimize}",
        "-Dnvcc=/usr/local/cuda/bin/nvcc", "-Dsm=121",
        "--cache-dir", str(ROOT / ".cache" / "zig-local" / "engine"),
        *extra,
        "--prefix", str(prefix),
    ]
    done = subprocess.run(
        cmd, cwd=source, env=_zig_env(), capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, f"zig build failed:\n{done.stdout}\n{done.stderr}"
    return pathlib.Path(prefix) / "bin"


def prefix_of(bin_dir):
    """The install prefix of a `build()` bin directory."""
    return pathlib.Path(bin_dir).parent


def native_bin(bin_dir):
    """Rank 0's program: `zig build native` installs tensorfold-native into <prefix>/native/bin."""
    return prefix_of(bin_dir) / "native" / "bin" / "tensorfold-native"


def inputs_dir(bin_dir):
    """<prefix>/libexec/dsv41-inputs: node_inputs.sh and make_token_map.py."""
    return prefix_of(bin_dir) / "libexec" / "dsv41-inputs"


# The fixture tokenizer's vocabulary (byte-level pieces: "Ġ" is a space).
VOCAB = {"<bos>": 0, "<eos>": 1, "hello": 2, "\u0120hello": 3, "Hello": 4, "world": 5, "\u0120world": 6, "!": 7}

MODEL_SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")


def make_model(path, skip=None, vision=False, weight_map=None):
    """A fixture model directory: config, tokenizer, an index naming two shards, the shards."""
    path.mkdir(parents=True, exist_ok=True)
    config = {"model_type": "deepseek_v4", "num_hidden_layers": 2}
    if vision:
        config["vision_config"] = {"num_hidden_layers": 2}
    weight_map = weight_map or {
        "embed.weight": MODEL_SHARDS[0],
        "lm_head.weight": MODEL_SHARDS[1],
        "norm.weight": MODEL_SHARDS[0],
    }
    files = {
        "config.json": json.dumps(config),
        "tokenizer.json": json.dumps({
            "version": "1.0",
            "model": {"type": "BPE", "vocab": VOCAB, "merges": []},
            "added_tokens": [{"id": 8, "content": "<|User|>", "special": True}],
        }),
        "model.safetensors.index.json": json.dumps({"metadata": {"total_size": 8}, "weight_map": weight_map}),
    }
    for shard in sorted(set(weight_map.values())):
        files[shard] = "\0" * 4
    for name, text in files.items():
        if name != skip:
            (path / name).write_text(text)
    return path


# The lab kit (the layout of bertholomus/deepseek-v4.1-tensorfold-tp2-2xgb10 kit/; rope.json holds the
# RoPE tables' row count). KIT_ROWS: the model's 1,048,576 positions.
KIT_ROWS = 1048576
KIT_FILES = (
    "aot/aot.json", "aot/cubins/fused_moe.cubin", "cubins/dsv41_ext.cubin", "rope.json", "rope-cos.f32",
    "rope-sin.f32", "engram.json", "vision/torch_fmha_sm120.cubin", "vision/gate_bias_vl.safetensors",
    "tools/verify_kit.sh",
)


def make_kit(path, rows=KIT_ROWS, skip=(), engram=None):
    """A lab kit directory; `skip`: relative paths to leave out; `engram`: engram.json's object."""
    skip = {skip} if isinstance(skip, str) else set(skip)
    contents = {
        "aot/aot.json": json.dumps({"kernels": ["fused_moe"]}),
        "rope.json": json.dumps({"rows": rows}),
        "engram.json": json.dumps(engram or {"layers": [1, 14], "ngram": 4}),
        "tools/verify_kit.sh": "#!/bin/sh\ncd \"$(dirname \"$0\")/..\" && sha256sum -c --quiet MANIFEST\n",
    }
    manifest = []
    for rel in KIT_FILES:
        if rel in skip:
            continue
        f = path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(contents.get(rel, rel).encode())
        manifest.append(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {rel}")
    (path / "tools").mkdir(parents=True, exist_ok=True)
    if "tools/verify_kit.sh" not in skip:
        (path / "tools" / "verify_kit.sh").chmod(0o755)
    if "MANIFEST" not in skip:
        (path / "MANIFEST").write_text("\n".join(manifest) + "\n")
    return path


ENGRAM_FILES = (
    "model-00047-of-00048.safetensors", "model-00048-of-00048.safetensors", "model.safetensors.index.json",
    "config.json",
)


def make_engram(path, skip=()):
    """An Engram directory: deepseek-ai/DeepSeek-V4.1-Flash's shards 47 and 48, their index, config.json."""
    skip = {skip} if isinstance(skip, str) else set(skip)
    path.mkdir(parents=True, exist_ok=True)
    for name in ENGRAM_FILES:
        if name in skip:
            continue
        if name == "model.safetensors.index.json":
            weight_map = {"engram.0": ENGRAM_FILES[0], "engram.1": ENGRAM_FILES[1]}
            (path / name).write_text(json.dumps({"weight_map": weight_map}))
        elif name == "config.json":
            (path / name).write_text(json.dumps({"model_type": "deepseek_v41"}))
        else:
            (path / name).write_bytes(b"\0" * 4)
    return path


def node_inputs(bin_dir, model, cache_dir, rank, world=None, env=None):
    """Runs the installed node_inputs.sh (rank cache + token map): the CompletedProcess."""
    args = [str(inputs_dir(bin_dir) / "node_inputs.sh"), str(model), str(cache_dir), str(rank)]
    if world is not None:
        args.append(str(world))
    run_env = {**os.environ, "PYTHON": sys.executable, **(env or {})}
    return subprocess.run(args, env=run_env, capture_output=True, text=True, timeout=60, check=False)


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def free_port_block(count, avoid=()):
    """The first of `count` consecutive free ports, below the kernel's ephemeral range (32768 and up), where a
    client socket of another test cannot take one of them between this check and the engine's listen."""
    rng = random.Random()
    for _attempt in range(200):
        base = rng.randrange(20000, 32768 - count)
        block = range(base, base + count)
        if any(port in avoid for port in block):
            continue
        sockets = []
        try:
            for port in block:
                s = socket.socket()
                sockets.append(s)
                s.bind((HOST, port))
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
        return base
    raise RuntimeError(f"no {count} consecutive free ports on {HOST}")


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


# The container personalities (vllm, tensorfold) started fast: short load, quick decode, short waits.
SERVE_FAST = {"SIM_LOAD_DELAY_S": "0.2", "SIM_DECODE_TOK_S": "200", "SIM_TTFT_BASE_MS": "5",
              "SIM_FOLLOWER_GRACE_S": "1", "SIM_RENDEZVOUS_TIMEOUT_S": "3"}


def stop_procs(*procs):
    """Kill what still runs of the processes a test started, and reap them."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def health_ok(port):
    """GET /health answers 200 (False while nothing listens)."""
    try:
        return request(port, "GET", "/health", timeout=2)[0] == 200
    except OSError:
        return False


def wait_until(predicate, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# What the TP2 recipe runs (roles/recipe/recipes/dsv41-flash-tp2-zig.yml): the same on every rank.
RDMA_DEVICES = "rocep1s0f1,roceP2p1s0f1"
BOTH_RANKS_ENV = {"TF_DS_REPLAY_FLOOR": "1"}
# rank 0's served settings after --context/--parallel (extra_args come after them and win)
RANK0_SERVED = ("--thinking", "--max-tokens", "32768", "--temperature", "1.0", "--top-p", "0.95", "--top-k", "20",
                "--backend", "cuda")
SWITCHES = {"--graphs": "TF_DS_GRAPHS", "--side": "TF_DS_HC_SIDE", "--prefetch": "TF_DS_L2_PREFETCH",
            "--aio": "TF_DS_ENGRAM_AIO"}


class Cluster:
    """Rank 0 (tensorfold-native) and followers (tf-dsv41-lanes), started as the TP2 recipe starts them.

    The constructor makes every input on disk: the model (`make_model`), the kit (`make_kit`), the Engram
    directory (`make_engram`), and per node `nodeR/rank-cache/rank<R>of<W>-*.bin` and
    `nodeR/dsv41_token_map.json` with the installed node_inputs.sh. Rank 0 gets TF_TP_*, TF_DS_RANK_CACHE,
    TF_DS_KIT, TENSORFOLD_CUDA_KERNELS (the kit's aot/), TF_DS_ENGRAM + TF_DS_TOKEN_MAP, TF_RDMA_DEVICES,
    TF_DS_STREAMS (4, or --parallel when more), TF_DS_GRAPHS/HC_SIDE/L2_PREFETCH/ENGRAM_AIO=1 and
    `serve MODEL --host --port --context --parallel --thinking --max-tokens 32768 --temperature 1.0 --top-p 0.95
    --top-k 20 --backend cuda [extra_args] [--name]`; a follower `MODEL CACHE RANK WORLD MASTER PORT KIT
    --pool <context> --graphs 1 --side 1 --prefetch 1 --aio 1 --rdma <devices> --engram DIR --token-map FILE`.
    Both get TF_DS_REPLAY_FLOOR=1. `rank0_env` and
    `follower_args(rank)` are the exact environment and command line; change them before `start`.
    An --api-key-file is made 0600 before rank 0 starts, as the engine_service role writes it.
    """

    def __init__(self, bin_dir, tmp, world=2, parallel=2, context=4096, extra_args=(), env=None, name="dsv41-sim"):
        self.bin_dir = pathlib.Path(bin_dir)
        self.native = native_bin(bin_dir)
        self.tmp = pathlib.Path(tmp)
        self.world = world
        self.context = context
        self.model = make_model(self.tmp / "model")
        self.kit = make_kit(self.tmp / "kit")
        self.engram = make_engram(self.tmp / "engram")
        self.nodes = {rank: self.tmp / f"node{rank}" for rank in range(world)}
        for rank, node in self.nodes.items():
            done = node_inputs(bin_dir, self.model, node, rank, world)
            assert done.returncode == 0, f"node_inputs.sh rank {rank} failed:\n{done.stdout}\n{done.stderr}"
        self.port = free_port()
        # Rank 0 listens on TF_TP_PORT + g - 1 for follower g: the whole block must be free.
        self.tp_port = free_port_block(max(1, world - 1), avoid={self.port})
        self.env = {**os.environ, **SIM_ENV, **BOTH_RANKS_ENV, **(env or {})}
        self.rank0_env = {
            "TF_TP_WORLD": str(world), "TF_TP_MASTER": HOST, "TF_TP_PORT": str(self.tp_port),
            "TF_DS_RANK_CACHE": str(self.nodes[0] / "rank-cache"), "TF_DS_KIT": str(self.kit),
            "TENSORFOLD_CUDA_KERNELS": str(self.kit / "aot"), "TF_DS_ENGRAM": str(self.engram),
            "TF_DS_TOKEN_MAP": str(self.nodes[0] / "dsv41_token_map.json"), "TF_RDMA_DEVICES": RDMA_DEVICES,
            "TF_DS_STREAMS": str(max(4, parallel)), **{var: "1" for var in SWITCHES.values()},
        }
        self.args = [
            "serve", str(self.model), "--host", HOST, "--port", str(self.port),
            "--context", str(context), "--parallel", str(parallel), *RANK0_SERVED, *extra_args,
        ]
        if name:
            self.args += ["--name", name]
        self.follower_pairs = {"--pool": str(context), **{key: "1" for key in SWITCHES}, "--rdma": RDMA_DEVICES}
        self.rank0 = None
        self.followers = {}

    def follower_args(self, rank):
        node = self.nodes[rank]
        args = [
            str(self.bin_dir / "tf-dsv41-lanes"), str(self.model), str(node / "rank-cache"), str(rank),
            str(self.world), HOST, str(self.tp_port), str(self.kit),
        ]
        for key, value in self.follower_pairs.items():
            args += [key, value]
        return [*args, "--engram", str(self.engram), "--token-map", str(node / "dsv41_token_map.json")]

    def _key_file(self):
        for i, arg in enumerate(self.args):
            if arg == "--api-key-file" and i + 1 < len(self.args):
                return pathlib.Path(self.args[i + 1])
            if arg.startswith("--api-key-file="):
                return pathlib.Path(arg.split("=", 1)[1])
        return None

    def rank0_command(self):
        return [str(self.native), *self.args]

    def start_rank0(self):
        key = self._key_file()
        if key is not None and key.exists():
            key.chmod(0o600)
        with open(self.tmp / "rank0.log", "w") as log:
            self.rank0 = subprocess.Popen(self.rank0_command(), env={**self.env, **self.rank0_env}, stderr=log)

    def start_follower(self, rank):
        with open(self.tmp / f"rank{rank}.log", "w") as log:
            self.followers[rank] = subprocess.Popen(self.follower_args(rank), env=self.env, stderr=log)

    def run_rank0(self, timeout=10):
        """Rank 0 run to its end (for refusals, which come before the rendezvous): CompletedProcess."""
        return subprocess.run(self.rank0_command(), env={**self.env, **self.rank0_env}, capture_output=True,
                              text=True, timeout=timeout, check=False)

    def run_follower(self, rank=1, args=None, timeout=10):
        """A follower run to its end (for refusals before it connects): CompletedProcess."""
        return subprocess.run(args or self.follower_args(rank), env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)

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
