/**
 * The library API: load a model once, tokenize and detokenize, stream a
 * generation as an async iterator of pieces, cancel it with an
 * `AbortSignal`, and close it to free its native memory.
 *
 * Built on the engine of `src/model/` ({@linkcode Model}, a one-slot
 * {@linkcode Context}), {@linkcode Tokenizer}, {@linkcode Sampler} and the
 * generation core of `src/generation/`. A generation continues the slot's
 * history: only the prompt tokens past the longest common prefix with what
 * the slot already holds are prefilled (a chat's next turn reuses the last).
 * More sequences at once: {@linkcode Llm.createContext} gives a context of
 * several slots over the same weights, driven with `Context.decode`.
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
import {
  applyChatTemplate,
  type ApplyTemplateOptions,
  cachedChatTemplate,
  type ChatMessage,
  planChat,
} from "../chat/mod.ts";
import {
  draftLimit,
  Driver,
  generate,
  type GenerationResult,
  LogitBias,
  type LogitProcessor,
  openSpeculation,
  type Speculation,
  type SpeculationConfig,
} from "../generation/mod.ts";
import { type ConstraintSpec, grammarConstraint } from "../grammar/mod.ts";
import {
  ChatOutputStream,
  type ParsedMessage,
  type ReasoningFormat,
  type ToolChoice,
  type ToolDefinition,
} from "../tools/mod.ts";
import {
  type CacheType,
  Context,
  type ContextOptions,
  Model,
  type ModelConfig,
  type ModelLoadOptions,
} from "../model/mod.ts";
import { prepareLibrary } from "../native/locate.ts";
import { randomSeed, Sampler, type SamplerParams } from "../sampler/mod.ts";
import { type DecodeOptions, Tokenizer } from "../tokenizer/mod.ts";
import {
  embeddingContextOptions,
  type EmbedOptions,
  embedSequences,
  resolvePooling,
} from "../embedding/mod.ts";

/**
 * How a model loads and the context it runs in: the one options type of
 * `Llm.load`, the server and the CLI (`Model.load` takes the model's part,
 * `new Context` the context's).
 */
export interface LlmOptions extends ModelLoadOptions {
  /** Kernel threads; 0 (default) = every CPU. */
  threads?: number;
  /** KV cache positions; default min(the model's context, 4096); 0 = the model's training context. */
  contextSize?: number;
  /** Prompt tokens per prefill batch; default 512. */
  batchSize?: number;
  /** KV cache element type of K and V; default `"f16"` (as llama.cpp). */
  cacheType?: CacheType;
  /** K's cache type (llama.cpp's `-ctk`); default `cacheType`. */
  cacheTypeK?: CacheType;
  /** V's cache type (llama.cpp's `-ctv`); default `cacheType`. */
  cacheTypeV?: CacheType;
  /** The kernels to run on (see `ContextOptions.kernels`); default the library's. */
  kernels?: ContextOptions["kernels"];
  /**
   * Speculative decoding: a draft model (`draftModel`) or n-gram prompt
   * lookup drafts tokens the model verifies in one batch; the output stays
   * the model's own, token for token (see `src/generation/speculative.ts`).
   */
  speculation?: SpeculationConfig;
}

/** Options of {@linkcode Llm.generate}: the sampling parameters (llama.cpp's defaults) and limits. */
export interface LlmGenerateOptions extends Partial<SamplerParams> {
  /** Most tokens to generate; -1 (default) = until an end-of-generation token or a full context. */
  maxTokens?: number;
  /** Stop strings: generation ends before the first one, which is not returned. */
  stop?: readonly string[];
  /** Random seed (0 to 2^32-1); default random. Same seed, same options: same tokens. */
  seed?: number;
  /** `[token id, bias]` pairs added to those tokens' logits before sampling; -Infinity bans one. */
  logitBias?: Iterable<readonly [number, number]>;
  /**
   * GBNF text (llama.cpp's grammar format, start rule `root`) the output
   * must match. Throws `GrammarError` (with line and column) when it cannot
   * be used.
   */
  grammar?: string;
  /**
   * A JSON Schema the output must validate against, converted to a grammar
   * as llama.cpp converts it. Throws `SchemaError` naming a keyword it cannot
   * enforce (it is never dropped silently).
   */
  jsonSchema?: unknown;
  /** Cancels the generation: the iterator then throws `signal.reason`. */
  signal?: AbortSignal;
}

/** Options of {@linkcode Llm.complete}: those of `generate`, with callbacks instead of an iterator. */
export interface LlmCompleteOptions extends LlmGenerateOptions {
  /** Receives the generated text as it is produced (streamed, stop strings held back). */
  onText?: (text: string) => void;
  /** Keep the whole text in the result (default true). */
  collectText?: boolean;
}

/** Options of {@linkcode Llm.chat}: those of `generate`, plus the template's and the tools'. */
export interface LlmChatOptions extends LlmGenerateOptions {
  /** Jinja source (or a built-in's name: chatml, llama3, gemma, phi3, mistral) overriding the file's. */
  template?: string;
  /** The clock the template's `strftime_now` reads; default now. */
  now?: Date;
  /** OpenAI function tools the model may call (the template lists them; calls are constrained). */
  tools?: readonly ToolDefinition[];
  /** `auto` (default), `none`, `required`, or one named function. */
  toolChoice?: ToolChoice;
  /** Several calls in one reply (default false). */
  parallelToolCalls?: boolean;
  /** Extra template variables, e.g. `{ enable_thinking: false }`. */
  chatTemplateKwargs?: Record<string, unknown>;
  /** `auto` (default): reasoning apart in `message.reasoningContent`; `none`: left in the content. */
  reasoningFormat?: ReasoningFormat;
}

/** What {@linkcode Llm.chat} returns: the generation's result and the reply parsed. */
export interface ChatResult extends GenerationResult {
  /** The reply: its content, its reasoning, and the tool calls it makes (arguments as JSON text). */
  message: ParsedMessage;
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

/** A loaded model with its tokenizer and a one-slot context. One generation at a time; {@linkcode close} when done. */
export class Llm {
  /** The immutable model (mapping, config, architecture, weights). */
  readonly model: Model;
  /** The one-slot context generations run on (its KV cache holds the last sequence). */
  readonly context: Context;
  /** The model's tokenizer. */
  readonly tokenizer: Tokenizer;
  readonly #threads: number;
  #options: LlmOptions = {};
  /** Speculation set up on {@linkcode context}, if asked for. */
  #speculation: Speculation | undefined;
  #embeddings: Context | undefined;
  #busy = false;
  #closed = false;

  private constructor(model: Model, context: Context, tokenizer: Tokenizer, threads: number) {
    this.model = model;
    this.context = context;
    this.tokenizer = tokenizer;
    this.#threads = threads;
  }

  /**
   * Maps the GGUF file at `path` and loads the model, its tokenizer and a
   * one-slot context. Fetches the native library first when the package was
   * loaded over http(s). Throws `GgufError` / `ModelError` /
   * `TokenizerError` for a bad file and `RangeError` for a bad option.
   */
  static async load(path: string, options: LlmOptions = {}): Promise<Llm> {
    await prepareLibrary();
    const { native, repack, speculation, ...contextOptions } = options;
    const own = options.kernels === undefined; // other kernels read the file's layouts
    const model = Model.load(path, { native, repack: repack ?? own });
    let context: Context | undefined;
    try {
      const tokenizer = Tokenizer.fromGguf(model.gguf);
      const maxLogits = speculation === undefined ? 1 : 1 + draftLimit(speculation);
      context = new Context(model, { ...contextOptions, slots: 1, maxLogits });
      const llm = new Llm(model, context, tokenizer, options.threads ?? 0);
      llm.#options = options;
      if (speculation !== undefined) {
        const spec = openSpeculation(context, tokenizer.vocab, speculation, {
          threads: options.threads,
          repack: repack ?? own,
        });
        llm.#speculation = spec;
        Driver.of(context, { speculation: spec.options });
      }
      return llm;
    } catch (error) {
      context?.close();
      model.close();
      throw error;
    }
  }

  /** The model's hyper-parameters. */
  get config(): ModelConfig {
    return this.model.config;
  }

  /**
   * A new context over the same weights, e.g. several slots for a server
   * (threads default to the Llm's). The caller closes it before the Llm.
   *
   * @example Two sequences in one batch
   * ```ts
   * import { Batch } from "../model/mod.ts";
   * import { Llm } from "./llm.ts";
   * const llm = await Llm.load("../shared/testdata/models/stories260K.gguf", { threads: 1 });
   * using context = llm.createContext({ slots: 2, contextSize: 128 });
   * const batch = new Batch(context.batchSize);
   * const a = llm.tokenize("Once upon a time"), b = llm.tokenize("The cat");
   * a.forEach((id, i) => batch.add(id, i, 0, i === a.length - 1));
   * b.forEach((id, i) => batch.add(id, i, 1, i === b.length - 1));
   * if (context.decode(batch) !== 2) throw new Error("two logits rows");
   * context.close();
   * llm.close();
   * ```
   */
  createContext(options: ContextOptions = {}): Context {
    if (this.#closed) throw new Error("Llm used after close");
    return new Context(this.model, { threads: this.#threads, ...options });
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
   * Generates from `prompt` (text, or token ids), continuing the context's
   * sequence: the prompt tokens it already holds (the longest common prefix)
   * are not run again; the output is the same as on a fresh sequence. Yields
   * a piece per generated token (end-of-generation tokens are not yielded);
   * the iterator's return value is the whole result (text, tokens, finish
   * reason, timings). A token's piece is handed out once the next token has
   * been sampled (its text is final then) or generation has ended, whenever
   * the loop yields to the event loop (at least every 50 ms): the consumer
   * may see a few at once. Breaking out of the loop stops generation; so does
   * aborting `signal`, after which the iterator throws `signal.reason`.
   */
  generate(
    prompt: string | ArrayLike<number>,
    options: LlmGenerateOptions = {},
  ): AsyncGenerator<GeneratedPiece, GenerationResult, undefined> {
    return this.#generate(prompt, options, {});
  }

  /**
   * {@linkcode generate}, with the constraint a chat plan adds (a tool-call
   * grammar, lazy with its triggers) and a callback on each released piece
   * of text.
   */
  async *#generate(
    prompt: string | ArrayLike<number>,
    options: LlmGenerateOptions,
    planned: ConstraintSpec,
    onPiece?: (text: string) => void,
  ): AsyncGenerator<GeneratedPiece, GenerationResult, undefined> {
    if (this.#closed) throw new Error("Llm used after close");
    if (this.#busy) throw new Error("Llm is already generating: one generation at a time");
    const { maxTokens, stop, seed, signal, logitBias, grammar, jsonSchema, ...sampling } = options;
    signal?.throwIfAborted();
    const sampler = new Sampler(this.model.config.vocabSize, sampling, seed ?? randomSeed());
    const processors = this.#processors(
      logitBias,
      planned.grammar !== undefined ? planned : { grammar, jsonSchema },
    );
    // A token's piece is complete once the next token is sampled or generation
    // has ended (the final flush adds the held-back tail to the last piece).
    const ready: GeneratedPiece[] = [];
    let pending: GeneratedPiece | undefined;
    let tail = "";
    let wake: (() => void) | undefined;
    const release = () => {
      if (pending !== undefined) ready.push(pending);
      pending = undefined;
      wake?.();
    };
    let stopped = false;
    let result: GenerationResult | undefined;
    let failure: unknown;
    let done = false;
    this.#busy = true;
    const run = generate(this, this.tokenizer, sampler, {
      prompt,
      maxTokens,
      stop,
      processors,
      onText: (text) => (tail += text), // text released after the last token: the flush
      onToken: (e) => {
        release();
        pending = { text: e.text, token: e.token, logprob: e.logprob };
        tail = "";
      },
      shouldStop: () => stopped || (signal?.aborted ?? false),
    }).then((r) => (result = r), (e) => (failure = e ?? new Error("generation failed")))
      .finally(() => {
        done = true;
        if (pending !== undefined) pending.text += tail;
        release();
      });
    try {
      for (;;) {
        while (ready.length > 0) {
          const piece = ready.shift()!;
          onPiece?.(piece.text);
          yield piece;
        }
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
   * Generates from `prompt` to the end and resolves to the whole result,
   * streaming text to `onText` as it is released. Unlike
   * {@linkcode generate}, aborting `signal` does not throw: the result then
   * has `finishReason` `"interrupted"` (what a CLI prints on Ctrl-C).
   *
   * @example
   * ```ts
   * import { Llm } from "./llm.ts";
   * const llm = await Llm.load("../shared/testdata/models/stories260K.gguf", { threads: 1 });
   * const result = await llm.complete("Once upon a time", { temperature: 0, maxTokens: 8 });
   * llm.close();
   * if (result.tokens.length !== 8 || result.finishReason !== "length") throw new Error();
   * ```
   */
  async complete(
    prompt: string | ArrayLike<number>,
    options: LlmCompleteOptions = {},
  ): Promise<GenerationResult> {
    if (this.#closed) throw new Error("Llm used after close");
    if (this.#busy) throw new Error("Llm is already generating: one generation at a time");
    const {
      maxTokens,
      stop,
      seed,
      signal,
      onText,
      collectText,
      logitBias,
      grammar,
      jsonSchema,
      ...sampling
    } = options;
    const sampler = new Sampler(this.model.config.vocabSize, sampling, seed ?? randomSeed());
    const processors = this.#processors(logitBias, { grammar, jsonSchema });
    this.#busy = true;
    try {
      return await generate(this, this.tokenizer, sampler, {
        prompt,
        maxTokens,
        stop,
        processors,
        onText,
        collectText,
        shouldStop: signal ? () => signal.aborted : undefined,
      });
    } finally {
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
  ): AsyncGenerator<GeneratedPiece, ChatResult, undefined> {
    const {
      template,
      now,
      tools,
      toolChoice,
      parallelToolCalls,
      chatTemplateKwargs,
      reasoningFormat,
      ...rest
    } = options;
    const calls = tools !== undefined && tools.length > 0 && toolChoice !== "none";
    if (calls && (rest.grammar !== undefined || rest.jsonSchema !== undefined)) {
      throw new RangeError("a grammar or JSON schema cannot be combined with tools");
    }
    const plan = planChat(cachedChatTemplate(this.model.gguf, this.tokenizer, template), {
      messages,
      tools,
      toolChoice,
      parallelToolCalls,
      chatTemplateKwargs,
      reasoningFormat,
      now,
      // structured output starts with the answer (a reasoning template closes its block)
      enableThinking: rest.grammar !== undefined || rest.jsonSchema !== undefined
        ? false
        : undefined,
    });
    const output = new ChatOutputStream(plan.output, undefined, plan.echo);
    const stop = [...(rest.stop ?? []), ...plan.stops];
    const result = yield* this.#generate(plan.prompt, { ...rest, stop }, {
      grammar: plan.grammar,
      triggers: plan.grammarTriggers,
      triggerPrefix: plan.triggerPrefix,
    }, (text) => output.push(text));
    return { ...result, message: output.finish().message };
  }

  /**
   * The JSON value generated from `prompt` under `jsonSchema` (any JSON
   * object when it is not given), parsed. Throws when generation ended
   * before the value was complete (the token limit or the context), or was
   * interrupted.
   *
   * @example
   * ```ts
   * import { Llm } from "./llm.ts";
   * const llm = await Llm.load("../shared/testdata/models/stories260K.gguf", { threads: 1 });
   * const value = await llm.completeJson("Tom had", {
   *   jsonSchema: { type: "object", properties: { name: { type: "string", maxLength: 8 } }, required: ["name"] },
   *   temperature: 0,
   * });
   * llm.close();
   * if (typeof (value as { name: unknown }).name !== "string") throw new Error();
   * ```
   */
  async completeJson(
    prompt: string | ArrayLike<number>,
    options: Omit<LlmCompleteOptions, "grammar"> = {},
  ): Promise<unknown> {
    const jsonSchema = options.jsonSchema ?? { type: "object" };
    const result = await this.complete(prompt, { ...options, jsonSchema, collectText: true });
    if (result.finishReason !== "stop" || result.stoppedByString) {
      throw new Error(
        `the JSON value is incomplete: generation ended with "${result.finishReason}" ` +
          `after ${result.tokens.length} tokens`,
      );
    }
    return JSON.parse(result.text);
  }

  /**
   * One embedding per input (text, tokenized with BOS/EOS as the model asks, or
   * token ids), as llama-embedding computes it: the inputs decoded together
   * (one sequence per slot of an embeddings context, made on first use), the
   * final hidden states pooled (`pooling`, default the model's, `mean` for a
   * decoder) and normalized (`normalize`, default 2: Euclidean). With pooling
   * `none`, an input's entry is its tokens' vectors, `[tokens][embedding]` in
   * one array. Throws `RangeError` for an empty input or one longer than the
   * context (naming the limit).
   */
  // deno-lint-ignore require-await
  async embed(
    inputs: readonly (string | ArrayLike<number>)[],
    options: EmbedOptions = {},
  ): Promise<Float32Array[]> {
    if (this.#closed) throw new Error("Llm used after close");
    const pooling = resolvePooling(this.model, options.pooling);
    const sequences = inputs.map((s) =>
      typeof s === "string" ? this.tokenizer.encode(s, { parseSpecial: true }) : s
    );
    const context = this.#embeddings ??= new Context(
      this.model,
      embeddingContextOptions(this.model, {
        contextSize: this.#options.contextSize,
        threads: this.#threads,
        cacheType: this.#options.cacheType,
        cacheTypeK: this.#options.cacheTypeK,
        cacheTypeV: this.#options.cacheTypeV,
      }),
    );
    return embedSequences(context, sequences, pooling, options.normalize ?? 2).map((vs) => {
      if (vs.length === 1) return vs[0];
      const all = new Float32Array(vs.length * this.model.config.embeddingLength);
      vs.forEach((v, i) => all.set(v, i * v.length));
      return all;
    });
  }

  #processors(
    logitBias: LlmGenerateOptions["logitBias"],
    spec: ConstraintSpec,
  ): LogitProcessor[] {
    const out: LogitProcessor[] = [];
    if (logitBias !== undefined) {
      const bias = new LogitBias(logitBias, this.model.config.vocabSize);
      if (!bias.empty) out.push(bias);
    }
    const constraint = grammarConstraint(this.tokenizer, spec);
    if (constraint !== undefined) out.push(constraint);
    return out;
  }

  /** Frees the model's native memory: buffers, KV cache, file mapping and thread pool. */
  close(): void {
    if (this.#closed) return;
    if (this.#busy) throw new Error("Llm.close() during a generation: stop it first");
    this.#closed = true;
    this.#embeddings?.close();
    this.#speculation?.close();
    this.context.close();
    this.model.close();
  }

  /** The speculation this Llm runs (kind, sizes, verify budget), or undefined. */
  get speculation(): string | undefined {
    return this.#speculation?.description;
  }

  /** {@linkcode close}, for `using llm = await Llm.load(...)`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
