/**
 * What the scheduler needs from a model: one `decode` of a batch whose
 * entries belong to several sequences ("slots") that share one KV cache.
 *
 * An entry is a token, its position in its slot's sequence, its slot, and
 * whether its logits are wanted. Each token continues its slot: its position
 * is the slot's length (after {@linkcode Engine.truncate}) plus the slot's
 * tokens before it in the batch, as the engine core's `Context.decode` asks.
 *
 * @example A batch: slot 0 decodes one token, slot 1 prefills three
 * ```ts
 * import { EngineBatch } from "./engine.ts";
 * const batch = new EngineBatch(8);
 * batch.add(42, 17, 0, true);
 * batch.add(1, 0, 1, false);
 * batch.add(5, 1, 1, false);
 * batch.add(9, 2, 1, true);
 * if (batch.count !== 4 || batch.logitsCount !== 2) throw new Error("batch");
 * ```
 *
 * @module
 */

/** A reusable batch: parallel arrays, filled with {@linkcode add}, emptied with {@linkcode clear}. */
export class EngineBatch {
  /** Token ids. */
  readonly tokens: Int32Array;
  /** Positions within each token's slot. */
  readonly positions: Int32Array;
  /** The slot of each token. */
  readonly slots: Int32Array;
  /** 1 when the token's logits are wanted. */
  readonly wantsLogits: Uint8Array;
  /** Entries in use. */
  count = 0;
  /** Entries whose logits are wanted. */
  logitsCount = 0;

  /** A batch of at most `capacity` tokens. */
  constructor(readonly capacity: number) {
    this.tokens = new Int32Array(capacity);
    this.positions = new Int32Array(capacity);
    this.slots = new Int32Array(capacity);
    this.wantsLogits = new Uint8Array(capacity);
  }

  /** Appends one entry; throws `RangeError` when the batch is full. */
  add(token: number, position: number, slot: number, wantsLogits: boolean): void {
    if (this.count >= this.capacity) throw new RangeError(`batch full (${this.capacity})`);
    const i = this.count++;
    this.tokens[i] = token;
    this.positions[i] = position;
    this.slots[i] = slot;
    this.wantsLogits[i] = wantsLogits ? 1 : 0;
    if (wantsLogits) this.logitsCount++;
  }

  /** Empties the batch. */
  clear(): void {
    this.count = 0;
    this.logitsCount = 0;
  }
}

/** A model that decodes batches over several sequences sharing one KV cache. */
export interface Engine {
  /** Logits per row. */
  readonly vocabSize: number;
  /** Sequences the KV cache holds. */
  readonly slotCount: number;
  /** Positions per slot. */
  readonly contextSize: number;
  /** Most entries per {@linkcode decode}. */
  readonly batchSize: number;
  /** Bytes of the KV cache (all slots). */
  readonly kvCacheBytes: number;
  /** Drops what `slot` holds from position `length` on (the next token of the slot goes there). */
  truncate(slot: number, length: number): void;
  /**
   * Runs the batch and returns `[logitsCount][vocabSize]` logits, one row per
   * entry with `wantsLogits`, in batch order: a view valid until the next call.
   */
  decode(batch: EngineBatch): Float32Array;
  /** Frees the engine's memory. */
  close(): void;
}
