/**
 * Downloads one blob into `blobs/<etag>.incomplete`, resuming with a `Range`
 * request from whatever a killed or failed earlier run left there, hashing
 * as the bytes arrive, and renames it to `blobs/<etag>` only when the size
 * and the hash (sha256 for an LFS etag, git's blob sha1 for a git oid) match.
 * A mismatch deletes the partial file, so nothing wrong is ever kept.
 *
 * @module
 */
import * as fs from "node:fs";
import { HubError } from "./errors.ts";
import type { ProgressSink } from "./progress.ts";
import { openSink, type Sink } from "./_sink.ts";

/** Abort when no byte arrives for this long (a reason: a stalled server must not hang a pull). */
const IDLE_TIMEOUT_MS = 60_000;
/** How often the stall is checked for. */
const IDLE_CHECK_MS = 1_000;

/** What to download and how to check it. */
export interface BlobDownload {
  url: string;
  /** The blob id the bytes must hash to: 64 hex = sha256, 40 hex = git blob sha1. */
  etag: string;
  size_bytes: number;
  /** Final path; `<path>.incomplete` holds the bytes meanwhile. */
  blob_path: string;
  token?: string;
  /** For messages. */
  label: string;
  /** Called with the bytes already on disk before the request, so it can draw from there. */
  progress: (start_bytes: number) => ProgressSink;
}

/** How a download went. */
export interface DownloadResult {
  /** Bytes received over the network in this run. */
  transferred_bytes: number;
  /** Bytes reused from an earlier, interrupted run. */
  resumed_bytes: number;
}

/**
 * Bytes hashed per call (a reason: big enough that a call's cost vanishes,
 * small enough that hashing the last batch after the last byte is ~3 ms).
 */
const BATCH_BYTES = 4 << 20;

/** Reads the body, handing each chunk to `chunk` (write it) and each batch to `batch` (hash it). */
type BodyReader = (
  chunk: (bytes: Uint8Array) => void,
  batch: (bytes: Uint8Array) => Promise<void> | void,
) => Promise<void>;

/**
 * A reader of the body. Where it is a byte stream (Deno's fetch) and the hash
 * runs on another thread, a BYOB reader fills two 4 MiB buffers in turn, in
 * place: each chunk is written as it lands, and a full buffer is hashed while
 * the other one fills. Otherwise each chunk (BYOB into one reused buffer, or
 * whatever the default reader yields) is written and hashed at once.
 * Every chunk is on disk as soon as it is received, so a resume keeps it.
 */
function bodyReader(body: ReadableStream<Uint8Array>, async_hash: boolean): BodyReader {
  let byob: ReadableStreamBYOBReader | undefined;
  try {
    byob = body.getReader({ mode: "byob" });
  } catch {
    byob = undefined;
  }
  if (byob === undefined) {
    const reader = body.getReader();
    return async (chunk, batch) => {
      while (true) {
        const { done, value } = await reader.read();
        if (done) return;
        chunk(value);
        await batch(value);
      }
    };
  }
  const reader = byob;
  const buffers: ArrayBuffer[] = async_hash
    ? [new ArrayBuffer(BATCH_BYTES), new ArrayBuffer(BATCH_BYTES)]
    : [new ArrayBuffer(1 << 20)];
  return async (chunk, batch) => {
    let turn = 0;
    let filled = 0;
    while (true) {
      const size = buffers[turn].byteLength;
      // A failed read loses the buffer (it was transferred) and the hash: the
      // chunks are on disk, and a resume hashes them again from there.
      const { done, value } = await reader.read(
        new Uint8Array(buffers[turn], filled, size - filled),
      );
      if (done || value === undefined) {
        if (value !== undefined) buffers[turn] = value.buffer as ArrayBuffer;
        if (filled > 0) await batch(new Uint8Array(buffers[turn], 0, filled));
        return;
      }
      buffers[turn] = value.buffer as ArrayBuffer;
      chunk(value);
      filled += value.length;
      if (filled === size) {
        await batch(new Uint8Array(buffers[turn], 0, filled));
        turn = (turn + 1) % buffers.length;
        filled = 0;
      }
    }
  };
}

/** Downloads `job.url` to `job.blob_path` (see the module doc). */
export async function downloadBlob(job: BlobDownload): Promise<DownloadResult> {
  const incomplete = job.blob_path + ".incomplete";
  let have = 0;
  try {
    have = fs.statSync(incomplete).size;
  } catch {
    have = 0;
  }
  if (have > job.size_bytes) {
    fs.rmSync(incomplete, { force: true });
    have = 0;
  }
  const controller = new AbortController();
  // One timer checks for a stall, rather than a timer re-armed per chunk.
  let lastData = Date.now();
  const touch = () => (lastData = Date.now());
  const idle = setInterval(() => {
    if (Date.now() - lastData > IDLE_TIMEOUT_MS) controller.abort();
  }, IDLE_CHECK_MS);
  const requestHeaders: Record<string, string> = { "accept-encoding": "identity" };
  if (job.token) requestHeaders.authorization = `Bearer ${job.token}`;
  if (have > 0) requestHeaders.range = `bytes=${have}-`;
  let response: Response | undefined;
  if (have < job.size_bytes || job.size_bytes === 0) {
    touch();
    try {
      response = await fetch(job.url, { headers: requestHeaders, signal: controller.signal });
    } catch (error) {
      clearInterval(idle);
      const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
      throw new HubError(
        `${job.label}: download failed (${reason}); run the pull again to resume`,
        0,
        true,
      );
    }
    if (response.status === 416 && have === job.size_bytes) {
      await response.body?.cancel();
      response = undefined;
    } else if (response.status === 200) {
      have = 0; // the server ignored the range: start over
    } else if (response.status === 206) {
      const range = /^bytes (\d+)-/.exec(response.headers.get("content-range") ?? "");
      if (!range || Number(range[1]) !== have) {
        await response.body?.cancel();
        clearInterval(idle);
        throw new HubError(`${job.label}: the server resumed at the wrong offset`);
      }
    } else {
      await response.body?.cancel();
      clearInterval(idle);
      throw new HubError(
        `${job.label}: the download answered ${response.status} ${response.statusText}`.trimEnd(),
        response.status,
      );
    }
  }
  let sink: Sink;
  try {
    sink = await openSink({
      path: incomplete,
      prefix_bytes: have,
      etag: job.etag,
      size_bytes: job.size_bytes,
    });
  } catch (error) {
    clearInterval(idle);
    await response?.body?.cancel();
    throw error;
  }
  let transferred = 0;
  const resumed = have;
  const progress = job.progress(have);
  let ok = false;
  let position = have;
  try {
    if (response?.body) {
      const read = bodyReader(response.body, sink.async_hash);
      const target = sink;
      try {
        await read((value) => {
          touch();
          const length = value.length;
          if (position + length > job.size_bytes) {
            throw new HubError(`${job.label}: the server sent more than ${job.size_bytes} bytes`);
          }
          target.write(value);
          position += length;
          transferred += length;
          progress.update(position);
        }, (bytes) => target.hash(bytes));
      } catch (error) {
        if (error instanceof HubError) throw error;
        const reason = controller.signal.aborted
          ? `no data for ${IDLE_TIMEOUT_MS / 1000} s`
          : error instanceof Error
          ? error.message.split("\n")[0]
          : String(error);
        throw new HubError(
          `${job.label}: download interrupted after ${position} of ${job.size_bytes} bytes ` +
            `(${reason}); run the pull again to resume`,
          0,
          true,
        );
      }
    }
    if (position !== job.size_bytes) {
      throw new HubError(
        `${job.label}: the connection closed after ${position} of ${job.size_bytes} bytes; ` +
          "run the pull again to resume",
        0,
        true,
      );
    }
    const digest = await sink.finish();
    ok = true;
    if (digest !== job.etag) {
      fs.rmSync(incomplete, { force: true });
      ok = false;
      throw new HubError(
        `${job.label}: checksum mismatch (expected ${job.etag}, got ${digest}): ` +
          "the download was corrupted and has been deleted",
      );
    }
  } finally {
    clearInterval(idle);
    progress.finish(ok);
    if (!ok) await sink.abort();
  }
  fs.renameSync(incomplete, job.blob_path);
  return { transferred_bytes: transferred, resumed_bytes: resumed };
}
