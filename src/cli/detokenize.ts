/**
 * `dotllm detokenize MODEL [-p IDS | -f FILE | stdin]`: the text of a JSON
 * array of token ids, as llama.cpp's detokenizer gives it.
 *
 * @module
 */
import { type Command, UsageError } from "./command.ts";
import { writeStdout } from "./io.ts";
import { readInput } from "./tokenize.ts";
import { openTokenizer } from "./_tokenizer.ts";
import { modelPath } from "./options.ts";

const USAGE = `Usage: dotllm detokenize MODEL [-p IDS | -f FILE] [options]

Reads a JSON array of token ids (from IDS, FILE or stdin) and prints the text.

Options:
  -p, --ids IDS       the ids, e.g. "[1,403,407]"
  -f, --file FILE     read the ids from FILE
      --no-special    print nothing for control tokens such as BOS/EOS
  -n, --no-newline    do not end the output with a newline
`;

/** Parses a JSON array of integers; throws an Error naming the problem. */
export function parseIds(text: string): number[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error("the input is not a JSON array of token ids");
  }
  if (!Array.isArray(value)) throw new Error("the input is not a JSON array of token ids");
  for (const [i, id] of value.entries()) {
    if (typeof id !== "number" || !Number.isInteger(id)) {
      throw new Error(`element ${i} (${JSON.stringify(id)}) is not an integer token id`);
    }
  }
  return value as number[];
}

export const detokenizeCommand: Command = {
  name: "detokenize",
  summary: "print the text of a JSON array of token ids",
  usage: USAGE,
  options: {
    ids: { type: "string", short: "p" },
    file: { type: "string", short: "f" },
    "no-special": { type: "boolean" },
    "no-newline": { type: "boolean", short: "n" },
  },
  async run(values, positionals) {
    if (positionals.length !== 1) throw new UsageError("expected one MODEL argument");
    const ids = parseIds(new TextDecoder().decode(readInput(values, "ids")));
    const tokenizer = openTokenizer(await modelPath(positionals[0]));
    const bytes = tokenizer.decodeBytes(ids, { special: values["no-special"] !== true });
    writeStdout(bytes);
    if (values["no-newline"] !== true) writeStdout("\n");
    return 0;
  },
};
