/**
 * `dotllm bench`'s statistics: mean and standard deviation as llama-bench reports
 * them, the median beside them, and the `--json` row's field order.
 */
import assert from "node:assert/strict";
import { benchRow, throughput } from "../src/cli/_bench.ts";
import { runDeno } from "./_cli.ts";
import { testdata } from "./_testdata.ts";

Deno.test("throughput: the median is the middle sample, or the mean of the middle two", () => {
  const odd = throughput([30, 10, 20]);
  assert.equal(odd.median, 20);
  assert.equal(odd.mean, 20);
  assert.equal(odd.std, 10);
  // An outlier moves the mean, not the median.
  const skewed = throughput([10, 11, 40]);
  assert.equal(skewed.median, 11);
  assert.equal(skewed.mean, 61 / 3);
  assert.equal(throughput([4, 1, 3, 2]).median, 2.5);
  assert.equal(throughput([7]).median, 7);
  assert.equal(throughput([7]).std, 0);
});

Deno.test("benchRow: the mean fields keep their places, the medians follow, then the depth", () => {
  const c = { kind: "tg" as const, tokenCount: 32, threads: 2 };
  const ours = throughput([40, 44, 41]);
  const alone = benchRow(c, ours);
  const means = ["test", "threads", "n_prompt", "n_gen", "tok_s_mean", "tok_s_std"];
  assert.deepEqual(Object.keys(alone), [...means, "tok_s_median", "n_depth"]);
  assert.equal(alone.tok_s_median, 41);
  assert.equal(alone.n_depth, 0);
  const versus = benchRow(c, ours, throughput([50, 20, 40]));
  assert.deepEqual(Object.keys(versus), [
    ...means,
    "llama_cpp_tok_s_mean",
    "llama_cpp_tok_s_std",
    "ratio",
    "tok_s_median",
    "llama_cpp_tok_s_median",
    "ratio_median",
    "n_depth",
  ]);
  assert.equal(versus.test, "tg32");
  assert.equal(versus.llama_cpp_tok_s_median, 40);
  assert.equal(versus.ratio_median, 1.025);
  assert.equal(versus.ratio, round3(125 / 3 / (110 / 3)));
});

Deno.test("benchRow: a depth names the test as llama-bench does", () => {
  const row = benchRow({ kind: "pp", tokenCount: 64, threads: 1, depth: 4096 }, throughput([9]));
  assert.equal(row.test, "pp64 @ d4096");
  assert.equal(row.n_prompt, 64);
  assert.equal(row.n_depth, 4096);
});

Deno.test("dotllm bench -d: every test at every depth, in llama-bench's order and names", async () => {
  const model = testdata("models", "stories260K.gguf");
  const out = await runDeno([
    "bench",
    model,
    "-p",
    "8",
    "-n",
    "4",
    "-d",
    "0,40",
    "-t",
    "1",
    "-r",
    "1",
    "--json",
  ]);
  assert.equal(out.code, 0, out.stderr);
  const rows = JSON.parse(out.stdout) as Array<Record<string, unknown>>;
  assert.deepEqual(
    rows.map((r) => [r.test, r.n_prompt, r.n_gen, r.n_depth]),
    [["pp8", 8, 0, 0], ["pp8 @ d40", 8, 0, 40], ["tg4", 0, 4, 0], ["tg4 @ d40", 0, 4, 40]],
  );
  for (const r of rows) assert.ok((r.tok_s_mean as number) > 0, JSON.stringify(r));
  // A depth that is not a whole number is a usage error (exit 2).
  const bad = await runDeno(["bench", model, "-p", "8", "-n", "0", "-d", "x", "-r", "1"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /-d must be a comma-separated list of integers/);
});

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
