/**
 * `dotllm serve MODEL`: an OpenAI-compatible HTTP server (see `src/server/`).
 * Loads the model in a Worker, listens on 127.0.0.1:8080 by default, and on
 * SIGINT/SIGTERM answers new generation requests with 503 + Retry-After, lets
 * in-flight requests finish (bounded), stops listening and exits 0.
 *
 * @module
 */
import process from "node:process";
import type { Backend } from "../server/backend.ts";
import { SLOT_COUNT_MAX } from "../model/mod.ts";
import { ApiHandler, DEFAULT_BODY_LIMIT_BYTES, DEFAULT_QUEUE_LIMIT } from "../server/handler.ts";
import { listen } from "../server/http.ts";
import { chatRenderer } from "../server/chat_prompt.ts";
import { loadBackend, type LoadOptions } from "../server/load.ts";
import type { RequestDefaults } from "../server/protocol.ts";
import { WorkerBackend } from "../server/worker_backend.ts";
import { type Command, type OptionValues, UsageError } from "./command.ts";
import { writeStderr } from "./io.ts";
import {
  aliasesOf,
  CHAT_TEMPLATE_GROUP,
  chatTemplateSource,
  CONTEXT_GROUP,
  helpLines,
  MODEL_ARG_HELP,
  MODEL_GROUP,
  modelPath,
  optionsOf,
  parseChatTemplateOptions,
  parseContextOptions,
  parseModelOptions,
  parseSamplingOptions,
  SAMPLING_GROUP,
  str,
  withFlagNamesAsync,
} from "./options.ts";

/**
 * \`-n\`: the default AND the cap of a request's \`max_tokens\`. llama-server's
 * default is -1 (no limit), under which a request without \`max_tokens\` (the
 * chat page sends none) holds its slot until the context is full: a small
 * model that loops holds it for thousands of steps. 2048 tokens is longer
 * than any ordinary reply (several pages of text, a long code file) and ends
 * a runaway one in seconds to a minute; \`-n -1\` restores llama-server's "no
 * limit" (then only the slot's context ends a reply).
 */
export const SERVE_N_PREDICT_DEFAULT = 2048;

const SERVE_SAMPLING_HELP = {
  "n-predict": [
    "default and cap of a request's max_tokens; -1 = none (the slot's",
    `context) (default ${SERVE_N_PREDICT_DEFAULT})`,
  ],
  seed: ["seed of requests that give none; -1 = random per request (default)"],
};

const SERVE_TEMPLATE_HELP = {
  "chat-template": [
    "the template of /v1/chat/completions: a Jinja FILE, or chatml,",
    "llama3, gemma, phi3, mistral (default: the model's own; ChatML,",
    "with a warning, for a model without one)",
  ],
  "system-prompt": ["a system message put first in chat requests that have none"],
};

const usage = `Usage: dotllm serve MODEL [options]

Serves a GGUF model over HTTP with OpenAI's API: POST /v1/chat/completions,
POST /v1/completions (stream: true for server-sent events), GET /v1/models,
POST /v1/embeddings; llama.cpp's POST /embedding, /tokenize, /detokenize,
/apply-template and GET /health;
GET /metrics (Prometheus); a chat page at /. Up to --parallel requests are
decoded together in one batch; more wait in a queue (--queue), then 503.
Request fields dotllm does not implement (tools, response_format other than
text, grammar, ...) are a 400 naming the field.
${MODEL_ARG_HELP}

Options:
      --host HOST          address to bind (default 127.0.0.1: this machine only)
      --port PORT          port; 0 picks a free one (default 8080)
      --parallel N         sequences decoded together, each with its own slot (default 4;
                           --np N also works)
  -c, --ctx-size N         KV cache positions in all, split evenly over the slots, as
                           llama-server (default min(model's, 4096) per slot)
  -b, --batch-size N       most tokens per step: one per generating sequence, the rest
                           prefill chunks (default 256; >= --parallel)
${helpLines(CONTEXT_GROUP.help.filter((h) => h.name.startsWith("cache-type")))}\
${helpLines(MODEL_GROUP.help)}${helpLines(CHAT_TEMPLATE_GROUP.help, SERVE_TEMPLATE_HELP)}\
      --api-key KEY        require "Authorization: Bearer KEY" (not on /health and /)
      --cors ORIGIN        allow cross-origin requests from ORIGIN (* for any; default none)
      --queue N            requests that may wait for a slot before 503 (default ${DEFAULT_QUEUE_LIMIT})
      --body-limit BYTES   largest request body before 413 (default ${DEFAULT_BODY_LIMIT_BYTES})
      --shutdown-timeout S seconds in-flight requests get on SIGINT/SIGTERM (default 30)
      --pooling P          embeddings' pooling: mean, cls, last, none (/embedding only);
                           default the model's, mean for a decoder that declares none
  Defaults for requests that leave the field out (a request's own fields win):
${helpLines(SAMPLING_GROUP.help, SERVE_SAMPLING_HELP)}\
  -h, --help               this help
`;

/** A server option (not a model, context or sampling one): parsed and bounded here. */
function serverNumber(
  values: OptionValues,
  flag: string,
  { integer = false, min = -Infinity, max = Infinity } = {},
): number | undefined {
  const text = str(values, flag);
  if (text === undefined) return undefined;
  const value = text.trim() === "" ? NaN : Number(text);
  const what = integer ? "an integer" : "a number";
  if (!Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    throw new UsageError(`--${flag} must be ${what}, got "${text}"`);
  }
  if (value < min || value > max) {
    throw new UsageError(`--${flag} must be ${what} in [${min}, ${max}], got ${text}`);
  }
  return value;
}

/** Loads the model in a Worker; in-process when this runtime cannot start one. */
async function startBackend(path: string, options: LoadOptions): Promise<Backend> {
  try {
    return await WorkerBackend.start(path, options);
  } catch (error) {
    // A model error fails again, with the loader's message; a runtime without
    // workers (e.g. some single-executable builds) runs the model in-process.
    const backend = await loadBackend(path, options, chatRenderer);
    writeStderr(
      `dotllm: warning: no model worker (${(error as Error).message}); ` +
        "the model runs on the HTTP thread\n",
    );
    return backend;
  }
}

async function serve(values: OptionValues, positionals: string[]): Promise<number> {
  if (positionals.length === 0) throw new UsageError("missing MODEL (a GGUF file)");
  if (positionals.length > 1) throw new UsageError(`unexpected argument "${positionals[1]}"`);
  const host = str(values, "host") ?? "127.0.0.1";
  const port = serverNumber(values, "port", { integer: true, min: 0, max: 65535 }) ?? 8080;
  const slots = serverNumber(values, "parallel", { integer: true, min: 1, max: SLOT_COUNT_MAX }) ??
    4;
  const model = parseModelOptions(values);
  const context = parseContextOptions(values);
  const ctx = context.contextSize ?? 0;
  const perSlot = ctx <= 0 ? ctx : Math.floor(ctx / slots);
  if (ctx > 0 && perSlot < 16) {
    throw new UsageError(`--ctx-size ${ctx} leaves ${perSlot} positions per slot (need >= 16)`);
  }
  const stepTokens = context.batchSize;
  if (stepTokens !== undefined && stepTokens < slots) {
    throw new UsageError(`--batch-size must be >= --parallel (${slots}), got ${stepTokens}`);
  }
  const queueLimit = serverNumber(values, "queue", { integer: true, min: 0, max: 1 << 20 });
  const bodyLimitBytes = serverNumber(values, "body-limit", {
    integer: true,
    min: 1024,
    max: 1 << 30,
  });
  const shutdownS = serverNumber(values, "shutdown-timeout", { min: 0, max: 3600 }) ?? 30;
  const apiKey = str(values, "api-key");
  if (apiKey === "") throw new UsageError("--api-key needs a non-empty key");
  const cors = str(values, "cors");
  const sampling = parseSamplingOptions(values);
  const template = parseChatTemplateOptions(values);
  const nPredict = sampling.nPredict ?? SERVE_N_PREDICT_DEFAULT;
  const defaults: RequestDefaults = {
    ...sampling.given,
    seed: sampling.seed,
    maxTokens: nPredict < 0 ? undefined : nPredict,
    system: template.system,
  };
  for (const k of Object.keys(defaults) as (keyof RequestDefaults)[]) {
    if (defaults[k] === undefined) delete defaults[k];
  }
  const chatTemplate = template.template === undefined
    ? undefined
    : chatTemplateSource(template.template);

  const pooling = str(values, "pooling");
  if (pooling !== undefined && !["mean", "cls", "last", "none"].includes(pooling)) {
    throw new UsageError(`--pooling must be one of mean, cls, last, none, got "${pooling}"`);
  }
  const path = await modelPath(positionals[0]);
  const backend = await withFlagNamesAsync(() =>
    startBackend(path, {
      slots,
      contextSize: perSlot,
      threads: model.threads,
      stepTokens,
      repack: model.repack,
      cacheTypeK: context.cacheTypeK,
      cacheTypeV: context.cacheTypeV,
      chatTemplate,
      pooling,
    })
  );
  if (defaults.repeatLastN === -1) defaults.repeatLastN = backend.info.contextSize;
  if (chatTemplate === undefined && backend.info.chat.source === undefined) {
    writeStderr(
      `dotllm: warning: ${backend.info.id} has no chat template: /v1/chat/completions ` +
        "renders ChatML (--chat-template NAME|FILE sets one)\n",
    );
  }
  const api = new ApiHandler({ backend, apiKey, cors, queueLimit, bodyLimitBytes, defaults });
  let server;
  try {
    server = await listen(api.fetch, { hostname: host, port });
  } catch (error) {
    await backend.close();
    throw new Error(`cannot listen on ${host}:${port}: ${(error as Error).message}`);
  }
  const i = backend.info;
  const shown = host.includes(":") ? `[${host}]` : host;
  writeStderr(
    `dotllm: serving ${i.id} on http://${shown}:${server.port} ` +
      `(${i.slotCount} slots × ${i.contextSize} positions, ${model.threads || "all"} threads)\n`,
  );

  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = async (signal: string) => {
      if (stopping) {
        writeStderr(`dotllm: ${signal} again: exiting now\n`);
        process.exit(1);
      }
      stopping = true;
      writeStderr(
        `dotllm: ${signal}: finishing ${api.inFlight} request(s) (at most ${shutdownS} s)\n`,
      );
      let timer: ReturnType<typeof setTimeout> | undefined;
      let timedOut = false;
      const timeout = new Promise<void>((r) =>
        timer = setTimeout(() => {
          timedOut = true;
          r();
        }, shutdownS * 1000)
      );
      // The listener stays open while in-flight requests finish, so new ones get
      // 503 + Retry-After (a balancer retries them elsewhere) rather than a refused connection.
      await Promise.race([api.drain().then(() => server.stop()), timeout]);
      clearTimeout(timer);
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
      const cut = api.inFlight;
      await Promise.race([backend.close(), new Promise((r) => setTimeout(r, 2000))]);
      if (timedOut) {
        // Streams still open would keep the process alive: they are cut off.
        writeStderr(`dotllm: ${cut} request(s) cut off after ${shutdownS} s; stopped\n`);
        process.exit(0);
      }
      resolve();
    };
    const onInt = () => void stop("SIGINT");
    const onTerm = () => void stop("SIGTERM");
    process.on("SIGINT", onInt);
    process.on("SIGTERM", onTerm);
  });
  writeStderr("dotllm: stopped\n");
  return 0;
}

/** The `serve` command. */
export const serveCommand: Command = {
  name: "serve",
  summary: "serve a model over HTTP with OpenAI's API (and a chat page)",
  usage,
  aliases: aliasesOf([CHAT_TEMPLATE_GROUP, CONTEXT_GROUP]),
  options: optionsOf([MODEL_GROUP, CHAT_TEMPLATE_GROUP, SAMPLING_GROUP], {
    host: { type: "string" },
    port: { type: "string" },
    parallel: { type: "string" },
    np: { type: "string" },
    "ctx-size": CONTEXT_GROUP.options["ctx-size"],
    "batch-size": CONTEXT_GROUP.options["batch-size"],
    "cache-type": CONTEXT_GROUP.options["cache-type"],
    "cache-type-k": CONTEXT_GROUP.options["cache-type-k"],
    "cache-type-v": CONTEXT_GROUP.options["cache-type-v"],
    "api-key": { type: "string" },
    cors: { type: "string" },
    queue: { type: "string" },
    "body-limit": { type: "string" },
    "shutdown-timeout": { type: "string" },
    pooling: { type: "string" },
  }),
  run(values, positionals) {
    if (values.np !== undefined && values.parallel === undefined) values.parallel = values.np;
    return serve(values, positionals);
  },
};
