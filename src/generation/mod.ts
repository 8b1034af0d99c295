/** Text generation: per-sequence state, the decode loop, stop strings, streaming. @module */
export {
  type FinishReason,
  generate,
  type GenerateOptions,
  type GenerationResult,
  type GenerationTarget,
  type GenerationTimings,
  type GenerationTokenizer,
  promptTokens,
} from "./generate.ts";
export {
  logSoftmaxAt,
  Sequence,
  type SequenceOptions,
  type SequenceTokenizer,
  type TokenEvent,
} from "./sequence.ts";
export { StopMatcher } from "./stop.ts";
