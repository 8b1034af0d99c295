/**
 * A Llama-family model whose forward pass runs a batch of tokens from several
 * sequences at once over a KV cache of `slots × layers × positions`: every
 * matmul is one GEMM over the whole batch; RoPE, the KV store and attention
 * take each token's position and slot. Logits are computed only for
 * the entries that want them.
 *
 * This is the server's {@linkcode Engine} until the engine-core
 * Context/Batch/KvCache API replaces it; it reuses the model layer's config,
 * weight binding and kernels unchanged.
 *
 * @example
 * ```ts ignore
 * import { BatchedLlama } from "./batched_model.ts";
 * import { EngineBatch } from "./engine.ts";
 * const engine = BatchedLlama.load("model.gguf", { slots: 4, contextSize: 1024 });
 * const batch = new EngineBatch(engine.batchSize);
 * batch.add(1, 0, 0, true);
 * const logits = engine.decode(batch); // [1][vocab]
 * engine.close();
 * ```
 *
 * @module
 */
import { type Gguf, parseGguf } from "../gguf/reader.ts";
import { computableTypes, Kernels } from "../kernels/mod.ts";
import { type LlamaConfig, readLlamaConfig } from "../model/config.ts";
import type { ModelKernels } from "../model/kernels.ts";
import { bindLlamaWeights, type LlamaWeights } from "../model/weights.ts";
import { DEFAULT_CONTEXT_MAX } from "../model/model.ts";
import type { MappedFile, Native, NativeBuffer } from "../native/native.ts";
import { loadNative } from "../native/native.ts";
import type { Engine, EngineBatch } from "./engine.ts";

/** Options of {@linkcode BatchedLlama.load}. */
export interface BatchedLlamaOptions {
  /** Sequences sharing the KV cache; default 4. */
  slots?: number;
  /** Positions per slot; default min(model context, 4096). */
  contextSize?: number;
  /** Most tokens per decode; default 512 (as llama.cpp's `-b`). */
  batchSize?: number;
  /** Kernel threads; 0 (default) = every CPU. */
  threads?: number;
  /** KV cache type; default "f16". */
  cacheType?: "f16" | "f32";
  /** The native library; default {@linkcode loadNative}. */
  native?: Native;
}

/** Upper bound on slots: each costs a full-context KV cache. */
export const MAX_SLOTS = 256;

function checkInteger(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${value}`);
  }
  return value;
}

/** A multi-sequence Llama forward pass. */
export class BatchedLlama implements Engine {
  readonly config: LlamaConfig;
  readonly gguf: Gguf;
  readonly weights: LlamaWeights;
  readonly slotCount: number;
  readonly contextSize: number;
  readonly batchSize: number;
  readonly vocabSize: number;
  readonly kvCacheBytes: number;
  readonly kernels: ModelKernels;
  readonly #native: Native;
  readonly #file: MappedFile;
  readonly #buffers: NativeBuffer[] = [];
  readonly #x: NativeBuffer;
  readonly #xb: NativeBuffer;
  readonly #q: NativeBuffer;
  readonly #k: NativeBuffer;
  readonly #v: NativeBuffer;
  readonly #att: NativeBuffer;
  readonly #gate: NativeBuffer;
  readonly #up: NativeBuffer;
  readonly #ids: NativeBuffer;
  readonly #idsView: Int32Array;
  readonly #positions: NativeBuffer; // [batch] i32
  readonly #positionsView: Int32Array;
  readonly #slots: NativeBuffer; // [batch] i32
  readonly #slotsView: Int32Array;
  readonly #logits: NativeBuffer;
  readonly #logitsView: Float32Array;
  readonly #kCache: NativeBuffer; // [layers][slots][ctx][KV]
  readonly #vCache: NativeBuffer;
  readonly #cacheType: 0 | 1;
  #closed = false;

  /** Maps the GGUF file at `path` and allocates every buffer once. */
  static load(path: string, options: BatchedLlamaOptions = {}): BatchedLlama {
    const native = options.native ?? loadNative();
    const file = native.mapFile(path);
    try {
      return new BatchedLlama(native, file, parseGguf(file.bytes), options);
    } catch (error) {
      file.close();
      throw error;
    }
  }

  private constructor(native: Native, file: MappedFile, gguf: Gguf, o: BatchedLlamaOptions) {
    this.#native = native;
    this.#file = file;
    this.gguf = gguf;
    const c = readLlamaConfig(gguf);
    this.config = c;
    this.weights = bindLlamaWeights(gguf, c, file.address, computableTypes(native));
    this.slotCount = checkInteger("slots", o.slots ?? 4, 1, MAX_SLOTS);
    this.contextSize = checkInteger(
      "contextSize",
      o.contextSize || Math.min(c.contextLength, DEFAULT_CONTEXT_MAX),
      1,
      c.contextLength,
    );
    this.batchSize = checkInteger("batchSize", o.batchSize ?? 512, 1, 1 << 16);
    this.vocabSize = c.vocabSize;
    const threads = checkInteger("threads", o.threads ?? 0, 0, 1024);
    this.#cacheType = (o.cacheType ?? "f16") === "f16" ? 1 : 0;
    const B = this.batchSize, E = c.embeddingLength, F = c.feedForwardLength;
    const Q = c.headCount * c.headDim, KV = c.headCountKv * c.headDim;
    const cacheBytes = this.slotCount * c.blockCount * this.contextSize * KV *
      (this.#cacheType === 1 ? 2 : 4);
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
      // One logits row per slot: a batch wants at most one per sequence.
      this.#logits = this.#alloc(this.slotCount * c.vocabSize * 4);
      this.#kCache = this.#alloc(cacheBytes);
      this.#vCache = this.#alloc(cacheBytes);
      this.#idsView = new Int32Array(this.#ids.buffer);
      this.#positionsView = new Int32Array(this.#positions.buffer);
      this.#slotsView = new Int32Array(this.#slots.buffer);
      this.#logitsView = new Float32Array(this.#logits.buffer);
      this.kernels = new Kernels(native, threads);
      this.kernels.reserve?.(B, Math.max(E, Q, F));
    } catch (error) {
      for (const b of this.#buffers) b.free();
      throw error;
    }
    this.kvCacheBytes = 2 * cacheBytes;
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

  /** Checks the batch: ids in the vocabulary, slots and positions in range, logits rows. */
  #check(batch: EngineBatch): void {
    const n = batch.count;
    if (n < 1 || n > this.batchSize) {
      throw new RangeError(`a batch holds 1 to ${this.batchSize} tokens, got ${n}`);
    }
    if (batch.logitsCount > this.slotCount) {
      throw new RangeError(`at most ${this.slotCount} logits rows per batch`);
    }
    for (let i = 0; i < n; i++) {
      const id = batch.tokens[i], s = batch.slots[i], p = batch.positions[i];
      if (id < 0 || id >= this.vocabSize) {
        throw new RangeError(`token id ${id} is outside the vocabulary [0, ${this.vocabSize})`);
      }
      if (s < 0 || s >= this.slotCount) throw new RangeError(`slot ${s} out of range`);
      if (p < 0 || p >= this.contextSize) {
        throw new RangeError(`position ${p} does not fit the context of ${this.contextSize}`);
      }
    }
  }

  /** Nothing to do: a position written again replaces what the slot held there. */
  truncate(_slot: number, _length: number): void {}

  /** Runs `batch`; returns `[logitsCount][vocab]` logits (a view valid until the next call). */
  decode(batch: EngineBatch): Float32Array {
    if (this.#closed) throw new Error("BatchedLlama used after close");
    this.#check(batch);
    for (let i = 0; i < batch.count; i++) {
      this.#idsView[i] = batch.tokens[i];
      this.#positionsView[i] = batch.positions[i];
      this.#slotsView[i] = batch.slots[i];
    }
    const k = this.kernels;
    k.beginGraph?.();
    try {
      this.#forward(batch);
    } catch (error) {
      k.cancelGraph?.();
      throw error;
    }
    k.endGraph?.();
    return this.#logitsView.subarray(0, batch.logitsCount * this.vocabSize);
  }

  #forward(batch: EngineBatch): void {
    const c = this.config, w = this.weights, k = this.kernels;
    const T = batch.count;
    const E = c.embeddingLength, H = c.headCount, Hkv = c.headCountKv, D = c.headDim;
    const Q = H * D, KV = Hkv * D, F = c.feedForwardLength;
    const ct = this.#cacheType;
    const S = this.slotCount, ctx = this.contextSize;
    const layerBytes = S * ctx * KV * (ct === 1 ? 2 : 4);
    const freqs = w.ropeFreqs?.address ?? 0;
    const scale = 1 / Math.sqrt(D);
    const x = this.#x.address, xb = this.#xb.address;
    const q = this.#q.address, kk = this.#k.address, v = this.#v.address;
    const att = this.#att.address, gate = this.#gate.address, up = this.#up.address;
    const pos = this.#positions.address, slots = this.#slots.address;
    const emb = w.tokenEmbedding;
    k.getRows(emb.type, x, emb.address, this.#ids.address, T, E, emb.rowCount);
    for (let l = 0; l < c.blockCount; l++) {
      const L = w.layers[l];
      const kCache = this.#kCache.address + l * layerBytes; // [slots][ctx][KV]
      const vCache = this.#vCache.address + l * layerBytes;
      k.rmsnorm(xb, x, L.attnNorm.address, E, T, c.rmsEpsilon);
      k.matmul(L.wq.type, q, L.wq.address, xb, Q, E, T);
      k.matmul(L.wk.type, kk, L.wk.address, xb, KV, E, T);
      k.matmul(L.wv.type, v, L.wv.address, xb, KV, E, T);
      // Each token at its own position, in its own slot's rows of the cache.
      k.rope(q, T, H, D, c.ropeDimensionCount, pos, c.ropeFreqBase, freqs, false);
      k.rope(kk, T, Hkv, D, c.ropeDimensionCount, pos, c.ropeFreqBase, freqs, false);
      k.storeKv(ct, kCache, kk, pos, slots, T, KV, ctx, S);
      k.storeKv(ct, vCache, v, pos, slots, T, KV, ctx, S);
      k.attention(ct, att, q, kCache, vCache, T, pos, slots, H, Hkv, D, scale, ctx, 0, S);
      k.matmul(L.wo.type, xb, L.wo.address, att, E, Q, T);
      k.add(x, x, xb, T * E);
      k.rmsnorm(xb, x, L.ffnNorm.address, E, T, c.rmsEpsilon);
      k.matmul(L.wGate.type, gate, L.wGate.address, xb, F, E, T);
      k.matmul(L.wUp.type, up, L.wUp.address, xb, F, E, T);
      k.swiglu(gate, gate, up, T * F);
      k.matmul(L.wDown.type, xb, L.wDown.address, gate, E, F, T);
      k.add(x, x, xb, T * E);
    }
    // Final norm of the wanted rows, packed, then one LM-head matmul over them.
    let rows = 0;
    for (let i = 0; i < T; i++) {
      if (batch.wantsLogits[i] === 0) continue;
      k.rmsnorm(xb + rows * E * 4, x + i * E * 4, w.outputNorm.address, E, 1, c.rmsEpsilon);
      rows++;
    }
    if (rows === 0) return;
    const out = w.output;
    k.matmul(out.type, this.#logits.address, out.address, xb, out.rowCount, E, rows);
  }

  /** Frees every buffer, the kernels and the file mapping. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.kernels.close();
    for (const b of this.#buffers) b.free();
    this.#file.close();
  }
}
