/** Opens a model file's tokenizer for the CLI commands. @module */
import { readFileSync } from "node:fs";
import { parseGguf } from "../gguf/reader.ts";
import { loadNative, type MappedFile } from "../native/mod.ts";
import { Tokenizer } from "../tokenizer/mod.ts";

/**
 * Maps `path` (read-only; a multi-GB model is not read), builds its tokenizer,
 * which copies what it needs, and unmaps it. When the native library cannot be
 * loaded the file is read instead: tokenizing needs no kernels.
 */
export function openTokenizer(path: string): Tokenizer {
  let mapped: MappedFile | undefined;
  let bytes: Uint8Array;
  let native;
  try {
    native = loadNative();
  } catch {
    native = undefined;
  }
  if (native) {
    mapped = native.mapFile(path);
    bytes = mapped.bytes;
  } else {
    bytes = readFileSync(path);
  }
  try {
    return Tokenizer.fromGguf(parseGguf(bytes));
  } catch (error) {
    throw new Error(`"${path}": ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    mapped?.close();
  }
}
