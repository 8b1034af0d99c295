/**
 * The scheduler over real contexts (stories260K, and the Mistral-shaped
 * `mistral-tiny` whose every layer has a 64-token sliding window): concurrent
 * sequences produce what each produces alone through `generate()`, every
 * step decodes every generating sequence, long prompts are chunked, prefixes
 * are reused only as far as the KV cache can keep them, cancel frees a slot
 * at once, `n` choices share one prefill, and bad prompts are refused.
 */
import assert from "node:assert/strict";
import { generate, probeBatchInvariance } from "../src/generation/mod.ts";
import { type Batch, Context, Model } from "../src/model/mod.ts";
import { Sampler } from "../src/sampler/mod.ts";
import { Scheduler, type SequenceEvent, type SequenceParams } from "../src/server/scheduler.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { ensureGemma } from "./_gemma.ts";
import { loadMistralTiny } from "./_mistral.ts";
import { testdata } from "./_testdata.ts";

const STORIES = testdata("models/stories260K.gguf");

interface Run {
  tokens: number[];
  text: string;
  events: SequenceEvent[];
}

interface Setup {
  model: Model;
  context: Context;
  tokenizer: Tokenizer & { tokenToPiece(id: number): string };
  /** Every batch decoded: `[slot, position, wantsLogits]` per token. */
  batches: Array<Array<[number, number, boolean]>>;
  scheduler: Scheduler;
  [Symbol.dispose](): void;
}

function setup(
  path: string | Model,
  o: { slots: number; contextSize: number; stepTokens: number; mixed?: boolean },
): Setup {
  const model = typeof path === "string" ? Model.load(path) : path;
  const context = new Context(model, {
    slots: o.slots,
    contextSize: o.contextSize,
    batchSize: o.stepTokens,
    maxLogits: o.slots,
    threads: 2,
  });
  const batches: Setup["batches"] = [];
  const decode = context.decode.bind(context);
  context.decode = (batch: Batch) => {
    const seen: Array<[number, number, boolean]> = [];
    for (let i = 0; i < batch.count; i++) {
      seen.push([batch.slots[i], batch.positions[i], batch.wantsLogits[i] === 1]);
    }
    batches.push(seen);
    return decode(batch);
  };
  const t = Tokenizer.fromGguf(model.gguf);
  const tokenizer = Object.assign(t, { tokenToPiece: (id: number) => t.tokenToPiece(id, false) });
  const scheduler = new Scheduler(context, tokenizer, {
    stepTokens: o.stepTokens,
    mixed: o.mixed,
  });
  return {
    model,
    context,
    tokenizer,
    batches,
    scheduler,
    [Symbol.dispose]() {
      context.close();
      model.close();
    },
  };
}

/** The greedy tokens of `prompt` run alone on a fresh one-slot context. */
async function alone(s: Setup, prompt: number[], maxTokens: number, stop: string[] = []) {
  using context = new Context(s.model, { contextSize: s.context.contextSize, threads: 2 });
  const sampler = new Sampler(s.model.config.vocabSize, { temperature: 0 }, 0);
  const r = await generate({ context }, s.tokenizer, sampler, { prompt, maxTokens, stop });
  return { tokens: Array.from(r.tokens), text: r.text };
}

function submit(
  s: Setup,
  prompt: number[],
  maxTokens: number,
  extra: Partial<SequenceParams> = {},
) {
  const run: Run = { tokens: [], text: "", events: [] };
  const id = s.scheduler.submit(
    { prompt: Int32Array.from(prompt), maxTokens, sampling: { temperature: 0 }, ...extra },
    (e) => {
      run.events.push(e);
      if (e.type === "token" && e.index === 0) run.tokens.push(e.token);
      if ((e.type === "token" || e.type === "text") && e.index === 0) run.text += e.text;
    },
  );
  return { id, run };
}

function drain(s: Scheduler, limit = 10_000): number {
  let steps = 0;
  while (s.step()) if (++steps > limit) throw new Error("scheduler does not finish");
  return steps;
}

/** A deterministic prompt of `n` ordinary ids (BOS first). */
function promptOf(n: number, seed: number, vocab: number, bos: number): number[] {
  const ids = [bos];
  let x = seed;
  for (let i = 1; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    ids.push(300 + (x >>> 8) % (vocab - 300));
  }
  return ids;
}

Deno.test("scheduler: concurrent greedy sequences equal each run alone", async () => {
  using s = setup(STORIES, { slots: 3, contextSize: 128, stepTokens: 16 });
  const prompts = [
    [1, 403, 407],
    [1],
    promptOf(21, 7, 512, 1),
    [1, 2, 2],
    [1, 9, 8, 7, 6],
    [1, 3],
  ];
  const runs = prompts.map((p, i) => submit(s, p, 5 + i * 3));
  drain(s.scheduler);
  for (const [i, { run }] of runs.entries()) {
    assert.deepEqual(run.tokens, (await alone(s, prompts[i], 5 + i * 3)).tokens, `request ${i}`);
    const done = run.events.at(-1)!;
    assert.equal(done.type, "done");
    if (done.type === "done") {
      assert.equal(done.completionTokens, run.tokens.length);
      assert.equal(done.promptTokens, prompts[i].length);
    }
    assert.equal(run.events[0].type, "start");
  }
  assert.equal(s.scheduler.busy, false);
});

Deno.test("scheduler: decode steps and prompt chunks take turns; a long prompt is chunked", async () => {
  using s = setup(STORIES, { slots: 2, contextSize: 128, stepTokens: 8 });
  const a = submit(s, [1, 403, 407], 30);
  s.scheduler.step(); // a prefilled, first token sampled
  const long = promptOf(40, 3, 512, 1);
  const b = submit(s, long, 3);
  const before = s.batches.length;
  drain(s.scheduler);
  const steps = s.batches.slice(before);
  const prefillSteps = steps.filter((batch) => batch.some(([slot, , want]) => slot === 1 && !want));
  assert.equal(prefillSteps.length, 5, "40 tokens in chunks of 8");
  for (const batch of prefillSteps) {
    assert.equal(batch.length, 8);
    assert.ok(batch.every(([slot]) => slot === 1), "a prompt chunk is not mixed with decodes");
  }
  // While `b`'s prompt runs, `a` still decodes at least every other step (the chunk that
  // ends `b`'s prompt may go first).
  const firstChunk = steps.indexOf(prefillSteps[0]);
  const lastChunk = steps.indexOf(prefillSteps.at(-1)!);
  const decodes = steps.slice(firstChunk, lastChunk).filter((batch) =>
    batch.some(([slot]) => slot === 0)
  );
  assert.ok(decodes.length >= 3, `${decodes.length} decode steps between the chunks`);
  for (const batch of steps) {
    if (batch.some(([, , want]) => !want)) continue;
    assert.ok(batch.length < 8, "decode steps stay in the small order");
  }
  assert.deepEqual(a.run.tokens, (await alone(s, [1, 403, 407], 30)).tokens);
  assert.deepEqual(b.run.tokens, (await alone(s, long, 3)).tokens);
});

Deno.test("scheduler on a batch-invariant model: decodes and prompt chunks share steps, tokens as alone", async () => {
  using probe = setup(STORIES, { slots: 2, contextSize: 128, stepTokens: 32 });
  assert.ok(probeBatchInvariance(probe.context), "stories260K's F32 matmuls sum one way");
  using s = setup(STORIES, { slots: 2, contextSize: 128, stepTokens: 8, mixed: true });
  const a = submit(s, [1, 403, 407], 30);
  s.scheduler.step();
  const long = promptOf(37, 3, 512, 1);
  const b = submit(s, long, 3);
  const before = s.batches.length;
  drain(s.scheduler);
  const steps = s.batches.slice(before);
  const mixed = steps.filter((batch) =>
    batch.some(([slot]) => slot === 0) && batch.some(([slot, , want]) => slot === 1 && !want)
  );
  assert.ok(mixed.length >= 4, `${mixed.length} steps carry a's decode and b's prompt`);
  assert.deepEqual(a.run.tokens, (await alone(s, [1, 403, 407], 30)).tokens);
  assert.deepEqual(b.run.tokens, (await alone(s, long, 3)).tokens);
  // Reuse keeps all but the last prompt token.
  const again = submit(s, long, 3);
  drain(s.scheduler);
  const done = again.run.events.at(-1)!;
  assert.ok(done.type === "done" && done.cachedTokens === long.length - 1);
  assert.deepEqual(again.run.tokens, b.run.tokens);
});

Deno.test("probeBatchInvariance: Gemma 3's K-quant matmuls depend on the batch; the server keeps strict steps", () => {
  using model = Model.load(ensureGemma());
  using context = new Context(model, { slots: 2, contextSize: 128, batchSize: 32, threads: 2 });
  assert.equal(probeBatchInvariance(context), false);
  assert.equal(context.cache.length(0) + context.cache.length(1), 0, "the probe empties its slots");
});

Deno.test("scheduler: a request continues from the longest cached prefix of a slot", async () => {
  using s = setup(STORIES, { slots: 2, contextSize: 128, stepTokens: 32 });
  const turn1 = promptOf(20, 21, 512, 1);
  const first = submit(s, turn1, 6);
  const other = submit(s, [1, 9, 9, 9], 2);
  drain(s.scheduler);
  // Turn two re-sends turn one's prompt and reply (what a chat client does).
  const history = [...turn1, ...first.run.tokens, 300, 301];
  const second = submit(s, history, 4);
  drain(s.scheduler);
  const done = second.run.events.at(-1)!;
  assert.equal(done.type, "done");
  // The last reply token was sampled but never fed: 20 + 6 - 1 positions are cached; at least
  // the last 8 prompt tokens run again, from a multiple of 8 (the batch-invariant order).
  const kept = (common: number) => {
    const n = Math.min(common, history.length - 8);
    return n - n % 8;
  };
  if (done.type === "done") assert.equal(done.cachedTokens, kept(20 + 6 - 1));
  assert.equal(kept(20 + 6 - 1), 16);
  assert.deepEqual(second.run.tokens, (await alone(s, history, 4)).tokens);
  assert.deepEqual(other.run.tokens, (await alone(s, [1, 9, 9, 9], 2)).tokens);
  // The same prompt again: all but its last 8 tokens (rounded down to 8) are reused.
  const again = submit(s, history, 4);
  drain(s.scheduler);
  const d2 = again.run.events.at(-1)!;
  if (d2.type === "done") assert.equal(d2.cachedTokens, kept(history.length));
  assert.deepEqual(again.run.tokens, second.run.tokens);
});

Deno.test("scheduler: cancel frees the slot at once; queued requests wait in order", async () => {
  using s = setup(STORIES, { slots: 2, contextSize: 128, stepTokens: 16 });
  const a = submit(s, [1, 300], 50);
  const b = submit(s, [1, 301], 50);
  const c = submit(s, [1, 302], 4);
  s.scheduler.step();
  s.scheduler.step();
  assert.equal(s.scheduler.stats().queueDepth, 1);
  assert.equal(c.run.tokens.length, 0);
  const seen = a.run.events.length;
  s.scheduler.cancel(a.id);
  s.scheduler.step();
  assert.equal(s.scheduler.stats().queueDepth, 0, "c got a's slot on the next step");
  assert.equal(c.run.tokens.length, 1);
  s.scheduler.cancel(b.id);
  drain(s.scheduler);
  assert.equal(a.run.events.length, seen, "no events after cancel");
  assert.deepEqual(c.run.tokens, (await alone(s, [1, 302], 4)).tokens);
  assert.equal(s.scheduler.stats().slotsBusy, 0);
});

Deno.test("scheduler: stop strings end a reply before the string; bad prompts are refused", async () => {
  using s = setup(STORIES, { slots: 1, contextSize: 32, stepTokens: 16 });
  const prompt = [1, 403, 407];
  const reference = await alone(s, prompt, 12);
  const stop = reference.text.slice(6, 9);
  const at = reference.text.indexOf(stop);
  assert.ok(at > 0, `a stop string inside ${JSON.stringify(reference.text)}`);
  const r = submit(s, prompt, 12, { stop: [stop] });
  drain(s.scheduler);
  assert.equal(r.run.text, reference.text.slice(0, at));
  const done = r.run.events.at(-1)!;
  assert.ok(done.type === "done" && done.finishReason === "stop");

  const long = submit(s, Array(32).fill(1), 2);
  assert.deepEqual(long.run.events.map((e) => e.type), ["error"]);
  const empty = submit(s, [], 2);
  assert.ok(empty.run.events[0].type === "error" && empty.run.events[0].status === 400);
  const bad = submit(s, [1, 999], 2);
  assert.ok(bad.run.events[0].type === "error");
  const many = submit(s, [1, 2], 2, { n: 2 });
  assert.ok(many.run.events[0].type === "error" && /n must be/.test(many.run.events[0].message));
  // The context ends a reply with "length", past an end-of-generation token too.
  const full = submit(s, Array(28).fill(2), -1, { ignoreEos: true });
  drain(s.scheduler);
  const d = full.run.events.at(-1)!;
  assert.ok(d.type === "done" && d.finishReason === "length");
  // as llama-server: prompt and reply fill the context at most (32 positions)
  assert.equal(full.run.tokens.length, 32 - 28);
});

Deno.test("scheduler: n choices share one prefill; the same seed gives the same choices", () => {
  using s = setup(STORIES, { slots: 3, contextSize: 128, stepTokens: 64 });
  const prompt = promptOf(30, 11, 512, 1);
  const choices = (seed: number) => {
    const tokens: number[][] = [[], []];
    const before = s.batches.length;
    s.scheduler.submit(
      {
        prompt: Int32Array.from(prompt),
        maxTokens: 12,
        sampling: { temperature: 1, topK: 0, topP: 1, minP: 0 },
        seed,
        n: 2,
      },
      (e) => {
        if (e.type === "token") tokens[e.index].push(e.token);
        if (e.type === "error") throw new Error(e.message);
      },
    );
    drain(s.scheduler);
    const prefilled = s.batches.slice(before).flat().filter(([, , want]) => !want).length;
    return { tokens, prefilled };
  };
  const a = choices(5);
  assert.equal(a.tokens[0].length, 12);
  assert.equal(a.tokens[1].length, 12);
  assert.notDeepEqual(a.tokens[0], a.tokens[1], "two seeds, two samples");
  assert.equal(a.prefilled, prompt.length - 1, "the prompt ran once for both choices");
  const b = choices(5);
  assert.deepEqual(b.tokens, a.tokens, "same seed, same two choices");
});

Deno.test("scheduler: logit bias keeps a token out of greedy output", () => {
  using s = setup(STORIES, { slots: 1, contextSize: 64, stepTokens: 16 });
  const plain = submit(s, [1, 403, 407], 10);
  drain(s.scheduler);
  const banned = plain.run.tokens[0];
  const biased = submit(s, [1, 403, 407], 10, { logitBias: [[banned, -100]] });
  drain(s.scheduler);
  assert.equal(biased.run.tokens.length, 10);
  assert.ok(!biased.run.tokens.includes(banned), `${banned} in ${biased.run.tokens}`);
  const bad = submit(s, [1], 2, { logitBias: [[512, 1]] });
  assert.ok(
    bad.run.events[0].type === "error" && /outside the vocabulary/.test(
      bad.run.events[0].message,
    ),
  );
});

Deno.test("scheduler on a sliding-window model: prefixes past the ring are run again, never wrong", async () => {
  // Window 64, batch 16: each ring holds 79 rows, so a slot can go back at most 15 tokens.
  using s = setup(loadMistralTiny(64), { slots: 2, contextSize: 256, stepTokens: 16 });
  assert.deepEqual(Array.from(s.context.cache.layerRows), [79, 79]);
  const V = s.model.config.vocabSize, bos = s.tokenizer.bos;
  const base = promptOf(150, 5, 2000, bos); // ids below 2000: ordinary pieces
  const variants = [0, 30, 75, 140, 149].map((shared, i) => [
    ...base.slice(0, Math.max(1, shared)),
    ...promptOf(150 - shared, 100 + i, 2000, bos).slice(1),
  ]);
  assert.ok(V > 2000);
  const want = await Promise.all(variants.map((p) => alone(s, p, 8)));
  const first = submit(s, base, 8);
  drain(s.scheduler);
  assert.deepEqual(first.run.tokens, (await alone(s, base, 8)).tokens);
  // One after the other (each can reuse what the previous left), then two at once.
  for (const [i, p] of variants.entries()) {
    const r = submit(s, p, 8);
    drain(s.scheduler);
    assert.equal(
      r.run.events.at(-1)!.type,
      "done",
      `variant ${i}: ${JSON.stringify(r.run.events.at(-1))}`,
    );
    assert.deepEqual(r.run.tokens, want[i].tokens, `variant ${i} alone`);
  }
  for (let i = 0; i + 1 < variants.length; i++) {
    const x = submit(s, variants[i + 1], 8), y = submit(s, variants[i], 8);
    drain(s.scheduler);
    assert.deepEqual(x.run.tokens, want[i + 1].tokens, `pair ${i}: ${i + 1}`);
    assert.deepEqual(y.run.tokens, want[i].tokens, `pair ${i}: ${i}`);
  }
});
