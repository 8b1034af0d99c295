/**
 * GBNF for the decimal integers within inclusive bounds, digit by digit, as llama.cpp's
 * `build_min_max_int` writes it (e.g. `[0-9] | ([1] [0-9] | [2] [0-3])` for 0..23). Bounds
 * are safe integers; `null` is unbounded. Unbounded sides allow up to 16 digits, like the
 * `integral-part` primitive rule.
 *
 * @module
 */

const INT_DIGITS = 16;

function digitRange(from: string, to: string): string {
  return "[" + (from === to ? from : from + "-" + to) + "]";
}

function shift(c: string, by: number): string {
  return String.fromCharCode(c.charCodeAt(0) + by);
}

function moreDigits(minDigits: number, maxDigits: number): string {
  if (minDigits === maxDigits && minDigits === 1) return "[0-9]";
  return "[0-9]{" + minDigits + (maxDigits !== minDigits ? "," + maxDigits : "") + "}";
}

/** The numbers from `from` to `to`, two digit strings of the same length. */
function uniformRange(from: string, to: string): string {
  let out = "";
  let i = 0;
  while (i < from.length && i < to.length && from[i] === to[i]) i++;
  if (i > 0) out += '"' + from.slice(0, i) + '"';
  if (i < from.length && i < to.length) {
    if (i > 0) out += " ";
    const subLen = from.length - i - 1;
    if (subLen > 0) {
      const fromSub = from.slice(i + 1);
      const toSub = to.slice(i + 1);
      const zeros = "0".repeat(subLen);
      const nines = "9".repeat(subLen);
      let toReached = false;
      out += "(";
      if (fromSub === zeros) {
        out += digitRange(from[i], shift(to[i], -1)) + " " + moreDigits(subLen, subLen);
      } else {
        out += "[" + from[i] + "] (" + uniformRange(fromSub, nines) + ")";
        if (from[i] < shift(to[i], -1)) {
          out += " | ";
          if (toSub === nines) {
            out += digitRange(shift(from[i], 1), to[i]);
            toReached = true;
          } else {
            out += digitRange(shift(from[i], 1), shift(to[i], -1));
          }
          out += " " + moreDigits(subLen, subLen);
        }
      }
      if (!toReached) out += " | " + digitRange(to[i], to[i]) + " " + uniformRange(zeros, toSub);
      out += ")";
    } else {
      out += "[" + from[i] + "-" + to[i] + "]";
    }
  }
  return out;
}

/** The alternatives (no outer parentheses) for the integers in `min`..`max`. */
export function buildMinMaxInt(
  min: number | null,
  max: number | null,
  decimalsLeft = INT_DIGITS,
  topLevel = true,
): string {
  if (min !== null && max !== null) {
    if (min < 0 && max < 0) return '"-" (' + buildMinMaxInt(-max, -min, decimalsLeft, true) + ")";
    let out = "";
    if (min < 0) {
      out += '"-" (' + buildMinMaxInt(0, -min, decimalsLeft, true) + ") | ";
      min = 0;
    }
    let minS = String(min);
    const maxS = String(max);
    for (let digits = minS.length; digits < maxS.length; digits++) {
      out += uniformRange(minS, "9".repeat(digits)) + " | ";
      minS = "1" + "0".repeat(digits);
    }
    return out + uniformRange(minS, maxS);
  }
  const lessDecimals = Math.max(decimalsLeft - 1, 1);
  if (min !== null) {
    if (min < 0) {
      return '"-" (' + buildMinMaxInt(null, -min, decimalsLeft, false) + ") | [0] | [1-9] " +
        moreDigits(0, decimalsLeft - 1);
    }
    if (min === 0) {
      return topLevel ? "[0] | [1-9] " + moreDigits(0, lessDecimals) : moreDigits(1, decimalsLeft);
    }
    if (min <= 9) {
      const c = String(min);
      const rangeStart = topLevel ? "1" : "0";
      let out = "";
      if (c > rangeStart) {
        out += digitRange(rangeStart, shift(c, -1)) + " " + moreDigits(1, lessDecimals) + " | ";
      }
      return out + digitRange(c, "9") + " " + moreDigits(0, lessDecimals);
    }
    const minS = String(min);
    const len = minS.length;
    const c = minS[0];
    let out = "";
    if (c > "1") {
      out += digitRange(topLevel ? "1" : "0", shift(c, -1)) + " " + moreDigits(len, lessDecimals) +
        " | ";
    }
    out += digitRange(c, c) + " (" +
      buildMinMaxInt(Number(minS.slice(1)), null, lessDecimals, false) + ")";
    if (c < "9") {
      out += " | " + digitRange(shift(c, 1), "9") + " " + moreDigits(len - 1, lessDecimals);
    }
    return out;
  }
  if (max !== null) {
    if (max >= 0) {
      const negatives = topLevel ? '"-" [1-9] ' + moreDigits(0, lessDecimals) + " | " : "";
      return negatives + buildMinMaxInt(0, max, decimalsLeft, true);
    }
    // llama.cpp passes top_level = false here, which lets the magnitude start with 0
    // (`-01`, `-0001`: not JSON); a magnitude of at least -max starts with 1-9.
    return '"-" (' + buildMinMaxInt(-max, null, decimalsLeft, true) + ")";
  }
  throw new Error("buildMinMaxInt: at least one bound must be set");
}
