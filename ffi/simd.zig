//! SIMD building blocks shared by the kernels: the f32 vector width of the target,
//! unaligned vector loads with conversion, a deterministic horizontal sum, and the
//! CPU features chosen at compile time.
const std = @import("std");
const builtin = @import("builtin");

const cpu = @import("cpu.zig");

const x86 = std.Target.x86;

/// Zen 4 runs each 512-bit vector op as two 256-bit halves, so a kernel that pairs two
/// 8-lane accumulators in one 512-bit register buys no width there and pays for its
/// shuffles: the Q4_1 tile takes a 256-bit variant on it (measured in its module doc).
pub const splits_512bit = built_for_zen4;

/// Built for Zen 4 (`znver4`), the CPU model the Zen 4 choices here were measured on.
const built_for_zen4 = builtin.cpu.arch == .x86_64 and builtin.cpu.model == &x86.cpu.znver4;

/// True when the target has AVX-512 VNNI with 256-bit forms (`vpdpbusd ymm`).
pub const has_avx512vnni = builtin.cpu.arch == .x86_64 and
    x86.featureSetHas(builtin.cpu.features, .avx512vnni) and
    x86.featureSetHas(builtin.cpu.features, .avx512vl);

/// True when the target has AVX2 (`vpmaddubsw`, `vpsignb` on 256-bit vectors).
pub const has_avx2 = builtin.cpu.arch == .x86_64 and
    x86.featureSetHas(builtin.cpu.features, .avx2);

/// f32 lanes per vector: 16 with AVX-512, 8 with AVX2, 4 otherwise.
pub const f32_lanes: comptime_int = std.simd.suggestVectorLength(f32) orelse 4;

pub const F32x = @Vector(f32_lanes, f32);

/// Loads `lanes` elements of type `T` from `ptr` (no alignment needed) as f32.
/// T is f32, f16 or u16 (bf16 bits).
pub inline fn loadAsF32(comptime T: type, comptime lanes: comptime_int, ptr: [*]align(1) const T) @Vector(lanes, f32) {
    const raw: @Vector(lanes, T) = @as(*align(1) const [lanes]T, @ptrCast(ptr)).*;
    return switch (T) {
        f32 => raw,
        f16 => @floatCast(raw),
        u16 => @bitCast(@as(@Vector(lanes, u32), raw) << @splat(16)),
        else => @compileError("loadAsF32: unsupported type " ++ @typeName(T)),
    };
}

/// Converts one element of type T (f32, f16, u16 = bf16 bits) to f32.
pub inline fn toF32(comptime T: type, value: T) f32 {
    return switch (T) {
        f32 => value,
        f16 => value,
        u16 => @bitCast(@as(u32, value) << 16),
        else => @compileError("toF32: unsupported type " ++ @typeName(T)),
    };
}

pub inline fn storeF32(comptime lanes: comptime_int, ptr: [*]align(1) f32, value: @Vector(lanes, f32)) void {
    @as(*align(1) [lanes]f32, @ptrCast(ptr)).* = value;
}

/// Sums the lanes of `v` by halving (a fixed tree, so the result never depends on
/// the caller's code path).
pub inline fn hsum(comptime lanes: comptime_int, comptime T: type, v: @Vector(lanes, T)) T {
    if (lanes == 1) return v[0];
    const half = lanes / 2;
    const lo_mask = comptime std.simd.iota(i32, half);
    const hi_mask = comptime lo_mask + @as(@Vector(half, i32), @splat(half));
    const lo = @shuffle(T, v, undefined, lo_mask);
    const hi = @shuffle(T, v, undefined, hi_mask);
    return hsum(half, T, lo + hi);
}

/// How far ahead of its reads a GEMV prefetches the weights, at least (bytes). The
/// matmul hands a kernel rows that follow each other in memory, so R rows of `cols`
/// weights are one span of R·row_bytes that a kernel walks block column by block
/// column: R short streams the hardware prefetcher starts late on every row (a
/// 2048-column Q4_K row is 1152 bytes). Prefetching the span linearly, at the rate the
/// kernel consumes it, keeps one stream in flight instead; measured on the 2-core
/// AVX-512 host (1 thread, interleaved with a plain read, best of rounds): Q4_K 8192×2048
/// GEMV 65-71% → 85-94% of the read bandwidth, Q6_K 32064×2048 (a vocabulary matrix)
/// 64-66% → 97%; 18-55 KiB ahead were alike, 4-12 KiB less.
pub const gemv_prefetch_ahead_bytes: usize = 32 * 1024;

/// Prefetch (into L2) the `step_bytes` at byte `offset_bytes` of a kernel's walk over the
/// `group_bytes` of its rows, `max(gemv_prefetch_ahead_bytes, group_bytes)` ahead of
/// `group` (the first row): far enough that for long rows too each byte is fetched
/// before the kernel reads it. Only a hint: it never faults past the matrix end.
pub inline fn prefetchAhead(group: [*]const u8, group_bytes: usize, offset_bytes: usize, comptime step_bytes: usize) void {
    const ahead = @max(gemv_prefetch_ahead_bytes, group_bytes);
    const p = group + ahead + offset_bytes;
    inline for (0..(step_bytes + 63) / 64) |k| @prefetch(p + 64 * k, .{ .locality = 2 });
}

/// Whether the kernels that read one contiguous span front to back (the interleaved
/// Q4_0/IQ4_NL/Q4_K groups, or the 16 or 8 consecutive rows they transpose on the fly)
/// add `prefetchAhead` (and the float GEMV reads 4 rows at once rather than one: see
/// `matmul.zig`). Zen 4's hardware prefetcher follows such a span alone, and the
/// software prefetch there only costs. Measured on the 2-core Zen 4 host: a ring of
/// 8192×2048 matrices (450 MB, beyond the L3), each GEMV pass beside a plain read of the
/// same bytes, GEMV / read at 1 thread Q4_Kx16 0.72-0.81 with it and 0.87-1.05 without,
/// Q4_0x16 0.71-0.86 and 1.05; at 2 threads 0.90-0.98 and 1.05-1.14. Row-by-row kernels
/// (Q6_K, Q8_0: R short rows at once) keep `prefetchAhead` everywhere: without it the
/// same ring read 0.30-0.36. Other CPUs keep it (the Intel hosts gained from it).
///
/// A build for a CPU model knows the answer; a build for a generic x86-64 level (the
/// release libraries, `x86_64_v3` and `x86_64_v4`) asks the running CPU once
/// (`cpu.isZen4`). The release AVX-512 library on the Zen 4 host, 1 thread, two
/// alternating rounds, tok/s: 1B-shape Q4_K_M decode 28.8 / 30.2 with the choice fixed
/// at the Intel one, 35.6 / 36.0 asking (the native build 34.1 / 35.6); smollm-135m F16
/// 72.0 / 76.5 and 89.6 / 92.6 (native 100.0 / 99.4).
pub inline fn prefetchSpans() bool {
    if (comptime !generic_x86) return comptime !built_for_zen4;
    var state = zen4_state.load(.monotonic);
    if (state == 0) {
        state = if (cpu.isZen4()) 2 else 1;
        zen4_state.store(state, .monotonic);
    }
    return state == 1;
}

/// Built for a generic x86-64 level rather than one CPU model.
const generic_x86 = builtin.cpu.arch == .x86_64 and
    (builtin.cpu.model == &x86.cpu.x86_64 or builtin.cpu.model == &x86.cpu.x86_64_v2 or
        builtin.cpu.model == &x86.cpu.x86_64_v3 or builtin.cpu.model == &x86.cpu.x86_64_v4);

/// `cpu.isZen4()` of the running CPU: 0 not asked yet, 1 no, 2 yes (a race only asks twice).
var zen4_state: std.atomic.Value(u8) = .init(0);

/// `prefetchAhead` for a kernel that reads one contiguous span (see `prefetchSpans`).
pub inline fn prefetchSpanAhead(group: [*]const u8, group_bytes: usize, offset_bytes: usize, comptime step_bytes: usize) void {
    if (prefetchSpans()) prefetchAhead(group, group_bytes, offset_bytes, step_bytes);
}

/// e^x lane-wise (Cephes-style: 2^n · p(r) with |r| <= ln2/2, degree-6 polynomial),
/// within 2 ulp of @exp for x in [-87, 88]; inputs are clamped to [-87.3, 88.7].
pub inline fn exp(comptime n: comptime_int, x_in: @Vector(n, f32)) @Vector(n, f32) {
    const V = @Vector(n, f32);
    const x = @min(@max(x_in, @as(V, @splat(-87.3))), @as(V, @splat(88.7)));
    const k = @round(x * @as(V, @splat(1.44269504088896341)));
    var r = @mulAdd(V, k, @as(V, @splat(-0.693359375)), x);
    r = @mulAdd(V, k, @as(V, @splat(2.12194440e-4)), r);
    var p: V = @splat(1.9875691500e-4);
    p = @mulAdd(V, p, r, @splat(1.3981999507e-3));
    p = @mulAdd(V, p, r, @splat(8.3334519073e-3));
    p = @mulAdd(V, p, r, @splat(4.1665795894e-2));
    p = @mulAdd(V, p, r, @splat(1.6666665459e-1));
    p = @mulAdd(V, p, r, @splat(5.0000001201e-1));
    p = @mulAdd(V, p, r * r, r + @as(V, @splat(1)));
    const ki: @Vector(n, i32) = @intFromFloat(k);
    const scale: V = @bitCast((ki + @as(@Vector(n, i32), @splat(127))) << @splat(23));
    return p * scale;
}

/// ggml's vector expf (`ggml_v_expf` of ggml-cpu/vec.h, AVX-512 form), bit for bit:
/// the same polynomial, fused multiply-adds and `scalef` scaling, so kernels that
/// must match llama.cpp exactly (SwiGLU, softmax) round as it does. |n| > 192
/// gives inf or 0, as there.
pub inline fn expGgml(comptime n: comptime_int, x: @Vector(n, f32)) @Vector(n, f32) {
    const V = @Vector(n, f32);
    const r: V = @splat(0x1.8p23);
    const z = @mulAdd(V, x, @splat(0x1.715476p+0), r);
    const k = z - r;
    const b = @mulAdd(V, -k, @splat(0x1.7f7d1cp-20), @mulAdd(V, -k, @splat(0x1.62e4p-1), x));
    const u = b * b;
    const j = @mulAdd(
        V,
        @mulAdd(V, @mulAdd(V, @splat(0x1.0e4020p-7), b, @splat(0x1.573e2ep-5)), u, @mulAdd(V, @splat(0x1.555e66p-3), b, @splat(0x1.fffdb6p-2))),
        u,
        @mulAdd(V, @splat(0x1.ffffecp-1), b, @splat(1.0)),
    );
    // scalef(j, k) = j·2^k with one rounding: two exact power-of-two steps of at most
    // 2^±96 each (normal numbers), the second one rounding.
    const big = @abs(k) > @as(V, @splat(192));
    const kc = @select(f32, big, @as(V, @splat(0)), k);
    const k_int: @Vector(n, i32) = @intFromFloat(kc);
    const half = k_int >> @splat(1);
    const rest = k_int - half;
    const bias: @Vector(n, i32) = @splat(127);
    const p1: V = @bitCast((half + bias) << @splat(23));
    const p2: V = @bitCast((rest + bias) << @splat(23));
    const res = (j * p1) * p2;
    const alt = @select(f32, k <= @as(V, @splat(0)), @as(V, @splat(0)), @as(V, @splat(std.math.inf(f32))));
    return @select(f32, big, alt, res);
}

test "hsum adds every lane" {
    const v: @Vector(16, f32) = .{ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
    try std.testing.expectEqual(@as(f32, 136), hsum(16, f32, v));
    const w: @Vector(8, i32) = .{ 1, -2, 3, -4, 5, -6, 7, -8 };
    try std.testing.expectEqual(@as(i32, -4), hsum(8, i32, w));
}

test "vector exp is within 2 ulp of @exp" {
    var x: f32 = -87;
    while (x < 88) : (x += 0.01731) {
        const v: @Vector(4, f32) = .{ x, x * 0.5, -x * 0.25, x * 0.001 };
        const got = exp(4, v);
        for (0..4) |i| {
            const want = @exp(v[i]);
            const ulp = std.math.floatEps(f32) * @abs(want);
            if (@abs(got[i] - want) > 2 * ulp + std.math.floatMin(f32)) {
                std.debug.print("exp({e}) = {e}, want {e}\n", .{ v[i], got[i], want });
                return error.TestExpectedApproxEq;
            }
        }
    }
}

test "loadAsF32 converts f16 and bf16" {
    const h = [_]f16{ 1, -2, 0.5, 3 };
    const b = [_]u16{ 0x3f80, 0xc000, 0x3f00, 0x4040 };
    const expected: @Vector(4, f32) = .{ 1, -2, 0.5, 3 };
    try std.testing.expectEqual(expected, loadAsF32(f16, 4, &h));
    try std.testing.expectEqual(expected, loadAsF32(u16, 4, &b));
}
