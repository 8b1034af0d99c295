/** Runs `dotllm run` in a subprocess (Deno with the launcher's permissions, or Bun). @module */
import { join } from "node:path";
import { repoRoot } from "./_testdata.ts";

/** What a CLI run produced. */
export interface RunOutput {
  code: number;
  stdout: string;
  stderr: string;
}

const decoder = new TextDecoder();

/** Runs the CLI with `args`; `stdin` is piped in when given (else stdin is null). */
export async function runCli(
  args: string[],
  { stdin, runtime = "deno" }: { stdin?: string; runtime?: "deno" | "bun" } = {},
): Promise<RunOutput> {
  const cli = join(repoRoot, "cli.ts");
  const [command, prefix] = runtime === "deno"
    ? [Deno.execPath(), [
      "run",
      "--quiet",
      "--no-prompt",
      "--allow-ffi",
      "--allow-read",
      "--allow-env",
      "--allow-sys=homedir",
      cli,
    ]]
    : ["bun", [cli]];
  const child = new Deno.Command(command, {
    args: [...prefix, ...args],
    cwd: repoRoot,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
  }
  const out = await child.output();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}
