//! Positional file writes for `dotllm pull`: called through a `nonblocking`
//! FFI call, they put the download's bytes on disk from a thread of their own
//! while the JavaScript thread reads the next ones off the network.
const std = @import("std");
const builtin = @import("builtin");

/// Error codes of `dotllm_write_at` (negated in its return value).
pub const WriteError = enum(i32) {
    ok = 0,
    /// Not on this OS (Windows: a C runtime descriptor is not a HANDLE); write another way.
    unsupported = 1,
    no_space = 2,
    quota = 3,
    too_big = 4,
    io = 5,
    bad_descriptor = 6,
};

/// Bytes per `pwrite` (a reason: measured on the Firecracker VM the benchmarks
/// run on, 4 MiB writes went at a fifth of the speed of 64 KiB ones now and
/// then: the kernel gives big writes big page-cache folios, which there often
/// land on guest memory the host has not backed yet. curl writes 16-64 KiB at a
/// time too; the extra system calls cost ~4 ms per 250 MB).
pub const write_piece_max_bytes: usize = 64 << 10;

/// Whether `dotllm_write_at` works on this OS.
pub const supported = builtin.os.tag != .windows and builtin.os.tag != .wasi;

/// Writes all of `bytes[0..len]` to the open file descriptor `fd` at byte
/// `offset` (not moving its file position). Returns 0, or a negated `WriteError`.
export fn dotllm_write_at(fd: i32, bytes: usize, len: usize, offset: u64) i32 {
    if (!supported) return -@intFromEnum(WriteError.unsupported);
    if (len == 0) return 0;
    if (fd < 0 or bytes == 0) return -@intFromEnum(WriteError.bad_descriptor);
    const p: [*]const u8 = @ptrFromInt(bytes);
    return writeAll(fd, p[0..len], offset);
}

fn writeAll(fd: i32, bytes: []const u8, offset: u64) i32 {
    var done: usize = 0;
    while (done < bytes.len) {
        const piece = bytes[done..][0..@min(bytes.len - done, write_piece_max_bytes)];
        const n = std.posix.pwrite(fd, piece, offset + done) catch |err| {
            const code: WriteError = switch (err) {
                error.NoSpaceLeft => .no_space,
                error.DiskQuota => .quota,
                error.FileTooBig => .too_big,
                error.NotOpenForWriting, error.Unseekable => .bad_descriptor,
                else => .io,
            };
            return -@intFromEnum(code);
        };
        if (n == 0) return -@intFromEnum(WriteError.io);
        done += n;
    }
    return 0;
}

test "writes at an offset, leaving the rest of the file alone" {
    if (!supported) return error.SkipZigTest;
    var dir = std.testing.tmpDir(.{});
    defer dir.cleanup();
    const file = try dir.dir.createFile("blob", .{ .read = true });
    defer file.close();
    try file.writeAll("0123456789");
    const text = "abc";
    try std.testing.expectEqual(@as(i32, 0), dotllm_write_at(file.handle, @intFromPtr(text.ptr), text.len, 4));
    try std.testing.expectEqual(@as(i32, 0), dotllm_write_at(file.handle, @intFromPtr(text.ptr), text.len, 12));
    var buf: [15]u8 = undefined;
    const n = try file.preadAll(&buf, 0);
    try std.testing.expectEqualSlices(u8, "0123abc789\x00\x00abc", buf[0..n]);
    try std.testing.expectEqual(-@intFromEnum(WriteError.bad_descriptor), dotllm_write_at(-1, @intFromPtr(text.ptr), 1, 0));
}
