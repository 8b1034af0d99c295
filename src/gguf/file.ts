/**
 * Opening a GGUF file from disk: a read-only mapping (zero copy) parsed in
 * place. Errors name the file: `<path>: <problem>`.
 *
 * @example
 * ```ts
 * import { openGguf } from "./file.ts";
 * using file = openGguf("model.gguf");
 * console.log(file.gguf.tensors.length);
 * ```
 *
 * @module
 */
import { loadNative, type MappedFile } from "../native/mod.ts";
import { type Gguf, GgufError, parseGguf } from "./reader.ts";

/** A parsed GGUF file over its mapping; close it when done with every view of its bytes. */
export class GgufFile {
  /** The path as given. */
  readonly path: string;
  /** The parsed file (its `bytes` view the mapping). */
  readonly gguf: Gguf;
  #mapped: MappedFile;

  constructor(path: string, gguf: Gguf, mapped: MappedFile) {
    this.path = path;
    this.gguf = gguf;
    this.#mapped = mapped;
  }

  /** Unmaps the file: every view of `gguf.bytes` becomes invalid. */
  close(): void {
    this.#mapped.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * Maps `path` read-only and parses it. Throws {@linkcode GgufError} with the
 * message `<path>: <problem>` for a file that cannot be opened or is malformed.
 */
export function openGguf(path: string): GgufFile {
  const native = loadNative();
  let mapped: MappedFile;
  try {
    mapped = native.mapFile(path);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    // mapFile says `cannot open "<path>": <reason>`; we name the file once.
    const reason = message.replace(/^cannot open ".*": /s, "");
    throw new GgufError(`${path}: cannot open: ${reason}`);
  }
  try {
    return new GgufFile(path, parseGguf(mapped.bytes), mapped);
  } catch (error) {
    mapped.close();
    if (error instanceof GgufError) throw new GgufError(`${path}: ${error.message}`);
    throw error;
  }
}
