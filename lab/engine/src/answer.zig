//! Replies and tokens of the lab engine SIMULATOR. Deterministic on purpose: the same
//! request always gets the same reply, whatever the temperature and however many requests
//! run at once, so the smoke checks the recipes use (17 * 23, 17*19, 19 + 23, counting, needle-in-a-haystack
//! passphrases, identical greedy output across concurrent runs) have exact answers.
//!
//! A "token" is a whitespace-separated word, for prompts and replies alike.

const std = @import("std");

const Allocator = std.mem.Allocator;
const whitespace = &std.ascii.whitespace;

/// Number of tokens (whitespace-separated words) in `text`.
pub fn countTokens(text: []const u8) usize {
    var n: usize = 0;
    var it = std.mem.tokenizeAny(u8, text, whitespace);
    while (it.next()) |_| n += 1;
    return n;
}

/// The id of one token: a stable hash of the word (FNV-1a), kept under a 128k vocabulary.
pub fn tokenId(word: []const u8) u32 {
    return std.hash.Fnv1a_32.hash(word) % 128000;
}

pub const Reply = struct {
    /// The reply, at most `max_tokens` words joined by single spaces.
    text: []const u8,
    completion_tokens: usize,
    /// "stop" when the whole reply fit in max_tokens, "length" when it was cut.
    finish_reason: []const u8,
};

/// Builds the reply to a request.
/// `texts` are the contents of all messages (or the prompt) in order, `last_user` the last
/// user message (or the prompt). Rules, first match wins:
///  1. `last_user` contains "What is A * B?" or "What is A + B?" (integers): "A * B = P" or "A + B = S" (the
///     recipes' smoke questions: 17 * 23, the vLLM overlay's 17*19, the SGLang ring's 19 + 23).
///  2. "passphrase" appears anywhere: "The passphrases are: X, Y, Z." with every word that
///     follows "passphrase:" in the texts, in order of appearance.
///  3. `last_user` contains "count from 1 to N": "1 2 3 ... N".
///  4. otherwise "counting 1 2 3 ..." up to max_tokens words.
pub fn build(arena: Allocator, texts: []const []const u8, last_user: []const u8, max_tokens: usize) Allocator.Error!Reply {
    if (findProduct(last_user)) |p| {
        const value = if (p.op == '*') @as(i128, p.a) * @as(i128, p.b) else @as(i128, p.a) + @as(i128, p.b);
        const full = try std.fmt.allocPrint(arena, "{d} {c} {d} = {d}", .{ p.a, p.op, p.b, value });
        return truncate(arena, full, max_tokens);
    }
    if (mentionsPassphrase(texts)) {
        var out: std.Io.Writer.Allocating = .init(arena);
        const w = &out.writer;
        var found: usize = 0;
        for (texts) |text| {
            var pos: usize = 0;
            while (nextPassphrase(text, &pos)) |word| {
                w.writeAll(if (found == 0) "The passphrases are: " else ", ") catch return error.OutOfMemory;
                w.writeAll(word) catch return error.OutOfMemory;
                found += 1;
            }
        }
        if (found == 0) {
            w.writeAll("I found no passphrases.") catch return error.OutOfMemory;
        } else {
            w.writeAll(".") catch return error.OutOfMemory;
        }
        return truncate(arena, out.written(), max_tokens);
    }
    if (findCountTo(last_user)) |n| {
        return numbers(arena, "", n, max_tokens);
    }
    return numbers(arena, "counting", null, max_tokens);
}

/// "prefix 1 2 3 ..." (or "1 2 3 ... limit" without prefix), at most max_tokens words.
fn numbers(arena: Allocator, prefix: []const u8, limit: ?u64, max_tokens: usize) Allocator.Error!Reply {
    var out: std.Io.Writer.Allocating = .init(arena);
    const w = &out.writer;
    var words: usize = 0;
    if (prefix.len > 0 and max_tokens > 0) {
        w.writeAll(prefix) catch return error.OutOfMemory;
        words = 1;
    }
    var i: u64 = 1;
    while (words < max_tokens) : (i += 1) {
        if (limit) |l| if (i > l) break;
        if (words > 0) w.writeByte(' ') catch return error.OutOfMemory;
        w.print("{d}", .{i}) catch return error.OutOfMemory;
        words += 1;
    }
    const complete = if (limit) |l| i > l else false;
    return .{ .text = out.written(), .completion_tokens = words, .finish_reason = if (complete) "stop" else "length" };
}

/// The first max_tokens words of `full`, joined by single spaces.
fn truncate(arena: Allocator, full: []const u8, max_tokens: usize) Allocator.Error!Reply {
    var out: std.Io.Writer.Allocating = .init(arena);
    const w = &out.writer;
    var words: usize = 0;
    var it = std.mem.tokenizeAny(u8, full, whitespace);
    while (it.next()) |word| {
        if (words == max_tokens) {
            return .{ .text = out.written(), .completion_tokens = words, .finish_reason = "length" };
        }
        if (words > 0) w.writeByte(' ') catch return error.OutOfMemory;
        w.writeAll(word) catch return error.OutOfMemory;
        words += 1;
    }
    return .{ .text = out.written(), .completion_tokens = words, .finish_reason = "stop" };
}

const Product = struct { a: i64, b: i64, op: u8 = '*' };

/// Finds "What is A * B?" or "What is A + B?" (case-insensitive "what is"; the last one that parses wins).
fn findProduct(text: []const u8) ?Product {
    const key = "what is ";
    var result: ?Product = null;
    var start: usize = 0;
    while (std.ascii.findIgnoreCasePos(text, start, key)) |at| {
        start = at + 1;
        var p = Parser{ .s = text, .i = at + key.len };
        p.spaces();
        const a = p.int() orelse continue;
        p.spaces();
        const op: u8 = if (p.eat('*')) '*' else if (p.eat('+')) '+' else continue;
        p.spaces();
        const b = p.int() orelse continue;
        p.spaces();
        if (!p.eat('?')) continue;
        result = .{ .a = a, .b = b, .op = op };
    }
    return result;
}

/// Finds "count from 1 to N" (case-insensitive) and returns N (at most 1,000,000).
fn findCountTo(text: []const u8) ?u64 {
    const key = "count from 1 to ";
    const at = std.ascii.findIgnoreCase(text, key) orelse return null;
    var p = Parser{ .s = text, .i = at + key.len };
    const n = p.int() orelse return null;
    if (n < 1 or n > 1_000_000) return null;
    return @intCast(n);
}

fn mentionsPassphrase(texts: []const []const u8) bool {
    for (texts) |t| {
        if (std.ascii.findIgnoreCase(t, "passphrase") != null) return true;
    }
    return false;
}

/// Returns the next word after "passphrase:" (case-insensitive) at or after `pos.*`, and
/// advances `pos`. The word is the run of non-space characters that follows, without
/// surrounding quotes or trailing punctuation.
fn nextPassphrase(text: []const u8, pos: *usize) ?[]const u8 {
    const key = "passphrase:";
    while (std.ascii.findIgnoreCasePos(text, pos.*, key)) |at| {
        var i = at + key.len;
        while (i < text.len and (text[i] == ' ' or text[i] == '\t')) i += 1;
        const begin = i;
        while (i < text.len and std.mem.findScalar(u8, whitespace, text[i]) == null) i += 1;
        pos.* = i;
        const word = std.mem.trim(u8, text[begin..i], "\"'`*()[]{}<>.,;:!?");
        if (word.len > 0) return word;
    }
    pos.* = text.len;
    return null;
}

const Parser = struct {
    s: []const u8,
    i: usize,

    fn spaces(p: *Parser) void {
        while (p.i < p.s.len and (p.s[p.i] == ' ' or p.s[p.i] == '\t')) p.i += 1;
    }

    fn eat(p: *Parser, c: u8) bool {
        if (p.i < p.s.len and p.s[p.i] == c) {
            p.i += 1;
            return true;
        }
        return false;
    }

    fn int(p: *Parser) ?i64 {
        const begin = p.i;
        if (p.i < p.s.len and p.s[p.i] == '-') p.i += 1;
        const digits = p.i;
        while (p.i < p.s.len and std.ascii.isDigit(p.s[p.i])) p.i += 1;
        if (p.i == digits) {
            p.i = begin;
            return null;
        }
        return std.fmt.parseInt(i64, p.s[begin..p.i], 10) catch null;
    }
};

const testing = std.testing;

fn expectReply(expected: []const u8, texts: []const []const u8, last: []const u8, max: usize) !void {
    var arena_state = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena_state.deinit();
    const r = try build(arena_state.allocator(), texts, last, max);
    try testing.expectEqualStrings(expected, r.text);
}

test "arithmetic" {
    try expectReply("17 * 23 = 391", &.{"What is 17 * 23?"}, "What is 17 * 23?", 64);
    try expectReply("-4 * 5 = -20", &.{"Quick: what is -4*5? Answer briefly."}, "Quick: what is -4*5? Answer briefly.", 64);
    try expectReply("17 * 23", &.{"What is 17 * 23?"}, "What is 17 * 23?", 3);
    // the vLLM overlay's and the SGLang ring's smoke questions (their recipes' smoke.prompt)
    const vllm = "What is 17*19? Reply with the integer only.";
    try expectReply("17 * 19 = 323", &.{vllm}, vllm, 32);
    const ring = "What is 19 + 23? Reply only with the number.";
    try expectReply("19 + 23 = 42", &.{ring}, ring, 32);
}

test "passphrases in order" {
    const hay = "intro passphrase: ALPHA-1. filler words passphrase: \"bravo\" more passphrase:charlie";
    try expectReply("The passphrases are: ALPHA-1, bravo, charlie.", &.{ hay, "List every passphrase in order." }, "List every passphrase in order.", 64);
    try expectReply("I found no passphrases.", &.{"Which passphrase?"}, "Which passphrase?", 64);
}

test "counting" {
    try expectReply("counting 1 2 3", &.{"hello"}, "hello", 4);
    try expectReply("1 2 3 4 5", &.{"Please count from 1 to 5."}, "Please count from 1 to 5.", 100);
    var arena_state = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena_state.deinit();
    const r = try build(arena_state.allocator(), &.{"x"}, "x", 10);
    try testing.expectEqual(@as(usize, 10), r.completion_tokens);
    try testing.expectEqualStrings("length", r.finish_reason);
}

test "tokens" {
    try testing.expectEqual(@as(usize, 3), countTokens("  a b\n\tc "));
    try testing.expectEqual(tokenId("hello"), tokenId("hello"));
}
