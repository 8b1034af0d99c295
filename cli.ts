/**
 * The dotllm command line: argument parsing and wiring only; every command's
 * work lives in `src/cli/`.
 *
 * @example
 * ```sh
 * dotllm inspect model.gguf --json
 * ```
 *
 * @module
 */
import process from "node:process";
import { parseArgs } from "node:util";
import { benchCommand } from "./src/cli/bench.ts";
import { type Command, UsageError } from "./src/cli/command.ts";
import { isBrokenPipe, writeStderr, writeStdout } from "./src/cli/io.ts";
import { VERSION } from "./src/version.ts";

/** Every command, in the order `--help` lists them. */
const commands: readonly Command[] = [benchCommand];

function helpText(): string {
  const width = Math.max(0, ...commands.map((c) => c.name.length));
  const lines = commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return [
    `dotllm ${VERSION}: LLM inference on the CPU`,
    "",
    "Usage: dotllm <command> [options]",
    "",
    "Commands:",
    ...lines,
    "",
    "Run `dotllm <command> --help` for a command's options.",
    "",
  ].join("\n");
}

/** Runs the CLI on `args`; resolves to the exit code. */
export async function main(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    writeStdout(helpText());
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "-V") {
    writeStdout(`dotllm ${VERSION}\n`);
    return 0;
  }
  const command = commands.find((c) => c.name === name);
  try {
    if (command === undefined) throw new UsageError(`unknown command "${name}"`);
    if (rest.includes("--help") || rest.includes("-h")) {
      writeStdout(command.usage.endsWith("\n") ? command.usage : command.usage + "\n");
      return 0;
    }
    let parsed;
    try {
      parsed = parseArgs({ args: rest, options: command.options, allowPositionals: true });
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message : String(error));
    }
    return await command.run(parsed.values, parsed.positionals);
  } catch (error) {
    if (isBrokenPipe(error)) return 0;
    const message = error instanceof Error ? error.message : String(error);
    if (error instanceof UsageError) {
      const hint = command ? `dotllm ${command.name} --help` : "dotllm --help";
      writeStderr(`dotllm: ${message} (see \`${hint}\`)\n`);
      return 2;
    }
    writeStderr(`dotllm: ${message}\n`);
    return 1;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
