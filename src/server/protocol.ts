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
import type { ChatMessage } from "./chat_prompt.ts";
import { MAX_TOP_LOGPROBS } from "./scheduler.ts";

/** An error answered as OpenAI's `{ "error": { message, type, param, code } }`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly type: string = status >= 500 ? "server_error" : "invalid_request_error",
  ) {
    super(message);
    this.name = "ApiError";
  }

  /** The JSON body. */
  toJSON(): {
    error: { message: string; type: string; param: string | null; code: string | null };
  } {
    return {
      error: { message: this.message, type: this.type, param: this.param, code: this.code },
    };
  }
}

/** Server-wide sampling defaults (`dotllm serve --temp ...`); requests override them. */
export type SamplingDefaults = Partial<SamplerParams> & { seed?: number };

/** Most stop strings per request (OpenAI allows 4; llama.cpp more): bounds the matcher's work. */
export const MAX_STOP_STRINGS = 16;
/** Most messages per chat request: bounds template rendering. */
export const MAX_MESSAGES = 4096;

/** A parsed generation request. */
export interface ParsedRequest {
  input: GenerateInput;
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
function common(body: Record<string, unknown>, defaults: SamplingDefaults) {
  const model = body.model;
  if (model !== undefined && model !== null && typeof model !== "string") {
    bad("model", `expected a string, got ${kind(model)}`);
  }
  optInteger(body, "n", 1, 1); // one choice per request
  const stream = optBoolean(body, "stream") ?? false;
  let includeUsage = false;
  const so = body.stream_options;
  if (so !== undefined && so !== null) {
    if (!isObject(so)) bad("stream_options", `expected an object, got ${kind(so)}`);
    includeUsage = optBoolean(so, "include_usage") ?? false;
  }
  // -1 (absent): until an end-of-generation token or the end of the slot's context.
  const maxTokens = optInteger(body, "max_completion_tokens", 1, 2 ** 31 - 1) ??
    optInteger(body, "max_tokens", 1, 2 ** 31 - 1) ?? -1;
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

/** The text of a message's `content`: a string or an array of `{ type: "text", text }` parts. */
function messageContent(v: unknown, at: string): string {
  if (typeof v === "string") return v;
  if (v === null || v === undefined) return "";
  if (Array.isArray(v)) {
    let text = "";
    for (const [i, part] of v.entries()) {
      if (!isObject(part) || part.type !== "text" || typeof part.text !== "string") {
        bad(`${at}[${i}]`, "only text content parts are supported");
      }
      text += part.text;
    }
    return text;
  }
  bad(at, `expected a string or an array of text parts, got ${kind(v)}`);
}

const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/** The messages of a chat request (or `/apply-template`). */
export function parseMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) {
    bad("messages", "expected a non-empty array of messages");
  }
  if (value.length > MAX_MESSAGES) bad("messages", `at most ${MAX_MESSAGES} messages`);
  return value.map((m, i) => {
    if (!isObject(m)) bad(`messages[${i}]`, `expected an object, got ${kind(m)}`);
    if (typeof m.role !== "string" || !ROLES.has(m.role)) {
      bad(`messages[${i}].role`, `expected one of ${[...ROLES].join(", ")}`);
    }
    return { role: m.role, content: messageContent(m.content, `messages[${i}].content`) };
  });
}

/** `POST /v1/chat/completions`. */
export function parseChatRequest(value: unknown, defaults: SamplingDefaults): ParsedRequest {
  const b = body(value);
  const messages = parseMessages(b.messages);
  const c = common(b, defaults);
  const logprobs = optBoolean(b, "logprobs") ?? false;
  const top = optInteger(b, "top_logprobs", 0, MAX_TOP_LOGPROBS);
  if (top !== undefined && !logprobs) bad("top_logprobs", "needs logprobs: true");
  return {
    input: {
      prompt: { messages },
      maxTokens: c.maxTokens,
      sampling: c.sampling,
      seed: c.seed,
      stop: c.stop,
      topLogprobs: logprobs ? top ?? 0 : -1,
      ignoreEos: c.ignoreEos,
    },
    stream: c.stream,
    includeUsage: c.includeUsage,
    logprobs,
    model: c.model,
  };
}

/** `POST /v1/completions`: `prompt` is a string, token ids, or a one-element array of either. */
export function parseCompletionRequest(value: unknown, defaults: SamplingDefaults): ParsedRequest {
  const b = body(value);
  let p = b.prompt;
  if (Array.isArray(p) && p.length === 1 && (typeof p[0] === "string" || Array.isArray(p[0]))) {
    p = p[0];
  }
  let prompt: GenerateInput["prompt"];
  if (typeof p === "string") prompt = { text: p };
  else if (Array.isArray(p) && p.length > 0 && p.every((t) => Number.isInteger(t) && t >= 0)) {
    prompt = { tokens: p as number[] };
  } else if (Array.isArray(p) && p.length > 1) {
    bad("prompt", "one prompt per request (n = 1, no prompt arrays)");
  } else {
    bad("prompt", `expected a string or an array of token ids, got ${kind(p)}`);
  }
  const c = common(b, defaults);
  // Legacy completions: `logprobs` is the number of alternatives (0..5 in OpenAI; 20 here).
  const lp = optInteger(b, "logprobs", 0, MAX_TOP_LOGPROBS);
  if (optBoolean(b, "echo")) bad("echo", "echo is not supported");
  return {
    input: {
      prompt,
      maxTokens: c.maxTokens,
      sampling: c.sampling,
      seed: c.seed,
      stop: c.stop,
      topLogprobs: lp ?? -1,
      ignoreEos: c.ignoreEos,
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
