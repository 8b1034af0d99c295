/**
 * What `dotllm inspect` shows about a GGUF file, as plain JSON-ready data
 * ({@linkcode summarizeGguf}) and as text ({@linkcode formatGgufSummary}).
 *
 * JSON rules: 64-bit integers are JSON numbers when they fit a double exactly
 * (|v| ≤ 2^53 − 1) and decimal strings otherwise; f32 values are printed as
 * the shortest decimal that reads back as the same f32 (`1e-5`, not
 * `0.000009999999747378752`); non-finite floats are the strings `"NaN"`,
 * `"Infinity"`, `"-Infinity"`; arrays longer than `arrayLimit` keep only their
 * first elements (the summary says the full length).
 *
 * @example
 * ```ts
 * import { parseGguf } from "./reader.ts";
 * import { formatGgufSummary, summarizeGguf } from "./summary.ts";
 * const summary = summarizeGguf(parseGguf(Deno.readFileSync("model.gguf")));
 * console.log(summary.architecture, summary.tensorCount);
 * console.log(formatGgufSummary(summary));
 * ```
 *
 * @module
 */
import {
  type Gguf,
  GGUF_VALUE_TYPE_NAMES,
  GgufArray,
  type GgufValue,
  GgufValueType,
} from "./reader.ts";

/** A JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonArraySummary;

/** A metadata array in JSON: its element type, full length, and its first `values`. */
export interface JsonArraySummary {
  readonly elementType: string;
  readonly length: number;
  /** The first elements (all of them when `values.length === length`). */
  readonly values: JsonValue[];
}

/** One metadata key/value. */
export interface MetadataEntry {
  readonly key: string;
  /** The GGUF value type name (`u32`, `string`, `array`, ...). */
  readonly type: string;
  readonly value: JsonValue;
}

/** One row of the tensor table. */
export interface TensorEntry {
  readonly name: string;
  /** The ggml type name, e.g. `Q8_0`. */
  readonly type: string;
  /** ggml order: `shape[0]` is the contiguous dimension. */
  readonly shape: number[];
  readonly elements: number;
  readonly bytes: number;
  /** Offset relative to the data section, as stored. */
  readonly offset: number;
  /** Absolute offset in the file. */
  readonly fileOffset: number;
}

/** The tokenizer, from the `tokenizer.ggml.*` keys (`null` where a key is absent). */
export interface TokenizerSummary {
  readonly model: string | null;
  readonly pre: string | null;
  readonly tokenCount: number | null;
  readonly mergeCount: number | null;
  readonly bos: number | string | null;
  readonly eos: number | string | null;
  readonly unk: number | string | null;
  readonly pad: number | string | null;
}

/** Everything `inspect` reports. */
export interface GgufSummary {
  readonly version: number;
  readonly fileSize: number;
  readonly architecture: string | null;
  readonly name: string | null;
  /** `general.file_type` and its llama.cpp name (e.g. `MOSTLY_Q8_0`). */
  readonly fileType: number | null;
  readonly fileTypeName: string | null;
  readonly alignment: number;
  readonly dataStart: number;
  readonly tensorCount: number;
  readonly tensorBytes: number;
  readonly parameterCount: number;
  /** Tensor count per ggml type, in first-seen order. */
  readonly tensorTypes: Record<string, number>;
  /** The `<architecture>.*` keys, full names, in file order. */
  readonly hyperParameters: Record<string, JsonValue>;
  readonly tokenizer: TokenizerSummary;
  readonly metadata: MetadataEntry[];
  readonly tensors: TensorEntry[];
}

/** Options of {@linkcode summarizeGguf}. */
export interface SummaryOptions {
  /** Longest array kept whole; longer ones keep their first `arrayHead` elements. Default 16. */
  arrayLimit?: number;
  /** Elements kept of a long array. Default 8. */
  arrayHead?: number;
}

/** llama.cpp's `llama_ftype` names for `general.file_type`. */
const FILE_TYPE_NAMES: Record<number, string> = {
  0: "ALL_F32",
  1: "MOSTLY_F16",
  2: "MOSTLY_Q4_0",
  3: "MOSTLY_Q4_1",
  7: "MOSTLY_Q8_0",
  8: "MOSTLY_Q5_0",
  9: "MOSTLY_Q5_1",
  10: "MOSTLY_Q2_K",
  11: "MOSTLY_Q3_K_S",
  12: "MOSTLY_Q3_K_M",
  13: "MOSTLY_Q3_K_L",
  14: "MOSTLY_Q4_K_S",
  15: "MOSTLY_Q4_K_M",
  16: "MOSTLY_Q5_K_S",
  17: "MOSTLY_Q5_K_M",
  18: "MOSTLY_Q6_K",
  19: "MOSTLY_IQ2_XXS",
  20: "MOSTLY_IQ2_XS",
  21: "MOSTLY_Q2_K_S",
  22: "MOSTLY_IQ3_XS",
  23: "MOSTLY_IQ3_XXS",
  24: "MOSTLY_IQ1_S",
  25: "MOSTLY_IQ4_NL",
  26: "MOSTLY_IQ3_S",
  27: "MOSTLY_IQ3_M",
  28: "MOSTLY_IQ2_S",
  29: "MOSTLY_IQ2_M",
  30: "MOSTLY_IQ4_XS",
  31: "MOSTLY_IQ1_M",
  32: "MOSTLY_BF16",
  36: "MOSTLY_TQ1_0",
  37: "MOSTLY_TQ2_0",
  38: "MOSTLY_MXFP4_MOE",
};

/**
 * The llama.cpp name of a file's `general.file_type` (e.g. `MOSTLY_Q4_K_M`),
 * or null when the key is missing, not an integer, or a number llama.cpp does
 * not name.
 */
export function fileTypeName(gguf: Gguf): string | null {
  const value = gguf.metadata.get("general.file_type");
  return typeof value === "number" ? FILE_TYPE_NAMES[value] ?? null : null;
}

/** The shortest decimal that reads back as the same f32 (as a number). */
export function shortestF32(x: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  for (let digits = 1; digits < 9; digits++) {
    const y = Number(x.toPrecision(digits));
    if (Math.fround(y) === x) return y;
  }
  return Number(x.toPrecision(9));
}

function jsonNumber(x: number, type: number): number | string {
  if (!Number.isFinite(x)) return String(x);
  return type === GgufValueType.FLOAT32 ? shortestF32(x) : x;
}

function jsonBigint(x: bigint): number | string {
  const max = BigInt(Number.MAX_SAFE_INTEGER);
  return x <= max && x >= -max ? Number(x) : x.toString();
}

/** A metadata value as JSON (arrays summarised per `options`). */
export function metadataJson(
  value: GgufValue,
  type: number,
  options: SummaryOptions = {},
): JsonValue {
  if (value instanceof GgufArray) return arrayJson(value, options);
  if (typeof value === "bigint") return jsonBigint(value);
  if (typeof value === "number") return jsonNumber(value, type);
  return value;
}

function arrayJson(array: GgufArray, options: SummaryOptions): JsonArraySummary {
  const limit = options.arrayLimit ?? 16;
  const head = options.arrayHead ?? 8;
  const values = array.head(array.length <= limit ? array.length : head);
  const out: JsonValue[] = [];
  for (let i = 0; i < values.length; i++) out.push(metadataJson(values[i], array.type, options));
  return { elementType: typeName(array.type), length: array.length, values: out };
}

function typeName(type: number): string {
  return GGUF_VALUE_TYPE_NAMES[type] ?? `type ${type}`;
}

function stringOrNull(gguf: Gguf, key: string): string | null {
  const v = gguf.metadata.get(key);
  return typeof v === "string" ? v : null;
}

function idOrNull(gguf: Gguf, key: string): number | string | null {
  const v = gguf.metadata.get(key);
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return jsonBigint(v);
  return null;
}

function lengthOrNull(gguf: Gguf, key: string): number | null {
  const v = gguf.metadata.get(key);
  return v instanceof GgufArray ? v.length : null;
}

/** Summarises a parsed file: reads only the metadata and tensor infos, never tensor data. */
export function summarizeGguf(gguf: Gguf, options: SummaryOptions = {}): GgufSummary {
  const architecture = stringOrNull(gguf, "general.architecture");
  const fileTypeValue = gguf.metadata.get("general.file_type");
  const fileType = typeof fileTypeValue === "number" ? fileTypeValue : null;

  const metadata: MetadataEntry[] = [];
  const hyperParameters: Record<string, JsonValue> = {};
  for (const [key, value] of gguf.metadata) {
    const type = gguf.metadataTypes.get(key) ?? -1;
    const json = metadataJson(value, type, options);
    metadata.push({ key, type: typeName(type), value: json });
    if (architecture !== null && key.startsWith(architecture + ".")) hyperParameters[key] = json;
  }

  const tensorTypes: Record<string, number> = {};
  const tensors: TensorEntry[] = [];
  let tensorBytes = 0;
  let parameterCount = 0;
  for (const t of gguf.tensors) {
    tensorTypes[t.type.name] = (tensorTypes[t.type.name] ?? 0) + 1;
    tensorBytes += t.sizeBytes;
    parameterCount += t.elementCount;
    tensors.push({
      name: t.name,
      type: t.type.name,
      shape: [...t.dims],
      elements: t.elementCount,
      bytes: t.sizeBytes,
      offset: t.offset,
      fileOffset: t.dataOffset,
    });
  }

  return {
    version: gguf.version,
    fileSize: gguf.fileSize,
    architecture,
    name: stringOrNull(gguf, "general.name"),
    fileType,
    fileTypeName: fileType === null ? null : FILE_TYPE_NAMES[fileType] ?? null,
    alignment: gguf.alignment,
    dataStart: gguf.dataStart,
    tensorCount: gguf.tensors.length,
    tensorBytes,
    parameterCount,
    tensorTypes,
    hyperParameters,
    tokenizer: {
      model: stringOrNull(gguf, "tokenizer.ggml.model"),
      pre: stringOrNull(gguf, "tokenizer.ggml.pre"),
      tokenCount: lengthOrNull(gguf, "tokenizer.ggml.tokens"),
      mergeCount: lengthOrNull(gguf, "tokenizer.ggml.merges"),
      bos: idOrNull(gguf, "tokenizer.ggml.bos_token_id"),
      eos: idOrNull(gguf, "tokenizer.ggml.eos_token_id"),
      unk: idOrNull(gguf, "tokenizer.ggml.unknown_token_id"),
      pad: idOrNull(gguf, "tokenizer.ggml.padding_token_id"),
    },
    metadata,
    tensors,
  };
}

/** `1185376` → `"1.13 MiB"`. */
export function formatBytes(bytes: number): string {
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} bytes` : `${value.toFixed(2)} ${units[unit]}`;
}

/** `260160` → `"260.16K"`, `1235814400` → `"1.24B"`. */
export function formatCount(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)}B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(2)}K`;
  return String(n);
}

const STRING_TEXT_MAX = 60;

function textValue(value: JsonValue): string {
  if (value === null) return "null";
  if (typeof value === "string") {
    if (value.length <= STRING_TEXT_MAX) return JSON.stringify(value);
    return `${JSON.stringify(value.slice(0, STRING_TEXT_MAX))}... (${value.length} chars)`;
  }
  if (typeof value !== "object") return String(value);
  if (Array.isArray(value)) return `[${value.map(textValue).join(", ")}]`;
  const items = value.values.map(textValue);
  if (value.values.length < value.length) items.push("...");
  return `[${value.elementType} x ${value.length}] [${items.join(", ")}]`;
}

function table(rows: string[][], rightAligned: ReadonlySet<number>): string[] {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) =>
    "  " +
    r.map((cell, i) => rightAligned.has(i) ? cell.padStart(widths[i]) : cell.padEnd(widths[i]))
      .join("  ").trimEnd()
  );
}

/** A key or tensor name for the text output: JSON-quoted if it holds control characters. */
function plain(name: string): string {
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return JSON.stringify(name);
  }
  return name;
}

const dash = (v: string | number | null): string =>
  v === null ? "-" : typeof v === "string" ? plain(v) : String(v);

/**
 * The text `dotllm inspect` prints (ends with a newline). `runsAs`, when given, is a line
 * after the architecture saying how dotllm runs the file (its distinctive settings).
 */
export function formatGgufSummary(summary: GgufSummary, file?: string, runsAs?: string): string {
  const s = summary;
  const lines: string[] = [];
  if (file !== undefined) lines.push(`file:          ${file}`);
  const fileType = s.fileType === null
    ? "-"
    : s.fileTypeName === null
    ? String(s.fileType)
    : `${s.fileTypeName} (${s.fileType})`;
  const types = Object.entries(s.tensorTypes).map(([t, n]) => `${t} x${n}`).join(", ");
  lines.push(
    `gguf version:  ${s.version}`,
    `file size:     ${s.fileSize} bytes (${formatBytes(s.fileSize)})`,
    `architecture:  ${dash(s.architecture)}`,
    ...(runsAs === undefined ? [] : [`runs as:       ${plain(runsAs)}`]),
    `name:          ${dash(s.name)}`,
    `file type:     ${fileType}`,
    `parameters:    ${s.parameterCount} (${formatCount(s.parameterCount)})`,
    `tensors:       ${s.tensorCount}${types ? ` (${types})` : ""}`,
    s.tensorCount === 0
      ? `tensor data:   none (vocab only), alignment ${s.alignment}`
      : `tensor data:   ${s.tensorBytes} bytes (${formatBytes(s.tensorBytes)}) ` +
        `from byte ${s.dataStart}, alignment ${s.alignment}`,
    "",
  );

  const hp = Object.entries(s.hyperParameters);
  lines.push(`hyper-parameters (${s.architecture ?? "-"}.*, ${hp.length}):`);
  if (hp.length > 0) {
    const prefix = `${s.architecture}.`.length;
    lines.push(...table(hp.map(([k, v]) => [plain(k.slice(prefix)), textValue(v)]), new Set()));
  }
  lines.push("");

  const t = s.tokenizer;
  lines.push(
    "tokenizer:",
    ...table([
      ["model", dash(t.model)],
      ["pre", dash(t.pre)],
      ["tokens", dash(t.tokenCount)],
      ["merges", dash(t.mergeCount)],
      ["bos / eos / unk / pad", [t.bos, t.eos, t.unk, t.pad].map(dash).join(" / ")],
    ], new Set()),
    "",
  );

  lines.push(`metadata (${s.metadata.length} keys):`);
  if (s.metadata.length > 0) {
    lines.push(
      ...table(s.metadata.map((m) => [plain(m.key), m.type, textValue(m.value)]), new Set()),
    );
  }
  lines.push("");

  lines.push(`tensors (${s.tensorCount}):`);
  if (s.tensorCount > 0) {
    const rows = [["#", "name", "type", "shape", "bytes", "offset"]];
    s.tensors.forEach((x, i) =>
      rows.push([
        String(i),
        plain(x.name),
        x.type,
        x.shape.join(" x "),
        String(x.bytes),
        String(x.fileOffset),
      ])
    );
    lines.push(...table(rows, new Set([0, 4, 5])));
  }
  return lines.join("\n") + "\n";
}
