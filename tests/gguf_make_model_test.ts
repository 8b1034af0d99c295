import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testdata } from "./_testdata.ts";
import { openGguf } from "../src/gguf/file.ts";
import { GgufArray } from "../src/gguf/reader.ts";
import {
  llama3RopeFactors,
  makeModel,
  MODEL_SHAPES,
  modelTensors,
  WEIGHT_STD,
} from "../src/gguf/make_model.ts";
import { dequantizeQ8_0 } from "../src/kernels/mod.ts";
import { loadNative } from "../src/native/mod.ts";

const vocabDir = testdata("vocab-converted");

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "dotllm-make-model-"));
}

Deno.test("make-model tiny: llama tensors, hyper-parameters, copied tokenizer, weights", () => {
  const dir = tempDir();
  try {
    const made = makeModel({ shape: "tiny", type: "q8_0", outDir: dir, vocabDir });
    assert.equal(made.skipped, false);
    assert.equal(made.path, join(dir, "tiny-q8_0.gguf"));
    using file = openGguf(made.path);
    const g = file.gguf;

    const want: [string, number[], string][] = [["token_embd.weight", [64, 49152], "Q8_0"]];
    for (let i = 0; i < 2; i++) {
      want.push(
        [`blk.${i}.attn_norm.weight`, [64], "F32"],
        [`blk.${i}.attn_q.weight`, [64, 64], "Q8_0"],
        [`blk.${i}.attn_k.weight`, [64, 32], "Q8_0"], // 2 KV heads x head_dim 16
        [`blk.${i}.attn_v.weight`, [64, 32], "Q8_0"],
        [`blk.${i}.attn_output.weight`, [64, 64], "Q8_0"],
        [`blk.${i}.ffn_norm.weight`, [64], "F32"],
        [`blk.${i}.ffn_gate.weight`, [64, 128], "Q8_0"],
        [`blk.${i}.ffn_up.weight`, [64, 128], "Q8_0"],
        [`blk.${i}.ffn_down.weight`, [128, 64], "Q8_0"],
      );
    }
    want.push(["output_norm.weight", [64], "F32"]);
    assert.deepEqual(g.tensors.map((t) => [t.name, t.dims, t.type.name]), want);
    assert.equal(g.tensorsByName.has("output.weight"), false); // tied embeddings

    const m = g.metadata;
    assert.equal(m.get("general.architecture"), "llama");
    assert.equal(m.get("general.file_type"), 7);
    assert.equal(m.get("llama.embedding_length"), 64);
    assert.equal(m.get("llama.block_count"), 2);
    assert.equal(m.get("llama.attention.head_count"), 4);
    assert.equal(m.get("llama.attention.head_count_kv"), 2);
    assert.equal(m.get("llama.feed_forward_length"), 128);
    assert.equal(m.get("llama.rope.dimension_count"), 16);
    assert.equal(m.get("llama.vocab_size"), 49152);
    assert.equal(m.get("llama.attention.layer_norm_rms_epsilon"), Math.fround(1e-5));

    // Every tokenizer.* key of the vocab file, byte for byte.
    using vocab = openGguf(join(vocabDir, "ggml-vocab-smollm.gguf"));
    const keys = [...vocab.gguf.metadata.keys()].filter((k) => k.startsWith("tokenizer."));
    assert.ok(keys.length >= 10);
    for (const key of keys) {
      const a = vocab.gguf.metadata.get(key)!;
      const b = m.get(key)!;
      assert.equal(g.metadataTypes.get(key), vocab.gguf.metadataTypes.get(key), key);
      if (a instanceof GgufArray) {
        assert.ok(b instanceof GgufArray, key);
        assert.equal(b.length, a.length, key);
        assert.deepEqual(b.rawBytes, a.rawBytes, key);
      } else assert.equal(b, a, key);
    }

    // Norms are 1.0; weights are uniform with std 0.02 and mean 0.
    const at = (name: string) => {
      const t = g.tensorsByName.get(name)!;
      return g.bytes.subarray(t.dataOffset, t.dataOffset + t.sizeBytes);
    };
    assert.ok(new Float32Array(at("blk.1.ffn_norm.weight").slice().buffer).every((x) => x === 1));
    const w = dequantizeQ8_0(loadNative(), at("token_embd.weight"));
    assert.equal(w.length, 64 * 49152);
    let sum = 0;
    let sq = 0;
    for (const x of w) (sum += x, sq += x * x);
    const mean = sum / w.length;
    const std = Math.sqrt(sq / w.length - mean * mean);
    assert.ok(Math.abs(mean) < 1e-4, `mean ${mean}`);
    assert.ok(Math.abs(std - WEIGHT_STD) < 0.0005, `std ${std}`);
    assert.ok(
      Math.max(...w.subarray(0, 100_000).map(Math.abs)) <= WEIGHT_STD * Math.sqrt(3) * 1.01,
    );
    // Different tensors get different streams.
    assert.notDeepEqual(at("blk.0.attn_q.weight"), at("blk.1.attn_q.weight"));
  } finally {
    rmSync(dir, { recursive: true });
  }
});

Deno.test("make-model is deterministic, skips an up-to-date file, rewrites on new parameters", () => {
  const dir = tempDir();
  try {
    const first = makeModel({ shape: "tiny", type: "f16", outDir: dir, vocabDir, seed: 7 });
    const bytes = readFileSync(first.path);
    const again = makeModel({ shape: "tiny", type: "f16", outDir: dir, vocabDir, seed: 7 });
    assert.equal(again.skipped, true);
    const forced = makeModel({
      shape: "tiny",
      type: "f16",
      outDir: dir,
      vocabDir,
      seed: 7,
      force: true,
    });
    assert.equal(forced.skipped, false);
    assert.deepEqual(readFileSync(forced.path), bytes);
    const reseeded = makeModel({ shape: "tiny", type: "f16", outDir: dir, vocabDir, seed: 8 });
    assert.equal(reseeded.skipped, false);
    assert.notDeepEqual(readFileSync(reseeded.path), bytes);
    using file = openGguf(reseeded.path);
    assert.equal(file.gguf.tensorsByName.get("blk.0.ffn_up.weight")!.type.name, "F16");
    assert.equal(file.gguf.tensorsByName.get("blk.0.ffn_norm.weight")!.type.name, "F32");
    assert.throws(
      () => makeModel({ shape: "huge", type: "f16", outDir: dir, vocabDir }),
      /Unknown shape "huge"/,
    );
  } finally {
    rmSync(dir, { recursive: true });
  }
});

Deno.test("the big shapes have the published parameter counts (not generated here)", () => {
  const params = (shape: string) =>
    modelTensors(MODEL_SHAPES[shape], "q8_0")
      .filter((t) => t.name !== "rope_freqs.weight")
      .reduce((n, t) => n + t.dims.reduce((a, b) => a * b, 1), 0);
  assert.equal(params("smollm-135m"), 134_515_008); // SmolLM2-135M
  assert.equal(params("llama-3.2-1b"), 1_235_814_400); // Llama-3.2-1B
  assert.equal(params("qwen2.5-0.5b"), 494_032_768); // Qwen2.5-0.5B (with its Q/K/V biases)
  const llama = modelTensors(MODEL_SHAPES["llama-3.2-1b"], "q8_0");
  assert.deepEqual(llama.find((t) => t.name === "blk.15.attn_k.weight")!.dims, [2048, 512]);
  assert.deepEqual(llama.find((t) => t.name === "rope_freqs.weight")!.dims, [32]);
});

Deno.test("Llama 3 rope factors: 1 for short wavelengths, 32 for long, smooth between", () => {
  const s = MODEL_SHAPES["llama-3.2-1b"].ropeScaling!;
  const f = llama3RopeFactors(64, 500000, s);
  // wavelen_i = 2π·500000^(i/32): < 2048 for i ≤ 14, > 8192 for i ≥ 18 (worked out by hand).
  assert.deepEqual([...f.subarray(0, 15)], new Array(15).fill(1));
  assert.deepEqual([...f.subarray(18)], new Array(14).fill(32));
  for (let i = 15; i < 18; i++) {
    const wavelen = 2 * Math.PI * 500000 ** (i / 32);
    const smooth = (8192 / wavelen - 1) / (4 - 1);
    const want = 1 / ((1 - smooth) / 32 + smooth);
    assert.ok(Math.abs(f[i] - want) / want < 1e-5, `${i}: ${f[i]} vs ${want}`);
    assert.ok(f[i] > f[i - 1] && f[i] < 32);
  }
});

Deno.test("Q8_0 and F16 of the tiny model are byte-identical to llama-quantize's", () => {
  // Goldens from llama.cpp @ c392e509 (the reference build): `make-model --shape tiny --type f32`
  // (seed 1), then `llama-quantize tiny-f32.gguf out.gguf Q8_0` (or F16); sha256 of the 15
  // quantized tensors' data, concatenated in name order. Regenerate them that way if the weight
  // generator changes.
  const goldens = [
    ["q8_0", "Q8_0", "6de17d401553c956c49ed4e648aee093aceb53ab9ee93c16cb8ec2a40b64b541"],
    ["f16", "F16", "ad162c5e172f52f92ef105c411cd648d19a9de46867b22cf91ecc439b7b66343"],
  ] as const;
  const dir = tempDir();
  try {
    for (const [type, ggmlName, golden] of goldens) {
      const made = makeModel({ shape: "tiny", type, outDir: dir, vocabDir, seed: 1 });
      using file = openGguf(made.path);
      const g = file.gguf;
      const weights = g.tensors.filter((t) => t.type.name === ggmlName)
        .sort((a, b) => a.name < b.name ? -1 : 1);
      assert.equal(weights.length, 15);
      const hash = createHash("sha256");
      for (const t of weights) {
        hash.update(g.bytes.subarray(t.dataOffset, t.dataOffset + t.sizeBytes));
      }
      assert.equal(hash.digest("hex"), golden, type);
    }
  } finally {
    rmSync(dir, { recursive: true });
  }
});
