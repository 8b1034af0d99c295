/**
 * The tool-call format of a chat template, recognised from the template's source by the
 * markers each family writes, in the order llama.cpp 2026-10 checks its specialised
 * templates (`common_chat_try_specialized_template`, `common/chat.cpp`) before falling back
 * to the families its differential auto-parser handles. A template that renders no tool
 * calls gets the generic JSON format (`generic`).
 *
 * @example
 * ```ts
 * import { detectToolFormat } from "./detect.ts";
 * const f = detectToolFormat("{{ '<tool_call>\\n' + tool_call | tojson + '\\n</tool_call>' }}");
 * // f.name === "hermes"
 * ```
 *
 * @module
 */
import type { ToolFormat, ToolFormatName } from "./types.ts";

/** The reasoning tags a template writes: `<think>…</think>` unless the family has its own. */
function thinkingTags(src: string, name: ToolFormatName): [string, string] {
  if (name === "command-r7b") return ["<|START_THINKING|>", "<|END_THINKING|>"];
  if (name === "gpt-oss") return ["<|channel|>analysis<|message|>", "<|end|>"];
  if (name === "mistral-small" && src.includes("[THINK]")) return ["[THINK]", "[/THINK]"];
  if (src.includes("<think>") || src.includes("</think>")) return ["<think>", "</think>"];
  return ["", ""];
}

/** The format name for a template source (see the module documentation). */
function formatName(src: string): ToolFormatName {
  const has = (s: string) => src.includes(s);
  if (has("<|channel|>")) return "gpt-oss";
  if (has(">>>all") && (has(">>>${recipient}") || has("{{ '>>>' }}") || has(">>>"))) {
    return "functionary-v3.2";
  }
  if (has("[TOOL_CALLS]") && has("[ARGS]")) return "mistral-small";
  if (has("[TOOL_CALLS]")) return "mistral-nemo";
  if (has("<tool_call>") && has("<function=") && has("<parameter=")) return "qwen3-coder";
  if (has("tool▁calls▁begin") || has("tool_calls_begin")) {
    // R1 writes "function<｜tool▁sep｜>NAME\n```json", V3.1 "NAME<｜tool▁sep｜>ARGS"
    return /tool▁call▁begin｜>'\s*\+\s*tool\['function'\]\['name'\]/.test(src)
      ? "deepseek-v3.1"
      : "deepseek-r1";
  }
  if (has("<|START_ACTION|>") && !has("<|START_TEXT|>")) return "command-r7b";
  if (has("functools[")) return "firefunction-v2";
  if (has("<function=") && has("<|start_header_id|>")) return "functionary-v3.1";
  if (has("<|tool_call|>")) return "granite";
  if (has("<tool_call>") && !has("<arg_key>") && !has("<invoke") && !has("<function=")) {
    return "hermes";
  }
  if (has("<|start_header_id|>") && (has("ipython") || has("<|python_tag|>"))) return "llama3";
  return "generic";
}

/** The tool-call format (and reasoning tags) of the template `source`. */
export function detectToolFormat(source: string): ToolFormat {
  const name = formatName(source);
  const [thinkingStart, thinkingEnd] = thinkingTags(source, name);
  return { name, thinkingStart, thinkingEnd };
}
