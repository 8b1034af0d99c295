/**
 * Memory read bandwidth at 1..N threads: the bound of a memory-bound decode step
 * (bytes read per token ÷ this bandwidth). Streams a 1 GiB buffer through the
 * pool with wide vector loads; the best of the repetitions is reported, with
 * the mean beside it.
 *
 *   deno task bench:bandwidth [--json]
 *
 * @module
 */
import process from "node:process";
import { loadNative } from "../src/native/mod.ts";

const sizeBytes = 1 << 30;
const repetitions = 7;
const native = loadNative();
const threadCounts = [
  1,
  ...(native.fn.dotllm_cpu_count() > 1 ? [native.fn.dotllm_cpu_count()] : []),
];
const buffer = native.alloc(sizeBytes); // zero-filled, so every page is resident
const pools = threadCounts.map((t) => native.fn.dotllm_pool_create(t));
const samples = threadCounts.map(() => [] as number[]);
for (let r = 0; r < repetitions; r++) {
  pools.forEach((pool, i) => {
    const start = performance.now();
    native.fn.dotllm_bandwidth_read(pool, buffer.address, sizeBytes);
    samples[i].push(sizeBytes / ((performance.now() - start) / 1000) / 1e9);
  });
}
pools.forEach((pool) => native.fn.dotllm_pool_destroy(pool));
buffer.free();

const rows = threadCounts.map((threads, i) => ({
  threads,
  best_gbps: Math.round(Math.max(...samples[i]) * 10) / 10,
  mean_gbps: Math.round((samples[i].reduce((a, b) => a + b) / repetitions) * 10) / 10,
}));
if (process.argv.includes("--json")) {
  console.log(JSON.stringify(rows));
} else {
  console.log("| threads | read GB/s (best) | read GB/s (mean) |");
  console.log("| ------: | ---------------: | ---------------: |");
  for (const r of rows) {
    console.log(`| ${r.threads} | ${r.best_gbps.toFixed(1)} | ${r.mean_gbps.toFixed(1)} |`);
  }
}
