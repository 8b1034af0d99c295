//! Micro-benchmark of ffi/quant_k.zig's dot products as a single-thread GEMV (one Q8_K
//! activation row against every weight row), per weight type and SIMD path: the best of
//! several passes, reported as weight bytes streamed per second. Two sizes: 512 × 4096
//! (the weights stay in L2: compute speed) and 8192 × 4096 (18–28 MB: memory speed).
//!
//!   zig run -OReleaseFast -fllvm --dep quant_k -Mroot=bench/quant_k_vecdot.zig -Mquant_k=ffi/quant_k.zig
//!
//! The weights are random quantizations (quantizeRowRef of Gaussian rows, tiled), so
//! every byte pattern the kernels see is one a real file has.
const std = @import("std");
const qk = @import("quant_k");

const cols = 4096;

fn run(comptime T: type, al: std.mem.Allocator, rows: usize) !void {
    const nb = cols / qk.qk_k;
    var prng = std.Random.DefaultPrng.init(7);
    const rng = prng.random();
    // 64 distinct rows quantized once (the reference quantizer is slow), then tiled.
    const distinct = 64;
    const x = try al.alloc(f32, distinct * cols);
    defer al.free(x);
    for (x) |*v| v.* = rng.floatNorm(f32);
    const w = try al.alloc(T.Block, rows * nb);
    defer al.free(w);
    for (0..distinct) |r| T.quantizeRowRef(x[r * cols ..][0..cols], w[r * nb ..][0..nb]);
    for (distinct..rows) |r| @memcpy(w[r * nb ..][0..nb], w[(r % distinct) * nb ..][0..nb]);
    var a: [nb]qk.Q8_K.Block = undefined;
    qk.Q8_K.quantizeRow(x[0..cols], &a);
    const out = try al.alloc(f32, rows);
    defer al.free(out);

    const paths = [_]qk.Path{ .avx512vnni, .avx2, .generic };
    var gbps: [paths.len]f64 = @splat(0);
    inline for (paths, 0..) |path, k| {
        const usable = switch (path) {
            .avx512vnni => qk.default_path == .avx512vnni,
            .avx2 => qk.default_path != .generic,
            .generic => true,
        };
        if (usable) {
            var best: u64 = std.math.maxInt(u64);
            const passes = @max(5, 100_000 / rows);
            for (0..passes) |_| {
                var timer = try std.time.Timer.start();
                for (0..rows) |r| out[r] = T.vecDotPath(path, w[r * nb ..][0..nb], &a);
                best = @min(best, timer.read());
                std.mem.doNotOptimizeAway(out.ptr);
            }
            gbps[k] = @as(f64, @floatFromInt(w.len * @sizeOf(T.Block))) / @as(f64, @floatFromInt(best));
        }
    }
    std.debug.print("{s:7} {d:5} x {d}: avx512vnni {d:6.2} GB/s   avx2 {d:6.2} GB/s   generic {d:6.2} GB/s\n", .{ T.name, rows, cols, gbps[0], gbps[1], gbps[2] });
}

pub fn main() !void {
    const al = std.heap.page_allocator;
    std.debug.print("default path on this target: {s}\n", .{@tagName(qk.default_path)});
    inline for (.{ "Q4_K", "Q6_K", "Q5_K", "Q3_K", "Q2_K", "IQ4_XS" }) |name| {
        try run(@field(qk, name), al, 512);
        try run(@field(qk, name), al, 8192);
    }
}
