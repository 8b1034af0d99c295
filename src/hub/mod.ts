/**
 * Models by name from the Hugging Face Hub, stored in its shared cache.
 *
 * @example
 * ```ts ignore
 * import { parseHubRef, pullModel } from "./mod.ts";
 * const model = await pullModel(parseHubRef("org/repo:Q4_K_M")!);
 * ```
 *
 * @module
 */
export { formatHubRef, type HubRef, parseHubRef } from "./ref.ts";
export {
  findCachedModel,
  type PulledFile,
  type PulledModel,
  pullModel,
  type PullOptions,
} from "./pull.ts";
export { resolveModel } from "./resolve.ts";
export { HubError } from "./errors.ts";
export { hubCacheDir } from "./cache.ts";
export { findBestModel, pickModelFiles, splitInfo } from "./select.ts";
