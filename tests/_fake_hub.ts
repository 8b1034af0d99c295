/**
 * A fake Hugging Face Hub on 127.0.0.1 for the hub tests, answering with the
 * real API's shapes:
 *
 * - `GET /api/models/ORG/REPO/tree/REV?recursive=...` a JSON array of
 *   `{type, oid, size, path, lfs?: {oid, size, pointerSize}}`, paged with a
 *   `Link: <...>; rel="next"` header when `pageSize` is set;
 * - `HEAD|GET /ORG/REPO/resolve/REV/FILE`: for an LFS file a 302 to
 *   `/cdn/<sha256>` with `X-Repo-Commit`, `X-Linked-Etag`, `X-Linked-Size`,
 *   `ETag` (the pointer's git oid); for a small file 200 with the bytes;
 *   401 `RepoNotFound` for an unknown or private repository without the
 *   token, 403 `GatedRepo`, 404 `EntryNotFound` / `RevisionNotFound`;
 * - `GET /cdn/<sha256>` (on a second host, 127.0.0.2) with `Range` support (206 + `Content-Range`), an
 *   optional rate limit, and an optional corruption (one byte flipped).
 *
 * Every response body byte sent from `/cdn/` is counted in `cdnBytes`.
 *
 * @module
 */
import { createHash } from "node:crypto";

/** One file of a fake repository. */
export interface FakeFile {
  bytes: Uint8Array;
  /** Stored with LFS (the default for .gguf): redirected to the CDN. */
  lfs?: boolean;
}

/** One fake repository. */
export interface FakeRepo {
  files: Record<string, FakeFile>;
  /** A token that must be sent (a private repository). */
  token?: string;
  /** Gated: a token is needed, and only `token` has been granted access. */
  gated?: boolean;
  /** The commit `main` points to (default: derived from the name). */
  commit?: string;
  /** A raw body for the tree listing instead of the real one (a broken Hub). */
  treeBody?: string;
}

/** Per-server behaviour the tests change while it runs. */
export interface FakeHubControl {
  /** CDN bytes per second (0 = unlimited). */
  rateBytesPerSecond: number;
  /** Flip one byte in the middle of every CDN body. */
  corrupt: boolean;
  /** Files per tree page (0 = one page). */
  pageSize: number;
  /** Cut this many CDN bodies short (an error mid-stream) after `dropAfterBytes`. */
  dropCount: number;
  dropAfterBytes: number;
}

/** A running fake Hub. */
export interface FakeHub extends AsyncDisposable {
  /** The Hub (127.0.0.1). */
  url: string;
  /** The CDN the resolve endpoint redirects to (127.0.0.2, another host). */
  cdnUrl: string;
  control: FakeHubControl;
  /** Bytes sent in CDN bodies so far. */
  cdnBytes: number;
  /** Every request as `METHOD path` (with the query), in order. */
  requests: string[];
  /** Each CDN GET: its `Range` header (or null) and the body bytes sent for it. */
  transfers: { range: string | null; bytes: number }[];
  close(): Promise<void>;
}

/** The sha256 of `bytes` as hex. */
export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** git's blob id of `bytes`. */
export function gitOid(bytes: Uint8Array): string {
  return createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
}

function lfsPointer(bytes: Uint8Array): string {
  return `version https://git-lfs.github.com/spec/v1\noid sha256:${
    sha256(bytes)
  }\nsize ${bytes.length}\n`;
}

/** A commit id from a name (so tests can predict it). */
export function fakeCommit(name: string): string {
  return createHash("sha1").update("commit " + name).digest("hex");
}

function isLfs(path: string, file: FakeFile): boolean {
  return file.lfs ?? path.endsWith(".gguf");
}

function errorResponse(status: number, code: string, message: string): Response {
  return new Response(JSON.stringify({ error: message }), {
    status,
    headers: {
      "content-type": "application/json",
      "x-error-code": code,
      "x-error-message": message,
    },
  });
}

/** Starts a fake Hub serving `repos` (ORG/REPO -> files) on a free port. */
export function startFakeHub(repos: Record<string, FakeRepo>): FakeHub {
  const control: FakeHubControl = {
    rateBytesPerSecond: 0,
    corrupt: false,
    pageSize: 0,
    dropCount: 0,
    dropAfterBytes: 0,
  };
  const blobs = new Map<string, Uint8Array>();
  for (const repo of Object.values(repos)) {
    for (const [path, file] of Object.entries(repo.files)) {
      if (isLfs(path, file)) blobs.set(sha256(file.bytes), file.bytes);
    }
  }
  const state = { cdnBytes: 0 };
  const requests: string[] = [];
  const transfers: { range: string | null; bytes: number }[] = [];

  function access(name: string, request: Request): Response | FakeRepo {
    const repo = repos[name];
    const auth = request.headers.get("authorization");
    const sent = auth?.startsWith("Bearer ") ? auth.slice(7) : undefined;
    if (repo === undefined || (repo.token && !repo.gated && sent !== repo.token)) {
      return errorResponse(401, "RepoNotFound", "Repository not found");
    }
    if (repo.gated && sent === undefined) {
      return errorResponse(
        401,
        "GatedRepo",
        `Access to model ${name} is restricted. You must have access to it and be authenticated to access it. Please log in.`,
      );
    }
    if (repo.gated && sent !== repo.token) {
      return errorResponse(
        403,
        "GatedRepo",
        `Access to model ${name} is restricted and you are not in the authorized list.`,
      );
    }
    return repo;
  }

  function tree(url: URL, request: Request, name: string, revision: string): Response {
    const repo = access(name, request);
    if (repo instanceof Response) return repo;
    if (revision !== "main" && revision !== (repo.commit ?? fakeCommit(name))) {
      return errorResponse(404, "RevisionNotFound", `Invalid rev id: ${revision}`);
    }
    if (repo.treeBody !== undefined) {
      return new Response(repo.treeBody, { headers: { "content-type": "application/json" } });
    }
    const entries: unknown[] = [];
    const dirs = new Set<string>();
    for (const [path, file] of Object.entries(repo.files)) {
      const parts = path.split("/");
      for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
      const lfs = isLfs(path, file);
      const pointer = new TextEncoder().encode(lfsPointer(file.bytes));
      entries.push({
        type: "file",
        oid: lfs ? gitOid(pointer) : gitOid(file.bytes),
        size: file.bytes.length,
        path,
        ...(lfs
          ? {
            lfs: { oid: sha256(file.bytes), size: file.bytes.length, pointerSize: pointer.length },
          }
          : {}),
      });
    }
    for (const dir of dirs) {
      entries.push({
        type: "directory",
        oid: gitOid(new TextEncoder().encode(dir)),
        size: 0,
        path: dir,
      });
    }
    const cursor = Number(url.searchParams.get("cursor") ?? "0");
    const size = control.pageSize > 0 ? control.pageSize : entries.length;
    const page = entries.slice(cursor, cursor + size);
    const headers: Record<string, string> = { "content-type": "application/json; charset=utf-8" };
    if (cursor + size < entries.length) {
      const next = new URL(url);
      next.searchParams.set("cursor", String(cursor + size));
      headers.link = `<${next.href}>; rel="next"`;
    }
    return new Response(JSON.stringify(page), { headers });
  }

  function resolve(request: Request, name: string, revision: string, path: string): Response {
    const repo = access(name, request);
    if (repo instanceof Response) return repo;
    const commit = repo.commit ?? fakeCommit(name);
    if (revision !== "main" && revision !== commit) {
      return errorResponse(404, "RevisionNotFound", `Invalid rev id: ${revision}`);
    }
    const file = repo.files[path];
    if (file === undefined) return errorResponse(404, "EntryNotFound", "Entry not found");
    if (isLfs(path, file)) {
      const pointer = new TextEncoder().encode(lfsPointer(file.bytes));
      const sha = sha256(file.bytes);
      return new Response(request.method === "HEAD" ? null : "Found. Redirecting", {
        status: 302,
        headers: {
          location:
            `${hub.cdnUrl}/cdn/${sha}?X-Amz-Expires=3600&response-content-disposition=attachment`,
          "x-repo-commit": commit,
          "x-linked-etag": `"${sha}"`,
          "x-linked-size": String(file.bytes.length),
          etag: `"${gitOid(pointer)}"`,
          "accept-ranges": "bytes",
        },
      });
    }
    return new Response(request.method === "HEAD" ? null : file.bytes.slice(), {
      headers: {
        "x-repo-commit": commit,
        etag: `"${gitOid(file.bytes)}"`,
        "content-length": String(file.bytes.length),
        "content-type": "application/octet-stream",
      },
    });
  }

  function cdn(request: Request, sha: string): Response {
    const bytes = blobs.get(sha);
    if (bytes === undefined) return new Response("NoSuchKey", { status: 404 });
    let start = 0;
    const range = /^bytes=(\d+)-$/.exec(request.headers.get("range") ?? "");
    if (range) {
      start = Number(range[1]);
      if (start >= bytes.length) {
        return new Response(null, {
          status: 416,
          headers: { "content-range": `bytes */${bytes.length}` },
        });
      }
    }
    let body = bytes.subarray(start);
    if (control.corrupt) {
      body = body.slice();
      body[Math.floor(body.length / 2)] ^= 0xff;
    }
    const headers: Record<string, string> = {
      "content-length": String(body.length),
      "content-type": "application/octet-stream",
      "accept-ranges": "bytes",
      etag: `"${sha}"`,
    };
    if (range) headers["content-range"] = `bytes ${start}-${bytes.length - 1}/${bytes.length}`;
    if (request.method === "HEAD") {
      return new Response(null, { status: range ? 206 : 200, headers });
    }
    const chunkBytes = 16 << 10;
    let offset = 0;
    const transfer = { range: request.headers.get("range"), bytes: 0 };
    transfers.push(transfer);
    const drop = control.dropCount > 0;
    if (drop) control.dropCount--;
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (offset >= body.length) {
          controller.close();
          return;
        }
        if (control.rateBytesPerSecond > 0) {
          await new Promise((r) => setTimeout(r, (chunkBytes / control.rateBytesPerSecond) * 1000));
        }
        if (drop && transfer.bytes >= control.dropAfterBytes) {
          controller.error(new Error("connection reset by the fake CDN"));
          return;
        }
        const chunk = body.subarray(offset, offset + chunkBytes);
        offset += chunk.length;
        state.cdnBytes += chunk.length;
        transfer.bytes += chunk.length;
        controller.enqueue(chunk.slice());
      },
    });
    return new Response(stream, { status: range ? 206 : 200, headers });
  }

  const handler = (request: Request): Response => {
    const url = new URL(request.url);
    requests.push(`${request.method} ${url.pathname}${url.search}`);
    const path = url.pathname.split("/").map(decodeURIComponent);
    // /api/models/ORG/REPO/tree/REV[/...]
    if (path[1] === "api" && path[2] === "models" && path[5] === "tree" && path[6]) {
      return tree(url, request, `${path[3]}/${path[4]}`, path[6]);
    }
    if (path[1] === "cdn" && path[2]) return cdn(request, path[2]);
    // /ORG/REPO/resolve/REV/FILE...
    if (path[3] === "resolve" && path.length >= 6) {
      return resolve(request, `${path[1]}/${path[2]}`, path[4], path.slice(5).join("/"));
    }
    return new Response("Not Found", { status: 404 });
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, handler);
  // The CDN is another host (as cdn-lfs.hf.co is): clients stop following the redirect there.
  const cdnServer = Deno.serve({ hostname: "127.0.0.2", port: 0, onListen() {} }, handler);
  const hub: FakeHub = {
    url: `http://127.0.0.1:${server.addr.port}`,
    cdnUrl: `http://127.0.0.2:${cdnServer.addr.port}`,
    control,
    get cdnBytes() {
      return state.cdnBytes;
    },
    set cdnBytes(value: number) {
      state.cdnBytes = value;
    },
    requests,
    transfers,
    async close() {
      await Promise.all([server.shutdown(), cdnServer.shutdown()]);
    },
    async [Symbol.asyncDispose]() {
      await Promise.all([server.shutdown(), cdnServer.shutdown()]);
    },
  };
  return hub;
}
