/**
 * Whether a model's tokens depend on their batch: a probe that runs the same
 * tokens in batches of different shapes on two slots of a context and
 * compares the logits bit for bit. Several of the native matmuls sum a batch
 * of 8+ tokens in llama.cpp's tiled order and a smaller one in its vec_dot
 * order, or its repacked GEMM on the first tokens − tokens % 4; which ones do
 * depends on the weight types and layouts this machine's build picked. A
 * model that passes can batch decode tokens with prompt chunks of any size
 * (`Driver` with `mixed` batches) and still give each sequence the tokens it
 * gets alone; one that fails keeps the driver's strict steps.
 *
 * @example
 * ```ts
 * import { Context, Model } from "../model/mod.ts";
 * import { probeBatchInvariance } from "./invariance.ts";
 * const model = Model.load("../shared/testdata/models/stories260K.gguf");
 * const context = new Context(model, { slots: 2, contextSize: 64, threads: 1 });
 * console.log(probeBatchInvariance(context)); // true: F32 weights sum one way
 * context.close();
 * model.close();
 * ```
 *
 * @module
 */
import { Batch } from "../model/batch.ts";
import type { Context } from "../model/context.ts";

/** Tokens of the probe's prompt. */
const PROBE_TOKENS = 20;

function sameBits(a: Float32Array, b: Float32Array): boolean {
  const x = new Int32Array(a.buffer, a.byteOffset, a.length);
  const y = new Int32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/**
 * True when slots 0 and 1 of `context` give bit-identical logits for the same
 * tokens in batches of every shape the probe tries: a prompt in one batch or
 * split unevenly; a decode token alone, beside a prompt chunk of 16 tokens,
 * and beside 3 (a batch of 4). Empties slots 0 and 1 (call it before
 * serving). False when the context cannot run it (fewer than 2 slots, a
 * batch under 17 tokens, fewer than 2 logits rows, a context under 21).
 */
export function probeBatchInvariance(context: Context): boolean {
  const cache = context.cache;
  if (
    cache.slotCount < 2 || context.batchSize < 17 || context.maxLogits < 2 ||
    context.contextSize <= PROBE_TOKENS
  ) {
    return false;
  }
  const V = context.model.config.vocabSize;
  const ids = Array.from({ length: PROBE_TOKENS }, (_, i) => 1 + (i * 7919 + 13) % (V - 1));
  const batch = new Batch(context.batchSize);
  /** Runs `[token index range, slot]` parts as one batch; returns the logits of `want`. */
  const run = (parts: Array<[number, number, number]>, want?: [number, number]) => {
    batch.clear();
    for (const [from, to, slot] of parts) {
      for (let i = from; i < to; i++) {
        const last = want !== undefined && want[0] === slot && want[1] === i;
        batch.add(ids[i], i, slot, last);
      }
    }
    context.decode(batch);
    return want === undefined ? undefined : context.logits(0).slice();
  };
  try {
    cache.clear(0);
    cache.clear(1);
    // A prompt in one batch, and split after 3 tokens (a small batch, then 17).
    const whole = run([[0, PROBE_TOKENS, 0]], [0, PROBE_TOKENS - 1])!;
    run([[0, 3, 1]]);
    if (!sameBits(whole, run([[3, PROBE_TOKENS, 1]], [1, PROBE_TOKENS - 1])!)) return false;
    // Token 5 of slot 1 decoded alone, beside 16 prompt tokens of slot 0, beside 3.
    const decode = (beside: number) => {
      cache.clear(0);
      cache.clear(1);
      run([[0, 5, 1]]);
      const parts: Array<[number, number, number]> = beside > 0 ? [[0, beside, 0]] : [];
      return run([...parts, [5, 6, 1]], [1, 5])!;
    };
    const alone = decode(0);
    return sameBits(alone, decode(16)) && sameBits(alone, decode(3));
  } finally {
    cache.clear(0);
    cache.clear(1);
  }
}

/** Prompt tokens before the tokens {@linkcode probeVerifyTokens} checks. */
const VERIFY_PREFIX = 20;

/**
 * The largest `n <= max` such that a batch of 2, 3, ..., n tokens of one
 * sequence, decoded with `alone` attention (`Context.decode`), gives every
 * token the logits bits it gets decoded alone (at least 1): how many tokens
 * a speculative step may verify at once and keep the output of a run
 * without speculation. The matmuls' float order changes with the batch's
 * size (see {@linkcode probeBatchInvariance}), depending on the weight
 * types and this machine's kernels. Empties slot 0 (call it before
 * generating); needs `maxLogits >= max`, else checks up to `maxLogits`.
 */
export function probeVerifyTokens(context: Context, max: number): number {
  const cache = context.cache;
  const limit = Math.min(
    max,
    context.maxLogits,
    context.batchSize,
    context.contextSize - VERIFY_PREFIX,
  );
  if (limit < 2) return 1;
  const V = context.model.config.vocabSize;
  const ids = Array.from(
    { length: VERIFY_PREFIX + limit },
    (_, i) => 1 + (i * 7919 + 13) % (V - 1),
  );
  const batch = new Batch(context.batchSize);
  const prefix = () => {
    cache.clear(0);
    batch.clear();
    for (let i = 0; i < VERIFY_PREFIX; i++) batch.add(ids[i], i, 0, false);
    context.decode(batch);
  };
  try {
    prefix();
    const alone: Float32Array[] = [];
    for (let i = VERIFY_PREFIX; i < VERIFY_PREFIX + limit; i++) {
      batch.clear();
      batch.add(ids[i], i, 0, true);
      context.decode(batch);
      alone.push(context.logits(0).slice());
    }
    for (let n = 2; n <= limit; n++) {
      prefix();
      batch.clear();
      for (let i = 0; i < n; i++) batch.add(ids[VERIFY_PREFIX + i], VERIFY_PREFIX + i, 0, true);
      context.decode(batch, true);
      for (let i = 0; i < n; i++) if (!sameBits(alone[i], context.logits(i))) return n - 1;
    }
    return limit;
  } finally {
    cache.clear(0);
  }
}
