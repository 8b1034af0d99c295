/**
 * Row conversions between f32 and the weight formats (F16, BF16, Q8_0), on
 * JavaScript arrays: for tests, writers and tools, not for hot paths (each call
 * copies through a temporary native buffer).
 *
 * Q8_0 matches llama.cpp's `quantize_row_q8_0`: per 32 values d = max|x| / 127
 * stored as f16, q = round(x / d) with halves away from zero.
 *
 * @example
 * ```ts
 * import { loadNative } from "../native/mod.ts";
 * import { dequantizeQ8_0, quantizeQ8_0 } from "./convert.ts";
 * const native = loadNative();
 * const blocks = quantizeQ8_0(native, new Float32Array(32).fill(0.5));
 * console.log(blocks.length, dequantizeQ8_0(native, blocks)[0]); // 34 0.5
 * ```
 *
 * @module
 */
import type { Native } from "../native/mod.ts";
import { Q8_0_BLOCK, Q8_0_BLOCK_BYTES } from "./kernels.ts";

type Convert = (src: number, dst: number, n: number) => void;

function convert(
  native: Native,
  fn: Convert,
  src: Uint8Array,
  n: number,
  dstBytes: number,
): Uint8Array {
  if (n === 0) return new Uint8Array(0);
  using from = native.alloc(src.byteLength);
  using to = native.alloc(dstBytes);
  from.bytes().set(src);
  fn(from.address, to.address, n);
  return to.bytes().slice();
}

function bytesOf(array: Float32Array | Uint16Array | Uint8Array): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

function checkQ8Length(n: number): void {
  if (n % Q8_0_BLOCK !== 0) {
    throw new RangeError(`Q8_0 rows need a multiple of 32 values, got ${n}`);
  }
}

/** Quantizes f32 values (a multiple of 32) to Q8_0 blocks (34 bytes per 32 values). */
export function quantizeQ8_0(native: Native, values: Float32Array): Uint8Array {
  checkQ8Length(values.length);
  const n = values.length;
  return convert(
    native,
    native.fn.dotllm_quantize_q8_0,
    bytesOf(values),
    n,
    (n / Q8_0_BLOCK) * Q8_0_BLOCK_BYTES,
  );
}

/** Dequantizes Q8_0 blocks to f32. */
export function dequantizeQ8_0(native: Native, blocks: Uint8Array): Float32Array {
  if (blocks.length % Q8_0_BLOCK_BYTES !== 0) {
    throw new RangeError(`Q8_0 data must be a multiple of 34 bytes, got ${blocks.length}`);
  }
  const n = (blocks.length / Q8_0_BLOCK_BYTES) * Q8_0_BLOCK;
  const out = convert(native, native.fn.dotllm_dequantize_q8_0, blocks, n, n * 4);
  return new Float32Array(out.buffer, 0, n);
}

/** Converts f32 to f16 bits (round to nearest even). */
export function f32ToF16(native: Native, values: Float32Array): Uint16Array {
  const n = values.length;
  const out = convert(native, native.fn.dotllm_convert_f32_f16, bytesOf(values), n, n * 2);
  return new Uint16Array(out.buffer, 0, n);
}

/** Converts f16 bits to f32. */
export function f16ToF32(native: Native, values: Uint16Array): Float32Array {
  const n = values.length;
  const out = convert(native, native.fn.dotllm_convert_f16_f32, bytesOf(values), n, n * 4);
  return new Float32Array(out.buffer, 0, n);
}

/** Converts f32 to bf16 bits (round to nearest even, NaN stays NaN). */
export function f32ToBf16(native: Native, values: Float32Array): Uint16Array {
  const n = values.length;
  const out = convert(native, native.fn.dotllm_convert_f32_bf16, bytesOf(values), n, n * 2);
  return new Uint16Array(out.buffer, 0, n);
}

/** Converts bf16 bits to f32. */
export function bf16ToF32(native: Native, values: Uint16Array): Float32Array {
  const n = values.length;
  const out = convert(native, native.fn.dotllm_convert_bf16_f32, bytesOf(values), n, n * 4);
  return new Float32Array(out.buffer, 0, n);
}
