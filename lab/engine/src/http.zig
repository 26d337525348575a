//! The HTTP API of the lab engine SIMULATOR: HTTP/1.1, one request per connection
//! (`Connection: close`), one thread per connection, blocking I/O.
//!
//! Routes (OpenAI-compatible where TensorFold is; shapes of ashhart/TensorFold docs/api.md):
//!   GET  /health                200 {"ok":true,"backend":"tensorfold","busy":b,"requests_running":n,
//!                                    "requests_total":n,"streams":{"decoding":d,"prefilling":p,"max":N},
//!                                    "context_length":N,"thinking":b,"drafts":b}
//!                               503 {"ok":false,"error":"..."} once a follower is lost;
//!                               with an API key only {"status":"ok"} (503 {"status":"error"})
//!   GET  /metrics, /v1/metrics  Prometheus text
//!   GET  /v1/models             {"object":"list","data":[{"id":NAME,"object":"model","max_model_len":N}]}
//!   POST /v1/chat/completions   messages, max_tokens, stream, temperature (ignored)
//!   POST /v1/completions        prompt, max_tokens, stream, temperature (ignored)
//!   POST /tokenize, /v1/tokenize  vLLM's: {"prompt":"..."} or {"messages":[...]} (optional "model")
//!                               -> {"count":n,"max_model_len":N,"tokens":[...]}
//! With an API key every /v1 route, tokenization and metrics need `Authorization: Bearer <key>`
//! (401 with `WWW-Authenticate: Bearer` otherwise); /health stays open.
//!
//! Timing: a request waits for one of the --parallel slots (it counts as queued meanwhile),
//! then "prefills" for prompt_tokens / SIM_PREFILL_TOK_S + SIM_TTFT_BASE_MS, then emits one
//! token (word) every 1 / SIM_DECODE_TOK_S seconds.

const std = @import("std");
const common = @import("common.zig");
const answer = @import("answer.zig");

const Io = std.Io;
const net = Io.net;
const Allocator = std.mem.Allocator;
const log = common.log;

/// Whose HTTP API the server plays: TensorFold's (the default) or vLLM's (vllm_serve.zig): vLLM's /health is an
/// empty 200 (vllm/entrypoints/openai/api_server.py `health`: `Response(status_code=200)`), only /v1 routes need
/// the key (its AuthenticationMiddleware, 401 `{"error": "Unauthorized"}`), and its context refusals are worded
/// as vLLM words them (vllm/entrypoints/renderer.py `_create_tokens_prompt`: "This model's maximum context length
/// is {max_length} tokens. However, your request has {n} input tokens. Please reduce the length of the input
/// messages.", type BadRequestError).
pub const Flavor = enum { tensorfold, vllm };

pub const Config = struct {
    flavor: Flavor = .tensorfold,
    name: []const u8,
    context: u64,
    parallel: u32,
    /// The keys of --api-key-file; empty: no key needed.
    api_keys: []const []const u8,
    decode_tok_s: f64,
    prefill_tok_s: f64,
    ttft_base_ms: f64,
    /// serve's --thinking / --no-thinking (recorded and shown in /health; replies are the same)
    thinking: bool = true,
    /// off with --no-drafts (recorded and shown in /health)
    drafts: bool = true,
    /// --max-tokens: max_tokens when a request gives none (capped by the room left in the context).
    default_max_tokens: u64 = 4096,
};

const max_body_bytes: usize = 256 << 20;
const max_headers: usize = 100;
const thread_config: std.Thread.SpawnConfig = .{ .stack_size = 2 << 20 };

pub const Server = struct {
    io: Io,
    gpa: Allocator,
    cfg: Config,
    fatal: *common.Fatal,

    mutex: Io.Mutex = .init,
    cond: Io.Condition = .init,
    active: u32 = 0,
    queued: u32 = 0,
    /// of the active requests, those past their prefill
    decoding: u32 = 0,
    requests_total: u64 = 0,
    prompt_tokens_total: u64 = 0,
    generation_tokens_total: u64 = 0,
    next_id: std.atomic.Value(u64) = .init(1),

    /// Accepts connections forever, one thread each.
    pub fn serve(srv: *Server, listener: *net.Server) noreturn {
        while (true) {
            const stream = listener.accept(srv.io) catch |err| {
                log("http: accept failed: {t}", .{err});
                common.sleepMs(srv.io, 50);
                continue;
            };
            const t = std.Thread.spawn(thread_config, connection, .{ srv, stream }) catch |err| {
                log("http: cannot start a connection thread: {t}", .{err});
                stream.close(srv.io);
                continue;
            };
            t.detach();
        }
    }

    const Counters = struct { active: u32, queued: u32, decoding: u32, requests_total: u64, prompt_tokens_total: u64, generation_tokens_total: u64 };

    fn counters(srv: *Server) Counters {
        srv.mutex.lockUncancelable(srv.io);
        defer srv.mutex.unlock(srv.io);
        return .{
            .active = srv.active,
            .queued = srv.queued,
            .decoding = srv.decoding,
            .requests_total = srv.requests_total,
            .prompt_tokens_total = srv.prompt_tokens_total,
            .generation_tokens_total = srv.generation_tokens_total,
        };
    }

    /// Waits for a free slot (counted as queued meanwhile).
    fn enter(srv: *Server) void {
        srv.mutex.lockUncancelable(srv.io);
        defer srv.mutex.unlock(srv.io);
        srv.queued += 1;
        while (srv.active >= srv.cfg.parallel) srv.cond.waitUncancelable(srv.io, &srv.mutex);
        srv.queued -= 1;
        srv.active += 1;
    }

    /// The request's prefill is over: it counts as decoding from now on.
    fn startDecoding(srv: *Server, decoding: *bool) void {
        if (decoding.*) return;
        srv.mutex.lockUncancelable(srv.io);
        defer srv.mutex.unlock(srv.io);
        srv.decoding += 1;
        decoding.* = true;
    }

    fn leave(srv: *Server, prompt_tokens: u64, generated: u64, decoding: bool) void {
        srv.mutex.lockUncancelable(srv.io);
        defer srv.mutex.unlock(srv.io);
        if (decoding) srv.decoding -= 1;
        srv.active -= 1;
        srv.requests_total += 1;
        srv.prompt_tokens_total += prompt_tokens;
        srv.generation_tokens_total += generated;
        srv.cond.broadcast(srv.io);
    }
};

fn connection(srv: *Server, stream: net.Stream) void {
    const io = srv.io;
    defer stream.close(io);
    var arena_state = std.heap.ArenaAllocator.init(srv.gpa);
    defer arena_state.deinit();
    const arena = arena_state.allocator();

    const rbuf = arena.alloc(u8, 64 * 1024) catch return;
    var sr = stream.reader(io, rbuf);
    var wbuf: [16 * 1024]u8 = undefined;
    var sw = stream.writer(io, &wbuf);
    var ex: Exchange = .{ .srv = srv, .arena = arena, .r = &sr.interface, .w = &sw.interface };
    ex.handle() catch {}; // the client went away; nothing left to tell it
    ex.w.flush() catch {};
    stream.shutdown(io, .send) catch {};
}

const Exchange = struct {
    srv: *Server,
    arena: Allocator,
    r: *Io.Reader,
    w: *Io.Writer,
    method: []const u8 = "",
    path: []const u8 = "",
    authorization: ?[]const u8 = null,
    body: []const u8 = "",

    const Error = Io.Writer.Error || Allocator.Error;

    fn handle(ex: *Exchange) Error!void {
        if (!try ex.readRequest()) return;
        const cfg = &ex.srv.cfg;
        const path = ex.path;
        if (std.mem.eql(u8, path, "/health")) {
            if (!try ex.allow("GET")) return;
            return ex.health();
        }
        const keyed = std.mem.startsWith(u8, path, "/v1/") or (cfg.flavor == .tensorfold and
            (std.mem.eql(u8, path, "/metrics") or std.mem.eql(u8, path, "/tokenize")));
        if (keyed and cfg.api_keys.len > 0 and !authorized(ex.authorization, cfg.api_keys)) {
            if (cfg.flavor == .vllm) return ex.sendJson(401, .{ .@"error" = "Unauthorized" });
            return ex.sendError(401, "authentication_error", "invalid or missing API key (send Authorization: Bearer <key>)");
        }
        if (std.mem.eql(u8, path, "/metrics") or std.mem.eql(u8, path, "/v1/metrics")) {
            if (!try ex.allow("GET")) return;
            return ex.metrics();
        }
        if (std.mem.eql(u8, path, "/tokenize") or std.mem.eql(u8, path, "/v1/tokenize")) {
            if (!try ex.allow("POST")) return;
            return ex.tokenize();
        }
        if (std.mem.startsWith(u8, path, "/v1/")) {
            if (std.mem.eql(u8, path, "/v1/models")) {
                if (!try ex.allow("GET")) return;
                return ex.models();
            }
            if (std.mem.eql(u8, path, "/v1/chat/completions")) {
                if (!try ex.allow("POST")) return;
                return ex.generate(.chat);
            }
            if (std.mem.eql(u8, path, "/v1/completions")) {
                if (!try ex.allow("POST")) return;
                return ex.generate(.completion);
            }
        }
        return ex.sendError(404, "not_found_error", "no such route");
    }

    /// Reads the request line, the headers and the body. False when an error was answered.
    fn readRequest(ex: *Exchange) Error!bool {
        const first = readLine(ex.r) orelse return false;
        var parts = std.mem.tokenizeScalar(u8, first, ' ');
        ex.method = try ex.arena.dupe(u8, parts.next() orelse "");
        const target = parts.next() orelse "";
        const query_at = std.mem.findScalar(u8, target, '?') orelse target.len;
        ex.path = try ex.arena.dupe(u8, target[0..query_at]);
        const version = parts.next() orelse "";
        if (ex.method.len == 0 or ex.path.len == 0 or !std.mem.startsWith(u8, version, "HTTP/1.")) {
            try ex.sendError(400, "invalid_request_error", "malformed request line");
            return false;
        }

        var content_length: usize = 0;
        var expect_continue = false;
        var n: usize = 0;
        while (true) : (n += 1) {
            if (n == max_headers) {
                try ex.sendError(431, "invalid_request_error", "too many header fields");
                return false;
            }
            const line = readLine(ex.r) orelse return false;
            if (line.len == 0) break;
            const colon = std.mem.findScalar(u8, line, ':') orelse continue;
            const name = std.mem.trim(u8, line[0..colon], " \t");
            const value = std.mem.trim(u8, line[colon + 1 ..], " \t");
            if (std.ascii.eqlIgnoreCase(name, "content-length")) {
                content_length = std.fmt.parseInt(usize, value, 10) catch {
                    try ex.sendError(400, "invalid_request_error", "bad Content-Length");
                    return false;
                };
            } else if (std.ascii.eqlIgnoreCase(name, "authorization")) {
                ex.authorization = try ex.arena.dupe(u8, value);
            } else if (std.ascii.eqlIgnoreCase(name, "expect")) {
                expect_continue = std.ascii.eqlIgnoreCase(value, "100-continue");
            } else if (std.ascii.eqlIgnoreCase(name, "transfer-encoding")) {
                try ex.sendError(411, "invalid_request_error", "send the body with a Content-Length");
                return false;
            }
        }
        if (content_length > max_body_bytes) {
            try ex.sendError(413, "invalid_request_error", "request body too large");
            return false;
        }
        if (content_length > 0) {
            if (expect_continue) {
                try ex.w.writeAll("HTTP/1.1 100 Continue\r\n\r\n");
                try ex.w.flush();
            }
            ex.body = ex.r.readAllocAll(ex.arena, content_length) catch |err| switch (err) {
                error.OutOfMemory => return error.OutOfMemory,
                else => return false,
            };
        }
        return true;
    }

    fn allow(ex: *Exchange, method: []const u8) Error!bool {
        if (std.mem.eql(u8, ex.method, method)) return true;
        try ex.sendError(405, "invalid_request_error", "method not allowed");
        return false;
    }

    fn health(ex: *Exchange) Error!void {
        const srv = ex.srv;
        const fatal = srv.fatal.isSet();
        // Starlette's bare Response: no body, no Content-Type.
        if (srv.cfg.flavor == .vllm) return ex.sendRaw(if (fatal) 503 else 200, "", "");
        if (srv.cfg.api_keys.len > 0) {
            return ex.sendJson(if (fatal) 503 else 200, .{ .status = if (fatal) "error" else "ok" });
        }
        if (fatal) return ex.sendJson(503, .{ .ok = false, .@"error" = srv.fatal.message() });
        const c = srv.counters();
        const running = c.active + c.queued;
        return ex.sendJson(200, .{
            .ok = true,
            .backend = "tensorfold",
            .busy = running > 0,
            .requests_running = running,
            .requests_total = c.requests_total,
            .streams = .{ .decoding = c.decoding, .prefilling = c.active - c.decoding, .max = srv.cfg.parallel },
            .context_length = srv.cfg.context,
            .thinking = srv.cfg.thinking,
            .drafts = srv.cfg.drafts,
        });
    }

    fn metrics(ex: *Exchange) Error!void {
        const srv = ex.srv;
        const c = srv.counters();
        const body = try std.fmt.allocPrint(ex.arena,
            \\# HELP tensorfold_healthy 1 while all ranks are up (TensorFold simulator).
            \\# TYPE tensorfold_healthy gauge
            \\tensorfold_healthy {d}
            \\# TYPE tensorfold_requests_running gauge
            \\tensorfold_requests_running {d}
            \\# TYPE tensorfold_streams_active gauge
            \\tensorfold_streams_active {d}
            \\# TYPE tensorfold_streams_queued gauge
            \\tensorfold_streams_queued {d}
            \\# TYPE tensorfold_streams_decoding gauge
            \\tensorfold_streams_decoding {d}
            \\# TYPE tensorfold_streams_prefilling gauge
            \\tensorfold_streams_prefilling {d}
            \\# TYPE tensorfold_slots gauge
            \\tensorfold_slots {d}
            \\# TYPE tensorfold_requests_total counter
            \\tensorfold_requests_total {d}
            \\# TYPE tensorfold_prompt_tokens_total counter
            \\tensorfold_prompt_tokens_total {d}
            \\# TYPE tensorfold_generation_tokens_total counter
            \\tensorfold_generation_tokens_total {d}
            \\
        , .{
            @intFromBool(!srv.fatal.isSet()), c.active + c.queued,       c.active,         c.queued,
            c.decoding,                       c.active - c.decoding,     srv.cfg.parallel, c.requests_total,
            c.prompt_tokens_total,            c.generation_tokens_total,
        });
        return ex.sendRaw(200, "text/plain; version=0.0.4", body);
    }

    fn models(ex: *Exchange) Error!void {
        const cfg = &ex.srv.cfg;
        return ex.sendJson(200, .{
            .object = "list",
            .data = .{.{
                .id = cfg.name,
                .object = "model",
                .created = common.unixSeconds(ex.srv.io),
                .owned_by = if (cfg.flavor == .vllm) "vllm" else "tensorfold",
                .max_model_len = cfg.context,
            }},
        });
    }

    /// vLLM's /tokenize: a `prompt` string, or the `messages` of a chat request (their contents, as the
    /// chat route counts them); `model` is optional.
    fn tokenize(ex: *Exchange) Error!void {
        const root = ex.parseBody() orelse return ex.sendError(400, "invalid_request_error", "body is not a JSON object");
        var texts: std.ArrayList([]const u8) = .empty;
        const has_prompt = root.get("prompt") != null;
        const has_messages = root.get("messages") != null;
        if (has_prompt and has_messages) return ex.sendError(400, "invalid_request_error", "give \"prompt\" or \"messages\", not both");
        if (has_prompt) {
            const prompt = switch (root.get("prompt").?) {
                .string => |s| s,
                else => return ex.sendError(400, "invalid_request_error", "\"prompt\" must be a string"),
            };
            try texts.append(ex.arena, prompt);
        } else if (has_messages) {
            const messages = switch (root.get("messages").?) {
                .array => |a| a.items,
                else => return ex.sendError(400, "invalid_request_error", "\"messages\" must be an array"),
            };
            for (messages) |m| {
                const obj = switch (m) {
                    .object => |o| o,
                    else => return ex.sendError(400, "invalid_request_error", "each message must be an object"),
                };
                try texts.append(ex.arena, try messageContent(ex.arena, obj.get("content") orelse .null));
            }
        } else {
            return ex.sendError(400, "invalid_request_error", "\"prompt\" (a string) or \"messages\" (a chat request's) is required");
        }
        var ids: std.ArrayList(u32) = .empty;
        for (texts.items) |text| {
            var it = std.mem.tokenizeAny(u8, text, &std.ascii.whitespace);
            while (it.next()) |word| try ids.append(ex.arena, answer.tokenId(word));
        }
        return ex.sendJson(200, .{ .count = ids.items.len, .max_model_len = ex.srv.cfg.context, .tokens = ids.items });
    }

    const Kind = enum { chat, completion };

    fn generate(ex: *Exchange, kind: Kind) Error!void {
        const srv = ex.srv;
        const io = srv.io;
        const cfg = &srv.cfg;
        const received_ms = common.nowMs(io);
        const root = ex.parseBody() orelse return ex.sendError(400, "invalid_request_error", "body is not a JSON object");

        var texts: std.ArrayList([]const u8) = .empty;
        var last_user: []const u8 = "";
        switch (kind) {
            .chat => {
                const messages = switch (root.get("messages") orelse .null) {
                    .array => |a| a.items,
                    else => return ex.sendError(400, "invalid_request_error", "\"messages\" (an array) is required"),
                };
                if (messages.len == 0) return ex.sendError(400, "invalid_request_error", "\"messages\" is empty");
                for (messages) |m| {
                    const obj = switch (m) {
                        .object => |o| o,
                        else => return ex.sendError(400, "invalid_request_error", "each message must be an object"),
                    };
                    const content = try messageContent(ex.arena, obj.get("content") orelse .null);
                    try texts.append(ex.arena, content);
                    const role = stringField(obj, "role") orelse "";
                    if (std.mem.eql(u8, role, "user")) last_user = content;
                }
                if (last_user.len == 0) last_user = texts.items[texts.items.len - 1];
            },
            .completion => {
                const prompt = try promptText(ex.arena, root.get("prompt") orelse .null) orelse
                    return ex.sendError(400, "invalid_request_error", "\"prompt\" (a string) is required");
                try texts.append(ex.arena, prompt);
                last_user = prompt;
            },
        }

        var prompt_tokens: u64 = 0;
        for (texts.items) |t| prompt_tokens += answer.countTokens(t);
        if (prompt_tokens >= cfg.context and cfg.flavor == .vllm) {
            const msg = try std.fmt.allocPrint(
                ex.arena,
                "This model's maximum context length is {d} tokens. However, your request has {d} input tokens. Please reduce the length of the input messages.",
                .{ cfg.context, prompt_tokens },
            );
            return ex.sendError(400, "BadRequestError", msg);
        }
        if (prompt_tokens >= cfg.context) {
            const msg = try std.fmt.allocPrint(
                ex.arena,
                "This model's maximum context length is {d} tokens; the prompt has {d}.",
                .{ cfg.context, prompt_tokens },
            );
            return ex.sendError(400, "invalid_request_error", msg);
        }
        const max_tokens: u64 = blk: {
            const v = root.get("max_tokens") orelse root.get("max_completion_tokens") orelse .null;
            switch (v) {
                .null => break :blk @min(cfg.default_max_tokens, cfg.context - prompt_tokens),
                .integer => |i| {
                    if (i < 1) return ex.sendError(400, "invalid_request_error", "max_tokens must be at least 1");
                    break :blk @intCast(i);
                },
                else => return ex.sendError(400, "invalid_request_error", "max_tokens must be an integer"),
            }
        };
        if (prompt_tokens + max_tokens > cfg.context and cfg.flavor == .vllm) {
            const msg = try std.fmt.allocPrint(
                ex.arena,
                "'max_tokens' or 'max_completion_tokens' is too large: {d}. This model's maximum context length is {d} tokens and your request has {d} input tokens ({d} > {d} - {d}).",
                .{ max_tokens, cfg.context, prompt_tokens, max_tokens, cfg.context, prompt_tokens },
            );
            return ex.sendError(400, "BadRequestError", msg);
        }
        if (prompt_tokens + max_tokens > cfg.context) {
            const msg = try std.fmt.allocPrint(
                ex.arena,
                "This model's maximum context length is {d} tokens. However, you requested {d} tokens " ++
                    "({d} in the prompt, {d} in the completion).",
                .{ cfg.context, prompt_tokens + max_tokens, prompt_tokens, max_tokens },
            );
            return ex.sendError(400, "invalid_request_error", msg);
        }
        const stream = switch (root.get("stream") orelse .null) {
            .bool => |b| b,
            else => false,
        };
        if (srv.fatal.isSet()) return ex.sendError(503, "server_error", srv.fatal.message());

        const reply = try answer.build(ex.arena, texts.items, last_user, @intCast(@min(max_tokens, 1 << 24)));
        const id_num = srv.next_id.fetchAdd(1, .monotonic);
        const id = try std.fmt.allocPrint(ex.arena, "{s}-sim-{d}", .{ if (kind == .chat) "chatcmpl" else "cmpl", id_num });
        errdefer log("request aborted: id={s} route={s} (the client went away)", .{ id, ex.path });
        const created = common.unixSeconds(io);
        const usage = .{
            .prompt_tokens = prompt_tokens,
            .completion_tokens = reply.completion_tokens,
            .total_tokens = prompt_tokens + reply.completion_tokens,
        };

        if (stream) {
            // Headers go out at once; the tokens follow when a slot is free.
            try ex.w.writeAll("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n");
            try ex.w.flush();
        }

        srv.enter();
        var emitted: u64 = 0;
        var decoding = false;
        defer srv.leave(prompt_tokens, emitted, decoding);
        const start_ms = common.nowMs(io);

        const prefill_ns: i96 = @intFromFloat((@as(f64, @floatFromInt(prompt_tokens)) * 1000.0 / @max(cfg.prefill_tok_s, 1e-9) + cfg.ttft_base_ms) * std.time.ns_per_ms);
        const interval_ns: i96 = @intFromFloat(1e9 / @max(cfg.decode_tok_s, 1e-9));
        const t0 = Io.Clock.awake.now(io).nanoseconds;
        const first_token_at = t0 + prefill_ns;

        if (!stream) {
            const n: i96 = @intCast(reply.completion_tokens);
            sleepUntil(io, first_token_at);
            srv.startDecoding(&decoding);
            sleepUntil(io, first_token_at + @max(n - 1, 0) * interval_ns);
            emitted = reply.completion_tokens;
            if (srv.fatal.isSet()) return ex.sendError(503, "server_error", srv.fatal.message());
            const message = .{ .role = "assistant", .content = reply.text };
            switch (kind) {
                .chat => try ex.sendJson(200, .{
                    .id = id,
                    .object = "chat.completion",
                    .created = created,
                    .model = cfg.name,
                    .choices = .{.{ .index = 0, .message = message, .finish_reason = reply.finish_reason }},
                    .usage = usage,
                }),
                .completion => try ex.sendJson(200, .{
                    .id = id,
                    .object = "text_completion",
                    .created = created,
                    .model = cfg.name,
                    .choices = .{.{ .index = 0, .text = reply.text, .logprobs = null, .finish_reason = reply.finish_reason }},
                    .usage = usage,
                }),
            }
            logDone(id, ex.path, false, usage, received_ms, start_ms, start_ms + @as(i64, @intCast(@divTrunc(prefill_ns, std.time.ns_per_ms))), reply.finish_reason);
            return;
        }

        var ttft_ms: i64 = 0;
        var words = std.mem.tokenizeScalar(u8, reply.text, ' ');
        var i: i96 = 0;
        while (words.next()) |word| : (i += 1) {
            sleepUntil(io, first_token_at + i * interval_ns);
            if (srv.fatal.isSet()) {
                try ex.sseEvent(.{ .@"error" = .{ .message = srv.fatal.message(), .type = "server_error", .code = 503 } });
                log("request aborted: id={s} ({s})", .{ id, srv.fatal.message() });
                return;
            }
            const piece = if (i == 0) word else try std.mem.concat(ex.arena, u8, &.{ " ", word });
            if (i == 0) {
                ttft_ms = common.nowMs(io);
                srv.startDecoding(&decoding);
            }
            switch (kind) {
                .chat => try ex.sseEvent(.{
                    .id = id,
                    .object = "chat.completion.chunk",
                    .created = created,
                    .model = cfg.name,
                    .choices = .{.{ .index = 0, .delta = .{ .role = "assistant", .content = piece }, .finish_reason = null }},
                }),
                .completion => try ex.sseEvent(.{
                    .id = id,
                    .object = "text_completion",
                    .created = created,
                    .model = cfg.name,
                    .choices = .{.{ .index = 0, .text = piece, .logprobs = null, .finish_reason = null }},
                }),
            }
            emitted += 1;
        }
        switch (kind) {
            .chat => try ex.sseEvent(.{
                .id = id,
                .object = "chat.completion.chunk",
                .created = created,
                .model = cfg.name,
                .choices = .{.{ .index = 0, .delta = .{}, .finish_reason = reply.finish_reason }},
                .usage = usage,
            }),
            .completion => try ex.sseEvent(.{
                .id = id,
                .object = "text_completion",
                .created = created,
                .model = cfg.name,
                .choices = .{.{ .index = 0, .text = "", .logprobs = null, .finish_reason = reply.finish_reason }},
                .usage = usage,
            }),
        }
        try ex.w.writeAll("data: [DONE]\n\n");
        try ex.w.flush();
        logDone(id, ex.path, true, usage, received_ms, start_ms, if (ttft_ms == 0) common.nowMs(io) else ttft_ms, reply.finish_reason);
    }

    fn parseBody(ex: *Exchange) ?std.json.ObjectMap {
        const v = std.json.parseFromSliceLeaky(std.json.Value, ex.arena, ex.body, .{}) catch return null;
        return switch (v) {
            .object => |o| o,
            else => null,
        };
    }

    fn sseEvent(ex: *Exchange, value: anytype) Error!void {
        try ex.w.writeAll("data: ");
        try std.json.Stringify.value(value, .{}, ex.w);
        try ex.w.writeAll("\n\n");
        try ex.w.flush();
    }

    fn sendJson(ex: *Exchange, status: u16, value: anytype) Error!void {
        const body = try std.json.Stringify.valueAlloc(ex.arena, value, .{});
        return ex.sendRaw(status, "application/json", body);
    }

    fn sendError(ex: *Exchange, status: u16, kind: []const u8, message: []const u8) Error!void {
        return ex.sendJson(status, .{ .@"error" = .{ .message = message, .type = kind, .code = status } });
    }

    fn sendRaw(ex: *Exchange, status: u16, content_type: []const u8, body: []const u8) Error!void {
        try ex.w.print("HTTP/1.1 {d} {s}\r\n", .{ status, reasonPhrase(status) });
        if (content_type.len > 0) try ex.w.print("Content-Type: {s}\r\n", .{content_type});
        try ex.w.print("Content-Length: {d}\r\n{s}Connection: close\r\n\r\n", .{
            body.len, if (status == 401) "WWW-Authenticate: Bearer\r\n" else "",
        });
        try ex.w.writeAll(body);
        try ex.w.flush();
    }
};

fn logDone(id: []const u8, path: []const u8, stream: bool, usage: anytype, received_ms: i64, start_ms: i64, first_token_ms: i64, finish: []const u8) void {
    log("request done: id={s} route={s} stream={} prompt_tokens={d} completion_tokens={d} queued_ms={d} ttft_ms={d} finish={s}", .{
        id,                     path,                         stream, usage.prompt_tokens, usage.completion_tokens,
        start_ms - received_ms, first_token_ms - received_ms, finish,
    });
}

fn sleepUntil(io: Io, deadline_ns: i96) void {
    const now = Io.Clock.awake.now(io).nanoseconds;
    if (deadline_ns <= now) return;
    io.sleep(.fromNanoseconds(deadline_ns - now), .awake) catch {};
}

fn authorized(header: ?[]const u8, keys: []const []const u8) bool {
    const h = header orelse return false;
    const prefix = "bearer ";
    if (h.len < prefix.len or !std.ascii.eqlIgnoreCase(h[0..prefix.len], prefix)) return false;
    const given = std.mem.trim(u8, h[prefix.len..], " \t");
    for (keys) |key| if (std.mem.eql(u8, given, key)) return true;
    return false;
}

/// The keys of an API key file (ashhart/TensorFold docs/api.md): one key a line, optional
/// `label: key` entries (a label is at most 64 letters, digits, dots, underscores or hyphens),
/// lines starting with `#` are comments.
pub fn parseKeys(arena: Allocator, text: []const u8) Allocator.Error![]const []const u8 {
    var keys: std.ArrayList([]const u8) = .empty;
    var lines = std.mem.splitScalar(u8, text, '\n');
    while (lines.next()) |raw| {
        const line = std.mem.trim(u8, raw, &std.ascii.whitespace);
        if (line.len == 0 or line[0] == '#') continue;
        var key = line;
        if (std.mem.findScalar(u8, line, ':')) |colon| {
            const label = std.mem.trim(u8, line[0..colon], " \t");
            if (isLabel(label)) key = std.mem.trim(u8, line[colon + 1 ..], " \t");
        }
        if (key.len > 0) try keys.append(arena, key);
    }
    return keys.items;
}

fn isLabel(s: []const u8) bool {
    if (s.len == 0 or s.len > 64) return false;
    for (s) |c| if (!(std.ascii.isAlphanumeric(c) or c == '.' or c == '_' or c == '-')) return false;
    return true;
}

fn stringField(obj: std.json.ObjectMap, name: []const u8) ?[]const u8 {
    return switch (obj.get(name) orelse return null) {
        .string => |s| s,
        else => null,
    };
}

/// A message's content: a string, or an array of parts whose "text" fields are joined.
fn messageContent(arena: Allocator, v: std.json.Value) Allocator.Error![]const u8 {
    switch (v) {
        .string => |s| return s,
        .array => |a| {
            var parts: std.ArrayList([]const u8) = .empty;
            for (a.items) |part| switch (part) {
                .object => |o| if (stringField(o, "text")) |t| try parts.append(arena, t),
                .string => |s| try parts.append(arena, s),
                else => {},
            };
            return std.mem.join(arena, " ", parts.items);
        },
        else => return "",
    }
}

/// A completion prompt: a string, or an array of strings (joined).
fn promptText(arena: Allocator, v: std.json.Value) Allocator.Error!?[]const u8 {
    switch (v) {
        .string => |s| return s,
        .array => |a| {
            var parts: std.ArrayList([]const u8) = .empty;
            for (a.items) |part| switch (part) {
                .string => |s| try parts.append(arena, s),
                else => return null,
            };
            return try std.mem.join(arena, " ", parts.items);
        },
        else => return null,
    }
}

/// One header line without its line ending, or null at end of stream / when too long.
fn readLine(r: *Io.Reader) ?[]const u8 {
    const line = r.takeDelimiterInclusive('\n') catch return null;
    return std.mem.trimEnd(u8, line, "\r\n");
}

fn reasonPhrase(status: u16) []const u8 {
    return switch (status) {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        else => "Status",
    };
}

test "authorized" {
    const keys: []const []const u8 = &.{ "sk-1", "sk-3" };
    try std.testing.expect(authorized("Bearer sk-1", keys));
    try std.testing.expect(authorized("bearer  sk-3 ", keys));
    try std.testing.expect(!authorized("Bearer sk-2", keys));
    try std.testing.expect(!authorized(null, keys));
}

test "API key files: lines, labels, comments" {
    var arena_state = std.heap.ArenaAllocator.init(std.testing.allocator);
    defer arena_state.deinit();
    const keys = try parseKeys(arena_state.allocator(), "# keys\nsk-lab-123\n\nci: sk-ci-9\n  # indented comment\nnot a label: sk-x\n");
    try std.testing.expectEqual(@as(usize, 3), keys.len);
    try std.testing.expectEqualStrings("sk-lab-123", keys[0]);
    try std.testing.expectEqualStrings("sk-ci-9", keys[1]);
    try std.testing.expectEqualStrings("not a label: sk-x", keys[2]);
}
