/** Compute kernels (matmul, attention, norms, RoPE...) on a thread pool, and row conversions. @module */
export {
  HEAD_DIM_MAX,
  Kernels,
  Q8_0_BLOCK,
  Q8_0_BLOCK_BYTES,
  THREAD_COUNT_MAX,
  weightBytes,
  WeightType,
} from "./kernels.ts";
export {
  bf16ToF32,
  dequantizeQ8_0,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
  quantizeQ8_0,
} from "./convert.ts";
