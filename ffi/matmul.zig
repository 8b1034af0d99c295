//! Matrix multiplication of weights (F32, F16, BF16, Q8_0) by f32 activations:
//! `out[t][r] = Σ_c W[r][c] · x[t][c]`, W row-major `rows × cols` as GGUF stores it.
//!
//! One kernel serves GEMV (tokens = 1) and GEMM: register tiles of several rows ×
//! several tokens (`FloatTile` per weight type and register file for the float
//! weights, `row_group` × `token_group` for Q8_0), so each weight vector loaded is
//! used for every token of the tile. The float kernels accumulate in 16 lanes wherever
//! AVX-512F exists (whatever the CPU's tuning prefers), in `simd.f32_lanes` otherwise. Every output element is computed with the same
//! instructions in the same order whatever tile it falls in and whatever thread
//! computes it: results are bit-identical for any thread count.
//!
//! Q8_0 quantizes the activations once per call into the pool's scratch (quants,
//! scales and a precomputed `vpdpbusd` correction) and multiplies with integer dot
//! products: `vpdpbusd` with AVX-512 VNNI, `vpmaddubsw`/`vpmaddwd` with AVX2, a
//! generic `@Vector` widening multiply otherwise. All produce the same exact lanes.
//! Every Q8_0 output is ggml's vec_dot_q8_0_q8_0 order (an 8-lane accumulator, one FMA
//! per block, then hsum_float_8); four tiles compute it: `tileQ8Cells` for prompts
//! (two outputs per 512-bit vector), `tileQ8Avx2` for 2+ tokens on AVX2
//! without AVX-512 (assembly, `q8_0_tile_avx2.zig`), `tileQ8Gemv` for one token (one
//! block per 256-bit vector), and `tileQ8` (block pairs) for the remaining rows of a
//! prompt and as the tests' reference beside the scalar `referenceQ8_0`.
const std = @import("std");
const simd = @import("simd.zig");
const quant = @import("quant.zig");
const quant_act = @import("quant_act.zig");
const q8_0_tile_avx2 = @import("q8_0_tile_avx2.zig");
const pool_zig = @import("pool.zig");

const Pool = pool_zig.Pool;
const BlockQ8_0 = quant.BlockQ8_0;
const qk = quant.qk8_0;
const builtin = @import("builtin");

/// f32 lanes of the float kernels' accumulators: 16 wherever AVX-512F exists, even
/// on CPUs whose tuning prefers 256-bit vectors (Intel's `prefer-256-bit`, which
/// halves `simd.f32_lanes`): with two 512-bit FMA ports a 256-bit GEMM tile gets half
/// the throughput, and one width for every AVX-512 CPU gives one summation order.
const lanes: comptime_int = if (builtin.cpu.arch == .x86_64 and
    std.Target.x86.featureSetHas(builtin.cpu.features, .avx512f)) 16 else simd.f32_lanes;
const F32x = @Vector(lanes, f32);

/// How far ahead a GEMV prefetches weight rows, at least: short rows need several row
/// groups of lead to cover the memory latency.
const prefetch_distance_bytes = 16384;

/// Rows per register tile; thread ranges are aligned to it.
pub const row_group = 4;
/// Tokens per register tile.
pub const token_group = 4;
/// Below this many multiply-adds a matmul runs on the calling thread only.
pub const parallel_threshold_macs: usize = 1 << 16;

// ---------------------------------------------------------------------------
// Float weights: F32, F16, BF16 (u16 bits)

/// Rows × tokens of the float GEMM register tile: FR·FT accumulators plus FT
/// activation vectors and one weight vector fit the 32 zmm registers. The activations
/// of a prompt come from L2, so more rows per tile load fewer of them per FMA (F32:
/// 8 × 3); F16 and BF16 weights also convert each weight vector once per tile, so
/// more tokens per tile convert less per FMA (6 × 4). Measured on an AVX-512 Xeon
/// (SmolLM-135M shape, 64-token prompt). Thread ranges are aligned to the row count.
/// Without AVX-512 (16 ymm registers with AVX2): 4 × 3 for every weight type, as
/// tinyBLAS (12 accumulators, 3 activations, a weight vector). F16/BF16 had 4 × 4,
/// once measured faster in the x86-64-v3 build, but its 16 accumulators spill: on the
/// AVX2 Zen 3 host (smollm-135m F16 pp64, 1 thread, 3 rounds alternating) 4 × 3 ran at
/// 250-341 tok/s against 209-213 for 4 × 4 (6 × 2: 340-352, 4 × 2: 316-337, 3 × 4:
/// 165-169, 2 × 6: 163-181).
fn FloatTile(comptime W: type) type {
    const zmm32 = lanes == 16;
    return struct {
        const rows: usize = if (!zmm32) 4 else if (W == f32) 8 else 6;
        const tokens: usize = if (!zmm32 or W == f32) 3 else 4;
    };
}

/// How a float matrix is stored: `.rows`, row-major as GGUF has it; `.groups`, the
/// load-time layout of `repack.FloatGrouped` (groups of `group_rows` rows, each
/// `lanes`-column chunk of a group's rows stored together, row by row), which a GEMV
/// reads front to back as one stream.
pub const FloatLayout = enum { rows, groups };

/// Rows of a `.groups` float matrix: the AVX2 tile's rows, where that layout exists
/// (x86 with AVX2, without AVX-512: 8 lanes, 4-row tiles for every float type); 0
/// elsewhere. On the AVX2 Zen 3 host, a 450 MB ring of smollm-135m's F32 matrices
/// (576-1536 columns), GEMV at 1 thread against a plain read of the same bytes:
/// 0.73-0.84 row-major (4-row tiles, span prefetch), 0.86-0.92 grouped (no prefetch).
pub const group_rows: usize = if (simd.has_avx2 and lanes == 8) 4 else 0;

/// A group's column chunk: `.groups` matrices have a multiple of it as columns.
pub const group_lanes: usize = lanes;

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

inline fn tileFloat(comptime W: type, comptime layout: FloatLayout, comptime R: usize, comptime T: usize, job: *const FloatJob(W), r0: usize, t0: usize) void {
    // Every output's inline hsum counts against the comptime branch quota.
    @setEvalBranchQuota(20000);
    const grouped = layout == .groups;
    const cols = job.cols;
    // Row r0's start; in a grouped matrix, its group's (r0 is a group's first row).
    const w_tile = job.w + r0 * cols;
    if (grouped) std.debug.assert(R == group_rows and r0 % group_rows == 0 and cols % lanes == 0);
    var acc: [R][T]F32x = @splat(@splat(@splat(0)));
    var c: usize = 0;
    while (c + lanes <= cols) : (c += lanes) {
        if (T == 1 and !grouped) {
            // GEMV: the R rows are one span; fetch it linearly ahead at the rate the
            // tile reads it (see `simd.prefetchSpanAhead`). A grouped matrix is read
            // front to back: the hardware prefetcher follows it alone.
            simd.prefetchSpanAhead(@ptrCast(w_tile), R * cols * @sizeOf(W), c * R * @sizeOf(W), R * lanes * @sizeOf(W));
        }
        var xv: [T]F32x = undefined;
        inline for (0..T) |t| xv[t] = simd.loadAsF32(f32, lanes, job.x + (t0 + t) * cols + c);
        inline for (0..R) |r| {
            const wv = simd.loadAsF32(W, lanes, if (grouped) w_tile + c * R + r * lanes else w_tile + r * cols + c);
            inline for (0..T) |t| acc[r][t] = @mulAdd(F32x, wv, xv[t], acc[r][t]);
        }
    }
    inline for (0..R) |r| {
        inline for (0..T) |t| {
            var sum = simd.hsum(lanes, f32, acc[r][t]);
            if (!grouped) { // (a grouped matrix has no column tail)
                const w_row = w_tile + r * cols;
                const x_row = job.x + (t0 + t) * cols;
                for (c..cols) |k| sum = @mulAdd(f32, simd.toF32(W, w_row[k]), x_row[k], sum);
            }
            job.out[(t0 + t) * job.rows + r0 + r] = sum;
        }
    }
}

/// The float GEMV: tiles of 4 rows, 4 independent fma chains (one row's chain alone is
/// bound by the fma latency: F16 smollm-135m decode on the AVX2 Zen 3 host ran at 13
/// GB/s), their span prefetched linearly. Where the hardware prefetcher follows one
/// contiguous span alone (`simd.prefetchSpans()` false: Zen 4), one row at a time: the
/// rows are then read front to back as one stream, and out-of-order execution overlaps
/// the chains of consecutive rows. Zen 4, a 450 MB ring of 1536×576 matrices beside a
/// plain read of the same bytes, 1 thread, GEMV / read: F32 0.72-0.85 (4 rows) and
/// 0.94-0.98 (1 row), F16 0.76-0.84 and 0.81-0.99; from L2, 85 and 98 GB/s (F32),
/// 61 and 48 GB/s (F16). Same arithmetic per output either way (`R` 4 or 1).
/// A grouped matrix (`layout` `.groups`) takes R = `group_rows`, its whole groups.
fn gemvFloatRange(comptime W: type, comptime layout: FloatLayout, comptime R: usize, job: *const FloatJob(W), row_begin: usize, row_end: usize) void {
    var r = row_begin;
    while (r + R <= row_end) : (r += R) tileFloat(W, layout, R, 1, job, r, 0);
    if (layout == .groups) return std.debug.assert(r == row_end);
    while (r < row_end) : (r += 1) tileFloat(W, layout, 1, 1, job, r, 0);
}

fn matmulFloatRange(comptime W: type, comptime layout: FloatLayout, job: *const FloatJob(W), row_begin: usize, row_end: usize) void {
    if (layout == .groups) {
        // Whole groups: thread ranges are aligned to `FloatTile(W).rows`, the group.
        comptime std.debug.assert(FloatTile(W).rows == group_rows);
        if (job.tokens == 1) return gemvFloatRange(W, .groups, group_rows, job, row_begin, row_end);
        var r = row_begin;
        while (r < row_end) : (r += group_rows) floatRowTiles(W, .groups, group_rows, job, r);
        return;
    }
    if (job.tokens == 1) {
        if (simd.prefetchSpans()) gemvFloatRange(W, .rows, 4, job, row_begin, row_end) else gemvFloatRange(W, .rows, 1, job, row_begin, row_end);
        return;
    }
    var r = row_begin;
    const FR = FloatTile(W).rows;
    while (r + FR <= row_end) : (r += FR) floatRowTiles(W, .rows, FR, job, r);
    while (r + 4 <= row_end) : (r += 4) floatRowTiles(W, .rows, 4, job, r);
    while (r < row_end) : (r += 1) floatRowTiles(W, .rows, 1, job, r);
}

/// All tokens of rows r..r+R in ⌈tokens / FT⌉ tiles of as equal sizes as can be
/// (64 tokens, FT = 3: 20 of 3 and 2 of 2, as tinyBLAS splits them): a 1-token tile
/// in a prompt would load one weight vector per FMA.
fn floatRowTiles(comptime W: type, comptime layout: FloatLayout, comptime R: usize, job: *const FloatJob(W), r: usize) void {
    const FT = FloatTile(W).tokens;
    const tiles = (job.tokens + FT - 1) / FT;
    const base = job.tokens / tiles;
    const larger_tiles = job.tokens % tiles;
    var t: usize = 0;
    for (0..tiles) |i| {
        const size = base + @intFromBool(i < larger_tiles);
        switch (size) {
            inline 1...FT => |T| tileFloat(W, layout, R, T, job, r, t),
            else => unreachable,
        }
        t += size;
    }
}

pub fn matmulFloat(comptime W: type, pool: *Pool, out: [*]f32, w: [*]align(1) const W, x: [*]const f32, rows: usize, cols: usize, tokens: usize) pool_zig.Status {
    return matmulFloatLayout(W, .rows, pool, out, w, x, rows, cols, tokens);
}

/// `matmulFloat` over a matrix stored in `layout`; a `.groups` one has whole groups of
/// rows and a multiple of `group_lanes` columns (checked by the caller). The same bits
/// either way: each output is the same lanes' FMAs in the same order.
pub fn matmulFloatLayout(comptime W: type, comptime layout: FloatLayout, pool: *Pool, out: [*]f32, w: [*]align(1) const W, x: [*]const f32, rows: usize, cols: usize, tokens: usize) pool_zig.Status {
    if (layout == .groups) std.debug.assert(group_rows > 0 and rows % group_rows == 0 and cols % group_lanes == 0);
    const job: FloatJob(W) = .{ .out = out, .w = w, .x = x, .rows = rows, .cols = cols, .tokens = tokens };
    const Runner = struct {
        fn run(j: *const FloatJob(W), begin: usize, end: usize) void {
            matmulFloatRange(W, layout, j, begin, end);
        }
    };
    return pool.run(FloatJob(W), &job, Runner.run, rows, FloatTile(W).rows, rows * cols * tokens, parallel_threshold_macs);
}

// ---------------------------------------------------------------------------
// Q8_0 weights
//
// The kernel works on pairs of consecutive blocks of one row in a 512-bit vector:
// one 64-byte load at the pair's start plus the 4 bytes after it hold both scales and
// both 32-byte quants; a byte permute packs the 64
// quants. The activations are quantized once per call into three arrays per token,
// padded to an even block count with zeros: quants (64 bytes per pair), vpdpbusd
// corrections (64 bytes per pair) and scales (f32).

/// The quantized activations of one call, laid out in the pool's scratch.
const Activations = struct {
    qs: [*]i8,
    neg_corr: [*]i32,
    scales: [*]f32,
    /// The scales again, block-major ([block][token]), then 8 zeros: the AVX2 prompt
    /// tile reads 8 consecutive tokens' scales of a block in one load.
    scales_by_block: [*]f32,
    /// Blocks per token, rounded up to even.
    blocks_padded: usize,

    fn init(scratch: []align(64) u8, blocks: usize, tokens: usize) Activations {
        const padded = blocks + (blocks & 1);
        std.debug.assert(scratch.len >= q8ScratchSize(blocks * qk, tokens));
        const qs_bytes = tokens * padded * qk;
        return .{
            .qs = @ptrCast(scratch.ptr),
            .neg_corr = @ptrCast(@alignCast(scratch.ptr + qs_bytes)),
            .scales = @ptrCast(@alignCast(scratch.ptr + 2 * qs_bytes)),
            .scales_by_block = @ptrCast(@alignCast(scratch.ptr + 2 * qs_bytes + tokens * padded * @sizeOf(f32))),
            .blocks_padded = padded,
        };
    }
};

/// Scratch bytes the Q8_0 matmul needs for `tokens` rows of `cols` activations:
/// per (even-padded) block 32 quants, 8 i32 corrections and the f32 scale twice (token-
/// and block-major), then 8 zero scales.
pub fn q8ScratchSize(cols: usize, tokens: usize) usize {
    const blocks = cols / qk;
    return tokens * (blocks + (blocks & 1)) * (qk + 8 * @sizeOf(i32) + 2 * @sizeOf(f32)) + scale_padding * @sizeOf(f32);
}

/// Zero scales after the block-major copy (`Activations.scales_by_block`).
const scale_padding = 8;

/// Quantizes one token's activations (llama.cpp's Q8_0: f16-rounded scale) into
/// quants, scales and, per group of 4 quants, -128 × their sum: the weights enter
/// `vpdpbusd` as unsigned `q + 128`, and the correction makes its lanes exact.
/// Writes zeros into the padding block.
fn quantizeActivations(x: []const f32, qs: []i8, neg_corr: []i32, scales: []f32) void {
    const blocks = x.len / qk;
    for (0..scales.len) |b| {
        const q = qs[b * qk ..][0..qk];
        if (b >= blocks) {
            @memset(q, 0);
            scales[b] = 0;
        } else {
            scales[b] = @as(f16, @floatCast(quant_act.quantizeBlockX86(x[b * qk ..][0..qk], q).d));
        }
        for (0..8) |g| {
            var sum: i32 = 0;
            for (q[g * 4 ..][0..4]) |v| sum += v;
            neg_corr[b * 8 + g] = -128 * sum;
        }
    }
}

const I32x8 = @Vector(8, i32);
const I32x16 = @Vector(16, i32);
const F32x16 = @Vector(16, f32);
const F32x8 = @Vector(8, f32);
const U8x64 = @Vector(64, u8);

/// lane g of 8 = Σ_{j<4} w[4g+j]·x[4g+j], exact (the lane layout of vpdpbusd).
inline fn dotLanesGeneric(wv: @Vector(qk, i8), xv: @Vector(qk, i8)) I32x8 {
    const p: @Vector(qk, i32) = @as(@Vector(qk, i32), wv) * @as(@Vector(qk, i32), xv);
    const pairs = @shuffle(i32, p, undefined, even16) + @shuffle(i32, p, undefined, odd16);
    return @shuffle(i32, pairs, undefined, even8) + @shuffle(i32, pairs, undefined, odd8);
}

const even16 = std.simd.iota(i32, 16) * @as(@Vector(16, i32), @splat(2));
const odd16 = even16 + @as(@Vector(16, i32), @splat(1));
const even8 = std.simd.iota(i32, 8) * @as(@Vector(8, i32), @splat(2));
const odd8 = even8 + @as(@Vector(8, i32), @splat(1));

/// The 8 lanes of `dotLanesGeneric` with AVX2: |w| (unsigned) × sign(x, w) summed in
/// byte pairs by `vpmaddubsw` (no saturation: 2·128·127 < 2^15), then in i16 pairs by
/// `vpmaddwd`. Exact, same lane layout as vpdpbusd.
inline fn dotLanesAvx2(wv: @Vector(qk, i8), xv: @Vector(qk, i8)) I32x8 {
    const w_abs: @Vector(qk, u8) = @abs(wv);
    const x_signed = asm ("vpsignb %[w], %[x], %[out]"
        : [out] "=x" (-> @Vector(qk, i8)),
        : [x] "x" (xv),
          [w] "x" (wv),
    );
    const pairs = asm ("vpmaddubsw %[s], %[u], %[out]"
        : [out] "=x" (-> @Vector(16, i16)),
        : [u] "x" (w_abs),
          [s] "x" (x_signed),
    );
    const ones: @Vector(16, i16) = @splat(1);
    return asm ("vpmaddwd %[ones], %[p], %[out]"
        : [out] "=x" (-> I32x8),
        : [p] "x" (pairs),
          [ones] "x" (ones),
    );
}

/// 16 exact lanes for a pair of blocks: lanes 0-7 block 2j, lanes 8-15 block 2j+1.
inline fn dotLanesPair(w_qs: U8x64, x_qs: *align(64) const [2 * qk]i8, neg_corr: *align(64) const [16]i32) I32x16 {
    return dotLanes16(w_qs, x_qs.*, neg_corr.*);
}

/// 16 exact lanes of two 32-byte halves: lane g of half h = Σ_{j<4} w[32h+4g+j]·x[32h+4g+j].
/// `neg_corr` is the halves' `vpdpbusd` corrections (-128 × the sums of x in groups of 4),
/// used with AVX-512 VNNI only (it multiplies the weights as unsigned `w + 128`).
inline fn dotLanes16(w_qs: U8x64, xv: @Vector(2 * qk, i8), neg_corr: I32x16) I32x16 {
    if (comptime simd.has_avx512vnni) {
        const wu = w_qs ^ @as(U8x64, @splat(0x80));
        return asm ("vpdpbusd %[x], %[w], %[acc]"
            : [acc] "=v" (-> I32x16),
            : [_] "0" (neg_corr),
              [w] "v" (wu),
              [x] "v" (xv),
        );
    }
    const wv: @Vector(2 * qk, i8) = @bitCast(w_qs);
    const w_lo = @shuffle(i8, wv, undefined, first_half_mask);
    const w_hi = @shuffle(i8, wv, undefined, second_half_mask);
    const x_lo = @shuffle(i8, xv, undefined, first_half_mask);
    const x_hi = @shuffle(i8, xv, undefined, second_half_mask);
    const lo = if (comptime simd.has_avx2) dotLanesAvx2(w_lo, x_lo) else dotLanesGeneric(w_lo, x_lo);
    const hi = if (comptime simd.has_avx2) dotLanesAvx2(w_hi, x_hi) else dotLanesGeneric(w_hi, x_hi);
    return @shuffle(i32, lo, hi, [16]i32{ 0, 1, 2, 3, 4, 5, 6, 7, -1, -2, -3, -4, -5, -6, -7, -8 });
}

const first_half_mask = std.simd.iota(i32, qk);
const second_half_mask = first_half_mask + @as(@Vector(qk, i32), @splat(qk));

/// Picks the 64 quants of a block pair out of its 68 bytes: bytes 2..33 of `head`
/// (the first 64 bytes) and bytes 36..67 (the last 4 are lanes 0..3 of `tail`).
const pair_qs_mask = blk: {
    var mask: [64]i32 = undefined;
    for (0..64) |i| {
        const byte = if (i < 32) 2 + i else 36 + (i - 32);
        mask[i] = if (byte < 64) byte else ~@as(i32, byte - 64);
    }
    break :blk mask;
};

/// One weight block pair: its 64 quants and its two f16 scales.
const WeightPair = struct { qs: U8x64, d: @Vector(2, f16) };

inline fn loadWeightPair(bytes: [*]const u8) WeightPair {
    const head: U8x64 = @as(*align(1) const [64]u8, @ptrCast(bytes)).*;
    const tail_word: u32 = @as(*align(1) const u32, @ptrCast(bytes + 64)).*;
    var tail_words: @Vector(16, u32) = @splat(0);
    tail_words[0] = tail_word;
    const tail: U8x64 = @bitCast(tail_words);
    const words: @Vector(32, u16) = @bitCast(head);
    const d: @Vector(2, u16) = @shuffle(u16, words, undefined, [2]i32{ 0, 17 });
    return .{ .qs = @shuffle(u8, head, tail, pair_qs_mask), .d = @bitCast(d) };
}

const Q8Job = struct {
    out: [*]f32,
    w: [*]const u8,
    act: Activations,
    rows: usize,
    blocks_per_row: usize,
    tokens: usize,
};

/// Lanes [2r ×8, 2r+1 ×8] of a 2R-lane vector: block 2j's and 2j+1's scale of row r.
fn rowScaleMask(comptime r: usize) [16]i32 {
    @setEvalBranchQuota(100_000);
    var mask: [16]i32 = undefined;
    for (0..16) |i| mask[i] = @intCast(2 * r + i / 8);
    return mask;
}

fn dxMask(comptime R: usize) [2 * R]i32 {
    @setEvalBranchQuota(100_000);
    var mask: [2 * R]i32 = undefined;
    for (0..2 * R) |i| mask[i] = @intCast(i % 2);
    return mask;
}

/// A register tile of R rows × T tokens. Each output element is llama.cpp's x86
/// `ggml_vec_dot_q8_0_q8_0`: hsum8 (ggml's `hsum_float_8` tree) of an 8-lane
/// accumulator fed by one FMA per block, acc = fma(dw·dx, cvt(lanes), acc), in block
/// order: the same arithmetic in every tile shape, so GEMV, GEMM and every thread split
/// agree bit for bit (tinyBLAS_Q0_AVX, which llama.cpp's prompts take, has the same order).
inline fn tileQ8(comptime R: usize, comptime T: usize, job: *const Q8Job, r0: usize, t0: usize) void {
    const nb = job.blocks_per_row;
    const row_bytes = nb * @sizeOf(BlockQ8_0);
    const ahead_rows = R * @max(1, prefetch_distance_bytes / (R * row_bytes));
    const act = job.act;
    var acc: [R][T]F32x8 = @splat(@splat(@splat(0)));
    var j: usize = 0;
    while (j < act.blocks_padded) : (j += 2) {
        // An odd last block is copied out with zero padding (its 64-byte load would
        // read past the row).
        var odd_buffer: [68]u8 = undefined;
        var pairs: [R]WeightPair = undefined;
        if (T == 1) {
            // GEMV streams each weight byte once: fetch the next row group's bytes at the
            // same position (its rows are the next R·row_bytes; the prefetcher would
            // otherwise retrain on every short row).
            inline for (0..R) |r| {
                // A block pair is 68 bytes: fetch the line it starts in and the next, or
                // every 17th line of the stream would be missed.
                const ahead = job.w + (r0 + ahead_rows + r) * row_bytes + j * @sizeOf(BlockQ8_0);
                @prefetch(ahead, .{ .locality = 2 });
                @prefetch(ahead + 64, .{ .locality = 2 });
            }
        }
        inline for (0..R) |r| {
            const start = job.w + (r0 + r) * row_bytes + j * @sizeOf(BlockQ8_0);
            if (j + 1 < nb) {
                pairs[r] = loadWeightPair(start);
            } else {
                @memset(&odd_buffer, 0);
                @memcpy(odd_buffer[0..@sizeOf(BlockQ8_0)], start[0..@sizeOf(BlockQ8_0)]);
                pairs[r] = loadWeightPair(&odd_buffer);
            }
        }
        var d_bits: @Vector(2 * R, f16) = undefined;
        inline for (0..R) |r| {
            d_bits[2 * r] = pairs[r].d[0];
            d_bits[2 * r + 1] = pairs[r].d[1];
        }
        const dw: @Vector(2 * R, f32) = @floatCast(d_bits);
        inline for (0..T) |t| {
            const token = (t0 + t) * act.blocks_padded + j;
            const dx2: @Vector(2, f32) = .{ act.scales[token], act.scales[token + 1] };
            const scales = dw * @shuffle(f32, dx2, undefined, dxMask(R));
            const x_qs: *align(64) const [2 * qk]i8 = @ptrCast(@alignCast(act.qs + token * qk));
            const corr: *align(64) const [16]i32 = @ptrCast(@alignCast(act.neg_corr + token * 8));
            inline for (0..R) |r| {
                const lanes_f: F32x16 = @floatFromInt(dotLanesPair(pairs[r].qs, x_qs, corr));
                const lo: F32x8 = @shuffle(f32, lanes_f, undefined, std.simd.iota(i32, 8));
                const hi: F32x8 = @shuffle(f32, lanes_f, undefined, std.simd.iota(i32, 8) + @as(@Vector(8, i32), @splat(8)));
                // ggml_vec_dot_q8_0_q8_0 (x86, AVX2 branch) and tinyBLAS_Q0_AVX: per block
                // acc = fma(dw·dx, lanes, acc), blocks in order; the padding block is skipped.
                acc[r][t] = @mulAdd(F32x8, @splat(scales[2 * r]), lo, acc[r][t]);
                if (j + 1 < nb) acc[r][t] = @mulAdd(F32x8, @splat(scales[2 * r + 1]), hi, acc[r][t]);
            }
        }
    }
    inline for (0..R) |r| {
        inline for (0..T) |t| job.out[(t0 + t) * job.rows + r0 + r] = simd.hsum(8, f32, acc[r][t]);
    }
}

/// Comptime shuffle masks of the prompt tile.
fn cellMask(comptime n: usize, comptime f: fn (usize) i32) [n]i32 {
    var mask: [n]i32 = undefined;
    for (0..n) |i| mask[i] = f(i);
    return mask;
}
/// Two rows' 32-byte quants of one block: row r's in bytes 0..31, row r+1's in 32..63.
const concat_mask = cellMask(64, struct {
    fn f(i: usize) i32 {
        return if (i < 32) @intCast(i) else ~@as(i32, @intCast(i - 32));
    }
}.f);
/// Lanes 0-7 the first value, 8-15 the second.
const halves_mask = cellMask(16, struct {
    fn f(i: usize) i32 {
        return @intCast(i / 8);
    }
}.f);
/// A 32-byte vector twice.
const twice_mask = cellMask(64, struct {
    fn f(i: usize) i32 {
        return @intCast(i % 32);
    }
}.f);
/// An 8-lane vector twice.
const twice8_mask = cellMask(16, struct {
    fn f(i: usize) i32 {
        return @intCast(i % 8);
    }
}.f);

/// A register tile of P row pairs × T tokens for prompts (T ≥ 2), with the arithmetic of
/// `tileQ8` (llama.cpp's vec_dot_q8_0_q8_0 order) per output element, but laid out so a
/// 512-bit vector carries two outputs: lanes 0-7 are the 8-lane accumulator of (row r,
/// token t) and lanes 8-15 that of (row r+1, token t). One `vpdpbusd` per (row pair,
/// token, block) feeds both with one 16-lane FMA, in block order, as tileQ8's two 8-lane
/// FMAs do; weights loaded once per block serve every token of the tile and activations
/// every row pair. Results equal tileQ8's bit for bit (a test checks).
inline fn tileQ8Cells(comptime P: usize, comptime T: usize, job: *const Q8Job, r0: usize, t0: usize) void {
    const nb = job.blocks_per_row;
    const row_bytes = nb * @sizeOf(BlockQ8_0);
    const act = job.act;
    const ahead_rows = 2 * P * @max(1, prefetch_distance_bytes / (2 * P * row_bytes));
    var acc: [P][T]F32x16 = @splat(@splat(@splat(0)));
    for (0..nb) |b| {
        var wq: [P]U8x64 = undefined;
        var dw: [P]F32x16 = undefined;
        if (T <= cell_prefetch_max_tokens) {
            // As tileQ8Gemv: a decode batch does little work per weight byte, so fetch
            // the rows ahead at this block (the prefetcher retrains on every short row).
            const ahead = job.w + (r0 + ahead_rows) * row_bytes + b * @sizeOf(BlockQ8_0);
            inline for (0..2 * P) |r| @prefetch(ahead + r * row_bytes, .{ .locality = 2 });
        }
        inline for (0..P) |p| {
            const lo = job.w + (r0 + 2 * p) * row_bytes + b * @sizeOf(BlockQ8_0);
            const hi = lo + row_bytes;
            const lo_qs: @Vector(32, u8) = @as(*align(1) const [32]u8, @ptrCast(lo + 2)).*;
            const hi_qs: @Vector(32, u8) = @as(*align(1) const [32]u8, @ptrCast(hi + 2)).*;
            wq[p] = @shuffle(u8, lo_qs, hi_qs, concat_mask);
            const d: @Vector(2, f16) = .{ @as(*align(1) const f16, @ptrCast(lo)).*, @as(*align(1) const f16, @ptrCast(hi)).* };
            dw[p] = @shuffle(f32, @as(@Vector(2, f32), @floatCast(d)), undefined, halves_mask);
        }
        inline for (0..T) |t| {
            const token = (t0 + t) * act.blocks_padded + b;
            const xq: @Vector(qk, i8) = @as(*align(32) const [qk]i8, @ptrCast(@alignCast(act.qs + token * qk))).*;
            const x2 = @shuffle(i8, xq, undefined, twice_mask);
            const corr8: I32x8 = @as(*align(32) const [8]i32, @ptrCast(@alignCast(act.neg_corr + token * 8))).*;
            const corr = @shuffle(i32, corr8, undefined, twice8_mask);
            const dx: F32x16 = @splat(act.scales[token]);
            inline for (0..P) |p| {
                const lanes_f: F32x16 = @floatFromInt(dotLanes16(wq[p], x2, corr));
                // As tileQ8: acc = fma(dw·dx, lanes, acc) per block, for both outputs at once.
                acc[p][t] = @mulAdd(F32x16, dw[p] * dx, lanes_f, acc[p][t]);
            }
        }
    }
    inline for (0..P) |p| {
        inline for (0..T) |t| {
            storeHalves(job.out + (t0 + t) * job.rows + r0 + 2 * p, acc[p][t]);
        }
    }
}

/// Token counts up to which `tileQ8Cells` prefetches the rows ahead (a 2-4 sequence
/// decode step waits on the weight stream without it: the head matmul of 4 tokens cost
/// 4.3× one token's; larger prompt tiles are compute-bound).
const cell_prefetch_max_tokens = 4;

/// 8 exact lanes of one block: lane g = Σ_{j<4} w[4g+j]·x[4g+j]. `neg_corr` as in `dotLanes16`.
inline fn dotLanes8(w_qs: @Vector(qk, u8), xv: @Vector(qk, i8), neg_corr: I32x8) I32x8 {
    if (comptime simd.has_avx512vnni) {
        const wu = w_qs ^ @as(@Vector(qk, u8), @splat(0x80));
        return asm ("vpdpbusd %[x], %[w], %[acc]"
            : [acc] "=v" (-> I32x8),
            : [_] "0" (neg_corr),
              [w] "v" (wu),
              [x] "v" (xv),
        );
    }
    const wv: @Vector(qk, i8) = @bitCast(w_qs);
    return if (comptime simd.has_avx2) dotLanesAvx2(wv, xv) else dotLanesGeneric(wv, xv);
}

/// GEMV (one token) over R rows, block by block in 256-bit vectors: the 32 quants of a
/// block load directly (no pair permute) and each row's 8-lane accumulator takes one
/// FMA per block, acc = fma(dw·dx, lanes, acc), as ggml's vec_dot_q8_0_q8_0 and
/// `tileQ8` (equal bits; a test checks).
inline fn tileQ8Gemv(comptime R: usize, job: *const Q8Job, r0: usize, t: usize) void {
    const nb = job.blocks_per_row;
    const row_bytes = nb * @sizeOf(BlockQ8_0);
    const act = job.act;
    var acc: [R]F32x8 = @splat(@splat(0));
    const token0 = t * act.blocks_padded;
    for (0..nb) |b| {
        const base = job.w + r0 * row_bytes + b * @sizeOf(BlockQ8_0);
        // The R rows are one span: fetch it linearly ahead, R blocks' bytes per block
        // step (one stream in flight, not R short ones; on the AVX2 Zen 3 host,
        // smollm-135m Q8_0 decode at 1 thread 74 → 99 tok/s against a prefetch of each
        // row at its block).
        simd.prefetchAhead(job.w + r0 * row_bytes, R * row_bytes, b * R * @sizeOf(BlockQ8_0), R * @sizeOf(BlockQ8_0));
        var d: @Vector(R, f16) = undefined;
        inline for (0..R) |r| d[r] = @as(*align(1) const f16, @ptrCast(base + r * row_bytes)).*;
        const token = token0 + b;
        const dw: @Vector(R, f32) = @floatCast(d);
        const scales = dw * @as(@Vector(R, f32), @splat(act.scales[token]));
        const xv: @Vector(qk, i8) = @as(*align(32) const [qk]i8, @ptrCast(@alignCast(act.qs + token * qk))).*;
        const corr: I32x8 = @as(*align(32) const [8]i32, @ptrCast(@alignCast(act.neg_corr + token * 8))).*;
        inline for (0..R) |r| {
            const w_qs: @Vector(qk, u8) = @as(*align(1) const [qk]u8, @ptrCast(base + r * row_bytes + 2)).*;
            const lanes_f: F32x8 = @floatFromInt(dotLanes8(w_qs, xv, corr));
            acc[r] = @mulAdd(F32x8, @splat(scales[r]), lanes_f, acc[r]);
        }
    }
    inline for (0..R) |r| job.out[t * job.rows + r0 + r] = simd.hsum(8, f32, acc[r]);
}

/// out[0], out[1] = hsum8 (`hsum_float_8`'s tree) of lanes 0-7 and of lanes 8-15.
fn storeHalves(out: [*]f32, v: F32x16) void {
    const lo: F32x8 = @shuffle(f32, v, undefined, std.simd.iota(i32, 8));
    const hi: F32x8 = @shuffle(f32, v, undefined, std.simd.iota(i32, 8) + @as(@Vector(8, i32), @splat(8)));
    out[0] = simd.hsum(8, f32, lo);
    out[1] = simd.hsum(8, f32, hi);
}

/// Rows of the GEMV tile: measured 1.4× tileQ8 4 × 1 on an L2-resident 2048 × 576
/// matrix (8 rows: 1.45×); 4 keeps the pool's row chunks whole.
const gemv_rows = 4;

/// Row pairs and tokens of the prompt tile (`tileQ8Cells`): 4 × 6 (24 accumulators;
/// each token's activation loads and broadcasts serve 8 rows). On Zen 4, the 1B Q8_0
/// pp64 at 1 thread, 3 rounds alternating: 32.1-37.4 tok/s with 2 × 8 against
/// 50.4-55.1 (3 × 8: 44.1-52.6, 5 × 5: 48.6-51.2, 6 × 4: 44.9-48.7, 4 × 7: 44.1-48.6,
/// 2 × 12: 37.5-39.6). On the Intel Xeon of 2026-12-04: 1B Q8_0 pp64 57.6-60.5 tok/s
/// with 4 × 6 against 40.8-42.9 with 2 × 8 (3 × 8: 58.4-58.8), smollm-135m Q8_0 pp64
/// 452.7 / 784.2 against 335.9 / 598.0 at 1 / 2 threads. (2 × 8 had measured best on
/// an earlier Intel VM, 1.6-1.8× tileQ8 4 × 4 on a 1536 × 576 × 64 matmul.) Without
/// AVX-512 VNNI (16 vector registers) it stays 2 × 8, and on AVX2 serves batches of
/// 2-4 tokens only (`prompt_tiles`).
const cell_pairs = if (simd.has_avx512vnni) 4 else 2;
const cell_tokens = if (simd.has_avx512vnni) 6 else 8;

/// Prompt rows [r, r + 2·cell_pairs) for every token: cell tiles, token tails by
/// narrower ones.
fn cellRows(comptime P: usize, comptime TT: usize, job: *const Q8Job, r: usize) void {
    tokenTiles(tileQ8Cells, P, TT, job, r);
}

/// Every token of the rows at r in `tile(A, TT, ...)` tiles, the token tail in a
/// narrower one.
fn tokenTiles(comptime tile: anytype, comptime A: usize, comptime TT: usize, job: *const Q8Job, r: usize) void {
    var t: usize = 0;
    while (t + TT <= job.tokens) : (t += TT) tile(A, TT, job, r, t);
    switch (job.tokens - t) {
        0 => {},
        inline 1...TT - 1 => |n| tile(A, n, job, r, t),
        else => unreachable,
    }
}

/// The AVX2 tile in assembly (`q8_0_tile_avx2.zig`): R rows × T tokens, the
/// accumulators summed here as `tileQ8` sums them. A decode batch (2-4 tokens in all)
/// prefetches the rows ahead, as `tileQ8Cells` does.
inline fn tileQ8Avx2(comptime R: usize, comptime T: usize, job: *const Q8Job, r0: usize, t0: usize) void {
    const nb = job.blocks_per_row;
    const row_bytes = nb * @sizeOf(BlockQ8_0);
    const act = job.act;
    const ahead_rows = 2 * @max(1, prefetch_distance_bytes / (2 * row_bytes));
    var products: [q8_0_tile_avx2.max_rows][8]f32 align(32) = undefined;
    var acc: [q8_0_tile_avx2.max_rows * q8_0_tile_avx2.max_tokens][8]f32 align(32) = undefined;
    const args: q8_0_tile_avx2.Args = .{
        .w = job.w + r0 * row_bytes,
        .row_bytes = row_bytes,
        .x_qs = act.qs + t0 * act.blocks_padded * qk,
        .x_stride_bytes = act.blocks_padded * qk,
        .x_scales = act.scales_by_block + t0,
        .scale_stride_bytes = job.tokens * @sizeOf(f32),
        .block_count = nb,
        .products = &products,
        .acc = &acc,
        .prefetch_bytes = ahead_rows * row_bytes,
    };
    if (job.tokens <= cell_prefetch_max_tokens) {
        q8_0_tile_avx2.run(R, T, 32, true, &args);
    } else {
        q8_0_tile_avx2.run(R, T, 32, false, &args);
    }
    inline for (0..R) |r| {
        inline for (0..T) |t| job.out[(t0 + t) * job.rows + r0 + r] = simd.hsum(8, f32, @as(F32x8, acc[t * R + r]));
    }
}

/// Prompt rows [r, r + R) for every token in AVX2 assembly tiles of 4 tokens, the
/// token tail in a narrower one.
fn avx2Rows(comptime R: usize, job: *const Q8Job, r: usize) void {
    tokenTiles(tileQ8Avx2, R, q8_0_tile_avx2.max_tokens, job, r);
}

/// The tiles a prompt (2+ tokens) takes.
const PromptTiles = enum {
    /// `tileQ8` only (the tests compare the others with it).
    plain,
    /// `tileQ8Cells`.
    cells,
    /// `tileQ8Avx2`, prefetching the rows up to `cell_prefetch_max_tokens` tokens (a
    /// decode batch waits on the weight stream).
    avx2,
};

/// AVX2 without AVX-512 (16 ymm registers): the assembly tile. On the AVX2 Zen 3 host
/// (smollm-135m / 1B Q8_0 shapes, 64 tokens, 1 thread, medians of 3 alternating
/// runs) 1.2-1.25× the cell tile: 2048 × 2048 68.5 against 54.5 GOP/s, 576 × 576 62.4
/// against 53.4. For a 2-4 sequence decode step too, prefetching: SmolLM2's 49152 ×
/// 576 LM head at 1 thread, 3 alternating rounds, 4 tokens 3.5-4.1 ms against 5.2-6.4
/// with the cell tile, 3 tokens 3.2-3.8 against 4.0-5.1 (2 tokens alike).
const prompt_tiles: PromptTiles = if (simd.has_avx2 and !simd.has_avx512vnni) .avx2 else .cells;

fn matmulQ8Range(job: *const Q8Job, row_begin: usize, row_end: usize) void {
    matmulQ8RangeTiles(prompt_tiles, cell_pairs, cell_tokens, job, row_begin, row_end);
}

/// Prompts (2+ tokens) take the `tiles` (P, TT: the cell tile's shape) and one token
/// the GEMV tile, except with `.plain`: tileQ8 for every token count.
fn matmulQ8RangeTiles(comptime tiles: PromptTiles, comptime P: usize, comptime TT: usize, job: *const Q8Job, row_begin: usize, row_end: usize) void {
    var r = row_begin;
    if (tiles == .avx2 and job.tokens >= 2) {
        while (r + 2 <= row_end) : (r += 2) avx2Rows(2, job, r);
        while (r < row_end) : (r += 1) avx2Rows(1, job, r);
        return;
    }
    const cells = tiles != .plain;
    if (cells and job.tokens >= 2) {
        while (r + 2 * P <= row_end) : (r += 2 * P) cellRows(P, TT, job, r);
        while (r + 2 <= row_end) : (r += 2) cellRows(1, TT, job, r);
    }
    if (cells and job.tokens == 1) {
        while (r + gemv_rows <= row_end) : (r += gemv_rows) tileQ8Gemv(gemv_rows, job, r, 0);
        while (r < row_end) : (r += 1) tileQ8Gemv(1, job, r, 0);
        return;
    }
    while (r + row_group <= row_end) : (r += row_group) {
        var t: usize = 0;
        while (t + token_group <= job.tokens) : (t += token_group) tileQ8(row_group, token_group, job, r, t);
        while (t < job.tokens) : (t += 1) tileQ8(row_group, 1, job, r, t);
    }
    while (r < row_end) : (r += 1) {
        var t: usize = 0;
        while (t + token_group <= job.tokens) : (t += token_group) tileQ8(1, token_group, job, r, t);
        while (t < job.tokens) : (t += 1) tileQ8(1, 1, job, r, t);
    }
}

const QuantizeJob = struct {
    x: [*]const f32,
    act: Activations,
    cols: usize,
    tokens: usize,
};

fn quantizeRange(job: *const QuantizeJob, token_begin: usize, token_end: usize) void {
    const padded = job.act.blocks_padded;
    for (token_begin..token_end) |t| {
        quantizeActivations(
            job.x[t * job.cols ..][0..job.cols],
            job.act.qs[t * padded * qk ..][0 .. padded * qk],
            job.act.neg_corr[t * padded * 8 ..][0 .. padded * 8],
            job.act.scales[t * padded ..][0..padded],
        );
        // Only the AVX2 assembly tile reads the block-major copy (2+ tokens; the
        // tests run it wherever AVX2 exists).
        if (comptime simd.has_avx2) {
            if (job.tokens >= 2) {
                for (0..padded) |b| job.act.scales_by_block[b * job.tokens + t] = job.act.scales[t * padded + b];
            }
        }
    }
}

/// Q8_0 matmul; `cols % 32 == 0` and the pool's scratch holds `q8ScratchSize(cols, tokens)`.
pub fn matmulQ8_0(pool: *Pool, out: [*]f32, w: [*]align(1) const BlockQ8_0, x: [*]const f32, rows: usize, cols: usize, tokens: usize) pool_zig.Status {
    const status = quantizeQ8_0Activations(pool, x, cols, tokens);
    if (status != .ok) return status;
    return matmulQ8_0Quantized(pool, out, w, rows, cols, tokens);
}

/// The Q8_0 activation format: per token, even-padded blocks of quants, `vpdpbusd`
/// corrections and scales (see `Activations`).
pub const PairedQ8Activations = struct {
    pub const name = "q8_0-paired";
    pub fn scratchBytes(cols: usize, tokens: usize) usize {
        return q8ScratchSize(cols, tokens);
    }
};

/// The type table's Q8_0 kernel: quantizes x unless `act_ready` (the scratch holds
/// it already, from a matmul of the same input), then multiplies.
pub fn matmulQ8_0Kernel(pool: *Pool, out: [*]f32, w: [*]align(1) const BlockQ8_0, x: [*]const f32, rows: usize, cols: usize, tokens: usize, act_ready: bool) pool_zig.Status {
    if (!act_ready) {
        const status = quantizeQ8_0Activations(pool, x, cols, tokens);
        if (status != .ok) return status;
    }
    return matmulQ8_0Quantized(pool, out, w, rows, cols, tokens);
}

/// The first half of `matmulQ8_0`: quantizes x [tokens][cols] into the pool's scratch.
pub fn quantizeQ8_0Activations(pool: *Pool, x: [*]const f32, cols: usize, tokens: usize) pool_zig.Status {
    std.debug.assert(cols % qk == 0);
    const act = Activations.init(pool.scratch, cols / qk, tokens);
    @memset(act.scales_by_block[act.blocks_padded * tokens ..][0..scale_padding], 0);
    const quantize_job: QuantizeJob = .{ .x = x, .act = act, .cols = cols, .tokens = tokens };
    return pool.run(QuantizeJob, &quantize_job, quantizeRange, tokens, 1, tokens * cols, parallel_threshold_macs);
}

/// The second half of `matmulQ8_0`: multiplies by the activations already in the
/// scratch (quantized by `quantizeQ8_0Activations` with the same cols and tokens),
/// so several matmuls of one input quantize it once.
pub fn matmulQ8_0Quantized(pool: *Pool, out: [*]f32, w: [*]align(1) const BlockQ8_0, rows: usize, cols: usize, tokens: usize) pool_zig.Status {
    std.debug.assert(cols % qk == 0);
    const nb = cols / qk;
    const act = Activations.init(pool.scratch, nb, tokens);
    const job: Q8Job = .{ .out = out, .w = @ptrCast(w), .act = act, .rows = rows, .blocks_per_row = nb, .tokens = tokens };
    return pool.run(Q8Job, &job, matmulQ8Range, rows, row_group, rows * cols * tokens, parallel_threshold_macs);
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

/// Scalar Q8_0 matmul in llama.cpp's x86 order: activations quantized per block like
/// the kernel; 8 lanes, lane g the integer sum of products 4g..4g+3 of a block, each
/// lane accumulated over the blocks in order by fma(dw·dx, lane, acc); then the lanes
/// summed as `hsum_float_8` (g + g+4, then +2, then +1).
pub fn referenceQ8_0(out: []f32, w: []align(1) const BlockQ8_0, x: []const f32, rows: usize, cols: usize, tokens: usize) void {
    const nb = cols / qk;
    for (0..tokens) |t| for (0..rows) |r| {
        var acc: [8]f32 = @splat(0);
        for (0..nb) |b| {
            var qx: [qk]i8 = undefined;
            const dx: f32 = @as(f16, @floatCast(quant_act.quantizeBlockX86(x[t * cols + b * qk ..][0..qk], &qx).d));
            const block = w[r * nb + b];
            const d = @as(f32, block.d) * dx;
            for (0..8) |g| {
                var isum: i32 = 0;
                for (0..4) |i| isum += @as(i32, block.qs[4 * g + i]) * qx[4 * g + i];
                acc[g] = @mulAdd(f32, d, @floatFromInt(isum), acc[g]);
            }
        }
        for (0..4) |g| acc[g] += acc[g + 4];
        for (0..2) |g| acc[g] += acc[g + 2];
        out[t * rows + r] = acc[0] + acc[1];
    };
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
    // Whatever tile an output falls in: each token alone (the GEMV path) gives the bits
    // the batch gave it.
    const pool = try Pool.create(allocator, 1);
    defer pool.destroy(allocator);
    for (0..tokens) |t| {
        const alone = actual[0..rows];
        try testing.expectEqual(pool_zig.Status.ok, matmulFloat(W, pool, alone.ptr, w.ptr, x.ptr + t * cols, rows, cols, 1));
        try testing.expectEqualSlices(f32, single[t * rows ..][0..rows], alone);
    }
}

const awkward_cols = [_]usize{ 1, 31, 33, 4096 + 7 };

test "float matmuls match the scalar reference on awkward shapes, bit-identical for 1..4 threads and to each token alone" {
    inline for (.{ f32, f16, u16 }) |W| {
        for (awkward_cols) |cols| {
            try testFloatShape(W, 7, cols, 1);
            try testFloatShape(W, 9, cols, 6);
        }
        try testFloatShape(W, 67, 256, 5);
        // Every tile shape: 8/6/4-row, 4-row and 1-row groups × full and smaller token tiles.
        try testFloatShape(W, 8 + 6 + 4 + 1, 33, 7);
        try testFloatShape(W, 2 * 8 + 4 + 3, 576, 64);
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
        // The kernel runs the reference's float operations in its order: equal bits.
        try testing.expectEqualSlices(f32, expected, actual);
        if (threads == 1) @memcpy(single, actual) else try testing.expectEqualSlices(f32, single, actual);
    }
}

test "Q8_0 matmul equals the scalar reference (llama.cpp's x86 order) bit for bit on awkward shapes, 1..4 threads" {
    for ([_]usize{ 32, 32 * 31, 32 * 33, 4096 + 32 * 7 }) |cols| {
        try testQ8Shape(7, cols, 1);
        try testQ8Shape(9, cols, 6);
    }
    try testQ8Shape(67, 256, 5);
}

test "vpdpbusd and AVX2 lanes of a block pair equal the generic lanes, including -128 weights" {
    var prng = std.Random.DefaultPrng.init(7);
    const random = prng.random();
    for (0..100) |_| {
        var w: [2 * qk]i8 = undefined;
        var x: [2 * qk]f32 = undefined;
        for (&w) |*v| v.* = random.int(i8);
        w[0] = -128;
        fillRandom(random, &x, 5);
        var qs: [2 * qk]i8 align(64) = undefined;
        var corr: [16]i32 align(64) = undefined;
        var scales: [2]f32 = undefined;
        quantizeActivations(&x, &qs, &corr, &scales);
        const expected = @shuffle(i32, dotLanesGeneric(w[0..qk].*, qs[0..qk].*), dotLanesGeneric(w[qk..].*, qs[qk..].*), [16]i32{ 0, 1, 2, 3, 4, 5, 6, 7, -1, -2, -3, -4, -5, -6, -7, -8 });
        try testing.expectEqual(expected, dotLanesPair(@bitCast(w), &qs, &corr));
        if (comptime simd.has_avx2) {
            try testing.expectEqual(dotLanesGeneric(w[0..qk].*, qs[0..qk].*), dotLanesAvx2(w[0..qk].*, qs[0..qk].*));
        }
    }
}

test "loadWeightPair unpacks two Q8_0 blocks" {
    var blocks: [2]BlockQ8_0 = undefined;
    for (&blocks, 0..) |*b, k| {
        b.d = @floatFromInt(k + 1);
        for (&b.qs, 0..) |*q, i| q.* = @intCast(@as(i32, @intCast(i)) - 16 + @as(i32, @intCast(k)) * 50);
    }
    const pair = loadWeightPair(@ptrCast(&blocks));
    try testing.expectEqual(@as(f16, 1), pair.d[0]);
    try testing.expectEqual(@as(f16, 2), pair.d[1]);
    const qs: [64]i8 = @bitCast(pair.qs);
    try testing.expectEqualSlices(i8, &blocks[0].qs, qs[0..32]);
    try testing.expectEqualSlices(i8, &blocks[1].qs, qs[32..64]);
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
    // Distinct poison in each buffer: an element a kernel skips cannot compare equal.
    var gemm: [tokens * rows]f32 = @splat(1e30);
    var gemv: [tokens * rows]f32 = @splat(-1e30);
    const pool = try Pool.create(allocator, 1);
    defer pool.destroy(allocator);
    try pool.reserve(allocator, q8ScratchSize(cols, tokens));
    try testing.expectEqual(pool_zig.Status.ok, matmulQ8_0(pool, &gemm, w.ptr, x.ptr, rows, cols, tokens));
    for (0..tokens) |t| try testing.expectEqual(pool_zig.Status.ok, matmulQ8_0(pool, gemv[t * rows ..].ptr, w.ptr, x[t * cols ..].ptr, rows, cols, 1));
    try testing.expectEqualSlices(f32, &gemm, &gemv);
    gemm = @splat(1e30);
    gemv = @splat(-1e30);
    try testing.expectEqual(pool_zig.Status.ok, matmulFloat(f32, pool, &gemm, wf.ptr, x.ptr, rows, cols, tokens));
    for (0..tokens) |t| try testing.expectEqual(pool_zig.Status.ok, matmulFloat(f32, pool, gemv[t * rows ..].ptr, wf.ptr, x[t * cols ..].ptr, rows, cols, 1));
    try testing.expectEqualSlices(f32, &gemm, &gemv);
    // Both GEMV walks (4-row tiles, or one row at a time where `simd.prefetchSpans()` is
    // false), whichever this CPU takes: the same bits as the GEMM.
    inline for (.{ 4, 1 }) |R| {
        for (0..tokens) |t| {
            var out: [rows]f32 = @splat(std.math.nan(f32));
            const job: FloatJob(f32) = .{ .out = &out, .w = wf.ptr, .x = x[t * cols ..].ptr, .rows = rows, .cols = cols, .tokens = 1 };
            gemvFloatRange(f32, .rows, R, &job, 0, rows);
            try testing.expectEqualSlices(f32, gemm[t * rows ..][0..rows], &out);
        }
    }
}

test "the prompt cell tile, the AVX2 assembly tile and the GEMV tile equal tileQ8 bit for bit: row pairs, token tails, odd block counts, -128 weights" {
    const allocator = testing.allocator;
    var prng = std.Random.DefaultPrng.init(5);
    const random = prng.random();
    for ([_]usize{ 32, 32 * 3, 32 * 18 }) |cols| {
        for ([_]usize{ 1, 2, 3, 5, 6, 7, 8, 9, 17 }) |tokens| {
            const rows = 13;
            const wf = try allocator.alloc(f32, rows * cols);
            defer allocator.free(wf);
            fillRandom(random, wf, 1);
            const w = try allocator.alloc(BlockQ8_0, rows * cols / qk);
            defer allocator.free(w);
            quant.quantizeRowQ8_0(wf, w);
            // Extremes: a -128 quant (not produced by the quantizer, legal in a file) and a zero block.
            w[1].qs[0] = -128;
            w[w.len - 1].qs[31] = -128;
            @memset(&w[2].qs, 0);
            const x = try allocator.alloc(f32, tokens * cols);
            defer allocator.free(x);
            fillRandom(random, x, 4);
            @memset(x[0..32], 0);
            const pool = try Pool.create(allocator, 1);
            defer pool.destroy(allocator);
            try pool.reserve(allocator, q8ScratchSize(cols, tokens));
            try testing.expectEqual(pool_zig.Status.ok, quantizeQ8_0Activations(pool, x.ptr, cols, tokens));
            const vec = try allocator.alloc(f32, tokens * rows);
            defer allocator.free(vec);
            const cells = try allocator.alloc(f32, tokens * rows);
            defer allocator.free(cells);
            @memset(vec, 1e30);
            @memset(cells, -1e30);
            var job: Q8Job = .{ .out = vec.ptr, .w = @ptrCast(w.ptr), .act = Activations.init(pool.scratch, cols / qk, tokens), .rows = rows, .blocks_per_row = cols / qk, .tokens = tokens };
            matmulQ8RangeTiles(.plain, cell_pairs, cell_tokens, &job, 0, rows);
            job.out = cells.ptr;
            matmulQ8RangeTiles(.cells, cell_pairs, cell_tokens, &job, 0, rows);
            try testing.expectEqualSlices(f32, vec, cells);
            // Other tile shapes give the same bits too.
            @memset(cells, -1e30);
            matmulQ8RangeTiles(.cells, 3, 5, &job, 0, rows);
            try testing.expectEqualSlices(f32, vec, cells);
            if (comptime simd.has_avx2) {
                // The assembly tile (2 × 4, 1 × 4 for the odd row, token tails 1-3).
                @memset(cells, -1e30);
                matmulQ8RangeTiles(.avx2, cell_pairs, cell_tokens, &job, 0, rows);
                try testing.expectEqualSlices(f32, vec, cells);
            }
            // And both equal the scalar reference.
            const expected = try allocator.alloc(f32, tokens * rows);
            defer allocator.free(expected);
            referenceQ8_0(expected, w, x, rows, cols, tokens);
            try testing.expectEqualSlices(f32, expected, cells);
        }
    }
}
