/**
 * Where downloaded bytes go: written at their offset into the `.incomplete`
 * file as they arrive, and hashed in order (after hashing what an earlier run
 * left) by a {@linkcode Hasher} that may run on another thread.
 *
 * @module
 */
import * as fs from "node:fs";
import { type Hasher, hasherFor } from "./_sha256.ts";

/** How to open a sink. */
export interface SinkOptions {
  path: string;
  /** Bytes already in the file (hashed first, then appended after). */
  prefix_bytes: number;
  /** 64 hex = sha256; 40 hex = git blob sha1 of `size_bytes` bytes. */
  etag: string;
  size_bytes: number;
}

/** A file being written and hashed. */
export interface Sink {
  /** `true` when {@linkcode Sink.hash} reads its bytes on another thread after it resolves. */
  readonly async_hash: boolean;
  /** Writes `bytes` next. */
  write(bytes: Uint8Array): void;
  /**
   * Adds the next written bytes to the hash, in the order written. With an
   * async hash, `bytes` must stay unchanged until the next `hash` or `finish`
   * resolves (see {@linkcode Hasher.update}).
   */
  hash(bytes: Uint8Array): Promise<void> | void;
  /** Closes the file; resolves to the hex digest of everything in it. */
  finish(): Promise<string>;
  /** Closes the file after a failure. */
  abort(): Promise<void>;
}

/** Reads of what an earlier run downloaded (a reason: few calls, little memory). */
const PREFIX_READ_BYTES = 4 << 20;

/** Hashes the file's first `prefix_bytes`, reading into two buffers in turn. */
async function hashPrefix(fd: number, prefix_bytes: number, hasher: Hasher): Promise<void> {
  const length = Math.max(1, Math.min(PREFIX_READ_BYTES, prefix_bytes));
  const buffers = [new Uint8Array(length), new Uint8Array(length)];
  let turn = 0;
  let position = 0;
  while (position < prefix_bytes) {
    const buffer = buffers[turn];
    const want = Math.min(buffer.length, prefix_bytes - position);
    const n = fs.readSync(fd, buffer, 0, want, position);
    if (n <= 0) throw new Error("the partial download shrank while being read");
    await hasher.update(buffer.subarray(0, n));
    position += n;
    turn ^= 1;
  }
}

function writeAt(fd: number, bytes: Uint8Array, position: number): void {
  let offset = 0;
  while (offset < bytes.length) {
    offset += fs.writeSync(fd, bytes, offset, bytes.length - offset, position + offset);
  }
}

/**
 * Opens `options.path` for the rest of a download, after hashing what it
 * holds. Writes happen on this thread; the hash may not (see `_sha256.ts`).
 * (A Web Worker hashing 1 MiB batches handed over by message was measured
 * against hashing inline in bench/pull.ts: on the 2-core machine it cost more
 * CPU than it overlapped, 2.28x curl against 1.46x inline.)
 */
export async function openSink(options: SinkOptions): Promise<Sink> {
  const fd = fs.openSync(options.path, options.prefix_bytes > 0 ? "r+" : "w");
  const hasher = hasherFor(options.etag, options.size_bytes);
  try {
    await hashPrefix(fd, options.prefix_bytes, hasher);
  } catch (error) {
    fs.closeSync(fd);
    await hasher.dispose();
    throw error;
  }
  let written = options.prefix_bytes;
  let hashed = options.prefix_bytes;
  let open = true;
  return {
    async_hash: hasher.async,
    write(bytes) {
      writeAt(fd, bytes, written);
      written += bytes.length;
    },
    hash(bytes) {
      hashed += bytes.length;
      if (hashed > written) throw new Error("hashed bytes that were not written");
      return hasher.update(bytes);
    },
    async finish() {
      open = false;
      fs.closeSync(fd);
      // Every byte in the file, and nothing else, goes into the digest.
      if (hashed !== written) {
        await hasher.dispose();
        throw new Error(`wrote ${written} bytes but hashed ${hashed}`);
      }
      return await hasher.digest();
    },
    async abort() {
      if (open) fs.closeSync(fd);
      open = false;
      await hasher.dispose();
    },
  };
}
