/**
 * The Hugging Face architectures `dotllm convert` writes, as
 * `convert_hf_to_gguf.py` writes them: which `config.json` `architectures`
 * value maps to which GGUF architecture, how each tensor is renamed (or
 * dropped), whether Q/K rows are permuted, and the hyper-parameter keys in
 * the reference's order.
 *
 * @module
 */
import { meta } from "../gguf/writer.ts";
import { ConvertError } from "./errors.ts";
import { type Metadata, readJson } from "./vocab.ts";

type Json = Record<string, unknown>;

/** A tensor as the GGUF file names it, and how its rows are rearranged. */
export interface MappedTensor {
  readonly name: string;
  /** Llama's Q/K: undo Hugging Face's RoPE row order with this many heads. */
  readonly permuteHeads?: number;
}

/** One architecture of the converter. */
export interface ConvertArchitecture {
  /** `general.architecture`. */
  readonly gguf: string;
  /** The tokenizer it writes. */
  readonly tokenizer: "bert" | "gpt2";
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
  /** Keys the reference adds after the tokenizer's. */
  afterTokenizer?(config: Json): Metadata;
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
  const rope = (config.rope_parameters ?? config.rope_scaling ?? {}) as Json;
  const ropeType = rope.rope_type ?? rope.type;
  if (ropeType !== undefined && ropeType !== null && ropeType !== "default") {
    throw new ConvertError(`config.json: RoPE scaling "${ropeType}" is not supported here`);
  }
  const theta = rope.rope_theta ?? find(config, [
    "global_rope_theta",
    "rope_global_theta",
    "rope_theta_global",
    "rope_theta",
    "rotary_emb_base",
  ], true);
  if (theta !== undefined) out.push([`${a}.rope.freq_base`, meta.f32(theta as number)]);
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

const llama: ConvertArchitecture = {
  gguf: "llama",
  tokenizer: "gpt2",
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
  afterTokenizer(config) {
    // LlamaModel.set_vocab: "Apply to granite small models only" (any vocabulary of 49152).
    return config.vocab_size === 49152 ? [["tokenizer.ggml.add_bos_token", meta.bool(false)]] : [];
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

/** `config.json` `architectures[0]` → the converter's entry. */
export const CONVERT_ARCHITECTURES: ReadonlyMap<string, ConvertArchitecture> = new Map([
  ["BertModel", bert],
  ["BertForMaskedLM", bert],
  ["LlamaForCausalLM", llama],
  ["MistralForCausalLM", llama],
  ["Qwen2ForCausalLM", qwen("qwen2")],
  ["Qwen3ForCausalLM", qwen("qwen3")],
]);
