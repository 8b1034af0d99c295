/** Runs the CLI in a subprocess under Deno or Bun. @module */
import { join } from "node:path";
import { repoRoot } from "./_testdata.ts";

/** What a CLI run produced. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

const decoder = new TextDecoder();

async function run(command: string, args: string[]): Promise<CliResult> {
  const out = await new Deno.Command(command, {
    args,
    cwd: repoRoot,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

/** `deno run cli.ts ARGS` with the launcher's permissions. */
export function runDeno(args: string[]): Promise<CliResult> {
  return run(Deno.execPath(), [
    "run",
    "--quiet",
    "--no-prompt",
    "--allow-ffi",
    "--allow-read",
    "--allow-write",
    "--allow-env",
    "--allow-sys=homedir",
    join(repoRoot, "cli.ts"),
    ...args,
  ]);
}

/** `bun cli.ts ARGS`, with `bun` found on PATH (`./dotllm task test` puts the pinned one there). */
export async function runBun(args: string[]): Promise<CliResult> {
  try {
    return await run("bun", [join(repoRoot, "cli.ts"), ...args]);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new Error("bun is not on PATH: run the tests with `./dotllm task test`");
    }
    throw error;
  }
}
