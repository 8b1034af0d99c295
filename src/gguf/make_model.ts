/**
 * Synthetic Llama models for tests and benchmarks: llama.cpp's `llama`
 * architecture tensor names and shapes, deterministic random weights
 * (uniform with standard deviation 0.02 from a seeded xorshift32 per tensor;
 * norms 1.0), and the tokenizer copied from a vocab GGUF (every `tokenizer.*`
 * key). Written tensor by tensor through a reused buffer, so memory stays
 * small even for the 1.3 GB Llama-3.2-1B Q8_0 file.
 *
 * ```sh
 * deno task make-model --shape smollm-135m --type q8_0   # models/smollm-135m-q8_0.gguf
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

/** A synthetic model's hyper-parameters. */
export interface ModelShape {
  readonly name: string;
  /** The vocab GGUF (under the test data's `vocab-converted/`) whose `tokenizer.*` keys are copied. */
  readonly vocabFile: string;
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
  readonly fill: "random" | "ones" | Float32Array;
}

/** The llama-arch tensors of a shape, in llama.cpp's converter order. */
export function modelTensors(shape: ModelShape, type: ModelType): PlannedWeight[] {
  const w = MODEL_TYPES[type];
  const n = shape.embeddingLength;
  const headDim = n / shape.headCount;
  const kv = shape.headCountKv * headDim;
  const ff = shape.feedForwardLength;
  const out: PlannedWeight[] = [
    { name: "token_embd.weight", dims: [n, shape.vocabSize], type: w, fill: "random" },
  ];
  if (shape.ropeScaling) {
    const factors = llama3RopeFactors(headDim, shape.ropeFreqBase, shape.ropeScaling);
    out.push({ name: "rope_freqs.weight", dims: [headDim / 2], type: GgmlType.F32, fill: factors });
  }
  for (let i = 0; i < shape.blockCount; i++) {
    const b = `blk.${i}.`;
    out.push(
      { name: `${b}attn_norm.weight`, dims: [n], type: GgmlType.F32, fill: "ones" },
      { name: `${b}attn_q.weight`, dims: [n, n], type: w, fill: "random" },
      { name: `${b}attn_k.weight`, dims: [n, kv], type: w, fill: "random" },
      { name: `${b}attn_v.weight`, dims: [n, kv], type: w, fill: "random" },
      { name: `${b}attn_output.weight`, dims: [n, n], type: w, fill: "random" },
      { name: `${b}ffn_norm.weight`, dims: [n], type: GgmlType.F32, fill: "ones" },
      { name: `${b}ffn_gate.weight`, dims: [n, ff], type: w, fill: "random" },
      { name: `${b}ffn_up.weight`, dims: [n, ff], type: w, fill: "random" },
      { name: `${b}ffn_down.weight`, dims: [ff, n], type: w, fill: "random" },
    );
  }
  out.push({ name: "output_norm.weight", dims: [n], type: GgmlType.F32, fill: "ones" });
  return out;
}

/** FNV-1a of `seed` and `name`, never 0 (a valid xorshift32 state). */
function tensorSeed(seed: number, name: string): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193) >>> 0;
  return h === 0 ? 0x9e3779b9 : h;
}

/** Standard deviation of the random weights. */
export const WEIGHT_STD = 0.02;
const HALF_WIDTH = WEIGHT_STD * Math.sqrt(3); // uniform on [-a, a] has std a/√3

/** Fills `out` with uniform values of std 0.02 from xorshift32 `state`; returns the next state. */
function fillRandom(out: Float32Array, state: number): number {
  let s = state | 0;
  const scale = (2 * HALF_WIDTH) / 4294967296;
  for (let i = 0; i < out.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[i] = (s >>> 0) * scale - HALF_WIDTH;
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

  using vocab = openGguf(join(options.vocabDir, shape.vocabFile));
  const tokens = vocab.gguf.metadata.get("tokenizer.ggml.tokens");
  if (!(tokens instanceof GgufArray) || tokens.length !== shape.vocabSize) {
    throw new RangeError(`${vocab.path}: expected ${shape.vocabSize} tokens`);
  }
  const n = shape.embeddingLength;
  const metadata: [string, GgufWriteValue][] = [
    ["general.architecture", meta.string("llama")],
    ["general.name", meta.string(`dotllm synthetic ${shape.name}`)],
    ["general.file_type", meta.u32(FILE_TYPES[options.type])],
    ["general.quantization_version", meta.u32(2)],
    [PARAMS_KEY, meta.string(params)],
    ["llama.context_length", meta.u32(shape.contextLength)],
    ["llama.embedding_length", meta.u32(n)],
    ["llama.block_count", meta.u32(shape.blockCount)],
    ["llama.feed_forward_length", meta.u32(shape.feedForwardLength)],
    ["llama.attention.head_count", meta.u32(shape.headCount)],
    ["llama.attention.head_count_kv", meta.u32(shape.headCountKv)],
    ["llama.rope.dimension_count", meta.u32(n / shape.headCount)],
    ["llama.rope.freq_base", meta.f32(shape.ropeFreqBase)],
    ["llama.attention.layer_norm_rms_epsilon", meta.f32(shape.rmsEpsilon)],
    ["llama.vocab_size", meta.u32(shape.vocabSize)],
  ];
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
      if (t.fill === "ones") {
        writer.writeF32(new Float32Array(count).fill(1));
        continue;
      }
      let state = tensorSeed(seed, t.name);
      for (let done = 0; done < count; done += CHUNK_ELEMENTS) {
        const part = count - done < CHUNK_ELEMENTS ? chunk.subarray(0, count - done) : chunk;
        state = fillRandom(part, state);
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

Writes synthetic Llama models (random weights, real tokenizer) to DIR/<shape>-<type>.gguf,
skipping a file that already exists with the same parameters.
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
