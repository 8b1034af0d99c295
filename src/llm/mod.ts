/** The library API: {@linkcode Llm} loads a model and generates. @module */
export {
  type ChatResult,
  type GeneratedPiece,
  Llm,
  type LlmChatOptions,
  type LlmCompleteOptions,
  type LlmGenerateOptions,
  type LlmOptions,
  type TokenizeOptions,
} from "./llm.ts";
