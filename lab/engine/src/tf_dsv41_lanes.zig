//! tf-dsv41-lanes: a follower rank (1..WORLD-1) of the lab engine SIMULATOR.
//!
//! THIS IS NOT TENSORFOLD. It accepts the real follower's command line (bertholomus/TensorFold
//! zig/src/families/dsv41/lanes_main.zig @d6047e5dfd7a7921cd6acfbb3a9b3c05e0b0f04b), checks the model
//! directory and its inputs (rank cache, kit, Engram), connects to rank 0 over TCP (retrying until rank 0
//! listens), says hello with what it runs and then keeps the connection: a heartbeat line every second.
//! It exits 1 when rank 0 goes away (connection closed, or no heartbeat for 3 s), 2 when rank 0 refuses it.
//!
//!   tf-dsv41-lanes MODEL_DIR CACHE_DIR RANK WORLD MASTER_IP PORT KIT_DIR [--key value]...
//!       keys: --requests --parallel (1..4) --pool (262144) --drafts (1) --arena-gib --aio --prefetch
//!             --side --graphs (0|1, default 0) --serial --rdma DEV,DEV --profile --engram DIR
//!             --token-map FILE --rdma-kernels FILE
//!   tf-dsv41-lanes --version
//!
//! Fewer than 7 positionals: the usage, exit 2. An unknown key, a key without its value, --parallel
//! outside 1..4: `error: BadArgument`, exit 1 (a number that does not parse: `error: InvalidCharacter`).
//! Environment: SIM_LOAD_DELAY_S (2): the follower's own weight load (simulated) before it connects;
//! SIM_CONNECT_WINDOW_S (300): then how long it retries rank 0 before `error: ConnectFailed`, exit 1 - the real
//! follower's window: bertholomus/TensorFold zig/src/families/dsv41/model.zig @09bc7166fdbc6697c4afa80355a7a3feb60d0cad
//! (`weights.load`, then "rank 0 listens: rank 1 retries its connect while rank 0 loads" `prompt2d.Fan.open`),
//! prompt2d.zig @ea990ff7bf9914172eef4eec1ee6c7f69734faca (`Link.connect(io, ip, port + rank - 1, 300)`), link.zig
//! @03873553b56b51a916913447d4c244a300d36b59 (`connect`: retries every 250 ms "for up to `seconds`", then
//! `error.ConnectFailed`).

const std = @import("std");
const common = @import("common.zig");
const model = @import("model.zig");
const fabric = @import("fabric.zig");
const recipe = @import("recipe.zig");
const cli = @import("cli.zig");
const build_options = @import("build_options");
const inputs = @import("inputs.zig");

const log = common.log;
const refuse = common.refuse;

// No Engram on a rank: every checkpoint the engine serves has Engram layers (bertholomus/TensorFold
// zig/src/families/dsv41/config.zig @88929d7419e0167b5ea2a4b9aa6ca1335356a6dc `checkShapes`:
// `c.engram_layers.len == 2`, from config.json's `engram_layer_ids`), and `Model.open` ends without the tables:
// `} else if (c.engram_layers.slice().len > 0) return error.NoEngramTables;` (bertholomus/TensorFold
// zig/src/families/dsv41/model.zig @09bc7166fdbc6697c4afa80355a7a3feb60d0cad, the four-node branch's version; a TP2-only
// version, stored without its commit, has the same line), after the rank cache, the weights, `prompt2d.Fan.open` (the ranks linked),
// NCCL, the kernels and the RoPE tables. LANES: `const m = try dsv41.model.Model.open(gpa, io, &ctx, o);`.

const usage =
    \\usage: tf-dsv41-lanes MODEL_DIR CACHE_DIR RANK WORLD MASTER_IP PORT KIT_DIR [--requests FILE] [--parallel N] [--pool P] [--drafts 0|1] [--arena-gib G] [--aio 0|1] [--prefetch 0|1] [--side 0|1] [--graphs 0|1] [--serial 0|1] [--rdma DEV,DEV] [--profile 0|1] [--engram DIR --token-map FILE] [--rdma-kernels FILE]
    \\       tf-dsv41-lanes --version
    \\(TensorFold SIMULATOR for the sparkfold lab; see lab/engine/README.md)
    \\
;

/// What the real main prints when it returns an error: `error: <name>`, exit 1.
fn zigError(name: []const u8) noreturn {
    std.debug.print("error: {s}\n", .{name});
    std.process.exit(1);
}

fn parseNumber(comptime T: type, text: []const u8) T {
    return std.fmt.parseInt(T, text, 10) catch |err| zigError(@errorName(err));
}

pub fn main(init: std.process.Init) !u8 {
    const io = init.io;
    const arena = init.arena.allocator();
    const args = try init.minimal.args.toSlice(arena);
    common.log_tag = "tf-dsv41-lanes";

    if (args.len >= 2 and std.mem.eql(u8, args[1], "--version")) {
        common.printVersion(io, "tf-dsv41-lanes");
        return 0;
    }
    if (args.len >= 2 and (std.mem.eql(u8, args[1], "--help") or std.mem.eql(u8, args[1], "-h"))) {
        std.debug.print("{s}", .{usage});
        return 0;
    }
    const o = switch (cli.parseLanes(args[1..], build_options.tp4)) {
        .usage => {
            std.debug.print("{s}", .{usage});
            return common.exit_refused;
        },
        .zig_error => |name| zigError(name),
        .ok => |o| o,
    };
    const rank = parseNumber(u32, o.rank_text);
    const world = parseNumber(u32, o.world_text);
    const port = parseNumber(u16, o.port_text);
    // LANES: `.master = try dsv41.link.parseIp(args[5])`, read with the other arguments before anything is logged:
    // an IPv4 literal only, else the error ends main.
    _ = common.parseIpv4(o.master) catch |err| zigError(@errorName(err));
    common.log_tag = try std.fmt.allocPrint(arena, "tf-dsv41-lanes[rank {d}]", .{rank});
    if (world != 2 and world != 4) refuse("WORLD {d}: the native DeepSeek-V4.1 engine runs tensor parallel over two GPUs or the four nodes of the 2D split (WORLD 2 or 4)", .{world});
    if (rank < 1 or rank >= world) refuse("RANK must be in 1..{d} for a follower, got {d}", .{ world - 1, rank });
    if (port == 0) refuse("PORT must not be 0", .{});
    // The TP4 follower's flags, checked as rank 0 checks TF_DS_ROUND_ROWS / TF_DS_STREAMS (native.zig's words).
    if (o.round_rows) |rows| if (rows < 16 or rows > 48) refuse("--round-rows {d}: a round's rows at most, 16 .. 48", .{rows});
    if (o.streams) |n| if (n < 1 or n > 16) refuse("--streams {d}: the pool's streams, 1 .. 16", .{n});
    if (o.context) |c| if (c > o.pool) refuse("--context {d} is more than --pool {d}: the streams share the pool, a request takes at most --context of it", .{ c, o.pool });

    log("started (TensorFold SIMULATOR {s}, patches={s}): model={s} cache={s} rank={d} world={d} master={s}:{d} kit={s} pool={d} drafts={} graphs={} side={} prefetch={} aio={} rdma={s} engram={s} token_map={s}", .{
        recipe.sim_version, recipe.applied_patches, o.model,  o.cache, rank,       world, o.master,          port,                o.kit,
        o.pool,             o.drafts,               o.graphs, o.side,  o.prefetch, o.aio, o.rdma orelse "-", o.engram orelse "-", o.token_map orelse "-",
    });

    // prompt2d.zig `Fan.open` (store id 70185293164): follower g connects to PORT + g - 1, where rank 0 listens for it.
    if (@as(u32, port) + rank - 1 > std.math.maxInt(u16)) refuse("PORT {d} + RANK {d} - 1 is not a port", .{ port, rank });
    const master = common.parseAddress("MASTER_IP", o.master, port + @as(u16, @intCast(rank - 1)));
    const found = model.check(io, arena, o.model);
    const cache = inputs.checkRankCache(io, arena, "CACHE_DIR", o.cache, o.model, rank, world);
    const kit = inputs.checkKit(io, arena, "KIT_DIR", o.kit, true, false);
    // A request's positions at most: --context where the TP4 follower is given one (its pool is the shared
    // window), else the pool.
    if (o.context) |c| {
        if (kit.rope_rows < c) refuse("the kit's RoPE tables hold {d} rows, --context asks for {d} (KIT_DIR {s}/rope.json)", .{ kit.rope_rows, c, o.kit });
    } else if (kit.rope_rows < o.pool) refuse("the kit's RoPE tables hold {d} rows, --pool asks for {d} (KIT_DIR {s}/rope.json)", .{ kit.rope_rows, o.pool, o.kit });
    if (o.engram != null and o.token_map == null) refuse("--engram needs --token-map (the compressed token map, make_token_map.py): --engram DIR --token-map FILE", .{});
    if (o.token_map != null and o.engram == null) refuse("--token-map needs --engram: --engram DIR --token-map FILE", .{});
    if (o.engram) |dir| inputs.checkEngram(io, "--engram", dir);
    if (o.token_map) |path| _ = inputs.checkTokenMap(io, arena, "--token-map", path);
    log("model checked: {s} ({d} shard(s)); rank cache {s}; kit RoPE rows {d}; connecting to rank 0 at {f}", .{ o.model, found.shards, cache.file, kit.rope_rows, master });

    const env: common.Env = .{ .map = init.environ_map };
    var follower: fabric.Follower = .{
        .io = io,
        .rank = rank,
        .world = world,
        .hello = .{
            .rank = rank,
            .world = world,
            .kit = o.kit,
            .pool = o.pool,
            .rdma = o.rdma orelse "-",
            .drafts = o.drafts,
            .graphs = o.graphs,
            .side = o.side,
            .prefetch = o.prefetch,
            .aio = o.aio,
            .cache = &cache.hash,
            .engram_json = &kit.engram_hash,
            .rope = kit.rope_rows,
        },
        .master = master,
        .load_delay_ms = @intFromFloat(env.float("SIM_LOAD_DELAY_S", 2) * 1000),
        .connect_timeout_ms = @intFromFloat(env.float("SIM_CONNECT_WINDOW_S", 300) * 1000),
        .connect_error = "ConnectFailed",
        // No Engram: the real follower links to rank 0, then `Model.open` returns NoEngramTables (the comment at the
        // top): `error: NoEngramTables`, exit 1, once rank 0 has welcomed it.
        .load_error = if (o.engram == null) "NoEngramTables" else null,
    };
    follower.run();
}
