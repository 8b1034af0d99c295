import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testdata } from "./_testdata.ts";
import { openGguf } from "../src/gguf/file.ts";
import { type GgufArray, GgufValueType, parseGguf } from "../src/gguf/reader.ts";
import { GgmlType } from "../src/gguf/types.ts";
import {
  convertF32ToF16,
  encodeGguf,
  f16ToF32,
  f32ToF16,
  type GgufWriteHeader,
  GgufWriter,
  meta,
} from "../src/gguf/writer.ts";
import {
  dequantizeQ8_0 as dequantizeQ8_0Native,
  quantizeQ8_0 as quantizeQ8_0Native,
} from "../src/kernels/mod.ts";
import { loadNative } from "../src/native/mod.ts";

// The writer quantizes through the library (the project's one Q8_0 quantizer):
// these tests check it on hand-computed blocks, as the writer writes it.
const native = loadNative();
function quantizeQ8_0(x: Float32Array, out: Uint8Array): void {
  out.set(quantizeQ8_0Native(native, x));
}
function dequantizeQ8_0(q: Uint8Array, out: Float32Array): void {
  out.set(dequantizeQ8_0Native(native, q));
}

const T = GgufValueType;

Deno.test("Q8_0 (the library's) equals llama.cpp's quantize_row_q8_0_ref on a hand-computed block", () => {
  // max|x| = 31.75 → d = 31.75/127 = 0.25 (f16 0x3400), id = 4; q = roundf(4x), halves away from 0.
  const x = new Float32Array(64);
  x.set([0.625, -0.625, 0.375, -0.125, 0.125, 1.875, -31.75, 0.1, 0.2, 31.7, -0.375, 2.5]);
  //     2.5→3  -2.5→-3 1.5→2  -0.5→-1 0.5→1  7.5→8  -127   0.4→0 0.8→1 126.8→127 -1.5→-2 10
  const want = [3, -3, 2, -1, 1, 8, -127, 0, 1, 127, -2, 10];
  const out = new Uint8Array(68);
  quantizeQ8_0(x, out);
  assert.deepEqual([out[0], out[1]], [0x00, 0x34]);
  assert.deepEqual([...new Int8Array(out.buffer, 2, 32)], [...want, ...new Array(20).fill(0)]);
  // An all-zero block: d = 0, id = 0, every q 0.
  assert.deepEqual([...out.subarray(34)], new Array(34).fill(0));
  // Math.round would give -2 for -2.5 and -0 for -0.5: the rule is not JS rounding.
  assert.notEqual(Math.round(-2.5), -3);
});

Deno.test("Q8_0: d is max|x|/127 rounded to f16, values within d/2 of the input", () => {
  const x = new Float32Array(32 * 100);
  let s = 12345;
  for (let i = 0; i < x.length; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    x[i] = (s / 2 ** 32 - 0.5) * (1 + (i >> 5));
  }
  const q = new Uint8Array(34 * 100);
  quantizeQ8_0(x, q);
  const back = new Float32Array(x.length);
  dequantizeQ8_0(q, back);
  for (let b = 0; b < 100; b++) {
    const block = x.subarray(b * 32, b * 32 + 32);
    const amax = Math.max(...block.map(Math.abs));
    const d = f16ToF32(q[b * 34] | (q[b * 34 + 1] << 8));
    assert.equal(d, f16ToF32(f32ToF16(Math.fround(amax / 127))));
    // q was computed with the f32 d; the stored f16 d differs from it by < 2^-11 relative.
    const d32 = Math.fround(amax / 127);
    const bound = d32 * 0.5 + 127 * Math.abs(d - d32) + 1e-7;
    for (let j = 0; j < 32; j++) assert.ok(Math.abs(back[b * 32 + j] - block[j]) <= bound);
  }
});

Deno.test("f32 → f16 rounds to nearest even (hand cases, and Math.f16round on random bits)", () => {
  const cases: [number, number][] = [
    [0, 0x0000],
    [-0, 0x8000],
    [1, 0x3c00],
    [-2, 0xc000],
    [65504, 0x7bff],
    [65519, 0x7bff],
    [65520, 0x7c00], // halfway to 2^16: ties to even = infinity
    [Infinity, 0x7c00],
    [-Infinity, 0xfc00],
    [1 + 2 ** -11, 0x3c00], // halfway between 0x3c00 and 0x3c01 → even
    [1 + 3 * 2 ** -11, 0x3c02], // halfway between 0x3c01 and 0x3c02 → even
    [1 + 2 ** -11 + 2 ** -20, 0x3c01], // just above halfway
    [2 ** -14, 0x0400], // smallest normal
    [2 ** -24, 0x0001], // smallest subnormal
    [2 ** -25, 0x0000], // halfway to it → even (0)
    [1.5 * 2 ** -25, 0x0001],
    [3 * 2 ** -25, 0x0002], // 1.5 subnormal steps → even (2)
    [0.1, 0x2e66],
  ];
  for (const [x, h] of cases) assert.equal(f32ToF16(x), h, `f32ToF16(${x})`);
  assert.equal(f32ToF16(NaN) & 0x7c00, 0x7c00);
  assert.notEqual(f32ToF16(NaN) & 0x3ff, 0);

  const f16round = (Math as unknown as { f16round?: (x: number) => number }).f16round;
  assert.equal(typeof f16round, "function", "Deno 2.9 has Math.f16round");
  const bits = new Uint32Array(200_000);
  let s = 0x9e3779b9;
  for (let i = 0; i < bits.length; i++) {
    s ^= s << 13, s ^= s >>> 17, s ^= s << 5;
    bits[i] = s >>> 0;
  }
  const f = new Float32Array(bits.buffer);
  const h = new Uint16Array(f.length);
  convertF32ToF16(f, h);
  for (let i = 0; i < f.length; i++) {
    if (Number.isNaN(f[i])) continue;
    const want = f16round!(f[i]);
    assert.ok(Object.is(f16ToF32(h[i]), want), `${f[i]} → ${f16ToF32(h[i])}, want ${want}`);
  }
});

function sampleHeader(): GgufWriteHeader {
  const vocab = parseGguf(readFileSync(testdata("vocab-converted/ggml-vocab-smollm.gguf")));
  return {
    alignment: 64,
    metadata: [
      ["general.architecture", meta.string("llama")],
      ["t.u8", meta.u8(255)],
      ["t.i8", meta.i8(-128)],
      ["t.u16", meta.u16(65535)],
      ["t.i16", meta.i16(-32768)],
      ["t.u32", meta.u32(4294967295)],
      ["t.i32", meta.i32(-2147483648)],
      ["t.f32", meta.f32(1e-5)],
      ["t.bool", meta.bool(true)],
      ["t.string", meta.string("héllo ▁wörld 🦙")],
      ["t.u64", meta.u64(2n ** 64n - 1n)],
      ["t.i64", meta.i64(-(2n ** 63n))],
      ["t.f64", meta.f64(Math.PI)],
      ["t.empty", meta.array(T.INT32, [])],
      ["t.arr_u8", meta.array(T.UINT8, [0, 1, 255])],
      ["t.arr_i16", meta.array(T.INT16, [-1, 2])],
      ["t.arr_f32", meta.array(T.FLOAT32, [0.5, -1.25])],
      ["t.arr_f64", meta.array(T.FLOAT64, [1e300])],
      ["t.arr_u64", meta.array(T.UINT64, [1n, 2n ** 60n])],
      ["t.arr_i64", meta.array(T.INT64, [-5n])],
      ["t.arr_bool", meta.array(T.BOOL, [true, false, true])],
      ["t.arr_str", meta.array(T.STRING, ["a", "", "ü ▁ 🦙"])],
      [
        "t.nested",
        meta.array(T.ARRAY, [
          { elementType: T.UINT32, values: [1, 2, 3] },
          { elementType: T.STRING, values: ["x", "yz"] },
          { elementType: T.ARRAY, values: [{ elementType: T.INT8, values: [-1] }] },
        ]),
      ],
      ["tokenizer.ggml.merges", vocab.metadata.get("tokenizer.ggml.merges") as GgufArray],
    ],
    tensors: [
      { name: "a.f32", dims: [3, 2], type: GgmlType.F32 },
      { name: "b.f16", dims: [5], type: GgmlType.F16 },
      { name: "c.q8_0", dims: [64, 3], type: GgmlType.Q8_0 },
      { name: "d.raw_i8", dims: [7], type: 24 },
    ],
  };
}

function sampleData(): [Float32Array, Float32Array, Float32Array, Uint8Array] {
  const c = new Float32Array(192);
  for (let i = 0; i < c.length; i++) c[i] = Math.sin(i) * (i % 7);
  return [
    new Float32Array([1, 2, 3, 4, 5, 6]),
    new Float32Array([0.5, -1, 65504, 1e-8, 0.1]),
    c,
    new Uint8Array([1, 2, 3, 4, 5, 6, 7]),
  ];
}

Deno.test("writer round trip: every metadata type, nested arrays, copied arrays, tensors, alignment", () => {
  const header = sampleHeader();
  const data = sampleData();
  const bytes = encodeGguf(header, data);
  const g = parseGguf(bytes);
  assert.equal(g.version, 3);
  assert.equal(g.alignment, 64);
  const m = g.metadata;
  assert.equal(m.get("t.u8"), 255);
  assert.equal(m.get("t.i8"), -128);
  assert.equal(m.get("t.u16"), 65535);
  assert.equal(m.get("t.i16"), -32768);
  assert.equal(m.get("t.u32"), 4294967295);
  assert.equal(m.get("t.i32"), -2147483648);
  assert.equal(m.get("t.f32"), Math.fround(1e-5));
  assert.equal(m.get("t.bool"), true);
  assert.equal(m.get("t.string"), "héllo ▁wörld 🦙");
  assert.equal(m.get("t.u64"), 2n ** 64n - 1n);
  assert.equal(m.get("t.i64"), -(2n ** 63n));
  assert.equal(m.get("t.f64"), Math.PI);
  assert.equal(m.get("general.alignment"), 64);
  const types = Object.fromEntries(g.metadataTypes);
  assert.equal(types["t.u64"], T.UINT64);
  assert.equal(types["t.nested"], T.ARRAY);
  const arr = (k: string) => m.get(k) as GgufArray;
  assert.deepEqual([arr("t.empty").type, arr("t.empty").length], [T.INT32, 0]);
  assert.deepEqual(Array.from(arr("t.arr_u8").values), [0, 1, 255]);
  assert.deepEqual(Array.from(arr("t.arr_i16").values), [-1, 2]);
  assert.deepEqual(Array.from(arr("t.arr_f32").values), [0.5, -1.25]);
  assert.deepEqual(Array.from(arr("t.arr_f64").values), [1e300]);
  assert.deepEqual(Array.from(arr("t.arr_u64").values), [1n, 2n ** 60n]);
  assert.deepEqual(Array.from(arr("t.arr_i64").values), [-5n]);
  assert.deepEqual(arr("t.arr_bool").values, [true, false, true]);
  assert.deepEqual(arr("t.arr_str").strings(), ["a", "", "ü ▁ 🦙"]);
  const nested = arr("t.nested").values as GgufArray[];
  assert.equal(nested.length, 3);
  assert.deepEqual(Array.from(nested[0].values), [1, 2, 3]);
  assert.deepEqual(nested[1].strings(), ["x", "yz"]);
  assert.deepEqual(Array.from((nested[2].values[0] as GgufArray).values), [-1]);
  const merges = arr("tokenizer.ggml.merges");
  assert.equal(merges.length, 48900);
  const vocab = parseGguf(readFileSync(testdata("vocab-converted/ggml-vocab-smollm.gguf")));
  assert.deepEqual(
    merges.strings(),
    (vocab.metadata.get("tokenizer.ggml.merges") as GgufArray).strings(),
  );

  // Tensors: aligned, in order, data as written (F16 rounded, Q8_0 quantized).
  assert.deepEqual(g.tensors.map((t) => [t.name, t.type.name, t.dims]), [
    ["a.f32", "F32", [3, 2]],
    ["b.f16", "F16", [5]],
    ["c.q8_0", "Q8_0", [64, 3]],
    ["d.raw_i8", "I8", [7]],
  ]);
  for (const t of g.tensors) assert.equal(t.dataOffset % 64, 0, t.name);
  assert.equal(g.dataStart % 64, 0);
  const at = (name: string) => {
    const t = g.tensorsByName.get(name)!;
    return bytes.slice(t.dataOffset, t.dataOffset + t.sizeBytes);
  };
  assert.deepEqual([...new Float32Array(at("a.f32").buffer)], [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(
    [...new Uint16Array(at("b.f16").buffer)].map(f16ToF32),
    [0.5, -1, 65504, f16ToF32(f32ToF16(1e-8)), f16ToF32(0x2e66)],
  );
  const q = new Uint8Array(6 * 34);
  quantizeQ8_0(data[2], q);
  assert.deepEqual(at("c.q8_0"), q);
  assert.deepEqual([...at("d.raw_i8")], [1, 2, 3, 4, 5, 6, 7]);
  assert.equal(g.fileSize, g.tensorsByName.get("d.raw_i8")!.dataOffset + 7);
});

Deno.test("the streaming writer writes the same bytes as encodeGguf, in chunks", () => {
  const dir = mkdtempSync(join(tmpdir(), "dotllm-writer-"));
  try {
    const path = join(dir, "x.gguf");
    const header = sampleHeader();
    const [a, b, c, d] = sampleData();
    const w = GgufWriter.create(path, header);
    assert.equal(w.currentTensor, "a.f32");
    w.writeF32(a.subarray(0, 2));
    w.writeF32(a.subarray(2));
    assert.equal(w.currentTensor, "b.f16");
    w.writeF32(b);
    w.writeF32(c.subarray(0, 64));
    w.writeF32(c.subarray(64));
    assert.throws(() => w.writeF32(new Float32Array(1)), /cannot convert f32 to I8/);
    assert.throws(() => w.writeBytes(new Uint8Array(8)), /8 bytes written, it has 7/);
    w.writeBytes(d);
    assert.equal(w.currentTensor, undefined);
    w.close();
    assert.deepEqual(new Uint8Array(readFileSync(path)), encodeGguf(header, [a, b, c, d]));
    using file = openGguf(path);
    assert.equal(file.gguf.tensors.length, 4);

    const partial = GgufWriter.create(path, header);
    partial.writeF32(a);
    assert.throws(() => partial.close(), /tensor "b\.f16" has 0 of 10 bytes/);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

Deno.test("the writer refuses bad values and shapes with clear errors", () => {
  const tensors: GgufWriteHeader["tensors"] = [];
  const one = (value: ReturnType<typeof meta.u8>) => () =>
    encodeGguf({ metadata: [["k", value]], tensors }, []);
  assert.throws(one(meta.u8(256)), /"k": "256" is not a valid u8/);
  assert.throws(one(meta.i32(1.5)), /is not a valid i32/);
  assert.throws(one(meta.u64(-1)), /is not a valid u64/);
  assert.throws(
    one(meta.array(T.STRING, [1 as unknown as string])),
    /"k"\[0\]: "1" is not a string/,
  );
  assert.throws(
    () =>
      encodeGguf({ metadata: [], tensors: [{ name: "w", dims: [33], type: GgmlType.Q8_0 }] }, [
        new Float32Array(33),
      ]),
    /row of 33 is not a multiple of Q8_0's block of 32/,
  );
  assert.throws(
    () =>
      encodeGguf({
        metadata: [],
        tensors: [{ name: "w", dims: [1], type: 0 }, { name: "w", dims: [1], type: 0 }],
      }, []),
    /duplicate tensor name "w"/,
  );
});
