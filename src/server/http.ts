/**
 * Serves a fetch handler with `Deno.serve` under Deno and `Bun.serve` under
 * Bun, and stops it gracefully: no new connections, in-flight responses
 * finish.
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

/** A listening server. */
export interface HttpServer {
  readonly hostname: string;
  readonly port: number;
  /** Stops accepting; resolves when in-flight responses are done. */
  stop(): Promise<void>;
}

/** Where to listen. */
export interface ListenOptions {
  hostname: string;
  /** 0 picks a free port. */
  port: number;
}

// deno-lint-ignore no-explicit-any
const runtime = globalThis as any;

/** Starts serving `handler`; rejects when the address is taken. */
export function listen(
  handler: (request: Request) => Response | Promise<Response>,
  options: ListenOptions,
): Promise<HttpServer> {
  if (runtime.Bun !== undefined) {
    const server = runtime.Bun.serve({
      hostname: options.hostname,
      port: options.port,
      // Our handler enforces its own body limit with a clear 413; Bun's is a backstop.
      maxRequestBodySize: 64 * 1024 * 1024,
      // Streams may idle between tokens while a long prompt is read.
      idleTimeout: 0,
      fetch: handler,
    });
    return Promise.resolve({
      hostname: server.hostname,
      port: server.port,
      stop: () => server.stop(false),
    });
  }
  return new Promise((resolve, reject) => {
    try {
      const server = Deno.serve({
        hostname: options.hostname,
        port: options.port,
        onListen: ({ hostname, port }) => {
          resolve({ hostname, port, stop: () => server.shutdown() });
        },
      }, handler);
    } catch (error) {
      reject(error);
    }
  });
}
