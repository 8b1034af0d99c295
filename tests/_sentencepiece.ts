/**
 * Real SentencePiece models (`tokenizer.model` files) for the converter's
 * tests: the three that sentencepiece's own source distribution ships in
 * `test/` (PyPI `sentencepiece==0.2.3`, sdist sha256 below), fetched once per
 * checkout into the ignored `models/sentencepiece-models/`, each checked by
 * sha256.
 *
 * - `botchan_en_bpe_1000.model`: BPE (as Llama, Mistral, Phi-3 and Gemma train theirs), 1000 pieces
 * - `botchan_en_unigram_1000.model`: unigram, 1000 pieces
 * - `kyoto_ja_unigram_8000.model`: unigram, 8000 Japanese pieces
 *
 * ```ts
 * import { ensureSentencePieceModels } from "./_sentencepiece.ts";
 * const dir = ensureSentencePieceModels(); // models/sentencepiece-models
 * ```
 *
 * @module
 */
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { ensurePypi } from "./_pypi.ts";
import { repoRoot } from "./_testdata.ts";

/** The package whose sdist carries the models. */
export const SENTENCEPIECE_SDIST = "sentencepiece==0.2.3";
/** sha256 of `sentencepiece-0.2.3.tar.gz` as PyPI serves it (not checked: pip checks it). */
export const SENTENCEPIECE_SDIST_SHA256 =
  "21618ad31f0453a1ebf5ec58defed99758d54af0b670546ecac639ddd8b86fbd";

/** The models and their sha256. */
export const SENTENCEPIECE_MODELS: Readonly<Record<string, string>> = {
  "botchan_en_bpe_1000.model": "c8636a43e913dad9d5eb5d2eee2077706a55589fd2d6caf1e7ee4a7d03e4360a",
  "botchan_en_unigram_1000.model":
    "f8c7e5e0fa9e948783d20ea9dccf0e2611f567bc1a4e468a658becd5015f458e",
  "kyoto_ja_unigram_8000.model": "e39551e7ab937745b25edf55a7399d3c78948fda1dabca6b1781df2fcec67f65",
};

/** Returns the folder of the verified models, fetching them first when missing. */
export function ensureSentencePieceModels(): string {
  return ensurePypi({
    what: "sentencepiece's test models (sentencepiece 0.2.3 sdist, 3.7 MB, once)",
    wheels: [SENTENCEPIECE_SDIST],
    sdist: true,
    target: join(repoRoot, "models", "sentencepiece-models"),
    files: SENTENCEPIECE_MODELS,
    assemble(extracted, work) {
      const out = join(work, "sentencepiece-models");
      mkdirSync(out);
      for (const f of Object.keys(SENTENCEPIECE_MODELS)) {
        copyFileSync(join(extracted, "sentencepiece-0.2.3", "test", f), join(out, f));
      }
      return out;
    },
  });
}

if (import.meta.main) console.log(ensureSentencePieceModels());
