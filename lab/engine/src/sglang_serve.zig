//! `python3 /opt/dsv41/boot.py run` and `python3 -m sglang.launch_server`: the lab engine SIMULATOR in the
//! personality of the SGLang overlay image of the switchless-ring recipe (MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks,
//! roles/recipe/recipes/dsv41-flash-tp4-ring-sglang.yml): boot.py turns the container's environment into a
//! `sglang.launch_server` line, which the lab then checks as SGLang's argparse and check_server_args would, and runs:
//! the workers (node rank > 0) join rank 0 at --dist-init-addr, rank 0 serves the OpenAI API. THIS IS NOT SGLang:
//! nothing is loaded; replies are the lab's deterministic text.
//!
//! Sources (each rule below names one):
//!   BOOT     boot.py, the image's ENTRYPOINT (MiaAI Dockerfile @1ce7bee: ["python3", "-u", "/opt/dsv41/boot.py"],
//!            CMD ["run"]), as the fork 1890peachypeachy/DeepSeek-v4.1-Flash-DGX-Sparks boot.py @79f656a holds it
//!   ARGS     sgl-project/sglang python/sglang/srt/server_args.py (ServerArgs.check_server_args: "tp_size must be
//!            divisible by number of nodes"; the stored version the search index holds, commit not pinned)
//!   RING     MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks docs/switchless-ring.md @33a595c (why stock NCCL fails on a
//!            ring, the pip NCCL path the patched library is mounted over, DeepEP's duplicate-runtime abort)
//!
//! Refusals:
//!   - argparse's (usage `launch_server.py [-h] ...`), `launch_server.py: error: unrecognized arguments: ...`,
//!     and `argument --attention-backend: invalid choice: 'x' (choose from ...)` for the choice lists below
//!     (--load-format, --attention-backend, --moe-runner-backend, --fp8-gemm-backend, from server_args.py @001067ff;
//!     --tool-call-parser from function_call/parser_names.py @43a85424, --reasoning-parser from
//!     parser/reasoning_parser_names.py @7dda59b2 plus deepseek-v41), exit 2. The lab knows the flags boot.py builds and the recipe's EXTRA_SGLANG_ARGS (real SGLang has many
//!     more); abbreviations are expanded as argparse does (boot.py passes `--tp`, an abbreviation of --tp-size).
//!   - boot.py's (AssertionError, exit 1): "OFFLOAD_MODE must be nvme or ram", "Context must be 4096 through the
//!     model limit 1048576", "missing MODEL/config.json" (SKIP_PREPARE=1), "DIST_INIT_ADDR is required when
//!     NNODES>1".
//!   - SGLang's (ARGS, exit 1): "AssertionError: tp_size must be divisible by number of nodes".
//!   - NCCL's on a ring (RING, exit 1): with NCCL_SWITCHLESS_RING_ONLY=1 the library at the pip path
//!     (SIM_NCCL_PIP_SO, default /opt/sglang/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2: the path the
//!     recipe mounts the patched library over) must carry the marker SWITCHLESS_RING_ONLY, else the boot dies in
//!     ncclTransportTreeConnect ("NCCL error: unhandled system error"; stock NCCL ignores the variable); so does a
//!     ring (SIM_FABRIC_TOPOLOGY=ring, the lab's word for the cabling) without NCCL_SWITCHLESS_RING_ONLY=1. A second
//!     NCCL on LD_LIBRARY_PATH or LD_PRELOAD: DeepEP's "AssertionError: Duplicate NCCL runtime found".
//!   - lab rules (exit 2): --node-rank at or above --nnodes, --nnodes > 1 without --dist-init-addr HOST:PORT, more
//!     ranks a node than SIM_GPUS_PER_NODE (1: a Spark has one GPU), the model directory (as the native lab engine
//!     checks it), a worker whose shared engine arguments differ from rank 0's (SGLang would hang in the collectives).
//!
//! Life cycle: rank 0 listens on --dist-init-addr (torch's store of SGLang's process group lives on node 0; the lab's
//! rendezvous is fabric.zig's, plain TCP) and waits SIM_RENDEZVOUS_TIMEOUT_S (600) for the nnodes-1 workers, else
//! exits 1 with the store's words; a worker retries until rank 0 listens. Then SIM_LOAD_DELAY_S of "loading", then
//! HTTP: /health (empty 200, 503 once a worker is lost), /v1/models, /v1/chat/completions, /v1/completions,
//! /metrics. --api-key (boot.py passes API_KEY as it) makes every /v1 route need `Authorization: Bearer <key>`.
//! Started as `boot.py run`, rank 0 then prints BOOT's banner `Ready: API on port PORT (rank 0), no API key.`
//! (`. Key is in /state/api-key.` with a key), the line MiaAI's start.sh waits for; BOOT prints it after its smoke
//! test and warm-up, which the lab does not simulate.

const std = @import("std");
const common = @import("common.zig");
const model = @import("model.zig");
const fabric = @import("fabric.zig");
const head = @import("head.zig");
const http = @import("http.zig");
const argp = @import("argp.zig");

const log = common.log;
const refuse = common.refuse;

const prog = "launch_server.py";
const usage =
    \\usage: launch_server.py [-h] --model-path MODEL_PATH [options]
    \\(SGLang SIMULATOR for the sparkfold lab: the flags of the SGLang ring recipe; see lab/engine/README.md)
    \\
;
const pip_nccl = "/opt/sglang/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2";
// The choice lists of SGLang's parser (SRV = sgl-project/sglang python/sglang/srt/server_args.py
// @001067fffe33427bee0ed2f007fb7551a1d76b44, the stored version nearest the image; the recipe's image is the moving tag
// lmsysorg/sglang:dev-dsv41, whose commit no source names: UNVERIFIED pin), each in SRV's order, as argparse lists it:
// `--load-format` LOAD_FORMAT_CHOICES, `--attention-backend` ATTENTION_BACKEND_CHOICES (`attention_backend: A[...,
// Arg(choices=ATTENTION_BACKEND_CHOICES)]`), `--moe-runner-backend` MOE_RUNNER_BACKEND_CHOICES, `--fp8-gemm-backend`
// FP8_GEMM_RUNNER_BACKEND_CHOICES (`cli_name="--fp8-gemm-backend", choices=FP8_GEMM_RUNNER_BACKEND_CHOICES`). A name
// outside them is argparse's `argument --attention-backend: invalid choice: 'x' (choose from ...)`, exit 2.
const load_formats = [_][]const u8{
    "auto",        "pt",             "safetensors", "npcache", "dummy",    "sharded_state", "presharded",      "gguf",
    "expert_pack", "bitsandbytes",   "mistral",     "layered", "flash_rl", "remote",        "remote_instance", "fastsafetensors",
    "private",     "runai_streamer",
};
pub const attention_backends = [_][]const u8{
    "triton",            "torch_native",       "flex_attention", "dsa",        "nsa",                   "dsv4",
    "compressed",        "cutlass_mla",        "fa3",            "fa4",        "flashinfer",            "flashmla",
    "trtllm_mla",        "cutedsl_mla",        "tokenspeed_mla", "trtllm_mha", "dual_chunk_flash_attn", "hpc_ops",
    "minicpm_flashattn", "minicpm_flashinfer", "aiter",          "wave",       "intel_amx",             "ascend",
    "intel_xpu",
};
pub const moe_runner_backends = [_][]const u8{
    "auto",                    "deep_gemm",                "triton",             "triton_kernel",    "flashinfer_trtllm",
    "experimental_sgl_trtllm", "flashinfer_trtllm_routed", "flashinfer_cutlass", "flashinfer_mxfp4", "flashinfer_cutedsl",
    "cutlass",                 "aiter",                    "marlin",             "humming",          "experimental_sgl_marlin",
    "hpc_ops",                 "megamoe",
};
pub const fp8_gemm_backends = [_][]const u8{
    "auto", "deep_gemm", "flashinfer_trtllm", "flashinfer_cutlass", "flashinfer_deepgemm", "flashinfer_cutedsl", "cutlass", "triton", "aiter",
};
// The parser names, as argparse lists them (declared order). `--tool-call-parser`: TOOL_CALL_PARSER_NAMES of
// sgl-project/sglang python/sglang/srt/function_call/parser_names.py @43a854243bded5504df4357cd3540beb839bf26e ("server_args
// needs these for the `--tool-call-parser` CLI choices"), which lists the recipe's `deepseekv41` (boot.py's default).
// `--reasoning-parser`: REASONING_PARSER_NAMES of python/sglang/srt/parser/reasoning_parser_names.py
// @7dda59b24f8069b4561771e5ad51faefb832cdd2 (the dependency-free list `reasoning_parser` asserts equal to
// ReasoningParser.DetectorMap) and the recipe's `deepseek-v41`, which that stored version lacks: an upstream DeepSeek-V4.1
// test (store id 68484165918, repository path and commit not shown: UNVERIFIED) asserts `"deepseek-v41" in
// ReasoningParser.DetectorMap`; no stored names list has it, so where the image puts it in the list is not known (the lab
// appends it). The image's own lists (lmsysorg/sglang:dev-dsv41, commit unnamed) are UNVERIFIED.
pub const tool_call_parsers = [_][]const u8{
    "apertus2509", "cohere_command4", "deepseekv3",  "deepseekv31", "deepseekv32", "deepseekv4", "deepseekv41", "dots",
    "glm",         "glm45",           "glm47",       "gpt-oss",     "k2_horizon",  "kimi_k2",    "kimi_k3",     "lfm2",
    "ling3",       "llama3",          "mimo",        "minicpm5",    "mistral",     "muse",       "poolside_v1", "pythonic",
    "qwen",        "qwen25",          "qwen3_coder", "spark25",     "step3",       "step3p5",    "minimax-m2",  "minimax-m3",
    "nanbeige",    "trinity",         "interns1",    "hermes",      "hunyuan",     "gigachat3",  "gigachat35",  "gemma4",
    "inkling",
};
pub const reasoning_parsers = [_][]const u8{
    "apertus2509", "deepseek-r1",     "deepseek-v3",             "deepseek-v4",    "dots",       "glm45",                "ling3",
    "hunyuan",     "gpt-oss",         "k2_horizon",              "kimi",           "kimi_k2",    "kimi_k3",              "mimo",
    "muse",        "poolside_v1",     "qwen3",                   "qwen3-thinking", "minimax",    "minimax-append-think", "minimax-m3",
    "nanbeige",    "step3",           "step3p5",                 "mistral",        "nemotron_3", "interns1",             "gemma4",
    "inkling",     "cohere_command4", "granite_thinking_parser", "deepseek-v41",
};

/// The flags the lab knows: the ones BOOT builds, the recipe's EXTRA_SGLANG_ARGS and a few common ones.
pub const table = [_]argp.Opt{
    .{ .name = "--model-path", .kind = .str },
    .{ .name = "--served-model-name", .kind = .str },
    .{ .name = "--trust-remote-code", .kind = .flag },
    .{ .name = "--load-format", .kind = .str, .choices = &load_formats },
    .{ .name = "--tp-size", .kind = .int, .short = "--tensor-parallel-size" },
    .{ .name = "--ep-size", .kind = .int, .short = "--expert-parallel-size" },
    .{ .name = "--pp-size", .kind = .int, .short = "--pipeline-parallel-size" },
    .{ .name = "--attention-backend", .kind = .str, .choices = &attention_backends },
    .{ .name = "--moe-runner-backend", .kind = .str, .choices = &moe_runner_backends },
    .{ .name = "--mem-fraction-static", .kind = .float },
    .{ .name = "--chunked-prefill-size", .kind = .int },
    .{ .name = "--context-length", .kind = .int },
    .{ .name = "--max-running-requests", .kind = .int },
    .{ .name = "--max-total-tokens", .kind = .int },
    .{ .name = "--cuda-graph-max-bs-decode", .kind = .int },
    .{ .name = "--random-seed", .kind = .int },
    .{ .name = "--enable-decoder-swa-bounded-replay", .kind = .flag },
    .{ .name = "--tool-call-parser", .kind = .str, .choices = &tool_call_parsers },
    .{ .name = "--reasoning-parser", .kind = .str, .choices = &reasoning_parsers },
    .{ .name = "--host", .kind = .str },
    .{ .name = "--port", .kind = .int },
    .{ .name = "--api-key", .kind = .str },
    .{ .name = "--speculative-algorithm", .kind = .str },
    .{ .name = "--speculative-dspark-block-size", .kind = .int },
    .{ .name = "--speculative-dspark-sps-table-path", .kind = .str },
    .{ .name = "--speculative-dspark-align-verify-tokens-to-graph-tier", .kind = .flag },
    .{ .name = "--speculative-dspark-confidence-sts-path", .kind = .str },
    .{ .name = "--nnodes", .kind = .int },
    .{ .name = "--node-rank", .kind = .int },
    .{ .name = "--dist-init-addr", .kind = .str },
    .{ .name = "--fp8-gemm-backend", .kind = .str, .choices = &fp8_gemm_backends },
    .{ .name = "--watchdog-timeout", .kind = .float },
    .{ .name = "--min-free-slots-delay", .kind = .int },
    .{ .name = "--sleep-on-idle", .kind = .flag },
    .{ .name = "--page-size", .kind = .int },
    .{ .name = "--dtype", .kind = .str },
};

/// The arguments every node must share (a worker whose digest differs is refused).
const shared = [_][]const u8{
    "--tp-size",             "--ep-size",               "--pp-size",                       "--nnodes",
    "--context-length",      "--max-total-tokens",      "--chunked-prefill-size",          "--max-running-requests",
    "--mem-fraction-static", "--speculative-algorithm", "--speculative-dspark-block-size", "--load-format",
    "--moe-runner-backend",  "--attention-backend",     "--dist-init-addr",
};

var fatal_state: common.Fatal = .{};

fn argError(text: []const u8) noreturn {
    std.debug.print("{s}" ++ prog ++ ": error: {s}\n", .{ usage, text });
    std.process.exit(common.exit_refused);
}

/// A Python exception at start (exit 1 with its traceback; the lab prints its last line).
fn pyError(comptime kind: []const u8, comptime fmt: []const u8, args: anytype) noreturn {
    log("refusing to start: " ++ kind ++ ": " ++ fmt, args);
    std.process.exit(1);
}

/// BOOT serve(): the sglang.launch_server line boot.py builds from the container's environment.
fn bootArgs(io: std.Io, arena: std.mem.Allocator, env: common.Env) ![]const []const u8 {
    const model_path = env.str("MODEL_PATH") orelse "/models/DeepSeek-V4.1-Flash";
    if (std.mem.eql(u8, env.str("SKIP_PREPARE") orelse "0", "1")) {
        const config = try std.fmt.allocPrint(arena, "{s}/config.json", .{model_path});
        std.Io.Dir.cwd().access(io, config, .{}) catch pyError("AssertionError", "missing {s}/config.json", .{model_path});
    } else refuse("SKIP_PREPARE is not 1: boot.py would download the checkpoint from the Hub, which the lab cannot (the roles place it)", .{});
    const mode = env.str("OFFLOAD_MODE") orelse "nvme";
    if (!std.mem.eql(u8, mode, "nvme") and !std.mem.eql(u8, mode, "ram")) pyError("AssertionError", "OFFLOAD_MODE must be nvme or ram", .{});
    const context_text = env.str("CONTEXT_LENGTH") orelse "409600";
    const context = std.fmt.parseInt(i64, context_text, 10) catch pyError("ValueError", "invalid literal for int() with base 10: '{s}'", .{context_text});
    if (context < 4096 or context > 1048576) pyError("AssertionError", "Context must be 4096 through the model limit 1048576", .{});
    const nnodes_text = env.str("NNODES") orelse "1";
    const nnodes = std.fmt.parseInt(i64, nnodes_text, 10) catch pyError("ValueError", "invalid literal for int() with base 10: '{s}'", .{nnodes_text});
    const tp = env.str("TP_SIZE") orelse env.str("TP") orelse "3";
    const max_req = env.str("MAX_RUNNING_REQUESTS") orelse "4";
    var args: std.ArrayList([]const u8) = .empty;
    try args.appendSlice(arena, &.{
        "--model-path",                                          model_path,
        "--served-model-name",                                   env.str("SERVED_MODEL_NAME") orelse "deepseek-v4.1-flash",
        "--trust-remote-code",                                   "--load-format",
        "safetensors",                                           "--tp",
        tp,                                                      "--ep-size",
        env.str("EP_SIZE") orelse tp,                            "--attention-backend",
        env.str("ATTENTION_BACKEND") orelse "dsv4",              "--moe-runner-backend",
        env.str("MOE_RUNNER_BACKEND") orelse "flashinfer_mxfp4", "--mem-fraction-static",
        env.str("MEM_FRACTION_STATIC") orelse "0.95",            "--chunked-prefill-size",
        env.str("CHUNKED_PREFILL_SIZE") orelse "2048",           "--context-length",
        context_text,                                            "--max-running-requests",
        max_req,                                                 "--cuda-graph-max-bs-decode",
        env.str("CUDA_GRAPH_MAX_BS_DECODE") orelse max_req,      "--random-seed",
        "0",                                                     "--enable-decoder-swa-bounded-replay",
        "--tool-call-parser",                                    env.str("TOOL_CALL_PARSER") orelse "deepseekv41",
        "--reasoning-parser",                                    env.str("REASONING_PARSER") orelse "deepseek-v41",
        "--host",                                                env.str("HOST") orelse "0.0.0.0",
        "--port",                                                env.str("SERVER_PORT") orelse "8888",
    });
    const spec = env.str("SPEC_ALGO") orelse "DSPARK";
    if (!std.ascii.eqlIgnoreCase(spec, "off") and !std.ascii.eqlIgnoreCase(spec, "none") and !std.mem.eql(u8, spec, "0")) {
        try args.appendSlice(arena, &.{ "--speculative-algorithm", spec, "--speculative-dspark-block-size", env.str("DSPARK_BLOCK_SIZE") orelse "5" });
        // BOOT: the SPS/STS tables only when the files exist (else "staying on the verify-all schedule").
        if (env.str("DSPARK_SPS_TABLE")) |table_path| {
            if (std.Io.Dir.cwd().access(io, table_path, .{})) |_| {
                try args.appendSlice(arena, &.{ "--speculative-dspark-sps-table-path", table_path, "--speculative-dspark-align-verify-tokens-to-graph-tier" });
            } else |_| log("DSPARK_SPS_TABLE={s} not found; staying on the verify-all schedule", .{table_path});
        }
    }
    if (nnodes > 1) {
        const dist = env.str("DIST_INIT_ADDR") orelse pyError("AssertionError", "DIST_INIT_ADDR is required when NNODES>1", .{});
        try args.appendSlice(arena, &.{ "--nnodes", nnodes_text, "--node-rank", env.str("NODE_RANK") orelse "0", "--dist-init-addr", dist });
    }
    if (env.str("MAX_TOTAL_TOKENS")) |total| if (!std.mem.eql(u8, total, "0")) try args.appendSlice(arena, &.{ "--max-total-tokens", total });
    if (env.str("EXTRA_SGLANG_ARGS")) |extra| {
        var it = std.mem.tokenizeAny(u8, extra, " \t\n");
        while (it.next()) |word| try args.append(arena, word);
    }
    // BOOT key(): API_KEY, unless empty / none / off / dummy / 0.
    if (env.str("API_KEY")) |key| {
        const off = [_][]const u8{ "none", "off", "dummy", "0" };
        var keep = true;
        for (off) |word| if (std.ascii.eqlIgnoreCase(key, word)) {
            keep = false;
        };
        if (keep) try args.appendSlice(arena, &.{ "--api-key", key });
    }
    return args.items;
}

/// RING: the NCCL this rank would load, on a ring.
fn checkNccl(io: std.Io, arena: std.mem.Allocator, env: common.Env) void {
    const ring_only = std.mem.eql(u8, env.str("NCCL_SWITCHLESS_RING_ONLY") orelse "0", "1");
    const on_ring = std.mem.eql(u8, env.str("SIM_FABRIC_TOPOLOGY") orelse "", "ring");
    for ([_][]const u8{ "LD_PRELOAD", "LD_LIBRARY_PATH" }) |name| {
        const value = env.str(name) orelse continue;
        var it = std.mem.tokenizeAny(u8, value, ": ");
        while (it.next()) |entry| {
            const lib = if (std.mem.indexOf(u8, entry, "libnccl") != null) entry else std.fmt.allocPrint(arena, "{s}/libnccl.so.2", .{entry}) catch unreachable;
            if (std.Io.Dir.cwd().access(io, lib, .{})) |_| {
                pyError("AssertionError", "Duplicate NCCL runtime found in the current system: {s} vs {s} (DeepEP check_nccl_so(): mount the patched NCCL over the pip one instead of {s})", .{ lib, pip_nccl, name });
            } else |_| {}
        }
    }
    if (on_ring and !ring_only)
        pyError("RuntimeError", "NCCL error: unhandled system error (ncclTransportTreeConnect: the tree wants a direct path between opposite nodes of the ring; set NCCL_SWITCHLESS_RING_ONLY=1 with the patched NCCL)", .{});
    if (!ring_only) return;
    const path = env.str("SIM_NCCL_PIP_SO") orelse pip_nccl;
    const text = std.Io.Dir.cwd().readFileAlloc(io, path, arena, .limited(256 << 20)) catch |err|
        pyError("OSError", "libnccl.so.2: cannot open shared object file ({s}: {t})", .{ path, err });
    if (std.mem.indexOf(u8, text, "SWITCHLESS_RING_ONLY") == null)
        pyError("RuntimeError", "NCCL error: unhandled system error (ncclTransportTreeConnect: {s} is a stock NCCL, which ignores NCCL_SWITCHLESS_RING_ONLY; mount the patched NCCL 2.30.7 over it)", .{path});
    log("NCCL INFO NCCL_SWITCHLESS_RING_ONLY set by environment to 1. ({s} carries the switchless patch)", .{path});
}

pub fn main(init: std.process.Init) !u8 {
    common.exitOnTerm();
    const io = init.io;
    const arena = init.arena.allocator();
    const argv = try init.minimal.args.toSlice(arena);
    common.log_tag = "sglang";
    const env: common.Env = .{ .map = init.environ_map };

    // python3 [-u] /opt/dsv41/boot.py run | python3 [-u] -m sglang.launch_server ARGS
    var i: usize = 1;
    if (i < argv.len and std.mem.eql(u8, argv[i], "-u")) i += 1;
    if (i < argv.len and std.mem.eql(u8, argv[i], "--version")) {
        common.printVersion(io, "sglang");
        return 0;
    }
    var via_boot = false;
    const args: []const []const u8 = if (i + 1 < argv.len and std.mem.eql(u8, argv[i], "-m") and std.mem.eql(u8, argv[i + 1], "sglang.launch_server"))
        argv[i + 2 ..]
    else if (i + 1 < argv.len and std.mem.endsWith(u8, argv[i], "boot.py")) blk: {
        const command = argv[i + 1];
        if (!std.mem.eql(u8, command, "run")) {
            log("the lab simulates `boot.py run` only (got {s})", .{command});
            return common.exit_refused;
        }
        via_boot = true;
        break :blk try bootArgs(io, arena, env);
    } else {
        std.debug.print("the lab's python3 runs `/opt/dsv41/boot.py run` and `-m sglang.launch_server` only (SGLang SIMULATOR)\n", .{});
        return common.exit_refused;
    };

    const p = switch (try argp.parse(arena, &table, .{ .prog = prog, .positional = "", .abbrev = true, .no_positional = true }, args)) {
        .help => {
            std.debug.print("{s}", .{usage});
            return 0;
        },
        .bad => |text| argError(text),
        .ok => |o| o,
    };
    const model_path = p.get("--model-path") orelse argError("the following arguments are required: --model-path");
    const tp: i64 = p.int("--tp-size", 1);
    const pp: i64 = p.int("--pp-size", 1);
    const nnodes: i64 = p.int("--nnodes", 1);
    const node_rank: i64 = p.int("--node-rank", 0);
    common.log_tag = try std.fmt.allocPrint(arena, "sglang[node {d}]", .{node_rank});
    if (tp < 1 or pp < 1 or nnodes < 1) refuse("--tp-size, --pp-size and --nnodes must be at least 1", .{});
    if (@rem(tp * pp, nnodes) != 0) pyError("AssertionError", "tp_size must be divisible by number of nodes", .{});
    if (node_rank < 0 or node_rank >= nnodes) refuse("--node-rank {d} is not below --nnodes {d}: the nodes are ranked 0 to nnodes-1", .{ node_rank, nnodes });
    const gpus: i64 = @intCast(env.int("SIM_GPUS_PER_NODE", 1));
    if (@divTrunc(tp * pp, nnodes) > gpus)
        refuse("--tp-size {d} over --nnodes {d} puts {d} ranks on a node with {d} GPU(s): a Spark has one GPU, give --nnodes {d}", .{ tp, nnodes, @divTrunc(tp * pp, nnodes), gpus, tp * pp });
    const dist = p.get("--dist-init-addr");
    if (nnodes > 1 and dist == null) refuse("--nnodes {d} without --dist-init-addr HOST:PORT: the workers would not find rank 0", .{nnodes});

    const found = model.check(io, arena, model_path);
    log("model checked: {s} ({d} shard(s), {d} tensors in the index)", .{ model_path, found.shards, found.tensors });
    checkNccl(io, arena, env);

    var hasher = std.hash.Wyhash.init(0);
    for (shared) |name| {
        hasher.update(name);
        for (p.all(name)) |v| {
            hasher.update("=");
            hasher.update(v);
        }
        hasher.update(";");
    }
    const digest = try std.fmt.allocPrint(arena, "{x:0>16}", .{hasher.final()});
    const dist_text = dist orelse "127.0.0.1:29500";
    const colon = std.mem.lastIndexOfScalar(u8, dist_text, ':') orelse refuse("--dist-init-addr {s} is not HOST:PORT", .{dist_text});
    const master_host = dist_text[0..colon];
    const master_port = std.fmt.parseInt(u16, dist_text[colon + 1 ..], 10) catch refuse("--dist-init-addr {s}: {s} is not a port", .{ dist_text, dist_text[colon + 1 ..] });
    const master = common.parseAddress("--dist-init-addr", master_host, master_port);
    const rendezvous_timeout_ms: i64 = @intFromFloat(env.float("SIM_RENDEZVOUS_TIMEOUT_S", 600) * 1000);
    const context: u64 = @intCast(@max(p.int("--context-length", 4096), 1));

    if (node_rank > 0) {
        log("worker: node {d} of {d}, joining rank 0 at {s}:{d} (SGLang SIMULATOR)", .{ node_rank, nnodes, master_host, master_port });
        var follower: fabric.Follower = .{
            .io = io,
            .rank = @intCast(node_rank),
            .world = @intCast(nnodes),
            .hello = .{ .rank = @intCast(node_rank), .world = @intCast(nnodes), .kit = model_path, .digest = digest },
            .master = master,
            .connect_timeout_ms = rendezvous_timeout_ms,
        };
        follower.run();
    }

    var keys: std.ArrayList([]const u8) = .empty;
    if (p.get("--api-key")) |k| try keys.append(arena, k);
    const host = p.get("--host") orelse "127.0.0.1";
    const port: u16 = std.math.cast(u16, p.int("--port", 30000)) orelse refuse("--port {d} is not a port", .{p.int("--port", 0)});
    const http_address = common.parseAddress("--host", host, port);
    const served = p.get("--served-model-name") orelse model_path;
    const cfg: http.Config = .{
        .flavor = .vllm,
        .name = served,
        .context = context,
        .parallel = @intCast(@max(p.int("--max-running-requests", 8), 1)),
        .api_keys = keys.items,
        .default_max_tokens = context,
        .decode_tok_s = env.float("SIM_DECODE_TOK_S", 50),
        .prefill_tok_s = env.float("SIM_PREFILL_TOK_S", 2000),
        .ttft_base_ms = env.float("SIM_TTFT_BASE_MS", 50),
    };
    if (cfg.decode_tok_s <= 0 or cfg.prefill_tok_s <= 0) refuse("SIM_DECODE_TOK_S and SIM_PREFILL_TOK_S must be > 0", .{});
    log("rank 0: serving {s} as {s}, TP {d} EP {d} over {d} node(s), context {d}, max running requests {d}, API key {s} (SGLang SIMULATOR)", .{
        model_path, served, tp, p.int("--ep-size", tp), nnodes, context, cfg.parallel, if (keys.items.len > 0) "on" else "off",
    });

    const expect = fabric.Expect.ofDigest(context, model_path, .{
        .value = digest,
        .what = "engine arguments (--tp-size, --ep-size, --nnodes, --context-length, --max-total-tokens, --dist-init-addr, ...)",
    });
    return head.serve(.{
        .io = io,
        .arena = arena,
        .gpa = init.gpa,
        .env = env,
        .cfg = cfg,
        .fatal = &fatal_state,
        .nnodes = nnodes,
        .master = master,
        .master_host = master_host,
        .master_port = master_port,
        .rendezvous_timeout_ms = rendezvous_timeout_ms,
        .expect = &expect,
        .http_address = http_address,
        .workers_hint = "start the workers first: they join",
        .ready_before = "The server is fired up and ready to roll! (",
        .ready_after = ")",
        // BOOT serve(): once /health answers (and its smoke test and warm-up passed, which the lab does not run),
        // rank 0 prints `Ready: API on port {PORT} (rank 0)...`: the line start.sh waits for (`^Ready: API on port`).
        .banner = if (via_boot) try std.fmt.allocPrint(arena, "Ready: API on port {d} (rank 0){s}", .{
            port, if (keys.items.len > 0) ". Key is in /state/api-key." else ", no API key.",
        }) else null,
    });
}
