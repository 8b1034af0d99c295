/**
 * The KV cache: `slots` sequences × layers × positions of K and V, and each
 * slot's token history (the tokens whose K/V the slot holds, position by
 * position). A slot is one sequence; {@linkcode KvCache.truncate} drops the
 * tail of one (to continue it from a common prefix), {@linkcode KvCache.clear}
 * empties it.
 *
 * Layout of one layer: `[slots][slotRows][kvHeads·headDim]` (F16 or F32);
 * token `t` of slot `s` at position `p` lives in row `s·slotRows + p % slotRows`.
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
  /** Positions per slot. */
  readonly slotRows: number;
  readonly cacheType: CacheType;
  /** 0 = F32, 1 = F16 (the kernels' cache type id). */
  readonly cacheTypeId: number;
  /** Bytes of K plus V. */
  readonly byteLength: number;
  readonly #k: NativeBuffer;
  readonly #v: NativeBuffer;
  readonly #layerBytes: number;
  readonly #history: Int32Array[];
  readonly #lengths: Int32Array;

  constructor(
    native: Native,
    shape: { layers: number; kvDim: number },
    options: { slots: number; slotRows: number; cacheType: CacheType },
  ) {
    const { slots, slotRows, cacheType } = options;
    if (cacheType !== "f16" && cacheType !== "f32") {
      throw new RangeError(`cacheType must be "f16" or "f32", got "${cacheType}"`);
    }
    this.slotCount = slots;
    this.slotRows = slotRows;
    this.cacheType = cacheType;
    this.cacheTypeId = cacheType === "f16" ? 1 : 0;
    this.#layerBytes = slots * slotRows * shape.kvDim * (cacheType === "f16" ? 2 : 4);
    const bytes = shape.layers * this.#layerBytes;
    this.#k = native.alloc(bytes);
    try {
      this.#v = native.alloc(bytes);
    } catch (error) {
      this.#k.free();
      throw error;
    }
    this.byteLength = 2 * bytes;
    this.#history = Array.from({ length: slots }, () => new Int32Array(slotRows));
    this.#lengths = new Int32Array(slots);
  }

  /** Address of layer `layer`'s K cache. */
  kAddress(layer: number): number {
    return this.#k.address + layer * this.#layerBytes;
  }

  /** Address of layer `layer`'s V cache. */
  vAddress(layer: number): number {
    return this.#v.address + layer * this.#layerBytes;
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

  /** Keeps the first `length` tokens of slot `slot` (no-op when it holds fewer). */
  truncate(slot: number, length: number): void {
    this.#slot(slot);
    if (!Number.isInteger(length) || length < 0) {
      throw new RangeError(`truncate length must be an integer >= 0, got ${length}`);
    }
    if (length < this.#lengths[slot]) this.#lengths[slot] = length;
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
