/**
 * ggml's `ggml_validate_row_data`: float data must be finite, and the f16
 * scales of a quantized block must be finite. llama-quantize checks every
 * tensor it reads (the loader's `check_tensors`) and every block it writes;
 * so does `dotllm quantize`.
 *
 * @example
 * ```ts
 * import { findInvalidValue } from "./validate.ts";
 * const bytes = new Uint8Array(new Float32Array([1, NaN]).buffer);
 * console.log(findInvalidValue(0, bytes)); // "NaN at element 1"
 * ```
 *
 * @module
 */
import { ggmlTypeById } from "../gguf/types.ts";

/** Byte offsets of the f16 scale fields in one block of each quantized type. */
const SCALE_OFFSETS: Record<number, readonly number[]> = {
  2: [0], // Q4_0: d
  3: [0, 2], // Q4_1: d, m
  6: [0], // Q5_0: d
  7: [0, 2], // Q5_1: d, m
  8: [0], // Q8_0: d
  10: [80, 82], // Q2_K: scales[16], qs[64], d, dmin
  11: [108], // Q3_K: hmask[32], qs[64], scales[12], d
  12: [0, 2], // Q4_K: d, dmin
  13: [0, 2], // Q5_K: d, dmin
  14: [208], // Q6_K: ql[128], qh[64], scales[16], d
  20: [0], // IQ4_NL: d
  23: [0], // IQ4_XS: d
};

/**
 * Where `bytes` (whole blocks of type `typeId`) first hold a value ggml
 * rejects, as a short phrase (`"NaN at element 3"`), or undefined when all
 * are valid. Types without a rule here (integers) are always valid.
 */
export function findInvalidValue(typeId: number, bytes: Uint8Array): string | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (typeId) {
    case 0: {
      const n = bytes.length >>> 2;
      if ((bytes.byteOffset & 3) === 0) {
        const u = new Uint32Array(bytes.buffer, bytes.byteOffset, n);
        for (let i = 0; i < n; i++) {
          if ((u[i] & 0x7f80_0000) === 0x7f80_0000) return describeF32(u[i], i);
        }
      } else {
        for (let i = 0; i < n; i++) {
          const b = view.getUint32(i * 4, true);
          if ((b & 0x7f80_0000) === 0x7f80_0000) return describeF32(b, i);
        }
      }
      return undefined;
    }
    case 1: {
      const n = bytes.length >>> 1;
      for (let i = 0; i < n; i++) {
        const h = view.getUint16(i * 2, true);
        if ((h & 0x7c00) === 0x7c00) return `${(h & 0x3ff) !== 0 ? "NaN" : "inf"} at element ${i}`;
      }
      return undefined;
    }
    case 30: {
      const n = bytes.length >>> 1;
      for (let i = 0; i < n; i++) {
        const h = view.getUint16(i * 2, true) & 0x7fff;
        if (h >= 0x7f80) return `${h > 0x7f80 ? "NaN" : "inf"} at element ${i}`;
      }
      return undefined;
    }
  }
  const offsets = SCALE_OFFSETS[typeId];
  const type = ggmlTypeById(typeId);
  if (offsets === undefined || type === undefined) return undefined;
  const blocks = Math.floor(bytes.length / type.blockBytes);
  for (let b = 0; b < blocks; b++) {
    for (const o of offsets) {
      const h = view.getUint16(b * type.blockBytes + o, true);
      if ((h & 0x7c00) === 0x7c00) {
        return `${(h & 0x3ff) !== 0 ? "NaN" : "inf"} scale in block ${b}`;
      }
    }
  }
  return undefined;
}

function describeF32(bits: number, i: number): string {
  return `${(bits & 0x7f_ffff) !== 0 ? "NaN" : "inf"} at element ${i}`;
}
