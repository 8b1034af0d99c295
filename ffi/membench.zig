//! Memory read bandwidth, the bound of a memory-bound decode step: every thread
//! streams its share of a buffer through wide vector loads.
const std = @import("std");
const pool_zig = @import("pool.zig");

const Pool = pool_zig.Pool;
const lanes = 8;
const U64x = @Vector(lanes, u64);
/// Bytes per unrolled step: four vectors of 64 bytes.
const step_bytes = 4 * lanes * 8;

const ReadJob = struct {
    bytes: [*]const u8,
    sum: *std.atomic.Value(u64),
};

fn readRange(job: *const ReadJob, begin: usize, end: usize) void {
    var a: U64x = @splat(0);
    var b: U64x = @splat(0);
    var c: U64x = @splat(0);
    var d: U64x = @splat(0);
    for (begin..end) |s| {
        const p: [*]align(1) const [lanes]u64 = @ptrCast(job.bytes + s * step_bytes);
        a +%= p[0];
        b +%= p[1];
        c +%= p[2];
        d +%= p[3];
    }
    _ = job.sum.fetchAdd(@reduce(.Add, a +% b +% c +% d), .monotonic);
}

/// Reads `size_bytes` (whole 256-byte steps) at `address` on every pool thread and
/// returns a checksum (so the reads cannot be optimised away).
export fn dotllm_bench_read(pool: *Pool, address: usize, size_bytes: usize) u64 {
    var sum: std.atomic.Value(u64) = .init(0);
    const job: ReadJob = .{ .bytes = @ptrFromInt(address), .sum = &sum };
    const steps = size_bytes / step_bytes;
    // One unit per 256-byte step, claimed in chunks of 16 KiB.
    _ = pool.run(ReadJob, &job, readRange, steps, 64, steps, 0);
    return sum.load(.monotonic);
}

test "the checksum covers every step once, whatever the thread count" {
    // 1,000 steps: more than one 64-step group, and not a multiple of it, so the
    // parallel path runs with a short last chunk.
    const size_bytes = 1000 * step_bytes;
    const buffer = try std.testing.allocator.alignedAlloc(u8, .@"64", size_bytes);
    defer std.testing.allocator.free(buffer);
    for (buffer, 0..) |*x, i| x.* = @truncate(i *% 31);
    var expected: u64 = 0;
    for (std.mem.bytesAsSlice(u64, buffer)) |w| expected +%= w;
    for (1..4) |threads| {
        const pool = try Pool.create(std.testing.allocator, @intCast(threads));
        defer pool.destroy(std.testing.allocator);
        try std.testing.expectEqual(expected, dotllm_bench_read(pool, @intFromPtr(buffer.ptr), size_bytes));
    }
}
