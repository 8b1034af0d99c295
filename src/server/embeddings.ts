/**
 * The embedding routes: OpenAI's `POST /v1/embeddings` (`input`: a string,
 * an array of strings, token ids, or arrays of token ids; `encoding_format`
 * `float` or `base64`; `usage`) and llama.cpp's `POST /embedding` (`content`,
 * a list of `{index, embedding: [[...]]}`). Requests are checked here (400
 * naming the field); the backend decodes the inputs together and pools them
 * as the model declares (mean for a decoder without a pooling type).
 *
 * @module
 */
import { ApiError } from "./protocol.ts";

/** One input: text (tokenized with BOS/EOS as the model asks) or token ids. */
export type EmbedPrompt =
  | { text: string }
  | { tokens: number[] }
  /** llama.cpp's mixed prompt: token ids and text (tokenized, the first with BOS/CLS) in order. */
  | { mixed: Array<string | number> };

/** An embedding request as the backend takes it (already validated). */
export interface EmbedInput {
  inputs: EmbedPrompt[];
  /** `common_embd_normalize`'s p (2: Euclidean). */
  normalize: number;
  /** llama.cpp's `/embedding`: with `--pooling none`, every token's vector (else a 400). */
  perToken: boolean;
}

/** What the backend answers: vectors and token counts, or a 400's message. */
export type EmbedOutput =
  | { embeddings: Float32Array[]; promptTokens: number[]; dimensions: number }
  | { error: string; param: string | null };

/** A parsed request. */
export interface EmbeddingRequest {
  readonly input: EmbedInput;
  readonly base64: boolean;
  readonly model?: string;
  /** llama.cpp's `/embedding` reply shape. */
  readonly llamaCpp: boolean;
}

/** Fields of `/v1/embeddings`; `user` and `model` change nothing. */
const OPENAI_FIELDS = new Set(["input", "model", "encoding_format", "user", "embd_normalize"]);
/** Fields of llama.cpp's `/embedding`. */
const LLAMA_FIELDS = new Set(["content", "input", "embd_normalize", "encoding_format", "model"]);

function isIds(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === "number");
}

function prompt(value: unknown, param: string, vocabSize: number): EmbedPrompt {
  // llama-server: "" embeds the special tokens alone
  if (typeof value === "string") return { text: value };
  // llama-server's object entries: `{ prompt_string }`, `{ content: [text parts] }` (joined)
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const o = value as Record<string, unknown>;
    const keys = Object.keys(o);
    if (keys.length === 1 && typeof o.prompt_string === "string") return { text: o.prompt_string };
    if (keys.length === 1 && Array.isArray(o.content) && o.content.length > 0) {
      let text = "";
      for (const [i, part] of o.content.entries()) {
        if (part?.type !== "text" || typeof part.text !== "string") {
          throw new ApiError(400, `${param}.content[${i}]: only text parts are supported`, param);
        }
        text += part.text;
      }
      return { text };
    }
    throw new ApiError(
      400,
      `${param}: expected { prompt_string } or { content: [text parts] }`,
      param,
    );
  }
  if (
    Array.isArray(value) && value.length > 0 &&
    value.every((x) => typeof x === "string" || typeof x === "number") &&
    value.some((x) => typeof x === "string") && value.some((x) => typeof x === "number")
  ) {
    for (const id of value) {
      if (typeof id === "number" && (!Number.isInteger(id) || id < 0 || id >= vocabSize)) {
        throw new ApiError(
          400,
          `${param}: token id ${id} is outside the vocabulary [0, ${vocabSize})`,
          param,
        );
      }
    }
    return { mixed: value as Array<string | number> };
  }
  if (isIds(value)) {
    for (const id of value) {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
        throw new ApiError(
          400,
          `${param}: token id ${id} is outside the vocabulary [0, ${vocabSize})`,
          param,
        );
      }
    }
    return { tokens: value };
  }
  throw new ApiError(400, `${param} must be a string or an array of token ids`, param);
}

/**
 * Checks an embedding request's body: every field implemented or a 400
 * naming it (`dimensions`, ... are refused), `input` non-empty.
 */
export function parseEmbeddingRequest(
  body: unknown,
  llamaCpp: boolean,
  vocabSize: number,
): EmbeddingRequest {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new ApiError(400, "the body must be a JSON object");
  }
  const b = body as Record<string, unknown>;
  const allowed = llamaCpp ? LLAMA_FIELDS : OPENAI_FIELDS;
  for (const key of Object.keys(b)) {
    if (!allowed.has(key)) {
      throw new ApiError(400, `"${key}" is not supported`, key, "unsupported_parameter");
    }
  }
  const field = b.input !== undefined ? "input" : "content";
  const value = b[field];
  if (value === undefined) throw new ApiError(400, `"input" is required`, "input");
  let inputs: EmbedPrompt[];
  const single = typeof value === "string" || isIds(value) ||
    (typeof value === "object" && value !== null && !Array.isArray(value)) ||
    (Array.isArray(value) && value.some((x) => typeof x === "number") &&
      value.every((x) => typeof x === "string" || typeof x === "number"));
  if (single) inputs = [prompt(value, field, vocabSize)];
  else if (Array.isArray(value)) {
    if (value.length === 0) throw new ApiError(400, `${field} is an empty array`, field);
    if (value.length > 2048) throw new ApiError(400, `${field} has more than 2048 entries`, field);
    inputs = value.map((v, i) => prompt(v, `${field}[${i}]`, vocabSize));
  } else {
    throw new ApiError(400, `${field} must be a string, an array of strings or token ids`, field);
  }
  const format = b.encoding_format ?? "float";
  if (format !== "float" && format !== "base64") {
    throw new ApiError(400, `encoding_format must be "float" or "base64"`, "encoding_format");
  }
  const normalize = b.embd_normalize ?? 2;
  if (typeof normalize !== "number" || !Number.isInteger(normalize) || normalize < -1) {
    throw new ApiError(400, "embd_normalize must be an integer >= -1", "embd_normalize");
  }
  if (b.model !== undefined && typeof b.model !== "string") {
    throw new ApiError(400, "model must be a string", "model");
  }
  return {
    input: { inputs, normalize, perToken: llamaCpp },
    base64: format === "base64",
    model: b.model as string | undefined,
    llamaCpp,
  };
}

function base64(v: Float32Array): string {
  const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

/** The response body of a request answered with `out`. */
export function embeddingResponse(
  request: EmbeddingRequest,
  out: { embeddings: Float32Array[]; promptTokens: number[]; dimensions: number },
  modelId: string,
): unknown {
  if (request.llamaCpp) {
    const E = out.dimensions;
    return out.embeddings.map((v, index) => ({
      index,
      embedding: Array.from(
        { length: v.length / E },
        (_, r) => Array.from(v.subarray(r * E, (r + 1) * E)),
      ),
    }));
  }
  const total = out.promptTokens.reduce((a, b) => a + b, 0);
  return {
    object: "list",
    data: out.embeddings.map((v, index) => ({
      object: "embedding",
      index,
      embedding: request.base64 ? base64(v) : Array.from(v),
    })),
    model: request.model ?? modelId,
    usage: { prompt_tokens: total, total_tokens: total },
  };
}
