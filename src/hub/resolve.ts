/**
 * `resolveModel(arg)`: what every command that opens a model calls on its
 * MODEL argument. A path to an existing file is returned as it is; a Hub
 * reference (`ORG/REPO[:QUANT]`, `ORG/REPO/FILE.gguf`, `hf:…`, a resolve URL)
 * is pulled into the cache when missing and its local path returned.
 *
 * @example
 * ```ts ignore
 * import { resolveModel } from "./resolve.ts";
 * const path = await resolveModel("hf:ggml-org/models:Q8_0");
 * ```
 *
 * @module
 */
import * as fs from "node:fs";
import { writeStderr } from "../stdio.ts";
import { pullModel, type PullOptions } from "./pull.ts";
import { parseHubRef } from "./ref.ts";

/** The local path for `arg`, pulling it first when it is a Hub reference. */
export async function resolveModel(arg: string, options: PullOptions = {}): Promise<string> {
  if (fs.existsSync(arg)) return arg;
  const ref = parseHubRef(arg);
  if (ref === undefined) return arg; // a path: the command reports it missing
  const model = await pullModel(ref, {
    notice: (message) => writeStderr(`dotllm: ${message}\n`),
    ...options,
  });
  return model.model_path;
}
