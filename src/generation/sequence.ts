/**
 * One sequence's generation state: its sampler, its stop matcher and its
 * streaming UTF-8 decoder. {@linkcode Sequence.step} turns one logits row
 * into the next token and emits an event (token, the text it releases, its
 * log-probability); the caller decodes that token and calls `step` again.
 * A server keeps one `Sequence` per request and decodes them together
 * through `Context.decode`; `generate()` drives one over a context slot.
 *
 * Nothing is allocated per step apart from the released text: the event
 * object is reused (read it during the callback) and the generated ids go
 * into a buffer sized at creation.
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
import { StopMatcher } from "./stop.ts";

/** What a sequence needs from a tokenizer. */
export interface SequenceTokenizer {
  /** A streaming decoder: `push` returns the complete UTF-8 text so far, `flush` the rest. */
  createDecoder(): { push(id: number): string; flush(): string };
  /** True for end-of-generation tokens (EOS, EOT, `<|im_end|>`, ...). */
  isEog(id: number): boolean;
}

/** Why generation ended. */
export type FinishReason = "stop" | "length" | "context" | "interrupted";

/** One generated token (the object is reused: read it during the callback). */
export interface TokenEvent {
  /** The token id. */
  token: number;
  /** The text this token released ("" while a character or a possible stop string is incomplete). */
  text: string;
  /**
   * Natural log of the token's probability under the raw softmax of the
   * logits (before penalties, temperature and truncation).
   */
  logprob: number;
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
}

/** Natural log of softmax(logits)[id], computed stably; allocates nothing. */
export function logSoftmaxAt(logits: Float32Array, id: number): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  return logits[id] - max - Math.log(sum);
}

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
    const id = this.sampler.sample(logits);
    if (this.#tokenizer.isEog(id)) {
      this.end("stop");
      return id;
    }
    const logprob = this.#onToken ? logSoftmaxAt(logits, id) : 0;
    this.sampler.accept(id);
    this.#generated[this.#count++] = id;
    this.#released = "";
    const stopped = this.#stops.push(this.#decoder.push(id));
    const e = this.#event;
    e.token = id;
    e.text = this.#released;
    e.logprob = logprob;
    this.#onToken?.(e);
    if (stopped) this.end("stop");
    else if (this.maxTokens >= 0 && this.#count >= this.maxTokens) this.end("length");
    else if (this.#count >= this.#generated.length) this.end("context");
    return id;
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
