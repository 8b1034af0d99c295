//! The small kernels of a transformer layer: RMSNorm, RoPE, SwiGLU, residual add and
//! KV-cache stores (embedding row lookup is the type table's `getRows`). The vectorised ones (RMSNorm,
//! SwiGLU, add) are tested against scalar definitions on awkward sizes; RoPE and the
//! KV stores are scalar code.
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

/// Below this many elements a kernel runs on the calling thread only.
pub const parallel_threshold_elements: usize = 1 << 15;

/// Largest head dimension RoPE and attention accept (their stack tables are sized by it).
pub const head_dim_max = 512;

// ---------------------------------------------------------------------------
// RMSNorm: out = x / sqrt(mean(x²) + eps) * w

/// Σ x² as ggml's `rms_norm` computes it: each square rounded to f32, summed in f64
/// left to right. Sequential on purpose: any other order can change the f32 mean in
/// its last bit, and the models downstream of a Q8 activation quantizer amplify that.
fn sumSquares(x: [*]const f32, n: usize) f64 {
    var sum: f64 = 0;
    for (0..n) |i| sum += @as(f64, x[i] * x[i]);
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

pub const RopeJob = struct {
    x: [*]f32,
    /// Position of each token.
    positions: [*]const i32,
    tokens: usize,
    heads: usize,
    head_dim: usize,
    rope_dims: usize,
    freq_base: f32,
    freq_factors: ?[*]const f32,
    neox: bool,
};

// The C library's powf, cosf and sinf: llama.cpp's RoPE calls them, and its angles are
// matched bit for bit only by the same functions (Zig's own differ in the last bit).
extern "c" fn powf(x: f32, y: f32) f32;
extern "c" fn cosf(x: f32) f32;
extern "c" fn sinf(x: f32) f32;

/// cos/sin of theta_i = pos · base^(-2i/rope_dims) / factor_i for i < rope_dims/2,
/// as ggml's `ggml_rope_cache_init`: the power built by repeated f32 multiplication,
/// then the C library's cosf/sinf.
fn ropeAngles(job: *const RopeJob, pos: usize, cos: []f32, sin: []f32) void {
    const theta_scale = powf(job.freq_base, -2.0 / @as(f32, @floatFromInt(job.rope_dims)));
    var theta: f32 = @floatFromInt(pos);
    for (cos, sin, 0..) |*c, *s, i| {
        const factor: f32 = if (job.freq_factors) |f| f[i] else 1.0;
        const angle = theta / factor;
        c.* = cosf(angle);
        s.* = sinf(angle);
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
        ropeAngles(job, @intCast(job.positions[t]), cos, sin);
        for (0..job.heads) |h| {
            const head = job.x + (t * job.heads + h) * job.head_dim;
            for (0..half) |i| {
                const a = if (job.neox) i else 2 * i;
                const b = if (job.neox) i + half else 2 * i + 1;
                const x0 = head[a];
                const x1 = head[b];
                // As GCC compiles ggml's `x0*cos - x1*sin` (contracted into one FMA each).
                head[a] = @mulAdd(f32, x0, cos[i], -(x1 * sin[i]));
                head[b] = @mulAdd(f32, x0, sin[i], x1 * cos[i]);
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

/// silu(gate)·up as ggml's `ggml_vec_swiglu_f32`: x / (1 + expf(-x)) with its
/// vector expf, then the product (bit-identical to llama.cpp's AVX-512 build).
inline fn swigluVector(gate: F32x, up: F32x) F32x {
    const one: F32x = @splat(1);
    const zero: F32x = @splat(0);
    return gate / (one + simd.expGgml(lanes, zero - gate)) * up;
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
// KV cache store and embedding lookup

/// Copies row t of `src` ([tokens][kv_dim] f32) into cache row
/// `slots[t]·slot_rows + positions[t] % slot_rows` of a cache of T (see `attention.zig`).
pub fn storeKv(comptime T: type, cache: [*]T, src: [*]const f32, positions: [*]const i32, slots: [*]const i32, tokens: usize, kv_dim: usize, slot_rows: usize) void {
    for (0..tokens) |t| {
        const pos: usize = @intCast(positions[t]);
        const row = @as(usize, @intCast(slots[t])) * slot_rows + pos % slot_rows;
        const dst = cache[row * kv_dim ..][0..kv_dim];
        const from = src[t * kv_dim ..][0..kv_dim];
        switch (T) {
            f32 => @memcpy(dst, from),
            f16 => quant.convertF32ToF16(from, dst),
            else => @compileError("storeKv: unsupported cache type"),
        }
    }
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
    const zero = [_]i32{0};
    const one = [_]i32{1};
    // Position 0 is the identity.
    try testing.expectEqual(Status.ok, rope(pool, .{ .x = &x, .positions = &zero, .tokens = 1, .heads = 2, .head_dim = head_dim, .rope_dims = head_dim, .freq_base = 10000, .freq_factors = null, .neox = false }));
    try testing.expectEqualSlices(f32, &original, &x);
    // Position 1, pair 0 rotates by exactly 1 radian.
    try testing.expectEqual(Status.ok, rope(pool, .{ .x = &x, .positions = &one, .tokens = 1, .heads = 2, .head_dim = head_dim, .rope_dims = 4, .freq_base = 10000, .freq_factors = null, .neox = false }));
    try testing.expectApproxEqAbs(1 * @cos(@as(f32, 1)) - 2 * @sin(@as(f32, 1)), x[0], 1e-6);
    try testing.expectApproxEqAbs(1 * @sin(@as(f32, 1)) + 2 * @cos(@as(f32, 1)), x[1], 1e-6);
    try testing.expectEqual(original[4], x[4]); // beyond rope_dims: untouched
    // NeoX pairs (0, 2) in a 4-dim rotation, with a frequency factor of 2 on pair 0.
    var y = original;
    const factors = [_]f32{ 2, 1 };
    try testing.expectEqual(Status.ok, rope(pool, .{ .x = &y, .positions = &one, .tokens = 1, .heads = 1, .head_dim = head_dim, .rope_dims = 4, .freq_base = 10000, .freq_factors = &factors, .neox = true }));
    try testing.expectApproxEqAbs(1 * @cos(@as(f32, 0.5)) - 3 * @sin(@as(f32, 0.5)), y[0], 1e-6);
    try testing.expectApproxEqAbs(1 * @sin(@as(f32, 0.5)) + 3 * @cos(@as(f32, 0.5)), y[2], 1e-6);
}

test "swiglu and add match their definitions on awkward sizes, 1..4 threads" {
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
}

test "storeKv writes each token's row at its slot and position, wrapping the ring" {
    var src: [3 * 8]f32 = undefined;
    for (&src, 0..) |*v, i| v.* = @as(f32, @floatFromInt(i)) / 8;
    var cache: [2 * 4 * 8]f16 = @splat(0);
    // Slot 1 position 5 wraps to its row 1; slot 0 positions 2 and 3.
    const positions = [_]i32{ 5, 2, 3 };
    const slots = [_]i32{ 1, 0, 0 };
    storeKv(f16, &cache, &src, &positions, &slots, 3, 8, 4);
    for (0..8) |i| {
        try testing.expectEqual(@as(f16, @floatCast(src[i])), cache[(4 + 1) * 8 + i]);
        try testing.expectEqual(@as(f16, @floatCast(src[8 + i])), cache[2 * 8 + i]);
        try testing.expectEqual(@as(f16, @floatCast(src[16 + i])), cache[3 * 8 + i]);
        try testing.expectEqual(@as(f16, 0), cache[i]);
    }
}
