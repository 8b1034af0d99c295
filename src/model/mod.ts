/** Llama-family models: config, weights, forward pass. @module */
export {
  type CacheType,
  DEFAULT_BATCH_SIZE,
  DEFAULT_CONTEXT_MAX,
  LlamaModel,
  type ModelMemory,
  type ModelOptions,
} from "./model.ts";
export {
  CONFIG_LIMITS,
  type LlamaConfig,
  ModelError,
  readLlamaConfig,
  SUPPORTED_ARCHITECTURES,
} from "./config.ts";
export type { CacheTypeId, ModelKernels } from "./kernels.ts";
export { bindLlamaWeights, type LayerWeights, type LlamaWeights, type Weight } from "./weights.ts";
