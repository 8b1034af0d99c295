/**
 * Chat messages to prompt text for the server: the chat module's
 * {@linkcode ChatTemplate} (rendered as llama.cpp renders it) over the
 * model's own `tokenizer.chat_template`, or the built-in ChatML when the
 * model has none (llama.cpp's fallback). The HTTP thread renders; the model
 * Worker only tokenizes and computes.
 *
 * @example
 * ```ts
 * import { chatRenderer } from "./chat_prompt.ts";
 * const render = chatRenderer({ bosToken: "", eosToken: "" });
 * const text = render([{ role: "user", content: "Hi" }], true);
 * if (text !== "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n") throw new Error(text);
 * ```
 *
 * @module
 */
import { type ChatMessage, ChatTemplate } from "../chat/mod.ts";
import { concatParts } from "../chat/messages.ts";
import type { GrammarTrigger } from "../grammar/mod.ts";
import {
  chatGenerationParams,
  detectToolFormat,
  generationPromptOf,
  type ParseOptions,
  type ReasoningFormat,
  type ToolChoice,
  type ToolDefinition,
} from "../tools/mod.ts";

export type { ChatMessage };

/** Renders a conversation to prompt text. */
export type ChatRenderer = (
  messages: readonly ChatMessage[],
  addGenerationPrompt: boolean,
  enableThinking?: boolean,
) => string;

/** A renderer over `source` (or ChatML), with the vocabulary's BOS/EOS texts and rules. */
export function chatRenderer(
  tokens: {
    source?: string;
    bosToken: string;
    eosToken: string;
    addBos?: boolean;
    addEos?: boolean;
  },
): ChatRenderer {
  const template = templateOf(tokens);
  return (messages, addGenerationPrompt, enableThinking) =>
    template.render(messages, { addGenerationPrompt, enableThinking });
}

/** What a chat request asks of the template and the output's parser. */
export interface ChatRequestInput {
  /** OpenAI messages (the template validates them). */
  messages: readonly ChatMessage[];
  tools?: readonly ToolDefinition[];
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
  /** `chat_template_kwargs`. */
  chatTemplateKwargs?: Readonly<Record<string, unknown>>;
  /** `enable_thinking` when the request decides it (structured output). */
  enableThinking?: boolean;
  /** OpenAI's `reasoning_effort` (`"none"` turns thinking off; others reach the template). */
  reasoningEffort?: string;
  /** How reasoning is returned (`reasoning_format`; default `auto`: apart, as `reasoning_content`). */
  reasoningFormat?: ReasoningFormat;
}

/**
 * A chat request made ready to generate: the prompt text, the constraint its
 * tool calls need (a grammar, lazy under `tool_choice: "auto"`), the extra
 * stop strings of its format, and how to parse the output into content,
 * reasoning and tool calls (llama.cpp's `common_chat_templates_apply`).
 */
export interface ChatPlan {
  prompt: string;
  grammar?: string;
  grammarTriggers?: GrammarTrigger[];
  /** The lazy grammar's trigger buffer starts with the generation prompt. */
  triggerPrefix?: string;
  stops: string[];
  /** The options of the output's parser (`ChatOutputStream`). */
  output: Omit<ParseOptions, "isPartial">;
  /** A continued assistant message's text: the reply starts with it (llama-server's echo). */
  echo: string;
}

/**
 * Plans a chat request on `template`. Throws the chat module's
 * `ChatInputError` / `ChatTemplateError` (bad messages, a template that
 * raises) and the grammar's `SchemaError` (a tool schema that cannot be
 * enforced).
 */
export function planChat(template: ChatTemplate, input: ChatRequestInput): ChatPlan {
  const format = detectToolFormat(template.source);
  const tools = input.tools !== undefined && input.tools.length > 0 ? input.tools : undefined;
  const options = {
    tools,
    chatTemplateKwargs: input.chatTemplateKwargs,
    enableThinking: input.enableThinking,
    reasoningEffort: input.reasoningEffort,
  };
  const prompt = template.render(input.messages, { ...options, addGenerationPrompt: true });
  const last = input.messages[input.messages.length - 1];
  const continued = last?.role === "assistant";
  // The text the template adds for the assistant's turn: what parsing starts after (a
  // continued assistant message renders no generation prompt).
  const generationPrompt = continued ||
      (format.thinkingStart === "" && tools === undefined)
    ? ""
    : generationPromptOf(
      prompt,
      template.render(input.messages, { ...options, addGenerationPrompt: false }),
    );
  // Whether the reply starts inside a reasoning block is read from the generation prompt
  // the template wrote (a template may ignore `enable_thinking`), as llama-server does.
  const params = chatGenerationParams({
    format,
    tools,
    toolChoice: input.toolChoice,
    parallelToolCalls: input.parallelToolCalls,
    generationPrompt,
  });
  const plan: ChatPlan = {
    prompt,
    stops: params.additionalStops,
    output: {
      format,
      tools: params.tools,
      generationPrompt,
      // llama-server returns a continued message whole, its reasoning block as content
      reasoningFormat: continued ? "none" : input.reasoningFormat ?? "auto",
    },
    echo: continued ? messageText(last) : "",
  };
  if (params.grammar !== "") {
    plan.grammar = params.grammar;
    if (params.grammarLazy) {
      plan.grammarTriggers = params.grammarTriggers;
      plan.triggerPrefix = generationPrompt;
    }
  }
  return plan;
}

/** A message's text: its content, or its text parts joined. */
function messageText(m: ChatMessage): string {
  const c = m.content;
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return concatParts(c);
  return "";
}

const templates = new WeakMap<object, ChatTemplate>();

/** The template of a model's chat info (compiled once per info object). */
export function templateOf(info: {
  source?: string;
  bosToken: string;
  eosToken: string;
  addBos?: boolean;
  addEos?: boolean;
}): ChatTemplate {
  let t = templates.get(info);
  if (t === undefined) {
    t = ChatTemplate.fromSpec(info.source ?? "chatml", {
      bosToken: info.bosToken,
      eosToken: info.eosToken,
      addBos: info.addBos,
      addEos: info.addEos,
    });
    templates.set(info, t);
  }
  return t;
}
