/**
 * A SentencePiece vocabulary (`tokenizer.model`) as the GGUF `tokenizer.ggml.*`
 * keys `convert_hf_to_gguf.py` writes for it (`tokenizer.ggml.model` "llama"):
 * `_create_vocab_sentencepiece`'s tokens, scores and types (the model's
 * pieces, `added_tokens.json`, `tokenizer_config.json`'s
 * `added_tokens_decoder`, `[PADn]` up to the config's vocabulary size), or
 * Phi-3's variant of it (`Phi3MiniModel.set_vocab`: no range checks, no
 * look-special rule, `tokenizer.json`'s added tokens too), then gguf-py's
 * `SpecialVocab` (special ids, add-BOS/EOS, the chat template).
 *
 * @module
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { GgufValueType } from "../gguf/reader.ts";
import { CONFIG_LIMITS } from "../model/config.ts";
import { meta } from "../gguf/writer.ts";
import { ConvertError } from "./errors.ts";
import { PieceType, readSentencePieceModel } from "./sentencepiece.ts";
import {
  CONTROL,
  looksSpecial,
  type Metadata,
  NORMAL,
  readJson,
  specialVocab,
  UNUSED,
  USER_DEFINED,
} from "./vocab.ts";

/** The largest vocabulary written: the largest dotllm loads (2^22; real ones reach ~262k). */
const MAX_VOCAB = CONFIG_LIMITS.vocabSizeMax;

/** gguf's `TokenType` numbers for the UNKNOWN and BYTE pieces. */
const UNKNOWN = 2, BYTE = 6;

/** Which reference function writes the vocabulary. */
export type SentencePieceVariant = "default" | "phi3";

/** Tokens, scores and types by id. */
export interface SentencePieceVocab {
  tokens: string[];
  scores: number[];
  types: number[];
}

type Json = Record<string, unknown>;

/** A token id of a JSON file: a non-negative integer (Python would index from the end). */
function tokenId(file: string, value: unknown): number {
  const id = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0) {
    throw new ConvertError(
      `${file}: token id ${JSON.stringify(value)} is not a non-negative integer`,
    );
  }
  return id;
}

/**
 * The vocabulary of the folder's `tokenizer.model` (`vocabSize`: the config's
 * `vocab_size`, else the model's piece count).
 */
export function sentencePieceVocab(
  dir: string,
  vocabSize: number | undefined,
  variant: SentencePieceVariant = "default",
): SentencePieceVocab {
  const path = join(dir, "tokenizer.model");
  if (!existsSync(path)) throw new ConvertError(`${dir}: no tokenizer.model`);
  const { pieces } = readSentencePieceModel(path);
  const n = vocabSize || pieces.length;
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_VOCAB) {
    throw new ConvertError(
      `config.json: vocab_size ${JSON.stringify(vocabSize)} is not 1 to ${MAX_VOCAB}`,
    );
  }
  const phi3 = variant === "phi3";
  const tokens: string[] = [], scores: number[] = [], types: number[] = [];
  for (let i = 0; i < n; i++) {
    tokens.push(`[PAD${i}]`);
    scores.push(-10000);
    types.push(UNUSED);
  }
  const outOfRange = (file: string, id: number) => {
    // Phi3MiniModel indexes without a check: Python stops with an IndexError.
    if (phi3) throw new ConvertError(`${file}: token id ${id} is past vocab_size ${n}`);
  };
  for (let id = 0; id < pieces.length; id++) {
    if (id >= n) {
      outOfRange("tokenizer.model", id);
      break;
    }
    const p = pieces[id];
    tokens[id] = p.piece;
    scores[id] = p.score;
    types[id] = p.type === PieceType.UNKNOWN
      ? UNKNOWN
      : p.type === PieceType.CONTROL
      ? CONTROL
      : p.type === PieceType.UNUSED
      ? UNUSED
      : p.type === PieceType.BYTE
      ? BYTE
      : NORMAL; // NORMAL and USER_DEFINED pieces alike (SentencePieceProcessor has no IsUserDefined)
  }
  const added = readJson(dir, "added_tokens.json");
  for (const [token, value] of Object.entries(added ?? {})) {
    const id = tokenId("added_tokens.json", value);
    if (id >= n) {
      outOfRange("added_tokens.json", id);
      continue;
    }
    tokens[id] = token;
    scores[id] = -1000;
    types[id] = USER_DEFINED;
  }
  const set = (file: string, id: number, data: unknown) => {
    const content = (data as Json | null)?.content;
    if (typeof content !== "string") throw new ConvertError(`${file}: token ${id} has no content`);
    if (id >= n) {
      outOfRange(file, id);
      return;
    }
    const special = (data as Json).special;
    if (phi3) {
      tokens[id] = content;
      types[id] = special ? CONTROL : USER_DEFINED;
    } else if (special || looksSpecial(content)) {
      tokens[id] = content;
      types[id] = CONTROL;
    } else {
      tokens[id] = content.replaceAll("\u2581", " "); // pre-normalized user-defined spaces
      types[id] = USER_DEFINED;
    }
    scores[id] = -1000;
  };
  const decoder = readJson(dir, "tokenizer_config.json")?.added_tokens_decoder;
  if (decoder !== undefined && (decoder === null || typeof decoder !== "object")) {
    throw new ConvertError("tokenizer_config.json: added_tokens_decoder is not an object");
  }
  for (const [key, data] of Object.entries((decoder ?? {}) as Json)) {
    set("tokenizer_config.json", tokenId("tokenizer_config.json", key), data);
  }
  if (phi3) {
    const addedTokens = readJson(dir, "tokenizer.json")?.added_tokens ?? [];
    if (!Array.isArray(addedTokens)) {
      throw new ConvertError("tokenizer.json: added_tokens is not a list");
    }
    for (const data of addedTokens as Json[]) {
      set("tokenizer.json", tokenId("tokenizer.json", (data as Json | null)?.id), data);
    }
  }
  return { tokens, scores, types };
}

/**
 * The `tokenizer.ggml.*` keys of the folder's SentencePiece vocabulary, in
 * `_set_vocab_sentencepiece`'s order.
 */
export function sentencePieceMetadata(
  dir: string,
  vocabSize: number | undefined,
  variant: SentencePieceVariant = "default",
): Metadata {
  const { tokens, scores, types } = sentencePieceVocab(dir, vocabSize, variant);
  return [
    ["tokenizer.ggml.model", meta.string("llama")],
    ["tokenizer.ggml.pre", meta.string("default")],
    ["tokenizer.ggml.tokens", meta.array(GgufValueType.STRING, tokens)],
    ["tokenizer.ggml.scores", meta.array(GgufValueType.FLOAT32, scores)],
    ["tokenizer.ggml.token_type", meta.array(GgufValueType.INT32, types)],
    ...specialVocab(dir, readJson(dir, "tokenizer.json"), tokens.length, false),
  ];
}
