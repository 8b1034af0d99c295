/**
 * One sequence on one slot of a `Context`, start to end: prompt → tokens →
 * the {@linkcode Driver} runs the prompt past what the slot keeps, then one
 * token at a time until an end-of-generation token, the token limit, the end
 * of the context, a stop string, or an interrupt. Per-sequence state
 * (sampler, logit processors, stop strings, streaming UTF-8 decoder) is a
 * {@linkcode Sequence}.
 *
 * The decode loop allocates no arrays: the generated ids go into a buffer
 * sized for the whole context, the context and sampler reuse their buffers.
 *
 * @example
 * ```ts
 * import { Context, Model } from "../model/mod.ts";
 * import { Sampler } from "../sampler/mod.ts";
 * import { Tokenizer } from "../tokenizer/mod.ts";
 * import { generate } from "./generate.ts";
 *
 * const model = Model.load("stories260K.gguf");
 * const context = new Context(model, { threads: 1 });
 * const tokenizer = Tokenizer.fromGguf(model.gguf);
 * const sampler = new Sampler(model.config.vocabSize, { temperature: 0 }, 42);
 * const result = await generate({ context }, tokenizer, sampler, {
 *   prompt: "Once upon a time",
 *   maxTokens: 64,
 *   stop: ["\n\n"],
 *   onText: (text) => console.log(text),
 * });
 * console.log(result.finishReason, result.timings);
 * // Continuing: only the tokens past the common prefix are prefilled.
 * const more = await generate({ context }, tokenizer, sampler, {
 *   prompt: [...result.promptTokens, ...result.tokens],
 *   maxTokens: 16,
 * });
 * console.log(more.timings.reusedTokens, more.timings.prefillTokens);
 * context.close();
 * model.close();
 * ```
 *
 * @module
 */
import type { Context } from "../model/context.ts";
import type { Sampler } from "../sampler/sampler.ts";
import { Driver, type GenerationTimings } from "./driver.ts";
import type { LogitProcessor } from "./processors.ts";
import {
  type FinishReason,
  Sequence,
  type SequenceTokenizer,
  type TokenEvent,
} from "./sequence.ts";

export type { FinishReason } from "./sequence.ts";
export type { GenerationTimings } from "./driver.ts";

/** Where a sequence runs: a context and one of its slots (default 0); an `Llm` is one. */
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
  /**
   * Polled between the driver's steps (after the first: a prompt batch, or a
   * token decoded and the next sampled); true ends generation with `"interrupted"`.
   */
  shouldStop?: () => boolean;
  /** Keep the whole text in the result (default true). */
  collectText?: boolean;
  /** Logit processors (logit bias, ...), run in order before the sampler. */
  processors?: readonly LogitProcessor[];
  /** Compute each token event's `logprob` (default: when `onToken` is given). */
  logprobs?: boolean;
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
  /** True when a stop string (not an end-of-generation token) ended it: `text` stops before it. */
  stoppedByString: boolean;
  timings: GenerationTimings;
}

/** The event loop gets a turn at least this often, so a SIGINT handler can run. */
const YIELD_INTERVAL_MS = 50;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Tokenizes `prompt`: BOS added as the model says, special tokens parsed
 * (llama.cpp's defaults); an empty prompt becomes BOS alone. Throws
 * `RangeError` for an empty prompt when the model has no BOS.
 */
export function promptTokens(
  tokenizer: GenerationTokenizer,
  prompt: string | ArrayLike<number>,
): Int32Array {
  let ids = typeof prompt === "string"
    ? Int32Array.from(tokenizer.encode(prompt, { addSpecial: true, parseSpecial: true }))
    : Int32Array.from(prompt);
  const bos = tokenizer.bos ?? -1;
  if (ids.length === 0 && bos >= 0) ids = Int32Array.of(bos);
  if (ids.length === 0) throw new RangeError("the prompt is empty and the model has no BOS token");
  return ids;
}

/**
 * Runs one generation on `target`'s slot (default 0) through the context's
 * {@linkcode Driver}: the slot keeps what the KV cache allows of its common
 * prefix with the prompt and runs the rest (see `KvCache.reusable`).
 * Afterwards the slot holds the prompt and every generated token but the
 * last. Other jobs on the same context advance in the same batches.
 */
export async function generate(
  target: GenerationTarget,
  tokenizer: GenerationTokenizer,
  sampler: Sampler,
  options: GenerateOptions,
): Promise<GenerationResult> {
  const context = target.context;
  const prompt = promptTokens(tokenizer, options.prompt);
  const driver = Driver.of(context);
  driver.checkPrompt(prompt); // before the sequence is sized for what the context leaves
  const sequence = new Sequence(tokenizer, {
    sampler,
    maxTokens: options.maxTokens,
    capacity: context.contextSize - prompt.length + 1,
    stop: options.stop,
    onText: options.onText,
    onToken: options.onToken,
    collectText: options.collectText,
    processors: options.processors,
    logprobs: options.logprobs,
  });
  const job = driver.start(sequence, prompt, { slot: target.slot ?? 0 });
  const shouldStop = options.shouldStop;
  let lastYield = performance.now();
  let stepped = false; // the first batch runs before the first poll, as llama-cli's loop
  while (!job.done) {
    if (shouldStop !== undefined && stepped) {
      // Between prefill batches, and at least every YIELD_INTERVAL_MS while decoding.
      const prefillGoesOn = job.prefilling && job.next > job.reused;
      if (prefillGoesOn || performance.now() - lastYield >= YIELD_INTERVAL_MS) {
        await yieldToEventLoop();
        lastYield = performance.now();
      }
      if (shouldStop()) {
        driver.cancel(job);
        break;
      }
    }
    if (!driver.step()) throw new Error("the driver has nothing to run for an unfinished job");
    stepped = true;
  }
  if (job.error !== undefined) throw job.error;
  return {
    text: sequence.text,
    tokens: sequence.tokens,
    promptTokens: prompt,
    finishReason: sequence.finishReason!,
    stoppedByString: sequence.stoppedByString,
    timings: job.timings,
  };
}
