/**
 * The native library of a package loaded over http(s) (as from JSR): fetched
 * once from beside the code (`zig-out/release/` of the published package),
 * checked against the sha256 in the package's manifest, and kept in the
 * per-user cache folder.
 *
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { VERSION } from "../version.ts";
import { installLibraryAt, sha256Hex } from "./embedded.ts";
import type { LibraryChoice } from "./locate.ts";
import { cacheDir, platformName, releaseFileName } from "./paths.ts";

/** `zig-out/release/manifest.json`: every release library's size and sha256. */
export type ReleaseManifest = Record<string, { sha256: string; size_bytes: number }>;

/** The package root when this code was loaded over http(s), else undefined. */
export function remoteRoot(): URL | undefined {
  const root = new URL("../../", import.meta.url);
  return root.protocol === "http:" || root.protocol === "https:" ? root : undefined;
}

async function fetchBytes(url: URL): Promise<Uint8Array> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url.href}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

/** Fetches (or finds in the cache) this platform's release libraries. */
export async function fetchRemoteLibrary(root: URL): Promise<LibraryChoice> {
  const manifestUrl = new URL("zig-out/release/manifest.json", root);
  const manifest = JSON.parse(
    new TextDecoder().decode(await fetchBytes(manifestUrl)),
  ) as ReleaseManifest;
  const platform = platformName();
  const install = async (name: string): Promise<string | undefined> => {
    const file = releaseFileName(name);
    const entry = manifest[file];
    if (entry === undefined) return undefined;
    const path = join(cacheDir(), VERSION, entry.sha256.slice(0, 16), file);
    if (existsSync(path) && sha256Hex(readFileSync(path)) === entry.sha256) return path;
    const bytes = await fetchBytes(new URL(`zig-out/release/${file}`, root));
    if (sha256Hex(bytes) !== entry.sha256) {
      throw new Error(`the native library fetched from ${root.href} does not match its sha256`);
    }
    return installLibraryAt(bytes, path);
  };
  const path = await install(platform);
  if (path === undefined) {
    throw new Error(`this package ships no native library for ${platform}`);
  }
  const avx512Path = await install(`${platform}-avx512`);
  return avx512Path === undefined ? { path } : { path, avx512Path };
}
