/**
 * A plain TypeScript implementation of the model's kernel interface, written
 * from the definitions (no SIMD, no threads, float64 sums): the reference the
 * forward pass is checked against, independently of the Zig kernels. Slow
 * (it allocates views per call); for tests and cross-checks, not for serving.
 *
 * @module
 */
import type { ForwardOps } from "../src/model/ops.ts";
import type { Native } from "../src/native/native.ts";
import { f16ToF32 } from "../src/gguf/writer.ts";

/** The reference kernels over native memory. */
export class ReferenceKernels implements ForwardOps {
  readonly threadCount = 1;
  #native: Native;

  constructor(native: Native) {
    this.#native = native;
  }

  #f32(address: number, n: number): Float32Array {
    return new Float32Array(this.#native.view(address, n * 4));
  }

  /** Row `r` of a `rows × cols` weight of ggml type `type`, as floats. */
  #weightRow(type: number, weight: number, r: number, cols: number): Float32Array {
    const out = new Float32Array(cols);
    if (type === 0) return this.#f32(weight + r * cols * 4, cols);
    if (type === 1 || type === 30) {
      const u16 = new Uint16Array(this.#native.view(weight + r * cols * 2, cols * 2));
      for (let c = 0; c < cols; c++) {
        out[c] = type === 1
          ? f16ToF32(u16[c])
          : new Float32Array(new Uint32Array([u16[c] << 16]).buffer)[0];
      }
      return out;
    }
    if (type === 8) {
      const blocks = cols / 32;
      const bytes = new Uint8Array(this.#native.view(weight + r * blocks * 34, blocks * 34));
      const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      for (let b = 0; b < blocks; b++) {
        const d = f16ToF32(dv.getUint16(b * 34, true));
        for (let i = 0; i < 32; i++) out[b * 32 + i] = d * dv.getInt8(b * 34 + 2 + i);
      }
      return out;
    }
    throw new Error(`reference matmul: type ${type}`);
  }

  matmul(
    type: number,
    out: number,
    weight: number,
    x: number,
    rows: number,
    cols: number,
    tokens: number,
  ) {
    const o = this.#f32(out, rows * tokens);
    const xs = this.#f32(x, cols * tokens);
    for (let r = 0; r < rows; r++) {
      const w = this.#weightRow(type, weight, r, cols);
      for (let t = 0; t < tokens; t++) {
        let sum = 0;
        for (let c = 0; c < cols; c++) sum += w[c] * xs[t * cols + c];
        o[t * rows + r] = sum;
      }
    }
  }

  rmsnorm(out: number, x: number, weight: number, n: number, tokens: number, eps: number) {
    const o = this.#f32(out, n * tokens);
    const xs = this.#f32(x, n * tokens);
    const w = this.#f32(weight, n);
    for (let t = 0; t < tokens; t++) {
      let ss = 0;
      for (let i = 0; i < n; i++) ss += xs[t * n + i] ** 2;
      const scale = 1 / Math.sqrt(ss / n + eps);
      for (let i = 0; i < n; i++) o[t * n + i] = xs[t * n + i] * scale * w[i];
    }
  }

  #i32(address: number, n: number): Int32Array {
    return new Int32Array(this.#native.view(address, n * 4));
  }

  rope(
    x: number,
    tokens: number,
    heads: number,
    headDim: number,
    ropeDims: number,
    positions: number,
    freqBase: number,
    freqFactors: number,
    neox: boolean,
  ) {
    const xs = this.#f32(x, tokens * heads * headDim);
    const pos = this.#i32(positions, tokens);
    const factors = freqFactors ? this.#f32(freqFactors, ropeDims / 2) : undefined;
    const half = ropeDims / 2;
    for (let t = 0; t < tokens; t++) {
      const p = pos[t];
      for (let h = 0; h < heads; h++) {
        const base = (t * heads + h) * headDim;
        for (let i = 0; i < half; i++) {
          const theta = p * freqBase ** (-2 * i / ropeDims) / (factors ? factors[i] : 1);
          const cos = Math.cos(theta), sin = Math.sin(theta);
          // Normal (llama) rotates (x[2i], x[2i+1]); NeoX rotates (x[i], x[i + half]).
          const ia = base + (neox ? i : 2 * i), ib = base + (neox ? i + half : 2 * i + 1);
          const a = xs[ia], b = xs[ib];
          xs[ia] = a * cos - b * sin;
          xs[ib] = a * sin + b * cos;
        }
      }
    }
  }

  /** The cache row of token `t`: `slots[t]·slotRows + positions[t] % slotRows`. */
  #row(pos: Int32Array, slots: Int32Array, t: number, slotRows: number, p = pos[t]): number {
    return slots[t] * slotRows + p % slotRows;
  }

  storeKv(
    cacheType: number,
    cache: number,
    src: number,
    positions: number,
    slots: number,
    tokens: number,
    kvDim: number,
    slotRows: number,
    _slotCount: number,
  ) {
    const s = this.#f32(src, tokens * kvDim);
    const pos = this.#i32(positions, tokens), sl = this.#i32(slots, tokens);
    for (let t = 0; t < tokens; t++) {
      const r = this.#row(pos, sl, t, slotRows);
      const values = s.subarray(t * kvDim, (t + 1) * kvDim);
      if (cacheType === 0) this.#f32(cache + r * kvDim * 4, kvDim).set(values);
      else new Float16Array(this.#native.view(cache + r * kvDim * 2, kvDim * 2)).set(values);
    }
  }

  attention(
    cacheType: number,
    out: number,
    q: number,
    kCache: number,
    vCache: number,
    tokens: number,
    positions: number,
    slots: number,
    heads: number,
    kvHeads: number,
    headDim: number,
    scale: number,
    slotRows: number,
    window: number,
    _slotCount: number,
  ) {
    const kvDim = kvHeads * headDim;
    const pos = this.#i32(positions, tokens), sl = this.#i32(slots, tokens);
    const rowOf = (a: number, r: number) =>
      cacheType === 0
        ? this.#f32(a + r * kvDim * 4, kvDim)
        : new Float16Array(this.#native.view(a + r * kvDim * 2, kvDim * 2));
    const qs = this.#f32(q, tokens * heads * headDim);
    const o = this.#f32(out, tokens * heads * headDim);
    const group = heads / kvHeads;
    // As llama.cpp without flash attention: with an F16 cache, Q and the normalised
    // probabilities are rounded to F16 (the K·Q and V·P products run in the cache type).
    const round = cacheType === 0 ? (x: number) => x : Math.f16round;
    for (let t = 0; t < tokens; t++) {
      const last = pos[t];
      const first = window > 0 ? Math.max(0, last - window + 1) : 0;
      const seen = last - first + 1;
      const K: ArrayLike<number>[] = [], V: ArrayLike<number>[] = [];
      for (let p = first; p <= last; p++) {
        const r = this.#row(pos, sl, t, slotRows, p);
        K.push(rowOf(kCache, r));
        V.push(rowOf(vCache, r));
      }
      for (let h = 0; h < heads; h++) {
        const kh = Math.floor(h / group);
        const qo = (t * heads + h) * headDim;
        const scores = new Float64Array(seen);
        let max = -Infinity;
        for (let j = 0; j < seen; j++) {
          let dot = 0;
          for (let d = 0; d < headDim; d++) dot += round(qs[qo + d]) * K[j][kh * headDim + d];
          scores[j] = dot * scale;
          max = Math.max(max, scores[j]);
        }
        let sum = 0;
        for (let j = 0; j < seen; j++) sum += scores[j] = Math.exp(scores[j] - max);
        for (let j = 0; j < seen; j++) scores[j] = round(scores[j] / sum);
        for (let d = 0; d < headDim; d++) {
          let acc = 0;
          for (let j = 0; j < seen; j++) acc += scores[j] * V[j][kh * headDim + d];
          o[qo + d] = acc;
        }
      }
    }
  }

  swiglu(out: number, gate: number, up: number, n: number) {
    const o = this.#f32(out, n), g = this.#f32(gate, n), u = this.#f32(up, n);
    for (let i = 0; i < n; i++) o[i] = (g[i] / (1 + Math.exp(-g[i]))) * u[i];
  }

  /**
   * GELU (tanh) of `gate` times `up`, as ggml's CPU kernel computes it: the
   * input rounded to F16, GELU of that in F32 (`1 + a·x²` fused, as GCC builds it),
   * rounded to F16 (its lookup table), 0 below -10 and the identity above 10.
   */
  geglu(out: number, gate: number, up: number, n: number) {
    const o = this.#f32(out, n), g = this.#f32(gate, n), u = this.#f32(up, n);
    const f = Math.fround;
    for (let i = 0; i < n; i++) {
      const x = g[i];
      let y: number;
      if (x <= -10) y = 0;
      else if (x >= 10) y = x;
      else {
        const h = Math.f16round(x);
        // 1 + a·h·h as one fma, as GCC compiles ggml's expression (the f64 sum of an exact
        // 35-bit product and 1, rounded once to f32, is that fma's f32 result here).
        const inner = f(f(f(0.7978845608028654) * h) * f(f(f(0.044715) * h) * h + 1));
        y = Math.f16round(f(f(0.5 * h) * f(1 + Math.tanh(inner))));
      }
      o[i] = y * u[i];
    }
  }

  /** GELU (tanh) alone: {@linkcode geglu}'s function of the gate, times nothing. */
  gelu(out: number, x: number, n: number) {
    const o = this.#f32(out, n), g = this.#f32(x, n);
    const f = Math.fround;
    for (let i = 0; i < n; i++) {
      const x = g[i];
      if (x <= -10) o[i] = 0;
      else if (x >= 10) o[i] = x;
      else {
        const h = Math.f16round(x);
        const inner = f(f(f(0.7978845608028654) * h) * f(f(f(0.044715) * h) * h + 1));
        o[i] = Math.f16round(f(f(0.5 * h) * f(1 + Math.tanh(inner))));
      }
    }
  }

  /** Layer norm from its definition: mean and variance in float64, then weight and bias. */
  layerNorm(
    out: number,
    x: number,
    weight: number,
    bias: number,
    n: number,
    tokens: number,
    eps: number,
  ) {
    const o = this.#f32(out, n * tokens), a = this.#f32(x, n * tokens);
    const w = this.#f32(weight, n), b = this.#f32(bias, n);
    for (let t = 0; t < tokens; t++) {
      let mean = 0;
      for (let i = 0; i < n; i++) mean += a[t * n + i];
      mean /= n;
      let variance = 0;
      for (let i = 0; i < n; i++) variance += (a[t * n + i] - mean) ** 2;
      variance /= n;
      const s = 1 / Math.sqrt(variance + eps);
      for (let i = 0; i < n; i++) o[t * n + i] = (a[t * n + i] - mean) * s * w[i] + b[i];
    }
  }

  addRows(out: number, x: number, bias: number, rows: number, n: number) {
    const o = this.#f32(out, rows * n), a = this.#f32(x, rows * n), b = this.#f32(bias, n);
    for (let r = 0; r < rows; r++) for (let i = 0; i < n; i++) o[r * n + i] = a[r * n + i] + b[i];
  }

  scale(out: number, x: number, s: number, n: number) {
    const o = this.#f32(out, n), a = this.#f32(x, n);
    for (let i = 0; i < n; i++) o[i] = a[i] * s;
  }

  add(out: number, a: number, b: number, n: number) {
    const o = this.#f32(out, n), x = this.#f32(a, n), y = this.#f32(b, n);
    for (let i = 0; i < n; i++) o[i] = x[i] + y[i];
  }

  getRows(
    type: number,
    out: number,
    table: number,
    ids: number,
    count: number,
    rowLength: number,
    rowCount: number,
  ) {
    const o = this.#f32(out, count * rowLength);
    const idv = new Int32Array(this.#native.view(ids, count * 4));
    for (let i = 0; i < count; i++) {
      if (idv[i] < 0 || idv[i] >= rowCount) throw new RangeError(`row ${idv[i]}`);
      o.set(this.#weightRow(type, table, idv[i], rowLength), i * rowLength);
    }
  }

  close() {}
}
