/** `dotllm bench`: llama-bench-style throughput, optionally beside llama.cpp. @module */
import { availableParallelism } from "node:os";
import {
  type BenchCase,
  benchLlamaCpp,
  benchModel,
  type BenchRow,
  benchRow,
  benchTable,
} from "./_bench.ts";
import { Context, Model } from "../model/mod.ts";
import { aliasesOf, CONTEXT_GROUP, modelPath, parseContextOptions } from "./options.ts";
import { type Command, type OptionValues, UsageError } from "./command.ts";
import { writeStderr, writeStdout } from "./io.ts";

const usage = `Usage: dotllm bench MODEL [options]

Prompt processing (ppN: one batch of N tokens) and text generation (tgN: N
single-token steps) in tokens per second, mean ± stddev over the repetitions,
one row per (test, depth, threads). Lists are comma-separated, as in llama-bench.

Options:
  -p, --n-prompt LIST      prompt sizes (default 512; 0 for none)
  -n, --n-gen LIST         generation lengths (default 128; 0 for none)
  -d, --n-depth LIST       tokens already in the cache before each test (default
                           0): pp and tg rows at each depth, named "tg128 @ d4096"
                           as llama-bench names them; the depth is run once per
                           row, untimed
  -t, --threads LIST       thread counts (default: every CPU)
  -r, --repetitions N      timed runs per test after one warm-up (default 5)
  -ctk, --cache-type-k T   KV cache type of K (default f16; see dotllm run --help)
  -ctv, --cache-type-v T   KV cache type of V (default f16)
      --cache-type T       KV cache type of both K and V (-ctk/-ctv override it)
      --no-repack          compute from the file's pages instead of copying matmul
                           weights at load (into a faster layout for Q4_0/Q4_1/
                           IQ4_NL/Q4_K where the CPU has one, the rest as they are,
                           into huge pages); llama-bench runs without repacking too
      --llama-bench PATH   also run this llama-bench on the same file and
                           settings, interleaved, with a ratio column
      --json               print one JSON array of
                           {test, threads, n_prompt, n_gen, tok_s_mean, tok_s_std,
                           tok_s_median, n_depth} (with --llama-bench also its
                           mean, sd, the ratio of means, its median and the ratio
                           of medians, before n_depth)
`;

function integerList(name: string, value: unknown, min: number): number[] {
  const text = String(value);
  const items = text.split(",").map((s) => s.trim());
  const numbers = items.map(Number);
  if (items.some((s) => !/^\d+$/.test(s)) || numbers.some((n) => n < min || n > 1_000_000)) {
    throw new UsageError(
      `${name} must be a comma-separated list of integers >= ${min}, not "${text}"`,
    );
  }
  return numbers;
}

async function run(values: OptionValues, positionals: string[]): Promise<number> {
  if (positionals.length !== 1) throw new UsageError("bench takes one MODEL argument");
  const path = await modelPath(positionals[0]);
  const prompts = integerList("-p", values["n-prompt"] ?? "512", 0).filter((n) => n > 0);
  const gens = integerList("-n", values["n-gen"] ?? "128", 0).filter((n) => n > 0);
  const depths = integerList("-d", values["n-depth"] ?? "0", 0);
  const threadList = integerList("-t", values.threads ?? String(availableParallelism()), 1);
  const [repetitions] = integerList("-r", values.repetitions ?? "5", 1);
  const llamaBench = values["llama-bench"] as string | undefined;
  const { cacheTypeK, cacheTypeV } = parseContextOptions(values);
  if (prompts.length + gens.length === 0) throw new UsageError("nothing to run: -p and -n are 0");

  const rows: BenchRow[] = [];
  let modelLine = path;
  for (const threads of threadList) {
    const contextSize = Math.max(...depths) + Math.max(...prompts, ...gens);
    const repack = values["no-repack"] !== true;
    const model = Model.load(path, { repack });
    let context: Context | undefined;
    try {
      context = new Context(model, {
        threads,
        contextSize,
        batchSize: 512,
        maxLogits: 1,
        cacheTypeK,
        cacheTypeV,
      });
      const c = model.config;
      const sizeMiB = context.memory.weightsBytes / (1 << 20);
      modelLine = `${c.architecture} ${c.blockCount}L ${c.embeddingLength}d ` +
        `${model.weights.typeName} ${sizeMiB.toFixed(1)} MiB`;
      // llama-bench's order: each test at every depth.
      const cases: BenchCase[] = [
        ...prompts.flatMap((n) =>
          depths.map((depth) => ({
            kind: "pp" as const,
            tokenCount: n,
            threads,
            depth,
            repack,
            cacheTypeK,
            cacheTypeV,
          }))
        ),
        ...gens.flatMap((n) =>
          depths.map((depth) => ({
            kind: "tg" as const,
            tokenCount: n,
            threads,
            depth,
            repack,
            cacheTypeK,
            cacheTypeV,
          }))
        ),
      ];
      for (const benchCase of cases) {
        const ours = benchModel(
          context,
          benchCase.kind,
          benchCase.tokenCount,
          repetitions,
          benchCase.depth,
        );
        const theirs = llamaBench === undefined
          ? undefined
          : benchLlamaCpp(llamaBench, path, benchCase, repetitions);
        const row = benchRow(benchCase, ours, theirs);
        rows.push(row);
        if (values.json !== true) {
          writeStderr(
            `  ${row.test} t=${threads}: ${row.tok_s_mean} tok/s` +
              (row.ratio === undefined
                ? "\n"
                : ` (llama.cpp ${row.llama_cpp_tok_s_mean}, x${row.ratio})\n`),
          );
        }
      }
    } finally {
      context?.close();
      model.close();
    }
  }
  writeStdout(values.json === true ? JSON.stringify(rows) + "\n" : benchTable(modelLine, rows));
  return 0;
}

/** The `bench` command. */
export const benchCommand: Command = {
  name: "bench",
  summary: "measure prompt and generation speed (llama-bench style)",
  usage,
  aliases: aliasesOf([CONTEXT_GROUP]),
  options: {
    "cache-type": CONTEXT_GROUP.options["cache-type"],
    "cache-type-k": CONTEXT_GROUP.options["cache-type-k"],
    "cache-type-v": CONTEXT_GROUP.options["cache-type-v"],
    "n-prompt": { type: "string", short: "p" },
    "n-gen": { type: "string", short: "n" },
    "n-depth": { type: "string", short: "d" },
    threads: { type: "string", short: "t" },
    repetitions: { type: "string", short: "r" },
    "llama-bench": { type: "string" },
    "no-repack": { type: "boolean" },
    json: { type: "boolean" },
  },
  run,
};
