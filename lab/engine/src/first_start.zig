//! The inputs TensorFold's Python `deepseek-v41-tp2` engine writes on its first start, for the Zig engine of the TP2
//! recipe to read (lab engine SIMULATOR, `tensorfold serve --tp 2` personality). THIS IS NOT TensorFold.
//!
//! Sources:
//!   BUILD_INPUTS  bertholomus/TensorFold tools/dsv41-zig/build_inputs.sh @5e10970a1e2372313589641587bd6da85f070f05:
//!                 "The deepseek-v41-tp2 engine ... writes these on its first start, and the Zig engine reads them:
//!                 CACHE/tf-ds-rank/ this rank's weights in one file (~106 GB a rank) -> TF_DS_RANK_CACHE / CACHE_DIR;
//!                 CACHE/dsv41_token_map.json the Engram token map (~0.9 MB) -> TF_DS_TOKEN_MAP / --token-map"; it runs
//!                 the engine with `-v CACHE:/root/.cache -e TF_DS_RANK_CACHE=/root/.cache/tf-ds-rank -e TF_DS_ENGRAM=/engram`
//!                 and sets no TF_DS_TOKEN_MAP.
//!   RANK_CACHE    bertholomus/TensorFold zig/src/families/dsv41/rank_cache.zig @baac954edcce9868b76c03cc2ea64b03aac8cc6e:
//!                 "The Python lane's per-rank weight file (TF_DS_RANK_CACHE, weights.py RankCache)"; `find`: the file
//!                 "rank{r}of{w}-<key>.bin, the Python loader keeps one a split", two of one split: SeveralRankCaches.
//!   ENGINE_PY     the deepseek_v41 CUDA engine's DsEngine.__init__ (store id 71638881914; its repository and commit
//!                 are not shown by the index: UNVERIFIED pin): with Engram tables, the token map is
//!                 `TF_DS_TOKEN_MAP or Path.home() / ".cache" / "dsv41_token_map.json"`, read when it exists, else
//!                 made from MODEL/tokenizer.json and written (an OSError while writing is ignored); without them
//!                 rank 0 prints "[tensorfold] WARNING: no Engram tables (TF_DS_ENGRAM): output will be degraded".
//!
//! The lab writes the lab formats the lab's Zig engines check (rank_cache.zig, inputs.zig), so what the TP2 recipe's
//! Zig ranks read is what this first start made. Lab rules: a rank cache folder that already holds a file of this
//! split for another checkpoint, or two, is refused (exit 2) instead of being added to (the Zig engine would refuse
//! the folder later); an existing token map that is not one is refused.

const std = @import("std");
const common = @import("common.zig");
const inputs = @import("inputs.zig");
const rank_cache = @import("rank_cache.zig");

const Io = std.Io;
const Allocator = std.mem.Allocator;
const log = common.log;
const refuse = common.refuse;

/// BUILD_INPUTS: the token map's name in the engine's cache folder ($HOME/.cache).
pub const token_map_name = "dsv41_token_map.json";

/// The rank cache (TF_DS_RANK_CACHE) and, with Engram tables (TF_DS_ENGRAM), the token map, each written only when
/// absent, as the Python engine's first start does; a later start reads them.
pub fn write(io: Io, arena: Allocator, env: common.Env, model_dir: []const u8, rank: u32, world: u32) void {
    if (env.str("TF_DS_RANK_CACHE")) |dir| rankCache(io, arena, dir, model_dir, rank, world);
    const engram = env.str("TF_DS_ENGRAM") orelse {
        if (rank == 0) log("[tensorfold] WARNING: no Engram tables (TF_DS_ENGRAM): output will be degraded", .{});
        return;
    };
    inputs.checkEngram(io, "TF_DS_ENGRAM", engram);
    const path = env.str("TF_DS_TOKEN_MAP") orelse blk: {
        const home = env.str("HOME") orelse refuse("HOME is not set: the token map goes to $HOME/.cache/{s} (or set TF_DS_TOKEN_MAP)", .{token_map_name});
        break :blk std.fs.path.join(arena, &.{ home, ".cache", token_map_name }) catch refuse("out of memory", .{});
    };
    tokenMap(io, arena, path, model_dir);
}

fn rankCache(io: Io, arena: Allocator, path: []const u8, model_dir: []const u8, rank: u32, world: u32) void {
    var dir = Io.Dir.cwd().createDirPathOpen(io, path, .{ .open_options = .{ .iterate = true } }) catch |err|
        refuse("TF_DS_RANK_CACHE {s} cannot be made: {t}", .{ path, err });
    defer dir.close(io);
    const built = switch (rank_cache.build(io, arena, model_dir, rank, world) catch refuse("out of memory", .{})) {
        .ok => |b| b,
        .problem => |p| refuse("the rank cache cannot be made: {s}", .{p}),
    };
    const name = rank_cache.fileName(arena, rank, world, built.index) catch refuse("out of memory", .{});
    switch (rank_cache.find(io, arena, dir, rank, world) catch |err| refuse("TF_DS_RANK_CACHE {s} cannot be listed: {t}", .{ path, err })) {
        .none => {},
        .one => |old| {
            if (std.mem.eql(u8, old, name)) {
                log("[tensorfold] rank {d}: weights from the rank cache {s}/{s}", .{ rank, path, old });
                return;
            }
            refuse("TF_DS_RANK_CACHE {s} holds {s}, a rank cache of another checkpoint for rank {d} of {d}: remove it (the Zig engine refuses a folder with two)", .{ path, old, rank, world });
        },
        .two => |t| refuse("TF_DS_RANK_CACHE {s} holds two rank cache files for rank {d} of {d} ({s}, {s}): remove the stale one", .{ path, rank, world, t[0], t[1] }),
    }
    const partial = std.fmt.allocPrint(arena, ".rank{d}of{d}.partial", .{ rank, world }) catch refuse("out of memory", .{});
    const bytes = rank_cache.fileBytes(arena, built) catch refuse("out of memory", .{});
    dir.writeFile(io, .{ .sub_path = partial, .data = bytes }) catch |err| {
        dir.deleteFile(io, partial) catch {};
        refuse("TF_DS_RANK_CACHE {s}/{s} cannot be written: {t}", .{ path, partial, err });
    };
    dir.rename(partial, dir, name, io) catch |err| refuse("TF_DS_RANK_CACHE {s}/{s} cannot be renamed: {t}", .{ path, partial, err });
    log("[tensorfold] rank {d}: first start, wrote the rank cache {s}/{s} ({d} entries)", .{ rank, path, name, built.entries });
}

fn tokenMap(io: Io, arena: Allocator, path: []const u8, model_dir: []const u8) void {
    if (Io.Dir.cwd().readFileAlloc(io, path, arena, .limited(256 << 20))) |text| {
        if (inputs.parseTokenMap(arena, text) == null)
            refuse("the token map {s} is not one ({{\"format\": \"{s}\", \"vocab_size\": N, \"map\": [N ids]}}): remove it and start again", .{ path, inputs.token_map_format });
        log("[tensorfold] Engram token map from {s}", .{path});
        return;
    } else |err| switch (err) {
        error.FileNotFound => {},
        else => refuse("the token map {s} cannot be read: {t}", .{ path, err }),
    }
    const tok_path = std.fs.path.join(arena, &.{ model_dir, "tokenizer.json" }) catch refuse("out of memory", .{});
    const text = Io.Dir.cwd().readFileAlloc(io, tok_path, arena, .limited(256 << 20)) catch |err|
        refuse("{s} cannot be read: {t}", .{ tok_path, err });
    const doc = buildTokenMap(arena, text) catch |err| switch (err) {
        error.OutOfMemory => refuse("out of memory", .{}),
        error.NoTokens => refuse("{s} names no token (no model.vocab, no added_tokens)", .{tok_path}),
        error.BadJson => refuse("{s} is not a JSON object", .{tok_path}),
    };
    // ENGINE_PY: an OSError while writing the map is ignored (the map is made again at the next start).
    if (std.fs.path.dirname(path)) |parent| Io.Dir.cwd().createDirPath(io, parent) catch |err| {
        log("[tensorfold] the token map {s} was not written: {t}", .{ path, err });
        return;
    };
    Io.Dir.cwd().writeFile(io, .{ .sub_path = path, .data = doc }) catch |err| {
        log("[tensorfold] the token map {s} was not written: {t}", .{ path, err });
        return;
    };
    log("[tensorfold] first start, wrote the Engram token map {s}", .{path});
}

/// The byte-level "Ġ", sentencepiece "▁" and byte-level newline "Ċ" marks, read as spaces (make_token_map.py's).
const space_marks = [_][]const u8{ "\u{0120}", "\u{2581}", "\u{010a}" };

fn normalize(arena: Allocator, piece: []const u8) Allocator.Error![]const u8 {
    var text = try arena.dupe(u8, piece);
    for (space_marks) |mark| text = try std.mem.replaceOwned(u8, arena, text, mark, " ");
    const trimmed = std.mem.trim(u8, text, " \t\r\n");
    const out = try arena.alloc(u8, trimmed.len);
    for (trimmed, 0..) |c, i| out[i] = std.ascii.toLower(c);
    return out;
}

/// The lab token map of a tokenizer.json (make_token_map.py's format and numbering; ASCII lower case only, no NFKC).
pub fn buildTokenMap(arena: Allocator, text: []const u8) error{ OutOfMemory, NoTokens, BadJson }![]const u8 {
    const v = std.json.parseFromSliceLeaky(std.json.Value, arena, text, .{}) catch return error.BadJson;
    if (v != .object) return error.BadJson;
    var pieces: std.AutoHashMapUnmanaged(u64, []const u8) = .empty;
    var size: u64 = 0;
    if (v.object.get("model")) |m| if (m == .object) if (m.object.get("vocab")) |vocab| switch (vocab) {
        .object => |o| {
            var it = o.iterator();
            while (it.next()) |e| if (e.value_ptr.* == .integer and e.value_ptr.integer >= 0) {
                const id: u64 = @intCast(e.value_ptr.integer);
                try pieces.put(arena, id, e.key_ptr.*);
                size = @max(size, id + 1);
            };
        },
        .array => |a| for (a.items, 0..) |entry, id| {
            if (entry == .array and entry.array.items.len > 0 and entry.array.items[0] == .string) {
                try pieces.put(arena, id, entry.array.items[0].string);
                size = @max(size, id + 1);
            }
        },
        else => {},
    };
    if (v.object.get("added_tokens")) |added| if (added == .array) for (added.array.items) |t| {
        if (t != .object) continue;
        const id = t.object.get("id") orelse continue;
        const content = t.object.get("content") orelse continue;
        if (id != .integer or id.integer < 0 or content != .string) continue;
        try pieces.put(arena, @intCast(id.integer), content.string);
        size = @max(size, @as(u64, @intCast(id.integer)) + 1);
    };
    if (pieces.count() == 0) return error.NoTokens;
    var compressed: std.StringHashMapUnmanaged(u64) = .empty;
    var out: std.ArrayList(u8) = .empty;
    try out.print(arena, "{{\"format\": \"{s}\", \"vocab_size\": {d}, \"compressed_size\": ", .{ inputs.token_map_format, size });
    var map: std.ArrayList(u8) = .empty;
    var id: u64 = 0;
    while (id < size) : (id += 1) {
        const key = try normalize(arena, pieces.get(id) orelse "");
        const gop = try compressed.getOrPut(arena, key);
        if (!gop.found_existing) gop.value_ptr.* = compressed.count() - 1;
        try map.print(arena, "{s}{d}", .{ if (id > 0) ", " else "", gop.value_ptr.* });
    }
    try out.print(arena, "{d}, \"map\": [{s}]}}\n", .{ compressed.count(), map.items });
    return out.items;
}

test "the token map numbers normalized pieces in order of first appearance" {
    var arena: std.heap.ArenaAllocator = .init(std.testing.allocator);
    defer arena.deinit();
    const a = arena.allocator();
    const doc = try buildTokenMap(a, "{\"model\": {\"vocab\": {\"Hello\": 0, \"\u{0120}hello\": 1, \"x\": 3}}, \"added_tokens\": [{\"id\": 4, \"content\": \"<eos>\"}]}");
    try std.testing.expectEqualStrings("{\"format\": \"sparkfold-lab-token-map\", \"vocab_size\": 5, \"compressed_size\": 4, \"map\": [0, 0, 1, 2, 3]}\n", doc);
    try std.testing.expectEqual(@as(?u64, 5), inputs.parseTokenMap(a, doc));
    try std.testing.expectError(error.NoTokens, buildTokenMap(a, "{\"model\": {}}"));
}
