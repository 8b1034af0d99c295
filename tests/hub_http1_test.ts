/**
 * src/hub/_http1.ts against a raw TCP server on 127.0.0.1 that answers each
 * case byte for byte: a body framed by Content-Length is read exactly; every
 * other answer (chunked, a redirect, an error status, no length) is left to
 * fetch; hostile heads and short bodies fail with one clear message; a proxy
 * in the environment turns the path off.
 */
import assert from "node:assert/strict";
import process from "node:process";
import { rawGet } from "../src/hub/_http1.ts";

/** Serves `answer` (the bytes after the request head) to every connection. */
function serve(answer: (request: string) => Uint8Array) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const requests: string[] = [];
  const done = (async () => {
    for await (const conn of listener) {
      (async () => {
        const buf = new Uint8Array(65536);
        let text = "";
        while (!text.includes("\r\n\r\n")) {
          const n = await conn.read(buf);
          if (n === null) break;
          text += new TextDecoder().decode(buf.subarray(0, n));
        }
        requests.push(text);
        const bytes = answer(text);
        let off = 0;
        try {
          while (off < bytes.length) off += await conn.write(bytes.subarray(off));
        } catch {
          // the client hung up
        }
        conn.close();
      })();
    }
  })();
  const url = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}/file.gguf?x=1`;
  return {
    url,
    requests,
    async [Symbol.asyncDispose]() {
      listener.close();
      await done.catch(() => {});
    },
  };
}

const enc = (s: string) => new TextEncoder().encode(s);
const join = (...parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
};

async function readAll(url: string, headers: Record<string, string> = {}) {
  const raw = await rawGet(url, headers, new AbortController().signal);
  if (raw === undefined) return undefined;
  const chunks: Uint8Array[] = [];
  const buf = new Uint8Array(7000); // smaller than the body: several reads
  while (true) {
    const n = await raw.read(buf);
    if (n === null) break;
    chunks.push(buf.slice(0, n));
  }
  return { status: raw.status, headers: raw.headers, body: join(...chunks) };
}

Deno.test("a Content-Length body is read exactly, with the request's headers sent", async () => {
  const body = crypto.getRandomValues(new Uint8Array(50_000));
  await using server = serve(() =>
    join(
      enc(`HTTP/1.1 206 Partial Content\r\nContent-Length: ${body.length}\r\n`),
      enc("Content-Range: bytes 10-50009/50010\r\nX-Extra:  spaced  \r\n\r\n"),
      body,
      enc("trailing bytes past the length are ignored"),
    )
  );
  const got = await readAll(server.url, { range: "bytes=10-", authorization: "Bearer t" });
  assert.ok(got);
  assert.equal(got.status, 206);
  assert.equal(got.headers.get("content-range"), "bytes 10-50009/50010");
  assert.equal(got.headers.get("x-extra"), "spaced");
  assert.deepEqual(got.body, body);
  const request = server.requests[0];
  assert.match(request, /^GET \/file\.gguf\?x=1 HTTP\/1\.1\r\n/);
  assert.match(request, /\r\nhost: 127\.0\.0\.1:\d+\r\n/);
  assert.match(request, /\r\nrange: bytes=10-\r\n/);
  assert.match(request, /\r\nauthorization: Bearer t\r\n/);
});

Deno.test("redirects, errors, chunked or unframed bodies are left to fetch", async () => {
  const answers = [
    "HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nNot Found",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nno length",
    "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
  ];
  for (const answer of answers) {
    await using server = serve(() => enc(answer));
    assert.equal(await readAll(server.url), undefined, answer);
  }
});

Deno.test("a short body, a hostile head or a closed connection fail with one line", async () => {
  const cases: [Uint8Array, RegExp][] = [
    [
      enc("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this"),
      /91 bytes of the body to come/,
    ],
    [enc("SSH-2.0-OpenSSH\r\n\r\n"), /not HTTP\/1\.1/],
    [enc("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"), /malformed header/],
    [join(enc("HTTP/1.1 200 OK\r\nX: "), new Uint8Array(70_000).fill(65)), /over 64 KiB/],
    [enc("HTTP/1.1 200 OK\r\n"), /closed before the answer/],
  ];
  for (const [answer, message] of cases) {
    await using server = serve(() => answer);
    await assert.rejects(readAll(server.url), message);
  }
});

Deno.test("a proxy in the environment, DOTLLM_HUB_FETCH=1 or another scheme turn the path off", async () => {
  await using server = serve(() => enc("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
  assert.deepEqual((await readAll(server.url))?.body, enc("ok"));
  for (const name of ["HTTPS_PROXY", "http_proxy", "DOTLLM_HUB_FETCH"]) {
    process.env[name] = name === "DOTLLM_HUB_FETCH" ? "1" : "http://127.0.0.1:9";
    try {
      assert.equal(await readAll(server.url), undefined, name);
    } finally {
      delete process.env[name];
    }
  }
  assert.equal(await readAll("ftp://127.0.0.1/file"), undefined);
  assert.equal(server.requests.length, 1, "nothing was sent when the path was off");
});

Deno.test("an abort ends a request whose server never answers, and one not yet connected", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of listener) held.push(conn); // accepts, never answers
  })();
  const url = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}/stall`;
  try {
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(), 200);
    await assert.rejects(rawGet(url, {}, controller.signal), /aborted/);
    assert.ok(Date.now() - started < 5_000, "the abort ended the wait");
    const aborted = new AbortController();
    aborted.abort();
    await assert.rejects(rawGet(url, {}, aborted.signal), /aborted/);
  } finally {
    listener.close();
    await accepting.catch(() => {});
    for (const conn of held) conn.close();
  }
});
