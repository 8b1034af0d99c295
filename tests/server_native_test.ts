/**
 * llama-server's native API on the real stories260K model, in this thread,
 * against llama-server's own answers (`tests/golden/llama_server_native/`):
 * `/tokenize` pieces (a leading space kept, byte tokens as their bytes),
 * `/apply-template` with `add_generation_prompt: false` and text parts
 * joined by a newline (the three bugs of issue 41), greedy `/completion`
 * (text, token ids, `prompt`, `stop_type`), `n_probs`; and the conventions:
 * `X-Api-Key`, the context error's type, `/slots`, `/props`, `/metrics`
 * off by default in `dotllm serve` terms (501), the stream's shape.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { chatTemplateSource } from "../src/cli/options.ts";
import { makeModel } from "../src/gguf/make_model.ts";
import { chatRenderer } from "../src/server/chat_prompt.ts";
import { ApiHandler, type HandlerOptions } from "../src/server/handler.ts";
import { loadBackend } from "../src/server/load.ts";
import { repoRoot, testdata } from "./_testdata.ts";

const STORIES = testdata("models/stories260K.gguf");
const GOLDEN = JSON.parse(
  readFileSync(join(repoRoot, "tests/golden/llama_server_native/stories260K.json"), "utf8"),
);

async function setup(options: Partial<HandlerOptions> = {}, slots = 1, contextSize = 512) {
  const backend = await loadBackend(
    STORIES,
    { slots, contextSize, threads: 1, chatTemplate: chatTemplateSource("chatml") },
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
      body: JSON.stringify(body),
    }),
  );
}

Deno.test("native: /tokenize pieces and /apply-template equal llama-server's", async () => {
  await using s = await setup();
  for (const g of GOLDEN.tokenize) {
    const res = await post(s.api, "/tokenize", { content: g.content, with_pieces: true });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), g.response, g.content);
  }
  for (const g of GOLDEN.apply_template) {
    const res = await post(s.api, "/apply-template", {
      messages: g.messages,
      add_generation_prompt: g.add_generation_prompt,
    });
    assert.equal(res.status, 200);
    assert.deepEqual(
      await res.json(),
      g.response,
      `add_generation_prompt ${g.add_generation_prompt}`,
    );
  }
  const bad = await post(s.api, "/apply-template", {
    messages: [{ role: "user", content: "x" }],
    add_generation_prompt: "no",
  });
  assert.equal(bad.status, 400);
});

Deno.test("native: greedy /completion and n_probs equal llama-server's", async () => {
  await using s = await setup();
  for (const g of GOLDEN.completion) {
    const res = await post(s.api, "/completion", g.request);
    assert.equal(res.status, 200);
    const body = await res.json();
    for (const [k, v] of Object.entries(g.response)) assert.deepEqual(body[k], v, k);
    assert.equal(body.timings.predicted_n, g.response.tokens_predicted);
    assert.equal(body.timings.prompt_n + body.timings.cache_n, g.response.tokens_evaluated);
  }
  const g = GOLDEN.n_probs;
  const body = await (await post(s.api, "/completion", g.request)).json();
  assert.equal(body.content, g.response.content);
  const want = g.response.completion_probabilities;
  assert.equal(body.completion_probabilities.length, want.length);
  for (const [i, t] of want.entries()) {
    const got = body.completion_probabilities[i];
    assert.equal(got.id, t.id);
    assert.equal(got.token, t.token);
    assert.deepEqual(got.bytes, t.bytes);
    // the two forward passes sum in different orders: logits agree to ~1e-3
    assert.ok(Math.abs(got.logprob - t.logprob) < 1e-2, `${got.logprob} vs ${t.logprob}`);
    // the best alternative is the greedy token; lower ones may swap where two are ~1e-3 apart
    assert.equal(got.top_logprobs.length, t.top_logprobs.length);
    assert.equal(got.top_logprobs[0].id, t.top_logprobs[0].id);
    for (const a of got.top_logprobs as Array<{ id: number; logprob: number }>) {
      const b = (t.top_logprobs as Array<{ id: number; logprob: number }>).find((x) =>
        x.id === a.id
      );
      if (b !== undefined) assert.ok(Math.abs(a.logprob - b.logprob) < 1e-2);
    }
  }
});

Deno.test("native: the stream, batch prompts, mixed prompts, response_fields", async () => {
  await using s = await setup({}, 2);
  const g = GOLDEN.completion[0];
  const res = await post(s.api, "/completion", { ...g.request, stream: true });
  const text = await res.text();
  assert.ok(!text.includes("[DONE]"), "llama-server's native stream has no [DONE]");
  const chunks = text.split("\n\n").filter((l) => l.startsWith("data: ")).map((l) =>
    JSON.parse(l.slice(6))
  );
  const last = chunks.at(-1);
  assert.equal(last.stop, true);
  assert.equal(last.stop_type, "limit");
  const tokens = chunks.filter((c) => !c.stop).flatMap((c) => c.tokens);
  assert.deepEqual(tokens, g.response.tokens);
  assert.equal(chunks.map((c) => c.content).join(""), g.response.content);
  // two prompts: ids and text, answered in order
  const ids =
    (await (await post(s.api, "/tokenize", { content: g.request.prompt, add_special: true }))
      .json()).tokens;
  const both = await (await post(s.api, "/completion", {
    prompt: [ids, g.request.prompt],
    n_predict: 12,
    temperature: 0,
  })).json();
  assert.equal(both.length, 2);
  assert.equal(both[0].content, g.response.content);
  assert.equal(both[1].content, g.response.content);
  const picked = await (await post(s.api, "/completion", {
    prompt: g.request.prompt,
    n_predict: 3,
    temperature: 0,
    response_fields: ["content", "generation_settings/n_predict"],
  })).json();
  assert.deepEqual(Object.keys(picked).sort(), ["content", "generation_settings/n_predict"]);
  assert.equal(picked["generation_settings/n_predict"], 3);
});

Deno.test("native: refused fields, context error type, X-Api-Key, /slots, /props, /metrics", async () => {
  await using s = await setup({ apiKey: "k", native: { metrics: false, slots: true } }, 1, 64);
  const key = { "x-api-key": "k" };
  for (
    const [field, value] of [
      ["post_sampling_probs", true],
      ["mirostat", 2],
      ["id_slot", 3],
      ["samplers", ["temperature", "top_k"]],
    ] as const
  ) {
    const res = await post(s.api, "/completion", { prompt: "a", [field]: value }, key);
    assert.equal(res.status, 400, field);
    assert.match((await res.json()).error.message, new RegExp(field));
  }
  assert.equal((await post(s.api, "/completion", { prompt: "a" })).status, 401);
  const long = await post(s.api, "/completion", { prompt: "a b c d ".repeat(40) }, key);
  assert.equal(long.status, 400);
  const e = (await long.json()).error;
  assert.equal(e.type, "exceed_context_size_error");
  assert.match(e.message, /exceeds the available context size/);
  const get = (path: string) =>
    s.api.fetch(new Request("http://localhost" + path, { headers: key }));
  const slots = await (await get("/slots")).json();
  assert.deepEqual(slots, [{ id: 0, n_ctx: 64, speculative: false, is_processing: false }]);
  const props = await (await get("/props")).json();
  assert.equal(props.total_slots, 1);
  assert.equal(props.default_generation_settings.n_ctx, 64);
  assert.equal((await get("/metrics")).status, 501);
  assert.equal((await post(s.api, "/props", { a: 1 }, key)).status, 501);
});

Deno.test("native: slot files: save, erase, restore; truncated or another model's refused, nothing loaded", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const native = { slotSavePath: dir };
    await using s = await setup({ native }, 1, 128);
    // long enough for the cache to keep a prefix (it keeps whole blocks of 8 tokens)
    const prompt = "Once upon a time there was a little girl who liked to play in the park.";
    const run = async () =>
      (await (await post(s.api, "/completion", { prompt, n_predict: 4, temperature: 0 })).json())
        .timings;
    await run();
    const saved = await (await post(s.api, "/slots/0?action=save", { filename: "a.bin" })).json();
    assert.ok(saved.n_saved > 0, JSON.stringify(saved));
    assert.equal(saved.n_written, Deno.statSync(`${dir}/a.bin`).size);
    const erased = await (await post(s.api, "/slots/0?action=erase", {})).json();
    assert.equal(erased.n_erased, saved.n_saved);
    const restored = await (await post(s.api, "/slots/0?action=restore", { filename: "a.bin" }))
      .json();
    assert.equal(restored.n_restored, saved.n_saved);
    // the restored prefix serves the same prompt from the cache
    assert.ok((await run()).cache_n > 0);
    // a truncated file: refused with one line, the (erased) slot stays empty
    await post(s.api, "/slots/0?action=erase", {});
    const bytes = Deno.readFileSync(`${dir}/a.bin`);
    Deno.writeFileSync(`${dir}/cut.bin`, bytes.subarray(0, bytes.length - 10));
    const cut = await post(s.api, "/slots/0?action=restore", { filename: "cut.bin" });
    assert.equal(cut.status, 400);
    const message = (await cut.json()).error.message;
    assert.match(message, /truncated/);
    assert.ok(!message.includes("\n"));
    assert.equal((await run()).cache_n, 0);
    // another model's file
    await using other = await (async () => {
      const backend = await loadBackend(testdata("models/llama-2-tiny-random.gguf"), {
        slots: 1,
        contextSize: 128,
        threads: 1,
      }, (chat) => chatRenderer(chat));
      return {
        api: new ApiHandler({ backend, native }),
        [Symbol.asyncDispose]: () => backend.close(),
      };
    })();
    await post(other.api, "/completion", { prompt: "Hello", n_predict: 2, temperature: 0 });
    assert.equal(
      (await post(other.api, "/slots/0?action=save", { filename: "b.bin" })).status,
      200,
    );
    await post(s.api, "/slots/0?action=erase", {});
    const wrong = await post(s.api, "/slots/0?action=restore", { filename: "b.bin" });
    assert.equal(wrong.status, 400);
    assert.match((await wrong.json()).error.message, /another model/);
    assert.equal((await run()).cache_n, 0);
    // names, not paths; an unknown action
    assert.equal((await post(s.api, "/slots/0?action=save", { filename: "../x" })).status, 400);
    assert.equal((await post(s.api, "/slots/0?action=load", {})).status, 400);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("native: /infill builds llama.cpp's FIM prompt (extra files, prefix, suffix) and answers as it", async () => {
  const { path } = makeModel({
    shape: "qwen2-tiny",
    type: "f32",
    outDir: join(repoRoot, "models"),
    vocabDir: testdata("vocab-converted"),
  });
  const golden = JSON.parse(
    readFileSync(join(repoRoot, "tests/golden/llama_server_native/qwen2-tiny-infill.json"), "utf8"),
  );
  // llama-server's settings of the golden: -c 1024 -np 1 -b 256 -n 16
  const backend = await loadBackend(path, {
    slots: 1,
    contextSize: 1024,
    threads: 1,
    stepTokens: 256,
  }, (chat) => chatRenderer(chat));
  try {
    const api = new ApiHandler({ backend, defaults: { maxTokens: 16 } });
    for (const g of golden) {
      const res = await post(api, "/infill", g.request);
      assert.equal(res.status, 200);
      const body = await res.json();
      assert.equal(body.prompt, g.response.prompt);
      assert.equal(body.tokens_evaluated, g.response.tokens_evaluated);
      assert.deepEqual(body.tokens, g.response.tokens);
      assert.equal(body.content, g.response.content);
    }
    const bad = await post(api, "/infill", { input_prefix: 3 });
    assert.equal(bad.status, 400);
  } finally {
    await backend.close();
  }
  // a model without FIM tokens: 501, as llama-server
  await using s = await setup();
  const none = await post(s.api, "/infill", { input_prefix: "a", input_suffix: "b" });
  assert.equal(none.status, 501);
});
