/**
 * Prompt eval vs generation speed of `dotllm run`'s engine on one model: a
 * 256-token prompt prefilled in batches (GEMM), then 64 tokens decoded one
 * at a time (GEMV), at 1 and 2 threads. Prefill several times faster than
 * decode is the sign that it is batched.
 *
 *   deno task bench:run [MODEL.gguf] [--prompt-tokens 256] [--tokens 64]
 *
 * @module
 */
import process from "node:process";
import { parseArgs } from "node:util";
import { generate } from "../src/generation/mod.ts";
import { Llm } from "../src/llm/mod.ts";
import { Sampler } from "../src/sampler/mod.ts";

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: {
    "prompt-tokens": { type: "string" },
    tokens: { type: "string", short: "n" },
    threads: { type: "string", short: "t", multiple: true },
  },
  allowPositionals: true,
});
const path = positionals[0] ??
  new URL("../../shared/testdata/models/stories260K.gguf", import.meta.url).pathname;
const promptTokens = Number(values["prompt-tokens"] ?? 256);
const tokens = Number(values.tokens ?? 64);
const threadCounts = (values.threads ?? ["1", "2"]).map(Number);

const rows: Record<string, Record<string, string>> = {};
for (const threads of threadCounts) {
  const llm = await Llm.load(path, { threads });
  const vocab = llm.config.vocabSize;
  // A fixed pseudo-random prompt of ids (skipping the first 300, often special).
  const prompt = Array.from({ length: promptTokens }, (_, i) => 300 + (i * 7919) % (vocab - 300));
  const run = () => {
    llm.context.cache.clear(); // a cold prompt each run (else its prefix is reused)
    return generate(llm, llm.tokenizer, new Sampler(vocab, { temperature: 0 }, 1), {
      prompt,
      maxTokens: tokens,
      collectText: false,
    });
  };
  await run(); // warm-up: JIT, page-in of the weights
  const r = await run();
  const t = r.timings;
  const prefill = t.prefillTokens / t.prefillMs * 1000;
  const decode = r.tokens.length / (t.decodeMs + t.samplingMs) * 1000;
  rows[`${threads} thread${threads === 1 ? "" : "s"}`] = {
    "prompt eval tok/s": prefill.toFixed(1),
    "generation tok/s": decode.toFixed(1),
    "prefill / decode": `${(prefill / decode).toFixed(1)}×`,
  };
  llm.close();
}
console.log(`${path}: ${promptTokens}-token prompt, ${tokens} generated tokens (greedy)`);
console.table(rows);
