//! Weight formats and row conversions: F16, BF16 and Q8_0 (ggml's layouts), plus the
//! Q8 activation blocks the Q8_0 matmul quantizes its input into.
const std = @import("std");
const matmul_zig = @import("matmul.zig");

/// Elements per Q8_0 block.
pub const qk8_0 = 32;

/// ggml's Q8_0 block: a f16 scale and 32 signed bytes (34 bytes, 2-byte aligned).
pub const BlockQ8_0 = extern struct {
    d: f16,
    qs: [qk8_0]i8,
};

comptime {
    std.debug.assert(@sizeOf(BlockQ8_0) == 34);
}

/// The Q8_0 entry of the type table (`types.zig`): ggml's layout, with its own
/// matmul kernel over paired 68-byte activation blocks (`matmul.zig`).
pub const Q8_0 = struct {
    pub const ggml_type: u32 = 8;
    pub const name = "Q8_0";
    pub const block_elems: usize = qk8_0;
    pub const Block = BlockQ8_0;
    pub const Act = matmul_zig.PairedQ8Activations;
    pub const dequantizeRow = dequantizeRowQ8_0;
    pub const quantizeRowRef = quantizeRowQ8_0;
    pub const matmul = matmul_zig.matmulQ8_0Kernel;
};

/// Converts f32 to bf16 with round-to-nearest-even; NaNs stay (quiet) NaNs.
pub inline fn f32ToBf16(x: f32) u16 {
    const bits: u32 = @bitCast(x);
    if ((bits & 0x7fff_ffff) > 0x7f80_0000) return @intCast((bits >> 16) | 0x40);
    return @intCast((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

pub inline fn bf16ToF32(x: u16) f32 {
    return @bitCast(@as(u32, x) << 16);
}

/// Quantizes one Q8_0 block as llama.cpp's `quantize_row_q8_0` does:
/// d = max|x| / 127 (stored as f16), q = round(x * (1/d)), halves away from zero.
/// Returns the f32 value of the stored scale.
pub inline fn quantizeBlock(x: *const [qk8_0]f32, qs: *[qk8_0]i8) f32 {
    var amax: f32 = 0;
    for (x) |v| amax = @max(amax, @abs(v));
    const d = amax / 127.0;
    const id: f32 = if (d != 0) 1.0 / d else 0.0;
    // The clamp only matters for NaN/inf input, which would otherwise be undefined behaviour.
    for (x, qs) |v, *q| q.* = @intFromFloat(@min(@max(@round(v * id), -127.0), 127.0));
    return d;
}

pub fn quantizeRowQ8_0(x: []const f32, y: []align(1) BlockQ8_0) void {
    std.debug.assert(x.len == y.len * qk8_0);
    for (y, 0..) |*block, b| {
        const d = quantizeBlock(x[b * qk8_0 ..][0..qk8_0], &block.qs);
        block.d = @floatCast(d);
    }
}

pub fn dequantizeRowQ8_0(x: []align(1) const BlockQ8_0, y: []f32) void {
    std.debug.assert(y.len == x.len * qk8_0);
    for (x, 0..) |block, b| {
        const d: f32 = block.d;
        for (block.qs, y[b * qk8_0 ..][0..qk8_0]) |q, *out| out.* = @as(f32, @floatFromInt(q)) * d;
    }
}

pub fn convertF32ToF16(x: []const f32, y: []align(1) f16) void {
    for (x, y) |v, *out| out.* = @floatCast(v);
}

pub fn convertF16ToF32(x: []align(1) const f16, y: []f32) void {
    for (x, y) |v, *out| out.* = v;
}

pub fn convertF32ToBf16(x: []const f32, y: []align(1) u16) void {
    for (x, y) |v, *out| out.* = f32ToBf16(v);
}

pub fn convertBf16ToF32(x: []align(1) const u16, y: []f32) void {
    for (x, y) |v, *out| out.* = bf16ToF32(v);
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "Q8_0 quantization rounds halves away from zero and stores d as f16" {
    var x: [32]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @as(f32, @floatFromInt(i)) - 15.5;
    x[0] = -127; // amax = 127 -> d = 1, id = 1
    var blocks: [1]BlockQ8_0 = undefined;
    quantizeRowQ8_0(&x, &blocks);
    try testing.expectEqual(@as(f16, 1.0), blocks[0].d);
    try testing.expectEqual(@as(i8, -127), blocks[0].qs[0]);
    try testing.expectEqual(@as(i8, -15), blocks[0].qs[1]); // -14.5 -> -15
    try testing.expectEqual(@as(i8, 16), blocks[0].qs[31]); // 15.5 -> 16
    var y: [32]f32 = undefined;
    dequantizeRowQ8_0(&blocks, &y);
    for (x, y) |a, b| try testing.expect(@abs(a - b) <= 0.5);
}

test "Q8_0 of zeros is zeros" {
    const x: [64]f32 = @splat(0);
    var blocks: [2]BlockQ8_0 = undefined;
    quantizeRowQ8_0(&x, &blocks);
    for (blocks) |b| {
        try testing.expectEqual(@as(f16, 0), b.d);
        for (b.qs) |q| try testing.expectEqual(@as(i8, 0), q);
    }
}

test "bf16 rounds to nearest even and keeps NaN" {
    try testing.expectEqual(@as(u16, 0x3f80), f32ToBf16(1.0));
    try testing.expectEqual(@as(u16, 0x3f80), f32ToBf16(@bitCast(@as(u32, 0x3f80_8000)))); // tie -> even
    try testing.expectEqual(@as(u16, 0x3f82), f32ToBf16(@bitCast(@as(u32, 0x3f81_8000)))); // tie -> even (up)
    try testing.expect(std.math.isNan(bf16ToF32(f32ToBf16(std.math.nan(f32)))));
    try testing.expectEqual(@as(f32, -2.5), bf16ToF32(f32ToBf16(-2.5)));
}

test "f16 round trip" {
    const x = [_]f32{ 0, 1, -2, 0.5, 65504, 1e-8 };
    var h: [6]f16 = undefined;
    var y: [6]f32 = undefined;
    convertF32ToF16(&x, &h);
    convertF16ToF32(&h, &y);
    for (x[0..5], y[0..5]) |a, b| try testing.expectEqual(a, b);
    try testing.expectEqual(@as(f32, 0), y[5]);
}
