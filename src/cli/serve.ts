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
  checkLlamaServerFlags,
  LLAMA_SERVER_ALIASES,
  LLAMA_SERVER_HELP,
  LLAMA_SERVER_OPTIONS,
} from "./serve_flags.ts";
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
  parseSpeculationOptions,
  SAMPLING_GROUP,
  SPECULATION_GROUP,
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
GET /metrics (Prometheus, with --metrics); a chat page at /; llama-server's
native API (/completion, /infill, /props, /slots; docs/SERVER.md). Up to --parallel requests are
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
${helpLines(MODEL_GROUP.help)}${helpLines(SPECULATION_GROUP.help)}\
${helpLines(CHAT_TEMPLATE_GROUP.help, SERVE_TEMPLATE_HELP)}\
      --reasoning-format F how chat replies return reasoning: auto (default; apart, as
                           reasoning_content), deepseek, none (left in the content)
      --reasoning M        on, off or auto (default): the templates' enable_thinking
      --api-key KEY        require "Authorization: Bearer KEY" (not on /health and /)
      --cors ORIGIN        cross-origin requests: * (default: any origin, echoed, with
                           credentials), localhost (loopback origins), or one ORIGIN;
                           --cors-origins works too
      --queue N            requests that may wait for a slot before 503 (default ${DEFAULT_QUEUE_LIMIT})
      --body-limit BYTES   largest request body before 413 (default ${DEFAULT_BODY_LIMIT_BYTES})
      --shutdown-timeout S seconds in-flight requests get on SIGINT/SIGTERM (default 30)
      --pooling P          embeddings' pooling: mean, cls, last, none (/embedding only);
                           default the model's, mean for a decoder that declares none
  Defaults for requests that leave the field out (a request's own fields win):
${helpLines(SAMPLING_GROUP.help, SERVE_SAMPLING_HELP)}\
${LLAMA_SERVER_HELP}\
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

/** MODEL: the argument, or llama-server's `-m FILE` or `-hf REPO [--hf-file FILE]`. */
function modelArgument(values: OptionValues, positionals: string[]): string {
  const given = [...positionals];
  const m = str(values, "model");
  if (m !== undefined) given.push(m);
  const repo = str(values, "hf-repo");
  const file = str(values, "hf-file");
  if (file !== undefined && repo === undefined) throw new UsageError("--hf-file needs --hf-repo");
  if (repo !== undefined) given.push(file === undefined ? repo : `${repo}/${file}`);
  if (given.length === 0) throw new UsageError("missing MODEL (a GGUF file)");
  if (given.length > 1) throw new UsageError(`unexpected argument "${given[1]}"`);
  return given[0];
}

/**
 * `--chat-template VALUE`: a built-in's name or a file, else (llama-server:
 * the flag takes template text) VALUE itself as the Jinja source, when it
 * does not look like a path (no slash, no `.jinja`).
 */
function serveTemplateSource(value: string, fromFile: boolean): string {
  try {
    return chatTemplateSource(value);
  } catch (error) {
    const notFile = /^cannot read chat template file/.test((error as Error).message);
    if (fromFile || !notFile || /[\\/]|\.jinja$/.test(value)) throw error;
    return value;
  }
}

/** `--alias a,b` / `--tags x,y` as lists (llama-server: comma-separated). */
function list(values: OptionValues, flag: string): string[] | undefined {
  const v = str(values, flag);
  if (v === undefined) return undefined;
  const items = v.split(",").map((x) => x.trim()).filter((x) => x !== "");
  if (items.length === 0) throw new UsageError(`--${flag} needs at least one name`);
  return items;
}

async function serve(values: OptionValues, positionals: string[]): Promise<number> {
  const modelArg = modelArgument(values, positionals);
  checkLlamaServerFlags(values, (line) => writeStderr(line + "\n"));
  const ctf = str(values, "chat-template-file");
  if (ctf !== undefined) {
    if (values["chat-template"] !== undefined) {
      throw new UsageError("give --chat-template or --chat-template-file, not both");
    }
    values["chat-template"] = ctf;
  }
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
  // llama-server's default: any origin, echoed, with credentials
  const cors = str(values, "cors") ?? str(values, "cors-origins") ?? "*";
  const sampling = parseSamplingOptions(values);
  const template = parseChatTemplateOptions(values);
  const nPredict = sampling.nPredict ?? SERVE_N_PREDICT_DEFAULT;
  const defaults: RequestDefaults = {
    ...sampling.given,
    seed: sampling.seed,
    maxTokens: nPredict < 0 ? undefined : nPredict,
    system: template.system,
    ...reasoningDefaults(values),
  };
  for (const k of Object.keys(defaults) as (keyof RequestDefaults)[]) {
    if (defaults[k] === undefined) delete defaults[k];
  }
  const chatTemplate = template.template === undefined
    ? undefined
    : serveTemplateSource(template.template, ctf !== undefined);

  const pooling = str(values, "pooling");
  if (pooling !== undefined && !["mean", "cls", "last", "none"].includes(pooling)) {
    throw new UsageError(`--pooling must be one of mean, cls, last, none, got "${pooling}"`);
  }
  const speculation = parseSpeculationOptions(values);
  const path = await modelPath(modelArg);
  if (speculation?.draftModel !== undefined) {
    speculation.draftModel = await modelPath(speculation.draftModel);
  }
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
      speculation,
    })
  );
  if (defaults.repeatLastN === -1) defaults.repeatLastN = backend.info.contextSize;
  if (chatTemplate === undefined && backend.info.chat.source === undefined) {
    writeStderr(
      `dotllm: warning: ${backend.info.id} has no chat template: /v1/chat/completions ` +
        "renders ChatML (--chat-template NAME|FILE sets one)\n",
    );
  }
  const api = new ApiHandler({
    backend,
    apiKey,
    cors,
    corsCredentials: values["no-cors-credentials"] !== true,
    queueLimit,
    bodyLimitBytes,
    defaults,
    native: {
      modelPath: path,
      aliases: list(values, "alias"),
      tags: list(values, "tags"),
      metrics: values.metrics === true,
      slots: values["no-slots"] !== true,
      propsPost: values.props === true,
      page: values["no-webui"] !== true && values["no-ui"] !== true,
      slotSavePath: str(values, "slot-save-path"),
    },
  });
  if (perSlot > backend.info.contextSize) {
    writeStderr(
      `dotllm: warning: --ctx-size ${ctx} gives ${perSlot} positions per slot, past the ` +
        `model's training context: each slot has ${backend.info.contextSize}\n`,
    );
  }
  // llama-server: --host a,b listens on each address (the same port)
  const servers: Awaited<ReturnType<typeof listen>>[] = [];
  for (const h of host.split(",").map((x) => x.trim()).filter((x) => x !== "")) {
    try {
      servers.push(await listen(api.fetch, { hostname: h, port: servers[0]?.port ?? port }));
    } catch (error) {
      await Promise.all(servers.map((s) => s.stop()));
      await backend.close();
      throw new Error(`cannot listen on ${h}:${port}: ${(error as Error).message}`);
    }
  }
  if (servers.length === 0) throw new UsageError(`--host needs an address, got "${host}"`);
  const server = { stop: () => Promise.all(servers.map((s) => s.stop())) };
  const i = backend.info;
  const shown = servers.map((s) =>
    `http://${s.hostname.includes(":") ? `[${s.hostname}]` : s.hostname}:${s.port}`
  ).join(" and ");
  writeStderr(
    `dotllm: serving ${i.id} on ${shown} ` +
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
  aliases: {
    ...aliasesOf([CHAT_TEMPLATE_GROUP, SPECULATION_GROUP, CONTEXT_GROUP]),
    ...LLAMA_SERVER_ALIASES,
  },
  options: optionsOf([MODEL_GROUP, CHAT_TEMPLATE_GROUP, SAMPLING_GROUP, SPECULATION_GROUP], {
    ...LLAMA_SERVER_OPTIONS,
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

/**
 * llama-server's `--reasoning-format none|auto|deepseek|deepseek-legacy`
 * (how replies return reasoning unless a request says) and `--reasoning
 * on|off|auto` (`enable_thinking` unless a request's template kwargs say).
 */
function reasoningDefaults(values: OptionValues): Pick<
  RequestDefaults,
  "reasoningFormat" | "enableThinking"
> {
  const format = str(values, "reasoning-format");
  if (format !== undefined && !["none", "auto", "deepseek", "deepseek-legacy"].includes(format)) {
    throw new UsageError(
      `--reasoning-format must be one of none, auto, deepseek, deepseek-legacy, got "${format}"`,
    );
  }
  const on = str(values, "reasoning");
  if (on !== undefined && !["on", "off", "auto"].includes(on)) {
    throw new UsageError(`--reasoning must be one of on, off, auto, got "${on}"`);
  }
  return {
    reasoningFormat: format,
    enableThinking: on === "on" ? true : on === "off" ? false : undefined,
  };
}
