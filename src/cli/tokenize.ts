/**
 * `dotllm tokenize MODEL [-p TEXT | -f FILE | stdin]`: the token ids of a
 * text as one JSON array, with llama-tokenize's defaults (BOS as the model
 * says, special tokens parsed).
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { type Command, type OptionValues, UsageError } from "./command.ts";
import { writeStdout } from "./io.ts";
import { openTokenizer } from "./_tokenizer.ts";
import { modelPath } from "./options.ts";

const USAGE = `Usage: dotllm tokenize MODEL [-p TEXT | -f FILE] [options]

Prints the token ids of TEXT (or of FILE, or of stdin) as one JSON array.

Options:
  -p, --prompt TEXT       the text to tokenize
  -f, --file FILE         read the text from FILE
      --no-bos            add no BOS/EOS even if the model asks for them
      --no-parse-special  treat "<|eot_id|>" and the like as plain text
      --pieces            print "id<TAB>piece" per line (\\n, \\r, \\t, \\\\ escaped)
`;

function escapePiece(piece: string): string {
  return piece.replace(
    /[\\\n\r\t]/g,
    (c) => ({ "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" })[c]!,
  );
}

/** Reads the input: `-p` (as UTF-8), `-f`, else stdin, as bytes. */
export function readInput(values: OptionValues, flag = "prompt"): Uint8Array {
  const prompt = values[flag];
  const file = values.file;
  if (prompt !== undefined && file !== undefined) {
    throw new UsageError(`give either --${flag} or --file, not both`);
  }
  if (typeof prompt === "string") return new TextEncoder().encode(prompt);
  return typeof file === "string" ? readFileSync(file) : readFileSync(0);
}

export const tokenizeCommand: Command = {
  name: "tokenize",
  summary: "print the token ids of a text",
  usage: USAGE,
  options: {
    prompt: { type: "string", short: "p" },
    file: { type: "string", short: "f" },
    "no-bos": { type: "boolean" },
    "no-parse-special": { type: "boolean" },
    pieces: { type: "boolean" },
  },
  async run(values, positionals) {
    if (positionals.length !== 1) throw new UsageError("expected one MODEL argument");
    const bytes = readInput(values);
    const tokenizer = openTokenizer(await modelPath(positionals[0]));
    // bytes, not text: invalid UTF-8 is tokenized as llama.cpp does
    const ids = tokenizer.encodeBytes(bytes, {
      addSpecial: values["no-bos"] !== true,
      parseSpecial: values["no-parse-special"] !== true,
    });
    if (values.pieces === true) {
      writeStdout(ids.map((id) => `${id}\t${escapePiece(tokenizer.tokenToPiece(id))}\n`).join(""));
    } else {
      writeStdout(`[${ids.join(",")}]\n`);
    }
    return 0;
  },
};
