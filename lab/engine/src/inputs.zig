//! The run-time inputs beyond the checkpoint that the lab engine SIMULATOR checks before it starts, as
//! the real dsv41 programs need them (bertholomus/TensorFold zig/src/families/dsv41/native.zig
//! @1a3d97e30112d58ffdb4dc07677d7222fa6af3c5, lanes_main.zig @d6047e5dfd7a7921cd6acfbb3a9b3c05e0b0f04b,
//! rank_cache.zig @59402086381a42c74d53053443224eec2790b4c5): the rank cache, the kernel kit, the kernel
//! set, the Engram directory and the token map. Every failure refuses the start (exit 2) with a message
//! naming what is missing. Files are checked for existence (and the small JSON files for their content);
//! nothing is loaded.
//!
//! The lab kit (what the lab's Hub fixture serves; layout of bertholomus/deepseek-v4.1-tensorfold-tp2-2xgb10
//! kit/ @5e90ec9302149049e8f019ea035827cb24c206f8, with rope.json standing for the tables' row count):
//!   aot/aot.json, aot/cubins/*.cubin   the kernel set (TENSORFOLD_CUDA_KERNELS on rank 0)
//!   cubins/*.cubin                     the served extension cubins
//!   rope.json {"rows": N}, rope-cos.f32, rope-sin.f32   the RoPE tables, N rows
//!   engram.json
//!   vision/torch_fmha_sm120.cubin, vision/gate_bias_vl.safetensors   (a vision checkpoint's, rank 0)
//!   MANIFEST, tools/verify_kit.sh      (checked by verify_kit.sh, not by the engines)

const std = @import("std");
const common = @import("common.zig");
const rank_cache = @import("rank_cache.zig");

const Io = std.Io;
const Allocator = std.mem.Allocator;
const refuse = common.refuse;

/// The Engram directory's files: deepseek-ai/DeepSeek-V4.1-Flash's last two shards (the Engram tables),
/// their index and the config.
pub const engram_files = [_][]const u8{
    "model-00047-of-00048.safetensors",
    "model-00048-of-00048.safetensors",
    "model.safetensors.index.json",
    "config.json",
};

/// The "format" of the lab token map (lab/engine/tools/dsv41-zig/inputs/make_token_map.py).
pub const token_map_format = "sparkfold-lab-token-map";

pub const vision_files = [_][]const u8{ "vision/torch_fmha_sm120.cubin", "vision/gate_bias_vl.safetensors" };

pub const Kit = struct {
    rope_rows: u64,
    /// sha256 of engram.json, 16 hex digits (compared between the ranks at the rendezvous).
    engram_hash: [16]u8,
};

fn openDir(io: Io, what: []const u8, path: []const u8, iterate: bool) Io.Dir {
    return Io.Dir.cwd().openDir(io, path, .{ .iterate = iterate }) catch |err| switch (err) {
        error.FileNotFound => refuse("{s} {s} does not exist", .{ what, path }),
        error.NotDir => refuse("{s} {s} is not a directory", .{ what, path }),
        else => refuse("{s} {s} cannot be opened: {t}", .{ what, path, err }),
    };
}

fn requireFile(io: Io, dir: Io.Dir, what: []const u8, path: []const u8, name: []const u8) void {
    const stat = dir.statFile(io, name, .{}) catch |err| switch (err) {
        error.FileNotFound, error.NotDir => refuse("{s} {s} has no {s}", .{ what, path, name }),
        else => refuse("{s} {s}: {s} cannot be read: {t}", .{ what, path, name, err }),
    };
    if (stat.kind != .file) refuse("{s} {s}: {s} is not a regular file", .{ what, path, name });
}

/// True when `dir`/`sub` holds at least one regular file ending in `suffix`.
fn hasFileWithSuffix(io: Io, dir: Io.Dir, sub: []const u8, suffix: []const u8) bool {
    var d = dir.openDir(io, sub, .{ .iterate = true }) catch return false;
    defer d.close(io);
    var it = d.iterate();
    while (it.next(io) catch return false) |e| {
        if (e.kind == .file and std.mem.endsWith(u8, e.name, suffix)) return true;
    }
    return false;
}

/// A kernel set (the kit's aot/): aot.json and at least one cubins/*.cubin.
pub fn checkKernels(io: Io, what: []const u8, path: []const u8) void {
    var dir = openDir(io, what, path, false);
    defer dir.close(io);
    requireFile(io, dir, what, path, "aot.json");
    if (!hasFileWithSuffix(io, dir, "cubins", ".cubin")) refuse("{s} {s} has no cubins/*.cubin", .{ what, path });
}

/// The kernel kit. `with_aot`: the kit's aot/ too (a follower reads its kernels there; rank 0 reads
/// TENSORFOLD_CUDA_KERNELS). `vision`: the checkpoint reads images (rank 0 runs the tower).
pub fn checkKit(io: Io, arena: Allocator, what: []const u8, path: []const u8, with_aot: bool, vision: bool) Kit {
    var dir = openDir(io, what, path, false);
    defer dir.close(io);
    if (with_aot) {
        requireFile(io, dir, what, path, "aot/aot.json");
        if (!hasFileWithSuffix(io, dir, "aot/cubins", ".cubin")) refuse("{s} {s} has no aot/cubins/*.cubin", .{ what, path });
    }
    if (!hasFileWithSuffix(io, dir, "cubins", ".cubin")) refuse("{s} {s} has no cubins/*.cubin", .{ what, path });
    for ([_][]const u8{ "rope.json", "rope-cos.f32", "rope-sin.f32", "engram.json" }) |name| requireFile(io, dir, what, path, name);
    const rope_text = dir.readFileAlloc(io, "rope.json", arena, .limited(64 * 1024)) catch |err|
        refuse("{s} {s}: rope.json cannot be read: {t}", .{ what, path, err });
    const rows = parseRopeRows(arena, rope_text) orelse
        refuse("{s} {s}: rope.json is not {{\"rows\": N}} (the RoPE tables' row count)", .{ what, path });
    const engram = dir.readFileAlloc(io, "engram.json", arena, .limited(64 << 20)) catch |err|
        refuse("{s} {s}: engram.json cannot be read: {t}", .{ what, path, err });
    if (vision) {
        for (vision_files) |name| {
            const st = dir.statFile(io, name, .{}) catch null;
            if (st == null or st.?.kind != .file) refuse(
                "this checkpoint reads images: its kit (TF_DS_KIT) needs vision/torch_fmha_sm120.cubin and vision/gate_bias_vl.safetensors ({s} {s} has no {s})",
                .{ what, path, name },
            );
        }
    }
    var digest: [32]u8 = undefined;
    std.crypto.hash.sha2.Sha256.hash(engram, &digest, .{});
    const hex = std.fmt.bytesToHex(digest, .lower);
    return .{ .rope_rows = rows, .engram_hash = hex[0..16].* };
}

pub fn parseRopeRows(arena: Allocator, text: []const u8) ?u64 {
    const v = std.json.parseFromSliceLeaky(std.json.Value, arena, text, .{}) catch return null;
    const obj = switch (v) {
        .object => |o| o,
        else => return null,
    };
    return switch (obj.get("rows") orelse return null) {
        .integer => |i| if (i > 0) @intCast(i) else null,
        else => null,
    };
}

/// The Engram directory (TF_DS_ENGRAM on rank 0, --engram on a follower).
pub fn checkEngram(io: Io, what: []const u8, path: []const u8) void {
    var dir = openDir(io, what, path, false);
    defer dir.close(io);
    for (engram_files) |name| {
        const st = dir.statFile(io, name, .{}) catch null;
        if (st == null or st.?.kind != .file) refuse(
            "{s} {s} has no {s} (the Engram tables: deepseek-ai/DeepSeek-V4.1-Flash shards 47 and 48, their index and config.json)",
            .{ what, path, name },
        );
    }
}

/// The vLLM overlay's Engram folder (--hf-overrides engram_table_dir) is read through its
/// model.safetensors.index.json, so every shard that index names must be in the folder. MiaAI's start.sh never
/// mounts the raw download, whose index names all 48 shards: it mounts the slim folder prepare_engram_src.py
/// builds (MiaAI-Lab/DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks scripts/prepare_engram_src.py
/// @c08f50f2ef59233816fd0f4f26d112653e0ae23a: shards 47 and 48 hard-linked, a weight_map of only the
/// *.engram.embed.{weight,scale} tensors). The lab's words: the overlay's own error is not published.
pub fn checkEngramIndex(io: Io, arena: Allocator, what: []const u8, path: []const u8) void {
    const index = std.fs.path.join(arena, &.{ path, "model.safetensors.index.json" }) catch refuse("out of memory", .{});
    const text = Io.Dir.cwd().readFileAlloc(io, index, arena, .limited(64 << 20)) catch |err|
        refuse("{s} {s} cannot be read: {t}", .{ what, index, err });
    const parsed = std.json.parseFromSliceLeaky(std.json.Value, arena, text, .{}) catch |err|
        refuse("{s} {s} is not valid JSON: {t}", .{ what, index, err });
    const map = switch (parsed) {
        .object => |o| switch (o.get("weight_map") orelse refuse("{s} {s} has no weight_map", .{ what, index })) {
            .object => |m| m,
            else => refuse("{s} {s}: weight_map is not an object", .{ what, index }),
        },
        else => refuse("{s} {s} is not a JSON object", .{ what, index }),
    };
    var dir = openDir(io, what, path, false);
    defer dir.close(io);
    var seen: std.StringArrayHashMapUnmanaged(void) = .empty;
    var absent: usize = 0;
    var first: []const u8 = "";
    var it = map.iterator();
    while (it.next()) |entry| {
        const shard = switch (entry.value_ptr.*) {
            .string => |s| s,
            else => refuse("{s} {s}: weight_map entry {s} is not a file name", .{ what, index, entry.key_ptr.* }),
        };
        const gop = seen.getOrPut(arena, shard) catch refuse("out of memory", .{});
        if (gop.found_existing) continue;
        const st = dir.statFile(io, shard, .{}) catch null;
        if (st == null or st.?.kind != .file) {
            if (absent == 0) first = shard;
            absent += 1;
        }
    }
    if (absent > 0) refuse(
        "{s} {s}: model.safetensors.index.json names {d} of {d} shards that are not in the folder (first: {s}); " ++
            "mount the slim Engram folder (shards 47 and 48 and an index of the embed tables only, as " ++
            "prepare_engram_src.py builds it), not the raw download",
        .{ what, path, absent, seen.count(), first },
    );
}

/// The token map (TF_DS_TOKEN_MAP, --token-map): the JSON make_token_map.py writes. Returns its vocab_size.
pub fn checkTokenMap(io: Io, arena: Allocator, what: []const u8, path: []const u8) u64 {
    const text = Io.Dir.cwd().readFileAlloc(io, path, arena, .limited(256 << 20)) catch |err|
        refuse("{s} {s} cannot be read: {t}", .{ what, path, err });
    return parseTokenMap(arena, text) orelse
        refuse("{s} {s} is not a token map made by make_token_map.py ({{\"format\": \"{s}\", \"vocab_size\": N, \"map\": [N ids]}})", .{ what, path, token_map_format });
}

pub fn parseTokenMap(arena: Allocator, text: []const u8) ?u64 {
    const v = std.json.parseFromSliceLeaky(std.json.Value, arena, text, .{}) catch return null;
    const obj = switch (v) {
        .object => |o| o,
        else => return null,
    };
    const format = switch (obj.get("format") orelse return null) {
        .string => |s| s,
        else => return null,
    };
    if (!std.mem.eql(u8, format, token_map_format)) return null;
    const n: u64 = switch (obj.get("vocab_size") orelse return null) {
        .integer => |i| if (i > 0) @intCast(i) else return null,
        else => return null,
    };
    const map = switch (obj.get("map") orelse return null) {
        .array => |a| a.items,
        else => return null,
    };
    if (map.len != n) return null;
    for (map) |x| switch (x) {
        .integer => |i| if (i < 0) return null,
        else => return null,
    };
    return n;
}

pub const Cache = struct {
    file: []const u8,
    /// The index hash, `rank_cache.hash_hex` hex digits (the file name's key).
    hash: [rank_cache.hash_hex]u8,
};

/// The rank cache of rank `rank` of `world` in `path` (exactly one rank<R>of<W>-*.bin), checked against
/// the model directory: the magic, the name's hash and the index the lab tool makes from `model_dir`.
pub fn checkRankCache(io: Io, arena: Allocator, what: []const u8, path: []const u8, model_dir: []const u8, rank: u32, world: u32) Cache {
    var dir = openDir(io, what, path, true);
    defer dir.close(io);
    const found = rank_cache.find(io, arena, dir, rank, world) catch |err|
        refuse("{s} {s} cannot be listed: {t}", .{ what, path, err });
    const name = switch (found) {
        .none => refuse("no rank cache file rank{d}of{d}-*.bin in {s}: make it with node_inputs.sh", .{ rank, world, path }),
        .two => |t| refuse("{s} holds two rank cache files for rank {d} of {d} ({s}, {s}): the lane refuses a folder with two; remove the stale one", .{ path, rank, world, t[0], t[1] }),
        .one => |n| n,
    };
    const file = std.fs.path.join(arena, &.{ path, name }) catch refuse("out of memory", .{});
    const index = switch (rank_cache.readIndex(io, arena, dir, name) catch refuse("out of memory", .{})) {
        .ok => |i| i,
        .problem => |p| refuse("rank cache {s} {s}", .{ file, p }),
    };
    const hash = rank_cache.indexHash(index);
    if (!std.mem.eql(u8, rank_cache.nameHash(name), &hash))
        refuse("rank cache {s} is damaged: its name does not match its index (sha256 {s})", .{ file, &hash });
    const expected = switch (rank_cache.build(io, arena, model_dir, rank, world) catch refuse("out of memory", .{})) {
        .ok => |b| b,
        .problem => |p| refuse("the rank cache cannot be checked against the model: {s}", .{p}),
    };
    if (!std.mem.eql(u8, expected.index, index))
        refuse("rank cache {s} was made from another checkpoint (its index is not the one {s}/model.safetensors.index.json gives rank {d} of {d})", .{ file, model_dir, rank, world });
    return .{ .file = file, .hash = hash };
}

/// The rank cache hash a rank of `world` must have for `model_dir` (rank 0 checks the followers' with it).
pub fn expectedCacheHash(io: Io, arena: Allocator, model_dir: []const u8, rank: u32, world: u32) [rank_cache.hash_hex]u8 {
    const b = switch (rank_cache.build(io, arena, model_dir, rank, world) catch refuse("out of memory", .{})) {
        .ok => |b| b,
        .problem => |p| refuse("{s}", .{p}),
    };
    return rank_cache.indexHash(b.index);
}

/// True when config.json declares a vision tower (config.zig @88929d7419e0167b5ea2a4b9aa6ca1335356a6dc:
/// `vision = top.get("vision_config") != null`).
pub fn modelHasVision(io: Io, arena: Allocator, model_dir: []const u8) bool {
    const path = std.fs.path.join(arena, &.{ model_dir, "config.json" }) catch return false;
    const text = Io.Dir.cwd().readFileAlloc(io, path, arena, .limited(4 << 20)) catch return false;
    const v = std.json.parseFromSliceLeaky(std.json.Value, arena, text, .{}) catch return false;
    return switch (v) {
        .object => |o| o.get("vision_config") != null,
        else => false,
    };
}

const testing = std.testing;

test "rope.json and the token map" {
    var arena_state = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena_state.deinit();
    const a = arena_state.allocator();
    try testing.expectEqual(@as(?u64, 1048576), parseRopeRows(a, "{\"rows\": 1048576}"));
    try testing.expectEqual(@as(?u64, null), parseRopeRows(a, "{\"rows\": 0}"));
    try testing.expectEqual(@as(?u64, null), parseRopeRows(a, "[1]"));
    try testing.expectEqual(@as(?u64, 3), parseTokenMap(a, "{\"format\": \"sparkfold-lab-token-map\", \"vocab_size\": 3, \"map\": [0, 1, 1]}"));
    try testing.expectEqual(@as(?u64, null), parseTokenMap(a, "{\"format\": \"other\", \"vocab_size\": 1, \"map\": [0]}"));
    try testing.expectEqual(@as(?u64, null), parseTokenMap(a, "{\"format\": \"sparkfold-lab-token-map\", \"vocab_size\": 2, \"map\": [0]}"));
}
