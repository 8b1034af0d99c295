//! Builds dotllm's native library (kernels, thread pool, mmap) as one shared library.
//!
//!   zig build                       -> zig-out/lib/libdotllm.so (ReleaseFast)
//!   zig build -Doptimize=Debug      -> a debug build
//!   zig build test                  -> runs the Zig unit tests
const std = @import("std");
const builtin = @import("builtin");

/// The one Zig version this project builds with. The launcher (`./dotllm`) installs it.
pub const zig_version_pinned = "0.15.2";

comptime {
    const pinned = std.SemanticVersion.parse(zig_version_pinned) catch unreachable;
    if (builtin.zig_version.order(pinned) != .eq) {
        @compileError("dotllm needs Zig " ++ zig_version_pinned ++ ", this is Zig " ++
            builtin.zig_version_string ++ ": run ./dotllm (it installs the pinned Zig into .tools/)");
    }
}

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{});
    const optimize = b.option(
        std.builtin.OptimizeMode,
        "optimize",
        "Optimization mode (default ReleaseFast)",
    ) orelse .ReleaseFast;

    const root_module = b.createModule(.{
        .root_source_file = b.path("ffi/lib.zig"),
        .target = target,
        .optimize = optimize,
        .link_libc = true,
    });
    const lib = b.addLibrary(.{
        .linkage = .dynamic,
        .name = "dotllm",
        .root_module = root_module,
        // LLVM in every mode: the kernels' inline assembly (vpdpbusd) needs its assembler.
        .use_llvm = true,
    });
    b.installArtifact(lib);

    const test_module = b.createModule(.{
        .root_source_file = b.path("ffi/lib.zig"),
        .target = target,
        .optimize = b.option(std.builtin.OptimizeMode, "test-optimize", "Optimization for tests (default Debug)") orelse .Debug,
        .link_libc = true,
    });
    // LLVM: the kernels' inline assembly (vpdpbusd) needs its assembler.
    const tests = b.addTest(.{ .root_module = test_module, .use_llvm = true });
    const run_tests = b.addRunArtifact(tests);
    const test_step = b.step("test", "Run the Zig unit tests");
    test_step.dependOn(&run_tests.step);
}
