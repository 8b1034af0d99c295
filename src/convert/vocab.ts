/**
 * A Hugging Face tokenizer (`tokenizer.json`, `tokenizer_config.json`,
 * `config.json`) as the GGUF `tokenizer.ggml.*` keys `convert_hf_to_gguf.py`
 * writes: the token list and types of its `get_vocab_base` (WordPiece, as
 * BERT's phantom-space vocabulary; byte-level BPE with its merges), the
 * special tokens and add-BOS/EOS/SEP flags of gguf-py's `SpecialVocab`, and
 * the pre-tokenizer found as llama.cpp finds it: the sha256 of the ids its
 * reference text tokenizes to, looked up in llama.cpp's table (here the text
 * is tokenized by dotllm's own tokenizer, which reproduces llama.cpp's).
 *
 * @module
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { GgufValueType, parseGguf } from "../gguf/reader.ts";
import { encodeGgufHeader, type GgufWriteValue, meta } from "../gguf/writer.ts";
import { Tokenizer } from "../tokenizer/mod.ts";
import { CHECK_TEXT } from "./_chktxt.ts";
import { PRE_TOKENIZER_HASHES } from "./_pre_hashes.ts";
import { ConvertError } from "./errors.ts";

/** gguf's `TokenType`. */
export const NORMAL = 1, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5;

/** GGUF metadata in file order. */
export type Metadata = [string, GgufWriteValue][];

type Json = Record<string, unknown>;

/** Reads a JSON file of `dir`, or undefined when it is not there. */
export function readJson(dir: string, name: string): Json | undefined {
  const path = join(dir, name);
  if (!existsSync(path)) return undefined;
  try {
    const value = JSON.parse(readFileSync(path, "utf8"));
    if (value === null || typeof value !== "object") throw new Error("not a JSON object");
    return value as Json;
  } catch (error) {
    throw new ConvertError(`${name}: ${(error as Error).message.split("\n")[0]}`);
  }
}

interface AddedToken {
  id: number;
  content: string;
  special?: boolean;
  normalized?: boolean;
}

/** `TextModel.does_token_look_special`. */
export function looksSpecial(token: string): boolean {
  return ["<pad>", "<mask>", "<2mass>", "[@BOS@]"].includes(token) ||
    (token.startsWith("<|") && token.endsWith("|>")) ||
    (token.startsWith("<｜") && token.endsWith("｜>")) ||
    (token.startsWith("<unused") && token.endsWith(">"));
}

/** The tokenizer's vocabulary as `get_vocab_base` lists it: tokens and types by id. */
function vocabBase(tokenizer: Json, vocabSize: number | undefined): {
  tokens: string[];
  types: number[];
} {
  const model = tokenizer.model as Json | undefined;
  const vocab = model?.vocab;
  if (vocab === null || typeof vocab !== "object" || Array.isArray(vocab)) {
    throw new ConvertError(`tokenizer.json: model.vocab is not a token → id object`);
  }
  const byId = new Map<number, string>();
  for (const [token, id] of Object.entries(vocab as Json)) {
    if (!Number.isSafeInteger(id) || (id as number) < 0) {
      throw new ConvertError(`tokenizer.json: token ${JSON.stringify(token)} has id ${id}`);
    }
    byId.set(id as number, token);
  }
  const added = new Map<number, AddedToken>();
  for (const a of (tokenizer.added_tokens ?? []) as AddedToken[]) {
    if (!Number.isSafeInteger(a?.id) || typeof a?.content !== "string") {
      throw new ConvertError(`tokenizer.json: a malformed added token`);
    }
    added.set(a.id, a);
    byId.set(a.id, a.content);
  }
  let maxId = -1;
  for (const id of byId.keys()) if (id > maxId) maxId = id;
  const n = vocabSize ?? byId.size;
  if (maxId >= n) {
    throw new ConvertError(`tokenizer.json has token id ${maxId}, past vocab_size ${n}`);
  }
  const tokens: string[] = [], types: number[] = [];
  for (let i = 0; i < n; i++) {
    const token = byId.get(i);
    if (token === undefined) {
      tokens.push(`[PAD${i}]`);
      types.push(UNUSED);
      continue;
    }
    const a = added.get(i);
    if (a !== undefined) {
      if (a.special || looksSpecial(token)) {
        tokens.push(token);
        types.push(CONTROL);
      } else {
        tokens.push(token.replaceAll("\u2581", " "));
        types.push(USER_DEFINED);
      }
    } else {
      tokens.push(token);
      types.push(NORMAL);
    }
  }
  return { tokens, types };
}

/**
 * gguf-py's `SpecialVocab`: special token ids, add-token flags, merges, template, normalizer;
 * `tokenizer` is `tokenizer.json` when the folder has one; `n`, ids must be below it
 * (Infinity: no bound); `specialTypes`, the token types looked up; `fallbackIds`, ids set
 * afterwards where none was found. Types without a GGUF key are skipped, as gguf-py does.
 */
export function specialVocab(
  dir: string,
  tokenizer: Json | undefined,
  n: number,
  loadMerges: boolean,
  specialTypes: readonly string[] = ["bos", "eos", "unk", "sep", "pad", "cls", "mask"],
  fallbackIds: Readonly<Record<string, number>> = {},
): Metadata {
  const ids = new Map<string, number>();
  const add = new Map<string, boolean>();
  let types = [...specialTypes];
  let merges: string[] = [];
  let lowercase: boolean | undefined, stripAccents: boolean | undefined | null;
  const set = (typ: string, id: unknown) => {
    if (typeof id !== "number" || !Number.isInteger(id)) return;
    if (id < 0) throw new ConvertError(`invalid value for special token type ${typ}: ${id}`);
    if (id < n && !ids.has(typ)) ids.set(typ, id);
  };
  if (loadMerges && tokenizer) {
    const m = (tokenizer.model as Json | undefined)?.merges;
    if (Array.isArray(m) && m.length > 0) {
      if (typeof m[0] === "string") merges = m as string[];
      else if (Array.isArray(m[0]) && m[0].length === 2) {
        merges = (m as string[][]).map((pair) =>
          pair.map((part) => part.replaceAll(" ", String.fromCharCode(32 + 256))).join(" ")
        );
      } else throw new ConvertError("tokenizer.json: unknown merges format");
    }
  }
  const parseNormalizer = (norm: Json) => {
    if (norm.type === "Lowercase") lowercase = true;
    else if (norm.type === "StripAccents") stripAccents = true;
    else if (norm.type === "BertNormalizer") {
      if ("lowercase" in norm) lowercase = norm.lowercase as boolean;
      if ("strip_accents" in norm) stripAccents = norm.strip_accents as boolean | null;
    } else if (norm.type === "Sequence") {
      for (const m of (norm.normalizers ?? []) as Json[]) parseNormalizer(m);
    }
  };
  if (tokenizer?.normalizer) parseNormalizer(tokenizer.normalizer as Json);
  const added = (tokenizer?.added_tokens ?? []) as AddedToken[];
  const config = readJson(dir, "tokenizer_config.json");
  let bos = config?.bos_token, cls = config?.cls_token, eos = config?.eos_token;
  const sep = config?.sep_token;
  if (tokenizer && !bos && cls && config) config.bos_token = bos = cls;
  if (tokenizer && !eos && sep && config) config.eos_token = eos = sep;
  const content = (v: unknown) =>
    typeof v === "string" ? v : (v as Json | undefined)?.content as string | undefined;
  const post = tokenizer?.post_processor as Json | undefined;
  if (post) {
    for (const p of (post.processors ?? [post]) as Json[]) {
      if (p.type === "ByteLevel") {
        if (!add.has("bos")) add.set("bos", false);
        if (!add.has("eos")) add.set("eos", false);
      } else if (p.type === "RobertaProcessing") {
        add.set("bos", true).set("eos", true).set("sep", true);
        if (!cls && config) config.cls_token = cls = (p.cls as unknown[] ?? [bos])[0];
        if (!sep && config) config.sep_token = (p.sep as unknown[] ?? [eos])[0];
      } else if (p.type === "TemplateProcessing") {
        const single = (p.single ?? []) as Json[];
        let pair = (p.pair ?? []) as Json[];
        const special = (e: Json | undefined) => (e?.SpecialToken as Json | undefined)?.id;
        let first: unknown, last: unknown;
        if (single.length > 1) {
          first = special(single[0]);
          if (first) {
            if (!config) bos = first;
            else if (first !== bos && first !== cls) {
              if (!bos) config.bos_token = bos = first;
              if (!cls) config.cls_token = cls = first;
            }
            add.set("bos", first === bos || first === cls);
          }
          last = special(single[single.length - 1]);
          if (last) {
            if (!config) eos = last;
            else if (last !== eos) {
              if (!types.includes("eot")) {
                types = [...types, "eot"];
                config.eot_token = eos;
              } else if (!types.includes("eom")) {
                types = [...types, "eom"];
                config.eom_token = eos;
              }
              config.eos_token = eos = last;
            }
            add.set("eos", last === eos);
          }
        }
        if (pair.length > 0) {
          const start = first && special(pair[0]) === first ? 1 : 0;
          const stop = last && special(pair[pair.length - 1]) === last
            ? pair.length - 1
            : pair.length;
          pair = pair.slice(start, stop);
          if (pair.length > 0) {
            const a = (pair[0].Sequence as Json | undefined)?.id;
            const b = (pair[pair.length - 1].Sequence as Json | undefined)?.id;
            const middle = pair.slice(1, -1);
            if (a === "A" && b === "B" && middle.length > 0) {
              let addSep = false;
              const e0 = special(middle[0]);
              const sepNow = config?.sep_token;
              if (e0 && (e0 === sepNow || e0 === eos) && !last) addSep = true;
              if (middle.length === 2) {
                const e1 = special(middle[1]);
                if (e1 && (e1 === sepNow || e1 === eos)) addSep = true;
              }
              add.set("sep", addSep);
              if (addSep && !sepNow && config) config.sep_token = eos;
            }
          }
        }
      }
    }
  }
  let chatTemplate: string | undefined;
  if (config) {
    const tmpl = config.chat_template;
    const jinja = join(dir, "chat_template.jinja");
    if (typeof tmpl === "string") chatTemplate = tmpl;
    else if (tmpl === undefined && existsSync(jinja)) chatTemplate = readFileSync(jinja, "utf8");
    else if (tmpl === undefined) {
      const alt = readJson(dir, "chat_template.json")?.chat_template;
      if (typeof alt === "string") chatTemplate = alt;
    }
    for (const typ of types) {
      const entry = config[`add_${typ}_token`];
      if (typeof entry === "boolean" && !add.has(typ)) add.set(typ, entry);
      const text = content(config[`${typ}_token`]);
      if (typeof text !== "string") continue;
      set(typ, added.find((a) => a.content === text)?.id);
    }
  }
  const hf = readJson(dir, "config.json") ?? {};
  for (const typ of types) {
    let id = hf[`${typ}_token_id`];
    if (id === undefined && hf.text_config) id = (hf.text_config as Json)[`${typ}_token_id`];
    set(typ, id);
  }
  // `_set_special_token` calls after loading: ids the config did not give.
  for (const [typ, id] of Object.entries(fallbackIds)) set(typ, id);
  const out: Metadata = [];
  if (merges.length > 0) {
    out.push(["tokenizer.ggml.merges", meta.array(GgufValueType.STRING, merges)]);
  }
  const idKeys: Record<string, string> = {
    bos: "bos_token_id",
    eos: "eos_token_id",
    unk: "unknown_token_id",
    sep: "seperator_token_id",
    pad: "padding_token_id",
    mask: "mask_token_id",
    eot: "eot_token_id",
    eom: "eom_token_id",
  };
  for (const [typ, id] of ids) {
    if (idKeys[typ] !== undefined) out.push([`tokenizer.ggml.${idKeys[typ]}`, meta.u32(id)]);
  }
  for (const [typ, value] of add) {
    if (["bos", "eos", "sep"].includes(typ)) {
      out.push([`tokenizer.ggml.add_${typ}_token`, meta.bool(value)]);
    }
  }
  if (chatTemplate !== undefined) out.push(["tokenizer.chat_template", meta.string(chatTemplate)]);
  if (lowercase !== undefined) {
    out.push(["tokenizer.ggml.normalizer.lowercase", meta.bool(lowercase)]);
  }
  if (stripAccents !== undefined && stripAccents !== null) {
    out.push(["tokenizer.ggml.normalizer.strip_accents", meta.bool(stripAccents)]);
  }
  return out;
}

/** The ids `metadata`'s tokenizer gives the reference text, hashed as llama.cpp hashes them. */
function checkHash(metadata: Metadata): string {
  const { bytes } = encodeGgufHeader({ metadata, tensors: [] });
  const tokenizer = Tokenizer.fromGguf(parseGguf(bytes));
  const ids = tokenizer.encode(CHECK_TEXT, { addSpecial: true });
  return createHash("sha256").update(`[${ids.join(", ")}]`).digest("hex");
}

const PRE_BY_HASH = new Map(PRE_TOKENIZER_HASHES); // a later entry of a hash wins, as there

/**
 * The `tokenizer.ggml.*` keys of the model in `dir`, in `convert_hf_to_gguf.py`'s
 * order: BERT's WordPiece (`bert`, `token_type_count` first) or byte-level
 * BPE (`gpt2`). Throws {@linkcode ConvertError} for a missing or unknown
 * tokenizer, or one whose pre-tokenizer llama.cpp does not recognize.
 */
export function tokenizerMetadata(
  dir: string,
  kind: "bert" | "gpt2",
  vocabSize: number | undefined,
  tokenTypeCount?: number,
): Metadata {
  const tokenizer = readJson(dir, "tokenizer.json");
  if (tokenizer === undefined) throw new ConvertError(`${dir}: no tokenizer.json`);
  const modelType = (tokenizer.model as Json | undefined)?.type;
  if (kind === "bert" && modelType !== "WordPiece") {
    throw new ConvertError(
      `tokenizer.json: a BERT model needs a WordPiece tokenizer, got ${modelType}`,
    );
  }
  if (kind === "gpt2" && modelType !== "BPE") {
    throw new ConvertError(
      `tokenizer.json: tokenizer type ${modelType} is not supported (BPE only)`,
    );
  }
  let { tokens, types } = vocabBase(tokenizer, vocabSize);
  if (kind === "bert") {
    // The phantom-space vocabulary: "##x" → "x", others "▁x", control tokens as they are.
    tokens = tokens.map((t, i) =>
      types[i] === CONTROL ? t : t.startsWith("##") ? t.slice(2) : "\u2581" + t
    );
  }
  const special = specialVocab(dir, tokenizer, tokens.length, kind === "gpt2");
  const build = (pre: string): Metadata => [
    ...(kind === "bert"
      ? [
        ["tokenizer.ggml.token_type_count", meta.u32(tokenTypeCount ?? 1)] as [
          string,
          GgufWriteValue,
        ],
      ]
      : []),
    ["tokenizer.ggml.model", meta.string(kind)],
    ["tokenizer.ggml.pre", meta.string(pre)],
    ["tokenizer.ggml.tokens", meta.array(GgufValueType.STRING, tokens)],
    ["tokenizer.ggml.token_type", meta.array(GgufValueType.INT32, types)],
    ...special,
  ];
  // WordPiece ignores the pre-tokenizer: one hash. BPE: the first known pre whose own
  // tokenization hashes to an entry of that pre.
  const candidates = kind === "bert" ? ["default"] : [...new Set(PRE_BY_HASH.values())];
  for (const candidate of candidates) {
    let hash: string;
    try {
      hash = checkHash(build(candidate));
    } catch {
      continue; // a pre-tokenizer dotllm does not know
    }
    const pre = PRE_BY_HASH.get(hash);
    if (pre !== undefined && (kind === "bert" || pre === candidate)) return build(pre);
  }
  throw new ConvertError(
    "tokenizer.json: its pre-tokenizer is not one llama.cpp recognizes (convert_hf_to_gguf.py " +
      "would stop here too)",
  );
}
