/**
 * llama-server's native `POST /completion` (and `/completions` without
 * `/v1`): its request fields, translated onto the OpenAI completion request
 * the generation core already takes (`n_predict` is `max_tokens`, `n_probs`
 * is `logprobs`, ...), and its response: one object (`content`, `tokens`,
 * `stop_type`, `truncated`, `timings`, `generation_settings`, ...) or a
 * stream of such objects (`stop: false` per token, then one `stop: true`).
 * A field llama-server has and dotllm does not honour is a 400 naming it.
 *
 * @module
 */
import type { PromptInput } from "../backend.ts";
import {
  ApiError,
  parseCompletionRequest,
  type ParsedRequest,
  type RequestDefaults,
  type RequestLimits,
} from "../protocol.ts";
import type { SequenceEvent, TokenLogprob } from "../scheduler.ts";

/** llama-server's native fields read here (the rest go to the OpenAI parser, or are refused). */
const NATIVE_ONLY = new Set([
  "n_predict",
  "n_probs",
  "cache_prompt",
  "id_slot",
  "return_tokens",
  "response_fields",
  "samplers",
  "timings_per_token",
  "post_sampling_probs",
  "t_max_predict_ms",
  "n_cmpl",
]);

/** llama.cpp's default sampler chain, and the names of those dotllm runs (in its order). */
const DOTLLM_CHAIN = ["penalties", "top_k", "top_p", "min_p", "temperature"];
const SAMPLER_ALIASES: Record<string, string> = {
  k: "top_k",
  p: "top_p",
  m: "min_p",
  t: "temperature",
  top_k: "top_k",
  top_p: "top_p",
  min_p: "min_p",
  temperature: "temperature",
  temp: "temperature",
  penalties: "penalties",
  "top-k": "top_k",
  "top-p": "top_p",
  "min-p": "min_p",
};
/** Samplers llama.cpp has that are a no-op at their default values (so naming them is harmless). */
const NEUTRAL_SAMPLERS = new Set([
  "dry",
  "typ_p",
  "typical_p",
  "top_n_sigma",
  "xtc",
  "y",
  "d",
  "s",
  "x",
  "adaptive_p",
]);

/** A parsed native completion request: one or more prompts, and the native options. */
export interface NativeRequest {
  /** One entry per prompt (llama-server's batch prompts): text, ids, or ids and text to tokenize. */
  prompts: Array<PromptInput | { mixed: Array<string | number> }>;
  /** The OpenAI-shaped request for one prompt (its `prompt` replaced by each of `prompts`). */
  base: Record<string, unknown>;
  stream: boolean;
  nProbs: number;
  returnTokens: boolean;
  responseFields?: string[];
  idSlot: number;
  /** `n_predict` as given (for `generation_settings`). */
  nPredict?: number;
  /** Strings in `logit_bias` to tokenize (llama.cpp biases each of their tokens). */
  biasStrings: Array<[string, number | false]>;
  biasIds: Array<[number, number | false]>;
}

function bad(param: string, message: string): never {
  throw new ApiError(400, `${param}: ${message}`, param, "invalid_value");
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** One prompt: a string, token ids, ids mixed with strings, or `{ prompt_string }`. */
function onePrompt(p: unknown, param: string): NativeRequest["prompts"][number] {
  if (typeof p === "string") return { text: p };
  if (isObject(p)) {
    for (const k of Object.keys(p)) {
      if (k === "multimodal_data") bad(param, "multimodal input is not supported");
      if (k !== "prompt_string") bad(param, `unknown field ${JSON.stringify(k)}`);
    }
    if (typeof p.prompt_string !== "string") bad(param, "prompt_string must be a string");
    return { text: p.prompt_string };
  }
  if (Array.isArray(p) && p.length > 0) {
    if (p.every((t) => Number.isInteger(t))) return { tokens: p as number[] };
    if (p.every((t) => Number.isInteger(t) || typeof t === "string")) {
      return { mixed: p as Array<string | number> };
    }
  }
  bad(param, "expected a string, token ids, or an array of prompts");
}

/** Parses llama-server's `/completion` body (the OpenAI parser checks the shared fields later). */
export function parseNativeCompletion(value: unknown): NativeRequest {
  if (!isObject(value)) throw new ApiError(400, "the body must be a JSON object", null);
  const b = value;
  const p = b.prompt;
  if (p === undefined) bad("prompt", "missing");
  let prompts: NativeRequest["prompts"];
  if (Array.isArray(p) && p.length > 0 && p.some((x) => Array.isArray(x) || isObject(x))) {
    prompts = p.map((x, i) => onePrompt(x, `prompt[${i}]`));
  } else if (
    Array.isArray(p) && p.length > 1 && p.every((x) => typeof x === "string")
  ) {
    prompts = p.map((x, i) => onePrompt(x, `prompt[${i}]`));
  } else if (Array.isArray(p) && p.length === 1 && typeof p[0] === "string") {
    prompts = [{ text: p[0] }];
  } else {
    prompts = [onePrompt(p, "prompt")];
  }
  const base: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(b)) {
    if (!NATIVE_ONLY.has(k) && k !== "prompt" && k !== "logit_bias") base[k] = v;
  }
  const np = b.n_predict;
  let nPredict: number | undefined;
  if (np !== undefined && np !== null) {
    if (typeof np !== "number" || !Number.isInteger(np) || np < -1) {
      bad("n_predict", `expected an integer >= -1, got ${JSON.stringify(np)}`);
    }
    if (np === 0) bad("n_predict", "0 generates nothing: give -1 (no limit) or a count >= 1");
    nPredict = np;
    if (np > 0 && base.max_tokens === undefined) base.max_tokens = np;
  }
  const nProbs = b.n_probs ?? 0;
  if (typeof nProbs !== "number" || !Number.isInteger(nProbs) || nProbs < 0 || nProbs > 20) {
    bad("n_probs", `expected an integer in [0, 20], got ${JSON.stringify(nProbs)}`);
  }
  if (nProbs > 0) base.logprobs = nProbs;
  if (b.post_sampling_probs === true) {
    bad("post_sampling_probs", "probabilities after the sampler's truncation are not supported");
  }
  for (const k of ["cache_prompt", "return_tokens", "timings_per_token", "post_sampling_probs"]) {
    if (b[k] !== undefined && b[k] !== null && typeof b[k] !== "boolean") {
      bad(k, "expected a boolean");
    }
  }
  if (b.timings_per_token === true) {
    bad("timings_per_token", "per-token timings are not supported");
  }
  if (b.t_max_predict_ms !== undefined && b.t_max_predict_ms !== 0) {
    bad("t_max_predict_ms", "a time limit is not supported");
  }
  if (b.n_cmpl !== undefined && b.n_cmpl !== 1) base.n = b.n_cmpl;
  const idSlot = b.id_slot ?? -1;
  if (typeof idSlot !== "number" || !Number.isInteger(idSlot) || idSlot < -1) {
    bad("id_slot", `expected a slot id (or -1), got ${JSON.stringify(idSlot)}`);
  }
  if (idSlot !== -1) bad("id_slot", "choosing the slot is not supported (-1: any)");
  checkSamplers(b.samplers);
  let responseFields: string[] | undefined;
  const rf = b.response_fields;
  if (rf !== undefined && rf !== null) {
    if (!Array.isArray(rf) || !rf.every((x) => typeof x === "string")) {
      bad("response_fields", "expected an array of field names");
    }
    if (rf.length > 0) responseFields = rf as string[];
  }
  const biasStrings: NativeRequest["biasStrings"] = [];
  const biasIds: NativeRequest["biasIds"] = [];
  const lb = b.logit_bias;
  if (lb !== undefined && lb !== null) {
    const entries: [unknown, unknown][] = isObject(lb)
      ? Object.entries(lb)
      : Array.isArray(lb)
      ? lb.map((pair, i) => {
        if (!Array.isArray(pair) || pair.length !== 2) {
          bad(`logit_bias[${i}]`, "expected a [token id or string, bias] pair");
        }
        return [pair[0], pair[1]];
      })
      : bad("logit_bias", "expected an object or an array of pairs");
    for (const [key, bias] of entries) {
      if (bias !== false && (typeof bias !== "number" || !Number.isFinite(bias))) {
        bad("logit_bias", `the bias of ${JSON.stringify(key)} must be a number or false`);
      }
      const b2 = bias as number | false;
      if (typeof key === "number" || (typeof key === "string" && /^\d+$/.test(key))) {
        biasIds.push([Number(key), b2]);
      } else if (typeof key === "string") biasStrings.push([key, b2]);
      else bad("logit_bias", `expected a token id or a string, got ${JSON.stringify(key)}`);
    }
  }
  return {
    prompts,
    base,
    stream: b.stream === true,
    nProbs,
    returnTokens: b.return_tokens === true,
    responseFields,
    idSlot,
    nPredict,
    biasStrings,
    biasIds,
  };
}

/** `samplers`: accepted when it names dotllm's chain in its order (neutral samplers aside). */
function checkSamplers(v: unknown): void {
  if (v === undefined || v === null) return;
  let names: string[];
  if (typeof v === "string") names = [...v];
  else if (Array.isArray(v) && v.every((x) => typeof x === "string")) names = v as string[];
  else bad("samplers", "expected an array of sampler names or a string of their letters");
  const chain: string[] = [];
  for (const n of names) {
    const name = n.toLowerCase();
    if (NEUTRAL_SAMPLERS.has(name)) continue;
    const known = SAMPLER_ALIASES[name];
    if (known === undefined) bad("samplers", `sampler ${JSON.stringify(n)} is not supported`);
    chain.push(known);
  }
  let at = 0;
  for (const name of chain) {
    const i = DOTLLM_CHAIN.indexOf(name, at);
    if (i < 0) {
      bad(
        "samplers",
        `dotllm samples in the order ${DOTLLM_CHAIN.join(", ")}; ${JSON.stringify(names)} differs`,
      );
    }
    at = i + 1;
  }
}

/** The OpenAI-shaped request of one prompt of a native request. */
export function nativeToParsed(
  req: NativeRequest,
  prompt: PromptInput,
  logitBias: Array<[number, number | false]>,
  defaults: RequestDefaults,
  limits: RequestLimits,
): ParsedRequest {
  const body: Record<string, unknown> = { ...req.base, prompt: "" };
  if (logitBias.length > 0) body.logit_bias = logitBias;
  // nPredict -1: no limit but the server's -n (its cap)
  const parsed = parseCompletionRequest(body, defaults, limits);
  parsed.input.prompt = prompt;
  return parsed;
}

/** llama.cpp's `generation_settings` of a request. */
export function generationSettings(
  parsed: ParsedRequest,
  nProbs: number,
  model: string,
): Record<string, unknown> {
  const i = parsed.input;
  const s = i.sampling;
  return {
    seed: i.seed,
    temperature: s.temperature ?? 0.8,
    dynatemp_range: 0,
    dynatemp_exponent: 1,
    top_k: s.topK ?? 40,
    top_p: s.topP ?? 0.95,
    min_p: s.minP ?? 0.05,
    top_n_sigma: -1,
    xtc_probability: 0,
    xtc_threshold: 0.1,
    typical_p: 1,
    repeat_last_n: s.repeatLastN ?? 64,
    repeat_penalty: s.repeatPenalty ?? 1,
    presence_penalty: s.presencePenalty ?? 0,
    frequency_penalty: s.frequencyPenalty ?? 0,
    dry_multiplier: 0,
    dry_base: 1.75,
    dry_allowed_length: 2,
    dry_penalty_last_n: -1,
    mirostat: 0,
    mirostat_tau: 5,
    mirostat_eta: 0.1,
    adaptive_target: -1,
    adaptive_decay: 0.9,
    max_tokens: i.maxTokens,
    n_predict: i.maxTokens,
    n_keep: 0,
    n_discard: 0,
    ignore_eos: i.ignoreEos ?? false,
    stream: parsed.stream,
    n_probs: nProbs,
    min_keep: 0,
    samplers: DOTLLM_CHAIN,
    stop: i.stop,
    grammar: i.grammar ?? "",
    timings_per_token: false,
    post_sampling_probs: false,
    lora: [],
    model,
  };
}

type TokenItem = { token: number; text: string; logprob: number; top?: TokenLogprob[] };

const encoder = new TextEncoder();

/** Builds one prompt's native response from its events (see the handler's `ResponseBuilder`). */
export class NativeReply {
  content = "";
  readonly tokens: number[] = [];
  readonly probs: TokenItem[] = [];
  doneCount = 0;
  #final?: Record<string, unknown>;
  readonly doneMarker = false;

  constructor(
    readonly req: NativeRequest,
    readonly parsed: ParsedRequest,
    readonly promptText: string,
    readonly promptTokens: number,
    readonly model: string,
    readonly index = 0,
  ) {}

  get complete(): boolean {
    return this.doneCount >= 1;
  }

  #probs(items: TokenItem[]) {
    const entry = (t: { token: number; text: string; logprob: number }) => ({
      id: t.token,
      token: t.text,
      bytes: [...encoder.encode(t.text)],
      logprob: t.logprob,
    });
    return items.map((t) => ({ ...entry(t), top_logprobs: (t.top ?? []).map(entry) }));
  }

  add(e: SequenceEvent): void {
    if (e.type === "token") {
      this.content += e.text;
      this.tokens.push(e.token);
      if (this.req.nProbs > 0) this.probs.push({ ...e });
    } else if (e.type === "text") {
      this.content += e.text;
    } else if (e.type === "done") {
      this.doneCount++;
      const prompt_n = e.promptTokens - e.cachedTokens;
      const predicted = e.completionTokens;
      const prefill = e.timings.prefillMs, decode = e.timings.decodeMs;
      // the first token comes from the prompt's last row: the decode rate is over the rest
      const steps = Math.max(0, predicted - 1);
      this.#final = {
        id_slot: e.slot,
        stop: true,
        model: this.model,
        tokens_predicted: predicted,
        tokens_evaluated: e.promptTokens,
        generation_settings: generationSettings(this.parsed, this.req.nProbs, this.model),
        prompt: this.promptText,
        has_new_line: this.content.includes("\n"),
        truncated: e.truncated,
        stop_type: e.stopType,
        stopping_word: "",
        tokens_cached: e.promptTokens + predicted,
        timings: {
          cache_n: e.cachedTokens,
          prompt_n,
          prompt_ms: prefill,
          prompt_per_token_ms: prompt_n > 0 ? prefill / prompt_n : 0,
          prompt_per_second: prefill > 0 ? prompt_n / (prefill / 1000) : 0,
          predicted_n: predicted,
          predicted_ms: decode,
          predicted_per_token_ms: steps > 0 ? decode / steps : 0,
          predicted_per_second: steps > 0 && decode > 0 ? 1e3 / decode * steps : 0,
        },
      };
    }
  }

  /** The stream objects for one event: one per token, the final one at `done`. */
  chunks(e: SequenceEvent): unknown[] {
    this.add(e);
    if (e.type === "token" || (e.type === "text" && e.text !== "")) {
      const chunk: Record<string, unknown> = {
        index: this.index,
        content: e.text,
        tokens: e.type === "token" ? [e.token] : [],
        stop: false,
        id_slot: -1,
        tokens_predicted: this.tokens.length,
        tokens_evaluated: this.promptTokens,
      };
      if (e.type === "token" && this.req.nProbs > 0) {
        chunk.completion_probabilities = this.#probs([e]);
      }
      return [chunk];
    }
    if (e.type === "done") {
      return [{ index: this.index, content: "", tokens: [], ...this.#final }];
    }
    return [];
  }

  /** The non-streamed response (`response_fields` picks fields, `a/b` reaching inside). */
  whole(): unknown {
    const all: Record<string, unknown> = {
      index: this.index,
      content: this.content,
      tokens: this.req.returnTokens ? this.tokens : [],
      ...this.#final,
    };
    if (this.req.nProbs > 0) all.completion_probabilities = this.#probs(this.probs);
    const fields = this.req.responseFields;
    if (fields === undefined) return all;
    const out: Record<string, unknown> = {};
    for (const f of fields) {
      let v: unknown = all;
      for (const part of f.split("/")) v = isObject(v) ? v[part] : undefined;
      if (v !== undefined) out[f] = v;
    }
    return out;
  }
}
