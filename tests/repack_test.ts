/**
 * Load-time repacking (`src/model/repack.ts`, `ffi/repack.zig`): a Q4_0 model
 * (the quant ladder's SmolLM2 file) loaded with its matmul weights in the
 * interleaved layout gives bit-identical logits to the same file computed from
 * its own pages — a prompt batch (8-token GEMM tiles plus a remainder), then
 * decode steps of two sequences in one batch — at 1 and 2 threads; the kernels
 * refuse row lookups in that layout and matmuls over a partial row group.
 */
import assert from "node:assert/strict";
import { GgmlType } from "../src/gguf/types.ts";
import { Kernels } from "../src/kernels/mod.ts";
import { Batch, Context, Model } from "../src/model/mod.ts";
import { CpuFeature, loadNative } from "../src/native/mod.ts";
import { assertBitIdentical } from "./_kernels.ts";
import { ladderFile } from "./_quant_ladder.ts";

const native = loadNative();
const features = native.fn.dotllm_cpu_features();
/** The layout exists in AVX-512 builds on VNNI machines (Q4_0's 16-row kernel), only there. */
const hasLayout = (features & CpuFeature.builtAvx512) !== 0 &&
  (features & CpuFeature.avx512vnni) !== 0;

Deno.test("the table has a Q4_0 layout exactly on AVX-512 VNNI builds", () => {
  assert.equal(native.fn.dotllm_repack_type(GgmlType.Q4_0, 32, 64) > 0, hasLayout);
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

Deno.test("a repacked Q4_0 model gives the file's logits bit for bit at 1 and 2 threads", async () => {
  const path = await ladderFile("Q4_0");
  using plain = Model.load(path, { repack: false });
  using repacked = Model.load(path);
  assert.equal(plain.repackedBytes, 0);
  const layer = repacked.weights.layers[0];
  if (hasLayout) {
    // Every Q4_0 matmul of SmolLM2 has whole 16-row groups (576, 1536, 192 rows).
    const q4 = plain.weights.layers.flatMap((
      l,
    ) => [l.wq, l.wk, l.wv, l.wo, l.wGate, l.wUp, l.wDown])
      .filter((w) => w?.type === GgmlType.Q4_0);
    assert.ok(q4.length > 0);
    assert.equal(repacked.repackedBytes, q4.reduce((s, w) => s + w!.sizeBytes, 0));
    assert.notEqual(layer.wq!.type, GgmlType.Q4_0);
    assert.notEqual(layer.wq!.address, plain.weights.layers[0].wq!.address);
  } else {
    assert.equal(repacked.repackedBytes, 0, "no interleaved layout without AVX-512 VNNI");
  }
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

Deno.test("the interleaved layout refuses row lookups and partial row groups", async (t) => {
  if (!hasLayout) return; // nothing to refuse: no layout on this build (checked above)
  const id = native.fn.dotllm_repack_type(GgmlType.Q4_0, 32, 64);
  assert.ok(id > 0);
  assert.equal(native.fn.dotllm_repack_type(GgmlType.Q4_0, 24, 64), -1);
  using kernels = new Kernels(native, 1);
  using w = native.alloc(32 * 2 * 18);
  using x = native.alloc(64 * 4);
  using out = native.alloc(32 * 4);
  using ids = native.alloc(4);
  await t.step("matmul over 32 rows runs", () => {
    kernels.matmul(id, out.address, w.address, x.address, 32, 64, 1);
  });
  await t.step("matmul over 24 rows is refused", () => {
    assert.throws(() => kernels.matmul(id, out.address, w.address, x.address, 24, 64, 1));
  });
  await t.step("row lookup is refused", () => {
    assert.throws(() => kernels.getRows(id, out.address, w.address, ids.address, 1, 64, 32));
  });
});
