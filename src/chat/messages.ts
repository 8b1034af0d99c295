/**
 * OpenAI chat messages and tools turned into what a template receives, as
 * llama.cpp's `common/chat.cpp` does it: `common_chat_msgs_parse_oaicompat`
 * (validation), `to_json_oaicompat` (the key order templates see: role,
 * content, reasoning_content, name, tool_call_id, tool_calls), the content
 * normalization the template's caps ask for, and the workarounds
 * (`developer` → `system`, system folded into the next message, object
 * arguments).
 *
 * @example
 * ```ts
 * import { parseMessages, messageToJson } from "./messages.ts";
 * const [m] = parseMessages([{ role: "assistant", content: null, tool_calls: [
 *   { id: "abc123XYZ", type: "function", function: { name: "f", arguments: "{}" } },
 * ] }]);
 * const json = messageToJson(m);
 * if (json.content !== "" || (json.tool_calls as unknown[]).length !== 1) throw new Error();
 * ```
 *
 * @module
 */
import type { ToolDefinition } from "../tools/types.ts";

/** One part of a message's content array. */
export interface ContentPart {
  type: string;
  text: string;
}

/** A tool call of an assistant message, OpenAI's shape. */
export interface ToolCall {
  id?: string;
  type: "function";
  function: { name: string; arguments: string | Record<string, unknown> };
}

/** One message of a conversation, as OpenAI's API spells it. */
export interface ChatMessage {
  /** `"system"`, `"user"`, `"assistant"`, `"tool"` (`"developer"` is read as `"system"`). */
  role: string;
  /** The text, or an array of `{type: "text", text}` parts; null for a tool-call-only reply. */
  content?: string | ContentPart[] | null;
  /** An assistant message's reasoning (`<think>` text). */
  reasoning_content?: string;
  /** An assistant message's tool calls. */
  tool_calls?: ToolCall[];
  /** A tool message's call id. */
  tool_call_id?: string;
  /** A tool message's tool name. */
  name?: string;
}

/** A message after validation (llama.cpp's `common_chat_msg`). */
export interface ParsedMessage {
  role: string;
  content: string;
  contentParts: ContentPart[];
  toolCalls: { name: string; arguments: string; id: string }[];
  reasoningContent: string;
  toolName: string;
  toolCallId: string;
}

/** An OpenAI `tools` entry. */
export type ChatTool = ToolDefinition;

/** Invalid messages or tools (the server's 400). */
export class ChatInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ChatInputError";
  }
}

const dump = (v: unknown) => JSON.stringify(v);
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Validates OpenAI messages (`common_chat_msgs_parse_oaicompat`). */
export function parseMessages(messages: readonly unknown[]): ParsedMessage[] {
  try {
    if (!Array.isArray(messages)) {
      throw new ChatInputError(`Expected 'messages' to be an array, got ${dump(messages)}`);
    }
    return messages.map((message) => {
      if (!isObject(message)) {
        throw new ChatInputError(`Expected 'message' to be an object, got ${dump(message)}`);
      }
      if (!("role" in message)) {
        throw new ChatInputError(`Missing 'role' in message: ${dump(message)}`);
      }
      if (typeof message.role !== "string") throw new ChatInputError("'role' must be a string");
      const msg: ParsedMessage = {
        role: message.role,
        content: "",
        contentParts: [],
        toolCalls: [],
        reasoningContent: "",
        toolName: "",
        toolCallId: "",
      };
      const hasContent = "content" in message && message.content !== undefined;
      const hasToolCalls = "tool_calls" in message && message.tool_calls !== undefined;
      if (hasContent) {
        const content = message.content;
        if (typeof content === "string") msg.content = content;
        else if (Array.isArray(content)) {
          for (const part of content) {
            if (!isObject(part) || !("type" in part)) {
              throw new ChatInputError(`Missing content part type: ${dump(part)}`);
            }
            if (part.type !== "text" && part.type !== "media_marker") {
              throw new ChatInputError(`Unsupported content part type: ${dump(part.type)}`);
            }
            if (typeof part.text !== "string") {
              throw new ChatInputError(`Content part text must be a string: ${dump(part)}`);
            }
            msg.contentParts.push({ type: part.type, text: part.text });
          }
        } else if (content !== null) {
          throw new ChatInputError(
            `Invalid 'content' type: expected string or array, got ${dump(content)}`,
          );
        }
      }
      if (hasToolCalls) {
        if (!Array.isArray(message.tool_calls)) {
          throw new ChatInputError("'tool_calls' must be an array");
        }
        for (const call of message.tool_calls) {
          if (!isObject(call) || !("type" in call)) {
            throw new ChatInputError(`Missing tool call type: ${dump(call)}`);
          }
          if (call.type !== "function") {
            throw new ChatInputError(`Unsupported tool call type: ${dump(call)}`);
          }
          if (!isObject(call.function)) {
            throw new ChatInputError(`Missing tool call function: ${dump(call)}`);
          }
          const fn = call.function;
          if (typeof fn.name !== "string") {
            throw new ChatInputError(`Missing tool call name: ${dump(call)}`);
          }
          if (!("arguments" in fn)) {
            throw new ChatInputError(`Missing tool call arguments: ${dump(call)}`);
          }
          const args = typeof fn.arguments === "string" ? fn.arguments : dump(fn.arguments);
          if (call.id !== undefined && typeof call.id !== "string") {
            throw new ChatInputError(`Tool call id must be a string: ${dump(call)}`);
          }
          msg.toolCalls.push({ name: fn.name, arguments: args, id: (call.id as string) ?? "" });
        }
      }
      if (!hasContent && !hasToolCalls) {
        throw new ChatInputError("Expected 'content' or 'tool_calls'");
      }
      for (
        const [key, field] of [
          ["reasoning_content", "reasoningContent"],
          ["name", "toolName"],
          ["tool_call_id", "toolCallId"],
        ] as const
      ) {
        const v = message[key];
        if (v === undefined || v === null) continue;
        if (typeof v !== "string") throw new ChatInputError(`'${key}' must be a string`);
        msg[field] = v;
      }
      return msg;
    });
  } catch (error) {
    if (error instanceof ChatInputError) {
      throw new ChatInputError(`Failed to parse messages: ${error.message}`);
    }
    throw error;
  }
}

/** The parts' text joined by newlines (none around media markers), llama.cpp's `concat_content_parts`. */
export function concatParts(parts: readonly { type?: unknown; text?: unknown }[]): string {
  let text = "";
  let lastWasMedia = false;
  for (const part of parts) {
    let newline: boolean;
    if (part.type === "text") {
      newline = !lastWasMedia && text !== "";
      lastWasMedia = false;
    } else if (part.type === "media_marker") {
      newline = false;
      lastWasMedia = true;
    } else continue;
    if (newline) text += "\n";
    text += typeof part.text === "string" ? part.text : "";
  }
  return text;
}

/** A message's text for continuation (`render_content`): its content, or its text parts joined. */
export function renderContent(msg: ParsedMessage, delimiter = "\n\n"): string {
  if (msg.content !== "") return msg.content;
  return msg.contentParts.filter((p) => p.type === "text").map((p) => p.text).join(delimiter);
}

/** The JSON a template sees for one message (`to_json_oaicompat`, typed text kept as parts). */
export function messageToJson(msg: ParsedMessage): Record<string, unknown> {
  const json: Record<string, unknown> = { role: msg.role };
  if (msg.content !== "") json.content = msg.content;
  else if (msg.contentParts.length > 0) {
    json.content = msg.contentParts.some((p) => p.type === "media_marker")
      ? concatParts(msg.contentParts)
      : msg.contentParts.map((p) => ({ type: p.type, text: p.text }));
  } else json.content = "";
  if (msg.reasoningContent !== "") json.reasoning_content = msg.reasoningContent;
  if (msg.toolName !== "") json.name = msg.toolName;
  if (msg.toolCallId !== "") json.tool_call_id = msg.toolCallId;
  if (msg.toolCalls.length > 0) {
    json.tool_calls = msg.toolCalls.map((call) => {
      const tc: Record<string, unknown> = {
        type: "function",
        function: { name: call.name, arguments: call.arguments },
      };
      if (call.id !== "") tc.id = call.id;
      return tc;
    });
  }
  return json;
}

/** Strings or arrays only, as the template's caps say (`messages_inp_normalizer`). */
export function normalizeContent(
  messages: Record<string, unknown>[],
  caps: { supportsStringContent: boolean; supportsTypedContent: boolean },
): Record<string, unknown>[] {
  const onlyString = caps.supportsStringContent && !caps.supportsTypedContent;
  const onlyTyped = !caps.supportsStringContent && caps.supportsTypedContent;
  if (!onlyString && !onlyTyped) return messages;
  return messages.map((msg) => {
    const copy = { ...msg };
    if ("content" in copy) {
      if (onlyTyped && typeof copy.content === "string") {
        copy.content = [{ type: "text", text: copy.content }];
      } else if (onlyString && Array.isArray(copy.content)) {
        copy.content = concatParts(copy.content as ContentPart[]);
      }
    }
    return copy;
  });
}

/** Validates tools and gives the JSON templates see (`common_chat_tools_to_json_oaicompat`). */
export function toolsToJson(tools: readonly unknown[] | undefined): Record<string, unknown>[] {
  if (tools === undefined || tools === null) return [];
  try {
    if (!Array.isArray(tools)) {
      throw new ChatInputError(`Expected 'tools' to be an array, got ${dump(tools)}`);
    }
    return tools.map((tool) => {
      if (!isObject(tool) || !("type" in tool)) {
        throw new ChatInputError(`Missing tool type: ${dump(tool)}`);
      }
      if (tool.type !== "function") {
        throw new ChatInputError(`Unsupported tool type: ${dump(tool)}`);
      }
      if (!isObject(tool.function)) {
        throw new ChatInputError(`Missing tool function: ${dump(tool)}`);
      }
      const fn = tool.function;
      if (typeof fn.name !== "string") throw new ChatInputError(`Missing tool name: ${dump(tool)}`);
      if (fn.description !== undefined && typeof fn.description !== "string") {
        throw new ChatInputError(`Tool description must be a string: ${dump(tool)}`);
      }
      return {
        type: "function",
        function: {
          name: fn.name,
          description: fn.description ?? "",
          parameters: JSON.parse(dump(fn.parameters ?? {})),
        },
      };
    });
  } catch (error) {
    if (error instanceof ChatInputError) {
      throw new ChatInputError(`Failed to parse tools: ${error.message}`);
    }
    throw error;
  }
}

/** `developer` read as `system` (every template but gpt-oss's). */
export function mapDeveloperToSystem(messages: Record<string, unknown>[]): void {
  for (const m of messages) if (m.role === "developer") m.role = "system";
}

/** A first system message folded into the next (or dropped), for templates without a system role. */
export function foldSystemMessage(messages: Record<string, unknown>[]): Record<string, unknown>[] {
  if (messages.length === 0 || messages[0].role !== "system") return messages;
  if (messages.length === 1) return [];
  const first = messages[0].content;
  const second = messages[1].content;
  if (typeof first !== "string" || typeof second !== "string") {
    throw new ChatInputError("type must be string, but is array");
  }
  return [{ ...messages[1], content: `${first}\n${second}` }, ...messages.slice(2)];
}

/** Tool-call arguments as objects, for templates that read them so (`func_args_not_string`). */
export function parseToolArguments(messages: Record<string, unknown>[]): void {
  for (const m of messages) {
    if (!Array.isArray(m.tool_calls)) continue;
    for (const call of m.tool_calls as Record<string, Record<string, unknown>>[]) {
      const fn = call.function;
      if (fn !== undefined && typeof fn.arguments === "string") {
        try {
          fn.arguments = JSON.parse(fn.arguments);
        } catch (error) {
          throw new ChatInputError(
            `Failed to parse tool call arguments as JSON: ${(error as Error).message}`,
          );
        }
      }
    }
  }
}
