//! The small kernels of a transformer layer: RMSNorm, RoPE, SwiGLU, residual add,
//! softmax, KV-cache stores and embedding row lookup. The vectorised ones (RMSNorm,
//! SwiGLU, add) are tested against scalar definitions on awkward sizes; RoPE, softmax
//! and the row conversions are scalar code.
//!
//! Per-token kernels give the pool tokens as work units, element-wise kernels give it
//! elements in groups of the vector width; either way each output element is computed
//! by one thread exactly as with one thread.
const std = @import("std");
const simd = @import("simd.zig");
const quant = @import("quant.zig");
const pool_zig = @import("pool.zig");

const Pool = pool_zig.Pool;
const Status = pool_zig.Status;
const lanes = simd.f32_lanes;
const F32x = simd.F32x;
const F64x = @Vector(lanes, f64);

/// Below this many elements a kernel runs on the calling thread only.
pub const parallel_threshold_elements: usize = 1 << 15;

/// Largest head dimension RoPE and attention accept (their stack tables are sized by it).
pub const head_dim_max = 512;

// ---------------------------------------------------------------------------
// RMSNorm: out = x / sqrt(mean(x²) + eps) * w

/// Σ x² accumulated in f64 lanes (as ggml accumulates it in double).
fn sumSquares(x: [*]const f32, n: usize) f64 {
    var acc: F64x = @splat(0);
    var i: usize = 0;
    while (i + lanes <= n) : (i += lanes) {
        const v: F64x = simd.loadAsF32(f32, lanes, x + i);
        acc = @mulAdd(F64x, v, v, acc);
    }
    var sum = simd.hsum(lanes, f64, acc);
    while (i < n) : (i += 1) sum += @as(f64, x[i]) * x[i];
    return sum;
}

fn rmsnormRow(out: [*]f32, x: [*]const f32, w: [*]const f32, n: usize, eps: f32) void {
    const mean: f32 = @floatCast(sumSquares(x, n) / @as(f64, @floatFromInt(n)));
    const scale: f32 = 1.0 / @sqrt(mean + eps);
    const scale_v: F32x = @splat(scale);
    var i: usize = 0;
    while (i + lanes <= n) : (i += lanes) {
        const v = simd.loadAsF32(f32, lanes, x + i) * scale_v;
        simd.storeF32(lanes, out + i, v * simd.loadAsF32(f32, lanes, w + i));
    }
    while (i < n) : (i += 1) out[i] = (x[i] * scale) * w[i];
}

const RmsnormJob = struct { out: [*]f32, x: [*]const f32, w: [*]const f32, n: usize, tokens: usize, eps: f32 };

fn rmsnormRange(job: *const RmsnormJob, token_begin: usize, token_end: usize) void {
    for (token_begin..token_end) |t| rmsnormRow(job.out + t * job.n, job.x + t * job.n, job.w, job.n, job.eps);
}

pub fn rmsnorm(pool: *Pool, out: [*]f32, x: [*]const f32, w: [*]const f32, n: usize, tokens: usize, eps: f32) Status {
    const job: RmsnormJob = .{ .out = out, .x = x, .w = w, .n = n, .tokens = tokens, .eps = eps };
    return pool.run(RmsnormJob, &job, rmsnormRange, tokens, 1, n * tokens, parallel_threshold_elements);
}

pub fn referenceRmsnorm(out: []f32, x: []const f32, w: []const f32, n: usize, eps: f32) void {
    for (0..x.len / n) |t| {
        var sum: f64 = 0;
        for (x[t * n ..][0..n]) |v| sum += @as(f64, v) * v;
        const mean: f32 = @floatCast(sum / @as(f64, @floatFromInt(n)));
        const scale = 1.0 / @sqrt(mean + eps);
        for (0..n) |i| out[t * n + i] = x[t * n + i] * scale * w[i];
    }
}

// ---------------------------------------------------------------------------
// RoPE

const RopeJob = struct {
    x: [*]f32,
    tokens: usize,
    heads: usize,
    head_dim: usize,
    rope_dims: usize,
    pos_start: usize,
    freq_base: f32,
    freq_factors: ?[*]const f32,
    neox: bool,
};

/// cos/sin of theta_i = pos · base^(-2i/rope_dims) / factor_i for i < rope_dims/2. The
/// power is built by repeated multiplication in f32, as ggml does, so angles match it.
fn ropeAngles(job: *const RopeJob, pos: usize, cos: []f32, sin: []f32) void {
    const theta_scale = std.math.pow(f32, job.freq_base, -2.0 / @as(f32, @floatFromInt(job.rope_dims)));
    var theta: f32 = @floatFromInt(pos);
    for (cos, sin, 0..) |*c, *s, i| {
        const factor: f32 = if (job.freq_factors) |f| f[i] else 1.0;
        const angle = theta / factor;
        c.* = @cos(angle);
        s.* = @sin(angle);
        theta *= theta_scale;
    }
}

fn ropeRange(job: *const RopeJob, token_begin: usize, token_end: usize) void {
    const half = job.rope_dims / 2;
    var cos_buffer: [head_dim_max / 2]f32 = undefined;
    var sin_buffer: [head_dim_max / 2]f32 = undefined;
    const cos = cos_buffer[0..half];
    const sin = sin_buffer[0..half];
    for (token_begin..token_end) |t| {
        ropeAngles(job, job.pos_start + t, cos, sin);
        for (0..job.heads) |h| {
            const head = job.x + (t * job.heads + h) * job.head_dim;
            for (0..half) |i| {
                const a = if (job.neox) i else 2 * i;
                const b = if (job.neox) i + half else 2 * i + 1;
                const x0 = head[a];
                const x1 = head[b];
                head[a] = x0 * cos[i] - x1 * sin[i];
                head[b] = x0 * sin[i] + x1 * cos[i];
            }
        }
    }
}

pub fn rope(pool: *Pool, job: RopeJob) Status {
    std.debug.assert(job.rope_dims % 2 == 0 and job.rope_dims <= job.head_dim and job.head_dim <= head_dim_max);
    return pool.run(RopeJob, &job, ropeRange, job.tokens, 1, job.tokens * job.heads * job.rope_dims, parallel_threshold_elements);
}

// ---------------------------------------------------------------------------
// Element-wise: SwiGLU, add

const BinaryJob = struct { out: [*]f32, a: [*]const f32, b: [*]const f32, n: usize };

inline fn swigluVector(gate: F32x, up: F32x) F32x {
    const one: F32x = @splat(1);
    return gate / (one + simd.exp(lanes, -gate)) * up;
}

fn swigluRange(job: *const BinaryJob, begin: usize, end: usize) void {
    var i = begin;
    while (i + lanes <= end) : (i += lanes) {
        simd.storeF32(lanes, job.out + i, swigluVector(simd.loadAsF32(f32, lanes, job.a + i), simd.loadAsF32(f32, lanes, job.b + i)));
    }
    if (i < end) {
        // The tail through the same vector code, zero-padded.
        var gate: [lanes]f32 = @splat(0);
        var up: [lanes]f32 = @splat(0);
        @memcpy(gate[0 .. end - i], job.a[i..end]);
        @memcpy(up[0 .. end - i], job.b[i..end]);
        const out: [lanes]f32 = swigluVector(gate, up);
        @memcpy(job.out[i..end], out[0 .. end - i]);
    }
}

/// out = silu(gate) · up over n elements.
pub fn swiglu(pool: *Pool, out: [*]f32, gate: [*]const f32, up: [*]const f32, n: usize) Status {
    const job: BinaryJob = .{ .out = out, .a = gate, .b = up, .n = n };
    return pool.run(BinaryJob, &job, swigluRange, n, lanes, n * 8, parallel_threshold_elements);
}

fn addRange(job: *const BinaryJob, begin: usize, end: usize) void {
    var i = begin;
    while (i + lanes <= end) : (i += lanes) {
        simd.storeF32(lanes, job.out + i, simd.loadAsF32(f32, lanes, job.a + i) + simd.loadAsF32(f32, lanes, job.b + i));
    }
    while (i < end) : (i += 1) job.out[i] = job.a[i] + job.b[i];
}

/// out = a + b over n elements (out may alias a or b).
pub fn add(pool: *Pool, out: [*]f32, a: [*]const f32, b: [*]const f32, n: usize) Status {
    const job: BinaryJob = .{ .out = out, .a = a, .b = b, .n = n };
    return pool.run(BinaryJob, &job, addRange, n, lanes, n, parallel_threshold_elements * 4);
}

// ---------------------------------------------------------------------------
// Softmax (in place, one thread: it serves sampling)

pub fn softmax(x: []f32) void {
    if (x.len == 0) return;
    var max: f32 = -std.math.inf(f32);
    for (x) |v| max = @max(max, v);
    var sum: f64 = 0;
    for (x) |*v| {
        v.* = @exp(v.* - max);
        sum += v.*;
    }
    const scale: f32 = @floatCast(1.0 / sum);
    for (x) |*v| v.* *= scale;
}

// ---------------------------------------------------------------------------
// KV cache store and embedding lookup

/// Copies `tokens` rows of `kv_dim` f32 into rows [pos, pos + tokens) of a cache of T.
pub fn storeKv(comptime T: type, cache: [*]T, src: [*]const f32, pos: usize, tokens: usize, kv_dim: usize) void {
    const dst = cache[pos * kv_dim ..][0 .. tokens * kv_dim];
    const from = src[0 .. tokens * kv_dim];
    switch (T) {
        f32 => @memcpy(dst, from),
        f16 => quant.convertF32ToF16(from, dst),
        else => @compileError("storeKv: unsupported cache type"),
    }
}

/// Converts rows `ids[i]` (each `row_length` elements of type T) of `table` to f32 rows of `out`.
pub fn getRows(comptime T: type, out: [*]f32, table: [*]align(1) const T, ids: [*]const i32, count: usize, row_length: usize) void {
    const elements_per_row = if (T == quant.BlockQ8_0) row_length / quant.qk8_0 else row_length;
    for (0..count) |i| {
        const id: usize = @intCast(ids[i]);
        const row = table[id * elements_per_row ..][0..elements_per_row];
        const dst = out[i * row_length ..][0..row_length];
        switch (T) {
            f32 => for (row, dst) |v, *o| {
                o.* = v;
            },
            f16 => quant.convertF16ToF32(row, dst),
            u16 => quant.convertBf16ToF32(row, dst),
            quant.BlockQ8_0 => quant.dequantizeRowQ8_0(row, dst),
            else => @compileError("getRows: unsupported type"),
        }
    }
}

// ---------------------------------------------------------------------------
// Exports

export fn dotllm_rmsnorm_f32(pool: *Pool, out: [*]f32, x: [*]const f32, w: [*]const f32, n: usize, tokens: usize, eps: f32) i32 {
    std.debug.assert(n > 0);
    return @intFromEnum(rmsnorm(pool, out, x, w, n, tokens, eps));
}

/// RoPE in place on x[tokens][heads][head_dim]; `freq_factors` is 0 or rope_dims/2 f32;
/// `neox` 0 rotates adjacent pairs (llama), 1 rotates (i, i + rope_dims/2).
export fn dotllm_rope_f32(pool: *Pool, x: [*]f32, tokens: usize, heads: usize, head_dim: usize, rope_dims: usize, pos_start: usize, freq_base: f32, freq_factors: usize, neox: u32) i32 {
    return @intFromEnum(rope(pool, .{
        .x = x,
        .tokens = tokens,
        .heads = heads,
        .head_dim = head_dim,
        .rope_dims = rope_dims,
        .pos_start = pos_start,
        .freq_base = freq_base,
        .freq_factors = if (freq_factors == 0) null else @ptrFromInt(freq_factors),
        .neox = neox != 0,
    }));
}

export fn dotllm_swiglu_f32(pool: *Pool, out: [*]f32, gate: [*]const f32, up: [*]const f32, n: usize) i32 {
    return @intFromEnum(swiglu(pool, out, gate, up, n));
}

export fn dotllm_add_f32(pool: *Pool, out: [*]f32, a: [*]const f32, b: [*]const f32, n: usize) i32 {
    return @intFromEnum(add(pool, out, a, b, n));
}

export fn dotllm_softmax_f32(x: [*]f32, n: usize) void {
    softmax(x[0..n]);
}

export fn dotllm_store_kv_f32(cache: [*]f32, src: [*]const f32, pos: usize, tokens: usize, kv_dim: usize) void {
    storeKv(f32, cache, src, pos, tokens, kv_dim);
}

export fn dotllm_store_kv_f16(cache: [*]f16, src: [*]const f32, pos: usize, tokens: usize, kv_dim: usize) void {
    storeKv(f16, cache, src, pos, tokens, kv_dim);
}

export fn dotllm_get_rows_f32(out: [*]f32, table: [*]align(1) const f32, ids: [*]const i32, count: usize, row_length: usize) void {
    getRows(f32, out, table, ids, count, row_length);
}

export fn dotllm_get_rows_f16(out: [*]f32, table: [*]align(1) const f16, ids: [*]const i32, count: usize, row_length: usize) void {
    getRows(f16, out, table, ids, count, row_length);
}

export fn dotllm_get_rows_bf16(out: [*]f32, table: [*]align(1) const u16, ids: [*]const i32, count: usize, row_length: usize) void {
    getRows(u16, out, table, ids, count, row_length);
}

export fn dotllm_get_rows_q8_0(out: [*]f32, table: [*]align(1) const quant.BlockQ8_0, ids: [*]const i32, count: usize, row_length: usize) void {
    std.debug.assert(row_length % quant.qk8_0 == 0);
    getRows(quant.BlockQ8_0, out, table, ids, count, row_length);
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

fn randomFill(random: std.Random, x: []f32, scale: f32) void {
    for (x) |*v| v.* = (random.float(f32) * 2 - 1) * scale;
}

test "rmsnorm matches the reference on awkward sizes, bit-identical for 1..4 threads" {
    const allocator = testing.allocator;
    var prng = std.Random.DefaultPrng.init(1);
    const random = prng.random();
    for ([_]usize{ 1, 31, 33, 4096 + 7 }) |n| {
        const tokens = 9;
        const x = try allocator.alloc(f32, n * tokens);
        defer allocator.free(x);
        const w = try allocator.alloc(f32, n);
        defer allocator.free(w);
        const expected = try allocator.alloc(f32, n * tokens);
        defer allocator.free(expected);
        const single = try allocator.alloc(f32, n * tokens);
        defer allocator.free(single);
        const actual = try allocator.alloc(f32, n * tokens);
        defer allocator.free(actual);
        randomFill(random, x, 3);
        randomFill(random, w, 1);
        referenceRmsnorm(expected, x, w, n, 1e-5);
        for (1..5) |threads| {
            const pool = try Pool.create(allocator, @intCast(threads));
            defer pool.destroy(allocator);
            try testing.expectEqual(Status.ok, rmsnorm(pool, actual.ptr, x.ptr, w.ptr, n, tokens, 1e-5));
            // Same formula, f64 sum in a different order: a few ulps.
            for (expected, actual) |e, a| try testing.expectApproxEqAbs(e, a, 4 * std.math.floatEps(f32) * (@abs(e) + 1e-6));
            if (threads == 1) @memcpy(single, actual) else try testing.expectEqualSlices(f32, single, actual);
        }
    }
}

test "rope rotates adjacent pairs and neox halves, preserving norms" {
    const head_dim = 8;
    var x: [2 * head_dim]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @floatFromInt(i + 1);
    const original = x;
    const pool = try Pool.create(testing.allocator, 1);
    defer pool.destroy(testing.allocator);
    // Position 0 is the identity.
    try testing.expectEqual(Status.ok, rope(pool, .{ .x = &x, .tokens = 1, .heads = 2, .head_dim = head_dim, .rope_dims = head_dim, .pos_start = 0, .freq_base = 10000, .freq_factors = null, .neox = false }));
    try testing.expectEqualSlices(f32, &original, &x);
    // Position 1, pair 0 rotates by exactly 1 radian.
    try testing.expectEqual(Status.ok, rope(pool, .{ .x = &x, .tokens = 1, .heads = 2, .head_dim = head_dim, .rope_dims = 4, .pos_start = 1, .freq_base = 10000, .freq_factors = null, .neox = false }));
    try testing.expectApproxEqAbs(1 * @cos(@as(f32, 1)) - 2 * @sin(@as(f32, 1)), x[0], 1e-6);
    try testing.expectApproxEqAbs(1 * @sin(@as(f32, 1)) + 2 * @cos(@as(f32, 1)), x[1], 1e-6);
    try testing.expectEqual(original[4], x[4]); // beyond rope_dims: untouched
    // NeoX pairs (0, 2) in a 4-dim rotation, with a frequency factor of 2 on pair 0.
    var y = original;
    const factors = [_]f32{ 2, 1 };
    try testing.expectEqual(Status.ok, rope(pool, .{ .x = &y, .tokens = 1, .heads = 1, .head_dim = head_dim, .rope_dims = 4, .pos_start = 1, .freq_base = 10000, .freq_factors = &factors, .neox = true }));
    try testing.expectApproxEqAbs(1 * @cos(@as(f32, 0.5)) - 3 * @sin(@as(f32, 0.5)), y[0], 1e-6);
    try testing.expectApproxEqAbs(1 * @sin(@as(f32, 0.5)) + 3 * @cos(@as(f32, 0.5)), y[2], 1e-6);
}

test "swiglu, add and softmax match their definitions on awkward sizes, 1..4 threads" {
    const allocator = testing.allocator;
    var prng = std.Random.DefaultPrng.init(3);
    for ([_]usize{ 1, 31, 33, 4096 + 7, 3 * 11008 + 5 }) |n| {
        const gate = try allocator.alloc(f32, n);
        defer allocator.free(gate);
        const up = try allocator.alloc(f32, n);
        defer allocator.free(up);
        const out = try allocator.alloc(f32, n);
        defer allocator.free(out);
        const single = try allocator.alloc(f32, n);
        defer allocator.free(single);
        randomFill(prng.random(), gate, 12);
        randomFill(prng.random(), up, 2);
        for (1..5) |threads| {
            const pool = try Pool.create(allocator, @intCast(threads));
            defer pool.destroy(allocator);
            try testing.expectEqual(Status.ok, swiglu(pool, out.ptr, gate.ptr, up.ptr, n));
            // Vector exp within 2 ulp: a few ulp on silu(g)·u.
            for (gate, up, out) |g, u, o| try testing.expectApproxEqAbs(g / (1 + @exp(-g)) * u, o, 8 * std.math.floatEps(f32) * @abs(g * u) + 1e-30);
            if (threads == 1) @memcpy(single, out) else try testing.expectEqualSlices(f32, single, out);
            try testing.expectEqual(Status.ok, add(pool, out.ptr, gate.ptr, up.ptr, n));
            for (gate, up, out) |g, u, o| try testing.expectEqual(g + u, o);
        }
    }
    var logits = [_]f32{ 1, 2, 3, -1000 };
    softmax(&logits);
    const total = @exp(@as(f32, 1)) + @exp(@as(f32, 2)) + @exp(@as(f32, 3));
    try testing.expectApproxEqRel(@exp(@as(f32, 3)) / total, logits[2], 1e-6);
    try testing.expectEqual(@as(f32, 0), logits[3]);
}

test "getRows converts every type; storeKv writes f16 rows at a position" {
    var table: [3 * 32]f32 = undefined;
    for (&table, 0..) |*v, i| v.* = @as(f32, @floatFromInt(i)) / 8;
    const ids = [_]i32{ 2, 0 };
    var out: [2 * 32]f32 = undefined;
    getRows(f32, &out, &table, &ids, 2, 32);
    try testing.expectEqualSlices(f32, table[64..96], out[0..32]);
    var half: [3 * 32]f16 = undefined;
    quant.convertF32ToF16(&table, &half);
    getRows(f16, &out, &half, &ids, 2, 32);
    try testing.expectEqualSlices(f32, table[0..32], out[32..64]);
    var blocks: [3]quant.BlockQ8_0 = undefined;
    quant.quantizeRowQ8_0(&table, &blocks);
    getRows(quant.BlockQ8_0, &out, &blocks, &ids, 2, 32);
    for (table[64..96], out[0..32]) |e, a| try testing.expectApproxEqAbs(e, a, 12.0 / 127.0 / 2.0 + 1e-6);
    var cache: [4 * 8]f16 = @splat(0);
    storeKv(f16, &cache, table[0..16].ptr, 2, 2, 8);
    try testing.expectEqual(@as(f16, 0), cache[15]);
    try testing.expectEqual(@as(f16, 0.125), cache[17]);
    try testing.expectEqual(@as(f16, 15.0 / 8.0), cache[31]);
}
