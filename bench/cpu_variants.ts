/**
 * The x86-64 release pair side by side: prompt (pp) and generation (tg)
 * tokens per second of the baseline (x86-64-v3, AVX2) build forced with
 * `DOTLLM_CPU=baseline` and of the AVX-512 build, on a synthetic
 * SmolLM-135M-shape Q8_0 model and on stories260K. Runs `dotllm bench` from a
 * staged package (sources + zig-out/release, no zig-out/lib), the two builds
 * interleaved, best of two rounds. Prints a table; asserts nothing
 * (tests/ship_cpu_test.ts checks the tokens are equal).
 *
 *   deno task bench:cpu [--threads N]
 *
 * @module
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { makeModel } from "../src/gguf/make_model.ts";
import { platformName } from "../src/native/mod.ts";

const root = fileURLToPath(new URL("../", import.meta.url));
const testdata = process.env.DOTLLM_TESTDATA ?? join(root, "../shared/testdata");
const { values } = parseArgs({
  args: process.argv.slice(2),
  options: { threads: { type: "string" } },
});
const threadArgs = values.threads === undefined ? [] : ["-t", values.threads];

const release = await new Deno.Command(Deno.execPath(), {
  args: ["run", "-A", join(root, "scripts/release.ts"), platformName()],
  stdout: "inherit",
  stderr: "inherit",
}).output();
if (release.code !== 0) process.exit(1);

const work = mkdtempSync(join(tmpdir(), "dotllm-cpu-bench-"));
try {
  for (const entry of ["deno.json", "mod.ts", "cli.ts", "src"]) {
    cpSync(join(root, entry), join(work, entry), { recursive: true });
  }
  mkdirSync(join(work, "zig-out"));
  cpSync(join(root, "zig-out/release"), join(work, "zig-out/release"), { recursive: true });

  const smollm = makeModel({
    shape: "smollm-135m",
    type: "q8_0",
    outDir: join(root, "models"),
    vocabDir: join(testdata, "vocab-converted"),
  }).path;
  const models = [
    ["smollm-135m Q8_0", smollm, "128", "32"],
    ["stories260K F32", join(testdata, "models/stories260K.gguf"), "128", "64"],
  ];
  const variants = ["baseline", "avx512"];
  type Row = { test: string; tok_s_mean: number };
  const best = new Map<string, number>();
  for (let round = 0; round < 2; round++) {
    for (const [name, path, pp, tg] of models) {
      for (const cpu of round === 0 ? variants : [...variants].reverse()) {
        const out = await new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "-A",
            join(work, "cli.ts"),
            "bench",
            path,
            "-p",
            pp,
            "-n",
            tg,
            ...threadArgs,
            "-r",
            "3",
            "--json",
          ],
          env: { DOTLLM_CPU: cpu, DOTLLM_LIB: "", NO_COLOR: "1" },
          stdout: "piped",
          stderr: "inherit",
        }).output();
        if (out.code !== 0) process.exit(1);
        for (const row of JSON.parse(new TextDecoder().decode(out.stdout)) as Row[]) {
          const key = `${name}\t${row.test}\t${cpu}`;
          best.set(key, Math.max(best.get(key) ?? 0, row.tok_s_mean));
        }
      }
    }
  }
  console.log(
    `${"model".padEnd(18)}${"test".padEnd(8)}${"baseline tok/s".padStart(16)}` +
      `${"avx512 tok/s".padStart(14)}${"avx512/base".padStart(13)}`,
  );
  for (const [name] of models) {
    const tests = [...best.keys()].filter((k) =>
      k.startsWith(`${name}\t`) && k.endsWith("\tbaseline")
    );
    for (const key of tests) {
      const test = key.split("\t")[1];
      const base = best.get(key)!;
      const avx = best.get(`${name}\t${test}\tavx512`)!;
      console.log(
        `${name.padEnd(18)}${test.padEnd(8)}${base.toFixed(1).padStart(16)}` +
          `${avx.toFixed(1).padStart(14)}${(avx / base).toFixed(2).padStart(13)}`,
      );
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
