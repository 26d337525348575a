//! tensorfold-native: rank 0 of the lab engine SIMULATOR.
//!
//! THIS IS NOT TENSORFOLD. It is a small stand-in, written for the sparkfold.cluster lab and
//! tests, that accepts TensorFold's command line and environment and answers its HTTP API
//! with deterministic text at a simulated speed. No model is loaded and no GPU is used.
//!
//!   tensorfold-native serve MODEL [--host H] [--port P] [--name NAME] [--api-key-file F]
//!       [--context N] [--parallel N|auto] [--thinking|--no-thinking] [--no-drafts]
//!       [--max-tokens N] [--temperature T] [--top-p P] [--top-k K] [--backend auto|mlx|cuda|rocm]
//!   tensorfold-native --version
//!
//! The flags are exactly the native server's (cli.zig); the environment is the dsv41 family's
//! (bertholomus/TensorFold zig/src/families/dsv41/native.zig @1a3d97e30112d58ffdb4dc07677d7222fa6af3c5):
//! TF_TP_WORLD (2; 2 or 4), TF_TP_MASTER (required), TF_TP_PORT (29620), TF_DS_RANK_CACHE, TF_DS_KIT,
//! TENSORFOLD_CUDA_KERNELS (all required), TF_DS_ENGRAM + TF_DS_TOKEN_MAP (both or neither),
//! TF_RDMA_DEVICES, TF_DS_RDMA_KERNELS, TF_DS_GRAPHS / TF_DS_HC_SIDE / TF_DS_L2_PREFETCH /
//! TF_DS_ENGRAM_AIO (any value but "0" is on), TF_DS_STREAMS (4; 1..16), TF_DS_ROUND_ROWS (16..48);
//! and the simulator's knobs SIM_LOAD_DELAY_S (2), SIM_FOLLOWER_GRACE_S (5), SIM_DECODE_TOK_S (50),
//! SIM_PREFILL_TOK_S (2000), SIM_TTFT_BASE_MS (50), SIM_RENDEZVOUS_TIMEOUT_S (600).
//!
//! Life cycle: check the flags, the environment, MODEL and the inputs (exit 2 on any refusal) ->
//! "load" for SIM_LOAD_DELAY_S -> listen for and wait for the TF_TP_WORLD-1 followers (a follower that does not run
//! what rank 0 runs: exit 2) -> the rest of the open for SIM_SETUP_DELAY_S (0.5) -> open HTTP. Rank 0 loads before it listens, as the real one (model.zig
//! @09bc7166fdbc6697c4afa80355a7a3feb60d0cad: `weights.load`, then `prompt2d.Fan.open`), while each follower retries
//! it for 300 s after its own load (tf_dsv41_lanes.zig). Until then connections are refused, as with
//! the real engine. When a follower is lost, /health answers 503 and the process exits 1
//! after SIM_FOLLOWER_GRACE_S.

const std = @import("std");
const common = @import("common.zig");
const model = @import("model.zig");
const fabric = @import("fabric.zig");
const http = @import("http.zig");
const recipe = @import("recipe.zig");
const cli = @import("cli.zig");
const inputs = @import("inputs.zig");
const build_options = @import("build_options");

const log = common.log;
const refuse = common.refuse;

const usage =
    \\usage: tensorfold-native serve MODEL [--host HOST] [--port PORT] [--name NAME] [--api-key-file PATH]
    \\           [--context N] [--parallel N] [--thinking | --no-thinking] [--no-drafts] [--max-tokens N]
    \\           [--temperature T] [--top-p P] [--top-k K] [--backend {auto,mlx,cuda,rocm}]
    \\       tensorfold-native --version
    \\(TensorFold SIMULATOR for the sparkfold lab; see lab/engine/README.md)
    \\
;

/// native.zig explain(): the words of the real engine's refusals.
const not_ported = "the native DeepSeek-V4.1 engine runs tensor parallel over two GPUs or the four nodes of the 2D split: set TF_TP_WORLD=2 or 4";
const no_master = "set TF_TP_MASTER to rank 0's fabric address (rank 1: tf-dsv41-lanes MODEL CACHE 1 2 MASTER PORT KIT; ranks 1-3 of four: ... G 4 ...)";
const no_rank_cache = "set TF_DS_RANK_CACHE to the lane's per-rank weight files";
const no_kit = "set TF_DS_KIT to the kernel kit (cubins/, the RoPE tables, engram.json)";
const no_free_slot = "this engine serves TF_DS_STREAMS streams at once (default 4): --parallel at most that";
const bad_round_rows = "TF_DS_ROUND_ROWS: a round's rows at most, 16 .. 48";
const bad_streams = "TF_DS_STREAMS: the pool's streams, 1 .. 16";

var fatal_state: common.Fatal = .{};

/// argparse's refusal: the usage, then `tensorfold-native serve: error: <text>`; exit 2.
fn argError(text: []const u8) noreturn {
    std.debug.print("{s}tensorfold-native serve: error: {s}\n", .{ usage, text });
    std.process.exit(common.exit_refused);
}

/// A switch variable: any value but "0" is on; unset is off (native.zig).
fn switchVar(env: common.Env, name: []const u8, key: []const u8) fabric.Switch {
    const text = env.map.get(name);
    return .{ .key = key, .env = name, .env_text = text, .on = if (text) |t| !std.mem.eql(u8, t, "0") else false };
}

pub fn main(init: std.process.Init) !u8 {
    const io = init.io;
    const arena = init.arena.allocator();
    const args = try init.minimal.args.toSlice(arena);
    common.log_tag = "tensorfold-native[rank 0]";

    if (args.len >= 2 and std.mem.eql(u8, args[1], "--version")) {
        common.printVersion(io, "tensorfold-native");
        return 0;
    }
    if (args.len >= 2 and (std.mem.eql(u8, args[1], "--help") or std.mem.eql(u8, args[1], "-h"))) {
        std.debug.print("{s}", .{usage});
        return 0;
    }
    if (args.len < 2 or !std.mem.eql(u8, args[1], "serve")) {
        std.debug.print("{s}", .{usage});
        refuse("expected `serve MODEL [options]`", .{});
    }
    const opts = switch (try cli.parseServe(arena, args[2..])) {
        .help => {
            std.debug.print("{s}", .{usage});
            return 0;
        },
        .bad => |text| argError(text),
        .ok => |o| o,
    };
    const model_path = opts.model;
    const name = opts.name orelse recipe.default_served_name;
    if (opts.context < 16) refuse("--context must be at least 16", .{});
    if (opts.parallel < 1) refuse("--parallel must be at least 1", .{});
    if (opts.max_tokens < 1) refuse("--max-tokens must be at least 1", .{});

    const env: common.Env = .{ .map = init.environ_map };
    // native.zig open(): the ranks, then the pool's shape.
    const world_text = env.str("TF_TP_WORLD") orelse "2";
    const world = std.fmt.parseInt(u32, world_text, 10) catch refuse("TF_TP_WORLD={s}: " ++ not_ported, .{world_text});
    if (world != 2 and world != 4) refuse("TF_TP_WORLD={d}: " ++ not_ported, .{world});
    const master = env.str("TF_TP_MASTER") orelse refuse(no_master, .{});
    // NATIVE: `link.parseIp(getenv("TF_TP_MASTER") orelse return error.NoMaster) catch return error.BadMaster`, both
    // explained with the same words: an IPv4 literal only (common.parseIpv4).
    _ = common.parseIpv4(master) catch refuse("TF_TP_MASTER={s}: " ++ no_master, .{master});
    const port_text = env.str("TF_TP_PORT") orelse "29620";
    const tp_port = std.fmt.parseInt(u16, port_text, 10) catch refuse("TF_TP_PORT={s} is not a port", .{port_text});
    if (tp_port == 0) refuse("TF_TP_PORT=0 is not a port", .{});
    const master_address = common.parseAddress("TF_TP_MASTER", master, tp_port);
    const streams: u64 = if (env.str("TF_DS_STREAMS")) |t| std.fmt.parseInt(u64, t, 10) catch refuse(bad_streams, .{}) else 4;
    if (streams < 1 or streams > 16) refuse(bad_streams, .{});
    if (env.str("TF_DS_ROUND_ROWS")) |t| {
        const rows = std.fmt.parseInt(u64, t, 10) catch refuse(bad_round_rows, .{});
        if (rows < 16 or rows > 48) refuse(bad_round_rows, .{});
    }
    // The TP4 branch (-Dfamily=tp4): TF_DS_WINDOW is the streams' shared pool, at least --context
    // (bertholomus/deepseek-v4.1-tensorfold-tp4-4xgb10 config.env.example @64c3d74: "WINDOW=2097152 # the
    // streams' shared positions", CONTEXT "a request's positions at most"). The TP2 branch does not read it.
    const window: ?u64 = if (!build_options.tp4) null else if (env.str("TF_DS_WINDOW")) |t| blk: {
        const w = std.fmt.parseInt(u64, t, 10) catch refuse("TF_DS_WINDOW={s} is not a number of positions", .{t});
        if (w < opts.context) refuse("TF_DS_WINDOW {d} is less than --context {d}: the streams share the window, a request takes at most --context of it", .{ w, opts.context });
        break :blk w;
    } else null;
    if (opts.parallel > streams) refuse(no_free_slot ++ " (--parallel {d}, TF_DS_STREAMS {d})", .{ opts.parallel, streams });
    const rdma: ?[]const u8 = env.str("TF_RDMA_DEVICES"); // empty is unset (native.zig nonEmpty)
    const graphs = switchVar(env, "TF_DS_GRAPHS", "--graphs");
    const side = switchVar(env, "TF_DS_HC_SIDE", "--side");
    const prefetch = switchVar(env, "TF_DS_L2_PREFETCH", "--prefetch");
    const aio = switchVar(env, "TF_DS_ENGRAM_AIO", "--aio");

    const load_delay_ms: i64 = @intFromFloat(env.float("SIM_LOAD_DELAY_S", 2) * 1000);
    const setup_delay_ms: i64 = @intFromFloat(env.float("SIM_SETUP_DELAY_S", 0.5) * 1000);
    const grace_ms: i64 = @intFromFloat(env.float("SIM_FOLLOWER_GRACE_S", 5) * 1000);
    const rendezvous_timeout_ms: i64 = @intFromFloat(env.float("SIM_RENDEZVOUS_TIMEOUT_S", 600) * 1000);
    const cfg: http.Config = .{
        .name = name,
        .context = opts.context,
        .parallel = opts.parallel,
        .api_keys = &.{},
        .thinking = opts.thinking,
        .drafts = opts.drafts,
        .default_max_tokens = opts.max_tokens,
        .decode_tok_s = env.float("SIM_DECODE_TOK_S", 50),
        .prefill_tok_s = env.float("SIM_PREFILL_TOK_S", 2000),
        .ttft_base_ms = env.float("SIM_TTFT_BASE_MS", 50),
    };
    if (cfg.decode_tok_s <= 0 or cfg.prefill_tok_s <= 0) refuse("SIM_DECODE_TOK_S and SIM_PREFILL_TOK_S must be > 0", .{});

    const sampling = try std.fmt.allocPrint(arena, "temperature={s} top_p={s} top_k={s}", .{
        if (opts.temperature) |t| try std.fmt.allocPrint(arena, "{d}", .{t}) else "-",
        if (opts.top_p) |t| try std.fmt.allocPrint(arena, "{d}", .{t}) else "-",
        if (opts.top_k) |k| try std.fmt.allocPrint(arena, "{d}", .{k}) else "-",
    });
    log("started (TensorFold SIMULATOR {s}, patches={s}): model={s} name={s} context={d} parallel={d} world={d} thinking={} drafts={} max_tokens={d} {s} backend={t} streams={d} rdma={s} graphs={} side={} prefetch={} aio={}", .{
        recipe.sim_version, recipe.applied_patches, model_path,  name,            opts.context, opts.parallel,
        world,              opts.thinking,          opts.drafts, opts.max_tokens, sampling,     opts.backend,
        streams,            rdma orelse "-",        graphs.on,   side.on,         prefetch.on,  aio.on,
    });

    const http_address = common.parseAddress("--host", opts.host, opts.port);

    const found = model.check(io, arena, model_path);
    log("model checked: {s} ({d} shard(s), {d} tensors in the index)", .{ model_path, found.shards, found.tensors });

    var api_keys: []const []const u8 = &.{};
    if (opts.api_key_file) |path| {
        api_keys = readKeyFile(io, arena, path);
        log("API key required on /v1 routes, /tokenize and /metrics ({d} key(s) from {s})", .{ api_keys.len, path });
    }

    // native.zig open(): the rank cache, the kit, the kernel set, Engram, the vision kit.
    const cache_dir = env.str("TF_DS_RANK_CACHE") orelse refuse(no_rank_cache, .{});
    const cache = inputs.checkRankCache(io, arena, "TF_DS_RANK_CACHE", cache_dir, model_path, 0, world);
    const kit_dir = env.str("TF_DS_KIT") orelse refuse(no_kit, .{});
    const vision = inputs.modelHasVision(io, arena, model_path);
    const kit = inputs.checkKit(io, arena, "TF_DS_KIT", kit_dir, false, vision);
    if (kit.rope_rows < opts.context) refuse("the kit's RoPE tables hold {d} rows, --context asks for {d} (TF_DS_KIT {s}/rope.json)", .{ kit.rope_rows, opts.context, kit_dir });
    const kernels = env.str("TENSORFOLD_CUDA_KERNELS") orelse
        refuse("set TENSORFOLD_CUDA_KERNELS to the kernel set (the kit's aot/: aot.json and cubins/)", .{});
    inputs.checkKernels(io, "TENSORFOLD_CUDA_KERNELS", kernels);
    const engram = env.str("TF_DS_ENGRAM");
    const token_map = env.str("TF_DS_TOKEN_MAP");
    if (engram != null and token_map == null) refuse("TF_DS_ENGRAM is set but TF_DS_TOKEN_MAP is not: the Engram tables need the compressed token map (make_token_map.py)", .{});
    if (token_map != null and engram == null) refuse("TF_DS_TOKEN_MAP is set but TF_DS_ENGRAM is not: set both (the Engram tables and the compressed token map) or neither", .{});
    if (engram) |dir| inputs.checkEngram(io, "TF_DS_ENGRAM", dir);
    if (token_map) |path| _ = inputs.checkTokenMap(io, arena, "TF_DS_TOKEN_MAP", path);
    log("inputs checked: rank cache {s}, kit {s} (RoPE rows {d}{s}), kernels {s}, engram {s}", .{
        cache.file, kit_dir, kit.rope_rows, if (vision) ", vision" else "", kernels, engram orelse "off",
    });

    const caches = try arena.alloc([]const u8, world);
    for (caches, 0..) |*c, r| c.* = try arena.dupe(u8, &inputs.expectedCacheHash(io, arena, model_path, @intCast(r), world));
    const expect: fabric.Expect = .{
        .context = opts.context,
        .window = window,
        .rdma = rdma,
        .drafts = opts.drafts,
        .graphs = graphs,
        .side = side,
        .prefetch = prefetch,
        .aio = aio,
        .engram_json = &kit.engram_hash,
        .rope_rows = kit.rope_rows,
        .caches = caches,
        .model = model_path,
    };

    var rendezvous: fabric.Rendezvous = .{
        .io = io,
        .world = world,
        .peers = undefined,
        .fatal = &fatal_state,
        .grace_ms = grace_ms,
        .expect = &expect,
        .port_per_follower = true,
    };
    rendezvous.peers = try arena.alloc(@TypeOf(rendezvous.peers[0]), world);
    for (rendezvous.peers) |*p| p.* = .{};
    // The weights first, then the link: rank 0 listens only once it loaded (model.zig, see the life cycle above).
    log("loading weights (simulated: {d} ms)", .{load_delay_ms});
    common.sleepMs(io, load_delay_ms);
    rendezvous.start(master_address);
    const deadline = common.nowMs(io) + rendezvous_timeout_ms;
    while (rendezvous.joined() < world - 1) {
        if (common.nowMs(io) > deadline) {
            log("fatal: only {d} of {d} followers joined within {d} s; exiting", .{ rendezvous.joined(), world - 1, @divTrunc(rendezvous_timeout_ms, 1000) });
            return common.exit_peer_lost;
        }
        common.sleepMs(io, 50);
    }
    log("all {d} follower(s) joined", .{world - 1});
    // The rest of `Model.open` after the link (model.zig @09bc7166: NCCL's communicator over the link, the RDMA ring,
    // the kernels, the RoPE tables, the arena), during which a follower that fails its own open (NoEngramTables) is
    // lost before rank 0 serves: SIM_SETUP_DELAY_S.
    common.sleepMs(io, setup_delay_ms);

    // No Engram: `Model.open` returns error.NoEngramTables once the ranks are linked, before serving: every
    // checkpoint the engine serves has Engram layers (bertholomus/TensorFold zig/src/families/dsv41/config.zig
    // @88929d7419e0167b5ea2a4b9aa6ca1335356a6dc `checkShapes`: `c.engram_layers.len == 2`; model.zig
    // @09bc7166fdbc6697c4afa80355a7a3feb60d0cad: `} else if (c.engram_layers.slice().len > 0) return
    // error.NoEngramTables;`, after `prompt2d.Fan.open`). NATIVE's explain() has no words for it: the error name, and
    // the lab's hint. The followers then lose rank 0.
    if (engram == null) {
        log("fatal: loading the model failed: NoEngramTables (the checkpoint's Engram layers need their tables: set TF_DS_ENGRAM to deepseek-ai/DeepSeek-V4.1-Flash's shards 47 and 48 and TF_DS_TOKEN_MAP to the token map); exiting with status {d}", .{common.exit_peer_lost});
        return common.exit_peer_lost;
    }
    if (fatal_state.isSet()) {
        // The watchdog exits the process at the end of the grace period; do not open HTTP.
        while (true) common.sleepMs(io, 1000);
    }

    var listener = http_address.listen(io, .{ .reuse_address = true }) catch |err| {
        log("fatal: cannot listen on {f}: {t}", .{ http_address, err });
        return 1;
    };
    var server: http.Server = .{ .io = io, .gpa = init.gpa, .cfg = cfg, .fatal = &fatal_state };
    server.cfg.api_keys = api_keys;
    rendezvous.serving.store(true, .release);
    log("HTTP open on {f}: model {s}, context {d}, {d} slot(s), thinking={} drafts={}", .{ http_address, name, opts.context, opts.parallel, opts.thinking, opts.drafts });
    server.serve(&listener);
}

/// The keys of --api-key-file (ashhart/TensorFold docs/api.md): one a line, `label: key` entries,
/// `#` comments; "startup refuses a file readable by other users".
fn readKeyFile(io: std.Io, arena: std.mem.Allocator, path: []const u8) []const []const u8 {
    const stat = std.Io.Dir.cwd().statFile(io, path, .{}) catch |err|
        refuse("--api-key-file {s} cannot be read: {t}", .{ path, err });
    const mode: u32 = @intCast(@backingInt(stat.permissions) & 0o777);
    if (mode & 0o044 != 0) refuse("--api-key-file {s} is readable by other users (mode {o:0>4}): startup refuses a file readable by other users; set its permissions to 0600", .{ path, mode });
    const text = std.Io.Dir.cwd().readFileAlloc(io, path, arena, .limited(64 * 1024)) catch |err|
        refuse("--api-key-file {s} cannot be read: {t}", .{ path, err });
    const keys = http.parseKeys(arena, text) catch refuse("out of memory", .{});
    if (keys.len == 0) refuse("--api-key-file {s} holds no key", .{path});
    return keys;
}
