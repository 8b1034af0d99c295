/**
 * Logit processors: what changes a sequence's logits before its sampler
 * picks a token. A {@linkcode Sequence} runs its processors, in order, on a
 * private copy of each logits row, then tells each one the token it took.
 * Logit bias is the first; grammar masks plug in the same way.
 *
 * @example Keep token 7 out, make token 9 likelier
 * ```ts
 * import { LogitBias } from "./processors.ts";
 * const bias = new LogitBias([[7, -Infinity], [9, 2.5]], 512);
 * const logits = new Float32Array(512);
 * bias.process(logits); // logits[7] = -Infinity, logits[9] = 2.5
 * ```
 *
 * @module
 */

/** Changes logits before sampling; sees every token the sequence takes. */
export interface LogitProcessor {
  /** Changes `logits` (a copy of the model's row, vocabulary-sized) in place. */
  process(logits: Float32Array): void;
  /** The token the sequence took (prompt tokens are not shown). */
  accept?(token: number): void;
  /**
   * A processor that only forbids tokens may offer this cheap check of one
   * token. The sequence then samples without running `process`, and runs it
   * (and samples again) only when the sampled token is not allowed —
   * llama.cpp's grammar fast path, which picks the same token.
   */
  allows?(token: number): boolean;
}

/** Adds a fixed bias to some tokens' logits (OpenAI's and llama.cpp's `logit_bias`). */
export class LogitBias implements LogitProcessor {
  readonly #ids: Int32Array;
  readonly #bias: Float32Array;

  /**
   * `entries` are `[token id, bias]`; a bias of `-Infinity` bans the token.
   * Throws `RangeError` for an id outside `[0, vocabSize)` or a bias that is
   * NaN or `+Infinity`. A token listed twice gets the sum.
   */
  constructor(entries: Iterable<readonly [number, number]>, vocabSize: number) {
    const ids: number[] = [], bias: number[] = [];
    for (const [id, b] of entries) {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
        throw new RangeError(
          `logit bias: token id ${id} is outside the vocabulary [0, ${vocabSize})`,
        );
      }
      if (Number.isNaN(b) || b === Infinity) {
        throw new RangeError(`logit bias of token ${id} must be a number or -Infinity, got ${b}`);
      }
      ids.push(id);
      bias.push(b);
    }
    this.#ids = Int32Array.from(ids);
    this.#bias = Float32Array.from(bias);
  }

  /** True when no token is biased. */
  get empty(): boolean {
    return this.#ids.length === 0;
  }

  process(logits: Float32Array): void {
    const ids = this.#ids, bias = this.#bias;
    for (let i = 0; i < ids.length; i++) logits[ids[i]] += bias[i];
  }
}
