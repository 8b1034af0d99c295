//! Native memory: 64-byte aligned buffers for activations and caches, and read-only
//! file mappings for model weights. TypeScript views both as ArrayBuffers, never copies.
const std = @import("std");
const builtin = @import("builtin");

/// Alignment of every buffer from `dotllm_alloc`: one cache line, enough for AVX-512 loads.
pub const buffer_alignment = std.mem.Alignment.@"64";

/// Largest buffer `dotllm_alloc` hands out (TIGER_STYLE: a limit on everything).
pub const buffer_size_max_bytes: usize = 1 << 40;

/// Buffers of at least this many bytes (repacked weight matrices, KV caches) start on a
/// 2 MiB boundary and are offered to the kernel as transparent huge pages (Linux
/// `MADV_HUGEPAGE`, which systems with THP in "madvise" mode need): a decode step
/// streams them once, and with 4 KiB pages each page is a TLB miss and a restart of the
/// hardware prefetcher.
const huge_page_min_bytes: usize = 2 << 20;
const huge_page_alignment = std.mem.Alignment.fromByteUnits(2 << 20);

fn alignmentFor(size_bytes: usize) std.mem.Alignment {
    return if (size_bytes >= huge_page_min_bytes) huge_page_alignment else buffer_alignment;
}

/// Allocates `size_bytes` zeroed bytes aligned to 64 (2 MiB from `huge_page_min_bytes`
/// on). Returns 0 when out of memory.
export fn dotllm_alloc(size_bytes: usize) usize {
    if (size_bytes == 0 or size_bytes > buffer_size_max_bytes) return 0;
    const alignment = alignmentFor(size_bytes);
    const ptr = std.heap.c_allocator.rawAlloc(size_bytes, alignment, @returnAddress()) orelse return 0;
    if (builtin.os.tag == .linux and alignment == huge_page_alignment) {
        // Before the first touch (the memset), so the faults can take huge pages. A hint:
        // refused or unsupported, the buffer is the same.
        const aligned: [*]align(std.heap.page_size_min) u8 = @alignCast(ptr);
        std.posix.madvise(aligned, std.mem.alignBackward(usize, size_bytes, std.heap.pageSize()), std.posix.MADV.HUGEPAGE) catch {};
    }
    @memset(ptr[0..size_bytes], 0);
    return @intFromPtr(ptr);
}

/// Frees a buffer from `dotllm_alloc`; `size_bytes` must be the size it was allocated with.
export fn dotllm_free(address: usize, size_bytes: usize) void {
    if (address == 0) return;
    const ptr: [*]u8 = @ptrFromInt(address);
    std.heap.c_allocator.rawFree(ptr[0..size_bytes], alignmentFor(size_bytes), @returnAddress());
}

/// Error codes of `dotllm_map_file` (negated in its return value).
pub const MapError = enum(i32) {
    ok = 0,
    not_found = 1,
    access_denied = 2,
    is_directory = 3,
    too_large = 4,
    io = 5,
    path_too_long = 6,
};

/// Maps the file at `path[0..path_len]` read-only. On success writes the mapping's
/// address to `out[0]` and the file's size to `out[1]` and returns 0; otherwise returns
/// a negated `MapError`. An empty file maps to address 0, size 0.
export fn dotllm_map_file(path: [*]const u8, path_len: usize, out: *[2]u64) i32 {
    const result = mapFile(path[0..path_len]) catch |err| return -@intFromEnum(mapErrorCode(err));
    out[0] = @intFromPtr(result.ptr);
    out[1] = result.len;
    return 0;
}

/// Unmaps a mapping made by `dotllm_map_file`.
export fn dotllm_unmap_file(address: usize, size_bytes: usize) void {
    if (address == 0 or size_bytes == 0) return;
    if (builtin.os.tag == .windows) {
        _ = windows_mapping.UnmapViewOfFile(@ptrFromInt(address));
        return;
    }
    const ptr: [*]align(std.heap.page_size_min) const u8 = @ptrFromInt(address);
    std.posix.munmap(ptr[0..size_bytes]);
}

/// Tells the kernel the pages wholly inside `[address, address + size_bytes)` of a file
/// mapping will not be read again (their data was copied: load-time repacking), so
/// they leave the process's resident set. A later read would fault them back in from
/// the file: a hint, never a change to what the mapping holds. Pages shared with bytes
/// outside the range are kept. No-op on Windows.
export fn dotllm_release_pages(address: usize, size_bytes: usize) void {
    if (builtin.os.tag == .windows or address == 0 or size_bytes == 0) return;
    const page = std.heap.pageSize();
    const begin = std.mem.alignForward(usize, address, page);
    const end = std.mem.alignBackward(usize, address +| size_bytes, page);
    if (end <= begin) return;
    const ptr: [*]align(std.heap.page_size_min) u8 = @ptrFromInt(begin);
    std.posix.madvise(ptr, end - begin, std.posix.MADV.DONTNEED) catch {};
}

fn mapErrorCode(err: anyerror) MapError {
    return switch (err) {
        error.FileNotFound, error.NotDir => .not_found,
        error.AccessDenied, error.PermissionDenied => .access_denied,
        error.IsDir => .is_directory,
        error.FileTooBig => .too_large,
        error.NameTooLong, error.BadPathName, error.InvalidUtf8 => .path_too_long,
        else => .io,
    };
}

fn mapFile(path: []const u8) ![]align(std.heap.page_size_min) const u8 {
    if (path.len == 0 or path.len > std.fs.max_path_bytes) return error.NameTooLong;
    const file = try std.fs.cwd().openFile(path, .{});
    defer file.close();
    const stat = try file.stat();
    if (stat.kind == .directory) return error.IsDir;
    if (stat.size == 0) return &.{};
    if (stat.size > std.math.maxInt(usize)) return error.FileTooBig;
    if (builtin.os.tag == .windows) return windows_mapping.map(file.handle, @intCast(stat.size));
    return std.posix.mmap(
        null,
        @intCast(stat.size),
        std.posix.PROT.READ,
        .{ .TYPE = .PRIVATE },
        file.handle,
        0,
    );
}

/// Read-only file mappings on Windows (kernel32's file-mapping API; std has no wrapper).
const windows_mapping = struct {
    const windows = std.os.windows;
    const page_readonly: windows.DWORD = 0x02;
    const file_map_read: windows.DWORD = 0x04;

    extern "kernel32" fn CreateFileMappingW(
        file: windows.HANDLE,
        attributes: ?*anyopaque,
        protect: windows.DWORD,
        size_high: windows.DWORD,
        size_low: windows.DWORD,
        name: ?windows.LPCWSTR,
    ) callconv(.winapi) ?windows.HANDLE;
    extern "kernel32" fn MapViewOfFile(
        mapping: windows.HANDLE,
        access: windows.DWORD,
        offset_high: windows.DWORD,
        offset_low: windows.DWORD,
        size_bytes: usize,
    ) callconv(.winapi) ?*anyopaque;
    extern "kernel32" fn UnmapViewOfFile(address: *const anyopaque) callconv(.winapi) windows.BOOL;

    fn map(file: windows.HANDLE, size_bytes: usize) ![]align(std.heap.page_size_min) const u8 {
        const mapping = CreateFileMappingW(file, null, page_readonly, 0, 0, null) orelse return error.Unexpected;
        // The view keeps the mapping alive; the handle can go.
        defer windows.CloseHandle(mapping);
        const view = MapViewOfFile(mapping, file_map_read, 0, 0, 0) orelse return error.Unexpected;
        const bytes: [*]align(std.heap.page_size_min) const u8 = @ptrCast(@alignCast(view));
        return bytes[0..size_bytes];
    }
};

test "alloc returns zeroed, aligned memory and refuses 0 bytes" {
    const address = dotllm_alloc(1000);
    try std.testing.expect(address != 0);
    try std.testing.expect(address % 64 == 0);
    const bytes: [*]const u8 = @ptrFromInt(address);
    for (bytes[0..1000]) |b| try std.testing.expectEqual(@as(u8, 0), b);
    dotllm_free(address, 1000);
    try std.testing.expectEqual(@as(usize, 0), dotllm_alloc(0));
}

test "map_file maps a file and reports a missing one" {
    var tmp = std.testing.tmpDir(.{});
    defer tmp.cleanup();
    try tmp.dir.writeFile(.{ .sub_path = "w.bin", .data = "GGUF1234" });
    var path_buffer: [std.fs.max_path_bytes]u8 = undefined;
    const path = try tmp.dir.realpath("w.bin", &path_buffer);
    var out: [2]u64 = undefined;
    try std.testing.expectEqual(@as(i32, 0), dotllm_map_file(path.ptr, path.len, &out));
    try std.testing.expectEqual(@as(u64, 8), out[1]);
    const bytes: [*]const u8 = @ptrFromInt(out[0]);
    try std.testing.expectEqualSlices(u8, "GGUF1234", bytes[0..8]);
    // Releasing pages keeps the mapping's contents (they come back from the file).
    dotllm_release_pages(out[0], out[1]);
    try std.testing.expectEqualSlices(u8, "GGUF1234", bytes[0..8]);
    dotllm_unmap_file(out[0], out[1]);
    const missing = "/nonexistent/dotllm/w.bin";
    try std.testing.expectEqual(-@intFromEnum(MapError.not_found), dotllm_map_file(missing, missing.len, &out));
}
