/**
 * The server's requests on the generation core: a FIFO queue of requests
 * in front of the {@linkcode Driver} of one multi-slot {@linkcode Context}.
 * A request is admitted when its `n` choices find free slots; the driver
 * places it where the KV cache keeps the longest prefix of its prompt (a
 * multi-turn chat re-sends its history), runs a token of every generating
 * sequence and prompt chunks of new ones (in one batch when the model is
 * batch-invariant, else in turns), and its `n` choices share one prefill. Each choice is a {@linkcode Sequence} —
 * the same per-sequence code as `dotllm run` — so a greedy reply here
 * equals `dotllm run` for the same prompt tokens.
 *
 * This module only turns requests into sequences and their callbacks into
 * events; it keeps no copy of what a slot holds.
 *
 * @example
 * ```ts ignore
 * const scheduler = new Scheduler(context, tokenizer, { stepTokens: 256 });
 * scheduler.submit({ prompt: Int32Array.of(1, 2, 3), maxTokens: 4 }, (event) => console.log(event));
 * while (scheduler.step()) {}
 * ```
 *
 * @module
 */
import {
  Driver,
  type FinishReason,
  type Job,
  LogitBias,
  type LogitProcessor,
  Sequence,
  type SequenceTokenizer,
} from "../generation/mod.ts";
import {
  type CompiledGrammar,
  type CompiledTriggers,
  compileGrammar,
  compileGrammarTriggers,
  constraintProcessor,
  type ConstraintTokenizer,
  type GrammarTrigger,
} from "../grammar/mod.ts";
import type { Context } from "../model/mod.ts";
import type { SpeculationOptions } from "../generation/mod.ts";
import { Sampler, type SamplerParams, SamplerWorkspace } from "../sampler/mod.ts";

/** What the scheduler needs from a tokenizer. */
export interface SchedulerTokenizer extends SequenceTokenizer, ConstraintTokenizer {
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
  /** Random seed of the first choice; choice `i` uses `seed + i`. */
  seed?: number;
  /** Stop strings (not emitted). */
  stop?: readonly string[];
  /** -1 (default): no log-probabilities; 0..20: the sampled token's and this many alternatives. */
  topLogprobs?: number;
  /** Keep generating past end-of-generation tokens (llama.cpp's `ignore_eos`, for benchmarks). */
  ignoreEos?: boolean;
  /** Choices generated from the prompt (default 1), sharing its prefill. */
  n?: number;
  /** `[token id, bias]` added to those logits before sampling; -Infinity bans the token. */
  logitBias?: ReadonlyArray<readonly [number, number]>;
  /** GBNF text every choice's output must match (JSON schemas arrive converted). */
  grammar?: string;
  /** Makes `grammar` lazy: each choice is free until one of these appears in it (tool calls). */
  grammarTriggers?: readonly GrammarTrigger[];
  /** Text the lazy grammar's trigger buffer starts with (the chat's generation prompt). */
  triggerPrefix?: string;
}

/** A token and its log-probability. */
export interface TokenLogprob {
  token: number;
  text: string;
  logprob: number;
}

/** Why a choice ended, in OpenAI's terms (the end of the context is `"length"`). */
export type SequenceFinish = "stop" | "length";

/** Timings of one choice in milliseconds. */
export interface SequenceTimings {
  queueMs: number;
  prefillMs: number;
  decodeMs: number;
  /** Speculation: tokens drafted and verified, and those kept. */
  draftedTokens: number;
  acceptedTokens: number;
}

/**
 * What a request reports, in order: `start`, then for each choice `index`
 * its `token`/`text` events and one `done`; or `error` alone (once: the
 * request is over).
 */
export type SequenceEvent =
  | { type: "start"; promptTokens: number }
  | {
    type: "token";
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
    /**
     * llama.cpp's `stop_type`: an end-of-generation token (`eos`), a stop
     * string (`word`), or a limit (`limit`: `max_tokens`, or the slot's
     * context, then `truncated`).
     */
    stopType: "eos" | "word" | "limit";
    /** The slot's context ended the choice. */
    truncated: boolean;
    /** The slot the choice ran on. */
    slot: number;
  }
  | {
    type: "error";
    status: number;
    message: string;
    param?: string;
    /** The error JSON's `type` when not the status's default (llama.cpp's `exceed_context_size_error`). */
    errorType?: string;
    /** More fields of the error JSON (llama-server's `n_prompt_tokens` and `n_ctx`). */
    extra?: Record<string, number>;
  };

/** Cumulative counters of a scheduler. */
export interface SchedulerStats {
  slotCount: number;
  slotsBusy: number;
  /** The slots a choice runs on, ascending. */
  busySlots: number[];
  queueDepth: number;
  /** Positions holding tokens, over all slots. */
  kvUsedTokens: number;
  kvTotalTokens: number;
  /** Bytes of the KV cache (K and V, every layer and slot). */
  kvBytes: number;
  promptTokensTotal: number;
  /** Prompt tokens served from a slot's cache instead of recomputed. */
  cachedTokensTotal: number;
  generatedTokensTotal: number;
  prefillMsTotal: number;
  decodeMsTotal: number;
  stepsTotal: number;
  /** Speculation: tokens drafted and verified, and those kept, all slots. */
  draftedTokensTotal: number;
  acceptedTokensTotal: number;
}

/** Options of a {@linkcode Scheduler}. */
export interface SchedulerOptions {
  /**
   * Most tokens per step (decodes plus prefill chunks); default 256: at most
   * a fraction of a second of prefill on a small CPU, so running streams
   * keep flowing while a long prompt is read.
   */
  stepTokens?: number;
  /**
   * Decode tokens and prompt chunks share steps (`Driver.mixed`): only for a
   * model `probeBatchInvariance` passed. Default false.
   */
  mixed?: boolean;
  /** Speculative decoding, per slot, in the driver's decode steps (see `openSpeculation`). */
  speculation?: SpeculationOptions;
}

interface Request {
  readonly id: number;
  readonly params: SequenceParams;
  readonly emit: (event: SequenceEvent) => void;
  readonly sequences: Sequence[];
  readonly submittedAt: number;
  jobs: Job[];
  /** Text released by a choice and not yet in an event (the tail at its end). */
  readonly tails: string[];
  readonly firstTokenAt: number[];
  admittedAt: number;
  /** Choices not yet done. */
  open: number;
}

const SEED_MAX = 2 ** 32;

/** Schedules requests onto a context's slots through its driver. */
export class Scheduler {
  readonly context: Context;
  readonly driver: Driver;
  /** Sampling buffers shared by every request (sampling runs on this thread, one call at a time). */
  readonly #samplerWorkspace: SamplerWorkspace;
  readonly #tokenizer: SchedulerTokenizer;
  readonly #queue: Request[] = [];
  readonly #byId = new Map<number, Request>();
  #nextId = 1;
  readonly #stats = { promptTokensTotal: 0, cachedTokensTotal: 0, generatedTokensTotal: 0 };

  constructor(context: Context, tokenizer: SchedulerTokenizer, options: SchedulerOptions = {}) {
    this.context = context;
    this.driver = Driver.of(context, {
      stepTokens: Math.min(context.batchSize, options.stepTokens ?? 256),
      mixed: options.mixed ?? false,
      speculation: options.speculation,
    });
    this.#samplerWorkspace = new SamplerWorkspace(context.model.config.vocabSize);
    this.#tokenizer = tokenizer;
  }

  /** Sequences the context holds at once. */
  get slotCount(): number {
    return this.context.cache.slotCount;
  }

  /** True while a request is queued or running. */
  get busy(): boolean {
    return this.#byId.size > 0;
  }

  /**
   * Queues a request; `emit` receives its events (`start` or `error` at
   * once). Returns its id for {@linkcode cancel}.
   */
  submit(params: SequenceParams, emit: (event: SequenceEvent) => void): number {
    const id = this.#nextId++;
    const fail = (message: string, param?: string) => {
      emit({ type: "error", status: 400, message, param });
      return id;
    };
    const prompt = params.prompt, n = prompt.length;
    const ctx = this.context.contextSize, V = this.context.model.config.vocabSize;
    // A reply needs room for a token: the server refuses a prompt that fills the context.
    if (n >= ctx) {
      emit({
        type: "error",
        status: 400,
        message: `the request exceeds the available context size: the prompt is ${n} tokens; ` +
          `the context holds ${ctx} per slot (raise the server's context size)`,
        param: "prompt",
        errorType: "exceed_context_size_error",
        extra: { n_prompt_tokens: n, n_ctx: ctx },
      });
      return id;
    }
    try {
      this.driver.checkPrompt(prompt);
    } catch (error) {
      return fail((error as Error).message);
    }
    const choices = params.n ?? 1;
    if (!Number.isInteger(choices) || choices < 1 || choices > this.slotCount) {
      return fail(
        `n must be an integer in [1, ${this.slotCount}] (the server's parallel slots), got ${choices}`,
      );
    }
    const request: Request = {
      id,
      params,
      emit,
      sequences: [],
      submittedAt: performance.now(),
      jobs: [],
      tails: new Array(choices).fill(""),
      firstTokenAt: new Array(choices).fill(0),
      admittedAt: 0,
      open: choices,
    };
    try {
      const shared: LogitProcessor[] = [];
      if (params.logitBias !== undefined && params.logitBias.length > 0) {
        shared.push(new LogitBias(params.logitBias, V));
      }
      let grammar: CompiledGrammar | undefined;
      let triggers: CompiledTriggers | undefined;
      try {
        grammar = params.grammar === undefined
          ? undefined
          : compileGrammar(params.grammar, this.#tokenizer);
        triggers = params.grammarTriggers === undefined
          ? undefined
          : compileGrammarTriggers(params.grammarTriggers, this.#tokenizer);
      } catch (error) {
        return fail((error as Error).message, "grammar");
      }
      for (let i = 0; i < choices; i++) {
        // a grammar's state is per choice
        const processors = grammar === undefined
          ? shared
          : [...shared, constraintProcessor(grammar, triggers, params.triggerPrefix)];
        request.sequences.push(this.#sequence(request, i, processors));
      }
    } catch (error) {
      return fail((error as Error).message);
    }
    this.#byId.set(id, request);
    this.#queue.push(request);
    emit({ type: "start", promptTokens: n });
    return id;
  }

  #sequence(request: Request, index: number, processors: LogitProcessor[]): Sequence {
    const p = request.params;
    const sampler = new Sampler(
      this.context.model.config.vocabSize,
      p.sampling ?? {},
      ((p.seed ?? 0) + index) % SEED_MAX,
      this.#samplerWorkspace,
    );
    const top = p.topLogprobs ?? -1;
    return new Sequence(this.#tokenizer, {
      sampler,
      maxTokens: p.maxTokens,
      // as llama-server: prompt and reply together fill the slot's context at most
      capacity: this.context.contextSize - p.prompt.length,
      stop: p.stop,
      ignoreEos: p.ignoreEos,
      logprobs: top >= 0,
      topLogprobs: top,
      processors,
      collectText: false,
      onText: (text) => (request.tails[index] += text),
      onToken: (e) => {
        request.tails[index] = "";
        if (request.firstTokenAt[index] === 0) request.firstTokenAt[index] = performance.now();
        this.#stats.generatedTokensTotal++;
        request.emit({
          type: "token",
          index,
          token: e.token,
          text: e.text,
          logprob: e.logprob,
          top: e.top?.map((t) => ({
            token: t.token,
            text: this.#tokenizer.tokenToPiece(t.token),
            logprob: t.logprob,
          })),
        });
      },
    });
  }

  /** Drops a request: out of the queue, or its slots freed at once. No more events. */
  cancel(id: number): void {
    const request = this.#byId.get(id);
    if (request === undefined) return;
    this.#byId.delete(id);
    const q = this.#queue.indexOf(request);
    if (q >= 0) this.#queue.splice(q, 1);
    for (const job of request.jobs) this.driver.cancel(job);
  }

  /** Cancels every queued and running request. */
  cancelAll(): void {
    for (const id of [...this.#byId.keys()]) this.cancel(id);
  }

  /** Starts queued requests, first come first served, while their choices find free slots. */
  #admit(): void {
    while (this.#queue.length > 0 && this.driver.freeSlots >= this.#queue[0].sequences.length) {
      const request = this.#queue.shift()!;
      request.admittedAt = performance.now();
      request.jobs = this.driver.startChoices(request.sequences, request.params.prompt, {
        onEnd: (job) => this.#ended(request, job),
      });
      this.#stats.promptTokensTotal += request.params.prompt.length;
      this.#stats.cachedTokensTotal += request.jobs[0].reused;
    }
  }

  /**
   * Runs one batch: admits queued requests, then one driver step (a token
   * of every generating sequence and prefill chunks up to the budget).
   * Returns false when there was nothing to do.
   */
  step(): boolean {
    this.#admit();
    return this.driver.step();
  }

  #ended(request: Request, job: Job): void {
    if (!this.#byId.has(request.id)) return; // cancelled: no more events
    if (job.error !== undefined) {
      this.#byId.delete(request.id);
      for (const other of request.jobs) this.driver.cancel(other);
      request.emit({
        type: "error",
        status: 500,
        message: `generation failed: ${job.error.message}`,
      });
      return;
    }
    const index = request.jobs.indexOf(job);
    const sequence = job.sequence;
    const tail = request.tails[index];
    if (tail.length > 0) request.emit({ type: "text", index, text: tail });
    request.tails[index] = "";
    const end = performance.now();
    const first = request.firstTokenAt[index] || end;
    request.emit({
      type: "done",
      index,
      finishReason: finishOf(sequence.finishReason!),
      promptTokens: request.params.prompt.length,
      cachedTokens: request.jobs[0].reused,
      completionTokens: sequence.tokenCount,
      stopType: sequence.finishReason !== "stop"
        ? "limit"
        : sequence.stoppedByString
        ? "word"
        : "eos",
      truncated: sequence.finishReason === "context",
      slot: job.slot,
      timings: {
        queueMs: request.admittedAt - request.submittedAt,
        prefillMs: first - request.admittedAt,
        decodeMs: end - first,
        draftedTokens: job.timings.draftedTokens,
        acceptedTokens: job.timings.acceptedTokens,
      },
    });
    if (--request.open === 0) this.#byId.delete(request.id);
  }

  /** Counters for `/metrics`. */
  stats(): SchedulerStats {
    const cache = this.context.cache;
    let used = 0;
    for (let s = 0; s < cache.slotCount; s++) used += cache.length(s);
    const d = this.driver.stats();
    const busySlots: number[] = [];
    for (const r of this.#byId.values()) {
      for (const job of r.jobs) if (!job.done) busySlots.push(job.slot);
    }
    busySlots.sort((a, b) => a - b);
    return {
      busySlots,
      slotCount: cache.slotCount,
      slotsBusy: cache.slotCount - this.driver.freeSlots,
      queueDepth: this.#queue.length,
      kvUsedTokens: used,
      kvTotalTokens: cache.slotCount * this.context.contextSize,
      kvBytes: cache.byteLength,
      ...this.#stats,
      prefillMsTotal: d.prefillMs,
      decodeMsTotal: d.decodeMs,
      stepsTotal: d.steps,
      draftedTokensTotal: d.draftedTokens,
      acceptedTokensTotal: d.acceptedTokens,
    };
  }
}

function finishOf(reason: FinishReason): SequenceFinish {
  return reason === "stop" ? "stop" : "length";
}
