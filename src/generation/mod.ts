/** Text generation: the decode loop, stop strings, streaming. @module */
export {
  type FinishReason,
  generate,
  type GenerateOptions,
  type GenerationResult,
  type GenerationTimings,
  type GenerationTokenizer,
  promptTokens,
} from "./generate.ts";
export { StopMatcher } from "./stop.ts";
