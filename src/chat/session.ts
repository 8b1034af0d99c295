/**
 * A conversation that stays in the KV cache: each turn renders the whole
 * conversation through the chat template and runs it through `generate()`,
 * which prefills only what the slot's cache cannot keep. The session keeps
 * the exact text of the last turn's tokens (the rendered prompt plus the
 * reply as generated); when the new rendering starts with that text, only
 * the rest is tokenized (as llama-cli's `common_chat_format_single`), so the
 * tokens match the cache's. Otherwise (a template that rewrites earlier
 * turns, turns dropped, an edited turn) the rendering is tokenized whole and
 * the cache keeps what it can of the common prefix.
 *
 * When a turn would not fit the context (with room for a reply), the oldest
 * turns are dropped, the system message kept, and the turn says how many.
 *
 * @example Two turns; the second prefills only its own tokens
 * ```ts
 * import { Llm } from "../llm/mod.ts";
 * import { ChatSession } from "./session.ts";
 * import { ChatTemplate } from "./template.ts";
 * import { templateTokens } from "./model_template.ts";
 *
 * const llm = await Llm.load("../shared/testdata/models/stories260K.gguf", { threads: 1 });
 * const template = ChatTemplate.builtin("chatml", templateTokens(llm.tokenizer));
 * const chat = new ChatSession(llm, template, { sampling: { temperature: 0 } });
 * const first = await chat.send("Hi", { maxTokens: 8 });
 * const second = await chat.send("Tell me a story", { maxTokens: 8 });
 * if (second.reusedTokens < first.promptTokens) throw new Error("the cache was not reused");
 * llm.close();
 * ```
 *
 * @module
 */
import { type FinishReason, generate, type LogitProcessor } from "../generation/mod.ts";
import {
  compileGrammar,
  compileGrammarTriggers,
  constraintProcessor,
  GrammarConstraint,
} from "../grammar/mod.ts";
import {
  ChatOutputStream,
  type ParsedMessage,
  type ToolChoice,
  type ToolDefinition,
} from "../tools/mod.ts";
import { type ChatPlan, planChat } from "./plan.ts";
import type { Context } from "../model/mod.ts";
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
  /** GBNF text every reply must match (llama.cpp's `--grammar` in a chat). */
  grammar?: string;
  /** Tools the model may call (the template lists them; calls are constrained and parsed). */
  tools?: readonly ToolDefinition[];
  /** `auto` (default), `none`, `required`, or one named function. */
  toolChoice?: ToolChoice;
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
  /** The reply parsed: content, reasoning and tool calls (with tools, the calls to run). */
  message: ParsedMessage;
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

/** Where a session runs: a context slot (default 0) and the model's tokenizer; an `Llm` is one. */
export interface ChatTarget {
  readonly context: Context;
  readonly tokenizer: Tokenizer;
  readonly slot?: number;
}

/**
 * Without a reply limit, turns are dropped until 1/REPLY_ROOM_SHARE of the
 * context is free for the reply (a limit N keeps min(N, half the context) free).
 */
const REPLY_ROOM_SHARE = 4;

/** A conversation with a model, kept in its KV cache between turns. One turn at a time. */
export class ChatSession {
  readonly #context: Context;
  readonly #slot: number;
  readonly #tokenizer: Tokenizer;
  readonly #template: ChatTemplate;
  readonly #sampler: Sampler;
  readonly #now: () => Date;
  readonly #grammar: string | undefined;
  readonly #tools: readonly ToolDefinition[] | undefined;
  readonly #toolChoice: ToolChoice | undefined;
  #system: string | undefined;
  #messages: ChatMessage[] = [];
  /** The last turn's prompt and reply tokens: they spell {@linkcode #text}. */
  #tokens: Int32Array = new Int32Array(0);
  /** The text {@linkcode #tokens} spell, or undefined when unknown (a stop string cut the reply). */
  #text: string | undefined = "";
  #busy = false;

  constructor(target: ChatTarget, template: ChatTemplate, options: ChatSessionOptions = {}) {
    this.#context = target.context;
    this.#slot = target.slot ?? 0;
    this.#tokenizer = target.tokenizer;
    this.#template = template;
    this.#system = options.system;
    this.#messages = (options.messages ?? []).map((m) => ({ ...m }));
    this.#now = options.now ?? (() => new Date());
    this.#grammar = options.grammar;
    this.#tools = options.tools;
    this.#toolChoice = options.toolChoice;
    if (this.#grammar !== undefined && (this.#tools?.length ?? 0) > 0) {
      throw new RangeError("a grammar cannot be combined with tools");
    }
    if (this.#grammar !== undefined) compileGrammar(this.#grammar, this.#tokenizer); // fails now, not at the first turn
    this.#sampler = new Sampler(
      target.context.model.config.vocabSize,
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
    return this.#context.contextSize;
  }

  /** Tokens held in the KV cache. */
  get cachedTokens(): number {
    return this.#context.cache.length(this.#slot);
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

  /**
   * Replaces the conversation (system message aside), e.g. with an earlier
   * turn edited: the next turn reuses what the cache still holds of it.
   */
  setMessages(messages: readonly ChatMessage[]): void {
    if (this.#busy) throw new Error("ChatSession: one turn at a time");
    this.#messages = messages.map((m) => ({ ...m }));
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
    const contextSize = this.#context.contextSize;
    const maxTokens = options.maxTokens ?? -1;
    if (!Number.isInteger(maxTokens) || maxTokens < -1) {
      throw new RangeError(`maxTokens must be -1 or a non-negative integer, got ${maxTokens}`);
    }
    const room = maxTokens >= 0
      ? Math.min(maxTokens, Math.floor(contextSize / 2))
      : Math.floor(contextSize / REPLY_ROOM_SHARE);
    const now = this.#now();
    const turn = [...this.#messages, { role: "user", content: text }];
    let dropped = 0;
    let plan = this.#plan(turn, now);
    // Drop the oldest turns (a user message and the reply after it) until this one fits.
    while (plan.tokens.length + Math.max(1, room) > contextSize && turn.length > 1) {
      const cut = turn.length > 2 && turn[1].role === "assistant" ? 2 : 1;
      turn.splice(0, cut);
      dropped += cut;
      plan = this.#plan(turn, now);
    }
    const prompt = plan.tokens;
    if (prompt.length >= contextSize) {
      throw new RangeError(
        `the message makes a prompt of ${prompt.length} tokens, which the context of ` +
          `${contextSize} tokens cannot hold (raise the context size)`,
      );
    }
    this.#messages = turn;
    let firstTokenMs = 0;
    let reply = "";
    const chat = plan.chat;
    const output = new ChatOutputStream(chat.output, undefined, chat.echo);
    const result = await generate(
      { context: this.#context, slot: this.#slot },
      this.#tokenizer,
      this.#sampler,
      {
        prompt,
        maxTokens,
        stop: [...(options.stop ?? []), ...chat.stops],
        onText: (piece) => {
          reply += piece;
          options.onText?.(piece);
        },
        onToken: () => {
          if (firstTokenMs === 0) firstTokenMs = performance.now() - t0;
        },
        shouldStop: () => options.signal?.aborted ?? false,
        collectText: false,
        logprobs: false, // onToken only times the first token
        processors: this.#processors(chat),
      },
    );
    output.push(reply);
    const message = output.finish().message;
    if (firstTokenMs === 0) firstTokenMs = performance.now() - t0;
    const tokens = new Int32Array(prompt.length + result.tokens.length);
    tokens.set(prompt);
    tokens.set(result.tokens, prompt.length);
    this.#tokens = tokens;
    // The tokens spell the prompt and the reply, unless a stop string cut the reply's text.
    this.#text = result.stoppedByString ? undefined : plan.text + reply;
    // A reply with calls goes back to the template as the calls it made.
    this.#messages.push(
      message.toolCalls.length === 0 ? { role: "assistant", content: reply } : {
        role: "assistant",
        content: message.content,
        tool_calls: message.toolCalls.map((c) => ({
          id: c.id,
          type: "function" as const,
          function: { name: c.name, arguments: c.arguments },
        })),
      },
    );
    const t = result.timings;
    return {
      text: reply,
      message,
      finishReason: result.finishReason,
      promptTokens: prompt.length,
      reusedTokens: t.reusedTokens,
      prefilledTokens: prompt.length - t.reusedTokens,
      generatedTokens: result.tokens.length,
      droppedMessages: dropped,
      firstTokenMs,
      prefillMs: t.prefillMs,
      decodeMs: t.decodeMs + t.samplingMs,
    };
  }

  /**
   * The tokens of the conversation `turn` with the generation prompt, and
   * their text: the cache's tokens plus the tokenized rest when the rendering
   * continues the cache's text, else the whole rendering tokenized.
   */
  #plan(turn: ChatMessage[], now: Date): { tokens: Int32Array; text: string; chat: ChatPlan } {
    const messages = this.#system === undefined
      ? turn
      : [{ role: "system", content: this.#system }, ...turn];
    const chat = planChat(this.#template, {
      messages,
      tools: this.#tools,
      toolChoice: this.#toolChoice,
      now,
    });
    const text = chat.prompt;
    const known = this.#text;
    if (known !== undefined && known !== "" && text.startsWith(known)) {
      const rest = this.#tokenizer.encode(text.slice(known.length), {
        addSpecial: false,
        parseSpecial: true,
      });
      const tokens = new Int32Array(this.#tokens.length + rest.length);
      tokens.set(this.#tokens);
      tokens.set(rest, this.#tokens.length);
      return { tokens, text, chat };
    }
    const tokens = this.#tokenizer.encode(text, { addSpecial: true, parseSpecial: true });
    return { tokens: Int32Array.from(tokens), text, chat };
  }

  /** The turn's constraint: the session's grammar, or the tool calls' (lazy under `auto`). */
  #processors(chat: ChatPlan): LogitProcessor[] {
    if (this.#grammar !== undefined) {
      return [new GrammarConstraint(compileGrammar(this.#grammar, this.#tokenizer))];
    }
    if (chat.grammar === undefined) return [];
    const triggers = chat.grammarTriggers === undefined
      ? undefined
      : compileGrammarTriggers(chat.grammarTriggers, this.#tokenizer);
    return [
      constraintProcessor(
        compileGrammar(chat.grammar, this.#tokenizer),
        triggers,
        chat.triggerPrefix,
      ),
    ];
  }
}
