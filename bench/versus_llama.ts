/**
 * The issue-6 table: `dotllm bench` against llama-bench on the synthetic
 * models of the real shapes (made with `deno task make-model` when missing),
 * pp64 and tg32 at 1 and 2 threads, interleaved cell by cell, plus the
 * memory-bandwidth bound of Llama-3.2-1B Q8_0 decode. Prints markdown.
 *
 *   deno task bench:versus --llama-bench /path/to/llama-bench [-r 3]
 *
 * @module
 */
import { existsSync, statSync } from "node:fs";
import process from "node:process";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    "llama-bench": { type: "string" },
    repetitions: { type: "string", short: "r" },
  },
});
const llamaBench = values["llama-bench"];
if (llamaBench === undefined) {
  console.error("usage: deno task bench:versus --llama-bench PATH [-r N]");
  process.exit(2);
}
const repetitions = values.repetitions ?? "3";
const root = new URL("../", import.meta.url).pathname;
const launcher = `${root}dotllm`;

const models = [
  ["smollm-135m", "q8_0"],
  ["smollm-135m", "f16"],
  ["smollm-135m", "f32"],
  ["llama-3.2-1b", "q8_0"],
] as const;

function run(args: string[]): string {
  const out = new Deno.Command(launcher, { args, stdout: "piped", stderr: "inherit" }).outputSync();
  if (!out.success) throw new Error(`${launcher} ${args.join(" ")} failed`);
  return new TextDecoder().decode(out.stdout);
}

interface Row {
  test: string;
  threads: number;
  tok_s_mean: number;
  tok_s_std: number;
  llama_cpp_tok_s_mean: number;
  llama_cpp_tok_s_std: number;
  ratio: number;
}

const lines = [
  "| model | type | test | threads | dotllm tok/s | llama.cpp tok/s | dotllm / llama.cpp |",
  "| --- | --- | --- | ---: | ---: | ---: | ---: |",
];
let decode1b: Row | undefined;
for (const [shape, type] of models) {
  const path = `${root}models/${shape}-${type}.gguf`;
  if (!existsSync(path)) run(["task", "make-model", "--shape", shape, "--type", type]);
  const json = run([
    "bench",
    path,
    "-p",
    "64",
    "-n",
    "32",
    "-t",
    "1,2",
    "-r",
    repetitions,
    "--json",
    "--llama-bench",
    llamaBench,
  ]);
  const rows = JSON.parse(json) as Row[];
  for (const r of rows) {
    lines.push(
      `| ${shape} | ${type.toUpperCase()} | ${r.test} | ${r.threads} | ` +
        `${r.tok_s_mean.toFixed(1)} ± ${r.tok_s_std.toFixed(1)} | ` +
        `${r.llama_cpp_tok_s_mean.toFixed(1)} ± ${r.llama_cpp_tok_s_std.toFixed(1)} | ` +
        `${r.ratio.toFixed(2)} |`,
    );
    if (shape === "llama-3.2-1b" && r.test === "tg32" && r.threads === 1) decode1b = r;
  }
}
console.log(lines.join("\n"));

const bandwidth = JSON.parse(run(["task", "bench:bandwidth", "--json"])) as Array<
  { threads: number; best_gbps: number }
>;
if (decode1b !== undefined) {
  const bytes = statSync(`${root}models/llama-3.2-1b-q8_0.gguf`).size;
  const gbps = bandwidth.find((b) => b.threads === 1)!.best_gbps;
  const bound = (gbps * 1e9) / bytes;
  console.log(
    `\nLlama-3.2-1B Q8_0 decode, 1 thread: ${decode1b.tok_s_mean.toFixed(1)} tok/s reads ` +
      `${(bytes / 1e9).toFixed(2)} GB per token = ${
        (decode1b.tok_s_mean * bytes / 1e9).toFixed(1)
      } GB/s; ` +
      `measured read bandwidth ${gbps} GB/s bounds it at ${bound.toFixed(1)} tok/s ` +
      `(${(100 * decode1b.tok_s_mean / bound).toFixed(0)}% of the bound; llama.cpp ` +
      `${(100 * decode1b.llama_cpp_tok_s_mean / bound).toFixed(0)}%).`,
  );
}
