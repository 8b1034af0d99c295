//! Load-time interleaved layouts (llama.cpp's CPU_REPACK "extra buffer types"): a matrix
//! whose rows come in groups of 16 can be stored with each block column of a group's
//! 16 rows transposed into one `WideGroup` (each u32 lane one row), the layout the
//! source type's 16-row wide kernel otherwise builds with shuffles every time it reads a
//! block (Q4_0, IQ4_NL, Q4_K, on AVX-512 VNNI); on AVX2, Q4_0's, IQ4_NL's and Q4_K's
//! groups are 8 rows (their 256-bit kernels). Q4_1's groups are 4 rows on AVX-512 VNNI, the layout
//! of its VNNI tile (`quant_q4_1_tile.Group`), and 8 rows on AVX2 (scales, mins, then
//! each row pair's codes in one vector: `q4_1_tile_avx2.Group`). On AVX2 without AVX-512, F32, F16 and BF16 matrices take a
//! layout too (`FloatGrouped`: 4-row groups of 8-column chunks, the float tile's shape),
//! whose rows can still be looked up. Where Q6_K's kernel is the AVX2 one, Q6_K blocks
//! are recoded one by one (`Q6_Kp`: the 6-bit levels in byte planes, rows unchanged),
//! and their rows can be looked up too. The repacked matrix has exactly its source's
//! bytes, in another order.
//!
//! Each layout is an entry of the type table (`types.zig`) whose id is not a ggml id
//! (`id_base` + the source's): it has the source's block accounting and the source's
//! wide kernel (which accepts either layout and gives the same bits), and no row
//! functions: its rows are not contiguous (or not in ggml's encoding), so it cannot be
//! dequantized or quantized by row, nor looked up (but a float layout's rows and
//! Q6_K's planes: `lookupRow`), and a matmul or a row
//! lookup over it needs a row count that is a multiple of its group (the graph checks
//! both). TypeScript asks `dotllm_repack_type` at load which bound
//! matrices have a layout here, and copies them with `dotllm_repack`.
const std = @import("std");
const legacy = @import("quant_legacy.zig");
const kquant = @import("quant_k.zig");
const act = @import("quant_act.zig");
const pool_zig = @import("pool.zig");
const matmul_float = @import("matmul.zig");
const matmul_quant = @import("matmul_quant.zig");
/// The float entries (F32, F16, BF16), sources of the float layouts.
const types_float = @import("types.zig");

/// Ids of interleaved layouts: `id_base` + the source's ggml id. ggml's ids are below 64.
pub const id_base: u32 = 0x100;

/// The interleaved entry of source type `S` (which declares `wide_rows` > 0, the rows
/// of a group; `WideGroup`, `wideGroupOf` and a `vecDotWideRepacked` that also takes
/// `[]align(1) const WideGroup`), whose dot product reads activations in format `A` (the
/// source's or an extension of it with the same quants: the bits are the source's).
fn Interleaved(comptime S: type, comptime A: type) type {
    const group_rows = S.wide_rows;
    comptime std.debug.assert(group_rows > 0);
    return struct {
        pub const ggml_type: u32 = id_base + S.ggml_type;
        pub const name = std.fmt.comptimePrint("{s}x{d}", .{ S.name, group_rows });
        pub const Source = S;
        pub const block_elems = S.block_elems;
        /// Per-row byte accounting (`rowBytes`): a matrix is as large as its source.
        pub const Block = S.Block;
        pub const Group = S.WideGroup;
        pub const Act = A;
        pub const interleave_rows = group_rows;
        /// The matmul driver's 16-row tiles (matmul_quant.zig) take every row group.
        pub const wide_rows = group_rows;
        pub const repack_rows = group_rows;

        pub fn vecDotWideRepacked(comptime T: usize, comptime gemm: bool, w: []align(1) const Group, a_rows: [T][]align(1) const Act.Block) [T][group_rows]f32 {
            return S.vecDotWideRepacked(T, gemm, w, a_rows);
        }

        /// Copies a `rows` × `cols` matrix of the source type into this layout
        /// (`rows % group_rows == 0`, `cols % block_elems == 0`, checked by the caller).
        pub fn repack(src: [*]align(1) const S.Block, dst: [*]align(1) Group, rows: usize, cols: usize) void {
            std.debug.assert(rows % group_rows == 0 and cols % block_elems == 0);
            const n = cols / block_elems;
            for (0..rows / group_rows) |g| {
                var w_rows: [group_rows][]align(1) const S.Block = undefined;
                inline for (0..group_rows) |i| w_rows[i] = src[(g * group_rows + i) * n ..][0..n];
                for (0..n) |b| dst[g * n + b] = S.wideGroupOf(w_rows, b);
            }
        }
    };
}

/// Q4_0 interleaved: 16-row groups on AVX-512 VNNI, 8-row groups on AVX2 (the rows of
/// each target's Q4_0 wide kernel; its name says which, "Q4_0x16" or "Q4_0x8").
pub const Q4_0xN = Interleaved(legacy.Q4_0, act.Q8_0S);
/// IQ4_NL interleaved (likewise, "IQ4_NLx16" or "IQ4_NLx8"; the same layout as Q4_0's).
pub const IQ4_NLxN = Interleaved(legacy.IQ4_NL, act.Q8_0S);
/// Q4_K interleaved (likewise: 16-row groups on AVX-512 VNNI, 8-row ones on AVX2); its
/// activations are Q4_K's own Q8_K.
pub const Q4_KxN = Interleaved(kquant.Q4_K, kquant.Q8_K);
/// Q4_1 in 4-row groups on AVX-512 VNNI (where its 4-row tile runs), 8-row ones on AVX2
/// (whose assembly tile reads `act.Q8_1F32`, Q8_1's values laid out for it); llama.cpp
/// keeps Q4_1 as it is, and so do the sums: `vecDot`'s order.
pub const Q4_1xN = Interleaved(legacy.Q4_1, legacy.Q4_1.WideAct);

/// Q6_K with each block's levels recoded in byte planes (`kquant.Q6_K.Planes`), where
/// the Q6_K kernel is the AVX2 one: the GEMV puts 128 levels together in 11 vector
/// operations rather than 17, and with the levels (and the activations) in
/// `kquant.Q6_K.planes_order` a block takes 4 scale vectors and 4 vpmaddwd rather than
/// 8 and 8 (`kquant.Q6_KPlanes`), with the same bits in every order.
/// Rows stay contiguous blocks: any row count, and rows can be looked up, so a tied
/// Q6_K LM head (most Q4_K_M files) serves as the token embedding too.
pub const Q6_Kp = struct {
    pub const ggml_type: u32 = id_base + kquant.Q6_K.ggml_type;
    pub const name = kquant.Q6_KPlanes.name;
    pub const Source = kquant.Q6_K;
    pub const block_elems = kquant.Q6_KPlanes.block_elems;
    pub const Block = kquant.Q6_KPlanes.Block;
    pub const Act = kquant.Q6_KPlanes.Act;
    /// Rows are not regrouped: a matmul over any row count.
    pub const interleave_rows = 1;

    pub fn matmul(pool: *pool_zig.Pool, out: [*]f32, w: [*]align(1) const Block, x: [*]const f32, rows: usize, cols: usize, tokens: usize, act_ready: bool) pool_zig.Status {
        return matmul_quant.matmul(kquant.Q6_KPlanes, pool, out, w, x, rows, cols, tokens, act_ready);
    }

    /// Recodes a `rows` × `cols` Q6_K matrix block by block (`cols % block_elems == 0`,
    /// checked by the caller).
    pub fn repack(src: [*]align(1) const Source.Block, dst: [*]align(1) Block, rows: usize, cols: usize) void {
        std.debug.assert(cols % block_elems == 0);
        for (0..rows * (cols / block_elems)) |i| dst[i] = Source.planesOf(&src[i]);
    }

    /// Row `row` (of `cols` elements) of a matrix in this layout, as f32 (Q6_K's bits).
    pub fn lookupRow(w: [*]align(1) const Block, row: usize, cols: usize, out: []f32) void {
        std.debug.assert(out.len == cols and cols % block_elems == 0);
        const n = cols / block_elems;
        for (0..n) |j| {
            const b = [1]Source.Block{Source.blockOfPlanes(&w[row * n + j])};
            Source.dequantizeRow(&b, out[j * block_elems ..][0..block_elems]);
        }
    }
};

/// The float matrix of source type `S` (F32, F16 or BF16) in groups of
/// `matmul.group_rows` rows (`matmul.FloatLayout.groups`): each `group_lanes`-column
/// chunk of a group's rows stored together, so the float tile, which reads one vector
/// of each of its rows per column step, reads the matrix front to back. Its rows can
/// still be looked up (`lookupRow`): a tied LM head in this layout serves as the token
/// embedding too.
fn FloatGrouped(comptime S: type) type {
    const rows_per_group = matmul_float.group_rows;
    const chunk = matmul_float.group_lanes;
    comptime std.debug.assert(rows_per_group > 0);
    return struct {
        pub const ggml_type: u32 = id_base + S.ggml_type;
        pub const name = std.fmt.comptimePrint("{s}x{d}", .{ S.name, rows_per_group });
        pub const Source = S;
        /// One row's column chunk: columns come in whole chunks, and `rowBytes` is the source's.
        pub const block_elems = chunk;
        pub const Block = [chunk]S.Block;
        pub const Act = void;
        pub const interleave_rows = rows_per_group;

        pub fn matmul(pool: *pool_zig.Pool, out: [*]f32, w: [*]align(1) const Block, x: [*]const f32, rows: usize, cols: usize, tokens: usize, act_ready: bool) pool_zig.Status {
            _ = act_ready;
            return matmul_float.matmulFloatLayout(S.Block, .groups, pool, out, @ptrCast(w), x, rows, cols, tokens);
        }

        /// Copies a `rows` × `cols` row-major matrix into this layout
        /// (`rows % interleave_rows == 0`, `cols % chunk == 0`, checked by the caller).
        pub fn repack(src: [*]align(1) const S.Block, dst: [*]align(1) Block, rows: usize, cols: usize) void {
            std.debug.assert(rows % rows_per_group == 0 and cols % chunk == 0);
            const chunks = cols / chunk;
            for (0..rows / rows_per_group) |g| {
                for (0..chunks) |k| {
                    for (0..rows_per_group) |i| {
                        const row = g * rows_per_group + i;
                        dst[(g * chunks + k) * rows_per_group + i] = src[row * cols + k * chunk ..][0..chunk].*;
                    }
                }
            }
        }

        /// Row `row` (of `cols` elements) of a matrix in this layout, as f32.
        pub fn lookupRow(w: [*]align(1) const Block, row: usize, cols: usize, out: []f32) void {
            std.debug.assert(out.len == cols and cols % chunk == 0);
            const chunks = cols / chunk;
            const g = row / rows_per_group;
            const i = row % rows_per_group;
            for (0..chunks) |k| {
                S.dequantizeRow(&w[(g * chunks + k) * rows_per_group + i], out[k * chunk ..][0..chunk]);
            }
        }
    };
}

/// The entries of this target: layouts of sources whose wide kernel runs here.
const quant_entries = (if (legacy.Q4_0.wide_rows > 0) .{Q4_0xN} else .{}) ++
    (if (legacy.IQ4_NL.wide_rows > 0) .{IQ4_NLxN} else .{}) ++
    (if (kquant.Q4_K.wide_rows > 0) .{Q4_KxN} else .{}) ++
    (if (legacy.Q4_1.wide_rows > 0) .{Q4_1xN} else .{});

/// The recoded layouts: Q6_K's planes where its kernel is the AVX2 one.
const recoded_entries = if (kquant.default_path == .avx2) .{Q6_Kp} else .{};

/// The float layouts, where the float tile is `matmul.group_rows` rows (AVX2 without
/// AVX-512).
const float_entries = if (matmul_float.group_rows > 0) .{
    FloatGrouped(types_float.F32),
    FloatGrouped(types_float.F16),
    FloatGrouped(types_float.BF16),
} else .{};

pub const entries = quant_entries ++ recoded_entries ++ float_entries;

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "an interleaved matrix gives its source's bits for every token count and thread count" {
    @setEvalBranchQuota(10_000);
    inline for (quant_entries) |R| {
        const S = R.Source;
        // Legacy types: 15 blocks (IQ4_NL's odd last block); K-quants: 2.
        const cols = if (S.block_elems == 32) 480 else 512;
        const n = cols / S.block_elems;
        var prng = std.Random.DefaultPrng.init(5);
        const random = prng.random();
        inline for (.{ 16, 48 }) |rows| {
            var wf: [rows * cols]f32 = undefined;
            for (&wf) |*v| v.* = random.float(f32) * 2 - 1;
            var w: [rows * n]S.Block = undefined;
            for (0..rows) |r| S.quantizeRowRef(wf[r * cols ..][0..cols], w[r * n ..][0..n]);
            var packed_w: [rows / R.interleave_rows * n]R.Group = undefined;
            R.repack(&w, &packed_w, rows, cols);
            try testing.expectEqual(@sizeOf(@TypeOf(w)), @sizeOf(@TypeOf(packed_w)));
            // GEMV, 1-3 token remainders, tiles of 4 and 8, and mixes (13 = 8+4+1).
            inline for (.{ 1, 2, 3, 4, 5, 8, 13, 17 }) |tokens| {
                var x: [tokens * cols]f32 = undefined;
                for (&x) |*v| v.* = random.float(f32) * 2 - 1;
                try expectSourceMatmul(S, R, rows, cols, tokens, std.mem.asBytes(&w), std.mem.asBytes(&packed_w), &x);
            }
        }
    }
}

test "a grouped float matrix gives its source's bits for every token count and thread count, and its rows" {
    inline for (float_entries) |R| {
        const S = R.Source;
        // 15 column chunks; 4 groups (1 each for 3 threads, and a second for one).
        const cols = 15 * R.block_elems;
        const rows = 4 * R.interleave_rows;
        var prng = std.Random.DefaultPrng.init(7);
        const random = prng.random();
        var wf: [rows * cols]f32 = undefined;
        for (&wf) |*v| v.* = random.float(f32) * 2 - 1;
        var w: [rows * cols]S.Block = undefined;
        S.quantizeRowRef(&wf, &w);
        var packed_w: [rows * cols / R.block_elems]R.Block = undefined;
        R.repack(&w, &packed_w, rows, cols);
        try testing.expectEqual(@sizeOf(@TypeOf(w)), @sizeOf(@TypeOf(packed_w)));
        // GEMV, 1-3 token tails of the prompt tile, and several tiles.
        inline for (.{ 1, 2, 3, 4, 5, 8, 13 }) |tokens| {
            var x: [tokens * cols]f32 = undefined;
            for (&x) |*v| v.* = random.float(f32) * 2 - 1;
            try expectSourceMatmul(S, R, rows, cols, tokens, std.mem.asBytes(&w), std.mem.asBytes(&packed_w), &x);
        }
        try expectSourceRows(S, R, cols, .{ rows - 1, 0, 5, 6 }, std.mem.asBytes(&w), std.mem.asBytes(&packed_w));
    }
}

/// The matmul (`types.matmul`) of a `rows` × `cols` matrix in layout `R` equals the
/// source type `S`'s, bit for bit, at 1..3 threads.
fn expectSourceMatmul(comptime S: type, comptime R: type, comptime rows: usize, comptime cols: usize, comptime tokens: usize, source: []const u8, layout: []const u8, x: *const [tokens * cols]f32) !void {
    const types = @import("types.zig");
    for (1..4) |threads| {
        const pool = try pool_zig.Pool.create(testing.allocator, @intCast(threads));
        defer pool.destroy(testing.allocator);
        try pool.reserve(testing.allocator, types.scratchBytes(cols, tokens));
        var want: [tokens * rows]f32 = @splat(std.math.nan(f32));
        var got: [tokens * rows]f32 = @splat(std.math.nan(f32));
        try testing.expectEqual(pool_zig.Status.ok, types.matmul(types.fromId(S.ggml_type).?, pool, &want, source.ptr, x, rows, cols, tokens, false));
        try testing.expectEqual(pool_zig.Status.ok, types.matmul(types.fromId(R.ggml_type).?, pool, &got, layout.ptr, x, rows, cols, tokens, false));
        try testing.expectEqualSlices(u32, @as(*const [tokens * rows]u32, @ptrCast(&want)), @as(*const [tokens * rows]u32, @ptrCast(&got)));
    }
}

/// Rows `ids` looked up (`types.getRows`) in layout `R` of a matrix equal the source
/// type `S`'s rows, bit for bit.
fn expectSourceRows(comptime S: type, comptime R: type, comptime cols: usize, comptime ids: [4]i32, source: []const u8, layout: []const u8) !void {
    const types = @import("types.zig");
    var want: [ids.len * cols]f32 = undefined;
    types.getRows(types.fromId(S.ggml_type).?, &want, source.ptr, &ids, ids.len, cols);
    var got: [ids.len * cols]f32 = @splat(std.math.nan(f32));
    types.getRows(types.fromId(R.ggml_type).?, &got, layout.ptr, &ids, ids.len, cols);
    try testing.expectEqualSlices(u32, @as(*const [ids.len * cols]u32, @ptrCast(&want)), @as(*const [ids.len * cols]u32, @ptrCast(&got)));
}

test "a recoded Q6_K matrix gives Q6_K's bits for every token count and thread count, and its rows" {
    inline for (recoded_entries) |R| {
        const S = R.Source;
        // 13 rows: 3 four-row groups and a single row; 3 blocks per row.
        const rows = 13;
        const cols = 3 * S.block_elems;
        const n = cols / S.block_elems;
        var prng = std.Random.DefaultPrng.init(11);
        const random = prng.random();
        var wf: [rows * cols]f32 = undefined;
        for (&wf) |*v| v.* = random.floatNorm(f32);
        var w: [rows * n]S.Block = undefined;
        for (0..rows) |r| S.quantizeRowRef(wf[r * cols ..][0..cols], w[r * n ..][0..n]);
        // A row of random bytes too: every level 0..63 and every bit pattern of qh.
        random.bytes(std.mem.sliceAsBytes(w[n .. 2 * n]));
        for (w[n .. 2 * n]) |*b| b.d = 0.01;
        var packed_w: [rows * n]R.Block = undefined;
        R.repack(&w, &packed_w, rows, cols);
        try testing.expectEqual(@sizeOf(@TypeOf(w)), @sizeOf(@TypeOf(packed_w)));
        for (w, packed_w) |b, p| try testing.expectEqualSlices(u8, std.mem.asBytes(&b), std.mem.asBytes(&S.blockOfPlanes(&p)));
        // GEMV, the vec_dot-order tiles (2-7 tokens) and the tiled order (8+).
        inline for (.{ 1, 2, 3, 4, 5, 8, 13, 17 }) |tokens| {
            var x: [tokens * cols]f32 = undefined;
            for (&x) |*v| v.* = random.float(f32) * 2 - 1;
            try expectSourceMatmul(S, R, rows, cols, tokens, std.mem.asBytes(&w), std.mem.asBytes(&packed_w), &x);
        }
        // Every row looked up equals the source's row (row 1: the random bytes).
        try expectSourceRows(S, R, cols, .{ rows - 1, 0, 1, 6 }, std.mem.asBytes(&w), std.mem.asBytes(&packed_w));
    }
}

test "the table offers a layout only for whole row groups, and refuses row functions for it" {
    const types = @import("types.zig");
    inline for (entries) |R| {
        const src: u32 = R.Source.ggml_type;
        const cols = 2 * R.block_elems;
        try testing.expectEqual(@as(i32, @intCast(R.ggml_type)), types.dotllm_repack_type(src, 32, cols));
        if (R.interleave_rows > 1) try testing.expectEqual(@as(i32, -1), types.dotllm_repack_type(src, 2 * R.interleave_rows + 2, cols));
        try testing.expectEqual(@as(i32, -1), types.dotllm_repack_type(src, 32, R.block_elems + R.block_elems / 2));
        try testing.expectEqual(@as(i32, -1), types.dotllm_repack_type(R.ggml_type, 32, cols));
        var x: [cols]f32 = @splat(0);
        var bytes: [2 * @sizeOf(R.Block)]u8 = undefined;
        try testing.expectEqual(@as(i32, -1), types.dotllm_quantize_row(R.ggml_type, &x, &bytes, cols));
        try testing.expectEqual(@as(i32, -1), types.dotllm_dequantize_row(R.ggml_type, &bytes, &x, cols));
        // Only the float layouts' and the recoded ones' rows can be looked up (get_rows).
        try testing.expectEqual(@hasDecl(R, "lookupRow"), types.hasRows(types.fromId(R.ggml_type).?));
        try testing.expectEqual(R.interleave_rows, types.rowMultiple(types.fromId(R.ggml_type).?));
    }
    // F32 has a layout exactly where the float tile groups rows (AVX2 without AVX-512).
    try testing.expectEqual(matmul_float.group_rows > 0, types.dotllm_repack_type(0, 32, 64) >= 0);
}
