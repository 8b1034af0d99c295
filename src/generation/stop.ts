/**
 * Stop strings over streamed text. Text is held back while it could still be
 * the start of a stop string, so a stop string split across tokens is never
 * printed; once one appears, the text before it is released and the rest is
 * dropped.
 *
 * @example
 * ```ts
 * import { StopMatcher } from "./stop.ts";
 * let out = "";
 * const m = new StopMatcher(["\n\n"], (text) => (out += text));
 * m.push("Hello.\n"); // out = "Hello." ("\n" may start "\n\n")
 * m.push("\nBye"); // true: stopped, out stays "Hello."
 * ```
 *
 * @module
 */

/** Finds stop strings in streamed text; releases only text that cannot be part of one. */
export class StopMatcher {
  readonly #stops: readonly string[];
  /** `#prefixes[i][n]` = the first `n` characters of stop string `i` (precomputed). */
  readonly #prefixes: readonly (readonly string[])[];
  readonly #emit: (text: string) => void;
  #pending = "";
  #stopped = false;

  /** `stops` must be non-empty strings; `emit` receives the released text, in order. */
  constructor(stops: readonly string[], emit: (text: string) => void) {
    for (const s of stops) {
      if (typeof s !== "string" || s.length === 0) {
        throw new RangeError(`A stop string must be non-empty, got ${JSON.stringify(s)}`);
      }
    }
    this.#stops = stops;
    this.#prefixes = stops.map((s) => Array.from({ length: s.length }, (_, n) => s.slice(0, n)));
    this.#emit = emit;
  }

  /** True once a stop string was seen. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Adds text; returns true when a stop string is now complete (nothing after it is emitted). */
  push(text: string): boolean {
    if (this.#stopped) return true;
    if (this.#stops.length === 0) {
      if (text.length > 0) this.#emit(text);
      return false;
    }
    const pending = this.#pending + text;
    let cut = -1;
    for (const s of this.#stops) {
      const at = pending.indexOf(s);
      if (at >= 0 && (cut < 0 || at < cut)) cut = at;
    }
    if (cut >= 0) {
      if (cut > 0) this.#emit(pending.slice(0, cut));
      this.#pending = "";
      this.#stopped = true;
      return true;
    }
    const hold = this.#heldLength(pending);
    const release = pending.length - hold;
    if (release > 0) this.#emit(pending.slice(0, release));
    this.#pending = hold > 0 ? pending.slice(release) : "";
    return false;
  }

  /** The longest suffix of `text` that is a proper prefix of a stop string. */
  #heldLength(text: string): number {
    let best = 0;
    for (const prefixes of this.#prefixes) {
      const max = Math.min(prefixes.length - 1, text.length);
      for (let n = max; n > best; n--) {
        if (text.endsWith(prefixes[n])) {
          best = n;
          break;
        }
      }
    }
    return best;
  }

  /** Releases held text (generation ended without a stop string). */
  flush(): void {
    if (!this.#stopped && this.#pending.length > 0) this.#emit(this.#pending);
    this.#pending = "";
  }
}
