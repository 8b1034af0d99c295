//! Test support for the weight-type modules: finds the shared test data
//! (`DOTLLM_TESTDATA`, default `../shared/testdata`), reads a GGUF file's tensor
//! directory (just enough of the format to locate tensor bytes) and loads JSON goldens
//! from `tests/golden/`. Used by tests only; a malformed file is an error, not a crash.
const std = @import("std");

pub const Tensor = struct {
    name: []const u8,
    /// ggml order: dims[0] is the row length.
    dims: [4]u64,
    n_dims: u32,
    ggml_type: u32,
    /// The tensor's bytes inside `Gguf.bytes`, from its offset to the next tensor's
    /// (or the end of the file).
    offset: usize,

    pub fn rowLength(self: Tensor) usize {
        return @intCast(self.dims[0]);
    }

    pub fn elementCount(self: Tensor) usize {
        var n: u64 = 1;
        for (self.dims[0..self.n_dims]) |d| n *= d;
        return @intCast(n);
    }
};

/// A whole GGUF file in memory and its tensor directory.
pub const Gguf = struct {
    bytes: []u8,
    tensors: []Tensor,
    data_start: usize,

    pub fn deinit(self: *Gguf, allocator: std.mem.Allocator) void {
        allocator.free(self.tensors);
        allocator.free(self.bytes);
    }

    pub fn find(self: *const Gguf, name: []const u8) ?Tensor {
        for (self.tensors) |t| if (std.mem.eql(u8, t.name, name)) return t;
        return null;
    }

    /// `len` bytes of tensor `t`, bounds-checked against the file.
    pub fn data(self: *const Gguf, t: Tensor, len: usize) ![]const u8 {
        const begin = self.data_start + t.offset;
        if (begin > self.bytes.len or self.bytes.len - begin < len) return error.TensorOutOfBounds;
        return self.bytes[begin..][0..len];
    }
};

const Reader = struct {
    bytes: []const u8,
    pos: usize = 0,

    fn take(self: *Reader, n: usize) ![]const u8 {
        if (self.bytes.len - self.pos < n) return error.TruncatedGguf;
        defer self.pos += n;
        return self.bytes[self.pos..][0..n];
    }

    fn int(self: *Reader, comptime T: type) !T {
        return std.mem.readInt(T, (try self.take(@sizeOf(T)))[0..@sizeOf(T)], .little);
    }

    fn string(self: *Reader) ![]const u8 {
        return self.take(@intCast(try self.int(u64)));
    }

    /// Skips one metadata value of GGUF type `t`; returns it when it is an integer.
    fn value(self: *Reader, t: u32, depth: u32) !?u64 {
        if (depth > 4) return error.BadGguf; // arrays of arrays deeper than any real file
        switch (t) {
            0, 1, 7 => return try self.int(u8),
            2, 3 => return try self.int(u16),
            4, 5, 6 => return try self.int(u32),
            10, 11, 12 => return try self.int(u64),
            8 => {
                _ = try self.string();
                return null;
            },
            9 => {
                const elem = try self.int(u32);
                const n = try self.int(u64);
                for (0..n) |_| _ = try self.value(elem, depth + 1);
                return null;
            },
            else => return error.BadGguf,
        }
    }
};

/// Reads `path` whole and parses its header and tensor directory (GGUF v2/v3).
pub fn readGguf(allocator: std.mem.Allocator, path: []const u8) !Gguf {
    const bytes = try std.fs.cwd().readFileAlloc(allocator, path, 1 << 34);
    errdefer allocator.free(bytes);
    var r: Reader = .{ .bytes = bytes };
    if (!std.mem.eql(u8, try r.take(4), "GGUF")) return error.BadGguf;
    const version = try r.int(u32);
    if (version < 2) return error.BadGguf;
    const n_tensors = try r.int(u64);
    const n_kv = try r.int(u64);
    if (n_tensors > bytes.len / 24) return error.BadGguf; // each info takes >= 24 bytes
    var alignment: u64 = 32;
    for (0..n_kv) |_| {
        const key = try r.string();
        const t = try r.int(u32);
        const v = try r.value(t, 0);
        if (std.mem.eql(u8, key, "general.alignment")) alignment = v orelse return error.BadGguf;
    }
    if (alignment == 0 or alignment > 1 << 20) return error.BadGguf;
    const tensors = try allocator.alloc(Tensor, @intCast(n_tensors));
    errdefer allocator.free(tensors);
    for (tensors) |*t| {
        t.name = try r.string();
        t.n_dims = try r.int(u32);
        if (t.n_dims == 0 or t.n_dims > 4) return error.BadGguf;
        t.dims = .{ 1, 1, 1, 1 };
        for (0..t.n_dims) |d| t.dims[d] = try r.int(u64);
        t.ggml_type = try r.int(u32);
        t.offset = @intCast(try r.int(u64));
    }
    const data_start = std.mem.alignForward(usize, r.pos, @intCast(alignment));
    return .{ .bytes = bytes, .tensors = tensors, .data_start = data_start };
}

/// `<testdata>/<sub>`: `DOTLLM_TESTDATA` or `../shared/testdata` (relative to the
/// project root, where `zig build test` runs).
pub fn testdataPath(allocator: std.mem.Allocator, sub: []const u8) ![]u8 {
    const root = std.process.getEnvVarOwned(allocator, "DOTLLM_TESTDATA") catch |err| switch (err) {
        error.EnvironmentVariableNotFound => try allocator.dupe(u8, "../shared/testdata"),
        else => return err,
    };
    defer allocator.free(root);
    return std.fs.path.join(allocator, &.{ root, sub });
}

/// Parses a JSON golden (path relative to the project root).
pub fn readGolden(allocator: std.mem.Allocator, path: []const u8) !std.json.Parsed(std.json.Value) {
    const text = try std.fs.cwd().readFileAlloc(allocator, path, 1 << 24);
    defer allocator.free(text);
    return std.json.parseFromSlice(std.json.Value, allocator, text, .{ .allocate = .alloc_always });
}

/// Lower-case hex sha256 of `bytes`.
pub fn sha256Hex(bytes: []const u8) [64]u8 {
    var digest: [32]u8 = undefined;
    std.crypto.hash.sha2.Sha256.hash(bytes, &digest, .{});
    return std.fmt.bytesToHex(digest, .lower);
}

/// The string at `keys` inside nested JSON objects, or an error naming the missing key.
pub fn goldenString(root: std.json.Value, keys: []const []const u8) ![]const u8 {
    var v = root;
    for (keys) |k| {
        if (v != .object) return error.GoldenNotAnObject;
        v = v.object.get(k) orelse {
            std.debug.print("golden has no key '{s}'\n", .{k});
            return error.GoldenKeyMissing;
        };
    }
    if (v != .string) return error.GoldenNotAString;
    return v.string;
}
