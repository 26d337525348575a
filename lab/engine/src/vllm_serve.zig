//! `vllm serve`: the lab engine SIMULATOR in the personality of vLLM's CLI as the vLLM overlay recipe
//! (MiaAI-Lab/DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks start.sh @145bb98de2bd94820563666cc3ef9926b1592d48) runs it:
//! the worker `vllm serve /model ... --nnodes 2 --node-rank 1 --master-addr HEAD --master-port 29521
//! --distributed-executor-backend mp --headless` first, then the head (`--node-rank 0`, no --headless), which
//! serves the OpenAI API. THIS IS NOT vLLM: nothing is loaded; replies are the lab's deterministic text.
//!
//! Sources (each rule below names one):
//!   SERVE    vllm-project/vllm vllm/entrypoints/cli/serve.py @00a5fdd20935ba7679750db22997dcf539ca4591
//!   PARALLEL vllm-project/vllm vllm/config/parallel.py @00193b82b0e2d4faea5d3b4ea4f6c4c2bd9d057a
//!   ARGS     vllm-project/vllm vllm/engine/arg_utils.py (create_engine_config; the stored version the search
//!            index holds, commit not shown by the index: UNVERIFIED pin)
//!   KVUTIL   vllm-project/vllm vllm/v1/core/kv_cache_utils.py (check_enough_kv_cache_memory; words as quoted
//!            by several public logs, commit not pinned)
//!   MIAAI    MiaAI-Lab/DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks start.sh and README.md @145bb98
//!
//! Refusals:
//!   - argparse's (usage `vllm serve [model_tag] [options]`, SERVE), `vllm serve: error: ...`, exit 2. The lab
//!     knows the recipe's flags and a few more; any other flag is refused as unrecognized (real vLLM has many
//!     more). `--max_model_len` is `--max-model-len` (vLLM's FlexibleArgumentParser); no abbreviations.
//!   - `--kv-cache-dtype`: refused by the lab, since this recipe must not pass it (MIAAI start.sh: "Native CSA2
//!     KV is ~890 B/token FP4. Do not force GLM's fp8_ds_mla."; KV_CACHE_DTYPE empty). vLLM itself accepts it.
//!   - ValueError / AssertionError of vLLM (exit 1, `refusing to start: ValueError: ...`):
//!     SERVE "--api-server-count=N cannot be used with --headless (no API servers are started in headless mode).";
//!     PARALLEL "nnodes > 1 can only be set when distributed executor backend is mp, uni or external_launcher.";
//!     ARGS "world_size=W must be divisible by nnodes=N." and "node_rank=R must be less than nnodes=N.";
//!     PARALLEL "World size (W) is larger than the number of available GPUs (G) in this node. ..." when a node's
//!     share (W / nnodes) exceeds SIM_GPUS_PER_NODE (1: a Spark has one GPU; vLLM raises it for one node, the
//!     lab for any);
//!     KVUTIL "To serve at least one request with the model's max seq len (L), (X GiB KV cache is needed, which
//!     is larger than the available KV cache memory (Y GiB). Based on the available memory, the estimated
//!     maximum model length is M. ..." when --kv-cache-memory-bytes cannot hold --max-model-len at
//!     SIM_KV_BYTES_PER_TOKEN bytes a token (3466: MIAAI README "2.5 GiB per rank = 774,400 tokens ... ~3.4
//!     KiB/token"), the pool counted in whole --block-size blocks.
//!   - the API server's KeyError (exit 1, the head only; api_server.py @0001948b `validate_api_server_args`):
//!     "invalid tool call parser: X (chose from { ... })" with --enable-auto-tool-choice and "invalid reasoning
//!     parser: X (chose from { ... })" for a name vLLM has not registered (`tool_parsers`, `reasoning_parsers`).
//!   - ModelConfig's (exit 1, every node: the --headless worker builds the engine config too):
//!     "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig" / "  Value error, Unknown
//!     quantization method: X. Must be one of ['exl3', 'awq', ...]." for a --quantization the image does not list
//!     (`quantization_methods`, `quantizationError`).
//!   - the tokenizer registry's (exit 1, the head only): "ValueError: No tokenizer registered for tokenizer_mode='x'."
//!     for a --tokenizer-mode it does not load (`tokenizer_modes`, `tokenizerModeError`).
//!   - lab rules (exit 2): a node rank above 0 without --headless (it would serve an API of its own; MIAAI runs
//!     every node but the head --headless), --headless on node 0, the model directory (as the native lab
//!     engine checks it), the --hf-overrides engram_table_dir directory (MIAAI: "[ -d ${ENGRAM_MOUNT} ] ||
//!     FATAL"; the lab also wants MIAAI download.sh's ENGRAM_FILES in it), a worker whose shared engine
//!     arguments differ from the head's (vLLM would hang or fail in the collectives).
//!
//! Life cycle: the head listens on --master-addr:--master-port (vLLM's torch.distributed store lives on node 0;
//! the lab's rendezvous is fabric.zig's, plain TCP) and waits SIM_RENDEZVOUS_TIMEOUT_S (600, torch's store
//! default) for the nnodes-1 workers, else exits 1 with the store's words ("Timed out after S seconds waiting
//! for clients. J/N clients joined."); a worker retries until the head listens. Then SIM_LOAD_DELAY_S of
//! "loading", then HTTP: /health (empty 200, 503 once a worker is lost), /v1/models, /v1/chat/completions,
//! /v1/completions, /tokenize, /metrics. VLLM_API_KEY (or --api-key) makes every /v1 route need
//! `Authorization: Bearer <key>` (401 {"error": "Unauthorized"}); /health stays open.

const std = @import("std");
const common = @import("common.zig");
const model = @import("model.zig");
const fabric = @import("fabric.zig");
const head = @import("head.zig");
const http = @import("http.zig");
const inputs = @import("inputs.zig");
const argp = @import("argp.zig");

const log = common.log;
const refuse = common.refuse;

const usage =
    \\usage: vllm serve [model_tag] [options]
    \\(vLLM SIMULATOR for the sparkfold lab: the flags of the vLLM overlay recipe; see lab/engine/README.md)
    \\
;

const executor_backends = [_][]const u8{ "ray", "mp", "uni", "external_launcher" };

/// The flags the lab knows: the recipe's (MIAAI start.sh head and worker ARGS) and a few common ones.
pub const table = [_]argp.Opt{
    .{ .name = "--host", .kind = .str },
    .{ .name = "--port", .kind = .int },
    .{ .name = "--served-model-name", .kind = .strs },
    .{ .name = "--api-key", .kind = .str },
    .{ .name = "--tensor-parallel-size", .kind = .int, .short = "-tp" },
    .{ .name = "--pipeline-parallel-size", .kind = .int, .short = "-pp" },
    .{ .name = "--nnodes", .kind = .int },
    .{ .name = "--node-rank", .kind = .int },
    .{ .name = "--master-addr", .kind = .str },
    .{ .name = "--master-port", .kind = .int },
    .{ .name = "--distributed-executor-backend", .kind = .str, .choices = &executor_backends },
    .{ .name = "--headless", .kind = .flag },
    .{ .name = "--api-server-count", .kind = .int },
    .{ .name = "--tokenizer-mode", .kind = .str },
    .{ .name = "--tool-call-parser", .kind = .str },
    .{ .name = "--reasoning-parser", .kind = .str },
    .{ .name = "--enable-auto-tool-choice", .kind = .flag },
    .{ .name = "--enable-prefix-caching", .kind = .boolopt },
    .{ .name = "--enable-flashinfer-autotune", .kind = .boolopt },
    .{ .name = "--hf-overrides", .kind = .json },
    .{ .name = "--quantization", .kind = .str, .short = "-q" },
    .{ .name = "--max-model-len", .kind = .hint },
    .{ .name = "--gpu-memory-utilization", .kind = .float },
    .{ .name = "--max-num-seqs", .kind = .int },
    .{ .name = "--max-num-batched-tokens", .kind = .hint },
    .{ .name = "--long-prefill-token-threshold", .kind = .int },
    .{ .name = "--kv-cache-memory-bytes", .kind = .hint },
    .{ .name = "--kv-cache-dtype", .kind = .str },
    .{ .name = "--block-size", .kind = .int },
    .{ .name = "--speculative-config", .kind = .json },
    .{ .name = "--chat-template", .kind = .str },
    .{ .name = "--language-model-only", .kind = .flag },
    .{ .name = "--cudagraph-capture-sizes", .kind = .ints },
    .{ .name = "--enforce-eager", .kind = .flag },
    .{ .name = "--mm-encoder-tp-mode", .kind = .str, .choices = &.{ "weights", "data" } },
    .{ .name = "--limit-mm-per-prompt", .kind = .json },
    .{ .name = "--skip-mm-profiling", .kind = .flag },
    .{ .name = "--trust-remote-code", .kind = .flag },
    .{ .name = "--dtype", .kind = .str },
    .{ .name = "--seed", .kind = .int },
};

/// The registered tool-call parsers, as `ToolParserManager.list_registered()` lists them (sorted): the registry of
/// vllm-project/vllm `vllm/tool_parsers/__init__.py` @0064cc9cb1ae57b1308015d48a57462fa27a68f2
/// (`_TOOL_PARSERS_TO_REGISTER`; `list_registered` sorts, `vllm/tool_parsers/abstract_tool_parser.py`
/// @0160cf03fa754382f63e5404b1d44eac8d0219e0) and `deepseek_v41`, the parser this recipe passes, whose module
/// `vllm/tool_parsers/deepseekv41_engine_tool_parser.py` @a13f7de0435fa7f54eec389557db438d137e20d2 a later registry
/// adds. The image's vLLM (0.1.dev20904+g179dd0fa9) is not public: its exact list is UNVERIFIED.
pub const tool_parsers = [_][]const u8{
    "apertus",      "cohere_command3", "cohere_command4", "deepseek_v3",    "deepseek_v31",    "deepseek_v32",
    "deepseek_v4",  "deepseek_v41",    "ernie45",         "functiongemma",  "gemma4",          "gigachat3",
    "glm45",        "glm47",           "granite",         "granite-20b-fc", "granite4",        "hermes",
    "hunyuan_a13b", "hy_v3",           "inkling",         "internlm",       "jamba",           "kimi_k2",
    "kimi_k3",      "lfm2",            "llama3_json",     "llama4_json",    "llama4_pythonic", "longcat",
    "mimo",         "minicpm5",        "minimax_m2",      "minimax_m3",     "mistral",         "olmo3",
    "openai",       "phi4_mini_json",  "poolside_v1",     "pythonic",       "qwen3_coder",     "qwen3_xml",
    "seed_oss",     "solar_open2",     "step3",           "step3p5",        "xlam",
};

/// The registered reasoning parsers, as `ReasoningParserManager.list_registered()` lists them (sorted): the registry
/// of vllm-project/vllm `vllm/reasoning/__init__.py` @0064cc9cb1ae57b1308015d48a57462fa27a68f2
/// (`_REASONING_PARSERS_TO_REGISTER`) and `deepseek_v41`, whose module `vllm/reasoning/deepseek_v41_engine_reasoning_parser.py`
/// @810ed01eff1f3b46adf5ac698a3a2932b01711e4 (`DeepSeekV41ParserReasoningAdapter`) a later registry adds. UNVERIFIED
/// for the image's own vLLM, as above.
pub const reasoning_parsers = [_][]const u8{
    "cohere_command3", "cohere_command4",         "deepseek_r1", "deepseek_v3", "deepseek_v4", "deepseek_v41",
    "ernie45",         "gemma4",                  "glm45",       "glm47",       "granite",     "holo2",
    "hunyuan_a13b",    "hy_v3",                   "inkling",     "kimi_k2",     "kimi_k3",     "mimo",
    "minimax_m2",      "minimax_m2_append_think", "minimax_m3",  "mistral",     "nemotron_v3", "olmo3",
    "openai_gptoss",   "poolside_v1",             "qwen3",       "seed_oss",    "solar_open2", "step3",
    "step3p5",
};

/// QUANTIZATION_METHODS as the overlay image has it: vllm-project/vllm
/// `vllm/model_executor/layers/quantization/__init__.py` @05d909563e1d1ada39a13b67e7b9a4cbca1d6a8e
/// (`QUANTIZATION_METHODS: list[str] = list(get_args(QuantizationMethods))`, in the Literal's order) with `exl3` first, where
/// MiaAI-Lab/DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks Dockerfile @8828d0f42607cb1ca2d89a446a08d995ad9ff0f7 puts it ("Register
/// EXL3 if this image's vLLM does not already list it": `QuantizationMethods = Literal[\n    "exl3",\n    "awq",\n`).
/// The image's vLLM (0.1.dev20904+g179dd0fa9) is not public: its exact list is UNVERIFIED.
pub const quantization_methods = [_][]const u8{
    "exl3",         "awq",                "fp8",          "ptpc_fp8",       "fbgemm_fp8",  "fp_quant",     "modelopt",
    "modelopt_fp4", "bitblas",            "gguf",         "gptq_marlin_24", "gptq_marlin", "gptq_bitblas", "awq_marlin",
    "gptq",         "compressed-tensors", "bitsandbytes", "experts_int8",   "ipex",        "quark",        "moe_wna16",
    "torchao",      "inc",                "mxfp4",        "mxfp8",          "petit_nvfp4", "cpu_awq",
};

/// The tokenizer modes vLLM loads: `auto` and `slow` (vllm-project/vllm `vllm/tokenizers/registry.py`
/// @01746e2753c775e3f62856f2e26c66dc8a9720cb `resolve_tokenizer_args`: "slow" and "auto" become "hf" or "mistral"), the
/// keys of that file's `_VLLM_TOKENIZERS`, and `deepseek_v41`, the recipe's, whose module `vllm/tokenizers/deepseek_v41.py`
/// (@9c5b71639542eda95a0a3fa92e6802e4b4ecbdae) a later registry adds (no stored registry lists it: UNVERIFIED, as the image's
/// own list).
pub const tokenizer_modes = [_][]const u8{
    "auto", "slow", "deepseek_v32", "deepseek_v4", "deepseek_v41", "fastokens", "grok2", "hf", "kimi_audio", "mistral", "qwen_vl",
};

/// ModelConfig (vllm-project/vllm `vllm/config/model.py`, the stored version with `quantization: QuantizationMethods | str |
/// None`, store id 41172368, commit not shown: UNVERIFIED pin): `--quantization` is a free string to argparse
/// (`vllm/engine/arg_utils.py` @99d7eb5 `literal_to_kwargs`: "If `type_hints` also contains `str`, we use `metavar` instead of
/// `choices`"), lowercased (`validate_quantization_before`), then `_verify_quantization` in `__post_init__`: `raise
/// ValueError(f"Unknown quantization method: {self.quantization}. Must be one of {supported_quantization}.")`, which pydantic
/// reports as `ValidationError: 1 validation error for ModelConfig` / `  Value error, ... [type=value_error, ...]` (the shape
/// vllm-project/vllm issue #26161 shows). Every node builds the engine config, the --headless worker too. null when known.
pub fn quantizationError(arena: std.mem.Allocator, method: []const u8) !?[]const u8 {
    const lower = try std.ascii.allocLowerString(arena, method);
    if (isOneOf(lower, &quantization_methods)) return null;
    var listed: std.ArrayList(u8) = .empty;
    for (quantization_methods, 0..) |name, i| {
        if (i > 0) try listed.appendSlice(arena, ", ");
        try listed.print(arena, "'{s}'", .{name});
    }
    return try std.fmt.allocPrint(arena, "1 validation error for ModelConfig\n  Value error, Unknown quantization method: {s}. Must be one of [{s}]. [type=value_error, input_value=ArgsKwargs((), {{'model': ...}}), input_type=ArgsKwargs]", .{ lower, listed.items });
}

/// The API server loads the tokenizer (`vllm/tokenizers/registry.py` @01746e27 `get_tokenizer` ->
/// `TokenizerRegistry.load_tokenizer_cls`: `raise ValueError(f"No tokenizer registered for {tokenizer_mode=!r}.")`) after
/// ModelConfig lowercased the mode (`_lowercase_tokenizer_mode`); argparse takes any string (`TokenizerMode | str`,
/// metavar only). The head only: a --headless node loads no tokenizer. null when registered.
pub fn tokenizerModeError(arena: std.mem.Allocator, mode: []const u8) !?[]const u8 {
    const lower = try std.ascii.allocLowerString(arena, mode);
    if (isOneOf(lower, &tokenizer_modes)) return null;
    return try std.fmt.allocPrint(arena, "No tokenizer registered for tokenizer_mode='{s}'.", .{lower});
}

fn isOneOf(name: []const u8, names: []const []const u8) bool {
    for (names) |n| if (std.mem.eql(u8, n, name)) return true;
    return false;
}

/// vllm-project/vllm `vllm/entrypoints/openai/api_server.py` @0001948bc76939369ca855c90b36d81256477e85
/// `validate_api_server_args`, run by `setup_server` on the API server (the head) before the engine starts:
/// `raise KeyError(f"invalid tool call parser: {args.tool_call_parser} (chose from {{ {','.join(valid_tool_parses)} }})")`
/// when --enable-auto-tool-choice is on, and the same for a set --reasoning-parser ("invalid reasoning parser: ...").
/// Python prints a KeyError's message quoted: the traceback's last line is `KeyError: 'invalid ... }'`, exit 1.
/// null when both are registered names.
pub fn parserError(arena: std.mem.Allocator, auto_tool_choice: bool, tool: ?[]const u8, reasoning: ?[]const u8) !?[]const u8 {
    if (auto_tool_choice) {
        const name = tool orelse "None";
        if (!isOneOf(name, &tool_parsers))
            return try std.fmt.allocPrint(arena, "'invalid tool call parser: {s} (chose from {{ {s} }})'", .{ name, try std.mem.join(arena, ",", &tool_parsers) });
    }
    if (reasoning) |name| if (name.len > 0 and !isOneOf(name, &reasoning_parsers))
        return try std.fmt.allocPrint(arena, "'invalid reasoning parser: {s} (chose from {{ {s} }})'", .{ name, try std.mem.join(arena, ",", &reasoning_parsers) });
    return null;
}

test "the parser lists are sorted as list_registered sorts them, and a typo is vLLM's KeyError" {
    for ([_][]const []const u8{ &tool_parsers, &reasoning_parsers }) |names| {
        for (names[1..], 0..) |n, i| try std.testing.expect(std.mem.order(u8, names[i], n) == .lt);
    }
    var arena_state = std.heap.ArenaAllocator.init(std.testing.allocator);
    defer arena_state.deinit();
    const a = arena_state.allocator();
    try std.testing.expectEqual(@as(?[]const u8, null), try parserError(a, true, "deepseek_v41", "deepseek_v41"));
    try std.testing.expectEqual(@as(?[]const u8, null), try parserError(a, false, "bogus", null));
    const got = (try parserError(a, false, null, "deepseek_v4l")).?;
    try std.testing.expect(std.mem.startsWith(u8, got, "'invalid reasoning parser: deepseek_v4l (chose from { cohere_command3,cohere_command4,"));
    try std.testing.expect(std.mem.endsWith(u8, got, ",step3,step3p5 })'"));
}

test "an unknown quantization method or tokenizer mode is vLLM's error; the recipe's are known" {
    var arena_state = std.heap.ArenaAllocator.init(std.testing.allocator);
    defer arena_state.deinit();
    const a = arena_state.allocator();
    try std.testing.expectEqual(@as(?[]const u8, null), try quantizationError(a, "exl3"));
    try std.testing.expectEqual(@as(?[]const u8, null), try quantizationError(a, "EXL3"));
    const q = (try quantizationError(a, "exl2")).?;
    try std.testing.expect(std.mem.indexOf(u8, q, "Value error, Unknown quantization method: exl2. Must be one of ['exl3', 'awq', 'fp8', ") != null);
    try std.testing.expectEqual(@as(?[]const u8, null), try tokenizerModeError(a, "deepseek_v41"));
    try std.testing.expectEqual(@as(?[]const u8, null), try tokenizerModeError(a, "Auto"));
    try std.testing.expectEqualStrings("No tokenizer registered for tokenizer_mode='deepseek-v41'.", (try tokenizerModeError(a, "DeepSeek-V41")).?);
}

/// The arguments every node must share (a worker whose digest differs is refused).
const shared = [_][]const u8{
    "--tensor-parallel-size",   "--pipeline-parallel-size",  "--nnodes",       "--max-model-len",
    "--kv-cache-memory-bytes",  "--block-size",              "--quantization", "--max-num-seqs",
    "--max-num-batched-tokens", "--speculative-config",      "--hf-overrides", "--language-model-only",
    "--enforce-eager",          "--cudagraph-capture-sizes", "--master-port",
};

var fatal_state: common.Fatal = .{};

fn argError(text: []const u8) noreturn {
    std.debug.print("{s}vllm serve: error: {s}\n", .{ usage, text });
    std.process.exit(common.exit_refused);
}

/// A Python exception at start (vLLM exits 1 with its traceback; the lab prints its last line).
fn pyError(comptime kind: []const u8, comptime fmt: []const u8, args: anytype) noreturn {
    log("refusing to start: " ++ kind ++ ": " ++ fmt, args);
    std.process.exit(1);
}

fn gib(bytes: u64) f64 {
    return @as(f64, @floatFromInt(bytes)) / (1024.0 * 1024.0 * 1024.0);
}

/// vLLM's FlexibleArgumentParser (vllm-project/vllm vllm/utils/argparse_utils.py
/// @c836a6feca5511c326b4369f6fd11cf72090665b, `parse_args`): a dotted option, `--speculative-config.method dspark` or
/// `--speculative-config.num_speculative_tokens=3`, is one key of a JSON object: every dotted option of one name is
/// merged into one (a later key replaces an earlier one; a key ending in `+` takes a comma-separated list), each value
/// read as JSON when it parses and as a string when it does not, and the object is passed as `--name <json>` after
/// the other arguments, where the option's own type (JSON for --speculative-config) reads it.
fn dottedArgs(arena: std.mem.Allocator, args: []const []const u8) ![]const []const u8 {
    var out: std.ArrayList([]const u8) = .empty;
    var objects: std.StringArrayHashMapUnmanaged(std.json.ObjectMap) = .empty;
    var i: usize = 0;
    while (i < args.len) : (i += 1) {
        const arg = args[i];
        const eq = std.mem.findScalar(u8, arg, '=');
        const flag = if (eq) |e| arg[0..e] else arg;
        if (!std.mem.startsWith(u8, arg, "-") or std.mem.findScalar(u8, flag, '.') == null) {
            try out.append(arena, arg);
            continue;
        }
        var text: []const u8 = undefined;
        if (eq) |e| text = arg[e + 1 ..] else {
            if (i + 1 >= args.len) {
                try out.append(arena, arg); // argparse says what is missing
                continue;
            }
            i += 1;
            text = args[i];
        }
        var path = flag;
        var value: std.json.Value = undefined;
        if (std.mem.endsWith(u8, path, "+")) {
            path = path[0 .. path.len - 1];
            var list = std.json.Array.init(arena);
            var items = std.mem.splitScalar(u8, text, ',');
            while (items.next()) |item| try list.append(.{ .string = item });
            value = .{ .array = list };
        } else {
            value = std.json.parseFromSliceLeaky(std.json.Value, arena, text, .{}) catch .{ .string = text };
        }
        var keys = std.mem.splitScalar(u8, path, '.');
        const name = keys.next().?;
        const gop = try objects.getOrPut(arena, name);
        if (!gop.found_existing) gop.value_ptr.* = .empty;
        var object = gop.value_ptr;
        var key = keys.next().?;
        while (keys.next()) |next| {
            const inner = try object.getOrPut(arena, key);
            if (!inner.found_existing or inner.value_ptr.* != .object) inner.value_ptr.* = .{ .object = .empty };
            object = &inner.value_ptr.object;
            key = next;
        }
        try object.put(arena, key, value);
    }
    var it = objects.iterator();
    while (it.next()) |entry| {
        try out.append(arena, entry.key_ptr.*);
        try out.append(arena, try std.json.Stringify.valueAlloc(arena, std.json.Value{ .object = entry.value_ptr.* }, .{}));
    }
    return out.items;
}

test "dotted options are one JSON object, as FlexibleArgumentParser makes them" {
    var arena_state = std.heap.ArenaAllocator.init(std.testing.allocator);
    defer arena_state.deinit();
    const a = arena_state.allocator();
    const got = try dottedArgs(a, &.{ "/model", "--speculative-config.method", "dspark", "--port", "8888", "--speculative-config.num_speculative_tokens=3" });
    try std.testing.expectEqual(@as(usize, 5), got.len);
    try std.testing.expectEqualStrings("--port", got[1]);
    try std.testing.expectEqualStrings("--speculative-config", got[3]);
    try std.testing.expectEqualStrings("{\"method\":\"dspark\",\"num_speculative_tokens\":3}", got[4]);
}

pub fn main(init: std.process.Init) !u8 {
    common.exitOnTerm();
    const io = init.io;
    const arena = init.arena.allocator();
    const args = try init.minimal.args.toSlice(arena);
    common.log_tag = "vllm";

    if (args.len >= 2 and (std.mem.eql(u8, args[1], "--version") or std.mem.eql(u8, args[1], "-v"))) {
        common.printVersion(io, "vllm");
        return 0;
    }
    if (args.len < 2 or !std.mem.eql(u8, args[1], "serve")) {
        std.debug.print("usage: vllm [-h] [-v] {{serve}} ...\nvllm: error: the lab simulates `vllm serve` only\n", .{});
        return common.exit_refused;
    }
    const p = switch (try argp.parse(arena, &table, .{ .prog = "vllm serve", .positional = "model_tag", .abbrev = false, .underscores = true }, try dottedArgs(arena, args[2..]))) {
        .help => {
            std.debug.print("{s}", .{usage});
            return 0;
        },
        .bad => |text| argError(text),
        .ok => |o| o,
    };
    const env: common.Env = .{ .map = init.environ_map };

    const headless = p.flag("--headless");
    const node_rank: i64 = p.int("--node-rank", 0);
    const nnodes: i64 = p.int("--nnodes", 1);
    const tp: i64 = p.int("--tensor-parallel-size", 1);
    const pp: i64 = p.int("--pipeline-parallel-size", 1);
    common.log_tag = try std.fmt.allocPrint(arena, "vllm[node {d}]", .{node_rank});

    if (p.get("--kv-cache-dtype")) |d|
        refuse("--kv-cache-dtype {s}: this recipe must not pass it (the DeepSeek-V4.1 EXL3 overlay keeps the model's own CSA2 KV format; MiaAI start.sh: \"Do not force GLM's fp8_ds_mla\")", .{d});
    if (headless) {
        const count = p.int("--api-server-count", 0);
        if (count > 0) pyError("ValueError", "--api-server-count={d} cannot be used with --headless (no API servers are started in headless mode).", .{count});
    }
    if (node_rank < 0) pyError("ValueError", "node_rank: Input should be greater than or equal to 0", .{});
    if (nnodes < 1) pyError("ValueError", "nnodes: Input should be greater than or equal to 1", .{});
    if (tp < 1 or pp < 1) pyError("ValueError", "tensor_parallel_size and pipeline_parallel_size: Input should be greater than or equal to 1", .{});
    const backend = p.get("--distributed-executor-backend") orelse "mp";
    if (nnodes > 1 and !(std.mem.eql(u8, backend, "mp") or std.mem.eql(u8, backend, "uni") or std.mem.eql(u8, backend, "external_launcher")))
        pyError("ValueError", "nnodes > 1 can only be set when distributed executor backend is mp, uni or external_launcher.", .{});
    const world = tp * pp;
    if (nnodes > 1) {
        if (@rem(world, nnodes) != 0) pyError("AssertionError", "world_size={d} must be divisible by nnodes={d}.", .{ world, nnodes });
        if (node_rank >= nnodes) pyError("AssertionError", "node_rank={d} must be less than nnodes={d}.", .{ node_rank, nnodes });
    }
    const gpus: i64 = @intCast(env.int("SIM_GPUS_PER_NODE", 1));
    if (@divTrunc(world, nnodes) > gpus)
        pyError("ValueError", "World size ({d}) is larger than the number of available GPUs ({d}) in this node. If this is intentional and you are using:\n- ray, set '--distributed-executor-backend ray'.\n- multiprocessing, set '--nnodes' appropriately.", .{ world, gpus });
    if (node_rank > 0 and !headless)
        refuse("--node-rank {d} without --headless: only node 0 serves the API; start the other nodes with --headless (as the recipe's worker runs)", .{node_rank});
    if (node_rank == 0 and headless and nnodes > 1)
        refuse("--headless on --node-rank 0: node 0 is the head, which serves the API; start it without --headless", .{});

    const model_path = p.positional;
    const found = model.check(io, arena, model_path);
    log("model checked: {s} ({d} shard(s), {d} tensors in the index)", .{ model_path, found.shards, found.tensors });
    if (p.get("--hf-overrides")) |text| {
        const v = std.json.parseFromSliceLeaky(std.json.Value, arena, text, .{}) catch unreachable;
        const obj = switch (v) {
            .object => |o| o,
            else => pyError("ValueError", "--hf-overrides must be a JSON object, got {s}", .{text}),
        };
        if (obj.get("engram_table_dir")) |dir| switch (dir) {
            .string => |s| {
                inputs.checkEngram(io, "--hf-overrides engram_table_dir", s);
                inputs.checkEngramIndex(io, arena, "--hf-overrides engram_table_dir", s);
            },
            else => pyError("ValueError", "--hf-overrides engram_table_dir must be a path, got {s}", .{text}),
        };
    }
    if (p.get("--speculative-config")) |text| {
        const v = std.json.parseFromSliceLeaky(std.json.Value, arena, text, .{}) catch unreachable;
        if (v != .object or v.object.get("method") == null)
            pyError("ValueError", "--speculative-config must be a JSON object with a \"method\", got {s}", .{text});
    }

    // The KV pool (KVUTIL): whole blocks of --block-size tokens at SIM_KV_BYTES_PER_TOKEN bytes a token.
    const max_model_len: u64 = @intCast(p.int("--max-model-len", 4096));
    const block: u64 = @intCast(@max(p.int("--block-size", 16), 1));
    const per_token = env.int("SIM_KV_BYTES_PER_TOKEN", 3466);
    if (per_token == 0) refuse("SIM_KV_BYTES_PER_TOKEN must be > 0", .{});
    if (p.get("--kv-cache-memory-bytes")) |_| {
        const pool_bytes: u64 = @intCast(@max(p.int("--kv-cache-memory-bytes", 0), 0));
        const pool_tokens = pool_bytes / (per_token * block) * block;
        const needed = (max_model_len + block - 1) / block * block * per_token;
        if (needed > pool_bytes) {
            const estimate = if (pool_tokens > 0) try std.fmt.allocPrint(arena, "Based on the available memory, the estimated maximum model length is {d}. ", .{pool_tokens}) else "";
            pyError("ValueError", "To serve at least one request with the model's max seq len ({d}), ({d:.2} GiB KV cache is needed, which is larger than the available KV cache memory ({d:.2} GiB). {s}Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.", .{
                max_model_len, gib(needed), gib(pool_bytes), estimate,
            });
        }
        log("KV cache: {d:.2} GiB = {d} tokens in blocks of {d} ({d} B a token); max model len {d}", .{ gib(pool_bytes), pool_tokens, block, per_token, max_model_len });
    }

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
    const master_host = p.get("--master-addr") orelse "127.0.0.1";
    const master_port: u16 = std.math.cast(u16, p.int("--master-port", 29501)) orelse refuse("--master-port {d} is not a port", .{p.int("--master-port", 0)});
    const master = common.parseAddress("--master-addr", master_host, master_port);
    const rendezvous_timeout_ms: i64 = @intFromFloat(env.float("SIM_RENDEZVOUS_TIMEOUT_S", 600) * 1000);

    // The head's API server checks its parser names first (setup_server), then every node builds the engine config
    // (ModelConfig: --quantization), then the head's engine client loads the tokenizer (--tokenizer-mode).
    if (!headless) if (try parserError(arena, p.flag("--enable-auto-tool-choice"), p.get("--tool-call-parser"), p.get("--reasoning-parser"))) |text|
        pyError("KeyError", "{s}", .{text});
    if (p.get("--quantization")) |method| if (try quantizationError(arena, method)) |text|
        pyError("pydantic_core._pydantic_core.ValidationError", "{s}", .{text});

    if (headless) {
        log("headless worker: node {d} of {d}, joining the head at {s}:{d} (vLLM SIMULATOR)", .{ node_rank, nnodes, master_host, master_port });
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

    if (p.get("--tokenizer-mode")) |mode| if (try tokenizerModeError(arena, mode)) |text|
        pyError("ValueError", "{s}", .{text});

    var served: []const u8 = model_path;
    if (p.all("--served-model-name").len > 0) served = p.all("--served-model-name")[0];
    var keys: std.ArrayList([]const u8) = .empty;
    if (p.get("--api-key")) |k| try keys.append(arena, k);
    if (env.str("VLLM_API_KEY")) |k| try keys.append(arena, k);
    const host = p.get("--host") orelse "0.0.0.0";
    const port: u16 = std.math.cast(u16, p.int("--port", 8000)) orelse refuse("--port {d} is not a port", .{p.int("--port", 0)});
    const http_address = common.parseAddress("--host", host, port);
    const cfg: http.Config = .{
        .flavor = .vllm,
        .name = served,
        .context = max_model_len,
        .parallel = @intCast(@max(p.int("--max-num-seqs", 256), 1)),
        .api_keys = keys.items,
        .default_max_tokens = max_model_len,
        .decode_tok_s = env.float("SIM_DECODE_TOK_S", 50),
        .prefill_tok_s = env.float("SIM_PREFILL_TOK_S", 2000),
        .ttft_base_ms = env.float("SIM_TTFT_BASE_MS", 50),
    };
    if (cfg.decode_tok_s <= 0 or cfg.prefill_tok_s <= 0) refuse("SIM_DECODE_TOK_S and SIM_PREFILL_TOK_S must be > 0", .{});
    log("head: serving {s} as {s}, TP {d} over {d} node(s), max model len {d}, max num seqs {d}, API key {s} (vLLM SIMULATOR)", .{
        model_path, served, tp, nnodes, max_model_len, cfg.parallel, if (keys.items.len > 0) "on" else "off",
    });

    const expect = fabric.Expect.ofDigest(max_model_len, model_path, .{
        .value = digest,
        .what = "engine arguments (--tensor-parallel-size, --max-model-len, --kv-cache-memory-bytes, --block-size, --speculative-config, --hf-overrides, ...)",
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
        .workers_hint = "start the --headless worker first: it joins",
        .ready_before = "Starting vLLM API server on ",
        .ready_after = "",
    });
}
