//! ggml's legacy 32-element weight types: Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL.
//!
//! Each type is one namespace with ggml's block layout, its dequantizer and reference
//! quantizer (bit-exact with ggml-quants.c as llama-quantize runs it: ggml-base is built
//! for the baseline ISA, so no `a*b + c` is fused there and neither is it here), a scalar
//! dot product in ggml's generic order (`vecDotRef`) and SIMD ones against the activation
//! format of ggml's `vec_dot_type` (Q8_0 for Q4_0/Q5_0/IQ4_NL, Q8_1 for Q4_1/Q5_1; see
//! quant_act.zig): `vecDot` (one row), `vecDotRows` (R rows, the GEMV tile) and
//! `vecDotTile` (R rows × T tokens, for prompt processing).
//!
//! The SIMD dot products compute 16 exact int32 lanes per 64-byte vector (lane g of a
//! block = Σ of 4 consecutive products, the `vpdpbusd` layout; `vecDot` packs two blocks
//! of a row per vector, the tiles one block of two rows) and then run exactly the float
//! operations of llama.cpp's x86 kernels (ggml-cpu/arch/x86/quants.c, AVX2 branch, which
//! AVX-512 builds also take): per block one fused multiply-add of the lanes by dw·da into
//! an 8-lane accumulator (IQ4_NL: two, even and odd blocks, plus a scalar last block),
//! the Q4_1/Q5_1 min terms in a scalar chain, and ggml's `hsum_float_8` tree. So every
//! entry point returns llama.cpp's `ggml_vec_dot_*` bits on every path (AVX-512 VNNI,
//! AVX2, generic `@Vector`: same integer lanes, same float operations), whatever the tile
//! and whichever thread computes it. `vecDotRef` is ggml's generic scalar order instead
//! (different rounding; the tests bound the difference).
const std = @import("std");
const builtin = @import("builtin");
const simd = @import("simd.zig");
const act = @import("quant_act.zig");
const q4_1_tile = @import("quant_q4_1_tile.zig");
const q4_1_tile_avx2 = @import("q4_1_tile_avx2.zig");
/// The 16-row transpose helpers of Q4_K's wide tile, shared by Q4_0's.
const wide = @import("quant_k.zig");

const x86 = std.Target.x86;

/// Elements per block of every legacy type.
const qk: usize = 32;

/// ggml's IQ4_NL codebook (`kvalues_iq4nl`).
pub const kvalues_iq4nl = [16]i8{ -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

const kvalues_f32: [16]f32 = blk: {
    var t: [16]f32 = undefined;
    for (0..16) |i| t[i] = kvalues_iq4nl[i];
    break :blk t;
};

/// Which SIMD code `vecDot` runs. Every path gives bit-identical results.
pub const Path = enum { vnni, avx2, generic };

/// AVX-512 VNNI path needs 512-bit `vpdpbusd` (avx512vnni) and 512-bit byte shuffles (avx512bw).
pub const has_vnni_path = builtin.cpu.arch == .x86_64 and
    x86.featureSetHas(builtin.cpu.features, .avx512vnni) and
    x86.featureSetHas(builtin.cpu.features, .avx512bw);

/// The path `vecDot` uses on the compile target.
pub const best_path: Path = if (has_vnni_path) .vnni else if (simd.has_avx2) .avx2 else .generic;

/// The paths this target can run (the tests check each of them).
pub const available_paths: []const Path = if (has_vnni_path)
    &.{ .vnni, .avx2, .generic }
else if (simd.has_avx2)
    &.{ .avx2, .generic }
else
    &.{.generic};

/// How far ahead of the current block the repacked-order prompt tile (`tileRepackedFold`)
/// prefetches each row's weights: a few cache lines, so each of a tile's row streams is
/// in flight before it is read (measured on a loaded 2-core host only; 512 was never
/// worse than none). The GEMV (`tile`) prefetches its span linearly instead.
const prefetch_bytes: usize = 512;

const Kind = enum { q4_0, q4_1, q5_0, q5_1, iq4_nl };

/// Q4_0: d·(q − 8), q 4-bit. 18 bytes per 32 weights.
pub const Q4_0 = Legacy(.q4_0);
/// Q4_1: d·q + m, q 4-bit. 20 bytes per 32 weights.
pub const Q4_1 = Legacy(.q4_1);
/// Q5_0: d·(q − 16), q 5-bit (high bits in qh). 22 bytes per 32 weights.
pub const Q5_0 = Legacy(.q5_0);
/// Q5_1: d·q + m, q 5-bit (high bits in qh). 24 bytes per 32 weights.
pub const Q5_1 = Legacy(.q5_1);
/// IQ4_NL: d·kvalues_iq4nl[q], q 4-bit. 18 bytes per 32 weights.
pub const IQ4_NL = Legacy(.iq4_nl);

fn BlockOf(comptime kind: Kind) type {
    return switch (kind) {
        .q4_0, .iq4_nl => extern struct { d: f16, qs: [qk / 2]u8 },
        .q4_1 => extern struct { d: f16, m: f16, qs: [qk / 2]u8 },
        .q5_0 => extern struct { d: f16, qh: [4]u8, qs: [qk / 2]u8 },
        .q5_1 => extern struct { d: f16, m: f16, qh: [4]u8, qs: [qk / 2]u8 },
    };
}

const U8x64 = @Vector(64, u8);
const I8x64 = @Vector(64, i8);
const I32x16 = @Vector(16, i32);
const F32x16 = @Vector(16, f32);
const F32x8 = @Vector(8, f32);
const first8 = std.simd.iota(i32, 8);
const second8 = std.simd.iota(i32, 8) + @as(@Vector(8, i32), @splat(8));
/// Activation bytes 0..15, 0..15, 16..31, 16..31 (the `rowPairs` layout).
const halves_twice = blk: {
    var m: [64]i32 = undefined;
    for (0..64) |i| m[i] = @intCast((i / 32) * 16 + i % 16);
    break :blk m;
};
/// Row r's scale in lanes 0..3 and 8..11, row r+1's in 4..7 and 12..15.
const row_pair_broadcast = [16]i32{ 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1 };
const first_row_lanes = [8]i32{ 0, 1, 2, 3, 8, 9, 10, 11 };
const second_row_lanes = [8]i32{ 4, 5, 6, 7, 12, 13, 14, 15 };

fn Legacy(comptime kind: Kind) type {
    return struct {
        pub const ggml_type: u32 = switch (kind) {
            .q4_0 => 2,
            .q4_1 => 3,
            .q5_0 => 6,
            .q5_1 => 7,
            .iq4_nl => 20,
        };
        pub const name = switch (kind) {
            .q4_0 => "Q4_0",
            .q4_1 => "Q4_1",
            .q5_0 => "Q5_0",
            .q5_1 => "Q5_1",
            .iq4_nl => "IQ4_NL",
        };
        pub const block_elems: usize = qk;
        pub const Block = BlockOf(kind);
        comptime {
            const want: usize = switch (kind) {
                .q4_0, .iq4_nl => 18,
                .q4_1 => 20,
                .q5_0 => 22,
                .q5_1 => 24,
            };
            std.debug.assert(@sizeOf(Block) == want);
        }
        /// ggml's vec_dot_type of this type.
        pub const Act = if (has_min) act.Q8_1 else act.Q8_0;
        /// The activations of `vecDotWideRepacked`'s interleaved layout: Q4_1's AVX2 tile
        /// reads `Q8_1F32` (Q8_1's quants and scales, laid out for it); else `Act`.
        pub const WideAct = if (has_groups8) act.Q8_1F32 else Act;

        const has_min = kind == .q4_1 or kind == .q5_1;
        const has_qh = kind == .q5_0 or kind == .q5_1;
        /// The weights enter the integer dot product as unsigned `u`, value = u − offset
        /// (IQ4_NL: u = kvalues + 128).
        const offset: u8 = switch (kind) {
            .q4_0 => 8,
            .q5_0 => 16,
            .iq4_nl => 128,
            .q4_1, .q5_1 => 0,
        };

        /// The 5-bit (or 4-bit) code of element j of a block, 0..31.
        inline fn code(block: anytype, j: usize) u8 {
            const nib: u8 = if (j < 16) block.qs[j] & 0x0F else block.qs[j - 16] >> 4;
            if (!has_qh) return nib;
            const qh = std.mem.readInt(u32, &block.qh, .little);
            return nib | @as(u8, @intCast((qh >> @intCast(j)) & 1)) << 4;
        }

        /// Q5_0 on AVX2 without AVX-512 VNNI: prompts take the Q8_0 assembly tile over
        /// each row's blocks re-expressed by `toQ8_0` (`matmul_quant.expandedRange`).
        /// ggml's x86 `ggml_vec_dot_q5_0_q8_0` (and tinyBLAS_Q0_AVX) computes each block
        /// as the Q8_0 dot does — `mul_sum_i8_pairs_float` of the signed values q − 16,
        /// then fma(dw·dx, lanes, acc) — so the bits are `vecDot`'s.
        pub const expands_to_q8_0 = kind == .q5_0 and simd.has_avx2 and !has_vnni_path;

        /// The block as a Q8_0 block: the same d, the values q − 16 (−16..15) as i8.
        pub fn toQ8_0(block: *align(1) const Block) act.Q8_0.Block {
            comptime std.debug.assert(kind == .q5_0);
            const qs: @Vector(16, u8) = block.qs;
            const nibbles: @Vector(32, u8) = std.simd.join(qs & @as(@Vector(16, u8), @splat(0x0F)), qs >> @splat(4));
            const high: @Vector(32, u1) = @bitCast(std.mem.readInt(u32, &block.qh, .little));
            const codes = nibbles | @as(@Vector(32, u8), high) << @splat(4);
            const values: @Vector(32, i8) = @bitCast(codes -% @as(@Vector(32, u8), @splat(16)));
            return .{ .d = block.d, .qs = values };
        }

        /// ggml's dequantize_row_* (same float operations: one multiply, then one add
        /// for the types with a min).
        pub fn dequantizeRow(x: []align(1) const Block, y: []f32) void {
            std.debug.assert(y.len == x.len * qk);
            for (x, 0..) |block, b| {
                const d: f32 = block.d;
                const out = y[b * qk ..][0..qk];
                for (0..qk) |j| {
                    const c = code(block, j);
                    out[j] = switch (kind) {
                        .q4_0 => @as(f32, @floatFromInt(@as(i32, c) - 8)) * d,
                        .q5_0 => @as(f32, @floatFromInt(@as(i32, c) - 16)) * d,
                        .q4_1, .q5_1 => @as(f32, @floatFromInt(c)) * d + @as(f32, block.m),
                        .iq4_nl => d * @as(f32, @floatFromInt(kvalues_iq4nl[c])),
                    };
                }
            }
        }

        /// ggml's quantize_row_*_ref, i.e. the bytes llama-quantize writes without an
        /// importance matrix. For IQ4_NL that is `quantize_iq4_nl` with no weights (the
        /// 7-step scale search), not `quantize_row_iq4_nl_ref` (which skips the search).
        /// NaN/inf input gives defined (meaningless) codes instead of undefined behaviour.
        pub fn quantizeRowRef(x: []const f32, y: []align(1) Block) void {
            std.debug.assert(x.len == y.len * qk);
            for (y, 0..) |*block, b| {
                const xb = x[b * qk ..][0..qk];
                switch (kind) {
                    .q4_0, .q5_0 => quantizeSymmetric(xb, block),
                    .q4_1, .q5_1 => quantizeMinMax(xb, block),
                    .iq4_nl => quantizeIq4nl(xb, block),
                }
            }
        }

        const max_code: f32 = if (kind == .q5_0 or kind == .q5_1) 31 else 15;

        /// Truncates toward zero like C's float-to-integer conversion, with the MIN(…)
        /// ggml applies; the clamp to >= 0 only matters for NaN/inf input.
        inline fn truncCode(v: f32) u8 {
            return @intFromFloat(@min(@max(v, 0), max_code));
        }

        inline fn storeCodes(block: *align(1) Block, codes: *const [qk]u8) void {
            var qh: u32 = 0;
            for (0..qk / 2) |j| {
                block.qs[j] = (codes[j] & 0x0F) | ((codes[j + 16] & 0x0F) << 4);
                if (has_qh) {
                    qh |= @as(u32, codes[j] >> 4) << @intCast(j);
                    qh |= @as(u32, codes[j + 16] >> 4) << @intCast(j + 16);
                }
            }
            if (has_qh) std.mem.writeInt(u32, &block.qh, qh, .little);
        }

        /// Q4_0 / Q5_0: d = max/−8 (−16) where max is the value of largest magnitude.
        fn quantizeSymmetric(xb: *const [qk]f32, block: *align(1) Block) void {
            var amax: f32 = 0;
            var max: f32 = 0;
            for (xb) |v| {
                if (amax < @abs(v)) {
                    amax = @abs(v);
                    max = v;
                }
            }
            const half: f32 = if (kind == .q4_0) 8 else 16;
            const d = max / -half;
            const id: f32 = if (d != 0) 1.0 / d else 0.0;
            block.d = @floatCast(d);
            var codes: [qk]u8 = undefined;
            for (xb, &codes) |v, *c| {
                const scaled = v * id;
                c.* = truncCode(scaled + (half + 0.5));
            }
            storeCodes(block, &codes);
        }

        /// Q4_1 / Q5_1: d = (max − min)/15 (31), m = min.
        fn quantizeMinMax(xb: *const [qk]f32, block: *align(1) Block) void {
            var min: f32 = std.math.floatMax(f32);
            var max: f32 = -std.math.floatMax(f32);
            for (xb) |v| {
                if (v < min) min = v;
                if (v > max) max = v;
            }
            const d = (max - min) / max_code;
            const id: f32 = if (d != 0) 1.0 / d else 0.0;
            block.d = @floatCast(d);
            block.m = @floatCast(min);
            var codes: [qk]u8 = undefined;
            for (xb, &codes) |v, *c| {
                const scaled = (v - min) * id;
                c.* = truncCode(scaled + 0.5);
            }
            storeCodes(block, &codes);
        }

        /// ggml's quantize_row_iq4_nl_impl for one 32-element block with no importance
        /// weights and ntry = 7 (what quantize_iq4_nl runs for llama-quantize).
        fn quantizeIq4nl(xb: *const [qk]f32, block: *align(1) Block) void {
            const ntry = 7;
            const values = &kvalues_iq4nl;
            const v0 = kvalues_f32[0];
            var weight: [qk]f32 = undefined;
            for (xb, &weight) |v, *w| w.* = v * v;
            var amax: f32 = 0;
            var max: f32 = 0;
            for (xb) |v| {
                const ax = @abs(v);
                if (ax > amax) {
                    amax = ax;
                    max = v;
                }
            }
            var scale: f32 = 0;
            if (!(amax < 1e-15)) {
                var d = -max / v0;
                var id = 1 / d;
                var sumqx: f32 = 0;
                var sumq2: f32 = 0;
                for (xb, weight) |v, w| {
                    const q = kvalues_f32[bestIndex(id * v)];
                    const wq = w * q;
                    sumqx += wq * v;
                    sumq2 += wq * q;
                }
                d = if (sumq2 > 0) sumqx / sumq2 else 0;
                var best = d * sumqx;
                var itry: i32 = -ntry;
                while (itry <= ntry) : (itry += 1) {
                    id = @as(f32, @floatFromInt(itry + values[0])) / max;
                    sumqx = 0;
                    sumq2 = 0;
                    for (xb, weight) |v, w| {
                        const q = kvalues_f32[bestIndex(id * v)];
                        const wq = w * q;
                        sumqx += wq * v;
                        sumq2 += wq * q;
                    }
                    if (sumq2 > 0 and sumqx * sumqx > best * sumq2) {
                        d = sumqx / sumq2;
                        best = d * sumqx;
                    }
                }
                scale = d;
            }
            block.d = @floatCast(scale);
            const id: f32 = if (scale != 0) 1 / scale else 0;
            var codes: [qk]u8 = undefined;
            for (xb, &codes) |v, *c| c.* = bestIndex(id * v);
            storeCodes(block, &codes);
        }

        /// Scalar dot product in the order of ggml's `ggml_vec_dot_*_generic`: exact
        /// int32 block sums, scaled and added left to right in f32.
        pub fn vecDotRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
            std.debug.assert(w.len == a.len);
            var sumf: f32 = 0;
            for (w, a) |wb, ab| {
                var sumi: i32 = 0;
                for (0..qk) |j| {
                    const c = code(wb, j);
                    const v: i32 = switch (kind) {
                        .q4_0 => @as(i32, c) - 8,
                        .q5_0 => @as(i32, c) - 16,
                        .q4_1, .q5_1 => c,
                        .iq4_nl => kvalues_iq4nl[c],
                    };
                    sumi += v * ab.qs[j];
                }
                const dw: f32 = wb.d;
                const da: f32 = ab.d;
                const fi: f32 = @floatFromInt(sumi);
                switch (kind) {
                    .q4_0 => sumf += fi * dw * da,
                    .q5_0 => sumf += (dw * da) * fi,
                    .iq4_nl => sumf += (da * dw) * fi,
                    .q4_1, .q5_1 => sumf += (dw * da) * fi + @as(f32, wb.m) * @as(f32, ab.s),
                }
            }
            return sumf;
        }

        /// Σ over the row of w·a with the fastest path of the target.
        pub fn vecDot(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
            return vecDotPath(best_path, w, a);
        }

        /// `R` rows against the same activations; element r is bit-identical to
        /// `vecDot(w_rows[r], a)` (the activation-only work is shared).
        pub fn vecDotRows(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
            return vecDotRowsPath(best_path, R, w_rows, a);
        }

        /// `vecDot` on a chosen path (the tests run every path the host supports).
        pub fn vecDotPath(comptime path: Path, w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
            return vecDotRowsPath(path, 1, .{w}, a)[0];
        }

        /// Matrices whose row count is a multiple of this are repacked by llama.cpp's
        /// CPU backend on AVX2/AVX-512 machines (Q4_0 and IQ4_NL into 8-row interleaved
        /// blocks, `ggml_gemv/gemm_*_8x8_q8_0`), whose float order differs from
        /// `ggml_vec_dot_*`: per row, the whole block's integer sum converted to f32 and
        /// acc = fma(sum, dw·da, acc), blocks in order, no lane tree. 0: never repacked.
        pub const repack_rows: usize = if (kind == .q4_0 or kind == .iq4_nl) 8 else 0;

        /// One row in the repacked order (see `repack_rows`).
        pub fn vecDotRepacked(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
            return blockPairs(best_path, 1, true, .{w}, a)[0];
        }

        /// `R` rows in the repacked order; element r equals `vecDotRepacked(w_rows[r], a)`.
        pub fn vecDotRowsRepacked(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
            return vecDotRowsOrder(best_path, R, true, w_rows, a);
        }

        /// Scalar reference of the repacked order.
        pub fn vecDotRepackedRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
            var acc: f32 = 0;
            for (w, a) |wb, ab| {
                var sumi: i32 = 0;
                for (0..qk) |j| {
                    const c = code(wb, j);
                    const v: i32 = switch (kind) {
                        .q4_0 => @as(i32, c) - 8,
                        .iq4_nl => kvalues_iq4nl[c],
                        else => unreachable,
                    };
                    sumi += v * ab.qs[j];
                }
                acc = @mulAdd(f32, @floatFromInt(sumi), @as(f32, wb.d) * @as(f32, ab.d), acc);
            }
            return acc;
        }

        /// `vecDotRows` on a chosen path: rows two by two through `rowPairs`, an odd
        /// last row through `blockPairs`.
        pub fn vecDotRowsPath(comptime path: Path, comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
            // Q4_1's VNNI tile at one token: the same bits, fewer shuffles than `tile`.
            if (kind == .q4_1 and path == .vnni and q4_1_tile.available and R == q4_1_tile.rows) {
                return q4_1_tile.tileBest(Block, 1, w_rows, .{a})[0];
            }
            return vecDotRowsOrder(path, R, false, w_rows, a);
        }

        fn vecDotRowsOrder(comptime path: Path, comptime R: usize, comptime repacked: bool, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
            if (path == .avx2 and has_qh and !repacked) {
                var out: [R]f32 = undefined;
                inline for (0..R) |r| out[r] = rowQ5Avx2(w_rows[r], a);
                return out;
            }
            if (R == 1) return blockPairs(path, 1, repacked, w_rows, a);
            var out: [R]f32 = undefined;
            out[0 .. R / 2 * 2].* = tile(path, R / 2, 1, repacked, w_rows[0 .. R / 2 * 2].*, .{a})[0];
            if (R % 2 == 1) out[R - 1] = blockPairs(path, 1, repacked, .{w_rows[R - 1]}, a)[0];
            return out;
        }

        /// One row (or R rows) at a time, two blocks per 64-byte vector.
        fn blockPairs(comptime path: Path, comptime R: usize, comptime repacked: bool, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
            const n = a.len;
            inline for (0..R) |r| std.debug.assert(w_rows[r].len == n);
            // llama.cpp's x86 order: per block acc = fma(dw·da, lanes, acc) into one
            // 8-lane accumulator (IQ4_NL: even blocks into acc, odd ones into acc_odd,
            // the last odd block added scalar), the min terms in a scalar chain.
            var acc: [R]F32x8 = @splat(@splat(0));
            var acc_odd: [R]F32x8 = @splat(@splat(0));
            var summs: [R]f32 = @splat(0);
            var racc: [R]f32 = @splat(0);
            var b: usize = 0;
            while (b < n) : (b += 2) {
                const pair = b + 1 < n;
                if (kind == .iq4_nl and !pair) break;
                const a0 = &a[b];
                const a1 = if (pair) &a[b + 1] else a0;
                const zero32: @Vector(32, i8) = @splat(0);
                const av0: @Vector(32, i8) = a0.qs;
                const av1: @Vector(32, i8) = if (pair) a1.qs else zero32;
                const av: I8x64 = std.simd.join(av0, av1);
                const da0: f32 = a0.d;
                const da1: f32 = a1.d;
                const shared = actShared(path, av);
                inline for (0..R) |r| {
                    const w0 = &w_rows[r][b];
                    const w1 = if (pair) &w_rows[r][b + 1] else w0;
                    const u = unpackPair(w0, w1);
                    const lanes: F32x16 = @floatFromInt(pairLanes(path, u, av, shared));
                    const lo: F32x8 = @shuffle(f32, lanes, undefined, first8);
                    const hi: F32x8 = @shuffle(f32, lanes, undefined, second8);
                    const dw0: f32 = w0.d;
                    const dw1: f32 = w1.d;
                    if (repacked) {
                        const li = pairLanes(path, u, av, shared);
                        const s0: f32 = @floatFromInt(@reduce(.Add, @shuffle(i32, li, undefined, first8)));
                        racc[r] = @mulAdd(f32, s0, dw0 * da0, racc[r]);
                        if (pair) {
                            const s1: f32 = @floatFromInt(@reduce(.Add, @shuffle(i32, li, undefined, second8)));
                            racc[r] = @mulAdd(f32, s1, dw1 * da1, racc[r]);
                        }
                        continue;
                    }
                    acc[r] = @mulAdd(F32x8, @splat(dw0 * da0), lo, acc[r]);
                    if (has_min) summs[r] = minTerm(w0.m, a0.s, summs[r]);
                    if (pair) {
                        if (kind == .iq4_nl) {
                            acc_odd[r] = @mulAdd(F32x8, @splat(dw1 * da1), hi, acc_odd[r]);
                        } else {
                            acc[r] = @mulAdd(F32x8, @splat(dw1 * da1), hi, acc[r]);
                        }
                        if (has_min) summs[r] = minTerm(w1.m, a1.s, summs[r]);
                    }
                }
            }
            var out: [R]f32 = undefined;
            if (repacked) {
                inline for (0..R) |r| {
                    out[r] = racc[r];
                    // The same step as the repacked kernel's for the last block.
                    if (kind == .iq4_nl and b < n) out[r] = iq4nlTail(w_rows[r][b], a[b], out[r]);
                }
                return out;
            }
            inline for (0..R) |r| {
                if (kind == .iq4_nl) {
                    out[r] = simd.hsum(8, f32, acc[r] + acc_odd[r]);
                    // ggml's scalar step for an odd block count.
                    if (b < n) out[r] = iq4nlTail(w_rows[r][b], a[b], out[r]);
                } else {
                    out[r] = simd.hsum(8, f32, acc[r]);
                    if (has_min) out[r] += summs[r];
                }
            }
            return out;
        }

        /// One Q5_0 or Q5_1 row on AVX2 as ggml's AVX2 `vec_dot` runs it: a block (32
        /// elements) per 256-bit vector, its 5th bits spread to bytes by one vpshufb of the
        /// broadcast `qh`, then vpmaddubsw (Q5_0: minus 16·a, the same exact pairs) and
        /// vpmaddwd by ones: lane k holds elements 4k..4k+3, as in `pairLanes`, so the
        /// fused multiply-adds and the final sum are `blockPairs`' bits. Rows go one after
        /// another, each read front to back (`rowPairs` put two rows in a vector and built
        /// their 64 high bits with scalar shifts: 11 of about 30 operations per block).
        fn rowQ5Avx2(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
            const n = a.len;
            std.debug.assert(w.len == n);
            const low4: @Vector(16, u8) = @splat(0x0F);
            // Byte k of the broadcast qh word is bits 8k..8k+7: element e takes byte e / 8
            // and tests bit e % 8.
            const spread: @Vector(32, u8) = comptime blk: {
                var m: [32]u8 = undefined;
                for (0..32) |e| m[e] = e / 8;
                break :blk m;
            };
            const bit: @Vector(32, u8) = comptime blk: {
                var m: [32]u8 = undefined;
                for (0..32) |e| m[e] = @as(u8, 1) << @intCast(e % 8);
                break :blk m;
            };
            var acc: F32x8 = @splat(0);
            var summs: f32 = 0;
            for (w, a, 0..) |*wb, *ab, b| {
                simd.prefetchAhead(@ptrCast(w.ptr), n * @sizeOf(Block), b * @sizeOf(Block), @sizeOf(Block));
                const q: @Vector(16, u8) = wb.qs;
                var u: @Vector(32, u8) = std.simd.join(q & low4, q >> @splat(4));
                const qh: @Vector(32, u8) = @bitCast(@as(@Vector(8, u32), @splat(std.mem.readInt(u32, &wb.qh, .little))));
                const set = (pshufb32(qh, spread) & bit) == bit;
                u |= @select(u8, set, @as(@Vector(32, u8), @splat(0x10)), @as(@Vector(32, u8), @splat(0)));
                const av: @Vector(32, i8) = ab.qs;
                var pairs = maddubs(u, av);
                if (offset != 0) pairs -%= maddubs(@splat(offset), av);
                const lanes = maddwdOnes(pairs);
                const dw: f32 = wb.d;
                const da: f32 = ab.d;
                acc = @mulAdd(F32x8, @splat(dw * da), @floatFromInt(lanes), acc);
                if (has_min) summs = minTerm(wb.m, ab.s, summs);
            }
            const sum = simd.hsum(8, f32, acc);
            return if (has_min) sum + summs else sum;
        }

        /// summs += m·s. GCC fuses it for llama.cpp's CPU backend, but the product of
        /// two f16 values is exact in f32, so the plain multiply-add gives the same bits.
        inline fn minTerm(m: f16, s: f16, sum: f32) f32 {
            return @as(f32, m) * @as(f32, s) + sum;
        }

        /// 2·P rows, two rows per 64-byte vector: for block b the vector holds
        /// [row r elements 0..15, row r+1 elements 0..15, row r 16..31, row r+1 16..31]
        /// against the activations [0..15, 0..15, 16..31, 16..31], so the 16 integer lanes
        /// are lanes 0..3 of row r, 0..3 of row r+1, 4..7 of row r, 4..7 of row r+1. Each
        /// lane still gets llama.cpp's sequence of fused multiply-adds, and the final
        /// reduction gathers each row's 8 lanes back into ggml's order.
        fn rowPairs(comptime path: Path, comptime P: usize, w_rows: [2 * P][]align(1) const Block, a: []align(1) const Act.Block) [2 * P]f32 {
            return tile(path, P, 1, false, w_rows, .{a})[0];
        }

        /// `rowPairs` for T activation rows at once: each block's weights are unpacked
        /// once and used for every token. out[t][r] is bit-identical to
        /// `vecDot(w_rows[r], a_rows[t])`.
        fn tile(comptime path: Path, comptime P: usize, comptime T: usize, comptime repacked: bool, w_rows: [2 * P][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][2 * P]f32 {
            // The T×P inline loops expand the comptime lane masks many times (the AVX2 build most).
            @setEvalBranchQuota(100_000);
            const n = a_rows[0].len;
            inline for (0..2 * P) |r| std.debug.assert(w_rows[r].len == n);
            inline for (0..T) |t| std.debug.assert(a_rows[t].len == n);
            var acc: [T][P]F32x16 = @splat(@splat(@splat(0)));
            var acc_odd: [T][P]F32x16 = @splat(@splat(@splat(0)));
            var summs: [T][2 * P]f32 = @splat(@splat(0));
            var racc: [T][2 * P]f32 = @splat(@splat(0));
            const n_vec = if (kind == .iq4_nl) n & ~@as(usize, 1) else n;
            for (0..n_vec) |b| {
                var u: [P]U8x64 = undefined;
                var dw: [P]@Vector(2, f32) = undefined;
                // A GEMV (or a 2-sequence step) streams the 2P rows, consecutive in the
                // matmul: fetch the span linearly ahead (`simd.prefetchAhead`). The
                // per-row `prefetch_bytes` was too short a lead from memory: Zen 4, a 450
                // MB ring of 8192×2048 matrices beside a plain read, 1 thread, Q5_0 GEMV
                // 6.9-7.0 GB/s (0.24-0.25 of the read) with it, 16.7-16.9 (0.58-0.61)
                // with this; Q5_1 6.6-6.7 and 15.0-15.7.
                if (T <= 2) simd.prefetchAhead(@ptrCast(w_rows[0].ptr), 2 * P * n * @sizeOf(Block), b * 2 * P * @sizeOf(Block), 2 * P * @sizeOf(Block));
                inline for (0..P) |p| {
                    const wr = &w_rows[2 * p][b];
                    const ws = &w_rows[2 * p + 1][b];
                    u[p] = unpackTwoRows(wr, ws);
                    dw[p] = .{ wr.d, ws.d };
                }
                inline for (0..T) |t| {
                    const ab = &a_rows[t][b];
                    const aq: @Vector(32, i8) = ab.qs;
                    const av: I8x64 = @shuffle(i8, aq, undefined, halves_twice);
                    const shared = actShared(path, av);
                    const da: f32 = ab.d;
                    inline for (0..P) |p| {
                        if (repacked) {
                            const li = pairLanes(path, u[p], av, shared);
                            const s0: f32 = @floatFromInt(@reduce(.Add, @shuffle(i32, li, undefined, first_row_lanes)));
                            const s1: f32 = @floatFromInt(@reduce(.Add, @shuffle(i32, li, undefined, second_row_lanes)));
                            racc[t][2 * p] = @mulAdd(f32, s0, dw[p][0] * da, racc[t][2 * p]);
                            racc[t][2 * p + 1] = @mulAdd(f32, s1, dw[p][1] * da, racc[t][2 * p + 1]);
                            continue;
                        }
                        const lanes: F32x16 = @floatFromInt(pairLanes(path, u[p], av, shared));
                        const sc: F32x16 = @shuffle(f32, dw[p] * @as(@Vector(2, f32), @splat(da)), undefined, row_pair_broadcast);
                        if (kind == .iq4_nl and b % 2 == 1) {
                            acc_odd[t][p] = @mulAdd(F32x16, sc, lanes, acc_odd[t][p]);
                        } else {
                            acc[t][p] = @mulAdd(F32x16, sc, lanes, acc[t][p]);
                        }
                        if (has_min) {
                            summs[t][2 * p] = minTerm(w_rows[2 * p][b].m, ab.s, summs[t][2 * p]);
                            summs[t][2 * p + 1] = minTerm(w_rows[2 * p + 1][b].m, ab.s, summs[t][2 * p + 1]);
                        }
                    }
                }
            }
            var out: [T][2 * P]f32 = undefined;
            if (repacked) {
                inline for (0..T) |t| {
                    inline for (0..2 * P) |r| {
                        out[t][r] = racc[t][r];
                        if (kind == .iq4_nl and n % 2 == 1) out[t][r] = iq4nlTail(w_rows[r][n - 1], a_rows[t][n - 1], out[t][r]);
                    }
                }
                return out;
            }
            inline for (0..T) |t| {
                inline for (0..P) |p| {
                    const total = if (kind == .iq4_nl) acc[t][p] + acc_odd[t][p] else acc[t][p];
                    inline for (0..2) |i| {
                        const r = 2 * p + i;
                        const lanes8: F32x8 = @shuffle(f32, total, undefined, if (i == 0) first_row_lanes else second_row_lanes);
                        var sum = simd.hsum(8, f32, lanes8);
                        if (has_min) sum += summs[t][r];
                        if (kind == .iq4_nl and n % 2 == 1) sum = iq4nlTail(w_rows[r][n - 1], a_rows[t][n - 1], sum);
                        out[t][r] = sum;
                    }
                }
            }
            return out;
        }

        /// R rows × T activation rows (R even): out[t][r] is bit-identical to
        /// `vecDot(w_rows[r], a_rows[t])`. For prompt processing: each weight block is
        /// decoded once per tile instead of once per token.
        pub fn vecDotTile(comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
            return vecDotTilePath(best_path, R, T, w_rows, a_rows);
        }

        pub fn vecDotTilePath(comptime path: Path, comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
            comptime std.debug.assert(R % 2 == 0);
            // Q4_1's 4 × T VNNI tile (quant_q4_1_tile.zig): the same bits, cheaper per token.
            if (kind == .q4_1 and path == .vnni and q4_1_tile.available and R == q4_1_tile.rows and T <= 4) {
                return q4_1_tile.tileBest(Block, T, w_rows, a_rows);
            }
            return tile(path, R / 2, T, false, w_rows, a_rows);
        }

        /// R rows × T activation rows (R even) in the repacked order (see `repack_rows`):
        /// out[t][r] is bit-identical to `vecDotRepacked(w_rows[r], a_rows[t])`.
        pub fn vecDotTileRepacked(comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
            comptime std.debug.assert(R % 2 == 0);
            if (comptime (R / 2 * T) % 8 == 0) return tileRepackedFold(best_path, R / 2, T, w_rows, a_rows);
            return tile(best_path, R / 2, T, true, w_rows, a_rows);
        }

        /// `tile` in the repacked order for P·T a multiple of 8 (e.g. 4 rows × 4 tokens):
        /// the P·T vectors of 16 exact int32 lanes of a block are summed per (token, row)
        /// by a tree of two-source shuffles and adds (`FoldPlan`: integer, so exact), which
        /// leaves one lane per (token, row); then one vector fma per 16 of them,
        /// acc = fma(sum, dw·da, acc), the scalar `vecDotRepacked` step lane by lane.
        fn tileRepackedFold(comptime path: Path, comptime P: usize, comptime T: usize, w_rows: [2 * P][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][2 * P]f32 {
            @setEvalBranchQuota(1_000_000);
            const Plan = FoldPlan(P, T);
            const plan = comptime Plan.make();
            const F = Plan.final_count;
            const n = a_rows[0].len;
            inline for (0..2 * P) |r| std.debug.assert(w_rows[r].len == n);
            inline for (0..T) |t| std.debug.assert(a_rows[t].len == n);
            var acc: [F]F32x16 = @splat(@splat(0));
            const n_vec = if (kind == .iq4_nl) n & ~@as(usize, 1) else n;
            for (0..n_vec) |b| {
                var u: [P]U8x64 = undefined;
                var dw: @Vector(2 * P, f32) = undefined;
                inline for (0..P) |p| {
                    const wr = &w_rows[2 * p][b];
                    const ws = &w_rows[2 * p + 1][b];
                    if (prefetch_bytes > 0) {
                        @prefetch(@as([*]const u8, @ptrCast(wr)) + prefetch_bytes, .{ .locality = 2 });
                        @prefetch(@as([*]const u8, @ptrCast(ws)) + prefetch_bytes, .{ .locality = 2 });
                    }
                    u[p] = unpackTwoRows(wr, ws);
                    dw[2 * p] = wr.d;
                    dw[2 * p + 1] = ws.d;
                }
                var da: @Vector(T, f32) = undefined;
                var v: [P * T]I32x16 = undefined;
                inline for (0..T) |t| {
                    const ab = &a_rows[t][b];
                    const aq: @Vector(32, i8) = ab.qs;
                    const av: I8x64 = @shuffle(i8, aq, undefined, halves_twice);
                    const shared = actShared(path, av);
                    da[t] = ab.d;
                    inline for (0..P) |p| v[t * P + p] = pairLanes(path, u[p], av, shared);
                }
                inline for (0..Plan.levels) |level| {
                    inline for (0..(P * T) >> (level + 1)) |k| {
                        v[k] = @shuffle(i32, v[2 * k], v[2 * k + 1], plan.even[level][k]) +%
                            @shuffle(i32, v[2 * k], v[2 * k + 1], plan.odd[level][k]);
                    }
                }
                inline for (0..F) |k| {
                    const sc = @shuffle(f32, dw, undefined, plan.row_of[k]) * @shuffle(f32, da, undefined, plan.token_of[k]);
                    acc[k] = @mulAdd(F32x16, @floatFromInt(v[k]), sc, acc[k]);
                }
            }
            var out: [T][2 * P]f32 = undefined;
            inline for (0..T) |t| {
                inline for (0..2 * P) |r| {
                    const at = plan.lane_of[t][r];
                    out[t][r] = acc[at[0]][at[1]];
                    if (kind == .iq4_nl and n % 2 == 1) out[t][r] = iq4nlTail(w_rows[r][n - 1], a_rows[t][n - 1], out[t][r]);
                }
            }
            return out;
        }

        /// The types with a 16-row wide kernel (one u32 lane per row): Q4_0 and IQ4_NL,
        /// the two llama.cpp repacks, whose repacked order is one fma per block per row.
        const has_wide = kind == .q4_0 or kind == .iq4_nl;

        /// Q4_1's load-time layout: 4-row groups for its VNNI tile (quant_q4_1_tile.zig).
        /// llama.cpp does not repack Q4_1; the layout only saves the tile its per-row
        /// gathers and shuffles, and it sums in `vecDot`'s order.
        const has_groups = kind == .q4_1 and has_vnni_path and q4_1_tile.available;

        /// The 16-row kernel runs on AVX-512 VNNI.
        const has_wide16 = has_wide and has_vnni_path;

        /// The 8-row kernel of Q4_0 and IQ4_NL on AVX2 without AVX-512 VNNI (the rows of
        /// llama.cpp's `block_q4_0x8` and `block_iq4_nlx8`, which its AVX2 build repacks
        /// to): one u32 lane of a 256-bit vector per row, `vpmaddubsw`/`vpmaddwd` in place
        /// of `vpdpbusd` (IQ4_NL through the sign trick: its unsigned codes, up to 241,
        /// would saturate `vpmaddubsw`'s i16 pairs).
        const has_wide8 = (kind == .q4_0 or kind == .iq4_nl) and !has_vnni_path and simd.has_avx2;

        /// Q4_1's 8-row layout on AVX2 without AVX-512 VNNI (`q4_1Wide8`): the decode step
        /// of the real SmolLM2 file is mostly Q4_1 GEMVs, and 8 rows per block column
        /// share the activation loads and vectorise the scales and the min terms.
        const has_groups8 = kind == .q4_1 and !has_vnni_path and simd.has_avx2;

        /// Rows per `vecDotWideRepacked` call: Q4_0 and IQ4_NL on AVX-512 VNNI (16), Q4_0
        /// on AVX2 (8), Q4_1 on AVX-512 VNNI (4) or AVX2 (8; Q4_1 only in its interleaved
        /// layout, as it has no `repack_rows`), 0 otherwise.
        pub const wide_rows: usize = if (has_wide16) 16 else if (has_wide8 or has_groups8) 8 else if (has_groups) q4_1_tile.rows else 0;

        /// Block b of 16 Q4_0 (or IQ4_NL) rows as the wide kernel consumes it, each u32 lane one row:
        /// the 16 quant bytes as 4 vectors (bytes 4k..4k+3 of each row in vector k) and
        /// the 16 scales. `Interleaved` (repack.zig) stores matrices in this layout at
        /// load, one group per 16 rows × 32 columns, the same 288 bytes as 16 blocks.
        /// On AVX2 (`has_wide8`) the same for 8 rows: 144 bytes, as 8 blocks.
        pub const WideGroup = if (has_wide16) extern struct {
            d: [16]f16,
            qs: [4][16]u32,
        } else if (has_wide8) extern struct {
            d: [8]f16,
            qs: [4][8]u32,
        } else if (has_groups) q4_1_tile.Group else if (has_groups8) q4_1_tile_avx2.Group else void;
        comptime {
            if (wide_rows > 0) std.debug.assert(@sizeOf(WideGroup) == wide_rows * @sizeOf(Block));
        }

        /// Writes block b of rows `w_rows` as one `WideGroup` (the load-time repack).
        pub fn wideGroupOf(w_rows: [wide_rows][]align(1) const Block, b: usize) WideGroup {
            if (comptime has_groups) return q4_1_tile.groupOf(Block, w_rows, b);
            if (comptime has_groups8) return q4_1_tile_avx2.groupOf(Block, w_rows, b);
            const g, const dv = if (comptime has_wide8) wide8Block(w_rows, b) else wideBlockQ4_0(w_rows, b);
            var out: WideGroup = .{ .d = dv, .qs = undefined };
            inline for (0..4) |k| out.qs[k] = g[k];
            return out;
        }

        /// 16 Q4_0 or IQ4_NL rows × T tokens in the repacked order (GEMV and GEMM sum
        /// alike, so `gemm` changes nothing). `w` is either 16 row slices, whose block
        /// columns are transposed on the fly (`wideBlockQ4_0`, as llama.cpp's load-time
        /// interleave gives its repacked kernels), or a slice of `WideGroup`s already in
        /// that layout; `a_rows` Q8_0 or Q8_0S activations (the latter carry Σa). Each
        /// code becomes an unsigned byte u = value + `wide_offset` (Q4_0: the nibble;
        /// IQ4_NL: its codebook value + 128, by vpshufb), one `vpdpbusd` per 4-byte
        /// activation group advances all 16 exact row sums, Σvalue·a = Σu·a −
        /// offset·Σa, then one vector fma acc = fma(sum, dw·da, acc) per token: element
        /// [t][r] is bit-identical to `vecDotRepacked(row r, a_rows[t])` whatever `w`
        /// and the activation format (IQ4_NL's odd last block included: its scalar
        /// step is the same fma).
        ///
        /// Q4_1: `w` is a slice of its `WideGroup`s, T ≤ 8 (`q4_1_tile.tileGroups`).
        pub fn vecDotWideRepacked(comptime T: usize, comptime gemm: bool, w: anytype, a_rows: anytype) [T][wide_rows]f32 {
            _ = gemm;
            if (comptime has_groups) return q4_1_tile.tileGroups(T, w, a_rows);
            if (comptime has_groups8) return q4_1Wide8(T, w, a_rows);
            if (comptime has_wide8) return wide8Tile(T, w, a_rows);
            comptime std.debug.assert(has_wide16);
            const grouped = comptime @TypeOf(w) == []align(1) const WideGroup;
            const n = a_rows[0].len;
            const base = wide.wideOperands(WideGroup, 16, w, a_rows);
            var acc: [T]F32x16 = @splat(@splat(0));
            const low4: wide.U32x16 = @splat(0x0F0F0F0F);
            for (0..n) |b| {
                // A GEMV streams the group's 16 rows (contiguous in either layout):
                // fetch the bytes a block column consumes, linearly ahead in the matrix
                // (see `simd.prefetchSpanAhead`).
                if (T <= 2) simd.prefetchSpanAhead(base, 16 * n * @sizeOf(Block), b * @sizeOf(WideGroup), @sizeOf(WideGroup));
                // (A group's quants are read as arrays: a @bitCast to vectors would let
                // the compiler assume vector alignment, and groups are 4-byte aligned.)
                const g: [4]wide.U32x16, const dh: @Vector(16, f16) = if (grouped)
                    .{ .{ w[b].qs[0], w[b].qs[1], w[b].qs[2], w[b].qs[3] }, w[b].d }
                else
                    wideBlockQ4_0(w, b);
                const dw: F32x16 = dh;
                // The unsigned byte each code stands for: Q4_0's q (value q − 8), IQ4_NL's
                // codebook value + 128 (vpshufb per 16-byte lane).
                var u_lo: [4]wide.U32x16 = undefined;
                var u_hi: [4]wide.U32x16 = undefined;
                inline for (0..4) |k| {
                    u_lo[k] = g[k] & low4;
                    u_hi[k] = (g[k] >> @splat(4)) & low4;
                    if (kind == .iq4_nl) {
                        u_lo[k] = @bitCast(pshufb64(iq4nl_table_u8, @bitCast(u_lo[k])));
                        u_hi[k] = @bitCast(pshufb64(iq4nl_table_u8, @bitCast(u_hi[k])));
                    }
                }
                const asum8 = blockSumsTimes(T, wide_offset, a_rows, b);
                inline for (0..T) |t| {
                    const ab = &a_rows[t][b];
                    var lo: I32x16 = @splat(0);
                    var hi: I32x16 = @splat(0);
                    inline for (0..4) |k| {
                        lo = wide.dpbusd16(lo, u_lo[k], @splat(actGroup(ab, 4 * k)));
                        hi = wide.dpbusd16(hi, u_hi[k], @splat(actGroup(ab, 16 + 4 * k)));
                    }
                    const sumi = (lo +% hi) -% @as(I32x16, @splat(asum8[t]));
                    const da: F32x16 = @splat(@as(f32, ab.d));
                    acc[t] = @mulAdd(F32x16, @floatFromInt(sumi), dw * da, acc[t]);
                }
            }
            return acc;
        }

        /// `vecDotWideRepacked` on AVX2 (`has_wide8`): 8 Q4_0 or IQ4_NL rows × T tokens,
        /// the same float steps as the 16-row kernel (element [t][r] bit-identical to
        /// `vecDotRepacked(row r, a_rows[t])`). Q4_0, per block and token: 8 `vpmaddubsw`
        /// of the codes q (0..15) against the broadcast 4-byte activation groups, added in
        /// i16 (8 pairs of |q·a| ≤ 15·127 each: below 2^15, exact), one `vpmaddwd` by ones
        /// gives each row's Σq·a, minus 8·Σa, then acc = fma(sum, dw·da, acc). IQ4_NL: the
        /// codebook values v (vpshufb) and |v| once per block; per token and group
        /// `vpmaddubsw`(|v|, sign(a, v)) (pairs ≤ 2·127·127 < 2^15), widened by `vpmaddwd`
        /// before the sum (two pairs could pass 2^15), as llama.cpp's AVX2 kernel. More
        /// than 4 tokens run as tiles of 4 over the same rows (16 ymm registers: 8 code
        /// vectors and 4 accumulators fit, 8 accumulators would not).
        fn wide8Tile(comptime T: usize, w: anytype, a_rows: anytype) [T][8]f32 {
            if (T > 4) {
                var out: [T][8]f32 = undefined;
                out[0..4].* = wide8Tile(4, w, a_rows[0..4].*);
                out[4..].* = wide8Tile(T - 4, w, a_rows[4..].*);
                return out;
            }
            const U32x8 = @Vector(8, u32);
            const grouped = comptime @TypeOf(w) == []align(1) const WideGroup;
            const n = a_rows[0].len;
            const base = wide.wideOperands(WideGroup, 8, w, a_rows);
            var acc: [T]F32x8 = @splat(@splat(0));
            const low4: U32x8 = @splat(0x0F0F0F0F);
            for (0..n) |b| {
                // A GEMV streams the group's 8 rows: fetch ahead linearly (see
                // `simd.prefetchSpanAhead`).
                if (T <= 2) simd.prefetchSpanAhead(base, 8 * n * @sizeOf(Block), b * @sizeOf(WideGroup), @sizeOf(WideGroup));
                const g: [4]U32x8, const dh: @Vector(8, f16) = if (grouped)
                    .{ .{ w[b].qs[0], w[b].qs[1], w[b].qs[2], w[b].qs[3] }, w[b].d }
                else
                    wide8Block(w, b);
                const dw: F32x8 = dh;
                // u[k]: elements 4k..4k+3 of each row (low nibbles), u[4 + k]: 16 + 4k..
                var u: [8]@Vector(32, u8) = undefined;
                inline for (0..4) |k| {
                    u[k] = @bitCast(g[k] & low4);
                    u[4 + k] = @bitCast((g[k] >> @splat(4)) & low4);
                }
                // IQ4_NL: the codebook values, and u their magnitudes.
                var v: [8]@Vector(32, i8) = undefined;
                if (kind == .iq4_nl) {
                    inline for (0..8) |k| {
                        v[k] = @bitCast(pshufb32(iq4nl_table_i8, u[k]));
                        u[k] = @abs(v[k]);
                    }
                }
                const asum8 = if (kind == .q4_0) blockSumsTimesAvx2(T, wide_offset, a_rows, b) else undefined;
                inline for (0..T) |t| {
                    const ab = &a_rows[t][b];
                    const sumi = if (kind == .iq4_nl)
                        wide8SignedDot(ab, u, v)
                    else
                        wide8UnsignedDot(ab, u) -% @as(@Vector(8, i32), @splat(asum8[t]));
                    const da: F32x8 = @splat(@as(f32, ab.d));
                    acc[t] = @mulAdd(F32x8, @floatFromInt(sumi), dw * da, acc[t]);
                }
            }
            var out: [T][8]f32 = undefined;
            inline for (0..T) |t| out[t] = acc[t];
            return out;
        }

        /// Each row's Σq·a of one block (`wide8Tile`, Q4_0): 8 `vpmaddubsw` of the codes
        /// against the broadcast activation groups, summed in i16, one `vpmaddwd` by ones.
        inline fn wide8UnsignedDot(ab: anytype, u: [8]@Vector(32, u8)) @Vector(8, i32) {
            var pairs: @Vector(16, i16) = @splat(0);
            inline for (0..8) |k| pairs +%= maddubs(u[k], @bitCast(wide8Group(ab, k)));
            return maddwdOnes(pairs);
        }

        /// Each row's Σv·a of one block (`wide8Tile`, IQ4_NL): per group `vpmaddubsw` of
        /// the magnitudes `mag` against the activations with the values' signs, widened
        /// by `vpmaddwd` before the sum.
        inline fn wide8SignedDot(ab: anytype, mag: [8]@Vector(32, u8), v: [8]@Vector(32, i8)) @Vector(8, i32) {
            var dot: @Vector(8, i32) = @splat(0);
            inline for (0..8) |k| {
                dot +%= maddwdOnes(maddubs(mag[k], wide.signOf(.avx2, wide8Group(ab, k), v[k])));
            }
            return dot;
        }

        /// Activation group k of a `wide8Tile` block (elements 4k..4k+3, then 16 + 4k..)
        /// broadcast to every row's lane.
        inline fn wide8Group(ab: anytype, comptime k: usize) @Vector(32, i8) {
            return @bitCast(@as(@Vector(8, i32), @splat(actGroup(ab, 4 * (k % 4) + 16 * (k / 4)))));
        }

        inline fn maddwdOnes(pairs: @Vector(16, i16)) @Vector(8, i32) {
            const ones: @Vector(16, i16) = @splat(1);
            return asm ("vpmaddwd %[ones], %[p], %[out]"
                : [out] "=x" (-> @Vector(8, i32)),
                : [p] "x" (pairs),
                  [ones] "x" (ones),
            );
        }

        /// Q4_1 on AVX2: 8 rows (a slice of `WideGroup`s, q4_1_tile_avx2.zig's `Group`) ×
        /// T tokens (`WideAct` activations) in `vecDot`'s order (ggml_vec_dot_q4_1_q8_1's
        /// AVX2 branch), element [t][r] bit-identical to `vecDot(row r, a_rows[t])`. Per
        /// chunk of blocks, the products dw·da and the min terms m·s first (exact
        /// products; the min terms added block by block, 8 rows per vector op, as ggml's
        /// `summs += m*s`), then the assembly tile carries each (row, token)'s 8-lane
        /// accumulator over the chunk, rows × tokens ≤ 8 at a time (8 rows at 1 token, 4
        /// at 2, 2 at 3-4); then ggml's `hsum_float_8` plus the min sum.
        fn q4_1Wide8(comptime T: usize, w: []align(1) const WideGroup, a_rows: anytype) [T][8]f32 {
            const avx2 = q4_1_tile_avx2;
            if (T > avx2.max_tokens) {
                var out: [T][8]f32 = undefined;
                out[0..avx2.max_tokens].* = q4_1Wide8(avx2.max_tokens, w, a_rows[0..avx2.max_tokens].*);
                out[avx2.max_tokens..].* = q4_1Wide8(T - avx2.max_tokens, w, a_rows[avx2.max_tokens..].*);
                return out;
            }
            const n = a_rows[0].len;
            std.debug.assert(n >= 1 and w.len == n);
            inline for (0..T) |t| std.debug.assert(a_rows[t].len == n);
            const pairs_per_pass = switch (T) {
                1 => 4,
                2 => 2,
                else => 1,
            };
            const passes = 4 / pairs_per_pass;
            var products: [avx2.chunk_blocks][T][8]f32 align(32) = undefined;
            var acc: [passes][2 * avx2.max_tokens][8]f32 align(32) = @splat(@splat(@splat(0)));
            var summs: [T]F32x8 = @splat(@splat(0));
            // The first pass streams the group's rows front to back: fetch ahead as
            // `simd.prefetchSpanAhead` does (later passes find them in L1/L2). A
            // 4-sequence SmolLM2 decode step at 2 threads, 6 alternating rounds: 14.5-
            // 18.7 ms with it from every token count against 14.9-19.7 at 1 token only.
            const prefetch = simd.prefetchSpans();
            const ahead_bytes = @max(simd.gemv_prefetch_ahead_bytes, n * @sizeOf(WideGroup));
            var b0: usize = 0;
            while (b0 < n) : (b0 += avx2.chunk_blocks) {
                const count = @min(avx2.chunk_blocks, n - b0);
                var a_chunk: [T][]align(1) const WideAct.Block = undefined;
                inline for (0..T) |t| a_chunk[t] = a_rows[t][b0..][0..count];
                avx2.fillProducts(T, w[b0..][0..count], a_chunk, &products, &summs);
                inline for (0..passes) |pass| {
                    var args: avx2.Args = .{
                        .w = w[b0..].ptr,
                        .x = undefined,
                        .block_count = count,
                        .prefetch_bytes = ahead_bytes,
                        .products = @ptrCast(&products),
                        .acc = &acc[pass],
                    };
                    inline for (0..avx2.max_tokens) |t| args.x[t] = @ptrCast(a_chunk[@min(t, T - 1)].ptr);
                    if (prefetch and pass == 0) {
                        avx2.run(pass * pairs_per_pass, pairs_per_pass, T, true, &args);
                    } else {
                        avx2.run(pass * pairs_per_pass, pairs_per_pass, T, false, &args);
                    }
                }
            }
            var out: [T][8]f32 = undefined;
            inline for (0..passes) |pass| {
                inline for (0..T) |t| {
                    inline for (0..2 * pairs_per_pass) |i| {
                        const r = 2 * pairs_per_pass * pass + i;
                        out[t][r] = simd.hsum(8, f32, @as(F32x8, acc[pass][t * 2 * pairs_per_pass + i])) + summs[t][r];
                    }
                }
            }
            return out;
        }

        /// Block b of 8 Q4_0 rows as `WideGroup` holds it: u32 k of row r in lane r of
        /// vector k, and the 8 scales.
        inline fn wide8Block(w_rows: [8][]align(1) const Block, b: usize) struct { [4]@Vector(8, u32), @Vector(8, f16) } {
            var h: [8]@Vector(4, u32) = undefined;
            var dv: @Vector(8, f16) = undefined;
            inline for (0..8) |r| {
                dv[r] = w_rows[r][b].d;
                h[r] = @as(*align(1) const [4]u32, @ptrCast(&w_rows[r][b].qs)).*;
            }
            return .{ wide.transpose8(4, h), dv };
        }

        /// factor·Σa of block b of each of the T activation rows: read from Q8_0S blocks,
        /// else a horizontal sum per token (`blockSumsTimes` without its VNNI folds).
        inline fn blockSumsTimesAvx2(comptime T: usize, comptime factor: i32, a_rows: anytype, b: usize) @Vector(T, i32) {
            var out: @Vector(T, i32) = undefined;
            inline for (0..T) |t| {
                out[t] = if (comptime @hasField(@TypeOf(a_rows[0][0]), "sum"))
                    factor * @as(i32, a_rows[t][b].sum)
                else
                    factor * @reduce(.Add, @as(@Vector(32, i32), @as(@Vector(32, i8), a_rows[t][b].qs)));
            }
            return out;
        }

        /// Block b of 16 Q4_0 rows, transposed so each u32 lane is one row: the 16 quant
        /// bytes as 4 vectors (bytes 4k..4k+3 of each row in vector k) and the scales.
        inline fn wideBlockQ4_0(w_rows: [16][]align(1) const Block, b: usize) struct { [4]wide.U32x16, @Vector(16, f16) } {
            var h: [16]@Vector(4, u32) = undefined;
            var dv: @Vector(16, f16) = undefined;
            inline for (0..16) |r| {
                const blk = &w_rows[r][b];
                h[r] = @as(*align(1) const [4]u32, @ptrCast(&blk.qs)).*;
                dv[r] = blk.d;
            }
            var h8: [8]@Vector(8, u32) = undefined;
            inline for (0..8) |i| h8[i] = std.simd.join(h[i], h[i + 8]);
            var g: [4]wide.U32x16 = undefined;
            inline for (0..4) |i| g[i] = std.simd.join(h8[i], h8[i + 4]);
            return .{ wide.runPlan(4, 2, wide.head_plan, g), dv };
        }

        /// The wide kernel's byte offset: value = unsigned byte − `wide_offset`.
        const wide_offset: i32 = if (kind == .iq4_nl) 128 else 8;

        /// factor·Σa of block b of each of the T activation rows (exact integers): read from
        /// Q8_0S blocks; for Q8_0, a horizontal sum per token, or for T of 4 or 8, T/2
        /// vpdpbusd against ones and a tree of even/odd shuffles and adds.
        inline fn blockSumsTimes(comptime T: usize, comptime factor: i32, a_rows: anytype, b: usize) @Vector(T, i32) {
            var out: @Vector(T, i32) = undefined;
            if (comptime @hasField(@TypeOf(a_rows[0][0]), "sum")) {
                inline for (0..T) |t| out[t] = factor * @as(i32, a_rows[t][b].sum);
                return out;
            }
            if (T != 4 and T != 8) {
                inline for (0..T) |t| {
                    const aq: @Vector(32, i8) = a_rows[t][b].qs;
                    out[t] = factor * @reduce(.Add, @as(@Vector(32, i32), aq));
                }
                return out;
            }
            const fold = comptime blk: {
                var even: [16]i32 = undefined;
                var odd: [16]i32 = undefined;
                for (0..8) |k| {
                    const ki: i32 = @intCast(k);
                    even[k] = 2 * ki;
                    odd[k] = 2 * ki + 1;
                    even[8 + k] = -1 - 2 * ki;
                    odd[8 + k] = -2 - 2 * ki;
                }
                break :blk .{ .even = even, .odd = odd };
            };
            const ones: wide.U32x16 = @splat(0x01010101);
            // Σa of token t: lanes 8·(t % 2).. of v[t / 2] hold its 8 group sums; each
            // fold level halves the lanes per token, token order kept, so in the end
            // lane t holds token t's sum.
            var v: [T / 2]I32x16 = undefined;
            inline for (0..T / 2) |i| {
                const q0: @Vector(8, u32) = @bitCast(a_rows[2 * i][b].qs);
                const q1: @Vector(8, u32) = @bitCast(a_rows[2 * i + 1][b].qs);
                v[i] = wide.dpbusd16(@splat(0), ones, @bitCast(std.simd.join(q0, q1)));
            }
            comptime var count = T / 2;
            inline while (count > 1) : (count /= 2) {
                inline for (0..count / 2) |m| v[m] = @shuffle(i32, v[2 * m], v[2 * m + 1], fold.even) +% @shuffle(i32, v[2 * m], v[2 * m + 1], fold.odd);
            }
            // One vector of T tokens × 16/T lanes: fold it into itself.
            comptime var lanes_per_token = 16 / T;
            var sums = v[0];
            inline while (lanes_per_token > 1) : (lanes_per_token /= 2) sums = @shuffle(i32, sums, sums, fold.even) +% @shuffle(i32, sums, sums, fold.odd);
            inline for (0..T) |t| out[t] = factor * sums[t];
            return out;
        }

        inline fn actGroup(ab: anytype, e: usize) i32 {
            return std.mem.readInt(i32, @as(*align(1) const [4]u8, @ptrCast(ab.qs[e..][0..4])), .little);
        }

        /// ggml's scalar step for the last block of an odd-length IQ4_NL row.
        inline fn iq4nlTail(wb: Block, ab: Act.Block, sum: f32) f32 {
            var sumi: i32 = 0;
            for (0..qk) |j| sumi += @as(i32, kvalues_iq4nl[code(wb, j)]) * ab.qs[j];
            const d = @as(f32, ab.d) * @as(f32, wb.d);
            return @mulAdd(f32, d, @floatFromInt(sumi), sum);
        }

        /// Block b of two rows in the `rowPairs` layout.
        inline fn unpackTwoRows(wr: *align(1) const Block, ws: *align(1) const Block) U8x64 {
            const qr: @Vector(16, u8) = wr.qs;
            const qs: @Vector(16, u8) = ws.qs;
            const v = std.simd.join(qr, qs);
            const lo = v & @as(@Vector(32, u8), @splat(0x0F));
            const hi = v >> @as(@Vector(32, u3), @splat(4));
            var u: U8x64 = std.simd.join(lo, hi);
            if (has_qh) {
                const hr: u64 = std.mem.readInt(u32, &wr.qh, .little);
                const hs: u64 = std.mem.readInt(u32, &ws.qh, .little);
                const bits64 = (hr & 0xFFFF) | (hs & 0xFFFF) << 16 | (hr >> 16) << 32 | (hs >> 16) << 48;
                const bits: @Vector(64, bool) = @bitCast(bits64);
                u |= @select(u8, bits, @as(U8x64, @splat(0x10)), @as(U8x64, @splat(0)));
            }
            return u;
        }

        /// The 64 codes of a block pair in element order (block 0 then block 1). For
        /// IQ4_NL these are the codebook indices.
        inline fn unpackPair(w0: *align(1) const Block, w1: *align(1) const Block) U8x64 {
            const q0: @Vector(16, u8) = w0.qs;
            const q1: @Vector(16, u8) = w1.qs;
            const v = std.simd.join(q0, q1);
            const lo = v & @as(@Vector(32, u8), @splat(0x0F));
            const hi = v >> @as(@Vector(32, u3), @splat(4));
            var u: U8x64 = @shuffle(u8, lo, hi, nibble_order);
            if (has_qh) {
                const h0 = std.mem.readInt(u32, &w0.qh, .little);
                const h1 = std.mem.readInt(u32, &w1.qh, .little);
                const bits: @Vector(64, bool) = @bitCast(@as(u64, h0) | @as(u64, h1) << 32);
                u |= @select(u8, bits, @as(U8x64, @splat(0x10)), @as(U8x64, @splat(0)));
            }
            return u;
        }

        /// Activation-only terms, shared by every row of a tile: the offset correction
        /// (−offset·Σ of each group of 4 activations) in the form each path consumes.
        const Shared = switch (offset) {
            0 => void,
            else => I32x16,
        };

        inline fn actShared(comptime path: Path, av: I8x64) Shared {
            if (offset == 0) return {};
            const off: U8x64 = @splat(offset);
            return switch (path) {
                .vnni => @as(I32x16, @splat(0)) - dpbusd(@splat(0), off, av),
                .avx2, .generic => -%dotGeneric(@as(@Vector(64, i16), off), av),
            };
        }

        /// 16 exact lanes Σ_{j<4} value[4g+j]·a[4g+j] of a block pair.
        inline fn pairLanes(comptime path: Path, u: U8x64, av: I8x64, shared: Shared) I32x16 {
            switch (path) {
                .vnni => {
                    const wu = if (kind == .iq4_nl) pshufb64(iq4nl_table_u8, u) else u;
                    const init: I32x16 = if (offset == 0) @splat(0) else shared;
                    return dpbusd(init, wu, av);
                },
                .avx2 => {
                    const lo = avx2Lanes(slice32(u8, u, 0), slice32(i8, av, 0));
                    const hi = avx2Lanes(slice32(u8, u, 1), slice32(i8, av, 1));
                    return std.simd.join(lo, hi);
                },
                .generic => {
                    if (kind == .iq4_nl) {
                        var wv: @Vector(64, i16) = undefined;
                        inline for (0..64) |i| wv[i] = kvalues_iq4nl[u[i]];
                        return dotGeneric(wv, av);
                    }
                    const lanes = dotGeneric(@as(@Vector(64, i16), u), av);
                    return if (offset == 0) lanes else lanes +% shared;
                },
            }
        }

        /// 8 lanes of one block with AVX2: `vpmaddubsw` (u ≤ 31, or |w| ≤ 127 for IQ4_NL:
        /// no i16 saturation) then `vpmaddwd` by ones.
        inline fn avx2Lanes(u: @Vector(32, u8), av: @Vector(32, i8)) @Vector(8, i32) {
            var pairs: @Vector(16, i16) = undefined;
            if (kind == .iq4_nl) {
                const wv: @Vector(32, i8) = @bitCast(pshufb32(iq4nl_table_i8, u));
                const w_abs: @Vector(32, u8) = @abs(wv);
                const a_signed = asm ("vpsignb %[w], %[x], %[out]"
                    : [out] "=x" (-> @Vector(32, i8)),
                    : [x] "x" (av),
                      [w] "x" (wv),
                );
                pairs = maddubs(w_abs, a_signed);
            } else {
                pairs = maddubs(u, av);
                if (offset != 0) pairs -%= maddubs(@splat(offset), av);
            }
            return maddwdOnes(pairs);
        }
    };
}

/// The shuffle-and-add tree of `tileRepackedFold`: P·T vectors of 16 int32 lanes, vector
/// t·P + p holding rows 2p (lanes 0-3, 8-11) and 2p+1 (lanes 4-7, 12-15) of token t, are
/// folded pairwise (out = even(a, b) + odd(a, b), each pair of source lanes from the same
/// (token, row)) until each (token, row) has one lane, in `final_count` vectors.
fn FoldPlan(comptime P: usize, comptime T: usize) type {
    return struct {
        const count0 = P * T;
        const final_count = 2 * P * T / 16;
        const levels = std.math.log2_int(usize, count0 / final_count);
        comptime {
            std.debug.assert(count0 % 8 == 0 and std.math.isPowerOfTwo(count0 / final_count));
        }
        even: [levels][count0 / 2][16]i32,
        odd: [levels][count0 / 2][16]i32,
        row_of: [final_count][16]i32,
        token_of: [final_count][16]i32,
        lane_of: [T][2 * P][2]usize,

        fn make() @This() {
            @setEvalBranchQuota(1_000_000);
            var plan: @This() = undefined;
            // keys[k][lane] = token · 2P + row.
            var keys: [count0][16]usize = undefined;
            for (0..T) |t| {
                for (0..P) |p| {
                    for (0..16) |i| keys[t * P + p][i] = t * 2 * P + 2 * p + (i / 4) % 2;
                }
            }
            var count = count0;
            for (0..levels) |level| {
                var next: [count0][16]usize = undefined;
                for (0..count / 2) |k| {
                    for (0..2) |side| {
                        const src = keys[2 * k + side];
                        // Lanes of this source sorted by key (stable): consecutive pairs share a key.
                        var order: [16]usize = undefined;
                        var m: usize = 0;
                        var key: usize = 0;
                        while (key < 2 * P * T) : (key += 1) {
                            for (0..16) |i| {
                                if (src[i] == key) {
                                    order[m] = i;
                                    m += 1;
                                }
                            }
                        }
                        for (0..8) |j| {
                            const a = order[2 * j];
                            const b = order[2 * j + 1];
                            std.debug.assert(src[a] == src[b]);
                            const base: i32 = if (side == 0) 0 else -1;
                            plan.even[level][k][8 * side + j] = if (side == 0) @intCast(a) else base - @as(i32, @intCast(a));
                            plan.odd[level][k][8 * side + j] = if (side == 0) @intCast(b) else base - @as(i32, @intCast(b));
                            next[k][8 * side + j] = src[a];
                        }
                    }
                }
                count /= 2;
                keys = next;
            }
            for (0..final_count) |k| {
                for (0..16) |i| {
                    const key = keys[k][i];
                    plan.token_of[k][i] = @intCast(key / (2 * P));
                    plan.row_of[k][i] = @intCast(key % (2 * P));
                    plan.lane_of[key / (2 * P)][key % (2 * P)] = .{ k, i };
                }
            }
            return plan;
        }
    };
}

/// lo/hi nibble vectors (32 each, bytes of block 0 then block 1) -> element order:
/// block 0 elements 0..15 (lo 0..15), 16..31 (hi 0..15), block 1 the same from 16..31.
const nibble_order = blk: {
    var mask: [64]i32 = undefined;
    for (0..64) |i| {
        const block = i / 32;
        const e = i % 32;
        mask[i] = if (e < 16) @intCast(block * 16 + e) else ~@as(i32, @intCast(block * 16 + e - 16));
    }
    break :blk mask;
};

const iq4nl_table_u8: U8x64 = blk: {
    var t: [64]u8 = undefined;
    for (0..64) |i| t[i] = @intCast(@as(i32, kvalues_iq4nl[i % 16]) + 128);
    break :blk t;
};

const iq4nl_table_i8: @Vector(32, u8) = blk: {
    var t: [32]u8 = undefined;
    for (0..32) |i| t[i] = @bitCast(kvalues_iq4nl[i % 16]);
    break :blk t;
};

inline fn slice32(comptime T: type, v: @Vector(64, T), comptime half: usize) @Vector(32, T) {
    const idx = comptime std.simd.iota(i32, 32) + @as(@Vector(32, i32), @splat(@intCast(half * 32)));
    return @shuffle(T, v, undefined, idx);
}

/// 16 lanes, lane g = Σ_{j<4} w[4g+j]·a[4g+j], exact (wrapping adds: the true sums fit).
inline fn dotGeneric(wv: @Vector(64, i16), av: I8x64) I32x16 {
    const p: @Vector(64, i32) = @as(@Vector(64, i32), wv) * @as(@Vector(64, i32), av);
    const even32 = comptime std.simd.iota(i32, 32) * @as(@Vector(32, i32), @splat(2));
    const pairs = @shuffle(i32, p, undefined, even32) +% @shuffle(i32, p, undefined, even32 + @as(@Vector(32, i32), @splat(1)));
    const even16 = comptime std.simd.iota(i32, 16) * @as(@Vector(16, i32), @splat(2));
    return @shuffle(i32, pairs, undefined, even16) +% @shuffle(i32, pairs, undefined, even16 + @as(@Vector(16, i32), @splat(1)));
}

inline fn dpbusd(acc: I32x16, u: U8x64, s: I8x64) I32x16 {
    return asm ("vpdpbusd %[s], %[u], %[acc]"
        : [acc] "=v" (-> I32x16),
        : [_] "0" (acc),
          [u] "v" (u),
          [s] "v" (s),
    );
}

inline fn pshufb64(table: U8x64, idx: U8x64) U8x64 {
    return asm ("vpshufb %[idx], %[t], %[out]"
        : [out] "=v" (-> U8x64),
        : [t] "v" (table),
          [idx] "v" (idx),
    );
}

inline fn pshufb32(table: @Vector(32, u8), idx: @Vector(32, u8)) @Vector(32, u8) {
    return asm ("vpshufb %[idx], %[t], %[out]"
        : [out] "=x" (-> @Vector(32, u8)),
        : [t] "x" (table),
          [idx] "x" (idx),
    );
}

inline fn maddubs(u: @Vector(32, u8), s: @Vector(32, i8)) @Vector(16, i16) {
    return asm ("vpmaddubsw %[s], %[u], %[out]"
        : [out] "=x" (-> @Vector(16, i16)),
        : [u] "x" (u),
          [s] "x" (s),
    );
}

/// ggml's best_index_int8 over kvalues_iq4nl: the nearest codebook entry (ties to the
/// upper one), by bisection. NaN maps to 15.
fn bestIndex(x: f32) u8 {
    const val = &kvalues_f32;
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    var ml: usize = 0;
    var mu: usize = 15;
    while (mu - ml > 1) {
        const mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav else ml = mav;
    }
    return if (x - val[mu - 1] < val[mu] - x) @intCast(mu - 1) else @intCast(mu);
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

const all_types = .{ Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL };

fn randomBlocks(comptime T: type, rnd: std.Random, blocks: []T.Block) void {
    for (blocks) |*b| {
        rnd.bytes(std.mem.asBytes(b));
        b.d = @floatCast((rnd.float(f32) * 2 - 1) * 0.05);
        if (@hasField(T.Block, "m")) b.m = @floatCast((rnd.float(f32) * 2 - 1) * 0.5);
    }
}

/// Σ_blocks |dw·da|·Σ_j |w_j·a_j| + |m·s|: the magnitude the dot-product error budget
/// is relative to.
fn dotMagnitude(comptime T: type, w: []align(1) const T.Block, a: []align(1) const T.Act.Block) f64 {
    var wf: [qk]f32 = undefined;
    var total: f64 = 0;
    for (w, a) |wb, ab| {
        T.dequantizeRow(&.{wb}, &wf);
        for (wf, ab.qs) |x, q| total += @abs(@as(f64, x) * @as(f64, ab.d) * @as(f64, @floatFromInt(q)));
        if (@hasField(T.Block, "m")) total += @abs(@as(f64, wb.m) * @as(f64, ab.s));
    }
    return total;
}

test "vecDot equals vecDotRef within rounding on random rows of awkward lengths; every path and tile bit-identical" {
    var prng = std.Random.DefaultPrng.init(11);
    const rnd = prng.random();
    inline for (all_types) |T| {
        for ([_]usize{ 1, 2, 3, 5, 17, 64, 129 }) |nb| {
            var w: [3][129]T.Block = undefined;
            var a: [129]T.Act.Block = undefined;
            var x: [129 * qk]f32 = undefined;
            for (0..3) |r| randomBlocks(T, rnd, w[r][0..nb]);
            for (x[0 .. nb * qk]) |*v| v.* = (rnd.float(f32) * 2 - 1) * 3;
            T.Act.quantizeRow(x[0 .. nb * qk], a[0..nb]);
            for (0..3) |r| {
                const ref = T.vecDotRef(w[r][0..nb], a[0..nb]);
                const fast = T.vecDot(w[r][0..nb], a[0..nb]);
                const mag = dotMagnitude(T, w[r][0..nb], a[0..nb]);
                const budget = @as(f64, @floatFromInt(nb + 16)) * std.math.floatEps(f32) * mag;
                if (@abs(@as(f64, ref) - fast) > budget) {
                    std.debug.print("{s} nb={d}: ref {e} fast {e} budget {e}\n", .{ T.name, nb, ref, fast, budget });
                    return error.TestExpectedApproxEq;
                }
                inline for (available_paths) |path| {
                    try testing.expectEqual(fast, T.vecDotPath(path, w[r][0..nb], a[0..nb]));
                }
            }
            const rows = [3][]align(1) const T.Block{ w[0][0..nb], w[1][0..nb], w[2][0..nb] };
            const tile = T.vecDotRows(3, rows, a[0..nb]);
            for (0..3) |r| try testing.expectEqual(T.vecDot(w[r][0..nb], a[0..nb]), tile[r]);
            // A 2-row × 3-token tile: tokens are the activations, itself and reversed-sign copies.
            var a2: [129]T.Act.Block = undefined;
            var a3: [129]T.Act.Block = undefined;
            for (x[0 .. nb * qk]) |*v| v.* = -v.* * 0.5;
            T.Act.quantizeRow(x[0 .. nb * qk], a2[0..nb]);
            for (x[0 .. nb * qk], 0..) |*v, i| v.* = @floatFromInt(@as(i32, @intCast(i % 7)) - 3);
            T.Act.quantizeRow(x[0 .. nb * qk], a3[0..nb]);
            const acts = [3][]align(1) const T.Act.Block{ a[0..nb], a2[0..nb], a3[0..nb] };
            inline for (available_paths) |path| {
                const got = T.vecDotTilePath(path, 2, 3, rows[1..3].*, acts);
                for (0..3) |t| for (0..2) |r| try testing.expectEqual(T.vecDot(rows[1 + r], acts[t]), got[t][r]);
            }
        }
    }
}

test "Q4_1's interleaved kernel: rows longer than a chunk of the AVX2 tile, 1-9 tokens, equal vecDot bit for bit" {
    if (Q4_1.wide_rows == 0) return error.SkipZigTest; // no interleaved Q4_1 on this target
    const W = Q4_1.wide_rows;
    // 300 blocks: more than one `q4_1_tile_avx2.chunk_blocks` run, with a short last one.
    const nb = 300;
    var prng = std.Random.DefaultPrng.init(31);
    const rnd = prng.random();
    const w = try testing.allocator.alloc(Q4_1.Block, W * nb);
    defer testing.allocator.free(w);
    randomBlocks(Q4_1, rnd, w);
    var rows: [W][]align(1) const Q4_1.Block = undefined;
    for (0..W) |r| rows[r] = w[r * nb ..][0..nb];
    const groups = try testing.allocator.alloc(Q4_1.WideGroup, nb);
    defer testing.allocator.free(groups);
    for (groups, 0..) |*g, b| g.* = Q4_1.wideGroupOf(rows, b);
    var x: [nb * qk]f32 = undefined;
    var a: [9][nb]Q4_1.Act.Block = undefined;
    var a_wide: [9][nb]Q4_1.WideAct.Block = undefined;
    for (0..9) |t| {
        for (&x) |*v| v.* = (rnd.float(f32) * 2 - 1) * @as(f32, @floatFromInt(t + 1));
        Q4_1.Act.quantizeRow(&x, &a[t]);
        Q4_1.WideAct.quantizeRow(&x, &a_wide[t]);
    }
    inline for (.{ 1, 2, 3, 4, 5, 8, 9 }) |T| {
        if (T > 8 and Q4_1.WideAct == Q4_1.Act) continue; // the VNNI tile takes up to 8
        var a_rows: [T][]align(1) const Q4_1.WideAct.Block = undefined;
        for (0..T) |t| a_rows[t] = &a_wide[t];
        const got = Q4_1.vecDotWideRepacked(T, false, @as([]align(1) const Q4_1.WideGroup, groups), a_rows);
        for (0..T) |t| {
            for (0..W) |r| try testing.expectEqual(Q4_1.vecDot(rows[r], &a[t]), got[t][r]);
        }
    }
}

test "Q4_0 and IQ4_NL in llama.cpp's repacked order: one row, 4-row and 3-row tiles equal the scalar reference bit for bit" {
    var prng = std.Random.DefaultPrng.init(23);
    const rnd = prng.random();
    inline for (.{ Q4_0, IQ4_NL }) |T| {
        comptime std.debug.assert(T.repack_rows == 8);
        for ([_]usize{ 1, 2, 3, 5, 18, 129 }) |nb| {
            var w: [4][129]T.Block = undefined;
            var a: [129]T.Act.Block = undefined;
            var x: [129 * qk]f32 = undefined;
            for (0..4) |r| randomBlocks(T, rnd, w[r][0..nb]);
            for (x[0 .. nb * qk]) |*v| v.* = (rnd.float(f32) * 2 - 1) * 3;
            T.Act.quantizeRow(x[0 .. nb * qk], a[0..nb]);
            const rows = [4][]align(1) const T.Block{ w[0][0..nb], w[1][0..nb], w[2][0..nb], w[3][0..nb] };
            const four = T.vecDotRowsRepacked(4, rows, a[0..nb]);
            const three = T.vecDotRowsRepacked(3, rows[0..3].*, a[0..nb]);
            for (0..4) |r| {
                const ref = T.vecDotRepackedRef(rows[r], a[0..nb]);
                try testing.expectEqual(ref, T.vecDotRepacked(rows[r], a[0..nb]));
                try testing.expectEqual(ref, four[r]);
                if (r < 3) try testing.expectEqual(ref, three[r]);
                // The same dot product as ggml_vec_dot_*, in another order.
                const mag = dotMagnitude(T, rows[r], a[0..nb]);
                try testing.expectApproxEqAbs(@as(f64, T.vecDot(rows[r], a[0..nb])), @as(f64, ref), @as(f64, @floatFromInt(nb + 16)) * std.math.floatEps(f32) * mag);
            }
        }
    }
}

test "extreme codes and activations: every path and tile size gives the same bits, close to the reference" {
    inline for (all_types) |T| {
        var x: [7 * qk]f32 = undefined;
        for (&x, 0..) |*v, i| v.* = if ((i / 3) % 2 == 0) 1 else -1; // quants ±127
        var a: [7]T.Act.Block = undefined;
        T.Act.quantizeRow(&x, &a);
        var w: [5][7]T.Block = undefined;
        for (&w, 0..) |*row, r| for (row, 0..) |*b, i| {
            // All-ones and all-zero codes (the largest and smallest values of each type).
            @memset(std.mem.asBytes(b), if ((r + i) % 2 == 0) 0xFF else 0x00);
            b.d = 0.5;
            if (@hasField(T.Block, "m")) b.m = -0.25;
        };
        for ([_]usize{ 1, 2, 6, 7 }) |nb| {
            var rows: [5][]align(1) const T.Block = undefined;
            for (0..5) |r| rows[r] = w[r][0..nb];
            const single = [5]f32{
                T.vecDot(rows[0], a[0..nb]), T.vecDot(rows[1], a[0..nb]), T.vecDot(rows[2], a[0..nb]),
                T.vecDot(rows[3], a[0..nb]), T.vecDot(rows[4], a[0..nb]),
            };
            inline for (available_paths) |p| {
                try testing.expectEqual(single, T.vecDotRowsPath(p, 5, rows, a[0..nb]));
                try testing.expectEqual(single[1..3].*, T.vecDotRowsPath(p, 2, rows[1..3].*, a[0..nb]));
                try testing.expectEqual(single[0], T.vecDotPath(p, rows[0], a[0..nb]));
            }
            for (0..5) |r| {
                const budget = @as(f64, @floatFromInt(nb + 16)) * std.math.floatEps(f32) * dotMagnitude(T, rows[r], a[0..nb]);
                try testing.expect(@abs(@as(f64, T.vecDotRef(rows[r], a[0..nb])) - single[r]) <= budget);
            }
        }
    }
}

test "dequantizeRow decodes hand-made blocks" {
    // Q4_0: d = 2, byte 0x1F -> element 0 = (15-8)*2, element 16 = (1-8)*2.
    var b40 = std.mem.zeroes(Q4_0.Block);
    b40.d = 2;
    b40.qs[0] = 0x1F;
    var y: [32]f32 = undefined;
    Q4_0.dequantizeRow(&.{b40}, &y);
    try testing.expectEqual(@as(f32, 14), y[0]);
    try testing.expectEqual(@as(f32, -14), y[16]);
    try testing.expectEqual(@as(f32, -16), y[1]);
    // Q5_1: qh bit 0 and bit 17 set: element 0 = (15|16)*d + m, element 17 = (0|16)*d + m.
    var b51 = std.mem.zeroes(Q5_1.Block);
    b51.d = 0.5;
    b51.m = -1;
    b51.qs[0] = 0x0F;
    std.mem.writeInt(u32, &b51.qh, (1 << 0) | (1 << 17), .little);
    Q5_1.dequantizeRow(&.{b51}, &y);
    try testing.expectEqual(@as(f32, 31 * 0.5 - 1), y[0]);
    try testing.expectEqual(@as(f32, -1), y[16]);
    try testing.expectEqual(@as(f32, 16 * 0.5 - 1), y[17]);
    // Q5_0: element 31 with its high bit: (0x0 | 16) - 16 = 0; element 30 without: -16.
    var b50 = std.mem.zeroes(Q5_0.Block);
    b50.d = 1;
    std.mem.writeInt(u32, &b50.qh, 1 << 31, .little);
    Q5_0.dequantizeRow(&.{b50}, &y);
    try testing.expectEqual(@as(f32, 0), y[31]);
    try testing.expectEqual(@as(f32, -16), y[30]);
    // IQ4_NL: codes 0 and 15.
    var bnl = std.mem.zeroes(IQ4_NL.Block);
    bnl.d = 0.25;
    bnl.qs[3] = 0xF0;
    IQ4_NL.dequantizeRow(&.{bnl}, &y);
    try testing.expectEqual(@as(f32, -127 * 0.25), y[3]);
    try testing.expectEqual(@as(f32, 113 * 0.25), y[19]);
}

test "quantizeRowRef round trips within each type's step; NaN/inf input is defined" {
    var prng = std.Random.DefaultPrng.init(5);
    const rnd = prng.random();
    inline for (all_types) |T| {
        var x: [4 * qk]f32 = undefined;
        for (&x) |*v| v.* = (rnd.float(f32) * 2 - 1) * 2;
        var blocks: [4]T.Block = undefined;
        T.quantizeRowRef(&x, &blocks);
        var y: [4 * qk]f32 = undefined;
        T.dequantizeRow(&blocks, &y);
        for (0..4) |b| {
            var amax: f32 = 0;
            for (x[b * qk ..][0..qk]) |v| amax = @max(amax, @abs(v));
            // Coarsest grid step of each type, relative to the block's range.
            const step: f32 = switch (T.ggml_type) {
                2 => amax / 8,
                3 => 2 * amax / 15,
                6 => amax / 16,
                7 => 2 * amax / 31,
                else => amax * 24 / 113,
            };
            for (x[b * qk ..][0..qk], y[b * qk ..][0..qk]) |a, c| try testing.expect(@abs(a - c) <= step * 1.01);
        }
        x[5] = std.math.nan(f32);
        x[40] = std.math.inf(f32);
        x[70] = -std.math.inf(f32);
        T.quantizeRowRef(&x, &blocks); // no safety-checked conversion may trip
    }
}

const td = @import("quant_testdata.zig");

fn expectGoldenSha(golden: std.json.Value, keys: []const []const u8, bytes: []const u8) !void {
    const want = try td.goldenString(golden, keys);
    const got = td.sha256Hex(bytes);
    if (!std.mem.eql(u8, want, &got)) {
        std.debug.print("sha256 mismatch at", .{});
        for (keys) |k| std.debug.print(" {s}", .{k});
        std.debug.print(": want {s}, got {s}\n", .{ want, &got });
        return error.TestGoldenMismatch;
    }
}

test "real SmolLM2 tensors: Q4_1 dequantization, requantization to every type, activations and dot products equal llama.cpp's bytes" {
    const allocator = testing.allocator;
    var golden = try td.readGolden(allocator, "tests/golden/quant_legacy.json");
    defer golden.deinit();
    const path = try td.testdataPath(allocator, "models/SmolLM2-135M-Instruct.Q4_1.gguf");
    defer allocator.free(path);
    var file = td.readGguf(allocator, path) catch |err| {
        std.debug.print("cannot read {s} (set DOTLLM_TESTDATA): {s}\n", .{ path, @errorName(err) });
        return err;
    };
    defer file.deinit(allocator);
    for (golden.value.object.get("views").?.array.items) |view| {
        const name = view.object.get("tensor").?.string;
        const t = file.find(name) orelse return error.TensorMissing;
        try testing.expectEqual(Q4_1.ggml_type, t.ggml_type);
        const n = t.elementCount();
        const cols: usize = switch (view.object.get("cols").?) {
            .integer => |c| @intCast(c),
            else => t.rowLength(),
        };
        const rows = n / cols;
        const nb = cols / qk;
        var key_buf: [128]u8 = undefined;
        const key = try std.fmt.bufPrint(&key_buf, "{s}@{d}", .{ name, cols });

        const src: []align(1) const Q4_1.Block = std.mem.bytesAsSlice(Q4_1.Block, try file.data(t, n / qk * @sizeOf(Q4_1.Block)));
        const x = try allocator.alloc(f32, n);
        defer allocator.free(x);
        Q4_1.dequantizeRow(src, x);
        try expectGoldenSha(golden.value, &.{ "f32", name }, std.mem.sliceAsBytes(x));

        const out = try allocator.alloc(f32, rows);
        defer allocator.free(out);
        inline for (all_types) |T| {
            const q = try allocator.alloc(T.Block, n / qk);
            defer allocator.free(q);
            for (0..rows) |r| T.quantizeRowRef(x[r * cols ..][0..cols], q[r * nb ..][0..nb]);
            try expectGoldenSha(golden.value, &.{ "quant", T.name, name }, std.mem.sliceAsBytes(q));

            var a_buf: [1536 / qk]T.Act.Block = undefined;
            const a = a_buf[0..nb];
            T.Act.quantizeRow(x[0..cols], a);
            try expectGoldenSha(golden.value, &.{ "act", T.Act.name, key }, std.mem.sliceAsBytes(a));

            for (0..rows) |r| out[r] = T.vecDot(q[r * nb ..][0..nb], a);
            try expectGoldenSha(golden.value, &.{ "dot", T.name, key }, std.mem.sliceAsBytes(out));

            // Every path and the 4-row tile give those bits; the scalar reference is close.
            var r: usize = 0;
            while (r + 4 <= rows) : (r += 4) {
                var tile_rows: [4][]align(1) const T.Block = undefined;
                for (0..4) |i| tile_rows[i] = q[(r + i) * nb ..][0..nb];
                const tile = T.vecDotRows(4, tile_rows, a);
                for (0..4) |i| try testing.expectEqual(out[r + i], tile[i]);
            }
            for (0..rows) |i| {
                const w = q[i * nb ..][0..nb];
                inline for (available_paths) |p| try testing.expectEqual(out[i], T.vecDotPath(p, w, a));
                const budget = @as(f64, @floatFromInt(nb + 16)) * std.math.floatEps(f32) * dotMagnitude(T, w, a);
                try testing.expect(@abs(@as(f64, T.vecDotRef(w, a)) - out[i]) <= budget);
            }
        }
    }
}
