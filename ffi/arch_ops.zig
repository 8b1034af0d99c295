//! Kernels the model families of issue 12 add to the llama set: GELU-tanh gated FFN
//! (Gemma's GeGLU), a bias added to every row (Qwen 2's Q/K/V biases) and a scale
//! (Gemma's √embd on the embeddings).
//!
//! GeGLU is ggml's CPU kernel, value for value: the gate is rounded to F16, GELU (tanh
//! form, in f32) of that is rounded to F16 — ggml reads it from a 65,536-entry F16 table
//! built the same way — with 0 at or below -10 and the identity at or above 10; the result
//! times `up`. The table is built once, on first use (128 KiB).
//!
//! Each is a typed op of `ffi/graph.zig` (`geglu`, `add_rows`, `scale`); the TypeScript
//! reference kernels (`tests/_reference_kernels.ts`) compute the same functions.
const std = @import("std");
const simd = @import("simd.zig");
const pool_zig = @import("pool.zig");

const Pool = pool_zig.Pool;
const Status = pool_zig.Status;
const lanes = simd.f32_lanes;
const F32x = simd.F32x;

/// Below this many elements a kernel runs on the calling thread only.
const parallel_threshold_elements: usize = 1 << 15;

// ---------------------------------------------------------------------------
// GELU (tanh), as ggml

const sqrt_2_over_pi: f32 = 0.79788456080286535587989211986876;
const gelu_coef_a: f32 = 0.044715;

/// ggml's `ggml_gelu_f32`, evaluated in f32 in ggml's order as the reference build compiles
/// it: GCC contracts `1.0f + GELU_COEF_A*x*x` into one fma (`-ffp-contract=fast`, its GNU C
/// default, on an FMA target such as a GGML_NATIVE build here). With that fma, every entry
/// of the 65,536-entry table equals the reference build's `ggml_table_gelu_f16` (checked
/// against the table read out of its libggml-cpu.so); without it, entry 0xbfff (-1.999)
/// differs by one F16 ulp, which moved one FFN activation in most layers of Gemma 3.
pub fn geluF32(x: f32) f32 {
    const inner = @mulAdd(f32, gelu_coef_a * x, x, 1.0);
    return 0.5 * x * (1.0 + std.math.tanh(sqrt_2_over_pi * x * inner));
}

/// GELU of `x` as ggml's CPU backend computes it (the F16 table path).
pub fn referenceGelu(x: f32) f32 {
    if (x <= -10.0) return 0;
    if (x >= 10.0) return x;
    const h: f16 = @floatCast(x);
    const y: f16 = @floatCast(geluF32(h));
    return y;
}

var gelu_table: [1 << 16]f16 = undefined;
var gelu_table_once = std.once(buildGeluTable);

fn buildGeluTable() void {
    for (&gelu_table, 0..) |*y, i| {
        const x: f16 = @bitCast(@as(u16, @intCast(i)));
        y.* = @floatCast(geluF32(x));
    }
}

inline fn geluTable(x: f32) f32 {
    if (x <= -10.0) return 0;
    if (x >= 10.0) return x;
    const h: f16 = @floatCast(x);
    return gelu_table[@as(u16, @bitCast(h))];
}

const BinaryJob = struct { out: [*]f32, a: [*]const f32, b: [*]const f32, n: usize };

fn gegluRange(job: *const BinaryJob, begin: usize, end: usize) void {
    for (begin..end) |i| job.out[i] = geluTable(job.a[i]) * job.b[i];
}

/// out = gelu_tanh(gate) · up over n elements (out may alias gate or up).
pub fn geglu(pool: *Pool, out: [*]f32, gate: [*]const f32, up: [*]const f32, n: usize) Status {
    gelu_table_once.call();
    const job: BinaryJob = .{ .out = out, .a = gate, .b = up, .n = n };
    return pool.run(BinaryJob, &job, gegluRange, n, lanes, n * 4, parallel_threshold_elements);
}

// ---------------------------------------------------------------------------
// Bias rows and scale

const AddRowsJob = struct { out: [*]f32, x: [*]const f32, bias: [*]const f32, n: usize };

fn addRowsRange(job: *const AddRowsJob, begin: usize, end: usize) void {
    for (begin..end) |r| {
        const o = job.out + r * job.n;
        const x = job.x + r * job.n;
        var i: usize = 0;
        while (i + lanes <= job.n) : (i += lanes) {
            simd.storeF32(lanes, o + i, simd.loadAsF32(f32, lanes, x + i) + simd.loadAsF32(f32, lanes, job.bias + i));
        }
        while (i < job.n) : (i += 1) o[i] = x[i] + job.bias[i];
    }
}

/// out[r][i] = x[r][i] + bias[i] for `rows` rows of `n` (out may alias x).
pub fn addRows(pool: *Pool, out: [*]f32, x: [*]const f32, bias: [*]const f32, rows: usize, n: usize) Status {
    const job: AddRowsJob = .{ .out = out, .x = x, .bias = bias, .n = n };
    return pool.run(AddRowsJob, &job, addRowsRange, rows, 1, rows * n, parallel_threshold_elements * 4);
}

const ScaleJob = struct { out: [*]f32, x: [*]const f32, s: f32 };

fn scaleRange(job: *const ScaleJob, begin: usize, end: usize) void {
    const s: F32x = @splat(job.s);
    var i = begin;
    while (i + lanes <= end) : (i += lanes) simd.storeF32(lanes, job.out + i, simd.loadAsF32(f32, lanes, job.x + i) * s);
    while (i < end) : (i += 1) job.out[i] = job.x[i] * job.s;
}

/// out = x · s over n elements (out may alias x).
pub fn scale(pool: *Pool, out: [*]f32, x: [*]const f32, s: f32, n: usize) Status {
    const job: ScaleJob = .{ .out = out, .x = x, .s = s };
    return pool.run(ScaleJob, &job, scaleRange, n, lanes, n, parallel_threshold_elements * 4);
}

// ---------------------------------------------------------------------------
// BERT: plain GELU and layer norm with weight and bias

const UnaryJob = struct { out: [*]f32, x: [*]const f32 };

fn geluRange(job: *const UnaryJob, begin: usize, end: usize) void {
    for (begin..end) |i| job.out[i] = geluTable(job.x[i]);
}

/// out = gelu_tanh(x) over n elements (ggml's `ggml_gelu`, the F16-table path; out may alias x).
pub fn gelu(pool: *Pool, out: [*]f32, x: [*]const f32, n: usize) Status {
    gelu_table_once.call();
    const job: UnaryJob = .{ .out = out, .x = x };
    return pool.run(UnaryJob, &job, geluRange, n, lanes, n, parallel_threshold_elements);
}

const NormJob = struct { out: [*]f32, x: [*]const f32, w: [*]const f32, b: [*]const f32, n: usize, eps: f32 };

/// One row of ggml's `ggml_norm` followed by `ggml_mul` (weight) and `ggml_add` (bias):
/// the mean and the variance summed in f64 (ggml's `ggml_vec_sum_f32` sums in
/// `ggml_float`), each output in f32 as ggml's three ops round it. Scalar: a norm reads
/// each row twice, which costs little beside the matmuls around it.
pub fn normRow(out: [*]f32, x: [*]const f32, w: [*]const f32, b: [*]const f32, n: usize, eps: f32) void {
    var sum: f64 = 0;
    for (0..n) |i| sum += x[i];
    const mean: f32 = @floatCast(sum / @as(f64, @floatFromInt(n)));
    var sum2: f64 = 0;
    for (0..n) |i| {
        const d = x[i] - mean;
        sum2 += @as(f64, d) * d;
    }
    const variance: f32 = @floatCast(sum2 / @as(f64, @floatFromInt(n)));
    const s: f32 = 1.0 / @sqrt(variance + eps);
    for (0..n) |i| {
        const y = (x[i] - mean) * s;
        out[i] = y * w[i] + b[i];
    }
}

fn normRange(job: *const NormJob, begin: usize, end: usize) void {
    for (begin..end) |t| normRow(job.out + t * job.n, job.x + t * job.n, job.w, job.b, job.n, job.eps);
}

/// out[t] = (x[t] − mean) / √(var + eps) · w + b, rows of n (out may alias x).
pub fn norm(pool: *Pool, out: [*]f32, x: [*]const f32, w: [*]const f32, b: [*]const f32, n: usize, tokens: usize, eps: f32) Status {
    const job: NormJob = .{ .out = out, .x = x, .w = w, .b = b, .n = n, .eps = eps };
    return pool.run(NormJob, &job, normRange, tokens, 1, n * tokens, parallel_threshold_elements);
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "geglu: ggml's F16-table GELU times up, bit-identical for 1..4 threads" {
    const allocator = testing.allocator;
    var prng = std.Random.DefaultPrng.init(12);
    // Every F16 value as a gate hits every table entry (and both clamps).
    const n: usize = 1 << 16;
    const gate = try allocator.alloc(f32, n);
    defer allocator.free(gate);
    const up = try allocator.alloc(f32, n);
    defer allocator.free(up);
    const out = try allocator.alloc(f32, n);
    defer allocator.free(out);
    const single = try allocator.alloc(f32, n);
    defer allocator.free(single);
    for (gate, 0..) |*g, i| {
        const h: f16 = @bitCast(@as(u16, @intCast(i)));
        g.* = if (std.math.isNan(h)) 0 else h;
    }
    for (up) |*u| u.* = prng.random().float(f32) * 4 - 2;
    for (1..5) |threads| {
        const pool = try Pool.create(allocator, @intCast(threads));
        defer pool.destroy(allocator);
        try testing.expectEqual(Status.ok, geglu(pool, out.ptr, gate.ptr, up.ptr, n));
        for (gate, up, out) |g, u, o| try testing.expectEqual(referenceGelu(g) * u, o);
        if (threads == 1) @memcpy(single, out) else try testing.expectEqualSlices(f32, single, out);
    }
    // Known values: GELU(1) = 0.8412 (tanh form), GELU(-1) = -0.1588, clamps at ±10.
    try testing.expectApproxEqAbs(@as(f32, 0.8412), referenceGelu(1), 1e-3);
    try testing.expectApproxEqAbs(@as(f32, -0.1588), referenceGelu(-1), 1e-3);
    try testing.expectEqual(@as(f32, 0), referenceGelu(-10));
    try testing.expectEqual(@as(f32, 12.5), referenceGelu(12.5));
    // The entry the fma decides (ggml's table holds 0xa9d3 for -1.999, not 0xa9d2).
    try testing.expectEqual(@as(u16, 0xa9d3), @as(u16, @bitCast(@as(f16, @floatCast(referenceGelu(@as(f16, @bitCast(@as(u16, 0xbfff)))))))));
}

test "addRows and scale match their definitions on awkward sizes, 1..4 threads" {
    const allocator = testing.allocator;
    var prng = std.Random.DefaultPrng.init(5);
    for ([_][2]usize{ .{ 1, 1 }, .{ 3, 31 }, .{ 7, 33 }, .{ 300, 896 + 3 } }) |shape| {
        const rows = shape[0];
        const n = shape[1];
        const x = try allocator.alloc(f32, rows * n);
        defer allocator.free(x);
        const bias = try allocator.alloc(f32, n);
        defer allocator.free(bias);
        const out = try allocator.alloc(f32, rows * n);
        defer allocator.free(out);
        for (x) |*v| v.* = prng.random().float(f32) * 8 - 4;
        for (bias) |*v| v.* = prng.random().float(f32) - 0.5;
        for (1..5) |threads| {
            const pool = try Pool.create(allocator, @intCast(threads));
            defer pool.destroy(allocator);
            try testing.expectEqual(Status.ok, addRows(pool, out.ptr, x.ptr, bias.ptr, rows, n));
            for (0..rows) |r| for (0..n) |i| try testing.expectEqual(x[r * n + i] + bias[i], out[r * n + i]);
            try testing.expectEqual(Status.ok, scale(pool, out.ptr, x.ptr, 25.298221, rows * n));
            for (x, out) |v, o| try testing.expectEqual(v * @as(f32, 25.298221), o);
        }
    }
}

test "gelu: the F16-table GELU of every F16 value, bit-identical for 1..4 threads" {
    const allocator = testing.allocator;
    const n: usize = 1 << 16;
    const x = try allocator.alloc(f32, n);
    defer allocator.free(x);
    const out = try allocator.alloc(f32, n);
    defer allocator.free(out);
    for (x, 0..) |*g, i| {
        const h: f16 = @bitCast(@as(u16, @intCast(i)));
        g.* = if (std.math.isNan(h)) 0 else h;
    }
    for (1..5) |threads| {
        const pool = try Pool.create(allocator, @intCast(threads));
        defer pool.destroy(allocator);
        try testing.expectEqual(Status.ok, gelu(pool, out.ptr, x.ptr, n));
        for (x, out) |v, o| try testing.expectEqual(referenceGelu(v), o);
    }
}

test "norm: layer norm with weight and bias against an f64 reference, bit-identical for 1..4 threads" {
    const allocator = testing.allocator;
    var prng = std.Random.DefaultPrng.init(40);
    for ([_][2]usize{ .{ 1, 1 }, .{ 3, 31 }, .{ 5, 384 }, .{ 300, 768 + 3 } }) |shape| {
        const rows = shape[0];
        const n = shape[1];
        const x = try allocator.alloc(f32, rows * n);
        defer allocator.free(x);
        const w = try allocator.alloc(f32, n);
        defer allocator.free(w);
        const b = try allocator.alloc(f32, n);
        defer allocator.free(b);
        const out = try allocator.alloc(f32, rows * n);
        defer allocator.free(out);
        const single = try allocator.alloc(f32, rows * n);
        defer allocator.free(single);
        for (x) |*v| v.* = prng.random().float(f32) * 8 - 3;
        for (w) |*v| v.* = prng.random().float(f32) * 2;
        for (b) |*v| v.* = prng.random().float(f32) - 0.5;
        for (1..5) |threads| {
            const pool = try Pool.create(allocator, @intCast(threads));
            defer pool.destroy(allocator);
            try testing.expectEqual(Status.ok, norm(pool, out.ptr, x.ptr, w.ptr, b.ptr, n, rows, 1e-12));
            for (0..rows) |r| {
                const row = x[r * n ..][0..n];
                var mean: f64 = 0;
                for (row) |v| mean += v;
                mean /= @floatFromInt(n);
                var variance: f64 = 0;
                for (row) |v| variance += (v - mean) * (v - mean);
                variance /= @floatFromInt(n);
                for (row, 0..) |v, i| {
                    const expected = (v - mean) / @sqrt(variance + 1e-12) * w[i] + b[i];
                    try testing.expectApproxEqAbs(expected, out[r * n + i], 1e-5 * @max(1.0, @abs(expected)));
                }
            }
            if (threads == 1) @memcpy(single, out) else try testing.expectEqualSlices(f32, single, out);
        }
    }
}
