/**
 * Model references: `ORG/REPO[:QUANT]`, `ORG/REPO/FILE.gguf`, either with an
 * `hf:` (or `hf.co/`, `huggingface.co/`) prefix, and full
 * `https://HOST/ORG/REPO/resolve/REVISION/FILE` URLs.
 *
 * @example
 * ```ts
 * import { parseHubRef } from "./ref.ts";
 * const ref = parseHubRef("hf:bartowski/SmolLM2-135M-Instruct-GGUF:q8_0");
 * console.assert(ref?.repo === "bartowski/SmolLM2-135M-Instruct-GGUF" && ref.quant === "Q8_0");
 * ```
 *
 * @module
 */

/** A parsed reference to a file (or a quant of a repository) on the Hub. */
export interface HubRef {
  /** `ORG/REPO`. */
  repo: string;
  /** A branch, tag or commit; `main` unless the reference names one. */
  revision: string;
  /** The file inside the repository, when the reference names one. */
  file?: string;
  /** The upper-cased quant tag (`Q4_K_M`), when the reference names one. */
  quant?: string;
  /** The server, when the reference is a full URL (else `HF_ENDPOINT` decides). */
  endpoint?: string;
  /** The reference as written. */
  text: string;
}

/** A repository or organisation name as the Hub allows it. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;

function checkName(part: string, text: string): void {
  if (!NAME.test(part) || part.includes("..") || part.includes("--")) {
    throw new Error(`"${text}": "${part}" is not a valid Hugging Face repository name`);
  }
}

function checkFile(file: string, text: string): void {
  const parts = file.split("/");
  if (parts.some((p) => p === "" || p === "." || p === ".." || p.includes("\\"))) {
    throw new Error(`"${text}": "${file}" is not a valid file path inside a repository`);
  }
}

/**
 * Parses a reference; returns `undefined` when `text` is not written as one
 * (a plain file path). Throws on a reference that is malformed.
 * `hf:` and URLs are always references; a bare `ORG/REPO[:QUANT]` or
 * `ORG/REPO/FILE.gguf` is one too (callers check a local file first).
 */
export function parseHubRef(text: string): HubRef | undefined {
  if (/^https?:\/\//i.test(text)) return parseUrl(text);
  let body = text;
  const prefix = /^(hf:|hf\.co\/|huggingface\.co\/)/i.exec(text);
  if (prefix) body = text.slice(prefix[0].length).replace(/^\/+/, "");
  else if (text.startsWith(".") || text.startsWith("/") || text.includes("\\")) return undefined;
  const parts = body.split("/");
  if (parts.length < 2 || parts.some((p) => p === "")) {
    if (prefix) throw new Error(`"${text}": expected ORG/REPO[:QUANT] or ORG/REPO/FILE.gguf`);
    return undefined;
  }
  const [org, repoWithTag, ...rest] = parts;
  if (rest.length === 0) {
    const colon = repoWithTag.indexOf(":");
    const name = colon < 0 ? repoWithTag : repoWithTag.slice(0, colon);
    const quant = colon < 0 ? undefined : repoWithTag.slice(colon + 1);
    // A plain path such as `models/x.gguf` is not a repository.
    if (!prefix && (name.toLowerCase().endsWith(".gguf") || !NAME.test(org) || !NAME.test(name))) {
      return undefined;
    }
    checkName(org, text);
    checkName(name, text);
    if (quant !== undefined && !/^[A-Za-z0-9_.-]{1,64}$/.test(quant)) {
      throw new Error(`"${text}": "${quant}" is not a quant tag (like Q4_K_M)`);
    }
    return {
      repo: `${org}/${name}`,
      revision: "main",
      quant: quant?.toUpperCase(),
      text,
    };
  }
  const file = rest.join("/");
  if (
    !prefix && (!file.toLowerCase().endsWith(".gguf") || !NAME.test(org) || !NAME.test(repoWithTag))
  ) {
    return undefined;
  }
  checkName(org, text);
  checkName(repoWithTag, text);
  checkFile(file, text);
  return { repo: `${org}/${repoWithTag}`, revision: "main", file, text };
}

function parseUrl(text: string): HubRef {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`"${text}": not a valid URL`);
  }
  const parts = url.pathname.split("/").slice(1).map(decodeURIComponent);
  // /ORG/REPO/resolve/REVISION/FILE... (or /blob/, as copied from the web page)
  if (parts.length < 5 || (parts[2] !== "resolve" && parts[2] !== "blob")) {
    throw new Error(
      `"${text}": expected a Hub file URL, https://HOST/ORG/REPO/resolve/REVISION/FILE`,
    );
  }
  const [org, name, , revision, ...rest] = parts;
  checkName(org, text);
  checkName(name, text);
  if (!/^[A-Za-z0-9._-]{1,128}$/.test(revision)) {
    throw new Error(`"${text}": "${revision}" is not a revision`);
  }
  const file = rest.join("/");
  checkFile(file, text);
  return { repo: `${org}/${name}`, revision, file, endpoint: url.origin, text };
}

/** `ORG/REPO:QUANT`, `ORG/REPO/FILE` or `ORG/REPO` as a short display name. */
export function formatHubRef(ref: HubRef): string {
  if (ref.file) return `${ref.repo}/${ref.file}`;
  return ref.quant ? `${ref.repo}:${ref.quant}` : ref.repo;
}
