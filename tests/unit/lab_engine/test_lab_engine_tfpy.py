# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab engine's `tensorfold serve --tp 2` personality (lab/engine/src/tensorfold_py.zig): TensorFold's Python
engine as sfxnz/DeepSeek-V4.1-Flash-EXL3-TensorFold-2x-DGX-Spark run.sh starts it, rank 1 first, then rank 0;
/health with "ok": true and context_length, the OpenAI routes, TENSORFOLD_API_KEY, and each refusal."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.labengine import HOST, SERVE_FAST, free_port, make_engram, make_model, request, stream, wait_until
from tests.labengine import health_ok as up
from tests.labengine import stop_procs as stop

FAST = SERVE_FAST
NAME = "deepseek-ai/DeepSeek-V4.1-Flash"


@pytest.fixture
def bins(container_engine_bin):
    """OUT/bin with vllm and tensorfold (`zig build containers`, built once per session: tests/unit/conftest.py)."""
    return container_engine_bin


def serve_args(model, rank, master_port, http_port, extra=()):
    """run.sh serve_args for one rank (rank 0 adds --host, --port and --max-tokens)."""
    args = [str(model), "--tp", "2", "--rank", str(rank), "--master", HOST, "--master-port", str(master_port),
            "--name", NAME, "--context", "65538", "--mtp-drafts", "5", "--top-p", "1.0", "--no-update-check",
            "--no-thinking"]
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


def test_rank1_then_rank0_serve(bins, tmp_path):
    model = make_model(tmp_path / "model")
    mport, hport = free_port(), free_port()
    rank1 = start(bins, serve_args(model, 1, mport, 0))
    rank0 = start(bins, serve_args(model, 0, mport, hport))
    try:
        assert wait_until(lambda: up(hport), 15), rank0.stderr.read() if rank0.poll() is not None else "no /health"
        status, health = request(hport, "GET", "/health")
        assert status == 200
        assert (health["ok"], health["backend"], health["context_length"]) == (True, "tensorfold", 65538)
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
    refused(run(bins, [*base, "--port", "x"]), "argument --port: invalid int value: 'x'")
    refused(run(bins, ["--tp", "2"]), "the following arguments are required: model")
    refused(run(bins, [model, "--tp", "2", "--rank", "1"]),
            "--tp 2 needs --master: rank 0's address on the link between the two machines", 1)
    refused(run(bins, [model, "--rank", "1"]), "--rank 1 needs --tp 2", 1)
    refused(run(bins, [*base, "--mtp-drafts", "6"]), "--mtp-drafts 6: DSpark drafts at most 5 tokens a round")
    windowed = make_model(tmp_path / "windowed")
    config = json.loads((windowed / "config.json").read_text())
    (windowed / "config.json").write_text(json.dumps(dict(config, max_position_embeddings=4096)))
    refused(run(bins, [windowed, "--context", "8192"]),
            "tensorfold: --context 8192 exceeds this model's 4096-token window", 1)
    refused(run(bins, base, env={"TF_DSV41_ENGRAM_DIR": str(tmp_path / "engram")}),
            "TF_DSV41_ENGRAM_DIR")
    (model / "tokenizer.json").unlink()
    refused(run(bins, base), "model file")
