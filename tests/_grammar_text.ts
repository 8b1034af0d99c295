/**
 * Grammars checked on text: a GBNF grammar fed a text byte by byte (a vocabulary of the 256
 * bytes and an end-of-generation token), and where a lazy grammar's triggers start it in
 * the generated text (llama.cpp's test-chat.cpp semantics).
 *
 * @module
 */
import { parseGbnf } from "../src/grammar/mod.ts";
import { CompiledGrammar } from "../src/grammar/matcher.ts";
import { TokenTrie } from "../src/grammar/token_trie.ts";
import type { GrammarTrigger } from "../src/tools/mod.ts";

/** 256 one-byte tokens and an end-of-generation token (256). */
const byteVocab = {
  vocabSize: 257,
  pieceBytes: (id: number) => (id < 256 ? Uint8Array.of(id) : new TextEncoder().encode("</s>")),
  isEog: (id: number) => id === 256,
};
const byteTrie = new TokenTrie(byteVocab);

/** True when the grammar takes all of `text`, byte by byte, and may end there. */
export function matches(grammar: string, text: string): boolean {
  const m = new CompiledGrammar(parseGbnf(grammar), byteTrie).matcher();
  for (const b of new TextEncoder().encode(text)) {
    if (!m.allows(b)) return false;
    m.accept(b);
  }
  return m.allows(256);
}

/**
 * Where a lazy grammar starts in `prompt + output` (llama.cpp's test-chat.cpp semantics): the
 * earliest trigger; a pattern's first capture group; not before the output.
 */
export function triggerStart(
  triggers: GrammarTrigger[],
  prompt: string,
  output: string,
): number | undefined {
  const full = prompt + output;
  let best: number | undefined;
  for (const t of triggers) {
    let pos: number | undefined;
    if (t.kind === "word") {
      const i = full.indexOf(t.value);
      if (i >= 0) pos = i;
    } else if (t.kind === "pattern") {
      const m = new RegExp(t.value, "d").exec(full);
      if (m) pos = m.indices![1]?.[0] ?? m.index;
    } else if (t.kind === "pattern_full") {
      const re = new RegExp(`^(?:${t.value})$`, "d");
      for (let end = prompt.length; end <= full.length && pos === undefined; end++) {
        const m = re.exec(full.slice(0, end));
        if (m) pos = m.indices![1]?.[0] ?? 0;
      }
    }
    if (pos !== undefined && (best === undefined || pos < best)) best = pos;
  }
  return best === undefined ? undefined : Math.max(best, prompt.length);
}
