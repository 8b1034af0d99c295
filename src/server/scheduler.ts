/**
 * Continuous batching over the slots of an {@linkcode Engine}: each
 * {@linkcode Scheduler.step} decodes one token of every generating sequence
 * in one batch and fills the rest of a token budget with prefill chunks of
 * new requests, so a long prompt never stalls the others for more than one
 * step. A request is placed in the free slot whose cached tokens share the
 * longest prefix with its prompt and continues from there (a multi-turn chat
 * re-sends its history). Requests beyond the free slots wait in a FIFO queue.
 *
 * The per-sequence generation follows `src/generation/generate.ts` exactly
 * (sampler fed the prompt, end-of-generation tokens not emitted, stop strings
 * held back, `maxTokens`, end of context), so a greedy reply here equals
 * `dotllm run` for the same prompt tokens.
 *
 * @example With a fake engine
 * ```ts ignore
 * const scheduler = new Scheduler(engine, tokenizer);
 * scheduler.submit({ prompt: Int32Array.of(1, 2, 3), maxTokens: 4 }, (event) => console.log(event));
 * while (scheduler.step()) {}
 * ```
 *
 * @module
 */
import { StopMatcher } from "../generation/stop.ts";
import { Sampler, type SamplerParams, SamplerWorkspace } from "../sampler/mod.ts";
import { type Engine, EngineBatch } from "./engine.ts";

/** What the scheduler needs from a tokenizer. */
export interface SchedulerTokenizer {
  /** True for end-of-generation tokens. */
  isEog(id: number): boolean;
  /** A streaming UTF-8-safe decoder. */
  createDecoder(): { push(id: number): string; flush(): string };
  /** The text of one token (for `top_logprobs`). */
  tokenToPiece(id: number): string;
}

/** One generation request. */
export interface SequenceParams {
  /** Prompt token ids (non-empty). */
  prompt: Int32Array;
  /** Most tokens to generate; -1 = until end of generation or a full context. */
  maxTokens: number;
  /** Sampling parameters (llama.cpp defaults for the rest). */
  sampling?: Partial<SamplerParams>;
  /** Random seed. */
  seed?: number;
  /** Stop strings (not emitted). */
  stop?: readonly string[];
  /** -1 (default): no log-probabilities; 0..20: the sampled token's and this many alternatives. */
  topLogprobs?: number;
  /** Keep generating past end-of-generation tokens (llama.cpp's `ignore_eos`, for benchmarks). */
  ignoreEos?: boolean;
}

/** A token and its log-probability. */
export interface TokenLogprob {
  token: number;
  text: string;
  logprob: number;
}

/** Why a sequence ended. */
export type SequenceFinish = "stop" | "length";

/** Timings of one sequence in milliseconds. */
export interface SequenceTimings {
  queueMs: number;
  prefillMs: number;
  decodeMs: number;
}

/** What a sequence reports, in order: start, token/text..., done (or error alone). */
export type SequenceEvent =
  | { type: "start"; promptTokens: number }
  | {
    type: "token";
    /** The choice (0..n-1) this event belongs to; `text` and `done` carry it too. */
    index: number;
    token: number;
    text: string;
    logprob: number;
    top?: TokenLogprob[];
  }
  | { type: "text"; index: number; text: string }
  | {
    type: "done";
    index: number;
    finishReason: SequenceFinish;
    promptTokens: number;
    cachedTokens: number;
    completionTokens: number;
    timings: SequenceTimings;
  }
  | { type: "error"; status: number; message: string };

/** Cumulative counters of a scheduler. */
export interface SchedulerStats {
  slotCount: number;
  slotsBusy: number;
  queueDepth: number;
  /** Positions holding tokens, over all slots. */
  kvUsedTokens: number;
  kvTotalTokens: number;
  promptTokensTotal: number;
  /** Prompt tokens served from a slot's cache instead of recomputed. */
  cachedTokensTotal: number;
  generatedTokensTotal: number;
  prefillMsTotal: number;
  decodeMsTotal: number;
  stepsTotal: number;
}

/** Options of a {@linkcode Scheduler}. */
export interface SchedulerOptions {
  /**
   * Most tokens per step (decodes plus prefill chunks); default 256: at most
   * a fraction of a second of prefill on a small CPU, so running streams
   * keep flowing while a long prompt is read.
   */
  stepTokens?: number;
}

/** Most `top_logprobs` (OpenAI's limit). */
export const MAX_TOP_LOGPROBS = 20;

interface Slot {
  readonly index: number;
  /** The tokens at positions [0, length) of this slot's KV cache. */
  readonly history: Int32Array;
  length: number;
  sequence?: Sequence;
  lastUsed: number;
}

interface Sequence {
  readonly id: number;
  readonly params: SequenceParams;
  readonly emit: (event: SequenceEvent) => void;
  readonly submittedAt: number;
  slot?: Slot;
  /** Next prompt index to prefill. */
  prefillNext: number;
  /** The sampled token to feed next, or -1 while prefilling. */
  pending: number;
  cached: number;
  generated: number;
  sampler?: Sampler;
  decoder?: { push(id: number): string; flush(): string };
  stops?: StopMatcher;
  text: string;
  admittedAt: number;
  firstTokenAt: number;
}

/** The log of the softmax denominator, computed stably. */
function logSumExp(logits: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  return max + Math.log(sum);
}

/** The `k` largest logits' ids, best first. */
function topIds(logits: Float32Array, k: number): number[] {
  const ids: number[] = [];
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

/** Schedules sequences onto an engine's slots. */
export class Scheduler {
  readonly engine: Engine;
  /** Sampling buffers shared by every request (sampling runs on this thread, one call at a time). */
  readonly #samplerWorkspace: SamplerWorkspace;
  readonly #tokenizer: SchedulerTokenizer;
  readonly #slots: Slot[];
  readonly #queue: Sequence[] = [];
  readonly #byId = new Map<number, Sequence>();
  readonly #batch: EngineBatch;
  readonly #stepTokens: number;
  /** Sequences in admission order (prefill goes first-come first-served). */
  readonly #active: Sequence[] = [];
  #rowSequences: Sequence[] = [];
  #nextId = 1;
  #clock = 0;
  readonly #stats = {
    promptTokensTotal: 0,
    cachedTokensTotal: 0,
    generatedTokensTotal: 0,
    prefillMsTotal: 0,
    decodeMsTotal: 0,
    stepsTotal: 0,
  };

  constructor(engine: Engine, tokenizer: SchedulerTokenizer, options: SchedulerOptions = {}) {
    this.engine = engine;
    this.#samplerWorkspace = new SamplerWorkspace(engine.vocabSize);
    this.#tokenizer = tokenizer;
    this.#stepTokens = Math.min(engine.batchSize, options.stepTokens ?? 256);
    if (!Number.isInteger(this.#stepTokens) || this.#stepTokens < engine.slotCount) {
      throw new RangeError(
        `stepTokens must be an integer >= the slot count ${engine.slotCount}, got ${this.#stepTokens}`,
      );
    }
    this.#batch = new EngineBatch(this.#stepTokens);
    this.#slots = Array.from({ length: engine.slotCount }, (_, index) => ({
      index,
      history: new Int32Array(engine.contextSize),
      length: 0,
      lastUsed: 0,
    }));
  }

  /** True while a sequence is queued or running. */
  get busy(): boolean {
    return this.#byId.size > 0;
  }

  /**
   * Queues a request; `emit` receives its events (`start` or `error` at
   * once). Returns its id for {@linkcode cancel}.
   */
  submit(params: SequenceParams, emit: (event: SequenceEvent) => void): number {
    const id = this.#nextId++;
    const n = params.prompt.length;
    if (n === 0) {
      emit({ type: "error", status: 400, message: "the prompt is empty" });
      return id;
    }
    const ctx = this.engine.contextSize;
    if (n >= ctx) {
      emit({
        type: "error",
        status: 400,
        message:
          `the prompt is ${n} tokens; the context holds ${ctx} per slot (raise the server's context size)`,
      });
      return id;
    }
    for (const t of params.prompt) {
      if (!Number.isInteger(t) || t < 0 || t >= this.engine.vocabSize) {
        emit({ type: "error", status: 400, message: `token id ${t} is outside the vocabulary` });
        return id;
      }
    }
    let sampler: Sampler;
    let stops: StopMatcher;
    try {
      sampler = new Sampler(
        this.engine.vocabSize,
        params.sampling ?? {},
        params.seed ?? 0,
        this.#samplerWorkspace,
      );
      stops = new StopMatcher(params.stop ?? [], (text) => (seq.text += text));
    } catch (error) {
      emit({ type: "error", status: 400, message: (error as Error).message });
      return id;
    }
    const seq: Sequence = {
      id,
      params,
      emit,
      submittedAt: performance.now(),
      prefillNext: 0,
      pending: -1,
      cached: 0,
      generated: 0,
      sampler,
      stops,
      text: "",
      admittedAt: 0,
      firstTokenAt: 0,
    };
    this.#byId.set(id, seq);
    this.#queue.push(seq);
    emit({ type: "start", promptTokens: n });
    return id;
  }

  /** Drops a request: out of the queue, or its slot freed at once. No more events. */
  cancel(id: number): void {
    const seq = this.#byId.get(id);
    if (seq === undefined) return;
    this.#byId.delete(id);
    const q = this.#queue.indexOf(seq);
    if (q >= 0) this.#queue.splice(q, 1);
    this.#release(seq);
  }

  /** Cancels every queued and running request. */
  cancelAll(): void {
    for (const id of [...this.#byId.keys()]) this.cancel(id);
  }

  #release(seq: Sequence): void {
    const a = this.#active.indexOf(seq);
    if (a >= 0) this.#active.splice(a, 1);
    if (seq.slot !== undefined) {
      seq.slot.sequence = undefined;
      seq.slot.lastUsed = ++this.#clock;
      seq.slot = undefined;
    }
  }

  /** Places queued requests into free slots, each where its prompt's longest prefix is cached. */
  #admit(): void {
    while (this.#queue.length > 0) {
      const free = this.#slots.filter((s) => s.sequence === undefined);
      if (free.length === 0) return;
      const seq = this.#queue.shift()!;
      const prompt = seq.params.prompt;
      let best = free[0], bestLength = -1;
      for (const slot of free) {
        const max = Math.min(slot.length, prompt.length);
        let n = 0;
        while (n < max && slot.history[n] === prompt[n]) n++;
        // Longest prefix; on a tie the least recently used slot (keeps others' caches).
        if (n > bestLength || (n === bestLength && slot.lastUsed < best.lastUsed)) {
          best = slot;
          bestLength = n;
        }
      }
      // At least the last prompt token is recomputed: its logits start generation.
      const reuse = Math.min(bestLength, prompt.length - 1);
      best.length = reuse;
      this.engine.truncate(best.index, reuse);
      best.sequence = seq;
      seq.slot = best;
      seq.prefillNext = reuse;
      seq.cached = reuse;
      seq.admittedAt = performance.now();
      seq.decoder = this.#tokenizer.createDecoder();
      seq.sampler!.reset();
      for (let i = 0; i < prompt.length; i++) seq.sampler!.accept(prompt[i]);
      this.#active.push(seq);
      this.#stats.promptTokensTotal += prompt.length;
      this.#stats.cachedTokensTotal += reuse;
    }
  }

  /**
   * Runs one batch: admits queued requests, decodes one token of every
   * generating sequence and prefill chunks up to the token budget, samples,
   * and emits events. Returns false when there was nothing to do.
   */
  step(): boolean {
    this.#admit();
    const batch = this.#batch;
    batch.clear();
    const rows = this.#rowSequences;
    rows.length = 0;
    for (const seq of this.#active) {
      if (seq.pending < 0) continue;
      const slot = seq.slot!;
      batch.add(seq.pending, slot.length, slot.index, true);
      slot.history[slot.length++] = seq.pending;
      rows.push(seq);
    }
    const decodeCount = batch.count;
    for (const seq of this.#active) {
      if (seq.pending >= 0) continue;
      const room = batch.capacity - batch.count;
      if (room <= 0) break;
      const prompt = seq.params.prompt, slot = seq.slot!;
      const n = Math.min(room, prompt.length - seq.prefillNext);
      for (let i = 0; i < n; i++) {
        const last = seq.prefillNext + i === prompt.length - 1;
        batch.add(prompt[seq.prefillNext + i], slot.length, slot.index, last);
        slot.history[slot.length++] = prompt[seq.prefillNext + i];
        if (last) rows.push(seq);
      }
      seq.prefillNext += n;
    }
    if (batch.count === 0) return false;
    const t0 = performance.now();
    let logits: Float32Array;
    try {
      logits = this.engine.decode(batch);
    } catch (error) {
      // An engine failure ends every sequence in the batch, never the server.
      const message = `decode failed: ${(error as Error).message}`;
      for (const slot of this.#slots) { // what the failed batch wrote is unknown
        slot.length = 0;
        this.engine.truncate(slot.index, 0);
      }
      for (const seq of [...this.#active]) this.#fail(seq, message);
      return true;
    }
    const ms = performance.now() - t0;
    this.#stats.stepsTotal++;
    this.#stats.decodeMsTotal += ms * decodeCount / batch.count;
    this.#stats.prefillMsTotal += ms * (batch.count - decodeCount) / batch.count;
    const V = this.engine.vocabSize;
    for (let r = 0; r < rows.length; r++) {
      this.#sampled(rows[r], logits.subarray(r * V, (r + 1) * V));
    }
    return true;
  }

  #fail(seq: Sequence, message: string): void {
    this.#byId.delete(seq.id);
    this.#release(seq);
    seq.emit({ type: "error", status: 500, message });
  }

  /** Samples the next token of `seq` from its logits row and reports it. */
  #sampled(seq: Sequence, row: Float32Array): void {
    const now = performance.now();
    if (seq.firstTokenAt === 0) seq.firstTokenAt = now;
    const sampler = seq.sampler!;
    const id = sampler.sample(row);
    if (this.#tokenizer.isEog(id) && !seq.params.ignoreEos) return this.#finish(seq, "stop");
    sampler.accept(id);
    seq.generated++;
    this.#stats.generatedTokensTotal++;
    const topCount = seq.params.topLogprobs ?? -1;
    let logprob = 0;
    let top: TokenLogprob[] | undefined;
    if (topCount >= 0) {
      const lse = logSumExp(row);
      logprob = row[id] - lse;
      top = topIds(row, topCount).map((t) => ({
        token: t,
        text: this.#tokenizer.tokenToPiece(t),
        logprob: row[t] - lse,
      }));
    }
    const stopped = seq.stops!.push(seq.decoder!.push(id));
    const text = seq.text;
    seq.text = "";
    seq.emit({ type: "token", index: 0, token: id, text, logprob, top });
    if (stopped) return this.#finish(seq, "stop");
    const max = seq.params.maxTokens;
    if (max >= 0 && seq.generated >= max) return this.#finish(seq, "length");
    if (seq.slot!.length >= this.engine.contextSize) return this.#finish(seq, "length");
    seq.pending = id;
  }

  #finish(seq: Sequence, finishReason: SequenceFinish): void {
    if (!seq.stops!.stopped) {
      seq.stops!.push(seq.decoder!.flush());
      seq.stops!.flush();
      if (seq.text.length > 0) seq.emit({ type: "text", index: 0, text: seq.text });
      seq.text = "";
    }
    this.#byId.delete(seq.id);
    this.#release(seq);
    const end = performance.now();
    seq.emit({
      type: "done",
      index: 0,
      finishReason,
      promptTokens: seq.params.prompt.length,
      cachedTokens: seq.cached,
      completionTokens: seq.generated,
      timings: {
        queueMs: seq.admittedAt - seq.submittedAt,
        prefillMs: seq.firstTokenAt - seq.admittedAt,
        decodeMs: end - seq.firstTokenAt,
      },
    });
  }

  /** Counters for `/metrics`. */
  stats(): SchedulerStats {
    return {
      slotCount: this.#slots.length,
      slotsBusy: this.#slots.filter((s) => s.sequence !== undefined).length,
      queueDepth: this.#queue.length,
      kvUsedTokens: this.#slots.reduce((n, s) => n + s.length, 0),
      kvTotalTokens: this.#slots.length * this.engine.contextSize,
      ...this.#stats,
    };
  }
}
