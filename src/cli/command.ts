/**
 * The shape of a CLI command. `cli.ts` parses the arguments with
 * `node:util` `parseArgs` from each command's `options`, then calls `run`.
 *
 * @module
 */
import type { ParseArgsConfig } from "node:util";

/** Options as `parseArgs` returns them. */
export type OptionValues = Record<string, string | boolean | (string | boolean)[] | undefined>;

/** A wrong flag, value or missing argument: exit code 2 with a usage hint. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** One `dotllm <name>` command. */
export interface Command {
  readonly name: string;
  /** One line for `dotllm --help`. */
  readonly summary: string;
  /** The usage line(s) and option list for `dotllm <name> --help`. */
  readonly usage: string;
  readonly options: NonNullable<ParseArgsConfig["options"]>;
  /** Spellings `parseArgs` cannot take (`-sys`), each mapped to an option (`--system`). */
  readonly aliases?: Readonly<Record<string, string>>;
  /** Runs the command; resolves to the exit code. */
  run(values: OptionValues, positionals: string[]): Promise<number> | number;
}
