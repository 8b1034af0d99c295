/**
 * The kernels composed into a plain llama forward pass (RMSNorm, RoPE "normal", GQA
 * attention over an F16 KV cache, SwiGLU) reproduce llama.cpp's greedy tokens and
 * logits on the real test models: stories260K (F32 weights, GQA) and
 * llama-2-tiny-random (F16 weights, a 9-token prompt run as one batch). This checks
 * the kernels' conventions end to end; the model layer in src/ has its own tests.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { type Gguf, parseGguf } from "../src/gguf/reader.ts";
import { Kernels, WeightType } from "../src/kernels/mod.ts";
import { loadNative, type NativeBuffer } from "../src/native/mod.ts";
import { assertBitIdentical } from "./_kernels.ts";
import { testdata } from "./_testdata.ts";

const native = loadNative();
const ctx = 128;

interface Config {
  dim: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  ropeDims: number;
  ff: number;
  layers: number;
  vocab: number;
  eps: number;
}

function config(gguf: Gguf): Config {
  const n = (key: string) => Number(gguf.metadata.get(`llama.${key}`));
  const dim = n("embedding_length"), heads = n("attention.head_count");
  return {
    dim,
    heads,
    kvHeads: n("attention.head_count_kv"),
    headDim: dim / heads,
    ropeDims: n("rope.dimension_count"),
    ff: n("feed_forward_length"),
    layers: n("block_count"),
    vocab: Number(gguf.tensorsByName.get("token_embd.weight")!.dims[1]),
    eps: n("attention.layer_norm_rms_epsilon"),
  };
}

/** A forward pass over the mapped model, one KV cache, every buffer native. */
class Forward {
  #k: Kernels;
  #gguf: Gguf;
  #c: Config;
  #mapped;
  #buffers: NativeBuffer[] = [];
  #kCache: NativeBuffer[];
  #vCache: NativeBuffer[];

  constructor(kernels: Kernels, path: string, gguf: Gguf) {
    this.#k = kernels;
    this.#gguf = gguf;
    this.#c = config(gguf);
    this.#mapped = native.mapFile(path);
    const kvBytes = ctx * this.#c.kvHeads * this.#c.headDim * 2;
    this.#kCache = Array.from({ length: this.#c.layers }, () => this.#alloc(kvBytes));
    this.#vCache = Array.from({ length: this.#c.layers }, () => this.#alloc(kvBytes));
  }

  #alloc(bytes: number): NativeBuffer {
    const b = native.alloc(bytes);
    this.#buffers.push(b);
    return b;
  }

  /** [type, address] of a tensor. */
  #w(name: string): [number, number] {
    const t = this.#gguf.tensorsByName.get(name);
    assert.ok(t, name);
    return [t.type.id, this.#mapped.address + t.dataOffset];
  }

  /** Runs `ids` at positions pos.. and returns every token's logits. */
  run(ids: number[], pos: number): Float32Array {
    const k = this.#k, c = this.#c, T = ids.length, kvDim = c.kvHeads * c.headDim;
    const idb = this.#alloc(T * 4);
    new Int32Array(idb.buffer).set(ids);
    const f32 = (n: number) => this.#alloc(T * n * 4).address;
    const x = f32(c.dim), xb = f32(c.dim), xb2 = f32(c.dim), q = f32(c.dim), att = f32(c.dim);
    const kb = f32(kvDim), vb = f32(kvDim), hb = f32(c.ff), hb2 = f32(c.ff);
    const logits = this.#alloc(T * c.vocab * 4);
    const matmul = (out: number, name: string, input: number, rows: number, cols: number) => {
      const [type, address] = this.#w(name);
      k.matmul(type, out, address, input, rows, cols, T);
    };
    const [embdType, embd] = this.#w("token_embd.weight");
    k.getRows(embdType, x, embd, idb.address, T, c.dim, c.vocab);
    for (let l = 0; l < c.layers; l++) {
      const w = (n: string) => `blk.${l}.${n}.weight`;
      k.rmsnorm(xb, x, this.#w(w("attn_norm"))[1], c.dim, T, c.eps);
      matmul(q, w("attn_q"), xb, c.dim, c.dim);
      matmul(kb, w("attn_k"), xb, kvDim, c.dim);
      matmul(vb, w("attn_v"), xb, kvDim, c.dim);
      k.rope(q, T, c.heads, c.headDim, c.ropeDims, pos, 10000, 0, false);
      k.rope(kb, T, c.kvHeads, c.headDim, c.ropeDims, pos, 10000, 0, false);
      k.storeKv(WeightType.F16, this.#kCache[l].address, kb, pos, T, kvDim);
      k.storeKv(WeightType.F16, this.#vCache[l].address, vb, pos, T, kvDim);
      const kc = this.#kCache[l].address, vc = this.#vCache[l].address;
      const scale = 1 / Math.sqrt(c.headDim);
      k.attention(WeightType.F16, att, q, kc, vc, T, pos, c.heads, c.kvHeads, c.headDim, scale);
      matmul(xb2, w("attn_output"), att, c.dim, c.dim);
      k.add(x, x, xb2, T * c.dim);
      k.rmsnorm(xb, x, this.#w(w("ffn_norm"))[1], c.dim, T, c.eps);
      matmul(hb, w("ffn_gate"), xb, c.ff, c.dim);
      matmul(hb2, w("ffn_up"), xb, c.ff, c.dim);
      k.swiglu(hb, hb, hb2, T * c.ff);
      matmul(xb2, w("ffn_down"), hb, c.dim, c.ff);
      k.add(x, x, xb2, T * c.dim);
    }
    k.rmsnorm(x, x, this.#w("output_norm.weight")[1], c.dim, T, c.eps);
    matmul(logits.address, "output.weight", x, c.vocab, c.dim);
    return logits.f32().slice();
  }

  close(): void {
    for (const b of this.#buffers) b.free();
    this.#mapped.close();
  }
}

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/**
 * Greedy decoding from the golden prompt (run as one batch), every step's top-5 logits
 * within `tolerance` of llama.cpp's, bit-identical at 1..3 threads. Returns the largest
 * logit difference seen.
 */
function checkGolden(model: string, tolerance: number): number {
  const path = testdata(`models/${model}.gguf`);
  const gguf = parseGguf(new Uint8Array(readFileSync(path)));
  const vocab = config(gguf).vocab;
  const golden = JSON.parse(readFileSync(testdata(`golden/${model}.greedy.json`), "utf8"));
  const expected: number[] = golden.cases[0].generated_ids;
  let first: Float32Array[] | undefined;
  let maxDiff = 0;
  for (const threads of [1, 2, 3]) {
    using kernels = new Kernels(native, threads);
    const forward = new Forward(kernels, path, gguf);
    const ids: number[] = golden.cases[0].prompt_ids.slice();
    const steps: Float32Array[] = [];
    let logits = forward.run(ids, 0);
    for (let step = 0; step < expected.length; step++) {
      const last = logits.slice(logits.length - vocab);
      steps.push(last);
      assert.equal(argmax(last), expected[step], `${model} step ${step} at ${threads} threads`);
      for (const { id, logit } of golden.cases[0].steps[step].top5) {
        maxDiff = Math.max(maxDiff, Math.abs(last[id] - logit));
      }
      ids.push(expected[step]);
      logits = forward.run([expected[step]], ids.length - 1);
    }
    forward.close();
    if (first === undefined) first = steps;
    else steps.forEach((l, i) => assertBitIdentical(l, first![i], `${model} step ${i}`));
  }
  // llama.cpp rounds q to f16 for K·Q over its F16 cache; the kernels keep q in f32.
  assert.ok(maxDiff < tolerance, `${model}: logits differ from llama.cpp's by ${maxDiff}`);
  return maxDiff;
}

Deno.test("stories260K (F32, GQA) through the kernels: llama.cpp's 80 greedy tokens", () => {
  checkGolden("stories260K", 0.03); // 0.013 measured
});

Deno.test("llama-2-tiny-random (F16 weights, batched prompt) through the kernels: llama.cpp's tokens", () => {
  checkGolden("llama-2-tiny-random", 1e-3); // 6e-5 measured
});
