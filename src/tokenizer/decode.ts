/**
 * Token ids back to text, as llama.cpp's `token_to_piece` and `detokenize`:
 * byte-level stand-ins back to bytes (BPE), `▁` back to a space and `<0xXX>`
 * to its byte (SPM), control tokens shown only when asked, the leading space
 * SPM added removed, and llama.cpp's `clean_spaces` passes. The streaming
 * decoder never emits a broken UTF-8 sequence: an incomplete one waits for
 * the next token.
 *
 * @module
 */
import { CHAR_TO_BYTE, utf8 } from "./unicode.ts";
import { TokenAttr, TokenizerError, type Vocab } from "./vocab.ts";

const EMPTY = new Uint8Array(0);

/** Checks a token id; throws a `TokenizerError` naming it. */
export function checkId(vocab: Vocab, id: number): void {
  if (!Number.isInteger(id) || id < 0 || id >= vocab.tokens.length) {
    throw new TokenizerError(
      `token id ${id} is out of range (the vocabulary has ${vocab.tokens.length} tokens)`,
    );
  }
}

/** The bytes of one token (no id check). `special`: render control/unknown tokens. */
export function pieceBytes(vocab: Vocab, id: number, special: boolean): Uint8Array {
  const attr = vocab.attrs[id];
  const text = vocab.tokens[id];
  if (attr & (TokenAttr.CONTROL | TokenAttr.UNKNOWN)) return special ? utf8(text) : EMPTY;
  if (attr & TokenAttr.USER_DEFINED) return utf8(text);
  if (vocab.kind === "bpe") {
    if (!(attr & TokenAttr.NORMAL)) return EMPTY;
    const out: number[] = [];
    for (const ch of text) {
      const cp = ch.codePointAt(0)!;
      const b = cp < 512 ? CHAR_TO_BYTE[cp] : -1;
      if (b >= 0) out.push(b);
      else {
        // llama.cpp writes "[UNK_BYTE_0x<hex><token>]" for a character outside the map
        const hex = Array.from(utf8(ch), (x) => x.toString(16).padStart(2, "0")).join("");
        out.push(...utf8(`[UNK_BYTE_0x${hex}${text}]`));
      }
    }
    return Uint8Array.from(out);
  }
  if (attr & TokenAttr.NORMAL) return utf8(text.replaceAll("\u2581", " "));
  if (attr & TokenAttr.BYTE) {
    const b = parseInt(text.slice(3, 5), 16);
    return Number.isNaN(b) ? EMPTY : Uint8Array.of(b);
  }
  return EMPTY;
}

/** Options of `detokenize`. */
export interface DecodeOptions {
  /** Render control and unknown tokens as their text (default true, like llama.cpp's common_detokenize). */
  special?: boolean;
  /** Drop a leading BOS / trailing EOS the model adds (default false). */
  removeSpecial?: boolean;
  /** Apply llama.cpp's clean-up of spaces before punctuation when the model asks (default true). */
  cleanSpaces?: boolean;
}

/** llama.cpp's detokenize, as bytes. */
export function detokenizeBytes(
  vocab: Vocab,
  piece: (id: number, special: boolean) => Uint8Array,
  ids: ArrayLike<number>,
  options: DecodeOptions = {},
): Uint8Array {
  const special = options.special ?? true;
  let from = 0, to = ids.length;
  for (let i = 0; i < ids.length; i++) checkId(vocab, ids[i]);
  let removeSpace = vocab.addSpacePrefix;
  if (options.removeSpecial && vocab.addBos && to > 0 && ids[0] === vocab.bos) {
    removeSpace = false;
    from++;
  }
  if (options.removeSpecial && vocab.addEos && to > from && ids[to - 1] === vocab.eos) to--;
  const parts: Uint8Array[] = [];
  let total = 0;
  for (let i = from; i < to; i++) {
    let p = piece(ids[i], special);
    if (removeSpace && p.length > 0 && p[0] === 0x20) p = p.subarray(1);
    removeSpace = false;
    parts.push(p);
    total += p.length;
  }
  const text = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    text.set(p, at);
    at += p.length;
  }
  if (vocab.cleanSpaces && (options.cleanSpaces ?? true)) return cleanSpaces(text);
  return text;
}

/** llama.cpp's three clean-up passes (" ?" → "?", " ' " → "'", " 's" → "'s" ...), in place. */
export function cleanSpaces(text: Uint8Array): Uint8Array {
  const SP = 0x20, Q = 0x27;
  let total = text.length;
  // pass 1: drop a space before ? ! . ,
  const total1 = total;
  total = total ? 1 : 0;
  for (let i = 1; i < total1; i++) {
    const x = text[i];
    if (text[i - 1] === SP && (x === 0x3f || x === 0x21 || x === 0x2e || x === 0x2c)) total--;
    text[total++] = x;
  }
  // pass 2: " ' " → "'"
  const total2 = total;
  total = total ? 1 : 0;
  for (let i = 1; i < total2; i++) {
    const x = text[i];
    if (x === Q && i + 1 < total2 && text[i - 1] === SP && text[i + 1] === SP) {
      total--;
      text[++i] = 0;
    }
    text[total++] = x;
  }
  // pass 3: " 's" " 'm" " 're" " 've" lose the space
  const total3 = total;
  total = total ? 1 : 0;
  for (let i = 1; i < total3; i++) {
    const x = text[i];
    if (text[i - 1] === SP && x === Q && i + 1 < total3) {
      const x1 = text[i + 1];
      if (x1 === 0x73 || x1 === 0x6d) total--;
      else if (i + 2 < total3) {
        const x2 = text[i + 2];
        if ((x1 === 0x72 && x2 === 0x65) || (x1 === 0x76 && x2 === 0x65)) total--;
      }
    }
    text[total++] = x;
  }
  return text.subarray(0, total);
}

/** A streaming decoder: feed ids one at a time, get text that is always whole characters. */
export interface StreamDecoder {
  /** Adds one token; returns the text that became complete (maybe ""). */
  push(id: number): string;
  /** Ends the stream; an unfinished UTF-8 sequence comes out as U+FFFD. */
  flush(): string;
}

/** Options of a streaming decoder. */
export interface StreamOptions {
  /** Render control and unknown tokens (default false: they print nothing). */
  special?: boolean;
  /** Drop the space SPM put before the first token (default false). */
  removeLeadingSpace?: boolean;
}

/** Makes a streaming decoder over `piece`. */
export function streamDecoder(
  vocab: Vocab,
  piece: (id: number, special: boolean) => Uint8Array,
  options: StreamOptions = {},
): StreamDecoder {
  const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  const special = options.special ?? false;
  let removeSpace = options.removeLeadingSpace ?? false;
  return {
    push(id: number): string {
      checkId(vocab, id);
      let p = piece(id, special);
      if (removeSpace && p.length > 0 && p[0] === 0x20) p = p.subarray(1);
      removeSpace = false;
      return decoder.decode(p, { stream: true });
    },
    flush(): string {
      return decoder.decode();
    },
  };
}
