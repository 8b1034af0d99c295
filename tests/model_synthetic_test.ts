import assert from "node:assert/strict";
import type { GgufTensorInfo } from "../src/gguf/reader.ts";
import { GgmlType } from "../src/gguf/types.ts";
import { Context, type ContextOptions, type ForwardOps, Model } from "../src/model/mod.ts";
import { Kernels } from "../src/kernels/mod.ts";
import { ReferenceKernels } from "./_reference_kernels.ts";
import { loadNative } from "../src/native/mod.ts";
import { syntheticModel } from "./_synthetic.ts";

const native = loadNative();
const PROMPT = [1, 5, 9, 77, 3, 100, 42, 8, 19];

/** Logits after the prompt (batched), then after 3 decoded tokens. */
function logitsOf(
  options: Parameters<typeof syntheticModel>[1],
  kernels: ForwardOps,
  contextOptions: ContextOptions = {},
): Float32Array[] {
  const s = syntheticModel(native, options);
  try {
    // Repacked weights run on the library's kernels only.
    const repack = kernels instanceof Kernels;
    using model = new Model(native, s.gguf, s.base, undefined, undefined, { repack });
    using context = new Context(model, { kernels, ...contextOptions });
    const out = [context.forward(PROMPT, 0).slice()];
    for (let i = 0; i < 3; i++) out.push(context.forward([i + 10], PROMPT.length + i).slice());
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
  using model = new Model(native, tied.gguf, tied.base, undefined, undefined, { repack: false });
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

Deno.test("synthetic model: Zig kernels match the reference per type, bit-identical at 1..3 threads", () => {
  // Q8_0 quantizes the activations too (as ggml does), hence its looser bound.
  const bounds: Record<number, number> = {
    [GgmlType.F32]: 1e-4,
    [GgmlType.F16]: 1e-4,
    [GgmlType.BF16]: 1e-4,
    [GgmlType.Q8_0]: 0.05,
  };
  for (const type of [GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0]) {
    const expected = logitsOf({ type }, ref, { cacheType: "f32" });
    const byThreads = [1, 2, 3].map((threads) => {
      using kernels = new Kernels(native, threads);
      return logitsOf({ type }, kernels, { cacheType: "f32", batchSize: 4 });
    });
    const d = maxDiff(byThreads[0], expected);
    assert.ok(d < bounds[type], `type ${type}: max logit difference ${d}`);
    assert.deepEqual(byThreads[1], byThreads[0], `type ${type}: 2 threads = 1 thread`);
    assert.deepEqual(byThreads[2], byThreads[0], `type ${type}: 3 threads = 1 thread`);
  }
});

Deno.test("config errors name the key: missing, wrong type, out of range, inconsistent", () => {
  const cases: [string, unknown, RegExp][] = [
    [
      "llama.attention.layer_norm_rms_epsilon",
      undefined,
      /missing metadata key "llama.attention.layer_norm_rms_epsilon"/,
    ],
    [
      "llama.block_count",
      "five",
      /"llama.block_count" must be an integer in \[1, 1024\], got five/,
    ],
    ["llama.block_count", 0, /"llama.block_count" must be an integer/],
    ["llama.embedding_length", 1.5, /"llama.embedding_length" must be an integer/],
    [
      "llama.attention.head_count_kv",
      3,
      /head_count" 4 is not a multiple of "llama.attention.head_count_kv" 3/,
    ],
    ["llama.rope.dimension_count", 7, /"llama.rope.dimension_count" must be even, got 7/],
    ["llama.rope.freq_base", -1, /"llama.rope.freq_base" must be a number > 0, got -1/],
    ["llama.context_length", 10n ** 12n, /"llama.context_length" must be an integer/],
    ["general.architecture", "gemma", /unsupported architecture "gemma"/],
    ["llama.rope.scaling.type", "yarn", /unsupported RoPE scaling "yarn"/],
  ];
  for (const [key, value, message] of cases) {
    const s = syntheticModel(native, { type: GgmlType.F32 });
    try {
      const metadata = s.gguf.metadata as Map<string, unknown>;
      if (value === undefined) metadata.delete(key);
      else metadata.set(key, value);
      assert.throws(
        () => new Model(native, s.gguf, s.base, undefined, undefined, { repack: false }),
        message,
        `${key} = ${String(value)}`,
      );
    } finally {
      s.memory.free();
    }
  }
});

Deno.test("weights errors name the tensor: wrong shape, missing tensor", () => {
  const s = syntheticModel(native, { type: GgmlType.F32 });
  try {
    const tensors = s.gguf.tensorsByName as Map<string, GgufTensorInfo>;
    const wk = tensors.get("blk.1.attn_k.weight")!;
    tensors.set("blk.1.attn_k.weight", { ...wk, dims: [64, 64] });
    assert.throws(
      () => new Model(native, s.gguf, s.base, undefined, undefined, { repack: false }),
      /tensor "blk.1.attn_k.weight" has shape \[64, 64\], expected \[64, 32\]/,
    );
    tensors.set("blk.1.attn_k.weight", wk);
    tensors.delete("blk.0.ffn_down.weight");
    assert.throws(
      () => new Model(native, s.gguf, s.base, undefined, undefined, { repack: false }),
      /missing tensor "blk.0.ffn_down.weight"/,
    );
  } finally {
    s.memory.free();
  }
});
