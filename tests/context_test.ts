/**
 * Sequences: three prompts decoded together in one context (prefill chunks of
 * some interleaved with decode steps of others, in shared batches) give the
 * same greedy tokens and bit-identical logits as each decoded alone, on
 * stories260K and on a SmolLM2-135M-shape Q8_0 synthetic model (4 layers); a sequence
 * continued after a 200-token prefix prefills only the new tokens, and its
 * logits equal a cold run's; `Context.decode` refuses a batch that does not
 * continue its slots.
 */
import assert from "node:assert/strict";
import { generate } from "../src/generation/mod.ts";
import { GgmlType } from "../src/gguf/types.ts";
import { Batch, Context, Model } from "../src/model/mod.ts";
import { loadNative } from "../src/native/mod.ts";
import { Rng, Sampler } from "../src/sampler/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { assertBitIdentical } from "./_kernels.ts";
import { SMOLLM_135M, syntheticModel } from "./_synthetic.ts";
import { testdata } from "./_testdata.ts";

const native = loadNative();
const STORIES = testdata("models/stories260K.gguf");
const STEPS = 6;

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

function randomPrompt(rng: Rng, length: number, vocab: number): number[] {
  return [
    1,
    ...Array.from({ length: length - 1 }, () => 2 + Math.floor(rng.nextFloat() * (vocab - 2))),
  ];
}

interface Run {
  tokens: number[];
  logits: Float32Array[];
}

/** One sequence alone in a one-slot context: the prompt as one batch, then greedy steps. */
function alone(model: Model, prompt: number[], threads: number): Run {
  using context = new Context(model, { threads, contextSize: 64 });
  const batch = new Batch(context.batchSize);
  prompt.forEach((id, i) => batch.add(id, i, 0, i === prompt.length - 1));
  context.decode(batch);
  const run: Run = { tokens: [], logits: [] };
  for (let step = 0; step < STEPS; step++) {
    const logits = context.logits(0);
    run.logits.push(logits.slice());
    const id = argmax(logits);
    run.tokens.push(id);
    batch.clear();
    batch.add(id, prompt.length + step, 0, true);
    context.decode(batch);
  }
  return run;
}

/**
 * The prompts in one 3-slot context: sequence i starts at round i and prefills in
 * chunks of `chunks[i]`; every round's batch holds what each active sequence needs
 * next (a prefill chunk or one decode token), so chunks and decode steps share batches.
 */
function together(model: Model, prompts: number[][], chunks: number[], threads: number): Run[] {
  using context = new Context(model, { threads, slots: prompts.length, contextSize: 64 });
  const batch = new Batch(context.batchSize);
  const runs: Run[] = prompts.map(() => ({ tokens: [], logits: [] }));
  const done = prompts.map(() => 0); // prompt tokens run
  const order: number[] = [];
  let mixed = 0;
  for (let round = 0; runs.some((r) => r.logits.length < STEPS); round++) {
    batch.clear();
    order.length = 0;
    let prefills = 0, decodes = 0;
    // Rotate which sequence comes first in the batch.
    for (let j = 0; j < prompts.length; j++) {
      const s = (j + round) % prompts.length;
      const p = prompts[s], r = runs[s];
      if (round < s || r.logits.length >= STEPS) continue;
      if (done[s] < p.length) {
        const end = Math.min(p.length, done[s] + chunks[s]);
        for (let i = done[s]; i < end; i++) batch.add(p[i], i, s, i === p.length - 1);
        if (end === p.length) order.push(s);
        done[s] = end;
        prefills++;
      } else {
        batch.add(r.tokens[r.tokens.length - 1], p.length + r.tokens.length - 1, s, true);
        order.push(s);
        decodes++;
      }
    }
    if (prefills > 0 && decodes > 0) mixed++;
    assert.equal(context.decode(batch), order.length);
    order.forEach((s, row) => {
      const logits = context.logits(row);
      runs[s].logits.push(logits.slice());
      runs[s].tokens.push(argmax(logits));
    });
  }
  assert.ok(mixed >= 2, `batches mixing a prefill chunk with decode steps: ${mixed}`);
  for (let s = 0; s < prompts.length; s++) {
    assert.equal(context.cache.length(s), prompts[s].length + STEPS - 1);
  }
  return runs;
}

function checkTogether(model: Model, prompts: number[][], label: string): void {
  const separate = prompts.map((p) => alone(model, p, 1));
  const joint = together(model, prompts, [5, 7, 3], 2);
  for (let s = 0; s < prompts.length; s++) {
    assert.deepEqual(joint[s].tokens, separate[s].tokens, `${label}: sequence ${s} tokens`);
    joint[s].logits.forEach((l, i) =>
      assertBitIdentical(l, separate[s].logits[i], `${label}: sequence ${s} step ${i}`)
    );
  }
  assert.notDeepEqual(separate[0].tokens, separate[1].tokens, "different prompts, different text");
}

Deno.test("three sequences decoded together = each alone (stories260K): tokens and bit-identical logits", () => {
  using model = Model.load(STORIES);
  const rng = new Rng(7);
  const prompts = [
    randomPrompt(rng, 23, 512),
    randomPrompt(rng, 9, 512),
    randomPrompt(rng, 31, 512),
  ];
  checkTogether(model, prompts, "stories260K");
});

Deno.test("three sequences decoded together = each alone (SmolLM2-135M shape, Q8_0)", () => {
  // SmolLM2-135M's widths and tied embedding; 4 of its 30 layers (each layer runs the
  // same kernels, and building the weights in TypeScript costs time per layer).
  const shape = { ...SMOLLM_135M, layers: 4 };
  const s = syntheticModel(native, { type: GgmlType.Q8_0, shape, seed: 5, tied: true });
  try {
    using model = new Model(native, s.gguf, s.base);
    const rng = new Rng(9);
    const v = shape.vocab;
    const prompts = [randomPrompt(rng, 17, v), randomPrompt(rng, 8, v), randomPrompt(rng, 26, v)];
    checkTogether(model, prompts, "smollm-135m q8_0");
  } finally {
    s.memory.free();
  }
});

Deno.test("prefix reuse: continuing after a 200-token prefix prefills only the new tokens; logits = a cold run's", async () => {
  const rng = new Rng(3);
  const prefix = randomPrompt(rng, 200, 512);
  const continued = [...prefix, ...randomPrompt(rng, 31, 512).slice(1)]; // 230 tokens
  const greedy = () => new Sampler(512, { temperature: 0 }, 1);
  using warmModel = Model.load(STORIES);
  using warm = new Context(warmModel, { threads: 2, contextSize: 512 });
  const tokenizer = Tokenizer.fromGguf(warmModel.gguf);
  const first = await generate({ context: warm }, tokenizer, greedy(), {
    prompt: prefix,
    maxTokens: 4,
  });
  assert.equal(first.timings.prefillTokens, 200);
  assert.equal(first.timings.reusedTokens, 0);
  assert.equal(warm.cache.length(0), 203, "the prompt and 3 of 4 generated tokens");
  // The slot holds prefix + 3 generated tokens: 200 tokens are common with `continued`.
  const second = await generate({ context: warm }, tokenizer, greedy(), {
    prompt: continued,
    maxTokens: 0,
  });
  assert.equal(second.timings.reusedTokens, 200);
  assert.equal(second.timings.prefillTokens, 30, "only the 30 new tokens run");
  const warmLogits = warm.logits(0).slice();
  const warmTokens = await generate({ context: warm }, tokenizer, greedy(), {
    prompt: continued,
    maxTokens: 12,
  });
  // All but the last 8 prompt tokens, from a multiple of 8 (the driver's batch-invariant order).
  assert.equal(warmTokens.timings.prefillTokens, 230 - 216, "all but the last 14 reused");

  using coldModel = Model.load(STORIES);
  using cold = new Context(coldModel, { threads: 2, contextSize: 512 });
  const coldRun = await generate({ context: cold }, tokenizer, greedy(), {
    prompt: continued,
    maxTokens: 0,
  });
  assert.equal(coldRun.timings.prefillTokens, 230);
  assertBitIdentical(warmLogits, cold.logits(0), "logits after the continued prompt");
  const coldTokens = await generate({ context: cold }, tokenizer, greedy(), {
    prompt: continued,
    maxTokens: 12,
  });
  assert.deepEqual(Array.from(warmTokens.tokens), Array.from(coldTokens.tokens));
});

Deno.test("Context.decode refuses batches that do not continue their slots, changing nothing", () => {
  using model = Model.load(STORIES);
  using context = new Context(model, { threads: 1, slots: 2, contextSize: 16, batchSize: 8 });
  const batch = new Batch(16);
  batch.add(1, 0, 0, true);
  batch.add(5, 0, 1);
  batch.add(6, 1, 1, true);
  assert.equal(context.decode(batch), 2);
  assert.deepEqual(Array.from(context.cache.history(1)), [5, 6]);
  const bad = (fill: (b: Batch) => void, pattern: RegExp) => {
    batch.clear();
    fill(batch);
    assert.throws(() => context.decode(batch), pattern);
    assert.equal(context.cache.length(0), 1);
    assert.equal(context.cache.length(1), 2);
  };
  bad((b) => b.add(1, 2, 0), /slot 0 has position 2; the slot continues at 1/);
  bad((b) => (b.add(1, 1, 0), b.add(1, 1, 0)), /position 1; the slot continues at 2/);
  bad((b) => b.add(1, 0, 2), /slot 2 is outside \[0, 2\)/);
  bad((b) => b.add(512, 1, 0), /token id 512 is outside the vocabulary/);
  bad((b) => {
    for (let i = 0; i < 9; i++) b.add(1, 1 + i, 0);
  }, /9 tokens, more than the context's 8/);
  bad(
    (b) => (b.add(1, 1, 0, true), b.add(1, 2, 1, true), b.add(1, 2, 0, true)),
    /more than 2 logits rows/,
  );
  assert.throws(() => context.logits(2), /outside \[0, 2\)/);
  context.cache.truncate(1, 1);
  batch.clear();
  batch.add(7, 1, 1, true);
  assert.equal(context.decode(batch), 1);
  assert.deepEqual(Array.from(context.cache.history(1)), [5, 7]);
  context.cache.clear();
  assert.equal(context.cache.length(0) + context.cache.length(1), 0);
});
