//! The Q8_0 tile of 2+ tokens for AVX2 without AVX-512 (16 ymm registers), in
//! assembly: R weight rows × T tokens (R ≤ 2, T ≤ 4), every block of the rows in one
//! loop; for a decode batch (2-4 tokens) it prefetches the rows ahead.
//!
//! Arithmetic: per output, llama.cpp's x86 `ggml_vec_dot_q8_0_q8_0` (and tinyBLAS_Q0_AVX):
//! an 8-lane f32 accumulator takes, block by block in order, acc = fma(dw·dx, lanes, acc)
//! with lane g = Σ_{j<4} w[4g+j]·x[4g+j] computed exactly by `vpsignb` (x takes w's
//! signs), `vpmaddubsw` (|w| × signed x, byte pairs; no saturation: 2·128·127 < 2^15)
//! and `vpmaddwd` by ones, then `vcvtdq2ps`. The product dw·dx is one f32 multiply and
//! the fma one rounding, so every output equals `tileQ8`'s and the GEMV's bit for bit
//! (the tests in matmul.zig compare). The caller sums the 8 lanes (`hsum_float_8`).
//!
//! Why assembly: LLVM's code for the same loop in Zig (vectors, `@mulAdd`, inline asm
//! per output) shuffled registers between iterations, spilled accumulators and read
//! the weights with line-crossing loads, at 11-12 instructions per output and block.
//! Here an output and block costs 6 (`vpsignb`, `vpmaddubsw`, `vpmaddwd`, `vcvtdq2ps`,
//! `vbroadcastss`, `vfmadd231ps`) and a block of R rows × T tokens adds 6R + T + 5.
//! Measured on the AVX2 Zen 3 host (1 thread, 2048 × 2048 weights, 64 tokens, median
//! of 3 alternating runs): 68-72 GOP/s against 55-58 for the Zig cell tile; in L1
//! (8 × 1024 × 8) 2.7-2.8 cycles per output and block against 3.8 (2 × 5 with the
//! weights' signs read from memory: 4.9, line-crossing loads; 1 × 8: equal in L1,
//! slower on 576-wide rows).
//!
//! Per block, the scale products dw_r·dx_t come from one multiply per row: dw_r
//! broadcast to 8 lanes times 8 consecutive tokens' dx, read from the block-major copy
//! of the activation scales (`Activations.scales_by_block`, padded so 8 can be read at
//! any token). They go through a stack array so that each output takes its product
//! with a broadcast load (a load port) rather than a shuffle (a vector port).
//!
//! Registers (R rows, T tokens): ymm0 16 × i16 ones; ymm1..R |w_r|; ymmR+1..2R w_r;
//! then x_t, a temporary, the broadcast product, and R·T accumulators: 2R + 4 + R·T ≤
//! 16 gives R ≤ 2 with T ≤ 4. General registers: r8 the rows' current block, rcx the
//! row stride, r9 token t0's current x block, rdx / rsi the token stride and 3×, r10
//! the block-major scales at (block, t0), rdi their block stride, r11 blocks left, rax
//! the caller's buffers, r12 / r13 the prefetch distance from row 0 / row 1.

const std = @import("std");
const asm_avx2 = @import("asm_avx2.zig");
const ymm = asm_avx2.ymm;
const xmm = asm_avx2.xmm;
const ins = asm_avx2.ins;

/// Largest tile: 2R + 4 + R·T ymm registers of 16.
pub const max_rows = 2;
pub const max_tokens = 4;

/// What the tile reads, at block 0: the assembly takes one pointer to this.
pub const Args = extern struct {
    /// Row 0's first block (rows follow every `row_bytes`).
    w: [*]const u8,
    row_bytes: usize,
    /// Token 0's block-0 quants (tokens follow every `x_stride_bytes`; 32-byte aligned
    /// when blocks are 32 bytes apart).
    x_qs: [*]const i8,
    x_stride_bytes: usize,
    /// Block 0's scale of token 0 in the block-major array (blocks follow every
    /// `scale_stride_bytes`); 8 floats are read from each block's position.
    x_scales: [*]const f32,
    scale_stride_bytes: usize,
    /// Blocks per row, at least 1.
    block_count: usize,
    /// Scratch of the tile: per block, products[r][t] = dw_r · dx_t.
    products: *align(32) [max_rows][8]f32,
    /// Out: the accumulator of (row r, token t) at acc[t·R + r].
    acc: *align(32) [max_rows * max_tokens][8]f32,
    /// How far ahead of each row's current block the prefetching variant fetches, in
    /// bytes (a decode batch of 2-4 tokens waits on the weight stream without it).
    prefetch_bytes: usize,
};

comptime {
    // The assembly reads the fields at these offsets.
    std.debug.assert(@offsetOf(Args, "w") == 0 and @offsetOf(Args, "row_bytes") == 8);
    std.debug.assert(@offsetOf(Args, "x_qs") == 16 and @offsetOf(Args, "x_stride_bytes") == 24);
    std.debug.assert(@offsetOf(Args, "x_scales") == 32 and @offsetOf(Args, "scale_stride_bytes") == 40);
    std.debug.assert(@offsetOf(Args, "block_count") == 48 and @offsetOf(Args, "products") == 56);
    std.debug.assert(@offsetOf(Args, "acc") == 64 and @offsetOf(Args, "prefetch_bytes") == 72);
}

/// Byte `offset` of row r's current block.
fn rowAt(comptime r: usize, comptime offset: usize) []const u8 {
    return switch (r) {
        0 => std.fmt.comptimePrint("{d}(%%r8)", .{offset}),
        1 => std.fmt.comptimePrint("{d}(%%r8,%%rcx,1)", .{offset}),
        else => unreachable,
    };
}

/// Token t's current block of quants.
fn tokenAt(comptime t: usize) []const u8 {
    return switch (t) {
        0 => "(%%r9)",
        1 => "(%%r9,%%rdx,1)",
        2 => "(%%r9,%%rdx,2)",
        3 => "(%%r9,%%rsi,1)",
        else => unreachable,
    };
}

/// The tile's assembly (AT&T syntax). `x_block_bytes`: the step from one block's
/// activation quants to the next (32: `matmul.zig`'s 32-byte aligned quants; 34:
/// ggml's `block_q8_0`, read unaligned). `prefetch`: fetch each row's line
/// `prefetch_bytes` ahead of its block, every block.
fn source(comptime R: usize, comptime T: usize, comptime x_block_bytes: usize, comptime prefetch: bool) []const u8 {
    @setEvalBranchQuota(1_000_000);
    comptime {
        std.debug.assert(1 <= R and R <= max_rows and 1 <= T and T <= max_tokens);
        const ones = 0;
        const w_abs0 = 1;
        const w0 = 1 + R;
        const x = 1 + 2 * R;
        const tmp = 2 + 2 * R;
        const product = 3 + 2 * R;
        const acc0 = 4 + 2 * R;
        std.debug.assert(acc0 + R * T <= 16);
        var s: []const u8 =
            \\mov $0x00010001, %%eax
            \\vmovd %%eax, %%xmm0
            \\vpbroadcastd %%xmm0, %%ymm0
            \\mov 0(%[args]), %%r8
            \\mov 8(%[args]), %%rcx
            \\mov 16(%[args]), %%r9
            \\mov 24(%[args]), %%rdx
            \\lea (%%rdx,%%rdx,2), %%rsi
            \\mov 32(%[args]), %%r10
            \\mov 40(%[args]), %%rdi
            \\mov 48(%[args]), %%r11
            \\mov 56(%[args]), %%rax
            \\mov 72(%[args]), %%r12
            \\lea (%%r12,%%rcx,1), %%r13
            \\
        ;
        for (0..R * T) |k| s = s ++ ins("vxorps", .{ ymm(acc0 + k), ymm(acc0 + k), ymm(acc0 + k) });
        s = s ++ "1:\n";
        if (prefetch) {
            s = s ++ ins("prefetcht1", .{"(%%r8,%%r12,1)"});
            if (R == 2) s = s ++ ins("prefetcht1", .{"(%%r8,%%r13,1)"});
        }
        // products[r][0..8] = dw_r · dx of tokens t0..t0+7 at this block.
        for (0..R) |r| {
            s = s ++ ins("vpbroadcastw", .{ rowAt(r, 0), xmm(product) }) ++
                ins("vcvtph2ps", .{ xmm(product), ymm(product) }) ++
                ins("vmulps", .{ "(%%r10)", ymm(product), ymm(product) }) ++
                ins("vmovaps", .{ ymm(product), std.fmt.comptimePrint("{d}(%%rax)", .{32 * r}) });
        }
        // The rows' quants (bytes 2..33 of a block) and their absolute values.
        for (0..R) |r| {
            s = s ++ ins("vmovdqu", .{ rowAt(r, 2), ymm(w0 + r) }) ++
                ins("vpabsb", .{ ymm(w0 + r), ymm(w_abs0 + r) });
        }
        const x_load = if (x_block_bytes % 32 == 0) "vmovdqa" else "vmovdqu";
        for (0..T) |t| {
            s = s ++ ins(x_load, .{ tokenAt(t), ymm(x) });
            for (0..R) |r| {
                // tmp = x with w's signs; |w| × tmp in byte pairs; i16 pairs; f32;
                // acc += product · lanes.
                s = s ++ ins("vpsignb", .{ ymm(w0 + r), ymm(x), ymm(tmp) }) ++
                    ins("vpmaddubsw", .{ ymm(tmp), ymm(w_abs0 + r), ymm(tmp) }) ++
                    ins("vpmaddwd", .{ ymm(ones), ymm(tmp), ymm(tmp) }) ++
                    ins("vcvtdq2ps", .{ ymm(tmp), ymm(tmp) }) ++
                    ins("vbroadcastss", .{ std.fmt.comptimePrint("{d}(%%rax)", .{32 * r + 4 * t}), ymm(product) }) ++
                    ins("vfmadd231ps", .{ ymm(product), ymm(tmp), ymm(acc0 + t * R + r) });
            }
        }
        s = s ++ "add $34, %%r8\n" ++ std.fmt.comptimePrint("add ${d}, %%r9\n", .{x_block_bytes}) ++
            \\add %%rdi, %%r10
            \\dec %%r11
            \\jnz 1b
            \\mov 64(%[args]), %%rax
            \\
        ;
        for (0..R * T) |k| s = s ++ ins("vmovaps", .{ ymm(acc0 + k), std.fmt.comptimePrint("{d}(%%rax)", .{32 * k}) });
        return s;
    }
}

/// Runs the R × T tile over all `args.block_count` blocks (≥ 1) and stores its
/// accumulators to `args.acc`; the activation quants of consecutive blocks are
/// `x_block_bytes` apart (32, aligned, or 34: `block_q8_0`s from their `qs`); with
/// `prefetch`, each row's bytes `args.prefetch_bytes` ahead are fetched into L2.
pub inline fn run(comptime R: usize, comptime T: usize, comptime x_block_bytes: usize, comptime prefetch: bool, args: *const Args) void {
    comptime std.debug.assert(x_block_bytes == 32 or x_block_bytes == 34);
    std.debug.assert(args.block_count >= 1);
    asm volatile (source(R, T, x_block_bytes, prefetch)
        :
        : [args] "r" (args),
        : asm_avx2.clobbers);
}
