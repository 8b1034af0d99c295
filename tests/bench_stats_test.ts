/**
 * `dotllm bench`'s statistics: mean and standard deviation as llama-bench reports
 * them, the median beside them, and the `--json` row's field order.
 */
import assert from "node:assert/strict";
import { benchRow, throughput } from "../src/cli/_bench.ts";

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

Deno.test("benchRow: the mean fields keep their places, the medians follow", () => {
  const c = { kind: "tg" as const, tokenCount: 32, threads: 2 };
  const ours = throughput([40, 44, 41]);
  const alone = benchRow(c, ours);
  const means = ["test", "threads", "n_prompt", "n_gen", "tok_s_mean", "tok_s_std"];
  assert.deepEqual(Object.keys(alone), [...means, "tok_s_median"]);
  assert.equal(alone.tok_s_median, 41);
  const versus = benchRow(c, ours, throughput([50, 20, 40]));
  assert.deepEqual(Object.keys(versus), [
    ...means,
    "llama_cpp_tok_s_mean",
    "llama_cpp_tok_s_std",
    "ratio",
    "tok_s_median",
    "llama_cpp_tok_s_median",
    "ratio_median",
  ]);
  assert.equal(versus.test, "tg32");
  assert.equal(versus.llama_cpp_tok_s_median, 40);
  assert.equal(versus.ratio_median, 1.025);
  assert.equal(versus.ratio, round3(125 / 3 / (110 / 3)));
});

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
