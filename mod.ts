/**
 * dotllm: a CPU LLM inference engine. {@linkcode Llm} is the library API;
 * beside it, the model it loads, GGUF reading, the tokenizer, the sampling
 * parameters, their errors and the native library's loader. The lower layers
 * (kernels, native symbols, sampler steps, the GGUF writer) are internal: they
 * change with the engine.
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
// The library API.
export {
  type ChatResult,
  type GeneratedPiece,
  Llm,
  type LlmChatOptions,
  type LlmCompleteOptions,
  type LlmGenerateOptions,
  type LlmOptions,
  type TokenizeOptions,
} from "./src/llm/mod.ts";
export type { FinishReason, GenerationResult, GenerationTimings } from "./src/generation/mod.ts";
// Embeddings (`llm.embed`): pooling and normalization as llama.cpp's.
export {
  cosine,
  type EmbeddingPooling,
  type EmbedOptions,
  normalize as normalizeEmbedding,
} from "./src/embedding/mod.ts";
export { DEFAULT_SAMPLER_PARAMS, resolveSamplerParams } from "./src/sampler/mod.ts";
export type { SamplerParams } from "./src/sampler/mod.ts";
export { VERSION } from "./src/version.ts";

// The model behind an `Llm` (`llm.model`, `llm.context`, `llm.config`) and its errors.
export {
  type CacheType,
  type ContextOptions,
  type LlamaConfig,
  ModelError,
  type ModelLoadOptions,
  type ModelMemory,
  type PoolingType,
  SUPPORTED_ARCHITECTURES,
} from "./src/model/mod.ts";

// Generation, written once: the per-sequence state, logit processors, the step driver.
export {
  Driver,
  type GenerationTarget,
  Job,
  LogitBias,
  type LogitProcessor,
  Sequence,
  type SequenceOptions,
  type TokenEvent,
} from "./src/generation/mod.ts";

// Structured output: GBNF grammars and JSON Schema, as a logit processor.
export {
  compileGrammar,
  type ConstraintSpec,
  GrammarConstraint,
  grammarConstraint,
  GrammarError,
  jsonSchemaToGrammar,
  parseGbnf,
  SchemaError,
} from "./src/grammar/mod.ts";

// Tool calls and reasoning: the formats of llama.cpp's templates, parsed replies.
export {
  ChatOutputStream,
  detectToolFormat,
  parseChatOutput,
  type ParsedMessage,
  type ReasoningFormat,
  type ToolChoice,
  type ToolDefinition,
  type ToolFormat,
} from "./src/tools/mod.ts";

// Chat: templates rendered as llama.cpp renders them, and multi-turn sessions.
export {
  type ApplyTemplateOptions,
  BUILTIN_TEMPLATE_NAMES,
  ChatInputError,
  type ChatMessage,
  ChatSession,
  type ChatSessionOptions,
  type ChatTarget,
  ChatTemplate,
  ChatTemplateError,
  type ChatTool,
  type RenderOptions,
  type ToolCall,
} from "./src/chat/mod.ts";

// Several sequences in one batch: the engine the server runs on.
export { Batch, Context, KvCache, Model } from "./src/model/mod.ts";

// GGUF files: reading (and the type table of their tensors).
export {
  GgmlType,
  ggmlTypeById,
  type GgmlTypeInfo,
  type Gguf,
  GgufArray,
  GgufError,
  GgufFile,
  type GgufTensorInfo,
  type GgufValue,
  openGguf,
  parseGguf,
} from "./src/gguf/mod.ts";

// The tokenizer (`llm.tokenizer`, or from any GGUF file with a vocabulary).
export {
  type DecodeOptions,
  type EncodeOptions,
  type StreamDecoder,
  type StreamOptions,
  Tokenizer,
  TokenizerError,
} from "./src/tokenizer/mod.ts";

// The native library: which build is loaded, and fetching it ahead of time for
// a package loaded over http(s).
export { loadNative, prepareLibrary } from "./src/native/mod.ts";

// `deno run -A jsr:@dotllm/cli ARGS` runs the CLI; importing this module does not.
if (import.meta.main) {
  const { main } = await import("./cli.ts");
  const process = (await import("node:process")).default;
  process.exitCode = await main(process.argv.slice(2));
}
