/**
 * A batch of tokens for {@linkcode Context.decode}: each with its position,
 * its KV-cache slot (its sequence) and whether its logits are wanted. One
 * batch may mix a prefill chunk of one sequence with decode tokens of
 * others; tokens of one slot must continue that slot's history in order.
 *
 * @example Prefill of slot 0 beside a decode step of slot 1
 * ```ts
 * import { Batch } from "./batch.ts";
 * const batch = new Batch(512);
 * const prompt = [1, 403, 407, 261];
 * prompt.forEach((id, i) => batch.add(id, i, 0, i === prompt.length - 1));
 * batch.add(42, 17, 1, true); // slot 1 has 17 tokens already
 * // context.decode(batch): logits row 0 is slot 0's last token, row 1 slot 1's
 * ```
 *
 * @module
 */

/** Tokens with position, slot and wants-logits, in plain typed arrays (no allocation per add). */
export class Batch {
  /** Most tokens the batch holds. */
  readonly capacity: number;
  /** Token ids `[0, count)`. */
  readonly tokens: Int32Array;
  /** Each token's position in its sequence. */
  readonly positions: Int32Array;
  /** Each token's KV-cache slot. */
  readonly slots: Int32Array;
  /** 1 where the token's logits are wanted. */
  readonly wantsLogits: Uint8Array;
  /** Tokens added since the last {@linkcode clear}. */
  count = 0;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > 1 << 20) {
      throw new RangeError(`batch capacity must be an integer in [1, 2^20], got ${capacity}`);
    }
    this.capacity = capacity;
    this.tokens = new Int32Array(capacity);
    this.positions = new Int32Array(capacity);
    this.slots = new Int32Array(capacity);
    this.wantsLogits = new Uint8Array(capacity);
  }

  /** Empties the batch. */
  clear(): void {
    this.count = 0;
  }

  /** Appends a token; throws `RangeError` when the batch is full. */
  add(token: number, position: number, slot: number, wantsLogits = false): void {
    const i = this.count;
    if (i >= this.capacity) throw new RangeError(`the batch is full (${this.capacity} tokens)`);
    this.tokens[i] = token;
    this.positions[i] = position;
    this.slots[i] = slot;
    this.wantsLogits[i] = wantsLogits ? 1 : 0;
    this.count = i + 1;
  }
}
