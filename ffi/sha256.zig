//! Incremental SHA-256 for checking downloads (`dotllm pull` hashes a model
//! as it arrives, on a thread of its own), using the x86 SHA extensions
//! (SHA-NI) when the running CPU has them.
//!
//! `std.crypto.hash.sha2.Sha256` picks SHA-NI only at compile time, and the
//! shipped x86-64 builds (x86-64-v3, x86-64-v4) do not include it: there its
//! portable rounds run at about a third of the speed. Here the block function
//! is chosen at run time instead (CPUID leaf 7, EBX bit 29); std's code stays
//! the reference (the tests compare both on every split of random data) and
//! does the buffering of partial blocks and the final padding.
const std = @import("std");
const builtin = @import("builtin");

const Sha256 = std.crypto.hash.sha2.Sha256;

/// The hashing state handed to JavaScript.
pub const Hasher = Sha256;

/// Size of the digest `dotllm_sha256_final` writes.
pub const digest_bytes = Sha256.digest_length;

const V4u32 = @Vector(4, u32);

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

/// Whether this x86-64 CPU has SHA-NI (every such CPU also has the SSSE3 `palignr` used with it).
fn detectShaNi() bool {
    if (cpuid(0, 0).eax < 7) return false;
    return cpuid(7, 0).ebx & (1 << 29) != 0;
}

/// Decided once, on first use (a race only computes the same answer twice).
var sha_ni_state = std.atomic.Value(u8).init(0); // 0 unknown, 1 no, 2 yes

/// Whether `update` uses SHA-NI on this machine.
pub fn hasShaNi() bool {
    return if (builtin.cpu.arch == .x86_64) hasShaNiX86() else false;
}

fn hasShaNiX86() bool {
    const known = sha_ni_state.load(.monotonic);
    if (known != 0) return known == 2;
    const yes = detectShaNi();
    sha_ni_state.store(if (yes) 2 else 1, .monotonic);
    return yes;
}

const K = [64]u32{
    0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
    0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
    0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
    0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
    0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
    0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
    0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
    0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2,
};

/// SHA-NI rounds over whole 64-byte blocks (the same instruction sequence as
/// std's compile-time SHA-NI path, with SSE `palignr` so it needs no AVX).
fn blocksShaNi(state: *[8]u32, blocks: []const u8) void {
    std.debug.assert(blocks.len % 64 == 0);
    var x: V4u32 = .{ state[5], state[4], state[1], state[0] };
    var y: V4u32 = .{ state[7], state[6], state[3], state[2] };
    var off: usize = 0;
    while (off < blocks.len) : (off += 64) {
        const x0 = x;
        const y0 = y;
        var s: [16]V4u32 = undefined;
        inline for (0..4) |q| {
            var w: [4]u32 = undefined;
            inline for (0..4) |j| {
                w[j] = std.mem.readInt(u32, blocks[off + 16 * q + 4 * j ..][0..4], .big);
            }
            s[q] = w;
        }
        inline for (0..16) |k| {
            if (k < 12) {
                var tmp = s[k];
                s[k + 4] = asm (
                    \\ sha256msg1 %[w4_7], %[tmp]
                    \\ movdqa %[w12_15], %[result]
                    \\ palignr $0x4, %[w8_11], %[result]
                    \\ paddd %[tmp], %[result]
                    \\ sha256msg2 %[w12_15], %[result]
                    : [tmp] "=&x" (tmp),
                      [result] "=&x" (-> V4u32),
                    : [_] "0" (tmp),
                      [w4_7] "x" (s[k + 1]),
                      [w8_11] "x" (s[k + 2]),
                      [w12_15] "x" (s[k + 3]),
                );
            }
            const w: V4u32 = s[k] +% @as(V4u32, K[4 * k ..][0..4].*);
            y = asm ("sha256rnds2 %[x], %[y]"
                : [y] "=x" (-> V4u32),
                : [_] "0" (y),
                  [x] "x" (x),
                  [_] "{xmm0}" (w),
            );
            x = asm ("sha256rnds2 %[y], %[x]"
                : [x] "=x" (-> V4u32),
                : [_] "0" (x),
                  [y] "x" (y),
                  [_] "{xmm0}" (@as(V4u32, @bitCast(@as(u128, @bitCast(w)) >> 64))),
            );
        }
        x +%= x0;
        y +%= y0;
    }
    state[0] = x[3];
    state[1] = x[2];
    state[4] = x[1];
    state[5] = x[0];
    state[2] = y[3];
    state[3] = y[2];
    state[6] = y[1];
    state[7] = y[0];
}

/// Adds `bytes` to `h`: whole blocks through SHA-NI when `sha_ni`, the rest
/// (and everything on other CPUs) through std's rounds.
pub fn update(h: *Sha256, bytes: []const u8, sha_ni: bool) void {
    if (builtin.cpu.arch == .x86_64 and sha_ni) updateShaNi(h, bytes) else h.update(bytes);
}

fn updateShaNi(h: *Sha256, bytes: []const u8) void {
    var off: usize = 0;
    if (h.buf_len != 0) {
        // Complete the buffered partial block first (std hashes it when full).
        off = @min(bytes.len, 64 - @as(usize, h.buf_len));
        h.update(bytes[0..off]);
        if (h.buf_len != 0) return;
    }
    const whole = (bytes.len - off) / 64 * 64;
    if (whole > 0) {
        blocksShaNi(&h.s, bytes[off..][0..whole]);
        h.total_len += whole;
        off += whole;
    }
    h.update(bytes[off..]);
}

/// A new SHA-256 state, or 0 when out of memory. Free it with `dotllm_sha256_final`.
export fn dotllm_sha256_create() usize {
    const h = std.heap.c_allocator.create(Sha256) catch return 0;
    h.* = Sha256.init(.{});
    return @intFromPtr(h);
}

/// Adds `bytes[0..len]` to the state at `state` (safe to call on another thread
/// than the one that made it, one call at a time).
export fn dotllm_sha256_update(state: usize, bytes: usize, len: usize) void {
    if (state == 0 or len == 0) return;
    const h: *Sha256 = @ptrFromInt(state);
    const p: [*]const u8 = @ptrFromInt(bytes);
    update(h, p[0..len], hasShaNi());
}

/// Writes the 32-byte digest to `out` (when not 0) and frees the state.
export fn dotllm_sha256_final(state: usize, out: usize) void {
    if (state == 0) return;
    const h: *Sha256 = @ptrFromInt(state);
    if (out != 0) {
        const o: *[digest_bytes]u8 = @ptrFromInt(out);
        h.final(o);
    }
    std.heap.c_allocator.destroy(h);
}

/// 1 when this CPU's SHA-256 runs on SHA-NI, else 0 (for benchmarks and tests).
export fn dotllm_sha256_sha_ni() u32 {
    return @intFromBool(hasShaNi());
}

fn hexDigest(h: *Sha256) [64]u8 {
    var d: [digest_bytes]u8 = undefined;
    h.final(&d);
    return std.fmt.bytesToHex(d, .lower);
}

test "NIST vectors through both paths" {
    const cases = [_][2][]const u8{
        .{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
        .{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
        .{
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
        },
    };
    for ([_]bool{ false, true }) |ni| {
        if (ni and !hasShaNi()) continue;
        for (cases) |c| {
            var h = Sha256.init(.{});
            update(&h, c[0], ni);
            try std.testing.expectEqualStrings(c[1], &hexDigest(&h));
        }
        // One million 'a's, in uneven pieces.
        var h = Sha256.init(.{});
        var block: [1000]u8 = undefined;
        @memset(&block, 'a');
        var done: usize = 0;
        var piece: usize = 1;
        while (done < 1_000_000) : (piece = piece * 7 % 997 + 1) {
            const n = @min(piece, 1_000_000 - done);
            update(&h, block[0..n], ni);
            done += n;
        }
        try std.testing.expectEqualStrings(
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
            &hexDigest(&h),
        );
    }
}

test "SHA-NI equals std's rounds on every split of random data" {
    if (!hasShaNi()) return error.SkipZigTest;
    var prng = std.Random.DefaultPrng.init(0x5a256);
    var data: [4096 + 77]u8 = undefined;
    prng.random().bytes(&data);
    var split: usize = 0;
    while (split <= data.len) : (split += 13) {
        var a = Sha256.init(.{});
        a.update(data[0..split]);
        a.update(data[split..]);
        var b = Sha256.init(.{});
        update(&b, data[0..split], true);
        update(&b, data[split..], true);
        try std.testing.expectEqualStrings(&hexDigest(&a), &hexDigest(&b));
    }
}

test "the exported functions hash like std" {
    const state = dotllm_sha256_create();
    try std.testing.expect(state != 0);
    const text = "hello, hub";
    dotllm_sha256_update(state, @intFromPtr(text.ptr), text.len);
    var out: [digest_bytes]u8 = undefined;
    dotllm_sha256_final(state, @intFromPtr(&out));
    var want: [digest_bytes]u8 = undefined;
    Sha256.hash(text, &want, .{});
    try std.testing.expectEqualSlices(u8, &want, &out);
}
