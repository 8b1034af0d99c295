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
import { type Command, UsageError } from "./src/cli/command.ts";
import { isBrokenPipe, writeStderr, writeStdout } from "./src/cli/io.ts";
import { prepareLibrary } from "./src/native/locate.ts";
import { errorStyle } from "./src/cli/terminal.ts";
import { HubError } from "./src/hub/errors.ts";
import { VERSION } from "./src/version.ts";

/**
 * Every command, in the order `--help` lists them, each imported only when
 * it runs (a reason: `dotllm pull` need not load the model, server and
 * template code, ~60 ms of start-up).
 */
const commandLoaders: Readonly<Record<string, () => Promise<Command>>> = {
  run: async () => (await import("./src/cli/run.ts")).runCommand,
  serve: async () => (await import("./src/cli/serve.ts")).serveCommand,
  chat: async () => (await import("./src/cli/chat.ts")).chatCommand,
  inspect: async () => (await import("./src/cli/inspect.ts")).inspectCommand,
  tokenize: async () => (await import("./src/cli/tokenize.ts")).tokenizeCommand,
  detokenize: async () => (await import("./src/cli/detokenize.ts")).detokenizeCommand,
  pull: async () => (await import("./src/cli/pull.ts")).pullCommand,
  list: async () => (await import("./src/cli/list.ts")).listCommand,
  rm: async () => (await import("./src/cli/rm.ts")).rmCommand,
  bench: async () => (await import("./src/cli/bench.ts")).benchCommand,
  quantize: async () => (await import("./src/cli/quantize.ts")).quantizeCommand,
  convert: async () => (await import("./src/cli/convert.ts")).convertCommand,
  embed: async () => (await import("./src/cli/embed.ts")).embedCommand,
};

/** Every command, in the order `--help` lists them (this imports them all). */
export function loadCommands(): Promise<Command[]> {
  return Promise.all(Object.values(commandLoaders).map((load) => load()));
}

async function helpText(): Promise<string> {
  const commands = await loadCommands();
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
    "Options:",
    "  -h, --help     this help",
    "  -V, --version  print the version",
    "",
    "Run `dotllm <command> --help` (or `dotllm help <command>`) for a command's options.",
    "Environment: NO_COLOR (no colour), DOTLLM_CPU=auto|baseline|avx512 (library build),",
    "DOTLLM_LIB (a native library to load), XDG_CACHE_HOME (where the library is cached).",
    "",
  ].join("\n");
}

/**
 * Joins a string option and a following negative number (`-n -1`) into
 * `--n-predict=-1`, which `parseArgs` would otherwise reject as ambiguous.
 */
function joinNegativeValues(args: string[], options: Command["options"]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const next = args[i + 1];
    const name = Object.keys(options).find((key) =>
      options[key].type === "string" && (arg === `--${key}` || arg === `-${options[key].short}`)
    );
    if (name !== undefined && next !== undefined && /^-(\d|\.\d)/.test(next)) {
      out.push(`--${name}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

function usageText(command: Command): string {
  return command.usage.endsWith("\n") ? command.usage : command.usage + "\n";
}

/**
 * Runs the CLI on `args`; resolves to the exit code: 0, 1 for a failure
 * (`dotllm: <message>` on stderr), 2 for a usage error (one line naming the
 * `--help` to read).
 */
export async function main(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  if (name === "--help" || name === "-h" || (name === "help" && rest.length === 0)) {
    writeStdout(await helpText());
    return 0;
  }
  if (name === "--version" || name === "-V") {
    writeStdout(`dotllm ${VERSION}\n`);
    return 0;
  }
  const helpFor = name === "help" ? rest[0] : undefined;
  const wanted = helpFor ?? name;
  const load = wanted !== undefined && Object.hasOwn(commandLoaders, wanted)
    ? commandLoaders[wanted]
    : undefined;
  let command: Command | undefined;
  try {
    if (name === undefined) throw new UsageError("missing command");
    if (load === undefined) {
      throw new UsageError(`unknown command "${wanted}"`);
    }
    const chosen = await load();
    command = chosen;
    if (helpFor !== undefined || rest.includes("--help") || rest.includes("-h")) {
      writeStdout(usageText(chosen));
      return 0;
    }
    let parsed;
    try {
      const spelled = rest.map((arg) => chosen.aliases?.[arg] ?? arg);
      const args = joinNegativeValues(spelled, chosen.options);
      parsed = parseArgs({ args, options: chosen.options, allowPositionals: true });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      // parseArgs adds a sentence about `--` to an unknown option: keep the first.
      const unknown = /^Unknown option '[^']*'/.exec(message);
      throw new UsageError(unknown ? unknown[0] : message.split("\n")[0]);
    }
    await prepareLibrary();
    return await chosen.run(parsed.values, parsed.positionals);
  } catch (error) {
    if (isBrokenPipe(error)) return 0;
    const message = error instanceof Error ? error.message : String(error);
    const prefix = errorStyle("dotllm:");
    if (error instanceof UsageError) {
      const hint = command ? `dotllm ${command.name} --help` : "dotllm --help";
      writeStderr(`${prefix} ${message} (see \`${hint}\`)\n`);
      return 2;
    }
    // The library's Hub messages name no flag; the CLI says which one gives the token.
    const authFailed = error instanceof HubError && (error.status === 401 || error.status === 403);
    const hint = authFailed ? " [the token: HF_TOKEN or --token]" : "";
    writeStderr(`${prefix} ${message}${hint}\n`);
    return 1;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
