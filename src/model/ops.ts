/**
 * The kernel operations the forward pass calls, as an interface: the Zig
 * `Kernels` of `src/kernels/` implements it, and tests can pass another
 * implementation (e.g. a scalar reference) to cross-check the model.
 *
 * Every pointer is a native address; every count is an integer.
 *
 * Sequences: a batch of `tokens` may hold tokens of several sequences. Each
 * token `t` has a position `positions[t]` and a KV-cache slot `slots[t]`
 * (both native i32 arrays of length `tokens`). The cache of one layer is
 * `[slotCount][slotRows][kvDim]`: token `t`'s K/V row is
 * `slots[t]·slotRows + positions[t] % slotRows`; attention is causal within
 * each token's own slot and runs after the whole batch's K/V is stored.
 *
 * @module
 */

/** KV cache element type: its ggml id (0 = F32, 1 = F16, 8 = Q8_0, ...; see `CACHE_TYPES`). */
export type CacheTypeId = number;

/** The operations of one forward pass. */
export interface ForwardOps {
  /** Threads the kernels run on. */
  readonly threadCount: number;
  /** Reserves scratch (e.g. quantized activations) for up to `maxTokens × maxCols`. */
  reserve?(maxTokens: number, maxCols: number): void;
  /** `out[t][r] = Σ_c W[r][c]·x[t][c]`; `W` is `rows × cols` of ggml type `type`. */
  matmul(
    type: number,
    out: number,
    weight: number,
    x: number,
    rows: number,
    cols: number,
    tokens: number,
  ): void;
  /** `out[t] = x[t] / rms(x[t]) · weight`, rows of `n`. */
  rmsnorm(out: number, x: number, weight: number, n: number, tokens: number, eps: number): void;
  /** Rotates `x [tokens][heads][headDim]` in place, token t at `positions[t]` (i32 address). */
  rope(
    x: number,
    tokens: number,
    heads: number,
    headDim: number,
    ropeDims: number,
    positions: number,
    freqBase: number,
    freqFactors: number,
    neox: boolean,
  ): void;
  /**
   * Copies `src [tokens][kvDim]` (F32) into `cache` row `slots[t]·slotRows +
   * positions[t] % slotRows` (i32 addresses), of `slotCount` slots.
   */
  storeKv(
    cacheType: number,
    cache: number,
    src: number,
    positions: number,
    slots: number,
    tokens: number,
    kvDim: number,
    slotRows: number,
    slotCount: number,
  ): void;
  /**
   * Attention of `q [tokens][heads·headDim]`: token t attends its own slot's positions
   * `[window > 0 ? max(0, pos − window + 1) : 0, pos]`, pos = positions[t], read from
   * the rows {@linkcode storeKv} writes; K of `cacheType`, V of `vCacheType` (default
   * the same). `alone` (default false): each token in the float order of a token decoded
   * alone, though its slot has others in the batch.
   */
  attention(
    cacheType: number,
    out: number,
    q: number,
    kCache: number,
    vCache: number,
    tokens: number,
    positions: number,
    slots: number,
    heads: number,
    kvHeads: number,
    headDim: number,
    scale: number,
    slotRows: number,
    window: number,
    slotCount: number,
    vCacheType?: number,
    alone?: boolean,
  ): void;
  /** `out = silu(gate) · up`, `n` elements. */
  swiglu(out: number, gate: number, up: number, n: number): void;
  /**
   * `out = gelu_tanh(gate) · up`, `n` elements (Gemma's GeGLU; ggml's tanh
   * approximation). Optional: an architecture that needs it is refused by
   * kernels without it.
   */
  geglu?(out: number, gate: number, up: number, n: number): void;
  /** `out[t][i] = x[t][i] + bias[i]`, `rows` rows of `n` (Q/K/V biases). Optional, as `geglu`. */
  addRows?(out: number, x: number, bias: number, rows: number, n: number): void;
  /** `out = gelu_tanh(x)`, `n` elements (BERT's FFN; ggml's F16-table GELU). Optional, as `geglu`. */
  gelu?(out: number, x: number, n: number): void;
  /**
   * `out[t] = (x[t] − mean) / √(var + eps) · weight + bias`, rows of `n` (ggml's `ggml_norm`,
   * then the weight and the bias: BERT's layer norm). Optional, as `geglu`.
   */
  layerNorm?(
    out: number,
    x: number,
    weight: number,
    bias: number,
    n: number,
    tokens: number,
    eps: number,
  ): void;
  /** `out = x · s`, `n` elements (Gemma's embedding scale). Optional, as `geglu`. */
  scale?(out: number, x: number, s: number, n: number): void;
  /**
   * Rotates `rows` runs of `n` values of `x` in place by the orthonormal Walsh-Hadamard
   * matrix (llama.cpp's rotation around a quantized KV cache). Optional: a quantized
   * cache needs it.
   */
  hadamard?(x: number, rows: number, n: number): void;
  /** `out = a + b`, `n` elements. */
  add(out: number, a: number, b: number, n: number): void;
  /** Copies rows `ids[i]` (i32) of `table` into `out` as F32. */
  getRows(
    type: number,
    out: number,
    table: number,
    ids: number,
    count: number,
    rowLength: number,
    rowCount: number,
  ): void;
  /**
   * Optional batching: calls between `beginGraph` and `endGraph` may be queued
   * and run together at `endGraph` (outputs are valid only after it);
   * `cancelGraph` drops what was queued.
   */
  beginGraph?(): void;
  endGraph?(): void;
  cancelGraph?(): void;
  /** Releases threads and scratch. */
  close(): void;
}
