/**
 * A streaming GGUF v3 writer: any metadata (every value type, arrays of
 * strings, nested arrays, arrays copied from a parsed file) and tensors
 * written one after another straight to disk, so a 1.3 GB model never sits
 * in memory. F32 data is written as is, or converted on the way to F16 or a
 * quantized type by the native library's type table (ggml's reference
 * quantizer, `dotllm_quantize_row`: the one quantizer of the project); raw
 * bytes of any type are written as given.
 *
 * @example
 * ```ts
 * import { GgufWriter, meta } from "./writer.ts";
 * import { GgmlType } from "./types.ts";
 * const writer = GgufWriter.create("tiny.gguf", {
 *   metadata: [["general.architecture", meta.string("llama")], ["llama.block_count", meta.u32(1)]],
 *   tensors: [{ name: "w", dims: [32, 2], type: GgmlType.Q8_0 }],
 * });
 * writer.writeF32(new Float32Array(64).fill(0.5)); // the current tensor, "w"
 * writer.close();
 * ```
 *
 * @module
 */
import { closeSync, openSync, writeSync } from "node:fs";
import {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_VALUE_TYPE_NAMES,
  GgufArray,
  GgufValueType,
} from "./reader.ts";
import { GgmlType, ggmlTypeById, type GgmlTypeInfo } from "./types.ts";
import { quantizeRow } from "../kernels/convert.ts";
import { loadNative, type Native } from "../native/mod.ts";

/** An array value to write: its element type and elements (nested arrays for `ARRAY`). */
export interface GgufWriteArray {
  readonly elementType: number;
  readonly values: ArrayLike<number | bigint | boolean | string | GgufWriteArray | GgufArray>;
}

/** A metadata value to write: a typed scalar, a typed array, or an array read from a file. */
export type GgufWriteValue =
  | { readonly type: number; readonly value: number | bigint | boolean | string }
  | ({ readonly type: typeof GgufValueType.ARRAY } & GgufWriteArray)
  | GgufArray;

/** Typed metadata values: `meta.u32(4096)`, `meta.array(GgufValueType.STRING, tokens)`. */
export const meta = {
  u8: (value: number): GgufWriteValue => ({ type: GgufValueType.UINT8, value }),
  i8: (value: number): GgufWriteValue => ({ type: GgufValueType.INT8, value }),
  u16: (value: number): GgufWriteValue => ({ type: GgufValueType.UINT16, value }),
  i16: (value: number): GgufWriteValue => ({ type: GgufValueType.INT16, value }),
  u32: (value: number): GgufWriteValue => ({ type: GgufValueType.UINT32, value }),
  i32: (value: number): GgufWriteValue => ({ type: GgufValueType.INT32, value }),
  f32: (value: number): GgufWriteValue => ({ type: GgufValueType.FLOAT32, value }),
  bool: (value: boolean): GgufWriteValue => ({ type: GgufValueType.BOOL, value }),
  string: (value: string): GgufWriteValue => ({ type: GgufValueType.STRING, value }),
  u64: (value: number | bigint): GgufWriteValue => ({ type: GgufValueType.UINT64, value }),
  i64: (value: number | bigint): GgufWriteValue => ({ type: GgufValueType.INT64, value }),
  f64: (value: number): GgufWriteValue => ({ type: GgufValueType.FLOAT64, value }),
  array: (elementType: number, values: GgufWriteArray["values"]): GgufWriteValue => ({
    type: GgufValueType.ARRAY,
    elementType,
    values,
  }),
} as const;

/** A tensor to declare: ggml dims (`dims[0]` contiguous) and a ggml type id. */
export interface GgufWriteTensor {
  readonly name: string;
  readonly dims: readonly number[];
  readonly type: number;
}

/** What to write before the tensor data. */
export interface GgufWriteHeader {
  /** Keys in file order. `general.alignment` is added when `alignment` is not the default. */
  readonly metadata: ReadonlyArray<readonly [string, GgufWriteValue]>;
  readonly tensors: readonly GgufWriteTensor[];
  /** Data alignment, a power of two. Default 32. */
  readonly alignment?: number;
}

const encoder = new TextEncoder();

/** A growable little-endian byte buffer. */
class ByteSink {
  bytes = new Uint8Array(1 << 16);
  view = new DataView(this.bytes.buffer);
  length = 0;

  reserve(n: number): number {
    const need = this.length + n;
    if (need > this.bytes.length) {
      let size = this.bytes.length * 2;
      while (size < need) size *= 2;
      const next = new Uint8Array(size);
      next.set(this.bytes.subarray(0, this.length));
      this.bytes = next;
      this.view = new DataView(next.buffer);
    }
    const at = this.length;
    this.length = need;
    return at;
  }

  // reserve() may replace `bytes` and `view`: call it before reading them.
  u32(v: number): void {
    const at = this.reserve(4);
    this.view.setUint32(at, v, true);
  }

  u64(v: number | bigint): void {
    const at = this.reserve(8);
    this.view.setBigUint64(at, BigInt(v), true);
  }

  raw(b: Uint8Array): void {
    const at = this.reserve(b.length);
    this.bytes.set(b, at);
  }

  string(s: string): void {
    const b = encoder.encode(s);
    this.u64(b.length);
    this.raw(b);
  }

  result(): Uint8Array {
    return this.bytes.subarray(0, this.length);
  }
}

const INT_RANGES: Record<number, readonly [number, number]> = {
  [GgufValueType.UINT8]: [0, 0xff],
  [GgufValueType.INT8]: [-0x80, 0x7f],
  [GgufValueType.UINT16]: [0, 0xffff],
  [GgufValueType.INT16]: [-0x8000, 0x7fff],
  [GgufValueType.UINT32]: [0, 0xffff_ffff],
  [GgufValueType.INT32]: [-0x8000_0000, 0x7fff_ffff],
};

function writeScalar(sink: ByteSink, type: number, value: unknown, what: string): void {
  const range = INT_RANGES[type];
  if (range !== undefined) {
    if (
      typeof value !== "number" || !Number.isInteger(value) || value < range[0] || value > range[1]
    ) {
      throw new RangeError(
        `${what}: ${JSON.stringify(String(value))} is not a valid ${typeLabel(type)}`,
      );
    }
  }
  // Reserve first: it may replace sink.view.
  const put = (n: number) => {
    const at = sink.reserve(n);
    return [sink.view, at] as const;
  };
  switch (type) {
    case GgufValueType.UINT8: {
      const [v, at] = put(1);
      return void v.setUint8(at, value as number);
    }
    case GgufValueType.INT8: {
      const [v, at] = put(1);
      return void v.setInt8(at, value as number);
    }
    case GgufValueType.UINT16: {
      const [v, at] = put(2);
      return void v.setUint16(at, value as number, true);
    }
    case GgufValueType.INT16: {
      const [v, at] = put(2);
      return void v.setInt16(at, value as number, true);
    }
    case GgufValueType.UINT32: {
      const [v, at] = put(4);
      return void v.setUint32(at, value as number, true);
    }
    case GgufValueType.INT32: {
      const [v, at] = put(4);
      return void v.setInt32(at, value as number, true);
    }
    case GgufValueType.FLOAT32:
    case GgufValueType.FLOAT64: {
      if (typeof value !== "number") {
        throw new TypeError(`${what}: ${JSON.stringify(String(value))} is not a number`);
      }
      const [v, at] = put(type === GgufValueType.FLOAT32 ? 4 : 8);
      if (type === GgufValueType.FLOAT32) v.setFloat32(at, value, true);
      else v.setFloat64(at, value, true);
      return;
    }
    case GgufValueType.BOOL: {
      if (typeof value !== "boolean") {
        throw new TypeError(`${what}: ${JSON.stringify(String(value))} is not a boolean`);
      }
      const [v, at] = put(1);
      return void v.setUint8(at, value ? 1 : 0);
    }
    case GgufValueType.STRING:
      if (typeof value !== "string") {
        throw new TypeError(`${what}: ${JSON.stringify(String(value))} is not a string`);
      }
      return sink.string(value);
    case GgufValueType.UINT64:
    case GgufValueType.INT64: {
      const big = typeof value === "bigint"
        ? value
        : typeof value === "number" && Number.isSafeInteger(value)
        ? BigInt(value)
        : undefined;
      const unsigned = type === GgufValueType.UINT64;
      const min = unsigned ? 0n : -(1n << 63n);
      const max = unsigned ? (1n << 64n) - 1n : (1n << 63n) - 1n;
      if (big === undefined || big < min || big > max) {
        throw new RangeError(
          `${what}: ${JSON.stringify(String(value))} is not a valid ${typeLabel(type)}`,
        );
      }
      const [v, at] = put(8);
      if (unsigned) v.setBigUint64(at, big, true);
      else v.setBigInt64(at, big, true);
      return;
    }
  }
  throw new TypeError(`${what}: unknown value type ${type}`);
}

function typeLabel(type: number): string {
  return GGUF_VALUE_TYPE_NAMES[type] ?? `type ${type}`;
}

/** Writes an array's body: element type, length, elements. */
function writeArray(
  sink: ByteSink,
  array: GgufWriteArray | GgufArray,
  what: string,
  depth: number,
): void {
  if (depth > 8) throw new RangeError(`${what}: arrays nested deeper than 8`);
  if (array instanceof GgufArray) {
    sink.u32(array.type);
    sink.u64(array.length);
    sink.raw(array.rawBytes);
    return;
  }
  const { elementType, values } = array;
  sink.u32(elementType);
  sink.u64(values.length);
  if (elementType === GgufValueType.ARRAY) {
    for (let i = 0; i < values.length; i++) {
      const inner = values[i];
      if (typeof inner !== "object" || inner === null) {
        throw new TypeError(`${what}[${i}]: expected an array`);
      }
      writeArray(sink, inner as GgufWriteArray | GgufArray, `${what}[${i}]`, depth + 1);
    }
    return;
  }
  for (let i = 0; i < values.length; i++) {
    writeScalar(sink, elementType, values[i], `${what}[${i}]`);
  }
}

function writeValue(sink: ByteSink, value: GgufWriteValue, what: string): void {
  if (value instanceof GgufArray) {
    sink.u32(GgufValueType.ARRAY);
    writeArray(sink, value, what, 1);
  } else if (value.type === GgufValueType.ARRAY) {
    sink.u32(GgufValueType.ARRAY);
    writeArray(sink, value as GgufWriteArray, what, 1);
  } else {
    sink.u32(value.type);
    writeScalar(sink, value.type, (value as { value: unknown }).value, what);
  }
}

function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}

/** One declared tensor with its place in the data section. */
interface PlannedTensor {
  readonly name: string;
  readonly dims: readonly number[];
  readonly type: GgmlTypeInfo;
  readonly elementCount: number;
  readonly sizeBytes: number;
  readonly offset: number;
}

/** The encoded header (up to the aligned data start) and where each tensor goes. */
export function encodeGgufHeader(header: GgufWriteHeader): {
  bytes: Uint8Array;
  tensors: PlannedTensor[];
  dataStart: number;
} {
  const alignment = header.alignment ?? GGUF_DEFAULT_ALIGNMENT;
  if (!Number.isInteger(alignment) || alignment <= 0 || (alignment & (alignment - 1)) !== 0) {
    throw new RangeError(`alignment ${JSON.stringify(String(alignment))} is not a power of two`);
  }
  const metadata = [...header.metadata];
  const keys = new Set(metadata.map(([k]) => k));
  if (keys.size !== metadata.length) throw new TypeError("duplicate metadata key");
  if (alignment !== GGUF_DEFAULT_ALIGNMENT && !keys.has("general.alignment")) {
    metadata.push(["general.alignment", meta.u32(alignment)]);
  }

  const tensors: PlannedTensor[] = [];
  const names = new Set<string>();
  let offset = 0;
  for (const t of header.tensors) {
    if (names.has(t.name)) throw new TypeError(`duplicate tensor name "${t.name}"`);
    names.add(t.name);
    const type = ggmlTypeById(t.type);
    if (type === undefined) throw new TypeError(`tensor "${t.name}": unknown ggml type ${t.type}`);
    if (
      t.dims.length < 1 || t.dims.length > 4 ||
      t.dims.some((d) => !Number.isSafeInteger(d) || d < 0)
    ) {
      throw new RangeError(`tensor "${t.name}": bad dims [${t.dims.join(", ")}]`);
    }
    if (t.dims[0] % type.blockSize !== 0) {
      throw new RangeError(
        `tensor "${t.name}": row of ${
          t.dims[0]
        } is not a multiple of ${type.name}'s block of ${type.blockSize}`,
      );
    }
    const elementCount = t.dims.reduce((a, b) => a * b, 1);
    const sizeBytes = (elementCount / type.blockSize) * type.blockBytes;
    tensors.push({ name: t.name, dims: [...t.dims], type, elementCount, sizeBytes, offset });
    offset = alignUp(offset + sizeBytes, alignment);
  }

  const sink = new ByteSink();
  sink.raw(encoder.encode("GGUF"));
  sink.u32(3);
  sink.u64(tensors.length);
  sink.u64(metadata.length);
  for (const [key, value] of metadata) {
    sink.string(key);
    writeValue(sink, value, `"${key}"`);
  }
  for (const t of tensors) {
    sink.string(t.name);
    sink.u32(t.dims.length);
    for (const d of t.dims) sink.u64(d);
    sink.u32(t.type.id);
    sink.u64(t.offset);
  }
  // A vocab-only file ends right after the header (as llama.cpp's do).
  const dataStart = tensors.length > 0 ? alignUp(sink.length, alignment) : sink.length;
  sink.reserve(dataStart - sink.length); // zero padding
  return { bytes: sink.result(), tensors, dataStart };
}

// ---------------------------------------------------------------------------
// Conversions

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

function halfFromBits(b: number): number {
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 112; // rebias 127 → 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rem = mant & ((1 << shift) - 1);
    let h = mant >>> shift;
    if (rem > half || (rem === half && (h & 1) !== 0)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the mantissa bumps the exponent, up to infinity: still correct.
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1) !== 0)) h++;
  return sign | h;
}

/** The IEEE half bits of `x` (rounded to f32 first), rounding to nearest even. */
export function f32ToF16(x: number): number {
  f32Scratch[0] = x;
  return halfFromBits(u32Scratch[0]);
}

/** The value of IEEE half bits `h`. */
export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Converts `src` to half bits in `dst` (same length), round to nearest even. */
export function convertF32ToF16(src: Float32Array, dst: Uint16Array): void {
  if (dst.length !== src.length) throw new RangeError("convertF32ToF16: length mismatch");
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < bits.length; i++) dst[i] = halfFromBits(bits[i]);
}

let native: Native | undefined;

/** `values` in `type`'s layout: f32 as is, anything else by the library's reference quantizer. */
function encodeF32(type: GgmlTypeInfo, name: string, values: Float32Array): Uint8Array {
  if (type.id === GgmlType.F32) {
    return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  }
  native ??= loadNative();
  try {
    return quantizeRow(native, type.id, values);
  } catch (error) {
    throw new TypeError(`tensor "${name}": cannot convert f32 to ${type.name}: ${error}`);
  }
}

// ---------------------------------------------------------------------------
// The streaming writer

/**
 * Writes a GGUF v3 file: the header at `create`, then each tensor's data in
 * declared order (`writeF32` / `writeBytes` fill the current tensor, in as
 * many chunks as wanted), then `close`.
 */
export class GgufWriter {
  readonly path: string;
  #fd: number;
  #tensors: PlannedTensor[];
  #alignment: number;
  #index = 0;
  /** Bytes written of the current tensor. */
  #written = 0;
  #position: number;

  private constructor(
    path: string,
    fd: number,
    tensors: PlannedTensor[],
    alignment: number,
    position: number,
  ) {
    this.path = path;
    this.#fd = fd;
    this.#tensors = tensors;
    this.#alignment = alignment;
    this.#position = position;
  }

  /** Creates (truncates) `path` and writes the header. */
  static create(path: string, header: GgufWriteHeader): GgufWriter {
    const { bytes, tensors } = encodeGgufHeader(header);
    const fd = openSync(path, "w");
    try {
      writeAll(fd, bytes);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    return new GgufWriter(
      path,
      fd,
      tensors,
      header.alignment ?? GGUF_DEFAULT_ALIGNMENT,
      bytes.length,
    );
  }

  /** The name of the tensor the next data goes to, or undefined when all are written. */
  get currentTensor(): string | undefined {
    return this.#tensors[this.#index]?.name;
  }

  #current(): PlannedTensor {
    const t = this.#tensors[this.#index];
    if (t === undefined) throw new RangeError(`${this.path}: every tensor is already written`);
    return t;
  }

  /** Appends raw encoded bytes to the current tensor. */
  writeBytes(bytes: Uint8Array): void {
    const t = this.#current();
    if (this.#written + bytes.length > t.sizeBytes) {
      throw new RangeError(
        `tensor "${t.name}": ${this.#written + bytes.length} bytes written, it has ${t.sizeBytes}`,
      );
    }
    writeAll(this.#fd, bytes);
    this.#written += bytes.length;
    this.#position += bytes.length;
    if (this.#written === t.sizeBytes) this.#finishTensor();
  }

  /** Appends f32 values to the current tensor, converted to its type (see the module doc). */
  writeF32(values: Float32Array): void {
    const t = this.#current();
    this.writeBytes(encodeF32(t.type, t.name, values));
  }

  #finishTensor(): void {
    this.#index++;
    this.#written = 0;
    if (this.#index < this.#tensors.length) {
      const next = alignUp(this.#position, this.#alignment);
      if (next > this.#position) writeAll(this.#fd, new Uint8Array(next - this.#position));
      this.#position = next;
    }
  }

  /** Closes the file; throws if a tensor is incomplete. */
  close(): void {
    if (this.#fd < 0) return;
    const fd = this.#fd;
    this.#fd = -1;
    closeSync(fd);
    const t = this.#tensors[this.#index];
    if (t !== undefined) {
      throw new RangeError(
        `${this.path}: tensor "${t.name}" has ${this.#written} of ${t.sizeBytes} bytes`,
      );
    }
  }
}

function writeAll(fd: number, bytes: Uint8Array): void {
  let rest = bytes;
  while (rest.length > 0) rest = rest.subarray(writeSync(fd, rest));
}

/** A whole GGUF file in memory (small files: tests, fixtures). */
export function encodeGguf(
  header: GgufWriteHeader,
  data: ReadonlyArray<Float32Array | Uint8Array>,
): Uint8Array {
  const { bytes, tensors, dataStart } = encodeGgufHeader(header);
  if (data.length !== tensors.length) throw new RangeError("encodeGguf: one data array per tensor");
  const last = tensors.at(-1);
  const size = last === undefined ? dataStart : dataStart + last.offset + last.sizeBytes;
  const out = new Uint8Array(size);
  out.set(bytes);
  tensors.forEach((t, i) => {
    const d = data[i];
    const encoded = d instanceof Uint8Array ? d : encodeF32(t.type, t.name, d);
    if (encoded.length !== t.sizeBytes) {
      throw new RangeError(
        `tensor "${t.name}": ${encoded.length} bytes given, it has ${t.sizeBytes}`,
      );
    }
    out.set(encoded, dataStart + t.offset);
  });
  return out;
}
