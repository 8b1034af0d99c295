/**
 * Finds the native library: `DOTLLM_LIB` → the checkout's `zig-out/lib` →
 * the per-user cache folder.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { VERSION } from "../version.ts";
import { embeddedLibrary, installLibrary } from "./embedded.ts";
import { cacheDir, libraryFileName } from "./paths.ts";

export { cacheDir, libraryFileName };

/** The places the library is looked for, in order. */
export function libraryCandidates(): string[] {
  const override = process.env.DOTLLM_LIB;
  if (override) return [override];
  const name = libraryFileName();
  const candidates: string[] = [];
  const root = new URL("../../", import.meta.url);
  if (root.protocol === "file:") {
    candidates.push(join(fileURLToPath(root), "zig-out", "lib", name));
  }
  candidates.push(join(cacheDir(), VERSION, name));
  return candidates;
}

/**
 * The library to load: `DOTLLM_LIB` if set; else the library embedded in a
 * single executable (installed into the cache); else the first candidate that
 * exists. Throws naming every place looked at.
 */
export function locateLibrary(): string {
  if (!process.env.DOTLLM_LIB) {
    const embedded = embeddedLibrary();
    if (embedded !== undefined) return installLibrary(embedded);
  }
  const candidates = libraryCandidates();
  for (const path of candidates) if (existsSync(path)) return path;
  const where = candidates.map((p) => `"${p}"`).join(", ");
  const hint = process.env.DOTLLM_LIB
    ? "DOTLLM_LIB names a file that does not exist"
    : "build it with `zig build` in the checkout (./dotllm does this for you)";
  throw new Error(`dotllm native library not found (looked at ${where}): ${hint}`);
}
