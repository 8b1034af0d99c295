/**
 * `dotllm run MODEL`: generate text from a prompt. stdout carries only the
 * generated text (streamed; `--json`: one object); the summary goes to stderr.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import process from "node:process";
import { isatty } from "node:tty";
import { warmUp } from "./terminal.ts";
import { GgufError } from "../gguf/reader.ts";
import type { GenerationResult, SpeculationConfig } from "../generation/mod.ts";
import { Llm } from "../llm/mod.ts";
import { describeArchitecture, ModelError } from "../model/mod.ts";
import { TokenizerError } from "../tokenizer/vocab.ts";
import { type Command, type OptionValues, UsageError } from "./command.ts";
import { writeStderr, writeStdout } from "./io.ts";
import { cliChatTemplate, oneLine } from "./_chat_template.ts";
import {
  aliasesOf,
  CHAT_TEMPLATE_GROUP,
  checkGrammar,
  CONTEXT_GROUP,
  type GenerationArgs,
  GRAMMAR_GROUP,
  helpLines,
  MODEL_ARG_HELP,
  MODEL_GROUP,
  modelPath,
  optionsOf,
  parseGenerationArgs,
  parseSpeculationOptions,
  SAMPLING_GROUP,
  SPECULATION_GROUP,
  str,
  withFlagNamesAsync,
} from "./options.ts";

const usage = `Usage: dotllm run MODEL [options]

Generates text from a prompt with a Llama-family GGUF model. The generated text
is streamed to stdout; a summary (model, sampling, timings, memory) to stderr.
Without -p/-f the prompt is read from stdin (when stdin is not a terminal).
${MODEL_ARG_HELP}

Options:
  -p, --prompt TEXT        the prompt
  -f, --file FILE          read the prompt from FILE (one trailing newline dropped)
${helpLines(SAMPLING_GROUP.help)}${helpLines(GRAMMAR_GROUP.help)}${helpLines(MODEL_GROUP.help)}\
${helpLines(CONTEXT_GROUP.help)}${helpLines(SPECULATION_GROUP.help)}\
      --stop S             stop before the string S (repeatable)
      --chat               the prompt is one user turn through the model's chat template
${
  helpLines(CHAT_TEMPLATE_GROUP.help, {
    "system-prompt": ["with --chat: a system message before it"],
  })
}      --echo               print the prompt before the generated text
      --json               print one JSON object instead of streamed text
  -q, --quiet              no summary on stderr
  -h, --help               this help
`;

interface RunArgs extends Omit<GenerationArgs, "system" | "template"> {
  model: string;
  prompt: string;
  stop: string[];
  echo: boolean;
  json: boolean;
  quiet: boolean;
  /** `--chat`: the prompt is one user turn (with `--system`) through this template (undefined: the model's). */
  chat?: { system?: string; template?: string };
  /** `-md` / `--spec-type`: speculative decoding. */
  speculation?: SpeculationConfig;
}

/** Drops one trailing newline, as llama.cpp does for `-f`. */
function chompNewline(text: string): string {
  if (text.endsWith("\r\n")) return text.slice(0, -2);
  return text.endsWith("\n") ? text.slice(0, -1) : text;
}

function readPrompt(values: OptionValues): string {
  const prompt = str(values, "prompt");
  const file = str(values, "file");
  if (prompt !== undefined && file !== undefined) {
    throw new UsageError("give the prompt with -p or -f, not both");
  }
  if (prompt !== undefined) return prompt;
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      const code = (error as { code?: string }).code;
      throw new Error(`cannot read prompt file "${file}"${code ? `: ${code}` : ""}`);
    }
    return chompNewline(text);
  }
  if (isatty(0)) throw new UsageError("no prompt: give -p TEXT, -f FILE, or pipe it on stdin");
  return chompNewline(readFileSync(0, "utf8"));
}

function parseRunArgs(values: OptionValues, positionals: string[]): RunArgs {
  if (positionals.length === 0) throw new UsageError("missing MODEL (a GGUF file)");
  if (positionals.length > 1) {
    throw new UsageError(`unexpected argument "${positionals[1]}" (quote the prompt after -p)`);
  }
  const { system, template, ...generation } = parseGenerationArgs(values);
  const stop = values.stop === undefined ? [] : (values.stop as string[]).map(String);
  if (stop.some((s) => s.length === 0)) throw new UsageError("--stop needs a non-empty string");
  const args: RunArgs = {
    model: positionals[0],
    prompt: "",
    ...generation,
    stop,
    echo: values.echo === true,
    json: values.json === true,
    quiet: values.quiet === true,
    speculation: parseSpeculationOptions(values),
  };
  if (values.chat === true) {
    args.chat = { system, template };
  } else if (system !== undefined || template !== undefined) {
    throw new UsageError("-sys/--system-prompt and --chat-template need --chat");
  }
  args.prompt = readPrompt(values);
  return args;
}

async function loadModel(args: RunArgs): Promise<Llm> {
  try {
    return await withFlagNamesAsync(() =>
      Llm.load(args.model, {
        contextSize: args.contextSize,
        batchSize: args.batchSize,
        cacheTypeK: args.cacheTypeK,
        cacheTypeV: args.cacheTypeV,
        threads: args.threads,
        repack: args.repack,
        speculation: args.speculation,
      })
    );
  } catch (error) {
    if (
      error instanceof GgufError || error instanceof ModelError || error instanceof TokenizerError
    ) {
      throw new Error(`"${args.model}": ${error.message}`);
    }
    throw error;
  }
}

function mib(bytes: number): string {
  return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
}

function row(label: string, ms: number, tokens?: number): string {
  const cells = [label.padEnd(12), `${ms.toFixed(2)} ms`.padStart(12)];
  if (tokens !== undefined) {
    cells.push(String(tokens).padStart(8));
    cells.push((tokens > 0 ? (ms / tokens).toFixed(2) : "-").padStart(10));
    cells.push((ms > 0 ? (tokens / ms * 1000).toFixed(1) : "-").padStart(10));
  }
  return cells.join("") + "\n";
}

function samplingLine(args: RunArgs): string {
  const s = args.sampling;
  if (s.temperature <= 0) {
    const penalty = s.repeatPenalty !== 1 ? `, repeat-penalty ${s.repeatPenalty}` : "";
    return `sampling: greedy${penalty}\n`;
  }
  return `sampling: temp ${s.temperature}, top-k ${s.topK}, top-p ${s.topP}, min-p ${s.minP}, ` +
    `repeat-penalty ${s.repeatPenalty} (last ${s.repeatLastN}), seed ${args.seed}\n`;
}

interface Summary {
  llm: Llm;
  args: RunArgs;
  result: GenerationResult;
  loadMs: number;
  totalMs: number;
}

function summaryText({ llm, args, result, loadMs, totalMs }: Summary): string {
  const c = llm.config;
  const t = result.timings;
  const context = llm.context;
  const m = context.memory;
  return "\n" +
    `model: ${c.architecture} "${c.name}", ${c.blockCount} layers, embedding ${c.embeddingLength}, ` +
    `vocab ${c.vocabSize}, ${llm.model.weights.typeName}, ${context.threadCount} threads, ` +
    `context ${context.contextSize}\n` +
    `arch: ${describeArchitecture(llm.model.architecture, c, c.headCountKv)}\n` +
    samplingLine(args) +
    `${"".padEnd(12)}${"time".padStart(12)}${"tokens".padStart(8)}${"ms/token".padStart(10)}` +
    `${"tok/s".padStart(10)}\n` +
    row("Load", loadMs) +
    row("Prompt eval", t.prefillMs, t.prefillTokens) +
    row("Generation", t.decodeMs + t.samplingMs, result.tokens.length) +
    row("Total", totalMs) +
    speculationLine(llm, t) +
    `memory: weights ${mib(m.weightsBytes)} mapped, KV cache ${mib(m.kvCacheBytes)} ` +
    `(${context.cache.cacheType}, ${context.cache.bytesPerToken} bytes/token), ` +
    `scratch ${mib(m.scratchBytes)}\n`;
}

function speculationLine(llm: Llm, t: GenerationResult["timings"]): string {
  if (llm.speculation === undefined) return "";
  const rate = t.draftedTokens > 0 ? (100 * t.acceptedTokens / t.draftedTokens).toFixed(1) : "-";
  return `speculation: ${llm.speculation}; drafted ${t.draftedTokens}, accepted ` +
    `${t.acceptedTokens} (${rate}%), drafting ${t.draftMs.toFixed(2)} ms\n`;
}

function jsonText({ llm, args, result, loadMs, totalMs }: Summary, prompt?: string): string {
  const context = llm.context;
  const t = result.timings;
  const perSecond = (n: number, ms: number) => (ms > 0 ? n / ms * 1000 : null);
  const generationMs = t.decodeMs + t.samplingMs;
  return JSON.stringify({
    ...(prompt === undefined ? {} : { prompt }),
    text: result.text,
    tokens: Array.from(result.tokens),
    finish_reason: result.finishReason,
    usage: {
      prompt_tokens: result.promptTokens.length,
      completion_tokens: result.tokens.length,
      total_tokens: result.promptTokens.length + result.tokens.length,
    },
    timings: {
      load_ms: loadMs,
      prefill_ms: t.prefillMs,
      prefill_tokens_per_second: perSecond(t.prefillTokens, t.prefillMs),
      decode_ms: t.decodeMs,
      sampling_ms: t.samplingMs,
      decode_tokens_per_second: perSecond(result.tokens.length, generationMs),
      total_ms: totalMs,
      draft_ms: t.draftMs,
    },
    ...(llm.speculation === undefined ? {} : {
      speculation: { drafted: t.draftedTokens, accepted: t.acceptedTokens },
    }),
    memory: {
      weights_bytes: context.memory.weightsBytes,
      kv_cache_bytes: context.memory.kvCacheBytes,
      scratch_bytes: context.memory.scratchBytes,
    },
    seed: args.seed,
    threads: context.threadCount,
  }) + "\n";
}

async function run(values: OptionValues, positionals: string[]): Promise<number> {
  const args = parseRunArgs(values, positionals); // reads the prompt (maybe stdin)
  args.model = await modelPath(args.model);
  if (args.speculation?.draftModel !== undefined) {
    args.speculation.draftModel = await modelPath(args.speculation.draftModel);
  }
  const start = performance.now();
  const llm = await loadModel(args);
  try {
    const model = llm.model;
    warmUp(model.gguf.bytes, args.model);
    const tokenizer = llm.tokenizer;
    let rendered: string | undefined;
    if (args.chat !== undefined) {
      const template = cliChatTemplate(model.gguf, tokenizer, args.chat.template, args.model);
      const messages = args.chat.system === undefined
        ? [{ role: "user", content: args.prompt }]
        : [{ role: "system", content: args.chat.system }, { role: "user", content: args.prompt }];
      try {
        rendered = template.render(messages);
      } catch (error) {
        throw new Error(
          oneLine(`"${args.chat.template ?? args.model}": ${(error as Error).message}`),
        );
      }
    }
    if (args.sampling.repeatLastN === -1) args.sampling.repeatLastN = llm.context.contextSize;
    if (args.grammar !== undefined) checkGrammar(args.grammar, tokenizer);
    const loadMs = performance.now() - start;

    const interrupt = new AbortController();
    const onInterrupt = () => interrupt.abort();
    process.on("SIGINT", onInterrupt);
    let result: GenerationResult;
    try {
      if (args.echo && !args.json) writeStdout(rendered ?? args.prompt);
      result = await llm.complete(rendered ?? args.prompt, {
        ...args.sampling,
        seed: args.seed,
        maxTokens: args.nPredict,
        stop: args.stop,
        grammar: args.grammar,
        onText: args.json ? undefined : writeStdout,
        collectText: args.json,
        signal: interrupt.signal,
      });
    } catch (error) {
      if (error instanceof RangeError && /longer than the context/.test(error.message)) {
        throw new Error(`${error.message} (raise -c/--ctx-size)`);
      }
      throw error;
    } finally {
      process.off("SIGINT", onInterrupt);
    }
    const summary = { llm, args, result, loadMs, totalMs: performance.now() - start };
    if (args.json) {
      writeStdout(jsonText(summary, rendered));
    }
    if (!args.quiet) {
      if (result.finishReason === "context") {
        writeStderr(
          `\ndotllm: note: the context of ${llm.context.contextSize} tokens is full; ` +
            "generation stopped (raise -c/--ctx-size)\n",
        );
      }
      writeStderr(summaryText(summary));
    }
    return result.finishReason === "interrupted" ? 130 : 0;
  } finally {
    llm.close();
  }
}

/** The `run` command. */
export const runCommand: Command = {
  name: "run",
  summary: "generate text from a prompt with a Llama-family GGUF model",
  usage,
  aliases: aliasesOf([CHAT_TEMPLATE_GROUP, SPECULATION_GROUP, CONTEXT_GROUP]),
  options: optionsOf([
    SAMPLING_GROUP,
    GRAMMAR_GROUP,
    MODEL_GROUP,
    CONTEXT_GROUP,
    SPECULATION_GROUP,
    CHAT_TEMPLATE_GROUP,
  ], {
    prompt: { type: "string", short: "p" },
    file: { type: "string", short: "f" },
    stop: { type: "string", multiple: true },
    echo: { type: "boolean" },
    chat: { type: "boolean" },
    json: { type: "boolean" },
    quiet: { type: "boolean", short: "q" },
  }),
  run,
};
