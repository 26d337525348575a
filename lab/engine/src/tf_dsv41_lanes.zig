//! tf-dsv41-lanes: a follower rank (1..WORLD-1) of the lab engine SIMULATOR.
//!
//! THIS IS NOT TENSORFOLD. It accepts the real follower's command line, checks the model
//! directory, connects to rank 0 over TCP (retrying until rank 0 listens), says hello with
//! its rank and then keeps the connection: a heartbeat line every second. It exits 1 when
//! rank 0 goes away (connection closed, or no heartbeat for 3 s).
//!
//!   tf-dsv41-lanes MODEL CACHE RANK WORLD MASTER_IP PORT KIT [--pool N] [--engram DIR]
//!                  [--rdma HCA0,HCA1]
//!   tf-dsv41-lanes --version
//!
//! CACHE, KIT, --pool and --rdma are recorded in the log only. --engram DIR must exist.
//! Environment: SIM_RENDEZVOUS_TIMEOUT_S (600): give up when rank 0 never listens.

const std = @import("std");
const common = @import("common.zig");
const model = @import("model.zig");
const fabric = @import("fabric.zig");
const recipe = @import("recipe.zig");

const log = common.log;

const usage =
    \\usage: tf-dsv41-lanes MODEL CACHE RANK WORLD MASTER_IP PORT KIT [--pool N] [--engram DIR] [--rdma HCA0,HCA1]
    \\       tf-dsv41-lanes --version
    \\(TensorFold SIMULATOR for the sparkfold lab; see lab/engine/README.md)
    \\
;

pub fn main(init: std.process.Init) !u8 {
    const io = init.io;
    const arena = init.arena.allocator();
    const args = try init.minimal.args.toSlice(arena);
    common.log_tag = "tf-dsv41-lanes";

    if (args.len >= 2 and std.mem.eql(u8, args[1], "--version")) {
        common.printVersion(io, "tf-dsv41-lanes");
        return 0;
    }
    if (args.len >= 2 and (std.mem.eql(u8, args[1], "--help") or std.mem.eql(u8, args[1], "-h"))) {
        std.debug.print("{s}", .{usage});
        return 0;
    }

    var positional: [7][]const u8 = undefined;
    var n_positional: usize = 0;
    var pool: []const u8 = "-";
    var engram: ?[]const u8 = null;
    var rdma: []const u8 = "-";
    var i: usize = 1;
    while (i < args.len) : (i += 1) {
        const arg: []const u8 = args[i];
        if (!std.mem.startsWith(u8, arg, "--")) {
            if (n_positional == positional.len) {
                std.debug.print("{s}", .{usage});
                common.refuse("unexpected argument '{s}'", .{arg});
            }
            positional[n_positional] = arg;
            n_positional += 1;
            continue;
        }
        const eq = std.mem.findScalar(u8, arg, '=');
        const flag = if (eq) |e| arg[0..e] else arg;
        const value: ?[]const u8 = if (eq) |e| arg[e + 1 ..] else if (i + 1 < args.len and !std.mem.startsWith(u8, args[i + 1], "--")) blk: {
            i += 1;
            break :blk args[i];
        } else null;
        if (std.mem.eql(u8, flag, "--pool")) {
            pool = value orelse common.refuse("--pool needs a value", .{});
            _ = common.parseUint(u64, "--pool", pool);
        } else if (std.mem.eql(u8, flag, "--engram")) {
            engram = value orelse common.refuse("--engram needs a directory", .{});
        } else if (std.mem.eql(u8, flag, "--rdma")) {
            rdma = value orelse common.refuse("--rdma needs HCA names", .{});
        } else {
            log("note: option {s} is not simulated; ignored", .{flag});
        }
    }
    if (n_positional != positional.len) {
        std.debug.print("{s}", .{usage});
        common.refuse("expected 7 arguments (MODEL CACHE RANK WORLD MASTER_IP PORT KIT), got {d}", .{n_positional});
    }
    const model_path = positional[0];
    const cache = positional[1];
    const rank = common.parseUint(u32, "RANK", positional[2]);
    const world = common.parseUint(u32, "WORLD", positional[3]);
    const master_ip = positional[4];
    const port = common.parseUint(u16, "PORT", positional[5]);
    const kit = positional[6];
    if (world < 2) common.refuse("WORLD must be at least 2 for a follower, got {d}", .{world});
    if (rank < 1 or rank >= world) common.refuse("RANK must be in 1..{d}, got {d}", .{ world - 1, rank });
    if (port == 0) common.refuse("PORT must not be 0", .{});

    common.log_tag = try std.fmt.allocPrint(arena, "tf-dsv41-lanes[rank {d}]", .{rank});
    log("started (TensorFold SIMULATOR {s}, patches={s}): model={s} cache={s} rank={d} world={d} master={s}:{d} kit={s} pool={s} engram={s} rdma={s}", .{
        recipe.sim_version, recipe.applied_patches, model_path, cache, rank, world, master_ip, port, kit, pool, engram orelse "-", rdma,
    });

    const master = common.parseAddress("MASTER_IP", master_ip, port);
    const found = model.check(io, arena, model_path);
    if (engram) |dir_path| {
        var dir = std.Io.Dir.cwd().openDir(io, dir_path, .{}) catch |err|
            common.refuse("--engram directory {s} cannot be opened: {t}", .{ dir_path, err });
        dir.close(io);
    }
    log("model checked: {s} ({d} shard(s)); connecting to rank 0 at {f}", .{ model_path, found.shards, master });

    const env: common.Env = .{ .map = init.environ_map };
    var follower: fabric.Follower = .{
        .io = io,
        .rank = rank,
        .world = world,
        .kit = kit,
        .master = master,
        .connect_timeout_ms = @intFromFloat(env.float("SIM_RENDEZVOUS_TIMEOUT_S", 600) * 1000),
    };
    follower.run();
}
