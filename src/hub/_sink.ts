/**
 * Where downloaded bytes go: written at their offset into the `.incomplete`
 * file and hashed as they arrive (after hashing what an earlier run left).
 *
 * @module
 */
import * as fs from "node:fs";
import { createHash, type Hash } from "node:crypto";

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
  /** Writes `bytes` next. */
  write(bytes: Uint8Array): void;
  /** Closes the file; resolves to the hex digest of everything in it. */
  finish(): string;
  /** Closes the file after a failure. */
  abort(): void;
}

/** Opens the file and returns a hash over what it holds already. */
function openAndHashPrefix(o: SinkOptions): { fd: number; hash: Hash } {
  const fd = fs.openSync(o.path, o.prefix_bytes > 0 ? "r+" : "w");
  try {
    return { fd, hash: hashPrefix(fs, createHash, o, fd) };
  } catch (error) {
    fs.closeSync(fd);
    throw error;
  }
}

function hashPrefix(fsModule: typeof fs, create: typeof createHash, o: SinkOptions, fd: number) {
  const hash = create(o.etag.length === 64 ? "sha256" : "sha1");
  if (o.etag.length !== 64) hash.update(`blob ${o.size_bytes}\0`);
  // 4 MiB reads of what an earlier run downloaded
  const buffer = new Uint8Array(Math.max(1, Math.min(4 << 20, o.prefix_bytes)));
  let position = 0;
  while (position < o.prefix_bytes) {
    const want = Math.min(buffer.length, o.prefix_bytes - position);
    const n = fsModule.readSync(fd, buffer, 0, want, position);
    if (n <= 0) throw new Error("the partial download shrank while being read");
    hash.update(buffer.subarray(0, n));
    position += n;
  }
  return hash;
}

/**
 * Bytes per write(2) (a reason: on the Firecracker VM the benchmarks run on,
 * 1-4 MiB writes went at a fifth of the speed of 64 KiB ones now and then, as
 * the kernel gives big writes big page-cache folios, which there often land on
 * guest memory the host has not backed yet; curl writes 16-64 KiB at a time).
 */
const WRITE_PIECE_BYTES = 64 << 10;

function writeAt(fd: number, bytes: Uint8Array, position: number): void {
  let offset = 0;
  while (offset < bytes.length) {
    const length = Math.min(bytes.length - offset, WRITE_PIECE_BYTES);
    offset += fs.writeSync(fd, bytes, offset, length, position + offset);
  }
}

/**
 * Opens `options.path` for the rest of a download, writing and hashing on
 * this thread, each chunk while it is still in the CPU's cache. Two ways of
 * overlapping them were measured against this in bench/pull.ts on the 2-core
 * machine, and both cost more CPU than they overlapped: a hash worker with
 * 1 MiB batches handed over (2.28x curl against 1.46x inline), and native
 * threads (SHA-NI and pwrite through nonblocking FFI calls, on 4 MiB batches:
 * 580-660 ms of CPU against 590-630 inline, 1.56x and 2.00x curl against 1.30x
 * and 2.08x, as the other core re-reads each batch from memory).
 */
export function openSink(options: SinkOptions): Sink {
  const { fd, hash } = openAndHashPrefix(options);
  let position = options.prefix_bytes;
  let open = true;
  return {
    write(bytes) {
      writeAt(fd, bytes, position);
      hash.update(bytes);
      position += bytes.length;
    },
    finish() {
      open = false;
      fs.closeSync(fd);
      return hash.digest("hex");
    },
    abort() {
      if (open) fs.closeSync(fd);
      open = false;
    },
  };
}
