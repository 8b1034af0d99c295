/**
 * `dotllm bench`: prompt processing (pp) and text generation (tg) throughput,
 * measured the way llama-bench measures them, optionally side by side with a
 * llama-bench binary on the same file and threads.
 *
 * - `ppN`: one batched forward pass over N prompt tokens from an empty cache.
 * - `tgN`: N single-token forward passes from an empty cache.
 * - `ppN @ dD`, `tgN @ dD`: the same after D tokens already in the cache (llama-bench's
 *   `-d`): the depth is run once per case, untimed, and every timed run continues
 *   from it, so its attention reads D more keys per token.
 *
 * Each case runs once to warm up, then `repetitions` times; tok/s is reported
 * as mean ± sample standard deviation, as llama-bench does.
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import type { Context } from "../model/mod.ts";

/** One benchmark cell. */
export interface BenchCase {
  readonly kind: "pp" | "tg";
  /** Prompt tokens (pp) or generated tokens (tg). */
  readonly tokenCount: number;
  readonly threads: number;
  /** Tokens in the cache before the timed part (llama-bench's `-d`); default 0. */
  readonly depth?: number;
  /** Weights repacked at load (llama-bench's `--repack`); default true. */
  readonly repack?: boolean;
  /** KV cache types of K and V (llama-bench's `-ctk`/`-ctv`); default f16. */
  readonly cacheTypeK?: string;
  readonly cacheTypeV?: string;
}

/**
 * llama-bench's cache type flags for `c`: none for the default F16 cache, else `-ctk`,
 * `-ctv` and `-fa 1` (llama.cpp quantizes V only with flash attention).
 */
function cacheTypeArgs(c: BenchCase): string[] {
  const k = c.cacheTypeK ?? "f16", v = c.cacheTypeV ?? "f16";
  if (k === "f16" && v === "f16") return [];
  return ["-ctk", k, "-ctv", v, "-fa", "1"];
}

/** Tok/s statistics of one side of a cell. */
export interface Throughput {
  readonly mean: number;
  readonly std: number;
  /** The middle sample (the mean of the two middle ones for an even count). */
  readonly median: number;
  readonly samples: readonly number[];
}

/** One row of `dotllm bench --json` (field order is part of the format). */
export interface BenchRow {
  test: string;
  threads: number;
  n_prompt: number;
  n_gen: number;
  tok_s_mean: number;
  tok_s_std: number;
  llama_cpp_tok_s_mean?: number;
  llama_cpp_tok_s_std?: number;
  ratio?: number;
  tok_s_median: number;
  llama_cpp_tok_s_median?: number;
  /** dotllm's median / llama.cpp's median. */
  ratio_median?: number;
  /** Tokens in the cache before each timed run (llama-bench's `n_depth`). */
  n_depth: number;
}

/** Mean and sample standard deviation (n − 1), as llama-bench reports, and the median. */
export function throughput(samples: readonly number[]): Throughput {
  const n = samples.length;
  const mean = samples.reduce((a, b) => a + b, 0) / n;
  const variance = n > 1 ? samples.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1) : 0;
  return { mean, std: Math.sqrt(variance), median: median(samples), samples };
}

/** The middle value (the mean of the two middle ones for an even count). */
export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const n = sorted.length;
  return n % 2 === 1 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

/** Deterministic pseudo-random token ids in [0, vocabSize) (the content does not matter). */
function benchTokens(count: number, vocabSize: number): Int32Array {
  const ids = new Int32Array(count);
  let state = 0x9e3779b9;
  for (let i = 0; i < count; i++) {
    state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    ids[i] = state % vocabSize;
  }
  return ids;
}

/**
 * Runs one case on slot 0 of `context` (made with `threads` and at least
 * `depth + tokenCount` positions): the `depth` tokens once, untimed, then a
 * warm-up and `repetitions` timed runs, each continuing at position `depth`.
 */
export function benchModel(
  context: Context,
  kind: "pp" | "tg",
  tokenCount: number,
  repetitions: number,
  depth = 0,
): Throughput {
  const ids = benchTokens(depth + tokenCount, context.model.config.vocabSize);
  if (depth > 0) context.forward(ids.subarray(0, depth), 0);
  const test = ids.subarray(depth);
  const one = new Int32Array(1);
  const runOnce = (): number => {
    const start = performance.now();
    if (kind === "pp") {
      context.forward(test, depth);
    } else {
      for (let i = 0; i < tokenCount; i++) {
        one[0] = test[i];
        context.forward(one, depth + i);
      }
    }
    return performance.now() - start;
  };
  runOnce();
  const samples: number[] = [];
  for (let r = 0; r < repetitions; r++) samples.push((tokenCount * 1000) / runOnce());
  return throughput(samples);
}

/** Runs llama-bench at `path` on one case and returns its tok/s. */
export function benchLlamaCpp(
  path: string,
  model: string,
  c: BenchCase,
  repetitions: number,
): Throughput {
  const args = [
    "-m",
    model,
    "-p",
    c.kind === "pp" ? String(c.tokenCount) : "0",
    "-n",
    c.kind === "tg" ? String(c.tokenCount) : "0",
    "-t",
    String(c.threads),
    "-d",
    String(c.depth ?? 0),
    "-r",
    String(repetitions),
    ...(c.repack === false ? ["--repack", "0"] : []),
    ...cacheTypeArgs(c),
    "-o",
    "json",
  ];
  const result = spawnSync(path, args, { encoding: "utf8", maxBuffer: 64 << 20 });
  if (result.error !== undefined) {
    throw new Error(`cannot run llama-bench "${path}": ${result.error.message}`);
  }
  if (result.status !== 0) {
    const last = (result.stderr ?? "").trim().split("\n").pop() ?? "";
    throw new Error(`llama-bench "${path}" exited with ${result.status}: ${last}`);
  }
  let rows: Array<{ n_prompt: number; n_gen: number; samples_ts: number[] }>;
  try {
    rows = JSON.parse(result.stdout);
  } catch {
    throw new Error(`llama-bench "${path}" did not print JSON (is it llama-bench?)`);
  }
  const row = rows.find((r) => (c.kind === "pp" ? r.n_prompt > 0 : r.n_gen > 0));
  if (row === undefined) throw new Error(`llama-bench "${path}" printed no ${c.kind} result`);
  return throughput(row.samples_ts);
}

/** The `--json` row of a measured cell. */
export function benchRow(c: BenchCase, ours: Throughput, theirs?: Throughput): BenchRow {
  // Field order: the mean fields, then (from a llama-bench run) its mean fields and the
  // ratio, then the medians, then the depth, so the earlier fields keep their places.
  const depth = c.depth ?? 0;
  const row: BenchRow = {
    test: `${c.kind}${c.tokenCount}` + (depth > 0 ? ` @ d${depth}` : ""),
    threads: c.threads,
    n_prompt: c.kind === "pp" ? c.tokenCount : 0,
    n_gen: c.kind === "tg" ? c.tokenCount : 0,
    tok_s_mean: round(ours.mean),
    tok_s_std: round(ours.std),
    ...(theirs === undefined ? {} : {
      llama_cpp_tok_s_mean: round(theirs.mean),
      llama_cpp_tok_s_std: round(theirs.std),
      ratio: round(ours.mean / theirs.mean, 3),
    }),
    tok_s_median: round(ours.median),
    ...(theirs === undefined ? {} : {
      llama_cpp_tok_s_median: round(theirs.median),
      ratio_median: round(ours.median / theirs.median, 3),
    }),
    n_depth: depth,
  };
  return row;
}

function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** A markdown table of rows, llama-bench style. */
export function benchTable(modelLine: string, rows: readonly BenchRow[]): string {
  const withReference = rows.some((r) => r.ratio !== undefined);
  const header = ["model", "threads", "test", "dotllm t/s"];
  if (withReference) header.push("llama.cpp t/s", "dotllm / llama.cpp");
  const lines = rows.map((r) => {
    const cells = [
      modelLine,
      String(r.threads),
      r.test,
      `${r.tok_s_mean.toFixed(2)} ± ${r.tok_s_std.toFixed(2)}`,
    ];
    if (withReference) {
      cells.push(
        r.llama_cpp_tok_s_mean === undefined
          ? "-"
          : `${r.llama_cpp_tok_s_mean.toFixed(2)} ± ${r.llama_cpp_tok_s_std!.toFixed(2)}`,
        r.ratio === undefined ? "-" : r.ratio.toFixed(2),
      );
    }
    return cells;
  });
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const format = (cells: string[]) =>
    "| " + cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i])))
      .join(" | ") +
    " |";
  const rule = "| " + widths.map((w, i) => (i === 0 ? "-".repeat(w) : "-".repeat(w - 1) + ":"))
    .join(" | ") +
    " |";
  return [format(header), rule, ...lines.map(format)].join("\n") + "\n";
}
