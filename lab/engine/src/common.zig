//! Shared helpers of the lab engine SIMULATOR (see README.md): logging, environment knobs,
//! argument parsing, the shared fatal state and the version banner.

const std = @import("std");
const builtin = @import("builtin");
const build_options = @import("build_options");
const recipe = @import("recipe.zig");

const Io = std.Io;

/// Exit status for refusals at start (bad arguments, incomplete model directory, ...).
pub const exit_refused: u8 = 2;
/// Exit status when a peer of the tensor-parallel group was lost.
pub const exit_peer_lost: u8 = 1;

/// Prefix of every log line, e.g. "tensorfold-native[rank 0]". Set once in main.
pub var log_tag: []const u8 = "tensorfold-sim";

/// Writes one line to stderr (so `journalctl -u <unit>` shows it). Lines are formatted in a
/// local buffer first and written under the stderr lock, so threads never interleave.
pub fn log(comptime fmt: []const u8, args: anytype) void {
    var buf: [4096]u8 = undefined;
    var w: Io.Writer = .fixed(&buf);
    w.print("{s}: ", .{log_tag}) catch {};
    w.print(fmt, args) catch {};
    std.debug.print("{s}\n", .{w.buffered()});
}

/// Logs a refusal and exits with `exit_refused` (2).
pub fn refuse(comptime fmt: []const u8, args: anytype) noreturn {
    log("refusing to start: " ++ fmt, args);
    std.process.exit(exit_refused);
}

/// The one-line version banner printed by `--version` (both binaries).
pub fn printVersion(io: Io, program: []const u8) void {
    var buf: [1024]u8 = undefined;
    var fw: Io.File.Writer = .init(.stdout(), io, &buf);
    const w = &fw.interface;
    w.print("{s} {s} (TensorFold SIMULATOR for the sparkfold lab, not the real engine) patches={s} build: {s}\n", .{
        program, recipe.sim_version, recipe.applied_patches, build_options.build_info,
    }) catch {};
    w.flush() catch {};
}

/// Environment knobs. The map is read once in main (it is not thread safe).
pub const Env = struct {
    map: *const std.process.Environ.Map,

    pub fn str(env: Env, name: []const u8) ?[]const u8 {
        const v = env.map.get(name) orelse return null;
        const t = std.mem.trim(u8, v, " \t");
        return if (t.len == 0) null else t;
    }

    pub fn int(env: Env, name: []const u8, default: u64) u64 {
        const v = env.str(name) orelse return default;
        return std.fmt.parseInt(u64, v, 10) catch refuse("{s}={s} is not a non-negative integer", .{ name, v });
    }

    pub fn float(env: Env, name: []const u8, default: f64) f64 {
        const v = env.str(name) orelse return default;
        const f = std.fmt.parseFloat(f64, v) catch refuse("{s}={s} is not a number", .{ name, v });
        if (!std.math.isFinite(f) or f < 0) refuse("{s}={s} must be a finite number >= 0", .{ name, v });
        return f;
    }
};

pub fn parseUint(comptime T: type, what: []const u8, text: []const u8) T {
    return std.fmt.parseInt(T, text, 10) catch refuse("{s} must be a non-negative integer, got '{s}'", .{ what, text });
}

/// The dsv41 engine's address of rank 0 (TF_TP_MASTER, the follower's MASTER_IP): four dot-separated decimal parts,
/// each one byte, as bertholomus/TensorFold zig/src/families/dsv41/link.zig @03873553b56b51a916913447d4c244a300d36b59
/// `parseIp` reads it ("192.0.2.7" as four bytes): no name (`localhost`), no IPv6. Its errors are the engine's:
/// BadAddress for too few or too many parts, InvalidCharacter or Overflow for a part that is no byte.
pub fn parseIpv4(text: []const u8) ![4]u8 {
    var bytes: [4]u8 = undefined;
    var parts = std.mem.splitScalar(u8, text, '.');
    var n: usize = 0;
    while (parts.next()) |part| : (n += 1) {
        if (n == bytes.len) return error.BadAddress;
        bytes[n] = try std.fmt.parseInt(u8, part, 10);
    }
    if (n != bytes.len) return error.BadAddress;
    return bytes;
}

test "rank 0's address is four bytes, as link.zig's parseIp reads it" {
    try std.testing.expectEqual([4]u8{ 192, 168, 100, 1 }, try parseIpv4("192.168.100.1"));
    try std.testing.expectError(error.BadAddress, parseIpv4("192.168.100"));
    try std.testing.expectError(error.BadAddress, parseIpv4("1.2.3.4.5"));
    try std.testing.expectError(error.InvalidCharacter, parseIpv4("localhost"));
    try std.testing.expectError(error.InvalidCharacter, parseIpv4("::1"));
    try std.testing.expectError(error.Overflow, parseIpv4("192.168.100.256"));
}

/// Parses a literal IPv4/IPv6 address ("localhost" means 127.0.0.1). The simulator does no
/// DNS: the recipes pass addresses.
pub fn parseAddress(what: []const u8, host: []const u8, port: u16) Io.net.IpAddress {
    const h = if (std.mem.eql(u8, host, "localhost")) "127.0.0.1" else host;
    return Io.net.IpAddress.parse(h, port) catch refuse("{s} '{s}' is not an IP address", .{ what, host });
}

/// Milliseconds on the monotonic clock.
pub fn nowMs(io: Io) i64 {
    return Io.Clock.awake.now(io).toMilliseconds();
}

/// Seconds since the Unix epoch (for OpenAI's `created` fields).
pub fn unixSeconds(io: Io) i64 {
    return Io.Clock.real.now(io).toSeconds();
}

pub fn sleepMs(io: Io, ms: i64) void {
    if (ms <= 0) return;
    io.sleep(.fromMilliseconds(ms), .awake) catch {};
}

/// Process-wide fatal state of rank 0: set once when a follower is lost. /health answers 503
/// with `message()` from then on, and the watchdog exits the process after the grace period.
pub const Fatal = struct {
    flag: std.atomic.Value(bool) = .init(false),
    claimed: std.atomic.Value(bool) = .init(false),
    since_ms: i64 = 0,
    buf: [256]u8 = undefined,
    len: usize = 0,

    /// Records the first fatal error only; later ones are ignored. Returns true for the first.
    pub fn set(f: *Fatal, io: Io, comptime fmt: []const u8, args: anytype) bool {
        if (f.claimed.swap(true, .acq_rel)) return false;
        var w: Io.Writer = .fixed(&f.buf);
        w.print(fmt, args) catch {};
        f.len = w.buffered().len;
        f.since_ms = nowMs(io);
        f.flag.store(true, .release);
        return true;
    }

    pub fn isSet(f: *const Fatal) bool {
        return f.flag.load(.acquire);
    }

    pub fn message(f: *const Fatal) []const u8 {
        return f.buf[0..f.len];
    }
};

test "Env parses integers and floats" {
    var map = std.process.Environ.Map.init(std.testing.allocator);
    defer map.deinit();
    try map.put("A", "12");
    try map.put("B", "0.5");
    const env: Env = .{ .map = &map };
    try std.testing.expectEqual(@as(u64, 12), env.int("A", 3));
    try std.testing.expectEqual(@as(u64, 3), env.int("MISSING", 3));
    try std.testing.expectEqual(@as(f64, 0.5), env.float("B", 1));
}

/// The container personalities (vllm, tensorfold, sglang) run as PID 1 of their container, where the kernel drops a
/// signal that has no handler: SIGTERM from `podman stop` did nothing, and every stop waited its whole --time and then
/// killed. The real programs are servers (uvicorn) that shut down on SIGTERM; so does the lab, exiting 0 as a graceful
/// shutdown does. Not for the host ranks: under systemd SIGTERM's default action is already that shutdown.
pub fn exitOnTerm() void {
    if (std.posix.Sigaction == void) return;
    const act: std.posix.Sigaction = .{
        .handler = .{ .handler = onTerm },
        .mask = std.posix.sigemptyset(),
        .flags = 0,
    };
    std.posix.sigaction(.TERM, &act, null);
}

fn onTerm(_: std.posix.SIG) callconv(.c) void {
    // exit_group: async-signal-safe, and it ends every thread (the server's workers too).
    std.os.linux.exit_group(0);
}
