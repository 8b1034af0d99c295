import assert from "node:assert/strict";
import { GgmlType } from "../src/gguf/types.ts";
import { LlamaModel, type ModelKernels, type ModelOptions } from "../src/model/mod.ts";
import { ReferenceKernels } from "../src/model/reference_kernels.ts";
import { loadNative } from "../src/native/mod.ts";
import { syntheticModel } from "./_synthetic.ts";

const native = loadNative();
const PROMPT = [1, 5, 9, 77, 3, 100, 42, 8, 19];

/** Logits after the prompt (batched), then after 3 decoded tokens. */
function logitsOf(
  options: Parameters<typeof syntheticModel>[1],
  kernels: ModelKernels,
  modelOptions: ModelOptions = {},
): Float32Array[] {
  const s = syntheticModel(native, options);
  try {
    using model = new LlamaModel(native, s.gguf, s.base, undefined, { kernels, ...modelOptions });
    const out = [model.forward(PROMPT, 0).slice()];
    for (let i = 0; i < 3; i++) out.push(model.forward([i + 10], PROMPT.length + i).slice());
    return out;
  } finally {
    s.memory.free();
  }
}

function maxDiff(a: Float32Array[], b: Float32Array[]): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    for (let j = 0; j < a[i].length; j++) m = Math.max(m, Math.abs(a[i][j] - b[i][j]));
  }
  return m;
}

const ref = new ReferenceKernels(native);

Deno.test("synthetic model: every weight type computes the function its values define", () => {
  for (const type of [GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0]) {
    const quantized = logitsOf({ type }, ref);
    const asF32 = logitsOf({ type, dequantized: true }, ref);
    assert.ok(maxDiff(quantized, asF32) < 1e-5, `type ${type}: ${maxDiff(quantized, asF32)}`);
    assert.ok(quantized[0].some((x) => Math.abs(x) > 0.1), "logits are not trivially zero");
  }
});

Deno.test("synthetic model: tied output, rope_freqs, batch size and cache type", () => {
  const tied = syntheticModel(native, { type: GgmlType.Q8_0, tied: true });
  using model = new LlamaModel(native, tied.gguf, tied.base, undefined, { kernels: ref });
  assert.equal(model.weights.tiedOutput, true);
  assert.equal(model.weights.output, model.weights.tokenEmbedding);
  assert.equal(model.weights.typeName, "Q8_0");
  tied.memory.free();

  const plain = logitsOf({ type: GgmlType.F32 }, ref);
  const ones = logitsOf({ type: GgmlType.F32, ropeFreqs: new Float32Array(8).fill(1) }, ref);
  assert.ok(maxDiff(plain, ones) < 1e-6, "factors of 1 change nothing");
  const scaled = logitsOf({ type: GgmlType.F32, ropeFreqs: new Float32Array(8).fill(4) }, ref);
  assert.ok(maxDiff(plain, scaled) > 1e-3, "rope_freqs is applied");

  const batched = logitsOf({ type: GgmlType.F32 }, ref, { batchSize: 2, cacheType: "f32" });
  const whole = logitsOf({ type: GgmlType.F32 }, ref, { batchSize: 512, cacheType: "f32" });
  assert.ok(
    maxDiff(batched, whole) < 1e-6,
    `batches of 2 = one batch (${maxDiff(batched, whole)})`,
  );
  const f16 = logitsOf({ type: GgmlType.F32 }, ref, { cacheType: "f16" });
  const d = maxDiff(whole, f16);
  assert.ok(d > 0 && d < 5e-3, `an F16 cache rounds a little (${d})`);
});
