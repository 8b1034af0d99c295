/**
 * Binds a Llama model's tensors by name, checking each one's type and shape
 * against the config before any address reaches the kernels.
 *
 * @module
 */
import type { Gguf, GgufTensorInfo } from "../gguf/reader.ts";
import { GgmlType } from "../gguf/types.ts";
import type { ComputableType } from "../kernels/types.ts";
import { type LlamaConfig, ModelError } from "./config.ts";

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

/** One transformer block's weights. */
export interface LayerWeights {
  readonly attnNorm: Weight; // [embd]
  readonly wq: Weight; // [heads·headDim rows][embd]
  readonly wk: Weight; // [kvHeads·headDim rows][embd]
  readonly wv: Weight; // [kvHeads·headDim rows][embd]
  readonly wo: Weight; // [embd rows][heads·headDim]
  readonly ffnNorm: Weight; // [embd]
  readonly wGate: Weight; // [ff rows][embd]
  readonly wUp: Weight; // [ff rows][embd]
  readonly wDown: Weight; // [embd rows][ff]
}

/** Every weight of the model. */
export interface LlamaWeights {
  readonly tokenEmbedding: Weight; // [vocab rows][embd]
  readonly layers: readonly LayerWeights[];
  readonly outputNorm: Weight; // [embd]
  /** The LM head: `output.weight`, or `token_embd.weight` when tied. */
  readonly output: Weight; // [vocab rows][embd]
  /** True when there is no `output.weight` and the embedding is reused. */
  readonly tiedOutput: boolean;
  /** Llama 3's per-dimension RoPE frequency factors, or undefined. */
  readonly ropeFreqs?: Weight; // [ropeDims / 2]
  /** The most common matmul weight type's name (for the summary line). */
  readonly typeName: string;
  /** Bytes of all tensors bound. */
  readonly sizeBytes: number;
}

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
  return {
    name: t.name,
    type: t.type.id,
    address: base + t.dataOffset,
    rowCount: shape[1] ?? 1,
    rowLength: shape[0],
    sizeBytes: t.sizeBytes,
  };
}

const F32_ONLY: Allowed = new Map([[GgmlType.F32, { name: "F32", blockElems: 1 }]]);

/**
 * Binds every tensor the forward pass reads. `base` is the address of the
 * file's mapping (the file's byte 0). Throws {@linkcode ModelError} naming the
 * tensor for a missing tensor, a wrong shape or a type not in `computable` (the
 * library's computable types).
 */
export function bindLlamaWeights(
  gguf: Gguf,
  config: LlamaConfig,
  base: number,
  computable: Allowed,
): LlamaWeights {
  const e = config.embeddingLength;
  const q = config.headCount * config.headDim;
  const kv = config.headCountKv * config.headDim;
  const ff = config.feedForwardLength;
  const v = config.vocabSize;
  const m = computable;
  const layers: LayerWeights[] = [];
  for (let i = 0; i < config.blockCount; i++) {
    const p = `blk.${i}.`;
    layers.push({
      attnNorm: bind(gguf, base, `${p}attn_norm.weight`, [e], F32_ONLY),
      wq: bind(gguf, base, `${p}attn_q.weight`, [e, q], m),
      wk: bind(gguf, base, `${p}attn_k.weight`, [e, kv], m),
      wv: bind(gguf, base, `${p}attn_v.weight`, [e, kv], m),
      wo: bind(gguf, base, `${p}attn_output.weight`, [q, e], m),
      ffnNorm: bind(gguf, base, `${p}ffn_norm.weight`, [e], F32_ONLY),
      wGate: bind(gguf, base, `${p}ffn_gate.weight`, [e, ff], m),
      wUp: bind(gguf, base, `${p}ffn_up.weight`, [e, ff], m),
      wDown: bind(gguf, base, `${p}ffn_down.weight`, [ff, e], m),
    });
  }
  const tokenEmbedding = bind(gguf, base, "token_embd.weight", [e, v], m);
  const outputInfo = gguf.tensorsByName.get("output.weight");
  const output = outputInfo ? check(outputInfo, base, [e, v], m) : tokenEmbedding;
  const ropeInfo = gguf.tensorsByName.get("rope_freqs.weight");
  const ropeFreqs = ropeInfo
    ? check(ropeInfo, base, [config.ropeDimensionCount / 2], F32_ONLY)
    : undefined;
  const outputNorm = bind(gguf, base, "output_norm.weight", [e], F32_ONLY);

  const all: Weight[] = [tokenEmbedding, outputNorm, ...layers.flatMap((l) => Object.values(l))];
  if (outputInfo) all.push(output);
  if (ropeFreqs) all.push(ropeFreqs);
  const counts = new Map<number, number>();
  for (const l of layers) {
    for (const w of [l.wq, l.wk, l.wv, l.wo, l.wGate, l.wUp, l.wDown]) {
      counts.set(w.type, (counts.get(w.type) ?? 0) + 1);
    }
  }
  const common = [...counts].sort((a, b) => b[1] - a[1])[0]?.[0] ?? tokenEmbedding.type;
  return {
    tokenEmbedding,
    layers,
    outputNorm,
    output,
    tiedOutput: outputInfo === undefined,
    ropeFreqs,
    typeName: computable.get(common)?.name ?? String(common),
    sizeBytes: all.reduce((sum, w) => sum + w.sizeBytes, 0),
  };
}
