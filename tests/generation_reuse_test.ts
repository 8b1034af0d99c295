/**
 * Long conversations on sliding-window models never fail and never change a
 * token: on the real Gemma 3 270M Q4_K_M (five of six layers see the last
 * 512 positions) through `dotllm serve --parallel 2`, long prompts that
 * share prefixes of every length with earlier ones, in both orders and
 * concurrently, each answer exactly what `dotllm run` answers for the prompt
 * alone; a `ChatSession` whose earlier turn is edited replies as a fresh
 * session does, on Gemma 3 and on a Mistral-shaped model with a 64-token
 * window.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChatSession, ChatTemplate, templateTokens } from "../src/chat/mod.ts";
import type { ChatMessage } from "../src/chat/mod.ts";
import { Llm } from "../src/llm/mod.ts";
import { Context } from "../src/model/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { ensureGemma } from "./_gemma.ts";
import { loadMistralTiny } from "./_mistral.ts";
import { runCli } from "./_run_cli.ts";
import { startServer } from "./_server.ts";

const WORDS = (
  "river stone garden lantern quiet morning harbor window silver meadow orchard pencil " +
  "thunder violet candle market bridge forest winter summer copper planet velvet signal " +
  "marble ladder compass island feather anchor canyon pepper ribbon saddle timber walnut"
).split(" ");

/** `count` words of a deterministic text, sentences of 7-12 words. */
function words(count: number, seed: number): string[] {
  const out: string[] = [];
  let x = seed;
  let sentence = 0;
  for (let i = 0; i < count; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    let w = WORDS[(x >>> 8) % WORDS.length];
    if (sentence === 0) w = w[0].toUpperCase() + w.slice(1);
    sentence++;
    if (sentence >= 7 + ((x >>> 20) % 6)) {
      w += ".";
      sentence = 0;
    }
    out.push(w);
  }
  return out;
}

const base = words(900, 1);
/** A prompt sharing the first `shared` words with `base`, then its own words. */
const variant = (shared: number, seed: number) =>
  [...base.slice(0, shared), ...words(900 - shared, seed)].join(" ");

Deno.test({
  name:
    "serve --parallel 2 on Gemma 3: long prompts sharing 0-1000 tokens, in both orders and concurrently, equal `dotllm run` alone",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const model = ensureGemma();
    const prompts = [
      base.join(" "),
      variant(0, 2),
      variant(250, 3),
      variant(450, 4),
      variant(800, 5),
    ];
    const dir = mkdtempSync(join(tmpdir(), "dotllm-reuse-"));
    const alone: string[] = [];
    try {
      for (const [i, p] of prompts.entries()) {
        const file = join(dir, `p${i}.txt`);
        writeFileSync(file, p);
        const out = await runCli([
          "run",
          model,
          "-f",
          file,
          "-n",
          "12",
          "--temp",
          "0",
          "-c",
          "2048",
          "-t",
          "2",
          "--json",
        ]);
        assert.equal(out.code, 0, out.stderr);
        alone.push(JSON.parse(out.stdout).text);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const server = await startServer(model, [
      "--parallel",
      "2",
      "-c",
      "2048",
      "-t",
      "2",
      "--metrics",
    ]);
    try {
      const complete = async (i: number) => {
        const res = await fetch(`${server.url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ prompt: prompts[i], max_tokens: 12, temperature: 0 }),
        });
        const body = await res.json();
        assert.equal(res.status, 200, `prompt ${i}: ${JSON.stringify(body)}`);
        assert.equal(body.choices[0].text, alone[i], `prompt ${i}`);
        return body.usage.prompt_tokens as number;
      };
      const tokens = await complete(0);
      assert.ok(tokens > 1000, `the base prompt is ${tokens} tokens`);
      for (const i of [2, 3, 4, 1, 0]) await complete(i); // growing then shrinking shared prefixes
      for (const i of [4, 3, 2, 0, 1]) await complete(i); // the other order
      await Promise.all([complete(4), complete(2)]);
      await Promise.all([complete(0), complete(3), complete(1), complete(4)]);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      const cached = Number(/dotllm_prompt_tokens_cached_total (\d+)/.exec(metrics)?.[1] ?? NaN);
      assert.ok(cached > 1000, `prefixes were reused (${cached} cached prompt tokens)`);
    } finally {
      assert.equal(await server.stop(), 0);
    }
  },
});

/** A long conversation, then its first or last user turn edited: the reply equals a fresh session's. */
async function editedTurns(
  target: { context: Context; tokenizer: Tokenizer },
  fresh: () => { context: Context; tokenizer: Tokenizer; [Symbol.dispose](): void },
  template: ChatTemplate,
  wordsPerTurn: number,
) {
  const session = new ChatSession(target, template, { sampling: { temperature: 0 }, seed: 1 });
  for (let t = 0; t < 3; t++) {
    await session.send(words(wordsPerTurn, 10 + t).join(" "), { maxTokens: 8 });
  }
  const history = session.messages.slice() as ChatMessage[];
  const edits: Array<[string, ChatMessage[]]> = [
    ["the last turn", [
      ...history.slice(0, -2),
      { role: "user", content: "edited" },
      history.at(-1)!,
    ]],
    ["the first turn", [
      { role: "user", content: history[0].content + " edited" },
      ...history.slice(1),
    ]],
  ];
  const reused: number[] = [];
  for (const [what, messages] of edits) {
    session.setMessages(messages);
    const turn = await session.send("And then?", { maxTokens: 8 });
    using f = fresh();
    const reference = new ChatSession(f, template, {
      sampling: { temperature: 0 },
      seed: 1,
      messages,
    });
    const want = await reference.send("And then?", { maxTokens: 8 });
    assert.equal(turn.text, want.text, `${what} edited`);
    assert.equal(turn.finishReason, want.finishReason, `${what} edited`);
    assert.ok(turn.promptTokens === want.promptTokens, `${what}: the same prompt`);
    console.log(
      `${what} edited: ${turn.promptTokens} prompt tokens, ${turn.reusedTokens} reused, ` +
        `${turn.prefilledTokens} run again`,
    );
    reused.push(turn.reusedTokens);
  }
  return reused;
}

Deno.test("ChatSession on Gemma 3: an edited earlier turn replies as a fresh session", async () => {
  using llm = await Llm.load(ensureGemma(), { threads: 2, contextSize: 2048 });
  // This file has no template of its own: the built-in Gemma one.
  const template = ChatTemplate.builtin("gemma", templateTokens(llm.tokenizer));
  const [lastTurn] = await editedTurns(
    llm,
    () => {
      const context = new Context(llm.model, { threads: 2, contextSize: 2048 });
      return { context, tokenizer: llm.tokenizer, [Symbol.dispose]: () => context.close() };
    },
    template,
    260,
  );
  // Within the rings' reach (512 positions back, with batches of 512), the prefix was kept.
  assert.ok(lastTurn > 500, `the last turn's edit reused ${lastTurn} tokens`);
});

Deno.test("ChatSession on a Mistral-shaped model with a 64-token window: edited turns never fail", async () => {
  using model = loadMistralTiny(64);
  const tokenizer = Tokenizer.fromGguf(model.gguf);
  const template = ChatTemplate.builtin("chatml", templateTokens(tokenizer));
  using context = new Context(model, { threads: 2, contextSize: 1024, batchSize: 32 });
  assert.deepEqual(Array.from(context.cache.layerRows), [95, 95]);
  await editedTurns(
    { context, tokenizer },
    () => {
      const c = new Context(model, { threads: 2, contextSize: 1024, batchSize: 32 });
      return { context: c, tokenizer, [Symbol.dispose]: () => c.close() };
    },
    template,
    60,
  );
});
