/**
 * Token sampling, as llama.cpp's default chain does it: repetition /
 * frequency / presence penalties over the last `repeatLastN` tokens, then
 * top-k, top-p, min-p, temperature, and a seeded draw. Temperature 0 (or
 * less) is greedy argmax, ties going to the lowest id.
 *
 * Each step is a function over a {@linkcode Candidates} set (token ids sorted
 * by logit, never the logits themselves), so tests can check them one by one.
 * {@linkcode Sampler} owns every working buffer, allocated once: sampling a
 * token allocates nothing.
 *
 * @example
 * ```ts
 * import { Sampler } from "./sampler.ts";
 * const sampler = new Sampler(512, { temperature: 0 }, 1);
 * const logits = new Float32Array(512);
 * logits[7] = 3;
 * const id = sampler.sample(logits); // 7
 * sampler.accept(id);
 * ```
 *
 * @module
 */
import { Rng } from "./rng.ts";

/** Sampling parameters; every field has llama.cpp's default. */
export interface SamplerParams {
  /** Divides the logits; 0 means greedy (negative is a `RangeError`). Default 0.8. */
  temperature: number;
  /** Keep the k most likely tokens; 0 keeps all. Default 40. */
  topK: number;
  /** Keep the smallest set whose probability reaches p; 1 disables. Default 0.95. */
  topP: number;
  /** Drop tokens less likely than `minP` times the most likely; 0 disables. Default 0.05. */
  minP: number;
  /** Divide positive (multiply negative) logits of recent tokens; 1 disables. Default 1. */
  repeatPenalty: number;
  /** Subtract `count × frequencyPenalty` from recent tokens' logits. Default 0. */
  frequencyPenalty: number;
  /** Subtract `presencePenalty` from every recent token's logit. Default 0. */
  presencePenalty: number;
  /** How many recent tokens the penalties look at; 0 disables. Default 64. */
  repeatLastN: number;
}

/** llama.cpp's defaults (`common_params_sampling`). */
export const DEFAULT_SAMPLER_PARAMS: Readonly<SamplerParams> = Object.freeze({
  temperature: 0.8,
  topK: 40,
  topP: 0.95,
  minP: 0.05,
  repeatPenalty: 1.0,
  frequencyPenalty: 0,
  presencePenalty: 0,
  repeatLastN: 64,
});

/** Fills defaults and checks ranges; throws `RangeError` naming the bad value. */
export function resolveSamplerParams(params: Partial<SamplerParams> = {}): SamplerParams {
  const p: SamplerParams = { ...DEFAULT_SAMPLER_PARAMS, ...params };
  const finite = (name: string, value: number) => {
    if (!Number.isFinite(value)) throw new RangeError(`${name} must be a number, got ${value}`);
  };
  for (const [name, value] of Object.entries(p)) finite(name, value);
  // Negative values mean nothing llama.cpp documents (its `--temp -1` is greedy with
  // probabilities, `--top-k -1` keeps all): refused here, for every caller alike.
  if (p.temperature < 0) {
    throw new RangeError(`temperature must be >= 0 (0 = greedy), got ${p.temperature}`);
  }
  if (!Number.isInteger(p.topK) || p.topK < 0) {
    throw new RangeError(`topK must be an integer >= 0 (0 = all), got ${p.topK}`);
  }
  if (p.topP < 0 || p.topP > 1) throw new RangeError(`topP must be in [0, 1], got ${p.topP}`);
  if (p.minP < 0 || p.minP > 1) throw new RangeError(`minP must be in [0, 1], got ${p.minP}`);
  if (p.repeatPenalty <= 0) {
    throw new RangeError(`repeatPenalty must be > 0, got ${p.repeatPenalty}`);
  }
  if (!Number.isInteger(p.repeatLastN) || p.repeatLastN < 0) {
    throw new RangeError(`repeatLastN must be an integer >= 0, got ${p.repeatLastN}`);
  }
  return p;
}

/**
 * The working set of a sampling step: `ids[0..size)` are candidate token ids;
 * `logits` and `probs` are indexed by token id (not by position), so steps
 * reorder ids only.
 */
export class Candidates {
  /** Candidate token ids; the first `size` are live. */
  readonly ids: Int32Array;
  /** Logits by token id (a private copy: steps modify it). */
  readonly logits: Float32Array;
  /** Probabilities by token id, valid after {@linkcode softmax}. */
  readonly probs: Float32Array;
  /** Scratch ids for selections. */
  readonly order: Int32Array;
  /** Live candidate count. */
  size = 0;
  /** True when `ids[0..size)` is sorted by logit, descending (ties: lower id first). */
  sorted = false;

  constructor(vocabSize: number) {
    this.ids = new Int32Array(vocabSize);
    this.logits = new Float32Array(vocabSize);
    this.probs = new Float32Array(vocabSize);
    this.order = new Int32Array(vocabSize);
  }

  /** Copies `logits` in and makes every token a candidate. */
  reset(logits: Float32Array): void {
    if (logits.length !== this.logits.length) {
      throw new RangeError(`Expected ${this.logits.length} logits, got ${logits.length}`);
    }
    this.logits.set(logits);
    const ids = this.ids;
    const n = ids.length;
    for (let i = 0; i < n; i++) ids[i] = i;
    this.size = n;
    this.sorted = false;
  }
}

/**
 * Penalises the logits of the tokens in `recent` (llama.cpp's rule: a logit
 * `> 0` is divided by `repeat`, `<= 0` multiplied; then `count × freq +
 * presence` is subtracted). `counts` is a zeroed scratch array of vocabulary
 * size and is left zeroed.
 */
export function applyPenalties(
  c: Candidates,
  recent: ArrayLike<number>,
  recentCount: number,
  repeat: number,
  frequency: number,
  presence: number,
  counts: Int32Array,
): void {
  if (recentCount === 0 || (repeat === 1 && frequency === 0 && presence === 0)) return;
  for (let i = 0; i < recentCount; i++) counts[recent[i]]++;
  const logits = c.logits;
  for (let i = 0; i < recentCount; i++) {
    const id = recent[i];
    const count = counts[id];
    if (count === 0) continue; // already applied
    counts[id] = 0;
    const l = logits[id];
    logits[id] = (l <= 0 ? l * repeat : l / repeat) - count * frequency - presence;
  }
  c.sorted = false;
}

/** True when token `a` ranks before token `b`: higher logit, ties to the lower id. */
function before(logits: Float32Array, a: number, b: number): boolean {
  const la = logits[a];
  const lb = logits[b];
  return la > lb || (la === lb && a < b);
}

/** Sifts `ids[i]` down a heap of `n` whose root is the worst-ranked id. */
function siftDown(ids: Int32Array, logits: Float32Array, i: number, n: number): void {
  const id = ids[i];
  for (;;) {
    let child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && before(logits, ids[child], ids[child + 1])) child++;
    if (!before(logits, id, ids[child])) break;
    ids[i] = ids[child];
    i = child;
  }
  ids[i] = id;
}

/**
 * Keeps the `k` best candidates, sorted best first (`k <= 0` or `k >= size`
 * sorts them all). Partial selection: a heap of `k` ids over the candidates,
 * O(n log k), then a heap sort of those `k`; no allocation.
 */
export function topK(c: Candidates, k: number): void {
  const n = c.size;
  if (k <= 0 || k > n) k = n;
  if (c.sorted) {
    c.size = k;
    return;
  }
  const ids = c.ids;
  const logits = c.logits;
  // A heap of the k best so far, the worst at the root.
  for (let i = (k >> 1) - 1; i >= 0; i--) siftDown(ids, logits, i, k);
  for (let i = k; i < n; i++) {
    const id = ids[i];
    if (before(logits, id, ids[0])) {
      ids[i] = ids[0];
      ids[0] = id;
      siftDown(ids, logits, 0, k);
    }
  }
  // Heap sort: move the worst to the end each time, so ids[0..k) ends best first.
  for (let end = k - 1; end > 0; end--) {
    const worst = ids[0];
    ids[0] = ids[end];
    ids[end] = worst;
    siftDown(ids, logits, 0, end);
  }
  c.size = k;
  c.sorted = true;
}

/** Sets `probs` of the candidates to the softmax of their logits (their order is kept). */
export function softmax(c: Candidates): void {
  const { ids, logits, probs } = c;
  let max = logits[ids[0]];
  if (!c.sorted) { for (let i = 1; i < c.size; i++) max = Math.max(max, logits[ids[i]]); }
  let sum = 0;
  for (let i = 0; i < c.size; i++) {
    const p = Math.exp(logits[ids[i]] - max);
    probs[ids[i]] = p;
    sum += p;
  }
  for (let i = 0; i < c.size; i++) probs[ids[i]] /= sum;
}

/** Sifts `ids[i]` down a heap of `n` whose root is the best-ranked id. */
function siftDownBest(ids: Int32Array, logits: Float32Array, i: number, n: number): void {
  const id = ids[i];
  for (;;) {
    let child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && before(logits, ids[child + 1], ids[child])) child++;
    if (!before(logits, ids[child], id)) break;
    ids[i] = ids[child];
    i = child;
  }
  ids[i] = id;
}

/**
 * Keeps the smallest set of best candidates whose probabilities sum to at
 * least `p`, sorted best first. Unsorted candidates (top-k off) are not fully
 * sorted: the best are popped from a heap until the sum reaches `p`.
 */
export function topP(c: Candidates, p: number): void {
  if (p >= 1 || c.size === 0) return;
  if (c.sorted) {
    softmax(c);
    let sum = 0;
    for (let i = 0; i < c.size; i++) {
      sum += c.probs[c.ids[i]];
      if (sum >= p) {
        c.size = i + 1;
        return;
      }
    }
    return;
  }
  const { ids, logits, probs, order } = c;
  const n = c.size;
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, logits[ids[i]]);
  let total = 0;
  for (let i = 0; i < n; i++) {
    const e = Math.exp(logits[ids[i]] - max);
    probs[ids[i]] = e;
    total += e;
  }
  for (let i = (n >> 1) - 1; i >= 0; i--) siftDownBest(ids, logits, i, n);
  let kept = 0;
  let sum = 0;
  for (let heap = n; heap > 0;) {
    const best = ids[0];
    order[kept++] = best;
    sum += probs[best] / total;
    heap--;
    ids[0] = ids[heap];
    siftDownBest(ids, logits, 0, heap);
    if (sum >= p) break;
  }
  for (let i = 0; i < kept; i++) {
    ids[i] = order[i];
    probs[ids[i]] /= total;
  }
  c.size = kept;
  c.sorted = true;
}

/**
 * Keeps the candidates whose probability is at least `p` times the best one's
 * (order kept; unsorted candidates are filtered without sorting).
 */
export function minP(c: Candidates, p: number): void {
  if (p <= 0 || c.size === 0) return;
  const { ids, logits } = c;
  if (c.sorted) {
    const threshold = logits[ids[0]] + Math.log(p);
    let kept = 1;
    while (kept < c.size && logits[ids[kept]] >= threshold) kept++;
    c.size = kept;
    return;
  }
  let max = -Infinity;
  for (let i = 0; i < c.size; i++) max = Math.max(max, logits[ids[i]]);
  const threshold = max + Math.log(p);
  let kept = 0;
  for (let i = 0; i < c.size; i++) {
    if (logits[ids[i]] >= threshold) ids[kept++] = ids[i];
  }
  c.size = kept;
}

/** Divides the candidates' logits by `t` (> 0). */
export function temperature(c: Candidates, t: number): void {
  for (let i = 0; i < c.size; i++) c.logits[c.ids[i]] /= t;
}

/**
 * Draws a candidate with probability `probs[id]` (the softmax of the
 * candidates' logits), using one number from `rng`; walks the candidates in
 * their current order, so no sort is needed.
 */
export function draw(c: Candidates, rng: Rng): number {
  softmax(c);
  const r = rng.nextFloat();
  let sum = 0;
  for (let i = 0; i < c.size; i++) {
    sum += c.probs[c.ids[i]];
    if (r < sum) return c.ids[i];
  }
  return c.ids[c.size - 1]; // rounding: r was just below 1
}

/** The id of the largest value, ties to the lowest id. */
export function argmax(logits: Float32Array): number {
  let best = 0;
  let bestValue = logits[0];
  const n = logits.length;
  for (let i = 1; i < n; i++) {
    if (logits[i] > bestValue) {
      bestValue = logits[i];
      best = i;
    }
  }
  return best;
}

/**
 * The working buffers of sampling for one vocabulary (~20 bytes per token). Samplers
 * on one thread may share one: `sample` leaves nothing in it between calls. A server
 * makes one at start-up instead of allocating a megabyte per request.
 */
export class SamplerWorkspace {
  readonly candidates: Candidates;
  readonly counts: Int32Array;
  constructor(readonly vocabSize: number) {
    if (!Number.isInteger(vocabSize) || vocabSize <= 0) {
      throw new RangeError(`Vocabulary size must be a positive integer, got ${vocabSize}`);
    }
    this.candidates = new Candidates(vocabSize);
    this.counts = new Int32Array(vocabSize);
  }
}

/**
 * A sampler for one vocabulary: the parameters, a seeded generator, the
 * recent-token window for penalties, and its working buffers (its own, or a
 * shared {@linkcode SamplerWorkspace}).
 */
export class Sampler {
  /** The resolved parameters. */
  readonly params: Readonly<SamplerParams>;
  /** The generator (its `seed` reproduces a run). */
  readonly rng: Rng;
  readonly #candidates: Candidates;
  readonly #counts: Int32Array;
  /** The last `repeatLastN` accepted tokens, a ring. */
  readonly #recent: Int32Array;
  #recentCount = 0;
  #recentNext = 0;

  constructor(
    vocabSize: number,
    params: Partial<SamplerParams>,
    seed: number,
    workspace?: SamplerWorkspace,
  ) {
    if (!Number.isInteger(vocabSize) || vocabSize <= 0) {
      throw new RangeError(`Vocabulary size must be a positive integer, got ${vocabSize}`);
    }
    if (workspace !== undefined && workspace.vocabSize !== vocabSize) {
      throw new RangeError(
        `a workspace for ${workspace.vocabSize} tokens cannot sample ${vocabSize}`,
      );
    }
    this.params = Object.freeze(resolveSamplerParams(params));
    this.rng = new Rng(seed);
    const w = workspace ?? new SamplerWorkspace(vocabSize);
    this.#candidates = w.candidates;
    this.#counts = w.counts;
    this.#recent = new Int32Array(this.params.repeatLastN);
  }

  /** True when sampling is greedy argmax. */
  get greedy(): boolean {
    return this.params.temperature <= 0;
  }

  /**
   * How many of the best-scored tokens decide the next sample, when that is
   * known without looking at the rest: 1 for greedy, `topK` for sampling
   * with top-k; 0 when every token may matter (top-k off, or penalties that
   * reorder the scores). A row where only those tokens keep their scores
   * samples as the whole row does.
   */
  get deciding(): number {
    const p = this.params;
    const penalties = this.#recentCount > 0 &&
      (p.repeatPenalty !== 1 || p.frequencyPenalty !== 0 || p.presencePenalty !== 0);
    if (penalties) return 0;
    return p.temperature <= 0 ? 1 : p.topK;
  }

  /** Records a token (prompt or generated) for the penalties. */
  accept(id: number): void {
    const n = this.#recent.length;
    if (n === 0) return;
    this.#recent[this.#recentNext] = id;
    this.#recentNext = (this.#recentNext + 1) % n;
    if (this.#recentCount < n) this.#recentCount++;
  }

  /** Forgets the recent tokens. */
  reset(): void {
    this.#recentCount = 0;
    this.#recentNext = 0;
  }

  /** Picks the next token from `logits` (one per vocabulary entry; not modified). */
  sample(logits: Float32Array): number {
    const p = this.params;
    const c = this.#candidates;
    const penalties = this.#recentCount > 0 &&
      (p.repeatPenalty !== 1 || p.frequencyPenalty !== 0 || p.presencePenalty !== 0);
    if (p.temperature <= 0 && !penalties) return argmax(logits); // no copy needed
    c.reset(logits);
    applyPenalties(
      c,
      this.#recent,
      this.#recentCount,
      p.repeatPenalty,
      p.frequencyPenalty,
      p.presencePenalty,
      this.#counts,
    );
    if (p.temperature <= 0) return argmax(c.logits);
    if (p.topK > 0) topK(c, p.topK); // top-k off: no sort (top-p selects from a heap)
    topP(c, p.topP);
    minP(c, p.minP);
    temperature(c, p.temperature);
    return draw(c, this.rng);
  }
}
