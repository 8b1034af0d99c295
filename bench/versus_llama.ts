/**
 * The issue-6/11 table: `dotllm bench` against llama-bench on the synthetic
 * models of the real shapes (made with `deno task make-model` when missing),
 * their Q4_0 and Q4_K_M quantizations of the Llama-3.2-1B shape, and the real
 * SmolLM2-135M-Instruct Q4_1 file of the test data; pp64 and tg32 at 1 and 2
 * threads, interleaved cell by cell, plus the memory-bandwidth bound of
 * Llama-3.2-1B decode at 1 thread (each type's file size ÷ the best 1-thread read
 * bandwidth of `bench:bandwidth` run just before and just after that model's rows:
 * a shared host's bandwidth moves by a third within minutes, so a bound measured
 * elsewhere in the run would compare the decode with another moment). Prints markdown:
 * each side's mean ± standard deviation of the repetitions (llama-bench's statistic)
 * and ratio of means, then each side's median and the ratio of medians; the bound
 * lines use the medians.
 *
 *   deno task bench:versus --llama-bench /path/to/llama-bench [-r 3]
 *     [--llama-quantize /path/to/llama-quantize] [--only q4]
 *
 * The 1B Q4_0/Q4_K_M files are made from the synthetic F16 1B file with
 * `dotllm quantize` when this build has that command, else with the
 * `--llama-quantize` binary given (for measurement only: the files stay in the
 * ignored models/). `--only` keeps the rows whose "shape type" contains it.
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
    "llama-quantize": { type: "string" },
    only: { type: "string", default: "" },
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

const testdata = process.env.DOTLLM_TESTDATA ?? `${root}../shared/testdata`;

/** One benchmarked file: where it is and how to make it when it is missing. */
interface Model {
  shape: string;
  type: string;
  path: string;
  make: () => void;
}

function synthetic(shape: string, type: string): Model {
  return {
    shape,
    type,
    path: `${root}models/${shape}-${type}.gguf`,
    make: () => run(["task", "make-model", "--shape", shape, "--type", type]),
  };
}

/** The 1B shape quantized to `type` (a llama-quantize type name) from its F16 file. */
function quantized(shape: string, type: string): Model {
  const path = `${root}models/${shape}-${type.toLowerCase()}.gguf`;
  return {
    shape,
    type,
    path,
    make: () => {
      const source = synthetic(shape, "f16");
      if (!existsSync(source.path)) source.make();
      if (run(["--help"]).includes("quantize")) {
        run(["quantize", source.path, path, type]);
        return;
      }
      const quantize = values["llama-quantize"];
      if (quantize === undefined) {
        throw new Error(
          `${path} is missing: this build has no \`dotllm quantize\`; pass --llama-quantize`,
        );
      }
      const out = new Deno.Command(quantize, {
        args: [source.path, path, type],
        stdout: "null",
        stderr: "inherit",
      }).outputSync();
      if (!out.success) throw new Error(`${quantize} ${source.path} ${path} ${type} failed`);
    },
  };
}

const models: Model[] = [
  synthetic("smollm-135m", "q8_0"),
  synthetic("smollm-135m", "f16"),
  synthetic("smollm-135m", "f32"),
  synthetic("llama-3.2-1b", "q8_0"),
  quantized("llama-3.2-1b", "Q4_0"),
  quantized("llama-3.2-1b", "Q4_K_M"),
  {
    shape: "SmolLM2-135M-Instruct (real)",
    type: "q4_1",
    path: `${testdata}/models/SmolLM2-135M-Instruct.Q4_1.gguf`,
    make: () => {
      throw new Error(`missing test data file ${testdata}/models/SmolLM2-135M-Instruct.Q4_1.gguf`);
    },
  },
].filter((m) => `${m.shape} ${m.type}`.toLowerCase().includes(values.only.toLowerCase()));

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
  tok_s_median: number;
  llama_cpp_tok_s_median: number;
  ratio_median: number;
}

const lines = [
  "| model | type | test | threads | dotllm tok/s (mean ± sd) | llama.cpp tok/s (mean ± sd) | " +
  "ratio of means | dotllm median | llama.cpp median | ratio of medians |",
  "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
];
/** 1-thread decode rows of the 1B shape, by type: compared with the bandwidth bound. */
const decode1b = new Map<string, { row: Row; path: string; gbps: number[] }>();
/** The best 1-thread read bandwidth of one `bench:bandwidth` run, GB/s. */
function readBandwidth(): number {
  const rows = JSON.parse(run(["task", "bench:bandwidth", "--json"])) as Array<
    { threads: number; best_gbps: number }
  >;
  return rows.find((b) => b.threads === 1)!.best_gbps;
}
for (const { shape, type, path, make } of models) {
  if (!existsSync(path)) make();
  const gbps = shape === "llama-3.2-1b" ? [readBandwidth()] : [];
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
  if (gbps.length > 0) gbps.push(readBandwidth());
  const rows = JSON.parse(json) as Row[];
  for (const r of rows) {
    lines.push(
      `| ${shape} | ${type.toUpperCase()} | ${r.test} | ${r.threads} | ` +
        `${r.tok_s_mean.toFixed(1)} ± ${r.tok_s_std.toFixed(1)} | ` +
        `${r.llama_cpp_tok_s_mean.toFixed(1)} ± ${r.llama_cpp_tok_s_std.toFixed(1)} | ` +
        `${r.ratio.toFixed(2)} | ${r.tok_s_median.toFixed(1)} | ` +
        `${r.llama_cpp_tok_s_median.toFixed(1)} | ${r.ratio_median.toFixed(2)} |`,
    );
    if (shape === "llama-3.2-1b" && r.test === "tg32" && r.threads === 1) {
      decode1b.set(type.toUpperCase(), { row: r, path, gbps });
    }
  }
}
console.log(lines.join("\n"));

for (const [type, { row, path, gbps: around }] of decode1b) {
  const bytes = statSync(path).size;
  const gbps = Math.max(...around);
  const bound = (gbps * 1e9) / bytes;
  console.log(
    `\nLlama-3.2-1B ${type} decode, 1 thread: ${
      row.tok_s_median.toFixed(1)
    } tok/s (median) reads ` +
      `${(bytes / 1e9).toFixed(2)} GB per token = ${
        (row.tok_s_median * bytes / 1e9).toFixed(1)
      } GB/s; ` +
      `measured read bandwidth ${gbps} GB/s (best of ${around.join(" before, ")} after its rows) ` +
      `bounds it at ${bound.toFixed(1)} tok/s ` +
      `(${(100 * row.tok_s_median / bound).toFixed(0)}% of the bound; llama.cpp's median ` +
      `${(100 * row.llama_cpp_tok_s_median / bound).toFixed(0)}%).`,
  );
}
