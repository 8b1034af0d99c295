//! Matrix multiplication of weights (F32, F16, BF16, Q8_0) by f32 activations:
//! `out[t][r] = Σ_c W[r][c] · x[t][c]`, W row-major `rows × cols` as GGUF stores it.
//!
//! One kernel serves GEMV (tokens = 1) and GEMM: register tiles of up to
//! `row_group` rows × `token_group` tokens, so each weight vector loaded is used for
//! every token of the tile. Every output element is computed with the same
//! instructions in the same order whatever tile it falls in and whatever thread
//! computes it: results are bit-identical for any thread count.
//!
//! Q8_0 quantizes the activations once per call into the pool's scratch as
//! `ActBlock`s (32 signed bytes and a precomputed correction) and multiplies with
//! integer dot products: `vpdpbusd` with AVX-512 VNNI / AVX-VNNI, a generic
//! `@Vector` widening multiply otherwise. Both produce the same exact integer lanes.
const std = @import("std");
const simd = @import("simd.zig");
const quant = @import("quant.zig");
const pool_zig = @import("pool.zig");

const Pool = pool_zig.Pool;
const BlockQ8_0 = quant.BlockQ8_0;
const qk = quant.qk8_0;
const lanes = simd.f32_lanes;
const F32x = simd.F32x;

/// Rows per register tile; thread ranges are aligned to it.
pub const row_group = 4;
/// Tokens per register tile.
pub const token_group = 4;
/// Below this many multiply-adds a matmul runs on the calling thread only.
pub const parallel_threshold_macs: usize = 1 << 16;

// ---------------------------------------------------------------------------
// Float weights: F32, F16, BF16 (u16 bits)

fn FloatJob(comptime W: type) type {
    return struct {
        out: [*]f32,
        w: [*]align(1) const W,
        x: [*]const f32,
        rows: usize,
        cols: usize,
        tokens: usize,
    };
}

inline fn tileFloat(comptime W: type, comptime R: usize, comptime T: usize, job: *const FloatJob(W), r0: usize, t0: usize) void {
    const cols = job.cols;
    var acc: [R][T]F32x = @splat(@splat(@splat(0)));
    var c: usize = 0;
    while (c + lanes <= cols) : (c += lanes) {
        var xv: [T]F32x = undefined;
        inline for (0..T) |t| xv[t] = simd.loadAsF32(f32, lanes, job.x + (t0 + t) * cols + c);
        inline for (0..R) |r| {
            const wv = simd.loadAsF32(W, lanes, job.w + (r0 + r) * cols + c);
            inline for (0..T) |t| acc[r][t] = @mulAdd(F32x, wv, xv[t], acc[r][t]);
        }
    }
    inline for (0..R) |r| {
        inline for (0..T) |t| {
            var sum = simd.hsum(lanes, f32, acc[r][t]);
            const w_row = job.w + (r0 + r) * cols;
            const x_row = job.x + (t0 + t) * cols;
            for (c..cols) |k| sum = @mulAdd(f32, simd.toF32(W, w_row[k]), x_row[k], sum);
            job.out[(t0 + t) * job.rows + r0 + r] = sum;
        }
    }
}

fn matmulFloatRange(comptime W: type, job: *const FloatJob(W), index: u32, count: u32) void {
    const range = pool_zig.split(job.rows, row_group, index, count);
    var r = range.begin;
    while (r + row_group <= range.end) : (r += row_group) {
        var t: usize = 0;
        while (t + token_group <= job.tokens) : (t += token_group) tileFloat(W, row_group, token_group, job, r, t);
        while (t < job.tokens) : (t += 1) tileFloat(W, row_group, 1, job, r, t);
    }
    while (r < range.end) : (r += 1) {
        var t: usize = 0;
        while (t + token_group <= job.tokens) : (t += token_group) tileFloat(W, 1, token_group, job, r, t);
        while (t < job.tokens) : (t += 1) tileFloat(W, 1, 1, job, r, t);
    }
}

pub fn matmulFloat(comptime W: type, pool: *Pool, out: [*]f32, w: [*]align(1) const W, x: [*]const f32, rows: usize, cols: usize, tokens: usize) pool_zig.Status {
    const job: FloatJob(W) = .{ .out = out, .w = w, .x = x, .rows = rows, .cols = cols, .tokens = tokens };
    const Runner = struct {
        fn run(j: *const FloatJob(W), index: u32, count: u32) void {
            matmulFloatRange(W, j, index, count);
        }
    };
    return pool.run(FloatJob(W), &job, Runner.run, rows * cols * tokens, parallel_threshold_macs);
}

// ---------------------------------------------------------------------------
// Q8_0 weights

/// One quantized activation block: 32 signed bytes and, per group of 4 bytes,
/// -128 × their sum (the `vpdpbusd` offset correction: the weights enter it as
/// unsigned `q + 128`). Its scale lives in a separate f32 array.
pub const ActBlock = extern struct {
    qs: [qk]i8 align(32),
    neg_corr: [8]i32,
};

comptime {
    std.debug.assert(@sizeOf(ActBlock) == 64);
}

/// Scratch bytes the Q8_0 matmul needs for `tokens` rows of `cols` activations.
pub fn q8ScratchSize(cols: usize, tokens: usize) usize {
    return tokens * (cols / qk) * (@sizeOf(ActBlock) + @sizeOf(f32));
}

/// Quantizes one row of activations into ActBlocks and their scales (f32 values of
/// the f16-rounded scale, as llama.cpp's Q8_0 activations).
pub fn quantizeActivations(x: []const f32, blocks: []ActBlock, scales: []f32) void {
    std.debug.assert(x.len == blocks.len * qk and scales.len == blocks.len);
    for (blocks, scales, 0..) |*block, *scale, b| {
        const d = quant.quantizeBlock(x[b * qk ..][0..qk], &block.qs);
        scale.* = @as(f16, @floatCast(d));
        for (0..8) |g| {
            var sum: i32 = 0;
            for (block.qs[g * 4 ..][0..4]) |q| sum += q;
            block.neg_corr[g] = -128 * sum;
        }
    }
}

const I32x8 = @Vector(8, i32);
const F32x8 = @Vector(8, f32);

/// Integer dot product of a weight block with an activation block, as 8 lanes:
/// lane g = Σ_{j<4} w[4g+j]·x[4g+j] (exact).
inline fn dotLanes(w: *align(1) const [qk]i8, a: *const ActBlock) I32x8 {
    const wv: @Vector(qk, i8) = w.*;
    const xv: @Vector(qk, i8) = a.qs;
    if (comptime simd.has_avx512vnni or simd.has_avxvnni) {
        const wu: @Vector(qk, u8) = @as(@Vector(qk, u8), @bitCast(wv)) ^ @as(@Vector(qk, u8), @splat(0x80));
        const corr: I32x8 = a.neg_corr;
        const mnemonic = if (simd.has_avx512vnni) "vpdpbusd" else "{vex} vpdpbusd";
        return asm (mnemonic ++ " %[x], %[w], %[acc]"
            : [acc] "=v" (-> I32x8),
            : [_] "0" (corr),
              [w] "v" (wu),
              [x] "v" (xv),
        );
    }
    return dotLanesGeneric(wv, xv);
}

inline fn dotLanesGeneric(wv: @Vector(qk, i8), xv: @Vector(qk, i8)) I32x8 {
    const p: @Vector(qk, i32) = @as(@Vector(qk, i32), wv) * @as(@Vector(qk, i32), xv);
    const pairs = @shuffle(i32, p, undefined, even16) + @shuffle(i32, p, undefined, odd16);
    return @shuffle(i32, pairs, undefined, even8) + @shuffle(i32, pairs, undefined, odd8);
}

const even16 = std.simd.iota(i32, 16) * @as(@Vector(16, i32), @splat(2));
const odd16 = even16 + @as(@Vector(16, i32), @splat(1));
const even8 = std.simd.iota(i32, 8) * @as(@Vector(8, i32), @splat(2));
const odd8 = even8 + @as(@Vector(8, i32), @splat(1));

const Q8Job = struct {
    out: [*]f32,
    w: [*]align(1) const BlockQ8_0,
    act: [*]const ActBlock,
    act_scales: [*]const f32,
    rows: usize,
    blocks_per_row: usize,
    tokens: usize,
};

const I32x16 = @Vector(16, i32);
const F32x16 = @Vector(16, f32);

/// `dotLanes` of two weight blocks (rows r and r+1) with one activation block, in one
/// 512-bit vector: lanes 0-7 for w0, 8-15 for w1 (each lane exactly as `dotLanes`).
inline fn dotLanesPair(w0: *align(1) const [qk]i8, w1: *align(1) const [qk]i8, a: *const ActBlock) I32x16 {
    const lo: @Vector(qk, i8) = w0.*;
    const hi: @Vector(qk, i8) = w1.*;
    const wv: @Vector(2 * qk, i8) = @shuffle(i8, lo, hi, concat_mask_64);
    const x1: @Vector(qk, i8) = a.qs;
    const xv: @Vector(2 * qk, i8) = @shuffle(i8, x1, x1, concat_mask_64);
    if (comptime simd.has_avx512vnni) {
        const wu: @Vector(2 * qk, u8) = @as(@Vector(2 * qk, u8), @bitCast(wv)) ^ @as(@Vector(2 * qk, u8), @splat(0x80));
        const c1: I32x8 = a.neg_corr;
        const corr: I32x16 = @shuffle(i32, c1, c1, concat_mask_16);
        return asm ("vpdpbusd %[x], %[w], %[acc]"
            : [acc] "=v" (-> I32x16),
            : [_] "0" (corr),
              [w] "v" (wu),
              [x] "v" (xv),
        );
    }
    return @shuffle(i32, dotLanesGeneric(lo, x1), dotLanesGeneric(hi, x1), concat_mask_16);
}

fn concatMask(comptime n: usize) [2 * n]i32 {
    var mask: [2 * n]i32 = undefined;
    for (0..n) |i| {
        mask[i] = @intCast(i);
        mask[n + i] = ~@as(i32, @intCast(i));
    }
    return mask;
}
const concat_mask_64 = concatMask(qk);
const concat_mask_16 = concatMask(8);

/// Broadcasts lane 2p of `v` to lanes 0-7 and lane 2p+1 to lanes 8-15.
fn pairSplatMask(comptime p: usize) [16]i32 {
    var mask: [16]i32 = undefined;
    for (0..16) |i| mask[i] = @intCast(2 * p + i / 8);
    return mask;
}

/// A register tile of R rows × T tokens. Each output element is
/// hsum8(Σ_b cvt(lanes_b) · (dw_b · dx_b)) with lane-wise FMAs: the same arithmetic in
/// every tile shape, so GEMV, GEMM and every thread split agree bit for bit. Even R
/// runs row pairs in 512-bit vectors and converts the R weight scales at once.
inline fn tileQ8(comptime R: usize, comptime T: usize, job: *const Q8Job, r0: usize, t0: usize) void {
    if (R % 2 == 0 and simd.f32_lanes >= 16) return tileQ8Pairs(R, T, job, r0, t0);
    const nb = job.blocks_per_row;
    var acc: [R][T]F32x8 = @splat(@splat(@splat(0)));
    for (0..nb) |b| {
        var dx: [T]f32 = undefined;
        inline for (0..T) |t| dx[t] = job.act_scales[(t0 + t) * nb + b];
        inline for (0..R) |r| {
            const block = &job.w[(r0 + r) * nb + b];
            const dw: f32 = block.d;
            inline for (0..T) |t| {
                const lanes_i = dotLanes(&block.qs, &job.act[(t0 + t) * nb + b]);
                const scale: F32x8 = @splat(dw * dx[t]);
                acc[r][t] = @mulAdd(F32x8, @floatFromInt(lanes_i), scale, acc[r][t]);
            }
        }
    }
    inline for (0..R) |r| {
        inline for (0..T) |t| job.out[(t0 + t) * job.rows + r0 + r] = simd.hsum(8, f32, acc[r][t]);
    }
}

inline fn tileQ8Pairs(comptime R: usize, comptime T: usize, job: *const Q8Job, r0: usize, t0: usize) void {
    const P = R / 2;
    const nb = job.blocks_per_row;
    var acc: [P][T]F32x16 = @splat(@splat(@splat(0)));
    for (0..nb) |b| {
        var bits: @Vector(R, f16) = undefined;
        inline for (0..R) |r| bits[r] = job.w[(r0 + r) * nb + b].d;
        const dw: @Vector(R, f32) = @floatCast(bits);
        inline for (0..T) |t| {
            const act = &job.act[(t0 + t) * nb + b];
            const scales = dw * @as(@Vector(R, f32), @splat(job.act_scales[(t0 + t) * nb + b]));
            inline for (0..P) |p| {
                const lanes_i = dotLanesPair(&job.w[(r0 + 2 * p) * nb + b].qs, &job.w[(r0 + 2 * p + 1) * nb + b].qs, act);
                const scale: F32x16 = @shuffle(f32, scales, undefined, pairSplatMask(p));
                acc[p][t] = @mulAdd(F32x16, @floatFromInt(lanes_i), scale, acc[p][t]);
            }
        }
    }
    inline for (0..P) |p| {
        inline for (0..T) |t| {
            const v = acc[p][t];
            const lo: F32x8 = @shuffle(f32, v, undefined, [8]i32{ 0, 1, 2, 3, 4, 5, 6, 7 });
            const hi: F32x8 = @shuffle(f32, v, undefined, [8]i32{ 8, 9, 10, 11, 12, 13, 14, 15 });
            job.out[(t0 + t) * job.rows + r0 + 2 * p] = simd.hsum(8, f32, lo);
            job.out[(t0 + t) * job.rows + r0 + 2 * p + 1] = simd.hsum(8, f32, hi);
        }
    }
}

fn matmulQ8Range(job: *const Q8Job, index: u32, count: u32) void {
    const range = pool_zig.split(job.rows, row_group, index, count);
    var r = range.begin;
    while (r + row_group <= range.end) : (r += row_group) {
        var t: usize = 0;
        while (t + token_group <= job.tokens) : (t += token_group) tileQ8(row_group, token_group, job, r, t);
        while (t < job.tokens) : (t += 1) tileQ8(row_group, 1, job, r, t);
    }
    while (r < range.end) : (r += 1) {
        var t: usize = 0;
        while (t + token_group <= job.tokens) : (t += token_group) tileQ8(1, token_group, job, r, t);
        while (t < job.tokens) : (t += 1) tileQ8(1, 1, job, r, t);
    }
}

const QuantizeJob = struct {
    x: [*]const f32,
    act: [*]ActBlock,
    act_scales: [*]f32,
    blocks_per_row: usize,
    tokens: usize,
};

fn quantizeRange(job: *const QuantizeJob, index: u32, count: u32) void {
    const range = pool_zig.split(job.tokens, 1, index, count);
    const nb = job.blocks_per_row;
    for (range.begin..range.end) |t| {
        quantizeActivations(job.x[t * nb * qk ..][0 .. nb * qk], job.act[t * nb ..][0..nb], job.act_scales[t * nb ..][0..nb]);
    }
}

/// Q8_0 matmul; `cols % 32 == 0` and the pool's scratch holds `q8ScratchSize(cols, tokens)`.
pub fn matmulQ8_0(pool: *Pool, out: [*]f32, w: [*]align(1) const BlockQ8_0, x: [*]const f32, rows: usize, cols: usize, tokens: usize) pool_zig.Status {
    std.debug.assert(cols % qk == 0);
    std.debug.assert(pool.scratch.len >= q8ScratchSize(cols, tokens));
    const nb = cols / qk;
    const act: [*]ActBlock = @ptrCast(pool.scratch.ptr);
    const act_scales: [*]f32 = @ptrCast(@alignCast(pool.scratch.ptr + tokens * nb * @sizeOf(ActBlock)));
    const quantize_job: QuantizeJob = .{ .x = x, .act = act, .act_scales = act_scales, .blocks_per_row = nb, .tokens = tokens };
    const status = pool.run(QuantizeJob, &quantize_job, quantizeRange, tokens * cols, parallel_threshold_macs);
    if (status != .ok) return status;
    const job: Q8Job = .{ .out = out, .w = w, .act = act, .act_scales = act_scales, .rows = rows, .blocks_per_row = nb, .tokens = tokens };
    return pool.run(Q8Job, &job, matmulQ8Range, rows * cols * tokens, parallel_threshold_macs);
}

// ---------------------------------------------------------------------------
// Scalar references (the tests compare the kernels with these)

pub fn referenceFloat(comptime W: type, out: []f32, w: []align(1) const W, x: []const f32, rows: usize, cols: usize, tokens: usize) void {
    for (0..tokens) |t| for (0..rows) |r| {
        var sum: f32 = 0;
        for (0..cols) |c| sum += simd.toF32(W, w[r * cols + c]) * x[t * cols + c];
        out[t * rows + r] = sum;
    };
}

/// Scalar Q8_0 matmul: activations quantized per block like the kernel, integer
/// block sums scaled in f32, blocks summed left to right.
pub fn referenceQ8_0(out: []f32, w: []align(1) const BlockQ8_0, x: []const f32, rows: usize, cols: usize, tokens: usize) void {
    const nb = cols / qk;
    for (0..tokens) |t| for (0..rows) |r| {
        var sum: f32 = 0;
        for (0..nb) |b| {
            var qx: [qk]i8 = undefined;
            const dx: f32 = @as(f16, @floatCast(quant.quantizeBlock(x[t * cols + b * qk ..][0..qk], &qx)));
            const block = w[r * nb + b];
            var isum: i32 = 0;
            for (block.qs, qx) |a, c| isum += @as(i32, a) * c;
            sum += @as(f32, block.d) * dx * @as(f32, @floatFromInt(isum));
        }
        out[t * rows + r] = sum;
    };
}

// ---------------------------------------------------------------------------
// Exports: every one returns a pool status (0 ok, 1 a worker panicked).

export fn dotllm_matmul_f32(pool: *Pool, out: [*]f32, w: [*]align(1) const f32, x: [*]const f32, rows: usize, cols: usize, tokens: usize) i32 {
    return @intFromEnum(matmulFloat(f32, pool, out, w, x, rows, cols, tokens));
}

export fn dotllm_matmul_f16(pool: *Pool, out: [*]f32, w: [*]align(1) const f16, x: [*]const f32, rows: usize, cols: usize, tokens: usize) i32 {
    return @intFromEnum(matmulFloat(f16, pool, out, w, x, rows, cols, tokens));
}

export fn dotllm_matmul_bf16(pool: *Pool, out: [*]f32, w: [*]align(1) const u16, x: [*]const f32, rows: usize, cols: usize, tokens: usize) i32 {
    return @intFromEnum(matmulFloat(u16, pool, out, w, x, rows, cols, tokens));
}

export fn dotllm_matmul_q8_0(pool: *Pool, out: [*]f32, w: [*]align(1) const BlockQ8_0, x: [*]const f32, rows: usize, cols: usize, tokens: usize) i32 {
    return @intFromEnum(matmulQ8_0(pool, out, w, x, rows, cols, tokens));
}

/// Scratch bytes `dotllm_matmul_q8_0` needs (see `dotllm_pool_reserve`).
export fn dotllm_matmul_q8_0_scratch_size(cols: usize, tokens: usize) usize {
    return q8ScratchSize(cols, tokens);
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

fn fillRandom(random: std.Random, x: []f32, scale: f32) void {
    for (x) |*v| v.* = (random.float(f32) * 2 - 1) * scale;
}

/// |a - b| <= budget · (Σ_c |w_c x_c| for that output), checked for every element.
fn expectClose(expected: []const f32, actual: []const f32, magnitudes: []const f32, budget: f32) !void {
    for (expected, actual, magnitudes, 0..) |e, a, m, i| {
        if (@abs(e - a) > budget * m + 1e-30) {
            std.debug.print("element {d}: expected {e}, got {e} (magnitude {e})\n", .{ i, e, a, m });
            return error.TestExpectedApproxEq;
        }
    }
}

fn magnitudesOf(comptime W: type, out: []f32, w: []align(1) const W, x: []const f32, rows: usize, cols: usize, tokens: usize) void {
    for (0..tokens) |t| for (0..rows) |r| {
        var sum: f32 = 0;
        for (0..cols) |c| sum += @abs(simd.toF32(W, w[r * cols + c]) * x[t * cols + c]);
        out[t * rows + r] = sum;
    };
}

fn testFloatShape(comptime W: type, rows: usize, cols: usize, tokens: usize) !void {
    const allocator = testing.allocator;
    var prng = std.Random.DefaultPrng.init(rows * 1000 + cols * 10 + tokens);
    const random = prng.random();
    const wf = try allocator.alloc(f32, rows * cols);
    defer allocator.free(wf);
    fillRandom(random, wf, 1);
    const w = try allocator.alloc(W, rows * cols);
    defer allocator.free(w);
    for (wf, w) |a, *b| b.* = switch (W) {
        f32 => a,
        f16 => @floatCast(a),
        u16 => quant.f32ToBf16(a),
        else => unreachable,
    };
    const x = try allocator.alloc(f32, tokens * cols);
    defer allocator.free(x);
    fillRandom(random, x, 2);
    const expected = try allocator.alloc(f32, tokens * rows);
    defer allocator.free(expected);
    const magnitudes = try allocator.alloc(f32, tokens * rows);
    defer allocator.free(magnitudes);
    const actual = try allocator.alloc(f32, tokens * rows);
    defer allocator.free(actual);
    const single = try allocator.alloc(f32, tokens * rows);
    defer allocator.free(single);
    referenceFloat(W, expected, w, x, rows, cols, tokens);
    magnitudesOf(W, magnitudes, w, x, rows, cols, tokens);
    for (1..5) |threads| {
        const pool = try Pool.create(allocator, @intCast(threads));
        defer pool.destroy(allocator);
        try testing.expectEqual(pool_zig.Status.ok, matmulFloat(W, pool, actual.ptr, w.ptr, x.ptr, rows, cols, tokens));
        // Both sum the same products in different orders: ~cols·eps relative to Σ|terms| at worst.
        try expectClose(expected, actual, magnitudes, @as(f32, @floatFromInt(cols + 16)) * std.math.floatEps(f32));
        if (threads == 1) @memcpy(single, actual) else try testing.expectEqualSlices(f32, single, actual);
    }
}

const awkward_cols = [_]usize{ 1, 31, 33, 4096 + 7 };

test "float matmuls match the scalar reference on awkward shapes, bit-identical for 1..4 threads" {
    inline for (.{ f32, f16, u16 }) |W| {
        for (awkward_cols) |cols| {
            try testFloatShape(W, 7, cols, 1);
            try testFloatShape(W, 9, cols, 6);
        }
        try testFloatShape(W, 67, 256, 5);
    }
}

fn testQ8Shape(rows: usize, cols: usize, tokens: usize) !void {
    const allocator = testing.allocator;
    var prng = std.Random.DefaultPrng.init(rows * 1000 + cols * 10 + tokens);
    const random = prng.random();
    const wf = try allocator.alloc(f32, rows * cols);
    defer allocator.free(wf);
    fillRandom(random, wf, 1);
    const w = try allocator.alloc(BlockQ8_0, rows * cols / qk);
    defer allocator.free(w);
    quant.quantizeRowQ8_0(wf, w);
    const x = try allocator.alloc(f32, tokens * cols);
    defer allocator.free(x);
    fillRandom(random, x, 3);
    const expected = try allocator.alloc(f32, tokens * rows);
    defer allocator.free(expected);
    const magnitudes = try allocator.alloc(f32, tokens * rows);
    defer allocator.free(magnitudes);
    const actual = try allocator.alloc(f32, tokens * rows);
    defer allocator.free(actual);
    const single = try allocator.alloc(f32, tokens * rows);
    defer allocator.free(single);
    referenceQ8_0(expected, w, x, rows, cols, tokens);
    const wd = try allocator.alloc(f32, rows * cols);
    defer allocator.free(wd);
    quant.dequantizeRowQ8_0(w, wd);
    magnitudesOf(f32, magnitudes, wd, x, rows, cols, tokens);
    for (1..5) |threads| {
        const pool = try Pool.create(allocator, @intCast(threads));
        defer pool.destroy(allocator);
        try pool.reserve(allocator, q8ScratchSize(cols, tokens));
        try testing.expectEqual(pool_zig.Status.ok, matmulQ8_0(pool, actual.ptr, w.ptr, x.ptr, rows, cols, tokens));
        // Integer block sums are exact; only the f32 sum over blocks differs in order.
        try expectClose(expected, actual, magnitudes, @as(f32, @floatFromInt(cols / qk + 8)) * 4 * std.math.floatEps(f32));
        if (threads == 1) @memcpy(single, actual) else try testing.expectEqualSlices(f32, single, actual);
    }
}

test "Q8_0 matmul matches the scalar reference on awkward shapes, bit-identical for 1..4 threads" {
    for ([_]usize{ 32, 32 * 31, 32 * 33, 4096 + 32 * 7 }) |cols| {
        try testQ8Shape(7, cols, 1);
        try testQ8Shape(9, cols, 6);
    }
    try testQ8Shape(67, 256, 5);
}

test "vpdpbusd lanes equal the generic lanes, including -128 weights" {
    var prng = std.Random.DefaultPrng.init(7);
    const random = prng.random();
    for (0..100) |_| {
        var w: [qk]i8 = undefined;
        var x: [qk]f32 = undefined;
        for (&w) |*v| v.* = random.int(i8);
        w[0] = -128;
        fillRandom(random, &x, 5);
        var blocks: [1]ActBlock = undefined;
        var scales: [1]f32 = undefined;
        quantizeActivations(&x, &blocks, &scales);
        try testing.expectEqual(dotLanesGeneric(w, blocks[0].qs), dotLanes(&w, &blocks[0]));
    }
}

test "Q8_0 and float GEMM rows equal GEMV of each token bit for bit" {
    const allocator = testing.allocator;
    const rows = 11;
    const cols = 32 * 9;
    const tokens = 6;
    var prng = std.Random.DefaultPrng.init(11);
    const wf = try allocator.alloc(f32, rows * cols);
    defer allocator.free(wf);
    fillRandom(prng.random(), wf, 1);
    const w = try allocator.alloc(BlockQ8_0, rows * cols / qk);
    defer allocator.free(w);
    quant.quantizeRowQ8_0(wf, w);
    const x = try allocator.alloc(f32, tokens * cols);
    defer allocator.free(x);
    fillRandom(prng.random(), x, 2);
    var gemm: [tokens * rows]f32 = undefined;
    var gemv: [tokens * rows]f32 = undefined;
    const pool = try Pool.create(allocator, 1);
    defer pool.destroy(allocator);
    try pool.reserve(allocator, q8ScratchSize(cols, tokens));
    _ = matmulQ8_0(pool, &gemm, w.ptr, x.ptr, rows, cols, tokens);
    for (0..tokens) |t| _ = matmulQ8_0(pool, gemv[t * rows ..].ptr, w.ptr, x[t * cols ..].ptr, rows, cols, 1);
    try testing.expectEqualSlices(f32, &gemm, &gemv);
    _ = matmulFloat(f32, pool, &gemm, wf.ptr, x.ptr, rows, cols, tokens);
    for (0..tokens) |t| _ = matmulFloat(f32, pool, gemv[t * rows ..].ptr, wf.ptr, x[t * cols ..].ptr, rows, cols, 1);
    try testing.expectEqualSlices(f32, &gemm, &gemv);
}
