/**
 * llama-server's `POST /infill` (fill-in-the-middle, as editor plugins use
 * it): `input_prefix`, `input_suffix`, `input_extra` (other files, `{
 * filename, text }`) and an optional `prompt` are built into one prompt with
 * the model's FIM tokens as llama.cpp's `format_prompt_infill` builds it
 * (the repository pattern `[FIM_REP]myproject\n[FIM_SEP]file\n...`, then
 * `[FIM_PRE]prefix[FIM_SUF]suffix[FIM_MID]prompt`, prefix and suffix cut to
 * fit a batch 3:1), then answered as `/completion`. A model without FIM
 * tokens is a 501, as llama-server.
 *
 * @module
 */
import { ApiError } from "../protocol.ts";

/** A model's FIM token ids (-1: none). */
export interface FimTokens {
  pre: number;
  suf: number;
  mid: number;
  rep: number;
  sep: number;
}

const TEXTS: Record<keyof FimTokens, string[]> = {
  pre: ["<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>"],
  suf: ["<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>"],
  mid: ["<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>"],
  rep: ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"],
  sep: ["<|file_sep|>"],
};

/**
 * The FIM ids: the GGUF's `tokenizer.ggml.fim_{pre,suf,mid,rep,sep}_token_id`,
 * else found by their usual texts (llama.cpp's vocabulary loader does both).
 */
export function fimTokens(
  metadata: { get(key: string): unknown },
  tokens: readonly string[],
): FimTokens {
  const index = new Map<string, number>();
  tokens.forEach((t, i) => {
    if (!index.has(t)) index.set(t, i);
  });
  const out = { pre: -1, suf: -1, mid: -1, rep: -1, sep: -1 };
  for (const k of Object.keys(out) as (keyof FimTokens)[]) {
    const v = metadata.get(`tokenizer.ggml.fim_${k}_token_id`);
    if (typeof v === "number" || typeof v === "bigint") out[k] = Number(v);
    else {
      for (const t of TEXTS[k]) {
        const id = index.get(t);
        if (id !== undefined) {
          out[k] = id;
          break;
        }
      }
    }
  }
  return out;
}

/** An `/infill` request: its FIM fields, and the rest for `/completion`. */
export interface InfillRequest {
  prefix: string;
  suffix: string;
  extra: Array<{ filename: string; text: string }>;
  /** `prompt` (text after the middle token); "" when absent. */
  prompt: string;
  rest: Record<string, unknown>;
}

function bad(param: string, message: string): never {
  throw new ApiError(400, `${param}: ${message}`, param, "invalid_value");
}

/** Checks `/infill`'s own fields (the rest are `/completion`'s). */
export function parseInfillRequest(value: unknown): InfillRequest {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ApiError(400, "the body must be a JSON object");
  }
  const { input_prefix, input_suffix, input_extra, prompt, ...rest } = value as Record<
    string,
    unknown
  >;
  const text = (v: unknown, name: string) => {
    if (v === undefined || v === null) return "";
    if (typeof v !== "string") bad(name, "expected a string");
    return v;
  };
  const extra: InfillRequest["extra"] = [];
  if (input_extra !== undefined && input_extra !== null) {
    if (!Array.isArray(input_extra)) bad("input_extra", "expected an array of { filename, text }");
    for (const [i, c] of input_extra.entries()) {
      if (typeof c !== "object" || c === null || Array.isArray(c)) {
        bad(`input_extra[${i}]`, "expected { filename, text }");
      }
      const o = c as Record<string, unknown>;
      for (const k of Object.keys(o)) {
        if (k !== "filename" && k !== "text") bad(`input_extra[${i}]`, `unknown field "${k}"`);
      }
      extra.push({
        filename: o.filename === undefined ? "tmp" : text(o.filename, `input_extra[${i}].filename`),
        text: text(o.text, `input_extra[${i}].text`),
      });
    }
  }
  return {
    prefix: text(input_prefix, "input_prefix"),
    suffix: text(input_suffix, "input_suffix"),
    extra,
    prompt: text(prompt, "prompt"),
    rest,
  };
}

/** What the prompt is built with. */
export interface InfillContext {
  fim: FimTokens;
  /** Text to ids without special tokens (llama.cpp: `add_special` and `parse_special` false). */
  tokenize(text: string): Promise<number[]>;
  /** The BOS id when the model adds one, else -1. */
  bos: number;
  batchSize: number;
  contextSize: number;
  /** The request's token limit (-1: none). */
  nPredict: number;
}

/** The prompt's token ids, as `format_prompt_infill` (not the SPM order) builds them. */
export async function infillPrompt(req: InfillRequest, c: InfillContext): Promise<number[]> {
  const { fim } = c;
  if (fim.pre < 0 || fim.suf < 0 || fim.mid < 0) {
    throw new ApiError(
      501,
      "this model has no fill-in-the-middle tokens (FIM prefix, suffix and middle)",
      null,
      "not_supported",
      "not_supported_error",
    );
  }
  let prefix = await c.tokenize(req.prefix);
  let suffix = await c.tokenize(req.suffix);
  const prompt = await c.tokenize(req.prompt);
  const extra: number[] = [];
  if (fim.rep >= 0) extra.push(fim.rep, ...await c.tokenize("myproject\n"));
  for (const chunk of req.extra) {
    if (fim.sep >= 0) extra.push(fim.sep, ...await c.tokenize(chunk.filename + "\n"));
    else extra.push(...await c.tokenize("\n\n--- snippet ---\n\n"));
    extra.push(...await c.tokenize(chunk.text));
  }
  if (fim.sep >= 0) extra.push(fim.sep, ...await c.tokenize("filename\n"));
  const b = c.batchSize;
  const prefixTake = Math.min(prefix.length, 3 * Math.floor(b / 4));
  const suffixTake = Math.min(suffix.length, Math.max(0, Math.floor(b / 4) - (2 + prompt.length)));
  const nPredict = c.nPredict < 0 ? 0 : c.nPredict;
  const extraTake = Math.min(Math.max(0, c.contextSize - b - 2 * nPredict), extra.length);
  prefix = prefix.slice(prefix.length - prefixTake);
  suffix = suffix.slice(0, suffixTake);
  const head = [fim.pre, ...prefix, ...prompt];
  const tail = [fim.suf, ...suffix];
  if (c.bos >= 0) head.unshift(c.bos);
  return [...extra.slice(extra.length - extraTake), ...head, ...tail, fim.mid];
}
