/**
 * The library API: load a model once, tokenize and detokenize, stream a
 * generation as an async iterator of pieces, cancel it with an
 * `AbortSignal`, and close it to free its native memory.
 *
 * Built on {@linkcode LlamaModel} (forward pass), {@linkcode Tokenizer},
 * {@linkcode Sampler} and the generation loop of `src/generation/`.
 *
 * @example Greedy generation, piece by piece
 * ```ts
 * import { Llm } from "./llm.ts";
 * const llm = await Llm.load("../shared/testdata/models/stories260K.gguf", { threads: 1 });
 * let text = "";
 * for await (const piece of llm.generate("Once upon a time", { maxTokens: 8, temperature: 0 })) {
 *   text += piece.text; // piece.token is its id, piece.logprob its log-probability
 * }
 * llm.close();
 * if (!text.startsWith(", there was a little girl")) throw new Error(text);
 * ```
 *
 * @module
 */
import { applyChatTemplate, type ApplyTemplateOptions, type ChatMessage } from "../chat/mod.ts";
import { generate, type GenerationResult } from "../generation/mod.ts";
import { type CacheType, LlamaModel } from "../model/mod.ts";
import type { LlamaConfig } from "../model/mod.ts";
import { prepareLibrary } from "../native/locate.ts";
import { randomSeed, Sampler, type SamplerParams } from "../sampler/mod.ts";
import { type DecodeOptions, Tokenizer } from "../tokenizer/mod.ts";

/** Options of {@linkcode Llm.load}. */
export interface LlmOptions {
  /** Kernel threads; 0 (default) = every CPU. */
  threads?: number;
  /** KV cache positions; default min(the model's context, 4096). */
  contextSize?: number;
  /** Prompt tokens per prefill batch; default 512. */
  batchSize?: number;
  /** KV cache element type; default `"f16"` (as llama.cpp). */
  cacheType?: CacheType;
}

/** Options of {@linkcode Llm.generate}: the sampling parameters (llama.cpp's defaults) and limits. */
export interface LlmGenerateOptions extends Partial<SamplerParams> {
  /** Most tokens to generate; -1 (default) = until an end-of-generation token or a full context. */
  maxTokens?: number;
  /** Stop strings: generation ends before the first one, which is not returned. */
  stop?: readonly string[];
  /** Random seed (0 to 2^32-1); default random. Same seed, same options: same tokens. */
  seed?: number;
  /** Cancels the generation: the iterator then throws `signal.reason`. */
  signal?: AbortSignal;
}

/** Options of {@linkcode Llm.chat}: those of `generate`, plus the template's. */
export interface LlmChatOptions extends LlmGenerateOptions {
  /** Jinja source (or a built-in's name: chatml, llama3, gemma, phi3, mistral) overriding the file's. */
  template?: string;
  /** The clock the template's `strftime_now` reads; default now. */
  now?: Date;
}

/** One generated token and the text it completes. */
export interface GeneratedPiece {
  /** The text this token releases: "" while a UTF-8 character or a possible stop string is incomplete. */
  text: string;
  /** The token id. */
  token: number;
  /**
   * Natural log of the token's probability under the model's raw softmax
   * (the logits before penalties, temperature, top-k/top-p/min-p), so it
   * does not depend on the sampling parameters.
   */
  logprob: number;
}

/** Tokenization options: BOS/EOS as the model asks, control-token text parsed or not. */
export interface TokenizeOptions {
  /** Add BOS (and EOS) as the model asks. Default true. */
  addSpecial?: boolean;
  /** Turn the text of control tokens (`<|eot_id|>`...) into those tokens. Default false. */
  parseSpecial?: boolean;
}

/** Natural log of softmax(logits)[id], computed stably; allocates nothing. */
function logSoftmaxAt(logits: Float32Array, id: number): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  return logits[id] - max - Math.log(sum);
}

/**
 * A sampler that remembers the raw log-probability of the token it picked,
 * and reports each generated token it is told about (`accept` after the first
 * `sample`: before that, `accept` receives the prompt).
 */
class ScoringSampler extends Sampler {
  #logprob = 0;
  #sampling = false;
  onGenerated: (token: number, logprob: number) => void = () => {};

  override sample(logits: Float32Array): number {
    this.#sampling = true;
    const id = super.sample(logits);
    this.#logprob = logSoftmaxAt(logits, id);
    return id;
  }

  override accept(id: number): void {
    super.accept(id);
    if (this.#sampling) this.onGenerated(id, this.#logprob);
  }
}

/** A loaded model with its tokenizer. One generation at a time; {@linkcode close} when done. */
export class Llm {
  /** The transformer (config, weights, forward pass). */
  readonly model: LlamaModel;
  /** The model's tokenizer. */
  readonly tokenizer: Tokenizer;
  #busy = false;
  #closed = false;

  private constructor(model: LlamaModel, tokenizer: Tokenizer) {
    this.model = model;
    this.tokenizer = tokenizer;
  }

  /**
   * Maps the GGUF file at `path` and loads the model and its tokenizer.
   * Fetches the native library first when the package was loaded over
   * http(s). Throws `GgufError` / `ModelError` / `TokenizerError` for a bad
   * file and `RangeError` for a bad option.
   */
  static async load(path: string, options: LlmOptions = {}): Promise<Llm> {
    await prepareLibrary();
    const model = LlamaModel.load(path, {
      threads: options.threads,
      contextSize: options.contextSize,
      batchSize: options.batchSize,
      cacheType: options.cacheType,
    });
    try {
      return new Llm(model, Tokenizer.fromGguf(model.gguf));
    } catch (error) {
      model.close();
      throw error;
    }
  }

  /** The model's hyper-parameters. */
  get config(): LlamaConfig {
    return this.model.config;
  }

  /** Token ids of `text` (BOS added as the model asks unless `addSpecial` is false). */
  tokenize(text: string, options: TokenizeOptions = {}): number[] {
    return this.tokenizer.encode(text, options);
  }

  /** The text of token ids, as llama.cpp's `common_detokenize` renders it by default. */
  detokenize(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    return this.tokenizer.decode(ids, options);
  }

  /**
   * Generates from `prompt` (text, or token ids) on a fresh sequence. Yields
   * a piece per generated token (end-of-generation tokens are not yielded);
   * the iterator's return value is the whole result (text, tokens, finish
   * reason, timings). A token's piece is handed out once the next token has
   * been sampled (its text is final then) or generation has ended, whenever
   * the loop yields to the event loop (at least every 50 ms): the consumer
   * may see a few at once. Breaking out of the loop stops generation; so does
   * aborting `signal`, after which the iterator throws `signal.reason`.
   */
  async *generate(
    prompt: string | ArrayLike<number>,
    options: LlmGenerateOptions = {},
  ): AsyncGenerator<GeneratedPiece, GenerationResult, undefined> {
    if (this.#closed) throw new Error("Llm used after close");
    if (this.#busy) throw new Error("Llm is already generating: one generation at a time");
    const { maxTokens, stop, seed, signal, ...sampling } = options;
    signal?.throwIfAborted();
    const sampler = new ScoringSampler(
      this.model.config.vocabSize,
      sampling,
      seed ?? randomSeed(),
    );
    // A token's piece is complete once the next token is accepted (its text
    // was streamed in between) or generation has ended (the final flush).
    const ready: GeneratedPiece[] = [];
    let pending: GeneratedPiece | undefined;
    let wake: (() => void) | undefined;
    const release = () => {
      if (pending !== undefined) ready.push(pending);
      pending = undefined;
      wake?.();
    };
    sampler.onGenerated = (token, logprob) => {
      release();
      pending = { text: "", token, logprob };
    };
    let stopped = false;
    let result: GenerationResult | undefined;
    let failure: unknown;
    let done = false;
    this.#busy = true;
    const run = generate(this.model, this.tokenizer, sampler, {
      prompt,
      maxTokens,
      stop,
      onText: (text) => {
        if (pending !== undefined) pending.text += text;
      },
      shouldStop: () => stopped || (signal?.aborted ?? false),
    }).then((r) => (result = r), (e) => (failure = e ?? new Error("generation failed")))
      .finally(() => {
        done = true;
        release();
      });
    try {
      for (;;) {
        while (ready.length > 0) yield ready.shift()!;
        if (done) break;
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
      if (failure !== undefined) throw failure;
      if (signal?.aborted) throw signal.reason;
      return result!;
    } finally {
      stopped = true;
      await run;
      this.#busy = false;
    }
  }

  /**
   * Renders `messages` (OpenAI's `{ role, content }`) with the model's chat
   * template as llama.cpp renders it. Throws `ChatTemplateError` when the
   * template fails, or the model has none and `template` is not given.
   */
  applyTemplate(messages: readonly ChatMessage[], options: ApplyTemplateOptions = {}): string {
    return applyChatTemplate(this.model.gguf, this.tokenizer, messages, options);
  }

  /**
   * The assistant's reply to `messages`, streamed like {@linkcode generate}:
   * the conversation goes through the chat template (generation prompt
   * added; a final assistant message is continued).
   */
  async *chat(
    messages: readonly ChatMessage[],
    options: LlmChatOptions = {},
  ): AsyncGenerator<GeneratedPiece, GenerationResult, undefined> {
    const { template, now, ...rest } = options;
    return yield* this.generate(this.applyTemplate(messages, { template, now }), rest);
  }

  /** Frees the model's native memory: buffers, KV cache, file mapping and thread pool. */
  close(): void {
    if (this.#closed) return;
    if (this.#busy) throw new Error("Llm.close() during a generation: stop it first");
    this.#closed = true;
    this.model.close();
  }

  /** {@linkcode close}, for `using llm = await Llm.load(...)`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
