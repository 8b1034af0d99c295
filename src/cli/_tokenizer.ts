/** Opens a model file's tokenizer for the CLI commands. @module */
import { openGguf } from "../gguf/file.ts";
import { Tokenizer } from "../tokenizer/mod.ts";

/**
 * Maps `path` (read-only; a multi-GB model is not read), builds its tokenizer,
 * which copies what it needs, and unmaps it.
 */
export function openTokenizer(path: string): Tokenizer {
  using file = openGguf(path);
  try {
    return Tokenizer.fromGguf(file.gguf);
  } catch (error) {
    throw new Error(`"${path}": ${error instanceof Error ? error.message : String(error)}`);
  }
}
