/**
 * Models: the architecture table, config, weights, the forward pass, and
 * the engine objects ({@linkcode Model}, {@linkcode KvCache},
 * {@linkcode Batch}, {@linkcode Context}).
 *
 * @module
 */
export {
  type Architecture,
  architectureOf,
  ARCHITECTURES,
  type ArchitectureShape,
  describeArchitecture,
  type FfnActivation,
  type Presence,
  type RopeStyle,
  TENSOR_NAMES,
  type TensorKind,
  tensorName,
} from "./arch.ts";
export { Batch } from "./batch.ts";
export {
  CONFIG_LIMITS,
  type LlamaConfig,
  type ModelConfig,
  type PoolingType,
  readLlamaConfig,
  readModelConfig,
  SUPPORTED_ARCHITECTURES,
} from "./config.ts";
export {
  Context,
  type ContextOptions,
  DEFAULT_BATCH_SIZE,
  DEFAULT_CONTEXT_MAX,
  type ModelMemory,
  SLOT_COUNT_MAX,
} from "./context.ts";
export { ModelError } from "./errors.ts";
export type { CacheTypeId, ForwardOps } from "./ops.ts";
export { CACHE_TYPES, type CacheType, cacheType, isCacheType, KvCache } from "./kv_cache.ts";
export { Model, type ModelLoadOptions } from "./model.ts";
export {
  bindLlamaWeights,
  bindWeights,
  type LayerWeights,
  type LlamaWeights,
  type ModelWeights,
  type Weight,
} from "./weights.ts";
