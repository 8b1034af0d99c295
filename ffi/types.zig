//! The weight-type table: every type the library computes, keyed by ggml's type id.
//!
//! Each entry is a namespace that declares its ggml id, name, block layout (`Block`,
//! its size asserted where it is declared), elements per block, the activation
//! format its dot product consumes (`Act`, ggml's `vec_dot_type`; `void` for the
//! float types, which multiply f32 activations directly), `dequantizeRow` and
//! `quantizeRowRef` (ggml's reference quantizer, bit-exact). The matmul kernel is
//! the entry's own `matmul` when it declares one, else the generic driver of
//! `matmul_quant.zig` over its `vecDot`.
//!
//! One comptime dispatch (`dispatch`, an `inline else` over `Type`) serves the graph
//! walker, op validation, row lookup and the row-conversion exports. TypeScript reads
//! block sizes and names through `dotllm_type_info`, so no type id or block size is
//! written outside this table (and the GGUF reader's table of every ggml type).
const std = @import("std");
const quant = @import("quant.zig");
const legacy = @import("quant_legacy.zig");
const kquant = @import("quant_k.zig");
const pool_zig = @import("pool.zig");
const matmul_float = @import("matmul.zig");
const matmul_quant = @import("matmul_quant.zig");
const repack = @import("repack.zig");

const Pool = pool_zig.Pool;
const Status = pool_zig.Status;

/// 32-bit float: one element per "block".
pub const F32 = struct {
    pub const ggml_type: u32 = 0;
    pub const name = "F32";
    pub const block_elems: usize = 1;
    pub const Block = f32;
    pub const Act = void;
    pub fn dequantizeRow(x: []align(1) const Block, y: []f32) void {
        for (x, y) |v, *o| o.* = v;
    }
    pub fn quantizeRowRef(x: []const f32, y: []align(1) Block) void {
        for (x, y) |v, *o| o.* = v;
    }
};

/// IEEE half precision.
pub const F16 = struct {
    pub const ggml_type: u32 = 1;
    pub const name = "F16";
    pub const block_elems: usize = 1;
    pub const Block = f16;
    pub const Act = void;
    pub const dequantizeRow = quant.convertF16ToF32;
    pub const quantizeRowRef = quant.convertF32ToF16;
};

/// bfloat16, stored as its 16 bits.
pub const BF16 = struct {
    pub const ggml_type: u32 = 30;
    pub const name = "BF16";
    pub const block_elems: usize = 1;
    pub const Block = u16;
    pub const Act = void;
    pub const dequantizeRow = quant.convertBf16ToF32;
    pub const quantizeRowRef = quant.convertF32ToBf16;
};

/// Every computable type. A new type is one namespace added here. The interleaved
/// layouts of repack.zig follow (the ones this target runs): entries too, but without
/// row functions (`hasRows`).
pub const entries = .{
    F32,           F16,         BF16,          quant.Q8_0,
    legacy.Q4_0,   legacy.Q4_1, legacy.Q5_0,   legacy.Q5_1,
    legacy.IQ4_NL, kquant.Q2_K, kquant.Q3_K,   kquant.Q4_K,
    kquant.Q5_K,   kquant.Q6_K, kquant.IQ4_XS,
} ++ repack.entries;

comptime {
    // Ids are unique and every Block's size is a whole number of bytes per block.
    @setEvalBranchQuota(10_000);
    for (entries, 0..) |a, i| {
        for (entries, 0..) |b, j| std.debug.assert(i == j or a.ggml_type != b.ggml_type);
        std.debug.assert(@sizeOf(a.Block) > 0 and a.block_elems > 0);
    }
}

/// The computable types as an enum (tag = ggml id), generated from `entries`.
pub const Type = blk: {
    var fields: [entries.len]std.builtin.Type.EnumField = undefined;
    for (entries, 0..) |e, i| fields[i] = .{ .name = e.name, .value = e.ggml_type };
    break :blk @Type(.{ .@"enum" = .{ .tag_type = u32, .fields = &fields, .decls = &.{}, .is_exhaustive = true } });
};

/// The namespace of a computable type.
pub fn Entry(comptime t: Type) type {
    inline for (entries) |e| if (e.ggml_type == @intFromEnum(t)) return e;
    unreachable;
}

/// The computable type with ggml id `id`, or null.
pub fn fromId(id: u32) ?Type {
    return std.meta.intToEnum(Type, id) catch null;
}

/// True when rows of entry `E` are contiguous runs of blocks (every type but the
/// interleaved layouts): row lookup, quantize and dequantize work on them.
fn rowsOf(comptime E: type) bool {
    return !@hasDecl(E, "interleave_rows");
}

/// True when tables of type `t` can be read by row (`getRows`): contiguous rows, or
/// a layout that looks its rows up (`lookupRow`: the float layouts).
pub fn hasRows(t: Type) bool {
    return switch (t) {
        inline else => |tag| comptime rowsOf(Entry(tag)) or @hasDecl(Entry(tag), "lookupRow"),
    };
}

/// The row count of a matmul over type `t` must be a multiple of this.
pub fn rowMultiple(t: Type) usize {
    return switch (t) {
        inline else => |tag| comptime if (rowsOf(Entry(tag))) 1 else Entry(tag).interleave_rows,
    };
}

/// The interleaved layout of source type `t` for a `rows` × `cols` matrix on this
/// target, or null (no layout, or rows not a multiple of its group).
pub fn repackedOf(t: Type, rows: usize, cols: usize) ?Type {
    inline for (repack.entries) |R| {
        if (@intFromEnum(t) == R.Source.ggml_type and rows > 0 and rows % R.interleave_rows == 0 and cols > 0 and cols % R.block_elems == 0) return fromId(R.ggml_type).?;
    }
    return null;
}

/// Bytes of one row of `elements` elements of type `t`, or null when `elements` is
/// not a whole number of blocks or the byte count would overflow.
pub fn rowBytes(t: Type, elements: u64) ?u64 {
    return switch (t) {
        inline else => |tag| {
            const E = Entry(tag);
            if (elements % E.block_elems != 0) return null;
            return std.math.mul(u64, elements / E.block_elems, @sizeOf(E.Block)) catch null;
        },
    };
}

/// Converts `count` rows `ids[i]` (each `row_length` elements) of a table of type `t` to f32.
/// The caller checked every id against the table's row count (a multiple of
/// `rowMultiple(t)`) and `row_length` against the block.
pub fn getRows(t: Type, out: [*]f32, table: [*]const u8, ids: [*]const i32, count: usize, row_length: usize) void {
    switch (t) {
        inline else => |tag| {
            const E = Entry(tag);
            const rows: [*]align(1) const E.Block = @ptrCast(table);
            if (comptime @hasDecl(E, "lookupRow")) {
                for (0..count) |i| E.lookupRow(rows, @intCast(ids[i]), row_length, out[i * row_length ..][0..row_length]);
                return;
            }
            if (comptime !rowsOf(E)) unreachable; // refused by the graph's validation
            const blocks = row_length / E.block_elems;
            for (0..count) |i| {
                const id: usize = @intCast(ids[i]);
                E.dequantizeRow(rows[id * blocks ..][0..blocks], out[i * row_length ..][0..row_length]);
            }
        },
    }
}

// ---------------------------------------------------------------------------
// Matmul: the entry's own kernel, the float kernel, or the generic quantized driver

/// Distinct activation formats, in a fixed order: their index is the key the graph
/// walker compares to share quantized activations between matmuls of one input.
const act_formats = blk: {
    var list: []const type = &.{};
    for (entries) |e| {
        if (e.Act == void) continue;
        var seen = false;
        for (list) |a| seen = seen or a == e.Act;
        if (!seen) list = list ++ .{e.Act};
    }
    break :blk list;
};

/// The activation format of `t` as a small integer (0 for f32 activations).
pub fn actKey(t: Type) u32 {
    return switch (t) {
        inline else => |tag| comptime blk: {
            const E = Entry(tag);
            if (E.Act == void) break :blk 0;
            for (act_formats, 1..) |a, i| if (a == E.Act) break :blk i;
            unreachable;
        },
    };
}

fn actScratchBytes(comptime A: type, cols: usize, tokens: usize) usize {
    if (@hasDecl(A, "scratchBytes")) return A.scratchBytes(cols, tokens);
    return matmul_quant.scratchBytes(A, cols, tokens);
}

/// Scratch bytes every matmul of `tokens` rows of `cols` activations fits in.
pub fn scratchBytes(cols: usize, tokens: usize) usize {
    var bytes: usize = 0;
    inline for (act_formats) |A| bytes = @max(bytes, actScratchBytes(A, cols, tokens));
    return bytes;
}

/// `out[t][r] = Σ_c W[r][c]·x[t][c]` with W of type `t`. `act_ready`: the pool's
/// scratch already holds x quantized into this type's activation format (a previous
/// matmul of the same input and format). The caller checked `cols` against the block
/// and the scratch against `scratchBytes`.
pub fn matmul(t: Type, pool: *Pool, out: [*]f32, w: [*]const u8, x: [*]const f32, rows: usize, cols: usize, tokens: usize, act_ready: bool) Status {
    return switch (t) {
        inline else => |tag| {
            const E = Entry(tag);
            const weights: [*]align(1) const E.Block = @ptrCast(w);
            if (@hasDecl(E, "matmul")) return E.matmul(pool, out, weights, x, rows, cols, tokens, act_ready);
            if (E.Act == void) return matmul_float.matmulFloat(E.Block, pool, out, weights, x, rows, cols, tokens);
            return matmul_quant.matmul(E, pool, out, weights, x, rows, cols, tokens, act_ready);
        },
    };
}

// ---------------------------------------------------------------------------
// Exports

/// What TypeScript learns of a type (`dotllm_type_info`).
pub const TypeInfo = extern struct {
    block_elems: u32,
    block_bytes: u32,
    /// NUL-terminated ggml name.
    name: [12]u8,
    /// 1 when rows of a table of this type can be looked up (`get_rows`), else 0.
    row_lookup: u32,
};

/// Fills `out` for the computable type `id` and returns 0, or returns -1 (not computable).
export fn dotllm_type_info(id: u32, out: *TypeInfo) i32 {
    const t = fromId(id) orelse return -1;
    switch (t) {
        inline else => |tag| {
            const E = Entry(tag);
            var name: [12]u8 = @splat(0);
            @memcpy(name[0..E.name.len], E.name);
            out.* = .{ .block_elems = E.block_elems, .block_bytes = @sizeOf(E.Block), .name = name, .row_lookup = @intFromBool(hasRows(t)) };
        },
    }
    return 0;
}

/// ggml's reference quantizer: `n` f32 into type `id` rows. 0, or -1 for a type that
/// is not computable or `n` not a whole number of blocks.
pub export fn dotllm_quantize_row(id: u32, x: [*]const f32, y: [*]u8, n: usize) i32 {
    const t = fromId(id) orelse return -1;
    switch (t) {
        inline else => |tag| {
            const E = Entry(tag);
            if (comptime !rowsOf(E)) return -1;
            if (n % E.block_elems != 0) return -1;
            const blocks: [*]align(1) E.Block = @ptrCast(y);
            E.quantizeRowRef(x[0..n], blocks[0 .. n / E.block_elems]);
        },
    }
    return 0;
}

/// ggml's dequantization: `n` elements of type `id` to f32. 0, or -1 as above.
pub export fn dotllm_dequantize_row(id: u32, x: [*]const u8, y: [*]f32, n: usize) i32 {
    const t = fromId(id) orelse return -1;
    switch (t) {
        inline else => |tag| {
            const E = Entry(tag);
            if (comptime !rowsOf(E)) return -1;
            if (n % E.block_elems != 0) return -1;
            const blocks: [*]align(1) const E.Block = @ptrCast(x);
            E.dequantizeRow(blocks[0 .. n / E.block_elems], y[0..n]);
        },
    }
    return 0;
}

/// The id of the interleaved layout of a `rows` × `cols` matrix of type `id` on this
/// target (its bytes: the source's), or -1 when there is none.
pub export fn dotllm_repack_type(id: u32, rows: usize, cols: usize) i32 {
    const t = fromId(id) orelse return -1;
    const r = repackedOf(t, rows, cols) orelse return -1;
    return @intCast(@intFromEnum(r));
}

/// Copies the `rows` × `cols` matrix of type `id` at `src` into its interleaved layout
/// at `dst` (both `rowBytes(id, cols)·rows` bytes, not overlapping). Returns the
/// layout's id, or -1 (no layout: `dotllm_repack_type` said so; nothing written).
export fn dotllm_repack(id: u32, rows: usize, cols: usize, src: [*]const u8, dst: [*]u8) i32 {
    const t = fromId(id) orelse return -1;
    const r = repackedOf(t, rows, cols) orelse return -1;
    inline for (repack.entries) |R| {
        if (@intFromEnum(r) == R.ggml_type) {
            R.repack(@ptrCast(src), @ptrCast(dst), rows, cols);
            return @intCast(R.ggml_type);
        }
    }
    unreachable;
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "the table answers for its types and refuses others" {
    var info: TypeInfo = undefined;
    try testing.expectEqual(@as(i32, 0), dotllm_type_info(8, &info));
    try testing.expectEqual(@as(u32, 32), info.block_elems);
    try testing.expectEqual(@as(u32, 34), info.block_bytes);
    try testing.expectEqualStrings("Q8_0", std.mem.sliceTo(&info.name, 0));
    try testing.expectEqual(@as(u32, 1), info.row_lookup);
    try testing.expectEqual(@as(i32, -1), dotllm_type_info(9999, &info));
    try testing.expectEqual(@as(?u64, null), rowBytes(.Q8_0, 33));
    try testing.expectEqual(@as(?u64, 68), rowBytes(.Q8_0, 64));
    try testing.expectEqual(@as(?u64, null), rowBytes(.F32, 1 << 63));
}

test "quantize and dequantize rows through the table" {
    var x: [64]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @as(f32, @floatFromInt(i)) / 8 - 4;
    var bytes: [136]u8 = undefined;
    var y: [64]f32 = undefined;
    try testing.expectEqual(@as(i32, 0), dotllm_quantize_row(8, &x, &bytes, 64));
    try testing.expectEqual(@as(i32, 0), dotllm_dequantize_row(8, &bytes, &y, 64));
    for (x, y) |a, b| try testing.expect(@abs(a - b) < 0.02);
    try testing.expectEqual(@as(i32, -1), dotllm_quantize_row(8, &x, &bytes, 33));
    try testing.expectEqual(@as(i32, -1), dotllm_quantize_row(2000, &x, &bytes, 64));
}

test "getRows converts rows of every type" {
    const row = 256;
    var table: [3 * row]f32 = undefined;
    for (&table, 0..) |*v, i| v.* = @sin(@as(f32, @floatFromInt(i)));
    const ids = [_]i32{ 2, 0 };
    inline for (entries) |E| {
        if (comptime !rowsOf(E)) continue;
        var encoded: [3 * row / E.block_elems]E.Block = undefined;
        E.quantizeRowRef(&table, &encoded);
        var expected: [3 * row]f32 = undefined;
        E.dequantizeRow(&encoded, &expected);
        var out: [2 * row]f32 = undefined;
        getRows(fromId(E.ggml_type).?, &out, @ptrCast(&encoded), &ids, 2, row);
        try testing.expectEqualSlices(f32, expected[2 * row ..], out[0..row]);
        try testing.expectEqualSlices(f32, expected[0..row], out[row..]);
        // Every type keeps the values to within a third of their range (Q2_K is the coarsest).
        for (table, expected) |a, b| try testing.expect(@abs(a - b) <= 0.35);
    }
}
