//! `tensorfold serve MODEL --tp 2 --rank R --master ADDR ...`: the lab engine SIMULATOR in the personality of
//! TensorFold's Python CLI as the container recipes of TensorFold's Python engine run it, rank 1 first, then
//! rank 0, which serves HTTP. THIS IS NOT TensorFold: nothing is loaded; replies are the lab's text.
//!
//! Sources:
//!   RUN_SH  sfxnz/DeepSeek-V4.1-Flash-EXL3-TensorFold-2x-DGX-Spark run.sh @38a06077281ba7f022d4fd5889ca703dc52ca3ef
//!           (serve_args: `--tp 2 --rank R --master HEAD --master-port 29571 --name N --context C --parallel P
//!           --mtp-drafts D --top-p T --no-update-check [--decode-share S] [--mtp-confidence X]
//!           --thinking|--no-thinking`, rank 0 also `--host --port --max-tokens`; "TensorFold's parser expands
//!           unambiguous prefixes (--cont means --context)"; NATIVE_CONTEXT=1048576 "the engine refuses a larger
//!           --context"; MAX_MTP_DRAFTS=5 "DSpark drafts at most 5 tokens a round"; PARALLEL "must be 1, 2, 3 or 4:
//!           the family decodes at most 4 requests together (MAX_LANES)")
//!   README  the same repository's README.md @38a06077 ("Not supported": "`--parallel` takes 1 to 4; further
//!           requests queue for a free lane"; each lane holds a whole --context window)
//!   LANES   sfxnz/TensorFold src/tensorfold/families/deepseek_v41/cuda/lanes.py @2258b00d1bbd74cae23d227f6cf41de946e49451
//!           (`if not 0 < slots <= MAX_LANES: raise ValueError(f"lanes: {slots} slots, 1 to {MAX_LANES}")`; how the
//!           CLI hands --parallel to the lanes is not stored: the lab takes the number as the slots, `auto` as 1)
//!   CLI     TensorFold's Python CLI `tensorfold/cli.py` (build_parser and _serve_cuda; the text the search index
//!           holds, id 70869682602; its repository and commit are not shown by the index: UNVERIFIED pin). The
//!           flag table below is its `serve` parser; its refusals: "--tp 2 needs --master: rank 0's address on the
//!           link between the two machines", "--rank 1 needs --tp 2", "--context must be 0 or a positive token
//!           count", "--context C exceeds this model's N-token window" (ValueError -> `tensorfold: <text>`, exit 1)
//!   HEALTH  sfxnz/... evidence/s2-run-sh-ec28f35/bootA/gate/health-after.json @f8ab7587 (`{"ok": true, "backend":
//!           "tensorfold", "busy": false, "requests_running": 0, ... "context_length": 65538}`)
//!   KEY     TENSORFOLD_API_KEY: "makes the engine refuse every request without Authorization: Bearer <key>,
//!           /metrics included, while /health stays open" (a TensorFold GLM recipe's README, found by the search
//!           index; not checked against the dsv41 Python engine: UNVERIFIED); the recipe's container.api_key_env is
//!           TF_API_KEY, so the lab takes either
//!   ENGRAM  ashhart/TensorFold deploy/dsv41-tp2/docker-compose.yaml: TF_DSV41_ENGRAM_DIR (a separate Engram
//!           folder); when set, the lab checks it holds deepseek-ai's shards 47 and 48, their index and config.json,
//!           as it checks TF_DS_ENGRAM. The sfxnz pack carries its Engram tables in its own shards 47 and 48 and
//!           sets no such variable.
//!
//! argparse refusals (`tensorfold serve: error: ...`, exit 2) come from argp.zig, with argparse's abbreviations.
//! Lab rules (exit 2): --mtp-drafts above 5 (RUN_SH's limit), the model directory (as the native lab engine
//! checks it: config.json, tokenizer.json, every shard of the index), a rank 1 whose shared flags differ from
//! rank 0's. The window: --context, else config.json's max_position_embeddings, else 1048576 (RUN_SH
//! NATIVE_CONTEXT); /health reports it as context_length. --parallel P (1 to 4) serves P requests at once, each
//! with the whole window; outside 1 to 4 it is LANES' ValueError (exit 1).

const std = @import("std");
const common = @import("common.zig");
const model = @import("model.zig");
const fabric = @import("fabric.zig");
const http = @import("http.zig");
const argp = @import("argp.zig");
const inputs = @import("inputs.zig");
const first_start = @import("first_start.zig");

const log = common.log;
const refuse = common.refuse;

const usage =
    \\usage: tensorfold serve [-h] [--host HOST] [--port PORT] [--name NAME] [--context CONTEXT] [--max-tokens MAX_TOKENS]
    \\                        [--mtp-drafts MTP_DRAFTS] [--parallel PARALLEL] [--tp {1,2}] [--rank {0,1}] [--master MASTER]
    \\                        [--master-port MASTER_PORT] ... model
    \\(TensorFold Python engine SIMULATOR for the sparkfold lab; see lab/engine/README.md)
    \\
;

/// The `serve` parser of TensorFold's Python CLI, flag by flag in its order, with its types and choices:
/// ashhart/TensorFold src/tensorfold/cli_args.py @0b3f3bbb080a1ab5e90216c2fedb1288ef996717 (`build_parser`; the only
/// stored version of the file; the tfpy recipe builds ashhart/TensorFold, whose parser this is).
pub const table = [_]argp.Opt{
    .{ .name = "--host", .kind = .str },
    .{ .name = "--port", .kind = .int },
    .{ .name = "--name", .kind = .str },
    .{ .name = "--alias", .kind = .str },
    .{ .name = "--vision", .kind = .flag },
    .{ .name = "--vision-urls", .kind = .flag },
    .{ .name = "--vision-max-images", .kind = .int },
    .{ .name = "--context", .kind = .int },
    .{ .name = "--max-tokens", .kind = .int },
    .{ .name = "--temperature", .kind = .float },
    .{ .name = "--top-p", .kind = .float },
    .{ .name = "--top-k", .kind = .int },
    .{ .name = "--min-p", .kind = .float },
    .{ .name = "--thinking", .kind = .boolopt },
    .{ .name = "--reasoning-effort", .kind = .str, .choices = &.{ "low", "medium", "high", "xhigh" } },
    .{ .name = "--thinking-budget", .kind = .int },
    .{ .name = "--no-drafts", .kind = .flag },
    .{ .name = "--drafter", .kind = .str },
    .{ .name = "--drafter-bits", .kind = .int },
    .{ .name = "--mtp-drafts", .kind = .int },
    .{ .name = "--mtp-confidence", .kind = .float },
    .{ .name = "--lane-kernels", .kind = .str, .choices = &.{ "auto", "on", "off" } },
    .{ .name = "--prompt-cache-gib", .kind = .float },
    .{ .name = "--checkpoint-slots", .kind = .int },
    .{ .name = "--tail-checkpoint-tokens", .kind = .int },
    .{ .name = "--spill-gib", .kind = .float },
    .{ .name = "--snapshot-dir", .kind = .str },
    .{ .name = "--max-snapshots", .kind = .int },
    .{ .name = "--parallel", .kind = .str },
    .{ .name = "--decode-share", .kind = .float },
    .{ .name = "--prefill-pass", .kind = .int },
    .{ .name = "--pass-cache-gib", .kind = .float },
    .{ .name = "--mlx-cache-gib", .kind = .float },
    .{ .name = "--ssd-experts", .kind = .float },
    .{ .name = "--ple-on-ssd", .kind = .flag },
    .{ .name = "--no-update-check", .kind = .flag },
    .{ .name = "--backend", .kind = .str, .choices = &.{ "auto", "mlx", "cuda" } },
    .{ .name = "--tp", .kind = .int, .choices = &.{ "1", "2" } },
    .{ .name = "--rank", .kind = .int, .choices = &.{ "0", "1" } },
    .{ .name = "--master", .kind = .str },
    .{ .name = "--master-port", .kind = .int },
    .{ .name = "--kv-dtype", .kind = .str, .choices = &.{ "bf16", "int8", "int4" } },
    .{ .name = "--prefill-fp8", .kind = .boolopt },
    .{ .name = "--precision", .kind = .str, .choices = &.{ "checkpoint", "full" } },
};

/// The flags both ranks must share (RUN_SH builds both ranks' from one serve_args).
const shared = [_][]const u8{ "--tp", "--context", "--mtp-drafts", "--mtp-confidence", "--no-drafts", "--kv-dtype", "--parallel", "--master-port" };

/// RUN_SH: "DSpark drafts at most 5 tokens a round".
const max_mtp_drafts = 5;
/// LANES MAX_LANES (RUN_SH: "the family decodes at most 4 requests together (MAX_LANES)").
const max_lanes = 4;
/// RUN_SH NATIVE_CONTEXT: the checkpoint's native window.
const native_context_default: u64 = 1048576;

var fatal_state: common.Fatal = .{};

fn argError(text: []const u8) noreturn {
    std.debug.print("{s}tensorfold serve: error: {s}\n", .{ usage, text });
    std.process.exit(common.exit_refused);
}

/// CLI main(): a ValueError is printed as `tensorfold: <text>` and the program exits 1.
fn valueError(comptime fmt: []const u8, args: anytype) noreturn {
    log("refusing to start: " ++ fmt, args);
    std.debug.print("tensorfold: " ++ fmt ++ "\n", args);
    std.process.exit(1);
}

fn nativeWindow(io: std.Io, arena: std.mem.Allocator, dir: []const u8) u64 {
    const path = std.fs.path.join(arena, &.{ dir, "config.json" }) catch return native_context_default;
    const text = std.Io.Dir.cwd().readFileAlloc(io, path, arena, .limited(1 << 20)) catch return native_context_default;
    const v = std.json.parseFromSliceLeaky(std.json.Value, arena, text, .{}) catch return native_context_default;
    if (v != .object) return native_context_default;
    const obj = if (v.object.get("text_config")) |t| (if (t == .object) t.object else v.object) else v.object;
    const limit = obj.get("max_position_embeddings") orelse return native_context_default;
    return if (limit == .integer and limit.integer > 0) @intCast(limit.integer) else native_context_default;
}

pub fn main(init: std.process.Init) !u8 {
    common.exitOnTerm();
    const io = init.io;
    const arena = init.arena.allocator();
    const args = try init.minimal.args.toSlice(arena);
    common.log_tag = "tensorfold";

    if (args.len >= 2 and std.mem.eql(u8, args[1], "--version")) {
        common.printVersion(io, "tensorfold");
        return 0;
    }
    // CLI main(): `tensorfold MODEL ...` is `tensorfold serve MODEL ...` when MODEL is a directory.
    var rest: []const []const u8 = args[1..];
    if (rest.len > 0 and std.mem.eql(u8, rest[0], "serve")) {
        rest = rest[1..];
    } else if (rest.len == 0 or std.mem.startsWith(u8, rest[0], "-")) {
        std.debug.print("usage: tensorfold [-h] [--version] {{serve,pull,models,info,update}} ...\ntensorfold: error: the following arguments are required: command\n", .{});
        return common.exit_refused;
    }
    const p = switch (try argp.parse(arena, &table, .{ .prog = "tensorfold serve", .positional = "model", .abbrev = true }, rest)) {
        .help => {
            std.debug.print("{s}", .{usage});
            return 0;
        },
        .bad => |text| argError(text),
        .ok => |o| o,
    };
    const env: common.Env = .{ .map = init.environ_map };
    const tp = p.int("--tp", 1);
    const rank = p.int("--rank", 0);
    common.log_tag = try std.fmt.allocPrint(arena, "tensorfold[rank {d}]", .{rank});

    const model_path = p.positional;
    const found = model.check(io, arena, model_path);
    log("model checked: {s} ({d} shard(s), {d} tensors in the index)", .{ model_path, found.shards, found.tensors });
    const native = nativeWindow(io, arena, model_path);
    const context: u64 = blk: {
        const c = p.int("--context", 0);
        if (c < 0) valueError("--context must be 0 or a positive token count", .{});
        break :blk if (c == 0) native else @intCast(c);
    };
    if (context > native) valueError("--context {d} exceeds this model's {d}-token window", .{ context, native });
    if (tp == 2 and p.get("--master") == null) valueError("--tp 2 needs --master: rank 0's address on the link between the two machines", .{});
    if (tp == 1 and rank != 0) valueError("--rank 1 needs --tp 2", .{});
    if (env.str("TF_DSV41_ENGRAM_DIR")) |dir| inputs.checkEngram(io, "TF_DSV41_ENGRAM_DIR", dir);
    const drafts = p.int("--mtp-drafts", max_mtp_drafts);
    if (drafts < 0 or drafts > max_mtp_drafts)
        refuse("--mtp-drafts {d}: DSpark drafts at most {d} tokens a round (0: none)", .{ drafts, max_mtp_drafts });
    const parallel_text = p.get("--parallel") orelse "auto";
    const lanes: i64 = if (std.ascii.eqlIgnoreCase(parallel_text, "auto")) 1 else std.fmt.parseInt(i64, parallel_text, 10) catch {
        std.debug.print("--parallel takes a number or auto, not '{s}'\n", .{parallel_text});
        return 1;
    };
    // LANES: `if not 0 < slots <= MAX_LANES: raise ValueError(f"lanes: {slots} slots, 1 to {MAX_LANES}")`.
    if (lanes < 1 or lanes > max_lanes) valueError("lanes: {d} slots, 1 to {d}", .{ lanes, max_lanes });
    const parallel: u32 = @intCast(lanes);
    const port: u16 = std.math.cast(u16, p.int("--port", 8080)) orelse refuse("--port {d} is not a port", .{p.int("--port", 0)});
    const master_port: u16 = std.math.cast(u16, p.int("--master-port", 29551)) orelse refuse("--master-port {d} is not a port", .{p.int("--master-port", 0)});

    var hasher = std.hash.Wyhash.init(0);
    for (shared) |name| {
        hasher.update(name);
        for (p.all(name)) |v| {
            hasher.update("=");
            hasher.update(v);
        }
        hasher.update(";");
    }
    hasher.update(try std.fmt.allocPrint(arena, "context={d}", .{context}));
    const digest = try std.fmt.allocPrint(arena, "{x:0>16}", .{hasher.final()});
    const rendezvous_timeout_ms: i64 = @intFromFloat(env.float("SIM_RENDEZVOUS_TIMEOUT_S", 600) * 1000);
    const master_host = p.get("--master") orelse "127.0.0.1";
    const master = common.parseAddress("--master", master_host, master_port);

    if (tp == 2 and rank == 1) {
        // FIRST_START: the rank's inputs, after its weights load (the real engine loads after NCCL's rendezvous;
        // the lab follower joins after this).
        first_start.write(io, arena, env, model_path, 1, 2);
        log("[tensorfold] rank 1 ready, following rank 0 at {s}:{d} (TensorFold SIMULATOR)", .{ master_host, master_port });
        var follower: fabric.Follower = .{
            .io = io,
            .rank = 1,
            .world = 2,
            .hello = .{ .rank = 1, .world = 2, .kit = model_path, .digest = digest },
            .master = master,
            .connect_timeout_ms = rendezvous_timeout_ms,
        };
        follower.run();
    }

    const name = p.get("--name") orelse std.fs.path.basename(model_path);
    var keys: std.ArrayList([]const u8) = .empty;
    if (env.str("TENSORFOLD_API_KEY")) |k| try keys.append(arena, k);
    if (env.str("TF_API_KEY")) |k| try keys.append(arena, k);
    const host = p.get("--host") orelse "127.0.0.1";
    const http_address = common.parseAddress("--host", host, port);
    const cfg: http.Config = .{
        .name = name,
        .context = context,
        .parallel = parallel,
        .api_keys = keys.items,
        .thinking = if (p.get("--thinking")) |_| p.flag("--thinking") else true,
        .drafts = !p.flag("--no-drafts") and drafts > 0,
        .default_max_tokens = @intCast(@max(1, p.int("--max-tokens", 4096))),
        .decode_tok_s = env.float("SIM_DECODE_TOK_S", 50),
        .prefill_tok_s = env.float("SIM_PREFILL_TOK_S", 2000),
        .ttft_base_ms = env.float("SIM_TTFT_BASE_MS", 50),
    };
    if (cfg.decode_tok_s <= 0 or cfg.prefill_tok_s <= 0) refuse("SIM_DECODE_TOK_S and SIM_PREFILL_TOK_S must be > 0", .{});
    const where: []const u8 = if (tp == 2) ", rank 0 of 2" else "";
    log("[tensorfold] loading {s}: DeepSeek-V4.1 (deepseek_v41) on CUDA{s} (TensorFold SIMULATOR)", .{ name, where });

    const expect = fabric.Expect.ofDigest(context, model_path, .{
        .value = digest,
        .what = "serve flags (--tp, --context, --mtp-drafts, --mtp-confidence, --no-drafts, --kv-dtype, --parallel, --master-port)",
    });
    const world: u32 = @intCast(tp);
    var rendezvous: fabric.Rendezvous = .{
        .io = io,
        .world = world,
        .peers = undefined,
        .fatal = &fatal_state,
        .grace_ms = @intFromFloat(env.float("SIM_FOLLOWER_GRACE_S", 5) * 1000),
        .expect = &expect,
    };
    rendezvous.peers = try arena.alloc(@TypeOf(rendezvous.peers[0]), world);
    for (rendezvous.peers) |*peer| peer.* = .{};
    if (tp == 2) {
        rendezvous.start(master);
        const started = common.nowMs(io);
        while (rendezvous.joined() < 1) {
            if (common.nowMs(io) - started > rendezvous_timeout_ms) {
                log("fatal: rank 1 did not join rank 0 at {s}:{d} within {d} s (start rank 1 first: `tensorfold serve MODEL --tp 2 --rank 1 --master {s} ...`); exiting", .{
                    master_host, master_port, @divTrunc(rendezvous_timeout_ms, 1000), master_host,
                });
                return 1;
            }
            common.sleepMs(io, 50);
        }
        log("rank 1 joined", .{});
    }
    first_start.write(io, arena, env, model_path, 0, world);
    const load_delay_ms: i64 = @intFromFloat(env.float("SIM_LOAD_DELAY_S", 2) * 1000);
    common.sleepMs(io, load_delay_ms);
    if (fatal_state.isSet()) while (true) common.sleepMs(io, 1000);

    var listener = http_address.listen(io, .{ .reuse_address = true }) catch |err| {
        log("fatal: cannot listen on {f}: {t}", .{ http_address, err });
        return 1;
    };
    var server: http.Server = .{ .io = io, .gpa = init.gpa, .cfg = cfg, .fatal = &fatal_state };
    rendezvous.serving.store(true, .release);
    log("[tensorfold] serving {s} at http://{f}/v1 on CUDA{s} (drafts: {s}; context: {d})", .{ name, http_address, where, if (cfg.drafts) "on" else "off", context });
    server.serve(&listener);
}
