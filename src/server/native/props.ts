/**
 * llama-server's server-description endpoints: `GET /props` (the model, the
 * slots, the default generation settings, the chat template), `POST /props`
 * (only with `--props`, as llama-server: nothing in it can change here, so a
 * field is a 400 naming it), `GET /slots` (one object per slot, whether it is
 * processing; 501 with `--no-slots`), and the `/models` entry with
 * `--alias`/`--tags`.
 *
 * @module
 */
import type { ModelInfo } from "../backend.ts";
import { ApiError, type RequestDefaults } from "../protocol.ts";
import type { SchedulerStats } from "../scheduler.ts";

/** The llama-server options of the HTTP handler (`dotllm serve` sets them from its flags). */
export interface NativeOptions {
  /** The model file, for `/props`' `model_path`. */
  modelPath?: string;
  /** `--alias a,b`: the names `/models` reports (the id is the first in sorted order). */
  aliases?: string[];
  /** `--tags x,y`. */
  tags?: string[];
  /** `/metrics` served (`--metrics`); default true in the library, off in `dotllm serve`. */
  metrics?: boolean;
  /** `/slots` served; default true (`--no-slots`: 501). */
  slots?: boolean;
  /** `POST /props` allowed (`--props`). */
  propsPost?: boolean;
  /** The chat page at `/` (`--no-webui`: 404). */
  page?: boolean;
  /** `--slot-save-path`: where `/slots/ID?action=save|restore` keep slot files. */
  slotSavePath?: string;
}

/** 501 as llama-server answers an endpoint it was started without. */
export function notSupported(what: string, flag: string): ApiError {
  return new ApiError(
    501,
    `${what} is not supported by this server (start it with ${flag})`,
    null,
    "not_supported",
    "not_supported_error",
  );
}

/** The model id `/models` and responses report: the first alias in sorted order, else the file name. */
export function modelId(info: ModelInfo, native: NativeOptions): string {
  const aliases = native.aliases;
  return aliases === undefined || aliases.length === 0 ? info.id : [...aliases].sort()[0];
}

/** The `/models` (and `/v1/models`) body. */
export function modelsBody(info: ModelInfo, native: NativeOptions): unknown {
  const id = modelId(info, native);
  return {
    object: "list",
    data: [{
      id,
      object: "model",
      created: info.created,
      owned_by: "dotllm",
      aliases: [...new Set(native.aliases ?? [id])].sort(),
      tags: [...new Set(native.tags ?? [])].sort(),
      meta: { n_ctx: info.contextSize, n_vocab: info.vocabSize, n_parallel: info.slotCount },
    }],
  };
}

/** The default generation settings as `/props` and `/slots` report them. */
function defaultParams(info: ModelInfo, defaults: RequestDefaults) {
  return {
    seed: defaults.seed ?? -1,
    temperature: defaults.temperature ?? 0.8,
    top_k: defaults.topK ?? 40,
    top_p: defaults.topP ?? 0.95,
    min_p: defaults.minP ?? 0.05,
    repeat_last_n: defaults.repeatLastN ?? 64,
    repeat_penalty: defaults.repeatPenalty ?? 1,
    presence_penalty: defaults.presencePenalty ?? 0,
    frequency_penalty: defaults.frequencyPenalty ?? 0,
    n_predict: defaults.maxTokens ?? -1,
    n_ctx: info.contextSize,
    samplers: ["penalties", "top_k", "top_p", "min_p", "temperature"],
  };
}

/** `GET /props`. */
export function propsBody(
  info: ModelInfo,
  native: NativeOptions,
  defaults: RequestDefaults,
  chatTemplate: string,
): unknown {
  return {
    default_generation_settings: {
      id: 0,
      n_ctx: info.contextSize,
      speculative: false,
      is_processing: false,
      params: defaultParams(info, defaults),
    },
    total_slots: info.slotCount,
    model_alias: modelId(info, native),
    model_path: native.modelPath ?? info.id,
    modalities: { vision: false, audio: false },
    endpoint_slots: native.slots ?? true,
    endpoint_props: native.propsPost ?? false,
    endpoint_metrics: native.metrics ?? true,
    chat_template: chatTemplate,
    bos_token: info.chat.bosToken,
    eos_token: info.chat.eosToken,
    build_info: "dotllm",
    is_sleeping: false,
  };
}

/** `POST /props`: 501 without `--props`; with it, no settable field exists here. */
export function postProps(native: NativeOptions, body: unknown): unknown {
  if (native.propsPost !== true) throw notSupported("POST /props", "--props");
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new ApiError(400, "the body must be a JSON object", null, "invalid_value");
  }
  for (const k of Object.keys(body)) {
    throw new ApiError(400, `${k}: cannot be changed on a running server`, k, "invalid_value");
  }
  return { success: true };
}

/** `GET /slots`: one object per slot. */
export function slotsBody(
  info: ModelInfo,
  native: NativeOptions,
  stats: SchedulerStats,
): unknown {
  if (native.slots === false) throw notSupported("the /slots endpoint", "--slots");
  const busy = new Set(stats.busySlots);
  return Array.from({ length: info.slotCount }, (_, id) => ({
    id,
    n_ctx: info.contextSize,
    speculative: false,
    is_processing: busy.has(id),
  }));
}
