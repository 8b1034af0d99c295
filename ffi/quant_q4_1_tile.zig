//! Q4_1 × Q8_1 GEMM tile for AVX-512 VNNI: 4 weight rows × T tokens (T = 1..4), the
//! kernel of a 2-4 sequence decode step (and of prompt tiles), bit-identical per
//! (row, token) to llama.cpp's `ggml_vec_dot_q4_1_q8_1` (x86, AVX2 branch, which
//! AVX-512 builds take) and so to `Q4_1.vecDot` of quant_legacy.zig.
//!
//! That order, per row and token: for each block, 8 exact int32 lanes (lane g =
//! Σ_{j<4} q[4g+j]·a[4g+j], the `vpdpbusd` layout), converted to f32, acc =
//! fma(dw·da, lanes, acc) into one 8-lane accumulator; summs += m·s in a scalar chain;
//! result hsum_float_8(acc) + summs.
//!
//! What the tile shares: the weights of each block are unpacked once for all T tokens,
//! each 512-bit vector holds two rows' 8 lanes ([row 2p lanes 0-7, row 2p+1 lanes 0-7])
//! against the token's 32 activations broadcast twice (a plain load, no shuffle), the
//! dw·da scales of the tile come from one vector conversion of the rows' and tokens'
//! f16 pairs, and the 4·T min-term chains run as one vector fused multiply-add per
//! block (m·s is a product of two f16 values, exact in f32, so fused or not it rounds
//! once, as llama.cpp's `summs += m*s`). No lane ever mixes two (row, token) pairs
//! before the final per-output tree, so every output keeps its own float sequence.
//!
//! `tileLanes8` computes the same bits with one 256-bit vector per (row, token): ggml's
//! own 8-lane layout, one 256-bit `vpdpbusd` against the token's 32 activations as they
//! are stored, the tile's 4·T scales dw·da from one vector product, each broadcast from
//! memory into its fma (no shuffle). Zen 4 executes a 512-bit op as two 256-bit halves,
//! so there the pairing buys nothing and its shuffles cost. On Zen 4 the fastest of 60
//! trials was ~10% lower with `tileLanes8` at 1 and at 4 tokens (SmolLM2's 1536 × 576
//! ffn_gate, 1 thread: 31.7 vs 35.7 µs and 77 vs 85 µs); the medians of a later run were
//! within this VM's noise of each other (bench/RESULTS.md). `tileBest` takes it there
//! and `tile` elsewhere (where `tile` was measured, on Intel's AVX-512 cores).
//!
//! `tileGroups` reads the load-time layout of repack.zig's `Q4_1xN` entry (`Group`: 4
//! rows' block column with their (d, m) pairs together and each row pair's codes
//! pre-interleaved lane by lane), the default where this file's kernels run: same bits
//! again, and about 20% less time than the tiles above at 1 and 4 tokens (a 4-sequence
//! SmolLM2 decode step at 2 threads, with its prefetch: 8.8-9.4 ms against 10.3-10.4
//! for the rows as stored).
//!
//! Limits: 4 rows (the driver's `row_group`), T ≤ 4 (`token_group`; the accumulators,
//! 2·T vectors, or 4·T 256-bit ones, stay in registers; `tileGroups` T ≤ 8); every row
//! and token has the same block count.
const std = @import("std");
const builtin = @import("builtin");
const simd = @import("simd.zig");
const act = @import("quant_act.zig");

const x86 = std.Target.x86;

/// The kernel needs 512-bit `vpdpbusd` (avx512vnni) and 512-bit byte ops (avx512bw).
pub const available = builtin.cpu.arch == .x86_64 and
    x86.featureSetHas(builtin.cpu.features, .avx512vnni) and
    x86.featureSetHas(builtin.cpu.features, .avx512bw);

/// Elements per block.
const qk = 32;
/// Rows per tile.
pub const rows = 4;

const ActBlock = act.Q8_1.Block;

const U8x64 = @Vector(64, u8);
const I8x64 = @Vector(64, i8);
const I32x16 = @Vector(16, i32);
const F32x16 = @Vector(16, f32);
const F32x8 = @Vector(8, f32);
const U8x32 = @Vector(32, u8);
const I8x32 = @Vector(32, i8);

/// Zen 4 (512-bit ops split in two): `tileBest` takes `tileLanes8` (see the module doc).
const prefer_lanes8 = simd.splits_512bit;

/// How far ahead the weights are prefetched: the tile fetches the row group that many
/// bytes on (rounded to whole groups) at the block it is reading, as matmul.zig's
/// Q8_0 GEMV does (4 short row streams at once defeat the hardware prefetcher).
const prefetch_distance_bytes: usize = 16384;

/// acc + `vpdpbusd`(u, s) on 8 or 16 int32 lanes (256- or 512-bit).
inline fn dpbusd(comptime n: usize, acc: @Vector(n, i32), u: @Vector(4 * n, u8), s: @Vector(4 * n, i8)) @Vector(n, i32) {
    return asm ("vpdpbusd %[s], %[u], %[acc]"
        : [acc] "=v" (-> @Vector(n, i32)),
        : [_] "0" (acc),
          [u] "v" (u),
          [s] "v" (s),
    );
}

/// [lo(a) 16, hi(a) 16, lo(b) 16, hi(b) 16]: each row's 32 codes in element order.
const pair_order = blk: {
    var m: [64]i32 = undefined;
    for (0..16) |i| {
        m[i] = i; // row a, elements 0..15: low nibbles of a (lo[0..16])
        m[16 + i] = ~@as(i32, i); // row a, elements 16..31: high nibbles of a (hi[0..16])
        m[32 + i] = 16 + i; // row b low nibbles (lo[16..32])
        m[48 + i] = ~@as(i32, 16 + i); // row b high nibbles
    }
    break :blk m;
};

/// The codes of block b of rows a and b, laid out as `order` (`pair_order` or
/// `interleave_order`: indices i < 32 pick low nibbles of join(qa, qb), ~i high ones).
inline fn unpackPair(comptime B: type, comptime order: [64]i32, wa: *align(1) const B, wb: *align(1) const B) U8x64 {
    const qa: @Vector(16, u8) = wa.qs;
    const qb: @Vector(16, u8) = wb.qs;
    const v = std.simd.join(qa, qb);
    const lo = v & @as(@Vector(32, u8), @splat(0x0F));
    const hi = v >> @as(@Vector(32, u3), @splat(4));
    return @shuffle(u8, lo, hi, order);
}

const twice32 = blk: {
    var m: [64]i32 = undefined;
    for (0..64) |i| m[i] = i % 32;
    break :blk m;
};

/// Lanes (pair vector) of each (row pair half, lane): [row 2p ×8, row 2p+1 ×8].
fn pairScaleMask(comptime p: usize) [16]i32 {
    var m: [16]i32 = undefined;
    // The rows' (d, m) pairs convert to [d0 m0 d1 m1 d2 m2 d3 m3]: d of row r is lane 2r.
    for (0..16) |i| m[i] = 2 * (2 * p + i / 8);
    return m;
}

fn minMask(comptime T: usize) [4 * T]i32 {
    var m: [4 * T]i32 = undefined;
    for (0..4 * T) |i| m[i] = 2 * (i % 4) + 1; // m of row i % 4
    return m;
}

fn sumMask(comptime T: usize) [4 * T]i32 {
    var m: [4 * T]i32 = undefined;
    for (0..4 * T) |i| m[i] = 2 * (i / 4) + 1; // s of token i / 4
    return m;
}

/// The (d, m) or (d, s) f16 pairs of `n` blocks (rows or tokens), in f32.
inline fn scalePairs(comptime n: usize, comptime B: type, blocks: [n]*align(1) const B) @Vector(2 * n, f32) {
    var bits: @Vector(n, u32) = undefined;
    inline for (0..n) |i| bits[i] = std.mem.readInt(u32, @as(*align(1) const [4]u8, @ptrCast(blocks[i])), .little);
    const halves: @Vector(2 * n, f16) = @bitCast(bits);
    return @floatCast(halves);
}

/// Block b of a tile: the rows' and tokens' block pointers (each row's block
/// `ahead_bytes` on prefetched), and their (d, m) and (d, s) pairs in f32:
/// [d0 m0 d1 m1 d2 m2 d3 m3] and [d0 s0 d1 s1 ...].
inline fn blockHead(comptime B: type, comptime T: usize, w_rows: [rows][]align(1) const B, a_rows: [T][]align(1) const ActBlock, b: usize, ahead_bytes: usize) struct { [rows]*align(1) const B, [T]*align(1) const ActBlock, @Vector(2 * rows, f32), @Vector(2 * T, f32) } {
    var wb: [rows]*align(1) const B = undefined;
    inline for (0..rows) |r| {
        wb[r] = &w_rows[r][b];
        @prefetch(@as([*]const u8, @ptrCast(wb[r])) + ahead_bytes, .{ .locality = 2 });
    }
    var ab: [T]*align(1) const ActBlock = undefined;
    inline for (0..T) |t| ab[t] = &a_rows[t][b];
    return .{ wb, ab, scalePairs(rows, B, wb), scalePairs(T, ActBlock, ab) };
}

/// out[t][r] = `ggml_vec_dot_q4_1_q8_1`(w_rows[r], a_rows[t]), bit for bit. `B` is
/// ggml's block_q4_1 (`d`, `m` f16 first, then 16 bytes of nibbles: low = elements
/// 0..15, high = 16..31).
pub fn tile(comptime B: type, comptime T: usize, w_rows: [rows][]align(1) const B, a_rows: [T][]align(1) const ActBlock) [T][rows]f32 {
    comptime std.debug.assert(T >= 1 and T <= 4);
    comptime std.debug.assert(@offsetOf(B, "d") == 0 and @offsetOf(B, "m") == 2 and @sizeOf(B) == @offsetOf(B, "qs") + qk / 2);
    const n = a_rows[0].len;
    inline for (0..rows) |r| std.debug.assert(w_rows[r].len == n);
    inline for (0..T) |t| std.debug.assert(a_rows[t].len == n);
    var acc: [T][2]F32x16 = @splat(@splat(@splat(0)));
    var summs: @Vector(4 * T, f32) = @splat(0);
    // Rows ahead of each row, at the same block (a prefetch never faults, so past the
    // matrix's end is harmless; the rows of a matrix are consecutive, n blocks each).
    const ahead_bytes = rows * @max(1, prefetch_distance_bytes / (rows * n * @sizeOf(B))) * n * @sizeOf(B);
    for (0..n) |b| {
        const wb, const ab, const wdm, const ads = blockHead(B, T, w_rows, a_rows, b, ahead_bytes);
        const u = [2]U8x64{ unpackPair(B, pair_order, wb[0], wb[1]), unpackPair(B, pair_order, wb[2], wb[3]) };
        const dw = [2]F32x16{
            @shuffle(f32, wdm, undefined, pairScaleMask(0)),
            @shuffle(f32, wdm, undefined, pairScaleMask(1)),
        };
        inline for (0..T) |t| {
            const aq: @Vector(32, i8) = ab[t].qs;
            const av: I8x64 = @shuffle(i8, aq, undefined, twice32);
            const da: F32x16 = @splat(ads[2 * t]);
            inline for (0..2) |p| {
                const lanes: F32x16 = @floatFromInt(dpbusd(16, @splat(0), u[p], av));
                acc[t][p] = @mulAdd(F32x16, dw[p] * da, lanes, acc[t][p]);
            }
        }
        const m: @Vector(4 * T, f32) = @shuffle(f32, wdm, undefined, minMask(T));
        const s: @Vector(4 * T, f32) = @shuffle(f32, ads, undefined, sumMask(T));
        summs = @mulAdd(@Vector(4 * T, f32), m, s, summs);
    }
    var out: [T][rows]f32 = undefined;
    inline for (0..T) |t| {
        inline for (0..2) |p| {
            const lo: F32x8 = @shuffle(f32, acc[t][p], undefined, std.simd.iota(i32, 8));
            const hi: F32x8 = @shuffle(f32, acc[t][p], undefined, std.simd.iota(i32, 8) + @as(@Vector(8, i32), @splat(8)));
            out[t][2 * p] = simd.hsum(8, f32, lo) + summs[4 * t + 2 * p];
            out[t][2 * p + 1] = simd.hsum(8, f32, hi) + summs[4 * t + 2 * p + 1];
        }
    }
    return out;
}

/// `tileLanes8` where the target prefers it (Zen 4), else `tile`: the same bits.
pub inline fn tileBest(comptime B: type, comptime T: usize, w_rows: [rows][]align(1) const B, a_rows: [T][]align(1) const ActBlock) [T][rows]f32 {
    return if (prefer_lanes8) tileLanes8(B, T, w_rows, a_rows) else tile(B, T, w_rows, a_rows);
}

/// The 32 codes of one row's block in element order (low nibbles, then high).
inline fn unpackRow(comptime B: type, w: *align(1) const B) U8x32 {
    const q: @Vector(16, u8) = w.qs;
    return std.simd.join(q & @as(@Vector(16, u8), @splat(0x0F)), q >> @as(@Vector(16, u3), @splat(4)));
}

/// Lane 4·t + r of a block's scale products: d of row r (`side` 0, in the rows' (d, m)
/// pairs) or d of token t (`side` 1, in the tokens' (d, s) pairs).
fn productMask(comptime T: usize, comptime side: usize) [rows * T]i32 {
    var m: [rows * T]i32 = undefined;
    for (0..rows * T) |i| m[i] = if (side == 0) 2 * (i % rows) else 2 * (i / rows);
    return m;
}

/// `tile` with one 8-lane accumulator per (row, token) (see the module doc): the same
/// integer lanes, the same f32 products dw·da and fma order, so the same bits.
pub fn tileLanes8(comptime B: type, comptime T: usize, w_rows: [rows][]align(1) const B, a_rows: [T][]align(1) const ActBlock) [T][rows]f32 {
    comptime std.debug.assert(T >= 1 and T <= 4);
    comptime std.debug.assert(@offsetOf(B, "d") == 0 and @offsetOf(B, "m") == 2 and @sizeOf(B) == @offsetOf(B, "qs") + qk / 2);
    const n = a_rows[0].len;
    inline for (0..rows) |r| std.debug.assert(w_rows[r].len == n);
    inline for (0..T) |t| std.debug.assert(a_rows[t].len == n);
    var acc: [T][rows]F32x8 = @splat(@splat(@splat(0)));
    var summs: @Vector(rows * T, f32) = @splat(0);
    // The block's scales go through memory (volatile: the compiler would otherwise
    // keep them in a register and spread each with two shuffles, measured slower), so
    // each fma reads its own as a broadcast operand.
    var scales: [rows * T]f32 align(64) = undefined;
    const ahead_bytes = rows * @max(1, prefetch_distance_bytes / (rows * n * @sizeOf(B))) * n * @sizeOf(B);
    for (0..n) |b| {
        const wb, const ab, const wdm, const ads = blockHead(B, T, w_rows, a_rows, b, ahead_bytes);
        const products = @shuffle(f32, wdm, undefined, productMask(T, 0)) * @shuffle(f32, ads, undefined, productMask(T, 1));
        @as(*align(64) volatile @Vector(rows * T, f32), @ptrCast(&scales)).* = products;
        var u: [rows]U8x32 = undefined;
        inline for (0..rows) |r| u[r] = unpackRow(B, wb[r]);
        inline for (0..T) |t| {
            const av: I8x32 = ab[t].qs;
            inline for (0..rows) |r| {
                const lanes: F32x8 = @floatFromInt(dpbusd(8, @splat(0), u[r], av));
                const scale: f32 = @as(*const volatile f32, &scales[rows * t + r]).*;
                acc[t][r] = @mulAdd(F32x8, @splat(scale), lanes, acc[t][r]);
            }
        }
        const m: @Vector(rows * T, f32) = @shuffle(f32, wdm, undefined, minMask(T));
        const s: @Vector(rows * T, f32) = @shuffle(f32, ads, undefined, sumMask(T));
        summs = @mulAdd(@Vector(rows * T, f32), m, s, summs);
    }
    var out: [T][rows]f32 = undefined;
    inline for (0..T) |t| {
        inline for (0..rows) |r| out[t][r] = simd.hsum(8, f32, acc[t][r]) + summs[rows * t + r];
    }
    return out;
}

/// [a(0..3) b(0..3) a(4..7) b(4..7) ...]: lane g of row a in dword 2g, of row b in 2g+1.
const interleave_order = blk: {
    var m: [64]i32 = undefined;
    for (0..8) |g| {
        for (0..2) |side| {
            for (0..4) |j| {
                const e = 4 * g + j; // element of the row's block
                const src: i32 = @intCast(16 * side + e % 16); // byte of join(qa, qb)
                m[8 * g + 4 * side + j] = if (e < 16) src else ~src;
            }
        }
    }
    break :blk m;
};

/// Each dword of a token's 32 activations twice: [a0..3 a0..3 a4..7 a4..7 ...].
const dword_twice = blk: {
    var m: [16]i32 = undefined;
    for (0..16) |i| m[i] = i / 2;
    break :blk m;
};

/// Lanes 0, 2, ..., 14 (`odd` false) or 1, 3, ..., 15.
fn alternateMask(comptime odd: bool) [8]i32 {
    var m: [8]i32 = undefined;
    for (0..8) |i| m[i] = 2 * i + @intFromBool(odd);
    return m;
}

/// out[t][r]: hsum_float_8 of row r's 8 lanes (even lanes of its pair's vector for
/// row 2p, odd for 2p + 1) plus its min-term chain.
inline fn interleavedSums(comptime T: usize, acc: [T][2]F32x16, summs: @Vector(rows * T, f32)) [T][rows]f32 {
    var out: [T][rows]f32 = undefined;
    inline for (0..T) |t| {
        inline for (0..2) |p| {
            const even: F32x8 = @shuffle(f32, acc[t][p], undefined, alternateMask(false));
            const odd: F32x8 = @shuffle(f32, acc[t][p], undefined, alternateMask(true));
            out[t][2 * p] = simd.hsum(8, f32, even) + summs[rows * t + 2 * p];
            out[t][2 * p + 1] = simd.hsum(8, f32, odd) + summs[rows * t + 2 * p + 1];
        }
    }
    return out;
}

/// Block column b of 4 Q4_1 rows in the load-time layout (repack.zig's `Q4_1xN`): the
/// rows' (d, m) pairs, then per row pair the 64 codes of `interleave_order` packed
/// two to a byte (byte k: code k in the low nibble, code k + 32 in the high one), so
/// one 256-bit broadcast, a shift of the upper half and a mask give a pair's
/// `vpdpbusd` operand. The same bytes as the 4 blocks (quant_legacy.zig asserts it).
pub const Group = extern struct {
    /// d0 m0 d1 m1 d2 m2 d3 m3.
    dm: [2 * rows]f16,
    qs: [2][32]u8,
};

/// Block b of `w_rows` as one `Group` (the load-time repack).
pub fn groupOf(comptime B: type, w_rows: [rows][]align(1) const B, b: usize) Group {
    var g: Group = undefined;
    for (0..rows) |r| {
        g.dm[2 * r] = w_rows[r][b].d;
        g.dm[2 * r + 1] = w_rows[r][b].m;
    }
    inline for (0..2) |p| {
        const u: [64]u8 = unpackPair(B, interleave_order, &w_rows[2 * p][b], &w_rows[2 * p + 1][b]);
        for (0..32) |k| g.qs[p][k] = u[k] | (u[k + 32] << 4);
    }
    return g;
}

/// Qword shifts that bring the high nibbles down in the upper half of a broadcast pair.
const nibble_shift: @Vector(8, u64) = .{ 0, 0, 0, 0, 4, 4, 4, 4 };

/// A row pair's 64 codes (`interleave_order`) from a group's 32 packed bytes.
inline fn decodePair(q: *align(1) const [32]u8) U8x64 {
    const v: @Vector(32, u8) = q.*;
    const twice: U8x64 = @shuffle(u8, v, undefined, twice32);
    const shifted: U8x64 = @bitCast(@as(@Vector(8, u64), @bitCast(twice)) >> nibble_shift);
    return shifted & @as(U8x64, @splat(0x0F));
}

/// Most tokens of `tileGroups` (2·T accumulators and the pair operands in registers).
pub const group_tokens_max = 8;

/// 4 rows × T tokens (T ≤ 8) of a matrix in the `Group` layout, out[t][r] bit-identical
/// to `Q4_1.vecDot(row r, a_rows[t])`: `tile`'s integer lanes, products dw·da and fma
/// order, with the two rows of a pair interleaved lane by lane ([a0 b0 a1 b1 ...])
/// instead of in halves. A block's 4·T scale products are one vector product stored to
/// the stack, and each (row pair, token) fma reads its two as one 64-bit broadcast (a
/// load: no multiply or shuffle per pair); the layout spares the per-row gathers of the
/// scales and the byte shuffle of the codes. SmolLM2's 1536 × 576 ffn_gate in L2, 1
/// thread, best of 300: 24.6 / 59.4 µs at 1 / 4 tokens, against 29.3 / 89.2 for
/// `tileLanes8` and 36.9 / 74.7 for `tile` on the rows as stored.
pub fn tileGroups(comptime T: usize, w: []align(1) const Group, a_rows: [T][]align(1) const ActBlock) [T][rows]f32 {
    comptime std.debug.assert(T >= 1 and T <= group_tokens_max);
    const n = w.len;
    inline for (0..T) |t| std.debug.assert(a_rows[t].len == n);
    var acc: [T][2]F32x16 = @splat(@splat(@splat(0)));
    var summs: @Vector(rows * T, f32) = @splat(0);
    var scales: [rows * T]f32 align(64) = undefined;
    for (0..n) |b| {
        // The matrix streams once per tile row: fetch ahead linearly (the groups of
        // consecutive row groups are consecutive). Without it a 4-sequence decode step
        // of SmolLM2 took 11.7-12.1 ms instead of 8.8-9.4 (2 threads); prompt tiles
        // (8 tokens) measured the same with or without.
        const here: [*]const u8 = @ptrCast(&w[b]);
        @prefetch(here + prefetch_distance_bytes, .{ .locality = 2 });
        @prefetch(here + prefetch_distance_bytes + 64, .{ .locality = 2 });
        var ab: [T]*align(1) const ActBlock = undefined;
        inline for (0..T) |t| ab[t] = &a_rows[t][b];
        const dmh: @Vector(2 * rows, f16) = w[b].dm;
        const wdm: @Vector(2 * rows, f32) = dmh;
        const ads = scalePairs(T, ActBlock, ab);
        const products = @shuffle(f32, wdm, undefined, productMask(T, 0)) * @shuffle(f32, ads, undefined, productMask(T, 1));
        @as(*align(64) volatile @Vector(rows * T, f32), @ptrCast(&scales)).* = products;
        const u = [2]U8x64{ decodePair(&w[b].qs[0]), decodePair(&w[b].qs[1]) };
        inline for (0..T) |t| {
            const aw: @Vector(8, u32) = @bitCast(ab[t].qs);
            const av: I8x64 = @bitCast(@shuffle(u32, aw, undefined, dword_twice));
            inline for (0..2) |p| {
                const lanes: F32x16 = @floatFromInt(dpbusd(16, @splat(0), u[p], av));
                const pair: f64 = @as(*align(4) const volatile f64, @ptrCast(&scales[rows * t + 2 * p])).*;
                const scale: F32x16 = @bitCast(@as(@Vector(8, f64), @splat(pair)));
                acc[t][p] = @mulAdd(F32x16, scale, lanes, acc[t][p]);
            }
        }
        const m: @Vector(rows * T, f32) = @shuffle(f32, wdm, undefined, minMask(T));
        const s: @Vector(rows * T, f32) = @shuffle(f32, ads, undefined, sumMask(T));
        summs = @mulAdd(@Vector(rows * T, f32), m, s, summs);
    }
    return interleavedSums(T, acc, summs);
}

/// Scalar reference of the same order (ggml's x86 `ggml_vec_dot_q4_1_q8_1`, one output).
pub fn dotRef(comptime B: type, w: []align(1) const B, a: []align(1) const ActBlock) f32 {
    std.debug.assert(w.len == a.len);
    var acc: [8]f32 = @splat(0);
    var summs: f32 = 0;
    for (w, a) |wb, ab| {
        const scale = @as(f32, wb.d) * @as(f32, ab.d);
        for (0..8) |g| {
            var lane: i32 = 0;
            for (0..4) |j| {
                const e = 4 * g + j;
                const q: i32 = if (e < 16) wb.qs[e] & 0x0F else wb.qs[e - 16] >> 4;
                lane += q * ab.qs[e];
            }
            acc[g] = @mulAdd(f32, scale, @floatFromInt(lane), acc[g]);
        }
        summs += @as(f32, wb.m) * @as(f32, ab.s);
    }
    // hsum_float_8: (x0..3 + x4..7), then the halves of that, then the last pair.
    const q = [4]f32{ acc[0] + acc[4], acc[1] + acc[5], acc[2] + acc[6], acc[3] + acc[7] };
    const h = [2]f32{ q[0] + q[2], q[1] + q[3] };
    return (h[0] + h[1]) + summs;
}

const testing = std.testing;

// Without VNNI (the x86-64-v3 build) the tile is not compiled: the reference is still
// checked against the Q4_1.vecDot that such builds run.
test "the Q4_1 VNNI tiles (tile, tileLanes8) equal the scalar x86-order reference and Q4_1.vecDot per (row, token), T = 1..4" {
    const legacy = @import("quant_legacy.zig");
    const B = legacy.Q4_1.Block;
    var prng = std.Random.DefaultPrng.init(41);
    const random = prng.random();
    inline for (.{ 1, 2, 3, 18, 48 }) |nb| {
        const cols = nb * qk;
        var wf: [rows * cols]f32 = undefined;
        for (&wf) |*v| v.* = random.floatNorm(f32);
        var w: [rows * nb]legacy.Q4_1.Block = undefined;
        for (0..rows) |r| legacy.Q4_1.quantizeRowRef(wf[r * cols ..][0..cols], w[r * nb ..][0..nb]);
        var a: [4][nb]ActBlock = undefined;
        for (&a) |*row| {
            var x: [cols]f32 = undefined;
            for (&x) |*v| v.* = random.floatNorm(f32) * 3;
            act.Q8_1.quantizeRow(&x, row);
        }
        var w_rows: [rows][]align(1) const B = undefined;
        for (0..rows) |r| w_rows[r] = w[r * nb ..][0..nb];
        inline for (1..5) |T| {
            var a_rows: [T][]align(1) const ActBlock = undefined;
            inline for (0..T) |t| a_rows[t] = &a[t];
            for (0..T) |t| {
                for (0..rows) |r| {
                    const want = dotRef(B, w_rows[r], a_rows[t]);
                    const lib = legacy.Q4_1.vecDot(w[r * nb ..][0..nb], a_rows[t]);
                    try testing.expectEqual(@as(u32, @bitCast(want)), @as(u32, @bitCast(lib)));
                    if (comptime available) {
                        const got = tile(B, T, w_rows, a_rows);
                        try testing.expectEqual(@as(u32, @bitCast(want)), @as(u32, @bitCast(got[t][r])));
                        const got8 = tileLanes8(B, T, w_rows, a_rows);
                        try testing.expectEqual(@as(u32, @bitCast(want)), @as(u32, @bitCast(got8[t][r])));
                    }
                }
            }
        }
    }
}

test "the Q4_1 group layout: tileGroups equals the scalar x86-order reference per (row, token), T = 1..8" {
    // Without VNNI (the x86-64-v3 build) there is no group layout: nothing to compare.
    if (comptime !available) return;
    const legacy = @import("quant_legacy.zig");
    const B = legacy.Q4_1.Block;
    var prng = std.Random.DefaultPrng.init(43);
    const random = prng.random();
    inline for (.{ 1, 3, 18 }) |nb| {
        const cols = nb * qk;
        var wf: [rows * cols]f32 = undefined;
        for (&wf) |*v| v.* = random.floatNorm(f32);
        var w: [rows * nb]B = undefined;
        for (0..rows) |r| legacy.Q4_1.quantizeRowRef(wf[r * cols ..][0..cols], w[r * nb ..][0..nb]);
        var w_rows: [rows][]align(1) const B = undefined;
        for (0..rows) |r| w_rows[r] = w[r * nb ..][0..nb];
        var groups: [nb]Group = undefined;
        for (&groups, 0..) |*g, b| g.* = groupOf(B, w_rows, b);
        var a: [group_tokens_max][nb]ActBlock = undefined;
        for (&a) |*row| {
            var x: [cols]f32 = undefined;
            for (&x) |*v| v.* = random.floatNorm(f32) * 3;
            act.Q8_1.quantizeRow(&x, row);
        }
        inline for (1..group_tokens_max + 1) |T| {
            var a_rows: [T][]align(1) const ActBlock = undefined;
            inline for (0..T) |t| a_rows[t] = &a[t];
            const got = tileGroups(T, &groups, a_rows);
            for (0..T) |t| {
                for (0..rows) |r| {
                    const want = dotRef(B, w_rows[r], a_rows[t]);
                    try testing.expectEqual(@as(u32, @bitCast(want)), @as(u32, @bitCast(got[t][r])));
                }
            }
        }
    }
}
