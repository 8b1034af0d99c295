//! Real-model check of ffi/quant_k.zig: every tensor listed in a golden JSON (see
//! tests/golden/quant_k_*.json) is read from its GGUF, dequantized and requantized, and the
//! sha256 of each result compared with ggml's. Not part of `zig build test` (it needs the
//! downloaded model); tests/quant_k_gguf_test.ts runs it with `zig test`, passing
//!   DOTLLM_QUANT_K_GGUF    the model file
//!   DOTLLM_QUANT_K_GOLDEN  the golden JSON
//! Without them the test fails (it is never skipped silently).
const std = @import("std");
const qk = @import("quant_k.zig");

const Entry = struct {
    name: []const u8,
    type: []const u8,
    row_elems: usize,
    rows: usize,
    file_offset: u64,
    bytes_sha256: []const u8,
    dequantized_sha256: []const u8,
    requantized_sha256: []const u8,
};

const Golden = struct { gguf_sha256: []const u8, tensors: []Entry };

fn sha256Hex(bytes: []const u8) [64]u8 {
    var h: [32]u8 = undefined;
    std.crypto.hash.sha2.Sha256.hash(bytes, &h, .{});
    return std.fmt.bytesToHex(h, .lower);
}

fn checkTensor(comptime T: type, al: std.mem.Allocator, file: std.fs.File, e: Entry) !void {
    const n = e.row_elems * e.rows;
    const blocks_per_row = e.row_elems / qk.qk_k;
    const raw = try al.alloc(T.Block, n / qk.qk_k);
    defer al.free(raw);
    const got = try file.preadAll(std.mem.sliceAsBytes(raw), e.file_offset);
    if (got != raw.len * @sizeOf(T.Block)) return error.ShortRead;
    try std.testing.expectEqualStrings(e.bytes_sha256, &sha256Hex(std.mem.sliceAsBytes(raw)));

    const y = try al.alloc(f32, n);
    defer al.free(y);
    for (0..e.rows) |r| T.dequantizeRow(raw[r * blocks_per_row ..][0..blocks_per_row], y[r * e.row_elems ..][0..e.row_elems]);
    try std.testing.expectEqualStrings(e.dequantized_sha256, &sha256Hex(std.mem.sliceAsBytes(y)));

    const q = try al.alloc(T.Block, n / qk.qk_k);
    defer al.free(q);
    for (0..e.rows) |r| T.quantizeRowRef(y[r * e.row_elems ..][0..e.row_elems], q[r * blocks_per_row ..][0..blocks_per_row]);
    try std.testing.expectEqualStrings(e.requantized_sha256, &sha256Hex(std.mem.sliceAsBytes(q)));
}

test "K-quant tensors of a real GGUF dequantize and requantize as ggml does" {
    const al = std.testing.allocator;
    const gguf_path = std.process.getEnvVarOwned(al, "DOTLLM_QUANT_K_GGUF") catch return error.SetDOTLLM_QUANT_K_GGUF;
    defer al.free(gguf_path);
    const golden_path = std.process.getEnvVarOwned(al, "DOTLLM_QUANT_K_GOLDEN") catch return error.SetDOTLLM_QUANT_K_GOLDEN;
    defer al.free(golden_path);
    const json = try std.fs.cwd().readFileAlloc(al, golden_path, 1 << 24);
    defer al.free(json);
    const parsed = try std.json.parseFromSlice(Golden, al, json, .{ .ignore_unknown_fields = true });
    defer parsed.deinit();
    const file = try std.fs.cwd().openFile(gguf_path, .{});
    defer file.close();
    var checked: usize = 0;
    for (parsed.value.tensors) |e| {
        var matched = false;
        inline for (.{ "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS" }) |name| {
            if (std.mem.eql(u8, e.type, name)) {
                checkTensor(@field(qk, name), al, file, e) catch |err| {
                    std.debug.print("{s} ({s}): {s}\n", .{ e.name, e.type, @errorName(err) });
                    return err;
                };
                matched = true;
            }
        }
        if (!matched) return error.UnknownType;
        checked += 1;
    }
    try std.testing.expect(checked > 0);
    std.debug.print("checked {d} tensors\n", .{checked});
}
