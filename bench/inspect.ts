/**
 * Benchmark (not a test): `inspect` on the synthetic Llama-3.2-1B Q8_0 file
 * (~1.3 GB; made with `make-model` when missing). Prints time and RSS growth
 * for the first (cold JIT) run in this process, the median of warm runs, and
 * the whole CLI as a subprocess. Targets: < 100 ms, < 100 MB.
 *
 * ```sh
 * ./dotllm task bench:inspect
 * ```
 *
 * @module
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { openGguf } from "../src/gguf/file.ts";
import { formatGgufSummary, summarizeGguf } from "../src/gguf/summary.ts";
import { main as makeModelMain } from "../src/gguf/make_model.ts";

const root = fileURLToPath(new URL("../", import.meta.url));
const path = join(root, "models", "llama-3.2-1b-q8_0.gguf");
if (!existsSync(path)) {
  console.log(`${path} is missing: making it (takes ~30 s)`);
  const code = makeModelMain(["--shape", "llama-3.2-1b", "--type", "q8_0"]);
  if (code !== 0) process.exit(code);
}

const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

/** One inspect: map, parse, summarise, render text and JSON, unmap. */
function inspectOnce(): number {
  using file = openGguf(path);
  const summary = summarizeGguf(file.gguf);
  return formatGgufSummary(summary, path).length + JSON.stringify(summary).length;
}

const rows: string[][] = [["run", "time ms", "RSS growth MB", "target"]];

const rss0 = process.memoryUsage().rss;
let t = performance.now();
inspectOnce();
const coldMs = performance.now() - t;
const coldRss = process.memoryUsage().rss - rss0;
rows.push(["first (cold JIT, in process)", coldMs.toFixed(1), mb(coldRss), "< 100 ms, < 100 MB"]);

const times: number[] = [];
for (let i = 0; i < 20; i++) {
  t = performance.now();
  inspectOnce();
  times.push(performance.now() - t);
}
times.sort((a, b) => a - b);
const warmRss = process.memoryUsage().rss - rss0;
rows.push(["warm median of 20", times[10].toFixed(1), mb(warmRss), ""]);

const cli = [Deno.execPath(), [
  "run",
  "--quiet",
  "--allow-ffi",
  "--allow-read",
  "--allow-env",
  "--allow-sys=homedir",
  join(root, "cli.ts"),
  "inspect",
  path,
]] as const;
const noop = [Deno.execPath(), ["eval", "0"]] as const;
async function wall(cmd: readonly [string, readonly string[]]): Promise<number> {
  const start = performance.now();
  const out = await new Deno.Command(cmd[0], { args: [...cmd[1]], stdout: "null" }).output();
  if (!out.success) throw new Error(`${cmd.join(" ")} failed`);
  return performance.now() - start;
}
const cliTimes: number[] = [];
const noopTimes: number[] = [];
for (let i = 0; i < 5; i++) {
  cliTimes.push(await wall(cli));
  noopTimes.push(await wall(noop));
}
cliTimes.sort((a, b) => a - b);
noopTimes.sort((a, b) => a - b);
rows.push(["`deno run cli.ts inspect` (median of 5)", cliTimes[2].toFixed(1), "", ""]);
rows.push(["`deno eval 0` (process start, median of 5)", noopTimes[2].toFixed(1), "", ""]);

const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
console.log(`inspect ${path} (${mb(Deno.statSync(path).size)} MB)`);
for (const [i, r] of rows.entries()) {
  console.log(r.map((c, j) => j === 0 ? c.padEnd(widths[j]) : c.padStart(widths[j])).join("  "));
  if (i === 0) console.log(widths.map((w) => "-".repeat(w)).join("  "));
}
