//! The tensor-parallel rendezvous of the lab engine SIMULATOR, over plain TCP. (The real
//! engine uses NCCL over the ConnectX-7 link; here only the life cycle is simulated.)
//!
//! Protocol, one text line per message:
//!   follower -> rank 0   "HELLO <rank> <world> <kit> pool=<n> rdma=<dev,dev|-> drafts=<0|1> graphs=<0|1>
//!                         side=<0|1> prefetch=<0|1> aio=<0|1> cache=<rank cache index hash>
//!                         engram_json=<sha256 of the kit's engram.json, 16 hex> rope=<the kit's RoPE rows>"
//!                        (the kit path with "%" as %25 and spaces as %20)
//!   rank 0 -> follower   "WELCOME <world>", "RETRY <reason>" or "REJECT <reason>" (then rank 0 closes)
//!   both ways            "HB" every second (heartbeat)
//!   rank 0 -> follower   "READY" once the HTTP API is open
//! A follower is lost when its connection closes or no heartbeat arrives for 3 s; rank 0 then
//! turns fatal (/health 503) and exits after SIM_FOLLOWER_GRACE_S. A follower exits when
//! rank 0 goes away in the same way.
//!
//! Rank 0 checks that the follower runs what it runs, as the real follower must: "the same model
//! directory, rank cache, kit, pool and port" (bertholomus/TensorFold zig/src/families/dsv41/native.zig
//! @1a3d97e30112d58ffdb4dc07677d7222fa6af3c5), the same RDMA device count ("the RDMA gather needs the
//! same device count on every rank") and the same switches (--graphs/--side/--prefetch/--aio mirror
//! TF_DS_GRAPHS/TF_DS_HC_SIDE/TF_DS_L2_PREFETCH/TF_DS_ENGRAM_AIO, --drafts mirrors --no-drafts). A
//! follower that differs is refused: rank 0 answers REJECT, logs `refusing follower rank R: <reason>`
//! and exits 2; the follower logs the reason and exits 2. A wrong world or a rank out of range is only
//! turned away (rank 0 keeps waiting); a rank still joined is told to RETRY (the follower exits 1, so
//! systemd starts it again once rank 0 has seen its old connection go).

const std = @import("std");
const common = @import("common.zig");

const Io = std.Io;
const net = Io.net;
const log = common.log;

pub const heartbeat_interval_ms: i64 = 1000;
pub const heartbeat_timeout_ms: i64 = 3000;

const thread_config: std.Thread.SpawnConfig = .{ .stack_size = 1 << 20 };

/// What a follower says in its HELLO line.
pub const Hello = struct {
    rank: u32 = 0,
    world: u32 = 0,
    kit: []const u8 = "-",
    pool: ?u64 = null,
    /// comma-separated device names, or "-" for none
    rdma: []const u8 = "-",
    drafts: ?bool = null,
    graphs: ?bool = null,
    side: ?bool = null,
    prefetch: ?bool = null,
    aio: ?bool = null,
    cache: []const u8 = "",
    engram_json: []const u8 = "",
    rope: ?u64 = null,
    /// The container personalities (vllm_serve.zig, tensorfold_py.zig): a digest of the arguments every node
    /// must share (16 hex, "-" when unused).
    digest: []const u8 = "-",

    /// The HELLO line (without its newline).
    pub fn format(h: Hello, w: *Io.Writer) Io.Writer.Error!void {
        try w.print("HELLO {d} {d} ", .{ h.rank, h.world });
        for (h.kit) |c| switch (c) {
            '%' => try w.writeAll("%25"),
            ' ' => try w.writeAll("%20"),
            '\n', '\r' => try w.writeAll("%0A"),
            else => try w.writeByte(c),
        };
        try w.print(" pool={d} rdma={s} drafts={d} graphs={d} side={d} prefetch={d} aio={d} cache={s} engram_json={s} rope={d} digest={s}", .{
            h.pool orelse 0,                     if (h.rdma.len == 0) "-" else h.rdma,     @intFromBool(h.drafts orelse false),
            @intFromBool(h.graphs orelse false), @intFromBool(h.side orelse false),        @intFromBool(h.prefetch orelse false),
            @intFromBool(h.aio orelse false),    h.cache,                                  h.engram_json,
            h.rope orelse 0,                     if (h.digest.len == 0) "-" else h.digest,
        });
    }

    /// Parses a HELLO line; null when it is not one. Fields left out stay null / empty.
    pub fn parse(arena: std.mem.Allocator, line: []const u8) ?Hello {
        var it = std.mem.tokenizeScalar(u8, line, ' ');
        if (!std.mem.eql(u8, it.next() orelse "", "HELLO")) return null;
        var h: Hello = .{};
        h.rank = std.fmt.parseInt(u32, it.next() orelse return null, 10) catch return null;
        h.world = std.fmt.parseInt(u32, it.next() orelse return null, 10) catch return null;
        h.kit = unescape(arena, it.next() orelse "-") catch return null;
        while (it.next()) |field| {
            const eq = std.mem.findScalar(u8, field, '=') orelse continue;
            const k = field[0..eq];
            const v = field[eq + 1 ..];
            if (std.mem.eql(u8, k, "pool")) {
                h.pool = std.fmt.parseInt(u64, v, 10) catch null;
            } else if (std.mem.eql(u8, k, "rdma")) {
                h.rdma = v;
            } else if (std.mem.eql(u8, k, "drafts")) {
                h.drafts = !std.mem.eql(u8, v, "0");
            } else if (std.mem.eql(u8, k, "graphs")) {
                h.graphs = !std.mem.eql(u8, v, "0");
            } else if (std.mem.eql(u8, k, "side")) {
                h.side = !std.mem.eql(u8, v, "0");
            } else if (std.mem.eql(u8, k, "prefetch")) {
                h.prefetch = !std.mem.eql(u8, v, "0");
            } else if (std.mem.eql(u8, k, "aio")) {
                h.aio = !std.mem.eql(u8, v, "0");
            } else if (std.mem.eql(u8, k, "cache")) {
                h.cache = v;
            } else if (std.mem.eql(u8, k, "engram_json")) {
                h.engram_json = v;
            } else if (std.mem.eql(u8, k, "rope")) {
                h.rope = std.fmt.parseInt(u64, v, 10) catch null;
            } else if (std.mem.eql(u8, k, "digest")) {
                h.digest = v;
            }
        }
        return h;
    }
};

fn unescape(arena: std.mem.Allocator, s: []const u8) ![]const u8 {
    var out: std.ArrayList(u8) = .empty;
    var i: usize = 0;
    while (i < s.len) : (i += 1) {
        if (s[i] == '%' and i + 2 < s.len) {
            const b = std.fmt.parseInt(u8, s[i + 1 .. i + 3], 16) catch {
                try out.append(arena, s[i]);
                continue;
            };
            try out.append(arena, b);
            i += 2;
        } else try out.append(arena, s[i]);
    }
    return out.items;
}

/// One of rank 0's switches that a follower mirrors with a `--key 0|1` pair.
pub const Switch = struct {
    /// the follower's key, e.g. "--graphs"
    key: []const u8,
    /// rank 0's variable, e.g. "TF_DS_GRAPHS"
    env: []const u8,
    /// the variable's text as set (null: unset)
    env_text: ?[]const u8,
    on: bool,
};

/// What rank 0 runs, for the consistency checks of a follower's HELLO.
pub const Expect = struct {
    /// --context (the pool holds --context positions for every stream together)
    context: u64,
    /// TP4 branch: TF_DS_WINDOW, the streams' shared pool (null: the pool is --context)
    window: ?u64 = null,
    /// TF_RDMA_DEVICES (null: unset or empty)
    rdma: ?[]const u8,
    drafts: bool,
    graphs: Switch,
    side: Switch,
    prefetch: Switch,
    aio: Switch,
    engram_json: []const u8,
    rope_rows: u64,
    /// the rank cache hash each rank must have for rank 0's model directory (index: rank)
    caches: []const []const u8,
    model: []const u8,
    /// The container personalities: the digest every node's shared arguments must have, and what they are
    /// (for the refusal). When set, only this is compared (the native checks above do not apply).
    digest: ?Digest = null,

    pub const Digest = struct { value: []const u8, what: []const u8 };

    /// What a container personality's rank 0 expects of its followers: the shared arguments' digest only.
    pub fn ofDigest(context: u64, model: []const u8, digest: Digest) Expect {
        const off: Switch = .{ .key = "", .env = "", .env_text = null, .on = false };
        return .{
            .context = context,
            .rdma = null,
            .drafts = true,
            .graphs = off,
            .side = off,
            .prefetch = off,
            .aio = off,
            .engram_json = "",
            .rope_rows = 0,
            .caches = &.{},
            .model = model,
            .digest = digest,
        };
    }
};

/// Why rank 0 refuses a follower whose HELLO does not match what rank 0 runs, or null.
pub fn mismatch(arena: std.mem.Allocator, e: *const Expect, h: Hello) std.mem.Allocator.Error!?[]const u8 {
    const r = h.rank;
    if (e.digest) |d| {
        if (std.mem.eql(u8, h.digest, d.value)) return null;
        return try std.fmt.allocPrint(arena, "rank {d} was started with other {s} than rank 0 (digest {s}, rank 0 {s}): start every node with the same ones", .{ r, d.what, h.digest, d.value });
    }
    const pool = h.pool orelse return try std.fmt.allocPrint(arena, "rank {d} sent no pool (an older follower?)", .{r});
    if (e.window) |window| {
        if (pool != window) return try std.fmt.allocPrint(
            arena,
            "rank {d}'s --pool {d} is not rank 0's TF_DS_WINDOW {d}: the streams share one window on every rank (the follower keeps its last --pool)",
            .{ r, pool, window },
        );
    } else if (pool != e.context) return try std.fmt.allocPrint(
        arena,
        "rank {d}'s --pool {d} is not rank 0's --context {d}: the pool holds --context positions for every stream together",
        .{ r, pool, e.context },
    );
    if (!sameDevices(h.rdma, e.rdma orelse "-")) {
        const theirs = if (std.mem.eql(u8, h.rdma, "-")) "NCCL (no --rdma)" else try std.fmt.allocPrint(arena, "rdma {s}", .{h.rdma});
        const ours = if (e.rdma) |d| try std.fmt.allocPrint(arena, "TF_RDMA_DEVICES={s}", .{d}) else "NCCL (TF_RDMA_DEVICES unset)";
        return try std.fmt.allocPrint(arena, "rank {d} gathers over {s}, rank 0 over {s}: the RDMA gather needs the same device count on every rank", .{ r, theirs, ours });
    }
    const theirs = [_]?bool{ h.graphs, h.side, h.prefetch, h.aio };
    const ours = [_]Switch{ e.graphs, e.side, e.prefetch, e.aio };
    for (theirs, ours) |t, o| {
        const on = t orelse false;
        if (on == o.on) continue;
        if (o.env_text) |text| return try std.fmt.allocPrint(arena, "rank {d} {s} {d} but rank 0 {s}={s}", .{ r, o.key, @intFromBool(on), o.env, text });
        return try std.fmt.allocPrint(arena, "rank {d} {s} {d} but rank 0 {s} unset", .{ r, o.key, @intFromBool(on), o.env });
    }
    if ((h.drafts orelse true) != e.drafts) {
        return if (e.drafts)
            try std.fmt.allocPrint(arena, "rank {d} --drafts 0 but rank 0 drafts (no --no-drafts)", .{r})
        else
            try std.fmt.allocPrint(arena, "rank {d} --drafts 1 but rank 0 runs --no-drafts", .{r});
    }
    if (!std.mem.eql(u8, h.engram_json, e.engram_json))
        return try std.fmt.allocPrint(arena, "rank {d}'s kit {s} has another engram.json than rank 0's TF_DS_KIT (the same kit on every rank)", .{ r, h.kit });
    if ((h.rope orelse 0) != e.rope_rows)
        return try std.fmt.allocPrint(arena, "rank {d}'s kit {s} has RoPE tables of {d} rows, rank 0's TF_DS_KIT {d} (the same kit on every rank)", .{ r, h.kit, h.rope orelse 0, e.rope_rows });
    if (r < e.caches.len and !std.mem.eql(u8, h.cache, e.caches[r]))
        return try std.fmt.allocPrint(
            arena,
            "rank {d}'s rank cache (index {s}) was made from another checkpoint than rank 0's {s} (index {s}): the same model directory on every rank",
            .{ r, h.cache, e.model, e.caches[r] },
        );
    return null;
}

/// Same device list: the same count and names, in order ("-" or "" is none).
fn sameDevices(a: []const u8, b: []const u8) bool {
    var ia = std.mem.tokenizeAny(u8, if (std.mem.eql(u8, a, "-")) "" else a, ", ");
    var ib = std.mem.tokenizeAny(u8, if (std.mem.eql(u8, b, "-")) "" else b, ", ");
    while (true) {
        const x = ia.next();
        const y = ib.next();
        if (x == null and y == null) return true;
        if (x == null or y == null) return false;
        if (!std.mem.eql(u8, x.?, y.?)) return false;
    }
}

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
    /// What a follower must match (pool, RDMA devices, switches, kit, rank cache).
    expect: *const Expect,
    mutex: Io.Mutex = .init,
    /// The dsv41 Zig engine's rank 0 listens on PORT + g - 1 for follower g, one port a follower
    /// (bertholomus/TensorFold zig/src/families/dsv41/prompt2d.zig, store id 70185293164, `Fan.open`: "rank 0 listens
    /// on PORT + g - 1 for follower g ... so two ranks link exactly as before (rank 1 on PORT)"; `for (1..world) |g|
    /// f.links[g - 1] = try Link.listen(ip, port + @as(u16, @intCast(g - 1)))`). Off: every follower on PORT (the
    /// container engines' stores).
    port_per_follower: bool = false,
    servers: [max_followers]net.Server = undefined,

    const max_followers = 3;

    /// Listens on `address` (and, port_per_follower, on one port a follower from it) and starts the accept,
    /// heartbeat and watchdog threads.
    pub fn start(rv: *Rendezvous, address: net.IpAddress) void {
        const ports: u32 = if (rv.port_per_follower) rv.world - 1 else 1;
        if (ports > max_followers) {
            log("fatal: {d} followers, at most {d} ports", .{ rv.world - 1, max_followers });
            std.process.exit(common.exit_refused);
        }
        for (0..ports) |i| {
            var at = address;
            at.setPort(address.getPort() + @as(u16, @intCast(i)));
            rv.servers[i] = at.listen(rv.io, .{ .reuse_address = true }) catch |err| {
                log("fatal: cannot listen for followers on {f}: {t}", .{ at, err });
                std.process.exit(common.exit_peer_lost);
            };
            if (rv.port_per_follower) {
                log("rendezvous: waiting for follower rank {d} on {f}", .{ i + 1, at });
            } else {
                log("rendezvous: waiting for {d} follower(s) on {f}", .{ rv.world - 1, at });
            }
            spawn(acceptLoop, .{ rv, i });
        }
        spawn(heartbeatLoop, .{rv});
        spawn(watchdogLoop, .{rv});
    }

    pub fn joined(rv: *Rendezvous) u32 {
        return rv.joined_count.load(.acquire);
    }

    fn acceptLoop(rv: *Rendezvous, index: usize) void {
        // port_per_follower: the port of follower rank index + 1.
        const want: u32 = if (rv.port_per_follower) @intCast(index + 1) else 0;
        while (true) {
            const stream = rv.servers[index].accept(rv.io) catch |err| {
                log("rendezvous: accept failed: {t}", .{err});
                common.sleepMs(rv.io, 100);
                continue;
            };
            const t = std.Thread.spawn(thread_config, peerLoop, .{ rv, stream, want }) catch {
                stream.close(rv.io);
                continue;
            };
            t.detach();
        }
    }

    /// Handshake with one connection, then read its heartbeats until it goes away.
    fn peerLoop(rv: *Rendezvous, stream: net.Stream, want: u32) void {
        const io = rv.io;
        var rbuf: [4096]u8 = undefined;
        var sr = stream.reader(io, &rbuf);
        const r = &sr.interface;
        const hello = readLine(r) orelse {
            stream.close(io);
            return;
        };
        const rank = rv.admit(stream, hello, want) orelse return;
        const peer = &rv.peers[rank];
        while (true) {
            const line = readLine(r) orelse break;
            if (std.mem.eql(u8, line, "HB")) {
                peer.last_seen_ms.store(common.nowMs(io), .release);
            }
        }
        peer.markLost("connection closed");
    }

    /// Validates a HELLO line; answers WELCOME (and returns the rank) or REJECT. A follower that does
    /// not run what rank 0 runs is refused and rank 0 exits 2.
    fn admit(rv: *Rendezvous, stream: net.Stream, line: []const u8, want: u32) ?u32 {
        const io = rv.io;
        var arena_state = std.heap.ArenaAllocator.init(std.heap.page_allocator);
        defer arena_state.deinit();
        const arena = arena_state.allocator();
        const hello = Hello.parse(arena, line);

        var reason: ?[]const u8 = null;
        var fatal = false;
        // A rank that is still joined (its old connection not yet seen lost, e.g. a node that
        // rebooted within the heartbeat timeout) is asked to come back: RETRY, not REJECT.
        var transient = false;
        rv.mutex.lockUncancelable(io);
        if (hello) |h| {
            if (h.world != rv.world) {
                reason = std.fmt.allocPrint(arena, "rank {d} runs WORLD {d}, rank 0 TF_TP_WORLD={d}", .{ h.rank, h.world, rv.world }) catch "world size mismatch";
            } else if (h.rank == 0 or h.rank >= rv.world) {
                reason = std.fmt.allocPrint(arena, "rank {d} is out of range: followers are ranks 1..{d}", .{ h.rank, rv.world - 1 }) catch "rank out of range";
            } else if (want != 0 and h.rank != want) {
                reason = std.fmt.allocPrint(arena, "rank {d} connected on follower rank {d}'s port: rank 0 listens on PORT + g - 1 for follower g (start every follower with rank 0's PORT)", .{ h.rank, want }) catch "wrong port";
            } else if (rv.peers[h.rank].joined.load(.acquire)) {
                reason = std.fmt.allocPrint(arena, "rank {d} already joined", .{h.rank}) catch "rank already joined";
                transient = true;
            } else if (mismatch(arena, rv.expect, h) catch "out of memory") |why| {
                reason = why;
                fatal = true;
            }
        } else {
            reason = "bad hello";
        }
        if (reason == null) {
            sendLine(io, stream, "WELCOME {d}", .{rv.world}) catch {
                reason = "welcome not delivered";
            };
        }
        if (reason == null) {
            const h = hello.?;
            const peer = &rv.peers[h.rank];
            peer.stream = stream;
            peer.last_seen_ms.store(common.nowMs(io), .release);
            peer.joined.store(true, .release);
            const n = rv.joined_count.fetchAdd(1, .acq_rel) + 1;
            rv.mutex.unlock(io);
            log("follower joined: rank {d} of {d} (kit {s}, pool {d}, rdma {s}); {d}/{d} followers", .{ h.rank, rv.world, h.kit, h.pool orelse 0, h.rdma, n, rv.world - 1 });
            return h.rank;
        }
        if (transient) {
            sendLine(io, stream, "RETRY {s}", .{reason.?}) catch {};
        } else {
            sendLine(io, stream, "REJECT {s}", .{reason.?}) catch {};
        }
        if (fatal) {
            log("refusing follower rank {d}: {s}", .{ hello.?.rank, reason.? });
            log("exiting with status {d}", .{common.exit_refused});
            std.process.exit(common.exit_refused);
        }
        rv.mutex.unlock(io);
        log("rendezvous: rejected a connection ({s}): '{s}'", .{ reason.?, line });
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
    hello: Hello,
    master: net.IpAddress,
    connect_timeout_ms: i64,
    stream: net.Stream = undefined,
    last_seen_ms: std.atomic.Value(i64) = .init(0),
    /// The error the real follower's `Model.open` returns once the ranks are linked (rank 0 welcomed this one),
    /// ending its main as `error: <name>`, exit 1: `NoEngramTables` without --engram (see tf_dsv41_lanes.zig).
    load_error: ?[]const u8 = null,
    /// The follower's own weight load (simulated) before it connects: the real dsv41 follower loads, then links
    /// (model.zig `weights.load`, then `prompt2d.Fan.open`), so its connect window starts after its load.
    load_delay_ms: i64 = 0,
    /// When the window ends without rank 0: the real program's error (`error: <name>`, exit 1), e.g. the dsv41
    /// follower's `ConnectFailed` (link.zig `connect`); null: the lab's own words.
    connect_error: ?[]const u8 = null,

    /// Never returns: runs until rank 0 goes away, then exits non-zero.
    pub fn run(f: *Follower) noreturn {
        const io = f.io;
        if (f.load_delay_ms > 0) {
            log("loading weights (simulated: {d} ms), then connecting to rank 0", .{f.load_delay_ms});
            common.sleepMs(io, f.load_delay_ms);
        }
        const deadline = common.nowMs(io) + f.connect_timeout_ms;
        var attempts: u64 = 0;
        f.stream = while (true) {
            attempts += 1;
            if (f.master.connect(io, .{ .mode = .stream, .protocol = .tcp })) |s| break s else |err| {
                if (attempts == 1) log("rank 0 at {f} not listening yet ({t}); retrying", .{ f.master, err });
            }
            if (common.nowMs(io) > deadline) {
                log("fatal: rank 0 at {f} did not answer within {d} s", .{ f.master, @divTrunc(f.connect_timeout_ms, 1000) });
                if (f.connect_error) |name| std.debug.print("error: {s}\n", .{name});
                std.process.exit(common.exit_peer_lost);
            }
            common.sleepMs(io, 250);
        };

        sendLine(io, f.stream, "{f}", .{f.hello}) catch |err| {
            log("fatal: hello to rank 0 failed: {t}", .{err});
            std.process.exit(common.exit_peer_lost);
        };
        var rbuf: [4096]u8 = undefined;
        var sr = f.stream.reader(io, &rbuf);
        const r = &sr.interface;
        const answer = readLine(r) orelse {
            log("fatal: rank 0 closed the connection during the handshake", .{});
            std.process.exit(common.exit_peer_lost);
        };
        if (std.mem.startsWith(u8, answer, "RETRY ")) {
            // Rank 0 still holds this rank's old connection: exit 1 so systemd starts it again.
            log("fatal: rank 0 turned rank {d} away for now: {s}", .{ f.rank, answer["RETRY ".len..] });
            std.process.exit(common.exit_peer_lost);
        }
        if (std.mem.startsWith(u8, answer, "REJECT ")) {
            common.refuse("rank 0 refused rank {d}: {s}", .{ f.rank, answer["REJECT ".len..] });
        }
        if (!std.mem.startsWith(u8, answer, "WELCOME")) {
            log("fatal: rank 0 answered the hello with '{s}'", .{answer});
            std.process.exit(common.exit_peer_lost);
        }
        log("joined rank 0 at {f} as rank {d} of {d}", .{ f.master, f.rank, f.world });
        if (f.load_error) |name| {
            std.debug.print("error: {s}\n", .{name});
            std.process.exit(common.exit_peer_lost);
        }
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
    var buf: [1024]u8 = undefined;
    var sw = stream.writer(io, &buf);
    const w = &sw.interface;
    try w.print(fmt ++ "\n", args);
    try w.flush();
}

const testing = std.testing;

fn testExpect() Expect {
    return .{
        .context = 1048576,
        .rdma = "rocep1s0f1,roceP2p1s0f1",
        .drafts = true,
        .graphs = .{ .key = "--graphs", .env = "TF_DS_GRAPHS", .env_text = "1", .on = true },
        .side = .{ .key = "--side", .env = "TF_DS_HC_SIDE", .env_text = "1", .on = true },
        .prefetch = .{ .key = "--prefetch", .env = "TF_DS_L2_PREFETCH", .env_text = null, .on = false },
        .aio = .{ .key = "--aio", .env = "TF_DS_ENGRAM_AIO", .env_text = "1", .on = true },
        .engram_json = "0123456789abcdef",
        .rope_rows = 1048576,
        .caches = &.{ "", "cafe" },
        .model = "/m",
    };
}

test "HELLO round trip and the consistency checks" {
    var arena_state = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena_state.deinit();
    const a = arena_state.allocator();
    const good: Hello = .{
        .rank = 1,
        .world = 2,
        .kit = "/srv/kit 1%",
        .pool = 1048576,
        .rdma = "rocep1s0f1,roceP2p1s0f1",
        .drafts = true,
        .graphs = true,
        .side = true,
        .prefetch = false,
        .aio = true,
        .cache = "cafe",
        .engram_json = "0123456789abcdef",
        .rope = 1048576,
    };
    const line = try std.fmt.allocPrint(a, "{f}", .{good});
    try testing.expect(std.mem.indexOf(u8, line, "/srv/kit%201%25") != null);
    const back = Hello.parse(a, line).?;
    try testing.expectEqualStrings("/srv/kit 1%", back.kit);
    const e = testExpect();
    try testing.expectEqual(@as(?[]const u8, null), try mismatch(a, &e, back));

    var h = back;
    h.pool = 4227072;
    try testing.expectEqualStrings("rank 1's --pool 4227072 is not rank 0's --context 1048576: the pool holds --context positions for every stream together", (try mismatch(a, &e, h)).?);
    var tp4 = e;
    tp4.window = 2097152;
    h.pool = 1048576;
    try testing.expectEqualStrings("rank 1's --pool 1048576 is not rank 0's TF_DS_WINDOW 2097152: the streams share one window on every rank (the follower keeps its last --pool)", (try mismatch(a, &tp4, h)).?);
    h.pool = 2097152;
    try testing.expectEqual(@as(?[]const u8, null), try mismatch(a, &tp4, h));
    h = back;
    h.rdma = "a,b";
    var e2 = e;
    e2.rdma = "c";
    try testing.expectEqualStrings("rank 1 gathers over rdma a,b, rank 0 over TF_RDMA_DEVICES=c: the RDMA gather needs the same device count on every rank", (try mismatch(a, &e2, h)).?);
    h = back;
    h.graphs = false;
    try testing.expectEqualStrings("rank 1 --graphs 0 but rank 0 TF_DS_GRAPHS=1", (try mismatch(a, &e, h)).?);
    h = back;
    h.prefetch = true;
    try testing.expectEqualStrings("rank 1 --prefetch 1 but rank 0 TF_DS_L2_PREFETCH unset", (try mismatch(a, &e, h)).?);
    h = back;
    h.drafts = false;
    try testing.expect(std.mem.indexOf(u8, (try mismatch(a, &e, h)).?, "--drafts 0") != null);
    h = back;
    h.rope = 4096;
    try testing.expect(std.mem.indexOf(u8, (try mismatch(a, &e, h)).?, "RoPE") != null);
    h = back;
    h.cache = "beef";
    try testing.expect(std.mem.indexOf(u8, (try mismatch(a, &e, h)).?, "another checkpoint") != null);
    try testing.expect(Hello.parse(a, "HB") == null);
}
