//! Causal multi-head attention over a KV cache (F32 or F16), GQA/MQA/MHA, for a batch
//! whose tokens may belong to different sequences, rounding as llama.cpp's x86 CPU
//! build does without flash attention (so greedy tokens match it on models where one
//! ulp matters).
//!
//! q: [tokens][heads·head_dim] f32, already roped. k, v: [slot_count·slot_rows]
//! [kv_heads·head_dim] of the cache type: each sequence (slot) owns `slot_rows` rows, and
//! position p of slot s lives in row `s·slot_rows + p % slot_rows` (a ring when a
//! sliding window keeps fewer rows than the context). Token t, at `positions[t]` of
//! slot `slots[t]`, attends its own slot's positions [lo, positions[t]], lo = 0 or,
//! with a sliding `window` > 0, positions[t] - window + 1. Query head h reads KV head
//! h / (heads / kv_heads).
//!
//! The arithmetic is ggml's: q is rounded to the cache type (ggml converts src1 to the
//! vec_dot type), kq = mul_mat(K, q), softmax(kq·scale) with ggml_v_expf and a double
//! sum over 16-key chunks, the probabilities scaled by (float)(1/sum) and rounded to the
//! cache type, then kqv = mul_mat(Vᵀ, p). ggml's CPU mul_mat takes llamafile's tinyBLAS
//! when the batch has two tokens or more (one 16-lane fused multiply-add chain per
//! output, then a lane tree) and ggml_vec_dot_f16 for a single token (four 16-lane
//! chains over steps of 64, summed 0+2, 1+3, then together, then the lane tree; a tail
//! of fewer than 64 in double). `Mode` names the two; the batch's token count chooses,
//! as there, so a token's result depends on its own query, its slot's rows and whether
//! it was decoded alone. Keys sit in lanes by their position, oldest first, as in
//! llama.cpp's cache of the C API's defaults (`swa_full`: a sliding layer keeps every
//! cell, position p in cell p): the softmax sums 16-key chunks of cells in order and kqv
//! accumulates cell p in lane p % 16 (or % 64), so a window starting at position `first`
//! keeps `first % 64` masked lanes before its first key (our ring's rows hold the data;
//! the lanes come from positions). Cells it masks contribute exact zeros, so its padding
//! of the KV length to 256 cells, and the whole masked 64-cell blocks before the window
//! (skipped here), change nothing. (With `swa_full` off — llama-server's and llama-cli's
//! default — its SWA cache is a ring of window + ubatch cells padded to 256 and a wrapped
//! window is summed in cell order instead; not followed.)
//!
//! Work units are (token, KV head) pairs, claimed in chunks by the pool's threads. The
//! unit of a run's first token attends the run: up to `tokens_per_run` consecutive
//! tokens of one sequence that see the same first key, their (token, query head) pairs as
//! rows, up to `rows_per_pass` at once: every K row is loaded (and converted)
//! once for the pass's rows, every V slice once for the rows of a sweep. A prompt of T
//! tokens at depth D reads its K and V about T·heads / 8 times instead of T·kv_heads.
//! Each row is computed the same way whatever the rows beside it and the thread count.
//! The only scratch is a fixed stack frame per worker (the scores of up to
//! `score_capacity` keys for `rows_per_pass` rows, 256 KiB, 16 KiB of lane
//! accumulators and 8 KiB of K rows converted for a group of keys): nothing is
//! allocated. Longer contexts recompute scores per window of keys.
const std = @import("std");
const simd = @import("simd.zig");
const pool_zig = @import("pool.zig");
const ops = @import("ops.zig");

const Pool = pool_zig.Pool;
const Status = pool_zig.Status;
/// ggml's AVX-512 vector width, used on every target so results never depend on it.
const lanes = 16;
const V16 = @Vector(lanes, f32);

pub const head_dim_max = ops.head_dim_max;
/// Keys whose scores a pass keeps per row (a multiple of 64); beyond this the scores of
/// each window of keys are computed three times (for the maximum, the sums, and kqv),
/// trading time for a fixed stack frame: 8192 keys of 8 rows are 256 KiB of a pool
/// thread's 1 MiB stack (a JS caller's thread has 2 MiB or more). SmolLM2 Q4_1 pp64 at
/// depth 3968 ran at 59.6 tok/s, at depth 4096 past a capacity of 4096 at 31.2.
pub const score_capacity = 8192;
/// The scores capacity of runs whose keys all fit this many: a step over a short context
/// keeps a 32 KiB scores frame rather than reserving (and stack-probing) 256 KiB per run.
const short_capacity = 1024;

/// Below this many (token, key, dim) multiply-adds attention runs on the calling thread.
pub const parallel_threshold: usize = 1 << 15;
/// (token, query head) rows attended together: each K row is loaded (and converted)
/// once per pass.
pub const rows_per_pass = 8;
/// Most tokens per run (see `attendRange`): a prompt's tokens share passes of
/// `rows_per_pass` rows (2 tokens per pass of a model with 4 query heads per KV head, 8
/// with 1); runs of 8 leave a 64-token prompt's KV heads 8 runs each to share among threads.
const tokens_per_run = 8;
/// Bytes of lane accumulators the kqv pass fills per sweep over the keys: half of a
/// 32 KiB L1, beside the V rows and probabilities (a single token's 4 KiB accumulators:
/// one head's four 16-dim slices per sweep, a prompt's 1 KiB ones: four rows of them).
const sweep_accumulator_bytes = 16 * 1024;

/// Rows of ggml's widest lane pattern over keys (vec_dot kqv: four 16-lane chains).
const block = 4 * lanes;

/// A token's keys in virtual key order (see `Job.keyLayout`): `lead` masked indices, then
/// its keys, oldest first, from ring row `row0` on.
pub const Layout = struct {
    lead: usize,
    len: usize,
    row0: usize,
    rows: usize,

    /// The ring row of virtual key index `vi`, or null where masked.
    inline fn rowOf(self: *const Layout, vi: usize) ?usize {
        if (vi < self.lead) return null;
        const r = self.row0 + (vi - self.lead);
        return if (r >= self.rows) r - self.rows else r;
    }
};

/// ggml CPU mul_mat paths: `gemm` is llamafile's tinyBLAS (two tokens or more),
/// `vec_dot` ggml_vec_dot_f16 / _f32 (one token).
pub const Mode = enum { gemm, vec_dot };

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
        /// Every token attends as if decoded alone (the single-token order), whatever
        /// else of its sequence the batch holds: a speculative step's verified tokens
        /// then get the bits of a run without speculation.
        alone: bool = false,

        /// The first position token t sees, and how many.
        fn keyRange(job: *const @This(), t: usize) struct { first: usize, count: usize } {
            const pos: usize = @intCast(job.positions[t]);
            const first = if (job.window > 0 and pos + 1 > job.window) pos + 1 - job.window else 0;
            return .{ .first = first, .count = pos + 1 - first };
        }

        /// Where token t's visible keys sit: virtual key indices congruent to their
        /// positions mod 64 (lanes as llama.cpp's cells), oldest first.
        fn keyLayout(job: *const @This(), t: usize) Layout {
            const range = job.keyRange(t);
            const lead = range.first % block;
            return .{ .lead = lead, .len = lead + range.count, .row0 = range.first % job.slot_rows, .rows = job.slot_rows };
        }

        /// True when token t's sequence (slot) has another token in this batch. llama.cpp
        /// batches one sequence, so its "2+ tokens in the batch" is this; deciding per
        /// sequence keeps each sequence's results what it gets decoded alone, whatever
        /// other sequences share the batch.
        fn batched(job: *const @This(), t: usize) bool {
            if (job.alone) return false;
            const slot = job.slots[t];
            if (t > 0 and job.slots[t - 1] == slot) return true;
            if (t + 1 < job.tokens and job.slots[t + 1] == slot) return true;
            for (0..job.tokens) |u| if (u != t and job.slots[u] == slot) return true;
            return false;
        }

        /// tinyBLAS takes kq when the sequence has 2+ tokens in the batch and head_dim is a
        /// multiple of 16.
        fn kqMode(job: *const @This(), t: usize) Mode {
            return if (job.batched(t) and job.head_dim % lanes == 0) .gemm else .vec_dot;
        }

        /// tinyBLAS takes kqv when the sequence has 2+ tokens in the batch and head_dim (its
        /// rows) is a multiple of 4; the KV length is padded to 256 cells, a multiple of its 16.
        fn kqvMode(job: *const @This(), t: usize) Mode {
            return if (job.batched(t) and job.head_dim % 4 == 0) .gemm else .vec_dot;
        }
    };
}

/// A value rounded to the cache type, as ggml converts an f32 operand to the vec_dot type.
inline fn roundTo(comptime T: type, x: f32) f32 {
    return if (T == f32) x else @floatCast(@as(T, @floatCast(x)));
}

/// Lane tree of one vector: lane i + lane i+8, then +4, +2, +1 (_mm512_reduce_add_ps).
inline fn laneSum(v: V16) f32 {
    return simd.hsum(lanes, f32, v);
}

/// q·k as ggml's mul_mat computes one kq element (q already rounded to the cache type).
pub inline fn score(comptime T: type, comptime mode: Mode, q: [*]const f32, k: [*]const T, n: usize) f32 {
    switch (mode) {
        .gemm => {
            var acc: V16 = @splat(0);
            var i: usize = 0;
            while (i < n) : (i += lanes) acc = @mulAdd(V16, simd.loadAsF32(T, lanes, k + i), simd.loadAsF32(f32, lanes, q + i), acc);
            return laneSum(acc);
        },
        .vec_dot => {
            var acc: [4]V16 = @splat(@splat(0));
            const np = n & ~@as(usize, 4 * lanes - 1);
            var i: usize = 0;
            while (i < np) : (i += 4 * lanes) {
                inline for (0..4) |j| acc[j] = @mulAdd(V16, simd.loadAsF32(T, lanes, k + i + j * lanes), simd.loadAsF32(f32, lanes, q + i + j * lanes), acc[j]);
            }
            var sum: f64 = @as(f64, laneSum((acc[0] + acc[2]) + (acc[1] + acc[3])));
            while (i < n) : (i += 1) sum += @as(f64, simd.toF32(T, k[i]) * q[i]);
            return @floatCast(sum);
        },
    }
}

/// Per-pass state on the worker's stack: `n_rows` (token, query head) rows of one run.
fn Unit(comptime T: type, comptime C: usize) type {
    return struct {
        /// Keys whose scores a row keeps (`score_capacity` or `short_capacity`).
        const capacity = C;
        /// q of each row, rounded to the cache type.
        q: [rows_per_pass][head_dim_max]f32 align(64),
        /// Scores, then exponentials, then rounded probabilities of every key (when they
        /// fit; else of one window at a time).
        scores: [rows_per_pass][C]f32 align(64),
        max: [rows_per_pass]f32,
        inv: [rows_per_pass]f32,
        /// Virtual keys each row's token sees (its layout's `len`).
        len: [rows_per_pass]usize,
        /// Where each row's output goes.
        out: [rows_per_pass][*]f32,
        n_rows: usize,
        /// Virtual key indices of the longest row (its layout is `layout`).
        keys: usize,
        layout: Layout,
        k_base: [*]const T,
        v_base: [*]const T,
    };
}

/// Keys ahead whose K (and V) segments `fillScores` prefetches. A unit's rows are a
/// strided walk (`kv_dim` elements apart, a new page every few keys) through a cache
/// region the size of the whole context, which the hardware prefetcher follows poorly;
/// with several sequences per step the keys of each are cold (measured: attention of a
/// 4-sequence decode step waited on these loads). A prefetch changes no arithmetic.
const prefetch_keys_ahead = 8;

/// Prefetches the head's segment of virtual key `vi`'s row (nothing where masked or past
/// the end).
inline fn prefetchKey(comptime T: type, base: [*]const T, layout: *const Layout, vi: usize, kv_dim: usize, head_dim: usize) void {
    if (vi >= layout.len) return;
    const row = layout.rowOf(vi) orelse return;
    const bytes: [*]const u8 = @ptrCast(base + row * kv_dim);
    var offset: usize = 0;
    while (offset < head_dim * @sizeOf(T)) : (offset += 64) @prefetch(bytes + offset, .{ .locality = 3 });
}

/// Scores·scale of `count` virtual keys from index `p0` for the unit's rows r0..r0+n_rows
/// into those rows of its `scores`; -inf where masked or past a row's own keys. With
/// `prefetch_v` the V rows of the same keys are prefetched too (for the kqv pass that
/// follows). In tinyBLAS's order (`gemm`) whole groups of `keys_per_group` unmasked keys
/// take `scoreGroup`, the same bits in fewer operations.
fn fillScores(comptime T: type, comptime mode: Mode, comptime head_dim_fixed: ?usize, job: *const Job(T), unit: anytype, prefetch_v: bool, r0: usize, n_rows: usize, p0: usize, count: usize) void {
    const head_dim = head_dim_fixed orelse job.head_dim;
    const kv_dim = job.kv_heads * head_dim;
    const layout = &unit.layout;
    const grouped = mode == .gemm and head_dim % lanes == 0 and head_dim <= group_head_dim_max;
    var i: usize = 0;
    while (i < count) {
        // A group's keys are all past the masked lead: each has a ring row.
        const step: usize = if (grouped and i + keys_per_group <= count and p0 + i >= layout.lead) keys_per_group else 1;
        for (p0 + i..p0 + i + step) |vi| {
            prefetchKey(T, unit.k_base, layout, vi + prefetch_keys_ahead, kv_dim, head_dim);
            if (prefetch_v) prefetchKey(T, unit.v_base, layout, vi + prefetch_keys_ahead, kv_dim, head_dim);
        }
        if (step == keys_per_group) {
            scoreGroup(T, head_dim_fixed, job, unit, r0, n_rows, p0, i);
        } else {
            const vi = p0 + i;
            if (layout.rowOf(vi)) |row| {
                const k = unit.k_base + row * kv_dim;
                for (r0..r0 + n_rows) |r| {
                    unit.scores[r][i] = if (vi < unit.len[r]) score(T, mode, (&unit.q[r]).ptr, k, head_dim) * job.scale else -std.math.inf(f32);
                }
            } else for (r0..r0 + n_rows) |r| {
                unit.scores[r][i] = -std.math.inf(f32);
            }
        }
        i += step;
    }
}

/// Keys whose tinyBLAS scores `scoreGroup` computes together: their lane trees run as
/// one transposed tree, the 8 sums in one vector (in 256-bit registers 15 adds and 15
/// shuffles for the 8 keys, against 4 adds and 3 shuffles per key alone, each a step of
/// one key's dependency chain).
const keys_per_group = 8;
/// Widest head `scoreGroup` takes: its converted K rows are 8 KiB on the worker's stack.
const group_head_dim_max = 256;

/// `score` in the `gemm` order × `job.scale` of the unit's rows r0..r0+n_rows against
/// virtual keys p0 + i .. + keys_per_group (all unmasked; -inf past a row's own keys),
/// into `scores[r][i..]`. Each K row is converted once for all the rows; per key and row
/// the fused multiply-add chain is `score`'s and the lane tree `laneSum`'s (the same
/// pairs added in the same order, 8 keys side by side), so every score has its bits.
fn scoreGroup(comptime T: type, comptime head_dim_fixed: ?usize, job: *const Job(T), unit: anytype, r0: usize, n_rows: usize, p0: usize, i: usize) void {
    const head_dim = head_dim_fixed orelse job.head_dim;
    const kv_dim = job.kv_heads * head_dim;
    const V8 = @Vector(8, f32);
    var k32: [keys_per_group][group_head_dim_max]f32 align(64) = undefined;
    for (0..keys_per_group) |key| {
        const k = unit.k_base + unit.layout.rowOf(p0 + i + key).? * kv_dim;
        var d: usize = 0;
        while (d < head_dim) : (d += lanes) simd.storeF32(lanes, k32[key][d..].ptr, simd.loadAsF32(T, lanes, k + d));
    }
    const key_index = std.simd.iota(usize, keys_per_group) + @as(@Vector(keys_per_group, usize), @splat(p0 + i));
    for (r0..r0 + n_rows) |r| {
        const q = (&unit.q[r]).ptr;
        // Level 1 of each key's tree (lane j + lane j + 8), four keys at a time.
        var a: [keys_per_group]V8 = undefined;
        inline for (0..2) |half| {
            var acc: [4]V16 = @splat(@splat(0));
            var d: usize = 0;
            while (d < head_dim) : (d += lanes) {
                const qv = simd.loadAsF32(f32, lanes, q + d);
                inline for (0..4) |j| acc[j] = @mulAdd(V16, simd.loadAsF32(f32, lanes, k32[4 * half + j][d..].ptr), qv, acc[j]);
            }
            inline for (0..4) |j| a[4 * half + j] = @shuffle(f32, acc[j], undefined, std.simd.iota(i32, 8)) +
                @shuffle(f32, acc[j], undefined, std.simd.iota(i32, 8) + @as(@Vector(8, i32), @splat(8)));
        }
        // Level 2 (lanes j + j + 4): keys 2m and 2m + 1 in the two 128-bit halves.
        var b: [4]V8 = undefined;
        inline for (0..4) |m| b[m] = @shuffle(f32, a[2 * m], a[2 * m + 1], [8]i32{ 0, 1, 2, 3, -1, -2, -3, -4 }) +
            @shuffle(f32, a[2 * m], a[2 * m + 1], [8]i32{ 4, 5, 6, 7, -5, -6, -7, -8 });
        // Level 3 (lanes j + j + 2): c[n] = keys 4n, 4n + 2 | 4n + 1, 4n + 3, two lanes each.
        var c: [2]V8 = undefined;
        inline for (0..2) |n| c[n] = @shuffle(f32, b[2 * n], b[2 * n + 1], [8]i32{ 0, 1, -1, -2, 4, 5, -5, -6 }) +
            @shuffle(f32, b[2 * n], b[2 * n + 1], [8]i32{ 2, 3, -3, -4, 6, 7, -7, -8 });
        // Level 4 (lane 0 + lane 1): keys 0, 2, 4, 6 | 1, 3, 5, 7.
        const sums = @shuffle(f32, c[0], c[1], [8]i32{ 0, 2, -1, -3, 4, 6, -5, -7 }) +
            @shuffle(f32, c[0], c[1], [8]i32{ 1, 3, -2, -4, 5, 7, -6, -8 });
        const in_order = @shuffle(f32, sums, undefined, [8]i32{ 0, 4, 1, 5, 2, 6, 3, 7 });
        const visible = key_index < @as(@Vector(keys_per_group, usize), @splat(unit.len[r]));
        const out = @select(f32, visible, in_order * @as(V8, @splat(job.scale)), @as(V8, @splat(-std.math.inf(f32))));
        unit.scores[r][i..][0..keys_per_group].* = out;
    }
}

/// Keys of window [p0, p0 + count) that row r sees (0 past its own keys).
inline fn rowCount(unit: anytype, r: usize, p0: usize, count: usize) usize {
    return if (unit.len[r] > p0) @min(count, unit.len[r] - p0) else 0;
}

/// e^(s - max) in place over `count` scores (zero-padded to whole 16-key chunks, as the
/// masked cells of ggml's row), returning the double sum of the chunks' lane trees.
fn expChunks(row: []f32, count: usize, max: f32) f64 {
    const padded = std.mem.alignForward(usize, count, lanes);
    var sum: f64 = 0;
    var i: usize = 0;
    while (i < padded) : (i += lanes) {
        const x = simd.loadAsF32(f32, lanes, row[i..].ptr);
        var e = simd.expGgml(lanes, x - @as(V16, @splat(max)));
        // Masked keys (-inf) are exact zeros, as ggml's masked cells.
        e = @select(f32, x == @as(V16, @splat(-std.math.inf(f32))), @as(V16, @splat(0)), e);
        if (i + lanes > count) {
            const idx = std.simd.iota(u32, lanes) + @as(@Vector(lanes, u32), @splat(@intCast(i)));
            e = @select(f32, idx < @as(@Vector(lanes, u32), @splat(@intCast(count))), e, @as(V16, @splat(0)));
        }
        simd.storeF32(lanes, row[i..].ptr, e);
        sum += @as(f64, laneSum(e));
    }
    return sum;
}

/// Probabilities e·inv rounded to the cache type (kq converted to the vec_dot type).
fn normalize(comptime T: type, row: []f32, count: usize, inv: f32) void {
    const padded = std.mem.alignForward(usize, count, lanes);
    var i: usize = 0;
    while (i < padded) : (i += lanes) {
        const p = simd.loadAsF32(f32, lanes, row[i..].ptr) * @as(V16, @splat(inv));
        const r: V16 = if (T == f32) p else @floatCast(@as(@Vector(lanes, T), @floatCast(p)));
        simd.storeF32(lanes, row[i..].ptr, r);
    }
}

fn partial(comptime T: type, v: [*]const T, width: usize) V16 {
    var buf: [lanes]f32 = @splat(0);
    for (0..width) |d| buf[d] = simd.toF32(T, v[d]);
    return buf;
}

/// Lane accumulators of one 16-dim slice of one head's output: key p feeds row p % rows.
fn Accumulator(comptime mode: Mode) type {
    return struct {
        const rows = if (mode == .gemm) lanes else 4 * lanes;
        acc: [rows]V16 = @splat(@splat(0)),

        /// Per dim: the tree of rows ggml reduces (see the module doc).
        inline fn result(self: *const @This()) V16 {
            var x: [lanes]V16 = undefined;
            if (mode == .gemm) {
                x = self.acc;
            } else for (0..lanes) |i| {
                x[i] = (self.acc[i] + self.acc[2 * lanes + i]) + (self.acc[lanes + i] + self.acc[3 * lanes + i]);
            }
            // A vertical lane tree: row i + row i+8, then +4, +2, +1.
            comptime var half: usize = lanes / 2;
            inline while (half > 0) : (half /= 2) {
                inline for (0..half) |i| x[i] = x[i] + x[i + half];
            }
            return x[0];
        }
    };
}

/// Adds virtual keys [p0 + i_begin, p0 + i_end) (none of them masked) with probabilities
/// p[r][i] to the accumulators of rows r0..r0+n_rows and `n_slices` 16-dim slices from dim
/// d0 (`acc[(r - r0)·n_slices + s]`): each key's V slice is loaded once for all the rows.
/// The keys go by runs of consecutive ring rows (the ring wrapping at most once), each
/// walked by pointer: `Layout.rowOf` per key, with its branches, cost more than the key's
/// multiply-add. Every accumulator takes its keys in order. `NR`, `NS` > 0 fix n_rows and
/// n_slices at compile time (then every slice is 16 dims wide), so the loops unroll.
fn addKeys(comptime T: type, comptime mode: Mode, comptime NR: usize, comptime NS: usize, acc: []Accumulator(mode), r0: usize, n_rows_rt: usize, n_slices_rt: usize, d0: usize, head_dim: usize, p: anytype, v_base: [*]const T, kv_dim: usize, layout: *const Layout, p0: usize, i_begin: usize, i_end: usize) void {
    const R = Accumulator(mode).rows;
    const n_rows = if (NR > 0) NR else n_rows_rt;
    const n_slices = if (NS > 0) NS else n_slices_rt;
    std.debug.assert(n_rows == n_rows_rt and n_slices == n_slices_rt);
    // Each row's probabilities by pointer (indexing `p` itself would copy a row).
    var row_p: [rows_per_pass][*]const f32 = undefined;
    for (0..n_rows) |r| row_p[r] = (&p[r0 + r]).ptr;
    var i = i_begin;
    while (i < i_end) {
        const row = layout.rowOf(p0 + i).?;
        const run = @min(i_end - i, layout.rows - row);
        var v = v_base + row * kv_dim + d0;
        for (i..i + run) |k| {
            const lane_row = (p0 + k) % R;
            var probability: [rows_per_pass]V16 = undefined;
            for (0..n_rows) |r| probability[r] = @splat(row_p[r][k]);
            for (0..n_slices) |s| {
                const x = if (NS > 0 or head_dim - (d0 + s * lanes) >= lanes)
                    simd.loadAsF32(T, lanes, v + s * lanes)
                else
                    partial(T, v + s * lanes, head_dim - (d0 + s * lanes));
                for (0..n_rows) |r| {
                    const a = &acc[r * n_slices + s];
                    a.acc[lane_row] = @mulAdd(V16, x, probability[r], a.acc[lane_row]);
                }
            }
            v += kv_dim;
        }
        i += run;
    }
}

/// `addKeys` with n_rows fixed at compile time when the head's slices are (`NS` > 0).
fn addKeysAny(comptime T: type, comptime mode: Mode, comptime NS: usize, acc: []Accumulator(mode), r0: usize, n_rows: usize, n_slices: usize, d0: usize, head_dim: usize, p: anytype, v_base: [*]const T, kv_dim: usize, layout: *const Layout, p0: usize, i_begin: usize, i_end: usize) void {
    if (i_begin >= i_end) return;
    if (NS > 0 and n_slices == NS) {
        switch (n_rows) {
            inline 1...rows_per_pass => |nr| return addKeys(T, mode, nr, NS, acc, r0, n_rows, n_slices, d0, head_dim, p, v_base, kv_dim, layout, p0, i_begin, i_end),
            else => unreachable,
        }
    }
    addKeys(T, mode, 0, 0, acc, r0, n_rows, n_slices, d0, head_dim, p, v_base, kv_dim, layout, p0, i_begin, i_end);
}

/// The kqv pass of the unit's rows: sweeps of rows × 16-dim slices whose accumulators
/// fit `sweep_accumulator_bytes`, each over every key, from the probabilities kept in the
/// unit (all keys fit) or recomputed per window of `score_capacity` keys (into the
/// unit's scores, for all its rows: past pass 2 they are scratch). Each accumulator takes
/// its row's keys in order, so the bits depend neither on the windows nor on the rows or
/// slices beside it.
fn kqvPass(comptime T: type, comptime kq_mode: Mode, comptime kqv_mode: Mode, comptime head_dim_fixed: ?usize, job: *const Job(T), unit: anytype) void {
    const capacity = @TypeOf(unit.*).capacity;
    const A = Accumulator(kqv_mode);
    const pairs_max = sweep_accumulator_bytes / @sizeOf(A);
    comptime std.debug.assert(pairs_max >= 1);
    const head_dim = head_dim_fixed orelse job.head_dim;
    const kv_dim = job.kv_heads * head_dim;
    const slice_count: usize = (head_dim + lanes - 1) / lanes;
    const slices_per_sweep: usize = @min(slice_count, pairs_max);
    const rows_per_sweep: usize = @max(1, pairs_max / slices_per_sweep);
    const windowed = unit.keys > capacity;
    // A fixed head of whole slices that one sweep covers: its slice count, fixed too.
    const NS: usize = if (head_dim_fixed) |hd| (if (hd % lanes == 0 and hd / lanes <= pairs_max) hd / lanes else 0) else 0;
    const lead = unit.layout.lead;
    var acc: [pairs_max]A = undefined;
    var s0: usize = 0;
    while (s0 < slice_count) : (s0 += slices_per_sweep) {
        const n_slices: usize = @min(slices_per_sweep, slice_count - s0);
        const d0 = s0 * lanes;
        var r0: usize = 0;
        while (r0 < unit.n_rows) : (r0 += rows_per_sweep) {
            const n_rows: usize = @min(rows_per_sweep, unit.n_rows - r0);
            for (acc[0 .. n_rows * n_slices]) |*a| a.* = .{};
            // The keys every row of the sweep sees, and each row's own beyond them.
            var shared = unit.len[r0];
            for (r0..r0 + n_rows) |r| shared = @min(shared, unit.len[r]);
            var p0: usize = 0;
            while (p0 < unit.keys) : (p0 += capacity) {
                const count = @min(capacity, unit.keys - p0);
                if (windowed) {
                    fillScores(T, kq_mode, head_dim_fixed, job, unit, true, r0, n_rows, p0, count);
                    for (r0..r0 + n_rows) |r| {
                        const n = rowCount(unit, r, p0, count);
                        _ = expChunks(&unit.scores[r], n, unit.max[r]);
                        normalize(T, &unit.scores[r], n, unit.inv[r]);
                    }
                }
                const begin = if (lead > p0) @min(count, lead - p0) else 0;
                const shared_end = @max(begin, if (shared > p0) @min(count, shared - p0) else 0);
                addKeysAny(T, kqv_mode, NS, &acc, r0, n_rows, n_slices, d0, head_dim, &unit.scores, unit.v_base, kv_dim, &unit.layout, p0, begin, shared_end);
                for (0..n_rows) |r| {
                    const end = @max(shared_end, rowCount(unit, r0 + r, p0, count));
                    addKeysAny(T, kqv_mode, NS, acc[r * n_slices ..][0..n_slices], r0 + r, 1, n_slices, d0, head_dim, &unit.scores, unit.v_base, kv_dim, &unit.layout, p0, shared_end, end);
                }
            }
            for (0..n_rows) |r| {
                for (0..n_slices) |s| {
                    const d = d0 + s * lanes;
                    const width = @min(lanes, head_dim - d);
                    const x = acc[r * n_slices + s].result();
                    const out = unit.out[r0 + r];
                    if (width == lanes) {
                        simd.storeF32(lanes, out + d, x);
                    } else for (0..width) |i| {
                        out[d + i] = x[i];
                    }
                }
            }
        }
    }
}

/// One pass: the unit's rows (set up by `attendRun`) through the scores, their maximum,
/// the exponentials and their sums, and kqv.
fn attendPass(comptime T: type, comptime kq_mode: Mode, comptime kqv_mode: Mode, comptime head_dim_fixed: ?usize, job: *const Job(T), unit: anytype) void {
    const capacity = @TypeOf(unit.*).capacity;
    const keys = unit.keys;
    const n_rows = unit.n_rows;
    // Pass 1: scores (kept if they fit) and their maximum.
    unit.max = @splat(-std.math.inf(f32));
    var p0: usize = 0;
    while (p0 < keys) : (p0 += capacity) {
        const count = @min(capacity, keys - p0);
        fillScores(T, kq_mode, head_dim_fixed, job, unit, true, 0, n_rows, p0, count);
        for (0..n_rows) |r| {
            for (unit.scores[r][0..rowCount(unit, r, p0, count)]) |x| unit.max[r] = @max(unit.max[r], x);
        }
    }
    // Pass 2: exponentials, their double sum, and the probabilities.
    var sum: [rows_per_pass]f64 = @splat(0);
    if (keys <= capacity) {
        for (0..n_rows) |r| sum[r] = expChunks(&unit.scores[r], unit.len[r], unit.max[r]);
    } else {
        p0 = 0;
        while (p0 < keys) : (p0 += capacity) {
            const count = @min(capacity, keys - p0);
            fillScores(T, kq_mode, head_dim_fixed, job, unit, false, 0, n_rows, p0, count);
            for (0..n_rows) |r| sum[r] += expChunks(&unit.scores[r], rowCount(unit, r, p0, count), unit.max[r]);
        }
    }
    for (0..n_rows) |r| {
        unit.inv[r] = @floatCast(1.0 / sum[r]);
        if (keys <= capacity) normalize(T, &unit.scores[r], unit.len[r], unit.inv[r]);
    }
    // Pass 3: kqv.
    kqvPass(T, kq_mode, kqv_mode, head_dim_fixed, job, unit);
}

/// Tokens t0..t0+n_tokens (one sequence, the same first key: see `sameRun`) and KV head
/// g: every (token, query head) pair that reads g, as rows, `rows_per_pass` at a time. A
/// comptime `head_dim_fixed` (64, 128) unrolls every loop over the head; the arithmetic
/// and its order are the same as with a runtime head_dim.
fn attendRun(comptime T: type, comptime kq_mode: Mode, comptime kqv_mode: Mode, comptime head_dim_fixed: ?usize, job: *const Job(T), t0: usize, n_tokens: usize, g: usize) void {
    var keys: usize = 0;
    for (t0..t0 + n_tokens) |t| keys = @max(keys, job.keyLayout(t).len);
    if (keys <= short_capacity) {
        attendRunIn(T, short_capacity, kq_mode, kqv_mode, head_dim_fixed, job, t0, n_tokens, g);
    } else {
        attendRunIn(T, score_capacity, kq_mode, kqv_mode, head_dim_fixed, job, t0, n_tokens, g);
    }
}

/// `attendRun` with a frame of `capacity` scores per row.
fn attendRunIn(comptime T: type, comptime capacity: usize, comptime kq_mode: Mode, comptime kqv_mode: Mode, comptime head_dim_fixed: ?usize, job: *const Job(T), t0: usize, n_tokens: usize, g: usize) void {
    const head_dim = head_dim_fixed orelse job.head_dim;
    const kv_dim = job.kv_heads * head_dim;
    const group = job.heads / job.kv_heads;
    const slot_base = @as(usize, @intCast(job.slots[t0])) * job.slot_rows;
    var unit: Unit(T, capacity) = undefined;
    unit.k_base = job.k + slot_base * kv_dim + g * head_dim;
    unit.v_base = job.v + slot_base * kv_dim + g * head_dim;
    const row_count = n_tokens * group;
    var row0: usize = 0;
    while (row0 < row_count) : (row0 += rows_per_pass) {
        unit.n_rows = @min(rows_per_pass, row_count - row0);
        unit.keys = 0;
        for (0..unit.n_rows) |r| {
            const t = t0 + (row0 + r) / group;
            const h = g * group + (row0 + r) % group;
            const layout = job.keyLayout(t);
            unit.len[r] = layout.len;
            if (layout.len > unit.keys) {
                unit.keys = layout.len;
                unit.layout = layout;
            }
            const q = job.q + (t * job.heads + h) * head_dim;
            for (0..head_dim) |i| unit.q[r][i] = roundTo(T, q[i]);
            unit.out[r] = job.out + (t * job.heads + h) * head_dim;
        }
        attendPass(T, kq_mode, kqv_mode, head_dim_fixed, job, &unit);
    }
}

/// Whether token u continues token t's run: the same sequence (so the same modes: they
/// depend on the sequence) and first key (so the same lanes and ring rows, a longer or
/// shorter reach).
fn sameRun(comptime T: type, job: *const Job(T), t: usize, u: usize) bool {
    return job.slots[u] == job.slots[t] and job.keyRange(u).first == job.keyRange(t).first;
}

/// One run through the kernel its modes and head_dim name.
fn attendRunAny(comptime T: type, job: *const Job(T), t0: usize, n_tokens: usize, g: usize) void {
    switch (job.kqMode(t0)) {
        inline else => |kq_mode| switch (job.kqvMode(t0)) {
            inline else => |kqv_mode| switch (job.head_dim) {
                inline 64, 128 => |head_dim| attendRun(T, kq_mode, kqv_mode, head_dim, job, t0, n_tokens, g),
                else => attendRun(T, kq_mode, kqv_mode, null, job, t0, n_tokens, g),
            },
        },
    }
}

/// Units are (token, KV head) pairs, token-major. A run starts at a token that does not
/// continue the one before it (`sameRun`) or whose index is a multiple of
/// `tokens_per_run`; its first token's units attend the whole run, the other units do
/// nothing. So a decode batch keeps a unit per sequence and KV head for the threads to
/// share, and the runs do not depend on the thread count.
fn attendRange(comptime T: type, job: *const Job(T), unit_begin: usize, unit_end: usize) void {
    for (unit_begin..unit_end) |u| {
        const t = u / job.kv_heads;
        const g = u % job.kv_heads;
        if (t % tokens_per_run != 0 and sameRun(T, job, t - 1, t)) continue;
        var n: usize = 1;
        while (t + n < job.tokens and (t + n) % tokens_per_run != 0 and sameRun(T, job, t, t + n)) n += 1;
        attendRunAny(T, job, t, n, g);
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

/// Scalar reference of the same arithmetic, one element at a time: kq by the lanes of
/// `kqMode`, softmax with ggml_v_expf (one lane at a time) and a double sum over 16-key
/// chunks, probabilities rounded to the cache type, kqv by the lanes of `kqvMode`.
/// `scores` holds at least the longest virtual key range (a key range plus 64).
pub fn reference(comptime T: type, job: Job(T), scores: []f32) void {
    const kv_dim = job.kv_heads * job.head_dim;
    const group = job.heads / job.kv_heads;
    const n = job.head_dim;
    for (0..job.tokens) |t| for (0..job.heads) |h| {
        const kq_mode = job.kqMode(t);
        const kqv_mode = job.kqvMode(t);
        const g = h / group;
        const q = job.q + (t * job.heads + h) * n;
        const layout = job.keyLayout(t);
        const keys = layout.len;
        const slot_base = @as(usize, @intCast(job.slots[t])) * job.slot_rows;
        var max: f32 = -std.math.inf(f32);
        for (0..keys) |p| {
            const ring_row = layout.rowOf(p) orelse {
                scores[p] = -std.math.inf(f32);
                continue;
            };
            const row = slot_base + ring_row;
            const k = job.k + row * kv_dim + g * n;
            var lane: [4 * lanes]f32 = @splat(0);
            var s: f32 = undefined;
            switch (kq_mode) {
                .gemm => {
                    for (0..n) |i| lane[i % lanes] = @mulAdd(f32, simd.toF32(T, k[i]), roundTo(T, q[i]), lane[i % lanes]);
                    s = treeSum(lane[0..lanes]);
                },
                .vec_dot => {
                    const np = n - n % (4 * lanes);
                    for (0..np) |i| lane[i % (4 * lanes)] = @mulAdd(f32, simd.toF32(T, k[i]), roundTo(T, q[i]), lane[i % (4 * lanes)]);
                    var wide: f64 = fourTree(&lane);
                    for (np..n) |i| wide += @as(f64, simd.toF32(T, k[i]) * roundTo(T, q[i]));
                    s = @floatCast(wide);
                },
            }
            scores[p] = s * job.scale;
            max = @max(max, scores[p]);
        }
        var sum: f64 = 0;
        var chunk_lanes: [lanes]f32 = @splat(0);
        for (0..std.mem.alignForward(usize, keys, lanes)) |p| {
            const masked = p >= keys or scores[p] == -std.math.inf(f32);
            const e: f32 = if (masked) 0 else simd.expGgml(1, @as(@Vector(1, f32), @splat(scores[p] - max)))[0];
            if (p < keys) scores[p] = e;
            chunk_lanes[p % lanes] = e;
            if (p % lanes == lanes - 1) sum += @as(f64, treeSum(&chunk_lanes));
        }
        const inv: f32 = @floatCast(1.0 / sum);
        for (scores[0..keys]) |*s| s.* = roundTo(T, s.* * inv);
        const out = job.out + (t * job.heads + h) * n;
        for (0..n) |i| {
            var lane: [4 * lanes]f32 = @splat(0);
            const rows: usize = if (kqv_mode == .gemm) lanes else 4 * lanes;
            for (0..keys) |p| {
                const row = slot_base + (layout.rowOf(p) orelse continue);
                const v = simd.toF32(T, job.v[row * kv_dim + g * n + i]);
                lane[p % rows] = @mulAdd(f32, v, scores[p], lane[p % rows]);
            }
            out[i] = if (kqv_mode == .gemm) treeSum(lane[0..lanes]) else fourTree(&lane);
        }
    };
}

/// _mm512_reduce_add_ps of 16 values: i + i+8, then +4, +2, +1.
fn treeSum(x_in: *const [lanes]f32) f32 {
    var x = x_in.*;
    var half: usize = lanes / 2;
    while (half > 0) : (half /= 2) {
        for (0..half) |i| x[i] += x[i + half];
    }
    return x[0];
}

/// ggml's reduce of four 16-lane accumulators: (0 + 2) + (1 + 3), then the lane tree.
fn fourTree(x: *const [4 * lanes]f32) f32 {
    var y: [lanes]f32 = undefined;
    for (0..lanes) |i| y[i] = (x[i] + x[2 * lanes + i]) + (x[lanes + i] + x[3 * lanes + i]);
    return treeSum(&y);
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
    const scores = try allocator.alloc(f32, ctx + 2 * block);
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
        // The kernel and the scalar reference round identically.
        try testing.expectEqualSlices(f32, expected, actual);
        if (threads == 1) @memcpy(single, actual) else try testing.expectEqualSlices(f32, single, actual);
    }
}

test "attention equals the scalar reference bit for bit for decode and prefill, GQA/MQA/MHA, F32 and F16, short and long contexts" {
    inline for (.{ f32, f16 }) |T| {
        try testShape(T, 1, 0, 4, 2, 16); // first token
        try testShape(T, 1, 130, 8, 2, 64); // decode over three key blocks
        try testShape(T, 7, 60, 6, 1, 33); // prefill, MQA, odd head_dim
        try testShape(T, 5, 0, 4, 4, 128); // MHA
        try testShape(T, 1, score_capacity + 1500, 4, 2, 64); // decode past score_capacity: windows recomputed
        try testShape(T, 3, score_capacity + 100, 4, 2, 64); // prefill past score_capacity
        try testShape(T, 2, score_capacity + 70, 2, 1, 200); // two sweeps of slices, a narrow last slice
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
        for (0..kv_heads) |g| attendRun(f16, .vec_dot, .vec_dot, head_dim, &job, 0, 1, g);
        job.out = &generic;
        for (0..kv_heads) |g| attendRun(f16, .vec_dot, .vec_dot, null, &job, 0, 1, g);
        try testing.expectEqualSlices(f32, &generic, &fixed);
    }
}

test "a batch mixing slots, windows and ring rows: each token as the reference computes it, alone or batched" {
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
        var scores: [slot_rows + 2 * block]f32 = undefined;
        // The batch as a whole (llama.cpp's tinyBLAS order when it has 2+ tokens).
        var batch_expected: [q.len]f32 = undefined;
        var batch = job;
        batch.tokens = checked;
        batch.out = &batch_expected;
        reference(f32, batch, &scores);
        try testing.expectEqualSlices(f32, batch_expected[0 .. checked * heads * head_dim], together[0 .. checked * heads * head_dim]);
        for (0..checked) |t| {
            var alone: [heads * head_dim]f32 = undefined;
            var single = job;
            single.q = q[t * heads * head_dim ..].ptr;
            single.positions = positions[t..].ptr;
            single.slots = slots[t..].ptr;
            single.tokens = 1;
            single.out = &alone;
            try testing.expectEqual(Status.ok, attention(f32, pool, single));
            // Alone (ggml_vec_dot order), the same values within rounding; bit for bit when
            // the token is its sequence's only one in the batch (the mode is per sequence).
            const batched_part = together[t * heads * head_dim ..][0 .. heads * head_dim];
            for (alone, batched_part) |a, b| try testing.expectApproxEqAbs(a, b, 2e-5);
            var same_slot: usize = 0;
            for (slots[0..checked]) |slot| same_slot += @intFromBool(slot == slots[t]);
            if (same_slot == 1) try testing.expectEqualSlices(f32, &alone, batched_part);
            var expected: [heads * head_dim]f32 = undefined;
            single.out = &expected;
            reference(f32, single, &scores);
            try testing.expectEqualSlices(f32, &expected, &alone);
        }
    }
}

test "a window over a wrapped ring equals the same window over a full-size cache bit for bit (lanes follow positions)" {
    const allocator = testing.allocator;
    const heads = 2;
    const kv_heads = 1;
    const head_dim = 32;
    const kv_dim = kv_heads * head_dim;
    const window = 48;
    const ring_rows = 80;
    const full_rows = 256;
    var prng = std.Random.DefaultPrng.init(17);
    const random = prng.random();
    // Positions 0..199 of K/V, kept whole in `full` and as the ring's last 80 in `ring`.
    const full_k = try allocator.alloc(f16, full_rows * kv_dim);
    defer allocator.free(full_k);
    const full_v = try allocator.alloc(f16, full_rows * kv_dim);
    defer allocator.free(full_v);
    for (full_k, full_v) |*a, *b| {
        a.* = @floatCast(random.floatNorm(f32));
        b.* = @floatCast(random.floatNorm(f32));
    }
    const ring_k = try allocator.alloc(f16, ring_rows * kv_dim);
    defer allocator.free(ring_k);
    const ring_v = try allocator.alloc(f16, ring_rows * kv_dim);
    defer allocator.free(ring_v);
    for (120..200) |p| {
        @memcpy(ring_k[(p % ring_rows) * kv_dim ..][0..kv_dim], full_k[p * kv_dim ..][0..kv_dim]);
        @memcpy(ring_v[(p % ring_rows) * kv_dim ..][0..kv_dim], full_v[p * kv_dim ..][0..kv_dim]);
    }
    // Decode at 199 (window from 152: lead 24, rows 72..79 then 0..39) and a 3-token batch.
    inline for (.{ [_]i32{199}, [_]i32{ 197, 198, 199 } }) |positions| {
        const tokens = positions.len;
        const slots: [tokens]i32 = @splat(0);
        var q: [tokens * heads * head_dim]f32 = undefined;
        for (&q) |*x| x.* = random.floatNorm(f32);
        var from_ring: [q.len]f32 = undefined;
        var from_full: [q.len]f32 = undefined;
        var expected: [q.len]f32 = undefined;
        const pool = try Pool.create(allocator, 2);
        defer pool.destroy(allocator);
        var job: Job(f16) = .{ .out = &from_ring, .q = &q, .k = ring_k.ptr, .v = ring_v.ptr, .positions = &positions, .slots = &slots, .tokens = tokens, .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .slot_rows = ring_rows, .window = window, .scale = 0.125 };
        try testing.expectEqual(Status.ok, attention(f16, pool, job));
        var scores: [full_rows]f32 = undefined;
        job.out = &expected;
        reference(f16, job, &scores);
        try testing.expectEqualSlices(f32, &expected, &from_ring);
        job.out = &from_full;
        job.k = full_k.ptr;
        job.v = full_v.ptr;
        job.slot_rows = full_rows;
        try testing.expectEqual(Status.ok, attention(f16, pool, job));
        try testing.expectEqualSlices(f32, &from_full, &from_ring);
    }
}
