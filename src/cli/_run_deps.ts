/**
 * What `dotllm run` loads besides the model: the tokenizer and the kernels.
 *
 * @module
 */
import type { Gguf } from "../gguf/reader.ts";
import type { GenerationTokenizer } from "../generation/mod.ts";
import { Kernels } from "../kernels/mod.ts";
import type { ModelKernels } from "../model/mod.ts";
import type { Native } from "../native/native.ts";
import { Tokenizer } from "../tokenizer/mod.ts";

/** The model's tokenizer. */
export function loadRunTokenizer(gguf: Gguf): GenerationTokenizer {
  return Tokenizer.fromGguf(gguf);
}

/** The Zig kernels on `threads` threads (0 = every CPU). */
export function runKernels(native: Native, threads: number): ModelKernels {
  return new Kernels(native, threads);
}
