/**
 * The vocabulary of a model, read once from GGUF `tokenizer.ggml.*` metadata
 * with llama.cpp's defaults per tokenizer type, its special-token detection
 * and its end-of-generation set. Every array length, element type, id and
 * merge is checked; a problem is a {@linkcode TokenizerError} naming the key.
 *
 * @module
 */
import { type Gguf, GgufArray, type GgufValue, GgufValueType } from "../gguf/reader.ts";
import { PairMap } from "./_pair_map.ts";
import { TokenIndex } from "./_token_index.ts";
import { type PreTokenizer, preTokenizer } from "./pretokenize.ts";

/** A malformed or unsupported tokenizer in a GGUF file, or a bad token id. */
export class TokenizerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TokenizerError";
  }
}

/** Token attribute bits (llama.cpp's `llama_token_attr`). */
export const TokenAttr = {
  UNDEFINED: 0,
  UNKNOWN: 1,
  UNUSED: 2,
  NORMAL: 4,
  CONTROL: 8,
  USER_DEFINED: 16,
  BYTE: 32,
  LSTRIP: 128,
  RSTRIP: 256,
} as const;

/** `tokenizer.ggml.token_type` values → attributes (types 1..6; others undefined). */
const TYPE_TO_ATTR = [
  TokenAttr.UNDEFINED,
  TokenAttr.NORMAL,
  TokenAttr.UNKNOWN,
  TokenAttr.CONTROL,
  TokenAttr.USER_DEFINED,
  TokenAttr.UNUSED,
  TokenAttr.BYTE,
];

/** The tokenizer algorithm. */
export type VocabKind = "spm" | "bpe" | "wpm";

/** Largest vocabulary accepted (ids are int32 in llama.cpp). */
export const VOCAB_SIZE_MAX = 0x7fffffff;

/** A loaded vocabulary. Immutable after `loadVocab`. */
export interface Vocab {
  readonly kind: VocabKind;
  /** `tokenizer.ggml.model`. */
  readonly model: string;
  /** The pre-tokenizer (BPE only). */
  readonly pre?: PreTokenizer;
  readonly tokens: readonly string[];
  readonly scores: Float32Array;
  readonly attrs: Uint16Array;
  readonly tokenToId: TokenIndex;
  /** BPE merge rank of a pair of token ids (-1: no merge). */
  readonly mergeRanks: PairMap;
  /**
   * The token id of each merge's result (by rank), -1 when it is not a token; filled on
   * first use by `mergeResult` (a cache: looking all up at load time costs ~0.4 s for Llama 3).
   */
  readonly mergeResults: Int32Array;
  readonly bos: number;
  readonly eos: number;
  readonly eot: number;
  readonly eom: number;
  readonly unk: number;
  readonly sep: number;
  readonly pad: number;
  readonly addBos: boolean;
  readonly addEos: boolean;
  readonly addSpacePrefix: boolean;
  readonly ignoreMerges: boolean;
  readonly cleanSpaces: boolean;
  /** Ids that end generation. */
  readonly eog: ReadonlySet<number>;
  /** Control, user-defined and unknown tokens, longest text first. */
  readonly specialTokens: readonly number[];
  /** Longest token text in UTF-16 units. */
  readonly maxTokenLength: number;
}

/** The id meaning "no token". */
export const NO_TOKEN = -1;

const MERGE_RESULT_UNKNOWN = -2;

/** The token made by merge `rank` of tokens `left` and `right` (or -1). */
export function mergeResult(vocab: Vocab, rank: number, left: number, right: number): number {
  let id = vocab.mergeResults[rank];
  if (id === MERGE_RESULT_UNKNOWN) {
    id = vocab.tokenToId.get(vocab.tokens[left] + vocab.tokens[right]) ?? NO_TOKEN;
    vocab.mergeResults[rank] = id;
  }
  return id;
}

function get(gguf: Gguf, key: string): GgufValue | undefined {
  return gguf.metadata.get(key);
}

function getString(gguf: Gguf, key: string): string | undefined {
  const v = get(gguf, key);
  if (v === undefined) return undefined;
  if (typeof v !== "string") throw new TokenizerError(`${key} must be a string`);
  return v;
}

function getBool(gguf: Gguf, key: string): boolean | undefined {
  const v = get(gguf, key);
  if (v === undefined) return undefined;
  if (typeof v !== "boolean") throw new TokenizerError(`${key} must be a bool`);
  return v;
}

function getId(gguf: Gguf, key: string): number | undefined {
  const v = get(gguf, key);
  if (v === undefined) return undefined;
  if (typeof v === "bigint") return v >= 0n && v <= 0xffffffffn ? Number(v) : 0xffffffff;
  if (typeof v !== "number" || !Number.isInteger(v)) {
    throw new TokenizerError(`${key} must be an integer`);
  }
  return v;
}

function getArray(gguf: Gguf, key: string, n: number | undefined): GgufArray | undefined {
  const v = get(gguf, key);
  if (v === undefined) return undefined;
  if (!(v instanceof GgufArray)) throw new TokenizerError(`${key} must be an array`);
  if (n !== undefined && v.length !== n) {
    throw new TokenizerError(`${key} has ${v.length} entries but the vocabulary has ${n} tokens`);
  }
  return v;
}

const NUMERIC_TYPES: ReadonlySet<number> = new Set([
  GgufValueType.UINT8,
  GgufValueType.INT8,
  GgufValueType.UINT16,
  GgufValueType.INT16,
  GgufValueType.UINT32,
  GgufValueType.INT32,
  GgufValueType.FLOAT32,
  GgufValueType.FLOAT64,
]);

function numbers(array: GgufArray, key: string): ArrayLike<number> {
  if (!NUMERIC_TYPES.has(array.type)) {
    throw new TokenizerError(`${key} must be an array of numbers`);
  }
  return array.values as ArrayLike<number>;
}

const EOT_TEXTS = [
  "<|eot_id|>",
  "<|im_end|>",
  "<|end|>",
  "<end_of_turn>",
  "<|endoftext|>",
  "<EOT>",
  "<｜end▁of▁sentence｜>",
];
const EOG_TEXTS = new Set([
  "<|eot_id|>",
  "<|im_end|>",
  "<|end|>",
  "<end_of_turn>",
  "<|endoftext|>",
  "<|eom_id|>",
  "<EOT>",
]);
const FIM_PAD_TEXTS = ["<|fim_pad|>", "<fim-pad>", "<PAD>"];
const FIM_REP_TEXTS = ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"];
const FIM_SEP_TEXTS = ["<|file_sep|>"];
const FIM_OTHER_TEXTS = [
  "<|fim_prefix|>",
  "<fim-prefix>",
  "<｜fim▁begin｜>",
  "<PRE>",
  "<|fim_suffix|>",
  "<fim-suffix>",
  "<｜fim▁hole｜>",
  "<SUF>",
  "<|fim_middle|>",
  "<fim-middle>",
  "<｜fim▁end｜>",
  "<MID>",
];

/**
 * Reads the vocabulary of a parsed GGUF file.
 *
 * @example
 * ```ts
 * import { parseGguf } from "../gguf/reader.ts";
 * import { loadVocab } from "./vocab.ts";
 * const vocab = loadVocab(parseGguf(Deno.readFileSync("model.gguf")));
 * console.log(vocab.kind, vocab.tokens.length);
 * ```
 */
export function loadVocab(gguf: Gguf): Vocab {
  const model = getString(gguf, "tokenizer.ggml.model");
  if (model === undefined) throw new TokenizerError("no tokenizer.ggml.model in the file");
  let kind: VocabKind;
  let bos = 1, eos = 2, unk = 0, sep = NO_TOKEN, pad = NO_TOKEN;
  let addBos = false, addEos = false, addSpacePrefix = false;
  let ignoreMerges = false, cleanSpaces = false;
  let pre: PreTokenizer | undefined;
  if (model === "llama") {
    kind = "spm";
    addSpacePrefix = true;
    addBos = true;
  } else if (model === "gpt2") {
    kind = "bpe";
    bos = 11;
    eos = 11;
    unk = NO_TOKEN;
    const preName = getString(gguf, "tokenizer.ggml.pre") ?? "default";
    pre = preTokenizer(preName);
    if (pre === undefined) {
      throw new TokenizerError(`unknown pre-tokenizer type "${preName}" (tokenizer.ggml.pre)`);
    }
    ignoreMerges = pre.ignoreMerges;
    cleanSpaces = pre.cleanSpaces;
    addBos = pre.addBos;
    if (pre.noBos) bos = NO_TOKEN;
  } else if (model === "bert") {
    kind = "wpm";
    bos = 101;
    eos = NO_TOKEN;
    unk = 100;
    sep = 102;
    pad = 0;
    addBos = true;
    cleanSpaces = true;
  } else {
    throw new TokenizerError(`tokenizer "${model}" (tokenizer.ggml.model) is not supported`);
  }
  addSpacePrefix = getBool(gguf, "tokenizer.ggml.add_space_prefix") ?? addSpacePrefix;

  const tokenArray = getArray(gguf, "tokenizer.ggml.tokens", undefined);
  if (tokenArray === undefined) throw new TokenizerError("no tokenizer.ggml.tokens in the file");
  if (tokenArray.type !== GgufValueType.STRING) {
    throw new TokenizerError("tokenizer.ggml.tokens must be an array of strings");
  }
  const n = tokenArray.length;
  if (n === 0) throw new TokenizerError("tokenizer.ggml.tokens is empty");
  if (n > VOCAB_SIZE_MAX) throw new TokenizerError(`too many tokens: ${n}`);
  const tokens = tokenArray.strings().slice();

  const scoreArray = getArray(gguf, "tokenizer.ggml.scores", n);
  const scores = new Float32Array(n);
  if (scoreArray) scores.set(numbers(scoreArray, "tokenizer.ggml.scores"));
  const typeArray = getArray(gguf, "tokenizer.ggml.token_type", n);
  const attrs = new Uint16Array(n).fill(TokenAttr.NORMAL);
  if (typeArray) {
    const types = numbers(typeArray, "tokenizer.ggml.token_type");
    for (let i = 0; i < n; i++) attrs[i] = TYPE_TO_ATTR[types[i]] ?? TokenAttr.UNDEFINED;
  }

  let maxTokenLength = 0;
  for (let i = 0; i < n; i++) {
    if (tokens[i].length === 0) tokens[i] = `[EMPTY_${i}]`;
    if (tokens[i].length > maxTokenLength) maxTokenLength = tokens[i].length;
  }
  // a repeated text (e.g. raw-byte tokens that all decode to U+FFFD) maps to its last
  // id, as llama.cpp's map does
  const tokenToId = new TokenIndex(tokens);

  let mergeRanks = new PairMap(0);
  let mergeResults = new Int32Array(0);
  if (kind === "bpe") {
    const mergeArray = getArray(gguf, "tokenizer.ggml.merges", undefined);
    if (mergeArray === undefined) throw new TokenizerError("no tokenizer.ggml.merges in the file");
    if (mergeArray.type !== GgufValueType.STRING) {
      throw new TokenizerError("tokenizer.ggml.merges must be an array of strings");
    }
    const merges = mergeArray.strings();
    mergeResults = new Int32Array(merges.length).fill(MERGE_RESULT_UNKNOWN);
    mergeRanks = new PairMap(merges.length);
    for (let i = 0; i < merges.length; i++) {
      const m = merges[i];
      const space = m.indexOf(" ", 1);
      const left = space < 0 ? -1 : tokenToId.find(m, 0, space);
      const right = space < 0 ? -1 : tokenToId.find(m, space + 1);
      if (left < 0 || right < 0) {
        throw new TokenizerError(
          `tokenizer.ggml.merges[${i}] "${m}" names a token that is not in the vocabulary`,
        );
      }
      mergeRanks.setIfAbsent(left, right, i);
    }
  }

  // special ids from the file; out of range ones are ignored, as llama.cpp does
  const ids = { bos, eos, eot: NO_TOKEN, eom: NO_TOKEN, unk, sep, pad };
  const idKeys: Array<[keyof typeof ids, string]> = [
    ["bos", "bos_token_id"],
    ["eos", "eos_token_id"],
    ["eot", "eot_token_id"],
    ["eom", "eom_token_id"],
    ["unk", "unknown_token_id"],
    ["sep", "seperator_token_id"],
    ["pad", "padding_token_id"],
  ];
  for (const [field, key] of idKeys) {
    const v = getId(gguf, `tokenizer.ggml.${key}`);
    if (v !== undefined && v < n) ids[field] = v;
  }
  for (const field of ["bos", "eos", "unk", "sep", "pad"] as const) {
    if (ids[field] >= n) ids[field] = NO_TOKEN;
  }
  addBos = getBool(gguf, "tokenizer.ggml.add_bos_token") ?? addBos;
  addEos = getBool(gguf, "tokenizer.ggml.add_eos_token") ?? addEos;

  // detect EOT/EOM/FIM tokens by their text (llama.cpp's workaround), in id order
  const find = (texts: readonly string[]): number => {
    let best = NO_TOKEN;
    for (const t of texts) {
      const id = tokenToId.get(t);
      if (id !== undefined && (best === NO_TOKEN || id < best)) best = id;
    }
    return best;
  };
  // a control-looking token that is not control becomes control (llama.cpp replaces the type)
  const markControl = (id: number) => {
    if (id !== NO_TOKEN && !(attrs[id] & TokenAttr.CONTROL)) attrs[id] = TokenAttr.CONTROL;
  };
  if (ids.eot === NO_TOKEN) {
    ids.eot = find(EOT_TEXTS);
    markControl(ids.eot);
  }
  if (ids.eom === NO_TOKEN) {
    ids.eom = find(["<|eom_id|>"]);
    markControl(ids.eom);
  }
  const fimPad = find(FIM_PAD_TEXTS);
  const fimRep = find(FIM_REP_TEXTS);
  const fimSep = find(FIM_SEP_TEXTS);
  for (const id of [fimPad, fimRep, fimSep]) markControl(id);
  for (const t of FIM_OTHER_TEXTS) markControl(tokenToId.get(t) ?? NO_TOKEN);

  const eog = new Set<number>();
  for (const id of [fimPad, fimRep, fimSep]) if (id !== NO_TOKEN) eog.add(id);
  for (const t of EOG_TEXTS) {
    const id = tokenToId.get(t);
    if (id !== undefined) {
      eog.add(id);
      markControl(id);
    }
  }
  for (const id of [ids.eos, ids.eot, ids.eom]) if (id !== NO_TOKEN) eog.add(id);

  const specialTokens: number[] = [];
  const specialMask = TokenAttr.CONTROL | TokenAttr.USER_DEFINED | TokenAttr.UNKNOWN;
  for (let i = 0; i < n; i++) if (attrs[i] & specialMask) specialTokens.push(i);
  specialTokens.sort((a, b) => tokens[b].length - tokens[a].length || a - b);

  // per-model attributes llama.cpp sets by name
  const name = (getString(gguf, "general.name") ?? "").toLowerCase();
  const preName = getString(gguf, "tokenizer.ggml.pre") ?? "";
  if (["jina-v2-de", "jina-v2-es", "jina-v2-code"].some((p) => preName.includes(p))) {
    const mask = tokenToId.get("<mask>");
    if (mask !== undefined) attrs[mask] |= TokenAttr.LSTRIP;
  } else if (name.includes("phi-3") || name.includes("phi3")) {
    for (const id of specialTokens) attrs[id] |= TokenAttr.RSTRIP;
    const s = tokenToId.get("</s>");
    if (s !== undefined) attrs[s] |= TokenAttr.RSTRIP;
    for (const t of ["<unk>", "<s>", "<|endoftext|>"]) {
      const id = tokenToId.get(t);
      if (id !== undefined) attrs[id] &= ~TokenAttr.RSTRIP;
    }
  }

  return {
    kind,
    model,
    pre,
    tokens,
    scores,
    attrs,
    tokenToId,
    mergeRanks,
    mergeResults,
    ...ids,
    addBos,
    addEos,
    addSpacePrefix,
    ignoreMerges,
    cleanSpaces,
    eog,
    specialTokens,
    maxTokenLength,
  };
}
