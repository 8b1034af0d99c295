/**
 * Time to first token of the 10th turn of a ~1,000-token conversation:
 * continued from the KV cache (only the new turn is prefilled) versus a cold
 * prefill of the same conversation. Target: the warm turn at least 5×
 * sooner.
 *
 *   deno task bench:chat [MODEL.gguf] [--threads N] [--reps 3]
 *
 * Default model: SmolLM2-135M-Instruct Q4_1 from the test data when the
 * engine loads it, else the synthetic `smollm-135m` Q8_0 shape (same
 * architecture and vocabulary, made into `models/` when missing).
 *
 * @module
 */
import { join } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { type ChatMessage, ChatSession, chatTemplateFor } from "../src/chat/mod.ts";
import { makeModel } from "../src/gguf/make_model.ts";
import { Llm } from "../src/llm/mod.ts";
import { Context, Model, ModelError } from "../src/model/mod.ts";

const root = new URL("../", import.meta.url).pathname;
const testdata = process.env.DOTLLM_TESTDATA ?? join(root, "../shared/testdata");
const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: { threads: { type: "string", short: "t" }, reps: { type: "string" } },
  allowPositionals: true,
});
const threads = Number(values.threads ?? 1);
const reps = Number(values.reps ?? 3);

function defaultModel(): string {
  const smollm2 = join(testdata, "models/SmolLM2-135M-Instruct.Q4_1.gguf");
  try {
    using model = Model.load(smollm2);
    new Context(model, { contextSize: 64, threads: 1 }).close();
    return smollm2;
  } catch (error) {
    if (!(error instanceof ModelError)) throw error;
  }
  return makeModel({
    shape: "smollm-135m",
    type: "q8_0",
    outDir: join(root, "models"),
    vocabDir: join(testdata, "vocab-converted"),
  }).path;
}

const path = positionals[0] ?? defaultModel();
const llm = await Llm.load(path, { threads, contextSize: 2048 });
const template = chatTemplateFor(llm.model.gguf, llm.tokenizer, undefined);
const TOPICS = ["rivers", "bridges", "clocks", "forests", "trains", "harbours", "gardens", "stars"];
const user = (i: number) =>
  `Turn ${i}: tell me about ${TOPICS[i % TOPICS.length]}, their history, how they are built ` +
  `or formed, and why people care about them. Keep it short, a few sentences at most, please, ` +
  `and thank you very much.`;
const reply = (i: number) =>
  `Here is a short answer about ${TOPICS[i % TOPICS.length]}. They have a long history, ` +
  `they are built or formed over many years, and people care about them because they shape ` +
  `daily life, travel and the places we remember. Ask me more about them whenever you like.`;
const history: ChatMessage[] = [];
for (let i = 1; i <= 8; i++) {
  history.push({ role: "user", content: user(i) }, { role: "assistant", content: reply(i) });
}
const options = { sampling: { temperature: 0 }, seed: 1 };

const warm: number[] = [];
const cold: number[] = [];
let promptTokens = 0;
let prefilledWarm = 0;
for (let r = 0; r < reps; r++) {
  // Warm: turn 9 fills the cache (its reply generated), turn 10 continues from it.
  const session = new ChatSession(llm, template, { ...options, messages: history });
  await session.send(user(9), { maxTokens: 48 });
  const turn10 = await session.send(user(10), { maxTokens: 1 });
  warm.push(turn10.firstTokenMs);
  promptTokens = turn10.promptTokens;
  prefilledWarm = turn10.prefilledTokens;
  // Cold: the same ten turns, nothing cached.
  // (The slot's history is the cache's: a fresh session would reuse it, so empty it.)
  const messages = session.messages.slice(0, -2);
  llm.context.cache.clear(0);
  const fresh = new ChatSession(llm, template, { ...options, messages });
  const coldTurn = await fresh.send(user(10), { maxTokens: 1 });
  if (coldTurn.promptTokens !== promptTokens) throw new Error("warm and cold prompts differ");
  if (coldTurn.prefilledTokens !== promptTokens) throw new Error("the cold turn reused the cache");
  cold.push(coldTurn.firstTokenMs);
}
llm.close();

const median = (xs: number[]) => xs.toSorted((a, b) => a - b)[Math.floor(xs.length / 2)];
const w = median(warm);
const c = median(cold);
console.log(`model: ${path} (${threads} thread${threads === 1 ? "" : "s"}, ${reps} reps, medians)`);
console.log(`turn 10 of a ${promptTokens}-token conversation:`);
console.log(
  `  warm (KV cache kept): first token after ${
    w.toFixed(1)
  } ms (${prefilledWarm} tokens prefilled)`,
);
console.log(
  `  cold (full prefill):  first token after ${c.toFixed(1)} ms (${promptTokens} tokens prefilled)`,
);
console.log(`  speed-up: ${(c / w).toFixed(1)}× (target >= 5×)`);
