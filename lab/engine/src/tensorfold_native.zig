//! tensorfold-native: rank 0 of the lab engine SIMULATOR.
//!
//! THIS IS NOT TENSORFOLD. It is a small stand-in, written for the sparkfold.cluster lab and
//! tests, that accepts TensorFold's command line and environment and answers its HTTP API
//! with deterministic text at a simulated speed. No model is loaded and no GPU is used.
//!
//!   tensorfold-native serve MODEL --host H --port P --name NAME --context N --parallel N
//!                     [--api-key-file F]
//!   tensorfold-native --version
//!
//! Environment: TF_TP_WORLD (ranks including rank 0, default 1), TF_TP_MASTER (address to
//! listen on for followers; required when TF_TP_WORLD > 1), TF_TP_PORT (rendezvous port,
//! default 29500), and the simulator's knobs SIM_LOAD_DELAY_S (2), SIM_FOLLOWER_GRACE_S (5),
//! SIM_DECODE_TOK_S (50), SIM_PREFILL_TOK_S (2000), SIM_TTFT_BASE_MS (50),
//! SIM_RENDEZVOUS_TIMEOUT_S (600).
//!
//! Life cycle: check MODEL (exit 2 if incomplete) -> wait for the TF_TP_WORLD-1 followers
//! -> "load" for SIM_LOAD_DELAY_S -> open HTTP. Until then connections are refused, as with
//! the real engine. When a follower is lost, /health answers 503 and the process exits 1
//! after SIM_FOLLOWER_GRACE_S.

const std = @import("std");
const common = @import("common.zig");
const model = @import("model.zig");
const fabric = @import("fabric.zig");
const http = @import("http.zig");
const recipe = @import("recipe.zig");

const log = common.log;

const usage =
    \\usage: tensorfold-native serve MODEL --host H --port P --name NAME --context N --parallel N [--api-key-file F]
    \\       tensorfold-native --version
    \\(TensorFold SIMULATOR for the sparkfold lab; see lab/engine/README.md)
    \\
;

var fatal_state: common.Fatal = .{};

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
    if (args.len < 3 or !std.mem.eql(u8, args[1], "serve")) {
        std.debug.print("{s}", .{usage});
        common.refuse("expected `serve MODEL [options]`", .{});
    }

    const model_path: []const u8 = args[2];
    var host: []const u8 = "0.0.0.0";
    var port: u16 = 8000;
    var name: []const u8 = recipe.default_served_name;
    var context: u64 = 131072;
    var parallel: u32 = 4;
    var api_key_file: ?[]const u8 = null;

    var i: usize = 3;
    while (i < args.len) : (i += 1) {
        const arg: []const u8 = args[i];
        const eq = std.mem.findScalar(u8, arg, '=');
        const flag = if (eq) |e| arg[0..e] else arg;
        const known = [_][]const u8{ "--host", "--port", "--name", "--context", "--parallel", "--api-key-file" };
        var is_known = false;
        for (known) |k| is_known = is_known or std.mem.eql(u8, flag, k);
        if (!std.mem.startsWith(u8, arg, "--")) common.refuse("unexpected argument '{s}'", .{arg});
        if (!is_known) {
            // TensorFold has many more knobs (MTP drafts, thinking, KV pool, ...): accepted, not simulated.
            if (eq == null and i + 1 < args.len and !std.mem.startsWith(u8, args[i + 1], "--")) i += 1;
            log("note: option {s} is not simulated; ignored", .{flag});
            continue;
        }
        const value: []const u8 = if (eq) |e| arg[e + 1 ..] else blk: {
            i += 1;
            if (i >= args.len) common.refuse("{s} needs a value", .{flag});
            break :blk args[i];
        };
        if (std.mem.eql(u8, flag, "--host")) {
            host = value;
        } else if (std.mem.eql(u8, flag, "--port")) {
            port = common.parseUint(u16, "--port", value);
        } else if (std.mem.eql(u8, flag, "--name")) {
            name = value;
        } else if (std.mem.eql(u8, flag, "--context")) {
            context = common.parseUint(u64, "--context", value);
        } else if (std.mem.eql(u8, flag, "--parallel")) {
            parallel = common.parseUint(u32, "--parallel", value);
        } else if (std.mem.eql(u8, flag, "--api-key-file")) {
            api_key_file = value;
        }
    }
    if (context < 16) common.refuse("--context must be at least 16", .{});
    if (parallel < 1) common.refuse("--parallel must be at least 1", .{});

    const env: common.Env = .{ .map = init.environ_map };
    const world: u32 = @intCast(@min(env.int("TF_TP_WORLD", 1), 1024));
    if (world < 1) common.refuse("TF_TP_WORLD must be at least 1", .{});
    const tp_port = env.int("TF_TP_PORT", 29500);
    if (tp_port == 0 or tp_port > 65535) common.refuse("TF_TP_PORT={d} is not a port", .{tp_port});
    const load_delay_ms: i64 = @intFromFloat(env.float("SIM_LOAD_DELAY_S", 2) * 1000);
    const grace_ms: i64 = @intFromFloat(env.float("SIM_FOLLOWER_GRACE_S", 5) * 1000);
    const rendezvous_timeout_ms: i64 = @intFromFloat(env.float("SIM_RENDEZVOUS_TIMEOUT_S", 600) * 1000);
    const cfg: http.Config = .{
        .name = name,
        .context = context,
        .parallel = parallel,
        .api_key = null,
        .decode_tok_s = env.float("SIM_DECODE_TOK_S", 50),
        .prefill_tok_s = env.float("SIM_PREFILL_TOK_S", 2000),
        .ttft_base_ms = env.float("SIM_TTFT_BASE_MS", 50),
    };
    if (cfg.decode_tok_s <= 0 or cfg.prefill_tok_s <= 0) common.refuse("SIM_DECODE_TOK_S and SIM_PREFILL_TOK_S must be > 0", .{});

    log("started (TensorFold SIMULATOR {s}, patches={s}): model={s} name={s} context={d} parallel={d} world={d}", .{
        recipe.sim_version, recipe.applied_patches, model_path, name, context, parallel, world,
    });

    const http_address = common.parseAddress("--host", host, port);
    var master_address: ?std.Io.net.IpAddress = null;
    if (world > 1) {
        const master = env.str("TF_TP_MASTER") orelse common.refuse("TF_TP_WORLD={d} needs TF_TP_MASTER (the address followers connect to)", .{world});
        master_address = common.parseAddress("TF_TP_MASTER", master, @intCast(tp_port));
    }

    const found = model.check(io, arena, model_path);
    log("model checked: {s} ({d} shard(s), {d} tensors in the index)", .{ model_path, found.shards, found.tensors });

    var api_key: ?[]const u8 = null;
    if (api_key_file) |path| {
        const text = std.Io.Dir.cwd().readFileAlloc(io, path, arena, .limited(64 * 1024)) catch |err|
            common.refuse("--api-key-file {s} cannot be read: {t}", .{ path, err });
        const key = std.mem.trim(u8, text, &std.ascii.whitespace);
        if (key.len == 0) common.refuse("--api-key-file {s} is empty", .{path});
        api_key = key;
        log("API key required on /v1 routes (from {s})", .{path});
    }

    var rendezvous: fabric.Rendezvous = .{
        .io = io,
        .world = world,
        .peers = undefined,
        .fatal = &fatal_state,
        .grace_ms = grace_ms,
    };
    if (master_address) |address| {
        rendezvous.peers = try arena.alloc(@TypeOf(rendezvous.peers[0]), world);
        for (rendezvous.peers) |*p| p.* = .{};
        rendezvous.start(address);
        const deadline = common.nowMs(io) + rendezvous_timeout_ms;
        while (rendezvous.joined() < world - 1) {
            if (common.nowMs(io) > deadline) {
                log("fatal: only {d} of {d} followers joined within {d} s; exiting", .{ rendezvous.joined(), world - 1, @divTrunc(rendezvous_timeout_ms, 1000) });
                return common.exit_peer_lost;
            }
            common.sleepMs(io, 50);
        }
        log("all {d} follower(s) joined", .{world - 1});
    }

    log("loading weights (simulated: {d} ms)", .{load_delay_ms});
    common.sleepMs(io, load_delay_ms);
    if (fatal_state.isSet()) {
        // The watchdog exits the process at the end of the grace period; do not open HTTP.
        while (true) common.sleepMs(io, 1000);
    }

    var listener = http_address.listen(io, .{ .reuse_address = true }) catch |err| {
        log("fatal: cannot listen on {f}: {t}", .{ http_address, err });
        return 1;
    };
    var server: http.Server = .{ .io = io, .gpa = init.gpa, .cfg = cfg, .fatal = &fatal_state };
    server.cfg.api_key = api_key;
    rendezvous.serving.store(true, .release);
    log("HTTP open on {f}: model {s}, context {d}, {d} slot(s)", .{ http_address, name, context, parallel });
    server.serve(&listener);
}
