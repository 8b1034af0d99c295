/** Shared helpers of the kernel tests: seeded data, native buffers, TS scalar references. @module */
import type { Native, NativeBuffer } from "../src/native/mod.ts";
// A small seeded PRNG (mulberry32) so every run sees the same data.
import { prng as rng } from "./_fuzz.ts";

export { rng };

/** n uniform values in [-scale, scale). */
export function randomF32(n: number, seed: number, scale = 1): Float32Array {
  const next = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (next() * 2 - 1) * scale;
  return out;
}

/** A native buffer holding a copy of `data` (at least 64 bytes, so empty data works). */
export function upload(native: Native, data: ArrayBufferView): NativeBuffer {
  const buffer = native.alloc(Math.max(64, data.byteLength));
  buffer.bytes().set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  return buffer;
}

/**
 * The scalar reference of the Q8_0 quantizer: llama.cpp's `quantize_row_q8_0_ref`
 * transcribed independently in TS (f32 arithmetic via Math.fround), to check the
 * one quantizer (the library's, `dotllm_quantize_row`) and the matmul references.
 */
export function quantizeQ8_0ScalarReference(x: Float32Array): { d: Float32Array; q: Int8Array } {
  const blocks = x.length / 32;
  const d = new Float32Array(blocks);
  const q = new Int8Array(x.length);
  for (let b = 0; b < blocks; b++) {
    let amax = 0;
    for (let i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(x[b * 32 + i]));
    const scale = Math.fround(amax / 127);
    const id = scale !== 0 ? Math.fround(1 / scale) : 0;
    for (let i = 0; i < 32; i++) {
      const v = Math.fround(x[b * 32 + i] * id);
      q[b * 32 + i] = Math.sign(v) * Math.round(Math.abs(v)); // halves away from zero
    }
    d[b] = Math.f16round(scale);
  }
  return { d, q };
}

/** Q8_0 blocks (34 bytes each) as their f16 scales and bytes. */
export function splitQ8_0(blocks: Uint8Array): { d: Float32Array; q: Int8Array } {
  const count = blocks.length / 34;
  const view = new DataView(blocks.buffer, blocks.byteOffset, blocks.byteLength);
  const d = new Float32Array(count);
  const q = new Int8Array(count * 32);
  for (let b = 0; b < count; b++) {
    d[b] = new Float16Array(
      blocks.buffer.slice(blocks.byteOffset + b * 34, blocks.byteOffset + b * 34 + 2),
    )[0];
    for (let i = 0; i < 32; i++) q[b * 32 + i] = view.getInt8(b * 34 + 2 + i);
  }
  return { d, q };
}

/** out[t][r] = Σ_c w[r][c] x[t][c] in f64, and the magnitudes Σ|w x| for error budgets. */
export function matmulReference(
  w: Float32Array,
  x: Float32Array,
  rows: number,
  cols: number,
  tokens: number,
): { out: Float64Array; magnitude: Float64Array } {
  const out = new Float64Array(rows * tokens);
  const magnitude = new Float64Array(rows * tokens);
  for (let t = 0; t < tokens; t++) {
    for (let r = 0; r < rows; r++) {
      let sum = 0;
      let abs = 0;
      for (let c = 0; c < cols; c++) {
        const p = w[r * cols + c] * x[t * cols + c];
        sum += p;
        abs += Math.abs(p);
      }
      out[t * rows + r] = sum;
      magnitude[t * rows + r] = abs;
    }
  }
  return { out, magnitude };
}

/** Q8_0 matmul in TS: activations quantized like llama.cpp, exact integer block sums. */
export function matmulQ8_0Reference(
  blocks: Uint8Array,
  x: Float32Array,
  rows: number,
  cols: number,
  tokens: number,
): { out: Float64Array; magnitude: Float64Array } {
  const w = splitQ8_0(blocks);
  const nb = cols / 32;
  const out = new Float64Array(rows * tokens);
  const magnitude = new Float64Array(rows * tokens);
  for (let t = 0; t < tokens; t++) {
    const a = quantizeQ8_0ScalarReference(x.subarray(t * cols, (t + 1) * cols));
    for (let r = 0; r < rows; r++) {
      let sum = 0;
      let abs = 0;
      for (let b = 0; b < nb; b++) {
        let isum = 0;
        let iabs = 0;
        for (let i = 0; i < 32; i++) {
          const p = w.q[(r * nb + b) * 32 + i] * a.q[b * 32 + i];
          isum += p;
          iabs += Math.abs(p);
        }
        const scale = w.d[r * nb + b] * a.d[b];
        sum += scale * isum;
        abs += Math.abs(scale) * iabs;
      }
      out[t * rows + r] = sum;
      magnitude[t * rows + r] = abs;
    }
  }
  return { out, magnitude };
}

/** Asserts |expected - actual| <= budget · magnitude (+ tiny) element-wise. */
export function assertClose(
  actual: Float32Array,
  expected: ArrayLike<number>,
  magnitude: ArrayLike<number> | number,
  budget: number,
  what: string,
): void {
  if (actual.length !== expected.length) {
    throw new Error(`${what}: length ${actual.length} != ${expected.length}`);
  }
  for (let i = 0; i < actual.length; i++) {
    const m = typeof magnitude === "number" ? magnitude : magnitude[i];
    const limit = budget * m + 1e-30;
    if (!(Math.abs(actual[i] - expected[i]) <= limit)) {
      throw new Error(
        `${what}: element ${i} is ${actual[i]}, expected ${expected[i]} (limit ${limit})`,
      );
    }
  }
}

/** Asserts two f32 arrays are bit-identical. */
export function assertBitIdentical(
  actual: Float32Array,
  expected: Float32Array,
  what: string,
): void {
  const a = new Uint32Array(actual.buffer, actual.byteOffset, actual.length);
  const b = new Uint32Array(expected.buffer, expected.byteOffset, expected.length);
  if (a.length !== b.length) throw new Error(`${what}: length ${a.length} != ${b.length}`);
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== b[i]) {
      throw new Error(`${what}: element ${i} differs: ${actual[i]} vs ${expected[i]}`);
    }
  }
}
