/**
 * A conversation that stays in the KV cache: each turn renders the whole
 * conversation through the chat template, but prefills only the tokens past
 * what the cache already holds. The session keeps the exact text of the
 * cached tokens (the rendered prompt so far plus the reply as generated);
 * when the new rendering starts with that text, only the rest is tokenized
 * and prefilled (as llama-cli's `common_chat_format_single`). Otherwise (a
 * template that rewrites earlier turns, or turns dropped) the rendering is
 * tokenized whole and the longest common prefix with the cache is kept.
 *
 * When a turn would not fit the context (with room for a reply), the oldest
 * turns are dropped, the system message kept, and the turn says how many.
 *
 * @example Two turns; the second prefills only its own tokens
 * ```ts
 * import { LlamaModel } from "../model/mod.ts";
 * import { Tokenizer } from "../tokenizer/mod.ts";
 * import { ChatSession } from "./session.ts";
 * import { ChatTemplate } from "./template.ts";
 * import { templateTokens } from "./model_template.ts";
 *
 * const model = LlamaModel.load("../shared/testdata/models/stories260K.gguf", { threads: 1 });
 * const tokenizer = Tokenizer.fromGguf(model.gguf);
 * const template = ChatTemplate.builtin("chatml", templateTokens(tokenizer));
 * const chat = new ChatSession(model, tokenizer, template, { sampling: { temperature: 0 } });
 * const first = await chat.send("Hi", { maxTokens: 8 });
 * const second = await chat.send("Tell me a story", { maxTokens: 8 });
 * if (second.reusedTokens < first.promptTokens) throw new Error("the cache was not reused");
 * model.close();
 * ```
 *
 * @module
 */
import { StopMatcher } from "../generation/stop.ts";
import type { FinishReason } from "../generation/mod.ts";
import type { LlamaModel } from "../model/mod.ts";
import { randomSeed, Sampler, type SamplerParams } from "../sampler/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import type { ChatMessage, ChatTemplate } from "./template.ts";

/** Options of a {@linkcode ChatSession}. */
export interface ChatSessionOptions {
  /** The system message (none by default: the template's own default applies). */
  system?: string;
  /** Sampling parameters (llama.cpp's defaults for the rest). */
  sampling?: Partial<SamplerParams>;
  /** Random seed; default random. */
  seed?: number;
  /** The clock the template's `strftime_now` reads; default now. */
  now?: () => Date;
  /** A conversation to continue (not yet in the cache: the first turn prefills it). */
  messages?: readonly ChatMessage[];
}

/** Options of one turn. */
export interface ChatTurnOptions {
  /** Most tokens to generate; -1 (default) = until end of turn or a full context. */
  maxTokens?: number;
  /** Stop strings: the reply ends before the first one. */
  stop?: readonly string[];
  /** Interrupts the reply (it is kept, as far as it got, in the conversation). */
  signal?: AbortSignal;
  /** Receives the reply's text as it is generated. */
  onText?: (text: string) => void;
}

/** What one turn did. */
export interface ChatTurn {
  /** The reply (also appended to {@linkcode ChatSession.messages}). */
  text: string;
  /** Why the reply ended (`"interrupted"` for an aborted signal). */
  finishReason: FinishReason;
  /** Tokens of the whole rendered conversation this turn started from. */
  promptTokens: number;
  /** Of those, tokens already in the KV cache (not computed again). */
  reusedTokens: number;
  /** Tokens prefilled this turn: `promptTokens - reusedTokens`. */
  prefilledTokens: number;
  /** Tokens generated. */
  generatedTokens: number;
  /** Messages dropped (oldest first) to make the conversation fit the context. */
  droppedMessages: number;
  /** Milliseconds from the call to the first generated token. */
  firstTokenMs: number;
  prefillMs: number;
  /** Milliseconds of generation after the first token. */
  decodeMs: number;
}

/** The event loop gets a turn at least this often, so a SIGINT handler can run. */
const YIELD_INTERVAL_MS = 50;
/**
 * Without a reply limit, turns are dropped until 1/REPLY_ROOM_SHARE of the
 * context is free for the reply (a limit N keeps min(N, half the context) free).
 */
const REPLY_ROOM_SHARE = 4;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/** A conversation with a model, kept in its KV cache between turns. One turn at a time. */
export class ChatSession {
  readonly #model: LlamaModel;
  readonly #tokenizer: Tokenizer;
  readonly #template: ChatTemplate;
  readonly #sampler: Sampler;
  readonly #now: () => Date;
  #system: string | undefined;
  #messages: ChatMessage[] = [];
  /** The conversation's tokens so far (prompt and reply of the last turn); the cache holds a prefix. */
  #tokens: number[] = [];
  /** How many of {@linkcode #tokens} have their keys and values in the cache (positions 0..n-1). */
  #computed = 0;
  /** The text {@linkcode #tokens} spell, or undefined when unknown (a stop string cut the reply). */
  #text: string | undefined = "";
  #busy = false;

  constructor(
    model: LlamaModel,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    options: ChatSessionOptions = {},
  ) {
    this.#model = model;
    this.#tokenizer = tokenizer;
    this.#template = template;
    this.#system = options.system;
    this.#messages = (options.messages ?? []).map((m) => ({ role: m.role, content: m.content }));
    this.#now = options.now ?? (() => new Date());
    this.#sampler = new Sampler(
      model.config.vocabSize,
      options.sampling ?? {},
      options.seed ?? randomSeed(),
    );
  }

  /** The conversation so far (system message first when set). */
  get messages(): readonly ChatMessage[] {
    return this.#system === undefined
      ? this.#messages
      : [{ role: "system", content: this.#system }, ...this.#messages];
  }

  /** The model's context, in tokens. */
  get contextSize(): number {
    return this.#model.contextSize;
  }

  /** Tokens held in the KV cache. */
  get cachedTokens(): number {
    return this.#computed;
  }

  /** Forgets the conversation (the system message stays). */
  clear(): void {
    this.#messages = [];
  }

  /** Replaces the system message (undefined: none) and forgets the conversation. */
  setSystem(system: string | undefined): void {
    this.#system = system;
    this.#messages = [];
  }

  /** One turn: `text` as the user's message, the reply generated and streamed through `onText`. */
  async send(text: string, options: ChatTurnOptions = {}): Promise<ChatTurn> {
    if (this.#busy) throw new Error("ChatSession: one turn at a time");
    this.#busy = true;
    try {
      return await this.#turn(text, options);
    } finally {
      this.#busy = false;
    }
  }

  async #turn(text: string, options: ChatTurnOptions): Promise<ChatTurn> {
    const t0 = performance.now();
    const model = this.#model;
    const maxTokens = options.maxTokens ?? -1;
    if (!Number.isInteger(maxTokens) || maxTokens < -1) {
      throw new RangeError(`maxTokens must be -1 or a non-negative integer, got ${maxTokens}`);
    }
    const room = maxTokens >= 0
      ? Math.min(maxTokens, Math.floor(model.contextSize / 2))
      : Math.floor(model.contextSize / REPLY_ROOM_SHARE);
    const now = this.#now();
    const turn = [...this.#messages, { role: "user", content: text }];
    let dropped = 0;
    let plan = this.#plan(turn, now);
    // Drop the oldest turns (a user message and the reply after it) until this one fits.
    while (plan.tokens.length + Math.max(1, room) > model.contextSize && turn.length > 1) {
      const cut = turn.length > 2 && turn[1].role === "assistant" ? 2 : 1;
      turn.splice(0, cut);
      dropped += cut;
      plan = this.#plan(turn, now);
    }
    const prompt = plan.tokens;
    if (prompt.length >= model.contextSize) {
      throw new RangeError(
        `the message makes a prompt of ${prompt.length} tokens, which the context of ` +
          `${model.contextSize} tokens cannot hold (raise the context size)`,
      );
    }
    this.#messages = turn;

    // Keep the longest common prefix with the cache; at least the last token is computed again.
    let reused = 0;
    const known = this.#tokens;
    const computed = Math.min(this.#computed, prompt.length - 1);
    while (reused < computed && known[reused] === prompt[reused]) reused++;
    this.#tokens = prompt.slice();
    this.#computed = reused;
    this.#text = plan.text;

    const sampler = this.#sampler;
    sampler.reset();
    for (const id of prompt) sampler.accept(id);
    const shouldStop = () => options.signal?.aborted ?? false;
    let finishReason: FinishReason = "length";
    let lastYield = performance.now();
    let logits: Float32Array = new Float32Array(0);
    const tPrefill = performance.now();
    for (let start = reused; start < prompt.length; start += model.batchSize) {
      if (start > reused) {
        await yieldToEventLoop();
        lastYield = performance.now();
      }
      if (shouldStop()) {
        finishReason = "interrupted";
        break;
      }
      const batch = prompt.slice(start, start + model.batchSize);
      logits = model.forward(batch, start);
      this.#computed = start + batch.length;
    }
    const prefillMs = performance.now() - tPrefill;

    let reply = "";
    const stops = new StopMatcher(options.stop ?? [], (piece) => {
      reply += piece;
      options.onText?.(piece);
    });
    const decoder = this.#tokenizer.createDecoder();
    let generated = 0;
    let cutByStopString = false;
    let firstTokenMs = 0;
    const tDecode = performance.now();
    while (finishReason !== "interrupted") {
      if (maxTokens >= 0 && generated >= maxTokens) break;
      if (performance.now() - lastYield >= YIELD_INTERVAL_MS) {
        await yieldToEventLoop();
        lastYield = performance.now();
      }
      if (shouldStop()) {
        finishReason = "interrupted";
        break;
      }
      const id = sampler.sample(logits);
      if (generated === 0) firstTokenMs = performance.now() - t0;
      if (this.#tokenizer.isEog(id)) {
        finishReason = "stop";
        break;
      }
      sampler.accept(id);
      generated++;
      this.#tokens.push(id);
      if (stops.push(decoder.push(id))) {
        finishReason = "stop";
        cutByStopString = true;
        break;
      }
      if (maxTokens >= 0 && generated >= maxTokens) break;
      const pos = this.#computed;
      if (pos >= model.contextSize) {
        finishReason = "context";
        break;
      }
      logits = model.forward([id], pos);
      this.#computed = pos + 1;
    }
    if (!stops.stopped) {
      stops.push(decoder.flush());
      stops.flush();
    }
    if (generated === 0) firstTokenMs = performance.now() - t0;
    // The known tokens spell the prompt and the reply, unless a stop string cut the reply's text.
    this.#text = cutByStopString ? undefined : plan.text + reply;
    this.#messages.push({ role: "assistant", content: reply });
    return {
      text: reply,
      finishReason,
      promptTokens: prompt.length,
      reusedTokens: reused,
      prefilledTokens: prompt.length - reused,
      generatedTokens: generated,
      droppedMessages: dropped,
      firstTokenMs,
      prefillMs,
      decodeMs: performance.now() - tDecode,
    };
  }

  /**
   * The tokens of the conversation `turn` with the generation prompt, and
   * their text: the cache's tokens plus the tokenized rest when the rendering
   * continues the cache's text, else the whole rendering tokenized.
   */
  #plan(turn: ChatMessage[], now: Date): { tokens: number[]; text: string } {
    const messages = this.#system === undefined
      ? turn
      : [{ role: "system", content: this.#system }, ...turn];
    const text = this.#template.render(messages, { addGenerationPrompt: true, now });
    const known = this.#text;
    if (known !== undefined && known !== "" && text.startsWith(known)) {
      const rest = this.#tokenizer.encode(text.slice(known.length), {
        addSpecial: false,
        parseSpecial: true,
      });
      return { tokens: [...this.#tokens, ...rest], text };
    }
    return { tokens: this.#tokenizer.encode(text, { addSpecial: true, parseSpecial: true }), text };
  }
}
