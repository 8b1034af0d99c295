/**
 * Text generation, written once: per-sequence state ({@linkcode Sequence}:
 * logit processors, sampler, stop strings, finish reasons, log-probabilities),
 * the step driver that runs many over one context ({@linkcode Driver}), with
 * speculative decoding as one of its modes (`speculative.ts`), and one
 * sequence start to end ({@linkcode generate}).
 *
 * @module
 */
export {
  BATCH_INVARIANT_TOKENS,
  Driver,
  type DriverOptions,
  type DriverStats,
  type GenerationTimings,
  Job,
  type StartOptions,
} from "./driver.ts";
export {
  type FinishReason,
  generate,
  type GenerateOptions,
  type GenerationResult,
  type GenerationTarget,
  type GenerationTokenizer,
  promptTokens,
} from "./generate.ts";
export { probeBatchInvariance, probeVerifyTokens } from "./invariance.ts";
export { LogitBias, type LogitProcessor } from "./processors.ts";
export {
  logSumExp,
  Sequence,
  type SequenceOptions,
  type SequenceTokenizer,
  type TokenAlternative,
  type TokenEvent,
  TOP_LOGPROBS_MAX,
  topIds,
} from "./sequence.ts";
export {
  type Drafter,
  draftLimit,
  type DraftLoadOptions,
  DraftModel,
  type DraftModelOptions,
  type DraftVocab,
  draftVocabMismatch,
  NgramSimple,
  type NgramSimpleOptions,
  openSpeculation,
  type Speculation,
  SPECULATION_TYPES,
  type SpeculationConfig,
  type SpeculationOptions,
  type SpeculationType,
  speculationType,
} from "./speculative.ts";
export { StopMatcher } from "./stop.ts";
