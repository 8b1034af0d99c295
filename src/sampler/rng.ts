/**
 * A small seeded random number generator: xoshiro128** seeded through
 * splitmix32, so every 32-bit seed gives an independent, reproducible stream.
 * The same seed gives the same numbers in Deno and Bun.
 *
 * @example
 * ```ts
 * import { Rng } from "./rng.ts";
 * const rng = new Rng(42);
 * const x = rng.nextFloat(); // in [0, 1)
 * ```
 *
 * @module
 */

/** Throws a `RangeError` unless `seed` is an integer in [0, 2^32). */
export function checkSeed(seed: number): void {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new RangeError(`seed must be an integer in [0, 4294967295], got ${seed}`);
  }
}

/** A seeded xoshiro128** generator. */
export class Rng {
  readonly #state = new Uint32Array(4);
  /** The seed this generator started from. */
  readonly seed: number;

  /** `seed` must be an integer in [0, 2^32). */
  constructor(seed: number) {
    checkSeed(seed);
    this.seed = seed;
    let s = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      // splitmix32
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      this.#state[i] = (z ^ (z >>> 16)) >>> 0;
    }
  }

  /** The next 32-bit unsigned integer. */
  nextU32(): number {
    const s = this.#state;
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** A float in [0, 1) with 32 random bits. */
  nextFloat(): number {
    return this.nextU32() / 4294967296;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** A random seed from the platform's crypto source (used when no `--seed` is given). */
export function randomSeed(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0];
}
