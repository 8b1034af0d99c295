import assert from "node:assert/strict";
import { generate, StopMatcher } from "../src/generation/mod.ts";
import { Llm } from "../src/llm/mod.ts";
import { Sampler } from "../src/sampler/mod.ts";
import { golden } from "./_golden.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import type { GenerationTokenizer } from "../src/generation/mod.ts";
import { Kernels } from "../src/kernels/mod.ts";
import { testdata } from "./_testdata.ts";

function collect(stops: string[], chunks: string[]) {
  let out = "";
  const emitted: string[] = [];
  const m = new StopMatcher(stops, (t) => {
    out += t;
    emitted.push(t);
  });
  let stopped = false;
  for (const c of chunks) {
    if (m.push(c)) {
      stopped = true;
      break;
    }
  }
  if (!stopped) m.flush();
  return { out, emitted, stopped };
}

Deno.test("stop strings: split across chunks, held back, released when not a match", () => {
  assert.deepEqual(collect(["\n\n"], ["Hello.", "\n", "\nBye"]), {
    out: "Hello.",
    emitted: ["Hello."],
    stopped: true,
  });
  // "Li" is held while it may become "Lily", then released with "on".
  assert.deepEqual(collect(["Lily"], ["a Li", "on", " and Li", "l", "y!"]), {
    out: "a Lion and ",
    emitted: ["a ", "Lion", " and "],
    stopped: true,
  });
  // The earliest of several stop strings wins; text after it is dropped.
  assert.equal(collect(["END", "ab"], ["xxabyyEND"]).out, "xx");
  // A stop string at the very start emits nothing.
  assert.deepEqual(collect(["Once"], ["On", "ce upon"]).emitted, []);
  // No stop: everything comes out, the held tail on flush.
  assert.equal(collect(["zzz"], ["abc z", "z"]).out, "abc zz");
  assert.throws(() => new StopMatcher([""], () => {}), /stop string must be non-empty/);
});

const STORIES = testdata("models/stories260K.gguf");
const [emptyCase, onceCase] = golden("stories260K");

/** The model's tokenizer, with `eog` as its end-of-generation ids when given. */
function tokenizerOf(model: Llm, eog?: number[]): GenerationTokenizer & Tokenizer {
  const t = Tokenizer.fromGguf(model.model.gguf);
  if (eog) t.isEog = (id: number) => eog.includes(id);
  return t;
}

/** What llama-cli prints for `ids`: each piece in turn. */
function streamText(t: Tokenizer, ids: ArrayLike<number>): string {
  const d = t.createDecoder();
  let s = "";
  for (let i = 0; i < ids.length; i++) s += d.push(ids[i]);
  return s + d.flush();
}

function storiesModel(contextSize?: number): Promise<Llm> {
  return Llm.load(STORIES, {
    kernels: (native, threads) => new Kernels(native, threads),
    contextSize,
  });
}

Deno.test("generate: greedy stories260K streams llama.cpp's ids and text", async () => {
  using model = await storiesModel();
  const tokenizer = tokenizerOf(model);
  assert.equal(streamText(tokenizer, onceCase.generated_ids), onceCase.generated_text);
  let streamed = "";
  const result = await generate(model, tokenizer, new Sampler(512, { temperature: 0 }, 1), {
    prompt: onceCase.prompt,
    maxTokens: 64,
    onText: (t) => (streamed += t),
  });
  assert.deepEqual(Array.from(result.tokens), onceCase.generated_ids.slice(0, 64));
  assert.equal(result.finishReason, "length");
  assert.equal(result.text, streamText(tokenizer, onceCase.generated_ids.slice(0, 64)));
  assert.equal(streamed, result.text);
  assert.equal(result.timings.prefillTokens, 5);
  assert.equal(result.timings.decodeTokens, 63);
  // Empty prompt: BOS alone.
  const empty = await generate(model, tokenizer, new Sampler(512, { temperature: 0 }, 1), {
    prompt: "",
    maxTokens: 20,
  });
  assert.deepEqual(Array.from(empty.promptTokens), emptyCase.prompt_ids);
  assert.deepEqual(Array.from(empty.tokens), emptyCase.generated_ids.slice(0, 20));
});

Deno.test("generate: a stop string split across tokens ends generation before it", async () => {
  using model = await storiesModel();
  const tokenizer = tokenizerOf(model);
  const stop = " named Lily";
  const pieces = onceCase.generated_ids.map((id) => tokenizer.tokenToPiece(id));
  assert.ok(pieces.every((p) => !p.includes(stop)), "the stop string spans several tokens");
  let streamed = "";
  const result = await generate(model, tokenizer, new Sampler(512, { temperature: 0 }, 1), {
    prompt: onceCase.prompt_ids,
    maxTokens: 64,
    stop: [stop],
    onText: (t) => (streamed += t),
  });
  const expected = onceCase.generated_text.slice(0, onceCase.generated_text.indexOf(stop));
  assert.equal(result.finishReason, "stop");
  assert.equal(result.text, expected);
  assert.equal(streamed, expected);
});

Deno.test("generate: EOG, context full and interrupt end generation with their reason", async () => {
  using model = await storiesModel(8);
  // Treat golden token 3 (index 3) as end-of-generation.
  const eogId = onceCase.generated_ids[3];
  const eog = await generate(
    model,
    tokenizerOf(model, [eogId]),
    new Sampler(512, { temperature: 0 }, 1),
    { prompt: onceCase.prompt_ids, maxTokens: 50 },
  );
  assert.equal(eog.finishReason, "stop");
  assert.deepEqual(Array.from(eog.tokens), onceCase.generated_ids.slice(0, 3));

  const tokenizer = tokenizerOf(model);
  // 5 prompt tokens in a context of 8: positions 5, 6, 7 take generated tokens, a 4th is sampled.
  const full = await generate(model, tokenizer, new Sampler(512, { temperature: 0 }, 1), {
    prompt: onceCase.prompt_ids,
  });
  assert.equal(full.finishReason, "context");
  assert.deepEqual(Array.from(full.tokens), onceCase.generated_ids.slice(0, 4));

  let polls = 0;
  const stopped = await generate(model, tokenizer, new Sampler(512, { temperature: 0 }, 1), {
    prompt: [1],
    shouldStop: () => ++polls > 2,
  });
  assert.equal(stopped.finishReason, "interrupted");
  // Polled between steps: the prompt's step sampled one token, each step after it one more.
  assert.equal(stopped.tokens.length, 3);

  await assert.rejects(
    generate(model, tokenizer, new Sampler(512, {}, 1), { prompt: new Array(9).fill(1) }),
    /the prompt is 9 tokens, longer than the context of 8/,
  );
  // A prompt that fills the context: one token sampled after it, then the context ends it.
  const filled = await generate(model, tokenizer, new Sampler(512, { temperature: 0 }, 1), {
    prompt: [1, 403, 407, 261, 378, 300, 301, 302],
  });
  assert.equal(filled.finishReason, "context");
  assert.equal(filled.tokens.length, 1);
});

Deno.test("generate: the same seed gives the same sampled tokens", async () => {
  using model = await storiesModel();
  const tokenizer = tokenizerOf(model);
  const run = async (seed: number) =>
    Array.from(
      (await generate(model, tokenizer, new Sampler(512, { temperature: 1 }, seed), {
        prompt: [1],
        maxTokens: 24,
      })).tokens,
    );
  const a = await run(7);
  assert.deepEqual(await run(7), a);
  assert.notDeepEqual(await run(8), a);
});

Deno.test("generate: an interrupt during a long prefill stops between batches", async () => {
  using model = await Llm.load(STORIES, {
    kernels: (native, threads) => new Kernels(native, threads),
    batchSize: 4,
  });
  let polls = 0;
  const result = await generate(model, tokenizerOf(model), new Sampler(512, {}, 1), {
    prompt: new Array(20).fill(403),
    shouldStop: () => ++polls >= 2,
  });
  assert.equal(result.finishReason, "interrupted");
  assert.equal(result.timings.prefillTokens, 8); // 2 batches of 4, then the interrupt
  assert.equal(result.tokens.length, 0);
});
