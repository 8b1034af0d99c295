/**
 * The KV cache: `slots` sequences × layers × positions of K and V, and each
 * slot's token history (the tokens whose K/V the slot holds, position by
 * position). A slot is one sequence; {@linkcode KvCache.truncate} drops the
 * tail of one (to continue it from a common prefix), {@linkcode KvCache.clear}
 * empties it.
 *
 * Layout of layer `l`: `[slots][rows(l)][kvHeads·headDim]` (F16 or F32);
 * token `t` of slot `s` at position `p` lives in row `s·rows(l) + p % rows(l)`.
 * A full-attention layer has `slotRows` rows (the context); a sliding-window
 * layer keeps a ring of `window + batch − 1` rows (llama.cpp's iSWA cache:
 * the window plus one batch, whose K/V is stored before its attention runs),
 * so a long context costs the window, not the context, in those layers.
 *
 * A ring forgets positions: after a slot ran to length `n`, a sliding layer
 * holds positions from `n − rows(l)` on, so {@linkcode KvCache.truncate}
 * back to `m` keeps the prefix only while `n − m ≤ rows(l) − window`;
 * further back it empties the slot (its prefix must be computed again).
 *
 * @example
 * ```ts
 * // a Context creates its cache: context.cache
 * // context.cache.length(0)        tokens slot 0 holds
 * // context.cache.history(0)       their ids (a copy)
 * // context.cache.truncate(0, 200) keep the first 200
 * // context.cache.clear(1)         empty slot 1
 * ```
 *
 * @module
 */
import type { Native, NativeBuffer } from "../native/native.ts";
import type { ForwardCache } from "./forward.ts";

/** KV cache element type. */
export type CacheType = "f16" | "f32";

/** The K and V of every slot, layer and position; the tokens each slot holds. */
export class KvCache implements ForwardCache {
  /** Sequences the cache holds. */
  readonly slotCount: number;
  /** Positions per slot (the context). */
  readonly slotRows: number;
  /** Each layer's rows per slot: `slotRows`, or a ring for a sliding-window layer. */
  readonly layerRows: Int32Array;
  /** Each layer's attention window (0 = full). */
  readonly #windows: Int32Array;
  /** How far back a slot can be truncated and keep its prefix: min over sliding layers. */
  readonly #rewindMax: number;
  readonly cacheType: CacheType;
  /** 0 = F32, 1 = F16 (the kernels' cache type id). */
  readonly cacheTypeId: number;
  /** Bytes of K plus V. */
  readonly byteLength: number;
  readonly #k: NativeBuffer;
  readonly #v: NativeBuffer;
  readonly #layerOffsets: Float64Array;
  readonly #rowBytes: number;
  readonly #history: Int32Array[];
  readonly #lengths: Int32Array;

  /**
   * `windows[l]` > 0 makes layer `l` a ring of `min(slotRows, windows[l] + batchSize − 1)`
   * rows (default: every layer full).
   */
  constructor(
    native: Native,
    shape: { layers: number; kvDim: number },
    options: {
      slots: number;
      slotRows: number;
      cacheType: CacheType;
      windows?: ArrayLike<number>;
      batchSize?: number;
    },
  ) {
    const { slots, slotRows, cacheType } = options;
    if (cacheType !== "f16" && cacheType !== "f32") {
      throw new RangeError(`cacheType must be "f16" or "f32", got "${cacheType}"`);
    }
    this.slotCount = slots;
    this.slotRows = slotRows;
    this.cacheType = cacheType;
    this.cacheTypeId = cacheType === "f16" ? 1 : 0;
    const batch = options.batchSize ?? slotRows;
    this.#windows = Int32Array.from({ length: shape.layers }, (_, l) => options.windows?.[l] ?? 0);
    this.layerRows = this.#windows.map((w) => w > 0 ? Math.min(slotRows, w + batch - 1) : slotRows);
    let rewind = slotRows;
    for (let l = 0; l < shape.layers; l++) {
      if (this.#windows[l] > 0 && this.layerRows[l] < slotRows) {
        rewind = Math.min(rewind, this.layerRows[l] - this.#windows[l]);
      }
    }
    this.#rewindMax = rewind;
    const rowBytes = shape.kvDim * (cacheType === "f16" ? 2 : 4);
    this.#rowBytes = rowBytes;
    this.#layerOffsets = new Float64Array(shape.layers + 1);
    for (let l = 0; l < shape.layers; l++) {
      this.#layerOffsets[l + 1] = this.#layerOffsets[l] + slots * this.layerRows[l] * rowBytes;
    }
    const bytes = this.#layerOffsets[shape.layers];
    this.#k = native.alloc(bytes);
    try {
      this.#v = native.alloc(bytes);
    } catch (error) {
      this.#k.free();
      throw error;
    }
    this.byteLength = 2 * bytes;
    const offsets = this.#layerOffsets, k = this.#k.address, v = this.#v.address;
    // Arrays of tagged elements (made of strings first): a raw-double array would box
    // each address anew every time the forward pass hands it to a kernel.
    const kLayers: unknown[] = new Array(shape.layers).fill("");
    const vLayers: unknown[] = new Array(shape.layers).fill("");
    for (let l = 0; l < shape.layers; l++) {
      kLayers[l] = k + offsets[l];
      vLayers[l] = v + offsets[l];
    }
    this.kLayers = kLayers as number[];
    this.vLayers = vLayers as number[];
    this.#history = Array.from({ length: slots }, () => new Int32Array(slotRows));
    this.#lengths = new Int32Array(slots);
  }

  /** Address of each layer's K cache. */
  readonly kLayers: readonly number[];
  /** Address of each layer's V cache. */
  readonly vLayers: readonly number[];

  /** Address of layer `layer`'s K cache. */
  kAddress(layer: number): number {
    return this.kLayers[layer];
  }

  /** Address of layer `layer`'s V cache. */
  vAddress(layer: number): number {
    return this.vLayers[layer];
  }

  /** Rows per slot of layer `layer` (its ring size when it slides). */
  rows(layer: number): number {
    return this.layerRows[layer];
  }

  #slot(slot: number): number {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slotCount) {
      throw new RangeError(`slot ${slot} is outside [0, ${this.slotCount})`);
    }
    return slot;
  }

  /** Tokens slot `slot` holds (its next position). */
  length(slot: number): number {
    return this.#lengths[this.#slot(slot)];
  }

  /** A copy of the token ids slot `slot` holds, position by position. */
  history(slot: number): Int32Array {
    return this.#history[this.#slot(slot)].slice(0, this.#lengths[slot]);
  }

  /** Length of the longest common prefix of `tokens` and slot `slot`'s history. */
  commonPrefix(slot: number, tokens: ArrayLike<number>): number {
    const h = this.#history[this.#slot(slot)];
    const n = Math.min(this.#lengths[slot], tokens.length);
    let i = 0;
    while (i < n && h[i] === tokens[i]) i++;
    return i;
  }

  /**
   * The length slot `slot` would hold after {@linkcode truncate}`(slot, length)`:
   * `min(length, held)`, or 0 when a sliding layer's ring no longer holds the
   * window before `length` (see the module doc).
   */
  keepable(slot: number, length: number): number {
    this.#slot(slot);
    if (!Number.isInteger(length) || length < 0) {
      throw new RangeError(`truncate length must be an integer >= 0, got ${length}`);
    }
    const n = this.#lengths[slot];
    if (length >= n) return n;
    return n - length > this.#rewindMax ? 0 : length;
  }

  /**
   * Keeps the first `length` tokens of slot `slot` (no-op when it holds
   * fewer), or empties it when a sliding layer's ring no longer holds the
   * window before `length` (see the module doc). Returns the length kept.
   */
  truncate(slot: number, length: number): number {
    return this.#lengths[slot] = this.keepable(slot, length);
  }

  /**
   * The one rule for what a new sequence `tokens` reuses of slot `slot`: the
   * longest common prefix with what the slot holds, short of the last
   * `runAtLeast` tokens (at least the last, whose logits start generation),
   * rounded down to a multiple of `align`, and only as far back as the slot
   * can actually be truncated (else nothing: the prompt is run from 0). Does not change the slot;
   * {@linkcode reuse} applies it.
   */
  reusable(slot: number, tokens: ArrayLike<number>, runAtLeast = 1, align = 1): number {
    const cap = Math.max(0, tokens.length - Math.max(1, runAtLeast));
    const common = Math.min(this.commonPrefix(slot, tokens), cap);
    return this.keepable(slot, common - common % Math.max(1, align));
  }

  /** Truncates slot `slot` to {@linkcode reusable}`(slot, tokens, ...)` and returns that length. */
  reuse(slot: number, tokens: ArrayLike<number>, runAtLeast = 1, align = 1): number {
    return this.truncate(slot, this.reusable(slot, tokens, runAtLeast, align));
  }

  /**
   * Makes slot `to` hold what slot `from` holds: its tokens and the K/V of
   * every layer's rows (a ring as it is), so `to` continues `from`'s
   * sequence without running it again (`n` choices of one prompt).
   */
  copy(from: number, to: number): void {
    this.#slot(from);
    this.#slot(to);
    if (from === to) return;
    const n = this.#lengths[from];
    const rowBytes = this.#rowBytes;
    const k = this.#k.bytes(), v = this.#v.bytes();
    for (let l = 0; l < this.layerRows.length; l++) {
      const rows = this.layerRows[l];
      const used = Math.min(n, rows) * rowBytes; // a ring's rows are all in use past its size
      const base = this.#layerOffsets[l];
      const src = base + from * rows * rowBytes, dst = base + to * rows * rowBytes;
      k.copyWithin(dst, src, src + used);
      v.copyWithin(dst, src, src + used);
    }
    this.#history[to].set(this.#history[from].subarray(0, n));
    this.#lengths[to] = n;
  }

  /**
   * What slot `slot` holds, for a slot file: its token ids and, per layer,
   * the K and V rows in use (a ring's rows all, as they are).
   */
  exportSlot(slot: number): { tokens: Int32Array; layers: Uint8Array[] } {
    this.#slot(slot);
    const n = this.#lengths[slot];
    const rowBytes = this.#rowBytes;
    const k = this.#k.bytes(), v = this.#v.bytes();
    const layers: Uint8Array[] = [];
    for (let l = 0; l < this.layerRows.length; l++) {
      const rows = this.layerRows[l];
      const used = Math.min(n, rows) * rowBytes;
      const src = this.#layerOffsets[l] + slot * rows * rowBytes;
      layers.push(k.slice(src, src + used), v.slice(src, src + used));
    }
    return { tokens: this.#history[slot].slice(0, n), layers };
  }

  /** Bytes {@linkcode exportSlot} gives per layer (K, then V) for `n` tokens. */
  slotLayerBytes(n: number): number[] {
    const out: number[] = [];
    for (let l = 0; l < this.layerRows.length; l++) {
      const b = Math.min(n, this.layerRows[l]) * this.#rowBytes;
      out.push(b, b);
    }
    return out;
  }

  /**
   * Puts into slot `slot` what {@linkcode exportSlot} gave (checked to fit
   * first: nothing changes on a `RangeError`).
   */
  importSlot(slot: number, tokens: Int32Array, layers: readonly Uint8Array[]): void {
    this.#slot(slot);
    const n = tokens.length;
    if (n > this.slotRows) {
      throw new RangeError(`${n} tokens do not fit a slot of ${this.slotRows} positions`);
    }
    const want = this.slotLayerBytes(n);
    if (layers.length !== want.length || layers.some((b, i) => b.byteLength !== want[i])) {
      throw new RangeError("the K/V rows do not match this cache's layout");
    }
    const rowBytes = this.#rowBytes;
    const k = this.#k.bytes(), v = this.#v.bytes();
    for (let l = 0; l < this.layerRows.length; l++) {
      const dst = this.#layerOffsets[l] + slot * this.layerRows[l] * rowBytes;
      k.set(layers[2 * l], dst);
      v.set(layers[2 * l + 1], dst);
    }
    this.#history[slot].set(tokens);
    this.#lengths[slot] = n;
  }

  /** Empties slot `slot`, or every slot when none is given. */
  clear(slot?: number): void {
    if (slot === undefined) this.#lengths.fill(0);
    else this.#lengths[this.#slot(slot)] = 0;
  }

  /** Records `token` at the slot's next position (the Context calls it after a decode). */
  append(slot: number, token: number): void {
    const n = this.#lengths[slot];
    this.#history[slot][n] = token;
    this.#lengths[slot] = n + 1;
  }

  /** Frees the cache's memory. */
  free(): void {
    this.#k.free();
    this.#v.free();
  }
}
