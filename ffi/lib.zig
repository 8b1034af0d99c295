//! Root of dotllm's native library: the ABI version and the exports of every module.
//!
//! The FFI boundary is narrow: every export is `dotllm_<op>[_<type>]`, takes pointers
//! (as addresses) and integer counts only, and never allocates on a hot path.
const std = @import("std");

pub const cpu = @import("cpu.zig");
pub const mem = @import("mem.zig");

/// Bumped whenever an export is added, removed or changes its signature.
/// `src/native/symbols.ts` holds the same number and refuses any other.
pub const abi_version: u32 = 2;

export fn dotllm_abi_version() u32 {
    return abi_version;
}

comptime {
    // Reference every module so that its exports are compiled into the library.
    _ = cpu;
    _ = mem;
}

test {
    std.testing.refAllDecls(@This());
}
