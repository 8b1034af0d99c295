/**
 * Finds the native library: `DOTLLM_LIB` → the checkout's `zig-out/lib` →
 * the per-user cache folder.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { VERSION } from "../version.ts";

/** The library's file name on an operating system (`process.platform`). */
export function libraryFileName(platform: string = process.platform): string {
  if (platform === "darwin") return "libdotllm.dylib";
  if (platform === "win32") return "dotllm.dll";
  return "libdotllm.so";
}

/** dotllm's per-user cache folder: `$XDG_CACHE_HOME/dotllm` or `~/.cache/dotllm`. */
export function cacheDir(): string {
  const env = process.env;
  if (env.XDG_CACHE_HOME) return join(env.XDG_CACHE_HOME, "dotllm");
  if (process.platform === "win32" && env.LOCALAPPDATA) return join(env.LOCALAPPDATA, "dotllm");
  return join(homedir(), ".cache", "dotllm");
}

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

/** The first candidate that exists; throws naming every place looked at otherwise. */
export function locateLibrary(): string {
  const candidates = libraryCandidates();
  for (const path of candidates) if (existsSync(path)) return path;
  const where = candidates.map((p) => `"${p}"`).join(", ");
  const hint = process.env.DOTLLM_LIB
    ? "DOTLLM_LIB names a file that does not exist"
    : "build it with `zig build` in the checkout (./dotllm does this for you)";
  throw new Error(`dotllm native library not found (looked at ${where}): ${hint}`);
}
