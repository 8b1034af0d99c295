/**
 * Where a server step's time goes when it decodes 1 and when it decodes 4
 * sequences at once, in CPU time (`process.cpuUsage`, every thread: steadier
 * than wall time on a shared machine), rounds interleaved, medians:
 *
 * 1. each distinct weight matrix of layer 0 and the LM head as a matmul of
 *    T = 1..4 columns (what a 4-sequence batch asks of the quant kernels;
 *    perfect weight reuse would keep T=4 near T=1, four GEMVs make it 4×);
 * 2. one `Context.decode` of 1 token (1 slot) and of 4 tokens (4 slots);
 * 3. the scheduler (what the server's model Worker runs) generating 64
 *    greedy tokens for 1 and for 4 requests: decode vs the TypeScript rest
 *    of a step (sampling, detokenizing, stop strings, events).
 *
 *   deno run -A bench/batch_scaling.ts [--model FILE] [-t 1] [--rounds 5]
 *
 * The default model is SmolLM2-135M-Instruct Q4_1 of the test data.
 *
 * @module
 */
import process from "node:process";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Kernels } from "../src/kernels/mod.ts";
import { GgmlType } from "../src/gguf/mod.ts";
import { Batch, Context, Model } from "../src/model/mod.ts";
import { loadBackend } from "../src/server/load.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    model: { type: "string" },
    threads: { type: "string", short: "t", default: "1" },
    rounds: { type: "string", default: "5" },
  },
});
const root = new URL("../", import.meta.url).pathname;
const testdata = process.env.DOTLLM_TESTDATA ?? join(root, "../shared/testdata");
const path = values.model ?? join(testdata, "models/SmolLM2-135M-Instruct.Q4_1.gguf");
const threads = Number(values.threads);
const rounds = Number(values.rounds);

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const typeName = (t: number) =>
  Object.entries(GgmlType).find(([, v]) => v === t)?.[0].toLowerCase() ?? String(t);

console.log(
  `model ${path.split("/").pop()}, ${threads} thread(s), ${rounds} rounds (median CPU time), ` +
    `${new Date().toISOString()}, load average ${
      Deno.loadavg().map((l) => l.toFixed(2)).join(" ")
    }`,
);

// 1. Matmuls of 1..4 columns on the model's own weights.
{
  const model = Model.load(path);
  const native = model.native;
  const k = new Kernels(native, threads);
  const c = model.config, w = model.weights, L = w.layers[0];
  const E = c.embeddingLength, F = c.feedForwardLength, Q = c.headCount * c.headDim;
  const KV = c.headCountKv * c.headDim;
  const mats: Array<[string, { type: number; address: number }, number, number]> = [];
  if (L.wq) mats.push(["attn_q", L.wq, Q, E], ["attn_k", L.wk!, KV, E]);
  if (L.wqkv) mats.push(["attn_qkv", L.wqkv, Q + 2 * KV, E]);
  mats.push(["attn_output", L.wo, E, Q]);
  if (L.wGate) mats.push(["ffn_gate", L.wGate, F, E]);
  mats.push(["ffn_down", L.wDown, E, F], ["output", w.output, w.output.rowCount, E]);
  const cols = Math.max(E, F, Q);
  k.reserve(4, cols);
  const x = native.alloc(4 * cols * 4);
  x.f32().forEach((_, i, a) => (a[i] = Math.sin(i) * 0.1));
  const out = native.alloc(4 * Math.max(w.output.rowCount, F, Q + 2 * KV) * 4);
  console.log(
    "\n| matmul (layer 0, LM head) | type | T=1 µs CPU | T=2 / T=1 | T=3 / T=1 | T=4 / T=1 |",
  );
  console.log("|---|---|---:|---:|---:|---:|");
  for (const [name, t, rows, n] of mats) {
    const ms: number[][] = [[], [], [], [], []];
    const reps = Math.max(5, Math.round(2e8 / (rows * n))); // ≈ 0.1 s per T=1 round
    for (let r = 0; r < rounds; r++) {
      for (let T = 1; T <= 4; T++) {
        const c0 = cpuMs();
        for (let i = 0; i < reps; i++) {
          k.matmul(t.type, out.address, t.address, x.address, rows, n, T);
        }
        ms[T].push((cpuMs() - c0) / reps);
      }
    }
    const one = median(ms[1]);
    const ratio = (T: number) => (median(ms[T]) / one).toFixed(2);
    console.log(
      `| ${name} ${rows}×${n} | ${typeName(t.type)} | ${(one * 1000).toFixed(0)} | ${ratio(2)} | ` +
        `${ratio(3)} | ${ratio(4)} |`,
    );
  }
  x.free();
  out.free();
  k.close();
  model.close();
}

// 2. One decode step of 1 and of 4 sequences (each slot holds a 32-token prompt, growing).
{
  const model = Model.load(path);
  const context = new Context(model, {
    slots: 4,
    contextSize: 1024,
    threads,
    batchSize: 256,
    maxLogits: 4, // a batch wants at most one row per sequence
  });
  const batch = new Batch(256);
  const length = [0, 0, 0, 0];
  for (let s = 0; s < 4; s++) {
    batch.clear();
    for (let i = 0; i < 32; i++) batch.add(100 + i + s, length[s]++, s, i === 31);
    context.decode(batch);
    context.logitsBlock(); // what the scheduler samples from
  }
  const ms: Record<number, number[]> = { 1: [], 4: [] };
  for (let r = 0; r < rounds; r++) {
    for (const n of [1, 4]) {
      const steps = 16;
      const c0 = cpuMs();
      for (let i = 0; i < steps; i++) {
        batch.clear();
        for (let s = 0; s < n; s++) batch.add(200 + s, length[s]++, s, true);
        context.decode(batch);
        context.logitsBlock();
      }
      ms[n].push((cpuMs() - c0) / steps);
    }
  }
  const one = median(ms[1]), four = median(ms[4]);
  console.log(
    `\ndecode step: 1 sequence ${one.toFixed(2)} ms CPU, 4 sequences ${four.toFixed(2)} ms CPU: ` +
      `${(four / one).toFixed(2)}× (4 streams can be at most ${(4 * one / four).toFixed(2)}× one)`,
  );
  context.close();
  model.close();
}

// 3. The scheduler, as the model Worker runs it: decode vs the rest of each step.
{
  const backend = await loadBackend(path, { slots: 4, contextSize: 1024, threads });
  const scheduler = backend.scheduler, context = scheduler.context;
  let decodeMs = 0, stepMs = 0, steps = 0;
  const decode = context.decode.bind(context), step = scheduler.step.bind(scheduler);
  context.decode = (b) => {
    const c0 = cpuMs();
    const rows = decode(b);
    decodeMs += cpuMs() - c0;
    return rows;
  };
  scheduler.step = () => {
    const c0 = cpuMs();
    const more = step();
    stepMs += cpuMs() - c0;
    steps++;
    return more;
  };
  const prompts = [
    "Once upon a time, in a small village by the sea, there lived",
    "The three most important things to know about the history of Rome are",
    "Here is a short recipe for a tomato soup:",
    "Write a letter to a friend describing your summer holiday. Dear Sam,",
  ];
  const run = (n: number) =>
    Promise.all(
      prompts.slice(0, n).map((text) =>
        new Promise<void>((resolve, reject) =>
          backend.generate({
            prompt: { text },
            maxTokens: 64,
            sampling: { temperature: 0 },
            seed: 0,
            stop: [],
            topLogprobs: -1,
            ignoreEos: true,
            n: 1,
            logitBias: [],
          }, (e) => {
            if (e.type === "done") resolve();
            if (e.type === "error") reject(new Error(e.message));
          })
        )
      ),
    );
  await run(1); // warm-up
  console.log(
    "\n| scheduler, 64 greedy tokens each | steps | decode ms CPU / step | rest ms CPU / step |",
  );
  console.log("|---|---:|---:|---:|");
  for (const n of [1, 4]) {
    decodeMs = stepMs = steps = 0;
    await run(n);
    console.log(
      `| ${n} request(s) | ${steps} | ${(decodeMs / steps).toFixed(2)} | ` +
        `${((stepMs - decodeMs) / steps).toFixed(3)} |`,
    );
  }
  await backend.close();
}
