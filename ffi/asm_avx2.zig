//! What the AVX2 assembly tiles (`q8_0_tile_avx2.zig`, `q4_1_tile_avx2.zig`) share: the
//! helpers that write their AT&T source at compile time, and their clobber list.
const std = @import("std");

/// `%ymmN` as it appears in an inline-assembly template.
pub fn ymm(comptime n: usize) []const u8 {
    return std.fmt.comptimePrint("%%ymm{d}", .{n});
}

/// `%xmmN` as it appears in an inline-assembly template.
pub fn xmm(comptime n: usize) []const u8 {
    return std.fmt.comptimePrint("%%xmm{d}", .{n});
}

/// One instruction line: the mnemonic and its operands (AT&T order: sources, then the
/// destination).
pub fn ins(comptime mnemonic: []const u8, comptime operands: anytype) []const u8 {
    var line: []const u8 = mnemonic;
    for (operands, 0..) |operand, i| line = line ++ (if (i == 0) " " else ", ") ++ operand;
    return line ++ "\n";
}

/// What a tile's assembly overwrites: memory (its outputs), the flags, the general
/// registers either tile uses, and all 16 ymm registers. (A register listed but unused
/// only costs the caller a save.)
pub const clobbers: std.builtin.assembly.Clobbers = .{
    .memory = true,
    .cc = true,
    .rax = true,
    .rcx = true,
    .rdx = true,
    .rsi = true,
    .rdi = true,
    .r8 = true,
    .r9 = true,
    .r10 = true,
    .r11 = true,
    .r12 = true,
    .r13 = true,
    .ymm0 = true,
    .ymm1 = true,
    .ymm2 = true,
    .ymm3 = true,
    .ymm4 = true,
    .ymm5 = true,
    .ymm6 = true,
    .ymm7 = true,
    .ymm8 = true,
    .ymm9 = true,
    .ymm10 = true,
    .ymm11 = true,
    .ymm12 = true,
    .ymm13 = true,
    .ymm14 = true,
    .ymm15 = true,
};
