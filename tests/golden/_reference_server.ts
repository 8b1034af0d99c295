/**
 * The reference llama-server for golden generators: started on a port with
 * the given arguments, waited for (`/health`), handed to `use`, and stopped.
 * Generators only: tests never start the reference build.
 *
 * @module
 */

/** Runs `use` against `llama-server ARGS --port PORT` (its output discarded), then stops it. */
export async function withReferenceServer<T>(
  server: string,
  args: string[],
  port: number,
  use: (url: string) => Promise<T>,
): Promise<T> {
  const proc = new Deno.Command(server, {
    args: [...args, "--port", String(port)],
    stdout: "null",
    stderr: "null",
  }).spawn();
  const url = `http://127.0.0.1:${port}`;
  try {
    for (let i = 0;; i++) {
      try {
        if ((await fetch(`${url}/health`)).ok) break;
      } catch { /* not up yet */ }
      if (i === 300) throw new Error(`${server} did not answer /health on port ${port}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    return await use(url);
  } finally {
    proc.kill();
    await proc.status;
  }
}
