/**
 * Binds a model's tensors by the names of its architecture's entry, checking
 * each one's type and shape against the config before any address reaches
 * the kernels.
 *
 * @module
 */
import type { Gguf, GgufTensorInfo } from "../gguf/reader.ts";
import { fileTypeName } from "../gguf/summary.ts";
import { GgmlType } from "../gguf/types.ts";
import type { ComputableType } from "../kernels/types.ts";
import {
  type Architecture,
  architectureOf,
  type Presence,
  type TensorKind,
  tensorName,
} from "./arch.ts";
import type { ModelConfig } from "./config.ts";
import { ModelError } from "./errors.ts";
import { tagged } from "./_tagged.ts";

/** The types a tensor may have: the library's computable types, or F32 only (norms). */
type Allowed = ReadonlyMap<number, Pick<ComputableType, "name" | "blockElems">>;

/** One bound tensor: where its data is and what it holds. */
export interface Weight {
  readonly name: string;
  /** ggml type id. */
  readonly type: number;
  /** Absolute address of the data in the mapping. */
  readonly address: number;
  /** Rows (`dims[1]`, 1 for a vector). */
  readonly rowCount: number;
  /** Elements per row (`dims[0]`). */
  readonly rowLength: number;
  readonly sizeBytes: number;
}

/**
 * One transformer block's weights; the optional ones exist as the
 * architecture table says (shapes as GGUF rows × elements).
 */
export interface LayerWeights {
  readonly attnNorm?: Weight; // [embd] (pre-norm architectures)
  readonly wq?: Weight; // [heads·headDim rows][embd] (absent when fused)
  readonly wk?: Weight; // [kvHeads·headDim rows][embd]
  readonly wv?: Weight; // [kvHeads·headDim rows][embd]
  readonly wqkv?: Weight; // [(heads + 2·kvHeads)·headDim rows][embd] (fused QKV)
  readonly bq?: Weight; // [heads·headDim]
  readonly bk?: Weight; // [kvHeads·headDim]
  readonly bv?: Weight; // [kvHeads·headDim]
  readonly qNorm?: Weight; // [headDim]
  readonly kNorm?: Weight; // [headDim]
  readonly wo: Weight; // [embd rows][heads·headDim]
  readonly postAttnNorm?: Weight; // [embd]
  readonly ffnNorm?: Weight; // [embd] (pre-norm architectures)
  readonly wGate?: Weight; // [ff rows][embd] (absent when fused with up)
  readonly wUp: Weight; // [ff rows][embd], or [2·ff rows][embd] fused (gate first)
  readonly wDown: Weight; // [embd rows][ff]
  readonly postFfnNorm?: Weight; // [embd]
  // Post-norm (BERT): biases of the output, up and down matrices, and the layer norms
  // (weight and bias) of the attention and FFN residual sums.
  readonly bo?: Weight; // [embd]
  readonly bUp?: Weight; // [ff]
  readonly bDown?: Weight; // [embd]
  readonly attnOutNorm?: Weight; // [embd]
  readonly attnOutNormBias?: Weight; // [embd]
  readonly layerOutNorm?: Weight; // [embd]
  readonly layerOutNormBias?: Weight; // [embd]
}

/** Every weight of the model. */
export interface ModelWeights {
  readonly tokenEmbedding: Weight; // [vocab rows][embd]
  readonly layers: readonly LayerWeights[];
  /** The final RMSNorm (absent in a post-norm encoder: BERT). */
  readonly outputNorm?: Weight; // [embd]
  /** BERT: learned absolute position embeddings, [context rows][embd]. */
  readonly positionEmbedding?: Weight;
  /** BERT: token-type embeddings (row 0, "sentence A", is added to every token). */
  readonly tokenTypes?: Weight; // [types rows][embd]
  /** BERT: the layer norm (weight, bias) of the summed embeddings. */
  readonly tokenEmbeddingNorm?: Weight; // [embd]
  readonly tokenEmbeddingNormBias?: Weight; // [embd]
  /** The LM head: `output.weight`, or `token_embd.weight` when tied. */
  readonly output: Weight; // [vocab rows][embd]
  /** True when there is no `output.weight` and the embedding is reused. */
  readonly tiedOutput: boolean;
  /** Llama 3's per-dimension RoPE frequency factors, or undefined. */
  readonly ropeFreqs?: Weight; // [ropeDims / 2]
  /** LongRoPE (Phi-3) factors past the original context, or undefined. */
  readonly ropeFactorsLong?: Weight; // [ropeDims / 2]
  /** LongRoPE (Phi-3) factors within the original context, or undefined. */
  readonly ropeFactorsShort?: Weight; // [ropeDims / 2]
  /**
   * For the summary line: the file type, `general.file_type`'s llama.cpp name
   * (`MOSTLY_Q4_K_M`: a mix names no single tensor type), or when the file has
   * none, the most common matmul weight type's name (`Q8_0`).
   */
  readonly typeName: string;
  /** Bytes of all tensors bound. */
  readonly sizeBytes: number;
}

/** {@linkcode ModelWeights} (its name before the architecture table). */
export type LlamaWeights = ModelWeights;

function bind(
  gguf: Gguf,
  base: number,
  name: string,
  shape: readonly number[],
  types: Allowed,
): Weight {
  const t: GgufTensorInfo | undefined = gguf.tensorsByName.get(name);
  if (t === undefined) throw new ModelError(`missing tensor "${name}"`);
  return check(t, base, shape, types);
}

function check(
  t: GgufTensorInfo,
  base: number,
  shape: readonly number[],
  types: Allowed,
): Weight {
  const type = types.get(t.type.id);
  if (type === undefined) {
    const allowed = [...types.values()].map((a) => a.name).join(", ");
    throw new ModelError(
      `tensor "${t.name}" has unsupported type ${t.type.name} (supported here: ${allowed})`,
    );
  }
  if (t.dims[0] % type.blockElems !== 0) {
    throw new ModelError(
      `tensor "${t.name}" has rows of ${
        t.dims[0]
      }, not a multiple of ${type.name}'s ${type.blockElems}-element blocks`,
    );
  }
  const dims = t.dims.slice();
  while (dims.length > shape.length && dims[dims.length - 1] === 1) dims.pop();
  if (dims.length !== shape.length || dims.some((d, i) => d !== shape[i])) {
    throw new ModelError(
      `tensor "${t.name}" has shape [${t.dims.join(", ")}], expected [${shape.join(", ")}]`,
    );
  }
  return tagged({
    name: t.name,
    type: t.type.id,
    address: base + t.dataOffset,
    rowCount: shape[1] ?? 1,
    rowLength: shape[0],
    sizeBytes: t.sizeBytes,
  });
}

const F32_ONLY: Allowed = new Map([[GgmlType.F32, { name: "F32", blockElems: 1 }]]);

/** F32, or any type `computable` can look rows up in (position embeddings: F16 when converted so). */
function F32_ONLY_OR(computable: Allowed): Allowed {
  return new Map([...F32_ONLY, ...computable]);
}

/**
 * Binds every tensor the forward pass reads, as `arch` names them. `base` is
 * the address of the file's mapping (the file's byte 0); `computable` the
 * library's computable types (`computableTypes(native)`). Throws
 * {@linkcode ModelError} naming the tensor for a missing tensor, a wrong
 * shape, an unsupported type, or an optional tensor the architecture does
 * not use (ignoring it would compute another function).
 */
export function bindWeights(
  gguf: Gguf,
  config: ModelConfig,
  base: number,
  computable: Allowed,
  arch: Architecture = architectureOf(config.architecture),
): ModelWeights {
  const e = config.embeddingLength;
  const d = config.headDim;
  const q = config.headCount * d;
  const kv = config.headCountKv * d;
  const ff = config.feedForwardLength;
  const v = config.vocabSize;
  const m = computable;
  /** A tensor of `presence`: bound when present (or required), refused when "none". */
  const maybe = (
    kind: TensorKind,
    layer: number,
    presence: Presence | boolean,
    shape: readonly number[],
    types: Allowed,
  ): Weight | undefined => {
    const name = tensorName(kind, layer);
    const info = gguf.tensorsByName.get(name);
    if (presence === "required" || presence === true) return bind(gguf, base, name, shape, types);
    if (info === undefined) return undefined;
    if (presence === "none" || presence === false) {
      throw new ModelError(`tensor "${name}" is not used by architecture "${arch.name}"`);
    }
    return check(info, base, shape, types);
  };
  const layers: LayerWeights[] = [];
  const post = arch.norms === "post";
  for (let i = 0; i < config.blockCount; i++) {
    const b = (kind: TensorKind, shape: readonly number[], types = m) =>
      bind(gguf, base, tensorName(kind, i), shape, types);
    const fq = arch.fusedQkv, fg = arch.fusedGateUp;
    const plain = arch.activation === "gelu";
    layers.push({
      attnNorm: maybe("attnNorm", i, !post, [e], F32_ONLY),
      wq: maybe("wq", i, !fq, [e, q], m),
      wk: maybe("wk", i, !fq, [e, kv], m),
      wv: maybe("wv", i, !fq, [e, kv], m),
      wqkv: maybe("wqkv", i, fq, [e, q + 2 * kv], m),
      bq: maybe("bq", i, arch.qkvBias, [q], F32_ONLY),
      bk: maybe("bk", i, arch.qkvBias, [kv], F32_ONLY),
      bv: maybe("bv", i, arch.qkvBias, [kv], F32_ONLY),
      qNorm: maybe("qNorm", i, arch.qkNorm, [d], F32_ONLY),
      kNorm: maybe("kNorm", i, arch.qkNorm, [d], F32_ONLY),
      wo: b("wo", [q, e]),
      postAttnNorm: maybe("postAttnNorm", i, arch.postAttentionNorm, [e], F32_ONLY),
      ffnNorm: maybe("ffnNorm", i, !post, [e], F32_ONLY),
      wGate: maybe("wGate", i, !fg && !plain, [e, ff], m),
      wUp: b("wUp", [e, fg ? 2 * ff : ff]),
      wDown: b("wDown", [ff, e]),
      postFfnNorm: maybe("postFfnNorm", i, arch.postFfnNorm, [e], F32_ONLY),
      bo: maybe("bo", i, post ? "optional" : "none", [e], F32_ONLY),
      bUp: maybe("bUp", i, post ? "optional" : "none", [ff], F32_ONLY),
      bDown: maybe("bDown", i, post ? "optional" : "none", [e], F32_ONLY),
      attnOutNorm: maybe("attnOutNorm", i, post, [e], F32_ONLY),
      attnOutNormBias: maybe("attnOutNormBias", i, post, [e], F32_ONLY),
      layerOutNorm: maybe("layerOutNorm", i, post, [e], F32_ONLY),
      layerOutNormBias: maybe("layerOutNormBias", i, post, [e], F32_ONLY),
    });
  }
  const tokenEmbedding = bind(gguf, base, tensorName("tokenEmbedding"), [e, v], m);
  const outputInfo = gguf.tensorsByName.get(tensorName("output"));
  const output = outputInfo ? check(outputInfo, base, [e, v], m) : tokenEmbedding;
  const ropeInfo = gguf.tensorsByName.get(tensorName("ropeFreqs"));
  const ropeFreqs = ropeInfo
    ? check(ropeInfo, base, [config.ropeDimensionCount / 2], F32_ONLY)
    : undefined;
  const outputNorm = maybe("outputNorm", 0, !post, [e], F32_ONLY);
  const positionEmbedding = maybe(
    "positionEmbedding",
    0,
    post,
    [e, config.contextLength],
    F32_ONLY_OR(m),
  );
  const typesInfo = gguf.tensorsByName.get(tensorName("tokenTypes"));
  const tokenTypes = typesInfo !== undefined && post
    ? check(typesInfo, base, [e, typesInfo.dims[1] ?? 1], F32_ONLY)
    : maybe("tokenTypes", 0, "none", [e], F32_ONLY);
  const tokenEmbeddingNorm = maybe("tokenEmbeddingNorm", 0, post, [e], F32_ONLY);
  const tokenEmbeddingNormBias = maybe("tokenEmbeddingNormBias", 0, post, [e], F32_ONLY);
  const factors = (kind: TensorKind) => {
    const info = gguf.tensorsByName.get(tensorName(kind));
    return info ? check(info, base, [config.ropeDimensionCount / 2], F32_ONLY) : undefined;
  };
  const ropeFactorsLong = factors("ropeFactorsLong");
  const ropeFactorsShort = factors("ropeFactorsShort");
  if ((ropeFactorsLong === undefined) !== (ropeFactorsShort === undefined)) {
    throw new ModelError(
      `LongRoPE needs both "${tensorName("ropeFactorsLong")}" and "${
        tensorName("ropeFactorsShort")
      }"`,
    );
  }

  const present = (w: Weight | undefined): w is Weight => w !== undefined;
  const layerWeights = layers.flatMap((l) => Object.values(l).filter(present));
  const all: Weight[] = [tokenEmbedding, ...layerWeights];
  for (
    const w of [
      outputNorm,
      positionEmbedding,
      tokenTypes,
      tokenEmbeddingNorm,
      tokenEmbeddingNormBias,
    ]
  ) if (w !== undefined) all.push(w);
  if (outputInfo) all.push(output);
  if (ropeFreqs) all.push(ropeFreqs);
  if (ropeFactorsLong && ropeFactorsShort) all.push(ropeFactorsLong, ropeFactorsShort);
  const counts = new Map<number, number>();
  for (const l of layers) {
    for (const w of [l.wq, l.wk, l.wv, l.wqkv, l.wo, l.wGate, l.wUp, l.wDown]) {
      if (w !== undefined) counts.set(w.type, (counts.get(w.type) ?? 0) + 1);
    }
  }
  const common = [...counts].sort((a, b) => b[1] - a[1])[0]?.[0] ?? tokenEmbedding.type;
  return {
    tokenEmbedding,
    layers,
    outputNorm,
    positionEmbedding,
    tokenTypes,
    tokenEmbeddingNorm,
    tokenEmbeddingNormBias,
    output,
    tiedOutput: outputInfo === undefined,
    ropeFreqs,
    ropeFactorsLong,
    ropeFactorsShort,
    typeName: fileTypeName(gguf) ?? computable.get(common)?.name ?? String(common),
    sizeBytes: all.reduce((sum, w) => sum + w.sizeBytes, 0),
  };
}

/** {@linkcode bindWeights} with the table's entry (its name before the architecture table). */
export function bindLlamaWeights(
  gguf: Gguf,
  config: ModelConfig,
  base: number,
  computable: Allowed,
): ModelWeights {
  return bindWeights(gguf, config, base, computable);
}
