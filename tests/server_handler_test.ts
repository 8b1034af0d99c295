/**
 * The HTTP handler over the scheduler on the real stories260K model, in
 * this thread (no Worker, no sockets): the queue bound answers 503 with
 * Retry-After, a client that cancels its stream frees its slot at once,
 * CORS only when asked, the body limit, drain on shutdown, and the SSE
 * framing.
 */
import assert from "node:assert/strict";
import { Llm } from "../src/llm/mod.ts";
import { chatRenderer } from "../src/server/chat_prompt.ts";
import { ApiHandler, type HandlerOptions } from "../src/server/handler.ts";
import { loadBackend } from "../src/server/load.ts";
import { testdata } from "./_testdata.ts";

const STORIES = testdata("models/stories260K.gguf");

async function setup(options: Partial<HandlerOptions> = {}, slots = 1) {
  const backend = await loadBackend(
    STORIES,
    { slots, contextSize: 64, threads: 1 },
    (chat) => chatRenderer(chat),
  );
  return {
    backend,
    api: new ApiHandler({ backend, ...options }),
    [Symbol.asyncDispose]: () => backend.close(),
  };
}

function post(api: ApiHandler, path: string, body: unknown, headers: Record<string, string> = {}) {
  return api.fetch(
    new Request("http://localhost" + path, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    }),
  );
}

async function sse(res: Response): Promise<unknown[]> {
  const text = await res.text();
  assert.ok(text.endsWith("data: [DONE]\n\n"), text.slice(-80));
  return text.split("\n\n").filter((l) => l.startsWith("data: {")).map((l) =>
    JSON.parse(l.slice(6))
  );
}

Deno.test("handler: streamed completion equals the greedy sequence; SSE framing and usage", async () => {
  await using s = await setup();
  const { api } = s;
  const res = await post(api, "/v1/completions", {
    prompt: "abc",
    max_tokens: 6,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  assert.equal(res.headers.get("content-type"), "text/event-stream");
  const chunks = await sse(res) as Array<
    {
      choices: Array<{ text: string; finish_reason: string | null }>;
      usage?: { completion_tokens: number } | null;
    }
  >;
  const text = chunks.flatMap((c) => c.choices.map((x) => x.text)).join("");
  using llm = await Llm.load(STORIES, { threads: 1, contextSize: 64 });
  const want = await llm.complete("abc", { temperature: 0, maxTokens: 6 });
  assert.equal(want.tokens.length, 6);
  assert.equal(text, want.text);
  const last = chunks.at(-1)!;
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage?.completion_tokens, 6);
  assert.equal(chunks.at(-2)!.choices[0].finish_reason, "length");
  assert.equal(res.headers.get("access-control-allow-origin"), null, "no CORS unless asked");
});

Deno.test("handler: past the queue bound, 503 with Retry-After; cancel frees the slot at once", async () => {
  await using s = await setup({ queueLimit: 1 });
  const { api, backend } = s;
  const body = { prompt: "ab", max_tokens: 40, stream: true, temperature: 0 };
  // Two streams nobody reads: one runs, one waits (the pull-based stream holds them in flight).
  const first = await post(api, "/v1/completions", body);
  const second = await post(api, "/v1/completions", body);
  assert.equal(api.inFlight, 2);
  const third = await post(api, "/v1/completions", body);
  assert.equal(third.status, 503);
  assert.equal(third.headers.get("retry-after"), "1");
  assert.equal((await third.json()).error.code, "overloaded");
  // The client of the first goes away: its slot is freed without another step.
  const reader = first.body!.getReader();
  await reader.read();
  await reader.cancel();
  assert.equal(api.inFlight, 1);
  const stats = backend.scheduler.stats();
  // The freed slot is free or already the waiting request's; nothing else holds it.
  assert.equal(stats.slotsBusy + stats.queueDepth, 1);
  const chunks = await sse(second);
  assert.ok(chunks.length > 0);
  assert.equal(api.inFlight, 0);
});

Deno.test("handler: CORS only with an origin; body limit; auth; drain refuses new work", async () => {
  await using s = await setup({ cors: "https://app.example", bodyLimitBytes: 2048, apiKey: "k" });
  const { api } = s;
  const pre = await api.fetch(
    new Request("http://localhost/v1/chat/completions", { method: "OPTIONS" }),
  );
  assert.equal(pre.status, 200);
  assert.equal(pre.headers.get("access-control-allow-origin"), "https://app.example");
  assert.equal(pre.headers.get("access-control-allow-headers"), "*");
  const big = await post(api, "/v1/completions", { prompt: "a".repeat(4096) }, {
    authorization: "Bearer k",
  });
  assert.equal(big.status, 413);
  const noKey = await post(api, "/v1/completions", { prompt: "a" });
  assert.equal(noKey.status, 401);
  assert.equal((await noKey.json()).error.type, "authentication_error");
  const health = await api.fetch(new Request("http://localhost/health"));
  assert.equal(health.status, 200, "health needs no key");
  const ok = await post(api, "/v1/chat/completions", {
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 3,
  }, { authorization: "Bearer k" });
  assert.equal(ok.status, 200);
  const json = await ok.json();
  assert.equal(json.choices[0].finish_reason, "length");
  assert.equal(json.usage.completion_tokens, 3);
  await api.drain();
  const late = await post(api, "/v1/completions", { prompt: "a" }, { authorization: "Bearer k" });
  assert.equal(late.status, 503);
  assert.ok(late.headers.get("retry-after"));
});
