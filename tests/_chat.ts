/** Models for the chat tests. @module */
import { join } from "node:path";
import { makeModel } from "../src/gguf/make_model.ts";
import { repoRoot, testdata } from "./_testdata.ts";

/** A small random model (made once into `models/`) with SmolLM2's vocabulary and GGUF chat template. */
export function tinyChatModel(): string {
  return makeModel({
    shape: "tiny",
    type: "f32",
    outDir: join(repoRoot, "models"),
    vocabDir: testdata("vocab-converted"),
  }).path;
}
