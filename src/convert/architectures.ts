/**
 * The Hugging Face architectures `dotllm convert` writes, as
 * `convert_hf_to_gguf.py` writes them: which `config.json` `architectures`
 * value maps to which GGUF architecture, how each tensor is renamed (or
 * dropped), whether Q/K rows are permuted, and the hyper-parameter keys in
 * the reference's order.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { meta } from "../gguf/writer.ts";
import { ConvertError } from "./errors.ts";
import { type Metadata, readJson, specialVocab } from "./vocab.ts";
import type { SentencePieceVariant } from "./vocab_spm.ts";

type Json = Record<string, unknown>;

/** A tensor as the GGUF file names it, and how its rows are rearranged. */
export interface MappedTensor {
  readonly name: string;
  /** Llama's Q/K: undo Hugging Face's RoPE row order with this many heads. */
  readonly permuteHeads?: number;
  /** Gemma 3's embedding: only the first rows (the vocabulary's), the rest dropped. */
  readonly keepRows?: number;
  /** Gemma 3's norms: 1 added to every weight (its RMSNorm multiplies by 1 + w). */
  readonly addOne?: boolean;
}

/** One architecture of the converter. */
export interface ConvertArchitecture {
  /** `general.architecture`. */
  readonly gguf: string;
  /** The tokenizer it writes from `tokenizer.json`. */
  readonly tokenizer: "bert" | "gpt2";
  /**
   * Whether the folder's vocabulary is written from its SentencePiece `tokenizer.model`
   * instead, and by which reference function; undefined: `tokenizer.json`.
   */
  sentencePiece?(dir: string): SentencePieceVariant | undefined;
  /**
   * `config.json` as `convert_hf_to_gguf.py` sees it: through transformers' `AutoConfig`, which
   * fills the model type's defaults (checked against transformers 5.25's `to_dict()`).
   */
  defaults?(config: Json): Json;
  /** The GGUF name of a Hugging Face tensor, or undefined to drop it; throws for one it cannot map. */
  map(name: string, config: Json): MappedTensor | undefined;
  /** The `<arch>.*` (and `general.file_type`) keys in the reference's order. */
  parameters(config: Json, fileType: number, dir: string): Metadata;
  /** LlamaModel's `set_vocab`: `tokenizer_config.json`'s `add_prefix_space` first, when set. */
  readonly addPrefixSpace?: boolean;
  /** `generate_extra_tensors`: F32 tensors the converter makes, written before the folder's. */
  extraTensors?(config: Json): { name: string; values: Float32Array }[];
  /** Keys `generate_extra_tensors` adds (right after `general.architecture`). */
  extraMetadata?(config: Json): Metadata;
  /** Keys the reference adds after the tokenizer's (`sentencePiece`: written from tokenizer.model). */
  afterTokenizer?(config: Json, sentencePiece: boolean, dir: string): Metadata;
}

/** `find_hparam`: the first of `keys` in the config. */
function find(config: Json, keys: string[], optional = false): number | undefined {
  for (const k of keys) if (config[k] !== undefined) return config[k] as number;
  if (optional) return undefined;
  throw new ConvertError(`config.json: none of ${keys.join(", ")}`);
}

function integer(config: Json, keys: string[], optional = false): number | undefined {
  const v = find(config, keys, optional);
  if (v === undefined) return undefined;
  if (!Number.isSafeInteger(v) || v < 0) {
    throw new ConvertError(`config.json: ${keys[0]} must be a non-negative integer, got ${v}`);
  }
  return v;
}

/**
 * `TextModel.rope_parameters` read as `set_gguf_parameters` reads it: the
 * global (full-attention) RoPE base, and the sliding-window layers' own when
 * the config has one (Gemma 3). A RoPE scaling other than the default is refused.
 */
function ropeTheta(config: Json): { theta?: number; swaTheta?: number } {
  const rope = (config.rope_parameters ?? config.rope_scaling ?? {}) as Json;
  const structured = rope.full_attention !== undefined || rope.sliding_attention !== undefined;
  const params = (rope.full_attention ?? rope) as Json;
  const ropeType = structured ? params.rope_type : rope.rope_type ?? rope.type;
  if (ropeType !== undefined && ropeType !== null && ropeType !== "default") {
    throw new ConvertError(`config.json: RoPE scaling "${ropeType}" is not supported here`);
  }
  const theta = structured ? params.rope_theta : rope.rope_theta ?? find(config, [
    "global_rope_theta",
    "rope_global_theta",
    "rope_theta_global",
    "rope_theta",
    "rotary_emb_base",
  ], true);
  const swaTheta = structured
    ? (rope.sliding_attention as Json | undefined)?.rope_theta
    : find(config, [
      "local_rope_theta",
      "rope_local_theta",
      "rope_theta_local",
      "swa_rope_theta",
      "rope_local_base_freq",
    ], true);
  return { theta: theta as number | undefined, swaTheta: swaTheta as number | undefined };
}

/** `TextModel.set_gguf_parameters` for the keys these architectures have. */
function textParameters(a: string, config: Json, fileType: number): Metadata {
  const out: Metadata = [];
  out.push([
    `${a}.block_count`,
    meta.u32(integer(config, ["n_layers", "num_hidden_layers", "n_layer", "num_layers"])!),
  ]);
  const u32 = (key: string, keys: string[]) => {
    const v = integer(config, keys, true);
    if (v !== undefined) out.push([`${a}.${key}`, meta.u32(v)]);
  };
  u32("context_length", [
    "max_position_embeddings",
    "n_ctx",
    "n_positions",
    "max_length",
    "max_sequence_length",
    "model_max_length",
  ]);
  u32("embedding_length", ["hidden_size", "n_embd", "dim"]);
  u32("feed_forward_length", [
    "prefix_dense_intermediate_size",
    "dense_intermediate_size",
    "intermediate_size",
    "n_inner",
    "hidden_dim",
  ]);
  u32("attention.head_count", ["num_attention_heads", "n_head", "n_heads"]);
  u32("attention.head_count_kv", ["num_key_value_heads", "n_kv_heads"]);
  if (config.is_causal === false) out.push([`${a}.attention.causal`, meta.bool(false)]);
  const { theta, swaTheta } = ropeTheta(config);
  if (theta !== undefined) out.push([`${a}.rope.freq_base`, meta.f32(theta)]);
  if (swaTheta !== undefined) out.push([`${a}.rope.freq_base_swa`, meta.f32(swaTheta)]);
  const rms = find(config, ["rms_norm_eps", "norm_eps"], true);
  if (rms !== undefined) out.push([`${a}.attention.layer_norm_rms_epsilon`, meta.f32(rms)]);
  const eps = find(config, ["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"], true);
  if (eps !== undefined) out.push([`${a}.attention.layer_norm_epsilon`, meta.f32(eps)]);
  for (const k of ["num_local_experts", "num_experts", "n_routed_experts"]) {
    if (config[k] !== undefined) {
      throw new ConvertError(`config.json: mixture-of-experts models are not supported`);
    }
  }
  const headDim = config.head_dim;
  if (headDim !== undefined && headDim !== null) {
    out.push([`${a}.attention.key_length`, meta.u32(headDim as number)]);
    out.push([`${a}.attention.value_length`, meta.u32(headDim as number)]);
  }
  out.push(["general.file_type", meta.u32(fileType)]);
  return out;
}

/** `_try_set_pooling_type`: sentence-transformers' pooling module, when there is one. */
function poolingType(a: string, dir: string): Metadata {
  const modules = readJson(dir, "modules.json") as unknown as Json[] | undefined;
  const path = Array.isArray(modules)
    ? modules.find((m) => String(m.type).endsWith("Pooling"))?.path
    : undefined;
  if (typeof path !== "string") return [];
  const p = readJson(dir, `${path}/config.json`) ?? {};
  const modes: Record<string, number> = { mean: 1, cls: 2, lasttoken: 3 };
  const type = p.pooling_mode_mean_tokens
    ? 1
    : p.pooling_mode_cls_token
    ? 2
    : p.pooling_mode_lasttoken
    ? 3
    : modes[String(p.pooling_mode)];
  if (type === undefined) {
    throw new ConvertError(`${path}/config.json: only mean, CLS and last pooling are supported`);
  }
  return [[`${a}.pooling_type`, meta.u32(type)]];
}

const BERT_NAMES: [RegExp, string][] = [
  [/^embeddings\.word_embeddings$/, "token_embd"],
  [/^embeddings\.position_embeddings$/, "position_embd"],
  [/^embeddings\.token_type_embeddings$/, "token_types"],
  [/^embeddings\.LayerNorm$/, "token_embd_norm"],
  [/^encoder\.layer\.(\d+)\.attention\.self\.query$/, "blk.$1.attn_q"],
  [/^encoder\.layer\.(\d+)\.attention\.self\.key$/, "blk.$1.attn_k"],
  [/^encoder\.layer\.(\d+)\.attention\.self\.value$/, "blk.$1.attn_v"],
  [/^encoder\.layer\.(\d+)\.attention\.output\.dense$/, "blk.$1.attn_output"],
  [/^encoder\.layer\.(\d+)\.attention\.output\.LayerNorm$/, "blk.$1.attn_output_norm"],
  [/^encoder\.layer\.(\d+)\.intermediate\.dense$/, "blk.$1.ffn_up"],
  [/^encoder\.layer\.(\d+)\.output\.dense$/, "blk.$1.ffn_down"],
  [/^encoder\.layer\.(\d+)\.output\.LayerNorm$/, "blk.$1.layer_output_norm"],
];

const LLAMA_NAMES: [RegExp, string][] = [
  [/^model\.embed_tokens$/, "token_embd"],
  [/^model\.norm$/, "output_norm"],
  [/^lm_head$/, "output"],
  [/^model\.layers\.(\d+)\.input_layernorm$/, "blk.$1.attn_norm"],
  [/^model\.layers\.(\d+)\.self_attn\.q_proj$/, "blk.$1.attn_q"],
  [/^model\.layers\.(\d+)\.self_attn\.k_proj$/, "blk.$1.attn_k"],
  [/^model\.layers\.(\d+)\.self_attn\.v_proj$/, "blk.$1.attn_v"],
  [/^model\.layers\.(\d+)\.self_attn\.o_proj$/, "blk.$1.attn_output"],
  [/^model\.layers\.(\d+)\.post_attention_layernorm$/, "blk.$1.ffn_norm"],
  [/^model\.layers\.(\d+)\.mlp\.gate_proj$/, "blk.$1.ffn_gate"],
  [/^model\.layers\.(\d+)\.mlp\.up_proj$/, "blk.$1.ffn_up"],
  [/^model\.layers\.(\d+)\.mlp\.down_proj$/, "blk.$1.ffn_down"],
];

/** `TensorNameMap.get_name` with `.weight` / `.bias` suffixes. */
function mapName(table: [RegExp, string][], name: string): string {
  for (const suffix of [".weight", ".bias", ""]) {
    if (suffix !== "" && !name.endsWith(suffix)) continue;
    const base = suffix === "" ? name : name.slice(0, -suffix.length);
    for (const [re, to] of table) if (re.test(base)) return base.replace(re, to) + suffix;
  }
  throw new ConvertError(`cannot map tensor "${name}" (convert_hf_to_gguf.py would stop too)`);
}

const bert: ConvertArchitecture = {
  gguf: "bert",
  tokenizer: "bert",
  defaults: (config) => ({
    hidden_size: 768,
    num_hidden_layers: 12,
    num_attention_heads: 12,
    intermediate_size: 3072,
    max_position_embeddings: 512,
    type_vocab_size: 2,
    layer_norm_eps: 1e-12,
    vocab_size: 30522,
    ...config,
  }),
  map(name) {
    if (name.startsWith("bert.")) name = name.slice(5);
    if (name.endsWith(".gamma")) name = name.slice(0, -6) + ".weight";
    if (name.endsWith(".beta")) name = name.slice(0, -5) + ".bias";
    if (["embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"].includes(name)) {
      return undefined;
    }
    if (name.startsWith("cls.predictions") || name.startsWith("cls.seq_relationship")) {
      return undefined;
    }
    return { name: mapName(BERT_NAMES, name) };
  },
  parameters(config, fileType, dir) {
    const out = textParameters("bert", config, fileType);
    out.push(["bert.attention.causal", meta.bool(false)]);
    out.push(...poolingType("bert", dir));
    return out;
  },
};

/** RoPE as transformers 5 stores it: `rope_parameters` (from `rope_theta` / `rope_scaling`). */
function ropeDefaults(config: Json): Json {
  if (config.rope_parameters !== undefined || config.rope_scaling !== undefined) return config;
  return {
    ...config,
    rope_parameters: { rope_theta: config.rope_theta ?? 10000, rope_type: "default" },
  };
}

/** `tokenizer.model` when the folder has one (`_set_vocab_sentencepiece` is tried first). */
const whenTokenizerModel = (dir: string): SentencePieceVariant | undefined =>
  existsSync(join(dir, "tokenizer.model")) ? "default" : undefined;

const llama: ConvertArchitecture = {
  gguf: "llama",
  tokenizer: "gpt2",
  sentencePiece: whenTokenizerModel,
  addPrefixSpace: true,
  defaults(config) {
    const c: Json = {
      hidden_size: 4096,
      num_hidden_layers: 32,
      num_attention_heads: 32,
      intermediate_size: 11008,
      max_position_embeddings: 2048,
      rms_norm_eps: 1e-6,
      vocab_size: 32000,
      ...config,
    };
    c.num_key_value_heads ??= c.num_attention_heads;
    c.head_dim ??= Math.floor((c.hidden_size as number) / (c.num_attention_heads as number));
    return ropeDefaults(c);
  },
  map(name, config) {
    if (name.endsWith(".rotary_emb.inv_freq") || name.endsWith(".attention.masked_bias")) {
      return undefined;
    }
    const heads = integer(config, ["n_heads", "num_attention_heads"])!;
    const kvHeads = integer(config, ["n_kv_heads", "num_key_value_heads"], true) ?? heads;
    const mapped = mapName(LLAMA_NAMES, name);
    if (/q_proj\.(weight|bias)$/.test(name)) return { name: mapped, permuteHeads: heads };
    if (/k_proj\.(weight|bias)$/.test(name)) return { name: mapped, permuteHeads: kvHeads };
    return { name: mapped };
  },
  parameters(config, fileType) {
    const heads = integer(config, ["num_attention_heads"])!;
    const out = textParameters("llama", config, fileType);
    out.push(["llama.vocab_size", meta.u32(integer(config, ["vocab_size"])!)]);
    const ropeDim = (config.head_dim as number | undefined) ??
      Math.floor(integer(config, ["hidden_size"])! / heads);
    out.push(["llama.rope.dimension_count", meta.u32(ropeDim)]);
    return out;
  },
  afterTokenizer(config, _sentencePiece, dir) {
    const out: Metadata = [];
    // LlamaModel.set_vocab: "Apply to CodeLlama only" (any vocabulary of 32016): a second
    // SpecialVocab of the infill types with fixed ids; of them gguf-py writes only EOT.
    if (config.vocab_size === 32016) {
      out.push(
        ...specialVocab(
          dir,
          readJson(dir, "tokenizer.json"),
          Infinity,
          false,
          ["prefix", "suffix", "middle", "eot"],
          { prefix: 32007, suffix: 32008, middle: 32009, eot: 32010 },
        ),
      );
    }
    // "Apply to granite small models only" (any vocabulary of 49152).
    if (config.vocab_size === 49152) out.push(["tokenizer.ggml.add_bos_token", meta.bool(false)]);
    return out;
  },
};

const QWEN_NAMES: [RegExp, string][] = [
  ...LLAMA_NAMES,
  [/^model\.layers\.(\d+)\.self_attn\.q_norm$/, "blk.$1.attn_q_norm"],
  [/^model\.layers\.(\d+)\.self_attn\.k_norm$/, "blk.$1.attn_k_norm"],
];

/** Qwen 2 / 3: the Llama names (plus Q/K norms), no Q/K permutation, a pooling type when declared. */
function qwen(gguf: "qwen2" | "qwen3"): ConvertArchitecture {
  return {
    gguf,
    tokenizer: "gpt2",
    defaults(config) {
      const c: Json = {
        hidden_size: 4096,
        num_hidden_layers: 32,
        num_attention_heads: 32,
        num_key_value_heads: 32,
        intermediate_size: 22016,
        max_position_embeddings: 32768,
        rms_norm_eps: 1e-6,
        vocab_size: 151936,
        ...(gguf === "qwen3" ? { head_dim: 128 } : {}),
        ...config,
      };
      return ropeDefaults(c);
    },
    map(name) {
      if (name.endsWith(".rotary_emb.inv_freq")) return undefined;
      return { name: mapName(QWEN_NAMES, name) };
    },
    parameters(config, fileType, dir) {
      return [...textParameters(gguf, config, fileType), ...poolingType(gguf, dir)];
    },
  };
}

const GEMMA3_NAMES: [RegExp, string][] = [
  [/^model\.embed_tokens$/, "token_embd"],
  [/^model\.norm$/, "output_norm"],
  [/^lm_head$/, "output"],
  [/^model\.layers\.(\d+)\.input_layernorm$/, "blk.$1.attn_norm"],
  [/^model\.layers\.(\d+)\.self_attn\.q_proj$/, "blk.$1.attn_q"],
  [/^model\.layers\.(\d+)\.self_attn\.k_proj$/, "blk.$1.attn_k"],
  [/^model\.layers\.(\d+)\.self_attn\.v_proj$/, "blk.$1.attn_v"],
  [/^model\.layers\.(\d+)\.self_attn\.o_proj$/, "blk.$1.attn_output"],
  [/^model\.layers\.(\d+)\.self_attn\.q_norm$/, "blk.$1.attn_q_norm"],
  [/^model\.layers\.(\d+)\.self_attn\.k_norm$/, "blk.$1.attn_k_norm"],
  [/^model\.layers\.(\d+)\.post_attention_layernorm$/, "blk.$1.post_attention_norm"],
  [/^model\.layers\.(\d+)\.pre_feedforward_layernorm$/, "blk.$1.ffn_norm"],
  [/^model\.layers\.(\d+)\.post_feedforward_layernorm$/, "blk.$1.post_ffw_norm"],
  [/^model\.layers\.(\d+)\.mlp\.gate_proj$/, "blk.$1.ffn_gate"],
  [/^model\.layers\.(\d+)\.mlp\.up_proj$/, "blk.$1.ffn_up"],
  [/^model\.layers\.(\d+)\.mlp\.down_proj$/, "blk.$1.ffn_down"],
];

/**
 * Gemma 3 (`Gemma3Model`): its own defaults and key overrides, the norms stored as 1 + w,
 * the embedding cut to the vocabulary; the vocabulary from `tokenizer.model` (with
 * `add_space_prefix` false after it).
 */
const gemma3: ConvertArchitecture = {
  gguf: "gemma3",
  tokenizer: "gpt2",
  sentencePiece(dir) {
    if (whenTokenizerModel(dir) === undefined) {
      throw new ConvertError(`${dir}: Gemma 3 is converted from its tokenizer.model, missing here`);
    }
    return "default";
  },
  defaults(config) {
    const c: Json = {
      vocab_size: 262208,
      hidden_size: 2304,
      intermediate_size: 9216,
      num_hidden_layers: 26,
      num_attention_heads: 8,
      num_key_value_heads: 4,
      head_dim: 256,
      max_position_embeddings: 131072,
      rms_norm_eps: 1e-6,
      sliding_window: 4096,
      final_logit_softcapping: null,
      attn_logit_softcapping: null,
      ...config,
    };
    if (c.rope_parameters === undefined) {
      const scaling = c.rope_scaling as Json | null | undefined;
      if (scaling) {
        throw new ConvertError(
          `config.json: RoPE scaling "${scaling.rope_type ?? scaling.type}" is not supported here`,
        );
      }
      c.rope_parameters = {
        sliding_attention: { rope_type: "default", rope_theta: c.rope_local_base_freq ?? 10000 },
        full_attention: { rope_type: "default", rope_theta: c.rope_theta ?? 1000000 },
      };
    }
    return c;
  },
  map(name, config) {
    if (name.endsWith(".rotary_emb.inv_freq")) return undefined;
    const mapped = mapName(GEMMA3_NAMES, name);
    const addOne = name.endsWith("norm.weight");
    if (name.includes("embed_tokens.weight")) {
      return { name: mapped, keepRows: integer(config, ["vocab_size"])! };
    }
    return addOne ? { name: mapped, addOne } : { name: mapped };
  },
  parameters(config, fileType) {
    const out = textParameters("gemma3", config, fileType);
    const put = (key: string, value: ReturnType<typeof meta.u32>) => {
      const at = out.findIndex(([k]) => k === key);
      if (at >= 0) out[at] = [key, value]; // gguf-py overwrites a key where it was first added
      else out.push([key, value]);
    };
    const headDim = integer(config, ["head_dim"], true) ?? 256;
    put("gemma3.context_length", meta.u32(integer(config, ["max_position_embeddings"])!));
    put("gemma3.attention.head_count", meta.u32(integer(config, ["num_attention_heads"])!));
    put("gemma3.attention.layer_norm_rms_epsilon", meta.f32(config.rms_norm_eps as number));
    put("gemma3.attention.key_length", meta.u32(headDim));
    put("gemma3.attention.value_length", meta.u32(headDim));
    put("gemma3.rope.freq_base", meta.f32(ropeTheta(config).theta ?? 1000000));
    if (config.attn_logit_softcapping !== null && config.attn_logit_softcapping !== undefined) {
      throw new ConvertError("config.json: attn_logit_softcapping is not Gemma 3's");
    }
    const softcap = config.final_logit_softcapping;
    if (softcap) put("gemma3.final_logit_softcapping", meta.f32(softcap as number));
    if (config.sliding_window_pattern !== 1) {
      put("gemma3.attention.sliding_window", meta.u32(integer(config, ["sliding_window"])!));
    }
    put("gemma3.attention.head_count_kv", meta.u32(integer(config, ["num_key_value_heads"])!));
    return out;
  },
  afterTokenizer: (_config, sentencePiece) =>
    sentencePiece ? [["tokenizer.ggml.add_space_prefix", meta.bool(false)]] : [],
};

const PHI3_NAMES: [RegExp, string][] = [
  [/^model\.embed_tokens$/, "token_embd"],
  [/^model\.norm$/, "output_norm"],
  [/^lm_head$/, "output"],
  [/^model\.layers\.(\d+)\.input_layernorm$/, "blk.$1.attn_norm"],
  [/^model\.layers\.(\d+)\.self_attn\.qkv_proj$/, "blk.$1.attn_qkv"],
  [/^model\.layers\.(\d+)\.self_attn\.o_proj$/, "blk.$1.attn_output"],
  [/^model\.layers\.(\d+)\.post_attention_layernorm$/, "blk.$1.ffn_norm"],
  [/^model\.layers\.(\d+)\.mlp\.gate_up_proj$/, "blk.$1.ffn_up"],
  [/^model\.layers\.(\d+)\.mlp\.down_proj$/, "blk.$1.ffn_down"],
];

/** Phi-3's RoPE dimensions: `int(partial_rotary_factor · n_embd) // n_head`. */
function phi3RopeDims(config: Json): number {
  const rope = config.rope_parameters as Json;
  const rotPct = (rope.partial_rotary_factor ?? config.partial_rotary_factor ?? 1.0) as number;
  const embd = integer(config, ["hidden_size", "n_embd"])!;
  return Math.floor(
    Math.trunc(rotPct * embd) / integer(config, ["num_attention_heads", "n_head"])!,
  );
}

/**
 * `Phi3MiniModel.generate_extra_tensors`: LongRoPE's long and short factors and its
 * attention factor, or undefined without them. Throws for a RoPE scaling dotllm does not run.
 */
function phi3LongRope(
  config: Json,
): { long: number[]; short: number[]; attnFactor: number } | undefined {
  const rope = config.rope_parameters as Json;
  const long = rope.long_factor, short = rope.short_factor;
  const type = String(rope.rope_type ?? "").toLowerCase();
  if (!long) {
    if (type !== "" && type !== "default") {
      throw new ConvertError(`config.json: RoPE scaling "${type}" is not supported here`);
    }
    return undefined;
  }
  if (type !== "su" && type !== "longrope") {
    throw new ConvertError(`config.json: RoPE scaling "${type}" is not supported here`);
  }
  const dims = phi3RopeDims(config);
  const numbers = (v: unknown) =>
    Array.isArray(v) && v.every((x) => typeof x === "number" && Number.isFinite(x));
  if (!numbers(long) || !numbers(short)) {
    throw new ConvertError(
      "config.json: rope_scaling long_factor and short_factor must be lists of numbers",
    );
  }
  const l = long as number[], s = short as number[];
  if (l.length !== s.length || l.length !== dims / 2) {
    throw new ConvertError(
      `config.json: rope_scaling long_factor and short_factor must have ${
        dims / 2
      } values (got ${l.length}, ${s.length})`,
    );
  }
  const maxPos = integer(config, ["n_positions", "max_position_embeddings"])!;
  const orig =
    (rope.original_max_position_embeddings ?? config.original_max_position_embeddings) as number;
  const scale = maxPos / orig;
  const attnFactor = scale > 1 ? Math.sqrt(1 + Math.log(scale) / Math.log(orig)) : 1;
  return { long: l, short: s, attnFactor };
}

/** Phi-3 (`Phi3MiniModel`): fused QKV and gate+up; its own keys; its own SentencePiece vocabulary. */
const phi3: ConvertArchitecture = {
  gguf: "phi3",
  tokenizer: "gpt2",
  sentencePiece(dir) {
    // Phi-4 ships a GPT-2 tokenizer.
    const tc = readJson(dir, "tokenizer_config.json");
    return tc?.tokenizer_class === "GPT2Tokenizer" ? undefined : "phi3";
  },
  defaults(config) {
    const c: Json = {
      vocab_size: 32064,
      hidden_size: 3072,
      intermediate_size: 8192,
      num_hidden_layers: 32,
      num_attention_heads: 32,
      max_position_embeddings: 4096,
      original_max_position_embeddings: 4096,
      rms_norm_eps: 1e-5,
      sliding_window: null,
      ...config,
    };
    c.num_key_value_heads ??= c.num_attention_heads;
    if (c.rope_parameters === undefined) {
      const scaling = c.rope_scaling as Json | null | undefined;
      c.rope_parameters = {
        ...(scaling ?? {}),
        rope_theta: c.rope_theta ?? 10000,
        partial_rotary_factor: c.partial_rotary_factor ?? 1.0,
        rope_type: scaling ? scaling.rope_type ?? scaling.type : "default",
        ...(scaling
          ? { original_max_position_embeddings: c.original_max_position_embeddings }
          : {}),
      };
    }
    return c;
  },
  extraTensors(config) {
    const f = phi3LongRope(config);
    if (f === undefined) return [];
    return [
      { name: "rope_factors_long.weight", values: new Float32Array(f.long) },
      { name: "rope_factors_short.weight", values: new Float32Array(f.short) },
    ];
  },
  extraMetadata(config) {
    const f = phi3LongRope(config);
    return f === undefined ? [] : [["phi3.rope.scaling.attn_factor", meta.f32(f.attnFactor)]];
  },
  map(name) {
    if (name.endsWith(".rotary_emb.inv_freq")) return undefined;
    return { name: mapName(PHI3_NAMES, name) };
  },
  parameters(config, fileType) {
    const embd = integer(config, ["hidden_size", "n_embd"])!;
    const heads = integer(config, ["num_attention_heads", "n_head"])!;
    const rope = config.rope_parameters as Json;
    phi3LongRope(config); // checks the RoPE scaling
    const orig = rope.original_max_position_embeddings ??
      integer(config, ["original_max_position_embeddings"], true);
    if (orig === undefined) {
      throw new ConvertError("config.json: no original_max_position_embeddings");
    }
    const theta = ((rope.full_attention ?? rope) as Json).rope_theta ?? config.rope_theta;
    if (typeof theta !== "number") throw new ConvertError("config.json: no rope_theta");
    return [
      [
        "phi3.context_length",
        meta.u32(integer(config, ["n_positions", "max_position_embeddings"])!),
      ],
      ["phi3.rope.scaling.original_context_length", meta.u32(orig as number)],
      ["phi3.embedding_length", meta.u32(embd)],
      ["phi3.feed_forward_length", meta.u32(integer(config, ["intermediate_size"])!)],
      [
        "phi3.block_count",
        meta.u32(integer(config, ["n_layers", "num_hidden_layers", "n_layer", "num_layers"])!),
      ],
      ["phi3.attention.head_count", meta.u32(heads)],
      [
        "phi3.attention.head_count_kv",
        meta.u32(integer(config, ["num_key_value_heads", "n_head_kv"])!),
      ],
      ["phi3.attention.layer_norm_rms_epsilon", meta.f32(find(config, ["rms_norm_eps"])!)],
      ["phi3.rope.dimension_count", meta.u32(phi3RopeDims(config))],
      ["phi3.rope.freq_base", meta.f32(theta)],
      ["general.file_type", meta.u32(fileType)],
      ["phi3.attention.sliding_window", meta.u32((config.sliding_window ?? 0) as number)],
    ];
  },
};

/** `config.json` `architectures[0]` → the converter's entry. */
export const CONVERT_ARCHITECTURES: ReadonlyMap<string, ConvertArchitecture> = new Map([
  ["BertModel", bert],
  ["BertForMaskedLM", bert],
  ["LlamaForCausalLM", llama],
  ["MistralForCausalLM", llama],
  ["Qwen2ForCausalLM", qwen("qwen2")],
  ["Qwen3ForCausalLM", qwen("qwen3")],
  ["Gemma3ForCausalLM", gemma3],
  ["Phi3ForCausalLM", phi3],
]);
