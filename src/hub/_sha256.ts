/**
 * The hash a download is checked with: SHA-256 (an LFS etag) or git's blob
 * SHA-1, fed in order. A SHA-256 runs in the native library on a thread of its
 * own where it can (`ffi/sha256.zig`, SHA-NI where the CPU has it; see
 * `_native.ts`), else `node:crypto` on the calling thread, at the same speed
 * per byte.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { type DownloadNative, downloadNative } from "./_native.ts";

/** An incremental hash; one `update` at a time, in order. */
export interface Hasher {
  /** `true` when `update` returns a promise (the hash runs on another thread). */
  readonly async: boolean;
  /**
   * Adds `bytes`. A promise means the bytes are being read on another thread:
   * they must stay unchanged, and no other call be made, until it resolves.
   */
  update(bytes: Uint8Array): Promise<void> | void;
  /** The lowercase hex digest of everything added. */
  digest(): string;
  /** Releases the hash after a failure (not while an update runs). */
  dispose(): void;
}

function hex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

function nativeHasher(fns: DownloadNative): Hasher | undefined {
  // A usize comes back as a number or a bigint, by size; it goes in as a bigint.
  let state = BigInt(fns.dotllm_sha256_create());
  if (state === 0n) return undefined;
  const live = () => {
    if (state === 0n) throw new Error("the hash was already finished");
    return state;
  };
  return {
    async: true,
    update: (bytes) => fns.dotllm_sha256_update(live(), bytes, BigInt(bytes.length)),
    digest() {
      const out = new Uint8Array(32);
      fns.dotllm_sha256_final(live(), out);
      state = 0n;
      return hex(out);
    },
    dispose() {
      if (state !== 0n) fns.dotllm_sha256_final(state, null);
      state = 0n;
    },
  };
}

/** A hash for `etag`: 64 hex digits = SHA-256, else git's blob SHA-1 of `size_bytes` bytes. */
export function hasherFor(etag: string, size_bytes: number): Hasher {
  if (etag.length === 64) {
    const fns = downloadNative();
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
    digest: () => hash.digest("hex"),
    dispose() {},
  };
}
