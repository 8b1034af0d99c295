/**
 * The server's {@linkcode Engine} over the engine core: a {@linkcode Model}
 * and one {@linkcode Context} whose KV cache holds one slot per parallel
 * sequence. A scheduler batch becomes one `Context.decode`.
 *
 * @example
 * ```ts ignore
 * import { ContextEngine } from "./context_engine.ts";
 * import { EngineBatch } from "./engine.ts";
 * const engine = ContextEngine.load("model.gguf", { slots: 4, contextSize: 1024 });
 * const batch = new EngineBatch(engine.batchSize);
 * batch.add(1, 0, 0, true);
 * const logits = engine.decode(batch); // [1][vocab]
 * engine.close();
 * ```
 *
 * @module
 */
import type { Gguf } from "../gguf/reader.ts";
import { Batch, Context, Model } from "../model/mod.ts";
import type { Native } from "../native/native.ts";
import type { Engine, EngineBatch } from "./engine.ts";

/** Options of {@linkcode ContextEngine.load}. */
export interface ContextEngineOptions {
  /** Sequences sharing the KV cache; default 4. */
  slots?: number;
  /** Positions per slot; 0 or absent = min(model context, 4096). */
  contextSize?: number;
  /** Most tokens per decode; default 512. */
  batchSize?: number;
  /** Kernel threads; 0 (default) = every CPU. */
  threads?: number;
  /** KV cache type; default "f16". */
  cacheType?: "f16" | "f32";
  native?: Native;
  /** Repack matmul weights at load (default true; see `Model.load`). */
  repack?: boolean;
}

/** A model and a multi-slot context, as the scheduler drives them. */
export class ContextEngine implements Engine {
  readonly model: Model;
  readonly context: Context;
  readonly vocabSize: number;
  readonly slotCount: number;
  readonly contextSize: number;
  readonly batchSize: number;
  readonly kvCacheBytes: number;
  readonly #batch: Batch;

  /** Maps `path` and creates the context; throws the loader's error for a bad file. */
  static load(path: string, options: ContextEngineOptions = {}): ContextEngine {
    const model = Model.load(path, { native: options.native, repack: options.repack });
    try {
      return new ContextEngine(model, options);
    } catch (error) {
      model.close();
      throw error;
    }
  }

  private constructor(model: Model, o: ContextEngineOptions) {
    this.model = model;
    const slots = o.slots ?? 4;
    this.context = new Context(model, {
      slots,
      contextSize: o.contextSize || undefined,
      batchSize: o.batchSize,
      maxLogits: slots, // a batch wants at most one row per sequence
      threads: o.threads,
      cacheType: o.cacheType,
    });
    this.vocabSize = model.config.vocabSize;
    this.slotCount = slots;
    this.contextSize = this.context.contextSize;
    this.batchSize = this.context.batchSize;
    this.kvCacheBytes = this.context.memory.kvCacheBytes;
    this.#batch = new Batch(this.batchSize);
  }

  /** The model's parsed GGUF (tokenizer, chat template). */
  get gguf(): Gguf {
    return this.model.gguf;
  }

  truncate(slot: number, length: number): void {
    this.context.cache.truncate(slot, length);
  }

  decode(batch: EngineBatch): Float32Array {
    const b = this.#batch;
    b.clear();
    for (let i = 0; i < batch.count; i++) {
      b.add(batch.tokens[i], batch.positions[i], batch.slots[i], batch.wantsLogits[i] === 1);
    }
    this.context.decode(b);
    return this.context.logitsBlock(); // a view: the scheduler samples before the next decode
  }

  close(): void {
    this.context.close();
    this.model.close();
  }
}
