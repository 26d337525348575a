//! Rank 0 of the personalities whose workers join its rendezvous (vLLM's mp executor, SGLang's
//! --dist-init-addr): wait until every worker joined (torch's DistStoreError when one never comes),
//! load the weights (simulated), open the HTTP API, serve. One place for both, so that they fail alike.
const std = @import("std");
const common = @import("common.zig");
const fabric = @import("fabric.zig");
const http = @import("http.zig");

const Io = std.Io;
const log = common.log;

pub const Head = struct {
    io: Io,
    arena: std.mem.Allocator,
    gpa: std.mem.Allocator,
    env: common.Env,
    cfg: http.Config,
    fatal: *common.Fatal,
    nnodes: i64,
    master: Io.net.IpAddress,
    master_host: []const u8,
    master_port: u16,
    rendezvous_timeout_ms: i64,
    expect: *const fabric.Expect,
    http_address: Io.net.IpAddress,
    /// How the engine tells the operator to start the workers, e.g. "start the workers first: they join".
    workers_hint: []const u8,
    /// The engine's own words once the API listens, around the address: {before}http://ADDR{after}.
    ready_before: []const u8,
    ready_after: []const u8 = "",
    /// A line printed as it is (no log tag) once the API listens: a launcher's own ready banner (SGLang's boot.py).
    banner: ?[]const u8 = null,
};

pub fn serve(h: Head) !u8 {
    const io = h.io;
    var rendezvous: fabric.Rendezvous = .{
        .io = io,
        .world = @intCast(h.nnodes),
        .peers = undefined,
        .fatal = h.fatal,
        .grace_ms = @intFromFloat(h.env.float("SIM_FOLLOWER_GRACE_S", 5) * 1000),
        .expect = h.expect,
    };
    rendezvous.peers = try h.arena.alloc(@TypeOf(rendezvous.peers[0]), @intCast(h.nnodes));
    for (rendezvous.peers) |*peer| peer.* = .{};
    if (h.nnodes > 1) {
        rendezvous.start(h.master);
        const started = common.nowMs(io);
        while (rendezvous.joined() < h.nnodes - 1) {
            if (common.nowMs(io) - started > h.rendezvous_timeout_ms) {
                log("fatal: torch.distributed.DistStoreError: Timed out after {d} seconds waiting for clients. {d}/{d} clients joined. ({s} {s}:{d})", .{
                    @divTrunc(h.rendezvous_timeout_ms, 1000), rendezvous.joined() + 1, h.nnodes, h.workers_hint, h.master_host, h.master_port,
                });
                return 1;
            }
            common.sleepMs(io, 50);
        }
        log("all {d} worker node(s) joined", .{h.nnodes - 1});
    }
    const load_delay_ms: i64 = @intFromFloat(h.env.float("SIM_LOAD_DELAY_S", 2) * 1000);
    log("loading weights (simulated: {d} ms)", .{load_delay_ms});
    common.sleepMs(io, load_delay_ms);
    if (h.fatal.isSet()) while (true) common.sleepMs(io, 1000);

    var listener = h.http_address.listen(io, .{ .reuse_address = true }) catch |err| {
        log("fatal: ERROR: [Errno 98] error while attempting to bind on address {f}: {t}", .{ h.http_address, err });
        return 1;
    };
    var server: http.Server = .{ .io = io, .gpa = h.gpa, .cfg = h.cfg, .fatal = h.fatal };
    rendezvous.serving.store(true, .release);
    log("{s}http://{f}{s}", .{ h.ready_before, h.http_address, h.ready_after });
    if (h.banner) |line| std.debug.print("{s}\n", .{line});
    server.serve(&listener);
}
