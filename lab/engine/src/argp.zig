//! A small table-driven parser that refuses command lines the way Python's argparse refuses them, for the
//! lab engine's Python-program personalities (vllm_serve.zig, tensorfold_py.zig). The words are argparse's
//! (CPython Lib/argparse.py): "unrecognized arguments: ...", "argument --x: expected one argument",
//! "argument --x: invalid int value: 'y'", "argument --x: invalid choice: ...", "argument --x: ignored
//! explicit argument 'y'", "argument --x: expected at least one argument", "ambiguous option: --x could
//! match ...", "the following arguments are required: ...". Abbreviations (argparse's allow_abbrev, on by
//! default) are expanded when the table allows them.

const std = @import("std");

const Allocator = std.mem.Allocator;

pub const Kind = enum {
    /// one string value
    str,
    /// one integer (Python int())
    int,
    /// one integer as vLLM's `human_readable_int` reads it (vllm-project/vllm vllm/engine/arg_utils.py
    /// @99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b, the type of max_model_len, max_num_batched_tokens and
    /// kv_cache_memory_bytes): a plain int, or a number with k/m/g (powers of 1000, decimals allowed) or K/M/G
    /// (powers of 1024, whole numbers only); stored as the plain integer
    hint,
    /// one float
    float,
    /// one JSON value (the type is json.loads: argparse calls it "loads")
    json,
    /// store_true: no value
    flag,
    /// argparse.BooleanOptionalAction: --x and --no-x
    boolopt,
    /// nargs="+" integers
    ints,
    /// nargs="+" strings
    strs,
};

pub const Opt = struct {
    name: []const u8,
    kind: Kind,
    choices: ?[]const []const u8 = null,
    /// a short spelling, e.g. "-tp"
    short: ?[]const u8 = null,
};

pub const Options = struct {
    /// the program's words in the usage and errors, e.g. "vllm serve"
    prog: []const u8,
    /// the positional's name in "the following arguments are required"
    positional: []const u8,
    /// argparse's allow_abbrev
    abbrev: bool,
    /// vLLM's FlexibleArgumentParser: `--max_model_len` is `--max-model-len`
    underscores: bool = false,
    /// a program with options only (SGLang's launch_server): a bare word is unrecognized, none is required
    no_positional: bool = false,
};

pub const Parsed = struct {
    positional: []const u8 = "",
    /// canonical name -> its values in order (a flag stores "true"/"false")
    values: std.StringArrayHashMapUnmanaged(std.ArrayList([]const u8)) = .empty,

    /// The last value given for `name`, or null.
    pub fn get(p: *const Parsed, name: []const u8) ?[]const u8 {
        const list = p.values.get(name) orelse return null;
        return if (list.items.len == 0) null else list.items[list.items.len - 1];
    }

    pub fn all(p: *const Parsed, name: []const u8) []const []const u8 {
        const list = p.values.get(name) orelse return &.{};
        return list.items;
    }

    pub fn flag(p: *const Parsed, name: []const u8) bool {
        return std.mem.eql(u8, p.get(name) orelse "false", "true");
    }

    pub fn int(p: *const Parsed, name: []const u8, default: i64) i64 {
        return std.fmt.parseInt(i64, p.get(name) orelse return default, 10) catch unreachable;
    }
};

pub const Result = union(enum) {
    ok: Parsed,
    help,
    /// argparse's error text (without the "<prog>: error: " prefix)
    bad: []const u8,
};

fn isNegativeNumber(s: []const u8) bool {
    if (s.len < 2 or s[0] != '-') return false;
    _ = std.fmt.parseFloat(f64, s) catch return false;
    return true;
}

fn looksLikeOption(s: []const u8) bool {
    return s.len > 1 and s[0] == '-' and !isNegativeNumber(s);
}

const Match = struct { opt: *const Opt, negated: bool };

fn lookup(arena: Allocator, table: []const Opt, o: Options, flag: []const u8) Allocator.Error!union(enum) { one: Match, none, ambiguous: []const u8 } {
    for (table) |*opt| {
        if (std.mem.eql(u8, flag, opt.name)) return .{ .one = .{ .opt = opt, .negated = false } };
        if (opt.short) |s| if (std.mem.eql(u8, flag, s)) return .{ .one = .{ .opt = opt, .negated = false } };
        if (opt.kind == .boolopt and std.mem.startsWith(u8, flag, "--no-") and std.mem.eql(u8, flag[5..], opt.name[2..]))
            return .{ .one = .{ .opt = opt, .negated = true } };
    }
    if (!o.abbrev or !std.mem.startsWith(u8, flag, "--")) return .none;
    var found: std.ArrayList(Match) = .empty;
    var names: std.ArrayList([]const u8) = .empty;
    for (table) |*opt| {
        if (std.mem.startsWith(u8, opt.name, flag)) {
            try found.append(arena, .{ .opt = opt, .negated = false });
            try names.append(arena, opt.name);
        }
        if (opt.kind == .boolopt) {
            const neg = try std.fmt.allocPrint(arena, "--no-{s}", .{opt.name[2..]});
            if (std.mem.startsWith(u8, neg, flag)) {
                try found.append(arena, .{ .opt = opt, .negated = true });
                try names.append(arena, neg);
            }
        }
    }
    if (found.items.len == 1) return .{ .one = found.items[0] };
    if (found.items.len == 0) return .none;
    return .{ .ambiguous = try std.fmt.allocPrint(arena, "ambiguous option: {s} could match {s}", .{ flag, try std.mem.join(arena, ", ", names.items) }) };
}

/// vLLM's human_readable_int (see Kind.hint): the integer, or null when vLLM refuses the text.
pub fn humanReadableInt(text: []const u8) ?i64 {
    const value = std.mem.trim(u8, text, " \t\r\n");
    if (value.len == 0) return null;
    const last = value[value.len - 1];
    const decimal: ?i64 = switch (last) {
        'k' => 1000,
        'm' => 1000_000,
        'g' => 1000_000_000,
        else => null,
    };
    const binary: ?i64 = switch (last) {
        'K' => 1 << 10,
        'M' => 1 << 20,
        'G' => 1 << 30,
        else => null,
    };
    if (decimal == null and binary == null) return std.fmt.parseInt(i64, value, 10) catch null;
    const number = value[0 .. value.len - 1];
    // the number part: digits, at most one '.', digits after it (r"(\d+(?:\.\d+)?)")
    const dot = std.mem.findScalar(u8, number, '.');
    const whole = if (dot) |d| number[0..d] else number;
    const frac = if (dot) |d| number[d + 1 ..] else "";
    if (whole.len == 0 or (dot != null and frac.len == 0)) return null;
    for (whole) |c| if (!std.ascii.isDigit(c)) return null;
    for (frac) |c| if (!std.ascii.isDigit(c)) return null;
    if (decimal) |mult| {
        const f = std.fmt.parseFloat(f64, number) catch return null;
        const product = f * @as(f64, @floatFromInt(mult));
        if (!(product < 9.0e18)) return null;
        const n: i64 = @intFromFloat(product);
        return n;
    }
    if (dot != null) return null; // "Do not allow decimals with binary multipliers"
    const n = std.fmt.parseInt(i64, whole, 10) catch return null;
    return std.math.mul(i64, n, binary.?) catch null;
}

test "vLLM's human-readable integers" {
    try testing.expectEqual(@as(?i64, 600000), humanReadableInt("600k"));
    try testing.expectEqual(@as(?i64, 25600), humanReadableInt("25.6k"));
    try testing.expectEqual(@as(?i64, 2684354560), humanReadableInt("2560M"));
    try testing.expectEqual(@as(?i64, 1024), humanReadableInt("1K"));
    try testing.expectEqual(@as(?i64, 614400), humanReadableInt("614400"));
    try testing.expectEqual(@as(?i64, null), humanReadableInt("1.5K"));
    try testing.expectEqual(@as(?i64, null), humanReadableInt("600x"));
    try testing.expectEqual(@as(?i64, null), humanReadableInt("k"));
}

fn checkValue(arena: Allocator, opt: *const Opt, value: []const u8) Allocator.Error!?[]const u8 {
    switch (opt.kind) {
        .hint => if (humanReadableInt(value) == null)
            return try std.fmt.allocPrint(arena, "argument {s}: invalid human_readable_int value: '{s}'", .{ opt.name, value }),
        .int, .ints => _ = std.fmt.parseInt(i64, std.mem.trim(u8, value, " "), 10) catch
            return try std.fmt.allocPrint(arena, "argument {s}: invalid int value: '{s}'", .{ opt.name, value }),
        .float => {
            const f = std.fmt.parseFloat(f64, value) catch null;
            if (f == null) return try std.fmt.allocPrint(arena, "argument {s}: invalid float value: '{s}'", .{ opt.name, value });
        },
        .json => _ = std.json.parseFromSliceLeaky(std.json.Value, arena, value, .{}) catch
            return try std.fmt.allocPrint(arena, "argument {s}: invalid loads value: '{s}'", .{ opt.name, value }),
        else => {},
    }
    if (opt.choices) |choices| {
        for (choices) |c| if (std.mem.eql(u8, c, value)) return null;
        const quoted = opt.kind != .int;
        return try std.fmt.allocPrint(arena, "argument {s}: invalid choice: {s}{s}{s} (choose from {s})", .{
            opt.name, if (quoted) "'" else "", value, if (quoted) "'" else "", try std.mem.join(arena, ", ", choices),
        });
    }
    return null;
}

/// Parses `args` (after the program and its subcommand) against `table`: one positional, then options.
pub fn parse(arena: Allocator, table: []const Opt, o: Options, args: []const []const u8) Allocator.Error!Result {
    var p: Parsed = .{};
    var have_positional = false;
    var unrecognized: std.ArrayList([]const u8) = .empty;
    var i: usize = 0;
    while (i < args.len) : (i += 1) {
        const arg = args[i];
        if (std.mem.eql(u8, arg, "--help") or std.mem.eql(u8, arg, "-h")) return .help;
        if (!looksLikeOption(arg)) {
            if (!have_positional and !o.no_positional) {
                p.positional = arg;
                have_positional = true;
            } else try unrecognized.append(arena, arg);
            continue;
        }
        const eq = std.mem.findScalar(u8, arg, '=');
        var flag = if (eq) |e| arg[0..e] else arg;
        if (o.underscores and std.mem.startsWith(u8, flag, "--")) {
            const copy = try arena.dupe(u8, flag);
            std.mem.replaceScalar(u8, copy, '_', '-');
            flag = copy;
        }
        const m = switch (try lookup(arena, table, o, flag)) {
            .one => |m| m,
            .none => {
                try unrecognized.append(arena, arg);
                continue;
            },
            .ambiguous => |text| return .{ .bad = text },
        };
        const opt = m.opt;
        const gop = try p.values.getOrPut(arena, opt.name);
        if (!gop.found_existing) gop.value_ptr.* = .empty;
        switch (opt.kind) {
            .flag, .boolopt => {
                if (eq) |e| return .{ .bad = try std.fmt.allocPrint(arena, "argument {s}: ignored explicit argument '{s}'", .{ if (m.negated) flag else opt.name, arg[e + 1 ..] }) };
                try gop.value_ptr.append(arena, if (m.negated) "false" else "true");
            },
            .ints, .strs => {
                gop.value_ptr.clearRetainingCapacity();
                if (eq) |e| {
                    if (try checkValue(arena, opt, arg[e + 1 ..])) |bad| return .{ .bad = bad };
                    try gop.value_ptr.append(arena, arg[e + 1 ..]);
                    continue;
                }
                while (i + 1 < args.len and !looksLikeOption(args[i + 1])) {
                    i += 1;
                    if (try checkValue(arena, opt, args[i])) |bad| return .{ .bad = bad };
                    try gop.value_ptr.append(arena, args[i]);
                }
                if (gop.value_ptr.items.len == 0)
                    return .{ .bad = try std.fmt.allocPrint(arena, "argument {s}: expected at least one argument", .{opt.name}) };
            },
            else => {
                const value: []const u8 = if (eq) |e| arg[e + 1 ..] else blk: {
                    if (i + 1 >= args.len or looksLikeOption(args[i + 1]))
                        return .{ .bad = try std.fmt.allocPrint(arena, "argument {s}: expected one argument", .{opt.name}) };
                    i += 1;
                    break :blk args[i];
                };
                if (try checkValue(arena, opt, value)) |bad| return .{ .bad = bad };
                // a human-readable int is kept as the plain integer vLLM makes of it
                const stored = if (opt.kind == .hint) try std.fmt.allocPrint(arena, "{d}", .{humanReadableInt(value).?}) else value;
                try gop.value_ptr.append(arena, stored);
            },
        }
    }
    if (!have_positional and !o.no_positional) return .{ .bad = try std.fmt.allocPrint(arena, "the following arguments are required: {s}", .{o.positional}) };
    if (unrecognized.items.len > 0)
        return .{ .bad = try std.fmt.allocPrint(arena, "unrecognized arguments: {s}", .{try std.mem.join(arena, " ", unrecognized.items)}) };
    return .{ .ok = p };
}

const testing = std.testing;

test "argparse's refusals and abbreviations" {
    var arena_state = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena_state.deinit();
    const a = arena_state.allocator();
    const table = [_]Opt{
        .{ .name = "--port", .kind = .int },
        .{ .name = "--master", .kind = .str },
        .{ .name = "--master-port", .kind = .int },
        .{ .name = "--thinking", .kind = .boolopt },
        .{ .name = "--tp", .kind = .int, .choices = &.{ "1", "2" } },
        .{ .name = "--sizes", .kind = .ints },
        .{ .name = "--eager", .kind = .flag },
    };
    const o: Options = .{ .prog = "t", .positional = "model", .abbrev = true };
    const ok = (try parse(a, &table, o, &.{ "/m", "--port=8", "--master", "h", "--master-p", "9", "--no-think", "--sizes", "1", "2", "--eager", "--tp", "2" })).ok;
    try testing.expectEqualStrings("/m", ok.positional);
    try testing.expectEqualStrings("h", ok.get("--master").?);
    try testing.expectEqualStrings("9", ok.get("--master-port").?);
    try testing.expect(!ok.flag("--thinking") and ok.flag("--eager"));
    try testing.expectEqual(@as(usize, 2), ok.all("--sizes").len);
    try testing.expectEqualStrings("ambiguous option: --ma could match --master, --master-port", (try parse(a, &table, o, &.{ "/m", "--ma", "x" })).bad);
    try testing.expectEqualStrings("argument --tp: invalid choice: 4 (choose from 1, 2)", (try parse(a, &table, o, &.{ "/m", "--tp", "4" })).bad);
    try testing.expectEqualStrings("argument --port: invalid int value: 'x'", (try parse(a, &table, o, &.{ "/m", "--port", "x" })).bad);
    try testing.expectEqualStrings("argument --port: expected one argument", (try parse(a, &table, o, &.{ "/m", "--port" })).bad);
    try testing.expectEqualStrings("argument --eager: ignored explicit argument '1'", (try parse(a, &table, o, &.{ "/m", "--eager=1" })).bad);
    try testing.expectEqualStrings("unrecognized arguments: --bogus 1", (try parse(a, &table, o, &.{ "/m", "--bogus", "1" })).bad);
    try testing.expectEqualStrings("the following arguments are required: model", (try parse(a, &table, o, &.{"--eager"})).bad);
    const strict: Options = .{ .prog = "t", .positional = "model", .abbrev = false, .underscores = true };
    try testing.expectEqualStrings("unrecognized arguments: --mast h", (try parse(a, &table, strict, &.{ "/m", "--mast", "h" })).bad);
    try testing.expectEqualStrings("7", (try parse(a, &table, strict, &.{ "/m", "--master_port", "7" })).ok.get("--master-port").?);
    // Options only (SGLang's launch_server): no positional is required, a bare word is unrecognized.
    const options_only: Options = .{ .prog = "t", .positional = "", .abbrev = true, .no_positional = true };
    try testing.expectEqualStrings("8", (try parse(a, &table, options_only, &.{ "--port", "8" })).ok.get("--port").?);
    try testing.expectEqualStrings("unrecognized arguments: /m", (try parse(a, &table, options_only, &.{ "/m", "--port", "8" })).bad);
}
