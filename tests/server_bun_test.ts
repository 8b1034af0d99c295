/**
 * `dotllm serve` under Bun (`Bun.serve`, the model in a Bun Worker): the
 * `openai` client streams a greedy chat reply equal to the same request
 * under Deno, and SIGTERM exits 0.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer } from "./_server.ts";
import { testdata } from "./_testdata.ts";

const MODEL = testdata("models/stories260K.gguf");

async function reply(url: string): Promise<string> {
  const client = new OpenAI({ baseURL: url + "/v1", apiKey: "none", maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: "m",
    messages: [{ role: "user", content: "Once upon a time" }],
    max_tokens: 24,
    temperature: 0,
    stream: true,
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  return text;
}

Deno.test({
  name: "serve under Bun: streamed chat equals Deno's, SIGTERM exits 0",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const deno = await startServer(MODEL, ["-t", "1"]);
    let want: string;
    try {
      want = await reply(deno.url);
    } finally {
      await deno.stop();
    }
    const bun = await startServer(MODEL, ["-t", "1"], { runtime: "bun" });
    try {
      assert.doesNotMatch(bun.stderr(), /no model worker/);
      const health = await fetch(bun.url + "/health");
      assert.deepEqual(await health.json(), { status: "ok" });
      const got = await reply(bun.url);
      assert.ok(got.length > 0);
      assert.equal(got, want);
    } finally {
      assert.equal(await bun.stop(), 0);
    }
  },
});
