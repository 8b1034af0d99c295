/**
 * Reads the headers of safetensors files (one file, or the shards of
 * `model.safetensors.index.json`) and checks every field before any offset is
 * used: dtypes, shapes, `data_offsets` inside the file, each tensor's byte
 * count equal to its shape × dtype size, no two tensors overlapping. A header
 * that lies is one {@linkcode ConvertError} line naming the file and tensor.
 *
 * @example
 * ```ts
 * import { indexSafetensors } from "./safetensors.ts";
 * const tensors = indexSafetensors("models/all-MiniLM-L6-v2");
 * console.log(tensors[0]); // { name, dtype: "F32", shape: [384], file, start, size }
 * ```
 *
 * @module
 */
import {
  closeSync,
  existsSync,
  fstatSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
} from "node:fs";
import { basename, join } from "node:path";
import { ConvertError } from "./errors.ts";

/** Element sizes of the dtypes a conversion reads. */
export const DTYPE_BYTES: Readonly<Record<string, number>> = {
  F32: 4,
  F16: 2,
  BF16: 2,
  F64: 8,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U8: 1,
  BOOL: 1,
};

/** One tensor of a safetensors file. */
export interface SafetensorsTensor {
  /** Its name in the file. */
  readonly name: string;
  readonly dtype: string;
  /** Row-major shape (the first dimension slowest), as PyTorch's. */
  readonly shape: readonly number[];
  /** The file it is in. */
  readonly file: string;
  /** Absolute byte offset of its data in `file`. */
  readonly start: number;
  /** Bytes of data. */
  readonly size: number;
}

/** Most header bytes read (the format's own limit is 100 MB). */
const HEADER_MAX = 100_000_000;

function fail(file: string, what: string): never {
  throw new ConvertError(`${basename(file)}: ${what}`);
}

/** The tensors of one safetensors file, sorted by name (as safetensors' `keys()`). */
export function readSafetensorsHeader(file: string): SafetensorsTensor[] {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (error) {
    throw new ConvertError(`${file}: ${(error as Error).message.split("\n")[0]}`);
  }
  try {
    const fileSize = fstatSync(fd).size;
    if (fileSize < 8) fail(file, `${fileSize} bytes: too short for a safetensors header`);
    const lengthBytes = new Uint8Array(8);
    readSync(fd, lengthBytes, 0, 8, 0);
    const length = new DataView(lengthBytes.buffer).getBigUint64(0, true);
    if (length < 2n || length > BigInt(Math.min(HEADER_MAX, fileSize - 8))) {
      fail(file, `header length ${length} does not fit the file of ${fileSize} bytes`);
    }
    const n = Number(length);
    const headerBytes = new Uint8Array(n);
    if (readSync(fd, headerBytes, 0, n, 8) !== n) fail(file, "short read of the header");
    let header: unknown;
    try {
      header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(headerBytes));
    } catch (error) {
      fail(file, `header is not JSON (${(error as Error).message.split("\n")[0]})`);
    }
    if (header === null || typeof header !== "object" || Array.isArray(header)) {
      fail(file, "header is not a JSON object");
    }
    const dataStart = 8 + n;
    const dataSize = fileSize - dataStart;
    const tensors: SafetensorsTensor[] = [];
    for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
      if (name === "__metadata__") continue;
      const e = entry as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      if (e === null || typeof e !== "object") fail(file, `tensor "${name}" is not an object`);
      const dtype = e.dtype;
      if (typeof dtype !== "string" || DTYPE_BYTES[dtype] === undefined) {
        fail(file, `tensor "${name}" has unsupported dtype ${JSON.stringify(dtype)}`);
      }
      const shape = e.shape;
      if (
        !Array.isArray(shape) || shape.length > 8 ||
        shape.some((d) => !Number.isSafeInteger(d) || d < 0)
      ) {
        fail(file, `tensor "${name}" has a bad shape ${JSON.stringify(shape)}`);
      }
      const offsets = e.data_offsets;
      if (
        !Array.isArray(offsets) || offsets.length !== 2 ||
        offsets.some((o) => !Number.isSafeInteger(o) || o < 0)
      ) {
        fail(file, `tensor "${name}" has bad data_offsets ${JSON.stringify(offsets)}`);
      }
      const [begin, end] = offsets as number[];
      if (begin > end || end > dataSize) {
        fail(
          file,
          `tensor "${name}" data_offsets [${begin}, ${end}] are outside its ${dataSize} data bytes`,
        );
      }
      let elements = 1;
      for (const d of shape as number[]) {
        elements *= d;
        if (!Number.isSafeInteger(elements)) fail(file, `tensor "${name}" is too large`);
      }
      const size = elements * DTYPE_BYTES[dtype];
      if (size !== end - begin) {
        fail(
          file,
          `tensor "${name}" of shape [${
            (shape as number[]).join(", ")
          }] ${dtype} needs ${size} bytes, ` +
            `its data_offsets span ${end - begin}`,
        );
      }
      tensors.push({ name, dtype, shape: shape as number[], file, start: dataStart + begin, size });
    }
    const byStart = [...tensors].sort((a, b) => a.start - b.start || a.size - b.size);
    for (let i = 1; i < byStart.length; i++) {
      const a = byStart[i - 1], b = byStart[i];
      if (b.start < a.start + a.size) fail(file, `tensors "${a.name}" and "${b.name}" overlap`);
    }
    return tensors.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  } finally {
    closeSync(fd);
  }
}

/**
 * Every tensor of the model in `dir`, as `convert_hf_to_gguf.py` indexes it:
 * the `model*.safetensors` files (or the shards `model.safetensors.index.json`
 * names) in name order, each file's tensors by name. The index's tensor list
 * must equal the shards'.
 */
export function indexSafetensors(dir: string): SafetensorsTensor[] {
  const indexFile = join(dir, "model.safetensors.index.json");
  let parts: string[];
  let fromIndex: Set<string> | undefined;
  if (existsSync(indexFile)) {
    let weightMap: unknown;
    try {
      weightMap = (JSON.parse(readFileSync(indexFile, "utf8")) as { weight_map?: unknown })
        .weight_map;
    } catch (error) {
      throw new ConvertError(`model.safetensors.index.json: ${(error as Error).message}`);
    }
    if (weightMap === null || typeof weightMap !== "object" || Array.isArray(weightMap)) {
      throw new ConvertError(`model.safetensors.index.json: no "weight_map" object`);
    }
    const files = Object.values(weightMap as Record<string, unknown>);
    if (files.some((f) => typeof f !== "string" || f.includes("/") || f.includes(".."))) {
      throw new ConvertError(`model.safetensors.index.json: a shard name is not a file name`);
    }
    parts = [...new Set(files as string[])].sort();
    fromIndex = new Set(Object.keys(weightMap as Record<string, unknown>));
  } else {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch (error) {
      throw new ConvertError(`${dir}: ${(error as Error).message.split("\n")[0]}`);
    }
    parts = names.filter((f) => f.startsWith("model") && f.endsWith(".safetensors")).sort();
  }
  if (parts.length === 0) throw new ConvertError(`${dir}: no model*.safetensors file`);
  const tensors: SafetensorsTensor[] = [];
  for (const part of parts) {
    const path = join(dir, part);
    if (!existsSync(path)) throw new ConvertError(`${dir}: missing shard ${part}`);
    tensors.push(...readSafetensorsHeader(path));
  }
  const seen = new Set<string>();
  for (const t of tensors) {
    if (seen.has(t.name)) throw new ConvertError(`tensor "${t.name}" is in two shards`);
    seen.add(t.name);
  }
  if (fromIndex !== undefined) {
    const missing = [...fromIndex].filter((n) => !seen.has(n)).sort();
    const extra = [...seen].filter((n) => !fromIndex!.has(n)).sort();
    if (missing.length > 0 || extra.length > 0) {
      throw new ConvertError(
        `model.safetensors.index.json and the shards differ: missing ${
          JSON.stringify(missing.slice(0, 3))
        }, extra ${JSON.stringify(extra.slice(0, 3))}`,
      );
    }
  }
  return tensors;
}
