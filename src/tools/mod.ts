/**
 * Tool calling and reasoning for chat templates, as llama.cpp 2026-10's `common/chat` handles
 * them, for every format it names (Hermes 2 Pro / Qwen 2.5 / Qwen 3, Qwen3-Coder, Llama 3.x,
 * Mistral Nemo and Small, Functionary v3.1 and v3.2, FireFunction v2, Command R7B, DeepSeek R1
 * and V3.1, Granite, gpt-oss, and a generic JSON format for templates without tool calls).
 * Pure TypeScript: no model, no template rendering.
 *
 * A request with tools, step by step:
 * 1. `checkTools(body.tools)`, `checkToolChoice(body.tool_choice, tools)`,
 *    `checkParallelToolCalls(body.parallel_tool_calls)` (a `ToolRequestError` names the field);
 * 2. `detectToolFormat(templateSource)`;
 * 3. the prompt is rendered with the tools; `generationPromptOf(withPrompt, withoutPrompt)`;
 * 4. `chatGenerationParams({format, tools, toolChoice, parallelToolCalls, generationPrompt,
 *    enableThinking})` (a `SchemaError` names the tool and keyword): the grammar, lazy or not,
 *    its triggers (matched on the generation prompt followed by the generated text), the
 *    tokens to keep whole, extra stops, the reasoning tags;
 * 5. while streaming, after each token: `ids.assign(parseChatOutput(text, {format, tools:
 *    params.tools, isPartial: true, generationPrompt, enableThinking, reasoningFormat}))` and
 *    `diffsToDeltas(computeDiffs(previous, current))` (one `ToolCallIds` per response, made
 *    with `toolCallIdGenerator(format.name)`); at the end the same with `isPartial: false`.
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
export { detectToolFormat } from "./detect.ts";
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
export { ChatOutputStream } from "./stream.ts";
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
