/**
 * dotllm: a CPU LLM inference engine. The library API re-exports each concept.
 *
 * @module
 */
export * from "./src/native/mod.ts";
export * from "./src/kernels/mod.ts";
export * from "./src/tokenizer/mod.ts";
export { VERSION } from "./src/version.ts";
export * from "./src/model/mod.ts";
export * from "./src/sampler/mod.ts";
export * from "./src/generation/mod.ts";
