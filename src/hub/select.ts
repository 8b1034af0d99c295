/**
 * Which GGUF file of a repository a quant tag names, as llama.cpp's `-hf`
 * picks it (common/download.cpp `find_best_model`): the first model file
 * whose path matches `TAG[.-]` case-insensitively; without a tag Q4_K_M,
 * then Q8_0, then the first model file. Projector (`mmproj`), imatrix and
 * draft-model (`mtp-`, `eagle3-`, `dflash-`, `dspark-`) files are not models.
 * A split model is named by its first part and fetched whole.
 *
 * @example
 * ```ts
 * import { pickModelFiles } from "./select.ts";
 * const files = ["a-Q8_0.gguf", "a-Q4_K_M-00002-of-00002.gguf", "a-Q4_K_M-00001-of-00002.gguf"];
 * console.assert(pickModelFiles(files).length === 2);
 * ```
 *
 * @module
 */

/** What a GGUF file name says about its split and quant. */
export interface SplitInfo {
  /** The name without `.gguf` and without the `-0000i-of-0000n` suffix. */
  prefix: string;
  /** The upper-cased quant tag at the end of the prefix (`Q4_K_M`), or "". */
  tag: string;
  /** 1-based part number (1 for an unsplit file). */
  index: number;
  /** How many parts (1 for an unsplit file). */
  count: number;
}

/** Parses `NAME[-0000i-of-0000n].gguf`; `undefined` for a path not ending in `.gguf`. */
export function splitInfo(path: string): SplitInfo | undefined {
  if (!path.toLowerCase().endsWith(".gguf")) return undefined;
  let prefix = path.slice(0, -".gguf".length);
  let index = 1;
  let count = 1;
  const split = /^(.+)-([0-9]{5})-of-([0-9]{5})$/i.exec(prefix);
  if (split) {
    prefix = split[1];
    index = Number(split[2]);
    count = Number(split[3]);
  }
  const tag = /[-.]([A-Z0-9_]+)$/i.exec(prefix);
  return { prefix, tag: tag ? tag[1].toUpperCase() : "", index, count };
}

/** True for a GGUF that is a model (not a projector, imatrix or draft model). */
export function isModelFile(path: string): boolean {
  if (!path.toLowerCase().endsWith(".gguf")) return false;
  const name = path.slice(path.lastIndexOf("/") + 1);
  return !["mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"].some((word) =>
    name.includes(word)
  );
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function isFirstPart(path: string): boolean {
  const info = splitInfo(path);
  return info !== undefined && (info.count <= 1 || info.index === 1);
}

/** The file llama.cpp's `-hf REPO[:TAG]` would pick from `paths`, or `undefined`. */
export function findBestModel(paths: readonly string[], tag?: string): string | undefined {
  const tags = tag ? [tag] : ["Q4_K_M", "Q8_0"];
  for (const t of tags) {
    const pattern = new RegExp(escapeRegExp(t) + "[.-]", "i");
    const found = paths.find((p) => isModelFile(p) && pattern.test(p) && isFirstPart(p));
    if (found !== undefined) return found;
  }
  if (tag) return undefined;
  return paths.find((p) => isModelFile(p) && isFirstPart(p));
}

/** Every part of the split model `path` belongs to (just `[path]` when unsplit), in order. */
export function splitParts(paths: readonly string[], path: string): string[] {
  const info = splitInfo(path);
  if (info === undefined || info.count <= 1) return [path];
  const parts = paths.filter((p) => {
    const other = splitInfo(p);
    return other !== undefined && other.count === info.count && other.prefix === info.prefix;
  });
  return parts.sort((a, b) => splitInfo(a)!.index - splitInfo(b)!.index);
}

/** `pickModelFiles(paths, tag)`: the chosen model's files (all parts), or `[]`. */
export function pickModelFiles(paths: readonly string[], tag?: string): string[] {
  const best = findBestModel(paths, tag);
  return best === undefined ? [] : splitParts(paths, best);
}
