/**
 * Release builds of the single executable.
 *
 *   deno task compile       deno compile, with the native library included
 *   deno task compile:bun   bun build --compile, with the native library embedded
 *
 * `deno compile` downloads its runtime (denort) from dl.deno.land unless
 * `DENORT_BIN` names a local copy; where that download is refused this says so
 * in one line instead of a stack of causes.
 *
 * @module
 */
import { existsSync } from "node:fs";
import process from "node:process";
import { platformName, releaseFileName } from "../src/native/paths.ts";

const runtime = process.argv[2] ?? "deno";
const output = process.argv[3] ?? (runtime === "bun" ? "dist/dotllm" : "dist/dotllm-deno");

// The portable release builds of this OS/CPU (baseline and, on x86-64, AVX-512),
// never the checkout's native build: the executable must run on other machines.
const platform = platformName();
const zig = await new Deno.Command("zig", {
  args: ["build", "release", `-Dplatform=${platform}`],
  stdout: "inherit",
  stderr: "inherit",
}).output();
if (zig.code !== 0) process.exit(1);
const libraries = [platform, `${platform}-avx512`]
  .map((name) => `zig-out/release/${releaseFileName(name)}`)
  .filter((path) => existsSync(path));

const command = runtime === "bun"
  ? [
    "bun",
    "build",
    "--compile",
    "--minify",
    "cli.ts",
    "src/server/worker.ts", // the model Worker of `dotllm serve`: a second entry point
    ...libraries,
    "--outfile",
    output,
  ]
  : [
    "deno",
    "compile",
    "--allow-ffi",
    "--allow-read",
    "--allow-env",
    "--allow-write",
    "--allow-net",
    ...libraries.flatMap((path) => ["--include", path]),
    "--include",
    "src/server/worker.ts", // the model Worker of `dotllm serve`
    "--output",
    output,
    "cli.ts",
  ];

const result = await new Deno.Command(command[0], {
  args: command.slice(1),
  stdout: "inherit",
  stderr: "piped",
}).output();
const stderr = new TextDecoder().decode(result.stderr);
if (result.code !== 0) {
  if (
    runtime === "deno" && /dl\.deno\.land|denort/.test(stderr) &&
    /error sending request/.test(stderr)
  ) {
    console.error(
      "dotllm: deno compile needs its runtime (denort) from dl.deno.land, which this network " +
        "refuses: set DENORT_BIN to a local denort binary, or use `deno task compile:bun`",
    );
  } else {
    console.error(stderr.trimEnd());
  }
  process.exit(1);
}
console.error(`dotllm: wrote ${output}`);
