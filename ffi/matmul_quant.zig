//! The generic quantized matmul: `out[t][r] = Σ_c W[r][c] · x[t][c]` for any entry of
//! the type table whose dot product consumes quantized activations (`E.Act`).
//!
//! x [tokens][cols] is quantized once into the pool's scratch (`E.Act.quantizeRow`,
//! one token per work unit) unless the previous matmul of the same input and format
//! left it there; then rows are split across threads in chunks of `row_group`, and
//! each output element is `E.vecDot` of one weight row and one activation row (or
//! `E.vecDotRows`, R rows at a time, when the entry declares it: bit-identical to R
//! calls of `vecDot`). An element is computed by the same code whatever thread or
//! chunk it falls in: results are bit-identical for every thread count. On AVX2
//! without AVX-512 VNNI, prompts over Q5_0 take the Q8_0 assembly tile on each row
//! pair re-expressed as Q8_0 blocks (`expandedRange`), with `vecDot`'s bits.
const std = @import("std");
const pool_zig = @import("pool.zig");
const quant_k = @import("quant_k.zig");
const simd = @import("simd.zig");
const q8_0_tile_avx2 = @import("q8_0_tile_avx2.zig");
const Q8_0Block = @import("quant_act.zig").Q8_0.Block;

const Pool = pool_zig.Pool;
const Status = pool_zig.Status;

/// Rows per work-claiming group (and per `vecDotRows` tile).
pub const row_group = 4;
/// Below this many multiply-adds the matmul runs on the calling thread.
pub const parallel_threshold_macs: usize = 1 << 16;
/// Scratch rows start on cache lines.
const row_alignment_bytes = 64;

/// Bytes of one token's quantized activations of `cols` elements, cache-line padded.
fn actRowBytes(comptime A: type, cols: usize) usize {
    const bytes = (cols / A.block_elems) * @sizeOf(A.Block);
    return std.mem.alignForward(usize, bytes, row_alignment_bytes);
}

/// Scratch bytes for `tokens` rows of `cols` activations in format `A`.
pub fn scratchBytes(comptime A: type, cols: usize, tokens: usize) usize {
    return tokens * actRowBytes(A, cols);
}

fn Job(comptime E: type) type {
    return struct {
        out: [*]f32,
        w: [*]align(1) const E.Block,
        x: [*]const f32,
        act: [*]align(row_alignment_bytes) u8,
        rows: usize,
        cols: usize,
        tokens: usize,

        fn actRow(job: *const @This(), t: usize) []align(1) E.Act.Block {
            const blocks = job.cols / E.Act.block_elems;
            const row: [*]align(1) E.Act.Block = @ptrCast(job.act + t * actRowBytes(E.Act, job.cols));
            return row[0..blocks];
        }

        fn weightRow(job: *const @This(), r: usize) []align(1) const E.Block {
            const blocks = job.cols / E.block_elems;
            return job.w[r * blocks ..][0..blocks];
        }

        /// Row group g of an interleaved entry (repack.zig): its groups, one per block column.
        fn weightGroup(job: *const @This(), g: usize) []align(1) const E.Group {
            const blocks = job.cols / E.block_elems;
            const groups: [*]align(1) const E.Group = @ptrCast(job.w);
            return groups[g * blocks ..][0..blocks];
        }
    };
}

fn quantizeRange(comptime E: type, job: *const Job(E), token_begin: usize, token_end: usize) void {
    for (token_begin..token_end) |t| E.Act.quantizeRow(job.x[t * job.cols ..][0..job.cols], job.actRow(t));
}

fn dotRange(comptime E: type, job: *const Job(E), row_begin: usize, row_end: usize) void {
    // Interleaved entries: every row group through the wide tile (the graph checked
    // rows % interleave_rows, and threads claim whole groups).
    if (comptime interleaved(E)) {
        std.debug.assert(row_begin % E.interleave_rows == 0 and row_end % E.interleave_rows == 0);
        var r = row_begin;
        while (r < row_end) : (r += E.interleave_rows) wideRowGroup(E, job, r);
        return;
    }
    if (comptime expands(E)) {
        if (job.tokens >= expanded_min_tokens and job.cols / E.block_elems <= expanded_blocks_max) {
            return expandedRange(E, job, row_begin, row_end);
        }
    }
    // llama.cpp repacks some types' matrices (row count a multiple of E.repack_rows) and
    // then sums in another float order: follow it, so results stay llama.cpp's bits.
    if (@hasDecl(E, "repack_rows") and E.repack_rows > 0 and job.rows % E.repack_rows == 0) {
        return dotRangeOrder(E, true, job, row_begin, row_end);
    }
    // Other K-quant matrices go through llama.cpp's tiled matmul for batches of 8+ tokens.
    if (@hasDecl(E, "vecDotRowsTiled") and job.tokens >= quant_k.tiled_min_tokens) {
        return dotRangeTiled(E, job, row_begin, row_end);
    }
    dotRangeOrder(E, false, job, row_begin, row_end);
}

/// The tiled order: R × T tiles when the entry declares `vecDotTileTiled`, else one
/// token at a time.
fn dotRangeTiled(comptime E: type, job: *const Job(E), row_begin: usize, row_end: usize) void {
    var r = row_begin;
    if (comptime @hasDecl(E, "vecDotTileTiled") and row_group % 2 == 0) {
        while (r + row_group <= row_end) : (r += row_group) tileRowGroupIn(E, .tiled, .tiled, tiled_token_group, job, r);
    }
    while (r + row_group <= row_end) : (r += row_group) {
        var w_rows: [row_group][]align(1) const E.Block = undefined;
        inline for (0..row_group) |i| w_rows[i] = job.weightRow(r + i);
        for (0..job.tokens) |t| {
            const sums = E.vecDotRowsTiled(row_group, w_rows, job.actRow(t));
            inline for (0..row_group) |i| job.out[t * job.rows + r + i] = sums[i];
        }
    }
    while (r < row_end) : (r += 1) {
        const w_row = job.weightRow(r);
        for (0..job.tokens) |t| job.out[t * job.rows + r] = E.vecDotTiled(w_row, job.actRow(t));
    }
}

/// llama.cpp's repacked matmul runs its GEMM on the first tokens - tokens % 4 tokens and
/// its GEMV on the rest.
inline fn inGemm(tokens: usize, t: usize) bool {
    return t < tokens - tokens % 4;
}

fn dotRangeOrder(comptime E: type, comptime repacked: bool, job: *const Job(E), row_begin: usize, row_end: usize) void {
    var r = row_begin;
    if (repacked and comptime wideRows(E) > 0) {
        if (job.rows % wideRows(E) == 0) {
            while (r + wideRows(E) <= row_end) : (r += wideRows(E)) wideRowGroup(E, job, r);
        }
    }
    if (job.tokens > 1 and comptime hasTile(E, repacked)) {
        while (r + row_group <= row_end) : (r += row_group) tileRowGroup(E, repacked, job, r);
    }
    if (@hasDecl(E, "vecDotRows")) {
        while (r + row_group <= row_end) : (r += row_group) {
            var w_rows: [row_group][]align(1) const E.Block = undefined;
            inline for (0..row_group) |i| w_rows[i] = job.weightRow(r + i);
            for (0..job.tokens) |t| {
                const sums = if (!repacked)
                    E.vecDotRows(row_group, w_rows, job.actRow(t))
                else if (@hasDecl(E, "vecDotRowsRepackedGemm") and inGemm(job.tokens, t))
                    E.vecDotRowsRepackedGemm(row_group, w_rows, job.actRow(t))
                else
                    E.vecDotRowsRepacked(row_group, w_rows, job.actRow(t));
                inline for (0..row_group) |i| job.out[t * job.rows + r + i] = sums[i];
            }
        }
    }
    while (r < row_end) : (r += 1) {
        const w_row = job.weightRow(r);
        for (0..job.tokens) |t| job.out[t * job.rows + r] = if (!repacked)
            E.vecDot(w_row, job.actRow(t))
        else if (@hasDecl(E, "vecDotRepackedGemm") and inGemm(job.tokens, t))
            E.vecDotRepackedGemm(w_row, job.actRow(t))
        else
            E.vecDotRepacked(w_row, job.actRow(t));
    }
}

// ---------------------------------------------------------------------------
// GEMM tiles (additive: entries that declare no tile take the loops above).
//
// An entry may declare `vecDotTile(R, T, w_rows, a_rows) [T][R]f32` (ggml's vec_dot
// order) and, when it has `repack_rows`, `vecDotTileRepacked` (the repacked GEMV order)
// and `vecDotTileRepackedGemm` (the repacked GEMM order, when it differs). out[t][r] of
// a tile must be bit-identical to the matching one-row call for (row r, token t): a tile
// only shares the decoding of each weight block across its T tokens (and the activation
// loads across its R rows), so a batch of 2-4 sequences reads and unpacks each weight
// block once instead of running one GEMV per sequence.

/// Tokens per GEMM tile: 4 rows × 4 tokens keeps the accumulators in registers, and
/// llama.cpp's repacked GEMM groups tokens by 4 too (`inGemm`).
pub const token_group = 4;

fn hasTile(comptime E: type, comptime repacked: bool) bool {
    if (row_group % 2 != 0) return false;
    return if (repacked) @hasDecl(E, "vecDotTileRepacked") else @hasDecl(E, "vecDotTile");
}

/// Rows r..r+row_group for every token: tiles of `token_group` tokens, the remainder
/// (1-3 tokens) in one smaller tile.
fn tileRowGroup(comptime E: type, comptime repacked: bool, job: *const Job(E), r: usize) void {
    const rest: Order = if (repacked) .repacked else .plain;
    const gemm: Order = if (repacked and @hasDecl(E, "vecDotTileRepackedGemm")) .repacked_gemm else rest;
    tileRowGroupIn(E, gemm, rest, token_group, job, r);
}

/// Tokens per tile in the tiled order (`vecDotTileTiled`): its per-(row, token) state is
/// one f32, so 8 tokens still fit in registers and each weight block is decoded once
/// per 8 tokens.
const tiled_token_group = 8;

/// Rows r..r+row_group for every token: the first tokens - tokens % token_group tokens
/// in `gemm_order` tiles of `wide_tokens` (a multiple of token_group) and then
/// token_group tokens, the remainder (1-3 tokens) in one `rest_order` tile.
fn tileRowGroupIn(comptime E: type, comptime gemm_order: Order, comptime rest_order: Order, comptime wide_tokens: usize, job: *const Job(E), r: usize) void {
    comptime std.debug.assert(wide_tokens % token_group == 0);
    var w_rows: [row_group][]align(1) const E.Block = undefined;
    inline for (0..row_group) |i| w_rows[i] = job.weightRow(r + i);
    const gemm_end = job.tokens - job.tokens % token_group;
    var t: usize = 0;
    if (wide_tokens > token_group) {
        while (t + wide_tokens <= gemm_end) : (t += wide_tokens) tileAt(E, gemm_order, wide_tokens, job, r, w_rows, t);
    }
    while (t < gemm_end) : (t += token_group) tileAt(E, gemm_order, token_group, job, r, w_rows, t);
    switch (job.tokens - gemm_end) {
        0 => {},
        1 => tileAt(E, rest_order, 1, job, r, w_rows, t),
        2 => tileAt(E, rest_order, 2, job, r, w_rows, t),
        3 => tileAt(E, rest_order, 3, job, r, w_rows, t),
        else => unreachable,
    }
}

/// `plain`: vecDotTile, `repacked`/`repacked_gemm`: vecDotTileRepacked(Gemm),
/// `tiled`: vecDotTileTiled (llama.cpp's tiled K-quant order).
const Order = enum { plain, repacked, repacked_gemm, tiled };

/// Rows per `E.vecDotWideRepacked` call: an entry may declare `wide_rows` (> 0 when the
/// target runs it) and `vecDotWideRepacked(T, gemm, w_rows, a_rows) [T][wide_rows]f32`,
/// a tile for repacked matrices whose row count is a multiple of it, in the repacked GEMV
/// order (`gemm` false) or GEMM order, bit-identical to the one-row calls. The driver
/// then claims rows in groups of `wide_rows` for those matrices, GEMV included.
fn wideRows(comptime E: type) usize {
    return if (@hasDecl(E, "wide_rows")) E.wide_rows else 0;
}

/// An entry stored in an interleaved layout (repack.zig): its wide tile reads
/// `Job.weightGroup` instead of `wide_rows` row slices.
fn interleaved(comptime E: type) bool {
    return @hasDecl(E, "interleave_rows");
}

/// Row groups the threads claim for a matmul of `rows` rows.
fn claimRows(comptime E: type, rows: usize) usize {
    const wide = comptime wideRows(E);
    if (wide > 0 and @hasDecl(E, "repack_rows") and E.repack_rows > 0 and rows % E.repack_rows == 0 and rows % wide == 0) return wide;
    return row_group;
}

/// Tokens per wide GEMM tile (two of llama.cpp's 4-token GEMM groups, each element in
/// the same order): each 16-row transpose is reused over 8 tokens.
const wide_token_group = 8;

fn wideRowGroup(comptime E: type, job: *const Job(E), r: usize) void {
    const W = comptime wideRows(E);
    const w_rows = if (comptime interleaved(E)) job.weightGroup(r / W) else blk: {
        var rows: [W][]align(1) const E.Block = undefined;
        inline for (0..W) |i| rows[i] = job.weightRow(r + i);
        break :blk rows;
    };
    const gemm_end = job.tokens - job.tokens % token_group;
    var t: usize = 0;
    while (t + wide_token_group <= gemm_end) : (t += wide_token_group) wideAt(E, wide_token_group, true, job, r, w_rows, t);
    while (t < gemm_end) : (t += token_group) wideAt(E, token_group, true, job, r, w_rows, t);
    switch (job.tokens - gemm_end) {
        0 => {},
        1 => wideAt(E, 1, false, job, r, w_rows, t),
        2 => wideAt(E, 2, false, job, r, w_rows, t),
        3 => wideAt(E, 3, false, job, r, w_rows, t),
        else => unreachable,
    }
}

inline fn wideAt(comptime E: type, comptime T: usize, comptime gemm: bool, job: *const Job(E), r: usize, w_rows: anytype, t: usize) void {
    var a_rows: [T][]align(1) const E.Act.Block = undefined;
    inline for (0..T) |j| a_rows[j] = job.actRow(t + j);
    // Entries whose repacked GEMM order equals the GEMV order declare no GEMM variant
    // (an interleaved entry sums in its source's orders).
    const S = if (comptime interleaved(E)) E.Source else E;
    const sums = E.vecDotWideRepacked(T, gemm and @hasDecl(S, "vecDotRowsRepackedGemm"), w_rows, a_rows);
    inline for (0..T) |j| {
        inline for (0..comptime wideRows(E)) |i| job.out[(t + j) * job.rows + r + i] = sums[j][i];
    }
}

inline fn tileAt(comptime E: type, comptime order: Order, comptime T: usize, job: *const Job(E), r: usize, w_rows: [row_group][]align(1) const E.Block, t: usize) void {
    var a_rows: [T][]align(1) const E.Act.Block = undefined;
    inline for (0..T) |j| a_rows[j] = job.actRow(t + j);
    const sums = switch (order) {
        .plain => E.vecDotTile(row_group, T, w_rows, a_rows),
        .repacked => E.vecDotTileRepacked(row_group, T, w_rows, a_rows),
        .repacked_gemm => E.vecDotTileRepackedGemm(row_group, T, w_rows, a_rows),
        .tiled => E.vecDotTileTiled(row_group, T, w_rows, a_rows),
    };
    inline for (0..T) |j| {
        inline for (0..row_group) |i| job.out[(t + j) * job.rows + r + i] = sums[j][i];
    }
}

// ---------------------------------------------------------------------------
// Prompts through the Q8_0 assembly tile (AVX2 without AVX-512 VNNI)

/// An entry whose blocks re-express as Q8_0 blocks with `vecDot`'s bits
/// (`E.expands_to_q8_0`, `E.toQ8_0`; activations `act.Q8_0`).
fn expands(comptime E: type) bool {
    return @hasDecl(E, "expands_to_q8_0") and E.expands_to_q8_0;
}

/// Prompts of this many tokens or more take `expandedRange` (fewer: a decode batch,
/// whose tiles prefetch the weight stream, as the Q8_0 kernel's threshold).
const expanded_min_tokens = 5;
/// Most blocks per row for `expandedRange` (8192 columns): its stack holds two rows of
/// Q8_0 blocks (17 KiB) and the block-major scales of a token chunk (40 KiB), of a
/// pool thread's 1 MiB.
const expanded_blocks_max = 256;
/// Tokens whose scales `expandedRange` lays out block-major at a time.
const expanded_chunk_tokens = 32;

/// Rows [row_begin, row_end) of a prompt: per chunk of tokens, the activation scales
/// as f32 in block-major order (the tile reads 8 tokens' at a block), then each row pair
/// re-expressed as Q8_0 blocks once and run through `q8_0_tile_avx2` in tiles of 4
/// tokens, reading the activation quants from their `act.Q8_0` blocks in the scratch.
fn expandedRange(comptime E: type, job: *const Job(E), row_begin: usize, row_end: usize) void {
    const tile = q8_0_tile_avx2;
    comptime std.debug.assert(E.Act.Block == Q8_0Block and tile.max_rows == 2);
    const nb = job.cols / E.block_elems;
    std.debug.assert(nb >= 1 and nb <= expanded_blocks_max);
    // Block b's scales of the chunk's tokens at scales[b·stride ..], 8 zeros past the last.
    const stride = expanded_chunk_tokens + 8;
    var scales: [expanded_blocks_max * stride]f32 align(32) = undefined;
    var rows: [tile.max_rows * expanded_blocks_max]Q8_0Block = undefined;
    var products: [tile.max_rows][8]f32 align(32) = undefined;
    var acc: [tile.max_rows * tile.max_tokens][8]f32 align(32) = undefined;
    var t0: usize = 0;
    while (t0 < job.tokens) : (t0 += expanded_chunk_tokens) {
        const chunk = @min(expanded_chunk_tokens, job.tokens - t0);
        for (0..nb) |b| @memset(scales[b * stride + chunk ..][0..8], 0);
        for (0..chunk) |t| {
            const a = job.actRow(t0 + t);
            for (0..nb) |b| scales[b * stride + t] = a[b].d;
        }
        var r = row_begin;
        while (r < row_end) {
            const pair = r + 1 < row_end;
            inline for (0..tile.max_rows) |i| {
                if (i == 0 or pair) {
                    const w = job.weightRow(r + i);
                    for (0..nb) |b| rows[i * nb + b] = E.toQ8_0(&w[b]);
                }
            }
            var t: usize = 0;
            while (t < chunk) {
                const n = @min(tile.max_tokens, chunk - t);
                const args: tile.Args = .{
                    .w = @ptrCast(&rows),
                    .row_bytes = nb * @sizeOf(Q8_0Block),
                    .x_qs = @ptrCast(&job.actRow(t0 + t)[0].qs),
                    .x_stride_bytes = actRowBytes(E.Act, job.cols),
                    .x_scales = scales[t..].ptr,
                    .scale_stride_bytes = stride * @sizeOf(f32),
                    .block_count = nb,
                    .products = &products,
                    .acc = &acc,
                    .prefetch_bytes = 0,
                };
                switch (n) {
                    inline 1...tile.max_tokens => |T| {
                        if (pair) tile.run(2, T, 34, false, &args) else tile.run(1, T, 34, false, &args);
                        const R: usize = if (pair) 2 else 1;
                        inline for (0..T) |j| {
                            // `hsum_float_8`, as every Q8_0 and legacy dot sums its lanes.
                            for (0..R) |i| job.out[(t0 + t + j) * job.rows + r + i] = simd.hsum(8, f32, @as(@Vector(8, f32), acc[j * R + i]));
                        }
                    },
                    else => unreachable,
                }
                t += n;
            }
            r += if (pair) 2 else 1;
        }
    }
}

/// The matmul of entry `E`. `cols % E.block_elems == 0`, `cols % E.Act.block_elems == 0`,
/// and the pool's scratch holds `scratchBytes(E.Act, cols, tokens)` (checked by the caller).
pub fn matmul(comptime E: type, pool: *Pool, out: [*]f32, w: [*]align(1) const E.Block, x: [*]const f32, rows: usize, cols: usize, tokens: usize, act_ready: bool) Status {
    std.debug.assert(cols % E.block_elems == 0 and cols % E.Act.block_elems == 0);
    std.debug.assert(pool.scratch.len >= scratchBytes(E.Act, cols, tokens));
    const job: Job(E) = .{ .out = out, .w = w, .x = x, .act = pool.scratch.ptr, .rows = rows, .cols = cols, .tokens = tokens };
    const Runner = struct {
        fn quantize(j: *const Job(E), begin: usize, end: usize) void {
            quantizeRange(E, j, begin, end);
        }
        fn dot(j: *const Job(E), begin: usize, end: usize) void {
            dotRange(E, j, begin, end);
        }
    };
    if (!act_ready) {
        const status = pool.run(Job(E), &job, Runner.quantize, tokens, 1, tokens * cols, parallel_threshold_macs);
        if (status != .ok) return status;
    }
    return pool.run(Job(E), &job, Runner.dot, rows, claimRows(E, rows), rows * cols * tokens, parallel_threshold_macs);
}

// ---------------------------------------------------------------------------
// Tests: a toy 16-element type (i8 quants, f32 scale) against f32 activations in i8 too.

const testing = std.testing;

const ToyAct = struct {
    pub const name = "toy-act";
    pub const block_elems: usize = 16;
    pub const Block = extern struct { d: f32, qs: [16]i8 };
    pub fn quantizeRow(x: []const f32, y: []align(1) Block) void {
        for (y, 0..) |*b, i| {
            var amax: f32 = 0;
            for (x[i * 16 ..][0..16]) |v| amax = @max(amax, @abs(v));
            b.d = amax / 127;
            const id: f32 = if (b.d != 0) 1 / b.d else 0;
            for (x[i * 16 ..][0..16], &b.qs) |v, *q| q.* = @intFromFloat(@round(v * id));
        }
    }
};

const Toy = struct {
    pub const ggml_type: u32 = 1000;
    pub const name = "TOY";
    pub const block_elems: usize = 16;
    pub const Block = ToyAct.Block;
    pub const Act = ToyAct;
    pub fn vecDot(w: []align(1) const Block, a: []align(1) const Act.Block) f32 {
        var sum: f32 = 0;
        for (w, a) |wb, ab| {
            var isum: i32 = 0;
            for (wb.qs, ab.qs) |p, q| isum += @as(i32, p) * q;
            sum += wb.d * ab.d * @as(f32, @floatFromInt(isum));
        }
        return sum;
    }
};

const ToyTiled = struct {
    pub const ggml_type: u32 = 1001;
    pub const name = "TOY_TILED";
    pub const block_elems: usize = 16;
    pub const Block = ToyAct.Block;
    pub const Act = ToyAct;
    pub const vecDot = Toy.vecDot;
    pub fn vecDotRows(comptime R: usize, w_rows: [R][]align(1) const Block, a: []align(1) const Act.Block) [R]f32 {
        var sums: [R]f32 = undefined;
        inline for (0..R) |i| sums[i] = Toy.vecDot(w_rows[i], a);
        return sums;
    }
};

test "the generic driver is bit-identical at 1..4 threads, with and without tiles, and shares activations" {
    const rows = 37;
    const cols = 64;
    const tokens = 5;
    var prng = std.Random.DefaultPrng.init(3);
    const random = prng.random();
    var wf: [rows * cols]f32 = undefined;
    for (&wf) |*v| v.* = random.float(f32) * 2 - 1;
    var w: [rows * cols / 16]ToyAct.Block = undefined;
    ToyAct.quantizeRow(&wf, &w);
    var x: [tokens * cols]f32 = undefined;
    for (&x) |*v| v.* = random.float(f32) * 2 - 1;

    var expected: [tokens * rows]f32 = undefined;
    for (0..tokens) |t| {
        var a: [cols / 16]ToyAct.Block = undefined;
        ToyAct.quantizeRow(x[t * cols ..][0..cols], &a);
        for (0..rows) |r| expected[t * rows + r] = Toy.vecDot(w[r * cols / 16 ..][0 .. cols / 16], &a);
    }
    for (1..5) |threads| {
        const pool = try Pool.create(testing.allocator, @intCast(threads));
        defer pool.destroy(testing.allocator);
        try pool.reserve(testing.allocator, scratchBytes(ToyAct, cols, tokens));
        var out: [tokens * rows]f32 = @splat(std.math.nan(f32));
        try testing.expectEqual(Status.ok, matmul(Toy, pool, &out, &w, &x, rows, cols, tokens, false));
        try testing.expectEqualSlices(f32, &expected, &out);
        var tiled: [tokens * rows]f32 = @splat(std.math.nan(f32));
        // The activations from the call above are reused: x may be anything now.
        var garbage: [tokens * cols]f32 = @splat(1e30);
        try testing.expectEqual(Status.ok, matmul(ToyTiled, pool, &tiled, &w, &garbage, rows, cols, tokens, true));
        try testing.expectEqualSlices(f32, &expected, &tiled);
    }
}

test "a Q6_K matrix takes the vec_dot order below 8 tokens and llama.cpp's tiled order from 8 on, at 1..3 threads" {
    const T = quant_k.Q6_K;
    const rows = 13; // not a multiple of the 4-row tile: the single-row tail runs too
    const cols = 2 * quant_k.qk_k;
    const nb = cols / quant_k.qk_k;
    var prng = std.Random.DefaultPrng.init(21);
    const random = prng.random();
    var wf: [rows * cols]f32 = undefined;
    for (&wf) |*v| v.* = random.floatNorm(f32);
    var w: [rows * nb]T.Block = undefined;
    T.quantizeRowRef(&wf, &w);
    // 8+ tokens: tiles of 8, then of 4, then a 1-3 token tile (11 = 8+3, 21 = 8+8+4+1).
    inline for (.{ 7, 8, 11, 16, 21 }) |tokens| {
        var x: [tokens * cols]f32 = undefined;
        for (&x) |*v| v.* = random.floatNorm(f32);
        var expected: [tokens * rows]f32 = undefined;
        for (0..tokens) |t| {
            var a: [nb]quant_k.Q8_K.Block = undefined;
            quant_k.Q8_K.quantizeRow(x[t * cols ..][0..cols], &a);
            for (0..rows) |r| {
                const w_row = w[r * nb ..][0..nb];
                expected[t * rows + r] = if (tokens >= quant_k.tiled_min_tokens) T.vecDotTiledRef(w_row, &a) else T.vecDot(w_row, &a);
            }
        }
        for (1..4) |threads| {
            const pool = try Pool.create(testing.allocator, @intCast(threads));
            defer pool.destroy(testing.allocator);
            try pool.reserve(testing.allocator, scratchBytes(T.Act, cols, tokens));
            var out: [tokens * rows]f32 = undefined;
            try testing.expectEqual(Status.ok, matmul(T, pool, &out, &w, &x, rows, cols, tokens, false));
            try testing.expectEqualSlices(u32, @as(*const [tokens * rows]u32, @ptrCast(&expected)), @as(*const [tokens * rows]u32, @ptrCast(&out)));
        }
    }
}

/// What the driver must give for (row r, token t) of a `rows`-row matmul of `tokens`
/// tokens: the one-row call of the order llama.cpp uses there.
fn expectedDot(comptime E: type, rows: usize, tokens: usize, t: usize, w: []align(1) const E.Block, a: []align(1) const E.Act.Block) f32 {
    if (@hasDecl(E, "repack_rows") and E.repack_rows > 0 and rows % E.repack_rows == 0) {
        if (@hasDecl(E, "vecDotRepackedGemm") and inGemm(tokens, t)) return E.vecDotRepackedGemm(w, a);
        return E.vecDotRepacked(w, a);
    }
    if (@hasDecl(E, "vecDotRowsTiled") and tokens >= quant_k.tiled_min_tokens) return E.vecDotTiled(w, a);
    return E.vecDot(w, a);
}

test "Q5_0 prompts through the Q8_0 assembly tile (AVX2) equal vecDot per (row, token): odd rows and blocks, token chunks, 1..3 threads" {
    const legacy = @import("quant_legacy.zig");
    const E = legacy.Q5_0;
    var prng = std.Random.DefaultPrng.init(23);
    const random = prng.random();
    // 3 blocks; 288 blocks (past `expanded_blocks_max`: the other tiles).
    inline for (.{ 32 * 3, 32 * 288 }) |cols| {
        const rows = 7; // pairs and a single row
        const nb = cols / E.block_elems;
        const wf = try testing.allocator.alloc(f32, rows * cols);
        defer testing.allocator.free(wf);
        for (wf) |*v| v.* = random.float(f32) * 2 - 1;
        var w: [rows * nb]E.Block = undefined;
        for (0..rows) |r| E.quantizeRowRef(wf[r * cols ..][0..cols], w[r * nb ..][0..nb]);
        // Extreme codes: 0 (−16) and 31 (+15) in a block.
        @memset(&w[1].qs, 0);
        w[1].qh = .{ 0, 0, 0, 0 };
        @memset(&w[2].qs, 0xFF);
        w[2].qh = .{ 0xFF, 0xFF, 0xFF, 0xFF };
        // 5 (one tile and a tail), 37 (a 32-token chunk and a 5-token one).
        inline for (.{ 5, 37 }) |tokens| {
            const x = try testing.allocator.alloc(f32, tokens * cols);
            defer testing.allocator.free(x);
            for (x) |*v| v.* = random.float(f32) * 2 - 1;
            @memset(x[0..32], 0); // a zero activation block (d = 0)
            const expected = try testing.allocator.alloc(f32, tokens * rows);
            defer testing.allocator.free(expected);
            var a: [nb]E.Act.Block = undefined;
            for (0..tokens) |t| {
                E.Act.quantizeRow(x[t * cols ..][0..cols], &a);
                for (0..rows) |r| expected[t * rows + r] = E.vecDot(w[r * nb ..][0..nb], &a);
            }
            for (1..4) |threads| {
                const pool = try Pool.create(testing.allocator, @intCast(threads));
                defer pool.destroy(testing.allocator);
                try pool.reserve(testing.allocator, scratchBytes(E.Act, cols, tokens));
                const out = try testing.allocator.alloc(f32, tokens * rows);
                defer testing.allocator.free(out);
                @memset(out, std.math.nan(f32));
                try testing.expectEqual(Status.ok, matmul(E, pool, out.ptr, &w, x.ptr, rows, cols, tokens, false));
                try testing.expectEqualSlices(u32, @ptrCast(expected), @ptrCast(out));
            }
        }
    }
    // The expansion itself (on every target): both nibbles and the high bits.
    var block: E.Block = undefined;
    block.d = 0.5;
    for (0..16) |j| block.qs[j] = @intCast((j * 7 + 3) % 256);
    block.qh = .{ 0xA5, 0x3C, 0x0F, 0xF0 };
    var want: [32]f32 = undefined;
    E.dequantizeRow(&.{block}, &want);
    const q8 = E.toQ8_0(&block);
    try testing.expectEqual(@as(f16, 0.5), q8.d);
    for (0..32) |j| try testing.expectEqual(want[j], @as(f32, @floatFromInt(q8.qs[j])) * 0.5);
}

test "GEMM tiles of real legacy and K-quant entries equal the one-row calls per (row, token) at 1..3 threads" {
    @setEvalBranchQuota(100_000);
    const legacy = @import("quant_legacy.zig");
    const kq = @import("quant_k.zig");
    const cols = 512;
    var prng = std.Random.DefaultPrng.init(11);
    const random = prng.random();
    inline for (.{ legacy.Q4_0, legacy.Q4_1, legacy.Q5_0, legacy.Q5_1, legacy.IQ4_NL, kq.Q2_K, kq.Q3_K, kq.Q4_K, kq.Q5_K, kq.Q6_K, kq.IQ4_XS }) |E| {
        // 24 and 48 rows: repacked by llama.cpp (Q4_0, IQ4_NL, Q4_K; 48 takes Q4_K's
        // 16-row wide tile); 22: not, with a remainder row pair.
        inline for (.{ 24, 48, 22 }) |rows| {
            const nb = cols / E.block_elems;
            var wf: [rows * cols]f32 = undefined;
            for (&wf) |*v| v.* = random.float(f32) * 2 - 1;
            var w: [rows * nb]E.Block = undefined;
            for (0..rows) |r| E.quantizeRowRef(wf[r * cols ..][0..cols], w[r * nb ..][0..nb]);
            // Tiles of 8 tokens (wide and tiled order), of 4, and of 1-3: 13 = 8+4+1.
            inline for (.{ 1, 2, 3, 4, 5, 7, 8, 9, 13, 17 }) |tokens| {
                var x: [tokens * cols]f32 = undefined;
                for (&x) |*v| v.* = random.float(f32) * 2 - 1;
                var expected: [tokens * rows]f32 = undefined;
                for (0..tokens) |t| {
                    var a: [cols / E.Act.block_elems]E.Act.Block = undefined;
                    E.Act.quantizeRow(x[t * cols ..][0..cols], &a);
                    for (0..rows) |r| expected[t * rows + r] = expectedDot(E, rows, tokens, t, w[r * nb ..][0..nb], &a);
                }
                for (1..4) |threads| {
                    const pool = try Pool.create(testing.allocator, @intCast(threads));
                    defer pool.destroy(testing.allocator);
                    try pool.reserve(testing.allocator, scratchBytes(E.Act, cols, tokens));
                    var out: [tokens * rows]f32 = @splat(std.math.nan(f32));
                    try testing.expectEqual(Status.ok, matmul(E, pool, &out, &w, &x, rows, cols, tokens, false));
                    try testing.expectEqualSlices(f32, &expected, &out);
                }
            }
        }
    }
}
