/**
 * The architecture table: an architecture not in it is refused with the list
 * of those that are; keys are read under the entry's prefix and a missing one
 * is named; `mistral` runs the llama graph with its sliding window per layer;
 * an optional tensor an entry does not use is refused, not ignored.
 */
import assert from "node:assert/strict";
import type { Gguf, GgufValue } from "../src/gguf/reader.ts";
import { GgmlType } from "../src/gguf/types.ts";
import {
  architectureOf,
  ARCHITECTURES,
  Batch,
  Context,
  Model,
  ModelError,
  SUPPORTED_ARCHITECTURES,
  tensorName,
} from "../src/model/mod.ts";
import { loadNative } from "../src/native/mod.ts";
import { Kernels } from "../src/kernels/mod.ts";
import { ReferenceKernels } from "./_reference_kernels.ts";
import { syntheticModel } from "./_synthetic.ts";

const native = loadNative();

/** `gguf` with its `llama.*` keys moved to `<arch>.*`, plus `extra` keys. */
function asArchitecture(gguf: Gguf, arch: string, extra: [string, GgufValue][] = []): Gguf {
  const metadata = new Map<string, GgufValue>();
  for (const [k, v] of gguf.metadata) metadata.set(k.replace(/^llama\./, `${arch}.`), v);
  metadata.set("general.architecture", arch);
  for (const [k, v] of extra) metadata.set(k, v);
  return { ...gguf, metadata };
}

const SUPPORTED = "llama, mistral, qwen2, qwen3, gemma3, phi3, bert";

Deno.test("architecture table: its entries; others refused with the supported list", () => {
  assert.deepEqual(SUPPORTED_ARCHITECTURES, SUPPORTED.split(", "));
  const shape = {
    embeddingLength: 64,
    headDim: 16,
    headCount: 4,
    blockCount: 2,
    slidingWindow: 0,
    slidingWindowPattern: 0,
    ropeFreqBase: 10000,
    ropeFreqBaseSwa: 10000,
  };
  for (const arch of ARCHITECTURES.values()) {
    if (arch.name === "bert") {
      assert.deepEqual([arch.rope, arch.activation, arch.norms, arch.causal], [
        "none",
        "gelu",
        "post",
        false,
      ]);
      assert.equal(arch.attentionScale(shape), 0.25);
      continue;
    }
    assert.equal(arch.norms, "pre");
    assert.equal(arch.causal, true);
    assert.equal(arch.rope, arch.name === "llama" || arch.name === "mistral" ? "normal" : "neox");
    assert.equal(arch.activation, arch.name === "gemma3" ? "gelu_tanh" : "silu");
    assert.equal(arch.attentionScale(shape), 0.25);
  }
  // Gemma 3: window on five layers of six (llama.cpp's default pattern), their own rope base.
  const gemma = architectureOf("gemma3");
  const g = { ...shape, blockCount: 12, slidingWindow: 512, ropeFreqBase: 1e6 };
  assert.deepEqual(
    Array.from({ length: 12 }, (_, l) => gemma.layerWindow(g, l)),
    [512, 512, 512, 512, 512, 0, 512, 512, 512, 512, 512, 0],
  );
  assert.equal(gemma.layerRopeBase(g, 0), 10000);
  assert.equal(gemma.layerRopeBase(g, 5), 1e6);
  assert.equal(gemma.embeddingScale(g), 8);
  assert.equal(gemma.layerWindow({ ...g, slidingWindow: 0 }, 0), 0);
  assert.throws(
    () => architectureOf("falcon"),
    (e: Error) =>
      e instanceof ModelError &&
      e.message === `unsupported architecture "falcon" (supported: ${SUPPORTED})`,
  );
  assert.equal(tensorName("wq", 7), "blk.7.attn_q.weight");
  const s = syntheticModel(native, { type: GgmlType.F32 });
  try {
    assert.throws(
      () => new Model(native, asArchitecture(s.gguf, "falcon"), s.base),
      /unsupported architecture "falcon" \(supported: llama, mistral, qwen2, qwen3, gemma3, phi3, bert\)/,
    );
    const missing = asArchitecture(s.gguf, "mistral");
    (missing.metadata as Map<string, GgufValue>).delete("mistral.block_count");
    assert.throws(
      () => new Model(native, missing, s.base),
      /missing metadata key "mistral.block_count"/,
    );
    const bad = asArchitecture(s.gguf, "mistral", [["mistral.attention.sliding_window", -3]]);
    assert.throws(
      () => new Model(native, bad, s.base),
      /"mistral.attention.sliding_window" must be/,
    );
  } finally {
    s.memory.free();
  }
});

Deno.test("mistral: the llama graph under mistral.* keys, its sliding window on every layer (native = reference)", () => {
  const s = syntheticModel(native, { type: GgmlType.Q8_0 });
  try {
    const prompt = [1, 5, 9, 77, 3, 100, 42, 8, 19];
    const run = (gguf: Gguf) => {
      using kernels = new Kernels(native, 2);
      using m = new Model(native, gguf, s.base);
      using context = new Context(m, { kernels });
      const out = [context.forward(prompt, 0).slice()];
      for (let i = 0; i < 3; i++) out.push(context.forward([i + 10], prompt.length + i).slice());
      return { out, windows: Array.from(m.layerWindows) };
    };
    const llama = run(s.gguf);
    assert.deepEqual(llama.windows, [0, 0]);
    const mistral = run(
      asArchitecture(s.gguf, "mistral", [["mistral.attention.sliding_window", 32]]),
    );
    assert.deepEqual(mistral.windows, [32, 32]);
    // Positions stay below the window, so it cuts nothing: the same function.
    mistral.out.forEach((l, i) => assert.deepEqual(l, llama.out[i], `step ${i}`));
    // A window of 4 cuts: native = reference kernels (F32 weights: no activation
    // quantization between them), and not the full-attention function.
    const f32 = syntheticModel(native, { type: GgmlType.F32 });
    const windowed = asArchitecture(f32.gguf, "mistral", [["mistral.attention.sliding_window", 4]]);
    const logits = (kernels: ReferenceKernels | Kernels, gguf = windowed) => {
      const repack = kernels instanceof Kernels;
      using m = new Model(native, gguf, f32.base, undefined, undefined, { repack });
      using context = new Context(m, { kernels });
      const out = [context.forward(prompt, 0).slice()];
      for (let i = 0; i < 3; i++) out.push(context.forward([i + 10], prompt.length + i).slice());
      return out;
    };
    using kernels = new Kernels(native, 2);
    const got = logits(kernels), want = logits(new ReferenceKernels(native));
    const full = logits(kernels, f32.gguf);
    f32.memory.free();
    got.forEach((l, i) => {
      let diff = 0;
      for (let j = 0; j < l.length; j++) diff = Math.max(diff, Math.abs(l[j] - want[i][j]));
      assert.ok(diff < 1e-4, `window 4, step ${i}: native vs reference ${diff}`);
      assert.ok(l.some((x, j) => Math.abs(x - full[i][j]) > 1e-3), `window 4 cuts, step ${i}`);
    });
  } finally {
    s.memory.free();
  }
});

Deno.test("weights: an optional tensor the architecture does not use is refused, naming it", () => {
  const s = syntheticModel(native, { type: GgmlType.F32 });
  try {
    const q = s.gguf.tensorsByName.get("blk.1.attn_norm.weight")!; // any F32 vector
    const bias = { ...q, name: "blk.1.attn_q_norm.weight", dims: [16] };
    const tensors = [...s.gguf.tensors, bias];
    const gguf = { ...s.gguf, tensors, tensorsByName: new Map(tensors.map((t) => [t.name, t])) };
    assert.throws(
      () => new Model(native, gguf, s.base),
      /tensor "blk.1.attn_q_norm.weight" is not used by architecture "llama"/,
    );
  } finally {
    s.memory.free();
  }
});

Deno.test("fused QKV and fused gate+up (an entry with both) compute what the separate matrices do", () => {
  const s = syntheticModel(native, { type: GgmlType.F32 });
  const fusedMemory = native.alloc(s.memory.byteLength * 2);
  try {
    // The same weights with attn_q/k/v stacked into attn_qkv and ffn_gate above ffn_up.
    const bytes = fusedMemory.bytes();
    bytes.set(s.memory.bytes());
    let end = s.memory.byteLength;
    const byName = s.gguf.tensorsByName;
    const tensors = s.gguf.tensors.filter((t) => !/attn_[qkv]\.|ffn_gate|ffn_up/.test(t.name));
    const stack = (name: string, parts: string[]) => {
      const infos = parts.map((p) => byName.get(p)!);
      const offset = Math.ceil(end / 32) * 32;
      let at = offset;
      for (const t of infos) {
        bytes.set(s.memory.bytes().subarray(t.dataOffset, t.dataOffset + t.sizeBytes), at);
        at += t.sizeBytes;
      }
      const rows = infos.reduce((n, t) => n + t.dims[1], 0);
      tensors.push({
        ...infos[0],
        name,
        dims: [infos[0].dims[0], rows],
        offset,
        dataOffset: offset,
        elementCount: infos[0].dims[0] * rows,
        sizeBytes: at - offset,
      });
      end = at;
    };
    for (let l = 0; l < 2; l++) {
      const p = `blk.${l}.`;
      stack(`${p}attn_qkv.weight`, [`${p}attn_q.weight`, `${p}attn_k.weight`, `${p}attn_v.weight`]);
      stack(`${p}ffn_up.weight`, [`${p}ffn_gate.weight`, `${p}ffn_up.weight`]);
    }
    const fused = { ...s.gguf, tensors, tensorsByName: new Map(tensors.map((t) => [t.name, t])) };
    const entry = { ...architectureOf("llama"), fusedQkv: true, fusedGateUp: true };
    const prompt = [1, 5, 9, 77, 3, 100, 42, 8, 19];
    const logits = (model: Model) => {
      using context = new Context(model, { threads: 2, contextSize: 32, maxLogits: 16 });
      const batch = new Batch(16);
      prompt.forEach((id, i) => batch.add(id, i, 0, true));
      assert.equal(context.decode(batch), prompt.length);
      return Array.from({ length: prompt.length }, (_, r) => context.logits(r).slice());
    };
    using plain = new Model(native, s.gguf, s.base);
    using stacked = new Model(native, fused, fusedMemory.address, undefined, entry);
    assert.ok(stacked.weights.layers[0].wqkv && !stacked.weights.layers[0].wq);
    assert.ok(!stacked.weights.layers[0].wGate && stacked.weights.layers[0].wUp.rowCount === 192);
    const want = logits(plain), got = logits(stacked);
    got.forEach((l, i) => assert.deepEqual(l, want[i], `token ${i}`));
    // Refused as plain llama: the fused tensor is not one llama uses.
    assert.throws(
      () => new Model(native, fused, fusedMemory.address),
      /missing tensor "blk.0.attn_q.weight"/,
    );
  } finally {
    fusedMemory.free();
    s.memory.free();
  }
});

Deno.test("Q/K norms and post-attention / post-FFN norms: native kernels = reference, and they act", () => {
  const s = syntheticModel(native, { type: GgmlType.F32 });
  const headDim = 16, embd = 64;
  const extra: { name: string; values: Float32Array }[] = [];
  const rng = (seed: number, n: number) =>
    Float32Array.from({ length: n }, (_, i) => 0.5 + ((i * 7919 + seed * 104729) % 1000) / 1000);
  for (let l = 0; l < 2; l++) {
    extra.push({ name: `blk.${l}.attn_q_norm.weight`, values: rng(4 * l + 1, headDim) });
    extra.push({ name: `blk.${l}.attn_k_norm.weight`, values: rng(4 * l + 2, headDim) });
    extra.push({ name: `blk.${l}.post_attention_norm.weight`, values: rng(4 * l + 3, embd) });
    extra.push({ name: `blk.${l}.post_ffw_norm.weight`, values: rng(4 * l + 4, embd) });
  }
  const memory = native.alloc(s.memory.byteLength + extra.length * (embd * 4 + 64));
  try {
    const bytes = memory.bytes();
    bytes.set(s.memory.bytes());
    const tensors = [...s.gguf.tensors];
    let at = Math.ceil(s.memory.byteLength / 32) * 32;
    const template = s.gguf.tensorsByName.get("output_norm.weight")!;
    for (const { name, values } of extra) {
      bytes.set(new Uint8Array(values.buffer), at);
      const n = values.length;
      tensors.push({
        ...template,
        name,
        dims: [n],
        offset: at,
        dataOffset: at,
        elementCount: n,
        sizeBytes: 4 * n,
      });
      at += Math.ceil((4 * n) / 32) * 32;
    }
    const gguf = { ...s.gguf, tensors, tensorsByName: new Map(tensors.map((t) => [t.name, t])) };
    const entry = {
      ...architectureOf("llama"),
      qkNorm: "optional",
      postAttentionNorm: "optional",
      postFfnNorm: "required",
    } as const;
    const prompt = [1, 5, 9, 77, 3, 100];
    const logits = (model: Model, kernels?: ReferenceKernels) => {
      using context = new Context(model, { threads: 2, contextSize: 32, kernels });
      const batch = new Batch(16);
      prompt.forEach((id, i) => batch.add(id, i, 0, i === prompt.length - 1));
      context.decode(batch);
      return context.logits(0).slice();
    };
    // The file's layouts: the reference kernels read them (and the library's, too).
    using normed = new Model(native, gguf, memory.address, undefined, entry, { repack: false });
    const L = normed.weights.layers[1];
    assert.ok(L.qNorm && L.kNorm && L.postAttnNorm && L.postFfnNorm);
    const got = logits(normed), reference = logits(normed, new ReferenceKernels(native));
    let diff = 0;
    for (let i = 0; i < got.length; i++) diff = Math.max(diff, Math.abs(got[i] - reference[i]));
    assert.ok(diff < 1e-4, `native vs reference ${diff}`);
    using plain = new Model(native, s.gguf, s.base);
    const without = logits(plain);
    assert.ok(without.some((x, i) => Math.abs(x - got[i]) > 1e-2), "the norms change the logits");
    // "required" post-FFN norm missing: named.
    assert.throws(
      () => new Model(native, s.gguf, s.base, undefined, entry),
      /missing tensor "blk.0.post_ffw_norm.weight"/,
    );
  } finally {
    memory.free();
    s.memory.free();
  }
});
