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
    const target = withoutSse4a(b, b.standardTargetOptions(.{}));
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

    addReleaseStep(b);

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

/// The target without AMD's SSE4a. Where the CPU has it, LLVM lowers some byte shuffles
/// of the quantized kernels to `insertq`, which on the 2-core AMD EPYC (Zen 3, KVM) host
/// stalled for most of a Q4_K matmul: 70% of a 1B Q4_K_M decode's samples sat on it, and
/// without the feature that decode went from 6.5 to 17.6 tok/s at 1 thread. The shipped
/// x86-64-v3/v4 builds never have it.
fn withoutSse4a(b: *std.Build, target: std.Build.ResolvedTarget) std.Build.ResolvedTarget {
    if (target.result.cpu.arch != .x86_64) return target;
    if (!std.Target.x86.featureSetHas(target.result.cpu.features, .sse4a)) return target;
    var query = target.query;
    query.cpu_features_sub.addFeature(@intFromEnum(std.Target.x86.Feature.sse4a));
    return b.resolveTargetQuery(query);
}

/// One library build that ships: its file name tells the locator what it is for.
const ReleaseTarget = struct {
    /// `<os>-<arch>[-<variant>]`, as `src/native/paths.ts` computes it.
    name: []const u8,
    query: std.Target.Query,
};

const release_targets = [_]ReleaseTarget{
    .{ .name = "linux-x86_64", .query = x86Query(.linux, .gnu, &std.Target.x86.cpu.x86_64_v3, &.{}) },
    .{ .name = "linux-x86_64-avx512", .query = x86Query(.linux, .gnu, &std.Target.x86.cpu.x86_64_v4, &.{.avx512vnni}) },
    .{ .name = "linux-aarch64", .query = .{ .cpu_arch = .aarch64, .os_tag = .linux, .abi = .gnu } },
    .{ .name = "macos-aarch64", .query = .{ .cpu_arch = .aarch64, .os_tag = .macos } },
    .{ .name = "macos-x86_64", .query = x86Query(.macos, .none, &std.Target.x86.cpu.x86_64_v3, &.{}) },
    .{ .name = "windows-x86_64", .query = x86Query(.windows, .gnu, &std.Target.x86.cpu.x86_64_v3, &.{}) },
    .{ .name = "windows-x86_64-avx512", .query = x86Query(.windows, .gnu, &std.Target.x86.cpu.x86_64_v4, &.{.avx512vnni}) },
};

fn x86Query(
    os: std.Target.Os.Tag,
    abi: std.Target.Abi,
    model: *const std.Target.Cpu.Model,
    extra: []const std.Target.x86.Feature,
) std.Target.Query {
    return .{
        .cpu_arch = .x86_64,
        .os_tag = os,
        .abi = abi,
        .cpu_model = .{ .explicit = model },
        .cpu_features_add = std.Target.x86.featureSet(extra),
    };
}

/// `zig build release`: every shipped library, ReleaseFast, into zig-out/release/
/// as `libdotllm-<name>.so` / `.dylib` or `dotllm-<name>.dll`.
fn addReleaseStep(b: *std.Build) void {
    const step = b.step("release", "Build the shipped libraries for every OS and CPU into zig-out/release");
    const platform = b.option(
        []const u8,
        "platform",
        "Only the release libraries of this <os>-<arch> (e.g. linux-x86_64)",
    );
    for (release_targets) |release| {
        if (platform) |p| if (!std.mem.startsWith(u8, release.name, p)) continue;
        const target = b.resolveTargetQuery(release.query);
        const lib = b.addLibrary(.{
            .linkage = .dynamic,
            .name = b.fmt("dotllm-{s}", .{release.name}),
            .root_module = b.createModule(.{
                .root_source_file = b.path("ffi/lib.zig"),
                .target = target,
                .optimize = .ReleaseFast,
                .link_libc = true,
                // No debug info in what ships: a quarter of the size.
                .strip = true,
            }),
        });
        const install = b.addInstallArtifact(lib, .{
            .dest_dir = .{ .override = .{ .custom = "release" } },
            .implib_dir = .disabled,
            .pdb_dir = .disabled,
        });
        step.dependOn(&install.step);
    }
}
