/** GGUF files: reading (zero copy), summarising for `inspect`, writing. @module */
export {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_LIMITS,
  GGUF_VALUE_TYPE_NAMES,
  GgufArray,
  GgufError,
  GgufValueType,
  parseGguf,
} from "./reader.ts";
export type { Gguf, GgufTensorInfo, GgufValue } from "./reader.ts";
export { GGML_TYPES, GgmlType, ggmlTypeById, ggmlTypeByName } from "./types.ts";
export type { GgmlTypeInfo } from "./types.ts";
export { GgufFile, openGguf } from "./file.ts";
export {
  formatBytes,
  formatCount,
  formatGgufSummary,
  metadataJson,
  shortestF32,
  summarizeGguf,
} from "./summary.ts";
export type {
  GgufSummary,
  JsonArraySummary,
  JsonValue,
  MetadataEntry,
  SummaryOptions,
  TensorEntry,
  TokenizerSummary,
} from "./summary.ts";
export { encodeGguf, encodeGgufHeader, GgufWriter, meta } from "./writer.ts";
export type { GgufWriteArray, GgufWriteHeader, GgufWriteTensor, GgufWriteValue } from "./writer.ts";
