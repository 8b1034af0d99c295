/**
 * The generation loop: prompt → tokens → batched prefill → sample → decode,
 * one token at a time, until an end-of-generation token, the token limit, the
 * end of the context, a stop string, or an interrupt. Text is streamed
 * through the tokenizer's UTF-8-safe incremental decoder.
 *
 * The decode loop allocates no arrays: the generated ids go into a buffer
 * sized for the whole context, the model and sampler reuse their buffers.
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
 * model.close();
 * ```
 *
 * @module
 */
import type { LlamaModel } from "../model/llama_model.ts";
import type { Sampler } from "../sampler/sampler.ts";
import { StopMatcher } from "./stop.ts";

/** What the loop needs from a tokenizer. */
export interface GenerationTokenizer {
  /** Token ids of `text`, with BOS as the model says when `addSpecial`. */
  encode(text: string, options: { addSpecial: boolean; parseSpecial: boolean }): ArrayLike<number>;
  /** A streaming decoder: `push` returns the complete UTF-8 text so far, `flush` the rest. */
  createDecoder(): { push(id: number): string; flush(): string };
  /** True for end-of-generation tokens (EOS, EOT, `<|im_end|>`, ...). */
  isEog(id: number): boolean;
  /** The BOS id; undefined or negative when the vocabulary has none. */
  readonly bos?: number;
}

/** Why generation ended. */
export type FinishReason = "stop" | "length" | "context" | "interrupted";

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
  /** Polled once per token; true ends generation with `"interrupted"`. */
  shouldStop?: () => boolean;
  /** Keep the whole text in the result (default true). */
  collectText?: boolean;
}

/** Timings in milliseconds. */
export interface GenerationTimings {
  prefillMs: number;
  prefillTokens: number;
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
 * Tokenizes `prompt` for `model`: BOS added as the model says, special tokens
 * parsed (llama.cpp's defaults); an empty prompt becomes BOS alone.
 * Throws `RangeError` when the prompt does not fit the context.
 */
export function promptTokens(
  model: LlamaModel,
  tokenizer: GenerationTokenizer,
  prompt: string | ArrayLike<number>,
): Int32Array {
  let ids = typeof prompt === "string"
    ? Int32Array.from(tokenizer.encode(prompt, { addSpecial: true, parseSpecial: true }))
    : Int32Array.from(prompt);
  const bos = tokenizer.bos ?? -1;
  if (ids.length === 0 && bos >= 0) ids = Int32Array.of(bos);
  if (ids.length === 0) throw new RangeError("the prompt is empty and the model has no BOS token");
  if (ids.length > model.contextSize) {
    throw new RangeError(
      `the prompt is ${ids.length} tokens, longer than the context of ${model.contextSize} ` +
        "(raise -c/--ctx-size)",
    );
  }
  return ids;
}

/** Runs one generation on a fresh sequence (the KV cache is overwritten from position 0). */
export async function generate(
  model: LlamaModel,
  tokenizer: GenerationTokenizer,
  sampler: Sampler,
  options: GenerateOptions,
): Promise<GenerationResult> {
  const maxTokens = options.maxTokens ?? -1;
  if (!Number.isInteger(maxTokens) || maxTokens < -1) {
    throw new RangeError(`maxTokens must be -1 or a non-negative integer, got ${maxTokens}`);
  }
  const prompt = promptTokens(model, tokenizer, options.prompt);
  const collect = options.collectText ?? true;
  let text = "";
  const onText = options.onText;
  const stops = new StopMatcher(options.stop ?? [], (piece) => {
    if (collect) text += piece;
    onText?.(piece);
  });
  const decoder = tokenizer.createDecoder();
  const shouldStop = options.shouldStop;
  const capacity = model.contextSize - prompt.length + 1;
  const generated = new Int32Array(maxTokens >= 0 ? Math.min(maxTokens, capacity) : capacity);
  const one = new Int32Array(1);
  const timings: GenerationTimings = {
    prefillMs: 0,
    prefillTokens: 0,
    decodeMs: 0,
    decodeTokens: 0,
    samplingMs: 0,
    sampledTokens: 0,
  };

  sampler.reset();
  for (let i = 0; i < prompt.length; i++) sampler.accept(prompt[i]);
  // Prefill, one batch per call, so an interrupt is seen between batches.
  let t0 = performance.now();
  let logits: Float32Array = new Float32Array(0);
  let finishReason: FinishReason = "length";
  let lastYield = t0;
  for (let start = 0; start < prompt.length; start += model.batchSize) {
    if (shouldStop !== undefined && start > 0) {
      await yieldToEventLoop();
      lastYield = performance.now();
      if (shouldStop()) finishReason = "interrupted";
    }
    if (finishReason === "interrupted") break;
    const batch = prompt.subarray(start, start + model.batchSize);
    logits = model.forward(batch, start);
    timings.prefillTokens = start + batch.length;
  }
  timings.prefillMs = performance.now() - t0;

  let count = 0;
  let pos = prompt.length;
  while (finishReason !== "interrupted") {
    if (maxTokens >= 0 && count >= maxTokens) {
      finishReason = "length";
      break;
    }
    if (shouldStop !== undefined) {
      if (performance.now() - lastYield >= YIELD_INTERVAL_MS) {
        await yieldToEventLoop();
        lastYield = performance.now();
      }
      if (shouldStop()) {
        finishReason = "interrupted";
        break;
      }
    }
    t0 = performance.now();
    const id = sampler.sample(logits);
    timings.samplingMs += performance.now() - t0;
    timings.sampledTokens++;
    if (tokenizer.isEog(id)) {
      finishReason = "stop";
      break;
    }
    sampler.accept(id);
    generated[count++] = id;
    if (stops.push(decoder.push(id))) {
      finishReason = "stop";
      break;
    }
    if (maxTokens >= 0 && count >= maxTokens) {
      finishReason = "length";
      break;
    }
    if (pos >= model.contextSize) {
      finishReason = "context";
      break;
    }
    one[0] = id;
    t0 = performance.now();
    logits = model.forward(one, pos++);
    timings.decodeMs += performance.now() - t0;
    timings.decodeTokens++;
  }
  if (!stops.stopped) {
    stops.push(decoder.flush());
    stops.flush();
  }
  return {
    text,
    tokens: generated.subarray(0, count),
    promptTokens: prompt,
    finishReason,
    timings,
  };
}
