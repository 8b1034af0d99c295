/**
 * `dotllm chat MODEL`: a conversation with an instruct model through its chat
 * template. On a terminal: a prompt with line editing and history
 * (`node:readline`), multi-line input (a trailing `\`), the reply streamed,
 * `/clear`, `/system TEXT`, `/exit`; Ctrl-C interrupts a reply (the
 * conversation keeps what it got), Ctrl-D exits. Without a terminal on
 * stdin, each input line is one user turn and each reply is printed followed
 * by a blank line. Each turn prefills only the new tokens (see
 * {@linkcode ChatSession}); a one-line note per turn on stderr (hidden by
 * `-q`) gives the prefilled and cached token counts and the speeds.
 *
 * @module
 */
import process from "node:process";
import { createInterface, type Interface } from "node:readline";
import { isatty } from "node:tty";
import { readFileSync } from "node:fs";
import { ChatSession, ChatTemplateError, type ChatTurn } from "../chat/mod.ts";
import {
  checkToolChoice,
  checkTools,
  type ToolChoice,
  type ToolDefinition,
  ToolRequestError,
} from "../tools/mod.ts";
import { GgufError } from "../gguf/reader.ts";
import { ModelError } from "../model/mod.ts";
import { Llm } from "../llm/mod.ts";
import { TokenizerError } from "../tokenizer/mod.ts";
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
  SAMPLING_GROUP,
  withFlagNamesAsync,
} from "./options.ts";
import { type Command, type OptionValues, UsageError } from "./command.ts";
import { writeStderr, writeStdout } from "./io.ts";
import { warmUp } from "./terminal.ts";

const usage = `Usage: dotllm chat MODEL [options]

Chats with an instruct GGUF model through its chat template. On a terminal:
type a message and press Enter (end a line with \\ to continue it on the next);
/clear forgets the conversation, /system TEXT sets the system message, /exit
or Ctrl-D quits, Ctrl-C interrupts a reply. Without a terminal on stdin, each
line is one message and each reply is printed followed by a blank line.

${MODEL_ARG_HELP}

Options:
${helpLines(CHAT_TEMPLATE_GROUP.help)}${
  helpLines(SAMPLING_GROUP.help, {
    "n-predict": ["most tokens per reply; -1 = until end of turn (default -1)"],
  })
}${helpLines(GRAMMAR_GROUP.help, { grammar: ["constrain every reply to a GBNF grammar"] })}\
${helpLines(MODEL_GROUP.help)}${helpLines(CONTEXT_GROUP.help)}\
      --tools FILE         OpenAI function tools (a JSON array) the model may call: its
                           calls are constrained to them and printed as a JSON line
                           {"tool_calls": [...]} after the reply (nothing runs them)
      --tool-choice C      auto (default), required, none, or a tool's name
  -q, --quiet              no per-turn speed note on stderr
  -h, --help               this help
`;

interface ChatArgs extends GenerationArgs {
  model: string;
  quiet: boolean;
  tools?: ToolDefinition[];
  toolChoice?: ToolChoice;
}

/** A call's arguments as JSON, or as the text it is when it does not parse. */
function jsonOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** `--tools FILE` and `--tool-choice C`, checked as the server checks a request's. */
function parseToolArgs(values: OptionValues): Pick<ChatArgs, "tools" | "toolChoice"> {
  const file = values.tools, choice = values["tool-choice"];
  if (file === undefined) {
    if (choice !== undefined) throw new UsageError("--tool-choice needs --tools");
    return {};
  }
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(String(file), "utf8"));
  } catch (error) {
    throw new UsageError(`--tools ${file}: ${oneLine((error as Error).message)}`);
  }
  try {
    const tools = checkTools(raw);
    const asked = choice === undefined
      ? undefined
      : ["auto", "none", "required"].includes(String(choice))
      ? choice
      : { type: "function", function: { name: choice } };
    return { tools, toolChoice: checkToolChoice(asked, tools) };
  } catch (error) {
    if (error instanceof ToolRequestError) {
      throw new UsageError(`--tools ${file}: ${error.message}`);
    }
    throw error;
  }
}

function parseChatArgs(values: OptionValues, positionals: string[]): ChatArgs {
  if (positionals.length === 0) throw new UsageError("missing MODEL (a GGUF file)");
  if (positionals.length > 1) throw new UsageError(`unexpected argument "${positionals[1]}"`);
  return {
    model: positionals[0],
    ...parseGenerationArgs(values),
    quiet: values.quiet === true,
    ...parseToolArgs(values),
  };
}

async function loadModel(args: ChatArgs): Promise<Llm> {
  try {
    return await withFlagNamesAsync(() =>
      Llm.load(args.model, {
        contextSize: args.contextSize,
        batchSize: args.batchSize,
        cacheTypeK: args.cacheTypeK,
        cacheTypeV: args.cacheTypeV,
        threads: args.threads,
        repack: args.repack,
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

/** The per-turn note: what was prefilled (and what the cache already held), and the speeds. */
export function turnNote(turn: ChatTurn): string {
  const tokPerS = turn.decodeMs > 0 && turn.generatedTokens > 1
    ? ((turn.generatedTokens - 1) / turn.decodeMs * 1000).toFixed(1)
    : "-";
  return `[prefill ${turn.prefilledTokens} tokens (${turn.reusedTokens} cached) ` +
    `in ${turn.prefillMs.toFixed(1)} ms, first token after ${turn.firstTokenMs.toFixed(0)} ms, ` +
    `${turn.generatedTokens} tokens at ${tokPerS} tok/s` +
    (turn.finishReason === "interrupted" ? ", interrupted" : "") + "]\n";
}

/** What a line of input asks for. */
type Input =
  | { kind: "message"; text: string }
  | { kind: "clear" }
  | { kind: "system"; text: string }
  | { kind: "exit" }
  | { kind: "help" }
  | { kind: "unknown"; name: string };

function parseInput(text: string): Input {
  const command = /^\/(\w+)(?:\s+([\s\S]*))?$/.exec(text.trim());
  if (command === null) return { kind: "message", text };
  const [, name, rest] = command;
  switch (name) {
    case "clear":
      return { kind: "clear" };
    case "system":
      return { kind: "system", text: rest ?? "" };
    case "exit":
    case "quit":
      return { kind: "exit" };
    case "help":
      return { kind: "help" };
    default:
      return { kind: "unknown", name };
  }
}

const HELP = "/clear  forget the conversation\n/system TEXT  set the system message " +
  "(and clear)\n/exit  quit (or Ctrl-D)\nEnd a line with \\ to continue the message on the next.\n";

/** One conversation driven by lines of input. */
class ChatLoop {
  readonly session: ChatSession;
  readonly args: ChatArgs;
  readonly terminal: boolean;
  #abort?: AbortController;

  constructor(session: ChatSession, args: ChatArgs, terminal: boolean) {
    this.session = session;
    this.args = args;
    this.terminal = terminal;
  }

  get replying(): boolean {
    return this.#abort !== undefined;
  }

  /** Interrupts the reply in progress; false when there is none. */
  interrupt(): boolean {
    if (this.#abort === undefined) return false;
    this.#abort.abort();
    return true;
  }

  /** Handles one complete input; false to exit. */
  async handle(text: string): Promise<boolean> {
    const input = parseInput(text);
    const say = (line: string) => {
      if (this.terminal) writeStdout(line);
      else writeStderr(line);
    };
    switch (input.kind) {
      case "exit":
        return false;
      case "clear":
        this.session.clear();
        say("(conversation cleared)\n");
        return true;
      case "system":
        this.session.setSystem(input.text === "" ? undefined : input.text);
        say(input.text === "" ? "(system message removed)\n" : "(system message set)\n");
        return true;
      case "help":
        say(HELP);
        return true;
      case "unknown":
        say(`(unknown command /${input.name}: /help lists them)\n`);
        return true;
    }
    if (input.text.trim() === "") return true;
    this.#abort = new AbortController();
    let turn: ChatTurn;
    let ended = true;
    try {
      turn = await this.session.send(input.text, {
        maxTokens: this.args.nPredict,
        signal: this.#abort.signal,
        onText: (piece) => {
          writeStdout(piece);
          ended = piece.endsWith("\n");
        },
      });
    } catch (error) {
      // The message does not fit, or the template refuses the conversation: say so, keep going.
      if (error instanceof RangeError || error instanceof ChatTemplateError) {
        const hint = error instanceof RangeError ? "; -c/--ctx-size sets it" : "";
        writeStderr(`dotllm: ${oneLine(error.message)}${hint} (the message was not sent)\n`);
        return true;
      }
      throw error;
    } finally {
      this.#abort = undefined;
    }
    if (!ended || turn.text === "") writeStdout("\n");
    if (turn.message.toolCalls.length > 0) {
      // the calls the model made, for whoever runs them: one JSON line
      const calls = turn.message.toolCalls.map((c) => ({
        id: c.id,
        name: c.name,
        arguments: jsonOrText(c.arguments),
      }));
      writeStdout(JSON.stringify({ tool_calls: calls }) + "\n");
    }
    if (turn.finishReason === "interrupted" && this.terminal) writeStdout("(interrupted)\n");
    if (!this.terminal) writeStdout("\n");
    if (turn.droppedMessages > 0) {
      writeStderr(
        `dotllm: the context of ${this.session.contextSize} tokens is full: dropped the ` +
          `${turn.droppedMessages} oldest message${turn.droppedMessages === 1 ? "" : "s"}` +
          (this.session.messages[0]?.role === "system" ? " (the system message is kept)" : "") +
          "\n",
      );
    }
    if (turn.finishReason === "context") {
      writeStderr("dotllm: the reply filled the context; older turns go next turn\n");
    }
    if (!this.args.quiet) writeStderr(turnNote(turn));
    return true;
  }
}

/** Terminal mode: readline with history; Ctrl-C interrupts a reply, Ctrl-D exits. */
function runTerminal(loop: ChatLoop): Promise<void> {
  const rl: Interface = createInterface({
    input: process.stdin,
    output: process.stdout,
    terminal: true,
    historySize: 1000,
    prompt: "> ",
  });
  return new Promise<void>((resolve, reject) => {
    const queue: string[] = [];
    let pending = "";
    let working = false;
    let closed = false;
    const finish = () => {
      if (closed) return;
      closed = true;
      rl.close();
      resolve();
    };
    const next = async () => {
      if (working) return;
      working = true;
      try {
        while (queue.length > 0) {
          if (!(await loop.handle(queue.shift()!))) return finish();
        }
      } catch (error) {
        closed = true;
        rl.close();
        return reject(error);
      } finally {
        working = false;
      }
      if (!closed) rl.prompt();
    };
    rl.on("line", (line: string) => {
      if (loop.replying) return; // typed during a reply: dropped, as llama-cli does
      if (line.endsWith("\\")) {
        pending += line.slice(0, -1) + "\n";
        rl.setPrompt("... ");
        rl.prompt();
        return;
      }
      queue.push(pending + line);
      pending = "";
      rl.setPrompt("> ");
      void next();
    });
    rl.on("SIGINT", () => {
      if (loop.interrupt()) return;
      // At the prompt: drop the line being typed, like a shell.
      pending = "";
      writeStdout("^C (Ctrl-D or /exit to quit)\n");
      rl.setPrompt("> ");
      rl.write(null, { ctrl: true, name: "u" });
      rl.prompt();
    });
    rl.on("close", () => {
      if (closed) return;
      closed = true;
      loop.interrupt();
      writeStdout("\n");
      resolve();
    });
    writeStdout("dotllm chat: /help for commands, Ctrl-D to quit\n");
    rl.prompt();
  });
}

/** Pipe mode: each line is one user turn. */
async function runLines(loop: ChatLoop): Promise<number> {
  const onInterrupt = () => {
    if (!loop.interrupt()) process.exit(130);
  };
  process.on("SIGINT", onInterrupt);
  try {
    const rl = createInterface({ input: process.stdin, terminal: false });
    for await (const line of rl) {
      if (!(await loop.handle(line))) break;
    }
    return 0;
  } finally {
    process.off("SIGINT", onInterrupt);
  }
}

async function chat(values: OptionValues, positionals: string[]): Promise<number> {
  const args = parseChatArgs(values, positionals);
  args.model = await modelPath(args.model);
  const llm = await loadModel(args);
  try {
    const model = llm.model;
    warmUp(model.gguf.bytes, args.model);
    const tokenizer = llm.tokenizer;
    const template = cliChatTemplate(model.gguf, tokenizer, args.template, args.model);
    // A template that cannot render a first turn is an error now, not at the first message.
    try {
      const probe = [{ role: "user", content: "Hello" }];
      template.render(
        args.system === undefined ? probe : [{ role: "system", content: args.system }, ...probe],
      );
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(oneLine(`"${args.template ?? args.model}": ${message}`));
    }
    if (args.sampling.repeatLastN === -1) args.sampling.repeatLastN = llm.context.contextSize;
    if (args.grammar !== undefined) checkGrammar(args.grammar, tokenizer);
    const session = new ChatSession(llm, template, {
      system: args.system,
      sampling: args.sampling,
      seed: args.seed,
      grammar: args.grammar,
      tools: args.tools,
      toolChoice: args.toolChoice,
    });
    const terminal = isatty(0) && isatty(1);
    const loop = new ChatLoop(session, args, terminal);
    try {
      if (terminal) {
        await runTerminal(loop);
        return 0;
      }
      return await runLines(loop);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(oneLine(message));
    }
  } finally {
    llm.close();
  }
}

/** The `chat` command. */
export const chatCommand: Command = {
  name: "chat",
  summary: "chat with an instruct GGUF model through its chat template",
  usage,
  aliases: aliasesOf([CHAT_TEMPLATE_GROUP, CONTEXT_GROUP]),
  options: optionsOf([
    CHAT_TEMPLATE_GROUP,
    SAMPLING_GROUP,
    GRAMMAR_GROUP,
    MODEL_GROUP,
    CONTEXT_GROUP,
  ], {
    quiet: { type: "boolean", short: "q" },
    tools: { type: "string" },
    "tool-choice": { type: "string" },
  }),
  run: chat,
};
