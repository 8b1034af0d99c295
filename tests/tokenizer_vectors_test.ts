import assert from "node:assert/strict";
import { readVectors, tokenizerOf, vectorSets } from "./_vocabs.ts";

const sets = vectorSets();

Deno.test("the vector sets cover the acceptance list", () => {
  const names = sets.map((s) => s.name).join(" ");
  for (
    const want of [
      "stories260K",
      "bert-bge",
      "llama-2-tiny-random",
      "llama-spm",
      "phi-3",
      "gpt-2",
      "deepseek-llm",
      "deepseek-coder",
      "falcon",
      "mpt",
      "starcoder",
      "refact",
      "vocab-converted/ggml-vocab-llama-bpe",
      "vocab-converted/ggml-vocab-qwen2",
      "vocab-converted/ggml-vocab-smollm",
    ]
  ) assert.ok(names.includes(want), `missing vectors for ${want}`);
});

for (const set of sets) {
  // WordPiece lower-cases and drops accents: it cannot give the text back
  const lossless = !set.name.includes("bert");
  Deno.test(`${set.name}: all 46 strings give llama.cpp's ids and decode back`, () => {
    const tokenizer = tokenizerOf(set.gguf);
    const vectors = readVectors(set.vectors);
    assert.equal(vectors.length, 46);
    const wrong: string[] = [];
    for (const { text, ids } of vectors) {
      const got = tokenizer.encode(text, { addSpecial: false, parseSpecial: false });
      if (JSON.stringify(got) !== JSON.stringify(ids)) {
        wrong.push(`${JSON.stringify(text)}: got [${got}] want [${ids}]`);
        continue;
      }
      // every vocab here is lossless: the bytes come back (llama.cpp's clean-up of
      // " ." etc. aside, which is tested on its own)
      if (lossless) {
        assert.equal(tokenizer.decode(ids, { cleanSpaces: false }), text);
        // without llama.cpp's clean_spaces (qwen2, smollm, deepseek, SPM...) the default is exact
        if (!tokenizer.vocab.cleanSpaces) assert.equal(tokenizer.decode(ids), text);
      }
    }
    assert.deepEqual(wrong, [], `${wrong.length}/46 wrong`);
  });
}
