/**
 * The `general.*` naming keys `convert_hf_to_gguf.py` derives (gguf-py's
 * `Metadata`): from `config.json`'s `_name_or_path` when it is a model id,
 * then from the folder's name, parsed by the same heuristics (name, basename,
 * organization, finetune, version, size label), and the size label from the
 * parameter count when none is found. Model cards (README.md front matter)
 * are not read.
 *
 * @module
 */
import { basename } from "node:path";
import { meta } from "../gguf/writer.ts";
import type { Metadata } from "./vocab.ts";

const isDecimal = (s: string) => s.length > 0 && /^\p{Nd}+$/u.test(s);
const isAlpha = (s: string) => s.length > 0 && /^\p{L}+$/u.test(s);
const isLower = (s: string) => /\p{Ll}/u.test(s) && !/\p{Lu}|\p{Lt}/u.test(s);

/** Python's `str.title()`. */
function title(s: string): string {
  let out = "", prevCased = false;
  for (const c of s) {
    const cased = c.toLowerCase() !== c.toUpperCase();
    out += cased ? (prevCased ? c.toLowerCase() : c.toUpperCase()) : c;
    prevCased = cased;
  }
  return out;
}

/** `Metadata.id_to_title`. */
export function idToTitle(s: string): string {
  return s.trim().replaceAll("-", " ").split(/\s+/).filter((w) => w.length > 0).map((w) =>
    isLower(w) && !/^(v\d+(?:\.\d+)*|\d.*)$/.test(w) ? title(w) : w
  ).join(" ");
}

/** What `Metadata.get_model_id_components` finds in a model id. */
export interface ModelIdParts {
  name?: string;
  organization?: string;
  basename?: string;
  finetune?: string;
  version?: string;
  sizeLabel?: string;
}

/** `Metadata.get_model_id_components`. */
export function modelIdParts(id: string | undefined, totalParams: number): ModelIdParts {
  if (id === undefined) return {};
  if (id.includes(" ")) return { name: id };
  let org: string | undefined, full: string;
  const slash = id.indexOf("/");
  if (slash >= 0) [org, full] = [id.slice(0, slash), id.slice(slash + 1)];
  else full = id;
  if (org !== undefined && org.length > 0 && org[0] === ".") org = undefined;
  const parts = full.split("-").filter((p) => p.length > 0);
  const kinds = parts.map(() => new Set<string>());
  parts.forEach((part, i) => {
    if (/^(v|iter)?\d+([.]\d+)*$/i.test(part)) kinds[i].add("version");
    else if (/^(i?q\d(_\w)*|b?fp?(16|32))$/i.test(part)) {
      kinds[i].add("type");
      parts[i] = part.toUpperCase();
    } else if (
      i > 0 &&
      /^((([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?)|small|mini|medium|large|x?xl)$/i.test(part)
    ) {
      let p = part.replaceAll("_", ".");
      if (isDecimal(p.at(-1)!)) p = p.slice(0, -2) + "." + p.at(-1) + p.at(-2);
      if (p.length > 1 && isDecimal(p.at(-2)!) && "kmbt".includes(p.at(-1)!)) {
        p = p.slice(0, -1) + p.at(-1)!.toUpperCase();
      }
      if (totalParams !== 0) {
        const num = Number(p.slice(0, -1));
        const head = p.slice(0, -1).trim();
        if (
          head !== "" && Number.isFinite(num) && /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(head)
        ) {
          const label = num * 1000 ** " KMBT".indexOf(p.at(-1)!);
          if (
            (totalParams < 0 && label < Math.floor(Math.abs(totalParams) / 8)) ||
            (totalParams > 0 && Math.abs(label - totalParams) > Math.floor(7 * totalParams / 8))
          ) {
            kinds[i].add("finetune");
            p = p.slice(0, -1) + p.at(-1)!.toLowerCase();
          }
        }
      }
      if (kinds[i].size === 0) kinds[i].add("size_label");
      parts[i] = p;
    } else if (i > 0 && /^(chat|instruct|vision|lora)$/i.test(part)) {
      kinds[i].add(totalParams < 0 && part.toLowerCase() === "lora" ? "type" : "finetune");
    }
  });
  if (parts.some((p, i) => kinds[i].has("size_label") && /\p{Nd}/u.test(p))) {
    parts.forEach((p, i) => {
      if (kinds[i].has("size_label") && isAlpha(p)) kinds[i].delete("size_label");
    });
  }
  let atStart = true;
  parts.forEach((p, i) => {
    const t = kinds[i];
    if (atStart && ((t.size === 0 && isAlpha(p[0])) || t.has("version"))) t.add("basename");
    else {
      atStart = false;
      if (t.size === 0) t.add("finetune");
    }
  });
  for (let i = parts.length - 1; i >= 0; i--) {
    if (kinds[i].has("basename") && kinds[i].size > 1) kinds[i].delete("basename");
    else break;
  }
  const join = (kind: string, unique = false) => {
    let ps = parts.filter((_, i) =>
      kinds[i].has(kind) && (kind !== "version" || !kinds[i].has("basename"))
    );
    if (unique) ps = [...new Set(ps)];
    return ps.length > 0 ? ps.join("-") : undefined;
  };
  let base = join("basename");
  const sizeLabel = join("size_label", true),
    finetune = join("finetune"),
    version = join("version");
  if (sizeLabel === undefined && finetune === undefined && version === undefined) base = undefined;
  return { name: full, organization: org, basename: base, finetune, version, sizeLabel };
}

/** gguf-py's `model_weight_count_rounded_notation` (min_digits 2). */
export function sizeLabel(count: number): string {
  const [scaled, suffix] = count > 1e12
    ? [count * 1e-12, "T"]
    : count > 1e9
    ? [count * 1e-9, "B"]
    : count > 1e6
    ? [count * 1e-6, "M"]
    : [count * 1e-3, "K"];
  const rounded = String(Math.round(scaled)).replace(/^0+/, "");
  const fix = Math.max(2 - rounded.length, 0);
  return scaled.toFixed(fix) + suffix;
}

/**
 * The `general.*` naming keys (after `general.type`), in gguf-py's order:
 * name, version, organization, finetune, basename, size_label.
 */
export function namingMetadata(
  dir: string,
  hfConfig: Record<string, unknown>,
  totalParams: number,
): Metadata {
  const m: ModelIdParts = {};
  const apply = (p: ModelIdParts) => {
    if (m.name === undefined && p.name !== undefined) m.name = idToTitle(p.name);
    if (m.organization === undefined && p.organization !== undefined) {
      m.organization = idToTitle(p.organization);
    }
    m.basename ??= p.basename;
    m.finetune ??= p.finetune;
    m.version ??= p.version;
    m.sizeLabel ??= p.sizeLabel;
  };
  const nameOrPath = hfConfig._name_or_path;
  if (typeof nameOrPath === "string" && nameOrPath.split("/").length - 1 <= 1) {
    apply(modelIdParts(nameOrPath, totalParams));
  }
  apply(modelIdParts(basename(dir.replace(/\/+$/, "")), totalParams));
  m.name ??= basename(dir);
  if (m.sizeLabel === undefined && totalParams > 0) m.sizeLabel = sizeLabel(totalParams);
  const out: Metadata = [["general.name", meta.string(m.name)]];
  if (m.version !== undefined) out.push(["general.version", meta.string(m.version)]);
  if (m.organization !== undefined) {
    out.push(["general.organization", meta.string(m.organization)]);
  }
  if (m.finetune !== undefined) out.push(["general.finetune", meta.string(m.finetune)]);
  if (m.basename !== undefined) out.push(["general.basename", meta.string(m.basename)]);
  if (m.sizeLabel !== undefined) out.push(["general.size_label", meta.string(m.sizeLabel)]);
  return out;
}
