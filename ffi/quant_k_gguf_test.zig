//! Real-model check of ffi/quant_k.zig: every tensor listed in a golden JSON (see
//! tests/golden/quant_k_*.json) is read from its GGUF, dequantized and requantized, and the
//! sha256 of each result compared with ggml's. Not part of `zig build test` (it needs the
//! downloaded model); tests/quant_k_gguf_test.ts runs it with `zig test`, passing
//!   DOTLLM_QUANT_K_GGUF    the model file
//!   DOTLLM_QUANT_K_GOLDEN  the golden JSON
//! and for the quantization ladder made from SmolLM2's Q4_1 file
//!   DOTLLM_QUANT_K_SMOLLM2         SmolLM2-135M-Instruct.Q4_1.gguf of the shared test data
//!   DOTLLM_QUANT_K_SMOLLM2_GOLDEN  tests/golden/quant_k_smollm2.json
//! Without them the tests fail (they are never skipped silently).
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

const LadderEntry = struct {
    name: []const u8,
    type: []const u8,
    row_elems: usize,
    rows: usize,
    source_type: []const u8,
    source_offset: u64,
    source_f32_sha256: []const u8,
    quantized_sha256: []const u8,
};

const LadderGolden = struct { tensors: []LadderEntry };

/// ggml's block_q4_1 and dequantize_row_q4_1 (y = q·d + m, no FMA), to rebuild the f32
/// tensors llama-quantize's ladder starts from.
const BlockQ4_1 = extern struct { d: f16, m: f16, qs: [16]u8 };

fn dequantizeQ4_1(x: []align(1) const BlockQ4_1, y: []f32) void {
    for (x, 0..) |b, i| {
        const d = qk.fp16ToFp32(b.d);
        const m = qk.fp16ToFp32(b.m);
        for (0..16) |j| {
            const x0: f32 = @floatFromInt(b.qs[j] & 0x0F);
            const x1: f32 = @floatFromInt(b.qs[j] >> 4);
            y[i * 32 + j] = x0 * d + m;
            y[i * 32 + j + 16] = x1 * d + m;
        }
    }
}

fn checkLadder(comptime T: type, al: std.mem.Allocator, y: []const f32, e: LadderEntry) !void {
    const blocks_per_row = e.row_elems / qk.qk_k;
    const q = try al.alloc(T.Block, y.len / qk.qk_k);
    defer al.free(q);
    for (0..e.rows) |r| T.quantizeRowRef(y[r * e.row_elems ..][0..e.row_elems], q[r * blocks_per_row ..][0..blocks_per_row]);
    try std.testing.expectEqualStrings(e.quantized_sha256, &sha256Hex(std.mem.sliceAsBytes(q)));
}

test "SmolLM2's ffn_down tensors quantize to llama-quantize's K-quant ladder bytes" {
    const al = std.testing.allocator;
    const gguf_path = std.process.getEnvVarOwned(al, "DOTLLM_QUANT_K_SMOLLM2") catch return error.SetDOTLLM_QUANT_K_SMOLLM2;
    defer al.free(gguf_path);
    const golden_path = std.process.getEnvVarOwned(al, "DOTLLM_QUANT_K_SMOLLM2_GOLDEN") catch return error.SetDOTLLM_QUANT_K_SMOLLM2_GOLDEN;
    defer al.free(golden_path);
    const json = try std.fs.cwd().readFileAlloc(al, golden_path, 1 << 24);
    defer al.free(json);
    const parsed = try std.json.parseFromSlice(LadderGolden, al, json, .{ .ignore_unknown_fields = true });
    defer parsed.deinit();
    const file = try std.fs.cwd().openFile(gguf_path, .{});
    defer file.close();
    var checked: usize = 0;
    for (parsed.value.tensors) |e| {
        if (!std.mem.eql(u8, e.source_type, "Q4_1")) return error.UnknownSourceType;
        const n = e.row_elems * e.rows;
        const src = try al.alloc(BlockQ4_1, n / 32);
        defer al.free(src);
        if (try file.preadAll(std.mem.sliceAsBytes(src), e.source_offset) != src.len * @sizeOf(BlockQ4_1)) return error.ShortRead;
        const y = try al.alloc(f32, n);
        defer al.free(y);
        dequantizeQ4_1(src, y);
        try std.testing.expectEqualStrings(e.source_f32_sha256, &sha256Hex(std.mem.sliceAsBytes(y)));
        var matched = false;
        inline for (.{ "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS" }) |name| {
            if (std.mem.eql(u8, e.type, name)) {
                checkLadder(@field(qk, name), al, y, e) catch |err| {
                    std.debug.print("{s} as {s}: {s}\n", .{ e.name, e.type, @errorName(err) });
                    return err;
                };
                matched = true;
            }
        }
        if (!matched) return error.UnknownType;
        checked += 1;
    }
    try std.testing.expect(checked > 0);
    std.debug.print("checked {d} ladder tensors\n", .{checked});
}
