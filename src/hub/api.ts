/**
 * The two Hub calls a pull makes: the repository's file listing
 * (`GET /api/models/ORG/REPO/tree/REVISION?recursive=true`, following its
 * `Link` pages) and a
 * file's metadata (`HEAD /ORG/REPO/resolve/REVISION/FILE`, following redirects
 * on the Hub's host but not the one to the CDN, as huggingface_hub's
 * `get_hf_file_metadata` does:
 * `X-Repo-Commit`, `X-Linked-Etag`, `X-Linked-Size`, `Location`).
 *
 * @module
 */
import { HubError, hubErrorFor } from "./errors.ts";

/** Time allowed for one API answer (a reason: a dead server must not hang the CLI). */
const API_TIMEOUT_MS = 30_000;
/** Redirects followed between Hub hosts before the CDN (a reason: loops end). */
const MAX_REDIRECTS = 10;

/** One file of a repository listing. */
export interface RepoFile {
  path: string;
  size_bytes: number;
  /** The LFS sha256, when the file is stored with LFS. */
  sha256?: string;
}

/** Where to talk to and with which token. */
export interface HubClient {
  endpoint: string;
  token?: string;
}

function headers(client: HubClient, extra: Record<string, string> = {}): Record<string, string> {
  return client.token ? { ...extra, authorization: `Bearer ${client.token}` } : extra;
}

function networkError(url: string, error: unknown): HubError {
  const reason = error instanceof Error ? error.message : String(error);
  if (error instanceof DOMException && error.name === "TimeoutError") {
    return new HubError(`${url}: no answer within ${API_TIMEOUT_MS / 1000} s`);
  }
  return new HubError(`cannot reach ${new URL(url).origin} (${reason.split("\n")[0]})`);
}

/** True for a relative path of plain segments (no `..`, `.`, empty, backslash or NUL). */
export function isSafeRepoPath(path: string): boolean {
  return path.length > 0 && path.length <= 1024 &&
    path.split("/").every((p) => p !== "" && p !== "." && p !== ".." && !/[\\\0]/.test(p));
}

/** Percent-encodes each segment of a repository path. */
export function encodePath(path: string): string {
  return path.split("/").map(encodeURIComponent).join("/");
}

/** Listing pages followed at most (a reason: a `Link` loop must end; 1000 files a page). */
const MAX_PAGES = 1000;

function nextLink(header: string | null): string | undefined {
  if (header === null) return undefined;
  for (const part of header.split(",")) {
    const m = /<([^>]*)>\s*;\s*rel="?next"?/.exec(part);
    if (m) return m[1];
  }
  return undefined;
}

/**
 * Every file of `repo` at `revision`, as huggingface_hub's `list_repo_tree`
 * asks for it (`/api/models/ORG/REPO/tree/REV?recursive=true&expand=false`,
 * then each `Link: <...>; rel="next"` page).
 */
export async function listRepoFiles(
  client: HubClient,
  repo: string,
  revision: string,
): Promise<RepoFile[]> {
  let url: string | undefined = `${client.endpoint}/api/models/${repo}/tree/${
    encodeURIComponent(revision)
  }?recursive=true&expand=false`;
  const files: RepoFile[] = [];
  for (let page = 0; url !== undefined; page++) {
    if (page === MAX_PAGES) throw new HubError(`${repo}: more than ${MAX_PAGES} listing pages`);
    let response: Response;
    try {
      response = await fetch(url, {
        headers: headers(client, { accept: "application/json" }),
        signal: AbortSignal.timeout(API_TIMEOUT_MS),
      });
    } catch (error) {
      throw networkError(url, error);
    }
    if (!response.ok) throw await hubErrorFor(response, repo, repo, { hasToken: !!client.token });
    let entries: unknown;
    try {
      entries = await response.json();
      if (!Array.isArray(entries)) throw new TypeError("not a JSON array");
    } catch (error) {
      throw new HubError(
        `${repo}: unexpected file listing from ${client.endpoint} (${
          error instanceof Error ? error.message : error
        })`,
      );
    }
    for (const entry of entries) {
      if (entry === null || typeof entry !== "object") continue;
      const { type, path, size, lfs } = entry as Record<string, unknown>;
      if (type !== "file" || typeof path !== "string") continue;
      // The path is joined onto the cache: one that could leave it is skipped.
      if (!isSafeRepoPath(path)) continue;
      const sha = (lfs as { oid?: unknown } | null | undefined)?.oid;
      files.push({
        path,
        size_bytes: typeof size === "number" ? size : 0,
        sha256: typeof sha === "string" && /^[0-9a-f]{64}$/.test(sha) ? sha : undefined,
      });
    }
    const next = nextLink(response.headers.get("link"));
    url = next === undefined ? undefined : new URL(next, url).href;
  }
  return files;
}

/** What the resolve endpoint says about one file. */
export interface FileMetadata {
  /** The commit the revision resolved to (`X-Repo-Commit`). */
  commit: string;
  /** The blob id: LFS sha256 (`X-Linked-Etag`) or git oid (`ETag`), unquoted. */
  etag: string;
  size_bytes: number;
  /** Where the bytes are (the CDN after the redirect, else the resolve URL itself). */
  download_url: string;
}

function normalizeEtag(value: string | null): string {
  return (value ?? "").replace(/^W\//, "").replace(/^"|"$/g, "");
}

/** The resolve URL of `file`. */
export function resolveUrl(client: HubClient, repo: string, revision: string, file: string) {
  return `${client.endpoint}/${repo}/resolve/${encodeURIComponent(revision)}/${encodePath(file)}`;
}

/** HEADs the resolve URL of `file`, following Hub-internal (relative) redirects only. */
export async function fileMetadata(
  client: HubClient,
  repo: string,
  revision: string,
  file: string,
): Promise<FileMetadata> {
  let url = resolveUrl(client, repo, revision, file);
  const what = `${repo}/${file}`;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    let response: Response;
    try {
      response = await fetch(url, {
        method: "HEAD",
        redirect: "manual",
        headers: headers(client, { "accept-encoding": "identity" }),
        signal: AbortSignal.timeout(API_TIMEOUT_MS),
      });
    } catch (error) {
      throw networkError(url, error);
    }
    const location = response.headers.get("location");
    if (response.status >= 300 && response.status < 400 && location !== null) {
      const next = new URL(location, url);
      // A redirect on the same host is the Hub itself (a renamed repository): ask again
      // there. Another host is the CDN: this response carries the metadata, and the
      // token must not follow it there.
      if (next.host === new URL(url).host) {
        url = next.href;
        continue;
      }
      return metadataFrom(response, next.href, what);
    }
    if (response.ok) return metadataFrom(response, url, what);
    throw await hubErrorFor(response, repo, what, { hasToken: !!client.token });
  }
  throw new HubError(`${what}: more than ${MAX_REDIRECTS} redirects`);
}

function metadataFrom(response: Response, downloadUrl: string, what: string): FileMetadata {
  const h = response.headers;
  const commit = h.get("x-repo-commit") ?? "";
  const etag = normalizeEtag(h.get("x-linked-etag") ?? h.get("etag"));
  const size = Number(h.get("x-linked-size") ?? h.get("content-length") ?? NaN);
  if (!/^[0-9a-f]{40}$/.test(commit)) {
    throw new HubError(
      `${what}: the server sent no X-Repo-Commit: is HF_ENDPOINT a Hugging Face Hub?`,
    );
  }
  if (!/^[0-9a-f]{40}$|^[0-9a-f]{64}$/.test(etag)) {
    throw new HubError(`${what}: the server sent no usable ETag ("${etag.slice(0, 80)}")`);
  }
  if (!Number.isSafeInteger(size) || size < 0) {
    throw new HubError(`${what}: the server sent no file size`);
  }
  return { commit, etag, size_bytes: size, download_url: downloadUrl };
}
