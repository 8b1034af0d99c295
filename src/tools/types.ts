/**
 * The shapes shared by tool-call formats, parsing and grammar building: OpenAI's
 * `tools` and `tool_choice` as the request gives them, the parsed assistant message
 * (llama.cpp's `common_chat_msg`), and the generation parameters of a format
 * (llama.cpp's `common_chat_params`).
 *
 * @module
 */

/** One function tool, as OpenAI's `tools[i]` holds it (`{type: "function", function}`). */
export interface ToolDefinition {
  type: "function";
  function: {
    name: string;
    description?: string;
    /** A JSON Schema of the arguments object; absent or `{}` means no arguments. */
    parameters?: Record<string, unknown>;
    strict?: boolean;
  };
}

/** OpenAI's `tool_choice`: `auto`, `none`, `required`, or one named function. */
export type ToolChoice =
  | "auto"
  | "none"
  | "required"
  | { type: "function"; function: { name: string } };

/** A parsed call: `arguments` is JSON text (partial while streaming). */
export interface ToolCall {
  /** The call id: the format's own (Mistral, Command R7B), else "" until assigned. */
  id: string;
  name: string;
  arguments: string;
}

/** The assistant message parsed from generated text (llama.cpp's `common_chat_msg`). */
export interface ParsedMessage {
  content: string;
  reasoningContent: string;
  toolCalls: ToolCall[];
}

/**
 * How a lazy grammar starts (llama.cpp's `common_grammar_trigger`):
 * - `word`: this literal text starts the constraint, which is fed from the word on;
 * - `pattern`: a regular expression searched in the generated text; the constraint is fed
 *   from the start of its first capture group if any, else of the match;
 * - `pattern_full`: the whole generated text must match the expression (same feeding);
 * - `token`: the token whose text this is.
 */
export interface GrammarTrigger {
  kind: "word" | "pattern" | "pattern_full" | "token";
  value: string;
}

/** llama-server's `--reasoning-format`: `none` keeps reasoning in the content. */
export type ReasoningFormat = "none" | "auto" | "deepseek";

/** The tool-call formats `detectToolFormat` recognises. */
export type ToolFormatName =
  | "generic"
  | "hermes"
  | "qwen3-coder"
  | "llama3"
  | "mistral-nemo"
  | "mistral-small"
  | "functionary-v3.1"
  | "functionary-v3.2"
  | "firefunction-v2"
  | "command-r7b"
  | "deepseek-r1"
  | "deepseek-v3.1"
  | "granite"
  | "gpt-oss";

/** A detected format with its template-dependent details. */
export interface ToolFormat {
  name: ToolFormatName;
  /** The reasoning block's opening tag ("" when the template has none). */
  thinkingStart: string;
  /** The reasoning block's closing tag ("" when the template has none). */
  thinkingEnd: string;
}

/** What generation needs for one request (llama.cpp's `common_chat_params`, minus the prompt). */
export interface ChatGenerationParams {
  format: ToolFormat;
  /** GBNF (accepted by `parseGbnf`), "" when nothing is constrained. */
  grammar: string;
  /** The grammar applies only from a trigger on (`tool_choice: "auto"`). */
  grammarLazy: boolean;
  grammarTriggers: GrammarTrigger[];
  /** Special tokens the tokenizer must keep whole (and the detokenizer print). */
  preservedTokens: string[];
  /** Stop strings beside the model's end-of-generation tokens. */
  additionalStops: string[];
  thinkingStartTag: string;
  thinkingEndTags: string[];
  /** The text the template adds for the assistant turn (parsing starts after it). */
  generationPrompt: string;
  /** The tools calls may name after `tool_choice` ([] for `none`): give them to the parser. */
  tools: ToolDefinition[];
  /** Their names. */
  toolNames: string[];
  parallelToolCalls: boolean;
}
