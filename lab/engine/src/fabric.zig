//! The tensor-parallel rendezvous of the lab engine SIMULATOR, over plain TCP. (The real
//! engine uses NCCL over the ConnectX-7 link; here only the life cycle is simulated.)
//!
//! Protocol, one text line per message:
//!   follower -> rank 0   "HELLO <rank> <world> <kit>"
//!   rank 0 -> follower   "WELCOME <world>"  or  "REJECT <reason>" (then rank 0 closes)
//!   both ways            "HB" every second (heartbeat)
//!   rank 0 -> follower   "READY" once the HTTP API is open
//! A follower is lost when its connection closes or no heartbeat arrives for 3 s; rank 0 then
//! turns fatal (/health 503) and exits after SIM_FOLLOWER_GRACE_S. A follower exits when
//! rank 0 goes away in the same way.

const std = @import("std");
const common = @import("common.zig");

const Io = std.Io;
const net = Io.net;
const log = common.log;

pub const heartbeat_interval_ms: i64 = 1000;
pub const heartbeat_timeout_ms: i64 = 3000;

const thread_config: std.Thread.SpawnConfig = .{ .stack_size = 1 << 20 };

/// Rank 0's view of one follower (indexed by rank; slot 0 is unused).
const Peer = struct {
    joined: std.atomic.Value(bool) = .init(false),
    lost: std.atomic.Value(bool) = .init(false),
    last_seen_ms: std.atomic.Value(i64) = .init(0),
    lost_claim: std.atomic.Value(bool) = .init(false),
    stream: net.Stream = undefined,
    lost_reason: []const u8 = "",

    /// Marks the follower lost; the first reason wins.
    fn markLost(peer: *Peer, reason: []const u8) void {
        if (peer.lost_claim.swap(true, .acq_rel)) return;
        peer.lost_reason = reason;
        peer.lost.store(true, .release);
    }
};

/// Rank 0's side of the rendezvous.
pub const Rendezvous = struct {
    io: Io,
    world: u32,
    peers: []Peer,
    joined_count: std.atomic.Value(u32) = .init(0),
    /// Set by main when the HTTP API opened; the heartbeat thread then sends READY once.
    serving: std.atomic.Value(bool) = .init(false),
    fatal: *common.Fatal,
    grace_ms: i64,
    mutex: Io.Mutex = .init,
    server: net.Server = undefined,

    /// Listens on `address` and starts the accept, heartbeat and watchdog threads.
    pub fn start(rv: *Rendezvous, address: net.IpAddress) void {
        rv.server = address.listen(rv.io, .{ .reuse_address = true }) catch |err| {
            log("fatal: cannot listen for followers on {f}: {t}", .{ address, err });
            std.process.exit(common.exit_peer_lost);
        };
        log("rendezvous: waiting for {d} follower(s) on {f}", .{ rv.world - 1, address });
        spawn(acceptLoop, .{rv});
        spawn(heartbeatLoop, .{rv});
        spawn(watchdogLoop, .{rv});
    }

    pub fn joined(rv: *Rendezvous) u32 {
        return rv.joined_count.load(.acquire);
    }

    fn acceptLoop(rv: *Rendezvous) void {
        while (true) {
            const stream = rv.server.accept(rv.io) catch |err| {
                log("rendezvous: accept failed: {t}", .{err});
                common.sleepMs(rv.io, 100);
                continue;
            };
            const t = std.Thread.spawn(thread_config, peerLoop, .{ rv, stream }) catch {
                stream.close(rv.io);
                continue;
            };
            t.detach();
        }
    }

    /// Handshake with one connection, then read its heartbeats until it goes away.
    fn peerLoop(rv: *Rendezvous, stream: net.Stream) void {
        const io = rv.io;
        var rbuf: [512]u8 = undefined;
        var sr = stream.reader(io, &rbuf);
        const r = &sr.interface;
        const hello = readLine(r) orelse {
            stream.close(io);
            return;
        };
        const rank = rv.admit(stream, hello) orelse return;
        const peer = &rv.peers[rank];
        while (true) {
            const line = readLine(r) orelse break;
            if (std.mem.eql(u8, line, "HB")) {
                peer.last_seen_ms.store(common.nowMs(io), .release);
            }
        }
        peer.markLost("connection closed");
    }

    /// Validates a HELLO line; answers WELCOME (and returns the rank) or REJECT.
    fn admit(rv: *Rendezvous, stream: net.Stream, hello: []const u8) ?u32 {
        const io = rv.io;
        var it = std.mem.tokenizeScalar(u8, hello, ' ');
        const verb = it.next() orelse "";
        const rank_text = it.next() orelse "";
        const world_text = it.next() orelse "";
        const kit = it.next() orelse "-";
        const rank = std.fmt.parseInt(u32, rank_text, 10) catch 0;
        const world = std.fmt.parseInt(u32, world_text, 10) catch 0;

        var reason: ?[]const u8 = null;
        rv.mutex.lockUncancelable(io);
        if (!std.mem.eql(u8, verb, "HELLO")) {
            reason = "bad hello";
        } else if (world != rv.world) {
            reason = "world size mismatch";
        } else if (rank == 0 or rank >= rv.world) {
            reason = "rank out of range";
        } else if (rv.peers[rank].joined.load(.acquire)) {
            reason = "rank already joined";
        }
        if (reason == null) {
            sendLine(io, stream, "WELCOME {d}", .{rv.world}) catch {
                reason = "welcome not delivered";
            };
        }
        if (reason == null) {
            const peer = &rv.peers[rank];
            peer.stream = stream;
            peer.last_seen_ms.store(common.nowMs(io), .release);
            peer.joined.store(true, .release);
            const n = rv.joined_count.fetchAdd(1, .acq_rel) + 1;
            rv.mutex.unlock(io);
            log("follower joined: rank {d} of {d} (kit {s}); {d}/{d} followers", .{ rank, rv.world, kit, n, rv.world - 1 });
            return rank;
        }
        rv.mutex.unlock(io);
        log("rendezvous: rejected a connection ({s}): '{s}'", .{ reason.?, hello });
        sendLine(io, stream, "REJECT {s}", .{reason.?}) catch {};
        stream.close(io);
        return null;
    }

    fn heartbeatLoop(rv: *Rendezvous) void {
        const io = rv.io;
        var ready_sent = false;
        while (true) {
            const serving = rv.serving.load(.acquire);
            for (rv.peers[1..]) |*peer| {
                if (!peer.joined.load(.acquire) or peer.lost.load(.acquire)) continue;
                const failed = if (serving and !ready_sent)
                    std.meta.isError(sendLine(io, peer.stream, "READY", .{}))
                else
                    std.meta.isError(sendLine(io, peer.stream, "HB", .{}));
                if (failed) peer.markLost("heartbeat could not be sent");
            }
            if (serving) ready_sent = true;
            common.sleepMs(io, heartbeat_interval_ms);
        }
    }

    /// Turns fatal when a follower is lost, and exits the process after the grace period.
    fn watchdogLoop(rv: *Rendezvous) void {
        const io = rv.io;
        while (true) {
            const now = common.nowMs(io);
            for (rv.peers[1..], 1..) |*peer, rank| {
                if (!peer.joined.load(.acquire)) continue;
                const silent = now - peer.last_seen_ms.load(.acquire);
                if (peer.lost.load(.acquire)) {
                    rv.lose(rank, peer.lost_reason);
                } else if (silent > heartbeat_timeout_ms) {
                    rv.lose(rank, "no heartbeat for 3 s");
                }
            }
            if (rv.fatal.isSet() and now - rv.fatal.since_ms >= rv.grace_ms) {
                log("fatal: {s}; exiting with status {d}", .{ rv.fatal.message(), common.exit_peer_lost });
                std.process.exit(common.exit_peer_lost);
            }
            common.sleepMs(io, 200);
        }
    }

    fn lose(rv: *Rendezvous, rank: usize, reason: []const u8) void {
        if (rv.fatal.set(rv.io, "follower rank {d} lost: {s}", .{ rank, reason })) {
            log("fatal: follower rank {d} lost ({s}); /health answers 503; exiting in {d} ms", .{ rank, reason, rv.grace_ms });
        }
    }
};

/// A follower's side: connect to rank 0 (retrying until it listens), say hello, then keep
/// the connection: heartbeats out every second, exit when rank 0 goes away.
pub const Follower = struct {
    io: Io,
    rank: u32,
    world: u32,
    kit: []const u8,
    master: net.IpAddress,
    connect_timeout_ms: i64,
    stream: net.Stream = undefined,
    last_seen_ms: std.atomic.Value(i64) = .init(0),

    /// Never returns: runs until rank 0 goes away, then exits non-zero.
    pub fn run(f: *Follower) noreturn {
        const io = f.io;
        const deadline = common.nowMs(io) + f.connect_timeout_ms;
        var attempts: u64 = 0;
        f.stream = while (true) {
            attempts += 1;
            if (f.master.connect(io, .{ .mode = .stream, .protocol = .tcp })) |s| break s else |err| {
                if (attempts == 1) log("rank 0 at {f} not listening yet ({t}); retrying", .{ f.master, err });
            }
            if (common.nowMs(io) > deadline) {
                log("fatal: rank 0 at {f} did not answer within {d} s", .{ f.master, @divTrunc(f.connect_timeout_ms, 1000) });
                std.process.exit(common.exit_peer_lost);
            }
            common.sleepMs(io, 250);
        };

        sendLine(io, f.stream, "HELLO {d} {d} {s}", .{ f.rank, f.world, f.kit }) catch |err| {
            log("fatal: hello to rank 0 failed: {t}", .{err});
            std.process.exit(common.exit_peer_lost);
        };
        var rbuf: [512]u8 = undefined;
        var sr = f.stream.reader(io, &rbuf);
        const r = &sr.interface;
        const answer = readLine(r) orelse {
            log("fatal: rank 0 closed the connection during the handshake", .{});
            std.process.exit(common.exit_peer_lost);
        };
        if (!std.mem.startsWith(u8, answer, "WELCOME")) {
            log("fatal: rank 0 refused rank {d}: {s}", .{ f.rank, answer });
            std.process.exit(common.exit_peer_lost);
        }
        log("joined rank 0 at {f} as rank {d} of {d}", .{ f.master, f.rank, f.world });
        f.last_seen_ms.store(common.nowMs(io), .release);
        spawn(followerHeartbeat, .{f});
        spawn(followerWatchdog, .{f});

        while (true) {
            const line = readLine(r) orelse {
                log("fatal: rank 0 went away (connection closed); exiting with status {d}", .{common.exit_peer_lost});
                std.process.exit(common.exit_peer_lost);
            };
            f.last_seen_ms.store(common.nowMs(io), .release);
            if (std.mem.eql(u8, line, "READY")) log("rank 0 is serving", .{});
        }
    }

    fn followerHeartbeat(f: *Follower) void {
        while (true) {
            sendLine(f.io, f.stream, "HB", .{}) catch {
                log("fatal: rank 0 went away (heartbeat could not be sent); exiting with status {d}", .{common.exit_peer_lost});
                std.process.exit(common.exit_peer_lost);
            };
            common.sleepMs(f.io, heartbeat_interval_ms);
        }
    }

    fn followerWatchdog(f: *Follower) void {
        while (true) {
            if (common.nowMs(f.io) - f.last_seen_ms.load(.acquire) > heartbeat_timeout_ms) {
                log("fatal: rank 0 went away (no heartbeat for 3 s); exiting with status {d}", .{common.exit_peer_lost});
                std.process.exit(common.exit_peer_lost);
            }
            common.sleepMs(f.io, 200);
        }
    }
};

fn spawn(comptime function: anytype, args: anytype) void {
    const t = std.Thread.spawn(thread_config, function, args) catch |err| {
        log("fatal: cannot start a thread: {t}", .{err});
        std.process.exit(common.exit_peer_lost);
    };
    t.detach();
}

/// One line without its line ending, or null at end of stream / on error.
fn readLine(r: *Io.Reader) ?[]const u8 {
    const line = r.takeDelimiterInclusive('\n') catch return null;
    return std.mem.trimEnd(u8, line, "\r\n");
}

fn sendLine(io: Io, stream: net.Stream, comptime fmt: []const u8, args: anytype) !void {
    var buf: [256]u8 = undefined;
    var sw = stream.writer(io, &buf);
    const w = &sw.interface;
    try w.print(fmt ++ "\n", args);
    try w.flush();
}
