/**
 * The Hugging Face cache layout, shared with `huggingface_hub`, llama.cpp and
 * `@huggingface/hub` (whose `getHFHubCachePath` reads the same variables):
 *
 * ```text
 * $HF_HUB_CACHE (default $HF_HOME/hub, $HF_HOME default ~/.cache/huggingface)
 *   models--ORG--REPO/
 *     blobs/<etag>                     the file's bytes (etag = LFS sha256 or git oid)
 *     blobs/<etag>.incomplete          a download in progress (resumed with Range)
 *     snapshots/<commit>/<path>        a relative symlink to ../../blobs/<etag>
 *     refs/<branch>                    the commit the branch pointed to
 *   .locks/models--ORG--REPO/<etag>.lock
 * ```
 *
 * @example
 * ```ts
 * import { repoCacheDir } from "./cache.ts";
 * console.assert(repoCacheDir("/c", "org/repo") === "/c/models--org--repo");
 * ```
 *
 * @module
 */
import process from "node:process";
import { homedir } from "node:os";
import { dirname, join, relative } from "node:path";
import * as fs from "node:fs";

/** `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`. */
export function hubCacheDir(): string {
  const env = process.env;
  if (env.HF_HUB_CACHE) return env.HF_HUB_CACHE;
  if (env.HUGGINGFACE_HUB_CACHE) return env.HUGGINGFACE_HUB_CACHE;
  return join(hfHome(), "hub");
}

/** `$HF_HOME`, else `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`. */
export function hfHome(): string {
  const env = process.env;
  if (env.HF_HOME) return env.HF_HOME;
  return join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "huggingface");
}

/** `$HF_ENDPOINT` without a trailing slash, else `https://huggingface.co`. */
export function hubEndpoint(): string {
  return (process.env.HF_ENDPOINT || "https://huggingface.co").replace(/\/+$/, "");
}

/** True when `HF_HUB_OFFLINE` is set to 1/true/yes/on (as huggingface_hub reads it). */
export function hubOffline(): boolean {
  return /^(1|true|yes|on)$/i.test(process.env.HF_HUB_OFFLINE ?? "");
}

/**
 * The access token: `explicit` (`--token`), else `$HF_TOKEN`, else the file
 * `huggingface-cli login` writes (`$HF_TOKEN_PATH`, default `$HF_HOME/token`).
 */
export function hubToken(explicit?: string): string | undefined {
  if (explicit) return explicit;
  const env = process.env;
  if (env.HF_TOKEN) return env.HF_TOKEN;
  try {
    const text = fs.readFileSync(env.HF_TOKEN_PATH || join(hfHome(), "token"), "utf8").trim();
    return text || undefined;
  } catch {
    return undefined;
  }
}

/** `CACHE/models--ORG--REPO`. */
export function repoCacheDir(cacheDir: string, repo: string): string {
  return join(cacheDir, "models--" + repo.split("/").join("--"));
}

/** The lock file huggingface_hub uses for one blob. */
export function blobLockPath(cacheDir: string, repo: string, etag: string): string {
  return join(cacheDir, ".locks", "models--" + repo.split("/").join("--"), etag + ".lock");
}

/** The commit `refs/<revision>` names, or `revision` itself when it is a commit hash. */
export function readRef(repoDir: string, revision: string): string | undefined {
  if (/^[0-9a-f]{40}$/.test(revision)) return revision;
  try {
    const commit = fs.readFileSync(join(repoDir, "refs", revision), "utf8").trim();
    return /^[0-9a-f]{40}$/.test(commit) ? commit : undefined;
  } catch {
    return undefined;
  }
}

/** Writes `refs/<revision>` = `commit` atomically (skipped for a commit-hash revision). */
export function writeRef(repoDir: string, revision: string, commit: string): void {
  if (revision === commit) return;
  const path = join(repoDir, "refs", revision);
  fs.mkdirSync(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, commit);
  fs.renameSync(temporary, path);
}

/** True when `path` exists (following symlinks). */
export function fileExists(path: string): boolean {
  try {
    return fs.statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * Points `snapshots/<commit>/<file>` at `blobs/<etag>` with a relative symlink
 * (replacing a stale one), as huggingface_hub does.
 */
export function linkSnapshot(repoDir: string, commit: string, file: string, etag: string): string {
  const pointer = join(repoDir, "snapshots", commit, file);
  const blob = join(repoDir, "blobs", etag);
  fs.mkdirSync(dirname(pointer), { recursive: true });
  const target = relative(dirname(pointer), blob);
  try {
    if (fs.readlinkSync(pointer) === target) return pointer;
  } catch {
    // missing, or not a link
  }
  const temporary = `${pointer}.${process.pid}.tmp`;
  fs.rmSync(temporary, { force: true });
  fs.symlinkSync(target, temporary);
  fs.renameSync(temporary, pointer);
  return pointer;
}
