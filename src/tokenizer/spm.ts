/**
 * SentencePiece-style BPE (`tokenizer.ggml.model = "llama"`): the text, with
 * spaces escaped to `▁`, starts as one symbol per character; the adjacent
 * pair whose concatenation is the vocabulary token with the highest score is
 * merged (leftmost first on ties) until no pair is a token. A character that
 * is not a token is written as its UTF-8 bytes (`<0xXX>` tokens).
 *
 * @module
 */
import type { PairHeap } from "./_heap.ts";
import { utf8 } from "./unicode.ts";
import type { TokenIndex } from "./_token_index.ts";
import { NO_TOKEN, TokenizerError, type Vocab } from "./vocab.ts";

/** Bytes of a UTF-8 sequence by its lead byte's high nibble, as llama.cpp counts them. */
const UTF8_LENGTH = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];

/** The byte-fallback token of each byte: `<0xXX>`, else the one-character token, else unk. */
export function spmByteTokens(vocab: Vocab): Int32Array {
  const table = new Int32Array(256);
  for (let b = 0; b < 256; b++) {
    const hex = b.toString(16).toUpperCase().padStart(2, "0");
    table[b] = vocab.tokenToId.get(`<0x${hex}>`) ??
      (b < 128 ? vocab.tokenToId.get(String.fromCharCode(b)) : undefined) ?? vocab.unk;
  }
  return table;
}

/**
 * Merges one (escaped) text into tokens, appended to `out`. With `binaryIndex`
 * the text is raw bytes, one char per byte (for input that is not valid UTF-8,
 * which llama.cpp merges byte-wise), looked up in that index of token bytes.
 */
export function spmEncode(
  vocab: Vocab,
  byteTokens: Int32Array,
  heap: PairHeap,
  text: string,
  out: number[],
  binaryIndex?: TokenIndex,
): void {
  const n16 = text.length;
  if (n16 === 0) return;
  // symbols: one per code point, as UTF-16 ranges
  const start = new Int32Array(n16);
  const len = new Int32Array(n16);
  const prev = new Int32Array(n16);
  const next = new Int32Array(n16);
  let n = 0;
  for (let i = 0; i < n16; n++) {
    const c = text.charCodeAt(i);
    const w = binaryIndex
      ? Math.min(UTF8_LENGTH[c >> 4], n16 - i)
      : c >= 0xd800 && c <= 0xdbff && i + 1 < n16
      ? 2
      : 1;
    start[n] = i;
    len[n] = w;
    prev[n] = n - 1;
    next[n] = n + 1;
    i += w;
  }
  next[n - 1] = -1;

  const { scores } = vocab;
  const tokenToId = binaryIndex ?? vocab.tokenToId;
  heap.clear();
  const tryPair = (left: number, right: number) => {
    if (left < 0 || right < 0) return;
    const size = len[left] + len[right];
    const id = tokenToId.find(text, start[left], start[left] + size);
    if (id < 0) return;
    heap.push(-scores[id], left, right, size);
  };
  for (let i = 1; i < n; i++) {
    const size = len[i - 1] + len[i];
    const id = tokenToId.find(text, start[i - 1], start[i - 1] + size);
    if (id >= 0) heap.add(-scores[id], i - 1, i, size);
  }
  heap.heapify();
  while (heap.length > 0) {
    heap.pop();
    const left = heap.topLeft, right = heap.topRight;
    if (len[left] === 0 || len[right] === 0 || len[left] + len[right] !== heap.topSize) continue;
    len[left] += len[right];
    len[right] = 0;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    tryPair(prev[left], left);
    tryPair(left, next[left]);
  }

  for (let i = 0; i !== -1; i = next[i]) {
    const id = tokenToId.find(text, start[i], start[i] + len[i]);
    if (id >= 0) {
      out.push(id);
      continue;
    }
    const piece = text.substr(start[i], len[i]);
    const bytes = binaryIndex ? Array.from(piece, (ch) => ch.charCodeAt(0)) : utf8(piece);
    for (const b of bytes) {
      const t = byteTokens[b];
      if (t === NO_TOKEN) {
        throw new TokenizerError(`no token for byte 0x${b.toString(16)} and no unknown token`);
      }
      out.push(t);
    }
  }
}

/**
 * The set of adjacent code point pairs found inside any token, as
 * `first * 0x110000 + second`. Between two characters that never sit side by
 * side in a token no merge can happen, so the text can be cut there and each
 * piece merged (and cached) on its own with the same result.
 */
export function spmJoinablePairs(vocab: Vocab): Set<number> {
  const pairs = new Set<number>();
  for (const token of vocab.tokens) {
    let prev = -1;
    for (let i = 0; i < token.length; i++) {
      let cp = token.charCodeAt(i);
      if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < token.length) {
        cp = token.codePointAt(i)!;
        i++;
      }
      if (prev >= 0) pairs.add(prev * 0x110000 + cp);
      prev = cp;
    }
  }
  return pairs;
}

/** Cuts escaped text where no token can span (see `spmJoinablePairs`). */
export function spmPieces(text: string, pairs: Set<number>): string[] {
  const pieces: string[] = [];
  let start = 0;
  let prev = -1;
  for (let i = 0; i < text.length; i++) {
    const at = i;
    let cp = text.charCodeAt(i);
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < text.length) {
      cp = text.codePointAt(i)!;
      i++;
    }
    if (prev >= 0 && !pairs.has(prev * 0x110000 + cp)) {
      pieces.push(text.slice(start, at));
      start = at;
    }
    prev = cp;
  }
  if (start < text.length) pieces.push(text.slice(start));
  return pieces;
}
