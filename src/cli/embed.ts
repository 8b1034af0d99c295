/**
 * `dotllm embed MODEL [-p TEXT]... [options]`: one embedding per input (each
 * `-p`, else each line of stdin), pooled and normalized as llama-embedding
 * does.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { type Command, UsageError } from "./command.ts";
import { writeStdout } from "./io.ts";
import {
  aliasesOf,
  CONTEXT_GROUP,
  helpLines,
  MODEL_ARG_HELP,
  MODEL_GROUP,
  modelPath,
  number,
  optionsOf,
  parseContextOptions,
  parseModelOptions,
  str,
  withFlagNamesAsync,
} from "./options.ts";
import { Llm } from "../llm/mod.ts";
import type { EmbeddingPooling } from "../embedding/mod.ts";

const POOLINGS = ["mean", "cls", "last", "none"];

const USAGE = `Usage: dotllm embed MODEL [-p TEXT]... [options]

Prints one embedding per input: each -p TEXT, else each non-empty line of stdin.
The inputs are decoded together, one sequence per slot. Default output: one line
per input, the values separated by spaces; --json: one JSON object per line,
{"index", "tokens", "embedding"} (pooling none: "embedding" is one array per token).
${MODEL_ARG_HELP}

Options:
  -p, --prompt TEXT         an input (repeatable)
      --pooling P           mean, cls, last or none (default: the model's, else mean)
      --embd-normalize N    -1 none, 0 max-abs (int16 range), 1 taxicab, 2 Euclidean
                            (default), N > 2 p-norm
      --json                JSON lines
${helpLines(MODEL_GROUP.help)}${helpLines(CONTEXT_GROUP.help)}`;

/** The `embed` command. */
export const embedCommand: Command = {
  name: "embed",
  summary: "print the embeddings of texts",
  usage: USAGE,
  aliases: aliasesOf([CONTEXT_GROUP]),
  options: optionsOf([MODEL_GROUP, CONTEXT_GROUP], {
    prompt: { type: "string", short: "p", multiple: true },
    pooling: { type: "string" },
    "embd-normalize": { type: "string" },
    json: { type: "boolean" },
  }),
  async run(values, positionals) {
    if (positionals.length !== 1) throw new UsageError("expected one MODEL argument");
    const pooling = str(values, "pooling");
    if (pooling !== undefined && !POOLINGS.includes(pooling)) {
      throw new UsageError(`--pooling must be one of ${POOLINGS.join(", ")}, got "${pooling}"`);
    }
    const normalize = number(values, "embd-normalize", 2, { integer: true });
    if (normalize < -1) throw new UsageError(`--embd-normalize must be >= -1, got ${normalize}`);
    const model = parseModelOptions(values);
    const context = parseContextOptions(values);
    const prompts = values.prompt as string[] | undefined;
    const inputs = prompts ??
      new TextDecoder().decode(readFileSync(0)).split(/\r?\n/).filter((l) => l.length > 0);
    if (inputs.length === 0) throw new UsageError("no input: give -p TEXT or lines on stdin");
    const path = await modelPath(positionals[0]);
    await withFlagNamesAsync(async () => {
      using llm = await Llm.load(path, { ...model, ...context });
      const vectors = await llm.embed(inputs, {
        pooling: pooling as EmbeddingPooling | undefined,
        normalize,
      });
      const E = llm.config.embeddingLength;
      const text = (x: number) => normalize === 0 ? String(Math.round(x)) : String(x);
      vectors.forEach((v, index) => {
        if (values.json !== true) {
          writeStdout(Array.from(v, text).join(" ") + "\n");
          return;
        }
        const rows = Array.from(
          { length: v.length / E },
          (_, r) => Array.from(v.subarray(r * E, (r + 1) * E)),
        );
        const embedding = pooling === "none" ? rows : rows[0];
        const tokens = llm.tokenize(inputs[index], { parseSpecial: true }).length;
        writeStdout(JSON.stringify({ index, tokens, embedding }) + "\n");
      });
    });
    return 0;
  },
};
