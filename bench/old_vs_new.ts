/**
 * One build against another, interleaved: per round and model, `dotllm bench
 * MODEL -p 64 -n 32 -t 1,2 -r 3 --json` in the old checkout and in this one,
 * the order alternating by round. Prints per cell (model, test, threads) the
 * median tok/s of each, the per-round new/old ratios and their median, as
 * markdown. Both checkouts build and load their own library, so an old commit
 * with another kernel ABI works (`git worktree add --detach ../old COMMIT`).
 *
 *   deno run -A bench/old_vs_new.ts --old ../old [-r 3] MODEL...
 *
 * @module
 */
import { join, resolve } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: { old: { type: "string" }, rounds: { type: "string", short: "r", default: "3" } },
  allowPositionals: true,
});
if (values.old === undefined || positionals.length === 0) {
  console.error("usage: deno run -A bench/old_vs_new.ts --old DIR [-r N] MODEL...");
  process.exit(2);
}
const oldDir = resolve(values.old);
const newDir = new URL("../", import.meta.url).pathname;
const rounds = Number(values.rounds);

interface Row {
  test: string;
  threads: number;
  tok_s_mean: number;
}

function bench(dir: string, model: string): Row[] {
  const out = new Deno.Command(join(dir, "dotllm"), {
    args: ["bench", model, "-p", "64", "-n", "32", "-t", "1,2", "-r", "3", "--json"],
    stdout: "piped",
    stderr: "inherit",
    cwd: dir,
  }).outputSync();
  if (!out.success) throw new Error(`${dir}: dotllm bench ${model} failed`);
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
/** Per cell: old tok/s, new tok/s and new/old, one entry per round. */
const cells = new Map<string, { old: number[]; new: number[]; ratio: number[] }>();
for (let r = 0; r < rounds; r++) {
  for (const model of positionals.map((m) => resolve(m))) {
    const first = r % 2 === 0 ? oldDir : newDir;
    const second = first === oldDir ? newDir : oldDir;
    const a = bench(first, model), b = bench(second, model);
    const [oldRows, newRows] = first === oldDir ? [a, b] : [b, a];
    for (const n of newRows) {
      const o = oldRows.find((x) => x.test === n.test && x.threads === n.threads);
      if (o === undefined) continue;
      const key = `${model.split("/").pop()} ${n.test} ${n.threads}T`;
      const cell = cells.get(key) ?? { old: [], new: [], ratio: [] };
      cell.old.push(o.tok_s_mean);
      cell.new.push(n.tok_s_mean);
      cell.ratio.push(n.tok_s_mean / o.tok_s_mean);
      cells.set(key, cell);
    }
  }
}
console.log("| cell | old tok/s (median) | new tok/s (median) | new/old per round | median |");
console.log("| --- | ---: | ---: | --- | ---: |");
for (const [key, c] of cells) {
  console.log(
    `| ${key} | ${median(c.old).toFixed(1)} | ${median(c.new).toFixed(1)} | ` +
      `${c.ratio.map((x) => x.toFixed(2)).join(" ")} | ${median(c.ratio).toFixed(2)} |`,
  );
}
