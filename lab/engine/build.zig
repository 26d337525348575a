//! Build script of the sparkfold lab engine: a SIMULATOR of TensorFold's command line and
//! HTTP API, used only by the sparkfold.cluster lab and tests. It is not TensorFold.
//!
//! It accepts TensorFold's build interface so the collection's engine role runs the same
//! command against it as against the real engine:
//!
//!   zig build install native -Dtarget=<triple> -Doptimize=ReleaseSafe \
//!       -Dnvcc=<path> -Dsm=<n> [-Dfatbins=DIR] [-Dcpu=..] [-Dstrip=..] --prefix OUT
//!
//! and installs where TensorFold's build installs (bertholomus/TensorFold zig/build/cuda.zig
//! @bbf471aa61ce473994cac00b887983d781c7c4a4: tensorfold-native through addInstallArtifact with
//! dest_dir custom "native/bin", the other programs through installArtifact):
//!   OUT/native/bin/tensorfold-native   rank 0 (`serve`)
//!   OUT/bin/tf-dsv41-lanes             followers
//!   OUT/bin/tf-dsv41-rank-cache        a rank's weight file (TF_DS_RANK_CACHE)
//!   OUT/libexec/dsv41-inputs/node_inputs.sh, make_token_map.py   a node's inputs (the lab's own
//!       versions of tools/dsv41-zig/inputs/), so a deployment can run them without the source tree
//!   (the last two lines not with the lab's -Dinput-tools=false: the TP2 pin's tree has neither)
//! -Dnvcc, -Dsm and -Dfatbins are declared and recorded in the build-info string that the
//! binaries print with --version; nothing here uses CUDA. -Dcpu is zig's own CPU option
//! (from standardTargetOptions); -Dstrip strips the binaries.
//!
//! Like TensorFold, the script refuses to compile with any Zig but the one named in
//! .zig-version (checked at comptime against builtin.zig_version).

const std = @import("std");
const builtin = @import("builtin");

/// The Zig release this tree is written for, from .zig-version (exact match required).
const required_zig_text = std.mem.trim(u8, @embedFile(".zig-version"), " \t\r\n");

comptime {
    const required = std.SemanticVersion.parse(required_zig_text) catch
        @compileError("lab engine: .zig-version does not hold a version: '" ++ required_zig_text ++ "'");
    if (required.order(builtin.zig_version) != .eq) {
        @compileError("lab engine: .zig-version asks for Zig " ++ required_zig_text ++
            " but this is Zig " ++ builtin.zig_version_string);
    }
}

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{});
    const optimize = b.standardOptimizeOption(.{});

    // TensorFold's options. Declared so the real build command is accepted; recorded only.
    const nvcc = b.option([]const u8, "nvcc", "Path of nvcc (recorded only: the simulator has no CUDA code)") orelse "none";
    const sm = b.option(u32, "sm", "CUDA SM architecture, e.g. 121 for GB10 (recorded only)") orelse 0;
    const fatbins = b.option([]const u8, "fatbins", "Directory of prebuilt fatbins (recorded only)") orelse "none";
    const strip = b.option(bool, "strip", "Strip debug information from the binaries") orelse false;
    // The lab's own option (TensorFold has none): which engine branch the simulator plays.
    //   tp2: deepseek-v41-zig (the follower's flag table of lanes_main.zig @d6047e5)
    //   tp4: deepseek-v41-zig-tp4 (the follower also takes --round-rows, --streams and --context, as the TP4
    //        recipe's scripts/serve.sh passes them; rank 0 sizes its pool by TF_DS_WINDOW)
    const family = b.option([]const u8, "family", "Engine branch the simulator plays: tp2 (default) or tp4 (lab only)") orelse "tp2";
    if (!std.mem.eql(u8, family, "tp2") and !std.mem.eql(u8, family, "tp4"))
        std.debug.panic("lab engine: -Dfamily is tp2 or tp4, got '{s}'", .{family});

    // The lab's own option too: whether the tree is the TP4 branch's with its input tools (tf-dsv41-rank-cache and
    // tools/dsv41-zig/inputs/, bertholomus/TensorFold @59402086), or the TP2 pin's (5e10970a), which has neither:
    // `scripts/lab up` publishes that tree without tools/dsv41-zig/inputs/, and its build passes -Dinput-tools=false
    // (without it the install fails on the missing files, as a copy of them fails at the real pin).
    const input_tools = b.option(bool, "input-tools", "Install tf-dsv41-rank-cache and tools/dsv41-zig/inputs/ (lab only; the TP2 pin has neither)") orelse true;

    const triple = target.query.zigTriple(b.allocator) catch @panic("OOM");
    const build_info = b.fmt(
        "target={s} cpu={s} optimize={s} nvcc={s} sm={d} fatbins={s} strip={} zig={s} family={s}",
        .{ triple, target.result.cpu.model.name, @tagName(optimize), nvcc, sm, fatbins, strip, builtin.zig_version_string, family },
    );

    const options = b.addOptions();
    options.addOption([]const u8, "build_info", build_info);
    options.addOption([]const u8, "zig_version", required_zig_text);
    options.addOption(bool, "tp4", std.mem.eql(u8, family, "tp4"));
    const options_module = options.createModule();

    const native_step = b.step("native", "Build tensorfold-native, tf-dsv41-lanes, tf-dsv41-rank-cache and the input tools (simulated engine)");

    const binaries = [_]struct { name: []const u8, root: []const u8, dir: ?[]const u8 }{
        .{ .name = "tensorfold-native", .root = "src/tensorfold_native.zig", .dir = "native/bin" },
        .{ .name = "tf-dsv41-lanes", .root = "src/tf_dsv41_lanes.zig", .dir = null },
        .{ .name = "tf-dsv41-rank-cache", .root = "src/tf_dsv41_rank_cache.zig", .dir = null },
    };
    for (binaries) |bin| {
        if (!input_tools and std.mem.eql(u8, bin.name, "tf-dsv41-rank-cache")) continue;
        const exe = b.addExecutable(.{
            .name = bin.name,
            .root_module = b.createModule(.{
                .root_source_file = b.path(bin.root),
                .target = target,
                .optimize = optimize,
                .strip = strip,
                .imports = &.{.{ .name = "build_options", .module = options_module }},
            }),
        });
        const install = b.addInstallArtifact(exe, .{
            .dest_dir = if (bin.dir) |d| .{ .override = .{ .custom = d } } else .default,
        });
        native_step.dependOn(&install.step);
        b.getInstallStep().dependOn(&install.step);
    }
    for ([_][]const u8{ "node_inputs.sh", "make_token_map.py" }) |tool| {
        if (!input_tools) break;
        const install = b.addInstallFileWithDir(b.path(b.fmt("tools/dsv41-zig/inputs/{s}", .{tool})), .{ .custom = "libexec/dsv41-inputs" }, tool);
        native_step.dependOn(&install.step);
        b.getInstallStep().dependOn(&install.step);
    }

    // `zig build containers`: the personalities of the engines that run in containers (the lab's stand-in
    // images run them): OUT/bin/vllm (`vllm serve`, the vLLM overlay recipe), OUT/bin/tensorfold
    // (`tensorfold serve --tp 2`, TensorFold's Python engine) and OUT/bin/sglang (the SGLang ring recipe's
    // `python3 /opt/dsv41/boot.py run` and `python3 -m sglang.launch_server`). Not part of `install native`.
    const containers_step = b.step("containers", "Build the container engines' personalities: vllm, tensorfold and sglang (simulated)");
    for ([_]struct { name: []const u8, root: []const u8 }{
        .{ .name = "vllm", .root = "src/vllm_serve.zig" },
        .{ .name = "tensorfold", .root = "src/tensorfold_py.zig" },
        .{ .name = "sglang", .root = "src/sglang_serve.zig" },
    }) |bin| {
        const exe = b.addExecutable(.{
            .name = bin.name,
            .root_module = b.createModule(.{
                .root_source_file = b.path(bin.root),
                .target = target,
                .optimize = optimize,
                .strip = strip,
                .imports = &.{.{ .name = "build_options", .module = options_module }},
            }),
        });
        containers_step.dependOn(&b.addInstallArtifact(exe, .{}).step);
    }

    // `zig build test`: the unit tests of the reply logic and the HTTP parsing helpers.
    const tests = b.addTest(.{
        .root_module = b.createModule(.{
            .root_source_file = b.path("src/tests.zig"),
            .target = target,
            .optimize = optimize,
            .imports = &.{.{ .name = "build_options", .module = options_module }},
        }),
    });
    const test_step = b.step("test", "Run the simulator's unit tests");
    test_step.dependOn(&b.addRunArtifact(tests).step);
}
