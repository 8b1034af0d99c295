/**
 * A GET whose body is read straight off the connection (Deno only), for the
 * one request that moves gigabytes: a model's bytes from the CDN.
 *
 * Reading a big body through `fetch` costs the JavaScript thread ~0.6 ms of
 * CPU per MB more than reading the socket (bench/pull.ts: 145 ms per 250 MB,
 * as much as curl's whole run), in the stream machinery and a second copy.
 * Here `conn.read` fills the caller's buffer. Only the plain case is taken:
 * `http:`/`https:` without a proxy in the environment, an answer of 200 or 206
 * framed by `Content-Length`. Anything else (a redirect, an error status, a
 * chunked body, a proxy) answers `undefined`, and the caller asks `fetch`;
 * so does Bun (its `fetch` is native code already) and `DOTLLM_HUB_FETCH=1`
 * (bench/pull.ts compares the two).
 *
 * @module
 */
import process from "node:process";
import { detectRuntime } from "../native/_adapter.ts";

/** The most header bytes read before the body (a reason: a real answer is under 4 KiB). */
const HEAD_MAX_BYTES = 64 << 10;

/** An answer whose body is read off the connection. */
export interface RawResponse {
  readonly status: number;
  readonly statusText: string;
  readonly headers: Headers;
  /** Reads the next body bytes into `into`; resolves to their count, or `null` at the end. */
  read(into: Uint8Array): Promise<number | null>;
  /** Closes the connection (a pending `read` then rejects). */
  close(): void;
}

const PROXY_VARIABLES = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"];

function proxied(): boolean {
  return PROXY_VARIABLES.some((name) => !!(process.env[name] || process.env[name.toLowerCase()]));
}

function indexOfHeadEnd(bytes: Uint8Array, length: number): number {
  for (let i = 3; i < length; i++) {
    if (
      bytes[i] === 10 && bytes[i - 1] === 13 && bytes[i - 2] === 10 && bytes[i - 3] === 13
    ) {
      return i + 1;
    }
  }
  return -1;
}

/**
 * Sends `GET url` with `headers` and reads the answer's head. `undefined`
 * where this path does not apply (see the module doc); the connection is
 * then closed. Throws what `fetch` would on a network failure.
 */
export async function rawGet(
  url: string,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<RawResponse | undefined> {
  if (detectRuntime() !== "deno" || proxied() || process.env.DOTLLM_HUB_FETCH === "1") {
    return undefined;
  }
  const target = new URL(url);
  if (target.protocol !== "http:" && target.protocol !== "https:") return undefined;
  if (target.username || target.password) return undefined;
  const lines = [
    `GET ${target.pathname}${target.search} HTTP/1.1`,
    `host: ${target.host}`,
    "user-agent: dotllm",
    "connection: close",
  ];
  for (const [name, value] of Object.entries(headers)) {
    if (/[\r\n]/.test(name + value)) return undefined; // let fetch refuse it
    lines.push(`${name}: ${value}`);
  }
  const hostname = target.hostname.replace(/^\[(.*)\]$/, "$1");
  const https = target.protocol === "https:";
  const port = Number(target.port || (https ? 443 : 80));
  const conn = await abortable(
    https
      ? Deno.connectTls({ hostname, port, alpnProtocols: ["http/1.1"] })
      : Deno.connect({ hostname, port }),
    signal,
  );
  const close = () => {
    try {
      conn.close();
    } catch {
      // already closed
    }
  };
  const onAbort = () => close();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    await writeAll(conn, new TextEncoder().encode(lines.join("\r\n") + "\r\n\r\n"));
    const head = new Uint8Array(HEAD_MAX_BYTES);
    let length = 0;
    let end = -1;
    while (end < 0) {
      if (length === head.length) throw new Error("the answer's headers are over 64 KiB");
      const n = await conn.read(head.subarray(length));
      if (n === null) throw new Error("the connection closed before the answer");
      length += n;
      end = indexOfHeadEnd(head, length);
    }
    const [statusLine, ...fields] = new TextDecoder("latin1").decode(head.subarray(0, end - 4))
      .split("\r\n");
    const status = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(statusLine);
    if (status === null) throw new Error("the answer is not HTTP/1.1");
    const parsed = new Headers();
    for (const field of fields) {
      const colon = field.indexOf(":");
      if (colon <= 0) throw new Error("a malformed header line in the answer");
      parsed.append(field.slice(0, colon).trim(), field.slice(colon + 1).trim());
    }
    const code = Number(status[1]);
    const contentLength = parsed.get("content-length") ?? "";
    if (
      (code !== 200 && code !== 206) || parsed.has("transfer-encoding") ||
      !/^\d{1,15}$/.test(contentLength)
    ) {
      signal.removeEventListener("abort", onAbort);
      close();
      return undefined;
    }
    let remaining = Number(contentLength);
    let pending = head.subarray(end, length);
    return {
      status: code,
      statusText: status[2] ?? "",
      headers: parsed,
      async read(into) {
        if (remaining === 0) {
          signal.removeEventListener("abort", onAbort);
          close();
          return null;
        }
        const want = Math.min(into.length, remaining);
        let n: number | null;
        if (pending.length > 0) {
          n = Math.min(want, pending.length);
          into.set(pending.subarray(0, n));
          pending = pending.subarray(n);
        } else {
          n = await conn.read(into.subarray(0, want));
        }
        if (n === null) {
          throw new Error(`the connection closed with ${remaining} bytes of the body to come`);
        }
        remaining -= n;
        return n;
      },
      close() {
        signal.removeEventListener("abort", onAbort);
        close();
      },
    };
  } catch (error) {
    signal.removeEventListener("abort", onAbort);
    close();
    throw signal.aborted ? new Error("the download was aborted") : error;
  }
}

/** `connecting`, or a rejection when `signal` aborts first (closing the connection that comes late). */
function abortable(connecting: Promise<Deno.Conn>, signal: AbortSignal): Promise<Deno.Conn> {
  if (signal.aborted) {
    connecting.then((c) => c.close(), () => {});
    return Promise.reject(new Error("the download was aborted"));
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      connecting.then((c) => c.close(), () => {});
      reject(new Error("the download was aborted"));
    };
    signal.addEventListener("abort", onAbort, { once: true });
    connecting.then(
      (c) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) {
          c.close();
          return;
        }
        resolve(c);
      },
      (error) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) offset += await conn.write(bytes.subarray(offset));
}
