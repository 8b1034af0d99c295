/**
 * The whole of a quantization decided before any tensor is read: the output
 * header llama-quantize would write (its metadata in its order, its tensor
 * order, each tensor's type, shape and offset) and what each tensor needs
 * (copy, convert, or an error). Pure: a parsed GGUF in, a plan out.
 *
 * llama-quantize builds its output `gguf_context` like this: every key of the
 * input in order (`gguf_set_kv`), then `general.quantization_version` and
 * `general.file_type` removed and appended, `split.*` removed; tensors in the
 * loader's `weights_map` order (block number, then name), each with its
 * dimensions up to the last that is not 1 (`ggml_n_dims`), data 32-aligned
 * with zero padding after every tensor, the last one included.
 *
 * @example
 * ```ts ignore
 * import { planQuantization } from "./plan.ts";
 * import { parseQuantType } from "./ftype.ts";
 * const plan = planQuantization(gguf, { type: parseQuantType("Q4_K_M")! });
 * console.log(plan.tensors.map((t) => `${t.name} ${t.to.name}`));
 * ```
 *
 * @module
 */
import type { Gguf, GgufTensorInfo, GgufValue } from "../gguf/reader.ts";
import { GgufArray, GgufValueType } from "../gguf/reader.ts";
import { ggmlTypeById, type GgmlTypeInfo } from "../gguf/types.ts";
import { encodeGgufHeader, type GgufWriteValue, meta } from "../gguf/writer.ts";
import { isQuantizedType, type QuantType } from "./ftype.ts";
import { compareTensorNames, ggmlDimCount, planTensorTypes, type PolicyModel } from "./policy.ts";

/** GGML_QNT_VERSION, written to `general.quantization_version`. */
export const GGML_QNT_VERSION = 2;

/** A file that cannot be quantized as asked; the message is one line. */
export class QuantizeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "QuantizeError";
  }
}

/** What `dotllm quantize` is asked to do (llama-quantize's options). */
export interface QuantizeOptions {
  /** The type or mix (`Q4_K_M`, `Q8_0`, `F16`, ...). */
  readonly type: QuantType;
  /** `--allow-requantize`: dequantize quantized tensors first. */
  readonly allowRequantize?: boolean;
  /** `--pure`: no mix rules, every quantizable tensor gets the type's default. */
  readonly pure?: boolean;
  /** `--leave-output-tensor`: keep `output.weight` as it is. */
  readonly leaveOutputTensor?: boolean;
  /** `--output-tensor-type`, a ggml type id. */
  readonly outputTensorType?: number;
  /** `--token-embedding-type`, a ggml type id. */
  readonly tokenEmbeddingType?: number;
}

/** Which conversions the native library can do (`dotllm_quantize_row` / `_dequantize_row`). */
export interface Converters {
  canQuantize(typeId: number): boolean;
  canDequantize(typeId: number): boolean;
}

/** One tensor of the output. */
export interface PlannedTensor {
  readonly name: string;
  /** The input tensor (its data is read from here). */
  readonly source: GgufTensorInfo;
  /** Output dims (`ggml_n_dims` of the input's). */
  readonly dims: readonly number[];
  readonly from: GgmlTypeInfo;
  readonly to: GgmlTypeInfo;
  /** Bytes of the output data (without padding). */
  readonly sizeBytes: number;
  /** Offset of its data from the start of the data section. */
  readonly offset: number;
  /** Elements per row (dims[0]) and rows (the product of the rest). */
  readonly rowElements: number;
  readonly rowCount: number;
}

/** The decided output. */
export interface QuantizationPlan {
  /** The file type written to `general.file_type`. */
  readonly ftype: number;
  /** The encoded header, up to the aligned start of the data. */
  readonly header: Uint8Array;
  readonly alignment: number;
  readonly tensors: readonly PlannedTensor[];
  /** Header plus every tensor's padded data. */
  readonly fileSizeBytes: number;
  /** llama-quantize's fallback warnings (rows not a multiple of the chosen block). */
  readonly warnings: readonly string[];
}

function quote(name: string): string {
  return JSON.stringify(name.length > 80 ? name.slice(0, 80) + "..." : name);
}

function metaNumber(gguf: Gguf, key: string, index0 = true): number | undefined {
  const v = gguf.metadata.get(key);
  if (v === undefined) return undefined;
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return Number(v);
  if (index0 && v instanceof GgufArray && v.length > 0) {
    const first = v.head(1)[0];
    if (typeof first === "number") return first;
    if (typeof first === "bigint") return Number(first);
  }
  throw new QuantizeError(`metadata ${quote(key)} is not a number`);
}

/** The hyper-parameters llama.cpp's quantizer reads, from the file's metadata. */
export function policyModel(gguf: Gguf): PolicyModel {
  const arch = gguf.metadata.get("general.architecture");
  if (typeof arch !== "string") {
    throw new QuantizeError("no general.architecture (llama.cpp needs it to quantize)");
  }
  const layerCount = metaNumber(gguf, `${arch}.block_count`);
  if (layerCount === undefined || !Number.isInteger(layerCount) || layerCount <= 0) {
    throw new QuantizeError(`no valid ${arch}.block_count (llama.cpp needs it to quantize)`);
  }
  const headCount = metaNumber(gguf, `${arch}.attention.head_count`) ?? 0;
  return {
    arch,
    layerCount,
    nextnLayerCount: metaNumber(gguf, `${arch}.nextn_predict_layers`) ?? 0,
    headCount,
    headCountKv: metaNumber(gguf, `${arch}.attention.head_count_kv`) ?? headCount,
    expertCount: metaNumber(gguf, `${arch}.expert_count`) ?? 0,
  };
}

const DROPPED_KEYS = new Set([
  "general.quantization_version",
  "general.file_type",
  "split.no",
  "split.count",
  "split.tensors.count",
]);

/** The output's metadata, in llama-quantize's order. */
export function outputMetadata(gguf: Gguf, ftype: number): Array<[string, GgufWriteValue]> {
  const out: Array<[string, GgufWriteValue]> = [];
  for (const [key, value] of gguf.metadata) {
    if (DROPPED_KEYS.has(key)) continue;
    out.push([key, writeValueOf(value, gguf.metadataTypes.get(key)!)]);
  }
  out.push(["general.quantization_version", meta.u32(GGML_QNT_VERSION)]);
  out.push(["general.file_type", meta.u32(ftype)]);
  return out;
}

function writeValueOf(value: GgufValue, type: number): GgufWriteValue {
  if (value instanceof GgufArray) return value;
  if (type === GgufValueType.ARRAY) throw new QuantizeError("array metadata without elements");
  return { type, value } as GgufWriteValue;
}

function typeOf(id: number): GgmlTypeInfo {
  const t = ggmlTypeById(id);
  if (t === undefined) throw new QuantizeError(`unknown ggml type ${id}`);
  return t;
}

/**
 * Decides the output. Throws {@linkcode QuantizeError} (one line) for what
 * cannot be done: a tensor whose type cannot be read or written, a row that
 * does not fit the type asked for, requantizing without `allowRequantize`.
 */
export function planQuantization(
  gguf: Gguf,
  options: QuantizeOptions,
  converters: Converters,
): QuantizationPlan {
  const { type } = options;
  const model = policyModel(gguf);
  const sorted = [...gguf.tensors].sort((a, b) => compareTensorNames(a.name, b.name));
  const policyTensors = sorted.map((t) => ({ name: t.name, dims: t.dims, type: t.type.id }));
  const { types, warnings } = planTensorTypes(policyTensors, model, {
    ftype: type.ftype,
    pure: options.pure,
    quantizeOutputTensor: !options.leaveOutputTensor,
    outputTensorType: options.outputTensorType,
    tokenEmbeddingType: options.tokenEmbeddingType,
  });

  // Honour the input's alignment (llama-quantize copies the key but always aligns to 32,
  // which leaves a file whose offsets contradict it; with the default both agree).
  const alignment = gguf.alignment;
  const headerTensors = sorted.map((t, i) => {
    const to = typeOf(types[i]);
    const from = t.type;
    const what = `tensor ${quote(t.name)}`;
    if (t.dims[0] % to.blockSize !== 0) {
      throw new QuantizeError(
        `${what}: row of ${t.dims[0]} is not a multiple of ${to.name}'s block of ${to.blockSize}`,
      );
    }
    if (from.id !== to.id) {
      if (isQuantizedType(from.id) && !options.allowRequantize) {
        throw new QuantizeError(
          `${what} is ${from.name}: requantizing needs --allow-requantize`,
        );
      }
      if (!converters.canDequantize(from.id)) {
        throw new QuantizeError(`${what} is ${from.name}, which dotllm cannot dequantize`);
      }
      if (!converters.canQuantize(to.id)) {
        throw new QuantizeError(`${what}: dotllm cannot quantize to ${to.name}`);
      }
    }
    return { name: t.name, dims: t.dims.slice(0, ggmlDimCount(t.dims)), type: to.id };
  });

  const encoded = encodeGgufHeader({
    metadata: outputMetadata(gguf, type.ftype),
    tensors: headerTensors,
    alignment,
  });
  const tensors: PlannedTensor[] = encoded.tensors.map((p, i) => ({
    name: p.name,
    source: sorted[i],
    dims: p.dims,
    from: sorted[i].type,
    to: p.type,
    sizeBytes: p.sizeBytes,
    offset: p.offset,
    rowElements: p.dims[0],
    rowCount: p.dims[0] === 0 ? 0 : p.elementCount / p.dims[0],
  }));
  const last = tensors.at(-1);
  const dataBytes = last === undefined
    ? 0
    : last.offset + Math.ceil(last.sizeBytes / alignment) * alignment;
  return {
    ftype: type.ftype,
    header: encoded.bytes,
    alignment,
    tensors,
    fileSizeBytes: encoded.dataStart + dataBytes,
    warnings,
  };
}
