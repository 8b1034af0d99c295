/**
 * Row conversions through the native type table: ggml's reference quantizer and
 * its dequantization for every computable type (`dotllm_quantize_row`,
 * `dotllm_dequantize_row`), plus f16/bf16 helpers.
 *
 * @example
 * ```ts
 * import { loadNative } from "../native/mod.ts";
 * import { GgmlType } from "../gguf/mod.ts";
 * import { dequantizeRow, quantizeRow } from "./convert.ts";
 * const native = loadNative();
 * const blocks = quantizeRow(native, GgmlType.Q8_0, new Float32Array(32).fill(0.5));
 * console.log(blocks.length, dequantizeRow(native, GgmlType.Q8_0, blocks)[0]); // 34 0.5
 * ```
 *
 * @module
 */
import { GgmlType } from "../gguf/types.ts";
import type { Native } from "../native/mod.ts";
import { computableType, rowBytes } from "./types.ts";

/** `values` (a whole number of blocks) in type `type`'s layout, by ggml's reference quantizer. */
export function quantizeRow(native: Native, type: number, values: Float32Array): Uint8Array {
  const bytes = rowBytes(native, type, values.length);
  if (values.length === 0) return new Uint8Array(0);
  using from = native.alloc(values.byteLength);
  using to = native.alloc(bytes);
  from.f32().set(values);
  if (native.fn.dotllm_quantize_row(type, from.address, to.address, values.length) !== 0) {
    throw new RangeError(`cannot quantize ${values.length} values to type ${type}`);
  }
  return to.bytes().slice();
}

/** The f32 values of `data`, a whole number of type `type`'s blocks. */
export function dequantizeRow(native: Native, type: number, data: Uint8Array): Float32Array {
  const t = computableType(native, type);
  if (t === undefined) throw new RangeError(`type ${type} is not computable`);
  if (data.length % t.blockBytes !== 0) {
    throw new RangeError(
      `${t.name} data must be a multiple of ${t.blockBytes} bytes, got ${data.length}`,
    );
  }
  const n = (data.length / t.blockBytes) * t.blockElems;
  if (n === 0) return new Float32Array(0);
  using from = native.alloc(data.length);
  using to = native.alloc(n * 4);
  from.bytes().set(data);
  if (native.fn.dotllm_dequantize_row(type, from.address, to.address, n) !== 0) {
    throw new RangeError(`cannot dequantize ${n} values of type ${type}`);
  }
  return to.f32().slice();
}

function bits(bytes: Uint8Array): Uint16Array {
  return new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
}

function bytesOf(values: Uint16Array): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}

/** Quantizes f32 values (a multiple of 32) to Q8_0 blocks (34 bytes per 32 values). */
export function quantizeQ8_0(native: Native, values: Float32Array): Uint8Array {
  return quantizeRow(native, GgmlType.Q8_0, values);
}

/** Dequantizes Q8_0 blocks to f32. */
export function dequantizeQ8_0(native: Native, blocks: Uint8Array): Float32Array {
  return dequantizeRow(native, GgmlType.Q8_0, blocks);
}

/** Converts f32 to f16 bits (round to nearest even). */
export function f32ToF16(native: Native, values: Float32Array): Uint16Array {
  return bits(quantizeRow(native, GgmlType.F16, values));
}

/** Converts f16 bits to f32. */
export function f16ToF32(native: Native, values: Uint16Array): Float32Array {
  return dequantizeRow(native, GgmlType.F16, bytesOf(values));
}

/** Converts f32 to bf16 bits (round to nearest even, NaN stays NaN). */
export function f32ToBf16(native: Native, values: Float32Array): Uint16Array {
  return bits(quantizeRow(native, GgmlType.BF16, values));
}

/** Converts bf16 bits to f32. */
export function bf16ToF32(native: Native, values: Uint16Array): Float32Array {
  return dequantizeRow(native, GgmlType.BF16, bytesOf(values));
}
