/**
 * The real SmolLM2-135M-Instruct Q4_1 file against llama.cpp's greedy golden
 * (`golden/smollm2-135m-instruct-q4_1.greedy.json`: 4 prompts × 64 tokens, the
 * chat-formatted one included, top-5 raw logits per step), at 1 and 2 threads.
 *
 * This model is extremely sensitive: its Q8 activation quantization turns a 1-ulp
 * difference anywhere into logit differences of ~0.3, so only a forward pass that
 * rounds exactly as llama.cpp's x86 CPU build does gives its tokens. The kernels do
 * (Q4_1/Q8_0 matmuls, RMSNorm, RoPE, SwiGLU and attention in ggml's float order): the
 * ids must be equal and the top-5 logits equal up to the golden's 6-decimal printing,
 * so the tolerance is 1e-4 (the measured maximum is 5e-7, the printing's rounding).
 *
 * A divergence fails the test; its message says whether the golden's top-2 logits at
 * that step were within 1e-3 (a near-tie, which a 1-ulp difference may flip) so it is
 * reported, not hidden. The golden has no such step today (checked below and logged).
 *
 * @module
 */
import assert from "node:assert/strict";
import { Llm } from "../src/llm/mod.ts";
import { Context, Model } from "../src/model/mod.ts";
import { golden, type GoldenCase } from "./_golden.ts";
import { testdata } from "./_testdata.ts";

const SMOLLM2 = testdata("models/SmolLM2-135M-Instruct.Q4_1.gguf");
const CASES = golden("smollm2-135m-instruct-q4_1");
/** Top-5 logit tolerance: the golden prints 6 decimals; the forward pass is bit-exact. */
const LOGIT_TOLERANCE = 1e-4;
/** Golden steps whose top-2 logits are closer than this are near-ties. */
const NEAR_TIE = 1e-3;

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

function topGap(c: GoldenCase, step: number): number {
  const [first, second] = c.steps[step].top5;
  return first.logit - second.logit;
}

interface Run {
  ids: number[];
  maxError: number;
  divergence?: { step: number; ours: number; golden: number; gap: number };
}

/** Free-running greedy decoding (our argmax fed back), as a user gets it. */
function greedy(context: Context, c: GoldenCase): Run {
  let logits = context.forward(c.prompt_ids, 0);
  let pos = c.prompt_ids.length;
  const ids: number[] = [];
  let maxError = 0;
  for (let step = 0; step < c.generated_ids.length; step++) {
    for (const t of c.steps[step].top5) {
      maxError = Math.max(maxError, Math.abs(logits[t.id] - t.logit));
    }
    const id = argmax(logits);
    ids.push(id);
    if (id !== c.generated_ids[step]) {
      const divergence = { step, ours: id, golden: c.generated_ids[step], gap: topGap(c, step) };
      return { ids, maxError, divergence };
    }
    if (step + 1 < c.generated_ids.length) logits = context.forward([id], pos++);
  }
  return { ids, maxError };
}

function describe(c: GoldenCase, run: Run, threads: number): string {
  const d = run.divergence!;
  const kind = d.gap < NEAR_TIE
    ? `a near-tie (golden top-2 gap ${d.gap.toExponential(2)})`
    : `not a near-tie (golden top-2 gap ${d.gap.toFixed(4)})`;
  return `-t ${threads} ${
    JSON.stringify(c.prompt.slice(0, 40))
  }: step ${d.step} gave ${d.ours}, llama.cpp ${d.golden}; ${kind}`;
}

Deno.test("smollm2 golden: the golden has 4 cases × 64 steps; its near-tie steps are counted", () => {
  assert.equal(CASES.length, 4);
  let nearTies = 0;
  for (const c of CASES) {
    assert.equal(c.generated_ids.length, 64);
    assert.equal(c.steps.length, 64);
    for (let s = 0; s < c.steps.length; s++) if (topGap(c, s) < NEAR_TIE) nearTies++;
  }
  console.log(
    `smollm2 golden: ${nearTies} of ${4 * 64} steps are near-ties (top-2 within ${NEAR_TIE})`,
  );
});

for (const threads of [1, 2]) {
  Deno.test(`smollm2 golden: greedy ids = llama.cpp's for all 4 cases at -t ${threads}, top-5 logits within ${LOGIT_TOLERANCE}`, () => {
    using model = Model.load(SMOLLM2);
    using context = new Context(model, { threads, contextSize: 4096 });
    const failures: string[] = [];
    let matched = 0;
    let worst = 0;
    for (const c of CASES) {
      const run = greedy(context, c);
      matched += run.divergence ? run.divergence.step : c.generated_ids.length;
      worst = Math.max(worst, run.maxError);
      if (run.divergence) failures.push(describe(c, run, threads));
      else assert.deepEqual(run.ids, c.generated_ids);
    }
    console.log(
      `-t ${threads}: ${matched} of ${4 * 64} tokens equal llama.cpp's; max top-5 logit error ${
        worst.toExponential(2)
      }`,
    );
    assert.deepEqual(failures, [], failures.join("\n"));
    assert.ok(worst <= LOGIT_TOLERANCE, `max top-5 logit error ${worst} > ${LOGIT_TOLERANCE}`);
  });
}

Deno.test("smollm2 golden: Llm.generate at temperature 0 and -t 2 yields llama.cpp's tokens", async () => {
  const llm = await Llm.load(SMOLLM2, { threads: 2, contextSize: 4096 });
  try {
    for (const c of CASES) {
      const run = llm.generate(c.prompt_ids, { temperature: 0, maxTokens: c.generated_ids.length });
      let step = await run.next();
      while (!step.done) step = await run.next();
      assert.deepEqual(
        Array.from(step.value.tokens),
        c.generated_ids,
        JSON.stringify(c.prompt.slice(0, 40)),
      );
    }
  } finally {
    llm.close();
  }
});
