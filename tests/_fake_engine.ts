/**
 * A small fake {@linkcode Engine} for scheduler tests: its "model" predicts
 * the next token from a hash of every token its slot holds at positions
 * [0, pos], so any mistake in the scheduler's KV bookkeeping (a wrong slot,
 * position, a skipped or stale token) changes the output. It checks that
 * each token continues its slot exactly (as the engine core's `Context`),
 * and records every batch.
 *
 * @module
 */
import type { Engine, EngineBatch } from "../src/server/engine.ts";
import type { BackendTokenizer } from "../src/server/backend.ts";

/** Token 0 ends generation; others print as letters. */
export const FAKE_EOG = 0;

/** The next token the fake model predicts after `tokens` (never 0 unless `eogAfter` says so). */
export function fakeNext(tokens: ArrayLike<number>, vocab: number): number {
  let h = 2166136261;
  for (let i = 0; i < tokens.length; i++) h = Math.imul(h ^ tokens[i], 16777619) >>> 0;
  return 1 + (h % (vocab - 1));
}

export class FakeEngine implements Engine {
  readonly vocabSize: number;
  readonly slotCount: number;
  readonly contextSize: number;
  readonly batchSize: number;
  readonly kvCacheBytes = 0;
  readonly cache: Int32Array[];
  readonly filled: number[];
  /** Every batch: [slot, position, wantsLogits] per entry. */
  readonly batches: Array<Array<[number, number, boolean]>> = [];
  #logits: Float32Array;
  closed = false;

  constructor({ vocab = 40, slots = 2, context = 64, batch = 32 } = {}) {
    this.vocabSize = vocab;
    this.slotCount = slots;
    this.contextSize = context;
    this.batchSize = batch;
    this.cache = Array.from({ length: slots }, () => new Int32Array(context));
    this.filled = new Array(slots).fill(0);
    this.#logits = new Float32Array(slots * vocab);
  }

  decode(batch: EngineBatch): Float32Array {
    const entries: Array<[number, number, boolean]> = [];
    let row = 0;
    this.#logits.fill(0);
    for (let i = 0; i < batch.count; i++) {
      const slot = batch.slots[i], pos = batch.positions[i], want = batch.wantsLogits[i] === 1;
      entries.push([slot, pos, want]);
      // As the engine core's Context: each token continues its slot exactly.
      if (pos !== this.filled[slot]) {
        throw new Error(
          `slot ${slot}: position ${pos}, the slot continues at ${this.filled[slot]}`,
        );
      }
      this.cache[slot][pos] = batch.tokens[i];
      this.filled[slot] = pos + 1;
      if (want) {
        const next = fakeNext(this.cache[slot].subarray(0, pos + 1), this.vocabSize);
        this.#logits[row * this.vocabSize + next] = 10;
        row++;
      }
    }
    this.batches.push(entries);
    return this.#logits.subarray(0, row * this.vocabSize);
  }

  truncate(slot: number, length: number): void {
    if (length > this.filled[slot]) {
      throw new Error(`truncate slot ${slot} to ${length} > ${this.filled[slot]}`);
    }
    this.filled[slot] = length;
  }

  close(): void {
    this.closed = true;
  }
}

/** A tokenizer for the fake engine: ids 1..26 are "a".."z", other ids "#". */
export const fakeTokenizer: BackendTokenizer = {
  vocabSize: 40,
  encode: (text) => [...text].map((c) => Math.max(1, Math.min(39, c.charCodeAt(0) - 96))),
  decode: (ids) => Array.from(ids, (id) => fakeTokenizer.tokenToPiece(id)).join(""),
  createDecoder: () => ({ push: (id) => fakeTokenizer.tokenToPiece(id), flush: () => "" }),
  isEog: (id) => id === FAKE_EOG,
  tokenToPiece: (id) => (id >= 1 && id <= 26 ? String.fromCharCode(96 + id) : "#"),
};

/** What a sequence run alone produces: greedy `fakeNext` until `max` or EOG. */
export function fakeAlone(prompt: number[], max: number, vocab = 40): number[] {
  const seq = [...prompt];
  const out: number[] = [];
  while (out.length < max) {
    const next = fakeNext(seq, vocab);
    out.push(next);
    seq.push(next);
  }
  return out;
}
