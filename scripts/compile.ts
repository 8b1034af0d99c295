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
import { existsSync, readFileSync } from "node:fs";
import process from "node:process";
import { platformName, releaseFileName } from "../src/native/paths.ts";

const runtime = process.argv[2] ?? "deno";
const output = process.argv[3] ?? (runtime === "bun" ? "dist/dotllm" : "dist/dotllm-deno");

// The portable release builds of this OS/CPU (baseline and, on x86-64, AVX-512),
// never the checkout's native build: the executable must run on other machines.
const platform = platformName();
const zig = await run("zig", ["build", "release", `-Dplatform=${platform}`]);
if (zig.code !== 0) process.exit(1);
const libraries = [platform, `${platform}-avx512`]
  .map((name) => `zig-out/release/${releaseFileName(name)}`)
  .filter((path) => existsSync(path));

/**
 * Bun's bundler does not read deno.json's `imports`: the npm packages it pins
 * (none of which the CLI imports today) are installed into the ignored
 * `node_modules/` first, at the versions deno.json pins. Bun itself writes
 * them (this script needs no write permission).
 */
async function installNpmImportsForBun(): Promise<void> {
  const imports: Record<string, string> = JSON.parse(readFileSync("deno.json", "utf8")).imports;
  const wanted: Record<string, string> = {};
  for (const spec of Object.values(imports)) {
    const m = /^npm:(@?[^@]+)@(.+)$/.exec(spec);
    if (m === null || m[1] === "mitata") continue; // mitata: benchmarks only
    const installed = `node_modules/${m[1]}/package.json`;
    if (existsSync(installed) && JSON.parse(readFileSync(installed, "utf8")).version === m[2]) {
      continue;
    }
    wanted[m[1]] = m[2];
  }
  if (Object.keys(wanted).length === 0) return;
  const script = `const fs = require("fs"), path = require("path"), os = require("os");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dotllm-npm-"));
try {
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ private: true, dependencies: ${
    JSON.stringify(wanted)
  } }));
  const r = Bun.spawnSync([process.execPath, "install", "--silent"], { cwd: dir, stdio: ["ignore", "inherit", "inherit"] });
  if (r.exitCode !== 0) process.exit(1);
  fs.cpSync(path.join(dir, "node_modules"), "node_modules", { recursive: true });
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}`;
  const install = await new Deno.Command("bun", {
    args: ["-e", script],
    stdout: "inherit",
    stderr: "inherit",
  })
    .output();
  if (install.code !== 0) {
    console.error(`dotllm: bun could not install ${Object.keys(wanted).join(", ")} for bundling`);
    process.exit(1);
  }
}
if (runtime === "bun") await installNpmImportsForBun();

/** deno.json's `npm:` import specifiers. */
function npmSpecifiers(): string[] {
  const imports: Record<string, string> = JSON.parse(readFileSync("deno.json", "utf8")).imports;
  return Object.values(imports).filter((spec) => spec.startsWith("npm:"));
}

const command = runtime === "bun"
  ? [
    "bun",
    "build",
    "--compile",
    "--minify",
    // `npm:` specifiers are Deno's; Bun takes bare names.
    ...npmSpecifiers().flatMap((spec) => ["--external", spec]),
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

const result = await run(command[0], command.slice(1), "piped");
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

/**
 * Runs a tool, or exits with one line when it is not on PATH: the tools are
 * pinned and installed by the `./dotllm` launcher, which puts them on PATH.
 */
async function run(
  tool: string,
  args: string[],
  stderr: "inherit" | "piped" = "inherit",
): Promise<Deno.CommandOutput> {
  try {
    return await new Deno.Command(tool, { args, stdout: "inherit", stderr }).output();
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    console.error(
      `dotllm: ${tool} is not on PATH: run \`./dotllm task compile${
        runtime === "bun" ? ":bun" : ""
      }\`, ` +
        "which installs the pinned tools into .tools/",
    );
    process.exit(1);
  }
}
