/**
 * Pulls a model by reference into the Hugging Face cache: picks the file(s)
 * for the quant tag, asks the resolve endpoint for each file's commit, blob id
 * and size, reuses what the cache already has (whoever put it there),
 * downloads the rest under a per-blob lock, and links
 * `snapshots/<commit>/<file>` and `refs/<revision>`. Offline
 * (`HF_HUB_OFFLINE=1`, or the Hub unreachable) it answers from the cache.
 *
 * @example
 * ```ts ignore
 * import { pullModel } from "./pull.ts";
 * import { parseHubRef } from "./ref.ts";
 * const model = await pullModel(parseHubRef("org/repo:Q4_K_M")!);
 * console.log(model.model_path);
 * ```
 *
 * @module
 */
import * as fs from "node:fs";
import { join, relative } from "node:path";
import { fileMetadata, type HubClient, listRepoFiles } from "./api.ts";
import {
  blobLockPath,
  fileExists,
  hubCacheDir,
  hubEndpoint,
  hubOffline,
  hubToken,
  linkSnapshot,
  readRef,
  repoCacheDir,
  writeRef,
} from "./cache.ts";
import { downloadBlob } from "./download.ts";
import { HubError } from "./errors.ts";
import { noProgress, progressFor } from "./progress.ts";
import { formatHubRef, type HubRef } from "./ref.ts";
import { isModelFile, pickModelFiles, splitInfo, splitParts } from "./select.ts";

/** How to pull. */
export interface PullOptions {
  /** A token for private and gated repositories (else `HF_TOKEN`, else the login file). */
  token?: string;
  /** Use only the cache (default: `HF_HUB_OFFLINE`). */
  offline?: boolean;
  /** The cache (default: {@link hubCacheDir}). */
  cacheDir?: string;
  /** Draw progress lines on a terminal stderr (default true). */
  progress?: boolean;
  /** One-line notices (waiting for another pull, using the cache offline). */
  notice?: (message: string) => void;
}

/** One file of a pulled model. */
export interface PulledFile {
  /** The path inside the repository. */
  file: string;
  /** `snapshots/<commit>/<file>` in the cache. */
  local_path: string;
  size_bytes: number;
  /** The blob id (LFS sha256 or git oid); "" when found offline. */
  etag: string;
  /** Bytes downloaded for it in this run (0 when it was cached). */
  transferred_bytes: number;
  /** Bytes reused from an interrupted earlier download. */
  resumed_bytes: number;
}

/** A pulled model. */
export interface PulledModel {
  repo: string;
  revision: string;
  commit: string;
  /** The path to load: the first file (the first part of a split model). */
  model_path: string;
  files: PulledFile[];
  /** True when it was answered from the cache without the Hub. */
  offline: boolean;
}

/** The parts a file name implies: every `-0000i-of-0000n` sibling, else itself. */
export function impliedParts(file: string): string[] {
  const info = splitInfo(file);
  if (info === undefined || info.count <= 1) return [file];
  const parts: string[] = [];
  for (let i = 1; i <= info.count; i++) {
    parts.push(
      `${info.prefix}-${String(i).padStart(5, "0")}-of-${String(info.count).padStart(5, "0")}.gguf`,
    );
  }
  return parts;
}

function availableQuants(paths: readonly string[]): string {
  const tags = new Set<string>();
  for (const path of paths) {
    const info = splitInfo(path);
    if (info && isModelFile(path) && info.index === 1 && info.tag) tags.add(info.tag);
  }
  return tags.size > 0 ? [...tags].join(", ") : "none";
}

function chooseFiles(ref: HubRef, paths: readonly string[], where: string): string[] {
  const files = pickModelFiles(paths, ref.quant);
  if (files.length > 0) return files;
  const ggufs = paths.filter(isModelFile);
  if (ggufs.length === 0) throw new HubError(`${ref.repo}: no GGUF model files ${where}`);
  throw new HubError(
    `${ref.repo}: no GGUF file for quant ${ref.quant} ${where} (quants: ${availableQuants(ggufs)})`,
  );
}

export function listSnapshot(dir: string): string[] {
  const out: string[] = [];
  const walk = (path: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(path, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const full = join(path, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (fileExists(full)) out.push(relative(dir, full).split("\\").join("/"));
    }
  };
  walk(dir);
  return out.sort();
}

/** Answers `ref` from the cache only; throws when it is not all there. */
export function findCachedModel(ref: HubRef, cacheDir = hubCacheDir()): PulledModel {
  const repoDir = repoCacheDir(cacheDir, ref.repo);
  const commit = readRef(repoDir, ref.revision);
  const name = formatHubRef(ref);
  if (commit === undefined) {
    throw new HubError(`${name} is not in the cache (${cacheDir}) and the Hub is offline`);
  }
  const snapshot = join(repoDir, "snapshots", commit);
  const files = ref.file
    ? impliedParts(ref.file)
    : chooseFiles(ref, listSnapshot(snapshot), "in the cache");
  const pulled: PulledFile[] = files.map((file) => {
    const local = join(snapshot, file);
    if (!fileExists(local)) {
      throw new HubError(
        `${ref.repo}/${file} is not in the cache (${cacheDir}) and the Hub is offline`,
      );
    }
    return {
      file,
      local_path: local,
      size_bytes: fs.statSync(local).size,
      etag: "",
      transferred_bytes: 0,
      resumed_bytes: 0,
    };
  });
  return {
    repo: ref.repo,
    revision: ref.revision,
    commit,
    model_path: pulled[0].local_path,
    files: pulled,
    offline: true,
  };
}

/** Pulls `ref` (see the module doc); resolves once every file is in place and verified. */
export async function pullModel(ref: HubRef, options: PullOptions = {}): Promise<PulledModel> {
  const cacheDir = options.cacheDir ?? hubCacheDir();
  if (options.offline ?? hubOffline()) return findCachedModel(ref, cacheDir);
  const client: HubClient = {
    endpoint: ref.endpoint ?? hubEndpoint(),
    token: hubToken(options.token),
  };
  try {
    return await pullOnline(ref, client, cacheDir, options);
  } catch (error) {
    // The Hub unreachable (not an answer from it): what the cache holds will do.
    if (error instanceof HubError && error.status === 0 && /^cannot reach /.test(error.message)) {
      let cached: PulledModel;
      try {
        cached = findCachedModel(ref, cacheDir);
      } catch {
        throw error;
      }
      options.notice?.(`${error.message}: using the cached ${formatHubRef(ref)}`);
      return cached;
    }
    throw error;
  }
}

async function pullOnline(
  ref: HubRef,
  client: HubClient,
  cacheDir: string,
  options: PullOptions,
): Promise<PulledModel> {
  let files: string[];
  if (ref.file) {
    files = impliedParts(ref.file);
  } else {
    const listing = await listRepoFiles(client, ref.repo, ref.revision);
    const paths = listing.map((f) => f.path);
    files = splitParts(paths, chooseFiles(ref, paths, "in the repository")[0]);
  }
  const repoDir = repoCacheDir(cacheDir, ref.repo);
  const pulled: PulledFile[] = [];
  let commit = "";
  for (const file of files) {
    const meta = await fileMetadata(client, ref.repo, ref.revision, file);
    commit ||= meta.commit;
    const pointer = join(repoDir, "snapshots", meta.commit, file);
    const blob = join(repoDir, "blobs", meta.etag);
    const entry: PulledFile = {
      file,
      local_path: pointer,
      size_bytes: meta.size_bytes,
      etag: meta.etag,
      transferred_bytes: 0,
      resumed_bytes: 0,
    };
    if (!fileExists(blob)) {
      fs.mkdirSync(join(repoDir, "blobs"), { recursive: true });
      const label = files.length > 1 ? file : file.slice(file.lastIndexOf("/") + 1);
      await withBlobLock(cacheDir, ref.repo, meta.etag, label, options, async () => {
        if (fileExists(blob)) return; // another pull finished it while we waited
        const result = await downloadWithRetries({
          url: meta.download_url,
          etag: meta.etag,
          size_bytes: meta.size_bytes,
          blob_path: blob,
          // The CDN's URL is signed: the token stays on the Hub's host.
          token: new URL(meta.download_url).host === new URL(client.endpoint).host
            ? client.token
            : undefined,
          label,
          progress: (start) =>
            options.progress === false ? noProgress : progressFor(label, meta.size_bytes, start),
        }, options.notice);
        entry.transferred_bytes = result.transferred_bytes;
        entry.resumed_bytes = result.resumed_bytes;
      });
    }
    linkSnapshot(repoDir, meta.commit, file, meta.etag);
    pulled.push(entry);
  }
  writeRef(repoDir, ref.revision, commit);
  return {
    repo: ref.repo,
    revision: ref.revision,
    commit,
    model_path: pulled[0].local_path,
    files: pulled,
    offline: false,
  };
}

/** Tries per file when the connection drops (a reason: huggingface_hub retries 5 times too). */
const DOWNLOAD_ATTEMPTS = 5;

/**
 * {@link downloadBlob}, resumed in this run when the connection drops midway
 * (each retry asks only for the missing bytes), as long as each try gets
 * some bytes further.
 */
async function downloadWithRetries(
  job: Parameters<typeof downloadBlob>[0],
  notice?: (message: string) => void,
): Promise<{ transferred_bytes: number; resumed_bytes: number }> {
  const initial = partialBytes(job.blob_path);
  let before = initial;
  let gained = 0; // bytes the failed tries added
  for (let attempt = 1;; attempt++) {
    try {
      const result = await downloadBlob(job);
      return { transferred_bytes: gained + result.transferred_bytes, resumed_bytes: initial };
    } catch (error) {
      const now = partialBytes(job.blob_path);
      const resumable = error instanceof HubError && error.resumable;
      if (!resumable || attempt >= DOWNLOAD_ATTEMPTS || now <= before) throw error;
      gained += now - before;
      before = now;
      notice?.(`${error.message.replace(/; run the pull again to resume$/, "")}: resuming`);
    }
  }
}

function partialBytes(blobPath: string): number {
  try {
    return fs.statSync(blobPath + ".incomplete").size;
  } catch {
    return 0;
  }
}

async function withBlobLock(
  cacheDir: string,
  repo: string,
  etag: string,
  label: string,
  options: PullOptions,
  work: () => Promise<void>,
): Promise<void> {
  const { withFileLock } = await import("./lock.ts");
  await withFileLock(
    blobLockPath(cacheDir, repo, etag),
    work,
    () => options.notice?.(`waiting for another pull of ${label}`),
  );
}
