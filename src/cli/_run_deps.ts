/**
 * What `dotllm run` loads besides the model: the tokenizer and the kernels.
 *
 * @module
 */
import type { Gguf } from "../gguf/reader.ts";
import type { GenerationTokenizer } from "../generation/mod.ts";
import type { ModelKernels } from "../model/mod.ts";
import { ReferenceKernels } from "../model/reference_kernels.ts";
import type { Native } from "../native/native.ts";
import { Tokenizer } from "../tokenizer/mod.ts";

/** The model's tokenizer. */
export function loadRunTokenizer(gguf: Gguf): GenerationTokenizer {
  return Tokenizer.fromGguf(gguf);
}

/**
 * The kernels, on `threads` threads (0 = every CPU). For now the scalar
 * TypeScript reference (one thread); the Zig kernels replace it when they land.
 */
export function runKernels(native: Native, _threads: number): ModelKernels {
  return new ReferenceKernels(native);
}
