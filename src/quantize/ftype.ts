/**
 * llama.cpp's file types (`llama_ftype`) and the names `llama-quantize`
 * accepts for them, with the default tensor type of each
 * (`llama_ftype_get_default_type`).
 *
 * @example
 * ```ts
 * import { parseQuantType } from "./ftype.ts";
 * const q = parseQuantType("q4_k_m");
 * console.log(q?.name, q?.ftype); // "Q4_K_M" 15
 * ```
 *
 * @module
 */
import { GGML_TYPES, GgmlType, ggmlTypeById, type GgmlTypeInfo } from "../gguf/types.ts";

/** `llama_ftype` values (include/llama.h); these are what `general.file_type` holds. */
export const LlamaFtype = {
  ALL_F32: 0,
  MOSTLY_F16: 1,
  MOSTLY_Q4_0: 2,
  MOSTLY_Q4_1: 3,
  MOSTLY_Q8_0: 7,
  MOSTLY_Q5_0: 8,
  MOSTLY_Q5_1: 9,
  MOSTLY_Q2_K: 10,
  MOSTLY_Q3_K_S: 11,
  MOSTLY_Q3_K_M: 12,
  MOSTLY_Q3_K_L: 13,
  MOSTLY_Q4_K_S: 14,
  MOSTLY_Q4_K_M: 15,
  MOSTLY_Q5_K_S: 16,
  MOSTLY_Q5_K_M: 17,
  MOSTLY_Q6_K: 18,
  MOSTLY_IQ2_XXS: 19,
  MOSTLY_IQ2_XS: 20,
  MOSTLY_Q2_K_S: 21,
  MOSTLY_IQ3_XS: 22,
  MOSTLY_IQ3_XXS: 23,
  MOSTLY_IQ1_S: 24,
  MOSTLY_IQ4_NL: 25,
  MOSTLY_IQ3_S: 26,
  MOSTLY_IQ3_M: 27,
  MOSTLY_IQ2_S: 28,
  MOSTLY_IQ2_M: 29,
  MOSTLY_IQ4_XS: 30,
  MOSTLY_IQ1_M: 31,
  MOSTLY_BF16: 32,
  MOSTLY_TQ1_0: 36,
  MOSTLY_TQ2_0: 37,
  MOSTLY_MXFP4_MOE: 38,
  MOSTLY_NVFP4: 39,
  MOSTLY_Q1_0: 40,
  MOSTLY_Q2_0: 41,
} as const;

/**
 * ggml type ids by name, for the ported rules: the reader's table
 * ({@linkcode GgmlType}) plus three types newer than it, named only so the rules
 * read like llama.cpp's (no file dotllm writes can hold them).
 */
export const T = {
  ...GgmlType,
  NVFP4: 40,
  Q1_0: 41,
  Q2_0: 42,
} as const;

/** One `llama-quantize` type name. */
export interface QuantType {
  /** The name as llama-quantize prints it (`Q4_K_M`; the alias `Q4_K` stays `Q4_K`). */
  readonly name: string;
  /** The `llama_ftype` written to `general.file_type`. */
  readonly ftype: number;
  /** True when dotllm can produce it (every tensor type it may choose is computable). */
  readonly supported: boolean;
}

/**
 * llama-quantize's QUANT_OPTIONS, in its order (the order decides which name a
 * number maps to: `15` is `Q4_K`, the alias listed before `Q4_K_M`).
 */
export const QUANT_TYPES: readonly QuantType[] = [
  { name: "Q1_0", ftype: LlamaFtype.MOSTLY_Q1_0, supported: false },
  { name: "Q2_0", ftype: LlamaFtype.MOSTLY_Q2_0, supported: false },
  { name: "Q4_0", ftype: LlamaFtype.MOSTLY_Q4_0, supported: true },
  { name: "Q4_1", ftype: LlamaFtype.MOSTLY_Q4_1, supported: true },
  { name: "MXFP4_MOE", ftype: LlamaFtype.MOSTLY_MXFP4_MOE, supported: false },
  { name: "Q5_0", ftype: LlamaFtype.MOSTLY_Q5_0, supported: true },
  { name: "Q5_1", ftype: LlamaFtype.MOSTLY_Q5_1, supported: true },
  { name: "IQ2_XXS", ftype: LlamaFtype.MOSTLY_IQ2_XXS, supported: false },
  { name: "IQ2_XS", ftype: LlamaFtype.MOSTLY_IQ2_XS, supported: false },
  { name: "IQ2_S", ftype: LlamaFtype.MOSTLY_IQ2_S, supported: false },
  { name: "IQ2_M", ftype: LlamaFtype.MOSTLY_IQ2_M, supported: false },
  { name: "IQ1_S", ftype: LlamaFtype.MOSTLY_IQ1_S, supported: false },
  { name: "IQ1_M", ftype: LlamaFtype.MOSTLY_IQ1_M, supported: false },
  { name: "TQ1_0", ftype: LlamaFtype.MOSTLY_TQ1_0, supported: false },
  { name: "TQ2_0", ftype: LlamaFtype.MOSTLY_TQ2_0, supported: false },
  { name: "Q2_K", ftype: LlamaFtype.MOSTLY_Q2_K, supported: true },
  // Q2_K_S needs an importance matrix for its Q2_K tensors; dotllm has none.
  { name: "Q2_K_S", ftype: LlamaFtype.MOSTLY_Q2_K_S, supported: false },
  { name: "IQ3_XXS", ftype: LlamaFtype.MOSTLY_IQ3_XXS, supported: false },
  { name: "IQ3_S", ftype: LlamaFtype.MOSTLY_IQ3_S, supported: false },
  { name: "IQ3_M", ftype: LlamaFtype.MOSTLY_IQ3_M, supported: false },
  { name: "Q3_K", ftype: LlamaFtype.MOSTLY_Q3_K_M, supported: true },
  { name: "IQ3_XS", ftype: LlamaFtype.MOSTLY_IQ3_XS, supported: false },
  { name: "Q3_K_S", ftype: LlamaFtype.MOSTLY_Q3_K_S, supported: true },
  { name: "Q3_K_M", ftype: LlamaFtype.MOSTLY_Q3_K_M, supported: true },
  { name: "Q3_K_L", ftype: LlamaFtype.MOSTLY_Q3_K_L, supported: true },
  { name: "IQ4_NL", ftype: LlamaFtype.MOSTLY_IQ4_NL, supported: true },
  { name: "IQ4_XS", ftype: LlamaFtype.MOSTLY_IQ4_XS, supported: true },
  { name: "Q4_K", ftype: LlamaFtype.MOSTLY_Q4_K_M, supported: true },
  { name: "Q4_K_S", ftype: LlamaFtype.MOSTLY_Q4_K_S, supported: true },
  { name: "Q4_K_M", ftype: LlamaFtype.MOSTLY_Q4_K_M, supported: true },
  { name: "Q5_K", ftype: LlamaFtype.MOSTLY_Q5_K_M, supported: true },
  { name: "Q5_K_S", ftype: LlamaFtype.MOSTLY_Q5_K_S, supported: true },
  { name: "Q5_K_M", ftype: LlamaFtype.MOSTLY_Q5_K_M, supported: true },
  { name: "Q6_K", ftype: LlamaFtype.MOSTLY_Q6_K, supported: true },
  { name: "Q8_0", ftype: LlamaFtype.MOSTLY_Q8_0, supported: true },
  { name: "F16", ftype: LlamaFtype.MOSTLY_F16, supported: true },
  { name: "BF16", ftype: LlamaFtype.MOSTLY_BF16, supported: true },
  { name: "F32", ftype: LlamaFtype.ALL_F32, supported: true },
  // COPY (ftype 0, "only copy tensors") is llama-quantize's too; dotllm does not offer it.
  { name: "COPY", ftype: LlamaFtype.ALL_F32, supported: false },
];

/**
 * The type named `text` as llama-quantize's `try_parse_ftype` finds it: a
 * case-insensitive name, or a number (a leading integer, as `std::stoi` reads
 * it) naming the first entry with that ftype. Undefined when neither.
 */
export function parseQuantType(text: string): QuantType | undefined {
  const upper = text.toUpperCase();
  const byName = QUANT_TYPES.find((q) => q.name === upper);
  if (byName !== undefined) return byName;
  // std::stoi: leading whitespace, a sign, digits; the rest ignored.
  const match = /^\s*([+-]?\d+)/.exec(text);
  if (match === null) return undefined;
  const n = Number(match[1]);
  if (!Number.isSafeInteger(n) || n < -0x8000_0000 || n > 0x7fff_ffff) return undefined;
  return QUANT_TYPES.find((q) => q.ftype === n);
}

/** `llama_ftype_get_default_type`: the tensor type a file type starts every tensor at. */
export function ftypeDefaultType(ftype: number): number | undefined {
  const F = LlamaFtype;
  switch (ftype) {
    case F.MOSTLY_Q4_0:
      return T.Q4_0;
    case F.MOSTLY_Q4_1:
      return T.Q4_1;
    case F.MOSTLY_Q5_0:
      return T.Q5_0;
    case F.MOSTLY_Q5_1:
      return T.Q5_1;
    case F.MOSTLY_Q8_0:
      return T.Q8_0;
    case F.MOSTLY_F16:
      return T.F16;
    case F.MOSTLY_BF16:
      return T.BF16;
    case F.ALL_F32:
      return T.F32;
    case F.MOSTLY_Q1_0:
      return T.Q1_0;
    case F.MOSTLY_Q2_0:
      return T.Q2_0;
    case F.MOSTLY_MXFP4_MOE:
      return T.MXFP4;
    case F.MOSTLY_Q2_K_S:
    case F.MOSTLY_Q2_K:
      return T.Q2_K;
    case F.MOSTLY_IQ3_XS:
      return T.IQ3_S;
    case F.MOSTLY_Q3_K_S:
    case F.MOSTLY_Q3_K_M:
    case F.MOSTLY_Q3_K_L:
      return T.Q3_K;
    case F.MOSTLY_Q4_K_S:
    case F.MOSTLY_Q4_K_M:
      return T.Q4_K;
    case F.MOSTLY_Q5_K_S:
    case F.MOSTLY_Q5_K_M:
      return T.Q5_K;
    case F.MOSTLY_Q6_K:
      return T.Q6_K;
    case F.MOSTLY_TQ1_0:
      return T.TQ1_0;
    case F.MOSTLY_TQ2_0:
      return T.TQ2_0;
    case F.MOSTLY_IQ2_XXS:
      return T.IQ2_XXS;
    case F.MOSTLY_IQ2_XS:
      return T.IQ2_XS;
    case F.MOSTLY_IQ2_S:
      return T.IQ2_XS;
    case F.MOSTLY_IQ2_M:
      return T.IQ2_S;
    case F.MOSTLY_IQ3_XXS:
      return T.IQ3_XXS;
    case F.MOSTLY_IQ1_S:
      return T.IQ1_S;
    case F.MOSTLY_IQ1_M:
      return T.IQ1_M;
    case F.MOSTLY_IQ4_NL:
      return T.IQ4_NL;
    case F.MOSTLY_IQ4_XS:
      return T.IQ4_XS;
    case F.MOSTLY_IQ3_S:
    case F.MOSTLY_IQ3_M:
      return T.IQ3_S;
  }
  return undefined;
}

/** ggml's `ggml_is_quantized`: a block type (not F32/F16/BF16/F64 or the integer types). */
export function isQuantizedType(id: number): boolean {
  return ![T.F32, T.F16, T.BF16, T.F64, T.I8, T.I16, T.I32, T.I64].includes(id);
}

/**
 * A ggml type by its name, case-insensitive, as llama-quantize's
 * `parse_ggml_type` reads `--output-tensor-type` and `--token-embedding-type`.
 */
export function parseGgmlTypeName(text: string): GgmlTypeInfo | undefined {
  const upper = text.toUpperCase();
  return (GGML_TYPES as readonly GgmlTypeInfo[]).find((t) => !t.removed && t.name === upper);
}

/** Block elements of a type id (ggml_blck_size); 1 for types dotllm does not list. */
export function blockElements(id: number): number {
  return ggmlTypeById(id)?.blockSize ?? 1;
}
