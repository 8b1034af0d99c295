/**
 * Decode-loop memory: JS heap and RSS growth over 1,000 generated tokens
 * (expected ≈ 0: the loop reuses every buffer), and RSS against the model's
 * own accounting (mapped weights + KV cache + scratch). The task runs V8 with
 * a 64 MB young generation, so no scavenge hides short-lived garbage: the
 * "no GC" row is what the loop allocates, the "after GC" row what it keeps.
 *
 *   deno task bench:decode [MODEL.gguf] [-t THREADS] [-n TOKENS] [--warm-up RUNS]
 *
 * @module
 */
import process from "node:process";
import { parseArgs } from "node:util";
import { generate } from "../src/generation/mod.ts";
import { Llm } from "../src/llm/mod.ts";
import { Context, type ForwardOps, Model } from "../src/model/mod.ts";
import { Sampler } from "../src/sampler/mod.ts";

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: {
    threads: { type: "string", short: "t" },
    tokens: { type: "string", short: "n" },
    "warm-up": { type: "string" },
  },
  allowPositionals: true,
});
const path = positionals[0] ??
  new URL("../../shared/testdata/models/stories260K.gguf", import.meta.url).pathname;
const tokens = Number(values.tokens ?? 1000);
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

// First (before any real kernels make its call sites polymorphic), the forward
// pass's own JavaScript with kernels that do nothing: what the model layer
// allocates per token, apart from the kernel wrappers and the FFI.
const noKernels: ForwardOps = {
  threadCount: 1,
  matmul(_type, out) {
    if (out === -1) throw new Error("unreachable");
  },
  rmsnorm(out) {
    if (out === -1) throw new Error("unreachable");
  },
  rope(x) {
    if (x === -1) throw new Error("unreachable");
  },
  storeKv(_type, cache) {
    if (cache === -1) throw new Error("unreachable");
  },
  attention(_type, out) {
    if (out === -1) throw new Error("unreachable");
  },
  swiglu(out) {
    if (out === -1) throw new Error("unreachable");
  },
  add(out) {
    if (out === -1) throw new Error("unreachable");
  },
  getRows(_type, out) {
    if (out === -1) throw new Error("unreachable");
  },
  close() {},
};
const hollowModel = Model.load(path, { repack: false }); // no-op kernels read the file's layouts
const hollow = new Context(hollowModel, { kernels: noKernels, contextSize: tokens + 64 });
const one = new Int32Array(1);
const decode = () => {
  for (let pos = 0; pos < tokens; pos++) {
    one[0] = 1;
    hollow.forward(one, pos);
  }
};
for (let i = 0; i < 20; i++) decode();
gc();
const hollowBefore = process.memoryUsage().heapUsed;
decode();
const hollowBytes = process.memoryUsage().heapUsed - hollowBefore;
const hollowLine = `forward pass with no-op kernels: ${
  (hollowBytes / tokens).toFixed(1)
} B/token allocated`;
hollow.close();
hollowModel.close();

const rssStart = process.memoryUsage().rss;
const llm = await Llm.load(path, {
  threads: Number(values.threads ?? 0),
  contextSize: tokens + 64,
});
const tokenizer = llm.tokenizer;
const options = { prompt: "Once upon a time", maxTokens: tokens, collectText: false };

// Warm up (JIT tiers, page-in of the weights), then measure a further, identical run.
const warmUpRuns = Number(values["warm-up"] ?? 4);
for (let i = 0; i < warmUpRuns; i++) {
  llm.context.cache.clear(); // cold prompts, as the measured run
  await generate(llm, tokenizer, new Sampler(llm.config.vocabSize, { temperature: 0 }, 1), {
    ...options,
    maxTokens: 500,
  });
}
const sampler = new Sampler(llm.config.vocabSize, { temperature: 0 }, 1);
llm.context.cache.clear();
gc();
const before = process.memoryUsage();
const result = await generate(llm, tokenizer, sampler, options);
const after = process.memoryUsage();
gc();
const afterGc = process.memoryUsage();

const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
const mib = (n: number) => `${(n / (1 << 20)).toFixed(1)} MiB`;
const n = result.tokens.length;
const m = llm.context.memory;
console.log(`model ${path}, ${llm.context.threadCount} threads, ${n} tokens decoded`);
console.log(
  `decode: ${(n / (result.timings.decodeMs + result.timings.samplingMs) * 1000).toFixed(1)} tok/s`,
);
console.table({
  "JS heap growth (no GC)": {
    total: kib(after.heapUsed - before.heapUsed),
    "per token": `${((after.heapUsed - before.heapUsed) / n).toFixed(1)} B`,
  },
  "JS heap growth (after GC)": {
    total: kib(afterGc.heapUsed - before.heapUsed),
    "per token": `${((afterGc.heapUsed - before.heapUsed) / n).toFixed(1)} B`,
  },
  "RSS growth": {
    total: kib(after.rss - before.rss),
    "per token": `${((after.rss - before.rss) / n).toFixed(1)} B`,
  },
});
console.table({
  "weights (mapped)": mib(m.weightsBytes),
  "KV cache": mib(m.kvCacheBytes),
  scratch: mib(m.scratchBytes),
  "sum": mib(m.weightsBytes + m.kvCacheBytes + m.scratchBytes),
  "RSS growth since start": mib(after.rss - rssStart),
  "RSS": mib(after.rss),
});
llm.close();
console.log(hollowLine);
