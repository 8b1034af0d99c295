//! Causal multi-head attention over a KV cache (F32 or F16), GQA/MQA/MHA.
//!
//! q: [tokens][heads·head_dim] f32, already roped. k, v: [ctx][kv_heads·head_dim] of
//! the cache type, holding positions 0 .. pos_start + tokens - 1. Token t attends to
//! positions 0 ..= pos_start + t. Query head h reads KV head h / (heads / kv_heads).
//!
//! Work units are (token, KV head) pairs, claimed in chunks by the pool's threads
//! (later tokens see more keys; dynamic claiming balances a prefill). Each unit is
//! computed by one thread the same way whatever the thread count. Softmax is computed online
//! over blocks of `key_block` keys, so the only scratch is a fixed stack frame per
//! worker (scores of one block and one output accumulator): nothing is allocated.
const std = @import("std");
const simd = @import("simd.zig");
const pool_zig = @import("pool.zig");
const kernels = @import("kernels.zig");

const Pool = pool_zig.Pool;
const Status = pool_zig.Status;
const lanes = simd.f32_lanes;
const F32x = simd.F32x;

pub const head_dim_max = kernels.head_dim_max;
/// Keys scored per block of the online softmax.
pub const key_block = 64;
/// Below this many (token, key, dim) multiply-adds attention runs on the calling thread.
pub const parallel_threshold: usize = 1 << 15;

fn Job(comptime T: type) type {
    return struct {
        out: [*]f32,
        q: [*]const f32,
        k: [*]const T,
        v: [*]const T,
        tokens: usize,
        pos_start: usize,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        scale: f32,
    };
}

inline fn dot(comptime T: type, q: [*]const f32, k: [*]const T, n: usize) f32 {
    var acc: F32x = @splat(0);
    var i: usize = 0;
    while (i + lanes <= n) : (i += lanes) {
        acc = @mulAdd(F32x, simd.loadAsF32(f32, lanes, q + i), simd.loadAsF32(T, lanes, k + i), acc);
    }
    var sum = simd.hsum(lanes, f32, acc);
    while (i < n) : (i += 1) sum = @mulAdd(f32, q[i], simd.toF32(T, k[i]), sum);
    return sum;
}

/// acc[0..n] = acc · keep + p · v
inline fn scaleAdd(comptime T: type, acc: [*]f32, keep: f32, p: f32, v: [*]const T, n: usize) void {
    const keep_v: F32x = @splat(keep);
    const p_v: F32x = @splat(p);
    var i: usize = 0;
    while (i + lanes <= n) : (i += lanes) {
        const a = simd.loadAsF32(f32, lanes, acc + i) * keep_v;
        simd.storeF32(lanes, acc + i, @mulAdd(F32x, p_v, simd.loadAsF32(T, lanes, v + i), a));
    }
    while (i < n) : (i += 1) acc[i] = @mulAdd(f32, p, simd.toF32(T, v[i]), acc[i] * keep);
}

fn attendHead(comptime T: type, job: *const Job(T), t: usize, h: usize) void {
    const head_dim = job.head_dim;
    const kv_dim = job.kv_heads * head_dim;
    const g = h / (job.heads / job.kv_heads);
    const q = job.q + (t * job.heads + h) * head_dim;
    const keys = job.pos_start + t + 1;
    var acc_buffer: [head_dim_max]f32 align(64) = undefined;
    const acc = acc_buffer[0..head_dim];
    @memset(acc, 0);
    var scores: [key_block]f32 = undefined;
    var max: f32 = -std.math.inf(f32);
    var sum: f32 = 0;
    var p0: usize = 0;
    while (p0 < keys) : (p0 += key_block) {
        const count = @min(key_block, keys - p0);
        var block_max: f32 = -std.math.inf(f32);
        for (scores[0..count], 0..) |*s, i| {
            s.* = dot(T, q, job.k + (p0 + i) * kv_dim + g * head_dim, head_dim) * job.scale;
            block_max = @max(block_max, s.*);
        }
        const new_max = @max(max, block_max);
        // The first block rescales an all-zero accumulator: keep = 0 avoids inf - inf.
        const keep = if (max == -std.math.inf(f32)) 0 else @exp(max - new_max);
        sum *= keep;
        for (scores[0..count], 0..) |s, i| {
            const p = @exp(s - new_max);
            sum += p;
            scaleAdd(T, acc.ptr, if (i == 0) keep else 1, p, job.v + (p0 + i) * kv_dim + g * head_dim, head_dim);
        }
        max = new_max;
    }
    const out = job.out + (t * job.heads + h) * head_dim;
    const inv = 1.0 / sum;
    for (acc, 0..) |a, i| out[i] = a * inv;
}

/// Units are (token, KV head) pairs, token-major.
fn attendRange(comptime T: type, job: *const Job(T), unit_begin: usize, unit_end: usize) void {
    const group = job.heads / job.kv_heads;
    for (unit_begin..unit_end) |u| {
        const t = u / job.kv_heads;
        const g = u % job.kv_heads;
        for (g * group..(g + 1) * group) |h| attendHead(T, job, t, h);
    }
}

pub fn attention(comptime T: type, pool: *Pool, job: Job(T)) Status {
    std.debug.assert(job.kv_heads > 0 and job.heads % job.kv_heads == 0);
    std.debug.assert(job.head_dim > 0 and job.head_dim <= head_dim_max);
    const Runner = struct {
        fn run(j: *const Job(T), begin: usize, end: usize) void {
            attendRange(T, j, begin, end);
        }
    };
    const work = job.tokens * (job.pos_start + job.tokens) * job.heads * job.head_dim;
    return pool.run(Job(T), &job, Runner.run, job.tokens * job.kv_heads, 1, work, parallel_threshold);
}

/// Scalar reference: scores, max, exp, normalise, weighted sum of V, all in f32.
pub fn reference(comptime T: type, job: Job(T), scores: []f32) void {
    const kv_dim = job.kv_heads * job.head_dim;
    const group = job.heads / job.kv_heads;
    for (0..job.tokens) |t| for (0..job.heads) |h| {
        const g = h / group;
        const q = job.q + (t * job.heads + h) * job.head_dim;
        const keys = job.pos_start + t + 1;
        var max: f32 = -std.math.inf(f32);
        for (0..keys) |p| {
            var s: f32 = 0;
            for (0..job.head_dim) |i| s += q[i] * simd.toF32(T, job.k[p * kv_dim + g * job.head_dim + i]);
            scores[p] = s * job.scale;
            max = @max(max, scores[p]);
        }
        var sum: f32 = 0;
        for (scores[0..keys]) |*s| {
            s.* = @exp(s.* - max);
            sum += s.*;
        }
        const out = job.out + (t * job.heads + h) * job.head_dim;
        for (0..job.head_dim) |i| {
            var o: f32 = 0;
            for (0..keys) |p| o += scores[p] / sum * simd.toF32(T, job.v[p * kv_dim + g * job.head_dim + i]);
            out[i] = o;
        }
    };
}

// ---------------------------------------------------------------------------
// Exports

export fn dotllm_attention_f32(pool: *Pool, out: [*]f32, q: [*]const f32, k: [*]const f32, v: [*]const f32, tokens: usize, pos_start: usize, heads: usize, kv_heads: usize, head_dim: usize, scale: f32) i32 {
    return @intFromEnum(attention(f32, pool, .{ .out = out, .q = q, .k = k, .v = v, .tokens = tokens, .pos_start = pos_start, .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .scale = scale }));
}

export fn dotllm_attention_f16(pool: *Pool, out: [*]f32, q: [*]const f32, k: [*]const f16, v: [*]const f16, tokens: usize, pos_start: usize, heads: usize, kv_heads: usize, head_dim: usize, scale: f32) i32 {
    return @intFromEnum(attention(f16, pool, .{ .out = out, .q = q, .k = k, .v = v, .tokens = tokens, .pos_start = pos_start, .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .scale = scale }));
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

fn testShape(comptime T: type, tokens: usize, pos_start: usize, heads: usize, kv_heads: usize, head_dim: usize) !void {
    const allocator = testing.allocator;
    var prng = std.Random.DefaultPrng.init(tokens * 7 + pos_start * 13 + head_dim);
    const random = prng.random();
    const ctx = pos_start + tokens;
    const kv_dim = kv_heads * head_dim;
    const q = try allocator.alloc(f32, tokens * heads * head_dim);
    defer allocator.free(q);
    for (q) |*x| x.* = random.floatNorm(f32);
    const k = try allocator.alloc(T, ctx * kv_dim);
    defer allocator.free(k);
    const v = try allocator.alloc(T, ctx * kv_dim);
    defer allocator.free(v);
    for (k, v) |*a, *b| {
        a.* = @floatCast(random.floatNorm(f32));
        b.* = @floatCast(random.floatNorm(f32));
    }
    const expected = try allocator.alloc(f32, q.len);
    defer allocator.free(expected);
    const actual = try allocator.alloc(f32, q.len);
    defer allocator.free(actual);
    const single = try allocator.alloc(f32, q.len);
    defer allocator.free(single);
    const scores = try allocator.alloc(f32, ctx);
    defer allocator.free(scores);
    const scale = 1.0 / @sqrt(@as(f32, @floatFromInt(head_dim)));
    const base: Job(T) = .{ .out = expected.ptr, .q = q.ptr, .k = k.ptr, .v = v.ptr, .tokens = tokens, .pos_start = pos_start, .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .scale = scale };
    reference(T, base, scores);
    var job = base;
    job.out = actual.ptr;
    for (1..5) |threads| {
        const pool = try Pool.create(allocator, @intCast(threads));
        defer pool.destroy(allocator);
        try testing.expectEqual(Status.ok, attention(T, pool, job));
        // Outputs are convex combinations of N(0,1) values: absolute budget.
        for (expected, actual) |e, a| try testing.expectApproxEqAbs(e, a, 2e-5);
        if (threads == 1) @memcpy(single, actual) else try testing.expectEqualSlices(f32, single, actual);
    }
}

test "attention matches the reference for decode and prefill, GQA/MQA/MHA, F32 and F16" {
    inline for (.{ f32, f16 }) |T| {
        try testShape(T, 1, 0, 4, 2, 16); // first token
        try testShape(T, 1, 130, 8, 2, 64); // decode over three key blocks
        try testShape(T, 7, 60, 6, 1, 33); // prefill, MQA, odd head_dim
        try testShape(T, 5, 0, 4, 4, 128); // MHA
    }
}
