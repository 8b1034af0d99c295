/**
 * `dotllm convert`: a Hugging Face folder (safetensors, `config.json`,
 * `tokenizer.json`) to a GGUF file laid out as llama.cpp's
 * `convert_hf_to_gguf.py` lays it out: the same keys in the same order and
 * types, the same tensor names, order, types and 32-byte alignment (padding
 * after every tensor, the last one too), the same F16 / BF16 / Q8_0 bits.
 *
 * Every safetensors header is checked before anything is written; tensors
 * are streamed (a chunk of rows at a time), so memory stays small on large
 * models; the file is written to `OUT.tmp-<pid>-<random>` and renamed when
 * complete, so a failure leaves nothing at OUT.
 *
 * @example
 * ```ts
 * import { convertHf } from "./convert.ts";
 * const { path } = convertHf("models/all-MiniLM-L6-v2", { outType: "f16" });
 * ```
 *
 * @module
 */
import {
  closeSync,
  existsSync,
  openSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import process from "node:process";
import { GgmlType } from "../gguf/types.ts";
import { convertF32ToF16, f16ToF32, GgufWriter, meta } from "../gguf/writer.ts";
import { CONVERT_ARCHITECTURES, type MappedTensor } from "./architectures.ts";
import { ConvertError } from "./errors.ts";
import { namingMetadata } from "./hf_metadata.ts";
import { indexSafetensors, type SafetensorsTensor } from "./safetensors.ts";
import { type Metadata, readJson, tokenizerMetadata } from "./vocab.ts";
import { sentencePieceMetadata } from "./vocab_spm.ts";

/** The output types of `--outtype`. */
export const OUT_TYPES = ["f32", "f16", "bf16", "q8_0"] as const;
/** One of {@linkcode OUT_TYPES}. */
export type OutType = typeof OUT_TYPES[number];

const FILE_TYPES: Record<OutType, { fileType: number; ggml: number }> = {
  f32: { fileType: 0, ggml: GgmlType.F32 },
  f16: { fileType: 1, ggml: GgmlType.F16 },
  bf16: { fileType: 32, ggml: GgmlType.BF16 },
  q8_0: { fileType: 7, ggml: GgmlType.Q8_0 },
};

/** Options of {@linkcode convertHf}. */
export interface ConvertOptions {
  /** Output path; default `<dir>/<folder name>-<OUTTYPE>.gguf`. */
  out?: string;
  /** Default `f16`. */
  outType?: OutType;
  /** Called after each chunk: bytes written of the tensor data, and the total. */
  onProgress?: (done: number, total: number, tensor: string) => void;
}

interface Planned {
  readonly source: SafetensorsTensor;
  /** A tensor the converter makes (Phi-3's LongRoPE factors) instead of reading `source`. */
  readonly values?: Float32Array;
  readonly mapped: MappedTensor;
  readonly type: number;
  /** Row-major shape. */
  readonly shape: readonly number[];
}

/** The type `prepare_tensors` gives a tensor. */
function tensorType(name: string, shape: readonly number[], outType: OutType): number {
  if (shape.length <= 1 || name.endsWith("_norm.weight")) return GgmlType.F32;
  if (name === "position_embd.weight" || name === "token_types.weight") return GgmlType.F32;
  if (!name.endsWith(".weight")) return GgmlType.F32;
  const t = FILE_TYPES[outType].ggml;
  // gguf-py's QuantError ("falling back to F16"): Q8_0 needs rows of whole 32-blocks.
  if (t === GgmlType.Q8_0 && shape[shape.length - 1] % 32 !== 0) return GgmlType.F16;
  return t;
}

/** The model's plan: header metadata and tensors, without reading any tensor data. */
export function planConversion(dir: string, outType: OutType): {
  metadata: Metadata;
  tensors: Planned[];
} {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new ConvertError(`${dir}: not a folder`);
  }
  const file = readJson(dir, "config.json");
  if (file === undefined) throw new ConvertError(`${dir}: no config.json`);
  const hfArch = (file.architectures as string[] | undefined)?.[0];
  const arch = CONVERT_ARCHITECTURES.get(String(hfArch));
  if (arch === undefined) {
    throw new ConvertError(
      `architecture ${JSON.stringify(hfArch ?? null)} is not supported (supported: ${
        [...CONVERT_ARCHITECTURES.keys()].join(", ")
      })`,
    );
  }
  const config = arch.defaults?.(file) ?? file;
  const sources = indexSafetensors(dir);
  // generate_extra_tensors: first, before the folder's own.
  const tensors: Planned[] = (arch.extraTensors?.(config) ?? []).map(({ name, values }) => ({
    source: {
      name,
      dtype: "F32",
      shape: [values.length],
      file: "",
      start: 0,
      size: values.length * 4,
    },
    values,
    mapped: { name },
    type: GgmlType.F32,
    shape: [values.length],
  }));
  const names = new Set<string>(tensors.map((t) => t.mapped.name));
  for (const source of sources) {
    const mapped = arch.map(source.name, config);
    if (mapped === undefined) continue;
    if (!["F32", "F16", "BF16"].includes(source.dtype)) {
      throw new ConvertError(
        `tensor "${source.name}" has dtype ${source.dtype} (F32, F16, BF16 only)`,
      );
    }
    if (names.has(mapped.name)) throw new ConvertError(`two tensors map to "${mapped.name}"`);
    names.add(mapped.name);
    let shape = source.shape;
    if (mapped.keepRows !== undefined && shape.length >= 1 && shape[0] > mapped.keepRows) {
      shape = [mapped.keepRows, ...shape.slice(1)];
    }
    if (mapped.permuteHeads !== undefined) {
      const h = mapped.permuteHeads;
      if (h <= 0 || shape[0] % (2 * h) !== 0) {
        throw new ConvertError(
          `tensor "${source.name}": ${shape[0]} rows do not split into ${h} heads`,
        );
      }
    }
    tensors.push({ source, mapped, shape, type: tensorType(mapped.name, shape, outType) });
  }
  if (tensors.length === 0) throw new ConvertError(`${dir}: no tensors to convert`);
  const totalParams = tensors.reduce((s, t) => s + t.shape.reduce((a, b) => a * b, 1), 0);
  const vocabSize = config.vocab_size as number | undefined;
  const metadata: Metadata = [
    ["general.architecture", meta.string(arch.gguf)],
    // Keys generate_extra_tensors adds: before everything else but the architecture.
    ...(arch.extraMetadata?.(config) ?? []),
    ["general.type", meta.string("model")],
    ...namingMetadata(dir, config, totalParams),
    ...arch.parameters(config, FILE_TYPES[outType].fileType, dir),
    ["general.quantization_version", meta.u32(2)],
  ];
  if (arch.addPrefixSpace) {
    const tc = readJson(dir, "tokenizer_config.json");
    if (typeof tc?.add_prefix_space === "boolean") {
      metadata.push(["tokenizer.ggml.add_space_prefix", meta.bool(tc.add_prefix_space)]);
    }
  }
  const sentencePiece = arch.sentencePiece?.(dir);
  metadata.push(
    ...(sentencePiece !== undefined
      ? sentencePieceMetadata(dir, vocabSize, sentencePiece)
      : tokenizerMetadata(dir, arch.tokenizer, vocabSize, config.type_vocab_size as number ?? 1)),
  );
  for (
    const [key, value] of arch.afterTokenizer?.(config, sentencePiece !== undefined, dir) ?? []
  ) {
    const at = metadata.findIndex(([k]) => k === key);
    if (at >= 0) metadata[at] = [key, value]; // a Python dict: replaced where it was first added
    else metadata.push([key, value]);
  }
  return { metadata, tensors };
}

/** BF16 of f32 bits, as gguf-py (quiet NaNs, round to nearest even). */
function toBf16(values: Float32Array): Uint8Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < bits.length; i++) {
    let n = bits[i];
    if ((n & 0x7fffffff) > 0x7f800000) n = ((n & 0xffff0000) | (64 << 16)) >>> 0;
    out[i] = Math.floor((n + (0x7fff + ((n >>> 16) & 1))) / 65536) & 0xffff;
  }
  return new Uint8Array(out.buffer);
}

/**
 * Gemma's norm shift, `data_torch + 1` in the dtype the reference holds the tensor in by
 * then: f32 for F32 and BF16 weights (upcast first), F16 for F16 ones (the sum rounded to
 * F16, as torch rounds it).
 */
function addOne(values: Float32Array, dtype: string): void {
  if (dtype !== "F16") {
    for (let i = 0; i < values.length; i++) values[i] = Math.fround(values[i] + 1);
    return;
  }
  const sum = new Float32Array(values.length), half = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) sum[i] = values[i] + 1;
  convertF32ToF16(sum, half);
  for (let i = 0; i < values.length; i++) values[i] = f16ToF32(half[i]);
}

/** `count` elements of `dtype` at `bytes` as f32. */
function decode(dtype: string, bytes: Uint8Array, count: number): Float32Array {
  if (dtype === "F32") return new Float32Array(bytes.buffer, bytes.byteOffset, count);
  const u16 = new Uint16Array(bytes.buffer, bytes.byteOffset, count);
  const out = new Float32Array(count);
  if (dtype === "F16") { for (let i = 0; i < count; i++) out[i] = f16ToF32(u16[i]); }
  else {
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < count; i++) bits[i] = u16[i] << 16;
  }
  return out;
}

/** Bytes of row data read per chunk. */
const CHUNK_BYTES = 16 << 20;

function writeTensor(
  writer: GgufWriter,
  t: Planned,
  onChunk: (bytes: number) => void,
): void {
  const { source, shape } = t;
  if (t.values !== undefined) {
    writer.writeF32(t.values);
    onChunk(t.values.byteLength);
    return;
  }
  const elemBytes = source.dtype === "F32" ? 4 : 2;
  const rowLength = shape.length === 0 ? 1 : shape[shape.length - 1];
  const elements = shape.reduce((a, b) => a * b, 1);
  const rows = rowLength === 0 ? 0 : elements / rowLength;
  const rowBytes = rowLength * elemBytes;
  const chunkRows = Math.max(1, Math.floor(CHUNK_BYTES / Math.max(1, rowBytes)));
  // Llama's permute: (heads, 2, rows/heads/2) → (heads, rows/heads/2, 2) on the rows.
  const h = t.mapped.permuteHeads;
  const half = h === undefined ? 0 : shape[0] / h / 2;
  const sourceRow = (r: number) => {
    if (h === undefined) return r;
    const head = Math.floor(r / (2 * half)), rest = r % (2 * half);
    const i = Math.floor(rest / 2), j = rest % 2; // destination (head, i, j) ← source (head, j, i)
    return head * 2 * half + j * half + i;
  };
  const fd = openSync(source.file, "r");
  try {
    const buffer = new Uint8Array(Math.min(rows, chunkRows) * rowBytes + 8);
    for (let r0 = 0; r0 < rows; r0 += chunkRows) {
      const n = Math.min(chunkRows, rows - r0);
      const bytes = buffer.subarray(0, n * rowBytes);
      if (h === undefined) {
        readExactly(fd, bytes, source.start + r0 * rowBytes, source.name);
      } else {
        for (let r = 0; r < n; r++) {
          const from = source.start + sourceRow(r0 + r) * rowBytes;
          readExactly(fd, bytes.subarray(r * rowBytes, (r + 1) * rowBytes), from, source.name);
        }
      }
      const values = decode(source.dtype, bytes, n * rowLength);
      if (t.mapped.addOne) addOne(values, source.dtype);
      if (t.type === GgmlType.F32) writer.writeF32(values);
      else if (t.type === GgmlType.F16) {
        const half16 = new Uint16Array(values.length);
        convertF32ToF16(values, half16);
        writer.writeBytes(new Uint8Array(half16.buffer));
      } else if (t.type === GgmlType.BF16) writer.writeBytes(toBf16(values));
      else writer.writeF32(values); // Q8_0: the library's reference quantizer (ggml's bits)
      onChunk(n * rowBytes);
    }
  } finally {
    closeSync(fd);
  }
}

function readExactly(fd: number, into: Uint8Array, position: number, name: string): void {
  let done = 0;
  while (done < into.length) {
    const n = readSync(fd, into, done, into.length - done, position + done);
    if (n === 0) throw new ConvertError(`tensor "${name}": the file ends before its data does`);
    done += n;
  }
}

/**
 * Converts the Hugging Face folder `dir`; returns the path written. Throws
 * {@linkcode ConvertError} (one line) for a missing or malformed file or an
 * unsupported model, before anything is written; an I/O error while writing
 * removes the partial file.
 */
export function convertHf(dir: string, options: ConvertOptions = {}): { path: string } {
  const outType = options.outType ?? "f16";
  if (!OUT_TYPES.includes(outType)) {
    throw new ConvertError(`unknown --outtype "${outType}" (${OUT_TYPES.join(", ")})`);
  }
  const out = options.out ??
    join(dir, `${basename(dir.replace(/\/+$/, ""))}-${outType.toUpperCase()}.gguf`);
  if (!existsSync(dirname(out) || ".")) throw new ConvertError(`${dirname(out)}: no such folder`);
  const { metadata, tensors } = planConversion(dir, outType);
  const tmp = `${out}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  const dims = (shape: readonly number[]) => shape.length === 0 ? [1] : [...shape].reverse();
  let writer: GgufWriter | undefined;
  try {
    writer = GgufWriter.create(tmp, {
      metadata,
      tensors: tensors.map((t) => ({ name: t.mapped.name, dims: dims(t.shape), type: t.type })),
    });
    const total = tensors.reduce(
      (s, t) => s + t.shape.reduce((a, b) => a * b, 1) * (t.source.dtype === "F32" ? 4 : 2),
      0,
    );
    let done = 0;
    for (const t of tensors) {
      writeTensor(writer, t, (bytes) => {
        done += bytes;
        options.onProgress?.(done, total, t.mapped.name);
      });
    }
    writer.close();
    writer = undefined;
    // gguf-py pads after every tensor, the last one too.
    const size = statSync(tmp).size;
    const pad = (32 - (size % 32)) % 32;
    if (pad > 0) {
      const fd = openSync(tmp, "a");
      try {
        writeSync(fd, new Uint8Array(pad));
      } finally {
        closeSync(fd);
      }
    }
    renameSync(tmp, out);
    return { path: out };
  } catch (error) {
    try {
      writer?.close();
    } catch { /* incomplete: removed below */ }
    rmSync(tmp, { force: true });
    throw error;
  }
}
