//! A forward pass as one native call: TypeScript records the sequence of kernel
//! calls (`Op`s) into a buffer and `dotllm_graph_run` walks it on the calling
//! thread, each kernel dispatching to the pool as it would when called alone.
//!
//! So a batch costs one FFI call instead of one per kernel, and the results are
//! those of the kernels called one by one: bit-identical for every thread count.
//! Consecutive Q8_0 matmuls of the same input (Q, K, V; gate, up) quantize it once.
//! (A later step can keep the workers inside the walk between kernels.)
const std = @import("std");
const pool_zig = @import("pool.zig");
const quant = @import("quant.zig");
const matmul = @import("matmul.zig");
const kernels = @import("kernels.zig");
const attention = @import("attention.zig");

const Pool = pool_zig.Pool;
const Status = pool_zig.Status;

/// Most ops one graph may hold (a 128-layer model needs ~1,800).
pub const op_count_max: usize = 1 << 16;

/// What an op does; its arguments are in `Op.args`, in the order of the matching
/// single-call export (`dotllm_<code>_<type>`), pointers as addresses, f32 values
/// as their bits.
pub const OpCode = enum(u32) {
    /// out, w, x, rows, cols, tokens (type: ggml weight type)
    matmul = 1,
    /// out, x, w, n, tokens, eps
    rmsnorm = 2,
    /// x, tokens, heads, head_dim, rope_dims, pos_start, freq_base, freq_factors, neox
    rope = 3,
    /// cache, src, pos, tokens, kv_dim (type: cache type)
    store_kv = 4,
    /// out, q, k, v, tokens, pos_start, heads, kv_heads, head_dim, scale (type: cache type)
    attention = 5,
    /// out, gate, up, n
    swiglu = 6,
    /// out, a, b, n
    add = 7,
    /// out, table, ids, count, row_length (type: ggml table type)
    get_rows = 8,
};

/// One recorded kernel call: 128 bytes, laid out for TypeScript to fill.
pub const Op = extern struct {
    code: u32,
    type: u32,
    args: [15]u64,
};

comptime {
    std.debug.assert(@sizeOf(Op) == 128);
}

/// ggml type ids the ops accept.
const type_f32 = 0;
const type_f16 = 1;
const type_q8_0 = 8;
const type_bf16 = 30;

fn ptr(comptime T: type, address: u64) T {
    return @ptrFromInt(@as(usize, @intCast(address)));
}

fn f32From(value_bits: u64) f32 {
    return @bitCast(@as(u32, @truncate(value_bits)));
}

fn count(value: u64) usize {
    return @intCast(value);
}

/// True when `op` is a Q8_0 matmul of the same activations as `previous`, which
/// left them quantized in the pool's scratch and did not overwrite them.
fn reusesActivations(previous: ?*const Op, op: *const Op) bool {
    const p = previous orelse return false;
    if (op.code != @intFromEnum(OpCode.matmul) or op.type != type_q8_0) return false;
    if (p.code != @intFromEnum(OpCode.matmul) or p.type != type_q8_0) return false;
    const same_input = p.args[2] == op.args[2] and p.args[4] == op.args[4] and p.args[5] == op.args[5];
    return same_input and p.args[0] != p.args[2];
}

fn runMatmul(pool: *Pool, op: *const Op, reuse_activations: bool) Status {
    const a = op.args;
    const out = ptr([*]f32, a[0]);
    const x = ptr([*]const f32, a[2]);
    const rows = count(a[3]);
    const cols = count(a[4]);
    const tokens = count(a[5]);
    return switch (op.type) {
        type_f32 => matmul.matmulFloat(f32, pool, out, ptr([*]align(1) const f32, a[1]), x, rows, cols, tokens),
        type_f16 => matmul.matmulFloat(f16, pool, out, ptr([*]align(1) const f16, a[1]), x, rows, cols, tokens),
        type_bf16 => matmul.matmulFloat(u16, pool, out, ptr([*]align(1) const u16, a[1]), x, rows, cols, tokens),
        type_q8_0 => if (reuse_activations)
            matmul.matmulQ8_0Quantized(pool, out, ptr([*]align(1) const quant.BlockQ8_0, a[1]), rows, cols, tokens)
        else
            matmul.matmulQ8_0(pool, out, ptr([*]align(1) const quant.BlockQ8_0, a[1]), x, rows, cols, tokens),
        else => unreachable, // checked by dotllm_graph_run
    };
}

fn runAttention(pool: *Pool, op: *const Op) Status {
    const a = op.args;
    const out = ptr([*]f32, a[0]);
    const q = ptr([*]const f32, a[1]);
    const shape = .{
        .tokens = count(a[4]),
        .pos_start = count(a[5]),
        .heads = count(a[6]),
        .kv_heads = count(a[7]),
        .head_dim = count(a[8]),
        .scale = f32From(a[9]),
    };
    if (op.type == type_f16) {
        return attention.attention(f16, pool, .{ .out = out, .q = q, .k = ptr([*]const f16, a[2]), .v = ptr([*]const f16, a[3]), .tokens = shape.tokens, .pos_start = shape.pos_start, .heads = shape.heads, .kv_heads = shape.kv_heads, .head_dim = shape.head_dim, .scale = shape.scale });
    }
    return attention.attention(f32, pool, .{ .out = out, .q = q, .k = ptr([*]const f32, a[2]), .v = ptr([*]const f32, a[3]), .tokens = shape.tokens, .pos_start = shape.pos_start, .heads = shape.heads, .kv_heads = shape.kv_heads, .head_dim = shape.head_dim, .scale = shape.scale });
}

fn storeKv(op: *const Op) void {
    const a = op.args;
    if (op.type == type_f16) {
        kernels.storeKv(f16, ptr([*]f16, a[0]), ptr([*]const f32, a[1]), count(a[2]), count(a[3]), count(a[4]));
    } else {
        kernels.storeKv(f32, ptr([*]f32, a[0]), ptr([*]const f32, a[1]), count(a[2]), count(a[3]), count(a[4]));
    }
}

fn getRows(op: *const Op) void {
    const a = op.args;
    const out = ptr([*]f32, a[0]);
    const ids = ptr([*]const i32, a[2]);
    switch (op.type) {
        type_f32 => kernels.getRows(f32, out, ptr([*]align(1) const f32, a[1]), ids, count(a[3]), count(a[4])),
        type_f16 => kernels.getRows(f16, out, ptr([*]align(1) const f16, a[1]), ids, count(a[3]), count(a[4])),
        type_bf16 => kernels.getRows(u16, out, ptr([*]align(1) const u16, a[1]), ids, count(a[3]), count(a[4])),
        type_q8_0 => kernels.getRows(quant.BlockQ8_0, out, ptr([*]align(1) const quant.BlockQ8_0, a[1]), ids, count(a[3]), count(a[4])),
        else => unreachable,
    }
}

fn runOp(pool: *Pool, op: *const Op, previous: ?*const Op) Status {
    const a = op.args;
    return switch (@as(OpCode, @enumFromInt(op.code))) {
        .matmul => runMatmul(pool, op, reusesActivations(previous, op)),
        .rmsnorm => kernels.rmsnorm(pool, ptr([*]f32, a[0]), ptr([*]const f32, a[1]), ptr([*]const f32, a[2]), count(a[3]), count(a[4]), f32From(a[5])),
        .rope => kernels.rope(pool, .{
            .x = ptr([*]f32, a[0]),
            .tokens = count(a[1]),
            .heads = count(a[2]),
            .head_dim = count(a[3]),
            .rope_dims = count(a[4]),
            .pos_start = count(a[5]),
            .freq_base = f32From(a[6]),
            .freq_factors = if (a[7] == 0) null else ptr([*]const f32, a[7]),
            .neox = a[8] != 0,
        }),
        .store_kv => serial(op, storeKv),
        .attention => runAttention(pool, op),
        .swiglu => kernels.swiglu(pool, ptr([*]f32, a[0]), ptr([*]const f32, a[1]), ptr([*]const f32, a[2]), count(a[3])),
        .add => kernels.add(pool, ptr([*]f32, a[0]), ptr([*]const f32, a[1]), ptr([*]const f32, a[2]), count(a[3])),
        .get_rows => serial(op, getRows),
    };
}

fn serial(op: *const Op, comptime func: fn (*const Op) void) Status {
    func(op);
    return .ok;
}

fn validOp(op: *const Op) bool {
    const code = std.meta.intToEnum(OpCode, op.code) catch return false;
    return switch (code) {
        .matmul, .get_rows => switch (op.type) {
            type_f32, type_f16, type_bf16, type_q8_0 => true,
            else => false,
        },
        .store_kv, .attention => op.type == type_f32 or op.type == type_f16,
        else => true,
    };
}

/// Bytes of the next matmul's weights fetched before the current op runs.
const weight_prefetch_bytes = 16384;

/// Starts fetching the first bytes of the next matmul's weights (within a few
/// ops), so that its stream starts warm instead of waiting on memory.
fn prefetchNextWeights(rest: []const Op) void {
    for (rest[0..@min(rest.len, 4)]) |*op| {
        if (op.code != @intFromEnum(OpCode.matmul)) continue;
        const w = ptr([*]const u8, op.args[1]);
        var offset: usize = 0;
        while (offset < weight_prefetch_bytes) : (offset += 64) {
            @prefetch(w + offset, .{ .locality = 2 });
        }
        return;
    }
}

/// Executes `op_count` recorded ops on the pool. Returns 0, 1 if a worker panicked,
/// or -1 for an op with an unknown code or type (nothing is run then). Every
/// argument was checked by the TypeScript recorder (`src/kernels/`).
export fn dotllm_graph_run(pool: *Pool, ops: [*]const Op, op_count: usize) i32 {
    if (op_count > op_count_max) return -1;
    for (ops[0..op_count]) |*op| if (!validOp(op)) return -1;
    var previous: ?*const Op = null;
    for (ops[0..op_count], 0..) |*op, index| {
        prefetchNextWeights(ops[index + 1 .. op_count]);
        const status = runOp(pool, op, previous);
        if (status != .ok) return @intFromEnum(status);
        previous = op;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

fn opOf(code: OpCode, type_id: u32, args: []const u64) Op {
    var op: Op = .{ .code = @intFromEnum(code), .type = type_id, .args = @splat(0) };
    @memcpy(op.args[0..args.len], args);
    return op;
}

fn addr(p: anytype) u64 {
    return @intFromPtr(p);
}

fn bits(x: f32) u64 {
    return @as(u32, @bitCast(x));
}

/// A small layer-like sequence: rmsnorm → matmul → rope → store → attention → add → swiglu.
fn layerOps(buffers: anytype, weight_type: u32, w: u64, tokens: usize, pos: usize) [8]Op {
    const n = buffers.n;
    return .{
        opOf(.get_rows, type_f32, &.{ addr(&buffers.x), addr(&buffers.table), addr(&buffers.ids), tokens, n }),
        opOf(.rmsnorm, 0, &.{ addr(&buffers.xb), addr(&buffers.x), addr(&buffers.norm), n, tokens, bits(1e-5) }),
        opOf(.matmul, weight_type, &.{ addr(&buffers.q), w, addr(&buffers.xb), n, n, tokens }),
        opOf(.rope, 0, &.{ addr(&buffers.q), tokens, 4, n / 4, n / 4, pos, bits(10000), 0, 0 }),
        opOf(.store_kv, type_f16, &.{ addr(&buffers.k_cache), addr(&buffers.q), pos, tokens, n }),
        opOf(.attention, type_f16, &.{ addr(&buffers.att), addr(&buffers.q), addr(&buffers.k_cache), addr(&buffers.k_cache), tokens, pos, 4, 4, n / 4, bits(0.25) }),
        opOf(.add, 0, &.{ addr(&buffers.x), addr(&buffers.x), addr(&buffers.att), n * tokens }),
        opOf(.swiglu, 0, &.{ addr(&buffers.xb), addr(&buffers.x), addr(&buffers.att), n * tokens }),
    };
}

fn Buffers(comptime n: usize, comptime tokens: usize) type {
    return struct {
        const Self = @This();
        n: usize = n,
        x: [n * tokens]f32 align(64) = undefined,
        xb: [n * tokens]f32 align(64) = undefined,
        q: [n * tokens]f32 align(64) = undefined,
        att: [n * tokens]f32 align(64) = undefined,
        norm: [n]f32 = undefined,
        table: [n * 16]f32 = undefined,
        ids: [tokens]i32 = undefined,
        k_cache: [n * 64]f16 align(64) = @splat(0),

        fn init(self: *Self, seed: u64) void {
            var prng = std.Random.DefaultPrng.init(seed);
            const random = prng.random();
            for (&self.norm) |*v| v.* = 1 + random.float(f32) * 0.1;
            for (&self.table) |*v| v.* = random.float(f32) * 2 - 1;
            for (&self.ids, 0..) |*id, i| id.* = @intCast((i * 7) % 16);
        }
    };
}

test "a graph gives bit-identical results at 1..4 threads, equal to the kernels called one by one" {
    const n = 256;
    const tokens = 5;
    var weights: [n * n]f32 = undefined;
    var prng = std.Random.DefaultPrng.init(7);
    for (&weights) |*v| v.* = (prng.random().float(f32) * 2 - 1) * 0.1;
    var q8: [n * n / 32]quant.BlockQ8_0 = undefined;
    quant.quantizeRowQ8_0(&weights, &q8);

    for ([_]u32{ type_f32, type_q8_0 }) |weight_type| {
        const w: u64 = if (weight_type == type_f32) addr(&weights) else addr(&q8);
        var expected: Buffers(n, tokens) = .{};
        expected.init(1);
        {
            // One dispatch per kernel, on one thread.
            const pool = try Pool.create(testing.allocator, 1);
            defer pool.destroy(testing.allocator);
            try pool.reserve(testing.allocator, matmul.q8ScratchSize(n, tokens));
            for (layerOps(&expected, weight_type, w, tokens, 3)) |op| try testing.expectEqual(Status.ok, runOp(pool, &op, null));
        }
        for (1..5) |threads| {
            var actual: Buffers(n, tokens) = .{};
            actual.init(1);
            const pool = try Pool.create(testing.allocator, @intCast(threads));
            defer pool.destroy(testing.allocator);
            try pool.reserve(testing.allocator, matmul.q8ScratchSize(n, tokens));
            const ops = layerOps(&actual, weight_type, w, tokens, 3);
            try testing.expectEqual(@as(i32, 0), dotllm_graph_run(pool, &ops, ops.len));
            try testing.expectEqualSlices(f32, &expected.x, &actual.x);
            try testing.expectEqualSlices(f32, &expected.xb, &actual.xb);
            try testing.expectEqualSlices(f16, &expected.k_cache, &actual.k_cache);
        }
    }
}

test "a graph with an unknown op runs nothing" {
    const pool = try Pool.create(testing.allocator, 2);
    defer pool.destroy(testing.allocator);
    const ops = [_]Op{opOf(.add, 0, &.{}), .{ .code = 99, .type = 0, .args = @splat(0) }};
    try testing.expectEqual(@as(i32, -1), dotllm_graph_run(pool, &ops, ops.len));
}
