//! Activation formats the legacy weight types' dot products consume: ggml's Q8_0
//! (34-byte block) and Q8_1 (36-byte block, with d·Σq), quantized as llama.cpp's x86
//! CPU backend does at run time (`quantize_row_q8_0` / `quantize_row_q8_1` of
//! ggml-cpu/arch/x86/quants.c): d = amax/127, id = 127/amax, q = round-half-even(x·id).
//! (ggml's `quantize_row_q8_0_ref` instead uses id = 1/d and rounds halves away from
//! zero; the x86 backend, which is what llama.cpp runs, does not.)
//!
//! A third format, Q8_0S, is Q8_0 plus the block's integer Σq: the interleaved Q4_0
//! matrices (repack.zig) subtract 8·Σq per block for every 16 rows, and reading it
//! beats summing 32 bytes again per row group. A fourth, Q8_1F32, is Q8_1 laid out
//! for the AVX2 Q4_1 tile (f32 scales after the quants).
const std = @import("std");

/// Elements per activation block (both formats).
pub const qk: usize = 32;

const F32x32 = @Vector(qk, f32);

/// Quantizes one 32-element block to int8 the x86 way; returns d (f32, before the f16
/// rounding of the stored scale) and Σq.
pub inline fn quantizeBlockX86(x: *const [qk]f32, qs: *[qk]i8) struct { d: f32, sum: i32 } {
    const v: F32x32 = x.*;
    // max|x| (NaN lanes are dropped by @reduce(.Max) like vmaxps drops them; not
    // bit-relevant for finite input).
    const amax = @reduce(.Max, @abs(v));
    const d = amax / 127.0;
    const id: f32 = if (amax != 0) 127.0 / amax else 0.0;
    const scaled = v * @as(F32x32, @splat(id));
    // Round half to even as `vroundps` with _MM_ROUND_NEAREST does: adding and
    // removing 1.5·2^23 rounds any |x| < 2^22 to an integer in the current (nearest-even)
    // mode. NaN/inf input (amax = inf -> id = 0 -> NaN) is clamped into range, so the
    // float-to-int conversion below is always defined.
    const magic: F32x32 = @splat(12582912.0);
    const rounded = (scaled + magic) - magic;
    const clamped = @min(@max(rounded, @as(F32x32, @splat(-127.0))), @as(F32x32, @splat(127.0)));
    const q: @Vector(qk, i32) = @intFromFloat(clamped);
    qs.* = @as(@Vector(qk, i8), @intCast(q));
    return .{ .d = d, .sum = @reduce(.Add, q) };
}

/// What an activation block stores beside d and its 32 quants.
const Extra = enum {
    /// Nothing (ggml's block_q8_0).
    none,
    /// s = f16(d · Σq), d the unrounded f32 scale (ggml's block_q8_1).
    d_sum,
    /// The integer Σq (Q8_0S).
    sum,
    /// s as `d_sum`, after the quants, d and s as the f32 values of their f16 (Q8_1F32).
    d_sum_f32,
};

/// An activation format of 32-element blocks quantized by `quantizeBlockX86` (the x86
/// `quantize_row_q8_0` / `quantize_row_q8_1`), with `extra` beside d, `size_bytes` a block.
fn Q8(comptime format_name: []const u8, comptime extra: Extra, comptime size_bytes: usize) type {
    return struct {
        pub const name = format_name;
        pub const block_elems: usize = qk;
        pub const Block = switch (extra) {
            .none => extern struct { d: f16, qs: [qk]i8 },
            .d_sum => extern struct { d: f16, s: f16, qs: [qk]i8 },
            .sum => extern struct { d: f16, sum: i16, qs: [qk]i8 },
            .d_sum_f32 => extern struct { qs: [qk]i8, d: f32, s: f32, pad: [24]u8 },
        };
        comptime {
            std.debug.assert(@sizeOf(Block) == size_bytes);
        }

        /// Quantizes one f32 row (len % 32 == 0) as llama.cpp's x86 quantizer.
        pub fn quantizeRow(x: []const f32, y: []align(1) Block) void {
            std.debug.assert(x.len == y.len * qk);
            for (y, 0..) |*block, b| {
                const r = quantizeBlockX86(x[b * qk ..][0..qk], &block.qs);
                const d: f16 = @floatCast(r.d);
                block.d = d;
                switch (extra) {
                    .none => {},
                    .d_sum, .d_sum_f32 => block.s = @as(f16, @floatCast(r.d * @as(f32, @floatFromInt(r.sum)))),
                    // |Σq| ≤ 32·127 fits the i16.
                    .sum => block.sum = @intCast(r.sum),
                }
            }
        }
    };
}

/// ggml's block_q8_0: f16 scale, 32 int8 quants (34 bytes).
pub const Q8_0 = Q8("q8_0", .none, 34);

/// ggml's block_q8_1: f16 scale d, f16 s = d·Σq, 32 int8 quants (36 bytes). The
/// Q4_1/Q5_1 dot products use s for their min term.
pub const Q8_1 = Q8("q8_1", .d_sum, 36);

/// Q8_0 with the integer Σq (not a ggml format; 36 bytes): the same d and quants as
/// Q8_0, so a dot product over it has Q8_0's bits.
pub const Q8_0S = Q8("q8_0s", .sum, 36);

/// Q8_1 as the AVX2 Q4_1 tile reads it (`q4_1_tile_avx2.zig`; not a ggml format, 64
/// bytes): Q8_1's quants first (32-byte aligned in the cache-line-aligned scratch, so a
/// `vpmaddubsw` reads them from memory without crossing a line), then Q8_1's f16 d and s
/// as the f32 values they stand for, which the tile broadcasts from memory (a load port)
/// rather than converting per block. A dot product over it has Q8_1's bits.
pub const Q8_1F32 = Q8("q8_1f32", .d_sum_f32, 64);
comptime {
    std.debug.assert(@offsetOf(Q8_1F32.Block, "d") == 32 and @offsetOf(Q8_1F32.Block, "s") == 36);
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

/// The x86 quantizer written element by element (round half to even via
/// std.math), to check the vector code against.
fn quantizeBlockScalar(x: *const [qk]f32, qs: *[qk]i8) f32 {
    var amax: f32 = 0;
    for (x) |v| amax = @max(amax, @abs(v));
    const id: f32 = if (amax != 0) 127.0 / amax else 0.0;
    for (x, qs) |v, *q| {
        const s = v * id;
        var r = @round(s);
        // @round rounds halves away from zero: move exact halves to the even neighbour.
        if (@abs(s - @trunc(s)) == 0.5 and @mod(r, 2) != 0) r -= std.math.sign(s);
        q.* = @intFromFloat(r);
    }
    return amax / 127.0;
}

test "Q8_0/Q8_1 activations round halves to even with id = 127/amax, like llama.cpp's x86 quantizer" {
    var x: [32]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @as(f32, @floatFromInt(i)) - 15.5;
    x[0] = -127; // amax = 127 -> id = 1
    var b0: [1]Q8_0.Block = undefined;
    Q8_0.quantizeRow(&x, &b0);
    try testing.expectEqual(@as(f16, 1.0), b0[0].d);
    try testing.expectEqual(@as(i8, -127), b0[0].qs[0]);
    try testing.expectEqual(@as(i8, -14), b0[0].qs[1]); // -14.5 -> -14 (even)
    try testing.expectEqual(@as(i8, -14), b0[0].qs[2]); // -13.5 -> -14 (even)
    try testing.expectEqual(@as(i8, 16), b0[0].qs[31]); // 15.5 -> 16 (even)
    var b1: [1]Q8_1.Block = undefined;
    Q8_1.quantizeRow(&x, &b1);
    try testing.expectEqualSlices(i8, &b0[0].qs, &b1[0].qs);
    var sum: i32 = 0;
    for (b1[0].qs) |q| sum += q;
    try testing.expectEqual(@as(f16, @floatCast(@as(f32, @floatFromInt(sum)))), b1[0].s);
    var b2: [1]Q8_0S.Block = undefined;
    Q8_0S.quantizeRow(&x, &b2);
    try testing.expectEqualSlices(i8, &b0[0].qs, &b2[0].qs);
    try testing.expectEqual(b0[0].d, b2[0].d);
    try testing.expectEqual(sum, b2[0].sum);
    var b3: [1]Q8_1F32.Block = undefined;
    Q8_1F32.quantizeRow(&x, &b3);
    try testing.expectEqualSlices(i8, &b0[0].qs, &b3[0].qs);
    try testing.expectEqual(@as(f32, b1[0].d), b3[0].d);
    try testing.expectEqual(@as(f32, b1[0].s), b3[0].s);
}

test "vector activation quantizer equals the scalar one on random rows; zeros and NaN/inf are defined" {
    var prng = std.Random.DefaultPrng.init(7);
    const rnd = prng.random();
    for (0..200) |_| {
        var x: [qk]f32 = undefined;
        const scale = std.math.pow(f32, 10, rnd.float(f32) * 8 - 4);
        for (&x) |*v| v.* = (rnd.float(f32) * 2 - 1) * scale;
        // Exact halves after scaling by id: make some values k/2 of amax/127 units.
        if (rnd.boolean()) {
            x[0] = 127;
            for (x[1..]) |*v| v.* = @as(f32, @floatFromInt(rnd.intRangeAtMost(i32, -254, 254))) / 2;
        }
        var want: [qk]i8 = undefined;
        const d = quantizeBlockScalar(&x, &want);
        var b: [1]Q8_0.Block = undefined;
        Q8_0.quantizeRow(&x, &b);
        try testing.expectEqualSlices(i8, &want, &b[0].qs);
        try testing.expectEqual(@as(f16, @floatCast(d)), b[0].d);
    }
    var z: [64]f32 = @splat(0);
    var bz: [2]Q8_1.Block = undefined;
    Q8_1.quantizeRow(&z, &bz);
    for (bz) |b| {
        try testing.expectEqual(@as(f16, 0), b.d);
        try testing.expectEqual(@as(f16, 0), b.s);
        for (b.qs) |q| try testing.expectEqual(@as(i8, 0), q);
    }
    z[3] = std.math.nan(f32);
    z[40] = std.math.inf(f32);
    z[41] = -std.math.inf(f32);
    Q8_1.quantizeRow(&z, &bz); // must not trip a safety check
    for (bz) |b| for (b.qs) |q| try testing.expect(q >= -127 and q <= 127);
}
