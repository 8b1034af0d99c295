import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parseGguf } from "../src/gguf/reader.ts";
import { f32ToBf16, f32ToF16, Kernels, quantizeQ8_0 } from "../src/kernels/mod.ts";
import { GgmlType } from "../src/gguf/mod.ts";
import { loadNative } from "../src/native/mod.ts";
import { assertBitIdentical, assertClose, randomF32, upload } from "./_kernels.ts";
import { testdata } from "./_testdata.ts";

const native = loadNative();
const THREADS = [1, 2, 3, 4, 5, 6, 7, 8];

/** Runs `run(kernels)` at every thread count, checks it with `check`, and bit-identity vs 1 thread. */
function acrossThreads(
  what: string,
  threads: number[],
  run: (k: Kernels) => Float32Array,
  check: (out: Float32Array) => void,
) {
  let first: Float32Array | undefined;
  for (const n of threads) {
    using kernels = new Kernels(native, n);
    const out = run(kernels);
    check(out);
    if (first === undefined) first = out;
    else assertBitIdentical(out, first, `${what} at ${n} threads vs 1`);
  }
}

function rmsnormReference(x: Float32Array, w: Float32Array, n: number): Float64Array {
  const out = new Float64Array(x.length);
  for (let t = 0; t < x.length / n; t++) {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += x[t * n + i] ** 2;
    const scale = 1 / Math.sqrt(sum / n + 1e-5);
    for (let i = 0; i < n; i++) out[t * n + i] = x[t * n + i] * scale * w[i];
  }
  return out;
}

/** A native i32 array of positions start, start + 1, ... */
function positions(start: number, count: number) {
  const b = native.alloc(count * 4);
  new Int32Array(b.buffer).set(Array.from({ length: count }, (_, i) => start + i));
  return b;
}

Deno.test("rmsnorm matches the reference (awkward sizes, in place, 1..8 threads)", () => {
  for (
    const [n, tokens, threads] of [[1, 1, [1, 8]], [33, 3, [1, 8]], [4103, 9, THREADS]] as const
  ) {
    const x = randomF32(n * tokens, n, 3);
    const w = randomF32(n, n + 1, 1);
    const want = rmsnormReference(x, w, n);
    using wb = upload(native, w);
    acrossThreads(`rmsnorm ${n}`, [...threads], (k) => {
      using xb = upload(native, x);
      k.rmsnorm(xb.address, xb.address, wb.address, n, tokens, 1e-5); // in place
      return xb.f32().slice(0, n * tokens);
    }, (out) => assertClose(out, want, want.map(Math.abs), 8 * 2 ** -23, `rmsnorm ${n}`));
  }
});

function ropeReference(
  x: Float32Array,
  tokens: number,
  heads: number,
  headDim: number,
  ropeDims: number,
  posStart: number,
  base: number,
  factors: Float32Array | null,
  neox: boolean,
): Float64Array {
  const out = Float64Array.from(x);
  const half = ropeDims / 2;
  for (let t = 0; t < tokens; t++) {
    for (let h = 0; h < heads; h++) {
      const o = (t * heads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const theta = (posStart + t) * base ** (-2 * i / ropeDims) / (factors ? factors[i] : 1);
        const a = o + (neox ? i : 2 * i);
        const b = o + (neox ? i + half : 2 * i + 1);
        out[a] = x[a] * Math.cos(theta) - x[b] * Math.sin(theta);
        out[b] = x[a] * Math.sin(theta) + x[b] * Math.cos(theta);
      }
    }
  }
  return out;
}

Deno.test("rope (normal and NeoX, partial dims, frequency factors) matches the reference", () => {
  const cases = [
    {
      tokens: 3,
      heads: 2,
      headDim: 8,
      ropeDims: 8,
      posStart: 5,
      neox: false,
      factors: false,
      threads: [1, 8],
    },
    {
      tokens: 4,
      heads: 3,
      headDim: 64,
      ropeDims: 32,
      posStart: 0,
      neox: true,
      factors: true,
      threads: [1, 8],
    },
    {
      tokens: 64,
      heads: 8,
      headDim: 64,
      ropeDims: 64,
      posStart: 100,
      neox: false,
      factors: true,
      threads: THREADS,
    },
    {
      tokens: 64,
      heads: 8,
      headDim: 128,
      ropeDims: 128,
      posStart: 7,
      neox: true,
      factors: false,
      threads: [1, 2, 5],
    },
  ];
  for (const c of cases) {
    const x = randomF32(c.tokens * c.heads * c.headDim, c.headDim + c.tokens, 2);
    const factors = c.factors
      ? randomF32(c.ropeDims / 2, 3, 1).map((v) => 1 + 4 * Math.abs(v))
      : null;
    const want = ropeReference(
      x,
      c.tokens,
      c.heads,
      c.headDim,
      c.ropeDims,
      c.posStart,
      10000,
      factors,
      c.neox,
    );
    using fb = upload(native, factors ?? new Float32Array(0));
    using pb = positions(c.posStart, c.tokens);
    acrossThreads(`rope ${JSON.stringify(c)}`, c.threads, (k) => {
      using xb = upload(native, x);
      k.rope(
        xb.address,
        c.tokens,
        c.heads,
        c.headDim,
        c.ropeDims,
        pb.address,
        10000,
        factors ? fb.address : 0,
        c.neox,
      );
      return xb.f32().slice(0, x.length);
    }, (out) => {
      // Angles use ggml's f32 running product: error grows with position (≈ pos · i · 2^-24).
      const budget = (c.posStart + c.tokens) * c.ropeDims * 2 ** -24 + 1e-6;
      assertClose(out, want, 4, budget, "rope");
    });
  }
});

Deno.test("swiglu and add match their definitions (1..8 threads)", () => {
  const n = 3 * 11008 + 5;
  const gate = randomF32(n, 1, 8);
  const up = randomF32(n, 2, 2);
  using gb = upload(native, gate);
  using ub = upload(native, up);
  const swiglu = Float64Array.from(gate, (g, i) => g / (1 + Math.exp(-g)) * up[i]);
  acrossThreads("swiglu", THREADS, (k) => {
    using out = native.alloc(n * 4);
    k.swiglu(out.address, gb.address, ub.address, n);
    return out.f32().slice(0, n);
  }, (out) => assertClose(out, swiglu, swiglu.map(Math.abs), 4 * 2 ** -23, "swiglu"));
  const big = 200_003;
  const a = randomF32(big, 3);
  const b = randomF32(big, 4);
  using bb = upload(native, b);
  acrossThreads("add", THREADS, (k) => {
    using ab = upload(native, a);
    k.add(ab.address, ab.address, bb.address, big); // out aliases a
    return ab.f32().slice(0, big);
  }, (out) => {
    for (let i = 0; i < big; i += 997) assert.equal(out[i], Math.fround(a[i] + b[i]));
  });
});

Deno.test("getRows converts real embeddings of every type; out-of-range ids throw", () => {
  const path = testdata("models/stories260K.gguf");
  const gguf = parseGguf(new Uint8Array(readFileSync(path)));
  const embd = gguf.tensorsByName.get("token_embd.weight")!;
  const [rowLength, rowCount] = embd.dims.map(Number);
  using mapped = native.mapFile(path);
  const table = new Float32Array(
    mapped.bytes.slice(embd.dataOffset, embd.dataOffset + embd.sizeBytes).buffer,
  );
  const ids = Int32Array.from([1, 511, 0, 259, 1]);
  using idb = upload(native, ids);
  using out = native.alloc(ids.length * rowLength * 4);
  using k = new Kernels(native, 1);
  const encodings: Array<[number, ArrayBufferView, number]> = [
    [GgmlType.F32, table, 0],
    [GgmlType.F16, f32ToF16(native, table), 2 ** -11],
    [GgmlType.BF16, f32ToBf16(native, table), 2 ** -8],
    [GgmlType.Q8_0, quantizeQ8_0(native, table), 1 / 127],
  ];
  for (const [type, data, tolerance] of encodings) {
    using tb = upload(native, data);
    k.getRows(type, out.address, tb.address, idb.address, ids.length, rowLength, rowCount);
    const got = out.f32();
    for (let i = 0; i < ids.length; i++) {
      const row = table.subarray(ids[i] * rowLength, (ids[i] + 1) * rowLength);
      const rowMax = Math.max(...row.map(Math.abs));
      assertClose(
        got.subarray(i * rowLength, (i + 1) * rowLength),
        row,
        type === GgmlType.Q8_0 ? rowMax : row.map(Math.abs),
        tolerance,
        `getRows ${type}`,
      );
    }
  }
  using bad = upload(native, Int32Array.from([3, 512]));
  assert.throws(
    () =>
      k.getRows(
        GgmlType.F32,
        out.address,
        mapped.address + embd.dataOffset,
        bad.address,
        2,
        rowLength,
        rowCount,
      ),
    /row id out of range/,
  );
});

Deno.test("storeKv writes F32 and F16 rows at each token's slot and position", () => {
  using k = new Kernels(native, 1);
  const kvDim = 24;
  const src = randomF32(3 * kvDim, 8, 5);
  using sb = upload(native, src);
  using pb = positions(4, 3);
  using slots = native.alloc(3 * 4);
  using c32 = native.alloc(10 * kvDim * 4);
  k.storeKv(GgmlType.F32, c32.address, sb.address, pb.address, slots.address, 3, kvDim, 10, 1);
  assert.deepEqual(c32.f32().subarray(4 * kvDim, 7 * kvDim), src);
  assert.equal(c32.f32()[4 * kvDim - 1], 0);
  assert.equal(c32.f32()[7 * kvDim], 0);
  using c16 = native.alloc(2 * 5 * kvDim * 2);
  // Slot 1 of two 5-row slots: positions 4, 5, 6 go to its rows 4, 0, 1.
  new Int32Array(slots.buffer).fill(1);
  k.storeKv(GgmlType.F16, c16.address, sb.address, pb.address, slots.address, 3, kvDim, 5, 2);
  const h = new Float16Array(c16.buffer);
  const f = Float16Array.from(src);
  assert.deepEqual(h.subarray(9 * kvDim, 10 * kvDim), f.subarray(0, kvDim));
  assert.deepEqual(h.subarray(5 * kvDim, 7 * kvDim), f.subarray(kvDim));
  assert.throws(
    () =>
      k.storeKv(GgmlType.Q4_K, c16.address, sb.address, pb.address, slots.address, 1, kvDim, 5, 2),
    /Unsupported/,
  );
  // A slot outside the cache is refused by the library before anything is written.
  assert.throws(
    () =>
      k.storeKv(GgmlType.F16, c16.address, sb.address, pb.address, slots.address, 3, kvDim, 5, 1),
    /out of range/,
  );
});

function attentionReference(
  q: Float32Array,
  kc: ArrayLike<number>,
  vc: ArrayLike<number>,
  tokens: number,
  posStart: number,
  heads: number,
  kvHeads: number,
  headDim: number,
  scale: number,
  f16 = false,
): Float64Array {
  // With an F16 cache, llama.cpp (and the kernel) round q and the probabilities to f16.
  const round = f16 ? Math.f16round : (x: number) => x;
  const out = new Float64Array(tokens * heads * headDim);
  const kvDim = kvHeads * headDim;
  for (let t = 0; t < tokens; t++) {
    for (let h = 0; h < heads; h++) {
      const g = Math.floor(h / (heads / kvHeads));
      const keys = posStart + t + 1;
      const scores = new Float64Array(keys);
      for (let p = 0; p < keys; p++) {
        let s = 0;
        for (let i = 0; i < headDim; i++) {
          s += round(q[(t * heads + h) * headDim + i]) * kc[p * kvDim + g * headDim + i];
        }
        scores[p] = s * scale;
      }
      const max = Math.max(...scores);
      let total = 0;
      for (let p = 0; p < keys; p++) total += scores[p] = Math.exp(scores[p] - max);
      for (let i = 0; i < headDim; i++) {
        let o = 0;
        for (let p = 0; p < keys; p++) {
          o += round(scores[p] / total) * vc[p * kvDim + g * headDim + i];
        }
        out[(t * heads + h) * headDim + i] = o;
      }
    }
  }
  return out;
}

Deno.test("attention (decode, prefill, GQA/MQA, F32/F16 cache) matches the reference, 1..8 threads", () => {
  const cases = [
    { tokens: 1, posStart: 0, heads: 4, kvHeads: 2, headDim: 16, threads: [1, 8] },
    { tokens: 1, posStart: 200, heads: 32, kvHeads: 8, headDim: 64, threads: THREADS },
    { tokens: 13, posStart: 70, heads: 8, kvHeads: 1, headDim: 40, threads: THREADS },
    { tokens: 9, posStart: 0, heads: 6, kvHeads: 6, headDim: 128, threads: [1, 3] },
  ];
  for (const c of cases) {
    const ctx = c.posStart + c.tokens;
    const kvDim = c.kvHeads * c.headDim;
    const q = randomF32(c.tokens * c.heads * c.headDim, c.headDim, 2);
    const kf = randomF32(ctx * kvDim, ctx, 2);
    const vf = randomF32(ctx * kvDim, ctx + 1, 2);
    using qb = upload(native, q);
    for (const type of [GgmlType.F32, GgmlType.F16]) {
      const kc = type === GgmlType.F32 ? kf : Float16Array.from(kf);
      const vc = type === GgmlType.F32 ? vf : Float16Array.from(vf);
      const scale = 1 / Math.sqrt(c.headDim);
      const want = attentionReference(
        q,
        kc,
        vc,
        c.tokens,
        c.posStart,
        c.heads,
        c.kvHeads,
        c.headDim,
        scale,
        type === GgmlType.F16,
      );
      using kb = upload(native, kc);
      using vb = upload(native, vc);
      using pb = positions(c.posStart, c.tokens);
      using slots = native.alloc(c.tokens * 4);
      acrossThreads(`attention ${JSON.stringify(c)} type ${type}`, c.threads, (k) => {
        using out = native.alloc(q.length * 4);
        k.attention(
          type,
          out.address,
          qb.address,
          kb.address,
          vb.address,
          c.tokens,
          pb.address,
          slots.address,
          c.heads,
          c.kvHeads,
          c.headDim,
          scale,
          ctx,
          0,
          1,
        );
        return out.f32().slice(0, q.length);
      }, (out) => assertClose(out, want, 1, 2e-5, "attention"));
    }
  }
  using k = new Kernels(native, 1);
  assert.throws(
    () => k.attention(0, 64, 64, 64, 64, 1, 64, 64, 6, 4, 64, 0.1, 8, 0, 1),
    /multiple of kvHeads/,
  );
  assert.throws(
    () => k.attention(0, 64, 64, 64, 64, 1, 64, 64, 4, 4, 1024, 0.1, 8, 0, 1),
    /headDim/,
  );
});
