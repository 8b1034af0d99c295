/**
 * Load-time repacking (`src/model/repack.ts`, `ffi/repack.zig`): Q4_0, IQ4_NL
 * and Q4_K_M models (the quant ladder's SmolLM2 files) and the real SmolLM2 Q4_1
 * file loaded with their Q4_0 / IQ4_NL / Q4_K / Q4_1 matmul weights in the
 * interleaved layouts give bit-identical logits to
 * the same files computed from their own pages — a prompt batch (8-token GEMM tiles plus a remainder), then
 * decode steps of two sequences in one batch — at 1 and 2 threads; the kernels
 * refuse row lookups in that layout and matmuls over a partial row group. So does
 * the ladder's F32 file with its float matrices, the tied LM head among them, in
 * the AVX2 builds' 4-row float layout, whose rows are still looked up, and the
 * ladder's Q4_K_M and Q6_K files with their Q6_K matrices recoded in byte planes
 * (AVX2 builds without AVX-512 VNNI), whose rows are looked up too.
 */
import assert from "node:assert/strict";
import { GgmlType } from "../src/gguf/types.ts";
import { computableType, Kernels } from "../src/kernels/mod.ts";
import { Batch, Context, Model } from "../src/model/mod.ts";
import { CpuFeature, loadNative } from "../src/native/mod.ts";
import { assertBitIdentical } from "./_kernels.ts";
import { ReferenceKernels } from "./_reference_kernels.ts";
import { ladderF32, ladderFile } from "./_quant_ladder.ts";
import { runDeno } from "./_cli.ts";
import { testdata } from "./_testdata.ts";

const native = loadNative();
const features = native.fn.dotllm_cpu_features();
/** The layouts exist in AVX-512 builds on VNNI machines (the 16-row kernels), only there... */
const hasLayout = (features & CpuFeature.builtAvx512) !== 0 &&
  (features & CpuFeature.avx512vnni) !== 0;
/** ...but Q4_0's, IQ4_NL's, Q4_K's and Q4_1's in every AVX2 build too (8-row groups, their 256-bit kernels). */
const hasQ4_0Layout = hasLayout || (features & CpuFeature.avx2) !== 0;
/** Rows of a Q4_0 (and Q4_K) group here. */
const q4_0Rows = hasLayout ? 16 : 8;
/** Q6_K's recoded layout (byte planes) exists where its kernel is the AVX2 one. */
const hasQ6Layout = (features & CpuFeature.avx2) !== 0 && !hasLayout;
const layoutFor = (type: number) => type === GgmlType.Q6_K ? hasQ6Layout : hasQ4_0Layout;
/** The float layouts (4-row groups) exist where the float tile has 8 lanes: AVX2 builds without AVX-512. */
const hasFloatLayout = (features & CpuFeature.avx2) !== 0 &&
  (features & CpuFeature.builtAvx512) === 0;

Deno.test("the table has Q4_0, IQ4_NL, Q4_K and Q4_1 layouts on AVX-512 VNNI and AVX2 builds, Q6_K's on AVX2 only", () => {
  assert.equal(native.fn.dotllm_repack_type(GgmlType.Q4_0, 32, 64) > 0, hasQ4_0Layout);
  // A partial Q4_0 group (8-row groups on AVX2, 16-row ones on AVX-512 VNNI).
  assert.equal(
    native.fn.dotllm_repack_type(GgmlType.Q4_0, 24, 64) > 0,
    hasQ4_0Layout && q4_0Rows === 8,
  );
  assert.equal(native.fn.dotllm_repack_type(GgmlType.Q4_0, 20, 64), -1);
  assert.equal(native.fn.dotllm_repack_type(GgmlType.Q4_1, 32, 64) > 0, hasQ4_0Layout);
  assert.equal(native.fn.dotllm_repack_type(GgmlType.Q4_1, 34, 64), -1); // 4-row groups
  assert.equal(native.fn.dotllm_repack_type(GgmlType.IQ4_NL, 32, 64) > 0, hasQ4_0Layout);
  assert.equal(
    native.fn.dotllm_repack_type(GgmlType.IQ4_NL, 24, 64) > 0,
    hasQ4_0Layout && q4_0Rows === 8,
  );
  assert.equal(native.fn.dotllm_repack_type(GgmlType.Q4_K, 32, 256) > 0, hasQ4_0Layout);
  assert.equal(
    native.fn.dotllm_repack_type(GgmlType.Q4_K, 24, 256) > 0,
    hasQ4_0Layout && q4_0Rows === 8,
  );
  for (const type of [GgmlType.F32, GgmlType.F16, GgmlType.BF16]) {
    assert.equal(native.fn.dotllm_repack_type(type, 32, 64) > 0, hasFloatLayout);
    assert.equal(native.fn.dotllm_repack_type(type, 30, 64), -1); // 4-row groups
    assert.equal(native.fn.dotllm_repack_type(type, 32, 60), -1); // 8-column chunks
  }
  // Q6_K's planes keep rows whole: any row count, whole blocks of columns.
  assert.equal(native.fn.dotllm_repack_type(GgmlType.Q6_K, 13, 512) > 0, hasQ6Layout);
  assert.equal(native.fn.dotllm_repack_type(GgmlType.Q6_K, 13, 320), -1);
  // Not for other types, nor for a partial row group.
  assert.equal(native.fn.dotllm_repack_type(GgmlType.Q5_K, 32, 256), -1);
  assert.equal(native.fn.dotllm_repack_type(GgmlType.Q4_K, 36, 256), -1);
});

/** Logits of a 13-token prompt on slot 0 and a 5-token one on slot 1, then 4 joint greedy steps. */
function run(model: Model, threads: number): Float32Array[] {
  using context = new Context(model, { threads, contextSize: 64, slots: 2, maxLogits: 2 });
  const batch = new Batch(context.batchSize);
  const prompts = [
    [1, 504, 3458, 282, 4028, 30, 2114, 314, 260, 1789, 28, 940, 30],
    [1, 9049, 6355, 2267, 17],
  ];
  prompts.forEach((p, slot) => p.forEach((id, i) => batch.add(id, i, slot, i === p.length - 1)));
  context.decode(batch);
  const out: Float32Array[] = [];
  const positions = prompts.map((p) => p.length);
  for (let step = 0; step < 4; step++) {
    batch.clear();
    for (let slot = 0; slot < 2; slot++) {
      const logits = context.logits(slot).slice();
      out.push(logits);
      let best = 0;
      for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
      batch.add(best, positions[slot]++, slot, true);
    }
    context.decode(batch);
  }
  return out;
}

/**
 * Files with interleaved layouts (the ladder's, or `file`), and the source types
 * whose matrices may take one; which of them do on this host is what the library
 * reports (`dotllm_repack_type`), not a guess from CPU features: Q6_K has a
 * layout on AVX2 builds only, the Q4 types on AVX2 and AVX-512 VNNI builds.
 */
const CASES: { type: string; layouts: number[]; file?: string }[] = [
  { type: "Q4_0", layouts: [GgmlType.Q4_0] },
  { type: "IQ4_NL", layouts: [GgmlType.IQ4_NL] },
  // Q4_K_M mixes Q4_K (interleaved) with Q6_K (recoded on AVX2) matrices.
  { type: "Q4_K_M", layouts: [GgmlType.Q4_K, GgmlType.Q6_K] },
  // Q6_K matrices (1536 columns; SmolLM2's 576-column ones fall back to other types).
  { type: "Q6_K", layouts: [GgmlType.Q6_K] },
  // The real file: Q4_1 matmuls (4-row groups), a Q8_0 embedding.
  {
    type: "Q4_1",
    layouts: [GgmlType.Q4_1],
    file: testdata("models/SmolLM2-135M-Instruct.Q4_1.gguf"),
  },
];

/** The layout the library gives this matrix on this host, or undefined (it stays as it is). */
function layoutHere(w: { type: number; rowCount: number; rowLength: number }): number | undefined {
  const id = native.fn.dotllm_repack_type(w.type, w.rowCount, w.rowLength);
  return id > 0 ? id : undefined;
}

for (const c of CASES) {
  Deno.test(`a repacked ${c.type} model gives the file's logits bit for bit at 1 and 2 threads`, async () => {
    const path = c.file ?? await ladderFile(c.type);
    using plain = Model.load(path, { repack: false });
    using repacked = Model.load(path);
    assert.equal(plain.repackedBytes, 0);
    const matmuls = (m: Model) =>
      m.weights.layers.flatMap((l) => [l.wq, l.wk, l.wv, l.wo, l.wGate, l.wUp, l.wDown])
        .filter((w) => w !== undefined);
    const before = matmuls(plain);
    const after = matmuls(repacked);
    assert.equal(after.length, before.length);
    // The file has matrices of the case's types, and only those take a layout.
    assert.ok(before.some((w) => c.layouts.includes(w.type)));
    const moved = before.filter((w) => layoutHere(w) !== undefined);
    assert.ok(moved.every((w) => c.layouts.includes(w.type)), "a layout of another type");
    // Each matrix is in the layout the library reports for it here, or as it was.
    before.forEach((w, i) => {
      assert.equal(after[i].type, layoutHere(w) ?? w.type, w.name);
      assert.equal(after[i].sizeBytes, w.sizeBytes, w.name);
    });
    assert.equal(repacked.repackedBytes, moved.reduce((s, w) => s + w.sizeBytes, 0));
    // The layouts this host is expected to have (see the table test above) are the ones used.
    for (const type of c.layouts) {
      const sources = before.filter((w) => w.type === type);
      if (sources.length > 0 && layoutFor(type)) {
        assert.ok(sources.every((w) => layoutHere(w) !== undefined), `every ${c.type} matrix`);
      }
    }
    // The other matmuls and the tied embedding are copied as they are (huge-page memory).
    assert.equal(plain.copiedBytes, 0);
    const copied = before.filter((w) => layoutHere(w) === undefined);
    assert.equal(
      repacked.copiedBytes,
      copied.reduce((s, w) => s + w.sizeBytes, plain.weights.tokenEmbedding.sizeBytes),
    );
    assert.notEqual(repacked.weights.tokenEmbedding.address, plain.weights.tokenEmbedding.address);
    // The embedding (and the tied LM head, the same tensor) is looked up by row: never repacked.
    assert.equal(repacked.weights.tokenEmbedding.type, plain.weights.tokenEmbedding.type);
    assert.ok(repacked.weights.tiedOutput);
    assert.equal(repacked.weights.output, repacked.weights.tokenEmbedding);
    for (const threads of [1, 2]) {
      const want = run(plain, threads);
      const got = run(repacked, threads);
      assert.equal(got.length, want.length);
      got.forEach((g, i) => assertBitIdentical(g, want[i], `threads ${threads}, logits ${i}`));
    }
  });
}

Deno.test("a repacked F32 model, its tied LM head too, gives the file's logits bit for bit at 1 and 2 threads", async () => {
  // The quant ladder's F32 file: the real SmolLM2 dequantized, its LM head tied.
  const path = await ladderF32();
  using plain = Model.load(path, { repack: false });
  using repacked = Model.load(path);
  const w = plain.weights;
  assert.ok(w.tiedOutput);
  const matrices = [
    ...w.layers.flatMap((l) => [l.wq, l.wk, l.wv, l.wo, l.wGate, l.wUp, l.wDown]),
    w.tokenEmbedding,
  ].filter((m) => m !== undefined);
  assert.ok(matrices.every((m) => m.type === GgmlType.F32));
  const total = matrices.reduce((s, m) => s + m.sizeBytes, 0);
  const layout = native.fn.dotllm_repack_type(GgmlType.F32, 576, 576);
  if (hasFloatLayout) {
    assert.ok(layout > 0);
    assert.equal(computableType(native, layout)?.rowLookup, true);
    assert.equal(repacked.repackedBytes, total);
    assert.equal(repacked.copiedBytes, 0);
    // The tied head is in the layout and still serves as the embedding (looked up by row).
    assert.equal(repacked.weights.tokenEmbedding.type, layout);
    assert.equal(repacked.weights.output, repacked.weights.tokenEmbedding);
    // Kernels other than the library's read the file's layouts: refused, with a reason.
    assert.throws(
      () => new Context(repacked, { contextSize: 16, kernels: new ReferenceKernels(native) }),
      /interleaved layouts/,
    );
  } else {
    assert.equal(layout, -1);
    assert.equal(repacked.repackedBytes, 0);
    assert.equal(repacked.copiedBytes, total);
  }
  for (const threads of [1, 2]) {
    const want = run(plain, threads);
    const got = run(repacked, threads);
    assert.equal(got.length, want.length);
    got.forEach((g, i) => assertBitIdentical(g, want[i], `threads ${threads}, logits ${i}`));
  }
});

Deno.test("a float layout looks rows up, and refuses a table of a partial row group", () => {
  if (!hasFloatLayout) return; // no float layout on this build (checked above)
  const rows = 8, cols = 16;
  const id = native.fn.dotllm_repack_type(GgmlType.F32, rows, cols);
  using kernels = new Kernels(native, 1);
  using src = native.alloc(rows * cols * 4);
  using grouped = native.alloc(rows * cols * 4);
  src.f32().set(Float32Array.from({ length: rows * cols }, (_, i) => i));
  assert.equal(
    native.fn.dotllm_repack(GgmlType.F32, rows, cols, src.address, grouped.address),
    id,
  );
  using ids = native.alloc(8);
  new Int32Array(ids.buffer, 0, 2).set([5, 2]);
  using out = native.alloc(2 * cols * 4);
  kernels.getRows(id, out.address, grouped.address, ids.address, 2, cols, rows);
  assert.deepEqual(
    [...out.f32()],
    [...src.f32().subarray(5 * cols, 6 * cols), ...src.f32().subarray(2 * cols, 3 * cols)],
  );
  assert.throws(() => kernels.getRows(id, out.address, grouped.address, ids.address, 2, cols, 6));
});

Deno.test("a recoded Q6_K matrix looks its rows up as the file's rows", () => {
  if (!hasQ6Layout) return; // no Q6_K layout on this build (checked above)
  // 5 rows of 2 Q6_K blocks, random bytes (every level and scale), d = 2^-10.
  const rows = 5, cols = 512, rowBytes = 2 * 210;
  const id = native.fn.dotllm_repack_type(GgmlType.Q6_K, rows, cols);
  assert.ok(id > 0);
  assert.equal(computableType(native, id)?.rowLookup, true);
  using kernels = new Kernels(native, 1);
  using src = native.alloc(rows * rowBytes);
  using planes = native.alloc(rows * rowBytes);
  const bytes = src.bytes();
  let seed = 7;
  for (let i = 0; i < bytes.length; i++) {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    bytes[i] = seed >>> 24;
  }
  for (let b = 0; b < 2 * rows; b++) {
    new DataView(bytes.buffer, bytes.byteOffset).setUint16(b * 210 + 208, 0x1400, true);
  }
  assert.equal(native.fn.dotllm_repack(GgmlType.Q6_K, rows, cols, src.address, planes.address), id);
  using ids = native.alloc(12);
  new Int32Array(ids.buffer, 0, 3).set([4, 0, 2]);
  using want = native.alloc(3 * cols * 4);
  using got = native.alloc(3 * cols * 4);
  kernels.getRows(GgmlType.Q6_K, want.address, src.address, ids.address, 3, cols, rows);
  kernels.getRows(id, got.address, planes.address, ids.address, 3, cols, rows);
  assert.ok(want.f32().some((v) => v !== 0));
  assertBitIdentical(got.f32(), want.f32(), "rows 4, 0, 2");
});

Deno.test("the interleaved layout refuses row lookups and partial row groups", async (t) => {
  if (!hasQ4_0Layout) return; // nothing to refuse: no layout on this build (checked above)
  const id = native.fn.dotllm_repack_type(GgmlType.Q4_0, 32, 64);
  assert.ok(id > 0);
  using kernels = new Kernels(native, 1);
  using w = native.alloc(32 * 2 * 18);
  using x = native.alloc(64 * 4);
  using out = native.alloc(32 * 4);
  using ids = native.alloc(4);
  await t.step("matmul over 32 rows runs", () => {
    kernels.matmul(id, out.address, w.address, x.address, 32, 64, 1);
  });
  await t.step("matmul over 20 rows (a partial group) is refused", () => {
    assert.throws(() => kernels.matmul(id, out.address, w.address, x.address, 20, 64, 1));
  });
  await t.step("row lookup is refused", () => {
    assert.throws(() => kernels.getRows(id, out.address, w.address, ids.address, 1, 64, 32));
  });
});

Deno.test("dotllm run --no-repack prints the same greedy text as the repacked default", async () => {
  const path = await ladderFile("Q4_0");
  const args = ["run", path, "-p", "The capital of France is", "-n", "12", "--temp", "0", "-q"];
  const repacked = await runDeno(args);
  const plain = await runDeno([...args, "--no-repack"]);
  assert.equal(repacked.code, 0, repacked.stderr);
  assert.equal(plain.code, 0, plain.stderr);
  assert.ok(repacked.stdout.length > 0);
  assert.equal(plain.stdout, repacked.stdout);
});
