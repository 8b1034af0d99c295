/**
 * The model side of the server, as the HTTP handler sees it: generation as
 * events with a cancel function, tokenize/detokenize/apply-template, and
 * scheduler counters. {@linkcode LocalBackend} runs a {@linkcode Scheduler}
 * on the current thread (inside the model Worker, or in tests); `WorkerBackend`
 * forwards to one running in a Worker.
 *
 * @module
 */
import { readFileSync, writeFileSync } from "node:fs";
import type { SamplerParams } from "../sampler/mod.ts";
import type { GrammarTrigger } from "../grammar/mod.ts";
import { decodeSlotFile, encodeSlotFile } from "./native/slot_file.ts";
import type { FimTokens } from "./native/infill.ts";
import type { ChatMessage, ChatRenderer } from "./chat_prompt.ts";
import { Context } from "../model/mod.ts";
import type { EmbedInput, EmbedOutput } from "./embeddings.ts";
import { embeddingContextOptions, embedSequences, resolvePooling } from "../embedding/mod.ts";
import {
  Scheduler,
  type SchedulerOptions,
  type SchedulerStats,
  type SchedulerTokenizer,
  type SequenceEvent,
} from "./scheduler.ts";

/** What `/v1/models` and `/metrics` report about the loaded model. */
export interface ModelInfo {
  /** The model's id: its file name. */
  id: string;
  /** Seconds since the epoch when it was loaded. */
  created: number;
  contextSize: number;
  slotCount: number;
  vocabSize: number;
  kvCacheBytes: number;
  /** What chat rendering needs: the model's template (undefined: ChatML) and special-token texts. */
  chat: ChatTemplateInfo;
  /** What `/infill` builds its prompt with: the FIM ids, BOS (-1: none added), the batch size. */
  infill?: { fim: FimTokens; bos: number; batchSize: number };
}

/** The chat template of a model, as data (the HTTP thread renders it). */
export interface ChatTemplateInfo {
  source?: string;
  bosToken: string;
  eosToken: string;
  addBos: boolean;
  addEos: boolean;
}

/** A prompt: text, token ids, or a conversation to render with the chat template. */
export type PromptInput =
  | { text: string }
  | { tokens: number[] }
  | { messages: ChatMessage[]; enableThinking?: boolean };

/** A generation request as the backend takes it (already validated). */
export interface GenerateInput {
  prompt: PromptInput;
  maxTokens: number;
  sampling: Partial<SamplerParams>;
  seed: number;
  stop: string[];
  topLogprobs: number;
  /** llama.cpp's `ignore_eos`. */
  ignoreEos?: boolean;
  /**
   * Choices to generate from the one prompt (OpenAI's `n`, >= 1): events
   * `token`, `text` and `done` carry their choice's `index` in [0, n); the
   * request is complete after n `done` events.
   */
  n: number;
  /** `[token id, bias]`: the bias is added to that token's logit (-Infinity bans it). */
  logitBias: Array<[number, number]>;
  /** GBNF text the output must match (`grammar`, `json_schema` and `response_format` arrive as one). */
  grammar?: string;
  /** Makes `grammar` lazy: free text until one of these appears (tool calls). */
  grammarTriggers?: GrammarTrigger[];
  /** Text the lazy grammar's trigger buffer starts with (the chat's generation prompt). */
  triggerPrefix?: string;
}

/** What `/slots/ID?action=` does. */
export type SlotAction = "save" | "restore" | "erase";

/** What a slot action did: tokens saved, restored or erased, file bytes, time. */
export interface SlotActionResult {
  tokens: number;
  bytes: number;
  ms: number;
}

/** The tokenizer calls the backend needs beyond the scheduler's. */
export interface BackendTokenizer extends SchedulerTokenizer {
  encode(text: string, options: { addSpecial: boolean; parseSpecial: boolean }): number[];
  pieceBytes(id: number, special?: boolean): Uint8Array;
  decode(ids: ArrayLike<number>): string;
  readonly vocabSize: number;
}

/** The model side of the server. */
export interface Backend {
  readonly info: ModelInfo;
  /** Starts a generation; returns a function that cancels it (no more events after). */
  generate(input: GenerateInput, onEvent: (event: SequenceEvent) => void): () => void;
  tokenize(text: string, addSpecial: boolean, parseSpecial: boolean): Promise<number[]>;
  /** Token ids to text; throws `RangeError` for an id outside the vocabulary. */
  detokenize(tokens: number[]): Promise<string>;
  /**
   * Each token's bytes as llama.cpp's `common_token_to_piece` gives them
   * (special tokens as their text, a byte token as its byte, a leading space
   * kept); throws `RangeError` for an id outside the vocabulary.
   */
  pieces(tokens: number[]): Promise<number[][]>;
  /**
   * `/slots/ID?action=save|restore|erase` on an idle slot: a slot file at
   * `path` (save, restore), checked whole before anything is loaded; the
   * slot emptied (erase). Rejects with one line.
   */
  slotAction(action: SlotAction, slot: number, path?: string): Promise<SlotActionResult>;
  stats(): Promise<SchedulerStats>;
  /** Embeds the inputs together (between scheduler steps); input errors resolve as `{ error }`. */
  embed(input: EmbedInput): Promise<EmbedOutput>;
  close(): Promise<void>;
}

/**
 * Yields to the event loop between scheduler steps. A turn is normally a
 * message through a port: a chain of `setTimeout(0)` is clamped to 4 ms per
 * turn (HTML timer nesting; 2-7 ms measured under Deno), longer than a small
 * model's decode step. But a port turn lets only that port's message in:
 * while it runs, Deno delivers neither a Worker's incoming messages nor new
 * HTTP connections (measured: a message posted to a stepping Worker arrived
 * 1.2-2.3 s later, after its generation ended, so a request sent while
 * another generated waited for it instead of joining its batch). So a turn is
 * a full `setTimeout` turn when something waits:
 * - with an `inbox` (the model Worker): a shared counter of messages posted to
 *   this thread and not yet received; full turns until it is 0 (at most
 *   {@linkcode inbox_turns_max}: a counter gone wrong costs time, not a hang);
 * - without one (the model on the HTTP thread): at least one full turn every
 *   {@linkcode full_turn_interval_ms}, so connections are accepted.
 */
class Turns {
  readonly #channel = new MessageChannel();
  readonly #inbox?: Int32Array;
  #resolve?: () => void;
  #lastFullTurn = performance.now();

  constructor(inbox?: Int32Array) {
    this.#inbox = inbox;
    this.#channel.port1.onmessage = () => this.#resolve?.();
  }

  async next(): Promise<void> {
    const inbox = this.#inbox;
    if (inbox !== undefined) {
      for (let i = 0; i < inbox_turns_max && Atomics.load(inbox, 0) > 0; i++) await nextTurn();
    } else if (performance.now() - this.#lastFullTurn >= full_turn_interval_ms) {
      await nextTurn();
      this.#lastFullTurn = performance.now();
      return;
    }
    return new Promise((resolve) => {
      this.#resolve = resolve;
      this.#channel.port2.postMessage(0);
    });
  }

  close(): void {
    this.#channel.port1.close();
    this.#channel.port2.close();
  }
}

/** Most full turns one step waits for its inbox to empty: about 20-70 ms. */
const inbox_turns_max = 10;

/** Longest run of port turns without a full turn, on the HTTP thread (its accept latency). */
const full_turn_interval_ms = 20;

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/** A backend that runs its scheduler on this thread, stepping whenever work is pending. */
export class LocalBackend implements Backend {
  readonly info: ModelInfo;
  readonly scheduler: Scheduler;
  /** The draft model speculation runs on, freed with the context (see `openSpeculation`). */
  readonly #speculation: { close(): void } | undefined;
  readonly #context: Context;
  readonly #tokenizer: BackendTokenizer;
  readonly #render: ChatRenderer;
  readonly #inbox?: Int32Array;
  #running = false;
  #closed = false;

  constructor(
    info: ModelInfo,
    context: Context,
    tokenizer: BackendTokenizer,
    render: ChatRenderer,
    options: SchedulerOptions = {},
    inbox?: Int32Array,
    speculation?: { close(): void },
  ) {
    this.#speculation = speculation;
    this.info = info;
    this.#inbox = inbox;
    this.#context = context;
    this.#tokenizer = tokenizer;
    this.#render = render;
    this.scheduler = new Scheduler(context, tokenizer, options);
  }

  /** The prompt's token ids (BOS as the model asks, control tokens parsed: llama.cpp's defaults). */
  promptTokens(prompt: PromptInput): Int32Array {
    if ("tokens" in prompt) return Int32Array.from(prompt.tokens);
    const text = "text" in prompt
      ? prompt.text
      : this.#render(prompt.messages, true, prompt.enableThinking);
    const ids = this.#tokenizer.encode(text, { addSpecial: true, parseSpecial: true });
    return Int32Array.from(ids);
  }

  generate(input: GenerateInput, onEvent: (event: SequenceEvent) => void): () => void {
    let prompt: Int32Array;
    try {
      if (this.#closed) throw new Error("the server is shutting down");
      if (this.#context.model.weights.outputNorm === undefined) {
        throw new Error(
          `this model (${this.#context.model.config.architecture}) is an encoder: it serves ` +
            `embeddings (/v1/embeddings), not text`,
        );
      }
      prompt = this.promptTokens(input.prompt);
    } catch (error) {
      onEvent({ type: "error", status: 400, message: (error as Error).message });
      return () => {};
    }
    let live = true;
    const id = this.scheduler.submit({
      prompt,
      maxTokens: input.maxTokens,
      sampling: input.sampling,
      seed: input.seed,
      stop: input.stop,
      topLogprobs: input.topLogprobs,
      ignoreEos: input.ignoreEos,
      n: input.n,
      logitBias: input.logitBias,
      grammar: input.grammar,
      grammarTriggers: input.grammarTriggers,
      triggerPrefix: input.triggerPrefix,
    }, (event) => {
      if (live) onEvent(event);
    });
    this.#run();
    return () => {
      live = false;
      this.scheduler.cancel(id);
    };
  }

  /** Steps the scheduler until it is idle, giving the event loop a turn between steps. */
  async #run(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    const turns = new Turns(this.#inbox); // closed when idle: an open port would keep the process alive
    try {
      while (this.scheduler.busy) {
        await turns.next();
        this.scheduler.step();
      }
    } finally {
      turns.close();
      this.#running = false;
    }
  }

  tokenize(text: string, addSpecial: boolean, parseSpecial: boolean): Promise<number[]> {
    return Promise.resolve(this.#tokenizer.encode(text, { addSpecial, parseSpecial }));
  }

  detokenize(tokens: number[]): Promise<string> {
    const V = this.#tokenizer.vocabSize;
    for (const t of tokens) {
      if (!Number.isInteger(t) || t < 0 || t >= V) {
        return Promise.reject(new RangeError(`token id ${t} is outside the vocabulary [0, ${V})`));
      }
    }
    return Promise.resolve(this.#tokenizer.decode(tokens));
  }

  pieces(tokens: number[]): Promise<number[][]> {
    const V = this.#tokenizer.vocabSize;
    for (const t of tokens) {
      if (!Number.isInteger(t) || t < 0 || t >= V) {
        return Promise.reject(new RangeError(`token id ${t} is outside the vocabulary [0, ${V})`));
      }
    }
    return Promise.resolve(tokens.map((t) => [...this.#tokenizer.pieceBytes(t, true)]));
  }

  /** The model and cache a slot file must come from (`load.ts` sets it: file name and size). */
  slotIdentity = "";

  slotAction(action: SlotAction, slot: number, path?: string): Promise<SlotActionResult> {
    try {
      const cache = this.#context.cache;
      if (!Number.isInteger(slot) || slot < 0 || slot >= cache.slotCount) {
        throw new RangeError(`slot ${slot} is outside [0, ${cache.slotCount})`);
      }
      if (this.scheduler.stats().busySlots.includes(slot)) {
        throw new Error(`slot ${slot} is processing a request`);
      }
      const t0 = performance.now();
      const identity = `${this.slotIdentity}, ${cache.cacheType} cache`;
      let tokens: number, bytes = 0;
      if (action === "erase") {
        tokens = cache.length(slot);
        cache.truncate(slot, 0);
      } else if (action === "save") {
        const data = cache.exportSlot(slot);
        const file = encodeSlotFile(identity, data);
        writeFileSync(path!, file);
        tokens = data.tokens.length;
        bytes = file.length;
      } else {
        let file: Uint8Array;
        try {
          file = readFileSync(path!);
        } catch (error) {
          throw new Error(`cannot read the slot file: ${(error as Error).message}`);
        }
        const data = decodeSlotFile(file, identity, (n) => cache.slotLayerBytes(n));
        cache.importSlot(slot, data.tokens, data.layers);
        tokens = data.tokens.length;
        bytes = file.length;
      }
      return Promise.resolve({ tokens, bytes, ms: performance.now() - t0 });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  stats(): Promise<SchedulerStats> {
    return Promise.resolve(this.scheduler.stats());
  }

  #embeddings?: Context;
  /** `serve --pooling`: the embeddings' pooling (default the model's, `mean` for a decoder). */
  embeddingPooling?: string;

  /**
   * Embeds on a context of its own over the same weights (made on first use),
   * the inputs as sequences of one batch; it runs between two scheduler steps
   * (this thread), so generation pauses for one batch of embeddings.
   */
  embed(input: EmbedInput): Promise<EmbedOutput> {
    if (this.#closed) return Promise.reject(new Error("the server is shutting down"));
    const model = this.#context.model;
    const encode = (text: string, addSpecial: boolean) =>
      this.#tokenizer.encode(text, { addSpecial, parseSpecial: true });
    const sequences = input.inputs.map((p) =>
      "tokens" in p
        ? p.tokens
        : "text" in p
        ? encode(p.text, true)
        : p.mixed.flatMap((x, i) => typeof x === "number" ? [x] : encode(x, i === 0))
    );
    try {
      const context = this.#embeddings ??= new Context(
        model,
        embeddingContextOptions(model, {
          contextSize: this.#context.contextSize,
          threads: this.#context.threadCount,
          cacheTypeK: this.#context.cache.cacheTypeK,
          cacheTypeV: this.#context.cache.cacheTypeV,
        }),
      );
      const pooling = resolvePooling(model, this.embeddingPooling);
      if (pooling === "none" && !input.perToken) {
        return Promise.resolve({
          error: `pooling "none" gives one vector per token: use /embedding, or serve --pooling ` +
            `mean|cls|last`,
          param: null,
        });
      }
      const E = model.config.embeddingLength;
      // llama-server normalizes only pooled vectors: per-token ones are returned as they are
      const p = pooling === "none" ? -1 : input.normalize;
      const vectors = embedSequences(context, sequences, pooling, p);
      return Promise.resolve({
        embeddings: vectors.map((vs) => {
          if (vs.length === 1) return vs[0];
          const all = new Float32Array(vs.length * E);
          vs.forEach((v, i) => all.set(v, i * E));
          return all;
        }),
        promptTokens: sequences.map((s) => s.length),
        dimensions: E,
      });
    } catch (error) {
      if (!(error instanceof RangeError)) return Promise.reject(error);
      const at = /^input (\d+)/.exec(error.message);
      return Promise.resolve({ error: error.message, param: at ? `input[${at[1]}]` : "input" });
    }
  }

  /** Ends every request still running (the caller drained them first), then frees the model. */
  async close(): Promise<void> {
    this.#closed = true;
    this.scheduler.cancelAll();
    while (this.#running) await nextTurn();
    this.#embeddings?.close();
    this.#speculation?.close();
    this.#context.close();
    this.#context.model.close();
  }
}
