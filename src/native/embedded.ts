/**
 * The native library inside a single executable (`bun build --compile` or
 * `deno compile --include`), installed once into the per-user cache folder.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { cacheDir, libraryFileName } from "./paths.ts";
import { VERSION } from "../version.ts";

interface RuntimeGlobals {
  Bun?: { embeddedFiles?: ReadonlyArray<{ name?: string }> };
  Deno?: { build?: { standalone?: boolean } };
}

const libraryPattern = /^(lib)?dotllm(-[a-z0-9]+)?\.(so|dylib|dll)$/;

/** The embedded library's bytes, or undefined when not running as a single executable. */
export function embeddedLibrary(): Uint8Array | undefined {
  const g = globalThis as RuntimeGlobals;
  const bunFiles = g.Bun?.embeddedFiles ?? [];
  const bunLibrary = bunFiles.find((f) => f.name !== undefined && libraryPattern.test(f.name));
  if (bunLibrary?.name !== undefined) {
    const root = process.platform === "win32" ? "B:\\~BUN\\root\\" : "/$bunfs/root/";
    return readFileSync(root + bunLibrary.name);
  }
  if (g.Deno?.build?.standalone) {
    // `deno compile --include zig-out/lib/<lib>` keeps the checkout's relative path.
    const url = new URL(`../../zig-out/lib/${libraryFileName()}`, import.meta.url);
    if (existsSync(url)) return readFileSync(url);
  }
  return undefined;
}

/** The hex sha256 of `bytes`. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/**
 * Writes `bytes` to `<cache>/<version>/<sha256 prefix>/<library file name>`
 * unless a file with the same sha256 is already there, and returns its path.
 * Safe when several processes install at once: each writes its own temporary
 * file and renames it into place atomically.
 */
export function installLibrary(bytes: Uint8Array, dir: string = cacheDir()): string {
  const sha = sha256Hex(bytes);
  const folder = join(dir, VERSION, sha.slice(0, 16));
  const path = join(folder, libraryFileName());
  if (existsSync(path) && sha256Hex(readFileSync(path)) === sha) return path;
  mkdirSync(folder, { recursive: true });
  const temporary = `${path}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  try {
    writeFileSync(temporary, bytes, { mode: 0o755 });
    renameSync(temporary, path);
  } finally {
    rmSync(temporary, { force: true });
  }
  if (sha256Hex(readFileSync(path)) !== sha) {
    throw new Error(`the native library installed at "${path}" does not match its sha256`);
  }
  return path;
}
