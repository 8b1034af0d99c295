/**
 * The option groups the commands that open a model share, declared once:
 * model (threads, repacking), context (`-c`, `-b`, `--cache-type`), sampling
 * (`--temp` … `--seed`, `-n`) and chat template (`--chat-template`, `-sys`).
 * Each group is its `parseArgs` options, its help lines and a parser. The
 * names are llama.cpp's (`llama-cli`, `llama-server`).
 *
 * The CLI only parses: a value that is not a number (or not an integer where
 * one is needed) is a {@linkcode UsageError} here. Ranges are the library's:
 * the sampling values go through `resolveSamplerParams` and the seed through
 * `checkSeed` before any model loads, and a `RangeError` the library throws
 * while loading for a context option (`contextSize`, `batchSize`, `threads`)
 * becomes a usage error too ({@linkcode usageFromRange}), so an
 * out-of-range value is one line and exit code 2 from every command.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import type { ParseArgsConfig } from "node:util";
import { BUILTIN_TEMPLATES, ChatTemplate, isBuiltinTemplateName } from "../chat/mod.ts";
import {
  compileGrammar,
  type ConstraintTokenizer,
  GrammarError,
  jsonSchemaToGrammar,
  SchemaError,
} from "../grammar/mod.ts";
import {
  SPECULATION_TYPES,
  type SpeculationConfig,
  type SpeculationType,
} from "../generation/mod.ts";
import { resolveModel } from "../hub/resolve.ts";
import { CACHE_TYPES, type CacheType, isCacheType } from "../model/mod.ts";
import {
  checkSeed,
  DEFAULT_SAMPLER_PARAMS,
  randomSeed,
  resolveSamplerParams,
  type SamplerParams,
} from "../sampler/mod.ts";
import { oneLine, templateSpec } from "./_chat_template.ts";
import { type OptionValues, UsageError } from "./command.ts";

type Options = NonNullable<ParseArgsConfig["options"]>;

/** One option's help: its flag column (`-c, --ctx-size N`) and its text lines. */
export interface HelpEntry {
  /** The option's long name (the `parseArgs` key). */
  name: string;
  flag: string;
  text: string[];
}

/** A group of options: what `parseArgs` takes and what `--help` prints. */
export interface OptionGroup {
  options: Options;
  help: HelpEntry[];
  /** Spellings `parseArgs` cannot take (`-sys`), each mapped to an option. */
  aliases?: Record<string, string>;
}

const FLAG_WIDTH = 25;

/** The help lines of `entries`, `overrides` (by option name) replacing an entry's text. */
export function helpLines(
  entries: HelpEntry[],
  overrides: Readonly<Record<string, string[]>> = {},
): string {
  let out = "";
  for (const e of entries) {
    const text = overrides[e.name] ?? e.text;
    const head = "  " + e.flag;
    const pad = head.length < FLAG_WIDTH + 2 ? " ".repeat(FLAG_WIDTH + 2 - head.length) : " ";
    out += head + pad + text[0] + "\n";
    for (const line of text.slice(1)) out += " ".repeat(FLAG_WIDTH + 2) + line + "\n";
  }
  return out;
}

/** The `parseArgs` options of several groups (and a command's own). */
export function optionsOf(groups: OptionGroup[], own: Options = {}): Options {
  return Object.assign({}, ...groups.map((g) => g.options), own);
}

/** The aliases of several groups. */
export function aliasesOf(groups: OptionGroup[]): Record<string, string> {
  return Object.assign({}, ...groups.map((g) => g.aliases ?? {}));
}

/** The last value of string option `name`. */
export function str(values: OptionValues, name: string): string | undefined {
  const v = values[name];
  if (Array.isArray(v)) return String(v[v.length - 1]);
  return typeof v === "string" ? v : undefined;
}

/**
 * Numeric option `flag`, parsed (not range-checked: the library does that);
 * `fallback` when absent. A non-number is a {@linkcode UsageError} naming the flag.
 */
export function number(
  values: OptionValues,
  flag: string,
  fallback: number,
  options?: { integer?: boolean },
): number;
export function number(
  values: OptionValues,
  flag: string,
  fallback?: undefined,
  options?: { integer?: boolean },
): number | undefined;
export function number(
  values: OptionValues,
  flag: string,
  fallback?: number,
  { integer = false } = {},
): number | undefined {
  const text = str(values, flag);
  if (text === undefined) return fallback;
  const value = text.trim() === "" ? NaN : Number(text);
  if (!Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    throw new UsageError(`--${flag} must be ${integer ? "an integer" : "a number"}, got "${text}"`);
  }
  return value;
}

/** The library's parameter names and the flags that set them. */
const FLAG_OF: Readonly<Record<string, string>> = {
  temperature: "--temp",
  topK: "--top-k",
  topP: "--top-p",
  minP: "--min-p",
  repeatPenalty: "--repeat-penalty",
  repeatLastN: "--repeat-last-n",
  frequencyPenalty: "--frequency-penalty",
  presencePenalty: "--presence-penalty",
  seed: "--seed",
  contextSize: "-c/--ctx-size",
  "context size": "-c/--ctx-size",
  batchSize: "-b/--batch-size",
  threads: "-t/--threads",
  slots: "--parallel",
  "draft n-max": "--spec-draft-n-max",
  "draft n-min": "--spec-draft-n-min",
  "draft p-min": "--spec-draft-p-min",
  "ngram-simple size n": "--spec-ngram-simple-size-n",
  "ngram-simple size m": "--spec-ngram-simple-size-m",
};

/**
 * A library `RangeError` about an option (its message starts with the
 * parameter's name, e.g. `temperature must be >= 0`) as a
 * {@linkcode UsageError} naming the flag; anything else: undefined.
 */
export function usageFromRange(error: unknown): UsageError | undefined {
  if (!(error instanceof RangeError)) return undefined;
  for (const [name, flag] of Object.entries(FLAG_OF)) {
    if (error.message.startsWith(name + " ")) {
      return new UsageError(flag + error.message.slice(name.length));
    }
  }
  return undefined;
}

/** Runs `f`, turning a library `RangeError` about an option into a usage error. */
export function withFlagNames<T>(f: () => T): T {
  try {
    return f();
  } catch (error) {
    throw usageFromRange(error) ?? error;
  }
}

/** The async form of {@linkcode withFlagNames}. */
export async function withFlagNamesAsync<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (error) {
    throw usageFromRange(error) ?? error;
  }
}

// ---------------------------------------------------------------------------
// MODEL: every command that opens a model.

/**
 * The local path of a command's MODEL argument: the one way every command
 * that opens a model reads it. A file path is returned as it is; a Hub
 * reference (`owner/repo[:quant]`, `owner/repo/FILE.gguf`, `hf:…`, a URL) is
 * pulled into the Hugging Face cache first when missing.
 */
export function modelPath(arg: string): Promise<string> {
  return resolveModel(arg);
}

/** The MODEL argument's help line. */
export const MODEL_ARG_HELP =
  "MODEL: a GGUF file, or a Hugging Face Hub reference (owner/repo[:QUANT],\n" +
  "owner/repo/FILE.gguf, hf:...), pulled into the cache when missing.";

/** `-t` and `--no-repack`. */
export const MODEL_GROUP: OptionGroup = {
  options: {
    threads: { type: "string", short: "t" },
    "no-repack": { type: "boolean" },
  },
  help: [
    { name: "threads", flag: "-t, --threads N", text: ["threads; 0 = every CPU (default 0)"] },
    {
      name: "no-repack",
      flag: "    --no-repack",
      text: [
        "compute from the file's pages (default: copy matmul weights",
        "at load, Q4_0/Q4_1/IQ4_NL/Q4_K into a faster layout where",
        "the CPU has one, the rest as they are, into huge pages)",
      ],
    },
  ],
};

/** The model group's values. */
export interface ModelOptions {
  /** 0 = every CPU; the library bounds it. */
  threads: number;
  repack: boolean;
}

/** Parses the model group. */
export function parseModelOptions(values: OptionValues): ModelOptions {
  return {
    threads: number(values, "threads", 0, { integer: true }),
    repack: values["no-repack"] !== true,
  };
}

// ---------------------------------------------------------------------------
// CONTEXT

/** `-c`, `-b`, `--cache-type`, `-ctk`, `-ctv`. */
export const CONTEXT_GROUP: OptionGroup = {
  options: {
    "ctx-size": { type: "string", short: "c" },
    "batch-size": { type: "string", short: "b" },
    "cache-type": { type: "string" },
    "cache-type-k": { type: "string" },
    "cache-type-v": { type: "string" },
  },
  aliases: { "-ctk": "--cache-type-k", "-ctv": "--cache-type-v" },
  help: [
    {
      name: "ctx-size",
      flag: "-c, --ctx-size N",
      text: ["context length; 0 = the model's (default min(model's, 4096))"],
    },
    {
      name: "batch-size",
      flag: "-b, --batch-size N",
      text: ["prompt tokens per batch (default 512)"],
    },
    {
      name: "cache-type-k",
      flag: "-ctk, --cache-type-k T",
      text: [`KV cache type of K: ${CACHE_TYPES.join(", ")} (default f16)`],
    },
    {
      name: "cache-type-v",
      flag: "-ctv, --cache-type-v T",
      text: ["KV cache type of V, as -ctk (default f16)"],
    },
    {
      name: "cache-type",
      flag: "    --cache-type T",
      text: ["KV cache type of both K and V (-ctk/-ctv override it)"],
    },
  ],
};

/** The context group's values (undefined: the library's default). */
export interface ContextOptions {
  /** 0 = the model's; undefined = min(model's, 4096). */
  contextSize?: number;
  batchSize?: number;
  cacheTypeK: CacheType;
  cacheTypeV: CacheType;
}

/** A cache type option's value, or a usage error naming the valid ones. */
function cacheTypeOption(values: OptionValues, name: string, fallback: CacheType): CacheType {
  const value = str(values, name);
  if (value === undefined) return fallback;
  if (!isCacheType(value)) {
    throw new UsageError(
      `--${name} must be one of ${CACHE_TYPES.join(", ")}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/** Parses the context group (the cache types are choices, checked here). */
export function parseContextOptions(values: OptionValues): ContextOptions {
  const both = cacheTypeOption(values, "cache-type", "f16");
  return {
    contextSize: number(values, "ctx-size", undefined, { integer: true }),
    batchSize: number(values, "batch-size", undefined, { integer: true }),
    cacheTypeK: cacheTypeOption(values, "cache-type-k", both),
    cacheTypeV: cacheTypeOption(values, "cache-type-v", both),
  };
}

// ---------------------------------------------------------------------------
// SAMPLING

const d = DEFAULT_SAMPLER_PARAMS;

/** `-n`, `--temp`, `--top-k`, `--top-p`, `--min-p`, the penalties, `-s`. */
export const SAMPLING_GROUP: OptionGroup = {
  options: {
    "n-predict": { type: "string", short: "n" },
    temp: { type: "string" },
    "top-k": { type: "string" },
    "top-p": { type: "string" },
    "min-p": { type: "string" },
    "repeat-penalty": { type: "string" },
    "repeat-last-n": { type: "string" },
    "presence-penalty": { type: "string" },
    "frequency-penalty": { type: "string" },
    seed: { type: "string", short: "s" },
  },
  help: [
    {
      name: "n-predict",
      flag: "-n, --n-predict N",
      text: ["tokens to generate; -1 = until end of text or context full (default -1)"],
    },
    {
      name: "temp",
      flag: "    --temp T",
      text: [`temperature, >= 0; 0 = greedy (default ${d.temperature})`],
    },
    {
      name: "top-k",
      flag: "    --top-k K",
      text: [`keep the K most likely tokens; 0 = all (default ${d.topK})`],
    },
    {
      name: "top-p",
      flag: "    --top-p P",
      text: [`nucleus sampling, in [0, 1]; 1 = off (default ${d.topP})`],
    },
    {
      name: "min-p",
      flag: "    --min-p P",
      text: [`drop tokens below P × the best one's probability (default ${d.minP})`],
    },
    {
      name: "repeat-penalty",
      flag: "    --repeat-penalty R",
      text: [`penalise recent tokens, > 0; 1 = off (default ${d.repeatPenalty.toFixed(1)})`],
    },
    {
      name: "repeat-last-n",
      flag: "    --repeat-last-n N",
      text: [`tokens the penalties look back over; -1 = the context (default ${d.repeatLastN})`],
    },
    {
      name: "presence-penalty",
      flag: "    --presence-penalty P",
      text: [`subtract P from recent tokens' logits (default ${d.presencePenalty})`],
    },
    {
      name: "frequency-penalty",
      flag: "    --frequency-penalty P",
      text: [`subtract count × P (default ${d.frequencyPenalty})`],
    },
    {
      name: "seed",
      flag: "-s, --seed S",
      text: ["random seed, 0 to 4294967295; -1 = random (default)"],
    },
  ],
};

/** The sampling group's values. */
export interface SamplingOptions {
  /** Every parameter (defaults filled), checked by the library; `repeatLastN` -1 kept as -1. */
  sampling: SamplerParams;
  /** Only the parameters given on the command line (the server's defaults). */
  given: Partial<SamplerParams>;
  /** The seed; undefined = random (`-1` or absent). */
  seed?: number;
  /** `-n`: -1 = no limit; undefined when absent. */
  nPredict?: number;
}

/** Parses the sampling group; out-of-range values are usage errors from the library's checks. */
export function parseSamplingOptions(values: OptionValues): SamplingOptions {
  const fields: [keyof SamplerParams, string, boolean][] = [
    ["temperature", "temp", false],
    ["topK", "top-k", true],
    ["topP", "top-p", false],
    ["minP", "min-p", false],
    ["repeatPenalty", "repeat-penalty", false],
    ["repeatLastN", "repeat-last-n", true],
    ["presencePenalty", "presence-penalty", false],
    ["frequencyPenalty", "frequency-penalty", false],
  ];
  const given: Partial<SamplerParams> = {};
  for (const [key, flag, integer] of fields) {
    const v = number(values, flag, undefined, { integer });
    if (v !== undefined) given[key] = v;
  }
  // -1 ("the whole context") is resolved once the context is known; the library checks the rest.
  const lastN = given.repeatLastN;
  const sampling = withFlagNames(() =>
    resolveSamplerParams(lastN === -1 ? { ...given, repeatLastN: 0 } : given)
  );
  if (lastN === -1) sampling.repeatLastN = -1;
  const seed = number(values, "seed", undefined, { integer: true });
  if (seed !== undefined && seed !== -1) withFlagNames(() => checkSeed(seed));
  const nPredict = number(values, "n-predict", undefined, { integer: true });
  // The token budget belongs to the generation core, which takes any negative as "no limit";
  // only -1 is documented, so other negatives are refused here.
  if (nPredict !== undefined && nPredict < -1) {
    throw new UsageError(`-n/--n-predict must be -1 or >= 0, got ${nPredict}`);
  }
  return {
    sampling,
    given,
    seed: seed === undefined || seed === -1 ? undefined : seed,
    nPredict,
  };
}

// ---------------------------------------------------------------------------
// CHAT TEMPLATE

/** `--chat-template NAME|FILE` and `-sys/--system-prompt TEXT` (`--system` also works). */
export const CHAT_TEMPLATE_GROUP: OptionGroup = {
  options: {
    "chat-template": { type: "string" },
    "system-prompt": { type: "string" },
  },
  aliases: { "-sys": "--system-prompt", "--system": "--system-prompt" },
  help: [
    {
      name: "chat-template",
      flag: "    --chat-template T",
      text: [
        "a Jinja template FILE, or chatml, llama3, gemma, phi3, mistral",
        "(default: the model's own)",
      ],
    },
    {
      name: "system-prompt",
      flag: "-sys, --system-prompt TEXT",
      text: ["the system message (default: the template's own, if any)"],
    },
  ],
};

/** The chat template group's values. */
export interface ChatTemplateOptions {
  /** `--chat-template` as given (a built-in name or a file). */
  template?: string;
  system?: string;
}

/** Parses the chat template group. */
export function parseChatTemplateOptions(values: OptionValues): ChatTemplateOptions {
  return { template: str(values, "chat-template"), system: str(values, "system-prompt") };
}

// ---------------------------------------------------------------------------
// GRAMMAR: structured output.

/** `--grammar`, `--grammar-file`, `-j/--json-schema`, `--json-schema-file` (llama.cpp's flags). */
export const GRAMMAR_GROUP: OptionGroup = {
  options: {
    grammar: { type: "string" },
    "grammar-file": { type: "string" },
    "json-schema": { type: "string", short: "j" },
    "json-schema-file": { type: "string" },
  },
  help: [
    {
      name: "grammar",
      flag: "    --grammar GBNF",
      text: ["constrain the output to a GBNF grammar (llama.cpp's format)"],
    },
    { name: "grammar-file", flag: "    --grammar-file F", text: ["the grammar, from a file"] },
    {
      name: "json-schema",
      flag: "-j, --json-schema JSON",
      text: ["constrain the output to JSON valid under this JSON Schema"],
    },
    {
      name: "json-schema-file",
      flag: "    --json-schema-file F",
      text: ["the schema, from a file"],
    },
  ],
};

function readTextFile(flag: string, path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    const code = (error as { code?: string }).code;
    throw new UsageError(`--${flag}: cannot read "${path}"${code ? `: ${code}` : ""}`);
  }
}

/**
 * The GBNF text the grammar group asks for (a schema converted as llama.cpp
 * converts it), or undefined. Two of the four flags, an unreadable file,
 * JSON that does not parse or a schema keyword that cannot be enforced are
 * usage errors; the grammar itself is checked against the model's
 * vocabulary once it loads ({@linkcode checkGrammar}).
 */
export function parseGrammarOption(values: OptionValues): string | undefined {
  const given = ["grammar", "grammar-file", "json-schema", "json-schema-file"]
    .filter((f) => str(values, f) !== undefined);
  if (given.length > 1) {
    throw new UsageError(`give one of --${given.join(", --")}, not several`);
  }
  const flag = given[0];
  if (flag === undefined) return undefined;
  const value = str(values, flag)!;
  if (flag === "grammar") return value;
  if (flag === "grammar-file") return readTextFile(flag, value);
  const text = flag === "json-schema" ? value : readTextFile(flag, value);
  let schema: unknown;
  try {
    schema = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`--${flag}: not JSON: ${(error as Error).message}`);
  }
  try {
    return jsonSchemaToGrammar(schema);
  } catch (error) {
    if (error instanceof SchemaError) throw new UsageError(`--${flag}: ${error.message}`);
    throw error;
  }
}

/** Compiles `grammar` for `tokenizer` (cached for the generation); a bad grammar is a usage error. */
export function checkGrammar(grammar: string, tokenizer: ConstraintTokenizer): void {
  try {
    compileGrammar(grammar, tokenizer);
  } catch (error) {
    if (error instanceof GrammarError) throw new UsageError(error.message);
    throw error;
  }
}

/** What a generating command (`run`, `chat`) reads of the four groups, resolved. */
export interface GenerationArgs {
  nPredict: number;
  threads: number;
  repack: boolean;
  sampling: SamplerParams;
  /** The given seed, or a random one. */
  seed: number;
  contextSize?: number;
  batchSize: number;
  cacheTypeK: CacheType;
  cacheTypeV: CacheType;
  /** `-sys` and `--chat-template` as given. */
  system?: string;
  template?: string;
  /** GBNF text the output must match (`--grammar`, `-j` ...). */
  grammar?: string;
}

/** Parses the model, context, sampling, chat template and grammar groups of a generating command. */
export function parseGenerationArgs(values: OptionValues): GenerationArgs {
  const model = parseModelOptions(values);
  const context = parseContextOptions(values);
  const sampling = parseSamplingOptions(values);
  const template = parseChatTemplateOptions(values);
  return {
    nPredict: sampling.nPredict ?? -1,
    threads: model.threads,
    repack: model.repack,
    sampling: sampling.sampling,
    seed: sampling.seed ?? randomSeed(),
    contextSize: context.contextSize,
    batchSize: context.batchSize ?? 512,
    cacheTypeK: context.cacheTypeK,
    cacheTypeV: context.cacheTypeV,
    system: template.system,
    template: template.template,
    grammar: parseGrammarOption(values),
  };
}

/**
 * The Jinja source `--chat-template VALUE` names: a built-in's text, or a
 * file read whole; checked to parse. Failures are one line.
 */
export function chatTemplateSource(value: string): string {
  const spec = templateSpec(value);
  const source = isBuiltinTemplateName(spec) ? BUILTIN_TEMPLATES[spec] : spec;
  try {
    ChatTemplate.fromSpec(source, { bosToken: "", eosToken: "" });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new Error(oneLine(`"${value}": ${message}`));
  }
  return source;
}

// ---------------------------------------------------------------------------
// SPECULATION

/** llama.cpp's `--spec-type` names dotllm does not implement (refused by name). */
const SPEC_TYPES_LLAMA_CPP = [
  "draft-eagle3",
  "draft-mtp",
  "draft-dflash",
  "draft-dspark",
  "ngram-map-k",
  "ngram-map-k4v",
  "ngram-mod",
  "ngram-cache",
];

/** `-md/--spec-draft-model`, `--spec-type` and their sizes (llama.cpp 2026-10's names). */
export const SPECULATION_GROUP: OptionGroup = {
  options: {
    "spec-draft-model": { type: "string" },
    "spec-type": { type: "string" },
    "spec-draft-n-max": { type: "string" },
    "spec-draft-n-min": { type: "string" },
    "spec-draft-p-min": { type: "string" },
    "spec-ngram-simple-size-n": { type: "string" },
    "spec-ngram-simple-size-m": { type: "string" },
  },
  aliases: {
    "-md": "--spec-draft-model",
    "--model-draft": "--spec-draft-model",
    "--draft-p-min": "--spec-draft-p-min",
  },
  help: [
    {
      name: "spec-draft-model",
      flag: "-md, --spec-draft-model F",
      text: [
        "speculative decoding with draft model F (a GGUF of the same",
        "vocabulary): the output stays this model's, token for token",
      ],
    },
    {
      name: "spec-type",
      flag: "    --spec-type T",
      text: [
        "none, draft-simple (with -md) or ngram-simple (prompt lookup:",
        "drafts what followed the last n tokens earlier; no draft model)",
      ],
    },
    {
      name: "spec-draft-n-max",
      flag: "    --spec-draft-n-max N",
      text: ["tokens the draft model drafts per step (default 3)"],
    },
    {
      name: "spec-draft-n-min",
      flag: "    --spec-draft-n-min N",
      text: ["drafts shorter than N are not verified (default 0)"],
    },
    {
      name: "spec-draft-p-min",
      flag: "    --spec-draft-p-min P",
      text: ["stop drafting below this draft probability (default 0)"],
    },
    {
      name: "spec-ngram-simple-size-n",
      flag: "    --spec-ngram-simple-size-n N",
      text: ["ngram-simple: tokens of the n-gram looked up (default 12)"],
    },
    {
      name: "spec-ngram-simple-size-m",
      flag: "    --spec-ngram-simple-size-m N",
      text: ["ngram-simple: most tokens drafted after a match (default 48)"],
    },
  ],
};

/**
 * Parses the speculation group: undefined without `-md` or `--spec-type`
 * (or with `--spec-type none`). A size without a speculation to apply to, a
 * type dotllm lacks, or draft-simple without a draft model is a usage
 * error; ranges are the library's.
 */
export function parseSpeculationOptions(values: OptionValues): SpeculationConfig | undefined {
  const draftModel = str(values, "spec-draft-model");
  const typeName = str(values, "spec-type");
  const sizes: [keyof SpeculationConfig, string, boolean][] = [
    ["draftMax", "spec-draft-n-max", true],
    ["draftMin", "spec-draft-n-min", true],
    ["pMin", "spec-draft-p-min", false],
    ["ngramSizeN", "spec-ngram-simple-size-n", true],
    ["ngramSizeM", "spec-ngram-simple-size-m", true],
  ];
  const config: SpeculationConfig = {};
  for (const [key, flag, integer] of sizes) {
    const v = number(values, flag, undefined, { integer });
    if (v !== undefined) (config as Record<string, number>)[key] = v;
  }
  let type: SpeculationType | undefined;
  if (typeName !== undefined && typeName !== "none") {
    if (!(SPECULATION_TYPES as readonly string[]).includes(typeName)) {
      const known = SPEC_TYPES_LLAMA_CPP.includes(typeName)
        ? " (llama.cpp's; not implemented)"
        : "";
      throw new UsageError(
        `--spec-type must be none, ${SPECULATION_TYPES.join(" or ")}, got "${typeName}"${known}`,
      );
    }
    type = typeName as SpeculationType;
  }
  if (typeName === "none" || (type === undefined && draftModel === undefined)) {
    const given = sizes.find(([, flag]) => values[flag] !== undefined);
    if (given !== undefined || (typeName === "none" && draftModel !== undefined)) {
      throw new UsageError(
        `--${
          given?.[1] ?? "spec-draft-model"
        } needs speculation: -md FILE or --spec-type ngram-simple`,
      );
    }
    return undefined;
  }
  type ??= "draft-simple";
  if (type === "draft-simple" && draftModel === undefined) {
    throw new UsageError("--spec-type draft-simple needs a draft model (-md FILE)");
  }
  if (type === "ngram-simple" && draftModel !== undefined) {
    throw new UsageError("--spec-type ngram-simple takes no draft model (-md)");
  }
  return { ...config, type, draftModel };
}
