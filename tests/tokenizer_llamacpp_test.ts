/**
 * Differential test against llama.cpp's own tokenizer, opt-in: set
 * `DOTLLM_LLAMA_TOKENIZE` to a `llama-tokenize` binary (llama.cpp c392e509, the
 * commit of the test vectors). Random strings from the fuzz generator must give
 * the same ids, with special parsing off and on.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { prng, randomText } from "./_fuzz.ts";
import { tokenizerOf, vocabPath } from "./_vocabs.ts";

const BINARY = process.env.DOTLLM_LLAMA_TOKENIZE;
const COUNT = Number(process.env.DOTLLM_LLAMA_TOKENIZE_COUNT ?? 60);

async function llamaTokenize(model: string, file: string, special: boolean): Promise<number[]> {
  const args = ["-m", model, "-f", file, "--ids", "--no-bos", "--log-disable"];
  if (!special) args.push("--no-parse-special");
  const out = await new Deno.Command(BINARY!, { args, stdout: "piped", stderr: "null" }).output();
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

for (const name of ["llama-spm", "gpt-2", "qwen2", "llama-bpe", "bert-bge", "deepseek-llm"]) {
  Deno.test({
    name: `llama-tokenize agrees on ${COUNT} random strings: ${name}`,
    ignore: BINARY === undefined,
    async fn() {
      const model = vocabPath(name);
      const t = tokenizerOf(model);
      const rand = prng(name.length * 7919);
      const dir = mkdtempSync(join(tmpdir(), "dotllm-diff-"));
      try {
        for (let i = 0; i < COUNT; i++) {
          const text = (randomText(rand) as unknown as { toWellFormed(): string }).toWellFormed();
          if (text === "") continue;
          const file = join(dir, `${i}.txt`);
          writeFileSync(file, text);
          const special = i % 2 === 1;
          const want = await llamaTokenize(model, file, special);
          const got = t.encode(text, { addSpecial: false, parseSpecial: special });
          assert.deepEqual(got, want, JSON.stringify(text));
        }
      } finally {
        rmSync(dir, { recursive: true });
      }
    },
  });
}
