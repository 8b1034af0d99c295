/**
 * A Llama-family transformer: loads a GGUF file, binds its weights, allocates
 * every buffer once, and runs the forward pass (llama2.c style, top to
 * bottom) through the native kernels.
 *
 * Prefill runs the prompt in batches of up to `batchSize` tokens, every
 * matmul a GEMM over the batch; decode is the same code with one token
 * (GEMV). Only the last token's logits are computed.
 *
 * @example
 * ```ts
 * import { LlamaModel } from "./model.ts";
 * const model = LlamaModel.load("stories260K.gguf");
 * const logits = model.forward([1, 403, 407], 0); // Float32Array [vocab]
 * model.close();
 * ```
 *
 * @module
 */
import { parseGguf } from "../gguf/reader.ts";
import { computableTypes, Kernels } from "../kernels/mod.ts";
import type { Gguf } from "../gguf/reader.ts";
import type { MappedFile, Native, NativeBuffer } from "../native/native.ts";
import { loadNative } from "../native/native.ts";
import { type LlamaConfig, readLlamaConfig } from "./config.ts";
import type { CacheTypeId, ModelKernels } from "./kernels.ts";
import { bindLlamaWeights, type LlamaWeights } from "./weights.ts";

/** KV cache element type. */
export type CacheType = "f16" | "f32";

/** Load-time choices. */
export interface ModelOptions {
  /** KV cache positions; default min(model context, 4096); 0 = the model's training context. */
  contextSize?: number;
  /** Tokens per prefill batch; default 512. */
  batchSize?: number;
  /** KV cache type; default `"f16"` (as llama.cpp). */
  cacheType?: CacheType;
  /** Kernel threads; 0 (default) = every CPU. */
  threads?: number;
  /** The kernels to run on (closed by the caller), or a factory (closed by the model). */
  kernels?: ModelKernels | ((native: Native, threads: number) => ModelKernels);
  /** The native library; default {@linkcode loadNative}. */
  native?: Native;
}

/** Bytes the model holds, by kind. */
export interface ModelMemory {
  /** Tensor bytes in the file mapping. */
  readonly weightsBytes: number;
  /** Both KV caches, every layer. */
  readonly kvCacheBytes: number;
  /** Activations, logits and scratch. */
  readonly scratchBytes: number;
}

/** The default for `contextSize` is at most this. */
export const DEFAULT_CONTEXT_MAX = 4096;
/** The default prefill batch. */
export const DEFAULT_BATCH_SIZE = 512;

/** The native Zig kernels on `threads` threads (0 = every CPU). */
function nativeKernels(native: Native, threads: number): ModelKernels {
  return new Kernels(native, threads);
}

function positiveInteger(name: string, value: number, max: number): number {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new RangeError(`${name} must be an integer in [1, ${max}], got ${value}`);
  }
  return value;
}

/** A loaded model, ready to run. Not thread-safe; one sequence at a time. */
export class LlamaModel {
  readonly config: LlamaConfig;
  readonly weights: LlamaWeights;
  readonly gguf: Gguf;
  /** KV cache positions. */
  readonly contextSize: number;
  /** Most tokens per forward batch. */
  readonly batchSize: number;
  readonly cacheType: CacheType;
  readonly memory: ModelMemory;
  readonly kernels: ModelKernels;
  readonly #ownsKernels: boolean;

  readonly #native: Native;
  readonly #file: MappedFile | undefined;
  readonly #buffers: NativeBuffer[] = [];
  readonly #x: NativeBuffer; // [batch][embd] residual stream
  readonly #xb: NativeBuffer; // [batch][embd] normed input / block output
  readonly #q: NativeBuffer; // [batch][heads·headDim]
  readonly #k: NativeBuffer; // [batch][kvHeads·headDim]
  readonly #v: NativeBuffer; // [batch][kvHeads·headDim]
  readonly #att: NativeBuffer; // [batch][heads·headDim] attention output
  readonly #gate: NativeBuffer; // [batch][ff]
  readonly #up: NativeBuffer; // [batch][ff]
  readonly #ids: NativeBuffer; // [batch] i32 token ids
  readonly #idsView: Int32Array;
  readonly #positions: NativeBuffer; // [batch] i32 position of each token
  readonly #positionsView: Int32Array;
  readonly #slots: NativeBuffer; // [batch] i32 KV-cache slot of each token (0: one sequence)
  readonly #logits: NativeBuffer; // [vocab]
  readonly #logitsView: Float32Array;
  readonly #kCache: NativeBuffer; // [layers][ctx][kvHeads·headDim] (F16 or F32)
  readonly #vCache: NativeBuffer; // [layers][ctx][kvHeads·headDim]
  #closed = false;

  /** Maps and loads the GGUF file at `path`. */
  static load(path: string, options: ModelOptions = {}): LlamaModel {
    const native = options.native ?? loadNative();
    const file = native.mapFile(path);
    try {
      const gguf = parseGguf(file.bytes);
      return new LlamaModel(native, gguf, file.address, file, options);
    } catch (error) {
      file.close();
      throw error;
    }
  }

  /**
   * A model over an already parsed GGUF whose byte 0 is at native address
   * `base` (the caller keeps that memory alive; `file`, if given, is closed
   * by {@linkcode close}).
   */
  constructor(
    native: Native,
    gguf: Gguf,
    base: number,
    file: MappedFile | undefined,
    options: ModelOptions = {},
  ) {
    this.#native = native;
    this.#file = file;
    this.gguf = gguf;
    const c = readLlamaConfig(gguf);
    this.config = c;
    this.weights = bindLlamaWeights(gguf, c, base, computableTypes(native));
    const contextSize = options.contextSize === 0
      ? c.contextLength
      : options.contextSize ?? Math.min(c.contextLength, DEFAULT_CONTEXT_MAX);
    if (contextSize > c.contextLength) {
      throw new RangeError(
        `context size ${contextSize} exceeds the model's training context ${c.contextLength}`,
      );
    }
    this.contextSize = positiveInteger("contextSize", contextSize, c.contextLength);
    this.batchSize = Math.min(
      positiveInteger("batchSize", options.batchSize ?? DEFAULT_BATCH_SIZE, 1 << 16),
      this.contextSize,
    );
    this.cacheType = options.cacheType ?? "f16";
    if (this.cacheType !== "f16" && this.cacheType !== "f32") {
      throw new RangeError(`cacheType must be "f16" or "f32", got "${this.cacheType}"`);
    }
    const threads = options.threads ?? 0;
    if (!Number.isInteger(threads) || threads < 0 || threads > 1024) {
      throw new RangeError(`threads must be an integer in [0, 1024], got ${threads}`);
    }

    const B = this.batchSize;
    const E = c.embeddingLength;
    const Q = c.headCount * c.headDim;
    const KV = c.headCountKv * c.headDim;
    const F = c.feedForwardLength;
    const V = c.vocabSize;
    const cacheElementBytes = this.cacheType === "f16" ? 2 : 4;
    try {
      this.#x = this.#alloc(B * E * 4);
      this.#xb = this.#alloc(B * E * 4);
      this.#q = this.#alloc(B * Q * 4);
      this.#k = this.#alloc(B * KV * 4);
      this.#v = this.#alloc(B * KV * 4);
      this.#att = this.#alloc(B * Q * 4);
      this.#gate = this.#alloc(B * F * 4);
      this.#up = this.#alloc(B * F * 4);
      this.#ids = this.#alloc(B * 4);
      this.#positions = this.#alloc(B * 4);
      this.#slots = this.#alloc(B * 4);
      this.#positionsView = new Int32Array(this.#positions.buffer);
      this.#logits = this.#alloc(V * 4);
      const cacheBytes = c.blockCount * this.contextSize * KV * cacheElementBytes;
      this.#kCache = this.#alloc(cacheBytes);
      this.#vCache = this.#alloc(cacheBytes);
      this.#idsView = new Int32Array(this.#ids.buffer);
      this.#logitsView = new Float32Array(this.#logits.buffer);

      const given = options.kernels ?? nativeKernels;
      this.#ownsKernels = typeof given === "function";
      this.kernels = typeof given === "function" ? given(native, threads) : given;
      this.kernels.reserve?.(B, Math.max(E, Q, F));
    } catch (error) {
      for (const b of this.#buffers) b.free();
      throw error;
    }
    const kvCacheBytes = this.#kCache.byteLength + this.#vCache.byteLength;
    this.memory = {
      weightsBytes: this.weights.sizeBytes,
      kvCacheBytes,
      scratchBytes: this.#buffers.reduce((s, b) => s + b.byteLength, 0) - kvCacheBytes,
    };
  }

  #alloc(bytes: number): NativeBuffer {
    const b = this.#native.alloc(bytes);
    this.#buffers.push(b);
    return b;
  }

  /** Threads the kernels use. */
  get threadCount(): number {
    return this.kernels.threadCount;
  }

  /**
   * Runs `tokens` at positions `posStart...` (filling the KV cache) and
   * returns the logits of the last token: a view of native memory, valid
   * until the next call. Throws `RangeError` for an id outside the vocabulary
   * or positions past the context.
   */
  forward(tokens: ArrayLike<number>, posStart: number): Float32Array {
    if (this.#closed) throw new Error("LlamaModel used after close");
    const n = tokens.length;
    if (n === 0) throw new RangeError("forward needs at least one token");
    if (!Number.isInteger(posStart) || posStart < 0 || posStart + n > this.contextSize) {
      throw new RangeError(
        `positions [${posStart}, ${posStart + n}) do not fit the context of ${this.contextSize}`,
      );
    }
    const V = this.config.vocabSize;
    for (let i = 0; i < n; i++) {
      const id = tokens[i];
      if (!Number.isInteger(id) || id < 0 || id >= V) {
        throw new RangeError(`token id ${id} is outside the vocabulary [0, ${V})`);
      }
    }
    for (let start = 0; start < n; start += this.batchSize) {
      const count = Math.min(this.batchSize, n - start);
      for (let i = 0; i < count; i++) {
        this.#idsView[i] = tokens[start + i];
        this.#positionsView[i] = posStart + start + i;
      }
      this.#batch(count, start + count === n);
    }
    return this.#logitsView;
  }

  /**
   * One batch of `T` tokens (ids and positions already in `#ids`, `#positions`), run
   * as one graph where the kernels support it (one native call per batch).
   */
  #batch(T: number, computeLogits: boolean): void {
    const k = this.kernels;
    k.beginGraph?.();
    try {
      this.#layers(T, computeLogits);
    } catch (error) {
      k.cancelGraph?.();
      throw error;
    }
    k.endGraph?.();
  }

  /** The forward pass of one batch, kernel by kernel. */
  #layers(T: number, computeLogits: boolean): void {
    const c = this.config;
    const w = this.weights;
    const k = this.kernels;
    const E = c.embeddingLength;
    const H = c.headCount;
    const Hkv = c.headCountKv;
    const D = c.headDim;
    const Q = H * D;
    const KV = Hkv * D;
    const F = c.feedForwardLength;
    const cacheType: CacheTypeId = this.cacheType === "f16" ? 1 : 0;
    const layerCacheBytes = this.contextSize * KV * (cacheType === 1 ? 2 : 4);
    const freqs = w.ropeFreqs?.address ?? 0;
    const positions = this.#positions.address, slots = this.#slots.address;
    const ctx = this.contextSize;
    const scale = 1 / Math.sqrt(D);
    const x = this.#x.address, xb = this.#xb.address;
    const q = this.#q.address, kk = this.#k.address, v = this.#v.address;
    const att = this.#att.address, gate = this.#gate.address, up = this.#up.address;

    // x [T][E] = token_embd[ids]
    const emb = w.tokenEmbedding;
    k.getRows(emb.type, x, emb.address, this.#ids.address, T, E, emb.rowCount);

    for (let l = 0; l < c.blockCount; l++) {
      const L = w.layers[l];
      const kCache = this.#kCache.address + l * layerCacheBytes; // [ctx][KV]
      const vCache = this.#vCache.address + l * layerCacheBytes; // [ctx][KV]

      // Attention block.
      k.rmsnorm(xb, x, L.attnNorm.address, E, T, c.rmsEpsilon); // xb [T][E]
      k.matmul(L.wq.type, q, L.wq.address, xb, Q, E, T); // q [T][H·D]
      k.matmul(L.wk.type, kk, L.wk.address, xb, KV, E, T); // k [T][Hkv·D]
      k.matmul(L.wv.type, v, L.wv.address, xb, KV, E, T); // v [T][Hkv·D]
      k.rope(q, T, H, D, c.ropeDimensionCount, positions, c.ropeFreqBase, freqs, false);
      k.rope(kk, T, Hkv, D, c.ropeDimensionCount, positions, c.ropeFreqBase, freqs, false);
      k.storeKv(cacheType, kCache, kk, positions, slots, T, KV, ctx, 1); // kCache[pos..pos+T)
      k.storeKv(cacheType, vCache, v, positions, slots, T, KV, ctx, 1); // vCache[pos..pos+T)
      k.attention(
        cacheType,
        att,
        q,
        kCache,
        vCache,
        T,
        positions,
        slots,
        H,
        Hkv,
        D,
        scale,
        ctx,
        0,
        1,
      ); // att [T][H·D]
      k.matmul(L.wo.type, xb, L.wo.address, att, E, Q, T); // xb [T][E]
      k.add(x, x, xb, T * E); // x += attention

      // Feed-forward block (SwiGLU).
      k.rmsnorm(xb, x, L.ffnNorm.address, E, T, c.rmsEpsilon); // xb [T][E]
      k.matmul(L.wGate.type, gate, L.wGate.address, xb, F, E, T); // gate [T][F]
      k.matmul(L.wUp.type, up, L.wUp.address, xb, F, E, T); // up [T][F]
      k.swiglu(gate, gate, up, T * F); // gate = silu(gate)·up
      k.matmul(L.wDown.type, xb, L.wDown.address, gate, E, F, T); // xb [T][E]
      k.add(x, x, xb, T * E); // x += ffn
    }
    if (!computeLogits) return;

    // Final norm and LM head, last token only.
    const last = x + (T - 1) * E * 4; // [E]
    k.rmsnorm(xb, last, w.outputNorm.address, E, 1, c.rmsEpsilon); // xb [1][E]
    const out = w.output;
    k.matmul(out.type, this.#logits.address, out.address, xb, out.rowCount, E, 1); // [V]
  }

  /** Frees every buffer, the kernels and the file mapping. Later calls throw. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsKernels) this.kernels.close();
    for (const b of this.#buffers) b.free();
    this.#file?.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
