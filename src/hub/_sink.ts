/**
 * Where downloaded bytes go: written at their offset into the `.incomplete`
 * file and hashed in order (after hashing what an earlier run left). Under
 * Deno both happen on native threads (`_native.ts`) while the caller reads
 * the next bytes; elsewhere both happen on the calling thread.
 *
 * @module
 */
import * as fs from "node:fs";
import process from "node:process";
import { type Hasher, hasherFor } from "./_sha256.ts";
import { downloadNative, WRITE_UNSUPPORTED, writeErrorMessage } from "./_native.ts";

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
  /**
   * `true` when {@linkcode Sink.add} works on other threads: then the bytes
   * handed to it must stay unchanged until the next `add`, `finish` or
   * `abort` resolves (so the caller fills a second buffer meanwhile).
   * `false`: `add` is done when it returns, and the bytes may be reused.
   */
  readonly async: boolean;
  /** Writes `bytes` next and adds them to the hash (waiting for the previous `add` first). */
  add(bytes: Uint8Array): Promise<void> | void;
  /** Closes the file; resolves to the hex digest of everything in it. */
  finish(): Promise<string>;
  /** Closes the file after a failure, once nothing is being written. */
  abort(): Promise<void>;
}

/** Reads of what an earlier run downloaded (a reason: few calls, little memory). */
const PREFIX_READ_BYTES = 4 << 20;

/** Hashes the file's first `prefix_bytes`, reading into two buffers in turn. */
async function hashPrefix(fd: number, prefix_bytes: number, hasher: Hasher): Promise<void> {
  const length = Math.max(1, Math.min(PREFIX_READ_BYTES, prefix_bytes));
  const buffers = [new Uint8Array(length), new Uint8Array(length)];
  let hashing: Promise<void> | void = undefined;
  let turn = 0;
  let position = 0;
  while (position < prefix_bytes) {
    const buffer = buffers[turn];
    const want = Math.min(buffer.length, prefix_bytes - position);
    const n = fs.readSync(fd, buffer, 0, want, position);
    if (n <= 0) throw new Error("the partial download shrank while being read");
    await hashing; // the other buffer's hash, before this one's starts
    hashing = hasher.update(buffer.subarray(0, n));
    position += n;
    turn ^= 1;
  }
  await hashing;
}

function writeAt(fd: number, bytes: Uint8Array, position: number): void {
  let offset = 0;
  while (offset < bytes.length) {
    offset += fs.writeSync(fd, bytes, offset, bytes.length - offset, position + offset);
  }
}

/** A writer of `bytes` at `position`: native and nonblocking where it can be. */
function writerFor(
  fd: number,
  path: string,
): { async: boolean; write: (bytes: Uint8Array, position: number) => Promise<void> | void } {
  const fns = downloadNative();
  if (fns !== null && process.platform !== "win32") {
    return {
      async: true,
      async write(bytes, position) {
        const code = await fns.dotllm_write_at(fd, bytes, BigInt(bytes.length), BigInt(position));
        if (code === WRITE_UNSUPPORTED) return writeAt(fd, bytes, position);
        if (code !== 0) throw new Error(`cannot write ${path}: ${writeErrorMessage(code)}`);
      },
    };
  }
  return { async: false, write: (bytes, position) => writeAt(fd, bytes, position) };
}

/**
 * Opens `options.path` for the rest of a download, after hashing what it
 * holds. (A Web Worker hashing 1 MiB batches handed over by message was
 * measured against hashing inline in bench/pull.ts: on the 2-core machine it
 * cost more CPU than it overlapped, 2.28x curl against 1.46x inline. Native
 * threads take no copies and no second JavaScript heap.)
 */
export async function openSink(options: SinkOptions): Promise<Sink> {
  const fd = fs.openSync(options.path, options.prefix_bytes > 0 ? "r+" : "w");
  const hasher = hasherFor(options.etag, options.size_bytes);
  try {
    await hashPrefix(fd, options.prefix_bytes, hasher);
  } catch (error) {
    fs.closeSync(fd);
    hasher.dispose();
    throw error;
  }
  const writer = writerFor(fd, options.path);
  let written = options.prefix_bytes;
  let open = true;
  // The previous add's write and hash; awaited before the next add, finish or abort.
  let running: Promise<unknown> | undefined;
  const settled = async () => {
    const previous = running;
    running = undefined;
    await previous;
  };
  return {
    async: writer.async || hasher.async,
    add(bytes) {
      const position = written;
      written += bytes.length;
      if (running === undefined) {
        const w = writer.write(bytes, position);
        const h = hasher.update(bytes);
        if (w !== undefined || h !== undefined) running = Promise.all([w, h]);
        return;
      }
      return settled().then(() => {
        running = Promise.all([writer.write(bytes, position), hasher.update(bytes)]);
      });
    },
    async finish() {
      try {
        await settled();
      } finally {
        open = false;
        fs.closeSync(fd);
      }
      return hasher.digest();
    },
    async abort() {
      try {
        await settled();
      } catch {
        // the failure being cleaned up after is already reported
      }
      if (open) fs.closeSync(fd);
      open = false;
      hasher.dispose();
    },
  };
}
