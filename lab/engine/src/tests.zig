//! Root of `zig build test`: pulls in the unit tests of the simulator's modules.

test {
    _ = @import("answer.zig");
    _ = @import("common.zig");
    _ = @import("http.zig");
    _ = @import("cli.zig");
    _ = @import("fabric.zig");
    _ = @import("inputs.zig");
    _ = @import("rank_cache.zig");
    _ = @import("argp.zig");
    _ = @import("first_start.zig");
    _ = @import("vllm_serve.zig");
}
