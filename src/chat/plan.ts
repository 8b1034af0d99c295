/**
 * A chat request made ready to generate, written once for the server,
 * `Llm.chat` and `dotllm chat` (llama.cpp's `common_chat_templates_apply`):
 * the prompt rendered with the tools, the grammar the tool calls need (lazy
 * under `tool_choice: "auto"`, with its triggers), the format's extra stop
 * strings, and the options of the parser that splits the output into
 * content, reasoning and tool calls.
 *
 * @example
 * ```ts
 * import { ChatTemplate } from "./template.ts";
 * import { planChat } from "./plan.ts";
 * const template = ChatTemplate.builtin("chatml", { bosToken: "", eosToken: "<|im_end|>" });
 * const plan = planChat(template, { messages: [{ role: "user", content: "Hi" }] });
 * if (plan.grammar !== undefined || !plan.prompt.endsWith("<|im_start|>assistant\n")) throw new Error();
 * ```
 *
 * @module
 */
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
import { parseMessages, renderContent } from "./messages.ts";
import type { ChatMessage, ChatTemplate } from "./template.ts";

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
  /** The clock the template's `strftime_now` reads; default now. */
  now?: Date;
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
    now: input.now ?? new Date(), // one clock for both renders
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

/** A continued message's text as the template continues it (`render_content`: parts joined by a blank line). */
function messageText(m: ChatMessage): string {
  return renderContent(parseMessages([m])[0]);
}
