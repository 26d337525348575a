//! The per-rank weight file (the "rank cache", TF_DS_RANK_CACHE) of the lab engine SIMULATOR.
//!
//! The real file (bertholomus/TensorFold zig/src/families/dsv41/rank_cache.zig and rank_cache_main.zig
//! @59402086381a42c74d53053443224eec2790b4c5) is: this rank's slices of the checkpoint, then a JSON index
//! (a list of [key, dtype, shape, offset, bytes] rows, ", " between them), then the index's offset
//! (u64 little-endian) and the 8-byte magic "TFDSRK01". It is named rank<R>of<W>-<sha256 of the index,
//! 20 hex digits>.bin, and a folder must hold one file of a rank and world.
//!
//! The lab writes the same format, small: one row per tensor of the checkpoint's
//! model.safetensors.index.json weight_map (in name order), keyed "<tensor>|<shard>|part R of W",
//! dtype uint8, shape [8], its 8 data bytes the first bytes of the key's sha256. Everything here is
//! pure (no process exit): the tool (tf_dsv41_rank_cache.zig) and the engines (inputs.zig) word
//! their own refusals.

const std = @import("std");

const Io = std.Io;
const Allocator = std.mem.Allocator;

pub const magic = "TFDSRK01";
/// Data bytes of one lab row.
pub const row_bytes: u64 = 8;
/// Hex digits of the index's sha256 in the file name.
pub const hash_hex = 20;

/// What an operation gives back: the value, or why not (text in the arena).
pub fn Result(comptime T: type) type {
    return union(enum) { ok: T, problem: []const u8 };
}

/// The lab index and data for rank `rank` of `world`, from `model_dir`/model.safetensors.index.json.
pub const Built = struct {
    index: []const u8,
    data: []const u8,
    entries: usize,
};

/// Builds the index (and the data) the lab's tf-dsv41-rank-cache writes for this rank and world.
pub fn build(io: Io, arena: Allocator, model_dir: []const u8, rank: u32, world: u32) Allocator.Error!Result(Built) {
    const index_name = "model.safetensors.index.json";
    const path = try std.fs.path.join(arena, &.{ model_dir, index_name });
    const text = Io.Dir.cwd().readFileAlloc(io, path, arena, .limited(256 << 20)) catch |err|
        return .{ .problem = try std.fmt.allocPrint(arena, "{s} cannot be read: {t}", .{ path, err }) };
    return buildFromIndexJson(arena, text, path, rank, world);
}

pub fn buildFromIndexJson(arena: Allocator, text: []const u8, path: []const u8, rank: u32, world: u32) Allocator.Error!Result(Built) {
    const parsed = std.json.parseFromSliceLeaky(std.json.Value, arena, text, .{}) catch
        return .{ .problem = try std.fmt.allocPrint(arena, "{s} is not valid JSON", .{path}) };
    const weight_map = switch (parsed) {
        .object => |o| switch (o.get("weight_map") orelse .null) {
            .object => |m| m,
            else => return .{ .problem = try std.fmt.allocPrint(arena, "{s} has no weight_map object", .{path}) },
        },
        else => return .{ .problem = try std.fmt.allocPrint(arena, "{s} is not a JSON object", .{path}) },
    };
    const Pair = struct { tensor: []const u8, shard: []const u8 };
    const pairs = try arena.alloc(Pair, weight_map.count());
    var it = weight_map.iterator();
    var n: usize = 0;
    while (it.next()) |e| : (n += 1) {
        const shard = switch (e.value_ptr.*) {
            .string => |s| s,
            else => return .{ .problem = try std.fmt.allocPrint(arena, "{s}: weight_map entry {s} is not a file name", .{ path, e.key_ptr.* }) },
        };
        pairs[n] = .{ .tensor = e.key_ptr.*, .shard = shard };
    }
    if (n == 0) return .{ .problem = try std.fmt.allocPrint(arena, "{s}: weight_map names no tensor", .{path}) };
    std.mem.sort(Pair, pairs, {}, struct {
        fn lt(_: void, a: Pair, b: Pair) bool {
            return std.mem.lessThan(u8, a.tensor, b.tensor);
        }
    }.lt);

    var index: Io.Writer.Allocating = .init(arena);
    var data: Io.Writer.Allocating = .init(arena);
    const w = &index.writer;
    w.writeByte('[') catch return error.OutOfMemory;
    for (pairs, 0..) |p, i| {
        const key = try std.fmt.allocPrint(arena, "{s}|{s}|part {d} of {d}", .{ p.tensor, p.shard, rank, world });
        if (i > 0) w.writeAll(", ") catch return error.OutOfMemory;
        w.writeByte('[') catch return error.OutOfMemory;
        std.json.Stringify.value(key, .{}, w) catch return error.OutOfMemory;
        w.print(", \"uint8\", [{d}], {d}, {d}]", .{ row_bytes, i * row_bytes, row_bytes }) catch return error.OutOfMemory;
        var digest: [32]u8 = undefined;
        std.crypto.hash.sha2.Sha256.hash(key, &digest, .{});
        data.writer.writeAll(digest[0..row_bytes]) catch return error.OutOfMemory;
    }
    w.writeByte(']') catch return error.OutOfMemory;
    return .{ .ok = .{ .index = index.written(), .data = data.written(), .entries = pairs.len } };
}

/// The first `hash_hex` hex digits of the index's sha256 (the file name's key).
pub fn indexHash(index: []const u8) [hash_hex]u8 {
    var digest: [32]u8 = undefined;
    std.crypto.hash.sha2.Sha256.hash(index, &digest, .{});
    const hex = std.fmt.bytesToHex(digest, .lower);
    return hex[0..hash_hex].*;
}

/// rank<R>of<W>-<hash>.bin
pub fn fileName(arena: Allocator, rank: u32, world: u32, index: []const u8) Allocator.Error![]const u8 {
    const h = indexHash(index);
    return std.fmt.allocPrint(arena, "rank{d}of{d}-{s}.bin", .{ rank, world, &h });
}

/// The whole file: data, index, the index's offset (u64 little-endian), magic.
pub fn fileBytes(arena: Allocator, b: Built) Allocator.Error![]const u8 {
    const out = try arena.alloc(u8, b.data.len + b.index.len + 16);
    @memcpy(out[0..b.data.len], b.data);
    @memcpy(out[b.data.len..][0..b.index.len], b.index);
    std.mem.writeInt(u64, out[b.data.len + b.index.len ..][0..8], b.data.len, .little);
    @memcpy(out[out.len - 8 ..], magic);
    return out;
}

pub const Find = union(enum) {
    none,
    one: []const u8,
    two: [2][]const u8,
};

/// The files rank<R>of<W>-*.bin in `dir` (opened with iterate). Two or more: the first two found.
pub fn find(io: Io, arena: Allocator, dir: Io.Dir, rank: u32, world: u32) !Find {
    const prefix = try std.fmt.allocPrint(arena, "rank{d}of{d}-", .{ rank, world });
    var found: ?[]const u8 = null;
    var it = dir.iterate();
    while (try it.next(io)) |e| {
        if (e.kind != .file or !std.mem.startsWith(u8, e.name, prefix) or !std.mem.endsWith(u8, e.name, ".bin")) continue;
        const name = try arena.dupe(u8, e.name);
        if (found) |first| return .{ .two = .{ first, name } };
        found = name;
    }
    return if (found) |f| .{ .one = f } else .none;
}

/// The index a file holds, checked: long enough, the magic at its end, the offset inside it.
pub fn readIndex(io: Io, arena: Allocator, dir: Io.Dir, name: []const u8) Allocator.Error!Result([]const u8) {
    const bytes = dir.readFileAlloc(io, name, arena, .limited(1 << 30)) catch |err|
        return .{ .problem = try std.fmt.allocPrint(arena, "cannot be read: {t}", .{err}) };
    return parseFile(arena, bytes);
}

pub fn parseFile(arena: Allocator, bytes: []const u8) Allocator.Error!Result([]const u8) {
    if (bytes.len < 16 or !std.mem.eql(u8, bytes[bytes.len - 8 ..], magic))
        return .{ .problem = "is not a rank cache (no " ++ magic ++ " magic at its end)" };
    const at = std.mem.readInt(u64, bytes[bytes.len - 16 ..][0..8], .little);
    if (at > bytes.len - 16) return .{ .problem = try std.fmt.allocPrint(arena, "is damaged: its index offset {d} is past its end", .{at}) };
    return .{ .ok = bytes[@intCast(at) .. bytes.len - 16] };
}

/// The `hash_hex` digits of a file name rank<R>of<W>-<hash>.bin (empty when the name has none).
pub fn nameHash(name: []const u8) []const u8 {
    const dash = std.mem.findScalarLast(u8, name, '-') orelse return "";
    if (!std.mem.endsWith(u8, name, ".bin")) return "";
    return name[dash + 1 .. name.len - 4];
}

const testing = std.testing;

test "lab index rows, file name and file format" {
    var arena_state = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena_state.deinit();
    const a = arena_state.allocator();
    const index_json =
        \\{"weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors", "embed.weight": "model-00001-of-00002.safetensors"}}
    ;
    const r = try buildFromIndexJson(a, index_json, "x", 1, 2);
    const b = r.ok;
    try testing.expectEqual(@as(usize, 2), b.entries);
    try testing.expectEqualStrings(
        "[[\"embed.weight|model-00001-of-00002.safetensors|part 1 of 2\", \"uint8\", [8], 0, 8], " ++
            "[\"lm_head.weight|model-00002-of-00002.safetensors|part 1 of 2\", \"uint8\", [8], 8, 8]]",
        b.index,
    );
    try testing.expectEqual(@as(usize, 16), b.data.len);
    const bytes = try fileBytes(a, b);
    try testing.expectEqualStrings(b.index, (try parseFile(a, bytes)).ok);
    const name = try fileName(a, 1, 2, b.index);
    try testing.expect(std.mem.startsWith(u8, name, "rank1of2-"));
    try testing.expectEqual(@as(usize, hash_hex), nameHash(name).len);
    // another rank, another index
    const r0 = try buildFromIndexJson(a, index_json, "x", 0, 2);
    try testing.expect(!std.mem.eql(u8, r0.ok.index, b.index));
    // damaged files
    try testing.expect((try parseFile(a, "short")) == .problem);
    var bad = try a.dupe(u8, bytes);
    bad[bad.len - 1] = 'X';
    try testing.expect((try parseFile(a, bad)) == .problem);
    try testing.expect((try buildFromIndexJson(a, "{\"weight_map\": {}}", "x", 0, 2)) == .problem);
    try testing.expect((try buildFromIndexJson(a, "[]", "x", 0, 2)) == .problem);
}
