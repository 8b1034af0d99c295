import assert from "node:assert/strict";
import { prng, randomText } from "./_fuzz.ts";
import { tokenizerOf, vocabPath } from "./_vocabs.ts";
import type { Tokenizer } from "../src/tokenizer/mod.ts";
import { BYTE_TO_CHAR } from "../src/tokenizer/unicode.ts";

/** What decoding gives back, or undefined where the vocabulary cannot represent the text. */
function expectedRoundTrip(t: Tokenizer, text: string): string | undefined {
  if (t.vocab.kind === "wpm") return undefined; // lower-cases, drops accents and spaces
  if (t.vocab.kind === "spm") return text.replaceAll("\u2581", " "); // "▁" is SPM's space
  const bytes = new TextEncoder().encode(text);
  for (const b of bytes) if (!t.vocab.tokenToId.has(BYTE_TO_CHAR[b])) return undefined;
  return text;
}

/** One vocabulary per tokenizer type / splitter family. */
const FAMILIES: Array<[string, string]> = [
  ["SPM", "llama-spm"],
  ["BPE, GPT-2 splitter", "gpt-2"],
  ["BPE, Llama 3 splitter", "llama-bpe"],
  ["BPE, collapsed-category regex (qwen2)", "qwen2"],
  ["BPE, digit-split regex (smollm)", "smollm"],
  ["BPE, code point regex (deepseek-llm)", "deepseek-llm"],
  ["WordPiece (bert-bge)", "bert-bge"],
];

const COUNT = 2000;

for (const [family, name] of FAMILIES) {
  Deno.test(`fuzz ${family}: ${COUNT} random strings encode, stay in range and decode back`, () => {
    const t = tokenizerOf(vocabPath(name));
    const rand = prng(0x5eed + name.length);
    let skipped = 0;
    for (let i = 0; i < COUNT; i++) {
      const text = randomText(rand);
      const wellFormed = (text as unknown as { toWellFormed(): string }).toWellFormed();
      const ids = t.encode(text, { addSpecial: false });
      for (const id of ids) assert.ok(id >= 0 && id < t.vocabSize);
      // bytes come back exactly where the vocabulary has them all
      const want = expectedRoundTrip(t, wellFormed);
      const back = t.decode(ids, { cleanSpaces: false });
      if (want === undefined) skipped++;
      else if (back !== want) {
        assert.fail(`case ${i}: ${JSON.stringify(text)} decoded to ${JSON.stringify(back)}`);
      }
      // special parsing and BOS/EOS never throw either
      t.encode(text, { parseSpecial: true });
    }
    if (t.vocab.kind !== "wpm") assert.ok(skipped < COUNT / 10, `${skipped} not representable`);
  });
}

Deno.test("fuzz: long runs of one character are handled (no stack or time blow-up)", () => {
  for (const [, name] of FAMILIES) {
    const t = tokenizerOf(vocabPath(name));
    for (const ch of ["a", " ", "7", "\n", "中", "😀"]) {
      const text = ch.repeat(20_000);
      const ids = t.encode(text, { addSpecial: false });
      const want = expectedRoundTrip(t, text);
      if (want !== undefined) assert.equal(t.decode(ids, { cleanSpaces: false }), want);
      else assert.equal(ids.length === 0, text.trim() === "");
    }
  }
});

Deno.test(`fuzz: ${COUNT / 4} random byte strings per tokenizer (mostly invalid UTF-8) never throw`, () => {
  for (const [, name] of FAMILIES) {
    const t = tokenizerOf(vocabPath(name));
    const rand = prng(0xb17e5 + name.length);
    for (let i = 0; i < COUNT / 4; i++) {
      const bytes = Uint8Array.from({ length: Math.floor(rand() * 40) }, () => rand() * 256);
      const ids = t.encodeBytes(bytes, { parseSpecial: i % 2 === 0 });
      for (const id of ids) assert.ok(id >= 0 && id < t.vocabSize);
      t.decode(ids);
    }
  }
});
