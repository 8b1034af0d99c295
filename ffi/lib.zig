//! Root of dotllm's native library: the ABI version and the exports of every module.
//!
//! The FFI boundary is narrow: pools, memory, the type table (`dotllm_type_info`,
//! row conversions) and `dotllm_graph_run`, through which every kernel runs (a direct
//! call is a graph of one op). Pointers cross as addresses; nothing allocates on a hot path.
const std = @import("std");

pub const cpu = @import("cpu.zig");
pub const mem = @import("mem.zig");
pub const pool = @import("pool.zig");
pub const simd = @import("simd.zig");
pub const quant = @import("quant.zig");
pub const types = @import("types.zig");
pub const matmul_quant = @import("matmul_quant.zig");
pub const matmul = @import("matmul.zig");
pub const ops = @import("ops.zig");
pub const attention = @import("attention.zig");
pub const bandwidth = @import("bandwidth.zig");
pub const graph = @import("graph.zig");

/// Panics on a pool worker are reported to the dispatching caller instead of
/// aborting (see `pool.zig`); anywhere else this is Zig's default handler.
pub const panic = std.debug.FullPanic(pool.panicHandler);

/// Bumped whenever an export is added, removed or changes its signature.
/// `src/native/symbols.ts` holds the same number and refuses any other.
pub const abi_version: u32 = 10;

export fn dotllm_abi_version() u32 {
    return abi_version;
}

comptime {
    // Reference every module so that its exports are compiled into the library.
    _ = cpu;
    _ = mem;
    _ = pool;
    _ = quant;
    _ = types;
    _ = matmul_quant;
    _ = matmul;
    _ = ops;
    _ = attention;
    _ = bandwidth;
    _ = graph;
}

test {
    std.testing.refAllDecls(@This());
    _ = @import("hot_path_test.zig");
    _ = @import("arch_ops.zig");
    _ = @import("quant_act.zig");
    _ = @import("quant_legacy.zig");
    _ = @import("quant_q4_1_tile.zig");
    _ = @import("quant_k_test.zig");
    _ = @import("repack.zig");
    _ = @import("kv_types.zig");
    _ = @import("flash_attention.zig");
}
