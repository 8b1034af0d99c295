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
    size_bytes: usize,
    sums: *[pool_zig.thread_count_max]u64,
};

fn readRange(job: *const ReadJob, index: u32, count: u32) void {
    const range = pool_zig.split(job.size_bytes / step_bytes, 1, index, count);
    var a: U64x = @splat(0);
    var b: U64x = @splat(0);
    var c: U64x = @splat(0);
    var d: U64x = @splat(0);
    for (range.begin..range.end) |s| {
        const p: [*]align(1) const [lanes]u64 = @ptrCast(job.bytes + s * step_bytes);
        a +%= p[0];
        b +%= p[1];
        c +%= p[2];
        d +%= p[3];
    }
    job.sums[index] = @reduce(.Add, a +% b +% c +% d);
}

/// Reads `size_bytes` (whole 256-byte steps) at `address` on every pool thread and
/// returns a checksum (so the reads cannot be optimised away).
export fn dotllm_bench_read(pool: *Pool, address: usize, size_bytes: usize) u64 {
    var sums: [pool_zig.thread_count_max]u64 = @splat(0);
    const job: ReadJob = .{ .bytes = @ptrFromInt(address), .size_bytes = size_bytes, .sums = &sums };
    _ = pool.run(ReadJob, &job, readRange, size_bytes, 0);
    var total: u64 = 0;
    for (sums) |s| total +%= s;
    return total;
}

test "the checksum covers every step once, whatever the thread count" {
    const size_bytes = 64 * step_bytes;
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
