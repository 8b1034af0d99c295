//! The KV cache's element types and how a row of K or V is written into them.
//!
//! A cache type is one of the weight-type table's entries (types.zig): F32, F16, BF16,
//! Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, llama.cpp's `-ctk/-ctv` choices. A row is
//! stored as llama.cpp's `set_rows` stores it: through the CPU backend's `from_float`
//! of the type, which is the reference quantizer of the table (`quantizeRowRef`) for
//! every type but Q8_0, whose x86 `quantize_row_q8_0` is the activation quantizer
//! (quant_act.zig: id = 127/amax, halves to even). Rows are `kv_dim` elements, a whole
//! number of blocks; a quantized type also needs the head width to be one (attention
//! reads a head's blocks).
//!
//! Rotation. Before a quantized K is stored llama.cpp rotates K and Q by a Walsh-Hadamard
//! matrix (orthonormal, its own inverse; `attn_rot_k`), and before a quantized V is stored
//! it rotates V and rotates the attention output back (`attn_rot_v`), which spreads
//! outliers over a block so the quantization loses less. `hadamard` is its CPU kernel
//! (`ggml_compute_forward_fwht`): each run of n values (n a power of two) is scaled by
//! 1/√n, then the butterflies u + v, u − v of widths 1, 2, …, n/2.
const std = @import("std");
const types = @import("types.zig");
const quant_act = @import("quant_act.zig");
const pool_zig = @import("pool.zig");

const Pool = pool_zig.Pool;
const Status = pool_zig.Status;

/// The cache types, in llama.cpp's `-ctk` order.
pub const cache_types = [_]types.Type{ .F32, .F16, .BF16, .Q8_0, .Q4_0, .Q4_1, .Q5_0, .Q5_1, .IQ4_NL };

/// The cache type with ggml id `id`, or null.
pub fn fromId(id: u32) ?types.Type {
    const t = types.fromId(id) orelse return null;
    for (cache_types) |c| if (c == t) return t;
    return null;
}

/// Bytes of `elements` elements of cache type `t`, or null when not a whole number of blocks.
pub fn rowBytes(t: types.Type, elements: usize) ?usize {
    const bytes = types.rowBytes(t, elements) orelse return null;
    return @intCast(bytes);
}

/// Writes `x` (f32, a whole number of `t`'s blocks) as one row of type `t` at `dst`.
pub fn storeRow(t: types.Type, x: []const f32, dst: [*]u8) void {
    switch (t) {
        inline .F32, .F16, .BF16, .Q8_0, .Q4_0, .Q4_1, .Q5_0, .Q5_1, .IQ4_NL => |tag| {
            const E = types.Entry(tag);
            const blocks: [*]align(1) E.Block = @ptrCast(dst);
            const y = blocks[0 .. x.len / E.block_elems];
            if (tag == .Q8_0) {
                // ggml-cpu's from_float for Q8_0 is the x86 quantizer (same block layout).
                const same: []align(1) quant_act.Q8_0.Block = @ptrCast(y);
                quant_act.Q8_0.quantizeRow(x, same);
            } else E.quantizeRowRef(x, y);
        },
        else => unreachable, // validated by the caller
    }
}

/// Writes row t of `src` ([tokens][kv_dim] f32) to cache row `slots[t]·slot_rows +
/// positions[t] % slot_rows` of a cache of type `t`.
pub fn storeKv(t: types.Type, cache: [*]u8, src: [*]const f32, positions: [*]const i32, slots: [*]const i32, tokens: usize, kv_dim: usize, slot_rows: usize) void {
    const row_bytes = rowBytes(t, kv_dim).?;
    for (0..tokens) |i| {
        const pos: usize = @intCast(positions[i]);
        const row = @as(usize, @intCast(slots[i])) * slot_rows + pos % slot_rows;
        storeRow(t, src[i * kv_dim ..][0..kv_dim], cache + row * row_bytes);
    }
}

/// Rotates one run of `x.len` values (a power of two) in place (see the module doc).
pub fn hadamardRow(x: []f32) void {
    const n = x.len;
    const scale = 1.0 / @sqrt(@as(f32, @floatFromInt(n)));
    for (x) |*v| v.* *= scale;
    var len: usize = 1;
    while (len < n) : (len <<= 1) {
        var i: usize = 0;
        while (i < n) : (i += 2 * len) {
            if (len >= 8) {
                var j: usize = 0;
                while (j < len) : (j += 8) {
                    const u: @Vector(8, f32) = x[i + j ..][0..8].*;
                    const v: @Vector(8, f32) = x[i + len + j ..][0..8].*;
                    x[i + j ..][0..8].* = u + v;
                    x[i + len + j ..][0..8].* = u - v;
                }
            } else for (0..len) |j| {
                const u = x[i + j];
                const v = x[i + len + j];
                x[i + j] = u + v;
                x[i + len + j] = u - v;
            }
        }
    }
}

const HadamardJob = struct { x: [*]f32, n: usize };

fn hadamardRange(job: *const HadamardJob, begin: usize, end: usize) void {
    for (begin..end) |r| hadamardRow(job.x[r * job.n ..][0..job.n]);
}

/// Rotates `rows` runs of `n` values of `x` in place; the caller checked n (a power of two).
pub fn hadamard(pool: *Pool, x: [*]f32, rows: usize, n: usize) Status {
    const job: HadamardJob = .{ .x = x, .n = n };
    const log2n: usize = std.math.log2_int(usize, n);
    return pool.run(HadamardJob, &job, hadamardRange, rows, 1, rows * n * (log2n + 1), 1 << 16);
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "every cache type stores a row its dequantizer reads back within the type's precision" {
    var x: [64]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @sin(@as(f32, @floatFromInt(i)) * 0.7) * 3;
    inline for (cache_types) |tag| {
        const E = types.Entry(tag);
        var bytes: [64 * 4]u8 align(4) = undefined;
        storeRow(tag, &x, &bytes);
        var y: [64]f32 = undefined;
        const blocks: [*]align(1) const E.Block = @ptrCast(&bytes);
        E.dequantizeRow(blocks[0 .. 64 / E.block_elems], &y);
        for (x, y) |a, b| try testing.expect(@abs(a - b) <= 0.5);
    }
    try testing.expect(fromId(8) != null);
    try testing.expect(fromId(12) == null); // Q4_K is a weight type, not a cache type
}

test "a Q8_0 cache row is the x86 activation quantizer's block (halves to even), not the reference's" {
    var x: [32]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @as(f32, @floatFromInt(i)) - 15.5;
    x[0] = -127;
    var bytes: [34]u8 = undefined;
    storeRow(.Q8_0, &x, &bytes);
    var act: [1]quant_act.Q8_0.Block = undefined;
    quant_act.Q8_0.quantizeRow(&x, &act);
    try testing.expectEqualSlices(u8, std.mem.asBytes(&act[0]), &bytes);
    try testing.expectEqual(@as(i8, -14), @as(i8, @bitCast(bytes[2 + 1]))); // -14.5 -> -14
}

test "the Hadamard rotation is llama.cpp's matrix product (Sylvester order, 1/sqrt(n)) and its own inverse" {
    inline for (.{ 64, 256 }) |n| {
        var prng = std.Random.DefaultPrng.init(n);
        var x: [n]f32 = undefined;
        for (&x) |*v| v.* = prng.random().floatNorm(f32);
        var y = x;
        hadamardRow(&y);
        // H[i][j] = (-1)^popcount(i & j) / sqrt(n), llama.cpp's ggml_gen_hadamard.
        for (0..n) |i| {
            var want: f64 = 0;
            for (0..n) |j| {
                const sign: f64 = if (@popCount(i & j) % 2 == 0) 1 else -1;
                want += sign * x[j];
            }
            want /= @sqrt(@as(f64, n));
            try testing.expectApproxEqAbs(want, y[i], 1e-4);
        }
        hadamardRow(&y);
        for (x, y) |a, b| try testing.expectApproxEqAbs(a, b, 1e-5);
    }
    // Rows rotate alike at every thread count.
    var rows: [4 * 64]f32 = undefined;
    for (&rows, 0..) |*v, i| v.* = @sin(@as(f32, @floatFromInt(i)));
    var one = rows;
    for (0..4) |r| hadamardRow(one[r * 64 ..][0..64]);
    const pool = try Pool.create(testing.allocator, 2);
    defer pool.destroy(testing.allocator);
    try testing.expectEqual(Status.ok, hadamard(pool, &rows, 4, 64));
    try testing.expectEqualSlices(f32, &one, &rows);
}
