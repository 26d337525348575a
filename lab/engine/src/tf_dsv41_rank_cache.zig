//! tf-dsv41-rank-cache: the lab's maker of a rank's weight file (TF_DS_RANK_CACHE), for the lab engine
//! SIMULATOR. THIS IS NOT TENSORFOLD'S TOOL: it has its interface and refusals
//! (bertholomus/TensorFold zig/src/families/dsv41/rank_cache_main.zig
//! @59402086381a42c74d53053443224eec2790b4c5) and writes the real file format, but a small lab file
//! (see rank_cache.zig): one 8-byte row per tensor of the checkpoint's index, no weights.
//!
//!   tf-dsv41-rank-cache MODEL_DIR OUT_DIR RANK WORLD [--parity] [--no-dspark] [--index-only]
//!
//! WORLD is 1, 2 or 4, RANK below it; --parity needs WORLD 4 (else the message and the usage, exit 2).
//! Writes OUT_DIR/rank<R>of<W>-<sha256 of the index, 20 hex>.bin through the dot file
//! .rank<R>of<W>.partial, renamed when whole, and prints one JSON line
//! {"file": ..., "entries": n, "data_bytes": n, "index_bytes": n, "rank": r, "world": w, "parity": b, "dspark": b}.
//! Refuses (exit 1) when OUT_DIR already holds a file of this rank and world. --index-only prints the
//! index to stdout and writes nothing. --parity and --no-dspark are recorded in the JSON line only.

const std = @import("std");
const common = @import("common.zig");
const rank_cache = @import("rank_cache.zig");

const Io = std.Io;

const usage = "usage: tf-dsv41-rank-cache MODEL_DIR OUT_DIR RANK WORLD [--parity] [--no-dspark] [--index-only]\n";

fn fail(comptime fmt: []const u8, args: anytype) noreturn {
    std.debug.print(fmt ++ "\n", args);
    std.process.exit(1);
}

pub fn main(init: std.process.Init) !u8 {
    const io = init.io;
    const a = init.arena.allocator();
    const args = try init.minimal.args.toSlice(a);
    if (args.len >= 2 and std.mem.eql(u8, args[1], "--version")) {
        common.printVersion(io, "tf-dsv41-rank-cache");
        return 0;
    }
    if (args.len < 5) {
        std.debug.print("{s}", .{usage});
        return 2;
    }
    const rank = std.fmt.parseInt(u32, args[3], 10) catch |err| fail("error: {t}", .{err});
    const world = std.fmt.parseInt(u32, args[4], 10) catch |err| fail("error: {t}", .{err});
    var dspark = true;
    var parity = false;
    var index_only = false;
    for (args[5..]) |x| {
        if (std.mem.eql(u8, x, "--no-dspark")) {
            dspark = false;
        } else if (std.mem.eql(u8, x, "--parity")) {
            parity = true;
        } else if (std.mem.eql(u8, x, "--index-only")) {
            index_only = true;
        } else {
            std.debug.print("{s}", .{usage});
            return 2;
        }
    }
    if (!(world == 1 or world == 2 or world == 4) or rank >= world or (parity and world != 4)) {
        std.debug.print("WORLD is 1, 2 or 4, RANK below it; --parity needs WORLD 4\n{s}", .{usage});
        return 2;
    }
    const model_dir = args[1];
    const out_dir = args[2];
    const config = try std.fs.path.join(a, &.{ model_dir, "config.json" });
    Io.Dir.cwd().access(io, config, .{}) catch |err| fail("{s}: {t}", .{ config, err });
    const built = switch (try rank_cache.build(io, a, model_dir, rank, world)) {
        .ok => |b| b,
        .problem => |p| fail("{s}", .{p}),
    };

    var out_buf: [1 << 16]u8 = undefined;
    var out = Io.File.stdout().writer(io, &out_buf);
    if (index_only) {
        try out.interface.writeAll(built.index);
        try out.interface.flush();
        return 0;
    }

    var dir = Io.Dir.cwd().createDirPathOpen(io, out_dir, .{ .open_options = .{ .iterate = true } }) catch |err|
        fail("{s}: {t}", .{ out_dir, err });
    defer dir.close(io);
    switch (try rank_cache.find(io, a, dir, rank, world)) {
        .none => {},
        .one => |old| fail("{s} already holds {s}: remove it or name an empty OUT_DIR", .{ out_dir, old }),
        .two => |t| fail("{s} already holds {s}: remove it or name an empty OUT_DIR", .{ out_dir, t[0] }),
    }
    const partial = try std.fmt.allocPrint(a, ".rank{d}of{d}.partial", .{ rank, world });
    const bytes = try rank_cache.fileBytes(a, built);
    dir.writeFile(io, .{ .sub_path = partial, .data = bytes }) catch |err| {
        dir.deleteFile(io, partial) catch {};
        fail("{s}/{s}: {t}", .{ out_dir, partial, err });
    };
    const name = try rank_cache.fileName(a, rank, world, built.index);
    try dir.rename(partial, dir, name, io);
    try out.interface.print("{{\"file\": \"{s}\", \"entries\": {d}, \"data_bytes\": {d}, \"index_bytes\": {d}, \"rank\": {d}, \"world\": {d}, \"parity\": {}, \"dspark\": {}}}\n", .{
        name, built.entries, built.data.len, built.index.len, rank, world, parity, dspark,
    });
    try out.interface.flush();
    return 0;
}
