/**
 * What `dotllm list` and `dotllm rm` see: the GGUF models in the Hugging Face
 * cache (whatever huggingface_hub, llama.cpp or dotllm put there), and their
 * removal.
 *
 * @module
 */
import * as fs from "node:fs";
import { dirname, join, relative } from "node:path";
import { hubCacheDir, repoCacheDir } from "./cache.ts";
import { HubError } from "./errors.ts";
import { impliedParts, listSnapshot } from "./pull.ts";
import { formatHubRef, type HubRef } from "./ref.ts";
import { isModelFile, pickModelFiles, splitInfo } from "./select.ts";

/** One model (all parts of a split model together) in the cache. */
export interface CachedModel {
  /** `ORG/REPO:QUANT` (or `ORG/REPO/FILE` when the name has no quant tag). */
  name: string;
  repo: string;
  /** The path inside the repository (the first part of a split model). */
  file: string;
  /** The upper-cased quant tag, or "". */
  quant: string;
  /** How many files (parts). */
  part_count: number;
  size_bytes: number;
  /** The commit of the snapshot it is in. */
  commit: string;
  /** The branches pointing at that commit (`main`). */
  refs: string[];
  /** The path to load. */
  path: string;
}

/** Every file under `repoDir/refs/` (recursively), as absolute paths; none when it is absent. */
function refFiles(repoDir: string): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.push(path);
    }
  };
  walk(join(repoDir, "refs"));
  return files;
}

/** The branch names under `refs/`, by the commit each names. */
function readRefs(repoDir: string): Map<string, string[]> {
  const byCommit = new Map<string, string[]>();
  const refsDir = join(repoDir, "refs");
  for (const path of refFiles(repoDir)) {
    try {
      const commit = fs.readFileSync(path, "utf8").trim();
      const name = relative(refsDir, path).split("\\").join("/");
      byCommit.set(commit, [...(byCommit.get(commit) ?? []), name]);
    } catch {
      // unreadable: not a ref
    }
  }
  return byCommit;
}

/**
 * Every GGUF model in the cache, sorted by name; `[]` when there is no cache
 * yet. It reads the layout as huggingface_hub's `scan_cache_dir` does
 * (`models--ORG--REPO/snapshots/<commit>/…` and `refs/`), so it lists what
 * any of the tools sharing the cache downloaded.
 */
export function listCachedModels(cacheDir = hubCacheDir()): CachedModel[] {
  let names: string[];
  try {
    names = fs.readdirSync(cacheDir);
  } catch {
    return [];
  }
  const models: CachedModel[] = [];
  for (const name of names) {
    if (!name.startsWith("models--")) continue;
    const repo = name.slice("models--".length).split("--").join("/");
    const repoDir = join(cacheDir, name);
    const refs = readRefs(repoDir);
    let commits: string[];
    try {
      commits = fs.readdirSync(join(repoDir, "snapshots"));
    } catch {
      continue;
    }
    for (const commit of commits) {
      const snapshot = join(repoDir, "snapshots", commit);
      const files = listSnapshot(snapshot).map((file) => ({
        file,
        path: join(snapshot, file),
        size: fs.statSync(join(snapshot, file)).size,
      }));
      for (const first of files) {
        const split = splitInfo(first.file);
        if (!split || !isModelFile(first.file) || split.index !== 1) continue;
        const parts = split.count <= 1 ? [first] : files.filter((f) => {
          const other = splitInfo(f.file);
          return other && other.prefix === split.prefix && other.count === split.count;
        });
        models.push({
          name: split.tag ? `${repo}:${split.tag}` : `${repo}/${first.file}`,
          repo,
          file: first.file,
          quant: split.tag,
          part_count: parts.length,
          size_bytes: parts.reduce((sum, p) => sum + p.size, 0),
          commit,
          refs: refs.get(commit) ?? [],
          path: first.path,
        });
      }
    }
  }
  return models.sort((a, b) => a.name.localeCompare(b.name) || a.commit.localeCompare(b.commit));
}

function removeEmptyDirs(dir: string, stop: string): void {
  let current = dir;
  while (current.startsWith(stop) && current !== stop) {
    try {
      fs.rmdirSync(current);
    } catch {
      return; // not empty
    }
    current = dirname(current);
  }
}

/** What `removeCached` removed. */
export interface Removed {
  /** Snapshot paths unlinked (or the repository folder, when the whole repository went). */
  paths: string[];
  freed_bytes: number;
}

function sizeOf(path: string): number {
  let total = 0;
  const walk = (p: string) => {
    const stat = fs.lstatSync(p);
    if (stat.isDirectory()) { for (const name of fs.readdirSync(p)) walk(join(p, name)); }
    else if (stat.isFile()) total += stat.size;
  };
  try {
    walk(path);
  } catch {
    // raced with another removal
  }
  return total;
}

/**
 * Removes `ref` from the cache: with a quant or a file, those files (every
 * part) from every snapshot, and the blobs no other snapshot links to;
 * without, the whole repository folder. Throws when nothing matches.
 */
export function removeCached(ref: HubRef, cacheDir = hubCacheDir()): Removed {
  const repoDir = repoCacheDir(cacheDir, ref.repo);
  if (!fs.existsSync(repoDir)) {
    throw new HubError(`${formatHubRef(ref)} is not in the cache (${cacheDir})`);
  }
  if (!ref.file && !ref.quant) {
    const freed = sizeOf(repoDir);
    fs.rmSync(repoDir, { recursive: true, force: true });
    fs.rmSync(join(cacheDir, ".locks", repoDir.slice(repoDir.lastIndexOf("models--"))), {
      recursive: true,
      force: true,
    });
    return { paths: [repoDir], freed_bytes: freed };
  }
  const snapshotsDir = join(repoDir, "snapshots");
  const snapshots = fs.existsSync(snapshotsDir) ? fs.readdirSync(snapshotsDir) : [];
  const removed: string[] = [];
  const candidates = new Set<string>();
  for (const commit of snapshots) {
    const dir = join(snapshotsDir, commit);
    const paths = listSnapshot(dir);
    const chosen = ref.file
      ? impliedParts(ref.file).filter((f) => paths.includes(f))
      : pickModelFiles(paths, ref.quant);
    for (const file of chosen) {
      const pointer = join(dir, file);
      try {
        candidates.add(fs.realpathSync(pointer));
      } catch {
        // dangling
      }
      fs.rmSync(pointer, { force: true });
      removeEmptyDirs(dirname(pointer), snapshotsDir);
      removed.push(pointer);
    }
  }
  if (removed.length === 0) {
    throw new HubError(`${formatHubRef(ref)} is not in the cache (${cacheDir})`);
  }
  // Blobs still linked from a snapshot stay.
  const inUse = new Set<string>();
  for (const commit of fs.existsSync(snapshotsDir) ? fs.readdirSync(snapshotsDir) : []) {
    const dir = join(snapshotsDir, commit);
    for (const file of listSnapshot(dir)) inUse.add(fs.realpathSync(join(dir, file)));
  }
  let freed = 0;
  for (const blob of candidates) {
    if (inUse.has(blob)) continue;
    freed += sizeOf(blob);
    fs.rmSync(blob, { force: true });
  }
  dropDanglingRefs(repoDir);
  const left = fs.existsSync(snapshotsDir) ? fs.readdirSync(snapshotsDir) : [];
  if (left.length === 0) {
    freed += sizeOf(repoDir);
    fs.rmSync(repoDir, { recursive: true, force: true });
  }
  return { paths: removed, freed_bytes: freed };
}

/** Removes `refs/*` naming a snapshot that is gone (cache scanners reject those). */
function dropDanglingRefs(repoDir: string): void {
  for (const path of refFiles(repoDir)) {
    const commit = fs.readFileSync(path, "utf8").trim();
    if (!fs.existsSync(join(repoDir, "snapshots", commit))) fs.rmSync(path, { force: true });
  }
}
