//! Model directory check of the lab engine SIMULATOR: both binaries refuse to start (exit 2,
//! with a message naming the file) when the directory lacks config.json or tokenizer.json,
//! or when a shard named in model.safetensors.index.json's weight_map is missing. Nothing is
//! loaded: the shards are only checked for existence.

const std = @import("std");
const common = @import("common.zig");

const Io = std.Io;

pub const Summary = struct {
    shards: usize,
    tensors: usize,
};

/// Checks `path` and returns what it found; exits with status 2 when the model is incomplete.
pub fn check(io: Io, arena: std.mem.Allocator, path: []const u8) Summary {
    var dir = Io.Dir.cwd().openDir(io, path, .{}) catch |err|
        common.refuse("model directory {s} cannot be opened: {t}", .{ path, err });
    defer dir.close(io);

    for ([_][]const u8{ "config.json", "tokenizer.json" }) |name| {
        requireFile(io, dir, path, name, "");
    }

    const index_name = "model.safetensors.index.json";
    const index_text = dir.readFileAlloc(io, index_name, arena, .limited(256 << 20)) catch |err| switch (err) {
        error.FileNotFound => {
            // A single-file checkpoint has no index.
            requireFile(io, dir, path, "model.safetensors", " (there is no " ++ index_name ++ " either)");
            return .{ .shards = 1, .tensors = 0 };
        },
        else => common.refuse("{s}/{s} cannot be read: {t}", .{ path, index_name, err }),
    };
    const parsed = std.json.parseFromSliceLeaky(std.json.Value, arena, index_text, .{}) catch |err|
        common.refuse("{s}/{s} is not valid JSON: {t}", .{ path, index_name, err });
    const weight_map = switch (parsed) {
        .object => |o| o.get("weight_map") orelse
            common.refuse("{s}/{s} has no weight_map", .{ path, index_name }),
        else => common.refuse("{s}/{s} is not a JSON object", .{ path, index_name }),
    };
    const map = switch (weight_map) {
        .object => |o| o,
        else => common.refuse("{s}/{s}: weight_map is not an object", .{ path, index_name }),
    };

    var seen: std.StringArrayHashMapUnmanaged(void) = .empty;
    var it = map.iterator();
    while (it.next()) |entry| {
        const shard = switch (entry.value_ptr.*) {
            .string => |s| s,
            else => common.refuse("{s}/{s}: weight_map entry {s} is not a file name", .{ path, index_name, entry.key_ptr.* }),
        };
        const gop = seen.getOrPut(arena, shard) catch common.refuse("out of memory", .{});
        if (gop.found_existing) continue;
        requireFile(io, dir, path, shard, " (named in " ++ index_name ++ " weight_map)");
    }
    if (seen.count() == 0) common.refuse("{s}/{s}: weight_map names no shard", .{ path, index_name });
    return .{ .shards = seen.count(), .tensors = map.count() };
}

fn requireFile(io: Io, dir: Io.Dir, path: []const u8, name: []const u8, comptime why: []const u8) void {
    const stat = dir.statFile(io, name, .{}) catch |err| switch (err) {
        error.FileNotFound => common.refuse("model file {s}/{s} is missing" ++ why, .{ path, name }),
        else => common.refuse("model file {s}/{s} cannot be read: {t}" ++ why, .{ path, name, err }),
    };
    if (stat.kind != .file) common.refuse("model file {s}/{s} is not a regular file" ++ why, .{ path, name });
}
