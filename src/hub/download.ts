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
import { rawGet, type RawResponse } from "./_http1.ts";

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

/** Bytes asked for per read (a reason: a quarter of the reads and the CPU of 64 KiB chunks). */
const READ_BYTES = 1 << 20;

/**
 * Reads `body` to its end, each chunk first to `received` (which counts and
 * checks it), then into `sink`: a BYOB reader into one reused buffer where
 * the body is a byte stream (Deno's fetch), else the default reader.
 */
async function pump(
  body: ReadableStream<Uint8Array>,
  sink: Sink,
  received: (bytes: Uint8Array) => void,
): Promise<void> {
  let byob: ReadableStreamBYOBReader | undefined;
  try {
    byob = body.getReader({ mode: "byob" });
  } catch {
    byob = undefined;
  }
  if (byob === undefined) {
    const reader = body.getReader();
    while (true) {
      const { done, value } = await reader.read();
      if (done) return;
      received(value);
      sink.write(value);
    }
  }
  let buffer: ArrayBuffer = new ArrayBuffer(READ_BYTES);
  while (true) {
    const { done, value } = await byob.read(new Uint8Array(buffer));
    if (done || value === undefined) return;
    buffer = value.buffer as ArrayBuffer;
    received(value);
    sink.write(value);
  }
}

/** Like {@linkcode pump}, for a body read off the connection into one reused buffer. */
async function pumpRaw(
  raw: RawResponse,
  sink: Sink,
  received: (bytes: Uint8Array) => void,
): Promise<void> {
  const buffer = new Uint8Array(READ_BYTES);
  while (true) {
    const n = await raw.read(buffer);
    if (n === null) return;
    const value = buffer.subarray(0, n);
    received(value);
    sink.write(value);
  }
}

/** A download's answer, from `fetch` or read off the connection. */
interface Answer {
  readonly status: number;
  readonly statusText: string;
  readonly headers: Headers;
  cancel(): Promise<void>;
  /** Reads the body to its end into `sink`, calling `received` with each chunk first. */
  pump(sink: Sink, received: (bytes: Uint8Array) => void): Promise<void>;
}

function fetchAnswer(response: Response): Answer {
  return {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
    async cancel() {
      try {
        await response.body?.cancel();
      } catch {
        // a body being read is locked to its reader, which closes with it
      }
    },
    pump: (sink, received) =>
      response.body ? pump(response.body, sink, received) : Promise.resolve(),
  };
}

function rawAnswer(raw: RawResponse): Answer {
  return {
    status: raw.status,
    statusText: raw.statusText,
    headers: raw.headers,
    cancel: () => Promise.resolve(raw.close()),
    pump: (sink, received) => pumpRaw(raw, sink, received),
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
  let response: Answer | undefined;
  if (have < job.size_bytes || job.size_bytes === 0) {
    touch();
    try {
      // Off the connection where it can be; `fetch` for every answer that path
      // leaves to it (see _http1.ts).
      const raw = await rawGet(job.url, requestHeaders, controller.signal);
      response = raw !== undefined ? rawAnswer(raw) : fetchAnswer(
        await fetch(job.url, { headers: requestHeaders, signal: controller.signal }),
      );
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
      await response.cancel();
      response = undefined;
    } else if (response.status === 200) {
      have = 0; // the server ignored the range: start over
    } else if (response.status === 206) {
      const range = /^bytes (\d+)-/.exec(response.headers.get("content-range") ?? "");
      if (!range || Number(range[1]) !== have) {
        await response.cancel();
        clearInterval(idle);
        throw new HubError(`${job.label}: the server resumed at the wrong offset`);
      }
    } else {
      await response.cancel();
      clearInterval(idle);
      throw new HubError(
        `${job.label}: the download answered ${response.status} ${response.statusText}`.trimEnd(),
        response.status,
      );
    }
  }
  let sink: Sink;
  try {
    sink = openSink({
      path: incomplete,
      prefix_bytes: have,
      etag: job.etag,
      size_bytes: job.size_bytes,
    });
  } catch (error) {
    clearInterval(idle);
    await response?.cancel();
    throw error;
  }
  let transferred = 0;
  const resumed = have;
  const progress = job.progress(have);
  let ok = false;
  let position = have;
  try {
    if (response !== undefined) {
      const target = sink;
      try {
        await response.pump(target, (value) => {
          touch();
          const length = value.length;
          if (position + length > job.size_bytes) {
            throw new HubError(`${job.label}: the server sent more than ${job.size_bytes} bytes`);
          }
          position += length;
          transferred += length;
          progress.update(position);
        });
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
    const digest = sink.finish();
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
    if (!ok) {
      sink.abort();
      await response?.cancel();
    }
  }
  fs.renameSync(incomplete, job.blob_path);
  return { transferred_bytes: transferred, resumed_bytes: resumed };
}
