//! Tests of ffi/quant_k.zig against ggml (goldens made with the reference llama.cpp build)
//! and of the SIMD dot products against their scalar references.
const std = @import("std");
pub const qk = @import("quant_k.zig");

/// Row `kind` of the golden input set: nine shapes that reach ggml's corner cases
/// (Gaussian, uniform, outliers, all positive, all negative, sparse, zero and tiny
/// super-blocks, heavy tails, repeated exact values).
pub fn genRow(rng: std.Random, kind: usize, row: []f32) void {
    for (row, 0..) |*v, i| {
        const g = rng.floatNorm(f32);
        const u = rng.float(f32) * 2 - 1;
        v.* = switch (kind % 9) {
            0 => g,
            1 => u,
            2 => if (rng.float(f32) < 0.01) g * 30 else g * 1e-3,
            3 => rng.float(f32),
            4 => -rng.float(f32) * 5,
            5 => if (rng.float(f32) < 0.9) 0 else g,
            6 => if (i / 256 == 1) 0 else if (i / 256 == 2) g * 1e-20 else if (i / 32 == 20) 0.25 else g * 0.02,
            7 => g / (@abs(rng.floatNorm(f32)) + 0.05) * 100,
            else => @as(f32, @floatFromInt(@as(i32, @intCast(i % 17)) - 8)) * 0.125,
        };
    }
}

pub const golden_row_elems = 2048;

/// The golden inputs: set 1 is 72 rows of 2048 (seed 1); set 2 is 18 rows (seed 2) with
/// NaN, ±inf, 1e30 and -3e38 planted in its first three rows.
pub fn genSet(set: u8, x: []f32) void {
    var prng = std.Random.DefaultPrng.init(set);
    const rows = x.len / golden_row_elems;
    for (0..rows) |r| genRow(prng.random(), r, x[r * golden_row_elems ..][0..golden_row_elems]);
    if (set == 2) {
        const npr = golden_row_elems;
        x[3] = std.math.nan(f32);
        x[300] = std.math.inf(f32);
        x[700] = -std.math.inf(f32);
        x[npr + 5] = 1e30;
        x[2 * npr + 9] = -3e38;
    }
}

pub fn setRows(set: u8) usize {
    return if (set == 1) 72 else 18;
}

const testing = std.testing;

fn sha256Hex(bytes: []const u8) [64]u8 {
    var h: [32]u8 = undefined;
    std.crypto.hash.sha2.Sha256.hash(bytes, &h, .{});
    return std.fmt.bytesToHex(h, .lower);
}

/// sha256 of ggml's bytes for the golden sets: `quantized` is
/// ggml_quantize_chunk(type, x, …, NULL) (quantize_row_q8_K_ref for Q8_K) and
/// `dequantized` is the type's to_float of those bytes, both from the reference build's
/// libggml-base.so (llama.cpp 0c1e570, the copy in llama-cpp-python 0.3.36) on genSet's
/// inputs written to a file.
const Golden = struct { type_name: []const u8, set: u8, quantized: []const u8, dequantized: []const u8 };

const goldens = [_]Golden{
    .{ .type_name = "Q8_K", .set = 1, .quantized = "533805c25dbd33f7b4e49c6297c85a1287934b796199af938ff727251cca7857", .dequantized = "1337c450bc3bc114eb1b36dfaadc9acbb6cbd45c7ab8511aa285a76d61f45abb" },
    .{ .type_name = "Q8_K", .set = 2, .quantized = "43f262e50a07033d138dca7a2ef668398a21b13439cf0c7b633d72ab1e165409", .dequantized = "c776d6dec9a91969ab9f1eb1afc9b024c08f027390f3878daa3b2da1976d1d93" },
    .{ .type_name = "Q4_K", .set = 1, .quantized = "8113f688bfbb7c7c191fb609bc77d7cb33f976d0634b6dfefb8f4fca2e7791a3", .dequantized = "4e822ea35fc1142df5701e35c093ca2e529d43852de1bc2e36b9425a420b3926" },
    .{ .type_name = "Q4_K", .set = 2, .quantized = "0b9b136052b39943973d876fe2d23462c827b58b1659048ec888f77616d1f678", .dequantized = "ea81094a13da0574692e224f7b3e3090978e3146a3c095f1f90cdbe0cd5a3910" },
    .{ .type_name = "Q6_K", .set = 1, .quantized = "d1c08343b754103521e9574c7d0dffa27c6a6053ae19a78abaf9c6a73aa85102", .dequantized = "ea356fb91d5db32de6d8e7b3a5c812602620e3de3e4fe80713042a9c6665e1c3" },
    .{ .type_name = "Q6_K", .set = 2, .quantized = "8173709a4ef29f7673abba82bc49c7f59b0914651daf34b30947cd8bc9ade5cb", .dequantized = "8c071c9174da9b634c32108e8dc1f97f6b572f2e2120d75f194bd002540b1b88" },
    .{ .type_name = "Q5_K", .set = 1, .quantized = "d99f8923c7e6485ee56c2af1e6ea88ebf78a2094e43c7bb1455b563a157b6552", .dequantized = "6a5ccbac156fe53e16aad81ca6bab6940a2d8711b1bd1e12f6a16cbd0298d5f3" },
    .{ .type_name = "Q5_K", .set = 2, .quantized = "9ca9b3053e5d8e56560c33e9bdf5bb1694c2be6207b12e3a8c469313f3187007", .dequantized = "a8a211c68e7f3e0272d47c1a8c21c7f990d7db156ac48ccd79c6b2ebc4ab120b" },
    .{ .type_name = "Q3_K", .set = 1, .quantized = "224c9650261fb33397743dd69e3a37b94476bbb636f9b67730f2badf17d4a4f1", .dequantized = "c712c8fd771422053e09673217543f7d5f8ab360980a92c96740f6074f3dc40d" },
    .{ .type_name = "Q3_K", .set = 2, .quantized = "f11551b5c4c5ba76331ca4cae317185b4b729843e11abc894748aeb18c6465f3", .dequantized = "aab42b83c6ee8bb7b197dd1a302174d49de39df13bf506a839b9edd34b80fa7c" },
    .{ .type_name = "Q2_K", .set = 1, .quantized = "dd96e0945c2078d603a5628dc10c9d5bcb094c8079c9a6c7cefab6bec68841b4", .dequantized = "ef4bbdadcf8ea2d3ccbdbb5e8aa13d0655e942576ea1acac4bb76228f00237e4" },
    .{ .type_name = "Q2_K", .set = 2, .quantized = "7c38de30d00400a143c65af5c2d75648f447bf2ae324ee113f7c9ad63a70dc7d", .dequantized = "3b08da73a7f2ccc58bff78b8cb511975e4eadef2d09b1fe3d3cc9f4e55f9a001" },
    .{ .type_name = "IQ4_XS", .set = 1, .quantized = "0ee86f17e2ebb2ffc8902a418eb8adb6404b13d824dab465360dbe73d8a04c74", .dequantized = "a12cc4faac7d32fc7828b9be3627d821e162a5434fb3e93fd3765d652f27d1a7" },
    .{ .type_name = "IQ4_XS", .set = 2, .quantized = "92dafe115d83275df28f202979bbb76836b61a6c8bba2f4b072926a52bcdfd29", .dequantized = "2f176b1b23d98f326e6c123c8923921c3c5a52ccacf121d615e4530ed74901a0" },
};

fn checkGolden(comptime T: type, g: Golden) !void {
    const rows = setRows(g.set);
    const n = rows * golden_row_elems;
    const x = try testing.allocator.alloc(f32, n);
    defer testing.allocator.free(x);
    genSet(g.set, x);
    const blocks = try testing.allocator.alloc(T.Block, n / qk.qk_k);
    defer testing.allocator.free(blocks);
    if (@hasDecl(T, "quantizeRowRef")) {
        // Row by row, as llama-quantize's threads do: the bytes may not depend on it.
        for (0..rows) |r| T.quantizeRowRef(x[r * golden_row_elems ..][0..golden_row_elems], blocks[r * 8 ..][0..8]);
    } else T.quantizeRow(x, blocks);
    try testing.expectEqualStrings(g.quantized, &sha256Hex(std.mem.sliceAsBytes(blocks)));
    const y = try testing.allocator.alloc(f32, n);
    defer testing.allocator.free(y);
    T.dequantizeRow(blocks, y);
    try testing.expectEqualStrings(g.dequantized, &sha256Hex(std.mem.sliceAsBytes(y)));
}

test "K-quants quantize and dequantize bit-exactly as ggml (golden sha256)" {
    var checked: usize = 0;
    inline for (.{ "Q8_K", "Q4_K", "Q6_K", "Q5_K", "Q3_K", "Q2_K", "IQ4_XS" }) |name| {
        if (@hasDecl(qk, name)) for (goldens) |g| {
            if (std.mem.eql(u8, g.type_name, name)) {
                checkGolden(@field(qk, name), g) catch |err| {
                    std.debug.print("golden mismatch: {s} set {d}\n", .{ name, g.set });
                    return err;
                };
                checked += 1;
            }
        };
    }
    try testing.expectEqual(goldens.len, checked);
    try testing.expectEqual(@as(usize, 2 * 7), checked);
}

/// Random weight blocks: every byte random, the f16 scales set to finite values.
fn randomBlocks(comptime T: type, rng: std.Random, blocks: []T.Block) void {
    rng.bytes(std.mem.sliceAsBytes(blocks));
    for (blocks) |*b| {
        if (@hasField(T.Block, "d")) b.d = @floatCast(rng.float(f32) * 0.01 + 1e-4);
        if (@hasField(T.Block, "dmin")) b.dmin = @floatCast(rng.float(f32) * 0.01);
    }
}

fn checkVecDot(comptime T: type) !void {
    var prng = std.Random.DefaultPrng.init(42);
    const rng = prng.random();
    const nb = 8;
    var w: [nb]T.Block = undefined;
    var a: [nb]qk.Q8_K.Block = undefined;
    var x: [nb * qk.qk_k]f32 = undefined;
    var wf: [nb * qk.qk_k]f32 = undefined;
    var af: [nb * qk.qk_k]f32 = undefined;
    for (0..50) |iter| {
        randomBlocks(T, rng, &w);
        for (&x) |*v| v.* = rng.floatNorm(f32) * @as(f32, if (iter % 5 == 0) 1e-3 else 1.0);
        if (iter == 1) x[0..qk.qk_k].* = @splat(0); // an all-zero activation block
        qk.Q8_K.quantizeRow(&x, &a);
        const ref = T.vecDotRef(&w, &a);
        inline for (.{ qk.Path.avx512vnni, qk.Path.avx2, qk.Path.generic }) |path| {
            if (path == .avx512vnni and qk.default_path != .avx512vnni) continue;
            if (path == .avx2 and qk.default_path == .generic) continue;
            const fast = T.vecDotPath(path, &w, &a);
            if (@as(u32, @bitCast(fast)) != @as(u32, @bitCast(ref))) {
                std.debug.print("{s} {s}: fast {e} ref {e}\n", .{ T.name, @tagName(path), fast, ref });
                return error.TestUnexpectedResult;
            }
        }
        // Multi-row tiles: each output bit-identical to its own vecDot.
        const four = T.vecDotRows(4, .{ w[nb / 2 ..], w[0 .. nb / 2], w[2 .. 2 + nb / 2], w[1 .. 1 + nb / 2] }, a[nb / 2 ..]);
        for (four, [4]usize{ nb / 2, 0, 2, 1 }) |got, start| {
            try testing.expectEqual(@as(u32, @bitCast(T.vecDot(w[start..][0 .. nb / 2], a[nb / 2 ..]))), @as(u32, @bitCast(got)));
        }
        const tiles = T.vecDotRows(2, .{ w[0 .. nb / 2], w[nb / 2 ..] }, a[0 .. nb / 2]);
        try testing.expectEqual(@as(u32, @bitCast(T.vecDot(w[0 .. nb / 2], a[0 .. nb / 2]))), @as(u32, @bitCast(tiles[0])));
        try testing.expectEqual(@as(u32, @bitCast(T.vecDot(w[nb / 2 ..], a[0 .. nb / 2]))), @as(u32, @bitCast(tiles[1])));
        // The reference means Σ w·a of the dequantized rows (f64 sum; budget relative to Σ|w·a|).
        T.dequantizeRow(&w, &wf);
        qk.Q8_K.dequantizeRow(&a, &af);
        var exact: f64 = 0;
        var mag: f64 = 0;
        for (wf, af) |wv, av| {
            exact += @as(f64, wv) * av;
            mag += @abs(@as(f64, wv) * av);
        }
        if (@abs(exact - ref) > 1e-5 * mag + 1e-30) {
            std.debug.print("{s}: ref {e} exact {e} mag {e}\n", .{ T.name, ref, exact, mag });
            return error.TestUnexpectedResult;
        }
    }
}

test "K-quant vecDot equals vecDotRef bit for bit on every SIMD path and means Σ w·a" {
    inline for (.{ "Q4_K", "Q6_K", "Q5_K", "Q3_K", "Q2_K", "IQ4_XS" }) |name| {
        if (@hasDecl(qk, name)) try checkVecDot(@field(qk, name));
    }
}

test "Q4_K in llama.cpp's repacked GEMV and GEMM orders (q4_K_8x8_q8_K): one row and 4-row tiles equal the scalar references bit for bit" {
    const T = qk.Q4_K;
    var prng = std.Random.DefaultPrng.init(7);
    const rng = prng.random();
    const nb = 8;
    var w: [nb]T.Block = undefined;
    var a: [nb]qk.Q8_K.Block = undefined;
    var x: [nb * qk.qk_k]f32 = undefined;
    for (0..30) |_| {
        randomBlocks(T, rng, &w);
        for (&x) |*v| v.* = rng.floatNorm(f32);
        qk.Q8_K.quantizeRow(&x, &a);
        const ref = T.vecDotRepackedRef(&w, &a);
        try testing.expectEqual(@as(u32, @bitCast(ref)), @as(u32, @bitCast(T.vecDotRepacked(&w, &a))));
        // The same dot product as ggml_vec_dot_q4_K_q8_K, in another order.
        try testing.expectApproxEqAbs(T.vecDot(&w, &a), ref, 1e-3 * @max(1, @abs(ref)));
        const rows = [4][]align(1) const T.Block{ w[nb / 2 ..], w[0 .. nb / 2], w[2 .. 2 + nb / 2], w[1 .. 1 + nb / 2] };
        const four = T.vecDotRowsRepacked(4, rows, a[nb / 2 ..]);
        for (four, rows) |got, row| try testing.expectEqual(@as(u32, @bitCast(T.vecDotRepackedRef(row, a[nb / 2 ..]))), @as(u32, @bitCast(got)));
        const gemm = T.vecDotRowsRepackedGemm(4, rows, a[nb / 2 ..]);
        for (gemm, rows) |got, row| try testing.expectEqual(@as(u32, @bitCast(T.vecDotRepackedGemmRef(row, a[nb / 2 ..]))), @as(u32, @bitCast(got)));
        try testing.expectEqual(@as(u32, @bitCast(T.vecDotRepackedGemmRef(&w, &a))), @as(u32, @bitCast(T.vecDotRepackedGemm(&w, &a))));
    }
}

test "Q4_K 1-token repacked GEMV on extreme blocks: the wide 16-row (AVX-512 VNNI) or 8-row (AVX2) kernel, or the one-row kernel (others), equals the scalar reference per row bit for bit" {
    const T = qk.Q4_K;
    var prng = std.Random.DefaultPrng.init(17);
    const rng = prng.random();
    const nb = 3;
    var w: [16][nb]T.Block = undefined;
    var a: [nb]qk.Q8_K.Block = undefined;
    for (0..40) |round| {
        for (&w) |*row| randomBlocks(T, rng, row);
        for (&a) |*ab| {
            ab.d = rng.float(f32) * 0.01 + 1e-4;
            for (&ab.qs) |*q| q.* = rng.int(i8);
        }
        if (round % 4 == 0) {
            // Largest magnitudes: every nibble 15, every 6-bit scale and min 63, activations
            // all −128 (then +127): the i32 block sums at their extremes.
            for (&w) |*row| {
                for (row) |*b| {
                    b.qs = @splat(0xFF);
                    b.scales = @splat(0xFF);
                }
            }
            for (&a) |*ab| ab.qs = @splat(if (round % 8 == 0) -128 else 127);
        }
        for (&a) |*ab| {
            for (0..16) |k| {
                var bsum: i16 = 0;
                for (ab.qs[16 * k ..][0..16]) |q| bsum += q;
                ab.bsums[k] = bsum;
            }
        }
        var got: [16]f32 = undefined;
        if (T.wide_rows == 0) {
            for (0..16) |r| got[r] = T.vecDotRepacked(&w[r], &a);
        } else {
            // 16 rows (AVX-512 VNNI) or two groups of 8 (AVX2).
            const W = T.wide_rows;
            for (0..16 / W) |g| {
                var rows: [W][]align(1) const T.Block = undefined;
                for (0..W) |r| rows[r] = &w[g * W + r];
                got[g * W ..][0..W].* = T.vecDotWideRepacked(1, false, rows, .{&a})[0];
            }
        }
        for (0..16) |r| try testing.expectEqual(@as(u32, @bitCast(T.vecDotRepackedRef(&w[r], &a))), @as(u32, @bitCast(got[r])));
    }
}

test "K-quants in llama.cpp's tiled matmul order (8+ token batches): one row, 4-row and 4 × 8 tiles equal the scalar reference bit for bit" {
    inline for (.{ qk.Q6_K, qk.Q5_K, qk.Q3_K, qk.Q2_K, qk.IQ4_XS }) |T| {
        var prng = std.Random.DefaultPrng.init(9);
        const rng = prng.random();
        const nb = 8;
        var w: [nb]T.Block = undefined;
        var a: [8][nb]qk.Q8_K.Block = undefined;
        var x: [nb * qk.qk_k]f32 = undefined;
        for (0..30) |_| {
            randomBlocks(T, rng, &w);
            for (&a) |*row| {
                for (&x) |*v| v.* = rng.floatNorm(f32);
                qk.Q8_K.quantizeRow(&x, row);
            }
            const ref = T.vecDotTiledRef(&w, &a[0]);
            try testing.expectEqual(@as(u32, @bitCast(ref)), @as(u32, @bitCast(T.vecDotTiled(&w, &a[0]))));
            // The same dot product as ggml's vec_dot, in another float order.
            try testing.expectApproxEqAbs(T.vecDot(&w, &a[0]), ref, 1e-3 * @max(1, @abs(ref)));
            const rows = [4][]align(1) const T.Block{ w[nb / 2 ..], w[0 .. nb / 2], w[2 .. 2 + nb / 2], w[1 .. 1 + nb / 2] };
            const four = T.vecDotRowsTiled(4, rows, a[0][nb / 2 ..]);
            for (four, rows) |got, row| try testing.expectEqual(@as(u32, @bitCast(T.vecDotTiledRef(row, a[0][nb / 2 ..]))), @as(u32, @bitCast(got)));
            var tokens: [8][]align(1) const qk.Q8_K.Block = undefined;
            for (0..8) |t| tokens[t] = a[t][nb / 2 ..];
            const tile = T.vecDotTileTiled(4, 8, rows, tokens);
            for (0..8) |t| {
                for (rows, 0..) |row, r| try testing.expectEqual(@as(u32, @bitCast(T.vecDotTiledRef(row, tokens[t]))), @as(u32, @bitCast(tile[t][r])));
            }
        }
    }
}

test "Q8_K.quantizeRow (vectors) gives quantizeRowRef's bytes: random rows, ties of |max|, NaN, inf, zeros" {
    var prng = std.Random.DefaultPrng.init(0x9e3779b9);
    const rng = prng.random();
    const nb = 6;
    var x: [nb * qk.qk_k]f32 = undefined;
    var got: [nb]qk.Q8_K.Block = undefined;
    var want: [nb]qk.Q8_K.Block = undefined;
    for (0..200) |round| {
        for (&x) |*v| v.* = rng.floatNorm(f32) * 3;
        // Block 1: |max| reached twice with opposite signs, the first (which sets the
        // sign) in an earlier 16-lane group or in the same group.
        x[qk.qk_k + 200] = 9;
        x[qk.qk_k + if (round % 2 == 0) 17 + round % 100 else 192 + round % 8] = -9;
        // Block 2: all zero but one negative zero; block 3: a NaN at a moving position.
        @memset(x[2 * qk.qk_k ..][0..qk.qk_k], 0);
        x[2 * qk.qk_k + round % qk.qk_k] = -0.0;
        x[3 * qk.qk_k + round % qk.qk_k] = std.math.nan(f32);
        // Block 4: an infinity every 8th round. Block 5: max −63.5, so the scale is 2 and
        // the quarters below scale onto rounding ties (x.5).
        if (round % 8 == 0) x[4 * qk.qk_k + round % qk.qk_k] = -std.math.inf(f32);
        for (x[5 * qk.qk_k ..][0..qk.qk_k], 0..) |*v, k| v.* = @as(f32, @floatFromInt(@as(i32, @intCast(k % 64)) - 32)) / 4;
        x[5 * qk.qk_k] = -63.5;
        qk.Q8_K.quantizeRow(&x, &got);
        qk.Q8_K.quantizeRowRef(&x, &want);
        try testing.expectEqualSlices(u8, std.mem.asBytes(&want), std.mem.asBytes(&got));
    }
}

test "Q8_K rows of zeros, NaN and inf quantize without traps" {
    var x: [2 * qk.qk_k]f32 = @splat(0);
    x[qk.qk_k + 1] = std.math.nan(f32);
    x[qk.qk_k + 2] = std.math.inf(f32);
    x[qk.qk_k + 3] = 1;
    var a: [2]qk.Q8_K.Block = undefined;
    qk.Q8_K.quantizeRow(&x, &a);
    try testing.expectEqual(@as(f32, 0), a[0].d);
    for (a[0].bsums) |s| try testing.expectEqual(@as(i16, 0), s);
    // ggml's result: the scale comes from inf (d = -inf... = 1/(-127/inf)), NaN rounds to 0.
    try testing.expectEqual(@as(i8, 0), a[1].qs[1]);
}

/// The dot-product golden's inputs: weight row r is `T.quantizeRowRef` of row r of golden
/// set 1, activation row r the Q8_K of its row 8 + r (r < 8, 2048 elements each).
pub fn dotGoldenInputs(comptime T: type, x: []const f32, r: usize, w: *[8]T.Block, a: *[8]qk.Q8_K.Block) void {
    T.quantizeRowRef(x[r * golden_row_elems ..][0..golden_row_elems], w);
    qk.Q8_K.quantizeRow(x[(8 + r) * golden_row_elems ..][0..golden_row_elems], a);
}

/// f32 bits of ggml_vec_dot_<type>_q8_K (libggml-cpu.so of the reference llama.cpp build,
/// -march=native on an AVX-512 host: its AVX2 kernels) on dotGoldenInputs rows 0..7.
const DotGolden = struct { type_name: []const u8, bits: [8]u32 };
const dot_goldens = [_]DotGolden{
    .{ .type_name = "Q4_K", .bits = .{
        0x413155f2,
        0xc1ff1090,
        0xc23add28,
        0xc2a30335,
        0xc5212f02,
        0xc10fc000,
        0x3e8eed1b,
        0xc31433c8,
    } },
    .{ .type_name = "Q6_K", .bits = .{
        0x4113edd8,
        0xc202b59c,
        0xc24408a0,
        0xc29c71da,
        0xc5213043,
        0xc09c1cc0,
        0x3e830072,
        0xc31af938,
    } },
    .{ .type_name = "Q5_K", .bits = .{
        0x41204290,
        0xc20728b9,
        0xc240dfac,
        0xc29d3c6d,
        0xc5213008,
        0xc0ba6400,
        0x3e816052,
        0xc326cce8,
    } },
    .{ .type_name = "Q3_K", .bits = .{
        0x41127d61,
        0xc1fe569e,
        0xc2453ffa,
        0xc2a4e0be,
        0xc51f60bb,
        0xc04e3190,
        0x3e73cb87,
        0xc333d284,
    } },
    .{ .type_name = "Q2_K", .bits = .{
        0x40d8b706,
        0xc1d744d0,
        0xc225366c,
        0xc275de06,
        0xc525ff14,
        0x4250b22a,
        0x3e54519e,
        0xc38eb0d8,
    } },
    .{ .type_name = "IQ4_XS", .bits = .{
        0x40c2ce67,
        0xc1fdf934,
        0xc23d2c36,
        0xc29a3fe2,
        0xc520e88f,
        0xc06c0eb0,
        0x3e3ca466,
        0xc30bd5ac,
    } },
};

test "K-quant vecDot returns llama.cpp's x86 vec_dot bits (golden)" {
    const x = try testing.allocator.alloc(f32, setRows(1) * golden_row_elems);
    defer testing.allocator.free(x);
    genSet(1, x);
    var checked: usize = 0;
    inline for (.{ "Q4_K", "Q6_K", "Q5_K", "Q3_K", "Q2_K", "IQ4_XS" }) |name| {
        const T = @field(qk, name);
        for (dot_goldens) |g| {
            if (!std.mem.eql(u8, g.type_name, name)) continue;
            for (0..8) |r| {
                var w: [8]T.Block = undefined;
                var a: [8]qk.Q8_K.Block = undefined;
                dotGoldenInputs(T, x, r, &w, &a);
                inline for (.{ qk.Path.avx512vnni, qk.Path.avx2, qk.Path.generic }) |path| {
                    const usable = switch (path) {
                        .avx512vnni => qk.default_path == .avx512vnni,
                        .avx2 => qk.default_path != .generic,
                        .generic => true,
                    };
                    if (usable) {
                        const got: u32 = @bitCast(T.vecDotPath(path, &w, &a));
                        if (got != g.bits[r]) {
                            std.debug.print("{s} row {d} {s}: 0x{x:0>8}, ggml 0x{x:0>8}\n", .{ name, r, @tagName(path), got, g.bits[r] });
                            return error.TestUnexpectedResult;
                        }
                    }
                }
                try testing.expectEqual(g.bits[r], @as(u32, @bitCast(T.vecDotRef(&w, &a))));
            }
            checked += 1;
        }
    }
    try testing.expectEqual(@as(usize, 6), checked);
}

/// f32 bits of the same dot products in llama.cpp's tiled K-quant matmul (ggml-cpu/tiled,
/// its AVX2 microkernel): element [token r][row r] of ggml's CPU mul_mat of the 8 rows
/// `dotGoldenInputs` quantizes (ggml_quantize_chunk) by 8 F32 activation rows (rows 8-15
/// of set 1), one thread, built from the reference llama.cpp as `dot_goldens` (a batch
/// of 8: the tiled path; a throwaway harness calling ggml_mul_mat, not kept here).
const tiled_goldens = [_]DotGolden{
    .{ .type_name = "Q6_K", .bits = .{ 0x4113ede1, 0xc202b59d, 0xc24408a9, 0xc29c71da, 0xc5213043, 0xc09c1ca6, 0x3e830070, 0xc31af933 } },
    .{ .type_name = "Q5_K", .bits = .{ 0x41204291, 0xc20728b8, 0xc240dfae, 0xc29d3c6d, 0xc5213008, 0xc0ba6490, 0x3e81604e, 0xc326cce5 } },
    .{ .type_name = "Q3_K", .bits = .{ 0x41127d5f, 0xc1fe569d, 0xc2453ffb, 0xc2a4e0bf, 0xc51f60bc, 0xc04e317f, 0x3e73cb87, 0xc333d285 } },
    .{ .type_name = "Q2_K", .bits = .{ 0x40d8b6fd, 0xc1d744cc, 0xc2253670, 0xc275de06, 0xc525ff14, 0x4250b228, 0x3e5451a0, 0xc38eb0d6 } },
    .{ .type_name = "IQ4_XS", .bits = .{ 0x40c2ce6b, 0xc1fdf934, 0xc23d2c37, 0xc29a3fe1, 0xc520e88e, 0xc06c0ea7, 0x3e3ca469, 0xc30bd5ab } },
};

test "K-quants in the tiled order return llama.cpp's tiled matmul bits (golden)" {
    const x = try testing.allocator.alloc(f32, setRows(1) * golden_row_elems);
    defer testing.allocator.free(x);
    genSet(1, x);
    inline for (.{ "Q6_K", "Q5_K", "Q3_K", "Q2_K", "IQ4_XS" }) |name| {
        const T = @field(qk, name);
        const g = for (tiled_goldens) |g| {
            if (std.mem.eql(u8, g.type_name, name)) break g;
        } else unreachable;
        for (0..8) |r| {
            var w: [8]T.Block = undefined;
            var a: [8]qk.Q8_K.Block = undefined;
            dotGoldenInputs(T, x, r, &w, &a);
            const got: u32 = @bitCast(T.vecDotTiled(&w, &a));
            if (got != g.bits[r]) {
                std.debug.print("{s} row {d}: 0x{x:0>8}, ggml's tiled matmul 0x{x:0>8}\n", .{ name, r, got, g.bits[r] });
                return error.TestUnexpectedResult;
            }
            try testing.expectEqual(g.bits[r], @as(u32, @bitCast(T.vecDotTiledRef(&w, &a))));
        }
    }
}
