/**
 * Byte-level BPE (`tokenizer.ggml.model = "gpt2"`): each pre-tokenized word
 * is written as GPT-2's printable stand-ins for its UTF-8 bytes, then the
 * adjacent pair with the lowest merge rank is merged (leftmost first on ties)
 * until no pair has a rank. With `ignoreMerges` (Llama 3) a word that is a
 * token is taken whole.
 *
 * @module
 */
import type { PairHeap } from "./_heap.ts";
import { BYTE_TO_CHAR, utf8 } from "./unicode.ts";
import type { Vocab } from "./vocab.ts";

/** The byte-level form of a word: one stand-in character per UTF-8 byte. */
export function byteEncode(word: string): string {
  const bytes = utf8(word);
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += BYTE_TO_CHAR[bytes[i]];
  return s;
}

/** Tokens of one word, appended to `out`. */
export function bpeEncodeWord(vocab: Vocab, heap: PairHeap, word: string, out: number[]): void {
  const text = byteEncode(word);
  const n = text.length;
  if (n === 0) return;
  const { tokenToId, mergeRanks } = vocab;
  if (vocab.ignoreMerges) {
    const id = tokenToId.get(text);
    if (id !== undefined) {
      out.push(id);
      return;
    }
  }
  if (n === 1) {
    pushSymbol(vocab, text, out);
    return;
  }
  // symbols: one per stand-in character (all are single UTF-16 units)
  const len = new Int32Array(n).fill(1);
  const prev = new Int32Array(n);
  const next = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    prev[i] = i - 1;
    next[i] = i + 1;
  }
  next[n - 1] = -1;
  heap.clear();
  const tryPair = (left: number, right: number) => {
    if (left < 0 || right < 0) return;
    const rank = mergeRanks.get(
      text.substr(left, len[left]) + "\u0001" + text.substr(right, len[right]),
    );
    if (rank === undefined) return;
    heap.push(rank, left, right, len[left] + len[right]);
  };
  for (let i = 1; i < n; i++) tryPair(i - 1, i);
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
  for (let i = 0; i !== -1; i = next[i]) pushSymbol(vocab, text.substr(i, len[i]), out);
}

/** A merged symbol: its token, or (as llama.cpp does) the tokens of its ASCII characters. */
function pushSymbol(vocab: Vocab, symbol: string, out: number[]): void {
  const id = vocab.tokenToId.get(symbol);
  if (id !== undefined) {
    out.push(id);
    return;
  }
  for (const ch of symbol) {
    if (ch.charCodeAt(0) >= 0x80) continue;
    const t = vocab.tokenToId.get(ch);
    if (t !== undefined) out.push(t);
  }
}
