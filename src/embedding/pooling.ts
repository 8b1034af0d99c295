/**
 * Pooling and normalization of hidden states into embeddings, as llama.cpp's
 * `build_pooling` (`llama-graph.cpp`) and `common_embd_normalize`
 * (`common/common.cpp`) compute them.
 *
 * @example Mean-pool two tokens, then L2-normalize
 * ```ts
 * import { normalize, pool } from "./pooling.ts";
 * const hidden = new Float32Array([1, 2, 3, 4]); // 2 tokens × 2
 * const v = normalize(pool(hidden, 2, 0, 2, "mean")[0], 2);
 * console.log(v); // Float32Array [0.5547, 0.8321]
 * ```
 *
 * @module
 */
import type { PoolingType } from "../model/config.ts";

/** The pooling types {@linkcode pool} computes (`rank` needs a classifier head). */
export type EmbeddingPooling = Exclude<PoolingType, "rank">;

/**
 * The embeddings of one sequence whose `count` tokens are rows `first ...`
 * of `hidden` ([tokens][n]): one vector (mean, cls = its first token, last),
 * or one per token (none). Mean sums each dimension in float64 of each value
 * times 1/count in f32 (llama.cpp's `inp_mean` matrix row), rounded once.
 */
export function pool(
  hidden: Float32Array,
  n: number,
  first: number,
  count: number,
  pooling: EmbeddingPooling,
): Float32Array[] {
  const row = (t: number) => hidden.slice((first + t) * n, (first + t + 1) * n);
  switch (pooling) {
    case "cls":
      return [row(0)];
    case "last":
      return [row(count - 1)];
    case "none":
      return Array.from({ length: count }, (_, t) => row(t));
    case "mean": {
      const w = Math.fround(1 / count);
      const sums = new Float64Array(n);
      for (let t = 0; t < count; t++) {
        const base = (first + t) * n;
        for (let i = 0; i < n; i++) sums[i] += hidden[base + i] * w;
      }
      return [Float32Array.from(sums)];
    }
  }
}

/**
 * `common_embd_normalize`: `p` = -1 none, 0 max-absolute scaled to the int16
 * range (values up to 32760), 2 Euclidean, any other p > 0 the p-norm (1:
 * taxicab). A zero vector stays zero. Returns a new array.
 */
export function normalize(v: Float32Array, p: number): Float32Array {
  if (!Number.isInteger(p) || p < -1) {
    throw new RangeError(`normalization must be an integer >= -1, got ${p}`);
  }
  let sum = 0;
  if (p === -1) sum = 1;
  else if (p === 0) {
    for (const x of v) sum = Math.max(sum, Math.abs(x));
    sum /= 32760;
  } else if (p === 2) {
    for (const x of v) sum += Math.fround(x * x);
    sum = Math.sqrt(sum);
  } else {
    for (const x of v) sum += Math.abs(x) ** p;
    sum = sum ** (1 / p);
  }
  const norm = Math.fround(sum > 0 ? 1 / sum : 0);
  return v.map((x) => x * norm);
}

/** Cosine similarity of two vectors (float64 sums, as `common_embd_similarity_cos`). */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  if (aa === 0 || bb === 0) return aa === 0 && bb === 0 ? 1 : 0;
  return ab / (Math.sqrt(aa) * Math.sqrt(bb));
}
