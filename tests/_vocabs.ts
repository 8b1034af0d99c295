/** The tokenizer test vectors in the shared test data, and a cached loader. @module */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { parseGguf } from "../src/gguf/reader.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { testdata } from "./_testdata.ts";

/** A vocabulary file and the llama.cpp vectors (`.inp`/`.out`) that apply to it. */
export interface VectorSet {
  readonly name: string;
  readonly gguf: string;
  readonly vectors: string;
}

/** Every vocab GGUF with vectors: beside it, plus llama-2-tiny-random with the llama-spm ones. */
export function vectorSets(): VectorSet[] {
  const sets: VectorSet[] = [];
  for (const dir of ["llama.cpp-vocab", "vocab-converted", "models"]) {
    for (const f of readdirSync(testdata(dir)).sort()) {
      if (!f.endsWith(".gguf")) continue;
      const gguf = testdata(dir, f);
      if (existsSync(gguf + ".inp") && existsSync(gguf + ".out")) {
        sets.push({ name: `${dir}/${f}`, gguf, vectors: gguf });
      }
    }
  }
  sets.push({
    name: "models/llama-2-tiny-random.gguf (llama-spm vectors)",
    gguf: testdata("models/llama-2-tiny-random.gguf"),
    vectors: testdata("llama.cpp-vocab/ggml-vocab-llama-spm.gguf"),
  });
  return sets;
}

/** The strings and expected ids of a vector file pair. */
export function readVectors(base: string): Array<{ text: string; ids: number[] }> {
  const inputs = readFileSync(base + ".inp", "utf8").split("\n__ggml_vocab_test__\n");
  inputs.pop();
  const lines = readFileSync(base + ".out", "utf8").split("\n");
  return inputs.map((text, i) => ({
    text,
    ids: lines[i].trim() === "" ? [] : lines[i].trim().split(/\s+/).map(Number),
  }));
}

const cache = new Map<string, Tokenizer>();

/** The tokenizer of a GGUF file (loaded once per test module). */
export function tokenizerOf(path: string): Tokenizer {
  let t = cache.get(path);
  if (t === undefined) {
    t = Tokenizer.fromGguf(parseGguf(readFileSync(path)));
    cache.set(path, t);
  }
  return t;
}

/** A vocab file by short name. */
export function vocabPath(name: string): string {
  const converted = testdata("vocab-converted", `ggml-vocab-${name}.gguf`);
  return existsSync(converted) ? converted : testdata("llama.cpp-vocab", `ggml-vocab-${name}.gguf`);
}
