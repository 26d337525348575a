# SPDX-License-Identifier: GPL-3.0-or-later
"""Accuracy of the benchmark's timings (sparkfold.cluster.engine_bench) against the lab engine.

Starts the lab engine (lab/engine, a TensorFold SIMULATOR; harness tests/labengine.py) with a known
decode rate and TTFT, runs the benchmark's concurrency point (module_utils/engine_bench.py) at 1 to 16
streams (all within the engine's slots, so nothing queues) and prints, per stream count, the measured
per-stream decode tok/s against the configured rate and the TTFT against the configured delay
(prompt tokens / SIM_PREFILL_TOK_S + SIM_TTFT_BASE_MS). A row passes when EVERY stream's decode tok/s
is within 2% of the rate and EVERY stream's TTFT is within the delay + 50 ms. Exit status 1 when a row
fails. Figures, not a test.

    .venv/bin/python benchmarks/bench_accuracy.py
    .venv/bin/python benchmarks/bench_accuracy.py --rates 50,200 --streams 1,2,4,8,16 --tokens 128
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / ".collections"))

# Run as a script from anywhere: the repository root and .collections must be on sys.path before
# these imports, hence their place after the path set-up (E402).
from ansible_collections.sparkfold.cluster.plugins.module_utils import engine_bench as eb  # noqa: E402
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import EngineClient  # noqa: E402

from tests import labengine  # noqa: E402

DECODE_TOLERANCE = 0.02
TTFT_SLACK_MS = 50.0


def measure(bin_dir, rate, base_ms, prefill, streams_list, tokens, slots):
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-accuracy-"))
    env = {"SIM_DECODE_TOK_S": str(rate), "SIM_TTFT_BASE_MS": str(base_ms), "SIM_PREFILL_TOK_S": str(prefill),
           "SIM_LOAD_DELAY_S": "0"}
    cluster = labengine.Cluster(bin_dir, tmp, world=2, parallel=slots, context=65536, env=env).start()
    rows = []
    try:
        client = EngineClient(f"http://127.0.0.1:{cluster.port}", timeout=60)
        for streams in streams_list:
            point, raw = point_with_streams(client, streams, tokens)
            prompt_tokens = raw[0]["prompt_tokens"]
            delay_ms = prompt_tokens / prefill * 1000.0 + base_ms
            rates = [r["decode_tok_s"] for r in raw]
            ttfts = [r["ttft_s"] * 1000.0 for r in raw]
            worst = max(abs(x - rate) / rate for x in rates)
            ok = (point["completed"] == streams and worst <= DECODE_TOLERANCE
                  and max(ttfts) <= delay_ms + TTFT_SLACK_MS and min(ttfts) >= delay_ms - 5)
            rows.append({"rate": rate, "streams": streams, "median": point["per_stream_tok_s"]["median"],
                         "min": min(rates), "max": max(rates), "worst_pct": 100 * worst,
                         "ttft_med": point["ttft_ms"]["median"], "ttft_min": min(ttfts), "ttft_max": max(ttfts),
                         "delay": delay_ms, "aggregate": point["aggregate_tok_s"], "ok": ok,
                         "completed": point["completed"]})
    finally:
        cluster.stop()
    return rows


def point_with_streams(client, streams, tokens):
    """run_concurrency_point, with each stream's own figures too."""
    raw = []
    point = eb.run_concurrency_point(client, streams, eb.PROMPTS["prose"], tokens, raw=raw)
    return point, raw


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--rates", default="50,200", help="decode rates (tok/s per stream) to configure")
    parser.add_argument("--streams", default="1,2,4,8,16")
    parser.add_argument("--tokens", type=int, default=128, help="max_tokens of each stream")
    parser.add_argument("--ttft-base-ms", type=float, default=150.0, help="SIM_TTFT_BASE_MS")
    parser.add_argument("--prefill", type=float, default=2000.0, help="SIM_PREFILL_TOK_S")
    parser.add_argument("--optimize", default="ReleaseSafe", help="lab engine build mode")
    args = parser.parse_args()
    streams_list = [int(s) for s in args.streams.split(",")]
    prefix = pathlib.Path(tempfile.mkdtemp(prefix="bench-engine-"))
    print(f"building the lab engine ({args.optimize}) ...", flush=True)
    bin_dir = labengine.build(labengine.ENGINE, prefix, optimize=args.optimize)
    print(f"machine: {os.cpu_count()} CPUs; {args.tokens} tokens per stream; engine slots = {max(streams_list)} "
          f"(no queueing); TTFT base {args.ttft_base_ms:g} ms, prefill {args.prefill:g} tok/s\n")
    header = (f"{'rate':>6} {'streams':>7} {'decode median':>13} {'min - max':>17} {'worst':>6} "
              f"{'TTFT med':>8} {'TTFT min - max':>15} {'delay':>7} {'bound':>7} {'aggregate':>9}  result")
    print(header)
    print("-" * len(header))
    failed = 0
    started = time.monotonic()
    for rate in (float(r) for r in args.rates.split(",")):
        for row in measure(bin_dir, rate, args.ttft_base_ms, args.prefill, streams_list, args.tokens,
                           max(streams_list)):
            failed += not row["ok"]
            print(f"{row['rate']:6.0f} {row['streams']:7d} {row['median']:13.2f} "
                  f"{row['min']:8.2f} - {row['max']:6.2f} {row['worst_pct']:5.2f}% "
                  f"{row['ttft_med']:8.1f} {row['ttft_min']:6.1f} - {row['ttft_max']:6.1f} {row['delay']:7.1f} "
                  f"{row['delay'] + TTFT_SLACK_MS:7.1f} {row['aggregate']:9.1f}  "
                  f"{'PASS' if row['ok'] else 'FAIL'}", flush=True)
    print(f"\ndecode: every stream within {DECODE_TOLERANCE:.0%} of the configured rate; TTFT: every stream within "
          f"[delay - 5 ms, delay + {TTFT_SLACK_MS:g} ms]; {time.monotonic() - started:.0f} s")
    print("all rows PASS" if not failed else f"{failed} row(s) FAIL")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
