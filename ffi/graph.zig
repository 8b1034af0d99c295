//! A forward pass as one native call: TypeScript records kernel calls (`Op`s) into a
//! buffer and `dotllm_graph_run` walks it on the calling thread, each kernel
//! dispatching to the pool. A direct kernel call is a graph of one op.
//!
//! Protocol. An op is 128 bytes: `code`, `type` (the weight, table or cache type the
//! op reads; 0 where none) and the op's arguments, one `extern struct` per op below
//! whose fields are all 8 bytes (addresses and counts as u64, reals as f64). The
//! field names and order are exported by `dotllm_op_schema`, from which TypeScript
//! builds its encoders: no argument is known by a slot number on either side.
//!
//! Checks. Before anything runs, every op is validated in every build mode: code and
//! type known and valid for the op, counts within the limits below, byte sizes free
//! of overflow, addresses non-null and aligned, the pool's scratch large enough, and
//! the position, slot and row-id arrays within their ranges. A malformed graph
//! returns a negative `GraphError` and runs nothing; addresses themselves cannot be
//! checked and are the recorder's contract.
//!
//! Determinism. The results are those of the kernels called one by one: bit-identical
//! for every thread count. Consecutive matmuls of one input whose weight types share
//! an activation format (Q/K/V; gate/up) quantize it once.
const std = @import("std");
const pool_zig = @import("pool.zig");
const types = @import("types.zig");
const ops = @import("ops.zig");
const attention = @import("attention.zig");
const flash = @import("flash_attention.zig");
const kv_types = @import("kv_types.zig");
const arch_ops = @import("arch_ops.zig");

const Pool = pool_zig.Pool;
const Status = pool_zig.Status;

/// Most ops one graph may hold (a 128-layer model needs ~2,000).
pub const op_count_max: usize = 1 << 16;
/// Most tokens in one op (a batch): bounds the stack-free per-token loops.
pub const tokens_max: u64 = 1 << 16;
/// Most elements in one dimension (rows, columns, cache rows): 2^32.
pub const dim_max: u64 = 1 << 32;
/// Most elements one operand may span: 2^40 (4 TiB of f32), far above any model.
pub const elements_max: u64 = 1 << 40;
/// Largest head dimension (rope and attention keep per-head tables on the stack).
pub const head_dim_max: u64 = ops.head_dim_max;

/// Why a graph was refused (negated as the return value of `dotllm_graph_run`).
pub const GraphError = enum(i32) {
    unknown_op = 1,
    bad_type = 2,
    bad_count = 3,
    bad_address = 4,
    bad_index = 5,
    scratch_too_small = 6,
    too_many_ops = 7,
};

pub const Matmul = extern struct { out: u64, weight: u64, x: u64, rows: u64, cols: u64, tokens: u64 };
pub const Rmsnorm = extern struct { out: u64, x: u64, weight: u64, n: u64, tokens: u64, eps: f64 };
pub const Rope = extern struct { x: u64, positions: u64, tokens: u64, heads: u64, head_dim: u64, rope_dims: u64, freq_factors: u64, neox: u64, freq_base: f64 };
pub const StoreKv = extern struct { cache: u64, src: u64, positions: u64, slots: u64, tokens: u64, kv_dim: u64, slot_rows: u64, slot_count: u64 };
/// `type` is K's cache type; `mode` holds V's (kv_types.zig) in its low 32 bits and, in
/// bit 32, `alone`: every token attends in the order of a token decoded alone (speculation's
/// verify batches). Equal F32 or F16 types take attention.zig's kernel, every other pair
/// flash_attention.zig's (whose order is already each token's own).
pub const Attention = extern struct { out: u64, q: u64, k: u64, v: u64, positions: u64, slots: u64, tokens: u64, heads: u64, kv_heads: u64, head_dim: u64, slot_rows: u64, slot_count: u64, window: u64, scale: f64, mode: u64 };
pub const Swiglu = extern struct { out: u64, gate: u64, up: u64, n: u64 };
pub const Add = extern struct { out: u64, a: u64, b: u64, n: u64 };
/// out = gelu_tanh(gate) · up (Gemma's GeGLU, ggml's F16-table GELU).
pub const Geglu = extern struct { out: u64, gate: u64, up: u64, n: u64 };
/// out[r][i] = x[r][i] + bias[i], rows × n (Q/K/V biases).
pub const AddRows = extern struct { out: u64, x: u64, bias: u64, rows: u64, n: u64 };
/// out = x · s (Gemma's embedding scale).
pub const Scale = extern struct { out: u64, x: u64, n: u64, s: f64 };
/// out = gelu_tanh(x) (BERT's FFN activation, ggml's F16-table GELU).
pub const Gelu = extern struct { out: u64, x: u64, n: u64 };
/// out[t] = (x[t] − mean) / √(var + eps) · weight + bias, rows of n (BERT's layer norm).
pub const Norm = extern struct { out: u64, x: u64, weight: u64, bias: u64, n: u64, tokens: u64, eps: f64 };
/// x[r] = H·x[r] for `rows` runs of `n` values (n a power of two): the rotation around a
/// quantized KV cache (kv_types.zig).
pub const Hadamard = extern struct { x: u64, rows: u64, n: u64 };
pub const GetRows = extern struct { out: u64, table: u64, ids: u64, count: u64, row_length: u64, row_count: u64 };

/// Op codes and their argument structs.
pub const OpCode = enum(u32) {
    matmul = 1,
    rmsnorm = 2,
    rope = 3,
    store_kv = 4,
    attention = 5,
    swiglu = 6,
    add = 7,
    get_rows = 8,
    geglu = 9,
    add_rows = 10,
    scale = 11,
    gelu = 12,
    norm = 13,
    hadamard = 14,

    fn Args(comptime code: OpCode) type {
        return switch (code) {
            .matmul => Matmul,
            .rmsnorm => Rmsnorm,
            .rope => Rope,
            .store_kv => StoreKv,
            .attention => Attention,
            .swiglu => Swiglu,
            .add => Add,
            .get_rows => GetRows,
            .geglu => Geglu,
            .add_rows => AddRows,
            .scale => Scale,
            .gelu => Gelu,
            .norm => Norm,
            .hadamard => Hadamard,
        };
    }
};

/// One recorded op: 128 bytes.
pub const Op = extern struct {
    code: u32,
    type: u32,
    args: [15]u64,

    fn as(op: *const Op, comptime code: OpCode) *const OpCode.Args(code) {
        return @ptrCast(&op.args);
    }
};

comptime {
    std.debug.assert(@sizeOf(Op) == 128);
    for (std.meta.tags(OpCode)) |code| {
        const A = code.Args();
        std.debug.assert(@sizeOf(A) <= @sizeOf([15]u64));
        for (std.meta.fields(A)) |f| std.debug.assert(f.type == u64 or f.type == f64);
    }
}

fn ptr(comptime T: type, value: u64) T {
    return @ptrFromInt(@as(usize, @intCast(value)));
}

// ---------------------------------------------------------------------------
// Validation

const Check = error{ BadType, BadCount, BadAddress, BadIndex, ScratchTooSmall };

fn count(value: u64, min: u64, max: u64) Check!usize {
    if (value < min or value > max) return error.BadCount;
    return @intCast(value);
}

fn product(a: u64, b: u64) Check!u64 {
    const p = std.math.mul(u64, a, b) catch return error.BadCount;
    if (p > elements_max) return error.BadCount;
    return p;
}

/// A non-null address aligned for `T`.
fn address(comptime T: type, value: u64) Check!void {
    if (value == 0 or value % @alignOf(T) != 0) return error.BadAddress;
}

fn finite(value: f64) Check!void {
    if (!std.math.isFinite(value)) return error.BadCount;
}

/// A cache type whose rows of `elements` are whole blocks.
fn cacheType(id: u64, elements: u64) Check!void {
    const t = kv_types.fromId(std.math.cast(u32, id) orelse return error.BadType) orelse return error.BadType;
    if (types.rowBytes(t, elements) == null) return error.BadCount;
}

/// Every positions[t] >= 0 and slots[t] < slot_count (read, not trusted).
fn checkPositions(positions: u64, slots: u64, tokens: usize, slot_count: u64) Check!void {
    try address(i32, positions);
    const p = ptr([*]const i32, positions);
    for (p[0..tokens]) |v| if (v < 0) return error.BadIndex;
    if (slots == 0) return;
    try address(i32, slots);
    const s = ptr([*]const i32, slots);
    for (s[0..tokens]) |v| if (v < 0 or v >= slot_count) return error.BadIndex;
}

fn validate(op: *const Op, pool: *const Pool) Check!void {
    const code = std.meta.intToEnum(OpCode, op.code) catch unreachable; // checked by the caller
    switch (code) {
        .matmul => {
            const a = op.as(.matmul);
            const t = types.fromId(op.type) orelse return error.BadType;
            const rows = try count(a.rows, 1, dim_max);
            const cols = try count(a.cols, 1, dim_max);
            const tokens = try count(a.tokens, 1, tokens_max);
            if (types.rowBytes(t, cols) == null) return error.BadCount;
            if (rows % types.rowMultiple(t) != 0) return error.BadCount;
            _ = try product(rows, cols);
            _ = try product(tokens, @max(rows, cols));
            try address(f32, a.out);
            try address(u8, a.weight);
            try address(f32, a.x);
            if (types.actKey(t) != 0 and types.scratchBytes(cols, tokens) > pool.scratch.len) return error.ScratchTooSmall;
        },
        .rmsnorm => {
            const a = op.as(.rmsnorm);
            _ = try product(try count(a.n, 1, dim_max), try count(a.tokens, 1, tokens_max));
            try finite(a.eps);
            try address(f32, a.out);
            try address(f32, a.x);
            try address(f32, a.weight);
        },
        .rope => {
            const a = op.as(.rope);
            const tokens = try count(a.tokens, 1, tokens_max);
            const heads = try count(a.heads, 1, dim_max);
            const head_dim = try count(a.head_dim, 1, head_dim_max);
            const rope_dims = try count(a.rope_dims, 2, head_dim);
            if (rope_dims % 2 != 0 or a.neox > 1) return error.BadCount;
            _ = try product(try product(tokens, heads), head_dim);
            if (!(a.freq_base > 0) or !std.math.isFinite(a.freq_base)) return error.BadCount;
            try address(f32, a.x);
            if (a.freq_factors != 0) try address(f32, a.freq_factors);
            try checkPositions(a.positions, 0, tokens, 0);
        },
        .store_kv => {
            const a = op.as(.store_kv);
            const tokens = try count(a.tokens, 1, tokens_max);
            const kv_dim = try count(a.kv_dim, 1, dim_max);
            try cacheType(op.type, kv_dim);
            const slot_rows = try count(a.slot_rows, 1, dim_max);
            const slot_count = try count(a.slot_count, 1, dim_max);
            _ = try product(try product(slot_rows, slot_count), kv_dim);
            _ = try product(tokens, kv_dim);
            try address(f16, a.cache);
            try address(f32, a.src);
            try checkPositions(a.positions, a.slots, tokens, slot_count);
        },
        .attention => {
            const a = op.as(.attention);
            const tokens = try count(a.tokens, 1, tokens_max);
            const heads = try count(a.heads, 1, dim_max);
            const kv_heads = try count(a.kv_heads, 1, heads);
            const head_dim = try count(a.head_dim, 1, head_dim_max);
            // Each head is a whole number of blocks of both types.
            try cacheType(op.type, head_dim);
            try cacheType(a.mode & 0xffff_ffff, head_dim);
            if (heads % kv_heads != 0) return error.BadCount;
            const slot_rows = try count(a.slot_rows, 1, dim_max);
            const slot_count = try count(a.slot_count, 1, dim_max);
            const window = try count(a.window, 0, slot_rows);
            _ = try count(a.mode >> 32, 0, 1); // alone
            _ = try product(try product(slot_rows, slot_count), kv_heads * head_dim);
            _ = try product(tokens, heads * head_dim);
            try finite(a.scale);
            try address(f32, a.out);
            try address(f32, a.q);
            try address(f16, a.k);
            try address(f16, a.v);
            try checkPositions(a.positions, a.slots, tokens, slot_count);
            // Full attention reads every position of the slot: none may have wrapped.
            if (window == 0) {
                for (ptr([*]const i32, a.positions)[0..tokens]) |p| if (p >= slot_rows) return error.BadIndex;
            }
        },
        .swiglu => {
            const a = op.as(.swiglu);
            _ = try count(a.n, 1, elements_max);
            try address(f32, a.out);
            try address(f32, a.gate);
            try address(f32, a.up);
        },
        .add => {
            const a = op.as(.add);
            _ = try count(a.n, 1, elements_max);
            try address(f32, a.out);
            try address(f32, a.a);
            try address(f32, a.b);
        },
        .geglu => {
            const a = op.as(.geglu);
            _ = try count(a.n, 1, elements_max);
            try address(f32, a.out);
            try address(f32, a.gate);
            try address(f32, a.up);
        },
        .add_rows => {
            const a = op.as(.add_rows);
            _ = try product(try count(a.rows, 1, dim_max), try count(a.n, 1, dim_max));
            try address(f32, a.out);
            try address(f32, a.x);
            try address(f32, a.bias);
        },
        .scale => {
            const a = op.as(.scale);
            _ = try count(a.n, 1, elements_max);
            try finite(a.s);
            try address(f32, a.out);
            try address(f32, a.x);
        },
        .gelu => {
            const a = op.as(.gelu);
            _ = try count(a.n, 1, elements_max);
            try address(f32, a.out);
            try address(f32, a.x);
        },
        .norm => {
            const a = op.as(.norm);
            _ = try product(try count(a.n, 1, dim_max), try count(a.tokens, 1, tokens_max));
            try finite(a.eps);
            if (a.eps < 0) return error.BadCount;
            try address(f32, a.out);
            try address(f32, a.x);
            try address(f32, a.weight);
            try address(f32, a.bias);
        },
        .hadamard => {
            const a = op.as(.hadamard);
            const width = try count(a.n, 2, head_dim_max);
            if (!std.math.isPowerOfTwo(width)) return error.BadCount;
            _ = try product(try count(a.rows, 1, elements_max), width);
            try address(f32, a.x);
        },
        .get_rows => {
            const a = op.as(.get_rows);
            const t = types.fromId(op.type) orelse return error.BadType;
            if (!types.hasRows(t)) return error.BadType;
            const id_count = try count(a.count, 1, tokens_max);
            const row_length = try count(a.row_length, 1, dim_max);
            const row_count = try count(a.row_count, 1, dim_max);
            if (types.rowBytes(t, row_length) == null) return error.BadCount;
            if (row_count % types.rowMultiple(t) != 0) return error.BadCount;
            _ = try product(row_count, row_length);
            _ = try product(id_count, row_length);
            try address(f32, a.out);
            try address(u8, a.table);
            try address(i32, a.ids);
            for (ptr([*]const i32, a.ids)[0..id_count]) |id| if (id < 0 or id >= row_count) return error.BadIndex;
        },
    }
}

fn errorCode(err: Check) GraphError {
    return switch (err) {
        error.BadType => .bad_type,
        error.BadCount => .bad_count,
        error.BadAddress => .bad_address,
        error.BadIndex => .bad_index,
        error.ScratchTooSmall => .scratch_too_small,
    };
}

// ---------------------------------------------------------------------------
// Execution

/// The activations the pool's scratch holds quantized, if any.
const ActState = struct {
    x: u64 = 0,
    cols: u64 = 0,
    tokens: u64 = 0,
    key: u32 = 0,
};

fn n(value: u64) usize {
    return @intCast(value);
}

fn runMatmul(pool: *Pool, op: *const Op, act: *ActState) Status {
    const a = op.as(.matmul);
    const t = types.fromId(op.type).?;
    const key = types.actKey(t);
    const ready = key != 0 and act.key == key and act.x == a.x and act.cols == a.cols and act.tokens == a.tokens;
    const status = types.matmul(t, pool, ptr([*]f32, a.out), ptr([*]const u8, a.weight), ptr([*]const f32, a.x), n(a.rows), n(a.cols), n(a.tokens), ready);
    // The scratch now holds x in this format, unless the matmul overwrote x itself.
    act.* = if (key != 0 and a.out != a.x) .{ .x = a.x, .cols = a.cols, .tokens = a.tokens, .key = key } else .{};
    return status;
}

fn runAttention(comptime T: type, pool: *Pool, op: *const Op) Status {
    const a = op.as(.attention);
    return attention.attention(T, pool, .{
        .out = ptr([*]f32, a.out),
        .q = ptr([*]const f32, a.q),
        .k = ptr([*]const T, a.k),
        .v = ptr([*]const T, a.v),
        .positions = ptr([*]const i32, a.positions),
        .slots = ptr([*]const i32, a.slots),
        .tokens = n(a.tokens),
        .heads = n(a.heads),
        .kv_heads = n(a.kv_heads),
        .head_dim = n(a.head_dim),
        .slot_rows = n(a.slot_rows),
        .window = n(a.window),
        .scale = @floatCast(a.scale),
        .alone = a.mode >> 32 != 0,
    });
}

fn storeKv(comptime T: type, op: *const Op) void {
    const a = op.as(.store_kv);
    ops.storeKv(T, ptr([*]T, a.cache), ptr([*]const f32, a.src), ptr([*]const i32, a.positions), ptr([*]const i32, a.slots), n(a.tokens), n(a.kv_dim), n(a.slot_rows));
}

fn runFlashAttention(pool: *Pool, op: *const Op) Status {
    const a = op.as(.attention);
    return flash.flashAttention(pool, .{
        .out = ptr([*]f32, a.out),
        .q = ptr([*]const f32, a.q),
        .k = ptr([*]const u8, a.k),
        .v = ptr([*]const u8, a.v),
        .positions = ptr([*]const i32, a.positions),
        .slots = ptr([*]const i32, a.slots),
        .tokens = n(a.tokens),
        .heads = n(a.heads),
        .kv_heads = n(a.kv_heads),
        .head_dim = n(a.head_dim),
        .slot_rows = n(a.slot_rows),
        .window = n(a.window),
        .scale = @floatCast(a.scale),
        .k_type = kv_types.fromId(op.type).?,
        .v_type = kv_types.fromId(@intCast(a.mode & 0xffff_ffff)).?,
    });
}

fn runOp(pool: *Pool, op: *const Op, act: *ActState) Status {
    const code: OpCode = @enumFromInt(op.code);
    if (code != .matmul) act.* = .{};
    const f16_cache = op.type == types.F16.ggml_type;
    switch (code) {
        .matmul => return runMatmul(pool, op, act),
        .rmsnorm => {
            const a = op.as(.rmsnorm);
            return ops.rmsnorm(pool, ptr([*]f32, a.out), ptr([*]const f32, a.x), ptr([*]const f32, a.weight), n(a.n), n(a.tokens), @floatCast(a.eps));
        },
        .rope => {
            const a = op.as(.rope);
            return ops.rope(pool, .{
                .x = ptr([*]f32, a.x),
                .positions = ptr([*]const i32, a.positions),
                .tokens = n(a.tokens),
                .heads = n(a.heads),
                .head_dim = n(a.head_dim),
                .rope_dims = n(a.rope_dims),
                .freq_base = @floatCast(a.freq_base),
                .freq_factors = if (a.freq_factors == 0) null else ptr([*]const f32, a.freq_factors),
                .neox = a.neox != 0,
            });
        },
        .store_kv => {
            const a = op.as(.store_kv);
            switch (kv_types.fromId(op.type).?) {
                .F16 => storeKv(f16, op),
                .F32 => storeKv(f32, op),
                else => |t| kv_types.storeKv(t, ptr([*]u8, a.cache), ptr([*]const f32, a.src), ptr([*]const i32, a.positions), ptr([*]const i32, a.slots), n(a.tokens), n(a.kv_dim), n(a.slot_rows)),
            }
            return .ok;
        },
        .attention => {
            const k_type = kv_types.fromId(op.type).?;
            const v_type = kv_types.fromId(@intCast(op.as(.attention).mode & 0xffff_ffff)).?;
            if (flash.takes(k_type, v_type)) return runFlashAttention(pool, op);
            return if (f16_cache) runAttention(f16, pool, op) else runAttention(f32, pool, op);
        },
        .swiglu => {
            const a = op.as(.swiglu);
            return ops.swiglu(pool, ptr([*]f32, a.out), ptr([*]const f32, a.gate), ptr([*]const f32, a.up), n(a.n));
        },
        .add => {
            const a = op.as(.add);
            return ops.add(pool, ptr([*]f32, a.out), ptr([*]const f32, a.a), ptr([*]const f32, a.b), n(a.n));
        },
        .geglu => {
            const a = op.as(.geglu);
            return arch_ops.geglu(pool, ptr([*]f32, a.out), ptr([*]const f32, a.gate), ptr([*]const f32, a.up), n(a.n));
        },
        .add_rows => {
            const a = op.as(.add_rows);
            return arch_ops.addRows(pool, ptr([*]f32, a.out), ptr([*]const f32, a.x), ptr([*]const f32, a.bias), n(a.rows), n(a.n));
        },
        .scale => {
            const a = op.as(.scale);
            return arch_ops.scale(pool, ptr([*]f32, a.out), ptr([*]const f32, a.x), @floatCast(a.s), n(a.n));
        },
        .gelu => {
            const a = op.as(.gelu);
            return arch_ops.gelu(pool, ptr([*]f32, a.out), ptr([*]const f32, a.x), n(a.n));
        },
        .norm => {
            const a = op.as(.norm);
            return arch_ops.norm(pool, ptr([*]f32, a.out), ptr([*]const f32, a.x), ptr([*]const f32, a.weight), ptr([*]const f32, a.bias), n(a.n), n(a.tokens), @floatCast(a.eps));
        },
        .hadamard => {
            const a = op.as(.hadamard);
            return kv_types.hadamard(pool, ptr([*]f32, a.x), n(a.rows), n(a.n));
        },
        .get_rows => {
            const a = op.as(.get_rows);
            types.getRows(types.fromId(op.type).?, ptr([*]f32, a.out), ptr([*]const u8, a.table), ptr([*]const i32, a.ids), n(a.count), n(a.row_length));
            return .ok;
        },
    }
}

/// Bytes of the next matmul's weights fetched before the current op runs.
const weight_prefetch_bytes = 16384;

/// Starts fetching the first bytes of the next matmul's weights (within a few
/// ops), so that its stream starts warm instead of waiting on memory.
fn prefetchNextWeights(rest: []const Op) void {
    for (rest[0..@min(rest.len, 4)]) |*op| {
        if (op.code != @intFromEnum(OpCode.matmul)) continue;
        const w = ptr([*]const u8, op.as(.matmul).weight);
        var offset: usize = 0;
        while (offset < weight_prefetch_bytes) : (offset += 64) {
            @prefetch(w + offset, .{ .locality = 2 });
        }
        return;
    }
}

/// Checks every op, then runs them in order on the pool. Returns 0, 1 if a worker
/// panicked, or the negated `GraphError` of the first malformed op (nothing run).
export fn dotllm_graph_run(pool: *Pool, op_list: [*]const Op, op_count: usize) i32 {
    if (op_count > op_count_max) return -@intFromEnum(GraphError.too_many_ops);
    for (op_list[0..op_count]) |*op| {
        _ = std.meta.intToEnum(OpCode, op.code) catch return -@intFromEnum(GraphError.unknown_op);
        validate(op, pool) catch |err| return -@intFromEnum(errorCode(err));
    }
    var act: ActState = .{};
    for (op_list[0..op_count], 0..) |*op, index| {
        prefetchNextWeights(op_list[index + 1 .. op_count]);
        const status = runOp(pool, op, &act);
        if (status != .ok) return @intFromEnum(status);
    }
    return 0;
}

/// The op layout as JSON: `{"matmul":{"code":1,"fields":["out:u64",...]},...}`.
const schema_json = blk: {
    var json: []const u8 = "{";
    for (std.meta.tags(OpCode), 0..) |code, i| {
        if (i > 0) json = json ++ ",";
        json = json ++ std.fmt.comptimePrint("\"{s}\":{{\"code\":{d},\"fields\":[", .{ @tagName(code), @intFromEnum(code) });
        for (std.meta.fields(code.Args()), 0..) |f, j| {
            if (j > 0) json = json ++ ",";
            json = json ++ "\"" ++ f.name ++ ":" ++ @typeName(f.type) ++ "\"";
        }
        json = json ++ "]}";
    }
    break :blk json ++ "}";
};

/// Copies the op schema (UTF-8 JSON) into `out` if it fits; returns its length.
export fn dotllm_op_schema(out: [*]u8, capacity: usize) usize {
    if (capacity >= schema_json.len) @memcpy(out[0..schema_json.len], schema_json);
    return schema_json.len;
}

/// The library's limits as JSON, the one place TypeScript reads them from (`Native.limits`):
/// threads of a pool, a head's dimension, tokens of one op, ops of one graph.
const limits_json = std.fmt.comptimePrint(
    "{{\"thread_count_max\":{d},\"head_dim_max\":{d},\"tokens_max\":{d},\"op_count_max\":{d}}}",
    .{ pool_zig.thread_count_max, head_dim_max, tokens_max, op_count_max },
);

/// Copies the limits (UTF-8 JSON) into `out` if they fit; returns their length.
export fn dotllm_limits(out: [*]u8, capacity: usize) usize {
    if (capacity >= limits_json.len) @memcpy(out[0..limits_json.len], limits_json);
    return limits_json.len;
}

/// Scratch bytes every matmul of `tokens` rows of `cols` activations needs.
export fn dotllm_matmul_scratch_bytes(cols: usize, tokens: usize) usize {
    return types.scratchBytes(cols, tokens);
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;
const quant = @import("quant.zig");

fn opOf(comptime code: OpCode, type_id: u32, args: OpCode.Args(code)) Op {
    var op: Op = .{ .code = @intFromEnum(code), .type = type_id, .args = @splat(0) };
    @memcpy(std.mem.asBytes(&op.args)[0..@sizeOf(@TypeOf(args))], std.mem.asBytes(&args));
    return op;
}

fn addr(p: anytype) u64 {
    return @intFromPtr(p);
}

/// A small layer-like sequence: get_rows → rmsnorm → matmul → rope → store → attention → add → swiglu.
fn layerOps(buffers: anytype, weight_type: u32, w: u64, tokens: usize) [8]Op {
    const c = buffers.n;
    return .{
        opOf(.get_rows, 0, .{ .out = addr(&buffers.x), .table = addr(&buffers.table), .ids = addr(&buffers.ids), .count = tokens, .row_length = c, .row_count = 16 }),
        opOf(.rmsnorm, 0, .{ .out = addr(&buffers.xb), .x = addr(&buffers.x), .weight = addr(&buffers.norm), .n = c, .tokens = tokens, .eps = 1e-5 }),
        opOf(.matmul, weight_type, .{ .out = addr(&buffers.q), .weight = w, .x = addr(&buffers.xb), .rows = c, .cols = c, .tokens = tokens }),
        opOf(.rope, 0, .{ .x = addr(&buffers.q), .positions = addr(&buffers.positions), .tokens = tokens, .heads = 4, .head_dim = c / 4, .rope_dims = c / 4, .freq_factors = 0, .neox = 0, .freq_base = 10000 }),
        opOf(.store_kv, 1, .{ .cache = addr(&buffers.k_cache), .src = addr(&buffers.q), .positions = addr(&buffers.positions), .slots = addr(&buffers.slots), .tokens = tokens, .kv_dim = c, .slot_rows = 64, .slot_count = 1 }),
        opOf(.attention, 1, .{ .out = addr(&buffers.att), .q = addr(&buffers.q), .k = addr(&buffers.k_cache), .v = addr(&buffers.k_cache), .positions = addr(&buffers.positions), .slots = addr(&buffers.slots), .tokens = tokens, .heads = 4, .kv_heads = 4, .head_dim = c / 4, .slot_rows = 64, .slot_count = 1, .window = 0, .scale = 0.25, .mode = 1 }),
        opOf(.add, 0, .{ .out = addr(&buffers.x), .a = addr(&buffers.x), .b = addr(&buffers.att), .n = c * tokens }),
        opOf(.swiglu, 0, .{ .out = addr(&buffers.xb), .gate = addr(&buffers.x), .up = addr(&buffers.att), .n = c * tokens }),
    };
}

fn Buffers(comptime c: usize, comptime tokens: usize) type {
    return struct {
        const Self = @This();
        n: usize = c,
        x: [c * tokens]f32 align(64) = undefined,
        xb: [c * tokens]f32 align(64) = undefined,
        q: [c * tokens]f32 align(64) = undefined,
        att: [c * tokens]f32 align(64) = undefined,
        norm: [c]f32 = undefined,
        table: [c * 16]f32 = undefined,
        ids: [tokens]i32 = undefined,
        positions: [tokens]i32 = undefined,
        slots: [tokens]i32 = @splat(0),
        k_cache: [c * 64]f16 align(64) = @splat(0),

        fn init(self: *Self, seed: u64) void {
            var prng = std.Random.DefaultPrng.init(seed);
            const random = prng.random();
            for (&self.norm) |*v| v.* = 1 + random.float(f32) * 0.1;
            for (&self.table) |*v| v.* = random.float(f32) * 2 - 1;
            for (&self.ids, &self.positions, 0..) |*id, *p, i| {
                id.* = @intCast((i * 7) % 16);
                p.* = @intCast(3 + i);
            }
        }
    };
}

test "a graph gives bit-identical results at 1..4 threads, equal to the ops run one by one" {
    const c = 256;
    const tokens = 5;
    var weights: [c * c]f32 = undefined;
    var prng = std.Random.DefaultPrng.init(7);
    for (&weights) |*v| v.* = (prng.random().float(f32) * 2 - 1) * 0.1;
    var q8: [c * c / 32]quant.BlockQ8_0 = undefined;
    quant.quantizeRowQ8_0(&weights, &q8);

    for ([_]u32{ 0, 8 }) |weight_type| {
        const w: u64 = if (weight_type == 0) addr(&weights) else addr(&q8);
        var expected: Buffers(c, tokens) = .{};
        expected.init(1);
        {
            // One graph per op, on one thread.
            const pool = try Pool.create(testing.allocator, 1);
            defer pool.destroy(testing.allocator);
            try pool.reserve(testing.allocator, types.scratchBytes(c, tokens));
            for (layerOps(&expected, weight_type, w, tokens)) |op| try testing.expectEqual(@as(i32, 0), dotllm_graph_run(pool, (&op)[0..1], 1));
        }
        for (1..5) |threads| {
            var actual: Buffers(c, tokens) = .{};
            actual.init(1);
            const pool = try Pool.create(testing.allocator, @intCast(threads));
            defer pool.destroy(testing.allocator);
            try pool.reserve(testing.allocator, types.scratchBytes(c, tokens));
            const layer = layerOps(&actual, weight_type, w, tokens);
            try testing.expectEqual(@as(i32, 0), dotllm_graph_run(pool, &layer, layer.len));
            try testing.expectEqualSlices(f32, &expected.x, &actual.x);
            try testing.expectEqualSlices(f32, &expected.xb, &actual.xb);
            try testing.expectEqualSlices(f16, &expected.k_cache, &actual.k_cache);
        }
    }
}

test "a malformed op anywhere in a graph is refused with its error and nothing runs" {
    const pool = try Pool.create(testing.allocator, 2);
    defer pool.destroy(testing.allocator);
    var x: [64]f32 align(64) = @splat(1);
    const ids = [_]i32{ 0, 99 };
    const positions = [_]i32{ 0, 1 };
    const bad_slot = [_]i32{ 0, 1 };
    // The first op would change x if it ran.
    const good = opOf(.add, 0, .{ .out = addr(&x), .a = addr(&x), .b = addr(&x), .n = 64 });
    const huge: u64 = 1 << 62;
    const cases = [_]struct { op: Op, want: GraphError }{
        .{ .op = .{ .code = 99, .type = 0, .args = @splat(0) }, .want = .unknown_op },
        .{ .op = opOf(.matmul, 77, .{ .out = addr(&x), .weight = addr(&x), .x = addr(&x), .rows = 1, .cols = 32, .tokens = 1 }), .want = .bad_type },
        .{ .op = opOf(.matmul, 0, .{ .out = addr(&x), .weight = addr(&x), .x = addr(&x), .rows = huge, .cols = huge, .tokens = 1 }), .want = .bad_count },
        .{ .op = opOf(.matmul, 0, .{ .out = addr(&x), .weight = addr(&x), .x = addr(&x), .rows = 1 << 31, .cols = 1 << 31, .tokens = 1 }), .want = .bad_count },
        .{ .op = opOf(.matmul, 8, .{ .out = addr(&x), .weight = addr(&x), .x = addr(&x), .rows = 1, .cols = 33, .tokens = 1 }), .want = .bad_count },
        .{ .op = opOf(.matmul, 8, .{ .out = addr(&x), .weight = addr(&x), .x = addr(&x), .rows = 1, .cols = 1 << 20, .tokens = 64 }), .want = .scratch_too_small },
        .{ .op = opOf(.matmul, 0, .{ .out = 0, .weight = addr(&x), .x = addr(&x), .rows = 1, .cols = 1, .tokens = 1 }), .want = .bad_address },
        .{ .op = opOf(.matmul, 0, .{ .out = addr(&x) + 1, .weight = addr(&x), .x = addr(&x), .rows = 1, .cols = 1, .tokens = 1 }), .want = .bad_address },
        .{ .op = opOf(.add, 0, .{ .out = addr(&x), .a = addr(&x), .b = addr(&x), .n = huge }), .want = .bad_count },
        .{ .op = opOf(.get_rows, 0, .{ .out = addr(&x), .table = addr(&x), .ids = addr(&ids), .count = 2, .row_length = 8, .row_count = 8 }), .want = .bad_index },
        .{ .op = opOf(.rope, 0, .{ .x = addr(&x), .positions = addr(&positions), .tokens = 2, .heads = 1, .head_dim = 1024, .rope_dims = 8, .freq_factors = 0, .neox = 0, .freq_base = 10000 }), .want = .bad_count },
        .{ .op = opOf(.rope, 0, .{ .x = addr(&x), .positions = addr(&positions), .tokens = 2, .heads = 1, .head_dim = 8, .rope_dims = 8, .freq_factors = 0, .neox = 0, .freq_base = std.math.nan(f64) }), .want = .bad_count },
        .{ .op = opOf(.store_kv, 1, .{ .cache = addr(&x), .src = addr(&x), .positions = addr(&positions), .slots = addr(&bad_slot), .tokens = 2, .kv_dim = 8, .slot_rows = 4, .slot_count = 1 }), .want = .bad_index },
        // Q4_K (12) is no cache type
        .{ .op = opOf(.store_kv, 12, .{ .cache = addr(&x), .src = addr(&x), .positions = addr(&positions), .slots = addr(&bad_slot), .tokens = 2, .kv_dim = 8, .slot_rows = 4, .slot_count = 2 }), .want = .bad_type },
        .{ .op = opOf(.attention, 0, .{ .out = addr(&x), .q = addr(&x), .k = addr(&x), .v = addr(&x), .positions = addr(&positions), .slots = addr(&bad_slot), .tokens = 2, .heads = 3, .kv_heads = 2, .head_dim = 4, .slot_rows = 4, .slot_count = 2, .window = 0, .scale = 1, .mode = 0 }), .want = .bad_count },
        .{ .op = opOf(.attention, 0, .{ .out = addr(&x), .q = addr(&x), .k = addr(&x), .v = addr(&x), .positions = addr(&positions), .slots = addr(&bad_slot), .tokens = 2, .heads = 2, .kv_heads = 2, .head_dim = 4, .slot_rows = 1, .slot_count = 2, .window = 0, .scale = 1, .mode = 0 }), .want = .bad_index },
        .{ .op = opOf(.attention, 0, .{ .out = addr(&x), .q = addr(&x), .k = addr(&x), .v = addr(&x), .positions = addr(&positions), .slots = addr(&bad_slot), .tokens = huge, .heads = 2, .kv_heads = 2, .head_dim = 4, .slot_rows = 4, .slot_count = 2, .window = 0, .scale = 1, .mode = 0 }), .want = .bad_count },
    };
    for (cases) |case| {
        const pair = [_]Op{ good, case.op };
        try testing.expectEqual(-@intFromEnum(case.want), dotllm_graph_run(pool, &pair, pair.len));
        for (x) |v| try testing.expectEqual(@as(f32, 1), v);
    }
    try testing.expectEqual(-@intFromEnum(GraphError.too_many_ops), dotllm_graph_run(pool, &[_]Op{good}, op_count_max + 1));
}

test "the op schema lists every op's fields in order" {
    var buffer: [4096]u8 = undefined;
    const len = dotllm_op_schema(&buffer, buffer.len);
    const json = buffer[0..len];
    const parsed = try std.json.parseFromSlice(std.json.Value, testing.allocator, json, .{});
    defer parsed.deinit();
    const matmul = parsed.value.object.get("matmul").?.object;
    try testing.expectEqual(@as(i64, 1), matmul.get("code").?.integer);
    try testing.expectEqualStrings("weight:u64", matmul.get("fields").?.array.items[1].string);
    try testing.expectEqualStrings("scale:f64", parsed.value.object.get("attention").?.object.get("fields").?.array.items[13].string);
}
