//! ggml's K-quant weight types (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS: 256-element
//! super-blocks) and their activation format Q8_K, as the namespaces of
//! notes/QUANT_CONTRACT.md.
//!
//! Bit-exactness: `quantizeRowRef` and `dequantizeRow` repeat ggml's float operations in
//! ggml's order (ggml-base is compiled without `-march`, so its C has no FMA contraction;
//! Zig does not contract either). `nearestInt` is ggml's magic-number rounding and the
//! f16 conversions are ggml's bit recipes, so NaN/inf input gives ggml's bytes too and never
//! reaches a float-to-int cast (no undefined behaviour).
//!
//! Dot products: every type's dot with a Q8_K row is exact integer arithmetic per
//! super-block (16 i32 lanes of Σ scale·q·a, and for the types with mins or offsets
//! 8 lanes of bsums corrections), combined in floats exactly as llama.cpp's x86 (AVX2)
//! ggml_vec_dot_*_q8_K does: FMA into 8 float lanes, its horizontal-sum tree. So
//! `vecDot` (SIMD: AVX-512 VNNI, AVX2 or generic, chosen at comptime), `vecDotRef`
//! (scalar loops) and the reference llama.cpp build return the same bits.
const std = @import("std");
const builtin = @import("builtin");
const simd = @import("simd.zig");

/// Elements per super-block (ggml's QK_K).
pub const qk_k: usize = 256;

/// ggml's GROUP_MAX_EPS: groups whose largest |x| is below it quantize to zeros.
const group_max_eps: f32 = 1e-15;

// ---------------------------------------------------------------------------
// ggml's scalar helpers

/// ggml's nearest_int: round half to even through the float magic 1.5·2^23. Exact for
/// |x| <= 2^22; other inputs (also NaN/inf) give ggml's same garbage, never UB.
pub inline fn nearestInt(fval: f32) i32 {
    const val = fval + 12582912.0;
    const i: i32 = @bitCast(val);
    return (i & 0x007fffff) - 0x00400000;
}

/// ggml's ggml_compute_fp32_to_fp16 (round to nearest even; NaN -> 0x7e00 with sign).
pub inline fn fp32ToFp16(f: f32) f16 {
    const scale_to_inf: f32 = 0x1.0p+112;
    const scale_to_zero: f32 = 0x1.0p-110;
    var base = (@abs(f) * scale_to_inf) * scale_to_zero;
    const w: u32 = @bitCast(f);
    const shl1_w = w +% w;
    const sign = w & 0x80000000;
    var bias = shl1_w & 0xFF000000;
    if (bias < 0x71000000) bias = 0x71000000;
    base = @as(f32, @bitCast((bias >> 1) + 0x07800000)) + base;
    const bits: u32 = @bitCast(base);
    const exp_bits = (bits >> 13) & 0x00007C00;
    const mantissa_bits = bits & 0x00000FFF;
    const nonsign = exp_bits + mantissa_bits;
    const h: u16 = @truncate((sign >> 16) | (if (shl1_w > 0xFF000000) @as(u32, 0x7E00) else nonsign));
    return @bitCast(h);
}

/// ggml's ggml_compute_fp16_to_fp32 (exact; NaN payloads kept as ggml keeps them).
pub inline fn fp16ToFp32(hf: f16) f32 {
    const h: u16 = @bitCast(hf);
    const w: u32 = @as(u32, h) << 16;
    const sign = w & 0x80000000;
    const two_w = w +% w;
    const exp_offset: u32 = 0xE0 << 23;
    const exp_scale: f32 = 0x1.0p-112;
    const normalized_value = @as(f32, @bitCast((two_w >> 4) + exp_offset)) * exp_scale;
    const magic_mask: u32 = 126 << 23;
    const denormalized_value = @as(f32, @bitCast((two_w >> 17) | magic_mask)) - 0.5;
    const denormalized_cutoff: u32 = 1 << 27;
    const result = sign | (if (two_w < denormalized_cutoff) @as(u32, @bitCast(denormalized_value)) else @as(u32, @bitCast(normalized_value)));
    return @bitCast(result);
}

inline fn fi(v: anytype) f32 {
    return @floatFromInt(v);
}

/// ggml's make_qx_quants with qw == NULL (rmse_type 1: weights x²).
fn makeQxQuants(comptime n: usize, nmax: i32, x: *const [n]f32, L: *[n]i8) f32 {
    var max: f32 = 0;
    var amax: f32 = 0;
    for (x) |v| {
        const ax = @abs(v);
        if (ax > amax) {
            amax = ax;
            max = v;
        }
    }
    if (amax < group_max_eps) {
        L.* = @splat(0);
        return 0;
    }
    var iscale = fi(-nmax) / max;
    var sumlx: f32 = 0;
    var suml2: f32 = 0;
    for (x, L) |v, *q| {
        var l = nearestInt(iscale * v);
        l = @max(-nmax, @min(nmax - 1, l));
        q.* = @truncate(l + nmax);
        const w = v * v;
        sumlx += w * v * fi(l);
        suml2 += w * fi(l) * fi(l);
    }
    var scale: f32 = if (suml2 != 0) sumlx / suml2 else 0;
    var best = scale * sumlx;
    var is: i32 = -9;
    while (is <= 9) : (is += 1) {
        if (is == 0) continue;
        iscale = -(fi(nmax) + 0.1 * fi(is)) / max;
        sumlx = 0;
        suml2 = 0;
        for (x) |v| {
            var l = nearestInt(iscale * v);
            l = @max(-nmax, @min(nmax - 1, l));
            const w = v * v;
            sumlx += w * v * fi(l);
            suml2 += w * fi(l) * fi(l);
        }
        if (suml2 > 0 and sumlx * sumlx > best * suml2) {
            for (x, L) |v, *q| {
                const l = nearestInt(iscale * v);
                q.* = @truncate(nmax + @max(-nmax, @min(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/// ggml's make_q3_quants with do_rmse = true.
fn makeQ3Quants(comptime n: usize, nmax: i32, x: *const [n]f32, L: *[n]i8) f32 {
    var max: f32 = 0;
    var amax: f32 = 0;
    for (x) |v| {
        const ax = @abs(v);
        if (ax > amax) {
            amax = ax;
            max = v;
        }
    }
    if (amax < group_max_eps) {
        L.* = @splat(0);
        return 0;
    }
    const iscale = fi(-nmax) / max;
    var sumlx: f32 = 0;
    var suml2: f32 = 0;
    for (x, L) |v, *q| {
        var l = nearestInt(iscale * v);
        l = @max(-nmax, @min(nmax - 1, l));
        q.* = @truncate(l);
        const w = v * v;
        sumlx += w * v * fi(l);
        suml2 += w * fi(l) * fi(l);
    }
    for (0..5) |_| {
        var n_changed: usize = 0;
        for (x, L) |v, *q| {
            const w = v * v;
            var slx = sumlx - w * v * fi(q.*);
            if (slx > 0) {
                var sl2 = suml2 - w * fi(q.*) * fi(q.*);
                var new_l = nearestInt(v * sl2 / slx);
                new_l = @max(-nmax, @min(nmax - 1, new_l));
                if (new_l != q.*) {
                    slx += w * v * fi(new_l);
                    sl2 += w * fi(new_l) * fi(new_l);
                    if (sl2 > 0 and slx * slx * suml2 > sumlx * sumlx * sl2) {
                        q.* = @truncate(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if (n_changed == 0) break;
    }
    for (L) |*q| q.* +%= @truncate(nmax);
    return if (suml2 > 0) sumlx / suml2 else 0;
}

/// ggml's make_qkx2_quants.
fn makeQkx2Quants(
    comptime n: usize,
    nmax: i32,
    x: *const [n]f32,
    weights: *const [n]f32,
    L: *[n]u8,
    the_min: *f32,
    Laux: *[n]u8,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    comptime use_mad: bool,
) f32 {
    var min = x[0];
    var max = x[0];
    var sum_w = weights[0];
    var sum_x = sum_w * x[0];
    for (1..n) |i| {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        L.* = @splat(0);
        the_min.* = -min;
        return 0;
    }
    var iscale = fi(nmax) / (max - min);
    var scale = 1 / iscale;
    var best_error: f32 = 0;
    for (0..n) |i| {
        const l = nearestInt(iscale * (x[i] - min));
        L[i] = @intCast(@max(0, @min(nmax, l)));
        var diff = scale * fi(L[i]) + min - x[i];
        diff = if (use_mad) @abs(diff) else diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        the_min.* = -min;
        return scale;
    }
    var is: i32 = 0;
    while (is <= nstep) : (is += 1) {
        iscale = (rmin + rdelta * fi(is) + fi(nmax)) / (max - min);
        var sum_l: f32 = 0;
        var sum_l2: f32 = 0;
        var sum_xl: f32 = 0;
        for (0..n) |i| {
            var l = nearestInt(iscale * (x[i] - min));
            l = @max(0, @min(nmax, l));
            Laux[i] = @intCast(l);
            const w = weights[i];
            sum_l += w * fi(l);
            sum_l2 += w * fi(l) * fi(l);
            sum_xl += w * fi(l) * x[i];
        }
        const D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            var this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            var this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            var cur_error: f32 = 0;
            for (0..n) |i| {
                var diff = this_scale * fi(Laux[i]) + this_min - x[i];
                diff = if (use_mad) @abs(diff) else diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                L.* = Laux.*;
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    the_min.* = -min;
    return scale;
}

/// ggml's get_scale_min_k4: the j-th 6-bit scale and min of a Q4_K/Q5_K block.
inline fn getScaleMinK4(j: usize, q: *const [12]u8) struct { u8, u8 } {
    if (j < 4) return .{ q[j] & 63, q[j + 4] & 63 };
    return .{ (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4) };
}

/// Packs Q4_K/Q5_K's 8 scales and 8 mins (6 bits each) as ggml does.
fn packScalesMinsK4(ls_all: [8]u8, lm_all: [8]u8, scales: *[12]u8) void {
    for (0..8) |j| {
        const ls = ls_all[j];
        const lm = lm_all[j];
        if (j < 4) {
            scales[j] = ls;
            scales[j + 4] = lm;
        } else {
            scales[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            scales[j - 4] |= ((ls >> 4) << 6);
            scales[j] |= ((lm >> 4) << 6);
        }
    }
}

/// Shared part of Q4_K and Q5_K ref quantization: the super-block's scales, mins and
/// final levels L (0..nmax).
fn quantizeScalesMinsK(x: *const [qk_k]f32, nmax: i32, rmin: f32, nstep: i32, d_out: *f16, dmin_out: *f16, scales_out: *[12]u8, L: *[qk_k]u8) void {
    var Laux: [32]u8 = undefined;
    var weights: [32]f32 = undefined;
    var mins: [8]f32 = undefined;
    var scales: [8]f32 = undefined;
    var max_scale: f32 = 0;
    var max_min: f32 = 0;
    for (0..8) |j| {
        const xb = x[32 * j ..][0..32];
        var sum_x2: f32 = 0;
        for (xb) |v| sum_x2 += v * v;
        const av_x = @sqrt(sum_x2 / 32);
        for (xb, &weights) |v, *w| w.* = av_x + @abs(v);
        scales[j] = makeQkx2Quants(32, nmax, xb, &weights, L[32 * j ..][0..32], &mins[j], &Laux, rmin, 0.1, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const inv_scale: f32 = if (max_scale > 0) 63.0 / max_scale else 0;
    const inv_min: f32 = if (max_min > 0) 63.0 / max_min else 0;
    var ls: [8]u8 = undefined;
    var lm: [8]u8 = undefined;
    for (0..8) |j| {
        ls[j] = @min(63, @as(u8, @truncate(@as(u32, @bitCast(nearestInt(inv_scale * scales[j]))))));
        lm[j] = @min(63, @as(u8, @truncate(@as(u32, @bitCast(nearestInt(inv_min * mins[j]))))));
    }
    scales_out.* = @splat(0);
    packScalesMinsK4(ls, lm, scales_out);
    d_out.* = fp32ToFp16(max_scale / 63.0);
    dmin_out.* = fp32ToFp16(max_min / 63.0);
    for (0..8) |j| {
        const sc, const m = getScaleMinK4(j, scales_out);
        const d = fp16ToFp32(d_out.*) * fi(sc);
        if (d == 0) continue;
        const dm = fp16ToFp32(dmin_out.*) * fi(m);
        for (0..32) |ii| {
            const l = nearestInt((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = @intCast(@max(0, @min(nmax, l)));
        }
    }
}

/// ggml's kvalues_iq4nl.
pub const kvalues_iq4nl = [16]i8{ -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

/// ggml's best_index_int8 over kvalues_iq4nl.
inline fn bestIndexIq4(x: f32) u8 {
    const val = &kvalues_iq4nl;
    if (x <= fi(val[0])) return 0;
    if (x >= fi(val[15])) return 15;
    var ml: usize = 0;
    var mu: usize = 15;
    while (mu - ml > 1) {
        const mav = (ml + mu) / 2;
        if (x < fi(val[mav])) mu = mav else ml = mav;
    }
    return if (x - fi(val[mu - 1]) < fi(val[mu]) - x) @intCast(mu - 1) else @intCast(mu);
}

// ---------------------------------------------------------------------------
// Q8_K: the activation format

pub const Q8_K = struct {
    pub const name = "q8_K";
    pub const block_elems: usize = qk_k;
    /// ggml's block_q8_K: f32 scale, 256 quants, sums of each 16 quants.
    pub const Block = extern struct { d: f32, qs: [qk_k]i8, bsums: [qk_k / 16]i16 };
    comptime {
        std.debug.assert(@sizeOf(Block) == 292);
    }

    /// ggml's quantize_row_q8_K_ref (what the CPU backend uses on every arch here), in
    /// vectors: the same bytes as `quantizeRowRef` (the steps below are exact or
    /// element-wise). An all-zero block also gets zero bsums (ggml leaves them as they
    /// were; they are unused there since d = 0). The scalar search for the signed max was
    /// a 256-step dependency chain per block: ~2 ns an element, 0.8% of a 1B Q4_K_M
    /// decode step at 1 thread.
    pub fn quantizeRow(x: []const f32, y: []align(1) Block) void {
        std.debug.assert(x.len == y.len * qk_k);
        const V = @Vector(16, f32);
        for (y, 0..) |*b, i| {
            const xb = x[i * qk_k ..][0..qk_k];
            // amax: lane-wise `ax > amax` as ggml compares (a NaN never wins), then the
            // same over the lanes; the max of a set does not depend on the order.
            var am: V = @splat(0);
            inline for (0..16) |k| {
                const ax = @abs(@as(V, xb[16 * k ..][0..16].*));
                am = @select(f32, ax > am, ax, am);
            }
            var amax: f32 = 0;
            inline for (0..16) |k| {
                if (am[k] > amax) amax = am[k];
            }
            if (amax == 0) {
                b.d = 0;
                b.qs = @splat(0);
                b.bsums = @splat(0);
                continue;
            }
            // max: ggml keeps the first element whose |x| reaches amax (a later equal
            // one does not replace it), so the first index with |x| == amax.
            const max = blk: {
                inline for (0..16) |k| {
                    const hit: u16 = @bitCast(@abs(@as(V, xb[16 * k ..][0..16].*)) == @as(V, @splat(amax)));
                    if (hit != 0) break :blk xb[16 * k + @ctz(hit)];
                }
                unreachable;
            };
            const iscale = -127.0 / max;
            inline for (0..16) |k| {
                const v: V = xb[16 * k ..][0..16].*;
                // nearestInt lane-wise: the float magic, then the bit arithmetic.
                const bits: @Vector(16, i32) = @bitCast(v * @as(V, @splat(iscale)) + @as(V, @splat(12582912.0)));
                const n = (bits & @as(@Vector(16, i32), @splat(0x007fffff))) - @as(@Vector(16, i32), @splat(0x00400000));
                const q: @Vector(16, i8) = @truncate(@min(@as(@Vector(16, i32), @splat(127)), n));
                b.qs[16 * k ..][0..16].* = q;
                b.bsums[k] = @truncate(@reduce(.Add, @as(@Vector(16, i32), q)));
            }
            b.d = 1 / iscale;
        }
    }

    /// `quantizeRow` element by element, as ggml writes it: the reference the tests
    /// compare the vector code with.
    pub fn quantizeRowRef(x: []const f32, y: []align(1) Block) void {
        std.debug.assert(x.len == y.len * qk_k);
        for (y, 0..) |*b, i| {
            const xb = x[i * qk_k ..][0..qk_k];
            var max: f32 = 0;
            var amax: f32 = 0;
            for (xb) |v| {
                const ax = @abs(v);
                if (ax > amax) {
                    amax = ax;
                    max = v;
                }
            }
            if (amax == 0) {
                b.d = 0;
                b.qs = @splat(0);
                b.bsums = @splat(0);
                continue;
            }
            const iscale = -127.0 / max;
            for (xb, &b.qs) |v, *q| q.* = @truncate(@min(127, nearestInt(iscale * v)));
            for (0..16) |j| {
                var sum: i32 = 0;
                for (b.qs[16 * j ..][0..16]) |q| sum += q;
                b.bsums[j] = @truncate(sum);
            }
            b.d = 1 / iscale;
        }
    }

    /// ggml's dequantize_row_q8_K.
    pub fn dequantizeRow(x: []align(1) const Block, y: []f32) void {
        std.debug.assert(y.len == x.len * qk_k);
        for (x, 0..) |b, i| {
            for (b.qs, y[i * qk_k ..][0..qk_k]) |q, *o| o.* = b.d * fi(q);
        }
    }
};

/// Q8_K with each block's 256 quants in the order of `Q6_K.Planes`' levels
/// (`Q6_K.planes_order`): the activations of `Q6_KPlanes`, so its kernels load a
/// vector of levels and the matching vector of activations. d and bsums as Q8_K's.
pub const Q8_KP = struct {
    pub const name = "q8_K_planes";
    pub const block_elems: usize = qk_k;
    pub const Block = Q8_K.Block;

    /// `Q8_K.quantizeRow`, each block's quants then put in planes order.
    pub fn quantizeRow(x: []const f32, y: []align(1) Block) void {
        Q8_K.quantizeRow(x, y);
        for (y) |*b| b.qs = Q6_K.toPlanesOrder(i8, b.qs);
    }
};

// ---------------------------------------------------------------------------
// SIMD primitives. A "chunk" is 64 consecutive elements of a super-block: 64 unsigned
// weight levels u (or |w| for IQ4_XS), the matching 64 activation bytes s, and one i16
// scale per element pair. Its contribution is Σ_k scale_k·(u_2k·s_2k + u_2k+1·s_2k+1),
// exact in i32 (callers keep u·s pairs below 2^15, as vpmaddubsw needs).

pub const Path = enum { avx512vnni, avx2, generic };

/// The path the target's features allow.
pub const default_path: Path = if (simd.has_avx512vnni and
    std.Target.x86.featureSetHas(builtin.cpu.features, .avx512bw))
    .avx512vnni
else if (simd.has_avx2)
    .avx2
else
    .generic;

const U8x64 = @Vector(64, u8);
const I8x64 = @Vector(64, i8);
const I16x32 = @Vector(32, i16);
const I32x16 = @Vector(16, i32);
const U8x32 = @Vector(32, u8);
const I8x32 = @Vector(32, i8);
const I16x16 = @Vector(16, i16);
const I32x8 = @Vector(8, i32);

fn lowHalfMask(comptime n: usize) [n / 2]i32 {
    @setEvalBranchQuota(100_000);
    var m: [n / 2]i32 = undefined;
    for (0..n / 2) |i| m[i] = @intCast(i);
    return m;
}
fn highHalfMask(comptime n: usize) [n / 2]i32 {
    @setEvalBranchQuota(100_000);
    var m: [n / 2]i32 = undefined;
    for (0..n / 2) |i| m[i] = @intCast(n / 2 + i);
    return m;
}
fn concatMask(comptime n: usize) [2 * n]i32 {
    @setEvalBranchQuota(100_000);
    var m: [2 * n]i32 = undefined;
    for (0..n) |i| {
        m[i] = @intCast(i);
        m[n + i] = ~@as(i32, @intCast(i));
    }
    return m;
}
fn evenMask(comptime n: usize) [n / 2]i32 {
    @setEvalBranchQuota(100_000);
    var m: [n / 2]i32 = undefined;
    for (0..n / 2) |i| m[i] = @intCast(2 * i);
    return m;
}
fn oddMask(comptime n: usize) [n / 2]i32 {
    @setEvalBranchQuota(100_000);
    var m: [n / 2]i32 = undefined;
    for (0..n / 2) |i| m[i] = @intCast(2 * i + 1);
    return m;
}

inline fn lo(comptime T: type, comptime n: usize, v: @Vector(n, T)) @Vector(n / 2, T) {
    return @shuffle(T, v, undefined, lowHalfMask(n));
}
inline fn hi(comptime T: type, comptime n: usize, v: @Vector(n, T)) @Vector(n / 2, T) {
    return @shuffle(T, v, undefined, highHalfMask(n));
}
inline fn concat(comptime T: type, comptime n: usize, a: @Vector(n, T), b: @Vector(n, T)) @Vector(2 * n, T) {
    return @shuffle(T, a, b, concatMask(n));
}

/// acc + maddubs(u, s) in i16 lanes (wrapping, as `+%`), as one opaque step: LLVM
/// reassociates a chain of `+%` into trees of partial sums, which in `q4kWide8`'s 3-4
/// token tiles kept more registers live than AVX2 has and spilled the accumulators
/// (205 vector moves in the 4-token tile against 97 with this; the same integers).
inline fn maddubsAdd256(acc: I16x16, u: U8x32, s: I8x32) I16x16 {
    return asm ("vpaddw %[p], %[acc], %[out]"
        : [out] "=x" (-> I16x16),
        : [acc] "x" (acc),
          [p] "x" (maddubs256(u, s)),
    );
}

inline fn maddubs256(u: U8x32, s: I8x32) I16x16 {
    return asm ("vpmaddubsw %[s], %[u], %[out]"
        : [out] "=x" (-> I16x16),
        : [u] "x" (u),
          [s] "x" (s),
    );
}
/// table[idx] within each 128-bit lane (idx < 16): vpshufb ymm.
inline fn pshufb256(table: U8x32, idx: U8x32) U8x32 {
    return asm ("vpshufb %[i], %[t], %[out]"
        : [out] "=x" (-> U8x32),
        : [t] "x" (table),
          [i] "x" (idx),
    );
}
inline fn maddwd256(a: I16x16, b: I16x16) I32x8 {
    return asm ("vpmaddwd %[b], %[a], %[out]"
        : [out] "=x" (-> I32x8),
        : [a] "x" (a),
          [b] "x" (b),
    );
}

/// acc + Σ pairs(scale · Σ pairs(u·s)): the chunk's contribution in 16 i32 lanes.
inline fn chunkDot(comptime path: Path, acc: I32x16, u: U8x64, s: I8x64, scale: I16x32) I32x16 {
    switch (path) {
        .avx512vnni => {
            const p = asm ("vpmaddubsw %[s], %[u], %[out]"
                : [out] "=v" (-> I16x32),
                : [u] "v" (u),
                  [s] "v" (s),
            );
            return asm ("vpdpwssd %[sc], %[p], %[acc]"
                : [acc] "=v" (-> I32x16),
                : [_] "0" (acc),
                  [p] "v" (p),
                  [sc] "v" (scale),
            );
        },
        .avx2 => {
            const p0 = maddubs256(lo(u8, 64, u), lo(i8, 64, s));
            const p1 = maddubs256(hi(u8, 64, u), hi(i8, 64, s));
            const q0 = maddwd256(p0, lo(i16, 32, scale));
            const q1 = maddwd256(p1, hi(i16, 32, scale));
            return acc + concat(i32, 8, q0, q1);
        },
        .generic => {
            const prod = @as(@Vector(64, i16), u) * @as(@Vector(64, i16), s);
            const p = @shuffle(i16, prod, undefined, evenMask(64)) + @shuffle(i16, prod, undefined, oddMask(64));
            const q = @as(I32x16, @shuffle(i16, p, undefined, evenMask(32))) * @as(I32x16, @shuffle(i16, scale, undefined, evenMask(32))) +
                @as(I32x16, @shuffle(i16, p, undefined, oddMask(32))) * @as(I32x16, @shuffle(i16, scale, undefined, oddMask(32)));
            return acc + q;
        },
    }
}

/// Half a chunk (32 elements) into 8 i32 lanes, lane k = elements 4k..4k+3: the same
/// sums as lanes 0-7 (first half) or 8-15 (second half) of chunkDot, in 256-bit registers
/// (cheaper than 512-bit ones where the data comes in 32-byte halves, as Q4_K's nibbles do).
inline fn halfDot(comptime path: Path, acc: I32x8, u: U8x32, s: I8x32, scale: I16x16) I32x8 {
    switch (path) {
        .avx512vnni => {
            const p = maddubs256(u, s);
            return asm ("vpdpwssd %[sc], %[p], %[acc]"
                : [acc] "=v" (-> I32x8),
                : [_] "0" (acc),
                  [p] "v" (p),
                  [sc] "v" (scale),
            );
        },
        .avx2 => return acc + maddwd256(maddubs256(u, s), scale),
        .generic => {
            const prod = @as(@Vector(32, i16), u) * @as(@Vector(32, i16), s);
            const p = @shuffle(i16, prod, undefined, evenMask(32)) + @shuffle(i16, prod, undefined, oddMask(32));
            const q = @as(I32x8, @shuffle(i16, p, undefined, evenMask(16))) * @as(I32x8, @shuffle(i16, scale, undefined, evenMask(16))) +
                @as(I32x8, @shuffle(i16, p, undefined, oddMask(16))) * @as(I32x8, @shuffle(i16, scale, undefined, oddMask(16)));
            return acc + q;
        },
    }
}

/// i16 lane k of 32-element piece `piece` gets scales16[(32·piece + 2k) / 16].
fn pieceMask(comptime piece: usize) [16]i32 {
    var m: [16]i32 = undefined;
    for (0..16) |k| m[k] = @intCast((32 * piece + 2 * k) / 16);
    return m;
}

/// halfDot of (u − off)·s (llama.cpp's Q3_K order: the offset per element pair).
inline fn halfDotOffset(comptime path: Path, acc: I32x8, u: U8x32, s: I8x32, scale: I16x16, comptime off: u8) I32x8 {
    const offv: U8x32 = @splat(off);
    switch (path) {
        .avx512vnni => {
            const p = asm ("vpmaddubsw %[s], %[u], %[out]"
                : [out] "=v" (-> I16x16),
                : [u] "v" (u),
                  [s] "v" (s),
            );
            const q = asm ("vpmaddubsw %[s], %[u], %[out]"
                : [out] "=v" (-> I16x16),
                : [u] "v" (offv),
                  [s] "v" (s),
            );
            return asm ("vpdpwssd %[sc], %[p], %[acc]"
                : [acc] "=v" (-> I32x8),
                : [_] "0" (acc),
                  [p] "v" (p -% q),
                  [sc] "v" (scale),
            );
        },
        .avx2 => return acc + maddwd256(maddubs256(u, s) -% maddubs256(offv, s), scale),
        .generic => {
            const prod = (@as(@Vector(32, i16), u) - @as(@Vector(32, i16), @splat(off))) * @as(@Vector(32, i16), s);
            const p = @shuffle(i16, prod, undefined, evenMask(32)) + @shuffle(i16, prod, undefined, oddMask(32));
            const q = @as(I32x8, @shuffle(i16, p, undefined, evenMask(16))) * @as(I32x8, @shuffle(i16, scale, undefined, evenMask(16))) +
                @as(I32x8, @shuffle(i16, p, undefined, oddMask(16))) * @as(I32x8, @shuffle(i16, scale, undefined, oddMask(16)));
            return acc + q;
        },
    }
}

inline fn actHalf(a: *align(1) const Q8_K.Block, h: usize) I8x32 {
    return @as(*align(1) const [32]i8, @ptrCast(a.qs[32 * h ..][0..32])).*;
}

/// chunkDot of (u − off)·s: the offset subtracted per element pair before the scales
/// (as llama.cpp's Q3_K kernel does), so each lane holds Σ scale·(u − off)·s of its own
/// elements. |pairs| stay below 2^15 for u ≤ 7.
inline fn chunkDotOffset(comptime path: Path, acc: I32x16, u: U8x64, s: I8x64, scale: I16x32, comptime off: u8) I32x16 {
    switch (path) {
        .avx512vnni => {
            const offv: U8x64 = @splat(off);
            const p = asm ("vpmaddubsw %[s], %[u], %[out]"
                : [out] "=v" (-> I16x32),
                : [u] "v" (u),
                  [s] "v" (s),
            );
            const q = asm ("vpmaddubsw %[s], %[u], %[out]"
                : [out] "=v" (-> I16x32),
                : [u] "v" (offv),
                  [s] "v" (s),
            );
            return asm ("vpdpwssd %[sc], %[p], %[acc]"
                : [acc] "=v" (-> I32x16),
                : [_] "0" (acc),
                  [p] "v" (p -% q),
                  [sc] "v" (scale),
            );
        },
        .avx2 => {
            const offv: U8x32 = @splat(off);
            const s0 = lo(i8, 64, s);
            const s1 = hi(i8, 64, s);
            const p0 = maddubs256(lo(u8, 64, u), s0) -% maddubs256(offv, s0);
            const p1 = maddubs256(hi(u8, 64, u), s1) -% maddubs256(offv, s1);
            return acc + concat(i32, 8, maddwd256(p0, lo(i16, 32, scale)), maddwd256(p1, hi(i16, 32, scale)));
        },
        .generic => {
            const prod = (@as(@Vector(64, i16), u) - @as(@Vector(64, i16), @splat(off))) * @as(@Vector(64, i16), s);
            const p = @shuffle(i16, prod, undefined, evenMask(64)) + @shuffle(i16, prod, undefined, oddMask(64));
            const q = @as(I32x16, @shuffle(i16, p, undefined, evenMask(32))) * @as(I32x16, @shuffle(i16, scale, undefined, evenMask(32))) +
                @as(I32x16, @shuffle(i16, p, undefined, oddMask(32))) * @as(I32x16, @shuffle(i16, scale, undefined, oddMask(32)));
            return acc + q;
        },
    }
}

/// i16 lane k of chunk c gets scales[(64c + 2k) / group] (group = elements per scale).
fn scaleMask(comptime groups: usize, comptime group: usize, comptime c: usize) [32]i32 {
    @setEvalBranchQuota(100_000);
    var m: [32]i32 = undefined;
    for (0..32) |k| m[k] = @intCast(((64 * c + 2 * k) / group) % groups);
    return m;
}

inline fn loadBytes(comptime n: usize, p: *align(1) const [n]u8) @Vector(n, u8) {
    return p.*;
}

inline fn actChunk(a: *align(1) const Q8_K.Block, c: usize) I8x64 {
    return @as(*align(1) const [64]i8, @ptrCast(a.qs[64 * c ..][0..64])).*;
}

inline fn f16f(h: f16) f32 {
    return h; // exact, the same value as fp16ToFp32 for every non-NaN input
}

/// llama.cpp's x86 float order for Q4_K (`scalar_min` false) and Q5_K (true), as its
/// AVX2 ggml_vec_dot_q{4,5}_K_q8_K runs it: per super-block acc += d·(8 i32 lanes) with
/// FMA, the mins either as 4 more FMA lanes (Q4_K) or as a scalar Σ dmin·summs (Q5_K);
/// at the end hsum(acc) (+ hsum(acc_m)) + summs. The 8 lanes are chunkDot's 16 folded
/// (lane k + lane k+8), the mins lanes pairs of maddwd16's 8.
fn GgmlMinAcc(comptime scalar_min: bool) type {
    return struct {
        acc: @Vector(8, f32) = @splat(0),
        acc_m: @Vector(4, f32) = @splat(0),
        summs: f32 = 0,

        inline fn add(self: *@This(), lanes: I32x16, d: f32, sub: I32x8, dmin: f32) void {
            const l8 = lo(i32, 16, lanes) + hi(i32, 16, lanes);
            self.acc = @mulAdd(@Vector(8, f32), @splat(d), @floatFromInt(l8), self.acc);
            const p4 = @shuffle(i32, sub, undefined, [4]i32{ 0, 2, 4, 6 }) + @shuffle(i32, sub, undefined, [4]i32{ 1, 3, 5, 7 });
            if (scalar_min) {
                self.summs = @mulAdd(f32, -dmin, @floatFromInt(@reduce(.Add, p4)), self.summs);
            } else {
                self.acc_m = @mulAdd(@Vector(4, f32), @splat(-dmin), @floatFromInt(p4), self.acc_m);
            }
        }

        inline fn result(self: @This()) f32 {
            if (scalar_min) return simd.hsum(8, f32, self.acc) + self.summs;
            return simd.hsum(8, f32, self.acc) + simd.hsum(4, f32, self.acc_m);
        }
    };
}

/// The float order of llama.cpp's repacked x86 kernels (`ggml_gemv/gemm_q4_K_8x8_q8_K`,
/// used for matrices whose row count is a multiple of 8): per super-block, the whole
/// block's integer sum and its min sum, each converted to f32 and accumulated by
/// acc = fma(sum, d, acc) and acc_m = fma(min_sum, dmin, acc_m); the result acc − acc_m.
const RepackedMinAcc = struct {
    acc: f32 = 0,
    acc_m: f32 = 0,

    inline fn add(self: *RepackedMinAcc, lanes: I32x16, d: f32, sub: I32x8, dmin: f32) void {
        self.acc = @mulAdd(f32, @floatFromInt(@reduce(.Add, lanes)), d, self.acc);
        self.acc_m = @mulAdd(f32, @floatFromInt(@reduce(.Add, sub)), dmin, self.acc_m);
    }

    inline fn result(self: RepackedMinAcc) f32 {
        return self.acc - self.acc_m;
    }
};

/// The order of llama.cpp's repacked x86 GEMM (`ggml_gemm_q4_K_8x8_q8_K`, tokens in
/// groups of 4): the same, but one fma per 64-element pair of sub-blocks.
const RepackedMinAccGemm = struct {
    acc: f32 = 0,
    acc_m: f32 = 0,
    pub const per_pair = true;

    inline fn addPair(self: *RepackedMinAccGemm, sum: i32, d: f32, min_sum: i32, dmin: f32) void {
        self.acc = @mulAdd(f32, @floatFromInt(sum), d, self.acc);
        self.acc_m = @mulAdd(f32, @floatFromInt(min_sum), dmin, self.acc_m);
    }

    inline fn result(self: RepackedMinAccGemm) f32 {
        return self.acc - self.acc_m;
    }
};

/// llama.cpp's x86 float order for Q6_K (shift 5: the −32 offset): per super-block
/// acc += d·(8 i32 lanes − (correction lanes << shift)) with FMA; hsum(acc) at the end.
fn GgmlShiftAcc(comptime shift: u5) type {
    return struct {
        acc: @Vector(8, f32) = @splat(0),

        inline fn add(self: *@This(), lanes: I32x16, d: f32, sub: I32x8, dsub: f32) void {
            _ = dsub;
            const l8 = lo(i32, 16, lanes) + hi(i32, 16, lanes) - (sub << @splat(shift));
            self.acc = @mulAdd(@Vector(8, f32), @splat(d), @floatFromInt(l8), self.acc);
        }

        /// `add` for lanes already folded to 8 (lane k = lanes k + k+8 of `add`'s 16, the
        /// same exact integers), as the AVX2 Q6_K kernel sums them.
        inline fn add8(self: *@This(), l8_unshifted: I32x8, d: f32, sub: I32x8) void {
            const l8 = l8_unshifted - (sub << @splat(shift));
            self.acc = @mulAdd(@Vector(8, f32), @splat(d), @floatFromInt(l8), self.acc);
        }

        inline fn result(self: @This()) f32 {
            return simd.hsum(8, f32, self.acc);
        }
    };
}

/// llama.cpp's x86 float order for Q2_K: per super-block acc += −dmin·(8 mins lanes),
/// then acc += d·(8 i32 lanes), both with FMA; hsum(acc) at the end.
const GgmlQ2Acc = struct {
    acc: @Vector(8, f32) = @splat(0),

    inline fn add(self: *GgmlQ2Acc, lanes: I32x16, d: f32, sub: I32x8, dmin: f32) void {
        self.acc = @mulAdd(@Vector(8, f32), @splat(-dmin), @floatFromInt(sub), self.acc);
        const l8 = lo(i32, 16, lanes) + hi(i32, 16, lanes);
        self.acc = @mulAdd(@Vector(8, f32), @splat(d), @floatFromInt(l8), self.acc);
    }

    inline fn result(self: GgmlQ2Acc) f32 {
        return simd.hsum(8, f32, self.acc);
    }
};

/// The float order of llama.cpp's tiled K-quant matmul (`ggml-cpu/tiled`, its AVX512-VNNI
/// microkernel; taken for non-repacked K-quant matrices when the batch has
/// `tiled_min_tokens` tokens or more): per super-block the exact i32 sum
/// s = Σ scale·(u − shift_value)·a, then sum += (f32(s)·d_w)·d_a, one super-block after
/// another from 0 (GCC fuses the `+=` and the `·d_a` into one fma). Only the per-block
/// integer is shared with the vec_dot order; the float steps differ.
fn TiledAcc(comptime shift: u5) type {
    return struct {
        sum: f32 = 0,

        inline fn addTiled(self: *@This(), lanes: I32x16, sub: I32x8, d_w: f32, d_a: f32) void {
            const l8 = lo(i32, 16, lanes) + hi(i32, 16, lanes) - (sub << @splat(shift));
            const s_int: i32 = @reduce(.Add, l8);
            const r = @as(f32, @floatFromInt(s_int)) * d_w;
            self.sum = @mulAdd(f32, r, d_a, self.sum);
        }

        inline fn result(self: @This()) f32 {
            return self.sum;
        }
    };
}

/// `TiledAcc` for the types with mins (Q5_K, Q2_K; in llama.cpp Q4_K too), as its AVX2 tiled
/// microkernel (`tiled_run_microtile_avx2`, HAS_MIN) finishes a super-block: the exact
/// i32 sums s1 = Σ scale·u·a and s2 = Σ min·bsum, then res = f32(s1)·d_w,
/// res = fma(−dmin, f32(s2), res) (`_mm256_fnmadd_ps`) and sum = fma(res, d_a, sum).
const TiledMinAcc = struct {
    sum: f32 = 0,

    inline fn addTiledMin(self: *TiledMinAcc, lanes: I32x16, sub: I32x8, d_w: f32, dmin: f32, d_a: f32) void {
        const s1: i32 = @reduce(.Add, lanes);
        const s2: i32 = @reduce(.Add, sub);
        const res = @mulAdd(f32, -dmin, @floatFromInt(s2), @as(f32, @floatFromInt(s1)) * d_w);
        self.sum = @mulAdd(f32, res, d_a, self.sum);
    }

    inline fn result(self: TiledMinAcc) f32 {
        return self.sum;
    }
};

/// The float step of block `b` of type `T` against `ab`, given their `blockLanes`, in
/// `dot`'s order: the vec_dot order's `add`, or the tiled order's (`TiledAcc.addTiled`,
/// `TiledMinAcc.addTiledMin`). A type with mins declares `minsOf` (its mins by
/// 16-element bsum: maddwd with the activation's bsums gives the min·bsum lanes).
inline fn blockAdd(comptime T: type, comptime path: Path, b: *align(1) const T.Block, ab: *align(1) const Q8_K.Block, lanes: I32x16, dot: anytype) void {
    const D = @TypeOf(dot.*);
    const d_w = f16f(b.d);
    if (comptime @hasDecl(T, "minsOf")) {
        const sub = maddwd16(path, ab.bsums, T.minsOf(b));
        const dmin = f16f(b.dmin);
        if (comptime @hasDecl(D, "addTiledMin")) return dot.addTiledMin(lanes, sub, d_w, dmin, ab.d);
        return dot.add(lanes, ab.d * d_w, sub, ab.d * dmin);
    }
    if (comptime @hasDecl(D, "addTiled")) return dot.addTiled(lanes, @splat(0), d_w, ab.d);
    dot.add(lanes, ab.d * d_w, @splat(0), 0);
}

/// What `blockLanes` returns per token: the 16 lanes of `Acc.add` (the even sub-blocks'
/// in the low 8, the odd ones' in the high 8), or, folded, 8 lanes with the same total
/// (all that the tiled order needs: one accumulator per token).
fn FoldedLanes(comptime fold: bool) type {
    return if (fold) I32x8 else I32x16;
}

inline fn foldLanes(comptime T: usize, comptime fold: bool, acc_lo: [T]I32x8, acc_hi: [T]I32x8) [T]FoldedLanes(fold) {
    if (fold) return acc_lo;
    var out: [T]I32x16 = undefined;
    inline for (0..T) |t| out[t] = concat(i32, 8, acc_lo[t], acc_hi[t]);
    return out;
}

/// The tiled order (`TiledAcc`, `TiledMinAcc`) for an R × N tile of a type that splits
/// its `blockDot` (see `tileDotAcc`): each row's block is decoded once for the N tokens
/// (`blockLanes` folded: one 8-lane accumulator per token, only their total counts),
/// the N totals come out of one transposing tree (`sumEach`), and the float steps run
/// over the N tokens as one vector, lane by lane the scalar steps of the one-row call,
/// so out[t][r] is bit-identical to it. A type with mins declares `minsOf` (the mins
/// by 16-element bsum: their products with the bsums total s2).
inline fn tileTiledLanes(comptime T: type, comptime R: usize, comptime N: usize, w_rows: [R][]align(1) const T.Block, a_rows: [N][]align(1) const Q8_K.Block) [N][R]f32 {
    @setEvalBranchQuota(100_000);
    const F = @Vector(N, f32);
    const n = a_rows[0].len;
    inline for (0..R) |r| std.debug.assert(w_rows[r].len == n);
    inline for (0..N) |t| std.debug.assert(a_rows[t].len == n);
    var sum: [R]F = @splat(@splat(0));
    for (0..n) |j| {
        var column: [N]*align(1) const Q8_K.Block = undefined;
        var d_a: F = undefined;
        inline for (0..N) |t| {
            column[t] = &a_rows[t][j];
            d_a[t] = column[t].d;
        }
        inline for (0..R) |r| {
            const b = &w_rows[r][j];
            const s1 = sumEach(N, T.blockLanes(default_path, N, true, b, column));
            var res = @as(F, @floatFromInt(s1)) * @as(F, @splat(f16f(b.d)));
            if (comptime @hasDecl(T, "minsOf")) {
                const mins = T.minsOf(b);
                var m: [N]I32x8 = undefined;
                inline for (0..N) |t| m[t] = maddwd16(default_path, column[t].bsums, mins);
                res = @mulAdd(F, @splat(-f16f(b.dmin)), @floatFromInt(sumEach(N, m)), res);
            }
            sum[r] = @mulAdd(F, res, d_a, sum[r]);
        }
    }
    var out: [N][R]f32 = undefined;
    inline for (0..N) |t| {
        inline for (0..R) |r| out[t][r] = sum[r][t];
    }
    return out;
}

/// Lane t: the sum of the lanes of `v[t]` (exact; for 8 vectors a transposing tree of
/// in-lane unpacks, 21 operations rather than 8 separate reductions).
inline fn sumEach(comptime T: usize, v: [T]I32x8) @Vector(T, i32) {
    if (T != 8) {
        var out: @Vector(T, i32) = undefined;
        inline for (0..T) |t| out[t] = @reduce(.Add, v[t]);
        return out;
    }
    // Level 1 (vpunpckl/hdq): lanes k and k + 2 of v[2i] and of v[2i + 1] summed.
    var p: [4]I32x8 = undefined;
    inline for (0..4) |i| {
        const a = v[2 * i];
        const b = v[2 * i + 1];
        p[i] = @shuffle(i32, a, b, [8]i32{ 0, -1, 1, -2, 4, -5, 5, -6 }) +
            @shuffle(i32, a, b, [8]i32{ 2, -3, 3, -4, 6, -7, 7, -8 });
    }
    // Level 2 (vpunpckl/hqdq): each 128-bit lane holds a partial sum of 4 vectors.
    var q: [2]I32x8 = undefined;
    inline for (0..2) |i| {
        const a = p[2 * i];
        const b = p[2 * i + 1];
        q[i] = @shuffle(i32, a, b, [8]i32{ 0, 1, -1, -2, 4, 5, -5, -6 }) +
            @shuffle(i32, a, b, [8]i32{ 2, 3, -3, -4, 6, 7, -7, -8 });
    }
    // Level 3 (vperm2i128): the two 128-bit lanes summed.
    return @shuffle(i32, q[0], q[1], [8]i32{ 0, 1, 2, 3, -1, -2, -3, -4 }) +
        @shuffle(i32, q[0], q[1], [8]i32{ 4, 5, 6, 7, -5, -6, -7, -8 });
}

/// The tiled-order kernels of a type `T` that splits its `blockDot` (`blockLanes`, then
/// `blockAdd`): its float order is `TiledMinAcc` if it has mins (`minsOf`), else
/// `TiledAcc(0)`.
fn TiledKernels(comptime T: type) type {
    const Acc = if (@hasDecl(T, "minsOf")) TiledMinAcc else TiledAcc(0);
    return struct {
        /// R rows in llama.cpp's tiled order (batches of `tiled_min_tokens` or more).
        pub fn vecDotRowsTiled(comptime R: usize, w_rows: [R][]align(1) const T.Block, a: []align(1) const Q8_K.Block) [R]f32 {
            return rowsDotAcc(T, Acc, default_path, R, w_rows, a);
        }

        /// R rows × N tokens in the tiled order (see `tileTiledLanes`).
        pub fn vecDotTileTiled(comptime R: usize, comptime N: usize, w_rows: [R][]align(1) const T.Block, a_rows: [N][]align(1) const Q8_K.Block) [N][R]f32 {
            return tileTiledLanes(T, R, N, w_rows, a_rows);
        }

        /// One row in the tiled order.
        pub fn vecDotTiled(w: []align(1) const T.Block, a: []align(1) const Q8_K.Block) f32 {
            return rowsDotAcc(T, Acc, default_path, 1, .{w}, a)[0];
        }
    };
}

/// llama.cpp's tiled matmul runs for batches of at least this many tokens
/// (`ggml_tiled_min_batch`: "profitable at rows >= 8").
pub const tiled_min_tokens = 8;

/// The GEMV kernels' linear weight prefetch (see `simd.prefetchAhead`), and the one of the
/// kernels that read one contiguous span (the 16- and 8-row Q4_K kernels).
const prefetchAhead = simd.prefetchAhead;
const prefetchSpanAhead = simd.prefetchSpanAhead;

/// The row loop shared by every type's vecDotPath and vecDotRows.
inline fn rowsDot(comptime T: type, comptime path: Path, comptime R: usize, w_rows: [R][]align(1) const T.Block, a: []align(1) const Q8_K.Block) [R]f32 {
    return rowsDotAcc(T, T.Acc, path, R, w_rows, a);
}

/// `rowsDot` with a chosen float order (`Acc`).
inline fn rowsDotAcc(comptime T: type, comptime Acc: type, comptime path: Path, comptime R: usize, w_rows: [R][]align(1) const T.Block, a: []align(1) const Q8_K.Block) [R]f32 {
    var dots: [R]Acc = @splat(.{});
    inline for (0..R) |r| std.debug.assert(w_rows[r].len == a.len);
    const step_bytes = R * @sizeOf(T.Block);
    for (a, 0..) |*ab, j| {
        // The tiled order serves prompt batches (each row group once per token): no GEMV prefetch.
        if (comptime !@hasDecl(Acc, "addTiled")) prefetchAhead(@ptrCast(w_rows[0].ptr), step_bytes * a.len, j * step_bytes, step_bytes);
        inline for (0..R) |r| T.blockDot(path, &w_rows[r][j], ab, &dots[r]);
    }
    var out: [R]f32 = undefined;
    inline for (0..R) |r| out[r] = dots[r].result();
    return out;
}

/// R rows × N activation rows (prompt processing, or a batch of sequences) in the float
/// order `Acc`: out[t][r] runs exactly `rowsDotAcc`'s per-block code for row r and token
/// t, blocks in the same order, so it is bit-identical to the one-row call. The N tokens
/// of a block follow each other, so each weight block is read once per tile and its
/// loads stay in registers/L1.
///
/// A type that splits its `blockDot` in two, `blockLanes(path, N, fold, b, ab)` (the
/// exact integer lanes of block b against N activation blocks, its levels and scales
/// decoded once for all of them) and then `blockAdd(T, path, b, ab, lanes, dot)` (the float step), has
/// each weight block decoded once per tile rather than once per (row, token): the same
/// integers and the same float steps, so the same bits. Without the split, the 1B shape
/// in IQ4_XS ran its prompts at 0.53 of llama.cpp on the AVX2 Zen 3 host, all of the
/// kernel time in the decoding.
inline fn tileDotAcc(comptime T: type, comptime Acc: type, comptime path: Path, comptime R: usize, comptime N: usize, w_rows: [R][]align(1) const T.Block, a_rows: [N][]align(1) const Q8_K.Block) [N][R]f32 {
    @setEvalBranchQuota(100_000);
    var dots: [N][R]Acc = @splat(@splat(.{}));
    const n = a_rows[0].len;
    inline for (0..R) |r| std.debug.assert(w_rows[r].len == n);
    inline for (0..N) |t| std.debug.assert(a_rows[t].len == n);
    for (0..n) |j| {
        if (comptime @hasDecl(T, "blockLanes")) {
            var column: [N]*align(1) const Q8_K.Block = undefined;
            inline for (0..N) |t| column[t] = &a_rows[t][j];
            inline for (0..R) |r| {
                const b = &w_rows[r][j];
                const lanes = T.blockLanes(path, N, false, b, column);
                inline for (0..N) |t| blockAdd(T, path, b, column[t], lanes[t], &dots[t][r]);
            }
        } else inline for (0..R) |r| {
            inline for (0..N) |t| T.blockDot(path, &w_rows[r][j], &a_rows[t][j], &dots[t][r]);
        }
    }
    var out: [N][R]f32 = undefined;
    inline for (0..N) |t| {
        inline for (0..R) |r| out[t][r] = dots[t][r].result();
    }
    return out;
}

/// `blockDot`'s integers of one (row, token) for `tileDotTiledFold`: 16 lanes whose sum is
/// `TiledAcc`'s s_int (Σ lanes − Σ sub << shift, exact in i32); the scales are taken apart.
fn TiledCollect(comptime shift: u5) type {
    return struct {
        v: I32x16 = undefined,

        inline fn addTiled(self: *@This(), lanes: I32x16, sub: I32x8, d_w: f32, d_a: f32) void {
            _ = d_w;
            _ = d_a;
            self.v = lanes -% concat(i32, 8, sub << @splat(shift), @as(I32x8, @splat(0)));
        }
    };
}

/// `tileDotAcc` in the `TiledAcc(shift)` order for R·N a multiple of 16, with the float
/// steps in vectors: per super-block the R·N vectors of 16 i32 lanes (pair p = t·R + r)
/// are summed by 4 levels of even/odd shuffles and adds (integers: exact, any order),
/// which leaves lane k of vector f holding s_int of pair 16f + k; then
/// sum = fma(f32(s_int)·d_w, d_a, sum) lane by lane, `TiledAcc.addTiled`'s scalar steps,
/// so out[t][r] is bit-identical to the one-row tiled call.
inline fn tileDotTiledFold(comptime T: type, comptime shift: u5, comptime path: Path, comptime R: usize, comptime N: usize, w_rows: [R][]align(1) const T.Block, a_rows: [N][]align(1) const Q8_K.Block) [N][R]f32 {
    @setEvalBranchQuota(100_000);
    const P = R * N;
    const F = P / 16;
    comptime std.debug.assert(P % 16 == 0);
    const n = a_rows[0].len;
    inline for (0..R) |r| std.debug.assert(w_rows[r].len == n);
    inline for (0..N) |t| std.debug.assert(a_rows[t].len == n);
    const masks = comptime blk: {
        var even: [16]i32 = undefined;
        var odd: [16]i32 = undefined;
        for (0..8) |k| {
            const ki: i32 = @intCast(k);
            even[k] = 2 * ki;
            odd[k] = 2 * ki + 1;
            even[8 + k] = -1 - 2 * ki;
            odd[8 + k] = -2 - 2 * ki;
        }
        var row_of: [F][16]i32 = undefined;
        var tok_of: [F][16]i32 = undefined;
        for (0..F) |f| {
            for (0..16) |k| {
                row_of[f][k] = (16 * f + k) % R;
                tok_of[f][k] = (16 * f + k) / R;
            }
        }
        break :blk .{ .even = even, .odd = odd, .row_of = row_of, .tok_of = tok_of };
    };
    var sum: [F]F32x16 = @splat(@splat(0));
    for (0..n) |j| {
        var dots: [P]TiledCollect(shift) = @splat(.{});
        var dw: @Vector(R, f32) = undefined;
        var da: @Vector(N, f32) = undefined;
        inline for (0..R) |r| {
            dw[r] = f16f(w_rows[r][j].d);
            inline for (0..N) |t| T.blockDot(path, &w_rows[r][j], &a_rows[t][j], &dots[t * R + r]);
        }
        inline for (0..N) |t| da[t] = a_rows[t][j].d;
        var v: [P]I32x16 = undefined;
        inline for (0..P) |p| v[p] = dots[p].v;
        inline for (0..4) |level| {
            inline for (0..P >> (level + 1)) |m| {
                v[m] = @shuffle(i32, v[2 * m], v[2 * m + 1], masks.even) +% @shuffle(i32, v[2 * m], v[2 * m + 1], masks.odd);
            }
        }
        inline for (0..F) |f| {
            const d_w = @shuffle(f32, dw, undefined, masks.row_of[f]);
            const d_a = @shuffle(f32, da, undefined, masks.tok_of[f]);
            const r_f = @as(F32x16, @floatFromInt(v[f])) * d_w;
            sum[f] = @mulAdd(F32x16, r_f, d_a, sum[f]);
        }
    }
    var out: [N][R]f32 = undefined;
    inline for (0..N) |t| {
        inline for (0..R) |r| out[t][r] = sum[(t * R + r) / 16][(t * R + r) % 16];
    }
    return out;
}

/// Lane of element e (0..255) in chunkDot's i32 layout: 4 consecutive elements of each 64.
inline fn laneOf(e: usize) usize {
    return (e % 64) / 4;
}

/// Σ pairs(a·b) of 16 i16 into 8 i32 lanes (exact): vpmaddwd on x86.
inline fn maddwd16(comptime path: Path, a: I16x16, b: I16x16) I32x8 {
    if (path == .generic) {
        const prod = @as(@Vector(16, i32), a) * @as(@Vector(16, i32), b);
        return @shuffle(i32, prod, undefined, evenMask(16)) + @shuffle(i32, prod, undefined, oddMask(16));
    }
    return maddwd256(a, b);
}

// ---------------------------------------------------------------------------
// Q4_K

pub const Q4_K = struct {
    pub const ggml_type: u32 = 12;
    pub const name = "Q4_K";
    pub const block_elems: usize = qk_k;
    pub const Block = extern struct { d: f16, dmin: f16, scales: [12]u8, qs: [qk_k / 2]u8 };
    comptime {
        std.debug.assert(@sizeOf(Block) == 144);
    }
    pub const Act = Q8_K;
    const Acc = GgmlMinAcc(false);

    pub fn dequantizeRow(x: []align(1) const Block, y: []f32) void {
        std.debug.assert(y.len == x.len * qk_k);
        for (x, 0..) |*b, i| {
            const out = y[i * qk_k ..][0..qk_k];
            const d = fp16ToFp32(b.d);
            const min = fp16ToFp32(b.dmin);
            for (0..4) |c| {
                const sc1, const m1i = getScaleMinK4(2 * c, &b.scales);
                const sc2, const m2i = getScaleMinK4(2 * c + 1, &b.scales);
                const d1 = d * fi(sc1);
                const m1 = min * fi(m1i);
                const d2 = d * fi(sc2);
                const m2 = min * fi(m2i);
                const q = b.qs[32 * c ..][0..32];
                for (0..32) |l| out[64 * c + l] = d1 * fi(q[l] & 0xF) - m1;
                for (0..32) |l| out[64 * c + 32 + l] = d2 * fi(q[l] >> 4) - m2;
            }
        }
    }

    pub fn quantizeRowRef(x: []const f32, y: []align(1) Block) void {
        std.debug.assert(x.len == y.len * qk_k);
        for (y, 0..) |*b, i| {
            var L: [qk_k]u8 = undefined;
            var d: f16 = undefined;
            var dmin: f16 = undefined;
            var scales: [12]u8 = undefined;
            quantizeScalesMinsK(x[i * qk_k ..][0..qk_k], 15, -1.0, 20, &d, &dmin, &scales, &L);
            b.d = d;
            b.dmin = dmin;
            b.scales = scales;
            for (0..4) |c| {
                for (0..32) |l| b.qs[32 * c + l] = L[64 * c + l] | (L[64 * c + l + 32] << 4);
            }
        }
    }

    pub fn vecDotRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var acc: Acc = .{};
        for (w, a) |*b, *ab| {
            var lanes: [16]i32 = @splat(0);
            var sub: [8]i32 = undefined;
            for (0..8) |j| {
                const sc, const m = getScaleMinK4(j, &b.scales);
                sub[j] = @as(i32, m) * ab.bsums[2 * j] + @as(i32, m) * ab.bsums[2 * j + 1];
                for (0..32) |l| {
                    const e = 32 * j + l;
                    lanes[laneOf(e)] += @as(i32, sc) * @as(i32, (if (j % 2 == 0) b.qs[32 * (j / 2) + l] & 0xF else b.qs[32 * (j / 2) + l] >> 4)) * ab.qs[e];
                }
            }
            acc.add(lanes, ab.d * f16f(b.d), sub, ab.d * f16f(b.dmin));
        }
        return acc.result();
    }

    pub fn vecDot(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        return vecDotPath(default_path, w, a);
    }

    pub fn vecDotPath(comptime path: Path, w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        return rowsDot(@This(), path, 1, .{w}, a)[0];
    }

    /// R rows against one activation row, bit-identical to R calls of vecDot (each row
    /// runs the same per-block code; only the activation loads are shared).
    pub fn vecDotRows(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
        return rowsDot(@This(), default_path, R, w_rows, a);
    }

    /// R rows × T tokens, bit-identical to vecDot per (row, token) (see `tileDotAcc`).
    pub fn vecDotTile(comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
        return tileDotAcc(@This(), Acc, default_path, R, T, w_rows, a_rows);
    }

    /// Matrices whose row count is a multiple of this are repacked by llama.cpp's CPU
    /// backend on AVX2/AVX-512 machines (`q4_K_8x8_q8_K`), which sums in another float
    /// order (`RepackedMinAcc`); the matmul follows it for them.
    pub const repack_rows: usize = 8;

    /// One row in the repacked order.
    pub fn vecDotRepacked(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        return rowsDotAcc(@This(), RepackedMinAcc, default_path, 1, .{w}, a)[0];
    }

    /// R rows in the repacked order, element r equal to `vecDotRepacked(w_rows[r], a)`.
    pub fn vecDotRowsRepacked(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
        return rowsDotAcc(@This(), RepackedMinAcc, default_path, R, w_rows, a);
    }

    /// R rows in the order of the repacked GEMM (a token of a 4-token group).
    pub fn vecDotRowsRepackedGemm(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
        return rowsDotAcc(@This(), RepackedMinAccGemm, default_path, R, w_rows, a);
    }

    /// R rows × T tokens in the repacked GEMV order (see `tileDotAcc`).
    pub fn vecDotTileRepacked(comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
        return tileDotAcc(@This(), RepackedMinAcc, default_path, R, T, w_rows, a_rows);
    }

    /// R rows × T tokens in the repacked GEMM order (see `tileDotAcc`).
    pub fn vecDotTileRepackedGemm(comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
        return tileDotAcc(@This(), RepackedMinAccGemm, default_path, R, T, w_rows, a_rows);
    }

    /// Rows per `vecDotWideRepacked` call: 16 on AVX-512 VNNI, 8 on AVX2 (`q4kWide8`),
    /// 0 otherwise.
    pub const wide_rows: usize = switch (default_path) {
        .avx512vnni => quant_k_wide_rows,
        .avx2 => 8,
        .generic => 0,
    };

    /// `wide_rows` rows × T tokens in the repacked GEMV (`gemm` false) or GEMM order,
    /// element [t][r] bit-identical to the one-row call (see `q4kWide`, `q4kWide8`).
    /// `w`: `wide_rows` row slices, or a slice of `WideGroup`s (the interleaved layout).
    pub fn vecDotWideRepacked(comptime T: usize, comptime gemm: bool, w: anytype, a_rows: [T][]align(1) const Act.Block) [T][wide_rows]f32 {
        if (wide_rows == 8) return q4kWide8(T, gemm, w, a_rows);
        if (T == 1 and !gemm) return .{q4kWideGemv(w, a_rows[0])};
        return q4kWide(T, gemm, w, a_rows);
    }

    /// The interleaved layout of a block column of `wide_rows` rows (see
    /// `Q4KWideGroup`, `Q4KWideGroup8`).
    pub const WideGroup = if (wide_rows == 8) Q4KWideGroup8 else Q4KWideGroup;
    pub const wideGroupOf = if (wide_rows == 8) q4kWide8GroupOf else q4kWideGroupOf;

    /// One row in the order of the repacked GEMM.
    pub fn vecDotRepackedGemm(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        return rowsDotAcc(@This(), RepackedMinAccGemm, default_path, 1, .{w}, a)[0];
    }

    /// Scalar reference of the repacked GEMM order.
    pub fn vecDotRepackedGemmRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        var acc: f32 = 0;
        var acc_m: f32 = 0;
        for (w, a) |*b, *ab| {
            for (0..4) |c| {
                var sumi: i32 = 0;
                var summ: i32 = 0;
                for (2 * c..2 * c + 2) |j| {
                    const sc, const m = getScaleMinK4(j, &b.scales);
                    summ += @as(i32, m) * (@as(i32, ab.bsums[2 * j]) + ab.bsums[2 * j + 1]);
                    for (0..32) |l| {
                        const q: i32 = if (j % 2 == 0) b.qs[32 * (j / 2) + l] & 0xF else b.qs[32 * (j / 2) + l] >> 4;
                        sumi += @as(i32, sc) * q * ab.qs[32 * j + l];
                    }
                }
                acc = @mulAdd(f32, @floatFromInt(sumi), f16f(b.d) * ab.d, acc);
                acc_m = @mulAdd(f32, @floatFromInt(summ), f16f(b.dmin) * ab.d, acc_m);
            }
        }
        return acc - acc_m;
    }

    /// Scalar reference of the repacked order.
    pub fn vecDotRepackedRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        var acc: f32 = 0;
        var acc_m: f32 = 0;
        for (w, a) |*b, *ab| {
            var sumi: i32 = 0;
            var summ: i32 = 0;
            for (0..8) |j| {
                const sc, const m = getScaleMinK4(j, &b.scales);
                summ += @as(i32, m) * (@as(i32, ab.bsums[2 * j]) + ab.bsums[2 * j + 1]);
                for (0..32) |l| {
                    const q: i32 = if (j % 2 == 0) b.qs[32 * (j / 2) + l] & 0xF else b.qs[32 * (j / 2) + l] >> 4;
                    sumi += @as(i32, sc) * q * ab.qs[32 * j + l];
                }
            }
            acc = @mulAdd(f32, @floatFromInt(sumi), f16f(b.d) * ab.d, acc);
            acc_m = @mulAdd(f32, @floatFromInt(summ), f16f(b.dmin) * ab.d, acc_m);
        }
        return acc - acc_m;
    }

    /// One super-block's contribution to `dot`.
    inline fn blockDot(comptime path: Path, b: *align(1) const Block, ab: *align(1) const Act.Block, dot: anytype) void {
        const sm = unpackScalesMinsK4(&b.scales);
        const sc16: @Vector(8, i16) = sm[0];
        const m16: @Vector(16, i16) = @shuffle(u8, sm[1], undefined, [16]i32{ 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7 });
        const sub = maddwd16(path, ab.bsums, m16);
        if (@hasDecl(@TypeOf(dot.*), "per_pair")) {
            // One sum per 64-element pair of sub-blocks (integer, so exact in any order).
            inline for (0..4) |c| {
                const q: U8x32 = loadBytes(32, b.qs[32 * c ..][0..32]);
                const zero: I32x8 = @splat(0);
                const l = halfDot(path, zero, q & @as(U8x32, @splat(0xF)), actHalf(ab, 2 * c), @splat(sc16[2 * c])) +
                    halfDot(path, zero, q >> @splat(4), actHalf(ab, 2 * c + 1), @splat(sc16[2 * c + 1]));
                dot.addPair(@reduce(.Add, l), ab.d * f16f(b.d), sub[2 * c] + sub[2 * c + 1], ab.d * f16f(b.dmin));
            }
            return;
        }
        var acc_lo: I32x8 = @splat(0);
        var acc_hi: I32x8 = @splat(0);
        inline for (0..4) |c| {
            const q: U8x32 = loadBytes(32, b.qs[32 * c ..][0..32]);
            acc_lo = halfDot(path, acc_lo, q & @as(U8x32, @splat(0xF)), actHalf(ab, 2 * c), @splat(sc16[2 * c]));
            acc_hi = halfDot(path, acc_hi, q >> @splat(4), actHalf(ab, 2 * c + 1), @splat(sc16[2 * c + 1]));
        }
        dot.add(concat(i32, 8, acc_lo, acc_hi), ab.d * f16f(b.d), sub, ab.d * f16f(b.dmin));
    }
};

// ---------------------------------------------------------------------------
// Q4_K, 16 rows as the 16 int32 lanes (AVX-512 VNNI only): what llama.cpp's repacked
// q4_K_8x8 kernels get from their load-time interleave, done per block instead. Each
// 4-byte group of 16 rows is transposed into one vector (lane r = row r), so one
// `vpdpbusd` against a broadcast 4-byte activation group advances 16 row sums at once
// and no lane ever needs a horizontal sum; the transposed block is shared by the T
// tokens of the tile. The integer sums per (row, token) are exact, and the float steps
// are `RepackedMinAcc` / `RepackedMinAccGemm` lane by lane, so every element is
// bit-identical to `vecDotRepacked` / `vecDotRepackedGemm`.

/// Rows per wide tile.
const quant_k_wide_rows: usize = 16;

pub const U32x16 = @Vector(16, u32);
const F32x16 = @Vector(16, f32);

/// Which (row, group) each lane of a vector holds during a transpose.
const Label = struct { row: u8, g: u8 };

/// Split levels of a 16-row transpose: `count` vectors of 16 labelled lanes, each level
/// pairs vectors with the same group set and splits it into its lower and upper half
/// (lanes ordered by (group, row)), until every vector holds one group of all 16 rows.
pub fn TransposePlan(comptime count: usize, comptime levels: usize) type {
    return struct {
        pair_a: [levels][count / 2]usize,
        pair_b: [levels][count / 2]usize,
        lo: [levels][count / 2][16]i32,
        hi: [levels][count / 2][16]i32,
        /// vec_of_g[g]: the vector holding group g at the end.
        vec_of_g: [count]usize,

        fn make(init: [count][16]Label) @This() {
            @setEvalBranchQuota(1_000_000);
            var plan: @This() = undefined;
            var cur = init;
            for (0..levels) |lv| {
                var used: [count]bool = @splat(false);
                var next: [count][16]Label = undefined;
                var m: usize = 0;
                for (0..count) |a| {
                    if (used[a]) continue;
                    var b = a + 1;
                    while (b < count and (used[b] or !sameGroups(cur[a], cur[b]))) b += 1;
                    std.debug.assert(b < count);
                    used[a] = true;
                    used[b] = true;
                    plan.pair_a[lv][m] = a;
                    plan.pair_b[lv][m] = b;
                    // The group set (sorted) and its halves.
                    var gs: [16]u8 = undefined;
                    var ng: usize = 0;
                    for (0..256) |g| {
                        for (cur[a]) |l| {
                            if (l.g == g) {
                                gs[ng] = @intCast(g);
                                ng += 1;
                                break;
                            }
                        }
                    }
                    for (0..2) |half| {
                        var k: usize = 0;
                        for (gs[half * ng / 2 .. (half + 1) * ng / 2]) |g| {
                            for (0..16) |row| {
                                for (0..2) |side| {
                                    const src = if (side == 0) cur[a] else cur[b];
                                    for (src, 0..) |l, i| {
                                        if (l.g == g and l.row == row) {
                                            const idx: i32 = @intCast(i);
                                            const mask_v = if (side == 0) idx else -1 - idx;
                                            if (half == 0) plan.lo[lv][m][k] = mask_v else plan.hi[lv][m][k] = mask_v;
                                            next[2 * m + half][k] = l;
                                            k += 1;
                                        }
                                    }
                                }
                            }
                        }
                        std.debug.assert(k == 16);
                    }
                    m += 1;
                }
                cur = next;
            }
            for (0..count) |v| {
                for (cur[v], 0..) |l, i| std.debug.assert(l.g == cur[v][0].g and l.row == i);
                plan.vec_of_g[cur[v][0].g] = v;
            }
            return plan;
        }

        fn sameGroups(x: [16]Label, y: [16]Label) bool {
            for (x) |l| {
                var found = false;
                for (y) |k| found = found or k.g == l.g;
                if (!found) return false;
            }
            return true;
        }
    };
}

/// Labels after joining rows i and i+8 (8 groups each): lanes 0-7 row i, 8-15 row i+8.
const chunk_labels: [8][16]Label = blk: {
    var l: [8][16]Label = undefined;
    for (0..8) |i| {
        for (0..16) |k| l[i][k] = .{ .row = @intCast(i + 8 * (k / 8)), .g = @intCast(k % 8) };
    }
    break :blk l;
};
const chunk_plan = TransposePlan(8, 3).make(chunk_labels);

/// Labels after joining rows (i, i+8) then (i, i+4) of 4 groups each: lane 4·q + g holds
/// row i + 4·(q % 2) + 8·(q / 2).
const head_labels: [4][16]Label = blk: {
    var l: [4][16]Label = undefined;
    for (0..4) |i| {
        for (0..16) |k| {
            const q = k / 4;
            l[i][k] = .{ .row = @intCast(i + 8 * (q % 2) + 4 * (q / 2)), .g = @intCast(k % 4) };
        }
    }
    break :blk l;
};
pub const head_plan = TransposePlan(4, 2).make(head_labels);

pub inline fn runPlan(comptime count: usize, comptime levels: usize, comptime plan: TransposePlan(count, levels), v: [count]U32x16) [count]U32x16 {
    var cur = v;
    inline for (0..levels) |lv| {
        var next: [count]U32x16 = undefined;
        inline for (0..count / 2) |m| {
            const a = cur[plan.pair_a[lv][m]];
            const b = cur[plan.pair_b[lv][m]];
            next[2 * m] = @shuffle(u32, a, b, plan.lo[lv][m]);
            next[2 * m + 1] = @shuffle(u32, a, b, plan.hi[lv][m]);
        }
        cur = next;
    }
    var out: [count]U32x16 = undefined;
    inline for (0..count) |g| out[g] = cur[plan.vec_of_g[g]];
    return out;
}

pub inline fn dpbusd16(acc: I32x16, u: U32x16, s: I32x16) I32x16 {
    return asm ("vpdpbusd %[s], %[u], %[acc]"
        : [acc] "=v" (-> I32x16),
        : [_] "0" (acc),
          [u] "v" (u),
          [s] "v" (s),
    );
}

inline fn group4(a: *align(1) const Q8_K.Block, e: usize) i32 {
    return std.mem.readInt(i32, @as(*align(1) const [4]u8, @ptrCast(a.qs[e..][0..4])), .little);
}

/// Block j of 16 Q4_K rows as the wide kernels consume it, each u32 lane one row: the
/// head (d|dmin, then scale bytes 0-3, 4-7, 8-11) and each quarter block's 8 vectors
/// (`chunk_plan`'s order). `Interleaved` (repack.zig) stores matrices in this layout at
/// load, one group per 16 rows × 256 columns, the same 2304 bytes as 16 blocks.
pub const Q4KWideGroup = extern struct {
    head: [4][16]u32,
    qs: [4][8][16]u32,
};
comptime {
    std.debug.assert(@sizeOf(Q4KWideGroup) == quant_k_wide_rows * 144);
}

/// The wide kernels read either 16 row slices (transposed here on the fly) or a slice
/// of `Q4KWideGroup`s (loaded: the same vectors).
fn q4kGrouped(comptime W: type) bool {
    return W == []align(1) const Q4KWideGroup;
}

inline fn q4kWideCheck(w: anytype, n: usize) void {
    if (comptime q4kGrouped(@TypeOf(w))) {
        std.debug.assert(w.len == n);
    } else inline for (0..quant_k_wide_rows) |r| std.debug.assert(w[r].len == n);
}

/// The first byte of the 16 rows' data (contiguous in either layout).
inline fn q4kWideBase(w: anytype) [*]const u8 {
    return if (comptime q4kGrouped(@TypeOf(w))) @ptrCast(w.ptr) else @ptrCast(w[0].ptr);
}

// (Group vectors are read as arrays: a @bitCast to vectors would let the compiler
// assume vector alignment, and groups are only 4-byte aligned.)
inline fn q4kWideHeadRaw(w: anytype, j: usize) [4]U32x16 {
    if (comptime q4kGrouped(@TypeOf(w))) return .{ w[j].head[0], w[j].head[1], w[j].head[2], w[j].head[3] };
    var head: [4]U32x16 = undefined;
    var h: [16]@Vector(4, u32) = undefined;
    inline for (0..16) |r| h[r] = @as(*align(1) const [4]u32, @ptrCast(&w[r][j])).*;
    var h8: [8]@Vector(8, u32) = undefined;
    inline for (0..8) |i| h8[i] = std.simd.join(h[i], h[i + 8]);
    inline for (0..4) |i| head[i] = std.simd.join(h8[i], h8[i + 4]);
    return runPlan(4, 2, head_plan, head);
}

/// Quarter block c (elements 64c..64c+63 of block j) of the 16 rows: 8 vectors, lane r
/// of vector g holding row r's quant bytes 32c+4g..32c+4g+3.
inline fn q4kWideChunk(w: anytype, j: usize, comptime c: usize) [8]U32x16 {
    if (comptime q4kGrouped(@TypeOf(w))) {
        var out: [8]U32x16 = undefined;
        inline for (0..8) |g| out[g] = w[j].qs[c][g];
        return out;
    }
    var q: [16]@Vector(8, u32) = undefined;
    inline for (0..16) |r| q[r] = @as(*align(1) const [8]u32, @ptrCast(w[r][j].qs[32 * c ..][0..32])).*;
    var x: [8]U32x16 = undefined;
    inline for (0..8) |i| x[i] = std.simd.join(q[i], q[i + 8]);
    return runPlan(8, 3, chunk_plan, x);
}

/// Block j of 16 rows as one `Q4KWideGroup` (the load-time repack).
fn q4kWideGroupOf(w_rows: [quant_k_wide_rows][]align(1) const Q4_K.Block, j: usize) Q4KWideGroup {
    var out: Q4KWideGroup = undefined;
    const head = q4kWideHeadRaw(w_rows, j);
    inline for (0..4) |k| out.head[k] = head[k];
    inline for (0..4) |c| {
        const wt = q4kWideChunk(w_rows, j, c);
        inline for (0..8) |g| out.qs[c][g] = wt[g];
    }
    return out;
}

/// Block j's head of 16 Q4_K rows, transposed so each u32 lane is one row: d and dmin
/// in f32, and the 12 scale bytes as 3 vectors (bytes 0-3, 4-7, 8-11 of each row).
inline fn q4kWideHead(w: anytype, j: usize) struct { d: F32x16, dmin: F32x16, scales: [3]U32x16 } {
    const head = q4kWideHeadRaw(w, j);
    const dd = head[0];
    return .{
        .d = @floatCast(@as(@Vector(16, f16), @bitCast(@as(@Vector(16, u16), @truncate(dd))))),
        .dmin = @floatCast(@as(@Vector(16, f16), @bitCast(@as(@Vector(16, u16), @truncate(dd >> @splat(16)))))),
        .scales = .{ head[1], head[2], head[3] },
    };
}

/// 16 Q4_K rows × T tokens in the repacked GEMV (`gemm` false) or GEMM order.
/// out[t][r] is bit-identical to `vecDotRepacked` (or `vecDotRepackedGemm`) of row r, token t.
fn q4kWide(comptime T: usize, comptime gemm: bool, w: anytype, a_rows: [T][]align(1) const Q8_K.Block) [T][quant_k_wide_rows]f32 {
    @setEvalBranchQuota(1_000_000);
    if (gemm and T >= 4) return q4kWideGemm(T, w, a_rows);
    const n = a_rows[0].len;
    var acc: [T]F32x16 = @splat(@splat(0));
    var acc_m: [T]F32x16 = @splat(@splat(0));
    const low4: U32x16 = @splat(0x0F0F0F0F);
    const chunk_bytes = quant_k_wide_rows * @sizeOf(Q4_K.Block) / 4;
    const group_bytes = quant_k_wide_rows * n * @sizeOf(Q4_K.Block);
    for (0..n) |j| {
        // d|dmin and the 12 scale bytes of the 16 rows, one u32 group per vector.
        const head = q4kWideHead(w, j);
        const d = head.d;
        const dmin = head.dmin;
        const s0, const s1, const s2 = head.scales;
        var sum: [T]I32x16 = @splat(@splat(0));
        var summ: [T]I32x16 = @splat(@splat(0));
        inline for (0..4) |c| {
            // Sub-blocks 2c (low nibbles) and 2c+1 (high): scales and mins per row.
            const scale = struct {
                inline fn of(comptime jj: usize, q0: U32x16, q1: U32x16, q2: U32x16) [2]U32x16 {
                    const sh: U32x16 = @splat(8 * (jj % 4));
                    if (jj < 4) return .{ (q0 >> sh) & @as(U32x16, @splat(63)), (q1 >> sh) & @as(U32x16, @splat(63)) };
                    const lo4: U32x16 = @splat(0xF);
                    const top: U32x16 = @splat(3);
                    const sc = ((q2 >> sh) & lo4) | (((q0 >> (sh + @as(U32x16, @splat(6)))) & top) << @splat(4));
                    const m = ((q2 >> (sh + @as(U32x16, @splat(4)))) & lo4) | (((q1 >> (sh + @as(U32x16, @splat(6)))) & top) << @splat(4));
                    return .{ sc, m };
                }
            };
            const sm_lo = scale.of(2 * c, s0, s1, s2);
            const sm_hi = scale.of(2 * c + 1, s0, s1, s2);
            if (T <= 2) {
                // A GEMV streams the group's 16 rows: fetch the bytes a step of it
                // consumes (a quarter block of each row), ahead in the matrix.
                prefetchSpanAhead(q4kWideBase(w), group_bytes, (4 * j + c) * chunk_bytes, chunk_bytes);
            }
            const wt = q4kWideChunk(w, j, c);
            inline for (0..T) |t| {
                const ab = &a_rows[t][j];
                var il: I32x16 = @splat(0);
                var ih: I32x16 = @splat(0);
                inline for (0..8) |g| {
                    il = dpbusd16(il, wt[g] & low4, @splat(group4(ab, 64 * c + 4 * g)));
                    ih = dpbusd16(ih, (wt[g] >> @splat(4)) & low4, @splat(group4(ab, 64 * c + 32 + 4 * g)));
                }
                const pair = il *% @as(I32x16, @bitCast(sm_lo[0])) +% ih *% @as(I32x16, @bitCast(sm_hi[0]));
                const b0: i32 = @as(i32, ab.bsums[4 * c]) + ab.bsums[4 * c + 1];
                const b1: i32 = @as(i32, ab.bsums[4 * c + 2]) + ab.bsums[4 * c + 3];
                const mins = @as(I32x16, @bitCast(sm_lo[1])) *% @as(I32x16, @splat(b0)) +% @as(I32x16, @bitCast(sm_hi[1])) *% @as(I32x16, @splat(b1));
                q4kWidePair(gemm, pair, mins, d, dmin, ab.d, &acc[t], &acc_m[t], &sum[t], &summ[t]);
            }
        }
        if (!gemm) {
            inline for (0..T) |t| q4kWideBlockEnd(sum[t], summ[t], d, dmin, a_rows[t][j].d, &acc[t], &acc_m[t]);
        }
    }
    var out: [T][quant_k_wide_rows]f32 = undefined;
    inline for (0..T) |t| out[t] = acc[t] - acc_m[t];
    return out;
}

/// The float steps of the wide Q4_K kernels, lane by lane (16 or 8 rows): for a pair of
/// sub-blocks' exact integers (`pair` = Σ sc·q·a, `mins` = Σ m·bsum), the GEMM order
/// (`RepackedMinAccGemm`) adds them to the accumulators at once, acc = fma(pair, d·da,
/// acc) and acc_m = fma(mins, dmin·da, acc_m); the GEMV order (`RepackedMinAcc`) sums
/// them over the block first and `q4kWideBlockEnd` adds the block.
inline fn q4kWidePair(comptime gemm: bool, pair: anytype, mins: @TypeOf(pair), d: anytype, dmin: @TypeOf(d), da: f32, acc: *@TypeOf(d), acc_m: *@TypeOf(d), sum: *@TypeOf(pair), summ: *@TypeOf(pair)) void {
    const F = @TypeOf(d);
    if (gemm) {
        const dav: F = @splat(da);
        acc.* = @mulAdd(F, @floatFromInt(pair), d * dav, acc.*);
        acc_m.* = @mulAdd(F, @floatFromInt(mins), dmin * dav, acc_m.*);
    } else {
        sum.* +%= pair;
        summ.* +%= mins;
    }
}

/// The GEMV order's step per block (see `q4kWidePair`).
inline fn q4kWideBlockEnd(sum: anytype, summ: @TypeOf(sum), d: anytype, dmin: @TypeOf(d), da: f32, acc: *@TypeOf(d), acc_m: *@TypeOf(d)) void {
    const F = @TypeOf(d);
    const dav: F = @splat(da);
    acc.* = @mulAdd(F, @floatFromInt(sum), d * dav, acc.*);
    acc_m.* = @mulAdd(F, @floatFromInt(summ), dmin * dav, acc_m.*);
}

/// `q4kWide` in the GEMM order (T of 4 or 8: prompt batches): out[t][r] is bit-identical
/// to `vecDotRepackedGemm` of row r, token t. Per pair of sub-blocks the integer dots
/// run in four independent vpdpbusd chains per token (exact: integer adds), and the
/// scale and min products are in f32 (`gemmPairF32`).
fn q4kWideGemm(comptime T: usize, w: anytype, a_rows: [T][]align(1) const Q8_K.Block) [T][quant_k_wide_rows]f32 {
    @setEvalBranchQuota(1_000_000);
    const n = a_rows[0].len;
    var acc: [T]F32x16 = @splat(@splat(0));
    var acc_m: [T]F32x16 = @splat(@splat(0));
    const low4: U32x16 = @splat(0x0F0F0F0F);
    for (0..n) |j| {
        // d|dmin and the 12 scale bytes of the 16 rows, one u32 group per vector.
        const head = q4kWideHead(w, j);
        const d = head.d;
        const dmin = head.dmin;
        const s0, const s1, const s2 = head.scales;
        var dda: [T]F32x16 = undefined;
        var dmda: [T]F32x16 = undefined;
        inline for (0..T) |t| {
            const da: F32x16 = @splat(a_rows[t][j].d);
            dda[t] = d * da;
            dmda[t] = dmin * da;
        }
        inline for (0..4) |c| {
            // Sub-blocks 2c (low nibbles) and 2c+1 (high): scale lo, scale hi, min lo,
            // min hi of the 16 rows, in f32.
            const sm_lo = q4kWideScaleMin(2 * c, s0, s1, s2);
            const sm_hi = q4kWideScaleMin(2 * c + 1, s0, s1, s2);
            const scf: [4]F32x16 = .{ @floatFromInt(sm_lo[0]), @floatFromInt(sm_hi[0]), @floatFromInt(sm_lo[1]), @floatFromInt(sm_hi[1]) };
            const wt = q4kWideChunk(w, j, c);
            inline for (0..T) |t| {
                const ab = &a_rows[t][j];
                // Four chains of 4 (even and odd groups): the vpdpbusd latency hides.
                var il: [2]I32x16 = @splat(@splat(0));
                var ih: [2]I32x16 = @splat(@splat(0));
                inline for (0..8) |g| {
                    il[g % 2] = dpbusd16(il[g % 2], wt[g] & low4, @splat(group4(ab, 64 * c + 4 * g)));
                    ih[g % 2] = dpbusd16(ih[g % 2], (wt[g] >> @splat(4)) & low4, @splat(group4(ab, 64 * c + 32 + 4 * g)));
                }
                const b0: i32 = @as(i32, ab.bsums[4 * c]) + ab.bsums[4 * c + 1];
                const b1: i32 = @as(i32, ab.bsums[4 * c + 2]) + ab.bsums[4 * c + 3];
                const pair_f, const mins_f = gemmPairF32(il[0] +% il[1], ih[0] +% ih[1], scf, b0, b1);
                acc[t] = @mulAdd(F32x16, pair_f, dda[t], acc[t]);
                acc_m[t] = @mulAdd(F32x16, mins_f, dmda[t], acc_m[t]);
            }
        }
    }
    var out: [T][quant_k_wide_rows]f32 = undefined;
    inline for (0..T) |t| out[t] = acc[t] - acc_m[t];
    return out;
}

/// Scale and min (6 bits each) of sub-block jj of 16 (or 8) Q4_K rows from their
/// transposed 12 scale bytes (q0, q1, q2: bytes 0-3, 4-7, 8-11), ggml's kmask unpacking
/// lane-wise.
inline fn q4kWideScaleMin(comptime jj: usize, q0: anytype, q1: @TypeOf(q0), q2: @TypeOf(q0)) [2]@TypeOf(q0) {
    const V = @TypeOf(q0);
    const sh: V = @splat(8 * (jj % 4));
    if (jj < 4) return .{ (q0 >> sh) & @as(V, @splat(63)), (q1 >> sh) & @as(V, @splat(63)) };
    const lo4: V = @splat(0xF);
    const top: V = @splat(3);
    const sc = ((q2 >> sh) & lo4) | (((q0 >> (sh + @as(V, @splat(6)))) & top) << @splat(4));
    const m = ((q2 >> (sh + @as(V, @splat(4)))) & lo4) | (((q1 >> (sh + @as(V, @splat(6)))) & top) << @splat(4));
    return .{ sc, m };
}

/// The 8 scales and 8 mins of 16 (or 8) Q4_K rows, bytewise from their transposed 12
/// scale bytes (q0, q1, q2: bytes 0-3, 4-7, 8-11 of each row as one u32 lane). Per byte k
/// of a lane (ggml's get_scale_min_k4): sub-blocks 0-3 scale q[k] & 63, min q[k+4] & 63
/// (returned as sc_a, m_a); sub-blocks 4-7 scale (q[k+8] & 15) | (q[k] >> 6) << 4, min
/// (q[k+8] >> 4) | (q[k+4] >> 6) << 4 (sc_b, m_b).
inline fn scalesMinsBytewise(q0: anytype, q1: @TypeOf(q0), q2: @TypeOf(q0)) [4]@TypeOf(q0) {
    const V = @TypeOf(q0);
    const six: V = @splat(0x3F3F3F3F);
    const top2: V = @splat(0x30303030);
    const low4: V = @splat(0x0F0F0F0F);
    return .{
        q0 & six,
        q1 & six,
        (q2 & low4) | ((q0 >> @splat(2)) & top2),
        ((q2 >> @splat(4)) & low4) | ((q1 >> @splat(2)) & top2),
    };
}

/// f32(il·sc_lo + ih·sc_hi) and f32(m_lo·b0 + m_hi·b1) of `q4kWide`'s GEMM step, computed
/// in f32 yet exact: every operand and partial result is an integer below 2^24
/// (|il|, |ih| ≤ 32·15·128 = 61440 and scales/mins ≤ 63 give |pair| ≤ 7.75e6; |b0|, |b1|
/// ≤ 32·128 give |mins| ≤ 5.2e5), so the product and the fma round nothing and the
/// results equal @floatFromInt of the i32 sums.
inline fn gemmPairF32(il: I32x16, ih: I32x16, scf: [4]F32x16, b0: i32, b1: i32) [2]F32x16 {
    const pair = @mulAdd(F32x16, @floatFromInt(ih), scf[1], @as(F32x16, @floatFromInt(il)) * scf[0]);
    const b0f: F32x16 = @splat(@floatFromInt(b0));
    const b1f: F32x16 = @splat(@floatFromInt(b1));
    const mins = @mulAdd(F32x16, scf[3], b1f, scf[2] * b0f);
    return .{ pair, mins };
}

/// Byte k of each u32 lane, zero-extended.
inline fn byteLane(v: U32x16, comptime k: u5) U32x16 {
    return (v >> @splat(8 * k)) & @as(U32x16, @splat(0xFF));
}

/// Bytes k and k+1 of each u32 lane as the lane's two i16 halves (zero-extended).
inline fn bytePairLane(v: U32x16, comptime k: u5) I16x32 {
    const pair = (v >> @splat(8 * k)) & @as(U32x16, @splat(0xFFFF));
    return @bitCast((pair & @as(U32x16, @splat(0xFF))) | ((pair & @as(U32x16, @splat(0xFF00))) << @splat(8)));
}

inline fn dpwssd16(acc: I32x16, a: I16x32, b: I16x32) I32x16 {
    return asm ("vpdpwssd %[b], %[a], %[acc]"
        : [acc] "=v" (-> I32x16),
        : [_] "0" (acc),
          [a] "v" (a),
          [b] "v" (b),
    );
}

/// `q4kWide` for one token in the repacked GEMV order (the decode step), with fewer
/// vector operations per block, every one exact in i32 so the per-block integers, and
/// then the float steps, are `q4kWide`'s (element r bit-identical to `vecDotRepacked`):
/// - the high nibbles are masked in place (16·h) and their dot shifted right by 4 once
///   per 64 elements (exact: a multiple of 16), instead of a shift per 4-byte group;
/// - the 8 scales and 8 mins of the 16 rows are unpacked bytewise from the transposed
///   12 scale bytes (ggml's kmask rules per byte), 4 per lane at once;
/// - Σ min·bsum runs as 4 `vpdpwssd` of (min pair) × (bsum pair) per block.
fn q4kWideGemv(w: anytype, a: []align(1) const Q8_K.Block) [quant_k_wide_rows]f32 {
    @setEvalBranchQuota(1_000_000);
    const n = a.len;
    q4kWideCheck(w, n);
    var acc: F32x16 = @splat(0);
    var acc_m: F32x16 = @splat(0);
    const low4: U32x16 = @splat(0x0F0F0F0F);
    const high4: U32x16 = @splat(0xF0F0F0F0);
    const chunk_bytes = quant_k_wide_rows * @sizeOf(Q4_K.Block) / 4;
    const group_bytes = quant_k_wide_rows * n * @sizeOf(Q4_K.Block);
    for (0..n) |j| {
        const head = q4kWideHead(w, j);
        const d = head.d;
        const dmin = head.dmin;
        const sc_a, const m_a, const sc_b, const m_b = scalesMinsBytewise(head.scales[0], head.scales[1], head.scales[2]);
        const ab = &a[j];
        // Σ_sub-block min·(bsums pair): (min 2k, min 2k+1) · (pair sum 2k, pair sum 2k+1).
        var summ: I32x16 = @splat(0);
        inline for (0..4) |k| {
            const b0: i32 = @as(i32, ab.bsums[4 * k]) + ab.bsums[4 * k + 1];
            const b1: i32 = @as(i32, ab.bsums[4 * k + 2]) + ab.bsums[4 * k + 3];
            const bpair: u32 = @as(u32, @as(u16, @bitCast(@as(i16, @intCast(b0))))) | @as(u32, @as(u16, @bitCast(@as(i16, @intCast(b1))))) << 16;
            const mins = if (k < 2) bytePairLane(m_a, 2 * k) else bytePairLane(m_b, 2 * (k - 2));
            summ = dpwssd16(summ, mins, @bitCast(@as(U32x16, @splat(bpair))));
        }
        var sum: I32x16 = @splat(0);
        inline for (0..4) |c| {
            prefetchSpanAhead(q4kWideBase(w), group_bytes, (4 * j + c) * chunk_bytes, chunk_bytes);
            const wt = q4kWideChunk(w, j, c);
            var il: I32x16 = @splat(0);
            var ih16: I32x16 = @splat(0);
            inline for (0..8) |g| {
                il = dpbusd16(il, wt[g] & low4, @splat(group4(ab, 64 * c + 4 * g)));
                ih16 = dpbusd16(ih16, wt[g] & high4, @splat(group4(ab, 64 * c + 32 + 4 * g)));
            }
            const sc_lo = if (2 * c < 4) byteLane(sc_a, 2 * c) else byteLane(sc_b, 2 * c - 4);
            const sc_hi = if (2 * c + 1 < 4) byteLane(sc_a, 2 * c + 1) else byteLane(sc_b, 2 * c + 1 - 4);
            sum +%= il *% @as(I32x16, @bitCast(sc_lo)) +% (ih16 >> @splat(4)) *% @as(I32x16, @bitCast(sc_hi));
        }
        const da: F32x16 = @splat(ab.d);
        acc = @mulAdd(F32x16, @floatFromInt(sum), d * da, acc);
        acc_m = @mulAdd(F32x16, @floatFromInt(summ), dmin * da, acc_m);
    }
    return acc - acc_m;
}

// ---------------------------------------------------------------------------
// Q4_K, 8 rows as the 8 int32 lanes of a 256-bit vector (AVX2 without AVX-512 VNNI):
// the rows of llama.cpp's `block_q4_Kx8`, which its AVX2 build repacks to. The 16-row
// design above with `vpmaddubsw` in place of `vpdpbusd`: per 32-element sub-block, 8
// `vpmaddubsw` of the codes (0..15) against broadcast 4-byte activation groups, added
// in i16 (8 pairs of |q·a| ≤ 15·128 each: below 2^15, exact), then one `vpmaddwd` by
// the row's scale in both i16 halves gives sc·Σq·a per row; Σ min·bsums is one
// `vpmaddwd` of (min 2c, min 2c+1) by (bsum pair 2c, 2c+1) per 64 elements. The float
// steps are `q4kWide`'s lane by lane, so every element is bit-identical to
// `vecDotRepacked` / `vecDotRepackedGemm`.

const U32x8 = @Vector(8, u32);
const F32x8 = @Vector(8, f32);

/// 8 rows of K u32 each → K vectors, lane r of vector k = u32 k of row r (the AVX2
/// unpack{lo,hi}_epi32 / unpack{lo,hi}_epi64 / permute2f128 transpose; K is 4 or 8).
pub inline fn transpose8(comptime K: usize, rows: [8]@Vector(K, u32)) [K]U32x8 {
    comptime std.debug.assert(K == 4 or K == 8);
    // v[i]: 8 u32 of 128-bit halves: row i's (first 4 | last 4) words, or for K = 4
    // rows i and i + 4.
    var v: [8]U32x8 = undefined;
    const pairs = if (K == 8) 8 else 4;
    inline for (0..pairs) |i| v[i] = if (K == 8) rows[i] else std.simd.join(rows[i], rows[i + 4]);
    const lo32 = [8]i32{ 0, ~@as(i32, 0), 1, ~@as(i32, 1), 4, ~@as(i32, 4), 5, ~@as(i32, 5) };
    const hi32 = [8]i32{ 2, ~@as(i32, 2), 3, ~@as(i32, 3), 6, ~@as(i32, 6), 7, ~@as(i32, 7) };
    const lo64 = [8]i32{ 0, 1, ~@as(i32, 0), ~@as(i32, 1), 4, 5, ~@as(i32, 4), ~@as(i32, 5) };
    const hi64 = [8]i32{ 2, 3, ~@as(i32, 2), ~@as(i32, 3), 6, 7, ~@as(i32, 6), ~@as(i32, 7) };
    // Per group of 4 vectors (rows 4q..4q+3): words w and w + 4 of each row in each
    // output's two halves.
    var s: [8]U32x8 = undefined;
    inline for (0..pairs / 4) |q| {
        const t0 = @shuffle(u32, v[4 * q], v[4 * q + 1], lo32);
        const t1 = @shuffle(u32, v[4 * q], v[4 * q + 1], hi32);
        const t2 = @shuffle(u32, v[4 * q + 2], v[4 * q + 3], lo32);
        const t3 = @shuffle(u32, v[4 * q + 2], v[4 * q + 3], hi32);
        s[4 * q + 0] = @shuffle(u32, t0, t2, lo64);
        s[4 * q + 1] = @shuffle(u32, t0, t2, hi64);
        s[4 * q + 2] = @shuffle(u32, t1, t3, lo64);
        s[4 * q + 3] = @shuffle(u32, t1, t3, hi64);
    }
    var out: [K]U32x8 = undefined;
    if (K == 4) {
        // s[k]: word k of rows 0-3 | rows 4-7: already lane r = row r.
        inline for (0..4) |k| out[k] = s[k];
        return out;
    }
    // s[k] (rows 0-3) and s[4 + k] (rows 4-7) hold word k in their low halves, k + 4
    // in their high halves.
    const low_halves = [8]i32{ 0, 1, 2, 3, ~@as(i32, 0), ~@as(i32, 1), ~@as(i32, 2), ~@as(i32, 3) };
    const high_halves = [8]i32{ 4, 5, 6, 7, ~@as(i32, 4), ~@as(i32, 5), ~@as(i32, 6), ~@as(i32, 7) };
    inline for (0..4) |k| {
        out[k] = @shuffle(u32, s[k], s[4 + k], low_halves);
        out[k + 4] = @shuffle(u32, s[k], s[4 + k], high_halves);
    }
    return out;
}

/// A wide kernel's weights, `rows` row slices or a slice of interleaved groups `G`, and
/// its activation rows: checks that they all have the same block count, and returns the
/// first byte of the weights (contiguous in either layout: `prefetchAhead`'s base).
pub inline fn wideOperands(comptime G: type, comptime rows: usize, w: anytype, a_rows: anytype) [*]const u8 {
    const n = a_rows[0].len;
    inline for (0..a_rows.len) |t| std.debug.assert(a_rows[t].len == n);
    if (comptime @TypeOf(w) == []align(1) const G) {
        std.debug.assert(w.len == n);
        return @ptrCast(w.ptr);
    }
    inline for (0..rows) |r| std.debug.assert(w[r].len == n);
    return @ptrCast(w[0].ptr);
}

/// Block j of 8 Q4_K rows as the 8-row kernel consumes it, each u32 lane one row: the
/// head (d|dmin, then scale bytes 0-3, 4-7, 8-11) and each quarter block's 8 vectors
/// (lane r of vector g: row r's quant bytes 32c+4g..32c+4g+3). `Interleaved`
/// (repack.zig) stores matrices in this layout at load: 1152 bytes, as 8 blocks.
pub const Q4KWideGroup8 = extern struct {
    head: [4][8]u32,
    qs: [4][8][8]u32,
};
comptime {
    std.debug.assert(@sizeOf(Q4KWideGroup8) == 8 * 144);
}

fn q4kWide8Head(w: anytype, j: usize) [4]U32x8 {
    if (comptime @TypeOf(w) == []align(1) const Q4KWideGroup8) return .{ w[j].head[0], w[j].head[1], w[j].head[2], w[j].head[3] };
    var h: [8]@Vector(4, u32) = undefined;
    inline for (0..8) |r| h[r] = @as(*align(1) const [4]u32, @ptrCast(&w[r][j])).*;
    return transpose8(4, h);
}

inline fn q4kWide8Chunk(w: anytype, j: usize, comptime c: usize) [8]U32x8 {
    if (comptime @TypeOf(w) == []align(1) const Q4KWideGroup8) {
        var out: [8]U32x8 = undefined;
        inline for (0..8) |g| out[g] = w[j].qs[c][g];
        return out;
    }
    var q: [8]U32x8 = undefined;
    inline for (0..8) |r| q[r] = @as(*align(1) const [8]u32, @ptrCast(w[r][j].qs[32 * c ..][0..32])).*;
    return transpose8(8, q);
}

/// Block j of 8 rows as one `Q4KWideGroup8` (the load-time repack).
fn q4kWide8GroupOf(w_rows: [8][]align(1) const Q4_K.Block, j: usize) Q4KWideGroup8 {
    var out: Q4KWideGroup8 = undefined;
    const head = q4kWide8Head(w_rows, j);
    inline for (0..4) |k| out.head[k] = head[k];
    inline for (0..4) |c| {
        const wt = q4kWide8Chunk(w_rows, j, c);
        inline for (0..8) |g| out.qs[c][g] = wt[g];
    }
    return out;
}

/// Byte k0 of each u32 lane into its low i16, byte k1 into its high i16, zero-extended
/// (one `vpshufb` on AVX2).
inline fn byteToHalves(v: U32x8, comptime k0: usize, comptime k1: usize) U32x8 {
    const mask = comptime blk: {
        var m: [32]i32 = undefined;
        for (0..8) |lane| {
            m[4 * lane + 0] = @intCast(4 * lane + k0);
            m[4 * lane + 1] = -1; // a zero byte of the second operand
            m[4 * lane + 2] = @intCast(4 * lane + k1);
            m[4 * lane + 3] = -1;
        }
        break :blk m;
    };
    return @bitCast(@shuffle(u8, @as(U8x32, @bitCast(v)), @as(U8x32, @splat(0)), mask));
}

/// 8 Q4_K rows × T tokens in the repacked GEMV (`gemm` false) or GEMM order; `w` is 8
/// row slices or a slice of `Q4KWideGroup8`s. out[t][r] is bit-identical to
/// `vecDotRepacked` (or `vecDotRepackedGemm`) of row r, token t. More than 4 tokens run
/// as tiles of 4 over the same rows (16 ymm registers).
fn q4kWide8(comptime T: usize, comptime gemm: bool, w: anytype, a_rows: [T][]align(1) const Q8_K.Block) [T][8]f32 {
    @setEvalBranchQuota(1_000_000);
    if (T > 4) {
        var out: [T][8]f32 = undefined;
        out[0..4].* = q4kWide8(4, gemm, w, a_rows[0..4].*);
        out[4..].* = q4kWide8(T - 4, gemm, w, a_rows[4..].*);
        return out;
    }
    const n = a_rows[0].len;
    const base = wideOperands(Q4KWideGroup8, 8, w, a_rows);
    var acc: [T]F32x8 = @splat(@splat(0));
    var acc_m: [T]F32x8 = @splat(@splat(0));
    const low4: U32x8 = @splat(0x0F0F0F0F);
    const chunk_bytes = 8 * @sizeOf(Q4_K.Block) / 4;
    const group_bytes = 8 * n * @sizeOf(Q4_K.Block);
    for (0..n) |j| {
        const head = q4kWide8Head(w, j);
        const dd = head[0];
        const d: F32x8 = @floatCast(@as(@Vector(8, f16), @bitCast(@as(@Vector(8, u16), @truncate(dd)))));
        const dmin: F32x8 = @floatCast(@as(@Vector(8, f16), @bitCast(@as(@Vector(8, u16), @truncate(dd >> @splat(16))))));
        const sc_a, const m_a, const sc_b, const m_b = scalesMinsBytewise(head[1], head[2], head[3]);
        // Per token, the 8 sums of bsum pairs (one per 32-element sub-block) as i16, u32
        // lane c holding sub-blocks 2c and 2c + 1: the `vpmaddwd` partner of the mins.
        var bpairs: [T]@Vector(4, u32) = undefined;
        inline for (0..T) |t| {
            const bs: I16x16 = a_rows[t][j].bsums;
            bpairs[t] = @bitCast(@as(@Vector(8, i16), @truncate(maddwd256(bs, @splat(1)))));
        }
        var sum: [T]I32x8 = @splat(@splat(0));
        var summ: [T]I32x8 = @splat(@splat(0));
        inline for (0..4) |c| {
            // Each row's scale in both i16 halves of its lane; its two mins as a pair.
            const sc_lo: I16x16 = @bitCast(byteToHalves(if (c < 2) sc_a else sc_b, (2 * c) % 4, (2 * c) % 4));
            const sc_hi: I16x16 = @bitCast(byteToHalves(if (c < 2) sc_a else sc_b, (2 * c + 1) % 4, (2 * c + 1) % 4));
            const mins: I16x16 = @bitCast(byteToHalves(if (c < 2) m_a else m_b, (2 * c) % 4, (2 * c + 1) % 4));
            if (T <= 2) prefetchSpanAhead(base, group_bytes, (4 * j + c) * chunk_bytes, chunk_bytes);
            const wt = q4kWide8Chunk(w, j, c);
            var pl: [T]I16x16 = @splat(@splat(0));
            var ph: [T]I16x16 = @splat(@splat(0));
            inline for (0..8) |g| {
                const ql: U8x32 = @bitCast(wt[g] & low4);
                const qh: U8x32 = @bitCast((wt[g] >> @splat(4)) & low4);
                inline for (0..T) |t| {
                    const ab = &a_rows[t][j];
                    const al: I8x32 = @bitCast(@as(I32x8, @splat(group4(ab, 64 * c + 4 * g))));
                    const ah: I8x32 = @bitCast(@as(I32x8, @splat(group4(ab, 64 * c + 32 + 4 * g))));
                    if (T >= 3) {
                        pl[t] = maddubsAdd256(pl[t], ql, al);
                        ph[t] = maddubsAdd256(ph[t], qh, ah);
                    } else {
                        pl[t] +%= maddubs256(ql, al);
                        ph[t] +%= maddubs256(qh, ah);
                    }
                }
            }
            inline for (0..T) |t| {
                const ab = &a_rows[t][j];
                const pair = maddwd256(pl[t], sc_lo) +% maddwd256(ph[t], sc_hi);
                const m = maddwd256(mins, @bitCast(@as(U32x8, @splat(bpairs[t][c]))));
                q4kWidePair(gemm, pair, m, d, dmin, ab.d, &acc[t], &acc_m[t], &sum[t], &summ[t]);
            }
        }
        if (!gemm) {
            inline for (0..T) |t| q4kWideBlockEnd(sum[t], summ[t], d, dmin, a_rows[t][j].d, &acc[t], &acc_m[t]);
        }
    }
    var out: [T][8]f32 = undefined;
    inline for (0..T) |t| out[t] = acc[t] - acc_m[t];
    return out;
}

test "transpose8 puts u32 k of row r in lane r of vector k" {
    var rows8: [8]U32x8 = undefined;
    var rows4: [8]@Vector(4, u32) = undefined;
    for (0..8) |r| {
        for (0..8) |k| rows8[r][k] = @intCast(16 * r + k);
        for (0..4) |k| rows4[r][k] = @intCast(16 * r + k);
    }
    const t8 = transpose8(8, rows8);
    const t4 = transpose8(4, rows4);
    for (0..8) |r| {
        for (0..8) |k| try std.testing.expectEqual(@as(u32, @intCast(16 * r + k)), t8[k][r]);
        for (0..4) |k| try std.testing.expectEqual(@as(u32, @intCast(16 * r + k)), t4[k][r]);
    }
}

/// The 8 scales and 8 mins of a Q4_K/Q5_K block (ggml's kmask unpacking).
inline fn unpackScalesMinsK4(scales: *const [12]u8) struct { @Vector(8, u8), @Vector(8, u8) } {
    var sc: [8]u8 = undefined;
    var m: [8]u8 = undefined;
    inline for (0..8) |j| {
        sc[j], m[j] = getScaleMinK4(j, scales);
    }
    return .{ sc, m };
}

// ---------------------------------------------------------------------------
// Q6_K

pub const Q6_K = struct {
    pub const ggml_type: u32 = 14;
    pub const name = "Q6_K";
    pub const block_elems: usize = qk_k;
    pub const Block = extern struct { ql: [qk_k / 2]u8, qh: [qk_k / 4]u8, scales: [qk_k / 16]i8, d: f16 };
    /// A block with its 6-bit levels recoded in byte planes (`Q6_KPlanes`, an AVX2
    /// load-time layout), in `planes_order`: per 128-element half h the levels come as
    /// four 32-byte vectors (positions 128h + 32q + i, q < 4), and for q < 3 byte i of
    /// `x[h][q]` holds vector q's level i in its low 6 bits and, in its top 2 bits, bits
    /// 2q and 2q + 1 of vector 3's level i. Vector 3 is put together from the three top
    /// bit pairs; vectors 0-2 are one `and` each.
    pub const Planes = extern struct { x: [2][3][32]u8, scales: [qk_k / 16]i8, d: f16 };
    comptime {
        std.debug.assert(@sizeOf(Block) == 210 and @sizeOf(Planes) == 210);
    }
    pub const Act = Q8_K;
    const Acc = GgmlShiftAcc(5);

    /// The element (0..255) at each position of `Planes`' level order, chosen so that
    /// the AVX2 kernel (`blockLanesAvx2`) needs one scale vector per two vpmaddubsw
    /// (4 per block, against 8 in ggml's order) and still sums each i32 lane exactly as
    /// ggml's `ggml_vec_dot_q6_K_q8_K` does. Vectors 2j and 2j + 1 go through vpmaddubsw,
    /// their i16 pairs are added (|4 levels × quants| ≤ 4·63·128 < 2^15) and then go
    /// through one vpmaddwd, so in byte b of vector 2j + t:
    /// - the 128-bit lane π = b / 16 is i32 lanes 4π..4π+3: ggml's lane 4π + g sums
    ///   positions 4g..4g+3 of the sub-blocks of parity π (even sub-blocks low, odd high);
    /// - i = (b % 16) / 2 is the i16 pair: i32 lane g = i / 2, and its two i16 halves
    ///   ρ = i % 2 take sub-blocks 4j + π (ρ = 0) and 4j + π + 2 (ρ = 1);
    /// - the 4 positions 4g..4g+3 of a sub-block are split over t and the byte b % 2.
    /// So element 16k + m with k = 4j + π + 2ρ, m = 4g + 2t + b % 2. Half h holds
    /// sub-blocks 8h..8h+7 (vectors 4h..4h+3, j = 2h, 2h + 1).
    pub const planes_order: [qk_k]u8 = blk: {
        var order: [qk_k]u8 = undefined;
        for (0..8) |v| {
            for (0..32) |b| {
                const j = v / 2;
                const t = v % 2;
                const pi = b / 16;
                const i = (b % 16) / 2;
                const k = 4 * j + pi + 2 * (i % 2);
                const m = 4 * (i / 2) + 2 * t + b % 2;
                order[32 * v + b] = 16 * k + m;
            }
        }
        break :blk order;
    };

    /// `x` (a block's 256 values in element order) in `planes_order`: one shuffle per
    /// 128-element half (each half's positions hold that half's elements).
    pub fn toPlanesOrder(comptime E: type, x: [qk_k]E) [qk_k]E {
        return shuffleHalves(E, x, comptime halfMasks(false));
    }

    /// `x` in `planes_order` back in element order (the inverse of `toPlanesOrder`).
    pub fn fromPlanesOrder(comptime E: type, x: [qk_k]E) [qk_k]E {
        return shuffleHalves(E, x, comptime halfMasks(true));
    }

    fn shuffleHalves(comptime E: type, x: [qk_k]E, comptime masks: [2][qk_k / 2]i32) [qk_k]E {
        var out: [qk_k]E = undefined;
        inline for (0..2) |h| {
            const half: @Vector(qk_k / 2, E) = x[qk_k / 2 * h ..][0 .. qk_k / 2].*;
            out[qk_k / 2 * h ..][0 .. qk_k / 2].* = @shuffle(E, half, undefined, masks[h]);
        }
        return out;
    }

    /// `planes_order` (or its inverse) as a shuffle mask per half.
    fn halfMasks(comptime inverse: bool) [2][qk_k / 2]i32 {
        @setEvalBranchQuota(10_000);
        var masks: [2][qk_k / 2]i32 = undefined;
        for (planes_order, 0..) |e, p| {
            std.debug.assert(e / (qk_k / 2) == p / (qk_k / 2));
            if (inverse) {
                masks[e / (qk_k / 2)][e % (qk_k / 2)] = @intCast(p % (qk_k / 2));
            } else {
                masks[p / (qk_k / 2)][p % (qk_k / 2)] = @intCast(e % (qk_k / 2));
            }
        }
        return masks;
    }

    /// `b` recoded in planes (the same levels, scales and d).
    pub fn planesOf(b: *align(1) const Block) Planes {
        var levels: [qk_k]u8 = undefined;
        inline for (0..2) |h| {
            const u = parts(b, h);
            inline for (0..4) |q| levels[128 * h + 32 * q ..][0..32].* = u[q];
        }
        const ordered = toPlanesOrder(u8, levels);
        var out: Planes = .{ .x = undefined, .scales = b.scales, .d = b.d };
        inline for (0..2) |h| {
            const last: U8x32 = ordered[128 * h + 96 ..][0..32].*;
            inline for (0..3) |q| {
                const u: U8x32 = ordered[128 * h + 32 * q ..][0..32].*;
                out.x[h][q] = u | (((last >> @splat(2 * q)) & @as(U8x32, @splat(3))) << @splat(6));
            }
        }
        return out;
    }

    /// The ggml block of planes `p` (the inverse of `planesOf`).
    pub fn blockOfPlanes(p: *align(1) const Planes) Block {
        var ordered: [qk_k]u8 = undefined;
        for (0..2) |h| {
            for (0..32) |i| {
                var last: u8 = 0;
                for (0..3) |q| {
                    const byte = p.x[h][q][i];
                    ordered[128 * h + 32 * q + i] = byte & 0x3F;
                    last |= (byte >> 6) << @intCast(2 * q);
                }
                ordered[128 * h + 96 + i] = last;
            }
        }
        const levels = fromPlanesOrder(u8, ordered);
        var out: Block = .{ .ql = undefined, .qh = @splat(0), .scales = p.scales, .d = p.d };
        for (0..2) |h| {
            for (0..32) |i| {
                var u: [4]u8 = undefined;
                for (0..4) |k| u[k] = levels[128 * h + 32 * k + i];
                out.ql[64 * h + i] = (u[0] & 0xF) | ((u[2] & 0xF) << 4);
                out.ql[64 * h + 32 + i] = (u[1] & 0xF) | ((u[3] & 0xF) << 4);
                for (0..4) |k| out.qh[32 * h + i] |= (u[k] >> 4) << @intCast(2 * k);
            }
        }
        return out;
    }

    /// Level (0..63) of element e of a block.
    inline fn level(b: *align(1) const Block, e: usize) u8 {
        const h = e / 128;
        const r = e % 128;
        const l = r % 32;
        const part = r / 32; // 0: ql lo [l], 1: ql lo [l+32], 2: ql hi [l], 3: ql hi [l+32]
        const qlb = b.ql[64 * h + l + 32 * (part % 2)];
        const low = if (part < 2) qlb & 0xF else qlb >> 4;
        const high = (b.qh[32 * h + l] >> @intCast(2 * part)) & 3;
        return low | (high << 4);
    }

    pub fn dequantizeRow(x: []align(1) const Block, y: []f32) void {
        std.debug.assert(y.len == x.len * qk_k);
        for (x, 0..) |*b, i| {
            const d = fp16ToFp32(b.d);
            const out = y[i * qk_k ..][0..qk_k];
            for (0..qk_k) |e| {
                const q: i32 = @as(i32, level(b, e)) - 32;
                out[e] = d * fi(b.scales[e / 16]) * fi(q);
            }
        }
    }

    pub fn quantizeRowRef(x: []const f32, y: []align(1) Block) void {
        std.debug.assert(x.len == y.len * qk_k);
        for (y, 0..) |*b, i| {
            const xb = x[i * qk_k ..][0..qk_k];
            var L: [qk_k]i8 = undefined;
            var scales: [16]f32 = undefined;
            var max_scale: f32 = 0;
            var max_abs_scale: f32 = 0;
            for (0..16) |ib| {
                const scale = makeQxQuants(16, 32, xb[16 * ib ..][0..16], L[16 * ib ..][0..16]);
                scales[ib] = scale;
                const abs_scale = @abs(scale);
                if (abs_scale > max_abs_scale) {
                    max_abs_scale = abs_scale;
                    max_scale = scale;
                }
            }
            if (max_abs_scale < group_max_eps) {
                b.* = std.mem.zeroes(Block);
                continue;
            }
            const iscale = -128.0 / max_scale;
            b.d = fp32ToFp16(1 / iscale);
            for (0..16) |ib| b.scales[ib] = @truncate(@min(127, nearestInt(iscale * scales[ib])));
            for (0..16) |j| {
                const d = fp16ToFp32(b.d) * fi(b.scales[j]);
                if (d == 0) continue;
                for (0..16) |ii| {
                    var l = nearestInt(xb[16 * j + ii] / d);
                    l = @max(-32, @min(31, l));
                    L[16 * j + ii] = @intCast(l + 32);
                }
            }
            for (0..2) |h| {
                const Lh = L[128 * h ..][0..128];
                for (0..32) |l| {
                    const q1: u8 = @as(u8, @bitCast(Lh[l])) & 0xF;
                    const q2: u8 = @as(u8, @bitCast(Lh[l + 32])) & 0xF;
                    const q3: u8 = @as(u8, @bitCast(Lh[l + 64])) & 0xF;
                    const q4: u8 = @as(u8, @bitCast(Lh[l + 96])) & 0xF;
                    b.ql[64 * h + l] = q1 | (q3 << 4);
                    b.ql[64 * h + l + 32] = q2 | (q4 << 4);
                    b.qh[32 * h + l] = (@as(u8, @bitCast(Lh[l])) >> 4) | ((@as(u8, @bitCast(Lh[l + 32])) >> 4) << 2) |
                        ((@as(u8, @bitCast(Lh[l + 64])) >> 4) << 4) | ((@as(u8, @bitCast(Lh[l + 96])) >> 4) << 6);
                }
            }
        }
    }

    pub fn vecDotRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var acc: Acc = .{};
        for (w, a) |*b, *ab| {
            var lanes: [16]i32 = @splat(0);
            var sub: [8]i32 = undefined;
            for (0..8) |k| sub[k] = @as(i32, b.scales[2 * k]) * ab.bsums[2 * k] + @as(i32, b.scales[2 * k + 1]) * ab.bsums[2 * k + 1];
            for (0..qk_k) |e| lanes[laneOf(e)] += @as(i32, b.scales[e / 16]) * @as(i32, level(b, e)) * ab.qs[e];
            const d = ab.d * f16f(b.d);
            acc.add(lanes, d, sub, d * 32);
        }
        return acc.result();
    }

    /// The dot products (see `Q6KKernels`).
    const kernels = Q6KKernels(Block);
    pub const vecDot = kernels.vecDot;
    pub const vecDotPath = kernels.vecDotPath;
    pub const vecDotRows = kernels.vecDotRows;
    pub const vecDotTile = kernels.vecDotTile;
    pub const vecDotRowsTiled = kernels.vecDotRowsTiled;
    pub const vecDotTileTiled = kernels.vecDotTileTiled;
    pub const vecDotTiled = kernels.vecDotTiled;

    /// One super-block's contribution to `dot`; `b` points at a `Block` or at `Planes`
    /// (then `ab` is in planes order: `Q8_KP`).
    inline fn blockDot(comptime path: Path, b: anytype, ab: *align(1) const Act.Block, dot: anytype) void {
        if (comptime isPlanes(@TypeOf(b))) return blockDotPlanes(path, b, ab, dot);
        if (comptime path == .avx2 and @hasDecl(@TypeOf(dot.*), "add8")) return blockDotAvx2(b, ab, dot);
        const sc8: @Vector(16, i8) = b.scales;
        const sc16: @Vector(16, i16) = sc8;
        // (u − 32)·a = u·a − 32·a: the −32 part through the 16-element bsums.
        const sub = maddwd16(path, ab.bsums, sc16);
        var acc: I32x16 = @splat(0);
        inline for (0..2) |h| {
            const ql: U8x64 = loadBytes(64, b.ql[64 * h ..][0..64]);
            const qh: U8x32 = loadBytes(32, b.qh[32 * h ..][0..32]);
            const qh64 = concat(u8, 32, qh, qh >> @splat(2));
            const three: U8x64 = @splat(3);
            const u_lo = (ql & @as(U8x64, @splat(0xF))) | ((qh64 & three) << @splat(4));
            const u_hi = (ql >> @splat(4)) | (((qh64 >> @splat(4)) & three) << @splat(4));
            acc = chunkDot(path, acc, u_lo, actChunk(ab, 2 * h), @shuffle(i16, sc16, undefined, scaleMask(16, 16, 2 * h)));
            acc = chunkDot(path, acc, u_hi, actChunk(ab, 2 * h + 1), @shuffle(i16, sc16, undefined, scaleMask(16, 16, 2 * h + 1)));
        }
        if (@hasDecl(@TypeOf(dot.*), "addTiled")) return dot.addTiled(acc, sub, f16f(b.d), ab.d);
        const d = ab.d * f16f(b.d);
        dot.add(acc, d, sub, d * 32);
    }

    /// `blockDot` of a `Planes` block `b` against `ab` in planes order, through
    /// `blockLanesAvx2` (planes are an AVX2 layout): its 8 lanes are ggml's, so `add8`
    /// follows; the tiled order needs only their exact total.
    inline fn blockDotPlanes(comptime path: Path, b: *align(1) const Planes, ab: *align(1) const Act.Block, dot: anytype) void {
        if (comptime path != .avx2) @compileError("Q6_K planes are computed on the AVX2 path only");
        const sc16: I16x16 = @as(@Vector(16, i8), b.scales);
        const lanes = blockLanesAvx2(1, b, .{ab})[0];
        const sub = maddwd256(ab.bsums, sc16);
        if (@hasDecl(@TypeOf(dot.*), "addTiled")) return dot.addTiled(concat(i32, 8, lanes, @as(I32x8, @splat(0))), sub, f16f(b.d), ab.d);
        dot.add8(lanes, ab.d * f16f(b.d), sub);
    }

    /// `blockDot` in 256-bit registers (AVX2 has 16 of them; the 512-bit-shaped code spilled):
    /// 32 elements at a time, the eight i32 lanes of both halves of a 64-element chunk summed
    /// into one register, which is exactly `add`'s lane fold. The 6-bit levels are put
    /// together with pre-shifted masks, and each 32 elements' two scales come from one
    /// vpshufb of the scales broadcast to both 128-bit lanes.
    inline fn blockDotAvx2(b: anytype, ab: *align(1) const Act.Block, dot: anytype) void {
        const sc16: I16x16 = @as(@Vector(16, i8), b.scales);
        const acc = blockLanesAvx2(1, b, .{ab})[0];
        dot.add8(acc, ab.d * f16f(b.d), maddwd256(ab.bsums, sc16));
    }

    fn isPlanes(comptime P: type) bool {
        return @typeInfo(P).pointer.child == Planes;
    }

    /// The four 32-element parts (levels 0..63) of half `h` of the block at `b`: for a
    /// `Block` elements 128h + 32q + i in order, for `Planes` positions 128h + 32q + i of
    /// `planes_order`.
    inline fn parts(b: anytype, comptime h: usize) [4]U8x32 {
        if (comptime isPlanes(@TypeOf(b))) {
            const six: U8x32 = @splat(0x3F);
            const top: U8x32 = @splat(0xC0);
            const x = [3]U8x32{ loadBytes(32, &b.x[h][0]), loadBytes(32, &b.x[h][1]), loadBytes(32, &b.x[h][2]) };
            // Part 3's bit pairs, moved down in 16-bit lanes: masked first, so no bits
            // cross into the neighbouring byte.
            const pair = struct {
                inline fn at(v: U8x32, comptime shift: u4) U8x32 {
                    return @bitCast(@as(@Vector(16, u16), @bitCast(v & top)) >> @splat(shift));
                }
            };
            return .{ x[0] & six, x[1] & six, x[2] & six, pair.at(x[0], 6) | pair.at(x[1], 4) | pair.at(x[2], 2) };
        }
        const low4: U8x32 = @splat(0x0F);
        const ql0: U8x32 = loadBytes(32, b.ql[64 * h ..][0..32]);
        const ql1: U8x32 = loadBytes(32, b.ql[64 * h + 32 ..][0..32]);
        const qh: U8x32 = loadBytes(32, b.qh[32 * h ..][0..32]);
        // See `level`.
        return .{
            (ql0 & low4) | ((qh & @as(U8x32, @splat(0x03))) << @splat(4)),
            (ql1 & low4) | ((qh & @as(U8x32, @splat(0x0C))) << @splat(2)),
            (ql0 >> @splat(4)) | (qh & @as(U8x32, @splat(0x30))),
            (ql1 >> @splat(4)) | ((qh & @as(U8x32, @splat(0xC0))) >> @splat(2)),
        };
    }

    /// Sub-block indices 0, 2, ..., 14 then 1, 3, ..., 15.
    fn parityMask() [16]i32 {
        var m: [16]i32 = undefined;
        for (0..8) |i| {
            m[i] = @intCast(2 * i);
            m[8 + i] = @intCast(2 * i + 1);
        }
        return m;
    }

    /// Scales 0-7 (half h = 0) and 8-15 (h = 1), each in both 128-bit lanes: the
    /// tables `pairBroadcastMask`'s vpshufb picks a part's two scales from.
    inline fn halvesBroadcast(sc16: I16x16) [2]I16x16 {
        return .{
            @shuffle(i16, sc16, undefined, [16]i32{ 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7 }),
            @shuffle(i16, sc16, undefined, [16]i32{ 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15 }),
        };
    }

    /// vpshufb control: i16 lane `s` of a 128-bit lane into the whole low lane, `s + 1`
    /// into the whole high lane.
    fn pairBroadcastMask(comptime s: usize) U8x32 {
        var m: [32]u8 = undefined;
        for (0..16) |k| {
            m[k] = @intCast(2 * s + k % 2);
            m[16 + k] = @intCast(2 * (s + 1) + k % 2);
        }
        return m;
    }

    /// Block `b` (a `Block` or `Planes`) against T activation blocks `ab` (for `Planes`
    /// in planes order), in 256-bit registers: per token the 8 exact i32 lanes
    /// Σ scale·level·a of ggml's AVX2 kernel (before the −32·bsums term); the levels and
    /// the scale vectors are put together once for all the tokens. The integers of the
    /// GEMV (T = 1) and of both AVX2 tiles.
    inline fn blockLanesAvx2(comptime T: usize, b: anytype, ab: [T]*align(1) const Act.Block) [T]I32x8 {
        var acc: [T]I32x8 = @splat(@splat(0));
        if (comptime isPlanes(@TypeOf(b))) {
            // See `planes_order`: the scales of the even sub-blocks in the low 128-bit
            // lane, of the odd ones in the high lane; i32 lane j of each lane (vpshufd)
            // scales vectors 2j and 2j + 1.
            const by_parity: I16x16 = @shuffle(i8, @as(@Vector(16, i8), b.scales), undefined, parityMask());
            inline for (0..2) |h| {
                const u = parts(b, h);
                inline for (0..2) |jj| {
                    const j = 2 * h + jj;
                    const scale: I16x16 = @bitCast(@shuffle(i32, @as(I32x8, @bitCast(by_parity)), undefined, [8]i32{ j, j, j, j, j + 4, j + 4, j + 4, j + 4 }));
                    inline for (0..T) |t| {
                        const pairs = maddubs256(u[2 * jj], actHalf(ab[t], 2 * j)) +% maddubs256(u[2 * jj + 1], actHalf(ab[t], 2 * j + 1));
                        acc[t] += maddwd256(pairs, scale);
                    }
                }
            }
            return acc;
        }
        const sc16: I16x16 = @as(@Vector(16, i8), b.scales);
        const sc_bcast = halvesBroadcast(sc16);
        inline for (0..2) |h| {
            const u = parts(b, h);
            inline for (0..4) |part| {
                const q = 4 * h + part;
                const scale: I16x16 = @bitCast(pshufb256(@bitCast(sc_bcast[h]), comptime pairBroadcastMask(2 * part)));
                inline for (0..T) |t| acc[t] += maddwd256(maddubs256(u[part], actHalf(ab[t], q)), scale);
            }
        }
        return acc;
    }

    /// Block j of each of the T activation rows.
    inline fn blockColumn(comptime T: usize, a_rows: [T][]align(1) const Act.Block, j: usize) [T]*align(1) const Act.Block {
        var out: [T]*align(1) const Act.Block = undefined;
        inline for (0..T) |t| out[t] = &a_rows[t][j];
        return out;
    }

    /// `vecDotTile` on AVX2 (blocks `B`: `Block` or `Planes`), the tile of a 2-7
    /// sequence decode step: each row's block is put together once (`parts`, the scale
    /// vectors) and serves every token; per (row, token) the integer lanes and the float
    /// step (`add8`) are `blockDotAvx2`'s, so out[t][r] equals `vecDot` bit for bit. The
    /// rows' bytes are fetched ahead as the GEMV fetches them (the batch streams the
    /// matrix). `tileDotAcc` over `blockDotAvx2` rebuilt the levels for every token and
    /// did not prefetch: on the AVX2 Zen 3 host a 4-token matmul of the 1B Q4_K_M's
    /// 128256 × 2048 Q6_K head cost 6.0× the 1-token one.
    fn tileAvx2(comptime B: type, comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const B, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
        @setEvalBranchQuota(100_000);
        var dots: [T][R]Acc = @splat(@splat(.{}));
        const n = a_rows[0].len;
        inline for (0..R) |r| std.debug.assert(w_rows[r].len == n);
        inline for (0..T) |t| std.debug.assert(a_rows[t].len == n);
        const step_bytes = R * @sizeOf(B);
        for (0..n) |j| {
            // The R rows are one span (consecutive rows): fetch it linearly ahead.
            prefetchAhead(@ptrCast(w_rows[0].ptr), step_bytes * n, j * step_bytes, step_bytes);
            inline for (0..R) |r| {
                const b = &w_rows[r][j];
                const sc16: I16x16 = @as(@Vector(16, i8), b.scales);
                const acc = blockLanesAvx2(T, b, blockColumn(T, a_rows, j));
                const dw = f16f(b.d);
                inline for (0..T) |t| {
                    const ab = &a_rows[t][j];
                    dots[t][r].add8(acc[t], ab.d * dw, maddwd256(ab.bsums, sc16));
                }
            }
        }
        var out: [T][R]f32 = undefined;
        inline for (0..T) |t| {
            inline for (0..R) |r| out[t][r] = dots[t][r].result();
        }
        return out;
    }

    /// `vecDotTileTiled` on AVX2 (blocks `B`: `Block` or `Planes`), as llama.cpp's AVX2
    /// tiled microkernel computes it: each row's block is put together once (its eight
    /// 32-level parts and their scale vectors), then every token's activations go through
    /// one vpmaddubsw, one vpmaddwd and one add per part. The 512-bit-shaped `blockDot`
    /// put the block together again for every token, with the scales: 3 vector operations
    /// per 32 levels and token here against about 9. The integers are exact, and per
    /// block s = Σ lanes − 32·Σ scale·bsum, then sum = fma(f32(s)·d_w, d_a, sum): the
    /// bits of `TiledAcc`.
    fn tileTiledAvx2(comptime B: type, comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const B, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
        @setEvalBranchQuota(100_000);
        const F32xT = @Vector(T, f32);
        const n = a_rows[0].len;
        inline for (0..R) |r| std.debug.assert(w_rows[r].len == n);
        inline for (0..T) |t| std.debug.assert(a_rows[t].len == n);
        var sum: [R]F32xT = @splat(@splat(0));
        for (0..n) |j| {
            var d_a: F32xT = undefined;
            inline for (0..T) |t| d_a[t] = a_rows[t][j].d;
            inline for (0..R) |r| {
                const b = &w_rows[r][j];
                const sc16: I16x16 = @as(@Vector(16, i8), b.scales);
                var acc = blockLanesAvx2(T, b, blockColumn(T, a_rows, j));
                inline for (0..T) |t| acc[t] -= maddwd256(a_rows[t][j].bsums, sc16) << @splat(5);
                const s = sumEach(T, acc);
                const scaled = @as(F32xT, @floatFromInt(s)) * @as(F32xT, @splat(f16f(b.d)));
                sum[r] = @mulAdd(F32xT, scaled, d_a, sum[r]);
            }
        }
        var out: [T][R]f32 = undefined;
        inline for (0..T) |t| {
            inline for (0..R) |r| out[t][r] = sum[r][t];
        }
        return out;
    }

    /// Scalar reference of the tiled order: element by element integers, then the floats.
    pub fn vecDotTiledRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var sum: f32 = 0;
        for (w, a) |*b, *ab| {
            var s_int: i32 = 0;
            for (0..16) |sb| {
                var raw: i32 = 0;
                for (16 * sb..16 * sb + 16) |e| raw += (@as(i32, level(b, e)) - 32) * ab.qs[e];
                s_int += @as(i32, b.scales[sb]) * raw;
            }
            sum = @mulAdd(f32, @as(f32, @floatFromInt(s_int)) * f16f(b.d), ab.d, sum);
        }
        return sum;
    }
};

/// The kernels of Q6_K over `Q6_K.Planes` blocks (repack.zig's `Q6_Kp`, an AVX2
/// load-time layout of Q6_K matrices): every order (`vecDot`'s, the tiled one) gives
/// the bits of Q6_K's over the same blocks. The planes save the AVX2 GEMV 6 of the 17
/// vector operations that put 128 levels together. `vecDotRows` over 2048-wide rows on
/// the Zen 3 host, one thread, Q6_K and planes alternating in one process, best of
/// passes in 4 rounds, GB/s: 128 rows (in L2) 21.3-24.6 → 22.7-26.9, 65536 rows (from
/// memory) 13.8-18.4 → 15.0-19.6. Its levels and its activations (`Q8_KP`) are in
/// `Q6_K.planes_order`, which halves the scale vectors and the vpmaddwd of a block:
/// same host, ggml's order and this one alternating in 4 processes each, 2048-wide
/// rows at 1 thread, medians of 5 passes, GB/s: 2048 rows (in L3) 18.2-23.6 → 26.7-26.9,
/// 65536 rows (from memory) 19.9-20.2 → 19.9-21.3; the 1B Q4_K_M's 2048 × 8192
/// `ffn_down` at 64 tokens 22.3-26.6 → 20.7-23.3 ms (3 processes each).
pub const Q6_KPlanes = struct {
    pub const name = "Q6_Kp";
    pub const block_elems: usize = qk_k;
    pub const Block = Q6_K.Planes;
    pub const Act = Q8_KP;

    const kernels = Q6KKernels(Block);
    pub const vecDot = kernels.vecDot;
    pub const vecDotRows = kernels.vecDotRows;
    pub const vecDotTile = kernels.vecDotTile;
    pub const vecDotRowsTiled = kernels.vecDotRowsTiled;
    pub const vecDotTileTiled = kernels.vecDotTileTiled;
    pub const vecDotTiled = kernels.vecDotTiled;
};

/// Q6_K's dot products over blocks of type `B` (`Q6_K.Block`, or `Q6_K.Planes` for
/// `Q6_KPlanes`): the same code over either, so the same bits.
fn Q6KKernels(comptime B: type) type {
    return struct {
        const Block = B;
        const Act = Q8_K;
        const Acc = Q6_K.Acc;

        inline fn blockDot(comptime path: Path, b: *align(1) const B, ab: *align(1) const Act.Block, dot: anytype) void {
            Q6_K.blockDot(path, b, ab, dot);
        }

        fn vecDot(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
            return vecDotPath(default_path, w, a);
        }

        fn vecDotPath(comptime path: Path, w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
            std.debug.assert(w.len == a.len);
            return rowsDot(@This(), path, 1, .{w}, a)[0];
        }

        /// R rows against one activation row, bit-identical to R calls of vecDot (each row
        /// runs the same per-block code; only the activation loads are shared).
        fn vecDotRows(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
            // AVX2 has 16 ymm registers: one row's loop keeps its accumulators, masks and
            // scales in them; R rows interleaved spilled. 4096-wide GEMV on the Zen 3 host, GB/s
            // in L2 / from memory, median of 6 interleaved runs: the 512-bit-shaped blockDot 4
            // rows at a time 21.3 / 19.7; blockDotAvx2 4 at a time 22.2 / 19.6, row by row 23.5 / 21.4.
            if (comptime default_path == .avx2) {
                var out: [R]f32 = undefined;
                inline for (0..R) |r| out[r] = rowsDot(@This(), default_path, 1, .{w_rows[r]}, a)[0];
                return out;
            }
            return rowsDot(@This(), default_path, R, w_rows, a);
        }

        /// R rows × T tokens, bit-identical to vecDot per (row, token) (see `tileDotAcc`;
        /// on AVX2 `Q6_K.tileAvx2`).
        fn vecDotTile(comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
            if (comptime default_path == .avx2) return Q6_K.tileAvx2(Block, R, T, w_rows, a_rows);
            return tileDotAcc(@This(), Acc, default_path, R, T, w_rows, a_rows);
        }

        /// R rows in the order of llama.cpp's tiled matmul (see `TiledAcc`), which takes
        /// batches of `tiled_min_tokens` or more.
        fn vecDotRowsTiled(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
            return rowsDotAcc(@This(), TiledAcc(5), default_path, R, w_rows, a);
        }

        /// R rows × T tokens in the tiled order, bit-identical to `vecDotTiled` per (row,
        /// token) (see `tileDotAcc`): each weight block is decoded once per tile.
        fn vecDotTileTiled(comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
            if (comptime default_path == .avx2) return Q6_K.tileTiledAvx2(Block, R, T, w_rows, a_rows);
            if (comptime (R * T) % 16 == 0) return tileDotTiledFold(@This(), 5, default_path, R, T, w_rows, a_rows);
            return tileDotAcc(@This(), TiledAcc(5), default_path, R, T, w_rows, a_rows);
        }

        /// One row in the tiled order.
        fn vecDotTiled(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
            return rowsDotAcc(@This(), TiledAcc(5), default_path, 1, .{w}, a)[0];
        }
    };
}

// ---------------------------------------------------------------------------
// Q5_K

pub const Q5_K = struct {
    pub const ggml_type: u32 = 13;
    pub const name = "Q5_K";
    pub const block_elems: usize = qk_k;
    pub const Block = extern struct { d: f16, dmin: f16, scales: [12]u8, qh: [qk_k / 8]u8, qs: [qk_k / 2]u8 };
    comptime {
        std.debug.assert(@sizeOf(Block) == 176);
    }
    pub const Act = Q8_K;
    const Acc = GgmlMinAcc(true);

    /// Level (0..31) of element e.
    inline fn level(b: *align(1) const Block, e: usize) u8 {
        const c = e / 64;
        const l = e % 32;
        const upper = (e % 64) >= 32;
        const byte = b.qs[32 * c + l];
        const low = if (upper) byte >> 4 else byte & 0xF;
        const bit: u3 = @intCast(2 * c + @intFromBool(upper));
        return low + (if ((b.qh[l] >> bit) & 1 != 0) @as(u8, 16) else 0);
    }

    pub fn dequantizeRow(x: []align(1) const Block, y: []f32) void {
        std.debug.assert(y.len == x.len * qk_k);
        for (x, 0..) |*b, i| {
            const out = y[i * qk_k ..][0..qk_k];
            const d = fp16ToFp32(b.d);
            const min = fp16ToFp32(b.dmin);
            for (0..8) |j| {
                const sc, const m = getScaleMinK4(j, &b.scales);
                const dj = d * fi(sc);
                const mj = min * fi(m);
                for (0..32) |l| out[32 * j + l] = dj * fi(level(b, 32 * j + l)) - mj;
            }
        }
    }

    pub fn quantizeRowRef(x: []const f32, y: []align(1) Block) void {
        std.debug.assert(x.len == y.len * qk_k);
        for (y, 0..) |*b, i| {
            var L: [qk_k]u8 = undefined;
            var d: f16 = undefined;
            var dmin: f16 = undefined;
            var scales: [12]u8 = undefined;
            quantizeScalesMinsK(x[i * qk_k ..][0..qk_k], 31, -0.5, 15, &d, &dmin, &scales, &L);
            b.d = d;
            b.dmin = dmin;
            b.scales = scales;
            b.qh = @splat(0);
            var m1: u8 = 1;
            var m2: u8 = 2;
            for (0..4) |c| {
                for (0..32) |j| {
                    var l1 = L[64 * c + j];
                    if (l1 > 15) {
                        l1 -= 16;
                        b.qh[j] |= m1;
                    }
                    var l2 = L[64 * c + j + 32];
                    if (l2 > 15) {
                        l2 -= 16;
                        b.qh[j] |= m2;
                    }
                    b.qs[32 * c + j] = l1 | (l2 << 4);
                }
                m1 <<= 2;
                m2 <<= 2;
            }
        }
    }

    pub fn vecDotRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var acc: Acc = .{};
        for (w, a) |*b, *ab| {
            var lanes: [16]i32 = @splat(0);
            var sub: [8]i32 = undefined;
            for (0..8) |j| {
                const sc, const m = getScaleMinK4(j, &b.scales);
                sub[j] = @as(i32, m) * ab.bsums[2 * j] + @as(i32, m) * ab.bsums[2 * j + 1];
                for (0..32) |l| {
                    const e = 32 * j + l;
                    lanes[laneOf(e)] += @as(i32, sc) * @as(i32, level(b, e)) * ab.qs[e];
                }
            }
            acc.add(lanes, ab.d * f16f(b.d), sub, ab.d * f16f(b.dmin));
        }
        return acc.result();
    }

    pub fn vecDot(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        return vecDotPath(default_path, w, a);
    }

    pub fn vecDotPath(comptime path: Path, w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        return rowsDot(@This(), path, 1, .{w}, a)[0];
    }

    /// R rows against one activation row, bit-identical to R calls of vecDot (each row
    /// runs the same per-block code; only the activation loads are shared).
    pub fn vecDotRows(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
        return rowsDot(@This(), default_path, R, w_rows, a);
    }

    /// R rows × T tokens, bit-identical to vecDot per (row, token) (see `tileDotAcc`:
    /// each block decoded once per tile).
    pub fn vecDotTile(comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
        return tileDotAcc(@This(), Acc, default_path, R, T, w_rows, a_rows);
    }

    /// One super-block's contribution to `dot`.
    inline fn blockDot(comptime path: Path, b: *align(1) const Block, ab: *align(1) const Act.Block, dot: anytype) void {
        blockAdd(@This(), path, b, ab, blockLanes(path, 1, false, b, .{ab})[0], dot);
    }

    /// Block `b` against T activation blocks: per token the 16 exact lanes `Acc.add`
    /// takes (the even sub-blocks' in the low 8, the odd ones' in the high 8). The 5-bit
    /// levels and the scales are put together once for all the tokens.
    inline fn blockLanes(comptime path: Path, comptime T: usize, comptime fold: bool, b: *align(1) const Block, ab: [T]*align(1) const Act.Block) [T]FoldedLanes(fold) {
        const sc16: @Vector(8, i16) = unpackScalesMinsK4(&b.scales)[0];
        const qh: U8x32 = loadBytes(32, &b.qh);
        var acc_lo: [T]I32x8 = @splat(@splat(0));
        var acc_hi: [T]I32x8 = @splat(@splat(0));
        // The odd sub-blocks' accumulators (the even ones' when folding).
        const acc_odd = if (fold) &acc_lo else &acc_hi;
        const one: U8x32 = @splat(1);
        inline for (0..4) |c| {
            const q: U8x32 = loadBytes(32, b.qs[32 * c ..][0..32]);
            // One half's levels at a time, through every token (fewer live registers).
            const u_lo = (q & @as(U8x32, @splat(0xF))) | (((qh >> @splat(2 * c)) & one) << @splat(4));
            inline for (0..T) |t| acc_lo[t] = halfDot(path, acc_lo[t], u_lo, actHalf(ab[t], 2 * c), @splat(sc16[2 * c]));
            const u_hi = (q >> @splat(4)) | (((qh >> @splat(2 * c + 1)) & one) << @splat(4));
            inline for (0..T) |t| acc_odd[t] = halfDot(path, acc_odd[t], u_hi, actHalf(ab[t], 2 * c + 1), @splat(sc16[2 * c + 1]));
        }
        return foldLanes(T, fold, acc_lo, acc_hi);
    }

    /// The min of each 16-element bsum of an activation block (each 32-element
    /// sub-block's min twice): maddwd with the bsums gives the min·bsum lanes, whose
    /// total is s2.
    inline fn minsOf(b: *align(1) const Block) @Vector(16, i16) {
        const mins = unpackScalesMinsK4(&b.scales)[1];
        return @shuffle(u8, mins, undefined, [16]i32{ 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7 });
    }

    const tiled = TiledKernels(@This());
    pub const vecDotRowsTiled = tiled.vecDotRowsTiled;
    pub const vecDotTileTiled = tiled.vecDotTileTiled;
    pub const vecDotTiled = tiled.vecDotTiled;

    /// Scalar reference of the tiled order: element by element integers, then the floats.
    pub fn vecDotTiledRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var sum: f32 = 0;
        for (w, a) |*b, *ab| {
            var s1: i32 = 0;
            var s2: i32 = 0;
            for (0..8) |j| {
                const sc, const m = getScaleMinK4(j, &b.scales);
                var raw: i32 = 0;
                for (32 * j..32 * j + 32) |e| raw += @as(i32, level(b, e)) * ab.qs[e];
                s1 += @as(i32, sc) * raw;
                s2 += @as(i32, m) * (@as(i32, ab.bsums[2 * j]) + ab.bsums[2 * j + 1]);
            }
            const res = @mulAdd(f32, -f16f(b.dmin), @floatFromInt(s2), @as(f32, @floatFromInt(s1)) * f16f(b.d));
            sum = @mulAdd(f32, res, ab.d, sum);
        }
        return sum;
    }
};

// ---------------------------------------------------------------------------
// Q3_K

pub const Q3_K = struct {
    pub const ggml_type: u32 = 11;
    pub const name = "Q3_K";
    pub const block_elems: usize = qk_k;
    pub const Block = extern struct { hmask: [qk_k / 8]u8, qs: [qk_k / 4]u8, scales: [12]u8, d: f16 };
    comptime {
        std.debug.assert(@sizeOf(Block) == 110);
    }
    pub const Act = Q8_K;
    const Acc = GgmlShiftAcc(0);

    /// The 16 6-bit scales (0..63; ggml subtracts 32), ggml's kmask unpacking.
    inline fn unpackScales(scales: *const [12]u8) [16]u8 {
        var aux: [4]u32 = undefined;
        @memcpy(std.mem.asBytes(&aux)[0..12], scales);
        const kmask1: u32 = 0x03030303;
        const kmask2: u32 = 0x0f0f0f0f;
        const tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        return @bitCast(aux);
    }

    /// Level u (0..7; the quant is u − 4) of element e: 2 low bits from qs, the high bit
    /// from hmask.
    inline fn level(b: *align(1) const Block, e: usize) u8 {
        const h = e / 128;
        const r = e % 128;
        const shift: u3 = @intCast(2 * (r / 32));
        const l = r % 32;
        const low = (b.qs[32 * h + l] >> shift) & 3;
        const bit: u3 = @intCast(4 * h + r / 32);
        return low | (((b.hmask[l] >> bit) & 1) << 2);
    }

    pub fn dequantizeRow(x: []align(1) const Block, y: []f32) void {
        std.debug.assert(y.len == x.len * qk_k);
        for (x, 0..) |*b, i| {
            const out = y[i * qk_k ..][0..qk_k];
            const d_all = fp16ToFp32(b.d);
            const sc = unpackScales(&b.scales);
            for (0..16) |g| {
                const dl = d_all * fi(@as(i32, sc[g]) - 32);
                for (0..16) |l| out[16 * g + l] = dl * fi(@as(i32, level(b, 16 * g + l)) - 4);
            }
        }
    }

    pub fn quantizeRowRef(x: []const f32, y: []align(1) Block) void {
        std.debug.assert(x.len == y.len * qk_k);
        for (y, 0..) |*b, i| {
            const xb = x[i * qk_k ..][0..qk_k];
            var L: [qk_k]i8 = undefined;
            var scales: [16]f32 = undefined;
            var max_scale: f32 = 0;
            var amax: f32 = 0;
            for (0..16) |j| {
                scales[j] = makeQ3Quants(16, 4, xb[16 * j ..][0..16], L[16 * j ..][0..16]);
                const scale = @abs(scales[j]);
                if (scale > amax) {
                    amax = scale;
                    max_scale = scales[j];
                }
            }
            b.scales = @splat(0);
            if (max_scale != 0) {
                const iscale = -32.0 / max_scale;
                for (0..16) |j| {
                    var l: i8 = @truncate(nearestInt(iscale * scales[j]));
                    l = @max(-32, @min(31, l)) + 32;
                    const lu: u8 = @bitCast(l);
                    if (j < 8) b.scales[j] = lu & 0xF else b.scales[j - 8] |= ((lu & 0xF) << 4);
                    const lh = lu >> 4;
                    b.scales[j % 4 + 8] |= (lh << @intCast(2 * (j / 4)));
                }
                b.d = fp32ToFp16(1 / iscale);
            } else {
                b.d = fp32ToFp16(0);
            }
            for (0..16) |j| {
                var sc: u8 = if (j < 8) b.scales[j] & 0xF else b.scales[j - 8] >> 4;
                sc = sc | (((b.scales[8 + j % 4] >> @intCast(2 * (j / 4))) & 3) << 4);
                const sci: i32 = @as(i32, sc) - 32;
                const d = fp16ToFp32(b.d) * fi(sci);
                if (d == 0) continue;
                for (0..16) |ii| {
                    var l = nearestInt(xb[16 * j + ii] / d);
                    l = @max(-4, @min(3, l));
                    L[16 * j + ii] = @intCast(l + 4);
                }
            }
            b.hmask = @splat(0);
            var m: usize = 0;
            var hm: u8 = 1;
            for (0..qk_k) |j| {
                if (L[j] > 3) {
                    b.hmask[m] |= hm;
                    L[j] -= 4;
                }
                m += 1;
                if (m == qk_k / 8) {
                    m = 0;
                    hm <<= 1;
                }
            }
            packQs2(&L, &b.qs);
        }
    }

    pub fn vecDotRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var acc: Acc = .{};
        for (w, a) |*b, *ab| {
            const sc = unpackScales(&b.scales);
            var lanes: [16]i32 = @splat(0);
            for (0..qk_k) |e| lanes[laneOf(e)] += (@as(i32, sc[e / 16]) - 32) * (@as(i32, level(b, e)) - 4) * ab.qs[e];
            const d = ab.d * f16f(b.d);
            acc.add(lanes, d, @splat(0), 0);
        }
        return acc.result();
    }

    pub fn vecDot(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        return vecDotPath(default_path, w, a);
    }

    pub fn vecDotPath(comptime path: Path, w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        return rowsDot(@This(), path, 1, .{w}, a)[0];
    }

    /// R rows against one activation row, bit-identical to R calls of vecDot (each row
    /// runs the same per-block code; only the activation loads are shared).
    pub fn vecDotRows(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
        return rowsDot(@This(), default_path, R, w_rows, a);
    }

    /// R rows × T tokens, bit-identical to vecDot per (row, token) (see `tileDotAcc`).
    pub fn vecDotTile(comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
        return tileDotAcc(@This(), Acc, default_path, R, T, w_rows, a_rows);
    }

    /// One super-block's contribution to `dot`.
    inline fn blockDot(comptime path: Path, b: *align(1) const Block, ab: *align(1) const Act.Block, dot: anytype) void {
        blockAdd(@This(), path, b, ab, blockLanes(path, 1, false, b, .{ab})[0], dot);
    }

    /// Block `b` against T activation blocks: per token the 16 exact lanes `Acc.add`
    /// takes. The 3-bit levels and the scales are put together once for all the tokens;
    /// (u − 4)·a per element pair inside halfDotOffset, as llama.cpp does.
    inline fn blockLanes(comptime path: Path, comptime T: usize, comptime fold: bool, b: *align(1) const Block, ab: [T]*align(1) const Act.Block) [T]FoldedLanes(fold) {
        const sc8: @Vector(16, u8) = unpackScales(&b.scales);
        const sc16 = @as(@Vector(16, i16), sc8) - @as(@Vector(16, i16), @splat(32));
        const hm: U8x32 = loadBytes(32, &b.hmask);
        var acc_lo: [T]I32x8 = @splat(@splat(0));
        var acc_hi: [T]I32x8 = @splat(@splat(0));
        // The odd sub-blocks' accumulators (the even ones' when folding).
        const acc_odd = if (fold) &acc_lo else &acc_hi;
        const one: U8x32 = @splat(1);
        const three: U8x32 = @splat(3);
        inline for (0..2) |h| {
            const q: U8x32 = loadBytes(32, b.qs[32 * h ..][0..32]);
            inline for (0..2) |p| {
                const s0 = 4 * p; // bit shift of the first 32 elements of this chunk
                const bit0 = 4 * h + 2 * p;
                const c = 2 * h + p;
                // One half's levels at a time, through every token (fewer live registers).
                const ua = ((q >> @splat(s0)) & three) | (((hm >> @splat(bit0)) & one) << @splat(2));
                const sa = @shuffle(i16, sc16, undefined, pieceMask(2 * c));
                inline for (0..T) |t| acc_lo[t] = if (fold) halfDot(path, acc_lo[t], ua, actHalf(ab[t], 2 * c), sa) else halfDotOffset(path, acc_lo[t], ua, actHalf(ab[t], 2 * c), sa, 4);
                const ub = ((q >> @splat(s0 + 2)) & three) | (((hm >> @splat(bit0 + 1)) & one) << @splat(2));
                const sb = @shuffle(i16, sc16, undefined, pieceMask(2 * c + 1));
                inline for (0..T) |t| acc_odd[t] = if (fold) halfDot(path, acc_odd[t], ub, actHalf(ab[t], 2 * c + 1), sb) else halfDotOffset(path, acc_odd[t], ub, actHalf(ab[t], 2 * c + 1), sb, 4);
            }
        }
        if (fold) {
            // Folded, only the total counts: Σ sc·(u − 4)·a = Σ sc·u·a − 4·Σ sc·bsum, the
            // offset through the 16-element bsums (one vpmaddwd per token) rather than a
            // second vpmaddubsw per 32 levels. Exact: |4·sc| ≤ 128, |bsum| ≤ 16·127.
            const sc4 = sc16 << @splat(2);
            inline for (0..T) |t| acc_lo[t] -%= maddwd16(path, ab[t].bsums, sc4);
        }
        return foldLanes(T, fold, acc_lo, acc_hi);
    }

    const tiled = TiledKernels(@This());
    pub const vecDotRowsTiled = tiled.vecDotRowsTiled;
    pub const vecDotTileTiled = tiled.vecDotTileTiled;
    pub const vecDotTiled = tiled.vecDotTiled;

    /// Scalar reference of the tiled order: element by element integers, then the floats.
    pub fn vecDotTiledRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var sum: f32 = 0;
        for (w, a) |*b, *ab| {
            const sc = unpackScales(&b.scales);
            var s_int: i32 = 0;
            for (0..qk_k) |e| s_int += (@as(i32, sc[e / 16]) - 32) * (@as(i32, level(b, e)) - 4) * ab.qs[e];
            sum = @mulAdd(f32, @as(f32, @floatFromInt(s_int)) * f16f(b.d), ab.d, sum);
        }
        return sum;
    }
};

/// Q2_K/Q3_K's packing of 2-bit levels: byte l of half h holds elements
/// 128h + l + 32k at bits 2k.
fn packQs2(L: anytype, qs: *[qk_k / 4]u8) void {
    for (0..2) |h| {
        const j = 128 * h;
        for (0..32) |l| {
            const v0: u8 = @intCast(L[j + l]);
            const v1: u8 = @intCast(L[j + l + 32]);
            const v2: u8 = @intCast(L[j + l + 64]);
            const v3: u8 = @intCast(L[j + l + 96]);
            qs[j / 4 + l] = v0 | (v1 << 2) | (v2 << 4) | (v3 << 6);
        }
    }
}

// ---------------------------------------------------------------------------
// Q2_K

pub const Q2_K = struct {
    pub const ggml_type: u32 = 10;
    pub const name = "Q2_K";
    pub const block_elems: usize = qk_k;
    pub const Block = extern struct { scales: [qk_k / 16]u8, qs: [qk_k / 4]u8, d: f16, dmin: f16 };
    comptime {
        std.debug.assert(@sizeOf(Block) == 84);
    }
    pub const Act = Q8_K;
    const Acc = GgmlQ2Acc;

    inline fn level(b: *align(1) const Block, e: usize) u8 {
        const h = e / 128;
        const r = e % 128;
        const shift: u3 = @intCast(2 * (r / 32));
        return (b.qs[32 * h + r % 32] >> shift) & 3;
    }

    pub fn dequantizeRow(x: []align(1) const Block, y: []f32) void {
        std.debug.assert(y.len == x.len * qk_k);
        for (x, 0..) |*b, i| {
            const out = y[i * qk_k ..][0..qk_k];
            const d = fp16ToFp32(b.d);
            const min = fp16ToFp32(b.dmin);
            for (0..16) |g| {
                const sc = b.scales[g];
                const dl = d * fi(sc & 0xF);
                const ml = min * fi(sc >> 4);
                for (0..16) |l| out[16 * g + l] = dl * fi(level(b, 16 * g + l)) - ml;
            }
        }
    }

    pub fn quantizeRowRef(x: []const f32, y: []align(1) Block) void {
        std.debug.assert(x.len == y.len * qk_k);
        const q4scale: f32 = 15.0;
        for (y, 0..) |*b, i| {
            const xb = x[i * qk_k ..][0..qk_k];
            var L: [qk_k]u8 = undefined;
            var Laux: [16]u8 = undefined;
            var weights: [16]f32 = undefined;
            var mins: [16]f32 = undefined;
            var scales: [16]f32 = undefined;
            var max_scale: f32 = 0;
            var max_min: f32 = 0;
            for (0..16) |j| {
                for (0..16) |l| weights[l] = @abs(xb[16 * j + l]);
                scales[j] = makeQkx2Quants(16, 3, xb[16 * j ..][0..16], &weights, L[16 * j ..][0..16], &mins[j], &Laux, -0.5, 0.1, 15, true);
                if (scales[j] > max_scale) max_scale = scales[j];
                if (mins[j] > max_min) max_min = mins[j];
            }
            if (max_scale > 0) {
                const iscale = q4scale / max_scale;
                for (0..16) |j| b.scales[j] = @truncate(@as(u32, @bitCast(nearestInt(iscale * scales[j]))));
                b.d = fp32ToFp16(max_scale / q4scale);
            } else {
                b.scales = @splat(0);
                b.d = fp32ToFp16(0);
            }
            if (max_min > 0) {
                const iscale = q4scale / max_min;
                for (0..16) |j| {
                    const l: u32 = @bitCast(nearestInt(iscale * mins[j]));
                    b.scales[j] |= @truncate(l << 4);
                }
                b.dmin = fp32ToFp16(max_min / q4scale);
            } else {
                b.dmin = fp32ToFp16(0);
            }
            for (0..16) |j| {
                const d = fp16ToFp32(b.d) * fi(b.scales[j] & 0xF);
                if (d == 0) continue;
                const dm = fp16ToFp32(b.dmin) * fi(b.scales[j] >> 4);
                for (0..16) |ii| {
                    const l = nearestInt((xb[16 * j + ii] + dm) / d);
                    L[16 * j + ii] = @intCast(@max(0, @min(3, l)));
                }
            }
            packQs2(&L, &b.qs);
        }
    }

    pub fn vecDotRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var acc: Acc = .{};
        for (w, a) |*b, *ab| {
            var lanes: [16]i32 = @splat(0);
            var sub: [8]i32 = undefined;
            for (0..8) |k| sub[k] = @as(i32, b.scales[2 * k] >> 4) * ab.bsums[2 * k] + @as(i32, b.scales[2 * k + 1] >> 4) * ab.bsums[2 * k + 1];
            for (0..qk_k) |e| lanes[laneOf(e)] += @as(i32, b.scales[e / 16] & 0xF) * @as(i32, level(b, e)) * ab.qs[e];
            acc.add(lanes, ab.d * f16f(b.d), sub, ab.d * f16f(b.dmin));
        }
        return acc.result();
    }

    pub fn vecDot(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        return vecDotPath(default_path, w, a);
    }

    pub fn vecDotPath(comptime path: Path, w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        return rowsDot(@This(), path, 1, .{w}, a)[0];
    }

    /// R rows against one activation row, bit-identical to R calls of vecDot (each row
    /// runs the same per-block code; only the activation loads are shared).
    pub fn vecDotRows(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
        return rowsDot(@This(), default_path, R, w_rows, a);
    }

    /// R rows × T tokens, bit-identical to vecDot per (row, token) (see `tileDotAcc`).
    pub fn vecDotTile(comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
        return tileDotAcc(@This(), Acc, default_path, R, T, w_rows, a_rows);
    }

    /// One super-block's contribution to `dot`.
    inline fn blockDot(comptime path: Path, b: *align(1) const Block, ab: *align(1) const Act.Block, dot: anytype) void {
        blockAdd(@This(), path, b, ab, blockLanes(path, 1, false, b, .{ab})[0], dot);
    }

    /// Block `b` against T activation blocks: per token the 16 exact lanes `Acc.add`
    /// takes. The 2-bit levels and the scales are put together once for all the tokens.
    inline fn blockLanes(comptime path: Path, comptime T: usize, comptime fold: bool, b: *align(1) const Block, ab: [T]*align(1) const Act.Block) [T]FoldedLanes(fold) {
        const scv: @Vector(16, u8) = b.scales;
        const sc16: @Vector(16, i16) = scv & @as(@Vector(16, u8), @splat(0xF));
        var acc_lo: [T]I32x8 = @splat(@splat(0));
        var acc_hi: [T]I32x8 = @splat(@splat(0));
        // The odd sub-blocks' accumulators (the even ones' when folding).
        const acc_odd = if (fold) &acc_lo else &acc_hi;
        inline for (0..2) |h| {
            const q: U8x32 = loadBytes(32, b.qs[32 * h ..][0..32]);
            inline for (0..2) |p| {
                const s0 = 4 * p;
                const c = 2 * h + p;
                const three: U8x32 = @splat(3);
                // One half's levels at a time, through every token (fewer live registers).
                const ua = (q >> @splat(s0)) & three;
                inline for (0..T) |t| acc_lo[t] = halfDot(path, acc_lo[t], ua, actHalf(ab[t], 2 * c), @shuffle(i16, sc16, undefined, pieceMask(2 * c)));
                const ub = (q >> @splat(s0 + 2)) & three;
                inline for (0..T) |t| acc_odd[t] = halfDot(path, acc_odd[t], ub, actHalf(ab[t], 2 * c + 1), @shuffle(i16, sc16, undefined, pieceMask(2 * c + 1)));
            }
        }
        return foldLanes(T, fold, acc_lo, acc_hi);
    }

    /// The min of each 16-element sub-block (one per bsum of an activation block):
    /// maddwd with the bsums gives the min·bsum lanes, whose total is s2.
    inline fn minsOf(b: *align(1) const Block) @Vector(16, i16) {
        const scv: @Vector(16, u8) = b.scales;
        return scv >> @splat(4);
    }

    const tiled = TiledKernels(@This());
    pub const vecDotRowsTiled = tiled.vecDotRowsTiled;
    pub const vecDotTileTiled = tiled.vecDotTileTiled;
    pub const vecDotTiled = tiled.vecDotTiled;

    /// Scalar reference of the tiled order: element by element integers, then the floats.
    pub fn vecDotTiledRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var sum: f32 = 0;
        for (w, a) |*b, *ab| {
            var s1: i32 = 0;
            var s2: i32 = 0;
            for (0..qk_k) |e| s1 += @as(i32, b.scales[e / 16] & 0xF) * @as(i32, level(b, e)) * ab.qs[e];
            for (0..16) |k| s2 += @as(i32, b.scales[k] >> 4) * ab.bsums[k];
            const res = @mulAdd(f32, -f16f(b.dmin), @floatFromInt(s2), @as(f32, @floatFromInt(s1)) * f16f(b.d));
            sum = @mulAdd(f32, res, ab.d, sum);
        }
        return sum;
    }
};

// ---------------------------------------------------------------------------
// IQ4_XS

pub const IQ4_XS = struct {
    pub const ggml_type: u32 = 23;
    pub const name = "IQ4_XS";
    pub const block_elems: usize = qk_k;
    pub const Block = extern struct { d: f16, scales_h: u16, scales_l: [qk_k / 64]u8, qs: [qk_k / 2]u8 };
    comptime {
        std.debug.assert(@sizeOf(Block) == 136);
    }
    pub const Act = Q8_K;
    const Acc = GgmlShiftAcc(0);

    /// The 6-bit scale (0..63; ggml subtracts 32) of sub-block ib (32 elements).
    inline fn scale(b: *align(1) const Block, ib: usize) i32 {
        const low = (b.scales_l[ib / 2] >> @intCast(4 * (ib % 2))) & 0xf;
        const high: u8 = @truncate((b.scales_h >> @intCast(2 * ib)) & 3);
        return @as(i32, low | (high << 4)) - 32;
    }

    inline fn index(b: *align(1) const Block, e: usize) u8 {
        const ib = e / 32;
        const j = e % 32;
        const byte = b.qs[16 * ib + j % 16];
        return if (j < 16) byte & 0xf else byte >> 4;
    }

    pub fn dequantizeRow(x: []align(1) const Block, y: []f32) void {
        std.debug.assert(y.len == x.len * qk_k);
        for (x, 0..) |*b, i| {
            const out = y[i * qk_k ..][0..qk_k];
            const d = fp16ToFp32(b.d);
            for (0..8) |ib| {
                const dl = d * fi(scale(b, ib));
                for (0..32) |j| out[32 * ib + j] = dl * fi(kvalues_iq4nl[index(b, 32 * ib + j)]);
            }
        }
    }

    /// quantize_iq4_xs without importance weights (ggml's quantize_row_iq4_nl_impl with
    /// super-block 256, block 32, ntry 7).
    pub fn quantizeRowRef(x: []const f32, y: []align(1) Block) void {
        std.debug.assert(x.len == y.len * qk_k);
        const values = &kvalues_iq4nl;
        const ntry = 7;
        for (y, 0..) |*b, i| {
            const xs = x[i * qk_k ..][0..qk_k];
            var L: [qk_k]u8 = undefined;
            var weight: [32]f32 = undefined;
            var scales: [8]f32 = undefined;
            b.qs = @splat(0);
            var max_scale: f32 = 0;
            var amax_scale: f32 = 0;
            for (0..8) |ib| {
                const xb = xs[32 * ib ..][0..32];
                const Lb = L[32 * ib ..][0..32];
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
                if (amax < group_max_eps) {
                    scales[ib] = 0;
                    continue;
                }
                var d = -max / fi(values[0]);
                var id = 1 / d;
                var sumqx: f32 = 0;
                var sumq2: f32 = 0;
                for (0..32) |j| {
                    const al = id * xb[j];
                    const l = bestIndexIq4(al);
                    Lb[j] = l;
                    const q = fi(values[l]);
                    const w = weight[j];
                    sumqx += w * q * xb[j];
                    sumq2 += w * q * q;
                }
                d = if (sumq2 > 0) sumqx / sumq2 else 0;
                var best = d * sumqx;
                var itry: i32 = -ntry;
                while (itry <= ntry) : (itry += 1) {
                    id = fi(itry + values[0]) / max;
                    sumqx = 0;
                    sumq2 = 0;
                    for (0..32) |j| {
                        const al = id * xb[j];
                        const l = bestIndexIq4(al);
                        const q = fi(values[l]);
                        const w = weight[j];
                        sumqx += w * q * xb[j];
                        sumq2 += w * q * q;
                    }
                    if (sumq2 > 0 and sumqx * sumqx > best * sumq2) {
                        d = sumqx / sumq2;
                        best = d * sumqx;
                    }
                }
                scales[ib] = d;
                const abs_d = @abs(d);
                if (abs_d > amax_scale) {
                    amax_scale = abs_d;
                    max_scale = d;
                }
            }
            b.scales_h = 0;
            b.scales_l = @splat(0);
            const d = -max_scale / 32;
            b.d = fp32ToFp16(d);
            const id: f32 = if (d != 0) 1 / d else 0;
            for (0..8) |ib| {
                var l = nearestInt(id * scales[ib]);
                l = @max(-32, @min(31, l));
                const dl = d * fi(l);
                const idl: f32 = if (dl != 0) 1 / dl else 0;
                const xb = xs[32 * ib ..][0..32];
                for (0..32) |j| L[32 * ib + j] = bestIndexIq4(idl * xb[j]);
                const lu: u8 = @intCast(l + 32);
                const l_l = lu & 0xf;
                const l_h = lu >> 4;
                if (ib % 2 == 0) b.scales_l[ib / 2] = l_l else b.scales_l[ib / 2] |= (l_l << 4);
                b.scales_h |= @as(u16, l_h) << @intCast(2 * (ib % 8));
            }
            for (0..8) |ib| {
                for (0..16) |j| b.qs[16 * ib + j] = L[32 * ib + j] | (L[32 * ib + 16 + j] << 4);
            }
        }
    }

    pub fn vecDotRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var acc: Acc = .{};
        for (w, a) |*b, *ab| {
            var lanes: [16]i32 = @splat(0);
            for (0..qk_k) |e| lanes[laneOf(e)] += scale(b, e / 32) * @as(i32, kvalues_iq4nl[index(b, e)]) * ab.qs[e];
            acc.add(lanes, ab.d * f16f(b.d), @splat(0), 0);
        }
        return acc.result();
    }

    pub fn vecDot(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        return vecDotPath(default_path, w, a);
    }

    pub fn vecDotPath(comptime path: Path, w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        return rowsDot(@This(), path, 1, .{w}, a)[0];
    }

    /// R rows against one activation row, bit-identical to R calls of vecDot (each row
    /// runs the same per-block code; only the activation loads are shared).
    pub fn vecDotRows(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
        return rowsDot(@This(), default_path, R, w_rows, a);
    }

    /// R rows × T tokens, bit-identical to vecDot per (row, token) (see `tileDotAcc`:
    /// each block decoded once per tile).
    pub fn vecDotTile(comptime R: usize, comptime T: usize, w_rows: [R][]align(1) const Block, a_rows: [T][]align(1) const Act.Block) [T][R]f32 {
        return tileDotAcc(@This(), Acc, default_path, R, T, w_rows, a_rows);
    }

    /// One super-block's contribution to `dot`.
    inline fn blockDot(comptime path: Path, b: *align(1) const Block, ab: *align(1) const Act.Block, dot: anytype) void {
        blockAdd(@This(), path, b, ab, blockLanes(path, 1, false, b, .{ab})[0], dot);
    }

    const tiled = TiledKernels(@This());
    pub const vecDotRowsTiled = tiled.vecDotRowsTiled;
    pub const vecDotTileTiled = tiled.vecDotTileTiled;
    pub const vecDotTiled = tiled.vecDotTiled;

    /// Scalar reference of the tiled order: element by element integers, then the floats.
    pub fn vecDotTiledRef(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var sum: f32 = 0;
        for (w, a) |*b, *ab| {
            var s_int: i32 = 0;
            for (0..qk_k) |e| s_int += scale(b, e / 32) * kvalues_iq4nl[index(b, e)] * @as(i32, ab.qs[e]);
            sum = @mulAdd(f32, @as(f32, @floatFromInt(s_int)) * f16f(b.d), ab.d, sum);
        }
        return sum;
    }

    /// Block `b` against T activation blocks: per token the 16 exact lanes `Acc.add`
    /// takes (the even sub-blocks' in the low 8, the odd ones' in the high 8). The
    /// indices, the values' magnitudes and signs and the scales are put together once
    /// for all the tokens.
    inline fn blockLanes(comptime path: Path, comptime T: usize, comptime fold: bool, b: *align(1) const Block, ab: [T]*align(1) const Act.Block) [T]FoldedLanes(fold) {
        const kv: @Vector(16, i8) = kvalues_iq4nl;
        const kv_abs: @Vector(16, u8) = @abs(kv);
        var sc: [8]i16 = undefined;
        inline for (0..8) |ib| sc[ib] = @intCast(scale(b, ib));
        const sc16: @Vector(8, i16) = sc;
        var acc_lo: [T]I32x8 = @splat(@splat(0));
        var acc_hi: [T]I32x8 = @splat(@splat(0));
        // The odd sub-blocks' accumulators (the even ones' when folding).
        const acc_odd = if (fold) &acc_lo else &acc_hi;
        inline for (0..4) |c| {
            // Sub-blocks 2c and 2c+1: bytes 16(2c)..16(2c+2) hold their 64 indices.
            const q: U8x32 = loadBytes(32, b.qs[32 * c ..][0..32]);
            const qlo = q & @as(U8x32, @splat(0xf));
            const qhi = q >> @splat(4);
            inline for (0..2) |half| {
                // Sub-block 2c+half: low nibbles of its 16 bytes, then the high nibbles.
                const idx = @shuffle(u8, qlo, qhi, iq4HalfOrder(half));
                // |w|·(a with w's sign): pairs stay below 2^15 (127·127·2).
                const wabs = lookup16x32(path, kv_abs, idx);
                const values: I8x32 = @bitCast(lookup16x32(path, @as(@Vector(16, u8), @bitCast(kv)), idx));
                inline for (0..T) |t| {
                    const sv = signOf(path, actHalf(ab[t], 2 * c + half), values);
                    if (half == 0) {
                        acc_lo[t] = halfDot(path, acc_lo[t], wabs, sv, @splat(sc16[2 * c]));
                    } else {
                        acc_odd[t] = halfDot(path, acc_odd[t], wabs, sv, @splat(sc16[2 * c + 1]));
                    }
                }
            }
        }
        return foldLanes(T, fold, acc_lo, acc_hi);
    }
};

/// a with the sign of w, for w ≠ 0 (the IQ4 codebook has no 0): −a (wrapping) where w < 0,
/// a elsewhere. One vpsignb on x86.
pub inline fn signOf(comptime path: Path, a: I8x32, w: I8x32) I8x32 {
    if (path == .generic) return @select(i8, w < @as(I8x32, @splat(0)), -%a, a);
    return asm ("vpsignb %[w], %[a], %[out]"
        : [out] "=x" (-> I8x32),
        : [a] "x" (a),
          [w] "x" (w),
    );
}

fn iq4HalfOrder(comptime half: usize) [32]i32 {
    var m: [32]i32 = undefined;
    for (0..16) |j| {
        m[j] = @intCast(16 * half + j);
        m[16 + j] = ~@as(i32, @intCast(16 * half + j));
    }
    return m;
}

/// table[idx] per byte (idx < 16) for 32 bytes: one vpshufb ymm on x86.
inline fn lookup16x32(comptime path: Path, table: @Vector(16, u8), idx: U8x32) U8x32 {
    const t2 = @shuffle(u8, table, undefined, blk: {
        var m: [32]i32 = undefined;
        for (0..32) |k| m[k] = k % 16;
        break :blk m;
    });
    switch (path) {
        .avx512vnni => return asm ("vpshufb %[i], %[t], %[out]"
            : [out] "=v" (-> U8x32),
            : [t] "v" (t2),
              [i] "v" (idx),
        ),
        .avx2 => return asm ("vpshufb %[i], %[t], %[out]"
            : [out] "=x" (-> U8x32),
            : [t] "x" (t2),
              [i] "x" (idx),
        ),
        .generic => {
            const t: [16]u8 = table;
            var out: [32]u8 = undefined;
            const ia: [32]u8 = idx;
            for (&out, ia) |*o, k| o.* = t[k & 15];
            return out;
        },
    }
}
