/**
 * WordPiece (`tokenizer.ggml.model = "bert"`), as llama.cpp does it: the text
 * is decomposed (each code point to the first code point of its NFD form),
 * lower-cased, stripped of control characters and cut at whitespace, with
 * punctuation, ASCII symbols and CJK ideographs as words of their own; each
 * word, prefixed with `▁`, is covered greedily by the longest tokens, and a
 * word that cannot be covered becomes the unknown token.
 *
 * @module
 */
import { codePoints, CP, cpFlags, isUnicode16Addition } from "./unicode.ts";
import { NO_TOKEN, TokenizerError, type Vocab } from "./vocab.ts";

function isChineseChar(cp: number): boolean {
  return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) || (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b920 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);
}

const firstCodePoint = (s: string) => s.codePointAt(0)!;
const nfdCache = new Map<number, number>();

/** The first code point of the NFD form of `cp` (llama.cpp's one-to-one NFD table). */
function nfdFirst(cp: number): number {
  if (cp < 0xc0 || isUnicode16Addition(cp)) return cp;
  let r = nfdCache.get(cp);
  if (r === undefined) {
    r = firstCodePoint(String.fromCodePoint(cp).normalize("NFD"));
    nfdCache.set(cp, r);
  }
  return r;
}

/** The simple lower-case mapping of `cp`. */
function lower(cp: number): number {
  if (cp < 0x80) return cp >= 0x41 && cp <= 0x5a ? cp + 32 : cp;
  return firstCodePoint(String.fromCodePoint(cp).toLowerCase());
}

/** llama.cpp's WPM pre-processing: the words of `text`. */
export function wpmWords(text: string): string[] {
  const words: string[] = [];
  let word = "";
  for (const original of codePoints(text)) {
    const cp = nfdFirst(original);
    const f = cpFlags(cp);
    if (f & CP.WHITESPACE) {
      if (word.length > 0) words.push(word);
      word = "";
      continue;
    }
    if (cp === 0 || cp === 0xfffd || f & CP.CONTROL) continue;
    const s = String.fromCodePoint(lower(cp));
    if (f & CP.PUNCTUATION || (cp < 0x7f && f & CP.SYMBOL) || isChineseChar(cp)) {
      if (word.length > 0) words.push(word);
      words.push(s);
      word = "";
    } else {
      word += s;
    }
  }
  if (word.length > 0) words.push(word);
  return words;
}

/** Tokens of one text fragment, appended to `out`. */
export function wpmEncode(vocab: Vocab, text: string, out: number[]): void {
  const { tokenToId, maxTokenLength } = vocab;
  for (const w of wpmWords(text)) {
    const word = "\u2581" + w;
    const n = word.length;
    const before = out.length;
    for (let i = 0; i < n; i++) {
      let matched = false;
      for (let j = Math.min(n, i + maxTokenLength + 1); j > i; j--) {
        const id = tokenToId.find(word, i, j);
        if (id >= 0) {
          out.push(id);
          matched = true;
          i = j - 1;
          break;
        }
      }
      if (!matched) {
        out.length = before;
        break;
      }
    }
    if (out.length === before) {
      if (vocab.unk === NO_TOKEN) throw new TokenizerError("the model has no unknown token");
      out.push(vocab.unk);
    }
  }
}
