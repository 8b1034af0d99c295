//! Row conversion by ggml type id, for `dotllm quantize`: `dotllm_quantize_row` (f32 -> type)
//! and `dotllm_dequantize_row` (type -> f32). 0 = ok, -1 = type not computable or n not a
//! multiple of its block.
//!
//! TEMPORARY (branch `quantize`): the lead's type table (ffi/types.zig) will export these two
//! with the same signatures; until then this file dispatches to what exists.
const std = @import("std");
const quant = @import("quant.zig");

/// ggml's Q4_1 block (d, m, 16 bytes of nibbles); dequantize only, until quant_legacy.zig lands.
const BlockQ4_1 = extern struct { d: f16, m: f16, qs: [16]u8 };

comptime {
    std.debug.assert(@sizeOf(BlockQ4_1) == 20);
}

/// ggml's dequantize_row_q4_1: y = q * d + m (no FMA: ggml-base is built without it).
fn dequantizeRowQ4_1(x: []align(1) const BlockQ4_1, y: []f32) void {
    for (x, 0..) |b, i| {
        const d: f32 = b.d;
        const m: f32 = b.m;
        for (0..16) |j| {
            const x0: f32 = @floatFromInt(b.qs[j] & 0x0f);
            const x1: f32 = @floatFromInt(b.qs[j] >> 4);
            y[i * 32 + j] = x0 * d + m;
            y[i * 32 + j + 16] = x1 * d + m;
        }
    }
}

export fn dotllm_quantize_row(type_id: u32, x: [*]const f32, y: [*]u8, n: usize) i32 {
    switch (type_id) {
        0 => @memcpy(y[0 .. n * 4], std.mem.sliceAsBytes(x[0..n])),
        1 => quant.convertF32ToF16(x[0..n], @as([*]align(1) f16, @ptrCast(y))[0..n]),
        30 => quant.convertF32ToBf16(x[0..n], @as([*]align(1) u16, @ptrCast(y))[0..n]),
        8 => {
            if (n % quant.qk8_0 != 0) return -1;
            const blocks: [*]align(1) quant.BlockQ8_0 = @ptrCast(y);
            quant.quantizeRowQ8_0(x[0..n], blocks[0 .. n / quant.qk8_0]);
        },
        else => return -1,
    }
    return 0;
}

export fn dotllm_dequantize_row(type_id: u32, x: [*]const u8, y: [*]f32, n: usize) i32 {
    switch (type_id) {
        0 => @memcpy(std.mem.sliceAsBytes(y[0..n]), x[0 .. n * 4]),
        1 => quant.convertF16ToF32(@as([*]align(1) const f16, @ptrCast(x))[0..n], y[0..n]),
        30 => quant.convertBf16ToF32(@as([*]align(1) const u16, @ptrCast(x))[0..n], y[0..n]),
        8 => {
            if (n % quant.qk8_0 != 0) return -1;
            const blocks: [*]align(1) const quant.BlockQ8_0 = @ptrCast(x);
            quant.dequantizeRowQ8_0(blocks[0 .. n / quant.qk8_0], y[0..n]);
        },
        3 => {
            if (n % 32 != 0) return -1;
            const blocks: [*]align(1) const BlockQ4_1 = @ptrCast(x);
            dequantizeRowQ4_1(blocks[0 .. n / 32], y[0..n]);
        },
        else => return -1,
    }
    return 0;
}

test "quantize/dequantize rows refuse unknown types and misaligned counts" {
    var x: [64]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @as(f32, @floatFromInt(i)) * 0.25 - 8;
    var bytes: [256]u8 = undefined;
    var y: [64]f32 = undefined;
    try std.testing.expectEqual(@as(i32, -1), dotllm_quantize_row(255, &x, &bytes, 64));
    try std.testing.expectEqual(@as(i32, -1), dotllm_quantize_row(8, &x, &bytes, 33));
    try std.testing.expectEqual(@as(i32, 0), dotllm_quantize_row(8, &x, &bytes, 64));
    try std.testing.expectEqual(@as(i32, 0), dotllm_dequantize_row(8, &bytes, &y, 64));
    for (x, y) |a, b| try std.testing.expect(@abs(a - b) <= 0.07);
    try std.testing.expectEqual(@as(i32, 0), dotllm_quantize_row(1, &x, &bytes, 64));
    try std.testing.expectEqual(@as(i32, 0), dotllm_dequantize_row(1, &bytes, &y, 64));
    try std.testing.expectEqualSlices(f32, &x, &y);
}
