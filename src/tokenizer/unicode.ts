/**
 * Unicode helpers for the tokenizers: code point classes as llama.cpp sees
 * them (one general category per code point plus its own whitespace set),
 * UTF-8 encoding, and GPT-2's byte ↔ printable-character map.
 *
 * @module
 */

/** Class bits of one code point (`cpFlags`). */
export const CP = {
  LETTER: 1,
  NUMBER: 2,
  PUNCTUATION: 4,
  MARK: 8,
  SYMBOL: 16,
  WHITESPACE: 32,
  /** Cc, Cf, Co, Cs. */
  CONTROL: 64,
} as const;

/**
 * White_Space code points: llama.cpp's set (Unicode White_Space). Unlike JS
 * `\s` it holds U+0085 and not U+FEFF.
 */
const WHITESPACE: readonly number[] = [
  0x09,
  0x0a,
  0x0b,
  0x0c,
  0x0d,
  0x20,
  0x85,
  0xa0,
  0x1680,
  0x2000,
  0x2001,
  0x2002,
  0x2003,
  0x2004,
  0x2005,
  0x2006,
  0x2007,
  0x2008,
  0x2009,
  0x200a,
  0x2028,
  0x2029,
  0x202f,
  0x205f,
  0x3000,
];
const WHITESPACE_SET = new Set(WHITESPACE);

/**
 * The 5,185 code points new in Unicode 16.0 (first, last pairs). llama.cpp's tables are
 * Unicode 15.1, where these are unassigned; JS engines may already know them (V8 does), so
 * they are treated as unassigned here too, or their category would split words differently.
 */
const UNICODE_16_ADDITIONS = new Uint32Array([
  0x897,
  0x897,
  0x1b4e,
  0x1b4f,
  0x1b7f,
  0x1b7f,
  0x1c89,
  0x1c8a,
  0x2427,
  0x2429,
  0x31e4,
  0x31e5,
  0xa7cb,
  0xa7cd,
  0xa7da,
  0xa7dc,
  0x105c0,
  0x105f3,
  0x10d40,
  0x10d65,
  0x10d69,
  0x10d85,
  0x10d8e,
  0x10d8f,
  0x10ec2,
  0x10ec4,
  0x10efc,
  0x10efc,
  0x11380,
  0x11389,
  0x1138b,
  0x1138b,
  0x1138e,
  0x1138e,
  0x11390,
  0x113b5,
  0x113b7,
  0x113c0,
  0x113c2,
  0x113c2,
  0x113c5,
  0x113c5,
  0x113c7,
  0x113ca,
  0x113cc,
  0x113d5,
  0x113d7,
  0x113d8,
  0x113e1,
  0x113e2,
  0x116d0,
  0x116e3,
  0x11bc0,
  0x11be1,
  0x11bf0,
  0x11bf9,
  0x11f5a,
  0x11f5a,
  0x13460,
  0x143fa,
  0x16100,
  0x16139,
  0x16d40,
  0x16d79,
  0x18cff,
  0x18cff,
  0x1cc00,
  0x1ccf9,
  0x1cd00,
  0x1ceb3,
  0x1e5d0,
  0x1e5fa,
  0x1e5ff,
  0x1e5ff,
  0x1f8b2,
  0x1f8bb,
  0x1f8c0,
  0x1f8c1,
  0x1fa89,
  0x1fa89,
  0x1fa8f,
  0x1fa8f,
  0x1fabe,
  0x1fabe,
  0x1fac6,
  0x1fac6,
  0x1fadc,
  0x1fadc,
  0x1fadf,
  0x1fadf,
  0x1fae9,
  0x1fae9,
  0x1fbcb,
  0x1fbef,
]);

/** True if `cp` was first assigned in Unicode 16.0. */
export function isUnicode16Addition(cp: number): boolean {
  if (cp < 0x897 || cp > 0x1fbef) return false;
  const r = UNICODE_16_ADDITIONS;
  let lo = 0, hi = r.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (cp < r[2 * mid]) hi = mid - 1;
    else if (cp > r[2 * mid + 1]) lo = mid + 1;
    else return true;
  }
  return false;
}

const COMPUTED = 128;
const RE_L = /^\p{L}$/u;
const RE_N = /^\p{N}$/u;
const RE_P = /^\p{P}$/u;
const RE_M = /^\p{M}$/u;
const RE_S = /^\p{S}$/u;
const RE_C = /^[\p{Cc}\p{Cf}\p{Co}]$/u;

/** Per code point class bits, filled on first use (1.1 MB, shared). */
let flagsTable: Uint8Array | undefined;

function computeFlags(cp: number): number {
  let f = 0;
  if (cp >= 0xd800 && cp <= 0xdfff) return COMPUTED | CP.CONTROL; // surrogates: category Cs
  if (isUnicode16Addition(cp)) return COMPUTED;
  const ch = String.fromCodePoint(cp);
  if (RE_L.test(ch)) f |= CP.LETTER;
  else if (RE_N.test(ch)) f |= CP.NUMBER;
  else if (RE_P.test(ch)) f |= CP.PUNCTUATION;
  else if (RE_M.test(ch)) f |= CP.MARK;
  else if (RE_S.test(ch)) f |= CP.SYMBOL;
  else if (RE_C.test(ch)) f |= CP.CONTROL;
  if (WHITESPACE_SET.has(cp)) f |= CP.WHITESPACE;
  return f | COMPUTED;
}

/** The class bits (`CP`) of code point `cp` (0 outside 0..0x10FFFF). */
export function cpFlags(cp: number): number {
  if (cp < 0 || cp > 0x10ffff) return 0;
  const table = flagsTable ??= new Uint8Array(0x110000);
  let f = table[cp];
  if (f === 0) {
    f = computeFlags(cp);
    table[cp] = f;
  }
  return f & 0x7f;
}

/** The code points of `text` (lone surrogates become U+FFFD). */
export function codePoints(text: string): Uint32Array {
  const out = new Uint32Array(text.length);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      } else c = 0xfffd;
    } else if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    out[n++] = c;
  }
  return out.subarray(0, n);
}

/** Replaces lone surrogates with U+FFFD (what encoding to UTF-8 does). */
export function wellFormed(text: string): string {
  // deno-lint-ignore no-explicit-any
  const s = text as any;
  if (typeof s.toWellFormed === "function") return s.toWellFormed();
  return String.fromCodePoint(...codePoints(text));
}

/** GPT-2's map from a byte to the printable character standing for it. */
export const BYTE_TO_CHAR: readonly string[] = (() => {
  const map: string[] = new Array(256);
  const direct = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
  let n = 0;
  for (let b = 0; b < 256; b++) {
    map[b] = String.fromCharCode(direct(b) ? b : 256 + n++);
  }
  return map;
})();

/** The inverse of `BYTE_TO_CHAR`: char code → byte, or -1. */
export const CHAR_TO_BYTE: Int16Array = (() => {
  const inv = new Int16Array(512).fill(-1);
  BYTE_TO_CHAR.forEach((ch, b) => inv[ch.charCodeAt(0)] = b);
  return inv;
})();

const textEncoder = new TextEncoder();

/** UTF-8 bytes of a string. */
export function utf8(text: string): Uint8Array {
  return textEncoder.encode(text);
}

/**
 * Decodes UTF-8 as llama.cpp does (`unicode_cpts_from_utf8`): each byte that
 * does not start a well-formed sequence becomes one U+FFFD and decoding
 * resumes at the next byte (the WHATWG decoder folds some runs into one).
 * Surrogate code points decoded this way become U+FFFD too (JS strings).
 */
export function decodeUtf8LikeLlama(bytes: Uint8Array): string {
  const parts: string[] = [];
  const codes: number[] = [];
  const isCont = (i: number) => i < bytes.length && (bytes[i] & 0xc0) === 0x80;
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i];
    let cp = 0xfffd, n = 1;
    if (!(b & 0x80)) cp = b;
    else if (!(b & 0x40)) cp = 0xfffd;
    else if (!(b & 0x20)) {
      if (isCont(i + 1)) [cp, n] = [((b & 0x1f) << 6) | (bytes[i + 1] & 0x3f), 2];
    } else if (!(b & 0x10)) {
      if (isCont(i + 1) && isCont(i + 2)) {
        cp = ((b & 0x0f) << 12) | ((bytes[i + 1] & 0x3f) << 6) | (bytes[i + 2] & 0x3f);
        n = 3;
      }
    } else if (!(b & 0x08)) {
      if (isCont(i + 1) && isCont(i + 2) && isCont(i + 3)) {
        cp = ((b & 0x07) << 18) | ((bytes[i + 1] & 0x3f) << 12) | ((bytes[i + 2] & 0x3f) << 6) |
          (bytes[i + 3] & 0x3f);
        n = 4;
      }
    }
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) cp = 0xfffd;
    codes.push(cp);
    if (codes.length >= 8192) {
      parts.push(String.fromCodePoint(...codes));
      codes.length = 0;
    }
    i += n;
  }
  parts.push(String.fromCodePoint(...codes));
  return parts.join("");
}
