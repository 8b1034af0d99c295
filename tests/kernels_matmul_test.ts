import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parseGguf } from "../src/gguf/reader.ts";
import {
  bf16ToF32,
  dequantizeQ8_0,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
  Kernels,
  quantizeQ8_0,
} from "../src/kernels/mod.ts";
import { GgmlType } from "../src/gguf/mod.ts";
import { loadNative, type Native } from "../src/native/mod.ts";
import {
  assertBitIdentical,
  assertClose,
  matmulQ8_0Reference,
  matmulReference,
  quantizeQ8_0Reference,
  randomF32,
  splitQ8_0,
  upload,
} from "./_kernels.ts";
import { testdata } from "./_testdata.ts";

const F32_EPS = 2 ** -23;

/** The weights in `type`'s format and their exact f32 values. */
function encode(
  native: Native,
  type: number,
  w: Float32Array,
): { bytes: Uint8Array; exact: Float32Array } {
  switch (type) {
    case GgmlType.F32:
      return { bytes: new Uint8Array(w.buffer.slice(0)), exact: w };
    case GgmlType.F16: {
      const h = f32ToF16(native, w);
      return { bytes: new Uint8Array(h.buffer), exact: f16ToF32(native, h) };
    }
    case GgmlType.BF16: {
      const h = f32ToBf16(native, w);
      return { bytes: new Uint8Array(h.buffer), exact: bf16ToF32(native, h) };
    }
    default: {
      const q = quantizeQ8_0(native, w);
      return { bytes: q, exact: dequantizeQ8_0(native, q) };
    }
  }
}

function runMatmul(
  kernels: Kernels,
  type: number,
  weight: number,
  x: Float32Array,
  rows: number,
  cols: number,
  tokens: number,
): Float32Array {
  const native = loadNative();
  using xb = upload(native, x);
  using out = native.alloc(rows * tokens * 4);
  kernels.matmul(type, out.address, weight, xb.address, rows, cols, tokens);
  return out.f32().slice(0, rows * tokens);
}

function checkMatmul(type: number, rows: number, cols: number, tokens: number, threads: number[]) {
  const native = loadNative();
  const { bytes, exact } = encode(native, type, randomF32(rows * cols, rows * 31 + cols, 1));
  const x = randomF32(tokens * cols, cols * 7 + tokens, 2);
  const ref = type === GgmlType.Q8_0
    ? matmulQ8_0Reference(bytes, x, rows, cols, tokens)
    : matmulReference(exact, x, rows, cols, tokens);
  // f32 sums of `cols` products (Q8_0: of cols/32 exact block sums), in another order.
  const budget = (type === GgmlType.Q8_0 ? cols / 32 + 16 : cols + 16) * F32_EPS;
  using w = upload(native, bytes);
  let first: Float32Array | undefined;
  for (const n of threads) {
    using kernels = new Kernels(native, n);
    const out = runMatmul(kernels, type, w.address, x, rows, cols, tokens);
    const what = `matmul type ${type} ${rows}x${cols}x${tokens} threads ${n}`;
    assertClose(out, ref.out, ref.magnitude, budget, what);
    if (first === undefined) first = out;
    else assertBitIdentical(out, first, what + " vs 1 thread");
  }
}

const TYPES = [GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0];

Deno.test("matmul of every weight type matches a scalar TS reference on awkward shapes", () => {
  for (const type of TYPES) {
    const colsList = type === GgmlType.Q8_0
      ? [32, 32 * 31, 32 * 33, 4096 + 32 * 7]
      : [1, 31, 33, 4103];
    for (const cols of colsList) {
      checkMatmul(type, 7, cols, 1, [1, 3]); // GEMV, rows not a multiple of the row group
      checkMatmul(type, 9, cols, 6, [1, 2]); // GEMM, tokens not a multiple of the tile
    }
  }
});

Deno.test("matmul results are bit-identical for 1..8 threads (above the parallel threshold)", () => {
  for (const type of TYPES) {
    checkMatmul(type, 131, 1024, 1, [1, 2, 3, 4, 5, 6, 7, 8]);
    checkMatmul(type, 67, 512, 9, [1, 2, 3, 4, 5, 6, 7, 8]);
  }
});

Deno.test("Q8_0 quantization equals llama.cpp's algorithm, round trip within 0.57·d", () => {
  const native = loadNative();
  const x = randomF32(32 * 64, 5, 3);
  x[7] = 0; // a zero block start
  x.fill(0, 64, 96); // an all-zero block
  x[200] = 127 * 0.5 + 0.25; // ties appear after scaling
  const blocks = quantizeQ8_0(native, x);
  const got = splitQ8_0(blocks);
  const want = quantizeQ8_0Reference(x);
  assert.deepEqual(got.d, want.d);
  assert.deepEqual(got.q, want.q);
  const back = dequantizeQ8_0(native, blocks);
  for (let i = 0; i < x.length; i++) {
    // d/2 rounding plus 127 × the f16 rounding of d (2^-11 relative).
    assert.ok(Math.abs(back[i] - x[i]) <= got.d[Math.floor(i / 32)] * (0.5 + 127 * 2 ** -11));
  }
  assert.throws(() => quantizeQ8_0(native, new Float32Array(33)), RangeError);
});

Deno.test("f16 and bf16 conversions round to nearest even like Float16Array", () => {
  const native = loadNative();
  const x = randomF32(4096, 9, 70000);
  x[0] = 1 + 2 ** -11; // a tie in f16
  const h = f32ToF16(native, x);
  assert.deepEqual(new Uint16Array(Float16Array.from(x).buffer), h);
  const b = bf16ToF32(native, f32ToBf16(native, x));
  for (let i = 0; i < x.length; i++) {
    assert.ok(Math.abs(b[i] - x[i]) <= Math.abs(x[i]) * 2 ** -8);
  }
});

Deno.test("matmul on real weights: stories260K's ffn_gate (F32, and as F16/BF16/Q8_0)", () => {
  const native = loadNative();
  const path = testdata("models/stories260K.gguf");
  const gguf = parseGguf(new Uint8Array(readFileSync(path)));
  const gate = gguf.tensorsByName.get("blk.0.ffn_gate.weight")!;
  const embd = gguf.tensorsByName.get("token_embd.weight")!;
  const [cols, rows] = gate.dims.map(Number);
  using mapped = native.mapFile(path);
  const wF32 = new Float32Array(
    mapped.bytes.slice(gate.dataOffset, gate.dataOffset + gate.sizeBytes).buffer,
  );
  // x: the embeddings of 5 tokens.
  const tokens = 5;
  const x = new Float32Array(
    mapped.bytes.slice(
      embd.dataOffset + 100 * cols * 4,
      embd.dataOffset + (100 + tokens) * cols * 4,
    ).buffer,
  );
  using kernels = new Kernels(native, 2);
  // F32 straight from the mapping.
  const out = runMatmul(
    kernels,
    GgmlType.F32,
    mapped.address + gate.dataOffset,
    x,
    rows,
    cols,
    tokens,
  );
  const ref = matmulReference(wF32, x, rows, cols, tokens);
  assertClose(out, ref.out, ref.magnitude, (cols + 16) * F32_EPS, "stories260K ffn_gate F32");
  for (const type of [GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0]) {
    const { bytes, exact } = encode(native, type, wF32);
    using w = upload(native, bytes);
    const got = runMatmul(kernels, type, w.address, x, rows, cols, tokens);
    const want = type === GgmlType.Q8_0
      ? matmulQ8_0Reference(bytes, x, rows, cols, tokens)
      : matmulReference(exact, x, rows, cols, tokens);
    assertClose(
      got,
      want.out,
      want.magnitude,
      (cols + 16) * F32_EPS,
      `stories260K ffn_gate ${type}`,
    );
    // And close to the F32 result: quantization error only.
    const tolerance = type === GgmlType.F16 ? 2e-3 : 2e-2;
    assertClose(got, ref.out, ref.magnitude, tolerance, `stories260K ffn_gate ${type} vs F32`);
  }
});

Deno.test("matmul checks its arguments before calling native code", () => {
  const native = loadNative();
  using kernels = new Kernels(native, 1);
  using b = native.alloc(4096);
  assert.throws(
    () => kernels.matmul(GgmlType.Q8_0, b.address, b.address, b.address, 1, 33, 1),
    /cols % 32/,
  );
  assert.throws(
    () => kernels.matmul(1000, b.address, b.address, b.address, 1, 32, 1),
    /Unsupported/,
  );
  assert.throws(() => kernels.matmul(GgmlType.F32, 0, b.address, b.address, 1, 32, 1), /address/);
  assert.throws(
    () => kernels.matmul(GgmlType.F32, b.address, b.address, b.address, 0, 32, 1),
    /rows/,
  );
  assert.throws(
    () => kernels.matmul(GgmlType.F32, b.address, b.address, b.address, 1, 1.5, 1),
    /cols/,
  );
  kernels.close();
  assert.throws(
    () => kernels.matmul(GgmlType.F32, b.address, b.address, b.address, 1, 1, 1),
    /after close/,
  );
});
