/**
 * The generation loop of one sequence on one slot of a `Context`: prompt →
 * tokens → batched prefill of the tokens past the longest common prefix with
 * the slot's history → sample → decode, one token at a time, until an
 * end-of-generation token, the token limit, the end of the context, a stop
 * string, or an interrupt. Per-sequence state (sampler, stop strings,
 * streaming UTF-8 decoder) is a {@linkcode Sequence}.
 *
 * The decode loop allocates no arrays: the generated ids go into a buffer
 * sized for the whole context, the context and sampler reuse their buffers.
 *
 * @example
 * ```ts
 * import { LlamaModel } from "../model/mod.ts";
 * import { Sampler } from "../sampler/mod.ts";
 * import { Tokenizer } from "../tokenizer/mod.ts";
 * import { generate } from "./generate.ts";
 *
 * const model = LlamaModel.load("stories260K.gguf", { threads: 1 });
 * const tokenizer = Tokenizer.fromGguf(model.gguf);
 * const sampler = new Sampler(model.config.vocabSize, { temperature: 0 }, 42);
 * const result = await generate(model, tokenizer, sampler, {
 *   prompt: "Once upon a time",
 *   maxTokens: 64,
 *   stop: ["\n\n"],
 *   onText: (text) => console.log(text),
 * });
 * console.log(result.finishReason, result.timings);
 * // Continuing: only the tokens past the common prefix are prefilled.
 * const more = await generate(model, tokenizer, sampler, {
 *   prompt: [...result.promptTokens, ...result.tokens],
 *   maxTokens: 16,
 * });
 * console.log(more.timings.reusedTokens, more.timings.prefillTokens);
 * model.close();
 * ```
 *
 * @module
 */
import { Batch } from "../model/batch.ts";
import type { Context } from "../model/context.ts";
import type { Sampler } from "../sampler/sampler.ts";
import {
  type FinishReason,
  Sequence,
  type SequenceTokenizer,
  type TokenEvent,
} from "./sequence.ts";

export type { FinishReason } from "./sequence.ts";

/** Where a sequence runs: a context and one of its slots (default 0); a `LlamaModel` is one. */
export interface GenerationTarget {
  readonly context: Context;
  readonly slot?: number;
}

/** What the loop needs from a tokenizer. */
export interface GenerationTokenizer extends SequenceTokenizer {
  /** Token ids of `text`, with BOS as the model says when `addSpecial`. */
  encode(text: string, options: { addSpecial: boolean; parseSpecial: boolean }): ArrayLike<number>;
  /** The BOS id; undefined or negative when the vocabulary has none. */
  readonly bos?: number;
}

/** Options of one generation. */
export interface GenerateOptions {
  /** The prompt text, or its token ids. */
  prompt: string | ArrayLike<number>;
  /** Most tokens to generate; -1 (default) = until EOG or the context is full. */
  maxTokens?: number;
  /** Stop strings: generation ends at the first, which is not emitted. */
  stop?: readonly string[];
  /** Receives the generated text as it is produced. */
  onText?: (text: string) => void;
  /** Receives each generated token (the event object is reused). */
  onToken?: (event: TokenEvent) => void;
  /** Polled once per token; true ends generation with `"interrupted"`. */
  shouldStop?: () => boolean;
  /** Keep the whole text in the result (default true). */
  collectText?: boolean;
}

/** Timings in milliseconds. */
export interface GenerationTimings {
  prefillMs: number;
  /** Prompt tokens run (the ones past the prefix the slot already held). */
  prefillTokens: number;
  /** Prompt tokens whose K/V the slot already held (not run again). */
  reusedTokens: number;
  /** Forward passes of generated tokens. */
  decodeMs: number;
  decodeTokens: number;
  samplingMs: number;
  sampledTokens: number;
}

/** The outcome of one generation. */
export interface GenerationResult {
  /** The generated text (stop string excluded); "" when `collectText` is false. */
  text: string;
  /** The generated token ids (the EOG token excluded). */
  tokens: Int32Array;
  /** The prompt's token ids. */
  promptTokens: Int32Array;
  finishReason: FinishReason;
  timings: GenerationTimings;
}

/** The event loop gets a turn at least this often, so a SIGINT handler can run. */
const YIELD_INTERVAL_MS = 50;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Tokenizes `prompt` for a context: BOS added as the model says, special
 * tokens parsed (llama.cpp's defaults); an empty prompt becomes BOS alone.
 * Throws `RangeError` when the prompt does not fit the context.
 */
export function promptTokens(
  target: { readonly contextSize: number },
  tokenizer: GenerationTokenizer,
  prompt: string | ArrayLike<number>,
): Int32Array {
  let ids = typeof prompt === "string"
    ? Int32Array.from(tokenizer.encode(prompt, { addSpecial: true, parseSpecial: true }))
    : Int32Array.from(prompt);
  const bos = tokenizer.bos ?? -1;
  if (ids.length === 0 && bos >= 0) ids = Int32Array.of(bos);
  if (ids.length === 0) throw new RangeError("the prompt is empty and the model has no BOS token");
  if (ids.length > target.contextSize) {
    throw new RangeError(
      `the prompt is ${ids.length} tokens, longer than the context of ${target.contextSize}`,
    );
  }
  return ids;
}

/** The batch of each context, made once (its capacity is the context's batch size). */
const batches = new WeakMap<Context, Batch>();

function batchOf(context: Context): Batch {
  let batch = batches.get(context);
  if (batch === undefined) batches.set(context, batch = new Batch(context.batchSize));
  return batch;
}

/**
 * Runs one generation on `target`'s slot. The slot keeps the longest common
 * prefix of its history and the prompt (at most all but the prompt's last
 * token, whose logits are needed); only the rest is prefilled. Afterwards the
 * slot holds the prompt and every generated token but the last.
 */
export async function generate(
  target: GenerationTarget,
  tokenizer: GenerationTokenizer,
  sampler: Sampler,
  options: GenerateOptions,
): Promise<GenerationResult> {
  const context = target.context;
  const slot = target.slot ?? 0;
  const cache = context.cache;
  const prompt = promptTokens(context, tokenizer, options.prompt);
  const sequence = new Sequence(tokenizer, {
    sampler,
    maxTokens: options.maxTokens,
    capacity: context.contextSize - prompt.length + 1,
    stop: options.stop,
    onText: options.onText,
    onToken: options.onToken,
    collectText: options.collectText,
  });
  const shouldStop = options.shouldStop;
  const timings: GenerationTimings = {
    prefillMs: 0,
    prefillTokens: 0,
    reusedTokens: 0,
    decodeMs: 0,
    decodeTokens: 0,
    samplingMs: 0,
    sampledTokens: 0,
  };
  sequence.begin(prompt);

  // Prefill past the common prefix, one batch per call, so an interrupt is seen between batches.
  const batch = batchOf(context);
  // A sliding-window layer's ring may no longer hold that prefix: truncate says what it kept.
  const reused = cache.truncate(
    slot,
    Math.min(cache.commonPrefix(slot, prompt), prompt.length - 1),
  );
  timings.reusedTokens = reused;
  let t0 = performance.now();
  let lastYield = t0;
  for (let start = reused; start < prompt.length; start += batch.capacity) {
    if (shouldStop !== undefined && start > reused) {
      await yieldToEventLoop();
      lastYield = performance.now();
      if (shouldStop()) {
        sequence.end("interrupted");
        break;
      }
    }
    const end = Math.min(prompt.length, start + batch.capacity);
    batch.clear();
    for (let i = start; i < end; i++) batch.add(prompt[i], i, slot, i === prompt.length - 1);
    context.decode(batch);
    timings.prefillTokens += end - start;
  }
  timings.prefillMs = performance.now() - t0;

  let pos = prompt.length;
  while (!sequence.finished) {
    if (shouldStop !== undefined) {
      if (performance.now() - lastYield >= YIELD_INTERVAL_MS) {
        await yieldToEventLoop();
        lastYield = performance.now();
      }
      if (shouldStop()) {
        sequence.end("interrupted");
        break;
      }
    }
    t0 = performance.now();
    const id = sequence.step(context.logits(0));
    timings.samplingMs += performance.now() - t0;
    if (id >= 0) timings.sampledTokens++;
    if (sequence.finished) break;
    if (pos >= context.contextSize) {
      sequence.end("context");
      break;
    }
    batch.clear();
    batch.add(id, pos++, slot, true);
    t0 = performance.now();
    context.decode(batch);
    timings.decodeMs += performance.now() - t0;
    timings.decodeTokens++;
  }
  return {
    text: sequence.text,
    tokens: sequence.tokens,
    promptTokens: prompt,
    finishReason: sequence.finishReason!,
    timings,
  };
}
