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
  write(bytes: Uint8Array): void | Promise<void>;
  /** Closes the file; resolves to the hex digest of everything in it. */
  finish(): string | Promise<string>;
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

function writeAt(fd: number, bytes: Uint8Array, position: number): void {
  let offset = 0;
  while (offset < bytes.length) {
    offset += fs.writeSync(fd, bytes, offset, bytes.length - offset, position + offset);
  }
}

/**
 * Opens `options.path` for the rest of a download. Writing and hashing stay
 * on the calling thread: a worker for the hash was tried and cost ~0.4 s more
 * CPU per 250 MB in messages than it saved on this 2-core machine.
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

/** Files at least this large hash on a worker (a reason: starting one costs ~30 ms). */
const WORKER_MIN_BYTES = 16 << 20;
/** Bytes per message to the hash worker (a reason: few messages; a copy into it is cheap). */
const BATCH_BYTES = 1 << 20;
/** Batches in flight before the reader waits (a reason: bounded memory, 8 MiB). */
const MAX_BATCHES = 8;

const WORKER_SOURCE = `
import * as fs from "node:fs";
import { createHash } from "node:crypto";
const hashPrefix = HASH_PREFIX;
let hash;
self.onmessage = (event) => {
  const m = event.data;
  try {
    if (m.type === "open") {
      const fd = fs.openSync(m.options.path, "r");
      try {
        hash = hashPrefix(fs, createHash, m.options, fd);
      } finally {
        fs.closeSync(fd);
      }
      self.postMessage({ type: "ack" });
    } else if (m.type === "data") {
      hash.update(new Uint8Array(m.buffer, 0, m.length));
      self.postMessage({ type: "ack", buffer: m.buffer }, [m.buffer]);
    } else if (m.type === "finish") {
      self.postMessage({ type: "done", digest: hash.digest("hex") });
    }
  } catch (error) {
    self.postMessage({ type: "error", message: String(error && error.message || error) });
  }
};
`;

/**
 * Like {@link openSink}, but the hash runs on a worker thread beside the
 * network read and the disk write: the bytes are written here, copied into
 * 1 MiB batches and handed over (the batch buffers travel back and forth).
 * Falls back to {@link openSink} for small files and where workers are missing.
 */
export async function openParallelSink(options: SinkOptions): Promise<Sink> {
  if (
    options.size_bytes - options.prefix_bytes < WORKER_MIN_BYTES || typeof Worker !== "function"
  ) {
    return openSink(options);
  }
  const source = WORKER_SOURCE.replace("HASH_PREFIX", hashPrefix.toString());
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  let worker: Worker;
  try {
    worker = new Worker(url, { type: "module" });
  } catch {
    URL.revokeObjectURL(url);
    return openSink(options);
  }
  const fd = fs.openSync(options.path, options.prefix_bytes > 0 ? "r+" : "w");
  let position = options.prefix_bytes;
  let inFlight = 0;
  let digest: string | undefined;
  let failure: Error | undefined;
  let onEvent: (() => void) | undefined;
  const spare: ArrayBuffer[] = [];
  worker.onmessage = (event: MessageEvent) => {
    const m = event.data;
    if (m.type === "ack") {
      inFlight--;
      if (m.buffer) spare.push(m.buffer);
    } else if (m.type === "done") digest = m.digest;
    else if (m.type === "error") failure = new Error(m.message);
    onEvent?.();
  };
  worker.onerror = (event: ErrorEvent) => {
    event.preventDefault();
    failure = new Error(event.message || "the hash worker failed");
    onEvent?.();
  };
  const until = async (done: () => boolean) => {
    while (!done() && failure === undefined) {
      await new Promise<void>((resolve) => (onEvent = resolve));
    }
    onEvent = undefined;
    if (failure !== undefined) throw failure;
  };
  let open = true;
  const stop = () => {
    if (!open) return;
    open = false;
    fs.closeSync(fd);
    worker.terminate();
    URL.revokeObjectURL(url);
  };
  inFlight++;
  worker.postMessage({ type: "open", options });
  try {
    await until(() => inFlight === 0); // the earlier part hashed
  } catch (error) {
    stop();
    throw error;
  }
  let batch = new Uint8Array(BATCH_BYTES);
  let filled = 0;
  const send = async () => {
    if (filled === 0) return;
    inFlight++;
    worker.postMessage({ type: "data", buffer: batch.buffer, length: filled }, [batch.buffer]);
    batch = new Uint8Array(spare.pop() ?? new ArrayBuffer(BATCH_BYTES));
    filled = 0;
    await until(() => inFlight < MAX_BATCHES);
  };
  const rest = async (bytes: Uint8Array) => {
    let offset = 0;
    while (offset < bytes.length) {
      const n = Math.min(bytes.length - offset, batch.length - filled);
      batch.set(bytes.subarray(offset, offset + n), filled);
      filled += n;
      offset += n;
      if (filled === batch.length) await send();
    }
  };
  return {
    write(bytes) {
      writeAt(fd, bytes, position);
      position += bytes.length;
      if (filled + bytes.length < batch.length) {
        batch.set(bytes, filled); // the common case: no await
        filled += bytes.length;
        return;
      }
      return rest(bytes);
    },
    async finish() {
      try {
        await send();
        worker.postMessage({ type: "finish" });
        await until(() => digest !== undefined);
        return digest!;
      } finally {
        stop();
      }
    },
    abort() {
      stop();
    },
  };
}
