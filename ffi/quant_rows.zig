//! Row conversion by ggml type id, for `dotllm quantize`: `dotllm_quantize_row` (f32 -> type)
//! and `dotllm_dequantize_row` (type -> f32). 0 = ok, -1 = type not computable or n not a
//! multiple of its block.
//!
//! TEMPORARY (branch `quantize`): the lead's type table (ffi/types.zig) will export these two
//! with the same signatures; until then this file dispatches to what exists.
const std = @import("std");
const quant = @import("quant.zig");

const legacy = @import("quant_legacy.zig");
const kq = @import("quant_k.zig");

/// Every block type with the contract's namespace (quantizeRowRef / dequantizeRow), found by
/// name so that types land here as their modules gain them.
const block_types = blk: {
    const candidates = .{
        .{ legacy, "Q4_0" },   .{ legacy, "Q4_1" }, .{ legacy, "Q5_0" }, .{ legacy, "Q5_1" },
        .{ legacy, "IQ4_NL" }, .{ kq, "Q2_K" },     .{ kq, "Q3_K" },     .{ kq, "Q4_K" },
        .{ kq, "Q5_K" },       .{ kq, "Q6_K" },     .{ kq, "IQ4_XS" },
    };
    var list: []const type = &.{};
    for (candidates) |c| {
        if (@hasDecl(c[0], c[1])) list = list ++ [_]type{@field(c[0], c[1])};
    }
    break :blk list;
};

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
        else => {
            inline for (block_types) |B| {
                if (type_id == B.ggml_type) {
                    if (n % B.block_elems != 0) return -1;
                    const blocks: [*]align(1) B.Block = @ptrCast(y);
                    B.quantizeRowRef(x[0..n], blocks[0 .. n / B.block_elems]);
                    return 0;
                }
            }
            return -1;
        },
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
        else => {
            inline for (block_types) |B| {
                if (type_id == B.ggml_type) {
                    if (n % B.block_elems != 0) return -1;
                    const blocks: [*]align(1) const B.Block = @ptrCast(x);
                    B.dequantizeRow(blocks[0 .. n / B.block_elems], y[0..n]);
                    return 0;
                }
            }
            return -1;
        },
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
