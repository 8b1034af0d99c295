//! Attention over a KV cache of any cache type (kv_types.zig), in the arithmetic of
//! llama.cpp's CPU flash attention (`ggml_compute_forward_flash_attn_ext_f16_one_chunk`
//! of ggml-cpu/ops.cpp), which llama.cpp requires for a quantized V and runs, for a
//! quantized or BF16 K or for K and V of different types, on every batch size and
//! thread count in this one order:
//!
//! - q (f32) is converted to the vec_dot type of K: Q8_0 (x86 `quantize_row_q8_0`) for
//!   Q8_0, Q4_0, Q5_0 and IQ4_NL; Q8_1 for Q4_1 and Q5_1; rounded to F16/BF16 for those.
//! - keys are visited one by one in llama.cpp's cell order; for each, s = vec_dot(K, q)
//!   (the type's `ggml_vec_dot_*`, x86 order) · scale, and the online softmax: when s is
//!   a new maximum M, the accumulator is scaled by expf(M_old − s) and the key's weight
//!   is 1, else its weight is expf(s − M); acc = fma(v, weight, acc) element by element,
//!   with v the V row converted to f32 (its `to_float`); the sum S = fma(S, ms, weight).
//!   An F16 V accumulates in F16 (`ggml_vec_mad_f16` / `ggml_vec_scale_f16`: each step
//!   rounded to F16). expf is the C library's, the one llama.cpp calls.
//! - out = acc · (1/S).
//!
//! Float vec_dots (an F32/F16/BF16 K beside another V type) take the 16-lane order of
//! attention.zig's single-token path (the project's one float order), not the 8-lane one
//! of an AVX2 build.
//!
//! Cell order. Keys of a full-attention layer sit in cells by position. A sliding layer's
//! cache in llama-completion and llama-server (`swa_full` off) is a ring of
//! pad256(window + n_ubatch) cells with position p in cell p mod that size (for one
//! sequence decoded from its start), so a query whose window crosses a multiple of the
//! ring visits the newer positions (cells 0..) before the older ones. `n_ubatch` is
//! llama.cpp's default, 512 (`cell_ubatch`).
//!
//! Work units are a token's rows of one KV head (its query heads, up to `rows_per_unit`;
//! split further only when there are fewer units than threads): every K and V row is
//! loaded once for the unit's rows, their scores computed a chunk of keys ahead. Each row's result is the same whatever
//! unit it is in, so results are bit-identical at every thread count. Scratch is the
//! worker's stack; nothing is allocated.
const std = @import("std");
const types = @import("types.zig");
const kv_types = @import("kv_types.zig");
const quant = @import("quant.zig");
const quant_act = @import("quant_act.zig");
const simd = @import("simd.zig");
const ops = @import("ops.zig");
const pool_zig = @import("pool.zig");
const attention = @import("attention.zig");

const Pool = pool_zig.Pool;
const Status = pool_zig.Status;

extern "c" fn expf(x: f32) f32;

pub const head_dim_max = ops.head_dim_max;
/// llama.cpp's default n_ubatch, which sizes its sliding-window ring (see the module doc).
pub const cell_ubatch = 512;
const V8 = @Vector(8, f32);
/// Most query heads one unit attends together.
pub const rows_per_unit = 8;
/// Below this many (token, key, dim) multiply-adds attention runs on the calling thread.
const parallel_threshold: usize = 1 << 15;

pub const Job = struct {
    out: [*]f32,
    q: [*]const f32,
    k: [*]const u8,
    v: [*]const u8,
    positions: [*]const i32,
    slots: [*]const i32,
    tokens: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    /// Cache rows per slot (a ring when smaller than the context).
    slot_rows: usize,
    /// 0: full causal attention; else the sliding window in positions.
    window: usize,
    scale: f32,
    k_type: types.Type,
    v_type: types.Type,
    /// Query heads per unit (set by `attention`; each row's result does not depend on it).
    unit_rows: usize = 1,

    /// The positions token t visits, in cell order: `[a0, a1]` then `[b0, b1]` (b empty
    /// when b1 < b0).
    fn segments(job: *const Job, t: usize) [2][2]isize {
        const pos: usize = @intCast(job.positions[t]);
        const first = if (job.window > 0 and pos + 1 > job.window) pos + 1 - job.window else 0;
        const p: isize = @intCast(pos);
        const f: isize = @intCast(first);
        if (job.window == 0) return .{ .{ f, p }, .{ 0, -1 } };
        const cells = std.mem.alignForward(usize, job.window + cell_ubatch, 256);
        const boundary: isize = @intCast(pos - pos % cells);
        if (f >= boundary) return .{ .{ f, p }, .{ 0, -1 } };
        return .{ .{ boundary, p }, .{ f, boundary - 1 } };
    }
};

/// True when a K of type `k` and a V of type `v` take this kernel (else attention.zig's).
pub fn takes(k: types.Type, v: types.Type) bool {
    return !(k == v and (k == .F32 or k == .F16));
}

/// How V is accumulated: F32 rows directly, F16 in an F16 accumulator, Q8_0 and Q4_0
/// converted block by block in registers (the same products as their `to_float`), the
/// others converted into a row first.
const VMode = enum { f32, f16, q8_0, q4_0, convert };

fn vModeOf(t: types.Type) VMode {
    return switch (t) {
        .F32 => .f32,
        .F16 => .f16,
        .Q8_0 => .q8_0,
        .Q4_0 => .q4_0,
        else => .convert,
    };
}

/// acc[i] = fma(v[i], w, acc[i]) with v the Q8_0 row at `v` (v = q·d, dequantize_row_q8_0).
inline fn madQ8_0(acc: []f32, v: [*]const u8, w: f32) void {
    const blocks: [*]align(1) const quant.BlockQ8_0 = @ptrCast(v);
    for (0..acc.len / 32) |b| {
        const d: V8 = @splat(@as(f32, blocks[b].d));
        inline for (0..4) |j| {
            const q: @Vector(8, i8) = blocks[b].qs[j * 8 ..][0..8].*;
            const x = @as(V8, @floatFromInt(q)) * d;
            const at = acc[b * 32 + j * 8 ..][0..8];
            at.* = @mulAdd(V8, x, @splat(w), at.*);
        }
    }
}

/// acc[i] = fma(v[i], w, acc[i]) with v the Q4_0 row at `v` (v = (code − 8)·d, element j
/// of a block the low nibble of byte j, element j + 16 its high nibble).
inline fn madQ4_0(acc: []f32, v: [*]const u8, w: f32) void {
    const Block = types.Entry(.Q4_0).Block;
    const blocks: [*]align(1) const Block = @ptrCast(v);
    for (0..acc.len / 32) |b| {
        const d: V8 = @splat(@as(f32, blocks[b].d));
        inline for (0..2) |j| {
            const bytes: @Vector(8, u8) = blocks[b].qs[j * 8 ..][0..8].*;
            const lo: @Vector(8, i32) = @as(@Vector(8, i32), bytes & @as(@Vector(8, u8), @splat(0x0F))) - @as(@Vector(8, i32), @splat(8));
            const hi: @Vector(8, i32) = @as(@Vector(8, i32), bytes >> @splat(4)) - @as(@Vector(8, i32), @splat(8));
            const at_lo = acc[b * 32 + j * 8 ..][0..8];
            const at_hi = acc[b * 32 + 16 + j * 8 ..][0..8];
            at_lo.* = @mulAdd(V8, @as(V8, @floatFromInt(lo)) * d, @splat(w), at_lo.*);
            at_hi.* = @mulAdd(V8, @as(V8, @floatFromInt(hi)) * d, @splat(w), at_hi.*);
        }
    }
}

/// The float element of a float cache type.
fn FloatOf(comptime t: types.Type) type {
    return switch (t) {
        .F32 => f32,
        .F16 => f16,
        .BF16 => u16,
        else => @compileError("not a float type"),
    };
}

fn isFloat(comptime t: types.Type) bool {
    return t == .F32 or t == .F16 or t == .BF16;
}

/// q in K's vec_dot type: the activation blocks of a quantized K (in `buffer`'s bytes),
/// or q rounded to a float K's type (as f32).
fn convertQ(comptime kt: types.Type, q: []const f32, buffer: *[head_dim_max]f32) void {
    if (comptime isFloat(kt)) {
        for (q, buffer[0..q.len]) |x, *o| o.* = switch (kt) {
            .F32 => x,
            .F16 => @as(f16, @floatCast(x)),
            .BF16 => simd.toF32(u16, quant.f32ToBf16(x)),
            else => unreachable,
        };
        return;
    }
    const A = ActOf(kt);
    const blocks: [*]align(1) A.Block = @ptrCast(buffer);
    A.quantizeRow(q, blocks[0 .. q.len / quant_act.qk]);
}

/// The activation format a quantized K's vec_dot consumes.
fn ActOf(comptime kt: types.Type) type {
    return if (kt == .Q8_0) quant_act.Q8_0 else types.Entry(kt).Act;
}

/// `ggml_vec_dot_q8_0_q8_0`, x86 (AVX2) order: per block the 8 lanes of 4-product integer
/// sums, acc = fma(dk·dq, lanes, acc), then `hsum_float_8` (matmul.zig's `referenceQ8_0`).
fn dotQ8_0(k: []align(1) const quant.BlockQ8_0, a: []align(1) const quant_act.Q8_0.Block) f32 {
    var acc: V8 = @splat(0);
    for (k, a) |kb, ab| {
        // Products fit i16 (|q| <= 127); the lanes are exact integer sums in any order.
        const x: @Vector(32, i16) = @as(@Vector(32, i8), kb.qs);
        const y: @Vector(32, i16) = @as(@Vector(32, i8), ab.qs);
        const p = x * y;
        const even: @Vector(16, i32) = @shuffle(i16, p, undefined, evens(16));
        const odd: @Vector(16, i32) = @shuffle(i16, p, undefined, evens(16) + @as(@Vector(16, i32), @splat(1)));
        const pairs = even + odd;
        const lanes = @shuffle(i32, pairs, undefined, evens(8)) + @shuffle(i32, pairs, undefined, evens(8) + @as(@Vector(8, i32), @splat(1)));
        const d = @as(f32, kb.d) * @as(f32, ab.d);
        acc = @mulAdd(V8, @splat(d), @as(V8, @floatFromInt(lanes)), acc);
    }
    return simd.hsum(8, f32, acc);
}

/// 0, 2, 4, … (n lanes).
fn evens(comptime n: usize) @Vector(n, i32) {
    return std.simd.iota(i32, n) * @as(@Vector(n, i32), @splat(2));
}

/// s = vec_dot(K's head segment at `k`, q converted by `convertQ`) of `n` elements.
inline fn score(comptime kt: types.Type, k: [*]const u8, q: *const [head_dim_max]f32, n: usize) f32 {
    if (comptime isFloat(kt)) {
        const T = FloatOf(kt);
        return attention.score(T, .vec_dot, q, @ptrCast(@alignCast(k)), n);
    }
    const E = types.Entry(kt);
    const nb = n / E.block_elems;
    const kb: [*]align(1) const E.Block = @ptrCast(k);
    const A = ActOf(kt);
    const qb: [*]align(1) const A.Block = @ptrCast(q);
    if (kt == .Q8_0) return dotQ8_0(kb[0..nb], qb[0..nb]);
    return E.vecDot(kb[0..nb], qb[0..nb]);
}

/// V's head segment at `v` as f32 (its `to_float`).
fn toFloat(t: types.Type, v: [*]const u8, out: []f32) void {
    switch (t) {
        inline .F32, .F16, .BF16, .Q8_0, .Q4_0, .Q4_1, .Q5_0, .Q5_1, .IQ4_NL => |tag| {
            const E = types.Entry(tag);
            const blocks: [*]align(1) const E.Block = @ptrCast(v);
            E.dequantizeRow(blocks[0 .. out.len / E.block_elems], out);
        },
        else => unreachable,
    }
}

/// acc[i] = fma(x[i], w, acc[i]) (`ggml_vec_mad_f32`).
inline fn madF32(acc: []f32, x: [*]const f32, w: f32) void {
    const n = acc.len;
    var i: usize = 0;
    while (i + 8 <= n) : (i += 8) {
        const a: V8 = acc[i..][0..8].*;
        const b: V8 = x[i..][0..8].*;
        acc[i..][0..8].* = @mulAdd(V8, b, @splat(w), a);
    }
    while (i < n) : (i += 1) acc[i] = @mulAdd(f32, x[i], w, acc[i]);
}

/// acc[i] ·= w (`ggml_vec_scale_f32`).
inline fn scaleF32(acc: []f32, w: f32) void {
    for (acc) |*a| a.* *= w;
}

/// acc[i] = f16(fma(x[i], w, acc[i])) (`ggml_vec_mad_f16`).
inline fn madF16(acc: []f16, x: [*]align(1) const f16, w: f32) void {
    for (acc, 0..) |*a, i| a.* = @floatCast(@mulAdd(f32, x[i], w, a.*));
}

/// acc[i] = f16(acc[i] · w) (`ggml_vec_scale_f16`).
inline fn scaleF16(acc: []f16, w: f32) void {
    for (acc) |*a| a.* = @floatCast(@as(f32, a.*) * w);
}

/// Keys whose scores `attendUnit` computes before visiting them.
const score_chunk = 16;
/// Keys ahead whose K and V rows `attendUnit` prefetches.
const prefetch_keys_ahead = 8;

inline fn prefetchBytes(at: [*]const u8, bytes: usize) void {
    var offset: usize = 0;
    while (offset < bytes) : (offset += 64) @prefetch(at + offset, .{ .locality = 3 });
}

/// Rows h0 .. h0+nh (query heads of KV head g) of token t.
fn attendUnit(comptime kt: types.Type, comptime vm: VMode, job: *const Job, t: usize, g: usize, h0: usize, nh: usize) void {
    const n = job.head_dim;
    const kv_dim = job.kv_heads * n;
    const k_row = kv_types.rowBytes(job.k_type, kv_dim).?;
    const v_row = kv_types.rowBytes(job.v_type, kv_dim).?;
    const k_head = kv_types.rowBytes(job.k_type, n).?;
    const v_head = kv_types.rowBytes(job.v_type, n).?;
    var q_conv: [rows_per_unit][head_dim_max]f32 align(64) = undefined;
    var acc: [rows_per_unit][head_dim_max]f32 align(64) = undefined;
    var acc16: [if (vm == .f16) rows_per_unit else 0][head_dim_max]f16 align(64) = undefined;
    var v32: [head_dim_max]f32 align(64) = undefined;
    var m: [rows_per_unit]f32 = @splat(-std.math.inf(f32));
    var s_sum: [rows_per_unit]f32 = @splat(0);
    for (0..nh) |r| {
        convertQ(kt, job.q[(t * job.heads + h0 + r) * n ..][0..n], &q_conv[r]);
        if (vm == .f16) @memset(acc16[r][0..n], 0) else @memset(acc[r][0..n], 0);
    }
    const slot_base = @as(usize, @intCast(job.slots[t])) * job.slot_rows;
    const segments = job.segments(t);
    // Scores do not depend on the softmax state: each chunk's are computed first (so the
    // dot products of neighbouring keys overlap), then the keys are visited in order.
    var scores: [rows_per_unit][score_chunk]f32 = undefined;
    for (segments) |seg| {
        var c0 = seg[0];
        while (c0 <= seg[1]) : (c0 += score_chunk) {
            const count: usize = @intCast(@min(score_chunk, seg[1] - c0 + 1));
            for (0..count) |j| {
                const p = c0 + @as(isize, @intCast(j));
                const row = slot_base + @as(usize, @intCast(p)) % job.slot_rows;
                const k = job.k + row * k_row + g * k_head;
                if (p + prefetch_keys_ahead <= seg[1]) {
                    // The rows a few keys ahead (a strided walk the hardware prefetcher
                    // follows poorly); no arithmetic changes.
                    const ahead = slot_base + @as(usize, @intCast(p + prefetch_keys_ahead)) % job.slot_rows;
                    prefetchBytes(job.k + ahead * k_row + g * k_head, k_head);
                    prefetchBytes(job.v + ahead * v_row + g * v_head, v_head);
                }
                for (0..nh) |r| scores[r][j] = score(kt, k, &q_conv[r], n) * job.scale;
            }
            for (0..count) |j| {
                const p = c0 + @as(isize, @intCast(j));
                const row = slot_base + @as(usize, @intCast(p)) % job.slot_rows;
                const v = job.v + row * v_row + g * v_head;
                const vf: [*]const f32 = switch (vm) {
                    .f32 => @ptrCast(@alignCast(v)),
                    .convert => blk: {
                        toFloat(job.v_type, v, v32[0..n]);
                        break :blk &v32;
                    },
                    .f16, .q8_0, .q4_0 => undefined,
                };
                for (0..nh) |r| {
                    const s = scores[r][j];
                    const m_old = m[r];
                    var ms: f32 = 1;
                    var vs: f32 = 1;
                    if (s > m_old) {
                        m[r] = s;
                        ms = expf(m_old - s);
                        if (vm == .f16) scaleF16(acc16[r][0..n], ms) else scaleF32(acc[r][0..n], ms);
                    } else {
                        vs = expf(s - m_old);
                    }
                    switch (vm) {
                        .f16 => madF16(acc16[r][0..n], @ptrCast(v), vs),
                        .q8_0 => madQ8_0(acc[r][0..n], v, vs),
                        .q4_0 => madQ4_0(acc[r][0..n], v, vs),
                        .f32, .convert => madF32(acc[r][0..n], vf, vs),
                    }
                    s_sum[r] = @mulAdd(f32, s_sum[r], ms, vs);
                }
            }
        }
    }
    for (0..nh) |r| {
        const out = job.out[(t * job.heads + h0 + r) * n ..][0..n];
        if (vm == .f16) {
            for (out, acc16[r][0..n]) |*o, a| o.* = a;
        } else @memcpy(out, acc[r][0..n]);
        const inv: f32 = if (s_sum[r] == 0) 0 else 1 / s_sum[r];
        scaleF32(out, inv);
    }
}

fn unitsPerKvHead(job: *const Job) usize {
    const group = job.heads / job.kv_heads;
    return (group + job.unit_rows - 1) / job.unit_rows;
}

fn attendRange(comptime kt: types.Type, comptime vm: VMode, job: *const Job, begin: usize, end: usize) void {
    const per_head = unitsPerKvHead(job);
    const group = job.heads / job.kv_heads;
    for (begin..end) |u| {
        const t = u / (job.kv_heads * per_head);
        const rest = u % (job.kv_heads * per_head);
        const g = rest / per_head;
        const sub = rest % per_head;
        const h0 = g * group + sub * job.unit_rows;
        const nh = @min(job.unit_rows, (g + 1) * group - h0);
        attendUnit(kt, vm, job, t, g, h0, nh);
    }
}

/// Attention of every token of `job` (see the module doc). The caller validated the
/// types (`kv_types.fromId`), the counts and that head_dim is a whole number of both
/// types' blocks.
pub fn flashAttention(pool: *Pool, job_in: Job) Status {
    var job = job_in;
    const group = job.heads / job.kv_heads;
    // A unit attends a KV head's whole group of query heads (each K and V row is read once
    // for them), split only as far as it takes to give every thread two units (a decode
    // step of 3 KV heads on 2 threads: 6 units of 2 and 1 rows, not 3 units split 2:1).
    const threads: usize = pool.thread_count;
    const splits = std.math.clamp((2 * threads + job.tokens * job.kv_heads - 1) / (job.tokens * job.kv_heads), 1, group);
    job.unit_rows = @min(rows_per_unit, (group + splits - 1) / splits);
    var keys: usize = 0;
    for (0..job.tokens) |t| {
        const s = job.segments(t);
        keys += @intCast((s[0][1] - s[0][0] + 1) + @max(0, s[1][1] - s[1][0] + 1));
    }
    const work = keys * job.heads * job.head_dim;
    const units = job.tokens * job.kv_heads * unitsPerKvHead(&job);
    switch (job.k_type) {
        inline .F32, .F16, .BF16, .Q8_0, .Q4_0, .Q4_1, .Q5_0, .Q5_1, .IQ4_NL => |kt| switch (vModeOf(job.v_type)) {
            inline else => |vm| {
                const Runner = struct {
                    fn run(j: *const Job, begin: usize, end: usize) void {
                        attendRange(kt, vm, j, begin, end);
                    }
                };
                return pool.run(Job, &job, Runner.run, units, 1, work, parallel_threshold);
            },
        },
        else => unreachable,
    }
}

/// Scalar reference of the same arithmetic, one row and one element at a time: q
/// converted with the same quantizers, the float and Q8_0 vec_dots written out (the
/// lane orders of ggml's code), the legacy types' on their generic `@Vector` path (the
/// x86 order without SIMD intrinsics), V converted by its dequantizer.
pub fn reference(job: Job) void {
    const n = job.head_dim;
    const kv_dim = job.kv_heads * n;
    const group = job.heads / job.kv_heads;
    const k_row = kv_types.rowBytes(job.k_type, kv_dim).?;
    const v_row = kv_types.rowBytes(job.v_type, kv_dim).?;
    const k_head = kv_types.rowBytes(job.k_type, n).?;
    const v_head = kv_types.rowBytes(job.v_type, n).?;
    for (0..job.tokens) |t| for (0..job.heads) |h| {
        const g = h / group;
        const q = job.q[(t * job.heads + h) * n ..][0..n];
        var m: f32 = -std.math.inf(f32);
        var s_sum: f32 = 0;
        var acc: [head_dim_max]f32 = @splat(0);
        var acc16: [head_dim_max]f16 = @splat(0);
        const slot_base = @as(usize, @intCast(job.slots[t])) * job.slot_rows;
        for (job.segments(t)) |seg| {
            var p = seg[0];
            while (p <= seg[1]) : (p += 1) {
                const row = slot_base + @as(usize, @intCast(p)) % job.slot_rows;
                const k = job.k + row * k_row + g * k_head;
                const v = job.v + row * v_row + g * v_head;
                const s = referenceScore(job.k_type, k, q) * job.scale;
                var ms: f32 = 1;
                var vs: f32 = 1;
                if (s > m) {
                    ms = expf(m - s);
                    m = s;
                    for (0..n) |i| {
                        acc[i] *= ms;
                        acc16[i] = @floatCast(@as(f32, acc16[i]) * ms);
                    }
                } else vs = expf(s - m);
                var vf: [head_dim_max]f32 = undefined;
                toFloat(job.v_type, v, vf[0..n]);
                for (0..n) |i| {
                    acc[i] = @mulAdd(f32, vf[i], vs, acc[i]);
                    acc16[i] = @floatCast(@mulAdd(f32, vf[i], vs, acc16[i]));
                }
                s_sum = @mulAdd(f32, s_sum, ms, vs);
            }
        }
        const inv: f32 = if (s_sum == 0) 0 else 1 / s_sum;
        const out = job.out[(t * job.heads + h) * n ..][0..n];
        for (0..n) |i| out[i] = (if (job.v_type == .F16) @as(f32, acc16[i]) else acc[i]) * inv;
    };
}

/// One score written element by element (see `reference`).
fn referenceScore(kt: types.Type, k: [*]const u8, q: []const f32) f32 {
    const n = q.len;
    switch (kt) {
        inline .F32, .F16, .BF16 => |tag| {
            // attention.zig's single-token order: 4 × 16 lanes over steps of 64, summed
            // (0 + 2) + (1 + 3) then the lane tree; the tail in double.
            const T = FloatOf(tag);
            const ks: [*]const T = @ptrCast(@alignCast(k));
            var buffer: [head_dim_max]f32 = undefined;
            convertQ(tag, q, &buffer);
            var lane: [64]f32 = @splat(0);
            const np = n - n % 64;
            for (0..np) |i| lane[i % 64] = @mulAdd(f32, simd.toF32(T, ks[i]), buffer[i], lane[i % 64]);
            var y: [16]f32 = undefined;
            for (0..16) |i| y[i] = (lane[i] + lane[32 + i]) + (lane[16 + i] + lane[48 + i]);
            var half: usize = 8;
            while (half > 0) : (half /= 2) {
                for (0..half) |i| y[i] += y[i + half];
            }
            var wide: f64 = y[0];
            for (np..n) |i| wide += @as(f64, simd.toF32(T, ks[i]) * buffer[i]);
            return @floatCast(wide);
        },
        inline .Q8_0, .Q4_0, .Q4_1, .Q5_0, .Q5_1, .IQ4_NL => |tag| {
            const E = types.Entry(tag);
            const A = ActOf(tag);
            var buffer: [head_dim_max]f32 = undefined;
            convertQ(tag, q, &buffer);
            const qb: [*]align(1) const A.Block = @ptrCast(&buffer);
            const kb: [*]align(1) const E.Block = @ptrCast(k);
            const nb = n / 32;
            if (tag != .Q8_0) return E.vecDotPath(.generic, kb[0..nb], qb[0..nb]);
            // ggml_vec_dot_q8_0_q8_0 (AVX2): 8 lanes of 4 products, fma per block, hsum_float_8.
            var acc: [8]f32 = @splat(0);
            for (0..nb) |b| {
                const d = @as(f32, kb[b].d) * @as(f32, qb[b].d);
                for (0..8) |lane| {
                    var isum: i32 = 0;
                    for (0..4) |i| isum += @as(i32, kb[b].qs[4 * lane + i]) * qb[b].qs[4 * lane + i];
                    acc[lane] = @mulAdd(f32, d, @floatFromInt(isum), acc[lane]);
                }
            }
            for (0..4) |lane| acc[lane] += acc[lane + 4];
            for (0..2) |lane| acc[lane] += acc[lane + 2];
            return acc[0] + acc[1];
        },
        else => unreachable,
    }
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

fn testCase(k_type: types.Type, v_type: types.Type, tokens: usize, pos_start: usize, heads: usize, kv_heads: usize, head_dim: usize, window: usize, slot_rows: usize) !void {
    const allocator = testing.allocator;
    var prng = std.Random.DefaultPrng.init(tokens * 31 + pos_start + head_dim + @intFromEnum(k_type) * 7 + @intFromEnum(v_type));
    const random = prng.random();
    const kv_dim = kv_heads * head_dim;
    const q = try allocator.alloc(f32, tokens * heads * head_dim);
    defer allocator.free(q);
    for (q) |*x| x.* = random.floatNorm(f32);
    const k = try allocator.alloc(u8, slot_rows * kv_types.rowBytes(k_type, kv_dim).?);
    defer allocator.free(k);
    const v = try allocator.alloc(u8, slot_rows * kv_types.rowBytes(v_type, kv_dim).?);
    defer allocator.free(v);
    // Rows written as the cache writes them, for every position the tokens see.
    const positions = try allocator.alloc(i32, tokens);
    defer allocator.free(positions);
    const slots = try allocator.alloc(i32, tokens);
    defer allocator.free(slots);
    var row: [4096]f32 = undefined;
    const last = pos_start + tokens;
    const lo = if (window > 0 and last > slot_rows) last - slot_rows else 0;
    for (lo..last) |p| {
        for (row[0..kv_dim]) |*x| x.* = random.floatNorm(f32);
        kv_types.storeRow(k_type, row[0..kv_dim], k.ptr + (p % slot_rows) * kv_types.rowBytes(k_type, kv_dim).?);
        for (row[0..kv_dim]) |*x| x.* = random.floatNorm(f32);
        kv_types.storeRow(v_type, row[0..kv_dim], v.ptr + (p % slot_rows) * kv_types.rowBytes(v_type, kv_dim).?);
    }
    for (positions, slots, 0..) |*p, *s, t| {
        p.* = @intCast(pos_start + t);
        s.* = 0;
    }
    const expected = try allocator.alloc(f32, q.len);
    defer allocator.free(expected);
    const actual = try allocator.alloc(f32, q.len);
    defer allocator.free(actual);
    const job: Job = .{ .out = expected.ptr, .q = q.ptr, .k = k.ptr, .v = v.ptr, .positions = positions.ptr, .slots = slots.ptr, .tokens = tokens, .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .slot_rows = slot_rows, .window = window, .scale = 0.125, .k_type = k_type, .v_type = v_type };
    reference(job);
    var run = job;
    run.out = actual.ptr;
    for (1..4) |threads| {
        const pool = try Pool.create(allocator, @intCast(threads));
        defer pool.destroy(allocator);
        @memset(actual, std.math.nan(f32));
        try testing.expectEqual(Status.ok, flashAttention(pool, run));
        try testing.expectEqualSlices(f32, expected, actual);
    }
    for (expected) |x| try testing.expect(std.math.isFinite(x));
}

test "flash attention equals its scalar reference bit for bit for every cache type pair, at 1-3 threads" {
    for (kv_types.cache_types) |kt| for (kv_types.cache_types) |vt| {
        if (!takes(kt, vt)) continue;
        try testCase(kt, vt, 1, 70, 6, 2, 64, 0, 80); // decode, GQA
    };
    // Prompts, MHA, MQA, a wider head, a longer context.
    try testCase(.Q8_0, .Q8_0, 5, 0, 4, 4, 128, 0, 8);
    try testCase(.Q4_0, .Q4_0, 7, 300, 9, 3, 64, 0, 400);
    try testCase(.Q4_1, .Q5_0, 3, 40, 4, 1, 32, 0, 50);
    try testCase(.IQ4_NL, .Q5_1, 2, 10, 2, 2, 256, 0, 16);
}

test "a sliding window over a wrapped ring visits the newer cells first, as llama.cpp's ring of pad256(window + 512)" {
    // window 48: cells = 768; a token at 800 sees 753..800: cells 0..32 (768..800) first.
    var job: Job = undefined;
    job.window = 48;
    const position = [_]i32{800};
    job.positions = &position;
    const s = job.segments(0);
    try testing.expectEqual([2]isize{ 768, 800 }, s[0]);
    try testing.expectEqual([2]isize{ 753, 767 }, s[1]);
    const inside = [_]i32{700};
    job.positions = &inside;
    try testing.expectEqual([2]isize{ 653, 700 }, job.segments(0)[0]);
    try testing.expect(job.segments(0)[1][1] < job.segments(0)[1][0]);
    try testCase(.Q8_0, .Q8_0, 3, 798, 4, 2, 64, 48, 50);
    try testCase(.Q4_0, .F16, 1, 790, 4, 2, 64, 48, 50);
}
