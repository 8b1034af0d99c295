/**
 * Serves a fetch handler over `node:http` (the same server under Deno and
 * Bun), with a header timeout and an idle keep-alive timeout, and stops it
 * gracefully: no new connections, in-flight responses finish.
 *
 * `node:http` rather than `Deno.serve`/`Bun.serve`: it is the one server both
 * runtimes ship with a header timeout (`Deno.serve` has none, so a client that
 * sends half a header holds its socket forever), and it tells a client that
 * went away apart from a response that was delivered (`Deno.serve`'s
 * `request.signal` aborts on both, with a warning, unless Deno runs with
 * `--unstable-no-legacy-abort`).
 *
 * @example
 * ```ts ignore
 * const server = await listen((req) => new Response("ok"), { hostname: "127.0.0.1", port: 0 });
 * console.log(server.port);
 * await server.stop();
 * ```
 *
 * @module
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * Milliseconds a client has, from connecting (or from the first byte of its
 * next request on a kept-alive connection), to send a whole request header;
 * then 408 and the socket is closed. A real client sends its header in one
 * packet; this bounds what a slow or stalled one holds (nginx's
 * `client_header_timeout` is 60 s; a few seconds is plenty on an API).
 */
export const HEADER_TIMEOUT_MS = 10_000;

/**
 * Milliseconds an idle kept-alive connection stays open after a response.
 * nginx's default `keepalive_timeout` (75 s): longer than the idle timeout of
 * common load balancers (60 s), so a balancer never reuses a connection this
 * server is closing.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 75_000;

/** A listening server. */
export interface HttpServer {
  readonly hostname: string;
  readonly port: number;
  /** Stops accepting; closes idle connections; resolves when in-flight responses are done. */
  stop(): Promise<void>;
}

/** Where to listen. */
export interface ListenOptions {
  hostname: string;
  /** 0 picks a free port. */
  port: number;
  /** Time to send a whole request header (default {@link HEADER_TIMEOUT_MS}). */
  headerTimeoutMs?: number;
  /** Time a kept-alive connection may idle (default {@link KEEP_ALIVE_TIMEOUT_MS}). */
  keepAliveTimeoutMs?: number;
}

/**
 * Most bytes of a request body dropped unread (after an early answer such as
 * 413) before the connection is cut instead; the handler's own body limit
 * (1 MiB by default) answers long before.
 */
const DISCARD_LIMIT_BYTES = 64 * 1024 * 1024;

type Handler = (request: Request) => Response | Promise<Response>;

function positive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) {
    throw new RangeError(`${name} must be a positive number of milliseconds, got ${value}`);
  }
  return value;
}

/**
 * A request body as a stream that reads `req` only as fast as it is consumed.
 * `discard()` drops the rest (the handler answered without reading it all).
 */
function bodyOf(req: IncomingMessage): { stream: ReadableStream<Uint8Array>; discard(): void } {
  let dropping = false;
  let dropped = 0;
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
      req.on("data", (chunk: Uint8Array) => {
        if (dropping) {
          dropped += chunk.byteLength;
          if (dropped > DISCARD_LIMIT_BYTES) req.socket.destroy();
          return;
        }
        controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        if ((controller.desiredSize ?? 0) <= 0) req.pause();
      });
      req.on("end", () => {
        if (!dropping) controller.close();
      });
      req.on("error", (error) => {
        if (!dropping) controller.error(error);
      });
    },
    pull() {
      req.resume();
    },
    cancel() {
      discard();
    },
  }, { highWaterMark: 1 });
  const discard = () => {
    dropping = true;
    req.resume();
  };
  return { stream, discard };
}

/** The fetch `Request` of a `node:http` request; `signal` aborts when the client goes away. */
function toRequest(
  req: IncomingMessage,
  body: ReadableStream<Uint8Array> | null,
  signal: AbortSignal,
  fallbackHost: string,
): Request {
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i], raw[i + 1]);
  const url = new URL(req.url ?? "/", `http://${headers.get("host") || fallbackHost}`);
  return new Request(url, {
    method: req.method ?? "GET",
    headers,
    signal,
    body,
    // @ts-ignore: `duplex` is required for a streamed body, missing from some lib typings.
    duplex: "half",
  });
}

/**
 * A header name as most servers spell it (`Access-Control-Allow-Origin`):
 * names are case-insensitive, but some clients look them up in a plain map
 * (llama.cpp's test suite does).
 */
function canonical(name: string): string {
  return name.replace(/(^|-)([a-z])/g, (_, dash, c) => dash + c.toUpperCase());
}

/** Writes `response` to `res`; stops (and cancels the body) when the client goes away. */
async function send(response: Response, res: ServerResponse, closed: AbortSignal): Promise<void> {
  for (const [name, value] of response.headers) {
    if (name !== "set-cookie") res.setHeader(canonical(name), value);
  }
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) res.setHeader("set-cookie", cookies);
  res.writeHead(response.status, response.statusText || undefined);
  if (response.body === null) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  const cancel = () => void reader.cancel().catch(() => {});
  closed.addEventListener("abort", cancel, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || closed.aborted) break;
      if (!res.write(value)) {
        await new Promise<void>((resolve) => {
          const go = () => {
            res.off("drain", go);
            closed.removeEventListener("abort", go);
            resolve();
          };
          res.on("drain", go);
          closed.addEventListener("abort", go, { once: true });
        });
      }
    }
  } catch {
    // The body failed mid-way: the client sees the response cut short.
    res.destroy();
    return;
  } finally {
    closed.removeEventListener("abort", cancel);
  }
  res.end();
}

/** Starts serving `handler`; rejects when the address is taken. */
export function listen(handler: Handler, options: ListenOptions): Promise<HttpServer> {
  const headerTimeout = positive("headerTimeoutMs", options.headerTimeoutMs ?? HEADER_TIMEOUT_MS);
  const keepAlive = positive(
    "keepAliveTimeoutMs",
    options.keepAliveTimeoutMs ?? KEEP_ALIVE_TIMEOUT_MS,
  );
  const fallbackHost = options.hostname.includes(":") ? `[${options.hostname}]` : options.hostname;
  const server = createServer({
    headersTimeout: headerTimeout,
    // No bound on a whole request: a long prompt may take minutes to answer.
    requestTimeout: 0,
    keepAliveTimeout: keepAlive,
    // How often header deadlines are checked (Node's default is 30 s).
    connectionsCheckingInterval: Math.max(50, Math.min(1000, headerTimeout / 4)),
    noDelay: true,
  }, (req, res) => {
    const gone = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) gone.abort();
    });
    const method = req.method ?? "GET";
    const body = method === "GET" || method === "HEAD" ? null : bodyOf(req);
    let request: Request;
    try {
      request = toRequest(req, body?.stream ?? null, gone.signal, fallbackHost);
    } catch (error) {
      body?.discard();
      res.setHeader("connection", "close");
      res.writeHead(400, { "content-type": "text/plain; charset=utf-8" });
      res.end(`bad request: ${(error as Error).message}\n`);
      return;
    }
    (async () => {
      let response: Response;
      try {
        response = await handler(request);
      } catch (error) {
        response = new Response(`internal error: ${(error as Error).message}\n`, { status: 500 });
      }
      // The handler answered before the body was all read (401, 413, ...): the
      // rest is read and dropped, so the connection can take the next request.
      if (!req.complete) body?.discard();
      await send(response, res, gone.signal);
    })();
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.hostname, () => {
      server.off("error", reject);
      const address = server.address() as AddressInfo;
      resolve({
        hostname: address.address,
        port: address.port,
        stop: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeIdleConnections();
          }),
      });
    });
  });
}
