/**
 * dotllm: a CPU LLM inference engine. {@linkcode Llm} is the library API; the
 * lower layers (GGUF reader, tokenizer, model, sampler, kernels, native
 * bridge) are re-exported for tools that need them.
 *
 * @example Load a GGUF model, tokenize, generate, free
 * ```ts
 * import { Llm } from "./mod.ts";
 *
 * const llm = await Llm.load("../shared/testdata/models/stories260K.gguf");
 * const ids = llm.tokenize("Once upon a time"); // [1, ...]: BOS first
 * if (llm.detokenize(ids.slice(1)) !== "Once upon a time") throw new Error("round trip");
 *
 * const controller = new AbortController();
 * let text = "";
 * const options = { temperature: 0, maxTokens: 16, signal: controller.signal };
 * for await (const { text: piece } of llm.generate(ids, options)) {
 *   text += piece;
 * }
 * llm.close(); // frees the buffers, the KV cache, the mapping and the threads
 * if (!text.startsWith(", there was a little girl named Lily")) throw new Error(text);
 * ```
 *
 * @module
 */
export * from "./src/llm/mod.ts";
export * from "./src/native/mod.ts";
export * from "./src/gguf/mod.ts";
export * from "./src/tokenizer/mod.ts";
export * from "./src/kernels/mod.ts";
export * from "./src/tokenizer/mod.ts";
export { VERSION } from "./src/version.ts";
export * from "./src/model/mod.ts";
export * from "./src/sampler/mod.ts";
export * from "./src/generation/mod.ts";
export * from "./src/chat/mod.ts";

// `deno run -A jsr:@dotllm/cli ARGS` runs the CLI; importing this module does not.
if (import.meta.main) {
  const { main } = await import("./cli.ts");
  const process = (await import("node:process")).default;
  process.exitCode = await main(process.argv.slice(2));
}
