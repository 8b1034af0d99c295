/**
 * The llama.cpp sources vendored in the `llama-cpp-python==0.3.36` sdist from PyPI
 * (llama.cpp as of 2026-10), fetched once per machine into the ignored `models/` folder,
 * sha256 checked, and only the files the tests read extracted: `grammars/`,
 * `models/templates/`, `tests/test-json-schema-to-grammar.cpp`, `tests/test-grammar-*.cpp`,
 * `common/json-schema-to-grammar.cpp`, `common/json-schema.cpp` and the server's pytest suite
 * `tools/server/tests/`. Nothing of llama.cpp is copied into the repository.
 *
 * ```ts
 * import { ensureLlamaCppSource } from "./_llamacpp_src.ts";
 * const dir = ensureLlamaCppSource(); // models/llama.cpp-0.3.36
 * ```
 *
 * Set `LLAMA_CPP_PYTHON_SDIST` to a local copy of the sdist to skip the download (it is
 * checked all the same).
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { repoRoot } from "./_testdata.ts";

/** The PyPI release whose sdist vendors llama.cpp. */
export const LLAMA_CPP_PYTHON_SPEC = "llama-cpp-python==0.3.36";
/** sha256 of `llama_cpp_python-0.3.36.tar.gz`. */
export const LLAMA_CPP_PYTHON_SDIST_SHA256 =
  "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e";
/** Where the extracted `vendor/llama.cpp` subset is kept. */
export const llamaCppSourceDir: string = join(repoRoot, "models", "llama.cpp-0.3.36");

const SDIST_ROOT = "llama_cpp_python-0.3.36/vendor/llama.cpp";
const MEMBERS = [
  "grammars/*",
  "models/templates/*",
  "tests/test-json-schema-to-grammar.cpp",
  "tests/test-grammar-*.cpp",
  "common/json-schema-to-grammar.cpp",
  "common/json-schema.cpp",
  "tools/server/tests/*",
];
/** One file per member group: a folder extracted before a group was added is extracted again. */
const PROBES = ["grammars", "models/templates", "tools/server/tests/utils.py"];
const STAMP = ".verified";

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "ignore", "pipe"], encoding: "utf8" });
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} failed (${r.status}): ${r.error ?? r.stderr}`);
  }
}

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/**
 * Returns the directory of the extracted llama.cpp sources, fetching the sdist first when
 * it is missing (pip download, sha256 check, extraction of the subset, atomic rename).
 * Throws with a one-line reason when pip or the network fails or the hash differs.
 */
export function ensureLlamaCppSource(): string {
  const stamp = join(llamaCppSourceDir, STAMP);
  if (
    existsSync(stamp) && readFileSync(stamp, "utf8") === LLAMA_CPP_PYTHON_SDIST_SHA256 &&
    PROBES.every((p) => existsSync(join(llamaCppSourceDir, p)))
  ) {
    return llamaCppSourceDir;
  }
  const models = join(repoRoot, "models");
  mkdirSync(models, { recursive: true });
  const work = mkdtempSync(join(models, ".llama.cpp-download-"));
  try {
    let sdist = process.env.LLAMA_CPP_PYTHON_SDIST ?? "";
    if (sdist === "") {
      process.stderr.write(
        `fetching ${LLAMA_CPP_PYTHON_SPEC} sources from PyPI (77 MB, once)...\n`,
      );
      run("python3", [
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--quiet",
        "-d",
        work,
        LLAMA_CPP_PYTHON_SPEC,
      ]);
      const found = readdirSync(work).find((f) => f.endsWith(".tar.gz"));
      if (found === undefined) {
        throw new Error(`pip download of ${LLAMA_CPP_PYTHON_SPEC}: no sdist`);
      }
      sdist = join(work, found);
    }
    const digest = sha256(sdist);
    if (digest !== LLAMA_CPP_PYTHON_SDIST_SHA256) {
      throw new Error(
        `${sdist}: sha256 ${digest}, expected ${LLAMA_CPP_PYTHON_SDIST_SHA256}`,
      );
    }
    const out = join(work, "x");
    mkdirSync(out);
    run("tar", [
      "-xzf",
      sdist,
      "-C",
      out,
      "--wildcards",
      ...MEMBERS.map((m) => `${SDIST_ROOT}/${m}`),
    ]);
    const extracted = join(out, SDIST_ROOT);
    writeFileSync(join(extracted, STAMP), LLAMA_CPP_PYTHON_SDIST_SHA256);
    rmSync(llamaCppSourceDir, { recursive: true, force: true });
    renameSync(extracted, llamaCppSourceDir);
    return llamaCppSourceDir;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) console.log(ensureLlamaCppSource());
