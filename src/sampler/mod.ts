/** Sampling the next token from logits: penalties, top-k, top-p, min-p, temperature. @module */
export {
  applyPenalties,
  argmax,
  Candidates,
  DEFAULT_SAMPLER_PARAMS,
  draw,
  minP,
  resolveSamplerParams,
  Sampler,
  SamplerWorkspace,
  softmax,
  temperature,
  topK,
  topP,
} from "./sampler.ts";
export type { SamplerParams } from "./sampler.ts";
export { checkSeed, randomSeed, Rng } from "./rng.ts";
