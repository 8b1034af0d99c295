/**
 * The KV cache: `slots` sequences × layers × positions of K and V, and each
 * slot's token history (the tokens whose K/V the slot holds, position by
 * position). A slot is one sequence; {@linkcode KvCache.truncate} drops the
 * tail of one (to continue it from a common prefix), {@linkcode KvCache.clear}
 * empties it.
 *
 * Layout of layer `l`: `[slots][rows(l)][kvHeads·headDim]` of the K type (K)
 * and of the V type (V): any of {@linkcode CACHE_TYPES}, llama.cpp's `-ctk`/`-ctv`
 * names; a quantized row is whole blocks of 32 per head (each row written by the
 * type's quantizer as llama.cpp's cache writes it, ffi/kv_types.zig);
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
import { GgmlType } from "../gguf/mod.ts";
import { rowBytes } from "../kernels/types.ts";
import type { Native, NativeBuffer } from "../native/native.ts";
import type { ForwardCache } from "./forward.ts";

/** The KV cache element types, llama.cpp's `-ctk`/`-ctv` names. */
export const CACHE_TYPES = [
  "f32",
  "f16",
  "bf16",
  "q8_0",
  "q4_0",
  "q4_1",
  "q5_0",
  "q5_1",
  "iq4_nl",
] as const;

/** KV cache element type. */
export type CacheType = typeof CACHE_TYPES[number];

const CACHE_TYPE_IDS: Record<CacheType, number> = {
  f32: GgmlType.F32,
  f16: GgmlType.F16,
  bf16: GgmlType.BF16,
  q8_0: GgmlType.Q8_0,
  q4_0: GgmlType.Q4_0,
  q4_1: GgmlType.Q4_1,
  q5_0: GgmlType.Q5_0,
  q5_1: GgmlType.Q5_1,
  iq4_nl: GgmlType.IQ4_NL,
};

/** True when `name` is a cache type. */
export function isCacheType(name: unknown): name is CacheType {
  return typeof name === "string" && (CACHE_TYPES as readonly string[]).includes(name);
}

/** `name` as a cache type, or a RangeError naming the valid ones (`what`: the option's name). */
export function cacheType(name: unknown, what = "cacheType"): CacheType {
  if (isCacheType(name)) return name;
  throw new RangeError(
    `${what} must be one of ${CACHE_TYPES.join(", ")}, got ${JSON.stringify(name)}`,
  );
}

/** True for the block-quantized cache types (not f32, f16, bf16). */
export function isQuantized(type: CacheType): boolean {
  return type !== "f32" && type !== "f16" && type !== "bf16";
}

/** The ggml type id of cache type `type` (the kernels' cache type id). */
export function cacheTypeId(type: CacheType): number {
  return CACHE_TYPE_IDS[type];
}

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
  /** K's element type. */
  readonly cacheTypeK: CacheType;
  /** V's element type. */
  readonly cacheTypeV: CacheType;
  /** K's type as the kernels name it (its ggml id). */
  readonly kTypeId: number;
  /** V's type as the kernels name it (its ggml id). */
  readonly vTypeId: number;
  /**
   * Width of the Hadamard rotation of Q and K (0: none): llama.cpp rotates them when K
   * is quantized and the head width a multiple of 64, by the widest power of two that
   * divides the head (`attn_rot_k`).
   */
  readonly kRotation: number;
  /** Width of the rotation of V and the attention output (0: none; 64 for a quantized V). */
  readonly vRotation: number;
  /** Bytes of K plus V. */
  readonly byteLength: number;
  /** Bytes of K plus V per position of one layer, summed over the layers (one slot). */
  readonly bytesPerToken: number;
  readonly #k: NativeBuffer;
  readonly #v: NativeBuffer;
  readonly #kOffsets: Float64Array;
  readonly #vOffsets: Float64Array;
  readonly #kRowBytes: number;
  readonly #vRowBytes: number;
  readonly #history: Int32Array[];
  readonly #lengths: Int32Array;

  /**
   * `windows[l]` > 0 makes layer `l` a ring of `min(slotRows, windows[l] + batchSize − 1)`
   * rows (default: every layer full). `cacheType` sets K and V; `cacheTypeK` and
   * `cacheTypeV` override it for one (default f16). A quantized type needs `headDim`
   * to be a whole number of its blocks.
   */
  constructor(
    native: Native,
    shape: { layers: number; kvDim: number; headDim?: number },
    options: {
      slots: number;
      slotRows: number;
      cacheType?: CacheType;
      cacheTypeK?: CacheType;
      cacheTypeV?: CacheType;
      windows?: ArrayLike<number>;
      batchSize?: number;
    },
  ) {
    const { slots, slotRows } = options;
    const k = cacheType(options.cacheTypeK ?? options.cacheType ?? "f16", "cacheTypeK");
    const v = cacheType(options.cacheTypeV ?? options.cacheType ?? "f16", "cacheTypeV");
    const headDim = shape.headDim ?? shape.kvDim;
    const kRow = cacheRowBytes(native, k, shape.kvDim, headDim, "cacheTypeK");
    const vRow = cacheRowBytes(native, v, shape.kvDim, headDim, "cacheTypeV");
    this.slotCount = slots;
    this.slotRows = slotRows;
    this.cacheTypeK = k;
    this.cacheTypeV = v;
    this.kTypeId = cacheTypeId(k);
    this.vTypeId = cacheTypeId(v);
    let kRotation = 0;
    if (isQuantized(k) && headDim % 64 === 0) {
      kRotation = 64;
      while (headDim % (2 * kRotation) === 0) kRotation *= 2;
    }
    this.kRotation = kRotation;
    this.vRotation = isQuantized(v) && headDim % 64 === 0 ? 64 : 0;
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
    this.#kRowBytes = kRow;
    this.#vRowBytes = vRow;
    this.bytesPerToken = shape.layers * (kRow + vRow);
    this.#kOffsets = new Float64Array(shape.layers + 1);
    this.#vOffsets = new Float64Array(shape.layers + 1);
    for (let l = 0; l < shape.layers; l++) {
      this.#kOffsets[l + 1] = this.#kOffsets[l] + slots * this.layerRows[l] * kRow;
      this.#vOffsets[l + 1] = this.#vOffsets[l] + slots * this.layerRows[l] * vRow;
    }
    const kBytes = this.#kOffsets[shape.layers], vBytes = this.#vOffsets[shape.layers];
    this.#k = native.alloc(kBytes);
    try {
      this.#v = native.alloc(vBytes);
    } catch (error) {
      this.#k.free();
      throw error;
    }
    this.byteLength = kBytes + vBytes;
    const kAt = this.#k.address, vAt = this.#v.address;
    // Arrays of tagged elements (made of strings first): a raw-double array would box
    // each address anew every time the forward pass hands it to a kernel.
    const kLayers: unknown[] = new Array(shape.layers).fill("");
    const vLayers: unknown[] = new Array(shape.layers).fill("");
    for (let l = 0; l < shape.layers; l++) {
      kLayers[l] = kAt + this.#kOffsets[l];
      vLayers[l] = vAt + this.#vOffsets[l];
    }
    this.kLayers = kLayers as number[];
    this.vLayers = vLayers as number[];
    this.#history = Array.from({ length: slots }, () => new Int32Array(slotRows));
    this.#lengths = new Int32Array(slots);
  }

  /** The cache's types as a label: `q8_0`, or `q8_0/q4_0` when K's and V's differ. */
  get cacheType(): string {
    return this.cacheTypeK === this.cacheTypeV
      ? this.cacheTypeK
      : `${this.cacheTypeK}/${this.cacheTypeV}`;
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
    const k = this.#k.bytes(), v = this.#v.bytes();
    for (let l = 0; l < this.layerRows.length; l++) {
      const rows = this.layerRows[l];
      const used = Math.min(n, rows); // a ring's rows are all in use past its size
      for (
        const [bytes, base, rowBytes] of [[k, this.#kOffsets[l], this.#kRowBytes], [
          v,
          this.#vOffsets[l],
          this.#vRowBytes,
        ]] as const
      ) {
        const src = base + from * rows * rowBytes, dst = base + to * rows * rowBytes;
        bytes.copyWithin(dst, src, src + used * rowBytes);
      }
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
    const k = this.#k.bytes(), v = this.#v.bytes();
    const layers: Uint8Array[] = [];
    for (let l = 0; l < this.layerRows.length; l++) {
      const rows = this.layerRows[l], used = Math.min(n, rows);
      const ks = this.#kOffsets[l] + slot * rows * this.#kRowBytes;
      const vs = this.#vOffsets[l] + slot * rows * this.#vRowBytes;
      layers.push(
        k.slice(ks, ks + used * this.#kRowBytes),
        v.slice(vs, vs + used * this.#vRowBytes),
      );
    }
    return { tokens: this.#history[slot].slice(0, n), layers };
  }

  /** Bytes {@linkcode exportSlot} gives per layer (K, then V) for `n` tokens. */
  slotLayerBytes(n: number): number[] {
    const out: number[] = [];
    for (let l = 0; l < this.layerRows.length; l++) {
      const used = Math.min(n, this.layerRows[l]);
      out.push(used * this.#kRowBytes, used * this.#vRowBytes);
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
    const k = this.#k.bytes(), v = this.#v.bytes();
    for (let l = 0; l < this.layerRows.length; l++) {
      const rows = this.layerRows[l];
      k.set(layers[2 * l], this.#kOffsets[l] + slot * rows * this.#kRowBytes);
      v.set(layers[2 * l + 1], this.#vOffsets[l] + slot * rows * this.#vRowBytes);
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

/** Bytes of one cache row of `kvDim` elements of `type`; a RangeError when a head is not whole blocks. */
function cacheRowBytes(
  native: Native,
  type: CacheType,
  kvDim: number,
  headDim: number,
  what: string,
): number {
  const id = cacheTypeId(type);
  try {
    rowBytes(native, id, headDim);
  } catch {
    throw new RangeError(
      `${what} ${type} needs a head width that is a whole number of its blocks (32 values); this model's heads are ${headDim} wide`,
    );
  }
  return rowBytes(native, id, kvDim);
}
