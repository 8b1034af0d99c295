/**
 * The HTTP server's hygiene: a client that sends half a request header (or
 * nothing, or idles on a kept-alive connection) is cut off after the
 * server's timeouts; `dotllm serve` on stories260K answers new requests with
 * 503 + Retry-After while SIGTERM lets an in-flight stream finish, and prints
 * no runtime warning (Deno's legacy `request.signal` abort) on start or on a
 * request.
 */
import assert from "node:assert/strict";
import { listen } from "../src/server/http.ts";
import { startServer } from "./_server.ts";
import { testdata } from "./_testdata.ts";

const STORIES = testdata("models/stories260K.gguf");

/** Connects, writes `text`, and reads until the server closes: what it sent and when. */
async function probe(port: number, text: string, limitMs: number) {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const start = performance.now();
  await conn.write(new TextEncoder().encode(text));
  const timer = setTimeout(() => conn.close(), limitMs);
  let received = "";
  let closedByServer = true;
  const buf = new Uint8Array(4096);
  for (;;) {
    let n: number | null;
    try {
      n = await conn.read(buf);
    } catch {
      closedByServer = false; // our own timer closed it
      break;
    }
    if (n === null) break;
    received += new TextDecoder().decode(buf.subarray(0, n));
  }
  clearTimeout(timer);
  if (closedByServer) conn.close();
  return { received, closedByServer, ms: performance.now() - start };
}

Deno.test("http: half a header, no header, an idle kept-alive connection are closed", async () => {
  const headerTimeoutMs = 400;
  const keepAliveTimeoutMs = 600;
  const server = await listen(() => new Response("ok"), {
    hostname: "127.0.0.1",
    port: 0,
    headerTimeoutMs,
    keepAliveTimeoutMs,
  });
  try {
    const limit = 5000;
    const [half, none, idle] = await Promise.all([
      probe(server.port, "GET /health HTTP/1.1\r\nHost: x\r\nAccept: */", limit),
      probe(server.port, "", limit),
      probe(server.port, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", limit),
    ]);
    for (const [what, r] of [["half a header", half], ["no header", none]] as const) {
      assert.ok(r.closedByServer, `${what}: still open after ${limit} ms`);
      assert.ok(r.ms >= headerTimeoutMs * 0.9, `${what}: closed after ${r.ms} ms`);
      assert.match(r.received, /^(HTTP\/1\.1 408 |$)/, `${what}: ${r.received}`);
    }
    assert.ok(idle.closedByServer, `idle keep-alive: still open after ${limit} ms`);
    assert.match(idle.received, /^HTTP\/1\.1 200 /);
    assert.match(idle.received, /\r\nok\r\n/);
    assert.ok(idle.ms >= keepAliveTimeoutMs * 0.9, `idle keep-alive: closed after ${idle.ms} ms`);
    // The server still answers.
    assert.equal(await (await fetch(`http://127.0.0.1:${server.port}/`)).text(), "ok");
  } finally {
    await server.stop();
  }
});

Deno.test("http: bad timeouts are refused", () => {
  for (const bad of [0, -1, NaN, Infinity]) {
    assert.throws(
      () => listen(() => new Response(), { hostname: "127.0.0.1", port: 0, headerTimeoutMs: bad }),
      /headerTimeoutMs must be a positive number/,
    );
  }
});

Deno.test({
  name: "serve: SIGTERM drains with 503 + Retry-After; no runtime warning (stories260K)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const server = await startServer(STORIES, ["--parallel", "1", "-c", "2048", "-t", "1"]);
    try {
      const post = (body: unknown) =>
        fetch(server.url + "/v1/completions", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        });
      // One short request first: Deno's legacy-abort warning came after the first response.
      const warm = await post({ prompt: "Once upon a time", max_tokens: 4, temperature: 0 });
      assert.equal(warm.status, 200);
      await warm.json();

      const long = await post({
        prompt: "Once upon a time",
        max_tokens: 1900,
        temperature: 0,
        ignore_eos: true,
        stream: true,
      });
      assert.equal(long.status, 200);
      const reader = long.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = (await reader.read()).value ?? "";
      Deno.kill(server.pid, "SIGTERM");
      while (!/SIGTERM: finishing/.test(server.stderr())) {
        await new Promise((r) => setTimeout(r, 5));
      }
      assert.match(server.stderr(), /SIGTERM: finishing 1 request/);
      const refused = await post({ prompt: "Once", max_tokens: 2 });
      assert.equal(refused.status, 503);
      assert.ok(Number(refused.headers.get("retry-after")) > 0);
      const error = await refused.json();
      assert.equal(error.error.code, "unavailable");
      // Non-generation endpoints still answer during the drain.
      assert.equal((await fetch(server.url + "/health")).status, 200);

      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += value;
      }
      const events = text.split("\n\n").filter((e) => e.startsWith("data: "));
      assert.equal(events.at(-1), "data: [DONE]");
      const last = JSON.parse(events.at(-2)!.slice(6));
      assert.equal(last.choices[0].finish_reason, "length");
      assert.equal(await server.wait(), 0);
      assert.doesNotMatch(
        server.stderr(),
        /legacy|deprecat|\bwarning: (?!.*has no chat template)/i,
      );
      assert.match(server.stderr(), /stopped/);
    } finally {
      await server.stop();
    }
  },
});
