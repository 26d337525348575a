# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab engine (lab/engine): a SIMULATOR of TensorFold's command lines, inputs and HTTP API.

The harness (build, Cluster, fixture inputs, HTTP helpers) is tests/labengine.py; `engine_bin` is built once
per session (tests/unit/conftest.py). These tests run rank 0 and a follower on 127.0.0.1 the way the TP2
recipe starts them, drive the API, and take each required input away in turn to see the refusal.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import threading
import time

import pytest

from tests.labengine import (
    ENGINE,
    HOST,
    VOCAB,
    Cluster,
    build,
    connect_refused,
    inputs_dir,
    make_kit,
    make_model,
    native_bin,
    node_inputs,
    request,
    stream,
    wait_until,
)

NOT_PORTED = ("the native DeepSeek-V4.1 engine runs tensor parallel over two GPUs or the four nodes of the 2D split: "
              "set TF_TP_WORLD=2 or 4")


@pytest.fixture(scope="module")
def cluster(engine_bin, tmp_path_factory):
    c = Cluster(engine_bin, tmp_path_factory.mktemp("cluster")).start()
    yield c
    c.stop()


@pytest.fixture
def pair(engine_bin, tmp_path):
    """A pair whose inputs are all made but which is not started (tests change them first)."""
    c = Cluster(engine_bin, tmp_path)
    yield c
    c.stop()


def chat(port, content, **kw):
    body = dict({"messages": [{"role": "user", "content": content}]}, **kw)
    return request(port, "POST", "/v1/chat/completions", body)


def refused(done, text, status=2):
    """The process refused to start (exit 2, one `<tag>: refusing to start: <reason>` line); `text` is in the reason."""
    assert done.returncode == status, (done.returncode, done.stderr)
    marker = "refusing to start: "
    reasons = [line.split(marker, 1)[1] for line in done.stderr.splitlines() if marker in line]
    assert len(reasons) == 1, done.stderr
    assert text in reasons[0], done.stderr


# --- build ----------------------------------------------------------------------------------


def test_install_layout_is_tensorfolds(engine_bin):
    prefix = engine_bin.parent
    assert native_bin(engine_bin) == prefix / "native" / "bin" / "tensorfold-native"
    for path in (native_bin(engine_bin), engine_bin / "tf-dsv41-lanes", engine_bin / "tf-dsv41-rank-cache",
                 inputs_dir(engine_bin) / "node_inputs.sh"):
        assert path.is_file(), path
        assert os.access(path, os.X_OK), path
    # node_inputs.sh runs it with $PYTHON, as upstream's does: a plain file, no shebang needed.
    assert (inputs_dir(engine_bin) / "make_token_map.py").is_file()
    assert not (engine_bin / "tensorfold-native").exists()


def test_version_names_the_simulator_and_records_build_options(engine_bin):
    for path in (native_bin(engine_bin), engine_bin / "tf-dsv41-lanes", engine_bin / "tf-dsv41-rank-cache"):
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=10, check=False)
        assert out.returncode == 0
        assert "SIMULATOR" in out.stdout
        assert "nvcc=/usr/local/cuda/bin/nvcc" in out.stdout
        assert "sm=121" in out.stdout
        assert "zig=0.17.0" in out.stdout


def test_zig_version_file_is_pinned():
    assert (ENGINE / ".zig-version").read_text().strip() == "0.17.0"
    assert "builtin.zig_version" in (ENGINE / "build.zig").read_text()


# --- tf-dsv41-rank-cache and node_inputs.sh ----------------------------------------------------


def rank_cache(engine_bin, *args):
    return subprocess.run([str(engine_bin / "tf-dsv41-rank-cache"), *map(str, args)], capture_output=True, text=True,
                          timeout=10, check=False)


def test_rank_cache_tool_usage_and_refusals(engine_bin, tmp_path):
    model = make_model(tmp_path / "model")
    usage = "usage: tf-dsv41-rank-cache MODEL_DIR OUT_DIR RANK WORLD [--parity] [--no-dspark] [--index-only]"
    for args in ((), (model, tmp_path / "out", 0), (model, tmp_path / "out", 0, 2, "--bogus")):
        done = rank_cache(engine_bin, *args)
        assert done.returncode == 2 and usage in done.stderr
    for args in ((0, 3), (2, 2), (0, 2, "--parity")):
        done = rank_cache(engine_bin, model, tmp_path / "out", *args)
        assert done.returncode == 2
        assert "WORLD is 1, 2 or 4, RANK below it; --parity needs WORLD 4" in done.stderr
    done = rank_cache(engine_bin, model, tmp_path / "out", "x", 2)
    assert (done.returncode, done.stderr.strip()) == (1, "error: InvalidCharacter")
    done = rank_cache(engine_bin, tmp_path / "nothing", tmp_path / "out", 0, 2)
    assert done.returncode == 1 and "config.json" in done.stderr
    assert not (tmp_path / "out").exists()


def test_rank_cache_tool_writes_one_real_format_file(engine_bin, tmp_path):
    model = make_model(tmp_path / "model")
    out = tmp_path / "out"
    done = rank_cache(engine_bin, model, out, 1, 2)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout)
    assert set(line) == {"file", "entries", "data_bytes", "index_bytes", "rank", "world", "parity", "dspark"}
    assert re.fullmatch(r"rank1of2-[0-9a-f]{20}\.bin", line["file"])
    assert (line["entries"], line["data_bytes"], line["rank"], line["world"]) == (3, 24, 1, 2)
    assert (line["parity"], line["dspark"]) == (False, True)
    assert [p.name for p in out.iterdir()] == [line["file"]]  # no .partial left

    data = (out / line["file"]).read_bytes()
    assert data[-8:] == b"TFDSRK01"
    (offset,) = struct.unpack("<Q", data[-16:-8])
    assert offset == line["data_bytes"]
    index = data[offset:-16]
    assert len(index) == line["index_bytes"]
    assert hashlib.sha256(index).hexdigest()[:20] == line["file"][len("rank1of2-"):-len(".bin")]
    rows = json.loads(index)
    assert [row[0] for row in rows] == [
        "embed.weight|model-00001-of-00002.safetensors|part 1 of 2",
        "lm_head.weight|model-00002-of-00002.safetensors|part 1 of 2",
        "norm.weight|model-00001-of-00002.safetensors|part 1 of 2",
    ]
    assert rows[1][1:] == ["uint8", [8], 8, 8]

    only = rank_cache(engine_bin, model, tmp_path / "elsewhere", 1, 2, "--index-only")
    assert only.returncode == 0 and only.stdout.encode() == index
    assert not (tmp_path / "elsewhere").exists()

    again = rank_cache(engine_bin, model, out, 1, 2, "--no-dspark")
    assert again.returncode == 1
    assert f"{out} already holds {line['file']}: remove it or name an empty OUT_DIR" in again.stderr
    four = json.loads(rank_cache(engine_bin, model, out, 3, 4, "--parity", "--no-dspark").stdout)
    assert (four["rank"], four["world"], four["parity"], four["dspark"]) == (3, 4, True, False)


def test_node_inputs_makes_the_rank_cache_and_the_token_map(engine_bin, tmp_path):
    model = make_model(tmp_path / "model")
    done = node_inputs(engine_bin, model, tmp_path / "node", 1, 2)
    assert done.returncode == 0, done.stderr
    files = list((tmp_path / "node" / "rank-cache").iterdir())
    assert len(files) == 1 and re.fullmatch(r"rank1of2-[0-9a-f]{20}\.bin", files[0].name)
    token_map = json.loads((tmp_path / "node" / "dsv41_token_map.json").read_text())
    assert token_map["format"] == "sparkfold-lab-token-map"
    assert token_map["vocab_size"] == len(VOCAB) + 1  # the added token is id 8
    # "hello", " hello" and "Hello" normalize alike, as do "world" and " world"
    m = token_map["map"]
    assert m[VOCAB["hello"]] == m[VOCAB["\u0120hello"]] == m[VOCAB["Hello"]]
    assert m[VOCAB["world"]] == m[VOCAB["\u0120world"]] != m[VOCAB["hello"]]
    assert token_map["compressed_size"] == len(set(m))

    # WORLD defaults to 4 (the file is made with --parity); a second run of the same rank is refused
    assert node_inputs(engine_bin, model, tmp_path / "node4", 2).returncode == 0
    assert [p.name[:8] for p in (tmp_path / "node4" / "rank-cache").iterdir()] == ["rank2of4"]
    again = node_inputs(engine_bin, model, tmp_path / "node", 1, 2)
    assert again.returncode == 1 and "already holds" in again.stderr

    (model / "tokenizer.json").unlink()
    done = node_inputs(engine_bin, model, tmp_path / "node-x", 0, 2)
    assert done.returncode == 1 and "has no tokenizer.json" in done.stderr
    usage = subprocess.run([str(inputs_dir(engine_bin) / "node_inputs.sh"), str(model)], capture_output=True,
                           text=True, timeout=10, check=False)
    assert usage.returncode == 2 and "usage: node_inputs.sh MODEL_DIR CACHE_DIR RANK [WORLD]" in usage.stderr


# --- rank 0: command line and inputs ------------------------------------------------------------


@pytest.mark.parametrize(("extra", "text"), [
    (["--foo"], "unrecognized arguments: --foo"),
    (["--foo=1", "stray"], "unrecognized arguments: --foo=1 stray"),
    (["--backend", "bogus"], "argument --backend: invalid choice: 'bogus' (choose from auto, mlx, cuda, rocm)"),
    # a Linux CUDA build serves auto and cuda only (CLI: native_values backend_values; issue 25 C)
    (["--backend", "rocm"], "--backend rocm is not served by the native engine; the Python engine 0.6.6 serves it"),
    (["--backend", "mlx"], "--backend mlx is not served by the native engine; the Python engine 0.6.6 serves it"),
    (["--port", "x"], "argument --port: invalid int value: 'x'"),
    (["--no-drafts=1"], "argument --no-drafts: ignored explicit argument '1'"),
    (["--max-tokens"], "argument --max-tokens: expected one argument"),
])
def test_serve_flags_are_the_native_servers(pair, extra, text):
    pair.args += extra
    done = pair.run_rank0()
    assert done.returncode == 2
    assert f"tensorfold-native serve: error: {text}" in done.stderr
    assert "usage: tensorfold-native serve MODEL" in done.stderr


def _drop(name):
    def change(c):
        del c.rank0_env[name]
    return change


def _set(name, value):
    def change(c):
        c.rank0_env[name] = value(c) if callable(value) else value
    return change


def _unlink(rel):
    def change(c):
        (c.kit / rel).unlink()
    return change


def _other_model_cache(c):
    other = make_model(c.tmp / "other-model", weight_map={"embed.weight": "model-00001-of-00001.safetensors"})
    cache = c.nodes[0] / "rank-cache"
    shutil.rmtree(cache)
    assert node_inputs(c.bin_dir, other, c.tmp / "other-node", 0, 2).returncode == 0
    shutil.copytree(c.tmp / "other-node" / "rank-cache", cache)


def _two_caches(c):
    cache = c.nodes[0] / "rank-cache"
    (first,) = cache.iterdir()
    shutil.copy(first, cache / "rank0of2-00000000000000000000.bin")


def _empty_cache(c):
    shutil.rmtree(c.nodes[0] / "rank-cache")
    (c.nodes[0] / "rank-cache").mkdir()


def _truncated_cache(c):
    (first,) = (c.nodes[0] / "rank-cache").iterdir()
    first.write_bytes(first.read_bytes()[:-4])


def _rope_rows(rows):
    def change(c):
        (c.kit / "rope.json").write_text(json.dumps({"rows": rows}))
    return change


def _engram_without(name):
    def change(c):
        (c.engram / name).unlink()
    return change


def _vision_model(c):
    config = json.loads((c.model / "config.json").read_text())
    config["vision_config"] = {"num_hidden_layers": 2}
    (c.model / "config.json").write_text(json.dumps(config))
    (c.kit / "vision" / "gate_bias_vl.safetensors").unlink()


def _foreign_token_map(c):
    (c.nodes[0] / "dsv41_token_map.json").write_text(json.dumps({"vocab": {"a": 1}}))


def _key_file(mode):
    def change(c):
        key = c.tmp / "key"
        key.write_text("sk-lab-123\n")
        key.chmod(mode)
        c.args += ["--api-key-file", str(key)]
    return change


RANK0_REFUSALS = {
    "no TF_DS_RANK_CACHE": (_drop("TF_DS_RANK_CACHE"),
                            lambda c: "set TF_DS_RANK_CACHE to the lane's per-rank weight files"),
    "no TF_DS_KIT": (_drop("TF_DS_KIT"),
                     lambda c: "set TF_DS_KIT to the kernel kit (cubins/, the RoPE tables, engram.json)"),
    "kit without engram.json": (_unlink("engram.json"), lambda c: f"TF_DS_KIT {c.kit} has no engram.json"),
    "kit without cubins": (lambda c: shutil.rmtree(c.kit / "cubins"),
                           lambda c: f"TF_DS_KIT {c.kit} has no cubins/*.cubin"),
    "kit without a RoPE table": (_unlink("rope-sin.f32"), lambda c: f"TF_DS_KIT {c.kit} has no rope-sin.f32"),
    "rope rows too few": (_rope_rows(1024), lambda c: "the kit's RoPE tables hold 1024 rows, --context asks for 4096"),
    "TENSORFOLD_CUDA_KERNELS unset": (_drop("TENSORFOLD_CUDA_KERNELS"),
                                      lambda c: "set TENSORFOLD_CUDA_KERNELS to the kernel set (the kit's aot/"),
    "TENSORFOLD_CUDA_KERNELS wrong": (_set("TENSORFOLD_CUDA_KERNELS", lambda c: str(c.kit)),
                                      lambda c: f"TENSORFOLD_CUDA_KERNELS {c.kit} has no aot.json"),
    "TF_DS_ENGRAM without TF_DS_TOKEN_MAP": (_drop("TF_DS_TOKEN_MAP"),
                                             lambda c: "TF_DS_ENGRAM is set but TF_DS_TOKEN_MAP is not"),
    "TF_DS_TOKEN_MAP without TF_DS_ENGRAM": (_drop("TF_DS_ENGRAM"),
                                             lambda c: "TF_DS_TOKEN_MAP is set but TF_DS_ENGRAM is not"),
    "engram dir without shard 48": (_engram_without("model-00048-of-00048.safetensors"),
                                    lambda c: f"TF_DS_ENGRAM {c.engram} has no model-00048-of-00048.safetensors"),
    "engram dir without config.json": (_engram_without("config.json"),
                                       lambda c: f"TF_DS_ENGRAM {c.engram} has no config.json"),
    "token map not make_token_map.py's": (
        _foreign_token_map,
        lambda c: f"TF_DS_TOKEN_MAP {c.nodes[0] / 'dsv41_token_map.json'} is not a token map made by "
                  "make_token_map.py"),
    "TF_TP_WORLD=3": (_set("TF_TP_WORLD", "3"), lambda c: f"TF_TP_WORLD=3: {NOT_PORTED}"),
    "TF_TP_WORLD=1": (_set("TF_TP_WORLD", "1"), lambda c: f"TF_TP_WORLD=1: {NOT_PORTED}"),
    "no TF_TP_MASTER": (_drop("TF_TP_MASTER"), lambda c: "set TF_TP_MASTER to rank 0's fabric address (rank 1: "
                        "tf-dsv41-lanes MODEL CACHE 1 2 MASTER PORT KIT; ranks 1-3 of four: ... G 4 ...)"),
    # NATIVE: `link.parseIp(getenv("TF_TP_MASTER") ...) catch return error.BadMaster` (link.zig @03873553: four
    # decimal bytes), explained as a missing one: no name, no IPv6.
    "TF_TP_MASTER localhost": (_set("TF_TP_MASTER", "localhost"), lambda c: "TF_TP_MASTER=localhost: set TF_TP_MASTER "
                               "to rank 0's fabric address"),
    "TF_TP_MASTER IPv6": (_set("TF_TP_MASTER", "::1"), lambda c: "TF_TP_MASTER=::1: set TF_TP_MASTER to rank 0's "
                          "fabric address"),
    "--parallel 5 with the default streams": (
        lambda c: c.rank0_env.pop("TF_DS_STREAMS") and c.args.extend(["--parallel", "5"]),
        lambda c: "this engine serves TF_DS_STREAMS streams at once (default 4): --parallel at most that"),
    "TF_DS_STREAMS=17": (_set("TF_DS_STREAMS", "17"), lambda c: "TF_DS_STREAMS: the pool's streams, 1 .. 16"),
    "--parallel over TF_DS_STREAMS": (_set("TF_DS_STREAMS", "1"), lambda c: "--parallel at most that (--parallel 2, "
                                      "TF_DS_STREAMS 1)"),
    "TF_DS_ROUND_ROWS=8": (_set("TF_DS_ROUND_ROWS", "8"),
                           lambda c: "TF_DS_ROUND_ROWS: a round's rows at most, 16 .. 48"),
    "world-readable key file": (_key_file(0o644), lambda c: "startup refuses a file readable by other users"),
    "group-readable key file": (_key_file(0o640), lambda c: "startup refuses a file readable by other users"),
    "rank cache from another model": (_other_model_cache, lambda c: "was made from another checkpoint"),
    "two rank-cache files": (_two_caches, lambda c: "holds two rank cache files for rank 0 of 2"),
    "no rank-cache file": (_empty_cache, lambda c: f"no rank cache file rank0of2-*.bin in {c.nodes[0] / 'rank-cache'}: "
                           "make it with node_inputs.sh"),
    "damaged rank cache": (_truncated_cache, lambda c: "is not a rank cache (no TFDSRK01 magic at its end)"),
    "vision checkpoint, kit without the vision files": (
        _vision_model, lambda c: "this checkpoint reads images: its kit (TF_DS_KIT) needs "
        "vision/torch_fmha_sm120.cubin and vision/gate_bias_vl.safetensors"),
}


@pytest.mark.parametrize("case", list(RANK0_REFUSALS))
def test_rank0_refuses_what_the_real_engine_refuses(pair, case):
    change, text = RANK0_REFUSALS[case]
    change(pair)
    done = pair.run_rank0()
    refused(done, text(pair))
    assert "tensorfold-native[rank 0]: refusing to start:" in done.stderr


def test_rank0_refusal_names_the_two_rank_cache_files(pair):
    _two_caches(pair)
    done = pair.run_rank0()
    refused(done, "")
    assert "rank0of2-00000000000000000000.bin" in done.stderr
    assert "the lane refuses a folder with two" in done.stderr


@pytest.mark.parametrize(
    "missing", ["config.json", "tokenizer.json", "model-00002-of-00002.safetensors"]
)
def test_both_binaries_refuse_an_incomplete_model(pair, missing):
    (pair.model / missing).unlink()
    for done in (pair.run_rank0(), pair.run_follower(1)):
        assert done.returncode == 2, done.stderr
        assert f"{pair.model}/{missing}" in done.stderr
        assert "missing" in done.stderr


# --- followers: command line and inputs ------------------------------------------------------


def test_follower_parses_pairs_as_lanes_main_does(pair):
    base = pair.follower_args(1)
    usage = pair.run_follower(args=base[:7])  # six positionals
    assert usage.returncode == 2
    assert "usage: tf-dsv41-lanes MODEL_DIR CACHE_DIR RANK WORLD MASTER_IP PORT KIT_DIR" in usage.stderr
    for extra in (["--bogus", "1"], ["--pool"], ["--pool=4096"], ["--parallel", "5"], ["--parallel", "0"]):
        done = pair.run_follower(args=base + extra)
        assert (done.returncode, done.stderr.strip()) == (1, "error: BadArgument"), extra
    done = pair.run_follower(args=[*base, "--pool", "many"])
    assert (done.returncode, done.stderr.strip()) == (1, "error: InvalidCharacter")
    # LANES: `.master = try dsv41.link.parseIp(args[5])` (link.zig @03873553): MASTER_IP is four decimal bytes
    for master, error in (("localhost", "InvalidCharacter"), ("::1", "InvalidCharacter"), ("192.0.2", "BadAddress")):
        done = pair.run_follower(args=[*base[:5], master, *base[6:]])
        assert (done.returncode, done.stderr.strip()) == (1, f"error: {error}"), master


def _follower_change(c, key, value=None):
    args = c.follower_args(1)
    i = args.index(key)
    return [*args[:i], *args[i + 2:]] if value is None else [*args[:i + 1], value, *args[i + 2:]]


FOLLOWER_REFUSALS = {
    "--engram without --token-map": (lambda c: _follower_change(c, "--token-map"),
                                     lambda c: "--engram needs --token-map"),
    "--token-map without --engram": (lambda c: _follower_change(c, "--engram"),
                                     lambda c: "--token-map needs --engram"),
    "engram dir without shard 47": (
        lambda c: (c.engram / "model-00047-of-00048.safetensors").unlink() or c.follower_args(1),
        lambda c: f"--engram {c.engram} has no model-00047-of-00048.safetensors"),
    "rope rows fewer than the pool": (lambda c: _follower_change(c, "--pool", "2097152"),
                                      lambda c: "the kit's RoPE tables hold 1048576 rows, --pool asks for 2097152"),
    "kit without aot/aot.json": (lambda c: (c.kit / "aot" / "aot.json").unlink() or c.follower_args(1),
                                 lambda c: f"KIT_DIR {c.kit} has no aot/aot.json"),
    "no rank cache in CACHE_DIR": (
        lambda c: shutil.rmtree(c.nodes[1] / "rank-cache") or (c.nodes[1] / "rank-cache").mkdir() or c.follower_args(1),
        lambda c: f"no rank cache file rank1of2-*.bin in {c.nodes[1] / 'rank-cache'}: make it with node_inputs.sh"),
    "rank 0's rank cache": (
        lambda c: [*c.follower_args(1)[:2], str(c.nodes[0] / "rank-cache"), *c.follower_args(1)[3:]],
        lambda c: "no rank cache file rank1of2-*.bin"),
    "WORLD 3": (lambda c: [*c.follower_args(1)[:4], "3", *c.follower_args(1)[5:]],
                lambda c: "WORLD 3: the native DeepSeek-V4.1 engine runs tensor parallel over two GPUs"),
}


@pytest.mark.parametrize("case", list(FOLLOWER_REFUSALS))
def test_follower_refuses_what_the_real_follower_refuses(pair, case):
    change, text = FOLLOWER_REFUSALS[case]
    done = pair.run_follower(args=change(pair))
    refused(done, text(pair))
    assert "tf-dsv41-lanes[rank 1]: refusing to start:" in done.stderr


def _without_engram(c):
    args = _follower_change(c, "--engram")
    i = args.index("--token-map")
    return [*args[:i], *args[i + 2:]]


@pytest.mark.parametrize("rank", [0, 1])
def test_no_engram_on_a_rank_fails_with_no_engram_tables_once_the_ranks_are_linked(engine_bin, tmp_path, rank):
    """Every checkpoint the engine serves has Engram layers (config.zig @88929d74 checkShapes), and model.zig's
    `Model.open` returns error.NoEngramTables without the tables, after the ranks linked (`prompt2d.Fan.open`) and
    before anything is served. Rank 0 without TF_DS_ENGRAM/TF_DS_TOKEN_MAP, or a follower without --engram/--token-map
    (LANES: `try Model.open`, `error: NoEngramTables`, exit 1): the pair never serves and both ranks exit 1."""
    c = Cluster(engine_bin, tmp_path, env={"SIM_LOAD_DELAY_S": "0.3", "SIM_FOLLOWER_GRACE_S": "0.5"})
    try:
        if rank == 0:
            del c.rank0_env["TF_DS_ENGRAM"], c.rank0_env["TF_DS_TOKEN_MAP"]
            args = c.follower_args(1)
        else:
            args = _without_engram(c)
        c.start_rank0()
        with open(c.tmp / "rank1.log", "w") as log:
            c.followers[1] = subprocess.Popen(args, env=c.env, stderr=log)
        assert c.rank0.wait(timeout=15) == 1, c.log()
        assert c.followers[1].wait(timeout=15) == 1, c.log(1)
        assert "all 1 follower(s) joined" in c.log(), c.log()  # at the same point: after the link
        assert "joined rank 0 at" in c.log(1), c.log(1)
        assert "HTTP open" not in c.log(), c.log()
        if rank == 0:
            assert "fatal: loading the model failed: NoEngramTables" in c.log(), c.log()
            assert "rank 0 went away" in c.log(1), c.log(1)
        else:
            assert c.log(1).rstrip().endswith("error: NoEngramTables"), c.log(1)
            assert "follower rank 1 lost" in c.log(), c.log()
    finally:
        c.stop()


# --- rendezvous: a follower must run what rank 0 runs -----------------------------------------


def _other_kit(c):
    kit = make_kit(c.tmp / "other-kit", engram={"layers": [2, 15]})
    args = c.follower_args(1)
    args[7] = str(kit)
    return args


def _other_checkpoint(c):
    other = make_model(c.tmp / "other-model", weight_map={"embed.weight": "model-00001-of-00001.safetensors"})
    assert node_inputs(c.bin_dir, other, c.tmp / "other-node", 1, 2).returncode == 0
    args = c.follower_args(1)
    args[1], args[2] = str(other), str(c.tmp / "other-node" / "rank-cache")
    return args


MISMATCHES = {
    "pool": (lambda c: _follower_change(c, "--pool", "8192"),
             "rank 1's --pool 8192 is not rank 0's --context 4096: the pool holds --context positions for every "
             "stream together"),
    "rdma": (lambda c: c.rank0_env.update(TF_RDMA_DEVICES="rocep1s0f1") or c.follower_args(1),
             "rank 1 gathers over rdma rocep1s0f1,roceP2p1s0f1, rank 0 over TF_RDMA_DEVICES=rocep1s0f1: "
             "the RDMA gather needs the same device count on every rank"),
    "rdma off on rank 0": (lambda c: c.rank0_env.update(TF_RDMA_DEVICES="") or c.follower_args(1),
                           "rank 0 over NCCL (TF_RDMA_DEVICES unset): the RDMA gather needs the same device count"),
    "graphs": (lambda c: _follower_change(c, "--graphs", "0"), "rank 1 --graphs 0 but rank 0 TF_DS_GRAPHS=1"),
    "aio": (lambda c: c.rank0_env.pop("TF_DS_ENGRAM_AIO", None) and c.follower_args(1),
            "rank 1 --aio 1 but rank 0 TF_DS_ENGRAM_AIO unset"),
    "drafts": (lambda c: c.args.append("--no-drafts") or c.follower_args(1),
               "rank 1 --drafts 1 but rank 0 runs --no-drafts"),
    "kit": (_other_kit, "has another engram.json than rank 0's TF_DS_KIT"),
    "checkpoint": (_other_checkpoint, "was made from another checkpoint than rank 0's"),
}


@pytest.mark.parametrize("case", list(MISMATCHES))
def test_rank0_refuses_a_follower_that_runs_something_else(pair, case):
    change, reason = MISMATCHES[case]
    args = change(pair)
    pair.start_rank0()
    with open(pair.tmp / "rank1.log", "w") as log:
        pair.followers[1] = subprocess.Popen(args, env=pair.env, stderr=log)
    assert pair.rank0.wait(timeout=15) == 2, pair.log()
    assert pair.followers[1].wait(timeout=15) == 2, pair.log(1)
    assert re.search(r"tensorfold-native\[rank 0\]: refusing follower rank 1: .*" + re.escape(reason), pair.log())
    assert "refusing to start: rank 0 refused rank 1: " in pair.log(1)
    assert reason in pair.log(1)
    assert connect_refused(pair.port)


# --- API -------------------------------------------------------------------------------------


def test_health_and_models(cluster):
    status, body = request(cluster.port, "GET", "/health")
    assert status == 200
    assert body == {
        "ok": True, "backend": "tensorfold", "busy": False, "requests_running": 0,
        "requests_total": body["requests_total"],  # other tests of this module may have run first
        "streams": {"decoding": 0, "prefilling": 0, "max": 2}, "context_length": 4096, "thinking": True,
        "drafts": True,
    }
    assert list(body) == ["ok", "backend", "busy", "requests_running", "requests_total", "streams", "context_length",
                          "thinking", "drafts"]
    status, body = request(cluster.port, "GET", "/v1/models")
    assert status == 200
    assert body["object"] == "list"
    assert [(m["id"], m["object"], m["max_model_len"]) for m in body["data"]] == [("dsv41-sim", "model", 4096)]
    status, body = request(cluster.port, "GET", "/metrics")
    assert status == 200
    assert "tensorfold_slots 2" in body


def test_arithmetic(cluster):
    status, body = chat(cluster.port, "What is 17 * 23?", max_tokens=64, temperature=0)
    assert status == 200
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "17 * 23 = 391"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
    status, body = request(cluster.port, "POST", "/v1/completions", {"prompt": "Q: What is 12345 * 6789? A:"})
    assert status == 200
    assert "12345 * 6789 = 83810205" in body["choices"][0]["text"]


def test_passphrases_found_in_order(cluster):
    words = ["filler"] * 300
    planted = {40: "AMBER-FOX-17", 150: "cobalt_tide", 290: "Zephyr9"}
    for at, word in planted.items():
        words[at] = f"The passphrase: {word}."
    haystack = " ".join(words)
    status, body = request(cluster.port, "POST", "/v1/chat/completions", {
        "messages": [
            {"role": "system", "content": "You answer exactly."},
            {"role": "user", "content": haystack + "\n\nList every passphrase above, in order."},
        ],
        "max_tokens": 64,
    })
    assert status == 200
    assert body["choices"][0]["message"]["content"] == "The passphrases are: AMBER-FOX-17, cobalt_tide, Zephyr9."


def test_counting_is_deterministic_and_honours_max_tokens(cluster):
    status, body = chat(cluster.port, "Say something.", max_tokens=6)
    assert status == 200
    assert body["choices"][0]["message"]["content"] == "counting 1 2 3 4 5"
    assert body["choices"][0]["finish_reason"] == "length"
    status, body = chat(cluster.port, "Count from 1 to 200, separated by spaces.", max_tokens=400)
    assert body["choices"][0]["message"]["content"] == " ".join(str(i) for i in range(1, 201))
    assert body["choices"][0]["finish_reason"] == "stop"


def test_sse_chat_stream_format_usage_and_speed(cluster):
    prompt = " ".join(["word"] * 400)  # 400 tokens: prefill 200 ms at 2000 tok/s, plus 20 ms
    sent = time.monotonic()
    status, events = stream(cluster.port, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": prompt}], "max_tokens": 21,
    })
    assert status == 200
    assert events[-1][1] == "[DONE]"
    chunks = [json.loads(text) for _when, text in events[:-1]]
    content = [c["choices"][0]["delta"].get("content") for c in chunks[:-1]]
    assert "".join(content) == "counting " + " ".join(str(i) for i in range(1, 21))
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "dsv41-sim" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    final = chunks[-1]
    assert final["choices"][0]["finish_reason"] == "length"
    assert final["usage"] == {"prompt_tokens": 400, "completion_tokens": 21, "total_tokens": 421}
    times = [t for t, _text in events[:-2]]
    assert times[0] - sent >= 0.2  # TTFT includes the simulated prefill
    decode = (len(times) - 1) / (times[-1] - times[0])
    assert 60 <= decode <= 130, decode  # SIM_DECODE_TOK_S=100


def test_sse_completion_stream(cluster):
    status, events = stream(cluster.port, "/v1/completions", {"prompt": "What is 6 * 7?", "max_tokens": 16})
    assert status == 200
    assert events[-1][1] == "[DONE]"
    chunks = [json.loads(text) for _when, text in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == "6 * 7 = 42"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] == 5


def test_requests_beyond_parallel_queue_and_greedy_output_is_identical(cluster):
    n_requests = 5
    results = [None] * n_requests
    samples = []
    # a long prompt: 2000 tokens prefill for 1 s at SIM_PREFILL_TOK_S=2000, so /health sees it prefilling
    prompt = "Write a poem. " + " ".join(["word"] * 2000)

    def run(i):
        results[i] = chat(cluster.port, prompt if i == 0 else "Write a poem.", max_tokens=30, temperature=0)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n_requests)]
    started = time.monotonic()
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        samples.append(request(cluster.port, "GET", "/health")[1])
        time.sleep(0.02)
    for t in threads:
        t.join(timeout=10)
    elapsed = time.monotonic() - started

    assert all(r is not None and r[0] == 200 for r in results)
    assert len({r[1]["choices"][0]["message"]["content"] for r in results}) == 1
    active = [s["streams"]["decoding"] + s["streams"]["prefilling"] for s in samples]
    assert max(active) == 2
    assert max(s["streams"]["prefilling"] for s in samples) >= 1
    assert max(s["streams"]["decoding"] for s in samples) >= 1
    assert all(s["streams"]["max"] == 2 for s in samples)
    assert max(s["requests_running"] - a for s, a in zip(samples, active)) >= 2  # queued
    assert max(s["requests_running"] for s in samples) >= 4
    assert any(s["busy"] for s in samples)
    # 4 short requests of ~0.31 s share one slot while the long one takes the other ~1.3 s.
    assert elapsed >= 1.2
    final = request(cluster.port, "GET", "/health")[1]
    assert (final["requests_running"], final["busy"]) == (0, False)
    assert final["requests_total"] >= n_requests


def test_tokenize_takes_vllms_fields(cluster):
    status, body = request(cluster.port, "POST", "/tokenize", {"prompt": "one two  three\nfour"})
    assert status == 200
    assert list(body) == ["count", "max_model_len", "tokens"]
    assert (body["count"], body["max_model_len"], len(body["tokens"])) == (4, 4096, 4)
    assert all(isinstance(t, int) for t in body["tokens"])
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "What is 2 * 3?"}]
    status, body = request(cluster.port, "POST", "/v1/tokenize", {"model": "dsv41-sim", "messages": messages})
    assert status == 200
    _status, reply = request(cluster.port, "POST", "/v1/chat/completions", {"messages": messages, "max_tokens": 8})
    assert body["count"] == reply["usage"]["prompt_tokens"] == 7
    for bad in ({}, {"content": "a b"}, {"model": "dsv41-sim"}, {"prompt": 3}, {"prompt": "a", "messages": []}):
        status, body = request(cluster.port, "POST", "/tokenize", bad)
        assert status == 400, bad
        assert body["error"]["code"] == 400


def test_context_limit(cluster):
    status, body = chat(cluster.port, "hello", max_tokens=5000)
    assert status == 400
    assert "maximum context length is 4096" in body["error"]["message"]


def test_unknown_route_is_404(cluster):
    assert request(cluster.port, "GET", "/v1/nothing")[0] == 404


def test_logs_one_line_per_event(cluster):
    log = cluster.log()
    for needle in ("started", "thinking=true drafts=true max_tokens=32768 temperature=1 top_p=0.95 top_k=20 "
                   "backend=cuda streams=4", "inputs checked: rank cache", "follower joined: rank 1",
                   "HTTP open on", "request done: id=chatcmpl-sim-"):
        assert needle in log
    assert "joined rank 0" in cluster.log(1)


def test_no_thinking_no_drafts_and_max_tokens(engine_bin, tmp_path):
    c = Cluster(engine_bin, tmp_path, extra_args=("--no-thinking", "--no-drafts", "--max-tokens", "7"),
                env={"SIM_LOAD_DELAY_S": "0"})
    c.follower_pairs["--drafts"] = "0"  # the follower mirrors --no-drafts
    try:
        c.start()
        _status, health = request(c.port, "GET", "/health")
        assert (health["thinking"], health["drafts"]) == (False, False)
        assert "thinking=false drafts=false max_tokens=7" in c.log()
        status, body = chat(c.port, "Say something.")  # no max_tokens: the server's --max-tokens
        assert status == 200
        assert body["choices"][0]["message"]["content"] == "counting 1 2 3 4 5 6"
        assert body["choices"][0]["finish_reason"] == "length"
    finally:
        c.stop()


def _raw(port, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read().decode()
    finally:
        conn.close()


def test_api_key(engine_bin, tmp_path):
    key_file = tmp_path / "api-key"
    key_file.write_text("# lab keys\nsk-lab-123\nci: sk-ci-9\n")
    key_file.chmod(0o600)
    c = Cluster(engine_bin, tmp_path, extra_args=("--api-key-file", str(key_file)), env={"SIM_LOAD_DELAY_S": "0"})
    try:
        c.start()
        assert request(c.port, "GET", "/health") == (200, {"status": "ok"})
        assert request(c.port, "GET", "/v1/models")[0] == 401
        assert request(c.port, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert chat(c.port, "What is 2 * 3?")[0] == 401
        status, headers, _text = _raw(c.port, "POST", "/tokenize", {"prompt": "a b"})
        assert (status, headers.get("WWW-Authenticate")) == (401, "Bearer")
        assert _raw(c.port, "GET", "/metrics")[0] == 401
        auth = {"Authorization": "Bearer sk-lab-123"}
        assert request(c.port, "GET", "/v1/models", headers=auth)[0] == 200
        assert request(c.port, "GET", "/metrics", headers=auth)[0] == 200
        status, body = request(c.port, "POST", "/tokenize", {"prompt": "a b"}, headers=auth)
        assert (status, body["count"], body["max_model_len"]) == (200, 2, 4096)
        status, body = request(c.port, "POST", "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "What is 2 * 3?"}]},
                               headers={"Authorization": "Bearer sk-ci-9"})
        assert status == 200
        assert body["choices"][0]["message"]["content"] == "2 * 3 = 6"
    finally:
        c.stop()


# --- life cycle ------------------------------------------------------------------------------


def test_http_opens_only_after_loading_and_the_followers_joined(engine_bin, tmp_path):
    """Each rank loads its weights, then they link (model.zig @09bc7166: `weights.load`, then `prompt2d.Fan.open`):
    rank 0 listens for its followers once loaded, a follower connects once loaded; HTTP opens after the link."""
    c = Cluster(engine_bin, tmp_path)
    try:
        c.start_rank0()
        time.sleep(1.5)  # longer than SIM_LOAD_DELAY_S: loaded, still refused without the follower
        assert c.rank0.poll() is None
        assert connect_refused(c.port)
        started_at = time.monotonic()
        c.start_follower(1)
        c.wait_ready()
        assert time.monotonic() - started_at >= 0.9  # the follower's own SIM_LOAD_DELAY_S=1 before it connects
        log = c.log()
        assert log.index("loading weights") < log.index("follower joined"), log
        assert "loading weights (simulated: 1000 ms), then connecting to rank 0" in c.log(1)
        assert request(c.port, "GET", "/health")[0] == 200

        # A lost follower: /health 503 at once, then rank 0 exits non-zero after the grace period.
        c.followers[1].send_signal(signal.SIGKILL)
        c.followers[1].wait(timeout=10)
        killed_at = time.monotonic()

        def unhealthy():
            status, body = request(c.port, "GET", "/health")
            return status == 503 and body["ok"] is False and "rank 1" in body["error"]

        assert wait_until(unhealthy, 3)
        assert c.rank0.wait(timeout=10) == 1
        assert time.monotonic() - killed_at >= 1.0  # SIM_FOLLOWER_GRACE_S=1.5
        assert "follower rank 1 lost" in c.log()
    finally:
        c.stop()


def test_follower_waits_for_rank0_and_exits_when_it_goes_away(engine_bin, tmp_path):
    c = Cluster(engine_bin, tmp_path, env={"SIM_LOAD_DELAY_S": "0"})
    try:
        c.start_follower(1)  # the recipes start followers first
        time.sleep(0.6)
        assert c.followers[1].poll() is None
        c.start_rank0()
        c.wait_ready()
        assert wait_until(lambda: "rank 0 is serving" in c.log(1), 5)
        c.rank0.send_signal(signal.SIGKILL)
        assert c.followers[1].wait(timeout=10) == 1
        assert "rank 0 went away" in c.log(1)
    finally:
        c.stop()


# --- recipe patch ----------------------------------------------------------------------------


def test_recipe_patch_applies_and_changes_the_default_name(engine_bin, tmp_path):
    patches = sorted((ENGINE / "patches").glob("0001-*.patch"))
    assert len(patches) == 1
    tree = tmp_path / "tree"
    shutil.copytree(ENGINE, tree, ignore=shutil.ignore_patterns(".zig-cache", "zig-out"))
    done = subprocess.run(["git", "apply", "--verbose", str(patches[0])], cwd=tree, capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    bin_dir = build(tree, tmp_path / "out")
    version = subprocess.run([str(native_bin(bin_dir)), "--version"], capture_output=True, text=True,
                             timeout=10, check=False).stdout
    assert "patches=0001-dsv41-served-name" in version

    c = Cluster(bin_dir, tmp_path, env={"SIM_LOAD_DELAY_S": "0"}, name=None)
    try:
        c.start()
        assert request(c.port, "GET", "/v1/models")[1]["data"][0]["id"] == "deepseek-v4.1-flash"
        assert "patches=0001-dsv41-served-name" in c.log()
    finally:
        c.stop()
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(tree)


def test_a_rank_that_comes_back_before_rank_0_saw_it_go_is_told_to_retry(cluster):
    """A node that reboots within the heartbeat timeout finds its rank still joined: rank 0 turns it
    away for now (RETRY) and the follower exits 1, so systemd starts it again (exit 2 would stop it)."""
    again = cluster.run_follower(1)
    assert again.returncode == 1, again.stderr
    assert "rank 0 turned rank 1 away for now: rank 1 already joined" in again.stderr
    assert cluster.rank0.poll() is None
    health = request(cluster.port, "GET", "/health")
    assert health[0] == 200


def test_a_follower_retries_rank_0_for_its_window_after_loading_then_fails(engine_bin, tmp_path):
    """The real follower's window: 300 s after its own load (prompt2d.zig @ea990ff7 `Link.connect(io, ip, port + rank -
    1, 300)`; link.zig @03873553: then `error.ConnectFailed`, `error: ConnectFailed` from main, exit 1). Shortened
    here with SIM_CONNECT_WINDOW_S; 300 is the default."""
    c = Cluster(engine_bin, tmp_path, env={"SIM_LOAD_DELAY_S": "0.5", "SIM_CONNECT_WINDOW_S": "1"})
    began = time.monotonic()
    done = c.run_follower(1, timeout=20)
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - began >= 1.4  # its load, then its whole window
    assert done.stderr.rstrip().endswith("error: ConnectFailed"), done.stderr
    assert "did not answer within 1 s" in done.stderr
