/**
 * The special-token partition: before any model tokenizer runs, the text is
 * cut at every occurrence of a control, user-defined or unknown token (longest
 * tokens first), llama.cpp's `tokenizer_st_partition`. With special parsing
 * off only user-defined tokens are cut out, as in llama.cpp (and HF).
 * LSTRIP/RSTRIP tokens eat the ASCII whitespace beside them.
 *
 * @module
 */
import { TokenAttr, type Vocab } from "./vocab.ts";

/** A piece of the input: text still to tokenize, or a token id. */
export type Fragment = string | number;

const isSpace = (c: number) => c === 0x20 || (c >= 0x09 && c <= 0x0d);

/** Splits `text` into text and special-token fragments. */
export function partition(
  vocab: Vocab,
  text: string,
  parseSpecial: boolean,
  tokenText: (id: number) => string = (id) => vocab.tokens[id],
): Fragment[] {
  if (text.length === 0) return [];
  let fragments: Fragment[] = [text];
  const skip = TokenAttr.CONTROL | TokenAttr.UNKNOWN;
  for (const id of vocab.specialTokens) {
    const attr = vocab.attrs[id];
    if (!parseSpecial && attr & skip) continue;
    const token = tokenText(id);
    let next: Fragment[] | undefined;
    for (let f = 0; f < fragments.length; f++) {
      const frag = fragments[f];
      if (typeof frag !== "string" || frag.indexOf(token) < 0) {
        next?.push(frag);
        continue;
      }
      next ??= fragments.slice(0, f);
      let from = 0;
      for (;;) {
        const at = frag.indexOf(token, from);
        if (at < 0) break;
        let leftEnd = at;
        if (attr & TokenAttr.LSTRIP) {
          while (leftEnd > from && isSpace(frag.charCodeAt(leftEnd - 1))) leftEnd--;
        }
        if (leftEnd > from) next.push(frag.slice(from, leftEnd));
        next.push(id);
        from = at + token.length;
        if (attr & TokenAttr.RSTRIP) {
          while (from < frag.length && isSpace(frag.charCodeAt(from))) from++;
        }
      }
      if (from < frag.length) next.push(frag.slice(from));
    }
    if (next) fragments = next;
  }
  return fragments;
}
