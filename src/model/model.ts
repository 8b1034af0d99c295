/**
 * A loaded model: the file mapping, its config, its architecture's entry
 * and its bound weights. Immutable; any number of {@linkcode Context}s may
 * run it (each with its own buffers and KV cache).
 *
 * @example
 * ```ts
 * import { Model } from "./model.ts";
 * import { Context } from "./context.ts";
 * import { Batch } from "./batch.ts";
 * const model = Model.load("stories260K.gguf");
 * const context = new Context(model, { threads: 1 });
 * const batch = new Batch(8);
 * [1, 403, 407].forEach((id, pos) => batch.add(id, pos, 0, pos === 2));
 * context.decode(batch);
 * console.log(context.logits(0)); // Float32Array [vocab], the last token's
 * context.close();
 * model.close();
 * ```
 *
 * @module
 */
import { parseGguf } from "../gguf/reader.ts";
import type { Gguf } from "../gguf/reader.ts";
import { computableTypes } from "../kernels/mod.ts";
import type { MappedFile, Native } from "../native/native.ts";
import { loadNative } from "../native/native.ts";
import { type Architecture, architectureOf } from "./arch.ts";
import { type ModelConfig, readModelConfig } from "./config.ts";
import { bindWeights, type ModelWeights } from "./weights.ts";
import { repackWeights } from "./repack.ts";
import type { NativeBuffer } from "../native/native.ts";

/** How a model loads. */
export interface ModelLoadOptions {
  /** The native library (default: {@linkcode loadNative}). */
  readonly native?: Native;
  /**
   * Copy matmul weights into the library's interleaved layouts where this
   * machine has one, and the others (with a tied LM head) as they are into
   * huge-page memory (default true; same results, faster decoding, the
   * copied tensors' bytes in memory instead of the file's pages). False
   * computes from the file's pages. Interleaved weights run on the library's
   * kernels only ({@linkcode Context} refuses other kernels for them).
   */
  readonly repack?: boolean;
}

/** A model's mapping, config, architecture and weights. */
export class Model {
  readonly config: ModelConfig;
  readonly architecture: Architecture;
  readonly weights: ModelWeights;
  readonly gguf: Gguf;
  /** Each layer's attention window in positions (0 = the whole context). */
  readonly layerWindows: Int32Array;
  /** Each layer's RoPE frequency base (Gemma 3's sliding-window layers have their own). */
  readonly layerRopeBases: Float64Array;
  /** The native library the weights' addresses belong to. */
  readonly native: Native;
  /** Bytes of weights copied into interleaved layouts at load (0: none). */
  readonly repackedBytes: number;
  /** Bytes of weights copied as they are into huge-page memory at load (0: none). */
  readonly copiedBytes: number;
  readonly #file: MappedFile | undefined;
  readonly #buffers: readonly NativeBuffer[];
  #closed = false;

  /** Maps and parses the GGUF file at `path` (throws `GgufError` / `ModelError`). */
  static load(path: string, options: ModelLoadOptions = {}): Model {
    const native = options.native ?? loadNative();
    const file = native.mapFile(path);
    try {
      return new Model(native, parseGguf(file.bytes), file.address, file, undefined, options);
    } catch (error) {
      file.close();
      throw error;
    }
  }

  /**
   * A model over an already parsed GGUF whose byte 0 is at native address
   * `base` (the caller keeps that memory alive; `file`, if given, is closed
   * by {@linkcode close}). `architecture` overrides the table's entry for
   * `general.architecture` (to try an entry before it joins the table).
   * `options.repack` as for {@linkcode Model.load}.
   */
  constructor(
    native: Native,
    gguf: Gguf,
    base: number,
    file?: MappedFile,
    architecture?: Architecture,
    options: Pick<ModelLoadOptions, "repack"> = {},
  ) {
    this.native = native;
    this.gguf = gguf;
    this.#file = file;
    this.config = readModelConfig(gguf);
    this.architecture = architecture ?? architectureOf(this.config.architecture);
    const bound = bindWeights(gguf, this.config, base, computableTypes(native), this.architecture);
    const c = this.config;
    this.layerWindows = Int32Array.from(
      { length: c.blockCount },
      (_, l) => this.architecture.layerWindow(c, l),
    );
    this.layerRopeBases = Float64Array.from(
      { length: c.blockCount },
      (_, l) => this.architecture.layerRopeBase(c, l),
    );
    // Last: nothing after it throws, so its buffers are owned before any error.
    const repacked = options.repack === false
      ? { weights: bound, buffers: [], sizeBytes: 0, copiedBytes: 0 }
      : repackWeights(native, bound, { releasePages: file !== undefined });
    this.weights = repacked.weights;
    this.#buffers = repacked.buffers;
    this.repackedBytes = repacked.sizeBytes;
    this.copiedBytes = repacked.copiedBytes;
  }

  /** True once {@linkcode close} ran (the weights' addresses are gone). */
  get closed(): boolean {
    return this.#closed;
  }

  /** Unmaps the file. Close every context over the model first. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const b of this.#buffers) b.free();
    this.#file?.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
