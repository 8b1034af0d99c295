/**
 * Which type each tensor gets: a port of llama.cpp's `llama-quant.cpp`
 * (`tensor_allows_quantization`, `llama_tensor_get_type`,
 * `llama_tensor_get_type_impl`, `tensor_type_fallback` and the counters they
 * share), rule for rule and in the same order, so a mix (Q4_K_M, Q3_K_S, ...)
 * picks the same type per tensor as llama-quantize. Pure: names, shapes and
 * hyper-parameters in, types out; no file is read.
 *
 * @example
 * ```ts
 * import { planTensorTypes } from "./policy.ts";
 * import { LlamaFtype } from "./ftype.ts";
 * const plan = planTensorTypes(
 *   [{ name: "blk.0.attn_v.weight", dims: [4096, 1024], type: 0 }],
 *   { arch: "llama", layerCount: 1, headCount: 32, headCountKv: 8 },
 *   { ftype: LlamaFtype.MOSTLY_Q4_K_M },
 * );
 * console.log(plan.types); // [14] (Q6_K: the first attn_v gets more bits)
 * ```
 *
 * @module
 */
import { blockElements, ftypeDefaultType, isQuantizedType, LlamaFtype, T } from "./ftype.ts";
import { ggmlTypeById } from "../gguf/types.ts";

/** A tensor as the rules see it: its name, ggml dims (`dims[0]` is the row) and type id. */
export interface PolicyTensor {
  readonly name: string;
  readonly dims: readonly number[];
  readonly type: number;
}

/** The hyper-parameters the rules read (llama.cpp's `hparams` and `model.type`). */
export interface PolicyModel {
  /** `general.architecture`. */
  readonly arch: string;
  /** `<arch>.block_count` (n_layer_all). */
  readonly layerCount: number;
  /** `<arch>.nextn_predict_layers` (default 0). */
  readonly nextnLayerCount?: number;
  /** `<arch>.attention.head_count` of layer 0. */
  readonly headCount: number;
  /** `<arch>.attention.head_count_kv` of layer 0 (default: headCount). */
  readonly headCountKv?: number;
  /** `<arch>.expert_count` (default 0). */
  readonly expertCount?: number;
}

/** The options of llama-quantize that change the types (`llama_model_quantize_params`). */
export interface PolicyParams {
  /** The `llama_ftype`. */
  readonly ftype: number;
  /** `--pure`: every quantizable tensor gets the default type (fallbacks still apply). */
  readonly pure?: boolean;
  /** False for `--leave-output-tensor`. Default true. */
  readonly quantizeOutputTensor?: boolean;
  /** `--output-tensor-type` (a ggml type id). */
  readonly outputTensorType?: number;
  /** `--token-embedding-type` (a ggml type id). */
  readonly tokenEmbeddingType?: number;
}

/** What the rules decided. */
export interface TypePlan {
  /** The target type of each tensor, in the order given. */
  readonly types: number[];
  /** Which tensors may be quantized at all (the others are copied as they are). */
  readonly quantizable: boolean[];
  /** Tensors whose row did not fit the chosen type's block (llama.cpp's n_fallback). */
  readonly fallbackCount: number;
  /** One line per fallback, as llama-quantize warns. */
  readonly warnings: string[];
}

/** A broad tensor category (llama.cpp's `tensor_category`). */
export const Category = {
  TOKEN_EMBD: "token_embd",
  ATTENTION_Q: "attn_q",
  ATTENTION_V: "attn_v",
  ATTENTION_K: "attn_k",
  ATTENTION_QKV: "attn_qkv",
  ATTENTION_KV_B: "attn_kv_b",
  ATTENTION_OUTPUT: "attn_output",
  FFN_UP: "ffn_up",
  FFN_GATE: "ffn_gate",
  FFN_DOWN: "ffn_down",
  OUTPUT: "output",
  OTHER: "other",
} as const;
/** One of {@linkcode Category}. */
export type Category = typeof Category[keyof typeof Category];

/** `tensor_get_category`. */
export function tensorCategory(name: string): Category {
  if (name === "output.weight") return Category.OUTPUT;
  if (name === "token_embd.weight" || name === "per_layer_token_embd.weight") {
    return Category.TOKEN_EMBD;
  }
  if (name.includes("attn_qkv.weight")) return Category.ATTENTION_QKV;
  if (name.includes("attn_kv_b.weight")) return Category.ATTENTION_KV_B;
  if (name.includes("attn_v.weight")) return Category.ATTENTION_V;
  if (name.includes("attn_k.weight")) return Category.ATTENTION_K;
  if (name.includes("attn_q.weight")) return Category.ATTENTION_Q;
  if (name.includes("attn_output.weight")) return Category.ATTENTION_OUTPUT;
  if (name.includes("ffn_up")) return Category.FFN_UP;
  if (name.includes("ffn_gate")) return Category.FFN_GATE;
  if (name.includes("ffn_down")) return Category.FFN_DOWN;
  return Category.OTHER;
}

function isAttnV(c: Category): boolean {
  return c === Category.ATTENTION_V || c === Category.ATTENTION_QKV ||
    c === Category.ATTENTION_KV_B;
}

/** `ggml_n_dims`: dimensions up to the last one that is not 1 (at least 1). */
export function ggmlDimCount(dims: readonly number[]): number {
  for (let i = dims.length - 1; i >= 1; i--) if (dims[i] !== 1) return i + 1;
  return 1;
}

/** Name fragments that are never quantized (llama.cpp keeps them as they are). */
const NEVER_QUANTIZED = [
  "_norm.weight",
  "ffn_gate_inp.weight",
  "ffn_gate_tid2eid.weight",
  "altup",
  "laurel",
  "per_layer_model_proj",
  "ssm_conv1d",
  "shortconv.conv.weight",
  "indexer.k_proj.weight",
  "indexer.q_proj.weight",
  "time_mix_first.weight",
  "time_mix_w0.weight",
  "time_mix_w1.weight",
  "time_mix_w2.weight",
  "time_mix_v0.weight",
  "time_mix_v1.weight",
  "time_mix_v2.weight",
  "time_mix_a0.weight",
  "time_mix_a1.weight",
  "time_mix_a2.weight",
  "time_mix_g1.weight",
  "time_mix_g2.weight",
  "time_mix_decay_w1.weight",
  "time_mix_decay_w2.weight",
  "time_mix_lerp_fused.weight",
  "attn_rel_b.weight",
  ".position_embd",
  "sam.pos_embd",
  "sam.neck.",
  "sam.net_",
  ".rel_pos",
  ".patch_embd",
  ".patch_merger",
  "a.rvq.codebook",
  "mm.a.code_embd",
];

const NEVER_QUANTIZED_GLM5_NEXT = [
  "hc_",
  "indexer.attn_q_b",
  "indexer.attn_k",
  "indexer.proj",
  "indexer_compressor_gate",
  "indexer_compressor_ape",
  "ssm_f_a.weight",
  "ssm_f_b.weight",
  "ssm_g_a.weight",
  "ssm_g_b.weight",
  "ssm_beta.weight",
  "attn_kv_a_mqa.weight",
  "attn_k_b.weight",
  "attn_v_b.weight",
];

/** `tensor_allows_quantization`: 2D/3D tensors named `*weight`, minus llama.cpp's exceptions. */
export function tensorAllowsQuantization(
  tensor: PolicyTensor,
  arch: string,
  params: Pick<PolicyParams, "quantizeOutputTensor">,
): boolean {
  if (ggmlDimCount(tensor.dims) < 2) return false;
  const name = tensor.name;
  // name.rfind("weight") == name.size() - 6 (true too for a 5-character name without it:
  // npos == size_t(-1) == size - 6 only then, which cannot happen for size 5... it can:
  // 5 - 6 wraps to npos). Kept exact.
  const last = name.lastIndexOf("weight");
  let quantize = last === -1 ? name.length === 5 : last === name.length - 6;
  quantize &&= NEVER_QUANTIZED.every((s) => !name.includes(s));
  quantize &&= (params.quantizeOutputTensor ?? true) || name !== "output.weight";
  // LLM_TN(arch)(POS_EMBD / TOKEN_TYPES, "weight") is the same for every arch.
  quantize &&= name !== "position_embd.weight" && name !== "token_types.weight";
  if (arch === "glm5-next") quantize &&= NEVER_QUANTIZED_GLM5_NEXT.every((s) => !name.includes(s));
  return quantize;
}

function typeName(id: number): string {
  return (ggmlTypeById(id)?.name ?? `type ${id}`).toLowerCase()
    .replace(/_k$/, "_K");
}

/** A problem the rules cannot resolve (llama.cpp throws the same). */
export class PolicyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PolicyError";
  }
}

/** The counters llama-quant keeps across tensors (`quantize_state_impl`). */
interface State {
  nAttentionWv: number;
  iAttentionWv: number;
  nFfnDown: number;
  iFfnDown: number;
  nFfnGate: number;
  iFfnGate: number;
  nFfnUp: number;
  iFfnUp: number;
  nFallback: number;
  hasTiedEmbeddings: boolean;
  warnings: string[];
}

/** `sscanf(name, "blk.%d.", &i)`: the layer number, or undefined when it does not parse. */
export function blockIndex(name: string): number | undefined {
  const m = /^blk\.[ \t\n\v\f\r]*([+-]?\d+)/.exec(name);
  if (m === null) return undefined;
  const n = Number(m[1]);
  // Values past int range are undefined behaviour in C; they name no real layer.
  return Number.isSafeInteger(n) && n >= -0x8000_0000 && n <= 0x7fff_ffff ? n : undefined;
}

function useMoreBits(iLayer: number, nLayers: number): boolean {
  const div = (a: number, b: number) => Math.trunc(a / b);
  return iLayer < div(nLayers, 8) || iLayer >= div(7 * nLayers, 8) ||
    cmod(iLayer - div(nLayers, 8), 3) === 2;
}

/** C's `%` (the sign of the dividend). */
function cmod(a: number, b: number): number {
  return a % b === 0 ? 0 : a % b;
}

function tensorTypeFallback(s: State, t: PolicyTensor, target: number): number {
  let result = target;
  const ncols = t.dims[0];
  const qk = blockElements(target);
  if (ncols % qk !== 0) {
    let line = `${t.name.padEnd(36)} - ncols ${String(ncols).padStart(6)} not divisible by ${
      String(qk).padStart(3)
    } (required for type ${typeName(target).padStart(7)}) `;
    s.nFallback++;
    switch (target) {
      case T.IQ1_S:
      case T.IQ1_M:
      case T.IQ2_XXS:
      case T.IQ2_XS:
      case T.IQ2_S:
      case T.IQ3_XXS:
      case T.IQ3_S:
      case T.IQ4_XS:
        result = T.IQ4_NL;
        break;
      case T.Q2_0:
      case T.Q2_K:
      case T.Q3_K:
      case T.TQ1_0:
      case T.TQ2_0:
        result = T.Q4_0;
        break;
      case T.Q4_K:
        result = T.Q5_0;
        break;
      case T.Q5_K:
        result = T.Q5_1;
        break;
      case T.Q6_K:
        result = T.Q8_0;
        break;
      default:
        if (qk <= 32) {
          result = target;
          break;
        }
        throw new PolicyError(`no tensor type fallback is defined for type ${typeName(target)}`);
    }
    if (ncols % blockElements(result) !== 0) {
      line += "(WARNING: must use F16 due to unusual shape) ";
      result = T.F16;
    }
    s.warnings.push(line + `-> falling back to ${typeName(result).padStart(7)}`);
  }
  return result;
}

/** The model facts the impl reads, derived once. */
interface ModelFacts {
  arch: string;
  nGqa: number;
  nExpert: number;
  is70B: boolean;
}

function modelFacts(m: PolicyModel): ModelFacts {
  const nHeadKv = m.headCountKv ?? m.headCount;
  const nGqa = nHeadKv === 0 ? 0 : Math.trunc(m.headCount / nHeadKv);
  const nExpert = m.expertCount ?? 0;
  const nLayer = m.layerCount - (m.nextnLayerCount ?? 0);
  // LLM_TYPE_70B as each model's load_arch_hparams sets it (only it matters here).
  let is70B = false;
  if (m.arch === "llama") is70B = nExpert !== 8 && nLayer === 80 && m.headCount !== nHeadKv;
  else if (m.arch === "deci" || m.arch === "olmo" || m.arch === "qwen2") is70B = nLayer === 80;
  else if (m.arch === "jais2") is70B = nLayer === 68;
  return { arch: m.arch, nGqa, nExpert, is70B };
}

function layerInfo(
  f: ModelFacts,
  iLayer: number,
  nLayer: number,
  name: string,
): [number, number] {
  if (f.nExpert > 1) {
    const i = blockIndex(name);
    if (i === undefined) throw new PolicyError(`Failed to determine layer for tensor ${name}`);
    if (i < 0 || i >= nLayer) {
      throw new PolicyError(`Bad layer ${i} for tensor ${name}. Must be in [0, ${nLayer})`);
    }
    return [i, nLayer];
  }
  return [iLayer, nLayer];
}

/** `llama_tensor_get_type_impl`, branch for branch. */
function getTypeImpl(
  s: State,
  f: ModelFacts,
  p: PolicyParams,
  newType: number,
  t: PolicyTensor,
  ftype: number,
  category: Category,
): number {
  const F = LlamaFtype;
  const name = t.name;
  const arch = f.arch;
  const div = (a: number, b: number) => Math.trunc(a / b);

  if (
    arch === "glm5-next" &&
    (name.includes("attn_q_a") || name.includes("attn_q_b") || name.includes("nextn.eh_proj"))
  ) {
    if (newType !== T.F32 && newType !== T.BF16 && newType !== T.F16) return T.Q8_0;
  }

  const iq2 = ftype === F.MOSTLY_IQ2_XXS || ftype === F.MOSTLY_IQ2_XS ||
    ftype === F.MOSTLY_IQ1_S || ftype === F.MOSTLY_IQ2_S || ftype === F.MOSTLY_IQ2_M ||
    ftype === F.MOSTLY_IQ1_M;

  if (category === Category.OUTPUT || (s.hasTiedEmbeddings && category === Category.TOKEN_EMBD)) {
    if (p.outputTensorType !== undefined) {
      newType = p.outputTensorType;
    } else {
      const nx = t.dims[0];
      const qk = blockElements(newType);
      if (ftype === F.MOSTLY_MXFP4_MOE) newType = T.Q8_0;
      else if (arch === "falcon" || nx % qk !== 0) newType = T.Q8_0;
      else if (
        ftype === F.MOSTLY_IQ2_XXS || ftype === F.MOSTLY_IQ2_XS || ftype === F.MOSTLY_IQ3_XXS ||
        ftype === F.MOSTLY_IQ1_S || ftype === F.MOSTLY_IQ2_S || ftype === F.MOSTLY_IQ2_M ||
        ftype === F.MOSTLY_IQ1_M
      ) newType = T.Q5_K;
      else if (newType !== T.Q8_0) newType = T.Q6_K;
    }
  } else if (ftype === F.MOSTLY_MXFP4_MOE) {
    const bailingExpert = arch === "bailingmoe3" &&
      (category === Category.FFN_UP || category === Category.FFN_GATE ||
        category === Category.FFN_DOWN);
    const ne2 = t.dims[2] ?? 1;
    newType = ne2 > 1 && (arch !== "bailingmoe3" || bailingExpert) ? T.MXFP4 : T.Q8_0;
  } else if (category === Category.TOKEN_EMBD) {
    if (p.tokenEmbeddingType !== undefined) {
      newType = p.tokenEmbeddingType;
    } else if (
      ftype === F.MOSTLY_IQ2_XXS || ftype === F.MOSTLY_IQ2_XS || ftype === F.MOSTLY_IQ1_S ||
      ftype === F.MOSTLY_IQ1_M
    ) newType = T.Q2_K;
    else if (ftype === F.MOSTLY_IQ2_S || ftype === F.MOSTLY_IQ2_M) newType = T.IQ3_S;
    else if (ftype === F.MOSTLY_IQ3_XXS) newType = T.IQ3_S;
    else if (
      ftype === F.MOSTLY_TQ1_0 || ftype === F.MOSTLY_TQ2_0 || ftype === F.MOSTLY_Q2_0
    ) newType = T.Q4_K;
  } else if (iq2) {
    if (isAttnV(category)) {
      if (f.nGqa >= 4 || f.nExpert >= 4) newType = T.Q4_K;
      else {
        newType = ftype === F.MOSTLY_IQ2_S || ftype === F.MOSTLY_IQ2_M ? T.IQ3_S : T.Q2_K;
      }
      ++s.iAttentionWv;
    } else if (f.nExpert === 8 && category === Category.ATTENTION_K) {
      newType = T.Q4_K;
    } else if (category === Category.FFN_DOWN) {
      if (s.iFfnDown < div(s.nFfnDown, 8)) {
        newType = ftype === F.MOSTLY_IQ2_S || ftype === F.MOSTLY_IQ2_M ? T.IQ3_S : T.Q2_K;
      }
      ++s.iFfnDown;
    } else if (category === Category.ATTENTION_OUTPUT) {
      if (f.nExpert === 8) newType = T.Q5_K;
      else if (ftype === F.MOSTLY_IQ1_S || ftype === F.MOSTLY_IQ1_M) newType = T.IQ2_XXS;
      else if (ftype === F.MOSTLY_IQ2_S || ftype === F.MOSTLY_IQ2_M) newType = T.IQ3_S;
    }
  } else if (isAttnV(category)) {
    if (ftype === F.MOSTLY_Q2_K) newType = f.nGqa >= 4 ? T.Q4_K : T.Q3_K;
    else if (ftype === F.MOSTLY_Q2_K_S && f.nGqa >= 4) newType = T.Q4_K;
    else if (ftype === F.MOSTLY_IQ3_XXS) {
      // !qs.has_imatrix: dotllm never has one.
      newType = f.nGqa >= 4 ? T.Q4_K : T.IQ3_S;
    } else if ((ftype === F.MOSTLY_IQ3_XS || ftype === F.MOSTLY_IQ3_S) && f.nGqa >= 4) {
      newType = T.Q4_K;
    } else if (ftype === F.MOSTLY_IQ3_M) newType = T.Q4_K;
    else if (ftype === F.MOSTLY_Q3_K_M) newType = s.iAttentionWv < 2 ? T.Q5_K : T.Q4_K;
    else if (ftype === F.MOSTLY_Q3_K_L) newType = T.Q5_K;
    else if ((ftype === F.MOSTLY_IQ4_NL || ftype === F.MOSTLY_IQ4_XS) && f.nGqa >= 4) {
      newType = T.Q5_K;
    } else if (
      (ftype === F.MOSTLY_Q4_K_M || ftype === F.MOSTLY_Q5_K_M) &&
      useMoreBits(s.iAttentionWv, s.nAttentionWv)
    ) newType = T.Q6_K;
    else if (ftype === F.MOSTLY_Q4_K_S && s.iAttentionWv < 4) newType = T.Q5_K;
    if (f.is70B && (newType === T.Q3_K || newType === T.Q4_K)) newType = T.Q5_K;
    if (f.nExpert === 8) newType = T.Q8_0;
    ++s.iAttentionWv;
  } else if (category === Category.ATTENTION_K) {
    if (f.nExpert === 8) newType = T.Q8_0;
    else if (ftype === F.MOSTLY_IQ3_XS) newType = T.IQ3_XXS;
    else if (ftype === F.MOSTLY_IQ3_XXS) newType = T.IQ2_S;
  } else if (category === Category.ATTENTION_Q) {
    if (ftype === F.MOSTLY_IQ3_XS) newType = T.IQ3_XXS;
    else if (ftype === F.MOSTLY_IQ3_XXS) newType = T.IQ2_S;
  } else if (category === Category.FFN_DOWN) {
    const [iLayer, nLayer] = layerInfo(f, s.iFfnDown, s.nFfnDown, name);
    if (ftype === F.MOSTLY_Q2_K) newType = T.Q3_K;
    else if (ftype === F.MOSTLY_Q2_K_S) {
      if (iLayer < div(nLayer, 8)) newType = T.Q4_K;
    } else if (ftype === F.MOSTLY_IQ3_XXS) {
      newType = iLayer < div(nLayer, 8) ? T.Q4_K : T.Q3_K;
    } else if (ftype === F.MOSTLY_Q3_K_M) {
      newType = iLayer < div(nLayer, 16)
        ? T.Q5_K
        : arch !== "falcon" || useMoreBits(iLayer, nLayer)
        ? T.Q4_K
        : T.Q3_K;
    } else if (
      ftype === F.MOSTLY_IQ3_M &&
      (iLayer < div(nLayer, 8) || (f.nExpert === 8 && useMoreBits(iLayer, nLayer)))
    ) newType = T.Q4_K;
    else if (ftype === F.MOSTLY_Q3_K_L) newType = arch === "falcon" ? T.Q4_K : T.Q5_K;
    else if (ftype === F.MOSTLY_Q4_K_M) {
      if (arch === "falcon") {
        newType = iLayer < div(nLayer, 16) ? T.Q6_K : useMoreBits(iLayer, nLayer) ? T.Q5_K : T.Q4_K;
      } else if (useMoreBits(iLayer, nLayer)) newType = T.Q6_K;
    } else if (
      iLayer < div(nLayer, 8) && (ftype === F.MOSTLY_IQ4_NL || ftype === F.MOSTLY_IQ4_XS)
    ) newType = T.Q5_K;
    else if (ftype === F.MOSTLY_Q5_K_M && useMoreBits(iLayer, nLayer)) newType = T.Q6_K;
    else if (ftype === F.MOSTLY_Q4_K_S && arch !== "falcon" && iLayer < div(nLayer, 8)) {
      newType = T.Q5_K;
    }
    // (Q4_0/Q5_0 with an importance matrix: never here, dotllm has none.)
    ++s.iFfnDown;
  } else if (category === Category.ATTENTION_OUTPUT) {
    if (arch !== "falcon") {
      if (f.nExpert === 8) {
        if (
          ftype === F.MOSTLY_Q2_K || ftype === F.MOSTLY_IQ3_XS || ftype === F.MOSTLY_IQ3_XXS ||
          ftype === F.MOSTLY_Q3_K_S || ftype === F.MOSTLY_Q3_K_M || ftype === F.MOSTLY_IQ4_NL ||
          ftype === F.MOSTLY_Q4_K_S || ftype === F.MOSTLY_Q4_K_M || ftype === F.MOSTLY_IQ3_S ||
          ftype === F.MOSTLY_IQ3_M || ftype === F.MOSTLY_IQ4_XS
        ) newType = T.Q5_K;
      } else {
        if (ftype === F.MOSTLY_Q2_K) newType = T.Q3_K;
        else if (ftype === F.MOSTLY_IQ3_XXS) newType = T.IQ3_S;
        else if (ftype === F.MOSTLY_Q3_K_M) newType = T.Q4_K;
        else if (ftype === F.MOSTLY_Q3_K_L) newType = T.Q5_K;
        else if (ftype === F.MOSTLY_IQ3_M) newType = T.Q4_K;
      }
    } else if (ftype === F.MOSTLY_Q3_K_L) newType = T.Q4_K;
  } else if (category === Category.ATTENTION_QKV) {
    if (
      ftype === F.MOSTLY_Q3_K_M || ftype === F.MOSTLY_Q3_K_L || ftype === F.MOSTLY_IQ3_M
    ) newType = T.Q4_K;
    else if (ftype === F.MOSTLY_Q4_K_M) newType = T.Q5_K;
    else if (ftype === F.MOSTLY_Q5_K_M) newType = T.Q6_K;
  } else if (category === Category.FFN_GATE) {
    const [iLayer, nLayer] = layerInfo(f, s.iFfnGate, s.nFfnGate, name);
    if (
      ftype === F.MOSTLY_IQ3_XS && iLayer >= div(nLayer, 8) && iLayer < div(7 * nLayer, 8)
    ) newType = T.IQ3_XXS;
    ++s.iFfnGate;
  } else if (category === Category.FFN_UP) {
    const [iLayer, nLayer] = layerInfo(f, s.iFfnUp, s.nFfnUp, name);
    if (
      ftype === F.MOSTLY_IQ3_XS && iLayer >= div(nLayer, 8) && iLayer < div(7 * nLayer, 8)
    ) newType = T.IQ3_XXS;
    ++s.iFfnUp;
  }
  return newType;
}

/**
 * The target type of every tensor, visiting them in the order given (llama.cpp
 * visits them in its `weights_map` order, see `sortTensorNames`; the counters
 * depend on it). Tensors that may not be quantized keep their type.
 */
export function planTensorTypes(
  tensors: readonly PolicyTensor[],
  model: PolicyModel,
  params: PolicyParams,
): TypePlan {
  const defaultType = ftypeDefaultType(params.ftype);
  if (defaultType === undefined) throw new PolicyError(`invalid output file type ${params.ftype}`);
  const facts = modelFacts(model);
  const s: State = {
    nAttentionWv: 0,
    iAttentionWv: 0,
    nFfnDown: model.layerCount,
    iFfnDown: 0,
    nFfnGate: model.layerCount,
    iFfnGate: 0,
    nFfnUp: model.layerCount,
    iFfnUp: 0,
    nFallback: 0,
    hasTiedEmbeddings: true,
    warnings: [],
  };
  const categories = tensors.map((t) => tensorCategory(t.name));
  for (const c of categories) {
    if (isAttnV(c)) s.nAttentionWv++;
    if (c === Category.OUTPUT) s.hasTiedEmbeddings = false;
  }
  const types: number[] = [];
  const quantizable: boolean[] = [];
  tensors.forEach((t, i) => {
    const allows = tensorAllowsQuantization(t, model.arch, params);
    quantizable.push(allows);
    if (!allows) {
      types.push(t.type);
      return;
    }
    const category = categories[i];
    if (params.tokenEmbeddingType !== undefined && category === Category.TOKEN_EMBD) {
      types.push(params.tokenEmbeddingType);
      return;
    }
    if (params.outputTensorType !== undefined && category === Category.OUTPUT) {
      types.push(params.outputTensorType);
      return;
    }
    let newType = defaultType;
    if (isQuantizedType(defaultType)) {
      if (!params.pure) {
        newType = getTypeImpl(s, facts, params, newType, t, params.ftype, category);
      }
      newType = tensorTypeFallback(s, t, newType);
    }
    types.push(newType);
  });
  return { types, quantizable, fallbackCount: s.nFallback, warnings: s.warnings };
}

/** UTF-8 byte order, as `std::string`'s `operator<` compares. */
function compareBytes(a: string, b: string): number {
  if (a === b) return 0;
  const ea = encoder.encode(a);
  const eb = encoder.encode(b);
  const n = Math.min(ea.length, eb.length);
  for (let i = 0; i < n; i++) if (ea[i] !== eb[i]) return ea[i] - eb[i];
  return ea.length - eb.length;
}
const encoder = new TextEncoder();

/**
 * llama.cpp's `weight_name_comparer`: by block number (`blk.N.`, -1 for the
 * rest), then by name. The order llama-quantize writes tensors in.
 */
export function compareTensorNames(a: string, b: string): number {
  const la = blockIndex(a) ?? -1;
  const lb = blockIndex(b) ?? -1;
  if (la !== lb) return la < lb ? -1 : 1;
  return compareBytes(a, b);
}
