/**
 * Byte-level BPE (`tokenizer.ggml.model = "gpt2"`): each pre-tokenized word
 * is seen as GPT-2's printable stand-ins for its UTF-8 bytes, then the
 * adjacent pair with the lowest merge rank is merged (leftmost first on ties)
 * until no pair has a rank. With `ignoreMerges` (Llama 3) a word that is a
 * token is taken whole. Symbols are token ids and merges are looked up by id
 * pair, which is exact because every merge names two tokens (checked at load).
 *
 * @module
 */
import type { PairHeap } from "./_heap.ts";
import { BYTE_TO_CHAR, utf8 } from "./unicode.ts";
import { mergeResult, NO_TOKEN, type Vocab } from "./vocab.ts";

/** The token id of each byte's stand-in character, or -1. */
export function bpeByteTokens(vocab: Vocab): Int32Array {
  return Int32Array.from(BYTE_TO_CHAR, (ch) => vocab.tokenToId.get(ch) ?? NO_TOKEN);
}

/** The byte-level form of UTF-8 bytes: one stand-in character per byte. */
export function byteEncode(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += BYTE_TO_CHAR[bytes[i]];
  return s;
}

/** Tokens of one word, appended to `out`. */
export function bpeEncodeWord(
  vocab: Vocab,
  byteTokens: Int32Array,
  heap: PairHeap,
  word: string,
  out: number[],
): void {
  const bytes = utf8(word);
  const n = bytes.length;
  if (n === 0) return;
  if (vocab.ignoreMerges) {
    const id = vocab.tokenToId.get(byteEncode(bytes));
    if (id !== undefined) {
      out.push(id);
      return;
    }
  }
  // symbols: one per byte at first; `id` is the symbol's token (or -1), `len` its bytes
  const id = new Int32Array(n);
  const len = new Int32Array(n).fill(1);
  const next = new Int32Array(n);
  const prev = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    id[i] = byteTokens[bytes[i]];
    prev[i] = i - 1;
    next[i] = i + 1;
  }
  next[n - 1] = -1;
  const { mergeRanks } = vocab;
  heap.clear();
  const tryPair = (left: number, right: number) => {
    if (left < 0 || right < 0 || id[left] < 0 || id[right] < 0) return;
    const rank = mergeRanks.get(id[left], id[right]);
    if (rank >= 0) heap.push(rank, left, right, len[left] + len[right]);
  };
  for (let i = 1; i < n; i++) {
    if (id[i - 1] < 0 || id[i] < 0) continue;
    const rank = mergeRanks.get(id[i - 1], id[i]);
    if (rank >= 0) heap.add(rank, i - 1, i, 2);
  }
  heap.heapify();
  while (heap.length > 0) {
    heap.pop();
    const left = heap.topLeft, right = heap.topRight;
    if (len[left] === 0 || len[right] === 0 || len[left] + len[right] !== heap.topSize) continue;
    len[left] += len[right];
    len[right] = 0;
    id[left] = mergeResult(vocab, heap.topPriority, id[left], id[right]);
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    tryPair(prev[left], left);
    tryPair(left, next[left]);
  }
  for (let i = 0; i !== -1; i = next[i]) {
    if (id[i] >= 0) {
      out.push(id[i]);
      continue;
    }
    // not a token: llama.cpp looks up each byte of the stand-in text alone, which
    // finds only the printable ASCII ones
    for (let b = i; b < i + len[i]; b++) {
      const byte = bytes[b];
      if (byte >= 0x21 && byte <= 0x7e) {
        const t = vocab.tokenToId.get(String.fromCharCode(byte));
        if (t !== undefined) out.push(t);
      }
    }
  }
}
