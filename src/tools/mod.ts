/**
 * Tool calling and reasoning for chat templates, as llama.cpp's `common/chat` handles them:
 * the tool-call format of a template (`detectToolFormat`), the generation parameters of a
 * request (`chatGenerationParams`: grammar, lazy triggers, preserved tokens, stops), the
 * parsed message of generated text (`parseChatOutput`: content, reasoning, calls; also cut
 * short while streaming) and the streamed deltas between parses (`computeDiffs`,
 * `diffsToDeltas`).
 *
 * @example
 * ```ts
 * import { detectToolFormat, parseChatOutput } from "./mod.ts";
 * const format = detectToolFormat("{{- '<tool_call>\\n' }}"); // hermes
 * const tools = [{ type: "function" as const, function: { name: "get_time", parameters: {} } }];
 * const msg = parseChatOutput('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>', {
 *   format,
 *   tools,
 * });
 * // msg.toolCalls: [{ id: "", name: "get_time", arguments: "{}" }]
 * ```
 *
 * @module
 */
export { contentOnlyFormat, detectToolFormat } from "./detect.ts";
export {
  type ChunkDelta,
  computeDiffs,
  diffsToDeltas,
  type MessageDiff,
  randomToolCallId,
  toolCallIdGenerator,
  ToolCallIds,
} from "./diff.ts";
export {
  chatGenerationParams,
  type ChatParamsOptions,
  excludingText,
  generationPromptOf,
  GENERIC_TOOLS_SYSTEM_PROMPT,
} from "./grammar.ts";
export { parseChatOutput, type ParseOptions } from "./parse.ts";
export {
  checkParallelToolCalls,
  checkToolChoice,
  checkTools,
  toolParameters,
  ToolRequestError,
} from "./request.ts";
export { promptOpensReasoning, splitReasoning } from "./reasoning.ts";
export type {
  ChatGenerationParams,
  GrammarTrigger,
  ParsedMessage,
  ReasoningFormat,
  ToolCall,
  ToolChoice,
  ToolDefinition,
  ToolFormat,
  ToolFormatName,
} from "./types.ts";
