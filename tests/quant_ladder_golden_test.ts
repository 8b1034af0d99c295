/**
 * The quant ladder (every SmolLM2 file of `golden/quantize.json`, built by
 * `dotllm quantize`, byte-identical to llama-quantize's) against llama.cpp's greedy
 * runs of the same files (`golden/smollm2-quant-ladder.greedy.json`: 2 prompts × 32
 * tokens, top-5 raw logits, n_ctx 2048). Every type's matmul reproduces the float
 * order llama.cpp's x86 build runs (including its repacked Q4_0/IQ4_NL/Q4_K/Q2_K
 * kernels), so ids must be equal and logits equal up to the golden's printing; a
 * divergence names whether the golden's top-2 logits were within 1e-3 there.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Context, Model } from "../src/model/mod.ts";
import { ladderFile } from "./_quant_ladder.ts";
import { testdata } from "./_testdata.ts";

interface Step {
  top5: { id: number; logit: number }[];
}
interface Case {
  prompt: string;
  prompt_ids: number[];
  generated_ids: number[];
  steps: Step[];
}
interface LadderModel {
  file: string;
  cases: Case[];
}

const ladder: { models: LadderModel[] } = JSON.parse(
  readFileSync(testdata("golden/smollm2-quant-ladder.greedy.json"), "utf8"),
);
const LOGIT_TOLERANCE = 1e-4;
const NEAR_TIE = 1e-3;

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

for (const m of ladder.models) {
  // "smollm2-Q4_K_M.gguf" -> Q4_K_M; "smollm2-Q6_K-pure.gguf" -> Q6_K --pure.
  const name = m.file.replace(/^smollm2-/, "").replace(/\.gguf$/, "");
  const pure = name.endsWith("-pure");
  const type = pure ? name.slice(0, -"-pure".length) : name;
  Deno.test(`quant ladder ${name}: llama.cpp's greedy ids and top-5 logits`, async () => {
    const path = await ladderFile(type, pure);
    using model = Model.load(path);
    using context = new Context(model, { threads: 2, contextSize: 2048 });
    for (const c of m.cases) {
      let logits = context.forward(c.prompt_ids, 0);
      let position = c.prompt_ids.length;
      for (let s = 0; s < c.generated_ids.length; s++) {
        const top = c.steps[s].top5;
        const gap = top[0].logit - top[1].logit;
        const got = argmax(logits);
        assert.equal(
          got,
          c.generated_ids[s],
          `${name} "${c.prompt}" step ${s}: ${got} instead of ${c.generated_ids[s]}` +
            (gap < NEAR_TIE ? ` (a near-tie: top-2 within ${gap})` : ""),
        );
        for (const t of top) {
          assert.ok(
            Math.abs(logits[t.id] - t.logit) <= LOGIT_TOLERANCE,
            `${name} step ${s} token ${t.id}: ${logits[t.id]} vs ${t.logit}`,
          );
        }
        if (s + 1 < c.generated_ids.length) {
          logits = context.forward([c.generated_ids[s]], position++);
        }
      }
    }
  });
}
