/**
 * Runs token sequences through an `embeddings` {@linkcode Context} and pools
 * them: many sequences decoded together, one per KV-cache slot, each whole in
 * one batch (a bidirectional model's tokens see the ones after them).
 *
 * @example
 * ```ts
 * import { Context, Model } from "../model/mod.ts";
 * import { embedSequences } from "./embed.ts";
 * const model = Model.load("models/all-MiniLM-L6-v2-F32.gguf");
 * const context = new Context(model, { slots: 4, contextSize: 512, embeddings: true, cacheType: "f32" });
 * const [a, b] = embedSequences(context, [[101, 7592, 102], [101, 2088, 102]], "mean", 2);
 * context.close();
 * model.close();
 * ```
 *
 * @module
 */
import { Batch } from "../model/batch.ts";
import type { Context, ContextOptions } from "../model/context.ts";
import { type EmbeddingPooling, normalize, pool } from "./pooling.ts";

/**
 * The embeddings of `sequences` (token ids), pooled with `pooling` and
 * normalized with `p` ({@linkcode normalize}); for `none`, each sequence's
 * per-token vectors. Throws `RangeError` for an empty sequence, one longer
 * than the context's slot (naming the limit), or an id outside the
 * vocabulary (before anything runs).
 */
export function embedSequences(
  context: Context,
  sequences: readonly ArrayLike<number>[],
  pooling: EmbeddingPooling,
  p: number,
): Float32Array[][] {
  if (!context.embeddings) throw new Error("embedSequences needs an embeddings context");
  const limit = Math.min(context.contextSize, context.batchSize);
  const V = context.model.config.vocabSize;
  sequences.forEach((s, i) => {
    if (s.length === 0) throw new RangeError(`input ${i} is empty (no tokens)`);
    if (s.length > limit) {
      throw new RangeError(
        `input ${i} has ${s.length} tokens, more than the context's ${limit} per input ` +
          "(too large to process)",
      );
    }
    for (let j = 0; j < s.length; j++) {
      const id = s[j];
      if (!Number.isInteger(id) || id < 0 || id >= V) {
        throw new RangeError(`input ${i}: token id ${id} is outside the vocabulary [0, ${V})`);
      }
    }
  });
  const E = context.model.config.embeddingLength;
  const slots = context.cache.slotCount;
  const batch = new Batch(context.batchSize);
  const out: Float32Array[][] = [];
  let next = 0;
  while (next < sequences.length) {
    batch.clear();
    const members: [index: number, first: number, count: number][] = [];
    // As llama-embedding: add sequences while they fit the batch and a slot is free.
    while (
      next < sequences.length && members.length < slots &&
      batch.count + sequences[next].length <= batch.capacity
    ) {
      const s = sequences[next], slot = members.length;
      context.cache.truncate(slot, 0);
      members.push([next, batch.count, s.length]);
      for (let j = 0; j < s.length; j++) batch.add(s[j], j, slot, false);
      next++;
    }
    context.decode(batch);
    const hidden = context.hiddenStates();
    for (const [index, first, count] of members) {
      out[index] = pool(hidden, E, first, count, pooling).map((v) => normalize(v, p));
    }
  }
  return out;
}

/** How {@linkcode embedTexts} pools and normalizes. */
export interface EmbedOptions {
  /** Default: the model's `pooling_type`, or `mean` when it declares none (a decoder). */
  pooling?: EmbeddingPooling;
  /** `common_embd_normalize`'s p: -1 none, 0 max-abs (int16), 2 Euclidean (default), p-norm. */
  normalize?: number;
}

/** Sizes of an embeddings context for `model`: whole sequences of up to `contextSize` tokens. */
export function embeddingContextOptions(
  model: Context["model"],
  options: Pick<
    ContextOptions,
    "contextSize" | "threads" | "cacheType" | "cacheTypeK" | "cacheTypeV"
  >,
): ContextOptions {
  const c = model.config;
  const contextSize = options.contextSize === undefined || options.contextSize === 0
    ? Math.min(c.contextLength, options.contextSize === 0 ? c.contextLength : 4096)
    : Math.min(options.contextSize, c.contextLength);
  // About 4096 positions of cache in all (at least one slot), as a batch of llama-embedding.
  const slots = Math.max(1, Math.min(16, Math.floor(4096 / contextSize)));
  return {
    slots,
    contextSize,
    batchSize: Math.max(contextSize, Math.min(2048, slots * contextSize)),
    maxLogits: 1,
    // llama.cpp runs an encoder without a KV cache, in F32; a decoder through its cache.
    cacheType: c.causal ? options.cacheType : "f32",
    cacheTypeK: c.causal ? options.cacheTypeK : undefined,
    cacheTypeV: c.causal ? options.cacheTypeV : undefined,
    threads: options.threads,
    embeddings: true,
  };
}

/** The pooling `options` ask for, checked (the model's when not given). */
export function resolvePooling(
  model: Context["model"],
  pooling: string | undefined,
): EmbeddingPooling {
  const p = pooling ?? (model.config.poolingType === "none" ? "mean" : model.config.poolingType);
  if (p === "rank") {
    throw new RangeError(`pooling "rank" (a reranker's classifier head) is not supported`);
  }
  if (!["none", "mean", "cls", "last"].includes(p)) {
    throw new RangeError(`pooling must be none, mean, cls or last, got "${p}"`);
  }
  return p as EmbeddingPooling;
}
