/**
 * A context runs a {@linkcode Model}: it owns the kernels (thread pool), a
 * {@linkcode KvCache} of `slots` sequences, and every activation buffer,
 * sized at creation for the largest batch and the most logits rows, so
 * {@linkcode Context.decode} allocates nothing and makes one native graph
 * call per batch.
 *
 * @example Two sequences decoded in one batch (what a server does)
 * ```ts
 * import { Batch, Context, Model } from "./mod.ts";
 * const model = Model.load("stories260K.gguf");
 * const context = new Context(model, { slots: 2, contextSize: 256, threads: 1 });
 * const batch = new Batch(context.batchSize);
 * [1, 403, 407].forEach((id, i) => batch.add(id, i, 0, i === 2)); // prompt of slot 0
 * [1, 261].forEach((id, i) => batch.add(id, i, 1, i === 1)); // prompt of slot 1
 * context.decode(batch); // 2 logits rows, in batch order
 * const first = context.logits(0), second = context.logits(1);
 * batch.clear();
 * batch.add(9, 3, 0, true); // next token of slot 0 at position 3
 * batch.add(7, 2, 1, true); // next token of slot 1 at position 2
 * context.decode(batch);
 * context.close();
 * model.close();
 * ```
 *
 * @module
 */
import { Kernels } from "../kernels/mod.ts";
import type { Native, NativeBuffer } from "../native/native.ts";
import { Batch } from "./batch.ts";
import { ModelError } from "./errors.ts";
import { forward, type ForwardBuffers, missingOps } from "./forward.ts";
import type { ForwardOps } from "./ops.ts";
import { type CacheType, KvCache } from "./kv_cache.ts";
import { tagged } from "./_tagged.ts";
import type { Model } from "./model.ts";

/** Creation-time choices of a {@linkcode Context}. */
export interface ContextOptions {
  /** Sequences (KV-cache slots); default 1. */
  slots?: number;
  /** Positions per slot; default min(model context, 4096); 0 = the model's training context. */
  contextSize?: number;
  /** Most tokens per {@linkcode Context.decode}; default 512 (at most `slots × contextSize`). */
  batchSize?: number;
  /** Most tokens per batch that want logits; default `slots`. */
  maxLogits?: number;
  /** KV cache type of K and V; default `"f16"` (as llama.cpp). */
  cacheType?: CacheType;
  /** K's cache type (llama.cpp's `-ctk`); default `cacheType`. */
  cacheTypeK?: CacheType;
  /** V's cache type (llama.cpp's `-ctv`); default `cacheType`. */
  cacheTypeV?: CacheType;
  /** Kernel threads; 0 (default) = every CPU. */
  threads?: number;
  /** The kernels to run on (closed by the caller), or a factory (closed by the context). */
  kernels?: ForwardOps | ((native: Native, threads: number) => ForwardOps);
  /**
   * Embeddings: each decode leaves every token's final hidden state in
   * {@linkcode Context.hiddenStates} (after the output norm, as llama.cpp's
   * `t_embd`) and computes no logits. Default false.
   */
  embeddings?: boolean;
}

/** Bytes a context and its model hold, by kind. */
export interface ModelMemory {
  /** Tensor bytes in the file mapping. */
  readonly weightsBytes: number;
  /** Both KV caches, every layer and slot. */
  readonly kvCacheBytes: number;
  /** Activations, logits and scratch. */
  readonly scratchBytes: number;
}

/** The default for `contextSize` is at most this (a 4096-position F16 cache of a 1B model is 128 MiB). */
export const DEFAULT_CONTEXT_MAX = 4096;
/** The default batch (llama.cpp's default `n_batch`). */
export const DEFAULT_BATCH_SIZE = 512;
/** Most slots a context holds (each slot's history is a JS array; a server's parallel limit). */
export const SLOT_COUNT_MAX = 1024;

function nativeKernels(native: Native, threads: number): ForwardOps {
  return new Kernels(native, threads);
}

function positiveInteger(name: string, value: number, max: number): number {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new RangeError(`${name} must be an integer in [1, ${max}], got ${value}`);
  }
  return value;
}

/** Kernels, KV cache and buffers for running a model; not thread-safe. */
export class Context {
  readonly model: Model;
  readonly cache: KvCache;
  readonly kernels: ForwardOps;
  /** Positions per slot. */
  readonly contextSize: number;
  /** Most tokens per decode. */
  readonly batchSize: number;
  /** Most logits rows per decode. */
  readonly maxLogits: number;
  readonly memory: ModelMemory;
  /** True when decodes compute hidden states (embeddings) instead of logits. */
  readonly embeddings: boolean;
  readonly #ownsKernels: boolean;
  readonly #attendTo: Int32Array;
  readonly #hidden: Float32Array;
  #hiddenCount = 0;
  readonly #native: Native;
  readonly #buffers: NativeBuffer[] = [];
  readonly #b: ForwardBuffers;
  readonly #tokens: Int32Array;
  readonly #positions: Int32Array;
  readonly #slots: Int32Array;
  readonly #outRows: Int32Array;
  readonly #logitsRows: Float32Array[];
  /** `#logitsBlocks[n]`: rows [0, n) as one view (made once, on first use). */
  readonly #logitsBlocks: Float32Array[] = [];
  readonly #logitsBuffer: ArrayBuffer;
  /** Per slot: the next position a batch token of that slot must have. */
  readonly #next: Int32Array;
  #logitsCount = 0;
  #closed = false;
  /** The batch of {@linkcode forward} (made on first use). */
  #forwardBatch: Batch | undefined;

  constructor(model: Model, options: ContextOptions = {}) {
    if (model.closed) throw new Error("Context over a closed Model");
    const c = model.config;
    this.model = model;
    const native = model.native;
    this.#native = native;
    const slots = positiveInteger("slots", options.slots ?? 1, SLOT_COUNT_MAX);
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
      slots * this.contextSize,
    );
    this.maxLogits = Math.min(
      positiveInteger("maxLogits", options.maxLogits ?? slots, 1 << 16),
      this.batchSize,
    );
    const threads = options.threads ?? 0;
    const threadCountMax = native.limits.threadCountMax;
    if (!Number.isInteger(threads) || threads < 0 || threads > threadCountMax) {
      throw new RangeError(`threads must be an integer in [0, ${threadCountMax}], got ${threads}`);
    }
    this.embeddings = options.embeddings ?? false;

    const B = this.batchSize, R = this.maxLogits;
    const E = c.embeddingLength, H = c.headCount, Hkv = c.headCountKv, D = c.headDim;
    const Q = H * D, KV = Hkv * D, F = c.feedForwardLength, V = c.vocabSize;
    const w = model.weights;
    const fusedQkv = w.layers.some((l) => l.wqkv !== undefined);
    const fusedGateUp = w.layers.some((l) => l.wGate === undefined);
    this.cache = new KvCache(native, { layers: c.blockCount, kvDim: KV, headDim: D }, {
      slots,
      slotRows: this.contextSize,
      cacheType: options.cacheType,
      cacheTypeK: options.cacheTypeK,
      cacheTypeV: options.cacheTypeV,
      windows: model.layerWindows,
      batchSize: this.batchSize,
    });
    try {
      const f32 = (n: number) => this.#alloc(n * 4).address;
      const i32 = (n: number, fill?: (i: number) => number) => {
        const buffer = this.#alloc(n * 4);
        const view = new Int32Array(buffer.buffer);
        if (fill) { for (let i = 0; i < n; i++) view[i] = fill(i); }
        return { address: buffer.address, view };
      };
      const tokens = i32(B), positions = i32(B), slotIds = i32(B), outRows = i32(R);
      const attendTo = i32(B);
      const x = this.#alloc(B * E * 4);
      const heads = H + 2 * Hkv;
      // Rows of the fused outputs, viewed as [B·heads][D] and [2B][F] (fixed: they
      // depend on the token index only).
      const qkvIds = fusedQkv
        ? [
          i32(B * H, (i) => Math.floor(i / H) * heads + (i % H)).address,
          i32(B * Hkv, (i) => Math.floor(i / Hkv) * heads + H + (i % Hkv)).address,
          i32(B * Hkv, (i) => Math.floor(i / Hkv) * heads + H + Hkv + (i % Hkv)).address,
        ] as const
        : [0, 0, 0] as const;
      const gateUpIds = fusedGateUp
        ? [i32(B, (i) => 2 * i).address, i32(B, (i) => 2 * i + 1).address] as const
        : [0, 0] as const;
      const logits = this.#alloc(R * V * 4);
      this.#b = tagged({
        x: x.address,
        xb: f32(B * E),
        q: f32(B * Q),
        k: f32(B * KV),
        v: f32(B * KV),
        att: f32(B * Q),
        gate: f32(B * F),
        up: f32(B * F),
        qkv: fusedQkv ? f32(B * (Q + 2 * KV)) : 0,
        qkvIds,
        gateUp: fusedGateUp ? f32(B * 2 * F) : 0,
        gateUpIds,
        tokens: tokens.address,
        positions: positions.address,
        slots: slotIds.address,
        attendTo: attendTo.address,
        outRows: outRows.address,
        xOut: f32(R * E),
        logits: logits.address,
      });
      this.#tokens = tokens.view;
      this.#positions = positions.view;
      this.#slots = slotIds.view;
      this.#outRows = outRows.view;
      this.#attendTo = attendTo.view;
      this.#hidden = new Float32Array(x.buffer, 0, B * E);
      this.#logitsBuffer = logits.buffer;
      this.#logitsRows = Array.from(
        { length: R },
        (_, r) => new Float32Array(logits.buffer, r * V * 4, V),
      );
      this.#next = new Int32Array(slots);
      const given = options.kernels ?? nativeKernels;
      this.#ownsKernels = typeof given === "function";
      this.kernels = typeof given === "function" ? given(native, threads) : given;
      const missing = missingOps(model, this.kernels);
      if (missing !== undefined) {
        if (this.#ownsKernels) this.kernels.close();
        throw new ModelError(
          `architecture "${c.architecture}" needs kernel ops these kernels lack: ${missing}`,
        );
      }
      if ((this.cache.kRotation > 0 || this.cache.vRotation > 0) && !this.kernels.hadamard) {
        if (this.#ownsKernels) this.kernels.close();
        throw new ModelError(
          `a ${this.cache.cacheType} KV cache needs the Hadamard rotation (hadamard), which these kernels lack`,
        );
      }
      if (model.repackedBytes > 0 && !(this.kernels instanceof Kernels)) {
        if (this.#ownsKernels) this.kernels.close();
        throw new ModelError(
          "this model's weights are in the library's interleaved layouts: run it on the library's kernels, or load it with repack: false",
        );
      }
      this.kernels.reserve?.(B, Math.max(E, Q, F));
    } catch (error) {
      for (const b of this.#buffers) b.free();
      this.cache.free();
      throw error;
    }
    this.memory = {
      weightsBytes: w.sizeBytes,
      kvCacheBytes: this.cache.byteLength,
      scratchBytes: this.#buffers.reduce((s, b) => s + b.byteLength, 0),
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

  /** Logits rows the last {@linkcode decode} computed. */
  get logitsCount(): number {
    return this.#logitsCount;
  }

  /**
   * Runs `batch` through the model: stores each token's K/V in its slot at
   * its position, and computes the logits of the tokens that want them.
   * Returns the number of logits rows; row `r` (the `r`-th token wanting
   * logits, in batch order) is {@linkcode logits}`(r)`, valid until the next
   * decode.
   *
   * Each token of a slot must continue that slot's history: its position is
   * the slot's length plus the tokens of that slot before it in the batch.
   * Throws `RangeError` (and changes nothing) for an id outside the
   * vocabulary, an unknown slot, a position that does not continue its
   * slot or does not fit the context, too many tokens or logits rows.
   *
   * With `alone`, each token's attention runs in the order of a token
   * decoded alone, though its slot has others in the batch (llama.cpp's
   * order for a sequence's batch otherwise): a speculative step verifying
   * drafted tokens then gives the logits of a run without speculation,
   * wherever the matmuls do too (`probeVerifyTokens`).
   */
  decode(batch: Batch, alone = false): number {
    if (this.#closed) throw new Error("Context used after close");
    if (this.model.closed) throw new Error("Context used after its Model was closed");
    const n = batch.count;
    if (n === 0) throw new RangeError("decode needs at least one token");
    if (n > this.batchSize) {
      throw new RangeError(`the batch has ${n} tokens, more than the context's ${this.batchSize}`);
    }
    const cache = this.cache;
    const V = this.model.config.vocabSize;
    const next = this.#next;
    for (let s = 0; s < next.length; s++) next[s] = cache.length(s);
    let R = 0;
    for (let i = 0; i < n; i++) {
      const id = batch.tokens[i], slot = batch.slots[i], pos = batch.positions[i];
      if (id < 0 || id >= V) {
        throw new RangeError(`token id ${id} is outside the vocabulary [0, ${V})`);
      }
      if (slot < 0 || slot >= next.length) {
        throw new RangeError(`slot ${slot} is outside [0, ${next.length})`);
      }
      if (pos !== next[slot]) {
        throw new RangeError(
          `token ${i} of slot ${slot} has position ${pos}; the slot continues at ${next[slot]}`,
        );
      }
      if (pos >= this.contextSize) {
        throw new RangeError(`position ${pos} does not fit the context of ${this.contextSize}`);
      }
      next[slot] = pos + 1;
      if (batch.wantsLogits[i] !== 0) {
        if (R >= this.maxLogits) {
          throw new RangeError(`the batch wants more than ${this.maxLogits} logits rows`);
        }
        this.#outRows[R++] = i;
      }
    }
    const causal = this.model.config.causal;
    if (!causal) {
      // Bidirectional: each sequence whole in one batch (its tokens see the ones after them).
      for (let i = 0; i < n; i++) {
        const slot = batch.slots[i];
        if (cache.length(slot) !== 0) {
          throw new RangeError(
            `slot ${slot} already holds ${cache.length(slot)} tokens: a bidirectional model ` +
              `runs each sequence whole, in one batch (truncate the slot first)`,
          );
        }
        this.#attendTo[i] = next[slot] - 1;
      }
    }
    if (this.embeddings) R = 0;
    for (let i = 0; i < n; i++) { // a loop, not `set(subarray)`: no views allocated
      this.#tokens[i] = batch.tokens[i];
      this.#positions[i] = batch.positions[i];
      this.#slots[i] = batch.slots[i];
    }

    const k = this.kernels;
    this.#logitsCount = 0;
    this.#hiddenCount = 0;
    k.beginGraph?.();
    try {
      forward(k, this.model, cache, this.#b, n, R, this.#outRows[0], this.embeddings, alone);
    } catch (error) {
      k.cancelGraph?.();
      throw error;
    }
    k.endGraph?.();
    for (let i = 0; i < n; i++) cache.append(batch.slots[i], batch.tokens[i]);
    this.#logitsCount = R;
    if (this.embeddings) this.#hiddenCount = n;
    return R;
  }

  /**
   * In an `embeddings` context, the final hidden states of the last decode's
   * tokens, `[tokens][embedding]` in batch order: a view of native memory,
   * valid until the next decode.
   */
  hiddenStates(): Float32Array {
    if (!this.embeddings) {
      throw new Error("hiddenStates needs a context made with embeddings: true");
    }
    return this.#hidden.subarray(0, this.#hiddenCount * this.model.config.embeddingLength);
  }

  /**
   * Runs `tokens` on slot `slot` (default 0) at positions `posStart...`, in
   * batches, and returns the last token's logits: what a caller that wants
   * logits, not tokens, calls (tests, benchmarks, perplexity). The slot keeps
   * its first `posStart` tokens. Throws `RangeError` for an id outside the
   * vocabulary, positions past the context or past what the slot holds, or a
   * `posStart` a sliding-window ring can no longer continue from.
   */
  forward(tokens: ArrayLike<number>, posStart: number, slot = 0): Float32Array {
    if (this.#closed) throw new Error("Context used after close");
    const n = tokens.length;
    if (n === 0) throw new RangeError("forward needs at least one token");
    const cache = this.cache;
    if (!Number.isInteger(posStart) || posStart < 0 || posStart + n > this.contextSize) {
      throw new RangeError(
        `positions [${posStart}, ${posStart + n}) do not fit the context of ${this.contextSize}`,
      );
    }
    if (posStart > cache.length(slot)) {
      throw new RangeError(
        `position ${posStart} is past the ${cache.length(slot)} tokens run so far`,
      );
    }
    const V = this.model.config.vocabSize;
    for (let i = 0; i < n; i++) {
      const id = tokens[i];
      if (!Number.isInteger(id) || id < 0 || id >= V) {
        throw new RangeError(`token id ${id} is outside the vocabulary [0, ${V})`);
      }
    }
    if (cache.keepable(slot, posStart) !== posStart) {
      throw new RangeError(
        `cannot continue at position ${posStart}: the sliding-window layers' KV rings no longer ` +
          `hold the positions before it (run the sequence again from 0)`,
      );
    }
    cache.truncate(slot, posStart);
    const batch = this.#forwardBatch ??= new Batch(this.batchSize);
    for (let start = 0; start < n; start += batch.capacity) {
      const count = Math.min(batch.capacity, n - start);
      batch.clear();
      for (let i = 0; i < count; i++) {
        batch.add(tokens[start + i], posStart + start + i, slot, start + i === n - 1);
      }
      this.decode(batch);
    }
    return this.logits(0);
  }

  /** Logits row `row` of the last decode: a view of native memory, valid until the next decode. */
  logits(row: number): Float32Array {
    if (!(row >= 0 && row < this.#logitsCount)) {
      throw new RangeError(`logits row ${row} is outside [0, ${this.#logitsCount})`);
    }
    return this.#logitsRows[row];
  }

  /**
   * Every logits row of the last decode as one view `[logitsCount][vocab]`
   * (row `r` at `r × vocab`), of native memory, valid until the next decode:
   * what a caller sampling every row reads without copying.
   */
  logitsBlock(): Float32Array {
    const n = this.#logitsCount;
    return this.#logitsBlocks[n] ??= new Float32Array(
      this.#logitsBuffer,
      0,
      n * this.model.config.vocabSize,
    );
  }

  /** Frees the buffers, the KV cache and (when it made them) the kernels. Later calls throw. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsKernels) this.kernels.close();
    for (const b of this.#buffers) b.free();
    this.cache.free();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
