//! The command lines of the lab engine SIMULATOR, parsed as strictly as the real programs parse them.
//!
//! `tensorfold-native serve MODEL [flags]` (rank 0): the flags of the native server's `serve`
//! (ashhart/TensorFold zig/src/server/cli.zig @15f9fdd): --host --port --name --api-key-file --context
//! --parallel --thinking --no-thinking --no-drafts --max-tokens --temperature --top-p --top-k --backend
//! (auto|mlx|cuda|rocm); `--flag value` and `--flag=value`; anything else is refused the way argparse
//! refuses it: `tensorfold-native serve: error: unrecognized arguments: --foo`, exit 2.
//!
//! `tf-dsv41-lanes MODEL_DIR CACHE_DIR RANK WORLD MASTER_IP PORT KIT_DIR [--key value]...` (followers):
//! lanes_main.zig (bertholomus/TensorFold zig/src/families/dsv41/lanes_main.zig
//! @d6047e5dfd7a7921cd6acfbb3a9b3c05e0b0f04b): fewer than 7 positionals print the usage (exit 2); after
//! them only `--key value` pairs, an unknown key is `error.BadArgument` (exit 1). The TP4 branch's follower
//! (`-Dfamily=tp4`) also takes `--round-rows N` (16..48), `--streams N` (1..16) and `--context N`, the flags
//! bertholomus/deepseek-v4.1-tensorfold-tp4-4xgb10 scripts/serve.sh @6033ea48 passes it (FOLLOW_FLAGS in
//! config.env.example @64c3d74: "--round-rows 48 --streams 16 --pool 2097152 --context 1048576"); a key given
//! twice keeps its last value (the later --pool is the shared window). The TP2 follower refuses them.

const std = @import("std");

const Allocator = std.mem.Allocator;

pub const Backend = enum { auto, mlx, cuda, rocm };

pub const Serve = struct {
    model: []const u8 = "",
    host: []const u8 = "127.0.0.1",
    port: u16 = 8080,
    /// null: the recipe's default served name (recipe.zig).
    name: ?[]const u8 = null,
    api_key_file: ?[]const u8 = null,
    /// native.zig default_context: "The Python lane's default window".
    context: u64 = 262144,
    /// `--parallel auto` serves one request at a time on CUDA (ashhart docs/api.md).
    parallel: u32 = 4,
    thinking: bool = true,
    drafts: bool = true,
    max_tokens: u64 = 4096,
    temperature: ?f64 = null,
    top_p: ?f64 = null,
    top_k: ?i64 = null,
    backend: Backend = .auto,
};

pub const ServeResult = union(enum) {
    ok: Serve,
    help,
    /// argparse's error text (without the "tensorfold-native serve: error: " prefix).
    bad: []const u8,
};

const value_flags = [_][]const u8{ "--host", "--port", "--name", "--api-key-file", "--context", "--parallel", "--max-tokens", "--temperature", "--top-p", "--top-k", "--backend" };
const switch_flags = [_][]const u8{ "--thinking", "--no-thinking", "--no-drafts" };

fn member(list: []const []const u8, s: []const u8) bool {
    for (list) |x| if (std.mem.eql(u8, x, s)) return true;
    return false;
}

/// Parses the arguments after `serve`.
pub fn parseServe(arena: Allocator, args: []const []const u8) Allocator.Error!ServeResult {
    var s: Serve = .{};
    var have_model = false;
    var unrecognized: std.ArrayList([]const u8) = .empty;
    var i: usize = 0;
    while (i < args.len) : (i += 1) {
        const arg = args[i];
        if (std.mem.eql(u8, arg, "--help") or std.mem.eql(u8, arg, "-h")) return .help;
        if (!std.mem.startsWith(u8, arg, "-") or arg.len == 1) {
            if (!have_model) {
                s.model = arg;
                have_model = true;
            } else try unrecognized.append(arena, arg);
            continue;
        }
        const eq = std.mem.findScalar(u8, arg, '=');
        const flag = if (eq) |e| arg[0..e] else arg;
        if (member(&switch_flags, flag)) {
            if (eq != null) return .{ .bad = try std.fmt.allocPrint(arena, "argument {s}: ignored explicit argument '{s}'", .{ flag, arg[eq.? + 1 ..] }) };
            if (std.mem.eql(u8, flag, "--thinking")) s.thinking = true;
            if (std.mem.eql(u8, flag, "--no-thinking")) s.thinking = false;
            if (std.mem.eql(u8, flag, "--no-drafts")) s.drafts = false;
            continue;
        }
        if (!member(&value_flags, flag)) {
            try unrecognized.append(arena, arg);
            continue;
        }
        const value: []const u8 = if (eq) |e| arg[e + 1 ..] else blk: {
            if (i + 1 >= args.len or (std.mem.startsWith(u8, args[i + 1], "-") and args[i + 1].len > 1 and !isNumber(args[i + 1])))
                return .{ .bad = try std.fmt.allocPrint(arena, "argument {s}: expected one argument", .{flag}) };
            i += 1;
            break :blk args[i];
        };
        if (std.mem.eql(u8, flag, "--host")) {
            s.host = value;
        } else if (std.mem.eql(u8, flag, "--port")) {
            s.port = std.fmt.parseInt(u16, value, 10) catch return invalid(arena, flag, "int", value);
        } else if (std.mem.eql(u8, flag, "--name")) {
            s.name = value;
        } else if (std.mem.eql(u8, flag, "--api-key-file")) {
            s.api_key_file = value;
        } else if (std.mem.eql(u8, flag, "--context")) {
            s.context = std.fmt.parseInt(u64, value, 10) catch return invalid(arena, flag, "int", value);
        } else if (std.mem.eql(u8, flag, "--parallel")) {
            s.parallel = if (std.mem.eql(u8, value, "auto")) 1 else std.fmt.parseInt(u32, value, 10) catch
                return .{ .bad = try std.fmt.allocPrint(arena, "argument --parallel: invalid value: '{s}' (an integer or auto)", .{value}) };
        } else if (std.mem.eql(u8, flag, "--max-tokens")) {
            s.max_tokens = std.fmt.parseInt(u64, value, 10) catch return invalid(arena, flag, "int", value);
        } else if (std.mem.eql(u8, flag, "--temperature")) {
            s.temperature = parseFloat(value) orelse return invalid(arena, flag, "float", value);
        } else if (std.mem.eql(u8, flag, "--top-p")) {
            s.top_p = parseFloat(value) orelse return invalid(arena, flag, "float", value);
        } else if (std.mem.eql(u8, flag, "--top-k")) {
            s.top_k = std.fmt.parseInt(i64, value, 10) catch return invalid(arena, flag, "int", value);
        } else if (std.mem.eql(u8, flag, "--backend")) {
            s.backend = std.meta.stringToEnum(Backend, value) orelse
                return .{ .bad = try std.fmt.allocPrint(arena, "argument --backend: invalid choice: '{s}' (choose from auto, mlx, cuda, rocm)", .{value}) };
            // CLI (ashhart/TensorFold zig/src/server/cli.zig @15f9fddab6dcaa5e6c091e1e62a3ad738d0ce6f1): the flag's
            // choices are auto, mlx, cuda, rocm, but a Linux CUDA build honours only `backend_values` auto and cuda
            // (`native_values`), and refuses the others with these words.
            if (s.backend == .mlx or s.backend == .rocm)
                return .{ .bad = try std.fmt.allocPrint(arena, "--backend {s} is not served by the native engine; the Python engine 0.6.6 serves it: python -m pip install git+https://github.com/ashhart/TensorFold.git@v0.6.6", .{value}) };
        }
    }
    if (unrecognized.items.len > 0) {
        return .{ .bad = try std.fmt.allocPrint(arena, "unrecognized arguments: {s}", .{try std.mem.join(arena, " ", unrecognized.items)}) };
    }
    if (!have_model) return .{ .bad = "the following arguments are required: MODEL" };
    return .{ .ok = s };
}

fn isNumber(s: []const u8) bool {
    return parseFloat(s) != null;
}

fn parseFloat(s: []const u8) ?f64 {
    const f = std.fmt.parseFloat(f64, s) catch return null;
    return if (std.math.isFinite(f)) f else null;
}

fn invalid(arena: Allocator, flag: []const u8, kind: []const u8, value: []const u8) Allocator.Error!ServeResult {
    return .{ .bad = try std.fmt.allocPrint(arena, "argument {s}: invalid {s} value: '{s}'", .{ flag, kind, value }) };
}

/// lanes_main.zig's model.max_streams: a follower's --parallel is 1 .. 4.
pub const lanes_max_streams = 4;
/// native.zig default_context (the Python lane's default window): the pool when --pool is absent.
pub const default_pool: u64 = 262144;

pub const Lanes = struct {
    model: []const u8,
    cache: []const u8,
    rank_text: []const u8,
    world_text: []const u8,
    master: []const u8,
    port_text: []const u8,
    kit: []const u8,
    requests: ?[]const u8 = null,
    parallel: u64 = lanes_max_streams,
    pool: u64 = default_pool,
    drafts: bool = true,
    arena_gib: ?u64 = null,
    aio: bool = false,
    prefetch: bool = false,
    side: bool = false,
    graphs: bool = false,
    serial: bool = false,
    rdma: ?[]const u8 = null,
    profile: bool = false,
    engram: ?[]const u8 = null,
    token_map: ?[]const u8 = null,
    rdma_kernels: ?[]const u8 = null,
    /// TP4 only: a round's rows, the pool's streams, a request's positions at most.
    round_rows: ?u64 = null,
    streams: ?u64 = null,
    context: ?u64 = null,
};

pub const LanesResult = union(enum) {
    ok: Lanes,
    /// fewer than 7 positionals: print the usage, exit 2
    usage,
    /// a Zig error the real main returns (printed `error: <name>`, exit 1)
    zig_error: []const u8,
};

/// Parses the arguments after the program name, as lanes_main.zig does (`tp4`: the TP4 branch's table).
pub fn parseLanes(args: []const []const u8, tp4: bool) LanesResult {
    if (args.len < 7) return .usage;
    var o: Lanes = .{
        .model = args[0],
        .cache = args[1],
        .rank_text = args[2],
        .world_text = args[3],
        .master = args[4],
        .port_text = args[5],
        .kit = args[6],
    };
    var i: usize = 7;
    while (i < args.len) : (i += 2) {
        // lanes_main reads pairs while a value follows; the lab refuses a key left without one too.
        if (i + 1 >= args.len) return .{ .zig_error = "BadArgument" };
        const key = args[i];
        const val = args[i + 1];
        if (std.mem.eql(u8, key, "--requests")) {
            o.requests = val;
        } else if (std.mem.eql(u8, key, "--parallel")) {
            o.parallel = parseIntErr(val) catch |e| return .{ .zig_error = @errorName(e) };
        } else if (std.mem.eql(u8, key, "--pool")) {
            o.pool = parseIntErr(val) catch |e| return .{ .zig_error = @errorName(e) };
        } else if (std.mem.eql(u8, key, "--drafts")) {
            o.drafts = !std.mem.eql(u8, val, "0");
        } else if (std.mem.eql(u8, key, "--arena-gib")) {
            o.arena_gib = parseIntErr(val) catch |e| return .{ .zig_error = @errorName(e) };
        } else if (std.mem.eql(u8, key, "--aio")) {
            o.aio = !std.mem.eql(u8, val, "0");
        } else if (std.mem.eql(u8, key, "--prefetch")) {
            o.prefetch = !std.mem.eql(u8, val, "0");
        } else if (std.mem.eql(u8, key, "--side")) {
            o.side = !std.mem.eql(u8, val, "0");
        } else if (std.mem.eql(u8, key, "--graphs")) {
            o.graphs = !std.mem.eql(u8, val, "0");
        } else if (std.mem.eql(u8, key, "--serial")) {
            o.serial = !std.mem.eql(u8, val, "0");
        } else if (std.mem.eql(u8, key, "--rdma")) {
            o.rdma = val;
        } else if (std.mem.eql(u8, key, "--profile")) {
            o.profile = !std.mem.eql(u8, val, "0");
        } else if (std.mem.eql(u8, key, "--engram")) {
            o.engram = val;
        } else if (std.mem.eql(u8, key, "--token-map")) {
            o.token_map = val;
        } else if (std.mem.eql(u8, key, "--rdma-kernels")) {
            o.rdma_kernels = val;
        } else if (tp4 and std.mem.eql(u8, key, "--round-rows")) {
            o.round_rows = parseIntErr(val) catch |e| return .{ .zig_error = @errorName(e) };
        } else if (tp4 and std.mem.eql(u8, key, "--streams")) {
            o.streams = parseIntErr(val) catch |e| return .{ .zig_error = @errorName(e) };
        } else if (tp4 and std.mem.eql(u8, key, "--context")) {
            o.context = parseIntErr(val) catch |e| return .{ .zig_error = @errorName(e) };
        } else return .{ .zig_error = "BadArgument" };
    }
    if (o.parallel == 0 or o.parallel > lanes_max_streams) return .{ .zig_error = "BadArgument" };

    return .{ .ok = o };
}

fn parseIntErr(text: []const u8) !u64 {
    return std.fmt.parseInt(u64, text, 10);
}

const testing = std.testing;

fn serve(args: []const []const u8) !ServeResult {
    var arena_state = std.heap.ArenaAllocator.init(std.heap.page_allocator);
    // (leaked on purpose in the tests: the results point into the arena)
    return parseServe(arena_state.allocator(), args);
}

test "serve: the native server's flags, both spellings" {
    const r = try serve(&.{ "/m", "--host", "0.0.0.0", "--port=8000", "--context", "1048576", "--parallel", "4", "--no-thinking", "--no-drafts", "--max-tokens", "512", "--temperature", "0.6", "--top-p=0.95", "--top-k", "20", "--backend", "cuda", "--name", "dsv41" });
    const s = r.ok;
    try testing.expectEqualStrings("/m", s.model);
    try testing.expectEqualStrings("0.0.0.0", s.host);
    try testing.expectEqual(@as(u16, 8000), s.port);
    try testing.expectEqual(@as(u64, 1048576), s.context);
    try testing.expect(!s.thinking and !s.drafts);
    try testing.expectEqual(@as(u64, 512), s.max_tokens);
    try testing.expectEqual(Backend.cuda, s.backend);
    const d = (try serve(&.{"/m"})).ok;
    try testing.expectEqualStrings("127.0.0.1", d.host);
    try testing.expectEqual(@as(u16, 8080), d.port);
    try testing.expectEqual(@as(u64, 4096), d.max_tokens);
    try testing.expect(d.thinking and d.drafts);
    try testing.expectEqual(@as(u32, 1), (try serve(&.{ "/m", "--parallel", "auto" })).ok.parallel);
}

test "serve: refusals worded as argparse words them" {
    try testing.expectEqualStrings("unrecognized arguments: --foo 1 --bar=2", (try serve(&.{ "/m", "--foo", "1", "--bar=2" })).bad);
    try testing.expectEqualStrings("argument --backend: invalid choice: 'bogus' (choose from auto, mlx, cuda, rocm)", (try serve(&.{ "/m", "--backend", "bogus" })).bad);
    try testing.expect(std.mem.startsWith(u8, (try serve(&.{ "/m", "--backend", "rocm" })).bad, "--backend rocm is not served by the native engine"));
    try testing.expectEqualStrings("argument --port: expected one argument", (try serve(&.{ "/m", "--port" })).bad);
    try testing.expectEqualStrings("argument --port: invalid int value: 'x'", (try serve(&.{ "/m", "--port", "x" })).bad);
    try testing.expectEqualStrings("argument --no-drafts: ignored explicit argument '1'", (try serve(&.{ "/m", "--no-drafts=1" })).bad);
    try testing.expectEqualStrings("the following arguments are required: MODEL", (try serve(&.{"--no-drafts"})).bad);
}

test "lanes: positionals, then --key value pairs only" {
    const base = [_][]const u8{ "/m", "/c", "1", "2", "10.0.0.1", "29620", "/kit" };
    try testing.expect(parseLanes(base[0..6], false) == .usage);
    const ok = parseLanes(&(base ++ [_][]const u8{ "--pool", "1048576", "--graphs", "1", "--rdma", "a,b", "--engram", "/e", "--token-map", "/t" }), false).ok;
    try testing.expectEqual(@as(u64, 1048576), ok.pool);
    try testing.expect(ok.graphs and !ok.side and ok.drafts);
    try testing.expectEqualStrings("a,b", ok.rdma.?);
    try testing.expectEqual(default_pool, parseLanes(&base, false).ok.pool);
    try testing.expectEqualStrings("BadArgument", parseLanes(&(base ++ [_][]const u8{ "--bogus", "1" }), false).zig_error);
    try testing.expectEqualStrings("BadArgument", parseLanes(&(base ++ [_][]const u8{"--pool"}), false).zig_error);
    try testing.expectEqualStrings("BadArgument", parseLanes(&(base ++ [_][]const u8{"--pool=4"}), false).zig_error);
    try testing.expectEqualStrings("BadArgument", parseLanes(&(base ++ [_][]const u8{ "--parallel", "5" }), false).zig_error);
    try testing.expectEqualStrings("InvalidCharacter", parseLanes(&(base ++ [_][]const u8{ "--pool", "x" }), false).zig_error);
}

test "lanes: the TP4 follower's flags, refused by the TP2 follower" {
    const base = [_][]const u8{ "/m", "/c", "3", "4", "10.0.0.1", "29760", "/kit" };
    const tp4 = base ++ [_][]const u8{ "--pool", "1048576", "--rdma", "a,b", "--round-rows", "48", "--streams", "16", "--pool", "2097152", "--context", "1048576" };
    const ok = parseLanes(&tp4, true).ok;
    try testing.expectEqual(@as(u64, 2097152), ok.pool); // the later --pool wins
    try testing.expectEqual(@as(?u64, 48), ok.round_rows);
    try testing.expectEqual(@as(?u64, 16), ok.streams);
    try testing.expectEqual(@as(?u64, 1048576), ok.context);
    try testing.expectEqualStrings("BadArgument", parseLanes(&tp4, false).zig_error);
    try testing.expectEqualStrings("InvalidCharacter", parseLanes(&(base ++ [_][]const u8{ "--streams", "many" }), true).zig_error);
}
