/**
 * OpenAI's request shapes, checked field by field: a bad field is an
 * {@linkcode ApiError} (HTTP 400) naming it, in OpenAI's error JSON.
 *
 * @example
 * ```ts
 * import { ApiError, parseChatRequest } from "./protocol.ts";
 * const ok = parseChatRequest({ messages: [{ role: "user", content: "Hi" }], max_tokens: 8 }, {});
 * if (ok.input.maxTokens !== 8) throw new Error("max_tokens");
 * try {
 *   parseChatRequest({ messages: [], max_tokens: -1 }, {});
 * } catch (error) {
 *   if (!(error instanceof ApiError) || error.param !== "messages") throw error;
 * }
 * ```
 *
 * @module
 */
import type { SamplerParams } from "../sampler/mod.ts";
import { randomSeed } from "../sampler/mod.ts";
import type { GenerateInput } from "./backend.ts";
import type { ChatMessage, ChatRequestInput } from "./chat_prompt.ts";
import {
  checkParallelToolCalls,
  checkToolChoice,
  checkTools,
  type ReasoningFormat,
  ToolRequestError,
} from "../tools/mod.ts";
import { TOP_LOGPROBS_MAX } from "../generation/mod.ts";
import { GrammarError, jsonSchemaToGrammar, parseGbnf, SchemaError } from "../grammar/mod.ts";

/** An error answered as OpenAI's `{ "error": { message, type, param, code } }`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly type: string = status >= 500 ? "server_error" : "invalid_request_error",
    /** More fields of the error object (llama-server's `n_prompt_tokens`, `n_ctx`). */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }

  /** The JSON body. */
  toJSON(): {
    error: { message: string; type: string; param: string | null; code: string | null };
  } {
    return {
      error: {
        message: this.message,
        type: this.type,
        param: this.param,
        code: this.code,
        ...this.extra,
      },
    };
  }
}

/** Server-wide defaults (`dotllm serve --temp ... -n ... -sys ...`); requests override them. */
export type RequestDefaults = Partial<SamplerParams> & {
  seed?: number;
  /** `-n`: the default AND the cap of `max_tokens` (undefined: no cap, -1 default). */
  maxTokens?: number;
  /** `-sys`: a system message put first in chat requests that have none. */
  system?: string;
  /** `--reasoning-format`: how chat replies return reasoning unless a request says. */
  reasoningFormat?: string;
  /** `--reasoning on|off`: the templates' `enable_thinking` unless a request says. */
  enableThinking?: boolean;
};

/** What a request may ask for, from the loaded model and the server's slots. */
export interface RequestLimits {
  /** Most choices (`n`): the server's slot count (each choice decodes in a slot). Default 1. */
  maxChoices?: number;
  /** Token ids in `logit_bias` must be below it (unchecked when undefined). */
  vocabSize?: number;
}

/**
 * Every top-level request field and what becomes of it. `implemented`: read
 * and honoured. `ignored`: accepted and without effect, because it cannot
 * change the output: `user`, `safety_identifier` (an end-user id for abuse
 * monitoring), `prompt_cache_key`, `cache_prompt` (cache routing hints:
 * dotllm always reuses a slot's cached prefix), `service_tier`, `metadata`
 * (billing and storage tags). `checked`: accepted only at the value that
 * means "nothing", else 400 (`store: false`, `echo: false`, `suffix: ""`,
 * `best_of` equal to `n`).
 * Anything else, and every field this table does not name (`mirostat`,
 * `n_probs`, `typical_p`, `functions`, ...), is a 400
 * naming the field: silently
 * ignoring a field would answer a different question than the one asked.
 */
export const REQUEST_FIELDS: Readonly<
  Record<"chat" | "completion", Readonly<Record<string, "implemented" | "ignored" | "checked">>>
> = (() => {
  const common = {
    model: "implemented",
    stream: "implemented",
    stream_options: "implemented",
    max_tokens: "implemented",
    n_predict: "implemented",
    n: "implemented",
    temperature: "implemented",
    top_p: "implemented",
    top_k: "implemented",
    min_p: "implemented",
    presence_penalty: "implemented",
    frequency_penalty: "implemented",
    repeat_penalty: "implemented",
    repeat_last_n: "implemented",
    seed: "implemented",
    stop: "implemented",
    ignore_eos: "implemented",
    logit_bias: "implemented",
    logprobs: "implemented",
    grammar: "implemented",
    json_schema: "implemented",
    response_format: "implemented",
    user: "ignored",
    safety_identifier: "ignored",
    prompt_cache_key: "ignored",
    cache_prompt: "ignored",
    service_tier: "ignored",
    metadata: "ignored",
    store: "checked",
  } as const;
  return {
    chat: {
      ...common,
      messages: "implemented",
      max_completion_tokens: "implemented",
      top_logprobs: "implemented",
      parallel_tool_calls: "implemented",
      tools: "implemented",
      tool_choice: "implemented",
      chat_template_kwargs: "implemented",
      reasoning_format: "implemented",
      reasoning_effort: "implemented",
    },
    completion: {
      ...common,
      prompt: "implemented",
      echo: "checked",
      suffix: "checked",
      best_of: "checked",
    },
  };
})();

function unsupported(param: string, why = "is not supported by this server"): never {
  throw new ApiError(400, `${param}: ${why}`, param, "unsupported_parameter");
}

/** 400 for a field dotllm does not implement, or a "checked" one at a value that means something. */
function refuseUnsupported(b: Record<string, unknown>, kind: "chat" | "completion"): void {
  const table = REQUEST_FIELDS[kind];
  for (const [name, v] of Object.entries(b)) {
    const what = Object.hasOwn(table, name) ? table[name] : undefined;
    if (what === undefined) unsupported(name);
    if (what !== "checked" || v === undefined || v === null) continue;
    switch (name) {
      case "store":
        if (v !== false) unsupported(name, "completions are not stored");
        break;
      case "echo":
        if (v !== false) unsupported(name, "echo is not supported");
        break;
      case "suffix":
        if (v !== "") unsupported(name, "insertion (a suffix) is not supported");
        break;
      case "best_of": {
        const n = b.n ?? 1;
        if (v !== n) unsupported(name, "best_of other than n is not supported");
        break;
      }
    }
  }
}

/** Most `logit_bias` entries (OpenAI allows 300; llama.cpp no limit): bounds the work per step. */
export const MAX_LOGIT_BIAS = 1024;

/**
 * `logit_bias` as `[token id, bias]` pairs: OpenAI's object of token-id
 * strings to biases in [-100, 100], or llama.cpp's array of `[id, bias]`
 * pairs; `false` as a bias (llama.cpp) bans the token (-Infinity). A token
 * given twice: the last bias wins. Token strings (llama.cpp also tokenizes
 * those) are refused.
 */
function parseLogitBias(body: Record<string, unknown>, vocabSize?: number): [number, number][] {
  const v = body.logit_bias;
  if (v === undefined || v === null) return [];
  let entries: [unknown, unknown][];
  if (isObject(v)) entries = Object.entries(v);
  else if (Array.isArray(v)) {
    entries = v.map((pair, i) => {
      if (!Array.isArray(pair) || pair.length !== 2) {
        bad(`logit_bias[${i}]`, `expected a [token id, bias] pair, got ${kind(pair)}`);
      }
      return [pair[0], pair[1]] as [unknown, unknown];
    });
  } else {
    bad("logit_bias", `expected an object of token ids to biases, got ${kind(v)}`);
  }
  if (entries.length > MAX_LOGIT_BIAS) bad("logit_bias", `at most ${MAX_LOGIT_BIAS} entries`);
  const out = new Map<number, number>();
  for (const [key, bias] of entries) {
    const id = typeof key === "string" && /^\d+$/.test(key) ? Number(key) : key;
    if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0) {
      bad("logit_bias", `expected token ids as keys, got ${JSON.stringify(key)}`);
    }
    if (vocabSize !== undefined && id >= vocabSize) {
      bad("logit_bias", `token id ${id} is outside the vocabulary [0, ${vocabSize})`);
    }
    let value: number;
    if (bias === false) value = -Infinity;
    else if (typeof bias === "number" && Number.isFinite(bias) && bias >= -100 && bias <= 100) {
      value = bias;
    } else {
      bad("logit_bias", `the bias of token ${id} must be a number in [-100, 100] or false`);
    }
    out.set(id, value);
  }
  return [...out];
}

/**
 * The GBNF text a request constrains its output to, from llama.cpp's
 * `grammar` and `json_schema` fields or OpenAI's `response_format` (`text`,
 * `json_object`, `json_schema`), at most one of them; undefined for none. A
 * schema is converted here (as llama.cpp converts it), so a keyword that
 * cannot be enforced is a 400 naming it; the grammar itself is compiled
 * against the vocabulary when the request starts (a 400 there too).
 */
function parseConstraint(body: Record<string, unknown>): string | undefined {
  const given: string[] = [];
  let grammar: string | undefined;
  let schema: { value: unknown; param: string } | undefined;
  const g = body.grammar;
  if (g !== undefined && g !== null) {
    if (typeof g !== "string") bad("grammar", `expected GBNF text, got ${kind(g)}`);
    if (g !== "") { // llama-server: an empty grammar is none
      grammar = g;
      given.push("grammar");
    }
  }
  const js = body.json_schema;
  if (js !== undefined && js !== null) {
    if (!isObject(js)) bad("json_schema", `expected a JSON Schema object, got ${kind(js)}`);
    schema = { value: js, param: "json_schema" };
    given.push("json_schema");
  }
  const rf = body.response_format;
  if (rf !== undefined && rf !== null) {
    if (!isObject(rf)) bad("response_format", `expected an object, got ${kind(rf)}`);
    switch (rf.type) {
      case "text":
        break;
      case "json_object": { // any JSON object, or llama.cpp's extension: a `schema` beside it
        const s = rf.schema ?? { type: "object" };
        if (!isObject(s)) bad("response_format.schema", `expected an object, got ${kind(s)}`);
        schema = { value: s, param: "response_format" };
        given.push("response_format");
        break;
      }
      case "json_schema": {
        const wrapper = rf.json_schema;
        if (!isObject(wrapper)) {
          bad(
            "response_format.json_schema",
            `expected {name, schema, strict}, got ${kind(wrapper)}`,
          );
        }
        const s = wrapper.schema ?? { type: "object" };
        if (!isObject(s)) {
          bad("response_format.json_schema.schema", `expected an object, got ${kind(s)}`);
        }
        schema = { value: s, param: "response_format" };
        given.push("response_format");
        break;
      }
      default:
        bad(
          "response_format",
          `type must be "text", "json_object" or "json_schema", got ${JSON.stringify(rf.type)}`,
        );
    }
  }
  if (given.length > 1) bad(given[1], `give one of ${given.join(" and ")}, not both`);
  if (grammar !== undefined) {
    // The syntax is checked here; token references are looked up in the vocabulary later.
    try {
      parseGbnf(grammar, "root", () => 0);
    } catch (error) {
      if (error instanceof GrammarError) bad("grammar", error.message.replace(/^grammar: /, ""));
      throw error;
    }
    return grammar;
  }
  if (schema === undefined) return undefined;
  // llama-server: an empty schema means any object
  const value = isObject(schema.value) && Object.keys(schema.value).length === 0
    ? { type: "object" }
    : schema.value;
  try {
    return jsonSchemaToGrammar(value);
  } catch (error) {
    if (error instanceof SchemaError) bad(schema.param, error.message);
    throw error;
  }
}

/** `messages` with the server's system message first, unless they start with their own. */
export function withSystem(messages: ChatMessage[], system: string | undefined): ChatMessage[] {
  if (system === undefined) return messages;
  const first = messages[0]?.role;
  if (first === "system" || first === "developer") return messages;
  return [{ role: "system", content: system }, ...messages];
}

/** Most stop strings per request (OpenAI allows 4; llama.cpp more): bounds the matcher's work. */
export const MAX_STOP_STRINGS = 16;
/** Most messages per chat request: bounds template rendering. */
export const MAX_MESSAGES = 4096;

/** A parsed generation request. */
export interface ParsedRequest {
  input: GenerateInput;
  /** A chat request's template and parser inputs (the handler plans the prompt from them). */
  chat?: ChatRequestInput;
  stream: boolean;
  includeUsage: boolean;
  /** Log-probabilities asked for. */
  logprobs: boolean;
  /** The `model` field as sent (echoed back when given). */
  model?: string;
}

function bad(param: string, message: string): never {
  throw new ApiError(400, `${param}: ${message}`, param, "invalid_value");
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A number field in [min, max], or undefined when absent/null. */
function optNumber(body: Record<string, unknown>, name: string, min: number, max: number) {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v)) bad(name, `expected a number, got ${kind(v)}`);
  if (v < min || v > max) bad(name, `must be in [${min}, ${max}], got ${v}`);
  return v;
}

/** An integer field in [min, max], or undefined when absent/null. */
function optInteger(body: Record<string, unknown>, name: string, min: number, max: number) {
  const v = optNumber(body, name, -Infinity, Infinity);
  if (v === undefined) return undefined;
  if (!Number.isInteger(v)) bad(name, `expected an integer, got ${v}`);
  if (v < min || v > max) bad(name, `must be an integer in [${min}, ${max}], got ${v}`);
  return v;
}

function optBoolean(body: Record<string, unknown>, name: string): boolean | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") bad(name, `expected a boolean, got ${kind(v)}`);
  return v;
}

function kind(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `${typeof v} ${JSON.stringify(v)}`.slice(0, 60);
}

/** The fields both endpoints share. */
function common(
  body: Record<string, unknown>,
  defaults: RequestDefaults,
  limits: RequestLimits,
) {
  const model = body.model;
  if (model !== undefined && model !== null && typeof model !== "string") {
    bad("model", `expected a string, got ${kind(model)}`);
  }
  const maxChoices = limits.maxChoices ?? 1;
  const n = optInteger(body, "n", 1, 2 ** 31 - 1) ?? 1;
  if (n > maxChoices) {
    bad("n", `at most ${maxChoices} choices per request (the server's slots), got ${n}`);
  }
  const stream = optBoolean(body, "stream") ?? false;
  let includeUsage = false;
  const so = body.stream_options;
  if (so !== undefined && so !== null) {
    if (!isObject(so)) bad("stream_options", `expected an object, got ${kind(so)}`);
    includeUsage = optBoolean(so, "include_usage") ?? false;
  }
  // Absent: the server's `-n` (its default and cap), else -1: until an end-of-generation
  // token or the end of the slot's context.
  // llama-server's `n_predict` works on every endpoint (-1: no limit but the cap)
  const nPredict = optInteger(body, "n_predict", -1, 2 ** 31 - 1);
  if (nPredict === 0) bad("n_predict", "0 generates nothing: give -1 (no limit) or a count >= 1");
  const asked = optInteger(body, "max_completion_tokens", 1, 2 ** 31 - 1) ??
    optInteger(body, "max_tokens", 1, 2 ** 31 - 1) ??
    (nPredict !== undefined && nPredict > 0 ? nPredict : undefined);
  const cap = defaults.maxTokens;
  const maxTokens = cap === undefined ? asked ?? -1 : Math.min(asked ?? cap, cap);
  const sampling: Partial<SamplerParams> = {};
  const set = <K extends keyof SamplerParams>(key: K, v: number | undefined) => {
    const value = v ?? defaults[key];
    if (value !== undefined) sampling[key] = value;
  };
  set("temperature", optNumber(body, "temperature", 0, 2));
  set("topP", optNumber(body, "top_p", 0, 1));
  set("topK", optInteger(body, "top_k", 0, 1 << 20));
  set("minP", optNumber(body, "min_p", 0, 1));
  set("presencePenalty", optNumber(body, "presence_penalty", -2, 2));
  set("frequencyPenalty", optNumber(body, "frequency_penalty", -2, 2));
  set("repeatPenalty", optNumber(body, "repeat_penalty", 0.01, 10));
  set("repeatLastN", optInteger(body, "repeat_last_n", 0, 1 << 16));
  const seed = optInteger(body, "seed", -(2 ** 53), 2 ** 53) ?? defaults.seed;
  let stop: string[] = [];
  const s = body.stop;
  if (typeof s === "string") stop = s === "" ? [] : [s];
  else if (Array.isArray(s)) {
    if (s.length > MAX_STOP_STRINGS) bad("stop", `at most ${MAX_STOP_STRINGS} stop strings`);
    for (const x of s) {
      if (typeof x !== "string" || x === "") bad("stop", "expected non-empty strings");
    }
    stop = s as string[];
  } else if (s !== undefined && s !== null) {
    bad("stop", `expected a string or an array of strings, got ${kind(s)}`);
  }
  return {
    n,
    logitBias: parseLogitBias(body, limits.vocabSize),
    grammar: parseConstraint(body),
    ignoreEos: optBoolean(body, "ignore_eos") ?? false,
    model: typeof model === "string" ? model : undefined,
    stream,
    includeUsage,
    maxTokens,
    sampling,
    // A seed outside 32 bits is folded in (OpenAI takes any integer).
    seed: seed === undefined || seed < 0 ? randomSeed() : seed % 2 ** 32,
    stop,
  };
}

function body(value: unknown): Record<string, unknown> {
  if (!isObject(value)) throw new ApiError(400, "the request body must be a JSON object");
  return value;
}

const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/**
 * A chat request's messages: an array of objects with a known role, passed
 * through as sent (the chat template validates the rest as llama.cpp does:
 * content, content parts, tool calls, tool results).
 */
function chatMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) {
    bad("messages", "expected a non-empty array of messages");
  }
  if (value.length > MAX_MESSAGES) bad("messages", `at most ${MAX_MESSAGES} messages`);
  for (const [i, m] of value.entries()) {
    if (!isObject(m)) bad(`messages[${i}]`, `expected an object, got ${kind(m)}`);
    if (typeof m.role !== "string" || !ROLES.has(m.role)) {
      bad(`messages[${i}].role`, `expected one of ${[...ROLES].join(", ")}`);
    }
  }
  return value as ChatMessage[];
}

/** llama-server's `reasoning_format` values (`deepseek-legacy` reads as `deepseek`). */
const REASONING_FORMATS = new Set(["none", "auto", "deepseek", "deepseek-legacy"]);

/**
 * The chat-only fields: `tools`, `tool_choice`, `parallel_tool_calls`
 * (llama-server's default: whether the template supports parallel calls; here
 * false unless asked), `chat_template_kwargs`, `reasoning_format` and
 * `reasoning_effort` (`"none"` turns thinking off; another value reaches the
 * template as its `reasoning_effort`).
 */
function parseChatFields(
  b: Record<string, unknown>,
  messages: ChatMessage[],
  defaults: RequestDefaults,
): ChatRequestInput {
  const chat: ChatRequestInput = { messages, enableThinking: defaults.enableThinking };
  try {
    if (b.tools !== undefined && b.tools !== null) {
      chat.tools = checkTools(b.tools);
      chat.toolChoice = checkToolChoice(b.tool_choice, chat.tools);
      chat.parallelToolCalls = checkParallelToolCalls(b.parallel_tool_calls);
    } else {
      const choice = checkToolChoice(b.tool_choice, []);
      if (choice !== "auto" && choice !== "none") bad("tool_choice", "needs tools");
      checkParallelToolCalls(b.parallel_tool_calls);
    }
  } catch (error) {
    if (error instanceof ToolRequestError) {
      bad(error.field, error.message.slice(error.field.length + 2));
    }
    throw error;
  }
  if (chat.tools !== undefined && chat.tools.length > 0 && chat.toolChoice !== "none") {
    for (const f of ["grammar", "json_schema", "response_format"]) {
      const v = b[f];
      if (v !== undefined && v !== null && !(isObject(v) && v.type === "text")) {
        bad(
          f,
          "cannot be combined with tools (the tool calls are constrained by their own grammar)",
        );
      }
    }
  }
  const kwargs = b.chat_template_kwargs;
  if (kwargs !== undefined && kwargs !== null) {
    if (!isObject(kwargs)) bad("chat_template_kwargs", `expected an object, got ${kind(kwargs)}`);
    chat.chatTemplateKwargs = { ...kwargs };
  }
  const effort = b.reasoning_effort;
  if (effort !== undefined && effort !== null) {
    if (typeof effort !== "string") {
      bad("reasoning_effort", `expected a string, got ${kind(effort)}`);
    }
    chat.reasoningEffort = effort;
  }
  const rf = b.reasoning_format ?? defaults.reasoningFormat;
  if (rf !== undefined && rf !== null) {
    if (typeof rf !== "string" || !REASONING_FORMATS.has(rf)) {
      bad("reasoning_format", `expected one of ${[...REASONING_FORMATS].join(", ")}`);
    }
    chat.reasoningFormat = rf === "deepseek-legacy" ? "deepseek" : rf as ReasoningFormat;
  }
  return chat;
}

/**
 * `POST /apply-template` (llama-server): `messages` with the chat fields
 * that change the rendering (`tools`, `chat_template_kwargs`,
 * `reasoning_effort`) and `add_generation_prompt` (default true).
 */
export function parseApplyTemplateRequest(
  value: unknown,
  defaults: RequestDefaults,
): { chat: ChatRequestInput; addGenerationPrompt: boolean } {
  const b = body(value);
  const messages = withSystem(chatMessages(b.messages), defaults.system);
  const addGenerationPrompt = optBoolean(b, "add_generation_prompt") ?? true;
  return { chat: parseChatFields(b, messages, defaults), addGenerationPrompt };
}

/** `POST /v1/chat/completions`. */
export function parseChatRequest(
  value: unknown,
  defaults: RequestDefaults,
  limits: RequestLimits = {},
): ParsedRequest {
  const b = body(value);
  refuseUnsupported(b, "chat");
  const messages = withSystem(chatMessages(b.messages), defaults.system);
  const c = common(b, defaults, limits);
  const logprobs = optBoolean(b, "logprobs") ?? false;
  const top = optInteger(b, "top_logprobs", 0, TOP_LOGPROBS_MAX);
  if (top !== undefined && !logprobs) bad("top_logprobs", "needs logprobs: true");
  const chat = parseChatFields(b, messages, defaults);
  // Structured output starts with the answer: a reasoning template is asked to close its
  // reasoning block (a grammar on the first token would otherwise cut the reasoning short).
  if (c.grammar !== undefined) chat.enableThinking = false;
  return {
    chat,
    input: {
      prompt: chat.enableThinking === undefined
        ? { messages }
        : { messages, enableThinking: chat.enableThinking },
      maxTokens: c.maxTokens,
      sampling: c.sampling,
      seed: c.seed,
      stop: c.stop,
      topLogprobs: logprobs ? top ?? 0 : -1,
      ignoreEos: c.ignoreEos,
      n: c.n,
      logitBias: c.logitBias,
      grammar: c.grammar,
    },
    stream: c.stream,
    includeUsage: c.includeUsage,
    logprobs,
    model: c.model,
  };
}

/** `POST /v1/completions`: `prompt` is a string, token ids, or a one-element array of either. */
export function parseCompletionRequest(
  value: unknown,
  defaults: RequestDefaults,
  limits: RequestLimits = {},
): ParsedRequest {
  const b = body(value);
  refuseUnsupported(b, "completion");
  let p = b.prompt;
  if (Array.isArray(p) && p.length === 1 && (typeof p[0] === "string" || Array.isArray(p[0]))) {
    p = p[0];
  }
  let prompt: GenerateInput["prompt"];
  if (typeof p === "string") prompt = { text: p };
  else if (Array.isArray(p) && p.length > 0 && p.every((t) => Number.isInteger(t) && t >= 0)) {
    prompt = { tokens: p as number[] };
  } else if (Array.isArray(p) && p.length > 1) {
    bad("prompt", "one prompt per request (no prompt arrays; n gives several choices)");
  } else {
    bad("prompt", `expected a string or an array of token ids, got ${kind(p)}`);
  }
  const c = common(b, defaults, limits);
  // Legacy completions: `logprobs` is the number of alternatives (0..5 in OpenAI; 20 here).
  const lp = optInteger(b, "logprobs", 0, TOP_LOGPROBS_MAX);
  return {
    input: {
      prompt,
      maxTokens: c.maxTokens,
      sampling: c.sampling,
      seed: c.seed,
      stop: c.stop,
      topLogprobs: lp ?? -1,
      ignoreEos: c.ignoreEos,
      n: c.n,
      logitBias: c.logitBias,
      grammar: c.grammar,
    },
    stream: c.stream,
    includeUsage: c.includeUsage,
    logprobs: lp !== undefined,
    model: c.model,
  };
}

/** `POST /tokenize` (llama.cpp): `{ content, add_special = false, parse_special = true }`. */
export function parseTokenizeRequest(value: unknown) {
  const b = body(value);
  if (typeof b.content !== "string") bad("content", `expected a string, got ${kind(b.content)}`);
  return {
    content: b.content,
    addSpecial: optBoolean(b, "add_special") ?? false,
    parseSpecial: optBoolean(b, "parse_special") ?? true,
    withPieces: optBoolean(b, "with_pieces") ?? false,
  };
}

/** `POST /detokenize` (llama.cpp): `{ tokens: number[] }`. */
export function parseDetokenizeRequest(value: unknown): number[] {
  const b = body(value);
  const t = b.tokens;
  if (!Array.isArray(t) || !t.every((x) => Number.isInteger(x))) {
    bad("tokens", "expected an array of integer token ids");
  }
  return t as number[];
}
