/**
 * The hash a download is checked with: SHA-256 (an LFS etag) or git's blob
 * SHA-1, fed in order, with `update` possibly running on another thread.
 *
 * Under Deno a SHA-256 runs in the native library (`ffi/sha256.zig`, SHA-NI
 * where the CPU has it) through a `nonblocking` FFI call, so it overlaps the
 * next network reads and file writes instead of taking turns with them on
 * the one JavaScript thread. Elsewhere (Bun, no `--allow-ffi`, no library) it
 * is `node:crypto` on the calling thread, at the same speed per byte.
 * `DOTLLM_HUB_HASH=js` picks `node:crypto` under Deno too (tests and
 * bench/pull.ts compare the two).
 *
 * @module
 */
import { createHash } from "node:crypto";
import process from "node:process";
import { detectRuntime } from "../native/_adapter.ts";
import { locateLibrary } from "../native/locate.ts";

/** An incremental hash; one `update` at a time, in order. */
export interface Hasher {
  /** `true` when `update` reads the bytes on another thread after it returns. */
  readonly async: boolean;
  /**
   * Adds `bytes`. An async hasher resolves once the previous update has
   * finished and this one has started: `bytes` must then stay unchanged until
   * the next `update` or `digest` resolves (so two buffers, used in turn, keep
   * the hash busy while the other one fills).
   */
  update(bytes: Uint8Array): Promise<void> | void;
  /** The lowercase hex digest of everything added (waits for a running update). */
  digest(): Promise<string>;
  /** Releases the hash after a failure (waits for a running update). */
  dispose(): Promise<void>;
}

const nativeSymbols = {
  dotllm_sha256_create: { parameters: [], result: "usize" },
  dotllm_sha256_update: {
    parameters: ["usize", "buffer", "usize"],
    result: "void",
    nonblocking: true,
  },
  dotllm_sha256_final: { parameters: ["usize", "buffer"], result: "void" },
} as const;

type NativeSha256 = Deno.DynamicLibrary<typeof nativeSymbols>["symbols"];

let native: NativeSha256 | null | undefined;

/** The native SHA-256 functions, or `null` where they cannot be used (kept for the process). */
function nativeSha256(): NativeSha256 | null {
  if (native !== undefined) return native;
  native = null;
  try {
    if (detectRuntime() !== "deno" || process.env.DOTLLM_HUB_HASH === "js") return native;
    // Both builds (baseline and AVX-512) pick SHA-NI at run time: the baseline will do.
    native = Deno.dlopen(locateLibrary().path, nativeSymbols).symbols;
  } catch {
    native = null; // no --allow-ffi, no library, or one from before ffi/sha256.zig
  }
  return native;
}

function hex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

function nativeHasher(fns: NativeSha256): Hasher | undefined {
  // A usize comes back as a number or a bigint, by size; it goes in as a bigint.
  let state = BigInt(fns.dotllm_sha256_create());
  if (state === 0n) return undefined;
  let running: Promise<void> = Promise.resolve();
  const settle = () => running.catch(() => {});
  return {
    async: true,
    async update(bytes) {
      await running;
      if (state === 0n) throw new Error("the hash was already finished");
      running = fns.dotllm_sha256_update(state, bytes, BigInt(bytes.length));
    },
    async digest() {
      await running;
      const out = new Uint8Array(32);
      fns.dotllm_sha256_final(state, out);
      state = 0n;
      return hex(out);
    },
    async dispose() {
      await settle();
      if (state !== 0n) fns.dotllm_sha256_final(state, null);
      state = 0n;
    },
  };
}

/** A hash for `etag`: 64 hex digits = SHA-256, else git's blob SHA-1 of `size_bytes` bytes. */
export function hasherFor(etag: string, size_bytes: number): Hasher {
  if (etag.length === 64) {
    const fns = nativeSha256();
    const fast = fns ? nativeHasher(fns) : undefined;
    if (fast !== undefined) return fast;
  }
  const hash = createHash(etag.length === 64 ? "sha256" : "sha1");
  if (etag.length !== 64) hash.update(`blob ${size_bytes}\0`);
  return {
    async: false,
    update(bytes) {
      hash.update(bytes);
    },
    digest: () => Promise.resolve(hash.digest("hex")),
    dispose: () => Promise.resolve(),
  };
}
