/**
 * The step driver: runs any number of {@linkcode Sequence}s over the slots
 * of one {@linkcode Context}. Each {@linkcode Driver.step} is one batch: one
 * token of every generating sequence plus prefill chunks of the others up to
 * a token budget, then every logits row goes to its sequence's `step`. One
 * sequence alone (`generate()`, `Llm`, `ChatSession`) is the special case of
 * what the server does with many.
 *
 * What a slot holds is the {@linkcode KvCache}'s to say: a new sequence
 * keeps what `KvCache.reusable` allows of its slot (the common prefix the
 * cache can really keep, sliding-window rings included) and runs the rest,
 * so reuse never fails and never changes a token. Without a fixed slot, a
 * sequence goes to the free slot that keeps the most of its prompt (ties:
 * the least recently used). `n` choices of one prompt share one prefill: the
 * first runs it, the others copy its slot and sample its last row.
 *
 * With `speculation` (see `speculative.ts`), a decode step also runs the
 * tokens a drafter proposes after each generating sequence's next token, as
 * many as the verify budget allows, and the sequence samples its rows in
 * order while its sample equals the draft; the slot is truncated back to
 * the tokens kept.
 *
 * @example Two sequences in one batch
 * ```ts
 * import { Context, Model } from "../model/mod.ts";
 * import { Sampler } from "../sampler/mod.ts";
 * import { Tokenizer } from "../tokenizer/mod.ts";
 * import { Driver } from "./driver.ts";
 * import { Sequence } from "./sequence.ts";
 * const model = Model.load("../shared/testdata/models/stories260K.gguf");
 * const context = new Context(model, { slots: 2, contextSize: 128, threads: 1 });
 * const tokenizer = Tokenizer.fromGguf(model.gguf);
 * const driver = Driver.of(context);
 * const jobs = ["Once upon a time", "The cat"].map((text) => {
 *   const sampler = new Sampler(model.config.vocabSize, { temperature: 0 }, 1);
 *   const prompt = tokenizer.encode(text, { addSpecial: true, parseSpecial: true });
 *   return driver.start(new Sequence(tokenizer, { sampler, maxTokens: 8 }), Int32Array.from(prompt));
 * });
 * while (driver.step()) {}
 * if (!jobs.every((job) => job.done && job.sequence.tokenCount === 8)) throw new Error("jobs");
 * context.close();
 * model.close();
 * ```
 *
 * @module
 */
import { Batch } from "../model/batch.ts";
import type { Context } from "../model/context.ts";
import type { Sequence } from "./sequence.ts";
import type { SpeculationOptions } from "./speculative.ts";

/** Timings of one sequence in milliseconds (a batch's time shared by its tokens). */
export interface GenerationTimings {
  prefillMs: number;
  /** Prompt tokens run (the ones past the prefix the slot already held). */
  prefillTokens: number;
  /** Prompt tokens whose K/V the slot already held, or copied from another choice's slot. */
  reusedTokens: number;
  /** Forward passes of generated tokens. */
  decodeMs: number;
  decodeTokens: number;
  samplingMs: number;
  sampledTokens: number;
  /** Speculation: tokens drafted and verified, drafted tokens the target kept, time drafting. */
  draftedTokens: number;
  acceptedTokens: number;
  draftMs: number;
}

/** Options of {@linkcode Driver.start}. */
export interface StartOptions {
  /** Run on this slot (it must be free); default: the free slot that keeps the most of the prompt. */
  slot?: number;
  /** Called once when the job ends: finished, cancelled or failed. */
  onEnd?: (job: Job) => void;
}

/** Options of {@linkcode Driver.of}. */
export interface DriverOptions {
  /** Most tokens per step; default the context's batch size. */
  stepTokens?: number;
  /** Let decode tokens and prompt chunks of any size share a step (see {@linkcode Driver.mixed}). */
  mixed?: boolean;
  /** Speculative decoding: every generating sequence's drafts are verified in its decode step. */
  speculation?: SpeculationOptions;
}

/** Cumulative counters of a driver. */
export interface DriverStats {
  /** Batches run. */
  steps: number;
  prefillMs: number;
  decodeMs: number;
  /** Speculation: tokens drafted and verified, and those the target kept. */
  draftedTokens: number;
  acceptedTokens: number;
}

/** One sequence on one slot of the driver's context. */
export class Job {
  readonly sequence: Sequence;
  readonly prompt: Int32Array;
  readonly slot: number;
  /** Prompt tokens the slot already held, or copied from the first choice's slot. */
  readonly reused: number;
  readonly timings: GenerationTimings;
  /** Set when a batch holding this job's tokens failed, or its sampling did; the job has ended. */
  error: Error | undefined;
  /** Next prompt index to run; `prompt.length` once the prompt is in. */
  next: number;
  /** The sampled token to run next, or -1. */
  pending = -1;
  /** Speculation: the tokens drafted after `pending` in the current step (`drafted` of them). */
  drafts: Int32Array | undefined;
  drafted = 0;
  /** Choices of the same prompt waiting for this job's last prompt row. */
  readonly followers: Job[] = [];
  /** The job whose prompt this one copies, until it does. */
  leader: Job | undefined;
  readonly onEnd?: (job: Job) => void;
  #done = false;

  constructor(
    sequence: Sequence,
    prompt: Int32Array,
    slot: number,
    reused: number,
    onEnd?: (job: Job) => void,
  ) {
    this.sequence = sequence;
    this.prompt = prompt;
    this.slot = slot;
    this.reused = reused;
    this.next = reused;
    this.onEnd = onEnd;
    this.timings = {
      prefillMs: 0,
      prefillTokens: 0,
      reusedTokens: reused,
      decodeMs: 0,
      decodeTokens: 0,
      samplingMs: 0,
      sampledTokens: 0,
      draftedTokens: 0,
      acceptedTokens: 0,
      draftMs: 0,
    };
  }

  /** True once the job ended (see {@linkcode Sequence.finishReason} and {@linkcode error}). */
  get done(): boolean {
    return this.#done;
  }

  /** True while prompt tokens remain to be run. */
  get prefilling(): boolean {
    return this.next < this.prompt.length;
  }

  /** @internal the driver marks the end. */
  markDone(): void {
    this.#done = true;
  }
}

/**
 * Below this many tokens the native matmuls sum in llama.cpp's vec_dot
 * order, from it on in its tiled order (`tiled_min_tokens` of
 * `ffi/quant_k.zig`, llama.cpp's `ggml_tiled_min_batch`).
 */
export const BATCH_INVARIANT_TOKENS = 8;

/** Most prompt steps in a row while sequences wait to decode (see `Driver.step`). */
const PROMPT_STEPS_IN_A_ROW = 4;

/** What one step runs (see {@linkcode Driver.step}). */
const enum StepKind {
  decode = 0,
  long = 1,
  short = 2,
  /** Decodes and prompt chunks together (a driver with `mixed` batches). */
  mixed = 3,
}

/** The driver of each context (one per context: it owns which slots are busy). */
const drivers = new WeakMap<Context, Driver>();

/** Runs sequences over the slots of one context, a batch per {@linkcode step}. */
export class Driver {
  readonly context: Context;
  /** Most tokens per step: decodes first, then prefill chunks. */
  readonly stepTokens: number;
  /**
   * Decode tokens and prompt chunks of any size share a step (llama-server's
   * batches): only for a model whose products do not depend on the batch
   * (`probeBatchInvariance`), else a sequence's tokens would depend on its
   * neighbours. Default false: the steps described at {@linkcode step}.
   */
  readonly mixed: boolean;
  readonly #batch: Batch;
  /** Jobs in admission order (prefill goes first come, first served). */
  readonly #active: Job[] = [];
  /** The job on each slot, or undefined. */
  readonly #owners: (Job | undefined)[];
  /** Per slot: when it was last released (for least-recently-used ties). */
  readonly #lastUsed: Float64Array;
  /** The jobs of the current step: its decodes, then its prefill chunks. */
  readonly #rows: Job[] = [];
  /** Tokens of each prefill chunk in {@linkcode #rows} (past the decodes). */
  readonly #chunks: number[] = [];
  #clock = 0;
  /** The kind of step that goes first next time. */
  #turn: StepKind = StepKind.decode;
  /** Prompt steps since the last decode step. */
  #promptSteps = 0;
  readonly #stats: DriverStats = {
    steps: 0,
    prefillMs: 0,
    decodeMs: 0,
    draftedTokens: 0,
    acceptedTokens: 0,
  };
  /** Speculation, with `draftMax` and `verifyTokens` resolved. */
  readonly speculation:
    | (SpeculationOptions & { readonly draftMax: number; readonly draftMin: number })
    | undefined;

  /**
   * The driver of `context`, made on first use. `stepTokens` (default the
   * context's batch size) applies when it is made; asking for another
   * budget later throws.
   */
  static of(context: Context, options: DriverOptions = {}): Driver {
    let driver = drivers.get(context);
    if (driver === undefined) drivers.set(context, driver = new Driver(context, options));
    else if (options.stepTokens !== undefined && options.stepTokens !== driver.stepTokens) {
      throw new RangeError(
        `this context's driver steps ${driver.stepTokens} tokens, not ${options.stepTokens}`,
      );
    } else if (options.mixed !== undefined && options.mixed !== driver.mixed) {
      throw new RangeError(`this context's driver has mixed batches ${driver.mixed}`);
    } else if (options.speculation !== undefined && options.speculation !== driver.#options) {
      throw new RangeError("this context's driver was made with other speculation options");
    }
    return driver;
  }

  readonly #options: SpeculationOptions | undefined;

  private constructor(context: Context, options: DriverOptions) {
    this.context = context;
    this.mixed = options.mixed ?? false;
    const spec = options.speculation;
    this.#options = spec;
    if (spec !== undefined) {
      const draftMax = spec.draftMax ?? 16, draftMin = spec.draftMin ?? 0;
      if (!Number.isInteger(draftMax) || draftMax < 0) {
        throw new RangeError(`draftMax must be an integer >= 0, got ${draftMax}`);
      }
      if (!Number.isInteger(draftMin) || draftMin < 0) {
        throw new RangeError(`draftMin must be an integer >= 0, got ${draftMin}`);
      }
      if (!Number.isInteger(spec.verifyTokens) || spec.verifyTokens < 1) {
        throw new RangeError(`verifyTokens must be an integer >= 1, got ${spec.verifyTokens}`);
      }
      this.speculation = { ...spec, draftMax, draftMin };
    }
    const slots = context.cache.slotCount;
    const budget = options.stepTokens ?? context.batchSize;
    if (!Number.isInteger(budget) || budget < slots || budget > context.batchSize) {
      throw new RangeError(
        `stepTokens must be an integer in [${slots}, ${context.batchSize}] (slots, batch size), got ${budget}`,
      );
    }
    this.stepTokens = budget;
    this.#batch = new Batch(budget);
    this.#owners = new Array(slots).fill(undefined);
    this.#lastUsed = new Float64Array(slots);
  }

  /** Slots no job runs on. */
  get freeSlots(): number {
    let n = 0;
    for (const o of this.#owners) if (o === undefined) n++;
    return n;
  }

  /** True while a job runs. */
  get busy(): boolean {
    return this.#active.length > 0;
  }

  /** Cumulative counters. */
  stats(): DriverStats {
    return { ...this.#stats };
  }

  /**
   * Starts `sequence` after `prompt` (token ids, non-empty, at most the
   * context): picks its slot (or takes `options.slot`), keeps what the
   * cache allows of the slot's prefix, and feeds the prompt to the sampler.
   * Throws `RangeError` for a bad prompt or slot, `Error` when no slot is free.
   */
  start(sequence: Sequence, prompt: Int32Array, options: StartOptions = {}): Job {
    return this.startChoices([sequence], prompt, options)[0];
  }

  /**
   * Starts `sequences` as choices of one `prompt`: the first runs the
   * prompt; each other takes its own slot, copies the first's K/V once the
   * prompt is in, and samples the same last row with its own sampler.
   * `options.slot`, if given, is the first's slot.
   */
  startChoices(
    sequences: readonly Sequence[],
    prompt: Int32Array,
    options: StartOptions = {},
  ): Job[] {
    this.checkPrompt(prompt);
    if (sequences.length === 0) throw new RangeError("startChoices needs at least one sequence");
    if (sequences.length > this.freeSlots) {
      throw new Error(`${sequences.length} sequences need free slots; ${this.freeSlots} are free`);
    }
    const cache = this.context.cache;
    // A prompt of BATCH_INVARIANT_TOKENS or more runs at least that many, from a multiple of it.
    const runAtLeast = this.mixed ? 1 : Math.min(BATCH_INVARIANT_TOKENS, prompt.length);
    const align = this.mixed ? 1 : BATCH_INVARIANT_TOKENS;
    let first: number;
    if (options.slot !== undefined) {
      const slot = options.slot;
      if (!Number.isInteger(slot) || slot < 0 || slot >= this.#owners.length) {
        throw new RangeError(`slot ${slot} is outside [0, ${this.#owners.length})`);
      }
      if (this.#owners[slot] !== undefined) throw new Error(`slot ${slot} is busy`);
      first = slot;
    } else {
      first = -1;
      let best = -1;
      for (let s = 0; s < this.#owners.length; s++) {
        if (this.#owners[s] !== undefined) continue;
        const keep = cache.reusable(s, prompt, runAtLeast, align);
        if (keep > best || (keep === best && this.#lastUsed[s] < this.#lastUsed[first])) {
          first = s;
          best = keep;
        }
      }
    }
    const reused = cache.reuse(first, prompt, runAtLeast, align);
    const leader = new Job(sequences[0], prompt, first, reused, options.onEnd);
    this.#admit(leader);
    const jobs = [leader];
    for (let i = 1; i < sequences.length; i++) {
      let slot = -1;
      for (let s = 0; s < this.#owners.length; s++) {
        if (this.#owners[s] !== undefined) continue;
        if (slot < 0 || this.#lastUsed[s] < this.#lastUsed[slot]) slot = s;
      }
      cache.truncate(slot, 0); // it will hold a copy of the leader's slot
      const job = new Job(sequences[i], prompt, slot, prompt.length, options.onEnd);
      job.leader = leader;
      job.next = prompt.length;
      leader.followers.push(job);
      this.#admit(job);
      jobs.push(job);
    }
    return jobs;
  }

  /**
   * Throws `RangeError` for a prompt the driver cannot start: empty, longer
   * than the context, or holding an id outside the vocabulary.
   */
  checkPrompt(prompt: ArrayLike<number>): void {
    const n = prompt.length;
    if (n === 0) throw new RangeError("the prompt is empty");
    if (n > this.context.contextSize) {
      throw new RangeError(
        `the prompt is ${n} tokens, longer than the context of ${this.context.contextSize}`,
      );
    }
    const V = this.context.model.config.vocabSize;
    for (let i = 0; i < n; i++) {
      const t = prompt[i];
      if (!(t >= 0 && t < V)) {
        throw new RangeError(`token id ${t} is outside the vocabulary [0, ${V})`);
      }
    }
  }

  #admit(job: Job): void {
    this.#owners[job.slot] = job;
    this.#active.push(job);
    job.sequence.begin(job.prompt);
  }

  /** Ends `job` now: its sequence finishes as `"interrupted"`; so do choices waiting for it. */
  cancel(job: Job): void {
    if (job.done) return;
    job.sequence.end("interrupted");
    this.#end(job);
  }

  #end(job: Job): void {
    if (job.done) return;
    job.markDone();
    const a = this.#active.indexOf(job);
    if (a >= 0) this.#active.splice(a, 1);
    if (this.#owners[job.slot] === job) {
      this.#owners[job.slot] = undefined;
      this.#lastUsed[job.slot] = ++this.#clock;
    }
    for (const f of job.followers) {
      if (f.leader === job) { // its prompt never arrived
        f.error ??= job.error;
        f.sequence.end("interrupted");
        this.#end(f);
      }
    }
    job.onEnd?.(job);
  }

  /** The next kind of step with work, in turn after the last one (undefined: none). */
  #nextKind(): StepKind | undefined {
    const min = Math.min(BATCH_INVARIANT_TOKENS, this.#batch.capacity);
    let pending = 0;
    let finishing: StepKind | undefined; // a prompt whose rest fits one step
    for (const job of this.#active) {
      if (job.pending >= 0) pending |= 1 << StepKind.decode;
      else if (job.prefilling && job.leader === undefined) {
        const left = job.prompt.length - job.next;
        const kind = left < min ? StepKind.short : StepKind.long;
        pending |= 1 << kind;
        if (left <= this.#batch.capacity) finishing ??= kind;
      }
    }
    if (pending === 0) return undefined;
    // Prompts that end in one step go first, a few in a row: their sequences start
    // generating sooner, and decoders wait at most PROMPT_STEPS_IN_A_ROW steps.
    if (finishing !== undefined && this.#promptSteps < PROMPT_STEPS_IN_A_ROW) {
      this.#promptSteps++;
      return finishing;
    }
    for (let i = 0; i < 3; i++) {
      const kind = (this.#turn + i) % 3 as StepKind;
      if (pending & (1 << kind)) {
        this.#turn = (kind + 1) % 3;
        this.#promptSteps = kind === StepKind.decode ? 0 : this.#promptSteps + 1;
        return kind;
      }
    }
    return undefined;
  }

  /**
   * Runs one batch of one kind, the kinds taking turns while each has work:
   * a token of every generating job; or prompt chunks of at least
   * {@linkcode BATCH_INVARIANT_TOKENS} tokens, up to the budget; or prompts
   * shorter than that. Samples every logits row. Returns false when no job
   * had anything to run. A failed batch ends the jobs in it, with `error`
   * set, and empties their slots.
   *
   * Why kinds: the native matmuls sum a batch of fewer than
   * `BATCH_INVARIANT_TOKENS` tokens in one order (llama.cpp's vec_dot), a
   * larger one in tiles of that many tokens (its tiled and repacked GEMM
   * orders), and the batch's last tokens short of a whole tile in another.
   * So decode tokens and short prompts always run in small batches; longer
   * prompts run in chunks that start and end on multiples of
   * `BATCH_INVARIANT_TOKENS` (absolute positions, so also alone), a
   * prompt's ragged end last in its batch, and never a tail shorter than
   * that. A sequence then gets the same tokens alone or beside others, from
   * any cached prefix, while at most 3 sequences generate at once (a decode
   * batch of 4 or more takes llama.cpp's repacked GEMM on some types, of 8
   * or more its tiled order). A driver with {@linkcode mixed} batches (a
   * model `probeBatchInvariance` passed) puts everything in one batch.
   */
  step(): boolean {
    const batch = this.#batch, rows = this.#rows, chunks = this.#chunks;
    const cache = this.context.cache;
    batch.clear();
    rows.length = 0;
    chunks.length = 0;
    const kind = this.mixed ? StepKind.mixed : this.#nextKind();
    if (kind === undefined) return false;
    if (kind === StepKind.decode || kind === StepKind.mixed) {
      let draftRoom = this.#draftRoom(kind);
      for (const job of this.#active) {
        if (job.pending < 0) continue;
        const n = cache.length(job.slot);
        batch.add(job.pending, n, job.slot, true);
        job.drafted = draftRoom > 0 ? this.#draft(job, n, draftRoom) : 0;
        for (let i = 0; i < job.drafted; i++) batch.add(job.drafts![i], n + 1 + i, job.slot, true);
        draftRoom -= job.drafted;
        rows.push(job);
      }
    }
    const decodeCount = batch.count;
    const inBatch = rows.length;
    if (kind !== StepKind.decode) {
      const min = Math.min(BATCH_INVARIANT_TOKENS, batch.capacity);
      for (const job of this.#active) {
        if (!job.prefilling || job.leader !== undefined) continue;
        const left = job.prompt.length - job.next;
        if (kind !== StepKind.mixed && (left < min) !== (kind === StepKind.short)) continue;
        const room = batch.capacity - batch.count;
        if (room <= 0) break;
        let take = Math.min(room, left);
        if (kind === StepKind.long) {
          // Chunks end on multiples of `min` (they start on one) and never leave a shorter tail.
          if (take < left) take -= take % min;
          if (left - take > 0 && left - take < min) take -= min;
          if (take < min) {
            if (batch.count > 0) break;
            take = Math.min(room, left); // a budget under 2 × min: the order cannot be kept
          }
        } else if (kind === StepKind.short && batch.count > 0 && batch.count + take >= min) {
          break;
        }
        const prompt = job.prompt, last = prompt.length - 1, end = job.next + take;
        for (let i = job.next; i < end; i++) batch.add(prompt[i], i, job.slot, i === last);
        job.timings.prefillTokens += take;
        chunks.push(take);
        job.next = end;
        rows.push(job); // its logits row comes once its last prompt token is in
        // A prompt's end that is not a whole tile goes last: the tiles before it stay aligned.
        if (kind === StepKind.long && take % min !== 0) break;
      }
    }
    if (batch.count === 0) return false;
    const t0 = performance.now();
    try {
      // Drafts (more decode tokens than jobs; no prompt chunk then) attend as if decoded alone.
      this.context.decode(batch, decodeCount > inBatch);
    } catch (error) {
      const failure = error instanceof Error ? error : new Error(String(error));
      for (const job of rows) {
        cache.truncate(job.slot, 0); // what the failed batch wrote is unknown
        job.error = failure;
        job.sequence.end("interrupted");
        this.#end(job);
      }
      return true;
    }
    const ms = performance.now() - t0;
    const perToken = ms / batch.count;
    this.#stats.steps++;
    this.#stats.decodeMs += perToken * decodeCount;
    this.#stats.prefillMs += perToken * (batch.count - decodeCount);
    let row = 0;
    for (let r = 0; r < rows.length; r++) {
      const job = rows[r];
      if (r < inBatch) {
        job.timings.decodeMs += perToken * (1 + job.drafted);
        row = this.#verify(job, row);
        continue;
      }
      job.timings.prefillMs += perToken * chunks[r - inBatch];
      if (job.prefilling) continue; // no row yet
      const logits = this.context.logits(row++);
      for (const f of job.followers) {
        if (f.leader !== job) continue;
        cache.copy(job.slot, f.slot);
        f.leader = undefined;
        this.#sample(f, logits);
      }
      this.#sample(job, logits);
    }
    return true;
  }

  /**
   * Tokens the drafts of this step may take in all: none without
   * speculation, or in a mixed step that also runs prompt chunks (its
   * batch's size is not one the probe checked); else the verify budget
   * less one token per generating job.
   */
  #draftRoom(kind: StepKind): number {
    const spec = this.speculation;
    if (spec === undefined || spec.draftMax === 0) return 0;
    let decoding = 0;
    for (const job of this.#active) {
      if (job.pending >= 0) decoding++;
      else if (kind === StepKind.mixed && job.prefilling && job.leader === undefined) return 0;
    }
    const most = Math.min(spec.verifyTokens, this.#batch.capacity, this.context.maxLogits);
    return most - decoding;
  }

  /** Drafts up to `room` tokens after `job.pending` (at position `n`) into `job.drafts`; returns how many. */
  #draft(job: Job, n: number, room: number): number {
    const spec = this.speculation!;
    const sequence = job.sequence;
    let max = Math.min(spec.draftMax, room, this.context.contextSize - n - 1);
    // The last row's sample is never a draft's check: r more tokens need at most r - 1 drafts.
    if (sequence.maxTokens >= 0) max = Math.min(max, sequence.maxTokens - sequence.tokenCount - 1);
    if (max < Math.max(1, spec.draftMin)) return 0;
    const drafts = job.drafts ??= new Int32Array(spec.draftMax);
    const t0 = performance.now();
    let count: number;
    try {
      count = spec.drafter.draft(
        job.slot,
        this.context.cache.history(job.slot),
        job.pending,
        max,
        drafts,
      );
    } catch {
      count = 0; // a drafter's failure costs the speedup, never the sequence
    }
    job.timings.draftMs += performance.now() - t0;
    return count < spec.draftMin ? 0 : Math.min(count, max);
  }

  /**
   * Samples `job`'s rows from logits row `row` on: its next token's, then
   * each drafted token's while the sequence's own sample equals the draft
   * (llama.cpp's rule: the sequence sees the rows and tokens of a run
   * without speculation). The slot keeps the tokens whose rows were
   * sampled. Returns the first row past the job's.
   */
  #verify(job: Job, row: number): number {
    const k = job.drafted, drafts = job.drafts;
    job.drafted = 0;
    const start = this.context.cache.length(job.slot) - 1 - k; // position of the token run
    if (k > 0) {
      job.timings.draftedTokens += k;
      this.#stats.draftedTokens += k;
    }
    // Counted before each row is sampled: a job that ends there reports them in `onEnd`.
    for (let i = 0;; i++) {
      job.timings.decodeTokens++;
      this.#sample(job, this.context.logits(row + i), start + i + 1);
      if (job.done || i === k) break;
      if (job.pending !== drafts![i]) {
        this.context.cache.truncate(job.slot, start + i + 1); // at most k <= batch - 1 back
        break;
      }
      job.timings.acceptedTokens++;
      this.#stats.acceptedTokens++;
    }
    return row + 1 + k;
  }

  /**
   * Samples `job`'s next token from `logits`; `length` is what its slot
   * keeps if this is its last row (a verify step's row: the slot is
   * truncated to it before the job ends, so its slot holds the prompt and
   * every generated token but the last).
   */
  #sample(job: Job, logits: Float32Array, length = this.context.cache.length(job.slot)): void {
    const t0 = performance.now();
    let id: number;
    try {
      id = job.sequence.step(logits);
    } catch (error) {
      // A logit processor failed (a grammar no token can continue): this job ends, the others go on.
      job.error = error instanceof Error ? error : new Error(String(error));
      job.sequence.end("interrupted");
      job.pending = -1;
      if (length < this.context.cache.length(job.slot)) {
        this.context.cache.truncate(job.slot, length);
      }
      this.#end(job);
      return;
    }
    job.timings.samplingMs += performance.now() - t0;
    if (id >= 0) job.timings.sampledTokens++;
    if (!job.sequence.finished && length >= this.context.contextSize) {
      job.sequence.end("context");
    }
    if (job.sequence.finished) {
      job.pending = -1;
      if (length < this.context.cache.length(job.slot)) {
        this.context.cache.truncate(job.slot, length);
      }
      this.#end(job);
    } else {
      job.pending = id;
    }
  }
}
