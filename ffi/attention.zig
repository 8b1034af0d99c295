//! Causal multi-head attention over a KV cache (F32 or F16), GQA/MQA/MHA, for a batch
//! whose tokens may belong to different sequences.
//!
//! q: [tokens][heads·head_dim] f32, already roped. k, v: [slot_count·slot_rows]
//! [kv_heads·head_dim] of the cache type: each sequence (slot) owns `slot_rows` rows, and
//! position p of slot s lives in row `s·slot_rows + p % slot_rows` (a ring when a
//! sliding window keeps fewer rows than the context). Token t, at `positions[t]` of
//! slot `slots[t]`, attends its own slot's positions [lo, positions[t]], lo = 0 or,
//! with a sliding `window` > 0, positions[t] - window + 1. Query head h reads KV head
//! h / (heads / kv_heads). A token's result depends only on its own query and its
//! slot's rows, never on the other tokens of the batch.
//!
//! Work units are (token, KV head) pairs, claimed in chunks by the pool's threads
//! (later tokens see more keys; dynamic claiming balances a prefill). Each unit is
//! computed by one thread the same way whatever the thread count. A unit attends all
//! query heads that share its KV head together (each K/V row is read and converted
//! once per pass). Softmax is computed online over blocks of `key_block` keys, so the
//! only scratch is a fixed stack frame per worker (block scores and accumulators of
//! up to `heads_per_pass` heads, ~20 KiB): nothing is allocated.
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

pub fn Job(comptime T: type) type {
    return struct {
        out: [*]f32,
        q: [*]const f32,
        k: [*]const T,
        v: [*]const T,
        positions: [*]const i32,
        slots: [*]const i32,
        tokens: usize,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        /// Cache rows per slot.
        slot_rows: usize,
        /// 0: full causal attention; else the sliding window in positions.
        window: usize,
        scale: f32,

        /// The first position token t sees, and how many.
        fn keyRange(job: *const @This(), t: usize) struct { first: usize, count: usize } {
            const pos: usize = @intCast(job.positions[t]);
            const first = if (job.window > 0 and pos + 1 > job.window) pos + 1 - job.window else 0;
            return .{ .first = first, .count = pos + 1 - first };
        }
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

/// acc[0..n] += p · v
fn axpy(acc: [*]f32, p: f32, v: [*]const f32, n: usize) void {
    const p_v: F32x = @splat(p);
    var i: usize = 0;
    while (i + lanes <= n) : (i += lanes) {
        simd.storeF32(lanes, acc + i, @mulAdd(F32x, p_v, simd.loadAsF32(f32, lanes, v + i), simd.loadAsF32(f32, lanes, acc + i)));
    }
    while (i < n) : (i += 1) acc[i] = @mulAdd(f32, p, v[i], acc[i]);
}

/// acc[0..n] *= keep
fn scaleInPlace(acc: [*]f32, keep: f32, n: usize) void {
    const keep_v: F32x = @splat(keep);
    var i: usize = 0;
    while (i + lanes <= n) : (i += lanes) simd.storeF32(lanes, acc + i, simd.loadAsF32(f32, lanes, acc + i) * keep_v);
    while (i < n) : (i += 1) acc[i] *= keep;
}

/// A cache row as f32: the row itself for an F32 cache, else converted into `buffer`.
fn rowF32(comptime T: type, row: [*]const T, n: usize, buffer: [*]f32) [*]const f32 {
    if (T == f32) return row;
    var i: usize = 0;
    while (i + lanes <= n) : (i += lanes) simd.storeF32(lanes, buffer + i, simd.loadAsF32(T, lanes, row + i));
    while (i < n) : (i += 1) buffer[i] = simd.toF32(T, row[i]);
    return buffer;
}

/// Query heads attended together: each K and V row is loaded (and converted) once per pass.
pub const heads_per_pass = 8;

/// One work unit: token t, KV head g, and every query head that reads g. A comptime
/// `head_dim_fixed` (64, 128) unrolls every loop over the head; the arithmetic and its
/// order are the same as with a runtime head_dim.
fn attendUnit(comptime T: type, comptime head_dim_fixed: ?usize, job: *const Job(T), t: usize, g: usize) void {
    const head_dim = head_dim_fixed orelse job.head_dim;
    const kv_dim = job.kv_heads * head_dim;
    const group = job.heads / job.kv_heads;
    const range = job.keyRange(t);
    const keys = range.count;
    const slot_base = @as(usize, @intCast(job.slots[t])) * job.slot_rows;
    const k_base = job.k + slot_base * kv_dim + g * head_dim;
    const v_base = job.v + slot_base * kv_dim + g * head_dim;
    var h0 = g * group;
    while (h0 < (g + 1) * group) : (h0 += heads_per_pass) {
        const n_heads = @min(heads_per_pass, (g + 1) * group - h0);
        const q = job.q + (t * job.heads + h0) * head_dim;
        var acc: [heads_per_pass][head_dim_max]f32 align(64) = undefined;
        var scores: [heads_per_pass][key_block]f32 align(64) = @splat(@splat(0));
        var max: [heads_per_pass]f32 = @splat(-std.math.inf(f32));
        var sum: [heads_per_pass]f32 = @splat(0);
        var row_buffer: [head_dim_max]f32 align(64) = undefined;
        for (0..n_heads) |h| @memset((&acc[h])[0..head_dim], 0);
        var p0: usize = 0;
        while (p0 < keys) : (p0 += key_block) {
            const count = @min(key_block, keys - p0);
            // Cache rows of this block's keys: consecutive, wrapping at the ring's end.
            var rows: [key_block]usize = undefined;
            var next_row = (range.first + p0) % job.slot_rows;
            for (0..count) |i| {
                rows[i] = next_row;
                next_row += 1;
                if (next_row == job.slot_rows) next_row = 0;
            }
            for (0..count) |i| {
                const k = rowF32(T, k_base + rows[i] * kv_dim, head_dim, row_buffer[0..].ptr);
                for (0..n_heads) |h| (&scores[h])[i] = dot(f32, q + h * head_dim, k, head_dim) * job.scale;
            }
            for (0..n_heads) |h| {
                var block_max: f32 = -std.math.inf(f32);
                const row = &scores[h];
                for (0..count) |i| block_max = @max(block_max, row[i]);
                const new_max = @max(max[h], block_max);
                // The first block rescales an all-zero accumulator: keep = 0 avoids inf - inf.
                const keep = if (max[h] == -std.math.inf(f32)) 0 else @exp(max[h] - new_max);
                max[h] = new_max;
                var i: usize = 0;
                while (i < count) : (i += lanes) {
                    const v = simd.loadAsF32(f32, lanes, row[i..].ptr);
                    simd.storeF32(lanes, row[i..].ptr, simd.exp(lanes, v - @as(F32x, @splat(new_max))));
                }
                var block_sum: f32 = 0;
                for (0..count) |e| block_sum += row[e];
                sum[h] = @mulAdd(f32, sum[h], keep, block_sum);
                scaleInPlace(&acc[h], keep, head_dim);
            }
            for (0..count) |i| {
                const v = rowF32(T, v_base + rows[i] * kv_dim, head_dim, row_buffer[0..].ptr);
                for (0..n_heads) |h| axpy(&acc[h], (&scores[h])[i], v, head_dim);
            }
        }
        for (0..n_heads) |h| {
            const out = job.out + (t * job.heads + h0 + h) * head_dim;
            const inv = 1.0 / sum[h];
            const row = &acc[h];
            for (0..head_dim) |i| out[i] = row[i] * inv;
        }
    }
}

/// Units are (token, KV head) pairs, token-major.
fn attendRange(comptime T: type, job: *const Job(T), unit_begin: usize, unit_end: usize) void {
    switch (job.head_dim) {
        inline 64, 128 => |head_dim| for (unit_begin..unit_end) |u| attendUnit(T, head_dim, job, u / job.kv_heads, u % job.kv_heads),
        else => for (unit_begin..unit_end) |u| attendUnit(T, null, job, u / job.kv_heads, u % job.kv_heads),
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
    var keys: usize = 0;
    for (0..job.tokens) |t| keys += job.keyRange(t).count;
    const work = keys * job.heads * job.head_dim;
    return pool.run(Job(T), &job, Runner.run, job.tokens * job.kv_heads, 1, work, parallel_threshold);
}

/// Scalar reference: scores, max, exp, normalise, weighted sum of V, all in f32.
pub fn reference(comptime T: type, job: Job(T), scores: []f32) void {
    const kv_dim = job.kv_heads * job.head_dim;
    const group = job.heads / job.kv_heads;
    for (0..job.tokens) |t| for (0..job.heads) |h| {
        const g = h / group;
        const q = job.q + (t * job.heads + h) * job.head_dim;
        const range = job.keyRange(t);
        const keys = range.count;
        const slot_base = @as(usize, @intCast(job.slots[t])) * job.slot_rows;
        var max: f32 = -std.math.inf(f32);
        for (0..keys) |p| {
            const row = slot_base + (range.first + p) % job.slot_rows;
            var s: f32 = 0;
            for (0..job.head_dim) |i| s += q[i] * simd.toF32(T, job.k[row * kv_dim + g * job.head_dim + i]);
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
            for (0..keys) |p| {
                const row = slot_base + (range.first + p) % job.slot_rows;
                o += scores[p] / sum * simd.toF32(T, job.v[row * kv_dim + g * job.head_dim + i]);
            }
            out[i] = o;
        }
    };
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
    const positions = try allocator.alloc(i32, tokens);
    defer allocator.free(positions);
    const slots = try allocator.alloc(i32, tokens);
    defer allocator.free(slots);
    for (positions, slots, 0..) |*p, *s, t| {
        p.* = @intCast(pos_start + t);
        s.* = 0;
    }
    const base: Job(T) = .{ .out = expected.ptr, .q = q.ptr, .k = k.ptr, .v = v.ptr, .positions = positions.ptr, .slots = slots.ptr, .tokens = tokens, .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .slot_rows = ctx, .window = 0, .scale = scale };
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

test "the head_dim-specialised attention equals the generic one bit for bit" {
    const allocator = testing.allocator;
    inline for (.{ 64, 128 }) |head_dim| {
        const heads = 8;
        const kv_heads = 2;
        const ctx = 70;
        var prng = std.Random.DefaultPrng.init(head_dim);
        const q = try allocator.alloc(f32, heads * head_dim);
        defer allocator.free(q);
        const kv = try allocator.alloc(f16, ctx * kv_heads * head_dim);
        defer allocator.free(kv);
        for (q) |*x| x.* = prng.random().floatNorm(f32);
        for (kv) |*x| x.* = @floatCast(prng.random().floatNorm(f32));
        var fixed: [heads * head_dim]f32 = undefined;
        var generic: [heads * head_dim]f32 = undefined;
        const position = [_]i32{ctx - 1};
        const slot = [_]i32{0};
        var job: Job(f16) = .{ .out = &fixed, .q = q.ptr, .k = kv.ptr, .v = kv.ptr, .positions = &position, .slots = &slot, .tokens = 1, .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .slot_rows = ctx, .window = 0, .scale = 0.1 };
        for (0..kv_heads) |g| attendUnit(f16, head_dim, &job, 0, g);
        job.out = &generic;
        for (0..kv_heads) |g| attendUnit(f16, null, &job, 0, g);
        try testing.expectEqualSlices(f32, &generic, &fixed);
    }
}

test "a batch mixing slots, windows and ring rows gives each token what it gets alone" {
    const allocator = testing.allocator;
    const heads = 4;
    const kv_heads = 2;
    const head_dim = 16;
    const kv_dim = kv_heads * head_dim;
    const slot_rows = 80;
    const slot_count = 3;
    var prng = std.Random.DefaultPrng.init(11);
    const random = prng.random();
    const k = try allocator.alloc(f32, slot_count * slot_rows * kv_dim);
    defer allocator.free(k);
    const v = try allocator.alloc(f32, k.len);
    defer allocator.free(v);
    for (k, v) |*a, *b| {
        a.* = random.floatNorm(f32);
        b.* = random.floatNorm(f32);
    }
    // Slot 0 decodes at 5, slot 2 prefills 130..133 (wrapping its ring), slot 1 at 79.
    const positions = [_]i32{ 5, 130, 131, 132, 133, 79 };
    const slots = [_]i32{ 0, 2, 2, 2, 2, 1 };
    const tokens = positions.len;
    var q: [tokens * heads * head_dim]f32 = undefined;
    for (&q) |*x| x.* = random.floatNorm(f32);
    inline for (.{ 0, 48 }) |window| {
        var together: [q.len]f32 = undefined;
        const pool = try Pool.create(allocator, 2);
        defer pool.destroy(allocator);
        const job: Job(f32) = .{ .out = &together, .q = &q, .k = k.ptr, .v = v.ptr, .positions = &positions, .slots = &slots, .tokens = tokens, .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .slot_rows = slot_rows, .window = window, .scale = 0.25 };
        if (window == 0) {
            // Full attention needs every position in the ring: only the tokens that fit.
            var fits = job;
            fits.tokens = 1;
            try testing.expectEqual(Status.ok, attention(f32, pool, fits));
        } else try testing.expectEqual(Status.ok, attention(f32, pool, job));
        const checked = if (window == 0) 1 else tokens;
        var scores: [slot_rows]f32 = undefined;
        for (0..checked) |t| {
            var alone: [heads * head_dim]f32 = undefined;
            var single = job;
            single.q = q[t * heads * head_dim ..].ptr;
            single.positions = positions[t..].ptr;
            single.slots = slots[t..].ptr;
            single.tokens = 1;
            single.out = &alone;
            try testing.expectEqual(Status.ok, attention(f32, pool, single));
            try testing.expectEqualSlices(f32, &alone, together[t * heads * head_dim ..][0 .. heads * head_dim]);
            var expected: [heads * head_dim]f32 = undefined;
            single.out = &expected;
            reference(f32, single, &scores);
            for (expected, alone) |e, a| try testing.expectApproxEqAbs(e, a, 2e-5);
        }
    }
}
