/** Helpers of the ship tests: the golden stories260K text, release builds, staged packages. @module */
import { cpSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseGguf } from "../src/gguf/reader.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { repoRoot, testdata } from "./_testdata.ts";

/** The real tiny model every ship test generates with. */
export const STORIES: string = testdata("models/stories260K.gguf");

const decoder = new TextDecoder();

/** What `dotllm run` prints for the first `n` of llama.cpp's greedy ids after `prompt`. */
export function goldenText(prompt: string, n: number): string {
  const cases: { prompt: string; generated_ids: number[] }[] = JSON.parse(
    readFileSync(testdata("golden/stories260K.greedy.json"), "utf8"),
  ).cases;
  const c = cases.find((c) => c.prompt === prompt);
  if (c === undefined) throw new Error(`no golden case for prompt ${JSON.stringify(prompt)}`);
  if (c.generated_ids.length < n) throw new Error(`the golden case has < ${n} ids`);
  const tokenizer = Tokenizer.fromGguf(parseGguf(new Uint8Array(readFileSync(STORIES))));
  const d = tokenizer.createDecoder();
  let s = "";
  for (const id of c.generated_ids.slice(0, n)) s += d.push(id);
  return s + d.flush();
}

/** What a subprocess produced. */
export interface Output {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `command` to completion. */
export async function exec(
  command: string,
  args: string[],
  options: { cwd?: string; env?: Record<string, string>; clearEnv?: boolean } = {},
): Promise<Output> {
  const out = await new Deno.Command(command, {
    args,
    cwd: options.cwd ?? repoRoot,
    env: options.env,
    clearEnv: options.clearEnv ?? false,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

/**
 * `zig build release -Dplatform=<this platform>` (the baseline and, on x86-64,
 * AVX-512 builds) plus their manifest, through `deno task release`'s script.
 */
export async function buildRelease(platform: string): Promise<void> {
  const out = await exec(Deno.execPath(), [
    "run",
    "--quiet",
    "--allow-run",
    "--allow-read",
    "--allow-write",
    "--allow-env",
    join(repoRoot, "scripts/release.ts"),
    platform,
  ]);
  if (out.code !== 0) throw new Error(`deno task release failed:\n${out.stderr}`);
}

/**
 * Copies what `deno publish` ships (the TypeScript sources, and the release
 * libraries with their manifest when `withRelease`) into `dir`: a package with
 * no `zig-out/lib`, as a user gets it.
 */
export function stagePackage(dir: string, withRelease: boolean): void {
  for (const entry of ["deno.json", "mod.ts", "cli.ts", "src"]) {
    cpSync(join(repoRoot, entry), join(dir, entry), { recursive: true });
  }
  if (withRelease) {
    mkdirSync(join(dir, "zig-out"), { recursive: true });
    cpSync(join(repoRoot, "zig-out", "release"), join(dir, "zig-out", "release"), {
      recursive: true,
    });
  }
}
