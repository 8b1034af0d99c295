/**
 * Small random Llama models built in native memory (no file): a GGUF-shaped
 * description plus the tensor bytes, so tests can load the same weights as
 * F32, F16, BF16 or Q8_0, with or without a tied output and `rope_freqs`.
 *
 * @module
 */
import type { Gguf, GgufTensorInfo, GgufValue } from "../src/gguf/reader.ts";
import { GgmlType, ggmlTypeById } from "../src/gguf/types.ts";
import type { Native, NativeBuffer } from "../src/native/native.ts";
import { Rng } from "../src/sampler/mod.ts";

/** The shape of a synthetic model. */
export interface SyntheticShape {
  embd: number;
  heads: number;
  kvHeads: number;
  ff: number;
  vocab: number;
  layers: number;
  context: number;
}

export const SMALL: SyntheticShape = {
  embd: 64,
  heads: 4,
  kvHeads: 2,
  ff: 96,
  vocab: 128,
  layers: 2,
  context: 64,
};

/** SmolLM2-135M's shape (576 wide, 9 heads / 3 KV heads of 64, 30 layers, 49152 tokens). */
export const SMOLLM_135M: SyntheticShape = {
  embd: 576,
  heads: 9,
  kvHeads: 3,
  ff: 1536,
  vocab: 49152,
  layers: 30,
  context: 8192,
};

/** Rounds `x` to what a weight of ggml type `type` stores, writing the encoded bytes. */
function encode(type: number, values: Float32Array): { bytes: Uint8Array; decoded: Float32Array } {
  const n = values.length;
  if (type === GgmlType.F32) {
    return { bytes: new Uint8Array(values.slice().buffer), decoded: values };
  }
  if (type === GgmlType.F16) {
    const h = Float16Array.from(values);
    return { bytes: new Uint8Array(h.buffer), decoded: Float32Array.from(h) };
  }
  if (type === GgmlType.BF16) {
    const u32 = new Uint32Array(values.slice().buffer);
    const out = new Uint16Array(n);
    const decoded = new Float32Array(n);
    const d32 = new Uint32Array(decoded.buffer);
    for (let i = 0; i < n; i++) {
      out[i] = (u32[i] + 0x7fff + ((u32[i] >> 16) & 1)) >>> 16; // round to nearest even
      d32[i] = out[i] << 16;
    }
    return { bytes: new Uint8Array(out.buffer), decoded };
  }
  if (type === GgmlType.Q8_0) {
    const blocks = n / 32;
    const bytes = new Uint8Array(blocks * 34);
    const dv = new DataView(bytes.buffer);
    const decoded = new Float32Array(n);
    for (let b = 0; b < blocks; b++) {
      let amax = 0;
      for (let i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(values[b * 32 + i]));
      const d = Math.f16round(amax / 127);
      const id = d ? 1 / d : 0;
      dv.setUint16(b * 34, new Uint16Array(Float16Array.of(d).buffer)[0], true);
      const quants = new Int8Array(bytes.buffer, b * 34 + 2, 32);
      for (let i = 0; i < 32; i++) {
        const q = Math.round(values[b * 32 + i] * id);
        quants[i] = q;
        decoded[b * 32 + i] = q * d;
      }
    }
    return { bytes, decoded };
  }
  throw new Error(`synthetic: type ${type}`);
}

/** A synthetic model: its GGUF description, base address and the memory behind it. */
export interface Synthetic {
  gguf: Gguf;
  base: number;
  memory: NativeBuffer;
}

/**
 * Builds a random model. Matmul weights are stored as `type`; `dequantized`
 * stores, as F32, exactly the values `type` holds (the same function in F32).
 */
export function syntheticModel(
  native: Native,
  options: {
    type: number;
    dequantized?: boolean;
    tied?: boolean;
    ropeFreqs?: Float32Array;
    shape?: SyntheticShape;
    seed?: number;
  },
): Synthetic {
  const s = options.shape ?? SMALL;
  const rng = new Rng(options.seed ?? 1);
  const headDim = s.embd / s.heads;
  const random = (n: number, scale: number) => {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = (rng.nextFloat() * 2 - 1) * scale;
    return out;
  };
  const specs: [string, number[], boolean][] = [["token_embd.weight", [s.embd, s.vocab], true]];
  for (let l = 0; l < s.layers; l++) {
    const p = `blk.${l}.`;
    specs.push(
      [`${p}attn_norm.weight`, [s.embd], false],
      [`${p}attn_q.weight`, [s.embd, s.heads * headDim], true],
      [`${p}attn_k.weight`, [s.embd, s.kvHeads * headDim], true],
      [`${p}attn_v.weight`, [s.embd, s.kvHeads * headDim], true],
      [`${p}attn_output.weight`, [s.heads * headDim, s.embd], true],
      [`${p}ffn_norm.weight`, [s.embd], false],
      [`${p}ffn_gate.weight`, [s.embd, s.ff], true],
      [`${p}ffn_up.weight`, [s.embd, s.ff], true],
      [`${p}ffn_down.weight`, [s.ff, s.embd], true],
    );
  }
  specs.push(["output_norm.weight", [s.embd], false]);
  if (!options.tied) specs.push(["output.weight", [s.embd, s.vocab], true]);
  const parts: { name: string; dims: number[]; type: number; bytes: Uint8Array }[] = [];
  for (const [name, dims, matrix] of specs) {
    const n = dims.reduce((a, b) => a * b, 1);
    if (!matrix) {
      parts.push({ name, dims, type: 0, bytes: encode(0, random(n, 0.5).map((x) => 1 + x)).bytes });
      continue;
    }
    const values = random(n, 1 / Math.sqrt(dims[0]) * 1.5);
    const { bytes, decoded } = encode(options.type, values);
    parts.push(
      options.dequantized
        ? { name, dims, type: 0, bytes: new Uint8Array(decoded.slice().buffer) }
        : { name, dims, type: options.type, bytes },
    );
  }
  if (options.ropeFreqs) {
    parts.push({
      name: "rope_freqs.weight",
      dims: [options.ropeFreqs.length],
      type: 0,
      bytes: new Uint8Array(options.ropeFreqs.slice().buffer),
    });
  }
  const align = (n: number) => Math.ceil(n / 32) * 32;
  const total = parts.reduce((sum, p) => align(sum) + p.bytes.length, 0);
  const memory = native.alloc(align(total) + 64);
  const bytes = memory.bytes();
  const tensors: GgufTensorInfo[] = [];
  let offset = 0;
  for (const p of parts) {
    offset = align(offset);
    bytes.set(p.bytes, offset);
    const type = ggmlTypeById(p.type)!;
    tensors.push({
      name: p.name,
      dims: p.dims,
      type,
      offset,
      dataOffset: offset,
      elementCount: p.dims.reduce((a, b) => a * b, 1),
      sizeBytes: p.bytes.length,
    });
    offset += p.bytes.length;
  }
  const metadata = new Map<string, GgufValue>([
    ["general.architecture", "llama"],
    ["general.name", "synthetic"],
    ["llama.context_length", s.context],
    ["llama.embedding_length", s.embd],
    ["llama.block_count", s.layers],
    ["llama.feed_forward_length", s.ff],
    ["llama.attention.head_count", s.heads],
    ["llama.attention.head_count_kv", s.kvHeads],
    ["llama.rope.dimension_count", headDim],
    ["llama.rope.freq_base", 10000],
    ["llama.attention.layer_norm_rms_epsilon", 1e-5],
  ]);
  const gguf: Gguf = {
    version: 3,
    metadata,
    metadataTypes: new Map(),
    tensors,
    tensorsByName: new Map(tensors.map((t) => [t.name, t])),
    alignment: 32,
    dataStart: 0,
    fileSize: memory.byteLength,
    bytes,
  };
  return { gguf, base: memory.address, memory };
}
