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
//! Work units are a token's rows of one KV head (up to `rows_per_unit` query heads, fewer
//! when the batch has few rows, so two threads share a decode step): every K and V row is
//! loaded and converted once for the unit's rows. Each row's result is the same whatever
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

/// How V is accumulated: F32 rows directly, F16 in an F16 accumulator, else converted.
const VMode = enum { f32, f16, convert };

fn vModeOf(t: types.Type) VMode {
    return switch (t) {
        .F32 => .f32,
        .F16 => .f16,
        else => .convert,
    };
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
        const x: @Vector(32, i32) = @as(@Vector(32, i8), kb.qs);
        const y: @Vector(32, i32) = @as(@Vector(32, i8), ab.qs);
        const products: [32]i32 = x * y;
        var lanes: [8]i32 = undefined;
        for (0..8) |g| lanes[g] = (products[4 * g] + products[4 * g + 1]) + (products[4 * g + 2] + products[4 * g + 3]);
        const d = @as(f32, kb.d) * @as(f32, ab.d);
        acc = @mulAdd(V8, @splat(d), @as(V8, @floatFromInt(@as(@Vector(8, i32), lanes))), acc);
    }
    return simd.hsum(8, f32, acc);
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
    for (segments) |seg| {
        var p = seg[0];
        while (p <= seg[1]) : (p += 1) {
            const row = slot_base + @as(usize, @intCast(p)) % job.slot_rows;
            const k = job.k + row * k_row + g * k_head;
            const v = job.v + row * v_row + g * v_head;
            const vf: [*]const f32 = switch (vm) {
                .f32 => @ptrCast(@alignCast(v)),
                .convert => blk: {
                    toFloat(job.v_type, v, v32[0..n]);
                    break :blk &v32;
                },
                .f16 => undefined,
            };
            for (0..nh) |r| {
                const s = score(kt, k, &q_conv[r], n) * job.scale;
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
                if (vm == .f16) madF16(acc16[r][0..n], @ptrCast(v), vs) else madF32(acc[r][0..n], vf, vs);
                s_sum[r] = @mulAdd(f32, s_sum[r], ms, vs);
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
    // Enough units for the threads to share (4 per thread), as few rows apart as that allows.
    const wanted = 4 * @as(usize, pool.thread_count);
    const units_of_one = job.tokens * job.heads;
    job.unit_rows = std.math.clamp(units_of_one / wanted, 1, @min(group, rows_per_unit));
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
