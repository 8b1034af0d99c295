/**
 * Generated text → the assistant message: reasoning, content and tool calls, as
 * llama.cpp's `common_chat_parse` returns them for the format, including while streaming
 * (`isPartial`: a call being written is returned with the arguments written so far, text
 * that may start a marker is held back, never shown as content). A call that does not
 * parse — malformed, or to an undeclared tool — is left in the content: never an error.
 *
 * @example
 * ```ts
 * import { detectToolFormat } from "./detect.ts";
 * import { parseChatOutput } from "./parse.ts";
 * const format = detectToolFormat("… <tool_call> …");
 * const tools = [{ type: "function" as const, function: { name: "f", parameters: {} } }];
 * const msg = parseChatOutput('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', { format, tools });
 * // msg.toolCalls[0].name === "f"
 * ```
 *
 * @module
 */
import { CALL_SYNTAX, type CallContext, type CallSyntax, codeArguments } from "./calls.ts";
import { parseHarmony } from "./harmony.ts";
import { member, scanJson, skipSpace } from "./json_scan.ts";
import { partialMarkerLength, splitReasoning } from "./reasoning.ts";
import type {
  ParsedMessage,
  ReasoningFormat,
  ToolCall,
  ToolDefinition,
  ToolFormat,
} from "./types.ts";

/** The options of `parseChatOutput`. */
export interface ParseOptions {
  format: ToolFormat;
  /** The text is cut short (streaming); default false. */
  isPartial?: boolean;
  /** llama-server's `--reasoning-format`; default `auto` (reasoning split off). */
  reasoningFormat?: ReasoningFormat;
  /** The generation prompt the template wrote (whether it opened a reasoning block). */
  generationPrompt?: string;
  /**
   * The request's `enable_thinking` (default true); false: the output is not taken to start
   * inside a reasoning block even when the generation prompt opens one.
   */
  enableThinking?: boolean;
  /** The tools calls may name; none (or `tool_choice: "none"`): no calls are parsed. */
  tools?: readonly ToolDefinition[];
}

/** The message in `text`, the model's output after the generation prompt. */
export function parseChatOutput(text: string, options: ParseOptions): ParsedMessage {
  const partial = options.isPartial ?? false;
  const reasoningFormat = options.reasoningFormat ?? "auto";
  const { format } = options;
  const tools = new Map((options.tools ?? []).map((t) => [t.function.name, t]));
  if (format.name === "gpt-oss") {
    return parseHarmony(text, {
      isPartial: partial,
      reasoningFormat,
      tools: new Set(tools.keys()),
    });
  }
  let syntax = tools.size > 0 ? CALL_SYNTAX[format.name] : undefined;
  if (syntax !== undefined && format.name === "qwen3-coder" && format.thinkingStart !== "") {
    // Qwen3.5 / Nemotron 3 always open their calls with <tool_call> (llama.cpp's tool_call_starts)
    syntax = { ...syntax, markers: ["<tool_call>"] };
  }
  const { reasoning, rest } = splitReasoning(text, {
    start: format.thinkingStart,
    end: format.thinkingEnd,
    // with thinking disabled, a block the prompt opens is not one the model writes in
    generationPrompt: options.enableThinking === false ? "" : options.generationPrompt,
    isPartial: partial,
    reasoningFormat,
    // Qwen3.5 / Nemotron 3: a call ends the reasoning block (llama.cpp's thinking_end_tags)
    endsBefore: format.name === "qwen3-coder" && syntax !== undefined ? ["<tool_call>"] : [],
  });
  const ctx: CallContext = { tools, partial };
  let body: { content: string; toolCalls: ToolCall[] };
  if (format.name === "functionary-v3.2") body = parseRecipients(rest, ctx);
  else if (format.name === "generic" && tools.size > 0) body = parseGeneric(rest, ctx);
  else {
    body = syntax === undefined
      ? { content: rest, toolCalls: [] }
      : parseSections(rest, syntax, ctx);
    const markup = CALL_SYNTAX[format.name]?.contentMarkup;
    if (markup !== undefined) body.content = stripMarkup(body.content, markup, partial);
  }
  return { content: body.content, reasoningContent: reasoning, toolCalls: body.toolCalls };
}

function stripMarkup(content: string, markup: string[], partial: boolean): string {
  if (partial) content = content.slice(0, content.length - partialMarkerLength(content, markup));
  for (const m of markup) content = content.replaceAll(m, "");
  return content;
}

/** True when there are calls and each one's arguments are a whole JSON object. */
function wholeCalls(calls: ToolCall[]): boolean {
  return calls.length > 0 && calls.every((c) => {
    try {
      const v = JSON.parse(c.arguments);
      return v !== null && typeof v === "object" && !Array.isArray(v);
    } catch {
      return false;
    }
  });
}

/** Content with the call sections of `syntax` taken out. */
function parseSections(
  text: string,
  syntax: CallSyntax,
  ctx: CallContext,
): { content: string; toolCalls: ToolCall[] } {
  let content = "";
  const calls: ToolCall[] = [];
  let pos = 0;
  if (syntax.leading !== undefined) {
    const lead = syntax.leading(text);
    if (lead === "maybe" && ctx.partial) return { content: "", toolCalls: [] };
    if (lead === "yes") {
      const at = skipSpace(text, 0);
      const section = syntax.section(text, at, ctx);
      if (section !== undefined && (section.complete || ctx.partial)) {
        calls.push(...section.calls);
        if (!section.complete) return { content: "", toolCalls: calls };
        pos = section.end;
      }
    }
  }
  for (;;) {
    let at = -1;
    for (const m of syntax.markers) {
      const i = text.indexOf(m, pos);
      if (i >= 0 && (at < 0 || i < at)) at = i;
    }
    if (at < 0) {
      let tail = text.slice(pos);
      if (ctx.partial) {
        tail = tail.slice(0, tail.length - partialMarkerLength(tail, syntax.markers));
      }
      if (calls.length === 0 || tail.trim() !== "") content += tail;
      break;
    }
    const section = syntax.section(text, at, ctx);
    if (section !== undefined && !section.complete && !ctx.partial && wholeCalls(section.calls)) {
      // a final text that ends before the section's closing markup: its calls are whole
      content += text.slice(pos, at);
      calls.push(...section.calls);
      break;
    }
    if (section === undefined || (!section.complete && !ctx.partial)) {
      // malformed (or cut inside a call): the rest stays content
      content += text.slice(pos);
      break;
    }
    content += text.slice(pos, at);
    calls.push(...section.calls);
    if (!section.complete) break;
    pos = section.end;
  }
  return { content, toolCalls: calls };
}

/**
 * Functionary v3.2: the prompt ends with `>>>`; each message is `RECIPIENT\nBODY`, `all`
 * for the answer, a tool's name for a call (JSON arguments, or code for `python`), the
 * next one after another `>>>`.
 */
function parseRecipients(
  text: string,
  ctx: CallContext,
): { content: string; toolCalls: ToolCall[] } {
  let content = "";
  const calls: ToolCall[] = [];
  const parts = text.split(">>>");
  for (let i = 0; i < parts.length; i++) {
    let part = parts[i];
    const last = i === parts.length - 1;
    if (last && ctx.partial) part = part.slice(0, part.length - partialMarkerLength(part, [">>>"]));
    const nl = part.indexOf("\n");
    const recipient = (nl < 0 ? part : part.slice(0, nl)).trim();
    if (nl < 0 && last && ctx.partial) {
      // the recipient is still being written
      if (
        "all".startsWith(recipient) || [...ctx.tools.keys()].some((n) => n.startsWith(recipient))
      ) break;
    }
    const bodyText = nl < 0 ? "" : part.slice(nl + 1);
    if (recipient === "all") {
      content += bodyText;
      continue;
    }
    if (ctx.tools.has(recipient) && nl >= 0) {
      const start = skipSpace(bodyText, 0);
      if (start === bodyText.length && last && ctx.partial) {
        calls.push({ id: "", name: recipient, arguments: "" });
        continue;
      }
      const span = scanJson(bodyText, start);
      if (
        span !== undefined && span.kind === "object" && (span.complete || (last && ctx.partial))
      ) {
        calls.push({
          id: "",
          name: recipient,
          arguments: bodyText.slice(span.start, span.end).trimEnd(),
        });
        continue;
      }
      if (recipient === "python") {
        calls.push({
          id: "",
          name: "python",
          arguments: codeArguments(bodyText, !(last && ctx.partial)),
        });
        continue;
      }
    }
    // not a message to a declared recipient: kept as written
    content += (i === 0 ? "" : ">>>") + part;
  }
  return { content, toolCalls: calls };
}

/**
 * The generic format (templates without tool calls): the answer is one JSON object,
 * `{"tool_calls": [{"name", "arguments", "id"?}]}`, `{"tool_call": {...}}` or
 * `{"response": "..."}`; any other text is content.
 */
function parseGeneric(text: string, ctx: CallContext): { content: string; toolCalls: ToolCall[] } {
  const start = skipSpace(text, 0);
  if (start >= text.length) return { content: ctx.partial ? "" : text, toolCalls: [] };
  const span = scanJson(text, start);
  const plain = { content: text, toolCalls: [] };
  if (span === undefined || span.kind !== "object") return plain;
  if (!span.complete && !ctx.partial) return plain;
  const calls: ToolCall[] = [];
  const one = (s: typeof span) => {
    const m = s.kind === "object" ? s : undefined;
    if (m === undefined) return false;
    const nameSpan = member(m, "name")?.value;
    if (nameSpan === undefined || !nameSpan.complete || nameSpan.kind !== "string") {
      return !m.complete;
    }
    const name = JSON.parse(text.slice(nameSpan.start, nameSpan.end));
    if (!ctx.tools.has(name)) return false;
    const args = member(m, "arguments")?.value;
    if (m.complete && (args === undefined || args.kind !== "object")) return false;
    const idSpan = member(m, "id")?.value;
    const id = idSpan?.complete && idSpan.kind === "string"
      ? JSON.parse(text.slice(idSpan.start, idSpan.end))
      : "";
    calls.push({
      id,
      name,
      arguments: args === undefined ? "" : text.slice(args.start, args.end).trimEnd(),
    });
    return true;
  };
  const list = member(span, "tool_calls")?.value;
  const single = member(span, "tool_call")?.value;
  const response = member(span, "response")?.value;
  if (list !== undefined && list.kind === "array") {
    for (const item of list.items ?? []) if (!one(item)) return plain;
    return { content: "", toolCalls: calls };
  }
  if (single !== undefined) return one(single) ? { content: "", toolCalls: calls } : plain;
  if (response !== undefined) {
    const raw = text.slice(response.start, response.end);
    if (response.kind !== "string") return { content: raw, toolCalls: [] };
    if (response.complete) return { content: JSON.parse(raw), toolCalls: [] };
    try {
      return {
        content: JSON.parse(raw.replace(/\\(u[0-9a-fA-F]{0,3})?$/, "") + '"'),
        toolCalls: [],
      };
    } catch {
      return { content: "", toolCalls: [] };
    }
  }
  return span.complete ? plain : { content: "", toolCalls: [] };
}
