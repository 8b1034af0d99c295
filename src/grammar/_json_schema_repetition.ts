/**
 * GBNF for "`item` repeated `min` to `max` times, optionally separated", as llama.cpp's
 * `build_repetition` writes it (`x?`, `x*`, `x+`, `x{m,n}`).
 *
 * @module
 */

/**
 * `item` repeated `min`..`max` times (`max` may be `Infinity`); with a `separator` rule,
 * one item then `(separator item)` repeated. `max` 0 gives the empty string.
 */
export function buildRepetition(item: string, min: number, max: number, separator = ""): string {
  const hasMax = max !== Infinity;
  if (max === 0) return "";
  if (min === 0 && max === 1) return item + "?";
  if (separator === "") {
    if (min === 1 && !hasMax) return item + "+";
    if (min === 0 && !hasMax) return item + "*";
    return item + "{" + min + "," + (hasMax ? String(max) : "") + "}";
  }
  const rest = buildRepetition(
    "(" + separator + " " + item + ")",
    min === 0 ? 0 : min - 1,
    hasMax ? max - 1 : max,
  );
  const result = item + " " + rest;
  return min === 0 ? "(" + result + ")?" : result;
}
