/**
 * Server throughput: aggregate generated tokens per second with 1 and with 4
 * concurrent greedy streams, `dotllm serve --parallel 4` against
 * `llama-server -np 4` on the same file, threads, context and requests,
 * measured side by side (rounds alternate between the servers). Prints a
 * markdown table; the targets are 4 streams ≥ 2.5 × one stream, and dotllm ≥
 * 1.0 × llama-server. Beside wall-clock tok/s it gives each server's CPU
 * time per generated token (all its threads, from `/proc/PID/stat`): on a
 * shared machine wall time mostly measures the neighbours, CPU time the
 * server (a thread spinning while it waits counts as CPU, for both).
 *
 *   deno task bench:server [--model FILE] [--llama-server PATH] [--old DIR] [-t 2] [-n 64] [-r 3]
 *
 * `--old DIR` adds the `dotllm` of another checkout (e.g. `git worktree add
 * --detach ../old COMMIT`) to the rounds, for an old-against-new run; the
 * table then also gives new / old per column.
 *
 * The default model is SmolLM2-135M-Instruct Q4_1 from the test data when
 * dotllm loads it, else the synthetic SmolLM-shaped Q8_0 model.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { makeModel } from "../src/gguf/make_model.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    model: { type: "string" },
    "llama-server": { type: "string" },
    threads: { type: "string", short: "t" },
    tokens: { type: "string", short: "n" },
    rounds: { type: "string", short: "r" },
    old: { type: "string" },
  },
});
const root = new URL("../", import.meta.url).pathname;
const testdata = process.env.DOTLLM_TESTDATA ?? join(root, "../shared/testdata");
const threads = values.threads ?? "2";
const tokens = Number(values.tokens ?? "64");
const rounds = Number(values.rounds ?? "3");
const llamaServer = values["llama-server"] ?? "/work/ref/build/bin/llama-server";
const PARALLEL = 4;
const CONTEXT = 4096; // in all: 1024 per slot on both servers

const PROMPTS = [
  "Once upon a time, in a small village by the sea, there lived",
  "The three most important things to know about the history of Rome are",
  "Here is a short recipe for a tomato soup:",
  "Write a letter to a friend describing your summer holiday. Dear Sam,",
];

interface Server {
  url: string;
  /** CPU milliseconds the server process used so far (every thread). */
  cpuMs(): number;
  stop(): Promise<void>;
}

/** utime + stime of a process, in ms (USER_HZ = 100 on Linux). */
function processCpuMs(pid: number): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function waitHealthy(url: string, child: Deno.ChildProcess): Promise<void> {
  let exited = false;
  child.status.then(() => (exited = true));
  for (let i = 0; i < 600; i++) {
    if (exited) throw new Error(`the server at ${url} exited`);
    try {
      const res = await fetch(url + "/health");
      await res.body?.cancel();
      if (res.status === 200) return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not become healthy`);
}

async function start(command: string, args: string[], port: number): Promise<Server> {
  const child = new Deno.Command(command, { args, stdout: "null", stderr: "null", stdin: "null" })
    .spawn();
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(url, child);
  return {
    url,
    cpuMs: () => processCpuMs(child.pid),
    async stop() {
      child.kill("SIGTERM");
      await child.status;
    },
  };
}

function dotllm(model: string, port: number, dir = root): Promise<Server> {
  return start(join(dir, "dotllm"), [
    "serve",
    model,
    "--port",
    String(port),
    "--parallel",
    String(PARALLEL),
    "-c",
    String(CONTEXT),
    "-t",
    threads,
  ], port);
}

function llama(model: string, port: number): Promise<Server> {
  return start(llamaServer, [
    "-m",
    model,
    "--port",
    String(port),
    "-np",
    String(PARALLEL),
    "-c",
    String(CONTEXT),
    "-t",
    threads,
    "--no-webui",
  ], port);
}

/** One greedy completion; resolves to the tokens generated. */
async function complete(url: string, prompt: string): Promise<number> {
  const res = await fetch(url + "/v1/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    // ignore_eos (llama.cpp) keeps llama-server generating `tokens`; dotllm ignores unknown fields.
    body: JSON.stringify({
      prompt,
      max_tokens: tokens,
      temperature: 0,
      ignore_eos: true,
      cache_prompt: false,
    }),
  });
  const json = await res.json();
  if (res.status !== 200) throw new Error(`${url}: ${JSON.stringify(json)}`);
  return json.usage.completion_tokens;
}

interface Throughput {
  /** Aggregate generated tokens per wall-clock second. */
  tokPerS: number;
  /** Server CPU milliseconds per generated token. */
  cpuMsPerTok: number;
}

/** Aggregate generated tok/s with `streams` concurrent requests (distinct prompts). */
async function throughput(server: Server, streams: number): Promise<Throughput> {
  const t0 = performance.now(), c0 = server.cpuMs();
  const counts = await Promise.all(
    Array.from({ length: streams }, (_, i) => complete(server.url, PROMPTS[i % PROMPTS.length])),
  );
  const seconds = (performance.now() - t0) / 1000;
  const total = counts.reduce((a, b) => a + b, 0);
  return { tokPerS: total / seconds, cpuMsPerTok: (server.cpuMs() - c0) / total };
}

function pickModel(): string {
  if (values.model !== undefined) return values.model;
  const q41 = join(testdata, "models/SmolLM2-135M-Instruct.Q4_1.gguf");
  const probe = new Deno.Command(join(root, "dotllm"), {
    args: ["run", q41, "-p", "a", "-n", "1", "-q", "-c", "64"],
    stdout: "null",
    stderr: "null",
  }).outputSync();
  if (probe.success) return q41;
  console.error("bench: dotllm does not load the Q4_1 file yet; using the synthetic SmolLM Q8_0");
  return makeModel({
    shape: "smollm-135m",
    type: "q8_0",
    outDir: join(root, "models"),
    vocabDir: join(testdata, "vocab-converted"),
  }).path;
}

const model = pickModel();
const servers: Array<[string, (m: string, p: number) => Promise<Server>]> = [["dotllm", dotllm]];
const oldDir = values.old;
if (oldDir !== undefined) servers.push(["dotllm (old)", (m, p) => dotllm(m, p, oldDir)]);
// With --old, llama-server joins only when asked for by path.
const withLlama = oldDir === undefined || values["llama-server"] !== undefined;
if (withLlama && existsSync(llamaServer)) servers.push(["llama-server", llama]);
else if (withLlama) console.error(`bench: no llama-server at ${llamaServer}; dotllm alone`);

const results = new Map<string, { one: Throughput[]; four: Throughput[] }>();
for (const [name] of servers) results.set(name, { one: [], four: [] });
let port = 18_300 + Math.floor(Math.random() * 500);
for (let r = 0; r < rounds; r++) {
  for (const [name, launch] of servers) {
    const server = await launch(model, port++);
    try {
      await throughput(server, 1); // warm-up
      const res = results.get(name)!;
      res.one.push(await throughput(server, 1));
      res.four.push(await throughput(server, PARALLEL));
      const one = res.one.at(-1)!, four = res.four.at(-1)!;
      console.error(
        `round ${r + 1} ${name}: 1 stream ${one.tokPerS.toFixed(1)} tok/s ` +
          `(${one.cpuMsPerTok.toFixed(1)} CPU ms/tok), ${PARALLEL} streams ` +
          `${four.tokPerS.toFixed(1)} tok/s (${four.cpuMsPerTok.toFixed(1)} CPU ms/tok); ` +
          `load average ${Deno.loadavg()[0].toFixed(2)}`,
      );
    } finally {
      await server.stop();
    }
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const cpu = Deno.readTextFileSync("/proc/cpuinfo").match(/model name\s*:\s*(.*)/)?.[1] ?? "?";
console.log(
  `\nmodel ${model.split("/").pop()}, ${threads} threads, ${tokens} tokens per request, ` +
    `-c ${CONTEXT}, ${rounds} rounds (median), ${new Date().toISOString()}, ${cpu}, ` +
    `load average ${Deno.loadavg().map((l) => l.toFixed(2)).join(" ")}\n`,
);
console.log(
  "| server | 1 stream tok/s | 4 streams tok/s | 4 / 1 | 1 stream CPU ms/tok | " +
    "4 streams CPU ms/tok | CPU 1 / 4 |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|");
const tok = (xs: Throughput[]) => median(xs.map((x) => x.tokPerS));
const cpuPerTok = (xs: Throughput[]) => median(xs.map((x) => x.cpuMsPerTok));
for (const [name, r] of results) {
  const one = tok(r.one), four = tok(r.four), c1 = cpuPerTok(r.one), c4 = cpuPerTok(r.four);
  console.log(
    `| ${name} | ${one.toFixed(1)} | ${four.toFixed(1)} | ${(four / one).toFixed(2)} | ` +
      `${c1.toFixed(1)} | ${c4.toFixed(1)} | ${(c1 / c4).toFixed(2)} |`,
  );
}
if (results.has("dotllm (old)")) {
  const n = results.get("dotllm")!, o = results.get("dotllm (old)")!;
  console.log(
    `\nnew / old: 1 stream ${(tok(n.one) / tok(o.one)).toFixed(3)}, ` +
      `${PARALLEL} streams ${(tok(n.four) / tok(o.four)).toFixed(3)}`,
  );
}
if (results.has("llama-server")) {
  const d = tok(results.get("dotllm")!.four), l = tok(results.get("llama-server")!.four);
  console.log(`\ndotllm / llama-server at 4 streams: ${(d / l).toFixed(2)}`);
}
