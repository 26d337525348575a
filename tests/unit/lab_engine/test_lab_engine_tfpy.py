# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab engine's `tensorfold serve --tp 2` personality (lab/engine/src/tensorfold_py.zig): TensorFold's Python
engine as sfxnz/DeepSeek-V4.1-Flash-EXL3-TensorFold-2x-DGX-Spark run.sh starts it, rank 1 first, then rank 0;
/health with "ok": true and context_length, the OpenAI routes, TENSORFOLD_API_KEY, and each refusal."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.labengine import HOST, SERVE_FAST, Cluster, free_port, make_engram, make_model, request, stream, wait_until
from tests.labengine import health_ok as up
from tests.labengine import stop_procs as stop

FAST = SERVE_FAST
NAME = "deepseek-ai/DeepSeek-V4.1-Flash"


@pytest.fixture
def bins(container_engine_bin):
    """OUT/bin with vllm and tensorfold (`zig build containers`, built once per session: tests/unit/conftest.py)."""
    return container_engine_bin


def serve_args(model, rank, master_port, http_port, extra=()):
    """sfxnz run.sh @38a06077 serve_args for one rank (rank 0 adds --host, --port and --max-tokens)."""
    args = [str(model), "--tp", "2", "--rank", str(rank), "--master", HOST, "--master-port", str(master_port),
            "--name", NAME, "--context", "65538", "--parallel", "4", "--mtp-drafts", "5", "--top-p", "1.0",
            "--no-update-check", "--decode-share", "0.5", "--mtp-confidence", "0.15", "--no-thinking"]
    if rank == 0:
        args += ["--host", HOST, "--port", str(http_port), "--max-tokens", "4096"]
    return args + list(extra)


def run(bins, args, env=None, timeout=15):
    return subprocess.run([str(bins / "tensorfold"), "serve", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **FAST, **(env or {})}, timeout=timeout, check=False)


def start(bins, args, env=None):
    return subprocess.Popen([str(bins / "tensorfold"), "serve", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **FAST, **(env or {})})


def refused(done, text, status=2):
    assert done.returncode == status, (done.returncode, done.stderr)
    assert text in done.stderr, done.stderr


def start_pair(bins, tmp_path):
    """Rank 1, then rank 0, by run.sh's lines; returns (rank0, rank1, HTTP port) once rank 0 answers /health."""
    model = make_model(tmp_path / "model")
    mport, hport = free_port(), free_port()
    rank1 = start(bins, serve_args(model, 1, mport, 0))
    rank0 = start(bins, serve_args(model, 0, mport, hport))
    if not wait_until(lambda: up(hport), 15):
        stop(rank0, rank1)
        pytest.fail(rank0.stderr.read() if rank0.poll() is not None else "no /health")
    return rank0, rank1, hport


def test_rank1_then_rank0_serve(bins, tmp_path):
    rank0, rank1, hport = start_pair(bins, tmp_path)
    try:
        status, health = request(hport, "GET", "/health")
        assert status == 200
        assert (health["ok"], health["backend"], health["context_length"]) == (True, "tensorfold", 65538)
        assert health["streams"]["max"] == 4
        assert health["thinking"] is False and health["drafts"] is True
        status, models = request(hport, "GET", "/v1/models")
        assert [m["id"] for m in models["data"]] == [NAME]
        body = {"model": NAME, "max_tokens": 6, "messages": [{"role": "user", "content": "What is 17*19?"}]}
        status, reply = request(hport, "POST", "/v1/chat/completions", body)
        assert status == 200 and reply["choices"][0]["message"]["content"]
        status, events = stream(hport, "/v1/chat/completions", body)
        assert status == 200 and events[-1][1] == "[DONE]"
        assert rank1.poll() is None
    finally:
        stop(rank0, rank1)


def test_sigterm_is_a_graceful_exit(bins, tmp_path):
    """As PID 1 of its container the kernel drops a signal the program does not handle: `podman stop` waited its whole
    --time (30 s for the TP2 first start) and killed. The real engine's server exits on SIGTERM; so does the lab's,
    with status 0 (here, as no PID 1, the old program died of the signal: returncode -15)."""
    rank0, rank1, _hport = start_pair(bins, tmp_path)
    try:
        rank0.terminate()
        rank1.terminate()  # both at once: a rank left alone exits 1 when it loses the other
        assert (rank0.wait(timeout=10), rank1.wait(timeout=10)) == (0, 0)
    finally:
        stop(rank0, rank1)


def test_rank0_takes_the_flags_the_real_parser_takes(bins, tmp_path):
    """ashhart/TensorFold src/tensorfold/cli_args.py @0b3f3bb: `--reasoning-effort` chooses from low, medium, high and
    xhigh; `--min-p`, `--vision-max-images`, `--prefill-fp8`/`--no-prefill-fp8` and `--precision` are its flags too."""
    model = make_model(tmp_path / "model")
    mport, hport = free_port(), free_port()
    rank1 = start(bins, serve_args(model, 1, mport, 0))
    rank0 = start(bins, [*serve_args(model, 0, mport, hport), "--reasoning-effort", "high", "--min-p", "0.05",
                         "--vision-max-images", "2", "--no-prefill-fp8", "--precision", "full"])
    try:
        assert wait_until(lambda: up(hport), 15), rank0.stderr.read() if rank0.poll() is not None else "no /health"
    finally:
        stop(rank0, rank1)


def test_one_rank_with_the_api_key(bins, tmp_path):
    model = make_model(tmp_path / "model")
    hport = free_port()
    proc = start(bins, [model, "--port", str(hport), "--host", HOST, "--cont", "4096"],
                 env={"TF_API_KEY": "sk-lab", "TF_DSV41_ENGRAM_DIR": str(make_engram(tmp_path / "engram"))})
    try:
        assert wait_until(lambda: up(hport), 10)
        assert request(hport, "GET", "/health") == (200, {"status": "ok"})  # open, and only this, with a key
        assert request(hport, "GET", "/v1/models")[0] == 401
        status, models = request(hport, "GET", "/v1/models", headers={"Authorization": "Bearer sk-lab"})
        assert status == 200 and models["data"][0]["id"] == "model" and models["data"][0]["max_model_len"] == 4096
    finally:
        stop(proc)


def test_rank0_fails_clearly_without_rank1(bins, tmp_path):
    model = make_model(tmp_path / "model")
    done = run(bins, serve_args(model, 0, free_port(), free_port()))
    assert done.returncode == 1
    assert "rank 1 did not join rank 0" in done.stderr and "start rank 1 first" in done.stderr


def test_rank1_with_other_flags_is_refused(bins, tmp_path):
    model = make_model(tmp_path / "model")
    mport = free_port()
    rank0 = start(bins, serve_args(model, 0, mport, free_port()), env={"SIM_RENDEZVOUS_TIMEOUT_S": "10"})
    try:
        done = run(bins, serve_args(model, 1, mport, 0, ["--context", "4096"]))
        refused(done, "rank 0 refused rank 1: rank 1 was started with other serve flags")
        assert rank0.wait(timeout=10) == 2
    finally:
        stop(rank0)


def test_refusals(bins, tmp_path):
    model = make_model(tmp_path / "model")
    base = serve_args(model, 0, free_port(), free_port())
    refused(run(bins, [*base, "--bogus", "1"]), "tensorfold serve: error: unrecognized arguments: --bogus 1")
    # argparse names the matches in the parser's order (CLI: --max-tokens, --max-snapshots, then --master)
    refused(run(bins, [*base, "--ma", "1"]), "tensorfold serve: error: ambiguous option: --ma could match "
                                             "--max-tokens, --max-snapshots, --master, --master-port")
    refused(run(bins, [*base, "--tp", "4"]), "argument --tp: invalid choice: 4 (choose from 1, 2)")
    refused(run(bins, [*base, "--kv-dtype", "fp8"]), "argument --kv-dtype: invalid choice: 'fp8'")
    # ashhart/TensorFold src/tensorfold/cli_args.py @0b3f3bb: choices=("low", "medium", "high", "xhigh")
    refused(run(bins, [*base, "--reasoning-effort", "max"]),
            "argument --reasoning-effort: invalid choice: 'max' (choose from low, medium, high, xhigh)")
    refused(run(bins, [*base, "--precision", "half"]), "argument --precision: invalid choice: 'half'")
    refused(run(bins, [*base, "--port", "x"]), "argument --port: invalid int value: 'x'")
    refused(run(bins, ["--tp", "2"]), "the following arguments are required: model")
    refused(run(bins, [model, "--tp", "2", "--rank", "1"]),
            "--tp 2 needs --master: rank 0's address on the link between the two machines", 1)
    refused(run(bins, [model, "--rank", "1"]), "--rank 1 needs --tp 2", 1)
    refused(run(bins, [*base, "--mtp-drafts", "6"]), "--mtp-drafts 6: DSpark drafts at most 5 tokens a round")
    # sfxnz/TensorFold cuda/lanes.py @2258b00d: `if not 0 < slots <= MAX_LANES: raise ValueError(f"lanes: {slots}
    # slots, 1 to {MAX_LANES}")`; run.sh @38a06077: "the family decodes at most 4 requests together (MAX_LANES)"
    refused(run(bins, [*base, "--parallel", "5"]), "tensorfold: lanes: 5 slots, 1 to 4", 1)
    refused(run(bins, [*base, "--parallel", "0"]), "tensorfold: lanes: 0 slots, 1 to 4", 1)
    windowed = make_model(tmp_path / "windowed")
    config = json.loads((windowed / "config.json").read_text())
    (windowed / "config.json").write_text(json.dumps(dict(config, max_position_embeddings=4096)))
    refused(run(bins, [windowed, "--context", "8192"]),
            "tensorfold: --context 8192 exceeds this model's 4096-token window", 1)
    refused(run(bins, base, env={"TF_DSV41_ENGRAM_DIR": str(tmp_path / "engram")}),
            "TF_DSV41_ENGRAM_DIR")
    (model / "tokenizer.json").unlink()
    refused(run(bins, base), "model file")


def first_start_args(model, rank, master_port, http_port):
    """bertholomus/TensorFold tools/dsv41-zig/build_inputs.sh @5e10970a1e2372313589641587bd6da85f070f05's line:
    `tensorfold serve /model --tp 2 --rank R --master HEAD --host 127.0.0.1 --port PORT --context 1048576 --vision
    --parallel 4 --mtp-drafts 5` (plus --master-port: two lab ranks on one machine need a free one)."""
    return [str(model), "--tp", "2", "--rank", str(rank), "--master", HOST, "--master-port", str(master_port),
            "--host", HOST, "--port", str(http_port), "--context", "1048576", "--vision", "--parallel", "4",
            "--mtp-drafts", "5"]


def models_ok(port):
    """build_inputs.sh's readiness: rank 0 answers /v1/models with 200."""
    try:
        return request(port, "GET", "/v1/models")[0] == 200
    except OSError:
        return False


def first_start(bins, model, engram, caches):
    """Both ranks as build_inputs.sh starts them (its CACHE as $HOME/.cache, TF_DS_RANK_CACHE=$HOME/.cache/tf-ds-rank,
    TF_DS_ENGRAM), rank 0 polled on /v1/models until 200, then both stopped."""
    mport, hport = free_port(), free_port()
    procs = []
    try:
        for rank in (0, 1):
            home = caches[rank].parent
            env = {"HOME": str(home), "TF_DS_RANK_CACHE": str(caches[rank] / "tf-ds-rank"), "TF_DS_ENGRAM": str(engram)}
            procs.append(start(bins, first_start_args(model, rank, mport, hport), env=env))
        assert wait_until(lambda: models_ok(hport), 20), \
            procs[0].stderr.read() if procs[0].poll() is not None else "no /v1/models"
    finally:
        stop(*procs)


def test_first_start_writes_the_zig_engine_inputs(bins, engine_bin, tmp_path):
    """TP2's inputs the way its sources make them: the Python engine's first start writes CACHE/tf-ds-rank/ and
    CACHE/dsv41_token_map.json on each node, and the Zig ranks (tensorfold-native, tf-dsv41-lanes) serve from them."""
    cluster = Cluster(engine_bin, tmp_path / "zig", context=8192)
    caches = {rank: tmp_path / f"node{rank}" / "root" / ".cache" for rank in (0, 1)}
    first_start(bins, cluster.model, cluster.engram, caches)
    for rank, cache in caches.items():
        files = sorted(p.name for p in (cache / "tf-ds-rank").iterdir())
        assert len(files) == 1 and files[0].startswith(f"rank{rank}of2-") and files[0].endswith(".bin"), files
        doc = json.loads((cache / "dsv41_token_map.json").read_text())
        assert doc["format"] == "sparkfold-lab-token-map" and len(doc["map"]) == doc["vocab_size"]
        # The Zig ranks read only what the first start wrote.
        node = cluster.nodes[rank]
        shutil.rmtree(node / "rank-cache")
        (node / "dsv41_token_map.json").unlink()
        shutil.copytree(cache / "tf-ds-rank", node / "rank-cache")
        shutil.copy(cache / "dsv41_token_map.json", node / "dsv41_token_map.json")
    stamps = {rank: (caches[rank] / "tf-ds-rank").stat().st_mtime_ns for rank in caches}
    try:
        cluster.start()
        assert up(cluster.port)
    finally:
        cluster.stop()
    # A second start reads the inputs it wrote (nothing is written again).
    first_start(bins, cluster.model, cluster.engram, caches)
    assert {rank: (caches[rank] / "tf-ds-rank").stat().st_mtime_ns for rank in caches} == stamps


def test_first_start_refuses_a_rank_cache_of_another_checkpoint(bins, tmp_path):
    model = make_model(tmp_path / "model")
    engram = make_engram(tmp_path / "engram")
    cache = tmp_path / "root" / ".cache" / "tf-ds-rank"
    cache.mkdir(parents=True)
    (cache / "rank1of2-00000000000000000000.bin").write_bytes(b"\0" * 32)
    env = {"HOME": str(tmp_path / "root"), "TF_DS_RANK_CACHE": str(cache), "TF_DS_ENGRAM": str(engram)}
    refused(run(bins, first_start_args(model, 1, free_port(), 0), env=env),
            "holds rank1of2-00000000000000000000.bin, a rank cache of another checkpoint for rank 1 of 2")


def test_first_start_refuses_an_engram_folder_without_the_shards(bins, tmp_path):
    model = make_model(tmp_path / "model")
    engram = make_engram(tmp_path / "engram", skip="model-00048-of-00048.safetensors")
    env = {"HOME": str(tmp_path / "root"), "TF_DS_RANK_CACHE": str(tmp_path / "cache"), "TF_DS_ENGRAM": str(engram)}
    refused(run(bins, first_start_args(model, 1, free_port(), 0), env=env), "model-00048-of-00048.safetensors")
