/**
 * `dotllm inspect MODEL [--json]`: what a GGUF file holds, like gguf-dump.
 *
 * @module
 */
import type { Command } from "./command.ts";
import { UsageError } from "./command.ts";
import { writeStdout } from "./io.ts";
import { openGguf } from "../gguf/file.ts";
import { modelPath } from "./options.ts";
import { formatGgufSummary, summarizeGguf } from "../gguf/summary.ts";
import type { Gguf } from "../gguf/reader.ts";
import { architectureOf, describeArchitecture, ModelError, readModelConfig } from "../model/mod.ts";

/** How dotllm runs the file (architecture settings), or why it cannot. */
function runsAs(gguf: Gguf): string {
  try {
    const c = readModelConfig(gguf);
    return describeArchitecture(architectureOf(c.architecture), c, c.headCountKv);
  } catch (error) {
    if (error instanceof ModelError) return `not runnable: ${error.message}`;
    throw error;
  }
}

/** The `inspect` command. */
export const inspectCommand: Command = {
  name: "inspect",
  summary: "show a GGUF file's metadata, hyper-parameters, tokenizer and tensors",
  usage: [
    "Usage: dotllm inspect MODEL.gguf [--json]",
    "",
    "Prints the GGUF version, architecture (and how dotllm runs it), name, hyper-parameters",
    "(<arch>.* keys), tokenizer,",
    "every metadata key (long arrays summarised) and the tensor table (name, type, shape, bytes,",
    "absolute file offset). The file is memory-mapped; tensor data is never read.",
    "",
    "Options:",
    "  --json   print one JSON document instead (64-bit integers as numbers when exact, else",
    "           strings; f32 values as their shortest decimal)",
  ].join("\n"),
  options: { json: { type: "boolean" } },
  async run(values, positionals) {
    if (positionals.length !== 1) {
      throw new UsageError(positionals.length === 0 ? "missing MODEL" : "expected one MODEL");
    }
    const path = await modelPath(positionals[0]);
    using file = openGguf(path);
    const summary = summarizeGguf(file.gguf);
    if (values.json) {
      writeStdout(JSON.stringify({ file: path, ...summary }, null, 2) + "\n");
    } else {
      writeStdout(formatGgufSummary(summary, path, runsAs(file.gguf)));
    }
    return 0;
  },
};
