/**
 * The native library inside a single executable (`bun build --compile` or
 * `deno compile --include`), installed once into the per-user cache folder.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { cacheDir, libraryFileName, platformName, releaseFileName } from "./paths.ts";
import { VERSION } from "../version.ts";

interface RuntimeGlobals {
  Bun?: { embeddedFiles?: ReadonlyArray<{ name?: string }> };
  Deno?: { build?: { standalone?: boolean } };
}

// Bun names an embedded file `<stem>-<8 char hash>.<ext>`.
const bunEmbeddedName = /^((?:lib)?dotllm(?:-[a-z0-9_]+)*?)-[a-z0-9]{8}\.(so|dylib|dll)$/;

/**
 * The libraries embedded in a single executable, by their file name
 * (`libdotllm.so`, `libdotllm-linux-x86_64-avx512.so`, ...); empty when not
 * running as a single executable.
 */
export function embeddedLibraries(): Map<string, Uint8Array> {
  const found = new Map<string, Uint8Array>();
  const g = globalThis as RuntimeGlobals;
  const root = process.platform === "win32" ? "B:\\~BUN\\root\\" : "/$bunfs/root/";
  for (const file of g.Bun?.embeddedFiles ?? []) {
    const match = file.name === undefined ? null : bunEmbeddedName.exec(file.name);
    if (match !== null) found.set(`${match[1]}.${match[2]}`, readFileSync(root + file.name));
  }
  if (g.Deno?.build?.standalone) {
    // `deno compile --include zig-out/...` keeps the checkout's relative paths.
    const platform = platformName();
    const names = [
      `lib/${libraryFileName()}`,
      `release/${releaseFileName(platform)}`,
      `release/${releaseFileName(`${platform}-avx512`)}`,
    ];
    for (const name of names) {
      const url = new URL(`../../zig-out/${name}`, import.meta.url);
      if (existsSync(url)) found.set(name.slice(name.indexOf("/") + 1), readFileSync(url));
    }
  }
  return found;
}

/** The hex sha256 of `bytes`. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/**
 * Writes `bytes` to `<cache>/<version>/<sha256 prefix>/<fileName>`
 * unless a file with the same sha256 is already there, and returns its path.
 * Safe when several processes install at once: each writes its own temporary
 * file and renames it into place atomically.
 */
export function installLibrary(
  bytes: Uint8Array,
  fileName: string = libraryFileName(),
  dir: string = cacheDir(),
): string {
  const sha = sha256Hex(bytes);
  const path = join(dir, VERSION, sha.slice(0, 16), fileName);
  if (existsSync(path) && sha256Hex(readFileSync(path)) === sha) return path;
  return installLibraryAt(bytes, path);
}

/** Writes `bytes` to `path` atomically (temporary file, then rename) and checks it. */
export function installLibraryAt(bytes: Uint8Array, path: string): string {
  const sha = sha256Hex(bytes);
  mkdirSync(dirname(path), { recursive: true });
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
