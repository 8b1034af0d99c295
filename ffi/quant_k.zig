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
//! Dot products: every type's dot with a Q8_K row is an exact integer per super-block
//! (Σ scale·Σ q·a with ggml's bsums corrections), combined as
//! `sum += d·isum − dmin·summs` in super-block order. `vecDot` (SIMD) and `vecDotRef`
//! (scalar loops) compute the same integers and the same float sequence, so they are
//! bit-identical on every path.
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

    /// ggml's quantize_row_q8_K_ref (what the CPU backend uses on every arch here). An
    /// all-zero block also gets zero bsums (ggml leaves them as they were; they are unused
    /// there since d = 0).
    pub fn quantizeRow(x: []const f32, y: []align(1) Block) void {
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
    @setEvalBranchQuota(10_000);
    var m: [n / 2]i32 = undefined;
    for (0..n / 2) |i| m[i] = @intCast(i);
    return m;
}
fn highHalfMask(comptime n: usize) [n / 2]i32 {
    @setEvalBranchQuota(10_000);
    var m: [n / 2]i32 = undefined;
    for (0..n / 2) |i| m[i] = @intCast(n / 2 + i);
    return m;
}
fn concatMask(comptime n: usize) [2 * n]i32 {
    @setEvalBranchQuota(10_000);
    var m: [2 * n]i32 = undefined;
    for (0..n) |i| {
        m[i] = @intCast(i);
        m[n + i] = ~@as(i32, @intCast(i));
    }
    return m;
}
fn evenMask(comptime n: usize) [n / 2]i32 {
    @setEvalBranchQuota(10_000);
    var m: [n / 2]i32 = undefined;
    for (0..n / 2) |i| m[i] = @intCast(2 * i);
    return m;
}
fn oddMask(comptime n: usize) [n / 2]i32 {
    @setEvalBranchQuota(10_000);
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

inline fn maddubs256(u: U8x32, s: I8x32) I16x16 {
    return asm ("vpmaddubsw %[s], %[u], %[out]"
        : [out] "=x" (-> I16x16),
        : [u] "x" (u),
          [s] "x" (s),
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

/// i16 lane k of chunk c gets scales[(64c + 2k) / group] (group = elements per scale).
fn scaleMask(comptime groups: usize, comptime group: usize, comptime c: usize) [32]i32 {
    @setEvalBranchQuota(10_000);
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
        var sumf: f32 = 0;
        for (w, a) |*b, *ab| {
            var isum: i32 = 0;
            var summs: i32 = 0;
            for (0..8) |j| {
                const sc, const m = getScaleMinK4(j, &b.scales);
                summs += @as(i32, m) * (@as(i32, ab.bsums[2 * j]) + ab.bsums[2 * j + 1]);
                var s: i32 = 0;
                for (0..32) |l| {
                    const byte = b.qs[32 * (j / 2) + l];
                    const q: i32 = if (j % 2 == 0) byte & 0xF else byte >> 4;
                    s += q * ab.qs[32 * j + l];
                }
                isum += @as(i32, sc) * s;
            }
            sumf += combine2(ab.d, b.d, b.dmin, isum, summs);
        }
        return sumf;
    }

    pub fn vecDot(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        return vecDotPath(default_path, w, a);
    }

    pub fn vecDotPath(comptime path: Path, w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var sumf: f32 = 0;
        for (w, a) |*b, *ab| {
            const sm = unpackScalesMinsK4(&b.scales);
            const sc16: @Vector(8, i16) = sm[0];
            const bs: @Vector(16, i32) = @as(@Vector(16, i16), ab.bsums);
            const m32: @Vector(16, i32) = @as(@Vector(16, i16), @shuffle(u8, sm[1], undefined, [16]i32{ 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7 }));
            const summs = @reduce(.Add, bs * m32);
            var acc: I32x16 = @splat(0);
            inline for (0..4) |c| {
                const q: U8x32 = loadBytes(32, b.qs[32 * c ..][0..32]);
                const u = concat(u8, 32, q & @as(U8x32, @splat(0xF)), q >> @splat(4));
                const scale = @shuffle(i16, @as(@Vector(8, i16), sc16), undefined, scaleMask(8, 32, c));
                acc = chunkDot(path, acc, u, actChunk(ab, c), scale);
            }
            sumf += combine2(ab.d, b.d, b.dmin, @reduce(.Add, acc), summs);
        }
        return sumf;
    }
};

/// d·isum − dmin·summs with d = a_d·w_d, dmin = a_d·w_dmin (one super-block).
inline fn combine2(ad: f32, wd: f16, wdmin: f16, isum: i32, summs: i32) f32 {
    const d = ad * f16f(wd);
    const dmin = ad * f16f(wdmin);
    return d * fi(isum) - dmin * fi(summs);
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
    comptime {
        std.debug.assert(@sizeOf(Block) == 210);
    }
    pub const Act = Q8_K;

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
        var sumf: f32 = 0;
        for (w, a) |*b, *ab| {
            var isum: i32 = 0;
            for (0..16) |g| {
                var s: i32 = 0;
                for (0..16) |l| {
                    const e = 16 * g + l;
                    s += (@as(i32, level(b, e)) - 32) * ab.qs[e];
                }
                isum += @as(i32, b.scales[g]) * s;
            }
            sumf += (ab.d * f16f(b.d)) * fi(isum);
        }
        return sumf;
    }

    pub fn vecDot(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        return vecDotPath(default_path, w, a);
    }

    pub fn vecDotPath(comptime path: Path, w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        std.debug.assert(w.len == a.len);
        var sumf: f32 = 0;
        for (w, a) |*b, *ab| {
            const sc8: @Vector(16, i8) = b.scales;
            const sc16: @Vector(16, i16) = sc8;
            // (u − 32)·a = u·a − 32·a: the −32 part through the 16-element bsums.
            const corr = @reduce(.Add, @as(@Vector(16, i32), sc16) * @as(@Vector(16, i32), @as(@Vector(16, i16), ab.bsums)));
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
            const isum = @reduce(.Add, acc) - 32 * corr;
            sumf += (ab.d * f16f(b.d)) * fi(isum);
        }
        return sumf;
    }
};

