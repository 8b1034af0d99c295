/**
 * Finds the native library: `DOTLLM_LIB` → the library embedded in a single
 * executable → the checkout's `zig-out/lib` → the release builds in
 * `zig-out/release` → the per-user cache folder.
 *
 * Release builds come in a baseline flavour (x86-64-v3 on x86-64) and, where
 * it pays, an AVX-512 flavour; {@linkcode LibraryChoice} names both and the
 * loader picks by a CPU check (`DOTLLM_CPU=baseline` forces the baseline).
 *
 * @module
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { VERSION } from "../version.ts";
import { embeddedLibraries, installLibrary } from "./embedded.ts";
import { cacheDir, libraryFileName, platformName, releaseFileName } from "./paths.ts";
import { fetchRemoteLibrary, remoteRoot } from "./remote.ts";

export { cacheDir, libraryFileName, platformName, releaseFileName };

/** The library to load, and an AVX-512 build to prefer when the CPU has AVX-512. */
export interface LibraryChoice {
  readonly path: string;
  readonly avx512Path?: string;
}

function checkoutRoot(): string | undefined {
  const root = new URL("../../", import.meta.url);
  return root.protocol === "file:" ? fileURLToPath(root) : undefined;
}

/** The release pair in `dir`, if its baseline build exists. */
function releasePair(dir: string): LibraryChoice | undefined {
  const platform = platformName();
  const path = join(dir, releaseFileName(platform));
  if (!existsSync(path)) return undefined;
  const avx512Path = join(dir, releaseFileName(`${platform}-avx512`));
  return existsSync(avx512Path) ? { path, avx512Path } : { path };
}

/** Installs the embedded libraries into the cache; undefined when nothing is embedded. */
function fromEmbedded(): LibraryChoice | undefined {
  const embedded = embeddedLibraries();
  if (embedded.size === 0) return undefined;
  const native = embedded.get(libraryFileName());
  if (native !== undefined) return { path: installLibrary(native, libraryFileName()) };
  const platform = platformName();
  const baseline = embedded.get(releaseFileName(platform));
  if (baseline === undefined) {
    throw new Error(
      `this executable has no native library for ${platform} ` +
        `(it has ${[...embedded.keys()].join(", ")})`,
    );
  }
  const avx512 = embedded.get(releaseFileName(`${platform}-avx512`));
  const path = installLibrary(baseline, releaseFileName(platform));
  return avx512 === undefined
    ? { path }
    : { path, avx512Path: installLibrary(avx512, releaseFileName(`${platform}-avx512`)) };
}

/** The places looked at, in order, for messages. */
export function libraryCandidates(): string[] {
  const override = process.env.DOTLLM_LIB;
  if (override) return [override];
  const root = checkoutRoot();
  const candidates: string[] = [];
  if (root !== undefined) {
    candidates.push(join(root, "zig-out", "lib", libraryFileName()));
    candidates.push(join(root, "zig-out", "release", releaseFileName(platformName())));
  }
  candidates.push(join(cacheDir(), VERSION, releaseFileName(platformName())));
  return candidates;
}

let prepared: LibraryChoice | undefined;

/**
 * Makes the library available where finding it needs I/O that cannot be
 * synchronous: a package loaded over http(s) fetches its library into the
 * cache. A no-op otherwise. `cli.ts` awaits this before any command.
 */
export async function prepareLibrary(): Promise<void> {
  if (process.env.DOTLLM_LIB || prepared !== undefined) return;
  const root = remoteRoot();
  if (root !== undefined) prepared = await fetchRemoteLibrary(root);
}

/** The library to load; throws naming every place looked at when there is none. */
export function locateLibrary(): LibraryChoice {
  const override = process.env.DOTLLM_LIB;
  if (override) {
    if (existsSync(override)) return { path: override };
    throw new Error(`dotllm native library not found: DOTLLM_LIB="${override}" does not exist`);
  }
  if (prepared !== undefined) return prepared;
  if (remoteRoot() !== undefined) {
    throw new Error(
      "dotllm loaded over http(s): await prepareLibrary() before loading the library",
    );
  }
  const embedded = fromEmbedded();
  if (embedded !== undefined) return embedded;
  const root = checkoutRoot();
  if (root !== undefined) {
    const dev = join(root, "zig-out", "lib", libraryFileName());
    if (existsSync(dev)) return { path: dev };
    const release = releasePair(join(root, "zig-out", "release"));
    if (release !== undefined) return release;
  }
  const cached = releasePair(join(cacheDir(), VERSION));
  if (cached !== undefined) return cached;
  const where = libraryCandidates().map((p) => `"${p}"`).join(", ");
  throw new Error(
    `dotllm native library not found (looked at ${where}): ` +
      "build it with `zig build` in the checkout (./dotllm does this for you)",
  );
}
