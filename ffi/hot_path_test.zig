//! The hot path allocates nothing: a pool built on a counting allocator runs every
//! kernel many times after `reserve`, and the allocator sees no further calls.
const std = @import("std");
const pool_zig = @import("pool.zig");
const matmul = @import("matmul.zig");
const ops = @import("ops.zig");
const attention = @import("attention.zig");
const quant = @import("quant.zig");

const Counting = struct {
    parent: std.mem.Allocator,
    calls: usize = 0,

    fn allocator(self: *Counting) std.mem.Allocator {
        return .{ .ptr = self, .vtable = &.{ .alloc = alloc, .resize = resize, .remap = remap, .free = free } };
    }
    fn alloc(ctx: *anyopaque, len: usize, alignment: std.mem.Alignment, ret: usize) ?[*]u8 {
        const self: *Counting = @ptrCast(@alignCast(ctx));
        self.calls += 1;
        return self.parent.rawAlloc(len, alignment, ret);
    }
    fn resize(ctx: *anyopaque, memory: []u8, alignment: std.mem.Alignment, len: usize, ret: usize) bool {
        const self: *Counting = @ptrCast(@alignCast(ctx));
        self.calls += 1;
        return self.parent.rawResize(memory, alignment, len, ret);
    }
    fn remap(ctx: *anyopaque, memory: []u8, alignment: std.mem.Alignment, len: usize, ret: usize) ?[*]u8 {
        const self: *Counting = @ptrCast(@alignCast(ctx));
        self.calls += 1;
        return self.parent.rawRemap(memory, alignment, len, ret);
    }
    fn free(ctx: *anyopaque, memory: []u8, alignment: std.mem.Alignment, ret: usize) void {
        const self: *Counting = @ptrCast(@alignCast(ctx));
        self.calls += 1;
        self.parent.rawFree(memory, alignment, ret);
    }
};

test "no allocation on the hot path: 100 decode-like steps after reserve" {
    var counting: Counting = .{ .parent = std.testing.allocator };
    const allocator = counting.allocator();
    const pool = try pool_zig.Pool.create(allocator, 3);
    defer pool.destroy(allocator);
    const dim = 128;
    const tokens = 4;
    try pool.reserve(allocator, matmul.q8ScratchSize(dim, tokens));

    var weights_f32: [dim * dim]f32 = undefined;
    var prng = std.Random.DefaultPrng.init(5);
    for (&weights_f32) |*v| v.* = prng.random().float(f32) - 0.5;
    var weights_q8: [dim * dim / quant.qk8_0]quant.BlockQ8_0 = undefined;
    quant.quantizeRowQ8_0(&weights_f32, &weights_q8);
    var x: [tokens * dim]f32 = undefined;
    for (&x) |*v| v.* = prng.random().float(f32);
    var y: [tokens * dim]f32 = undefined;
    var norm: [dim]f32 = @splat(1);
    var kv: [8 * dim]f32 = undefined;
    for (&kv) |*v| v.* = prng.random().float(f32);

    const positions = [_]i32{ 4, 5, 6, 7 };
    const slots = [_]i32{ 0, 0, 0, 0 };
    std.debug.assert(positions.len >= tokens);
    const calls_after_setup = counting.calls;
    for (0..100) |_| {
        try std.testing.expectEqual(pool_zig.Status.ok, ops.rmsnorm(pool, &y, &x, &norm, dim, tokens, 1e-5));
        try std.testing.expectEqual(pool_zig.Status.ok, matmul.matmulQ8_0(pool, &y, &weights_q8, &x, dim, dim, tokens));
        try std.testing.expectEqual(pool_zig.Status.ok, matmul.matmulFloat(f32, pool, &y, &weights_f32, &x, dim, dim, tokens));
        try std.testing.expectEqual(pool_zig.Status.ok, attention.attention(f32, pool, .{ .out = &y, .q = &x, .k = &kv, .v = &kv, .positions = &positions, .slots = &slots, .tokens = tokens, .heads = 4, .kv_heads = 2, .head_dim = 16, .slot_rows = 8, .window = 0, .scale = 0.25 }));
        try std.testing.expectEqual(pool_zig.Status.ok, ops.swiglu(pool, &y, &x, &x, tokens * dim));
        try std.testing.expectEqual(pool_zig.Status.ok, ops.add(pool, &y, &y, &x, tokens * dim));
    }
    try std.testing.expectEqual(calls_after_setup, counting.calls);
}
