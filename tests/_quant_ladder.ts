/**
 * The "quant ladder": the real SmolLM2-135M-Instruct Q4_1 file dequantized to
 * F32, then quantized to every type of `golden/quantize.json`, each file built
 * by `dotllm quantize` into the ignored `models/` folder once per machine and
 * checked against llama-quantize's sha256. Tests that need one of these files
 * call {@linkcode ladderFile}.
 *
 * @module
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { sha256File } from "./_pypi.ts";

export { sha256File };
import { repoRoot, testdata } from "./_testdata.ts";
import { parseQuantType } from "../src/quantize/ftype.ts";
import { quantizeFile } from "../src/quantize/quantize.ts";

/** One ladder entry of `golden/quantize.json`. */
export interface LadderEntry {
  type: string;
  pure: boolean;
  file: string;
  sha256: string;
  bytes: number;
}

/** `golden/quantize.json`. */
export interface QuantizeGolden {
  source: { file: string; sha256: string };
  f32: { command: string; file: string; sha256: string; bytes: number };
  ladder: LadderEntry[];
}

/** The parsed golden file. */
export const quantizeGolden: QuantizeGolden = JSON.parse(
  readFileSync(testdata("golden", "quantize.json"), "utf8"),
);

/** The ignored folder the ladder lives in. */
export const modelsDir: string = join(repoRoot, "models");

/** The real Q4_1 source file. */
export const sourceModel: string = testdata("models", quantizeGolden.source.file);

/** The sha256 (hex) of a file, read in 16 MiB pieces. */

/** Files already checked in this process (hashing 540 MB each time would dominate the tests). */
const verified = new Set<string>();

async function ensure(path: string, sha256: string, make: () => Promise<unknown>): Promise<string> {
  if (verified.has(`${path} ${sha256}`)) return path;
  if (existsSync(path) && sha256File(path) === sha256) {
    verified.add(`${path} ${sha256}`);
    return path;
  }
  mkdirSync(modelsDir, { recursive: true });
  await make();
  const got = sha256File(path);
  if (got !== sha256) {
    throw new Error(`${path}: sha256 ${got}, llama-quantize's is ${sha256}`);
  }
  verified.add(`${path} ${sha256}`);
  return path;
}

/** `models/smollm2-f32.gguf`, made (once) from the real Q4_1 file with `--allow-requantize`. */
export function ladderF32(): Promise<string> {
  const { f32 } = quantizeGolden;
  const path = join(modelsDir, f32.file);
  return ensure(
    path,
    f32.sha256,
    () => quantizeFile(sourceModel, path, { type: parseQuantType("F32")!, allowRequantize: true }),
  );
}

/** The ladder file of `type` (`"Q4_K_M"`, or `"Q4_K"` with `pure`), made once from the F32 file. */
export async function ladderFile(type: string, pure = false): Promise<string> {
  const entry = quantizeGolden.ladder.find((e) => e.type === type && e.pure === pure);
  if (entry === undefined) throw new Error(`no ladder entry for ${type}${pure ? " --pure" : ""}`);
  const f32 = await ladderF32();
  const path = join(modelsDir, entry.file);
  return ensure(
    path,
    entry.sha256,
    () => quantizeFile(f32, path, { type: parseQuantType(type)!, pure }),
  );
}
