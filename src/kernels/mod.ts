/** Compute kernels (matmul, attention, norms, RoPE...) on a thread pool, the type table, and row conversions. @module */
export { Kernels } from "./kernels.ts";
export { type ComputableType, computableType, computableTypes, rowBytes } from "./types.ts";
export {
  bf16ToF32,
  dequantizeQ8_0,
  dequantizeRow,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
  quantizeQ8_0,
  quantizeRow,
} from "./convert.ts";
