/**
 * An open-addressing hash map from a pair of token ids to an int (the BPE
 * merge ranks): typed arrays only, so building and probing 300k merges is
 * cheap and needs no string or boxed-number keys.
 *
 * @module
 */
export class PairMap {
  readonly #left: Int32Array;
  readonly #right: Int32Array;
  readonly #value: Int32Array;
  readonly #mask: number;
  #count = 0;

  /** A map for up to `capacity` entries. */
  constructor(capacity: number) {
    let size = 16;
    while (size < capacity * 2) size *= 2;
    this.#left = new Int32Array(size).fill(-1);
    this.#right = new Int32Array(size);
    this.#value = new Int32Array(size);
    this.#mask = size - 1;
  }

  get size(): number {
    return this.#count;
  }

  #slot(left: number, right: number): number {
    let h = Math.imul(left, 0x9e3779b1) ^ Math.imul(right + 0x7f4a7c15, 0x85ebca77);
    h ^= h >>> 15;
    let i = h & this.#mask;
    while (this.#left[i] !== -1 && (this.#left[i] !== left || this.#right[i] !== right)) {
      i = (i + 1) & this.#mask;
    }
    return i;
  }

  /** The value of (left, right), or -1. Ids must be >= 0. */
  get(left: number, right: number): number {
    const i = this.#slot(left, right);
    return this.#left[i] === -1 ? -1 : this.#value[i];
  }

  /** Sets (left, right) unless it is present; returns false if it was. */
  setIfAbsent(left: number, right: number, value: number): boolean {
    const i = this.#slot(left, right);
    if (this.#left[i] !== -1) return false;
    if (this.#count * 2 >= this.#mask) throw new RangeError("PairMap is full");
    this.#left[i] = left;
    this.#right[i] = right;
    this.#value[i] = value;
    this.#count++;
    return true;
  }
}
