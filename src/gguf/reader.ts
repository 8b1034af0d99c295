/**
 * A zero-copy GGUF reader (versions 2 and 3). It parses the header, the
 * metadata and the tensor infos from the file's bytes (usually a read-only
 * mapping) and checks every count, length, offset and size against the file
 * before it is used. Tensor data is never copied: a tensor is an offset and a
 * size into the same bytes.
 *
 * @example
 * ```ts
 * import { parseGguf } from "./reader.ts";
 * const bytes = Deno.readFileSync("model.gguf");
 * const gguf = parseGguf(bytes);
 * console.log(gguf.metadata.get("general.architecture"), gguf.tensors.length);
 * ```
 *
 * @module
 */
import { ggmlTypeById, type GgmlTypeInfo } from "./types.ts";

/** GGUF metadata value types (the ids stored in the file). */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

/** The name of each value type, for messages and `inspect`. */
export const GGUF_VALUE_TYPE_NAMES: readonly string[] = [
  "u8",
  "i8",
  "u16",
  "i16",
  "u32",
  "i32",
  "f32",
  "bool",
  "string",
  "array",
  "u64",
  "i64",
  "f64",
];

/** Bytes of one scalar value of each type (0 for string and array). */
const SCALAR_BYTES = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];

/** Limits on untrusted files (TIGER_STYLE: a limit on everything). */
export const GGUF_LIMITS = {
  /** Arrays nested deeper than this are refused. */
  arrayDepthMax: 8,
  /** Longest key, in bytes. */
  keyBytesMax: 65_535,
  /** ggml's GGML_MAX_DIMS. */
  dimsMax: 4,
  /** Largest element count of one tensor (2^53: exact in a JS number). */
  elementCountMax: Number.MAX_SAFE_INTEGER,
} as const;

/** The default `general.alignment`. */
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** A problem with a GGUF file; the message names the problem (the caller adds the file). */
export class GgufError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GgufError";
  }
}

/** A metadata value. Integers up to 32 bits and floats are numbers; 64-bit integers bigints. */
export type GgufValue = number | bigint | boolean | string | GgufArray;

/**
 * A metadata array: its element type and length are read eagerly (the parser
 * has already checked that every element lies inside the file), its values on
 * first use.
 */
export class GgufArray {
  /** The element type (a {@linkcode GgufValueType}). */
  readonly type: number;
  /** The number of elements. */
  readonly length: number;
  #bytes: Uint8Array;
  #start: number;
  #end: number;
  #depth: number;
  #values?: ArrayLike<GgufValue> | GgufValue[];

  /** An array whose `length` elements of `type` are `bytes[start, end)` (already validated). */
  constructor(
    type: number,
    length: number,
    bytes: Uint8Array,
    start: number,
    end: number,
    depth = 1,
  ) {
    this.type = type;
    this.length = length;
    this.#bytes = bytes;
    this.#start = start;
    this.#end = end;
    this.#depth = depth;
  }

  /** The elements: a typed array for numbers, `string[]`, `boolean[]`, or nested arrays. */
  get values(): ArrayLike<GgufValue> | GgufValue[] {
    this.#values ??= this.head(this.length);
    return this.#values;
  }

  /** The first `count` elements (all of them if `count >= length`), decoding only those. */
  head(count: number): ArrayLike<GgufValue> | GgufValue[] {
    const n = Math.max(0, Math.min(count, this.length));
    return decodeArray(this.#bytes, this.#start, this.type, n, "array", this.#depth);
  }

  /** The encoded elements as stored in the file (a view, not a copy): for copying arrays. */
  get rawBytes(): Uint8Array {
    return this.#bytes.subarray(this.#start, this.#end);
  }

  /** The elements as strings; throws `GgufError` if the element type is not string. */
  strings(): string[] {
    if (this.type !== GgufValueType.STRING) {
      throw new GgufError(`expected an array of string, found array of ${typeName(this.type)}`);
    }
    return this.values as string[];
  }
}

/** One tensor's description; its data is `bytes[dataOffset, dataOffset + sizeBytes)`. */
export interface GgufTensorInfo {
  readonly name: string;
  /** ggml order: `dims[0]` is the contiguous (fastest) dimension. */
  readonly dims: readonly number[];
  readonly type: GgmlTypeInfo;
  /** Offset relative to the start of the data section, as stored. */
  readonly offset: number;
  /** Absolute offset in the file. */
  readonly dataOffset: number;
  readonly elementCount: number;
  readonly sizeBytes: number;
}

/** A parsed GGUF file. */
export interface Gguf {
  readonly version: number;
  readonly metadata: ReadonlyMap<string, GgufValue>;
  /** The value type of each metadata key (for `inspect`). */
  readonly metadataTypes: ReadonlyMap<string, number>;
  readonly tensors: readonly GgufTensorInfo[];
  readonly tensorsByName: ReadonlyMap<string, GgufTensorInfo>;
  readonly alignment: number;
  /** Absolute offset of the data section (may be past EOF when there are no tensors). */
  readonly dataStart: number;
  readonly fileSize: number;
  /** The bytes parsed (not copied). */
  readonly bytes: Uint8Array;
}

/**
 * A name from the file as it appears in messages: JSON-quoted (so control
 * characters cannot break the one-line error) and cut at 80 characters.
 */
function quote(name: string): string {
  return JSON.stringify(name.length > 80 ? name.slice(0, 80) + "..." : name);
}

function typeName(type: number): string {
  return GGUF_VALUE_TYPE_NAMES[type] ?? `type ${type}`;
}

// ignoreBOM: keep a leading U+FEFF (a token can be exactly "\uFEFF")
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });

class Cursor {
  readonly bytes: Uint8Array;
  readonly view: DataView;
  position = 0;

  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get remaining(): number {
    return this.bytes.length - this.position;
  }

  need(n: number, what: string): void {
    if (n > this.remaining) {
      throw new GgufError(
        `file truncated: ${what} at byte ${this.position} needs ${n} bytes, ${this.remaining} left`,
      );
    }
  }

  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.position, true);
    this.position += 4;
    return v;
  }

  /** A u64 that must fit a JS number exactly (counts, lengths, offsets, dims). */
  u64(what: string): number {
    this.need(8, what);
    const low = this.view.getUint32(this.position, true);
    const high = this.view.getUint32(this.position + 4, true);
    if (high >= 0x200000) {
      const v = this.view.getBigUint64(this.position, true);
      throw new GgufError(`${what} ${v} at byte ${this.position} is too large`);
    }
    this.position += 8;
    return high * 0x1_0000_0000 + low;
  }

  string(what: string): string {
    const length = this.u64(`${what} length`);
    this.need(length, what);
    const start = this.position;
    this.position += length;
    return decodeString(this.bytes, start, length);
  }

  skipString(what: string): void {
    const length = this.u64(`${what} length`);
    this.need(length, what);
    this.position += length;
  }
}

/** UTF-16 code units of a short string being decoded (reused: no allocation per string). */
const shortUnits = new Uint16Array(64);

/**
 * Decodes UTF-8. Vocabularies hold hundreds of thousands of short pieces, so
 * strings up to 64 bytes of 1- to 3-byte sequences are decoded here without a
 * `TextDecoder` call; anything else (4-byte sequences, malformed bytes, long
 * strings) goes to the `TextDecoder`, whose result is the reference.
 */
function decodeString(bytes: Uint8Array, start: number, length: number): string {
  if (length <= 64) {
    const end = start + length;
    let n = 0;
    let i = start;
    while (i < end) {
      const b = bytes[i];
      if (b < 0x80) {
        shortUnits[n++] = b;
        i += 1;
      } else if (b >= 0xc2 && b < 0xe0 && i + 1 < end && (bytes[i + 1] & 0xc0) === 0x80) {
        shortUnits[n++] = ((b & 0x1f) << 6) | (bytes[i + 1] & 0x3f);
        i += 2;
      } else if (
        b >= 0xe0 && b < 0xf0 && i + 2 < end && (bytes[i + 1] & 0xc0) === 0x80 &&
        (bytes[i + 2] & 0xc0) === 0x80
      ) {
        const cp = ((b & 0x0f) << 12) | ((bytes[i + 1] & 0x3f) << 6) | (bytes[i + 2] & 0x3f);
        // Overlong forms and surrogates are malformed: leave them to the TextDecoder.
        if (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000)) break;
        shortUnits[n++] = cp;
        i += 3;
      } else {
        break;
      }
    }
    if (i === end) {
      return String.fromCharCode.apply(null, shortUnits.subarray(0, n) as unknown as number[]);
    }
  }
  return utf8.decode(bytes.subarray(start, start + length));
}

function readScalar(c: Cursor, type: number, what: string): GgufValue {
  const size = SCALAR_BYTES[type];
  c.need(size, what);
  const p = c.position;
  c.position += size;
  const v = c.view;
  switch (type) {
    case GgufValueType.UINT8:
      return v.getUint8(p);
    case GgufValueType.INT8:
      return v.getInt8(p);
    case GgufValueType.UINT16:
      return v.getUint16(p, true);
    case GgufValueType.INT16:
      return v.getInt16(p, true);
    case GgufValueType.UINT32:
      return v.getUint32(p, true);
    case GgufValueType.INT32:
      return v.getInt32(p, true);
    case GgufValueType.FLOAT32:
      return v.getFloat32(p, true);
    case GgufValueType.BOOL:
      return v.getUint8(p) !== 0;
    case GgufValueType.UINT64:
      return v.getBigUint64(p, true);
    case GgufValueType.INT64:
      return v.getBigInt64(p, true);
    case GgufValueType.FLOAT64:
      return v.getFloat64(p, true);
  }
  throw new GgufError(`${what} has unknown value type ${type}`);
}

function readValue(c: Cursor, type: number, what: string, depth: number): GgufValue {
  if (type === GgufValueType.STRING) return c.string(what);
  if (type === GgufValueType.ARRAY) return readArray(c, what, depth + 1);
  if (type >= SCALAR_BYTES.length || SCALAR_BYTES[type] === 0) {
    throw new GgufError(`${what} has unknown value type ${type}`);
  }
  return readScalar(c, type, what);
}

/** Skips `count` strings (the hot loop of vocabularies: no per-element allocation). */
function skipStrings(c: Cursor, count: number, what: string): void {
  const view = c.view;
  const size = c.bytes.length;
  let p = c.position;
  for (let i = 0; i < count; i++) {
    if (p + 8 > size) {
      c.position = p;
      c.need(8, `${what}[${i}] length`);
    }
    const low = view.getUint32(p, true);
    const high = view.getUint32(p + 4, true);
    if (high !== 0 || low > size - p - 8) {
      c.position = p;
      c.skipString(`${what}[${i}]`); // throws the precise error
    }
    p += 8 + low;
  }
  c.position = p;
}

/** Reads an array header, skips over its elements, and returns a lazy decoder. */
function readArray(c: Cursor, what: string, depth: number): GgufArray {
  if (depth > GGUF_LIMITS.arrayDepthMax) {
    throw new GgufError(`${what}: arrays nested deeper than ${GGUF_LIMITS.arrayDepthMax}`);
  }
  const type = c.u32(`${what} array type`);
  if (type >= SCALAR_BYTES.length) throw new GgufError(`${what} has unknown array type ${type}`);
  const length = c.u64(`${what} array length`);
  // Every element takes at least one byte (strings and arrays at least 8): refuse a
  // count the rest of the file cannot hold before touching any element.
  const minBytes = SCALAR_BYTES[type] || (type === GgufValueType.ARRAY ? 12 : 8);
  if (length > Math.floor(c.remaining / minBytes)) {
    throw new GgufError(
      `${what}: array of ${length} ${typeName(type)} does not fit in the ${c.remaining} bytes left`,
    );
  }
  const start = c.position;
  if (type === GgufValueType.STRING) {
    skipStrings(c, length, what);
  } else if (type === GgufValueType.ARRAY) {
    for (let i = 0; i < length; i++) readArray(c, `${what}[${i}]`, depth + 1);
  } else {
    c.position += length * SCALAR_BYTES[type];
  }
  return new GgufArray(type, length, c.bytes, start, c.position, depth);
}

function decodeArray(
  bytes: Uint8Array,
  start: number,
  type: number,
  length: number,
  what: string,
  depth: number,
): ArrayLike<GgufValue> | GgufValue[] {
  const c = new Cursor(bytes);
  c.position = start;
  const view = c.view;
  const size = SCALAR_BYTES[type];
  const le = true;
  switch (type) {
    case GgufValueType.UINT8:
      return bytes.slice(start, start + length);
    case GgufValueType.INT8:
      return new Int8Array(bytes.slice(start, start + length).buffer);
    case GgufValueType.UINT16:
    case GgufValueType.INT16: {
      const out = type === GgufValueType.UINT16 ? new Uint16Array(length) : new Int16Array(length);
      for (let i = 0; i < length; i++) {
        out[i] = type === GgufValueType.UINT16
          ? view.getUint16(start + i * size, le)
          : view.getInt16(start + i * size, le);
      }
      return out;
    }
    case GgufValueType.UINT32: {
      const out = new Uint32Array(length);
      for (let i = 0; i < length; i++) out[i] = view.getUint32(start + i * 4, le);
      return out;
    }
    case GgufValueType.INT32: {
      const out = new Int32Array(length);
      for (let i = 0; i < length; i++) out[i] = view.getInt32(start + i * 4, le);
      return out;
    }
    case GgufValueType.FLOAT32: {
      const out = new Float32Array(length);
      for (let i = 0; i < length; i++) out[i] = view.getFloat32(start + i * 4, le);
      return out;
    }
    case GgufValueType.FLOAT64: {
      const out = new Float64Array(length);
      for (let i = 0; i < length; i++) out[i] = view.getFloat64(start + i * 8, le);
      return out;
    }
    case GgufValueType.UINT64: {
      const out = new BigUint64Array(length);
      for (let i = 0; i < length; i++) out[i] = view.getBigUint64(start + i * 8, le);
      return out as unknown as ArrayLike<GgufValue>;
    }
    case GgufValueType.INT64: {
      const out = new BigInt64Array(length);
      for (let i = 0; i < length; i++) out[i] = view.getBigInt64(start + i * 8, le);
      return out as unknown as ArrayLike<GgufValue>;
    }
    case GgufValueType.BOOL: {
      const out: boolean[] = new Array(length);
      for (let i = 0; i < length; i++) out[i] = bytes[start + i] !== 0;
      return out;
    }
    case GgufValueType.STRING: {
      // Already validated by the parser: read the lengths without re-checking.
      const out: string[] = new Array(length);
      let p = start;
      for (let i = 0; i < length; i++) {
        const n = view.getUint32(p, true);
        out[i] = decodeString(bytes, p + 8, n);
        p += 8 + n;
      }
      return out;
    }
    default: {
      const out: GgufValue[] = new Array(length);
      for (let i = 0; i < length; i++) out[i] = readArray(c, `${what}[${i}]`, depth + 1);
      return out;
    }
  }
}

function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}

/**
 * Parses a GGUF file's bytes. Throws {@linkcode GgufError} naming the problem
 * for anything malformed; never reads outside `bytes`.
 */
export function parseGguf(bytes: Uint8Array): Gguf {
  const c = new Cursor(bytes);
  c.need(4, "magic");
  const magic = bytes.subarray(0, 4);
  if (magic[0] !== 0x47 || magic[1] !== 0x47 || magic[2] !== 0x55 || magic[3] !== 0x46) {
    throw new GgufError("not a GGUF file (bad magic)");
  }
  c.position = 4;
  const version = c.u32("version");
  if (version !== 2 && version !== 3) {
    // A big-endian file (gguf-py --bigendian) has its version byte-swapped.
    const swapped = new DataView(bytes.buffer, bytes.byteOffset + 4, 4).getUint32(0, false);
    if (swapped === 2 || swapped === 3) {
      throw new GgufError(`big-endian GGUF (version ${swapped}) is not supported`);
    }
    throw new GgufError(`unsupported GGUF version ${version}`);
  }
  const tensorCount = c.u64("tensor count");
  const kvCount = c.u64("metadata count");
  // A tensor info takes at least 24 bytes, a key/value at least 13.
  if (tensorCount > Math.floor(c.remaining / 24)) {
    throw new GgufError(`tensor count ${tensorCount} does not fit in the file`);
  }
  if (kvCount > Math.floor(c.remaining / 13)) {
    throw new GgufError(`metadata count ${kvCount} does not fit in the file`);
  }

  const metadata = new Map<string, GgufValue>();
  const metadataTypes = new Map<string, number>();
  for (let i = 0; i < kvCount; i++) {
    const keyLength = c.u64(`metadata key ${i} length`);
    if (keyLength > GGUF_LIMITS.keyBytesMax) {
      throw new GgufError(`metadata key ${i} is ${keyLength} bytes long`);
    }
    c.need(keyLength, `metadata key ${i}`);
    const key = decodeString(bytes, c.position, keyLength);
    c.position += keyLength;
    const quoted = quote(key);
    if (metadata.has(key)) throw new GgufError(`duplicate metadata key ${quoted}`);
    const type = c.u32(`type of ${quoted}`);
    metadata.set(key, readValue(c, type, quoted, 0));
    metadataTypes.set(key, type);
  }

  let alignment = GGUF_DEFAULT_ALIGNMENT;
  const alignmentValue = metadata.get("general.alignment");
  if (alignmentValue !== undefined) {
    if (
      typeof alignmentValue !== "number" || !Number.isInteger(alignmentValue) ||
      alignmentValue <= 0 || (alignmentValue & (alignmentValue - 1)) !== 0
    ) {
      throw new GgufError(`general.alignment ${alignmentValue} is not a power of two`);
    }
    alignment = alignmentValue;
  }

  const infos: Array<Omit<GgufTensorInfo, "dataOffset">> = [];
  const names = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const info = readTensorInfo(c, i, alignment);
    if (names.has(info.name)) throw new GgufError(`duplicate tensor name ${quote(info.name)}`);
    names.add(info.name);
    infos.push(info);
  }

  const dataStart = alignUp(c.position, alignment);
  const tensors: GgufTensorInfo[] = infos.map((t) => ({ ...t, dataOffset: dataStart + t.offset }));
  checkExtents(tensors, bytes.length);
  return {
    version,
    metadata,
    metadataTypes,
    tensors,
    tensorsByName: new Map(tensors.map((t) => [t.name, t])),
    alignment,
    dataStart,
    fileSize: bytes.length,
    bytes,
  };
}

function readTensorInfo(
  c: Cursor,
  index: number,
  alignment: number,
): Omit<GgufTensorInfo, "dataOffset"> {
  const name = c.string(`tensor ${index} name`);
  const what = `tensor ${quote(name)}`;
  const dimCount = c.u32(`${what} dimension count`);
  if (dimCount < 1 || dimCount > GGUF_LIMITS.dimsMax) {
    throw new GgufError(`${what} has ${dimCount} dimensions (1 to ${GGUF_LIMITS.dimsMax} allowed)`);
  }
  const dims: number[] = [];
  let elementCount = 1;
  for (let d = 0; d < dimCount; d++) {
    const n = c.u64(`${what} dimension ${d}`);
    dims.push(n);
    if (n !== 0 && elementCount > GGUF_LIMITS.elementCountMax / n) {
      throw new GgufError(`${what} element count overflows (dims ${dims.join("x")}...)`);
    }
    elementCount *= n;
  }
  const typeId = c.u32(`${what} type`);
  const type = ggmlTypeById(typeId);
  if (type === undefined) throw new GgufError(`${what} has unknown ggml type ${typeId}`);
  if (dims[0] % type.blockSize !== 0) {
    throw new GgufError(
      `${what}: row of ${dims[0]} is not a multiple of ${type.name}'s block of ${type.blockSize}`,
    );
  }
  const offset = c.u64(`${what} offset`);
  if (offset % alignment !== 0) {
    throw new GgufError(`${what} offset ${offset} is not a multiple of the alignment ${alignment}`);
  }
  const sizeBytes = (elementCount / type.blockSize) * type.blockBytes;
  if (!Number.isSafeInteger(sizeBytes)) throw new GgufError(`${what} size overflows`);
  return { name, dims, type, offset, elementCount, sizeBytes };
}

/** Every tensor lies inside the file, and no two overlap. */
function checkExtents(tensors: GgufTensorInfo[], fileSize: number): void {
  for (const t of tensors) {
    if (t.dataOffset + t.sizeBytes > fileSize) {
      throw new GgufError(
        `tensor ${quote(t.name)} data [${t.dataOffset}, ${t.dataOffset + t.sizeBytes}) ` +
          `extends past the end of the file (${fileSize} bytes)`,
      );
    }
  }
  const sorted = [...tensors].sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1];
    if (prev.offset + prev.sizeBytes > sorted[i].offset) {
      throw new GgufError(`tensors ${quote(prev.name)} and ${quote(sorted[i].name)} overlap`);
    }
  }
}
