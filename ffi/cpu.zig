//! Run-time CPU feature detection, so that the TypeScript side can pick the
//! fastest library build this CPU can run (the baseline x86-64-v3 build or the
//! AVX-512 one). Compile-time features decide what a build uses; this only
//! tells what the machine has.
const std = @import("std");
const builtin = @import("builtin");

/// Bits of `dotllm_cpu_features`.
pub const Feature = enum(u5) {
    /// AVX2 + FMA + F16C, with OS support for YMM state (x86-64-v3).
    avx2 = 0,
    /// AVX-512 F/BW/CD/DQ/VL, with OS support for ZMM state (x86-64-v4).
    avx512 = 1,
    /// AVX-512 VNNI (`vpdpbusd`).
    avx512vnni = 2,
    /// This library was compiled with AVX-512 (the running build, not the CPU).
    built_avx512 = 16,
};

fn bit(feature: Feature) u32 {
    return @as(u32, 1) << @intFromEnum(feature);
}

const CpuidResult = struct { eax: u32, ebx: u32, ecx: u32, edx: u32 };

fn cpuid(leaf: u32, subleaf: u32) CpuidResult {
    var eax: u32 = undefined;
    var ebx: u32 = undefined;
    var ecx: u32 = undefined;
    var edx: u32 = undefined;
    asm volatile ("cpuid"
        : [eax] "={eax}" (eax),
          [ebx] "={ebx}" (ebx),
          [ecx] "={ecx}" (ecx),
          [edx] "={edx}" (edx),
        : [leaf] "{eax}" (leaf),
          [subleaf] "{ecx}" (subleaf),
    );
    return .{ .eax = eax, .ebx = ebx, .ecx = ecx, .edx = edx };
}

fn xgetbv0() u64 {
    var eax: u32 = undefined;
    var edx: u32 = undefined;
    asm volatile ("xgetbv"
        : [eax] "={eax}" (eax),
          [edx] "={edx}" (edx),
        : [ecx] "{ecx}" (@as(u32, 0)),
    );
    return (@as(u64, edx) << 32) | eax;
}

fn detectX86() u32 {
    var features: u32 = 0;
    const max_leaf = cpuid(0, 0).eax;
    if (max_leaf < 7) return features;
    const leaf1 = cpuid(1, 0);
    const osxsave = leaf1.ecx & (1 << 27) != 0;
    if (!osxsave) return features;
    const xcr0 = xgetbv0();
    const ymm_state = xcr0 & 0b110 == 0b110;
    const zmm_state = xcr0 & 0b1110_0110 == 0b1110_0110;
    const leaf7 = cpuid(7, 0);
    const fma = leaf1.ecx & (1 << 12) != 0;
    const f16c = leaf1.ecx & (1 << 29) != 0;
    const avx2 = leaf7.ebx & (1 << 5) != 0;
    if (ymm_state and fma and f16c and avx2) features |= bit(.avx2);
    const avx512_mask: u32 = (1 << 16) | (1 << 17) | (1 << 28) | (1 << 30) | (1 << 31); // F DQ CD BW VL
    if (zmm_state and leaf7.ebx & avx512_mask == avx512_mask) {
        features |= bit(.avx512);
        if (leaf7.ecx & (1 << 11) != 0) features |= bit(.avx512vnni);
    }
    return features;
}

/// True when the running CPU is an AMD Zen 4: vendor "AuthenticAMD", family 19h, with
/// AVX-512 (Zen 3, the other family-19h cores, has none). Where a library is built for a
/// generic x86-64 level (the release builds), the kernels tuned per CPU model ask this
/// (`simd.prefetchSpans`).
pub fn isZen4() bool {
    return if (builtin.cpu.arch == .x86_64) detectZen4() else false;
}

fn detectZen4() bool {
    const vendor = cpuid(0, 0);
    // "Auth" "enti" "cAMD", in ebx, edx, ecx.
    if (vendor.ebx != 0x68747541 or vendor.edx != 0x69746e65 or vendor.ecx != 0x444d4163) return false;
    const signature = cpuid(1, 0).eax;
    const base_family = (signature >> 8) & 0xF;
    const family = if (base_family == 0xF) base_family + ((signature >> 20) & 0xFF) else base_family;
    return family == 0x19 and detectX86() & bit(.avx512) != 0;
}

/// The features of the running CPU (see `Feature`); 0 on non-x86 CPUs.
export fn dotllm_cpu_features() u32 {
    var features: u32 = if (builtin.cpu.arch == .x86_64) detectX86() else 0;
    if (builtin.cpu.arch == .x86_64 and std.Target.x86.featureSetHas(builtin.cpu.features, .avx512f)) {
        features |= bit(.built_avx512);
    }
    return features;
}

test "detected features agree with what this build was compiled for" {
    const features = dotllm_cpu_features();
    if (builtin.cpu.arch != .x86_64) return error.SkipZigTest;
    // A build that runs here can only use features the CPU has.
    if (std.Target.x86.featureSetHas(builtin.cpu.features, .avx2)) {
        try std.testing.expect(features & bit(.avx2) != 0);
    }
    if (std.Target.x86.featureSetHas(builtin.cpu.features, .avx512bw)) {
        try std.testing.expect(features & bit(.avx512) != 0);
    }
    if (std.Target.x86.featureSetHas(builtin.cpu.features, .avx512vnni)) {
        try std.testing.expect(features & bit(.avx512vnni) != 0);
    }
}

test "a build for Zen 4 runs on a CPU detected as Zen 4" {
    if (builtin.cpu.arch == .x86_64 and builtin.cpu.model == &std.Target.x86.cpu.znver4) {
        try std.testing.expect(isZen4());
    }
    // And no CPU without AVX-512 is taken for one.
    if (dotllm_cpu_features() & bit(.avx512) == 0) try std.testing.expect(!isZen4());
}

test "no build targets SSE4a (build.zig leaves it out: its insertq stalled the Q4_K kernels on Zen 3)" {
    if (builtin.cpu.arch != .x86_64) return;
    try std.testing.expect(!std.Target.x86.featureSetHas(builtin.cpu.features, .sse4a));
}
