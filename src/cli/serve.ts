/**
 * `dotllm serve MODEL`: an OpenAI-compatible HTTP server (see `src/server/`).
 * Loads the model in a Worker, listens on 127.0.0.1:8080 by default, and on
 * SIGINT/SIGTERM answers new generation requests with 503 + Retry-After, lets
 * in-flight requests finish (bounded), stops listening and exits 0.
 *
 * @module
 */
import process from "node:process";
import { loadNative } from "../native/mod.ts";
import type { Backend } from "../server/backend.ts";
import { SLOT_COUNT_MAX } from "../model/mod.ts";
import { ApiHandler, DEFAULT_BODY_LIMIT_BYTES, DEFAULT_QUEUE_LIMIT } from "../server/handler.ts";
import { listen } from "../server/http.ts";
import { chatRenderer } from "../server/chat_prompt.ts";
import { loadBackend, type LoadOptions } from "../server/load.ts";
import type { SamplingDefaults } from "../server/protocol.ts";
import { WorkerBackend } from "../server/worker_backend.ts";
import { type Command, type OptionValues, UsageError } from "./command.ts";
import { writeStderr } from "./io.ts";

const usage = `Usage: dotllm serve MODEL [options]

Serves a GGUF model over HTTP with OpenAI's API: POST /v1/chat/completions,
POST /v1/completions (stream: true for server-sent events), GET /v1/models;
llama.cpp's POST /tokenize, /detokenize, /apply-template and GET /health;
GET /metrics (Prometheus); a chat page at /. Up to --parallel requests are
decoded together in one batch; more wait in a queue (--queue), then 503.

Options:
      --host HOST          address to bind (default 127.0.0.1: this machine only)
      --port PORT          port; 0 picks a free one (default 8080)
      --parallel N         sequences decoded together, each with its own slot (default 4;
                           --np N also works)
  -c, --ctx-size N         KV cache positions in all, split evenly over the slots, as
                           llama-server (default min(model's, 4096) per slot)
  -t, --threads N          threads; 0 = every CPU (default 0)
  -b, --batch-size N       most tokens per step: one per generating sequence, the rest
                           prefill chunks (default 256; >= --parallel)
      --no-repack          compute from the file's pages (default: copy matmul weights
                           at load, Q4_0/Q4_1/IQ4_NL/Q4_K into a faster layout where
                           the CPU has one, the rest as they are, into huge pages)
      --api-key KEY        require "Authorization: Bearer KEY" (not on /health and /)
      --cors ORIGIN        allow cross-origin requests from ORIGIN (* for any; default none)
      --queue N            requests that may wait for a slot before 503 (default ${DEFAULT_QUEUE_LIMIT})
      --body-limit BYTES   largest request body before 413 (default ${DEFAULT_BODY_LIMIT_BYTES})
      --shutdown-timeout S seconds in-flight requests get on SIGINT/SIGTERM (default 30)
  Sampling defaults (a request's own fields win):
      --temp T             temperature; 0 = greedy (default 0.8)
      --top-k K            (default 40)
      --top-p P            (default 0.95)
      --min-p P            (default 0.05)
      --repeat-penalty R   (default 1.0)
      --presence-penalty P (default 0)
      --frequency-penalty P (default 0)
  -s, --seed S             seed of requests that give none; -1 = random per request (default)
  -h, --help               this help
`;

function str(values: OptionValues, name: string): string | undefined {
  const v = values[name];
  if (Array.isArray(v)) return String(v[v.length - 1]);
  return typeof v === "string" ? v : undefined;
}

function number(
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
  const port = number(values, "port", { integer: true, min: 0, max: 65535 }) ?? 8080;
  const slots = number(values, "parallel", { integer: true, min: 1, max: SLOT_COUNT_MAX }) ?? 4;
  const ctx = number(values, "ctx-size", { integer: true, min: 0, max: 1 << 24 }) ?? 0;
  const perSlot = ctx === 0 ? 0 : Math.floor(ctx / slots);
  if (ctx !== 0 && perSlot < 16) {
    throw new UsageError(`--ctx-size ${ctx} leaves ${perSlot} positions per slot (need >= 16)`);
  }
  const threads =
    number(values, "threads", { integer: true, min: 0, max: loadNative().limits.threadCountMax }) ??
      0;
  const stepTokens = number(values, "batch-size", { integer: true, min: slots, max: 1 << 16 });
  const queueLimit = number(values, "queue", { integer: true, min: 0, max: 1 << 20 });
  const bodyLimitBytes = number(values, "body-limit", { integer: true, min: 1024, max: 1 << 30 });
  const shutdownS = number(values, "shutdown-timeout", { min: 0, max: 3600 }) ?? 30;
  const apiKey = str(values, "api-key");
  if (apiKey === "") throw new UsageError("--api-key needs a non-empty key");
  const cors = str(values, "cors");
  const seed = number(values, "seed", { integer: true, min: -1, max: 0xffffffff });
  const defaults: SamplingDefaults = {
    temperature: number(values, "temp", { min: 0, max: 100 }),
    topK: number(values, "top-k", { integer: true, min: 0 }),
    topP: number(values, "top-p", { min: 0, max: 1 }),
    minP: number(values, "min-p", { min: 0, max: 1 }),
    repeatPenalty: number(values, "repeat-penalty", { min: 0.01, max: 100 }),
    presencePenalty: number(values, "presence-penalty", { min: -2, max: 2 }),
    frequencyPenalty: number(values, "frequency-penalty", { min: -2, max: 2 }),
    seed: seed === undefined || seed < 0 ? undefined : seed,
  };
  for (const k of Object.keys(defaults) as (keyof SamplingDefaults)[]) {
    if (defaults[k] === undefined) delete defaults[k];
  }

  const backend = await startBackend(positionals[0], {
    slots,
    contextSize: perSlot,
    threads,
    stepTokens,
    repack: values["no-repack"] !== true,
  });
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
      `(${i.slotCount} slots × ${i.contextSize} positions, ${threads || "all"} threads)\n`,
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
  options: {
    host: { type: "string" },
    port: { type: "string" },
    parallel: { type: "string" },
    np: { type: "string" },
    "ctx-size": { type: "string", short: "c" },
    threads: { type: "string", short: "t" },
    "no-repack": { type: "boolean" },
    "batch-size": { type: "string", short: "b" },
    "api-key": { type: "string" },
    cors: { type: "string" },
    queue: { type: "string" },
    "body-limit": { type: "string" },
    "shutdown-timeout": { type: "string" },
    temp: { type: "string" },
    "top-k": { type: "string" },
    "top-p": { type: "string" },
    "min-p": { type: "string" },
    "repeat-penalty": { type: "string" },
    "presence-penalty": { type: "string" },
    "frequency-penalty": { type: "string" },
    seed: { type: "string", short: "s" },
  },
  run(values, positionals) {
    if (values.np !== undefined && values.parallel === undefined) values.parallel = values.np;
    return serve(values, positionals);
  },
};
