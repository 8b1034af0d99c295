/**
 * One sequence's generation state: its sampler, its stop matcher and its
 * streaming UTF-8 decoder. {@linkcode Sequence.step} turns one logits row
 * into the next token and emits an event (token, the text it releases, its
 * log-probability); the caller decodes that token and calls `step` again.
 * A server keeps one `Sequence` per request and decodes them together
 * through `Context.decode`; `generate()` drives one over a context slot.
 *
 * Every path from logits to a token id in dotllm is {@linkcode Sequence.step}:
 * logit processors (logit bias, later grammar masks) change a private copy
 * of the row, the sampler picks, and the end-of-generation, stop-string and
 * length rules decide whether generation goes on. The step driver
 * (`driver.ts`) runs any number of sequences over one `Context`.
 *
 * Nothing is allocated per step apart from the released text (and the
 * top-alternatives list when asked for): the event object is reused (read it
 * during the callback) and the generated ids go into a buffer sized at
 * creation.
 *
 * @example Greedy decoding of one sequence, by hand
 * ```ts
 * import { Batch, Context, Model } from "../model/mod.ts";
 * import { Sampler } from "../sampler/mod.ts";
 * import { Tokenizer } from "../tokenizer/mod.ts";
 * import { Sequence } from "./sequence.ts";
 * const model = Model.load("stories260K.gguf");
 * const context = new Context(model, { threads: 1 });
 * const tokenizer = Tokenizer.fromGguf(model.gguf);
 * const sequence = new Sequence(tokenizer, {
 *   sampler: new Sampler(model.config.vocabSize, { temperature: 0 }, 1),
 *   maxTokens: 16,
 *   onToken: (e) => console.log(e.token, JSON.stringify(e.text), e.logprob),
 * });
 * const prompt = tokenizer.encode("Once upon a time", { addSpecial: true, parseSpecial: true });
 * sequence.begin(prompt);
 * const batch = new Batch(context.batchSize);
 * prompt.forEach((id, i) => batch.add(id, i, 0, i === prompt.length - 1));
 * context.decode(batch);
 * for (let pos = prompt.length; ; pos++) {
 *   const id = sequence.step(context.logits(0));
 *   if (sequence.finished) break;
 *   batch.clear();
 *   batch.add(id, pos, 0, true);
 *   context.decode(batch);
 * }
 * console.log(sequence.text, sequence.finishReason);
 * ```
 *
 * @module
 */
import type { Sampler } from "../sampler/sampler.ts";
import type { LogitProcessor } from "./processors.ts";
import { StopMatcher } from "./stop.ts";

/** What a sequence needs from a tokenizer. */
export interface SequenceTokenizer {
  /** A streaming decoder: `push` returns the complete UTF-8 text so far, `flush` the rest. */
  createDecoder(): { push(id: number): string; flush(): string };
  /** True for end-of-generation tokens (EOS, EOT, `<|im_end|>`, ...). */
  isEog(id: number): boolean;
}

/**
 * Why generation ended: an end-of-generation token or a stop string
 * (`"stop"`), the token limit (`"length"`), the end of the context
 * (`"context"`), a cancel (`"interrupted"`).
 */
export type FinishReason = "stop" | "length" | "context" | "interrupted";

/** A token and its log-probability. */
export interface TokenAlternative {
  token: number;
  logprob: number;
}

/** One generated token (the object is reused: read it during the callback). */
export interface TokenEvent {
  /** The token id. */
  token: number;
  /** The text this token released ("" while a character or a possible stop string is incomplete). */
  text: string;
  /**
   * Natural log of the token's probability under the raw softmax of the
   * model's logits (before logit processors, penalties, temperature and
   * truncation); 0 unless the sequence computes log-probabilities.
   */
  logprob: number;
  /** The `topLogprobs` most likely tokens under the same softmax, best first (when asked for). */
  top?: TokenAlternative[];
}

/** Options of a {@linkcode Sequence}. */
export interface SequenceOptions {
  /** Picks each token (its parameters and seed decide the output). */
  sampler: Sampler;
  /** Most tokens to generate; -1 (default) = no limit but `capacity`. */
  maxTokens?: number;
  /** Room for generated ids; default 4096 or `maxTokens`. Generation ends with "context" when full. */
  capacity?: number;
  /** Stop strings: generation ends before the first, which is not emitted. */
  stop?: readonly string[];
  /** Every released text chunk, in order (the tail flushed at the end too). */
  onText?: (text: string) => void;
  /** Each generated token (not end-of-generation tokens), after its text was released. */
  onToken?: (event: TokenEvent) => void;
  /** Keep the whole text in {@linkcode Sequence.text} (default true). */
  collectText?: boolean;
  /** Keep generating past end-of-generation tokens (llama.cpp's `ignore_eos`, for benchmarks). */
  ignoreEos?: boolean;
  /**
   * Compute each event's `logprob` (a pass over the vocabulary per token);
   * default true when `onToken` is given, else 0 is reported.
   */
  logprobs?: boolean;
  /** -1 (default): no alternatives; k >= 0: each event's `top` lists the k likeliest tokens. */
  topLogprobs?: number;
  /** Run on a copy of each logits row, in order, before the sampler. */
  processors?: readonly LogitProcessor[];
}

/** The log of the softmax denominator of `logits`, computed stably; allocates nothing. */
export function logSumExp(logits: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  return max + Math.log(sum);
}

/** The ids of the `k` largest logits, best first (ties: lower id first). */
export function topIds(logits: Float32Array, k: number): number[] {
  const ids: number[] = [];
  if (k <= 0) return ids;
  for (let i = 0; i < logits.length; i++) {
    if (ids.length === k && logits[i] <= logits[ids[k - 1]]) continue;
    let j = ids.length < k ? ids.length : k - 1;
    if (ids.length < k) ids.push(i);
    while (j > 0 && logits[ids[j - 1]] < logits[i]) {
      ids[j] = ids[j - 1];
      j--;
    }
    ids[j] = i;
  }
  return ids;
}

/** Best-scored tokens a resample looks through for the allowed ones before masking every token. */
export const LAZY_SCAN = 64;

/** Most alternatives per token (OpenAI's `top_logprobs` limit). */
export const TOP_LOGPROBS_MAX = 20;

/** The generation state of one sequence. */
export class Sequence {
  readonly sampler: Sampler;
  readonly maxTokens: number;
  readonly #tokenizer: SequenceTokenizer;
  readonly #stops: StopMatcher;
  readonly #decoder: { push(id: number): string; flush(): string };
  readonly #generated: Int32Array;
  readonly #event: TokenEvent = { token: 0, text: "", logprob: 0 };
  readonly #onText?: (text: string) => void;
  readonly #onToken?: (event: TokenEvent) => void;
  readonly #collect: boolean;
  readonly #ignoreEos: boolean;
  readonly #topLogprobs: number;
  readonly #logprobs: boolean;
  readonly #processors: readonly LogitProcessor[];
  /** How many processors offer a one-token check. */
  readonly #checks: number;
  /** The processed copy of a logits row (made on the first step that needs it). */
  #scratch: Float32Array | undefined;
  /** A row of the few tokens a resample is decided by (see `#resample`). */
  #only: Float32Array | undefined;
  #released = "";
  #text = "";
  #count = 0;
  #finish: FinishReason | undefined;

  constructor(tokenizer: SequenceTokenizer, options: SequenceOptions) {
    const maxTokens = options.maxTokens ?? -1;
    if (!Number.isInteger(maxTokens) || maxTokens < -1) {
      throw new RangeError(`maxTokens must be -1 or a non-negative integer, got ${maxTokens}`);
    }
    this.maxTokens = maxTokens;
    this.sampler = options.sampler;
    this.#tokenizer = tokenizer;
    this.#onText = options.onText;
    this.#onToken = options.onToken;
    this.#collect = options.collectText ?? true;
    this.#ignoreEos = options.ignoreEos ?? false;
    const top = options.topLogprobs ?? -1;
    if (!Number.isInteger(top) || top < -1 || top > TOP_LOGPROBS_MAX) {
      throw new RangeError(
        `topLogprobs must be an integer in [-1, ${TOP_LOGPROBS_MAX}], got ${top}`,
      );
    }
    this.#topLogprobs = top;
    this.#logprobs = top >= 0 || (options.logprobs ?? options.onToken !== undefined);
    this.#processors = options.processors ?? [];
    this.#checks = this.#processors.filter((p) => p.allows !== undefined).length;
    this.#stops = new StopMatcher(options.stop ?? [], (piece) => {
      this.#released += piece;
      if (this.#collect) this.#text += piece;
      this.#onText?.(piece);
    });
    this.#decoder = tokenizer.createDecoder();
    const capacity = options.capacity ?? (maxTokens >= 0 ? maxTokens : 4096);
    if (!Number.isInteger(capacity) || capacity < 0) {
      throw new RangeError(`capacity must be a non-negative integer, got ${capacity}`);
    }
    this.#generated = new Int32Array(maxTokens >= 0 ? Math.min(maxTokens, capacity) : capacity);
  }

  /** Starts the sequence after `prompt` (the sampler's penalties see it). */
  begin(prompt: ArrayLike<number>): void {
    this.sampler.reset();
    for (let i = 0; i < prompt.length; i++) this.sampler.accept(prompt[i]);
  }

  /** True once generation ended ({@linkcode finishReason} says why). */
  get finished(): boolean {
    return this.#finish !== undefined;
  }

  /** Why generation ended, or undefined while it runs. */
  get finishReason(): FinishReason | undefined {
    return this.#finish;
  }

  /** The generated ids so far (end-of-generation excluded): a view, valid until the next step. */
  get tokens(): Int32Array {
    return this.#generated.subarray(0, this.#count);
  }

  /** Tokens generated so far. */
  get tokenCount(): number {
    return this.#count;
  }

  /** True when a stop string ended generation (the text then stops before it). */
  get stoppedByString(): boolean {
    return this.#stops.stopped;
  }

  /** The text released so far (stop string excluded); "" when `collectText` is false. */
  get text(): string {
    return this.#text;
  }

  /**
   * Samples the token that follows `logits` and returns it; when
   * {@linkcode finished} is then true, generation ended (an end-of-generation
   * token, a stop string or the token limit) and the token is not to be
   * decoded. Otherwise the caller decodes it and steps again with its logits.
   */
  step(logits: Float32Array): number {
    if (this.#finish !== undefined) throw new Error("Sequence.step after the sequence finished");
    if (this.maxTokens >= 0 && this.#count >= this.maxTokens) {
      this.end("length");
      return -1;
    }
    const row = this.#process(logits, false);
    let id = this.sampler.sample(row);
    if (this.#checks && !this.#allowed(id)) id = this.#resample(logits, row);
    for (const p of this.#processors) p.accept?.(id);
    if (!this.#ignoreEos && this.#tokenizer.isEog(id)) {
      this.end("stop");
      return id;
    }
    const e = this.#event;
    if (this.#logprobs) {
      const lse = logSumExp(logits);
      e.logprob = logits[id] - lse;
      if (this.#topLogprobs >= 0) {
        e.top = topIds(logits, this.#topLogprobs).map((t) => ({
          token: t,
          logprob: logits[t] - lse,
        }));
      }
    }
    this.sampler.accept(id);
    this.#generated[this.#count++] = id;
    this.#released = "";
    const stopped = this.#stops.push(this.#decoder.push(id));
    e.token = id;
    e.text = this.#released;
    this.#onToken?.(e);
    if (stopped) this.end("stop");
    else if (this.maxTokens >= 0 && this.#count >= this.maxTokens) this.end("length");
    else if (this.#count >= this.#generated.length) this.end("context");
    return id;
  }

  /**
   * The row the sampler sees: `logits` itself, or a processed copy when
   * there are processors to run. Processors with a one-token check run only
   * when `all` (after the sampled token failed that check).
   */
  #process(logits: Float32Array, all: boolean): Float32Array {
    if (this.#processors.length === 0 || (!all && this.#checks === this.#processors.length)) {
      return logits;
    }
    const row = this.#scratch ??= new Float32Array(logits.length);
    row.set(logits);
    for (const p of this.#processors) if (all || p.allows === undefined) p.process(row);
    return row;
  }

  /**
   * The sample after the first one was refused by a one-token check, as if
   * every processor had run on the whole row (llama.cpp's resampling). When
   * the sampler is decided by its best K tokens (greedy: 1; top-k: K), the K
   * best allowed ones are looked for among the {@linkcode LAZY_SCAN}
   * best-scored tokens and the sampler sees a row of those alone: the same
   * sample, without masking the vocabulary. Else every processor runs.
   */
  #resample(logits: Float32Array, row: Float32Array): number {
    const k = this.sampler.deciding;
    if (k > 0 && k < LAZY_SCAN) {
      const best = topIds(row, LAZY_SCAN);
      const found: number[] = [];
      for (const t of best) {
        if (!this.#allowed(t)) continue;
        found.push(t);
        if (found.length === k) break;
      }
      // Allowed tokens past the best LAZY_SCAN rank below every one of them: k found among
      // those are the k best allowed (in the sampler's order: score, then id).
      if (found.length >= k) {
        const only = this.#only ??= new Float32Array(row.length);
        only.fill(-Infinity);
        for (let i = 0; i < k; i++) only[found[i]] = row[found[i]];
        return this.sampler.sample(only);
      }
    }
    return this.sampler.sample(this.#process(logits, true));
  }

  /** True when every processor with a one-token check allows `id`. */
  #allowed(id: number): boolean {
    for (const p of this.#processors) if (p.allows !== undefined && !p.allows(id)) return false;
    return true;
  }

  /** Ends generation for `reason` (e.g. the context is full, or an interrupt) and flushes the text. */
  end(reason: FinishReason): void {
    if (this.#finish !== undefined) return;
    this.#finish = reason;
    if (!this.#stops.stopped) {
      this.#stops.push(this.#decoder.flush());
      this.#stops.flush();
    }
  }
}
