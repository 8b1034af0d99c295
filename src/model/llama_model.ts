/**
 * One sequence over a {@linkcode Model} and a one-slot {@linkcode Context}:
 * `forward(tokens, posStart)` runs tokens (in batches of `batchSize`) and
 * returns the last token's logits. The single-sequence shape the benchmarks
 * and tools use; generation and serving use `Context` directly.
 *
 * @example
 * ```ts
 * import { LlamaModel } from "./llama_model.ts";
 * const model = LlamaModel.load("stories260K.gguf");
 * const logits = model.forward([1, 403, 407], 0); // Float32Array [vocab]
 * model.close();
 * ```
 *
 * @module
 */
import { type Gguf, parseGguf } from "../gguf/reader.ts";
import type { MappedFile, Native } from "../native/native.ts";
import { loadNative } from "../native/native.ts";
import { Batch } from "./batch.ts";
import { Kernels } from "../kernels/mod.ts";
import type { ModelConfig } from "./config.ts";
import { Context, type ContextOptions, type ModelMemory } from "./context.ts";
import type { ForwardOps } from "./ops.ts";
import type { CacheType } from "./kv_cache.ts";
import { Model } from "./model.ts";
import type { ModelWeights } from "./weights.ts";

/** Load-time choices: a one-slot context's, and the native library. */
export interface ModelOptions extends Omit<ContextOptions, "slots" | "maxLogits"> {
  /** The native library; default {@linkcode loadNative}. */
  native?: Native;
  /**
   * Repack matmul weights at load (see {@linkcode Model.load}); default true
   * when the kernels are the library's own (`kernels` not given, or a
   * {@linkcode Kernels}), false for others (their matmuls read the file's layouts).
   */
  repack?: boolean;
}

/** A model with one sequence, ready to run. Not thread-safe. */
export class LlamaModel {
  /** The immutable model (config, architecture, weights). */
  readonly model: Model;
  /** The one-slot context (kernels, KV cache, buffers). */
  readonly context: Context;
  readonly #batch: Batch;
  #closed = false;

  /** Maps and loads the GGUF file at `path`. */
  static load(path: string, options: ModelOptions = {}): LlamaModel {
    const native = options.native ?? loadNative();
    const file = native.mapFile(path);
    let gguf: Gguf;
    try {
      gguf = parseGguf(file.bytes);
    } catch (error) {
      file.close();
      throw error;
    }
    return new LlamaModel(native, gguf, file.address, file, options);
  }

  /**
   * A model over an already parsed GGUF whose byte 0 is at native address
   * `base` (the caller keeps that memory alive; `file`, if given, is closed
   * by {@linkcode close}, or here when loading fails).
   */
  constructor(
    native: Native,
    gguf: Gguf,
    base: number,
    file: MappedFile | undefined,
    options: ModelOptions = {},
  ) {
    let model: Model | undefined;
    const { repack, ...contextOptions } = options;
    const own = contextOptions.kernels === undefined || contextOptions.kernels instanceof Kernels;
    try {
      model = new Model(native, gguf, base, file, undefined, { repack: repack ?? own });
      this.context = new Context(model, { ...contextOptions, slots: 1, maxLogits: 1 });
    } catch (error) {
      if (model) model.close();
      else file?.close();
      throw error;
    }
    this.model = model;
    this.#batch = new Batch(this.context.batchSize);
  }

  get config(): ModelConfig {
    return this.model.config;
  }
  get weights(): ModelWeights {
    return this.model.weights;
  }
  get gguf(): Gguf {
    return this.model.gguf;
  }
  /** KV cache positions. */
  get contextSize(): number {
    return this.context.contextSize;
  }
  /** Most tokens per forward batch. */
  get batchSize(): number {
    return this.context.batchSize;
  }
  get cacheType(): CacheType {
    return this.context.cache.cacheType;
  }
  get memory(): ModelMemory {
    return this.context.memory;
  }
  get kernels(): ForwardOps {
    return this.context.kernels;
  }
  /** Threads the kernels use. */
  get threadCount(): number {
    return this.context.threadCount;
  }

  /**
   * Runs `tokens` at positions `posStart...` (the sequence keeps its first
   * `posStart` tokens, so `posStart` is at most the tokens run so far) and
   * returns the logits of the last token: a view of native memory, valid
   * until the next call. Throws `RangeError` for an id outside the
   * vocabulary or positions past the context.
   */
  forward(tokens: ArrayLike<number>, posStart: number): Float32Array {
    if (this.#closed) throw new Error("LlamaModel used after close");
    const n = tokens.length;
    if (n === 0) throw new RangeError("forward needs at least one token");
    const cache = this.context.cache;
    const size = this.context.contextSize;
    if (!Number.isInteger(posStart) || posStart < 0 || posStart + n > size) {
      throw new RangeError(
        `positions [${posStart}, ${posStart + n}) do not fit the context of ${size}`,
      );
    }
    if (posStart > cache.length(0)) {
      throw new RangeError(`position ${posStart} is past the ${cache.length(0)} tokens run so far`);
    }
    const V = this.model.config.vocabSize;
    for (let i = 0; i < n; i++) {
      const id = tokens[i];
      if (!Number.isInteger(id) || id < 0 || id >= V) {
        throw new RangeError(`token id ${id} is outside the vocabulary [0, ${V})`);
      }
    }
    if (cache.truncate(0, posStart) !== posStart) {
      throw new RangeError(
        `cannot continue at position ${posStart}: the sliding-window layers' KV rings no longer ` +
          `hold the positions before it (run the sequence again from 0)`,
      );
    }
    const batch = this.#batch;
    for (let start = 0; start < n; start += batch.capacity) {
      const count = Math.min(batch.capacity, n - start);
      batch.clear();
      for (let i = 0; i < count; i++) {
        batch.add(tokens[start + i], posStart + start + i, 0, start + i === n - 1);
      }
      this.context.decode(batch);
    }
    return this.context.logits(0);
  }

  /** Frees the context (buffers, KV cache, kernels it made) and the model's file mapping. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.context.close();
    this.model.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
