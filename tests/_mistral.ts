/**
 * A Mistral-shaped model with a small sliding window: `make-model`'s
 * `mistral-tiny` (random weights, Llama 3's real vocabulary) loaded under the
 * `mistral` architecture, whose every layer attends over the last
 * `window` positions only (`mistral.attention.sliding_window`).
 *
 * @module
 */
import { join } from "node:path";
import { parseGguf } from "../src/gguf/reader.ts";
import type { GgufValue } from "../src/gguf/reader.ts";
import { makeModel } from "../src/gguf/make_model.ts";
import { Model } from "../src/model/mod.ts";
import { loadNative } from "../src/native/mod.ts";
import { repoRoot, testdata } from "./_testdata.ts";

/** Loads `mistral-tiny` (made once into `models/`) as a `mistral` model with window `window`. */
export function loadMistralTiny(window = 64): Model {
  const { path } = makeModel({
    shape: "mistral-tiny",
    type: "f32",
    outDir: join(repoRoot, "models"),
    vocabDir: testdata("vocab-converted"),
  });
  const native = loadNative();
  const file = native.mapFile(path);
  try {
    const gguf = parseGguf(file.bytes);
    const metadata = new Map<string, GgufValue>();
    for (const [k, v] of gguf.metadata) metadata.set(k.replace(/^llama\./, "mistral."), v);
    metadata.set("general.architecture", "mistral");
    metadata.set("mistral.attention.sliding_window", window);
    return new Model(native, { ...gguf, metadata }, file.address, file);
  } catch (error) {
    file.close();
    throw error;
  }
}
