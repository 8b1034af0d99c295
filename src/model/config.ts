/**
 * The hyper-parameters of a model, read from a GGUF file's `<prefix>.*`
 * metadata keys (the prefix from the architecture table) and checked for
 * consistency.
 *
 * @module
 */
import type { Gguf, GgufValue } from "../gguf/reader.ts";
import { architectureOf } from "./arch.ts";
import { ModelError } from "./errors.ts";
import { tagged } from "./_tagged.ts";

export { ModelError } from "./errors.ts";
export { SUPPORTED_ARCHITECTURES } from "./arch.ts";

/** A model's shape. */
export interface ModelConfig {
  /** `general.architecture`. */
  readonly architecture: string;
  /** `general.name` or "" when absent. */
  readonly name: string;
  /** Training context length (`<arch>.context_length`). */
  readonly contextLength: number;
  /** Model width (`<arch>.embedding_length`). */
  readonly embeddingLength: number;
  /** Transformer blocks (`<arch>.block_count`). */
  readonly blockCount: number;
  /** FFN hidden width (`<arch>.feed_forward_length`). */
  readonly feedForwardLength: number;
  /** Query heads (`<arch>.attention.head_count`). */
  readonly headCount: number;
  /** Key/value heads (`<arch>.attention.head_count_kv`, default `headCount`). */
  readonly headCountKv: number;
  /** Per-head width (`<arch>.attention.key_length`, default embedding / heads). */
  readonly headDim: number;
  /** Rotated dimensions per head (`<arch>.rope.dimension_count`, default `headDim`). */
  readonly ropeDimensionCount: number;
  /** RoPE frequency base (`<arch>.rope.freq_base`, default 10000). */
  readonly ropeFreqBase: number;
  /**
   * The norms' epsilon: `<arch>.attention.layer_norm_rms_epsilon` (RMSNorm), or for an
   * architecture of layer norms (BERT) `<arch>.attention.layer_norm_epsilon`.
   */
  readonly rmsEpsilon: number;
  /** Causal attention (`<arch>.attention.causal`, default the architecture's). */
  readonly causal: boolean;
  /** The pooling the file declares for embeddings (`<arch>.pooling_type`; `none` when absent). */
  readonly poolingType: PoolingType;
  /** Vocabulary size (rows of `token_embd.weight`). */
  readonly vocabSize: number;
  /** `<prefix>.attention.sliding_window`, 0 when absent (the table decides which layers use it). */
  readonly slidingWindow: number;
  /** `<prefix>.attention.sliding_window_pattern`, 0 when absent (the table's default applies). */
  readonly slidingWindowPattern: number;
  /** `<prefix>.rope.freq_base_swa`: the RoPE base of sliding-window layers (default 10000, as llama.cpp). */
  readonly ropeFreqBaseSwa: number;
  /**
   * `<prefix>.rope.scaling.original_context_length` (default the training context): past it
   * (per sequence), LongRoPE uses `rope_factors_long`, else `rope_factors_short`.
   */
  readonly ropeOriginalContextLength: number;
  /** `<prefix>.rope.scaling.attn_factor` (default 1): multiplies RoPE's cos and sin (LongRoPE). */
  readonly ropeAttnFactor: number;
}

/**
 * How the hidden states of a sequence become one embedding (llama.cpp's
 * `llama_pooling_type`): `none` (one per token), `mean`, `cls` (the first
 * token), `last`, `rank` (a reranker's classifier head, not run here).
 */
export type PoolingType = "none" | "mean" | "cls" | "last" | "rank";

/** `<arch>.pooling_type` values, by llama.cpp's enum number. */
export const POOLING_TYPES: readonly PoolingType[] = ["none", "mean", "cls", "last", "rank"];

/** The config of the Llama graph (the name before the architecture table). */
export type LlamaConfig = ModelConfig;

/** Upper bounds on every dimension (well above any real Llama). */
export const CONFIG_LIMITS = {
  contextLengthMax: 1 << 24,
  embeddingLengthMax: 1 << 16,
  blockCountMax: 1024,
  feedForwardLengthMax: 1 << 18,
  headCountMax: 1024,
  headDimMax: 512, // a sanity bound on the file; the kernels refuse past `Native.limits.headDimMax`
  vocabSizeMax: 1 << 22,
} as const;

function integer(
  gguf: Gguf,
  key: string,
  fallback: number | undefined,
  min: number,
  max: number,
): number {
  const value: GgufValue | undefined = gguf.metadata.get(key);
  if (value === undefined) {
    if (fallback === undefined) throw new ModelError(`missing metadata key "${key}"`);
    return fallback;
  }
  const n = typeof value === "bigint" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > max) {
    throw new ModelError(
      `metadata key "${key}" must be an integer in [${min}, ${max}], got ${String(value)}`,
    );
  }
  return n;
}

function float(gguf: Gguf, key: string, fallback: number | undefined, min: number): number {
  const value = gguf.metadata.get(key);
  if (value === undefined) {
    if (fallback === undefined) throw new ModelError(`missing metadata key "${key}"`);
    return fallback;
  }
  if (typeof value !== "number" || !Number.isFinite(value) || value <= min) {
    throw new ModelError(`metadata key "${key}" must be a number > ${min}, got ${String(value)}`);
  }
  return value;
}

function boolean(gguf: Gguf, key: string, fallback: boolean): boolean {
  const value = gguf.metadata.get(key);
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") {
    throw new ModelError(`metadata key "${key}" must be a boolean, got ${String(value)}`);
  }
  return value;
}

/**
 * Reads and checks the config of any architecture in the table; throws
 * {@linkcode ModelError} naming the key at fault, or listing the supported
 * architectures for one not in the table.
 */
export function readModelConfig(gguf: Gguf): ModelConfig {
  const architecture = gguf.metadata.get("general.architecture");
  if (typeof architecture !== "string") {
    throw new ModelError(`missing metadata key "general.architecture"`);
  }
  const arch = architectureOf(architecture);
  const a = arch.keyPrefix;
  const L = CONFIG_LIMITS;
  const embeddingLength = integer(
    gguf,
    `${a}.embedding_length`,
    undefined,
    1,
    L.embeddingLengthMax,
  );
  const headCount = integer(gguf, `${a}.attention.head_count`, undefined, 1, L.headCountMax);
  const headCountKv = integer(gguf, `${a}.attention.head_count_kv`, headCount, 1, headCount);
  if (headCount % headCountKv !== 0) {
    throw new ModelError(
      `"${a}.attention.head_count" ${headCount} is not a multiple of ` +
        `"${a}.attention.head_count_kv" ${headCountKv}`,
    );
  }
  const defaultHeadDim = embeddingLength % headCount === 0
    ? embeddingLength / headCount
    : undefined;
  const headDim = integer(gguf, `${a}.attention.key_length`, defaultHeadDim, 1, L.headDimMax);
  const valueLength = integer(gguf, `${a}.attention.value_length`, headDim, 1, L.headDimMax);
  if (valueLength !== headDim) {
    throw new ModelError(
      `"${a}.attention.value_length" ${valueLength} differs from the key length ${headDim}`,
    );
  }
  const ropeDimensionCount = integer(gguf, `${a}.rope.dimension_count`, headDim, 2, headDim);
  if (ropeDimensionCount % 2 !== 0) {
    throw new ModelError(`"${a}.rope.dimension_count" must be even, got ${ropeDimensionCount}`);
  }
  const scaling = gguf.metadata.get(`${a}.rope.scaling.type`);
  const scalingFactor = gguf.metadata.get(`${a}.rope.scaling.factor`);
  if (
    scaling !== undefined && scaling !== "none" && scaling !== "longrope" &&
    !(typeof scalingFactor === "number" && scalingFactor === 1)
  ) {
    throw new ModelError(`unsupported RoPE scaling "${String(scaling)}" (${a}.rope.scaling.type)`);
  }
  // Gemma 2-style logit soft-capping (tanh) has no kernel: refuse it rather than ignore it.
  const softcap = gguf.metadata.get(`${a}.final_logit_softcapping`);
  if (softcap !== undefined && softcap !== 0) {
    throw new ModelError(
      `unsupported final logit soft-capping ${String(softcap)} (${a}.final_logit_softcapping)`,
    );
  }
  const embd = gguf.tensorsByName.get("token_embd.weight");
  if (embd === undefined) throw new ModelError(`missing tensor "token_embd.weight"`);
  const vocabSize = embd.dims[1] ?? 1;
  if (vocabSize < 1 || vocabSize > L.vocabSizeMax) {
    throw new ModelError(
      `"token_embd.weight" has ${vocabSize} rows, outside [1, ${L.vocabSizeMax}]`,
    );
  }
  const name = gguf.metadata.get("general.name");
  const contextLength = integer(gguf, `${a}.context_length`, undefined, 1, L.contextLengthMax);
  return tagged({
    architecture,
    name: typeof name === "string" ? name : "",
    contextLength,
    embeddingLength,
    blockCount: integer(gguf, `${a}.block_count`, undefined, 1, L.blockCountMax),
    feedForwardLength: integer(
      gguf,
      `${a}.feed_forward_length`,
      undefined,
      1,
      L.feedForwardLengthMax,
    ),
    headCount,
    headCountKv,
    headDim,
    ropeDimensionCount,
    ropeFreqBase: float(gguf, `${a}.rope.freq_base`, 10000, 0),
    rmsEpsilon: arch.norms === "post"
      ? float(gguf, `${a}.attention.layer_norm_epsilon`, undefined, 0)
      : float(gguf, `${a}.attention.layer_norm_rms_epsilon`, undefined, 0),
    causal: boolean(gguf, `${a}.attention.causal`, arch.causal),
    poolingType: POOLING_TYPES[integer(gguf, `${a}.pooling_type`, 0, 0, POOLING_TYPES.length - 1)],
    vocabSize,
    slidingWindow: integer(gguf, `${a}.attention.sliding_window`, 0, 0, L.contextLengthMax),
    slidingWindowPattern: integer(
      gguf,
      `${a}.attention.sliding_window_pattern`,
      0,
      0,
      L.blockCountMax,
    ),
    ropeFreqBaseSwa: float(gguf, `${a}.rope.freq_base_swa`, 10000, 0),
    ropeOriginalContextLength: integer(
      gguf,
      `${a}.rope.scaling.original_context_length`,
      contextLength,
      1,
      L.contextLengthMax,
    ),
    ropeAttnFactor: float(gguf, `${a}.rope.scaling.attn_factor`, 1, 0),
  });
}

/** {@linkcode readModelConfig} (its name before the architecture table). */
export const readLlamaConfig: (gguf: Gguf) => ModelConfig = readModelConfig;
