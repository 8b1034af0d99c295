//! The Q4_1 tile for AVX2 without AVX-512 (16 ymm registers), in assembly: the 2R rows
//! of R row pairs of an 8-row group (repack.zig's `Q4_1x8` layout, `Group` below) × T
//! tokens, every block of the rows in one loop. The kernel of a Q4_1 GEMV (8 rows, 1
//! token), of a 2-4 sequence decode step and of prompt tiles.
//!
//! Arithmetic: per output, llama.cpp's x86 `ggml_vec_dot_q4_1_q8_1` (AVX2 branch): an
//! 8-lane f32 accumulator takes, block by block in order, acc = fma(dw·da, lanes, acc)
//! with lane g = Σ_{j<4} q[4g+j]·a[4g+j] computed exactly by `vpmaddubsw` (codes 0..15
//! × signed quants, byte pairs; |pair| ≤ 2·15·127 < 2^15) and `vpmaddwd` by ones, then
//! `vcvtdq2ps`. The product dw·da is one f32 multiply of two f16 values (exact) and
//! the fma one rounding. The min terms (Σ m·s, exact products added in block order)
//! and ggml's `hsum_float_8` are the caller's (`quant_legacy.zig`), so every output
//! equals `Q4_1.vecDot` bit for bit (repack.zig's tests compare).
//!
//! An output and block costs 5 instructions (`vpmaddubsw` with the token's quants from
//! memory, `vpmaddwd`, `vcvtdq2ps`, `vbroadcastss` of its product, `vfmadd231ps`); a
//! block adds, per row pair, one load, a shift and two masks (both rows' codes from one
//! vector). The products dw·da come from `fillProducts`, once per chunk of blocks for
//! all passes: computed inside the loop (a multiply and a store per token and block,
//! then read back) they cost a third of the tile's time. Measured on the AVX2 Zen 3
//! host (3.2 GHz; SmolLM2's 1536 × 576 ffn_gate shape, random blocks, 1 thread, best
//! of 8 rounds, two runs), ns per output and block: 0.84-0.89 at 1 token and
//! 0.72-0.73 at 4, against 1.45 and 1.50-1.58 for the Zig kernel it replaces (LLVM
//! broadcast each product with two shuffles, converted every token's f16 d and s per
//! pass, and spilled). The bare 5-instruction sequence runs at 1.5 cycles (0.47 ns).
//!
//! Registers: ymm0 16 × i16 ones; ymm1 32 × 0x0F; ymm2 the row pair's codes, then the
//! even row's; ymm3 the odd row's; ymm4 a temporary; ymm5 a product; 2R·T accumulators
//! from ymm6: 6 + 2R·T ≤ 16 gives 8 rows at 1 token, 4 at 2, 2 at 3-4. General
//! registers: r8 the group's current block, r9 / rcx / rdx / rsi the tokens' current
//! activation blocks, r10 the prefetch distance, r11 blocks left, rax the current
//! block's products, rdi the accumulators.
const std = @import("std");
const asm_avx2 = @import("asm_avx2.zig");
const ymm = asm_avx2.ymm;
const ins = asm_avx2.ins;

/// Rows of a group: the layout's and the GEMV's.
pub const group_rows = 8;
/// Most tokens of one tile (four token pointers).
pub const max_tokens = 4;

/// Block b of 8 Q4_1 rows (160 bytes, as 8 blocks): the scales, the mins, then each row
/// pair's codes in one 32-byte vector, byte k = element k of the even row (low nibble)
/// | element k of the odd row (high nibble), elements in ggml's order (element k < 16
/// is the low nibble of the block's byte k, element 16 + k its high nibble).
pub const Group = extern struct {
    d: [group_rows]f16,
    m: [group_rows]f16,
    qs: [group_rows / 2][32]u8,
};

comptime {
    std.debug.assert(@sizeOf(Group) == 160 and @offsetOf(Group, "qs") == 32);
}

/// The activation block the tile reads (`quant_act.Q8_1F32`): quants at 0, d (f32) at 32.
pub const act_block_bytes = 64;
const act_d_offset = 32;

/// What the tile reads, at block 0: the assembly takes one pointer to this.
pub const Args = extern struct {
    /// The group's block 0 (blocks follow every `@sizeOf(Group)`).
    w: [*]align(1) const Group,
    /// Each token's block 0 (T of them are read).
    x: [max_tokens][*]const u8,
    /// Blocks, at least 1.
    block_count: usize,
    /// How far ahead of the current block the prefetching variant fetches, in bytes.
    prefetch_bytes: usize,
    /// The products dw_r · da_t of every block, block-major: block b's T × 8 floats
    /// (token-major) at `products + 8·T·b` (`fillProducts`).
    products: [*]align(32) const f32,
    /// In and out: the accumulator of (row 2·p0 + i, token t) at acc[t·2R + i], read
    /// at the start (zeros, or a previous run's over the blocks before) and written at
    /// the end.
    acc: *align(32) [2 * max_tokens][8]f32,
};

comptime {
    // The assembly reads the fields at these offsets.
    std.debug.assert(@offsetOf(Args, "w") == 0 and @offsetOf(Args, "x") == 8);
    std.debug.assert(@offsetOf(Args, "block_count") == 40 and @offsetOf(Args, "prefetch_bytes") == 48);
    std.debug.assert(@offsetOf(Args, "products") == 56 and @offsetOf(Args, "acc") == 64);
}

/// Most blocks of one run: the caller's products array holds this many blocks' (T × 8
/// floats each, 32 KiB at 4 tokens, on the stack); longer rows run in chunks, the
/// accumulators carried through `Args.acc`.
pub const chunk_blocks = 256;

/// products[b][t][r] = dw_r · da_t (one f32 multiply of two f16 values: exact, as
/// ggml's `d0 * d1`) for the `w.len` blocks of a group, and sums[t] lane r += m_r · s_t
/// block by block (exact products, each add rounded as ggml's `summs += m*s`). `a_rows`:
/// T rows of `quant_act.Q8_1F32` blocks from the same block on.
pub fn fillProducts(comptime T: usize, w: []align(1) const Group, a_rows: anytype, products: *align(32) [chunk_blocks][T][group_rows]f32, sums: *[T]@Vector(group_rows, f32)) void {
    const F32x8 = @Vector(group_rows, f32);
    std.debug.assert(w.len <= chunk_blocks);
    for (w, 0..) |*g, b| {
        const dw: F32x8 = @as(@Vector(group_rows, f16), g.d);
        const mw: F32x8 = @as(@Vector(group_rows, f16), g.m);
        inline for (0..T) |t| {
            products[b][t] = dw * @as(F32x8, @splat(a_rows[t][b].d));
            sums[t] = @mulAdd(F32x8, mw, @splat(a_rows[t][b].s), sums[t]);
        }
    }
}

/// Token t's activation pointer register.
const token_registers = [max_tokens][]const u8{ "%%r9", "%%rcx", "%%rdx", "%%rsi" };

/// Byte `offset` of token t's current block.
fn tokenAt(comptime t: usize, comptime offset: usize) []const u8 {
    return std.fmt.comptimePrint("{d}({s})", .{ offset, token_registers[t] });
}

/// The tile's assembly (AT&T syntax): row pairs p0..p0+R−1, T tokens, prefetching the
/// weights `prefetch_bytes` ahead or not.
fn source(comptime p0: usize, comptime R: usize, comptime T: usize, comptime prefetch: bool) []const u8 {
    @setEvalBranchQuota(1_000_000);
    comptime {
        std.debug.assert(R >= 1 and p0 + R <= group_rows / 2 and 1 <= T and T <= max_tokens);
        const ones = 0;
        const mask = 1;
        const even = 2;
        const odd = 3;
        const tmp = 4;
        const product = 5;
        const acc0 = 6;
        std.debug.assert(acc0 + 2 * R * T <= 16);
        var s: []const u8 =
            \\mov $0x00010001, %%eax
            \\vmovd %%eax, %%xmm0
            \\vpbroadcastd %%xmm0, %%ymm0
            \\mov $0x0F0F0F0F, %%eax
            \\vmovd %%eax, %%xmm1
            \\vpbroadcastd %%xmm1, %%ymm1
            \\mov 0(%[args]), %%r8
            \\mov 8(%[args]), %%r9
            \\mov 16(%[args]), %%rcx
            \\mov 24(%[args]), %%rdx
            \\mov 32(%[args]), %%rsi
            \\mov 40(%[args]), %%r11
            \\mov 48(%[args]), %%r10
            \\mov 56(%[args]), %%rax
            \\mov 64(%[args]), %%rdi
            \\
        ;
        for (0..2 * R * T) |k| s = s ++ ins("vmovaps", .{ std.fmt.comptimePrint("{d}(%%rdi)", .{32 * k}), ymm(acc0 + k) });
        s = s ++ "1:\n";
        if (prefetch) {
            // The block's 160 bytes, `prefetch_bytes` on (into L2, as `simd.prefetchAhead`).
            for (0..3) |k| s = s ++ ins("prefetcht1", .{std.fmt.comptimePrint("{d}(%%r8,%%r10,1)", .{64 * k})});
        }
        for (0..R) |i| {
            const p = p0 + i;
            // The pair's codes; the even row's in the low nibbles, the odd row's high.
            s = s ++ ins("vmovdqu", .{ std.fmt.comptimePrint("{d}(%%r8)", .{32 + 32 * p}), ymm(even) }) ++
                ins("vpsrlw", .{ "$4", ymm(even), ymm(odd) }) ++
                ins("vpand", .{ ymm(mask), ymm(even), ymm(even) }) ++
                ins("vpand", .{ ymm(mask), ymm(odd), ymm(odd) });
            for (0..T) |t| {
                for (0..2) |side| {
                    const row = 2 * p + side;
                    // tmp = codes × quants in byte pairs; i16 pairs; f32; acc += product · lanes.
                    s = s ++ ins("vpmaddubsw", .{ tokenAt(t, 0), ymm(if (side == 0) even else odd), ymm(tmp) }) ++
                        ins("vpmaddwd", .{ ymm(ones), ymm(tmp), ymm(tmp) }) ++
                        ins("vcvtdq2ps", .{ ymm(tmp), ymm(tmp) }) ++
                        ins("vbroadcastss", .{ std.fmt.comptimePrint("{d}(%%rax)", .{32 * t + 4 * row}), ymm(product) }) ++
                        ins("vfmadd231ps", .{ ymm(product), ymm(tmp), ymm(acc0 + t * 2 * R + 2 * i + side) });
                }
            }
        }
        s = s ++ std.fmt.comptimePrint("add ${d}, %%r8\n", .{@sizeOf(Group)});
        for (0..T) |t| s = s ++ std.fmt.comptimePrint("add ${d}, {s}\n", .{ act_block_bytes, token_registers[t] });
        s = s ++ std.fmt.comptimePrint("add ${d}, %%rax\n", .{4 * group_rows * T});
        s = s ++
            \\dec %%r11
            \\jnz 1b
            \\
        ;
        for (0..2 * R * T) |k| s = s ++ ins("vmovaps", .{ ymm(acc0 + k), std.fmt.comptimePrint("{d}(%%rdi)", .{32 * k}) });
        return s;
    }
}

/// Runs the tile of row pairs p0..p0+R−1 × T tokens over all `args.block_count` blocks
/// (≥ 1, at most `chunk_blocks`), from and back to the accumulators at `args.acc`.
pub inline fn run(comptime p0: usize, comptime R: usize, comptime T: usize, comptime prefetch: bool, args: *const Args) void {
    std.debug.assert(args.block_count >= 1 and args.block_count <= chunk_blocks);
    asm volatile (source(p0, R, T, prefetch)
        :
        : [args] "r" (args),
        : asm_avx2.clobbers);
}

/// Block b of 8 Q4_1 rows as a `Group` (the load-time repack); `Block` is ggml's
/// block_q4_1 (`d`, `m`, 16 bytes `qs`).
pub fn groupOf(comptime Block: type, w_rows: [group_rows][]align(1) const Block, b: usize) Group {
    var out: Group = undefined;
    for (0..group_rows) |r| {
        out.d[r] = w_rows[r][b].d;
        out.m[r] = w_rows[r][b].m;
    }
    for (0..group_rows / 2) |p| {
        for (0..32) |k| {
            out.qs[p][k] = code(&w_rows[2 * p][b].qs, k) | code(&w_rows[2 * p + 1][b].qs, k) << 4;
        }
    }
    return out;
}

/// Element k's 4-bit code of a block's 16 bytes.
fn code(qs: *const [16]u8, k: usize) u8 {
    return if (k < 16) qs[k] & 0x0F else qs[k - 16] >> 4;
}
