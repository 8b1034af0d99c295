/**
 * gpt-oss's harmony messages: `<|channel|>analysis<|message|>…<|end|>` is reasoning,
 * `final` (or `commentary` without a recipient) the answer, and a message to
 * `functions.NAME` (named in the role header ` to=…` or after the channel) a call whose
 * body is the JSON arguments. Messages to other recipients (built-in tools the request did
 * not declare) are dropped, as llama.cpp drops them.
 *
 * @module
 */
import { scanJson, skipSpace } from "./json_scan.ts";
import { partialMarkerLength } from "./reasoning.ts";
import type { ParsedMessage, ReasoningFormat, ToolCall } from "./types.ts";

const ENDS = ["<|end|>", "<|call|>", "<|return|>", "<|start|>"];

/** The message parsed from gpt-oss output (the generation prompt ends with `<|start|>assistant`). */
export function parseHarmony(
  text: string,
  options: { isPartial: boolean; reasoningFormat: ReasoningFormat; tools: ReadonlySet<string> },
): ParsedMessage {
  const partial = options.isPartial;
  const keepReasoning = options.reasoningFormat === "none";
  const out: ParsedMessage = { content: "", reasoningContent: "", toolCalls: [] };
  let pos = 0;
  while (pos < text.length) {
    // the header: [<|start|>assistant] [ to=R] <|channel|>CH [ to=R] [ <|constrain|>X] <|message|>
    if (text.startsWith("<|start|>", pos)) pos += "<|start|>".length;
    const headerEnd = text.indexOf("<|message|>", pos);
    if (headerEnd < 0) {
      // a header still being written; in a final text, text that is not harmony is content
      if (!partial) out.content += text.slice(pos);
      break;
    }
    const header = text.slice(pos, headerEnd);
    const channels = [...header.matchAll(/<\|channel\|>\s*([A-Za-z_]+)/g)].map((m) => m[1]);
    const channel = channels.at(-1) ?? "final";
    const recipients = [...header.matchAll(/\bto=([^\s<]+)/g)].map((m) => m[1])
      .filter((r) => r !== "assistant");
    const recipient = recipients.at(-1);
    const bodyStart = headerEnd + "<|message|>".length;
    // a call's JSON arguments end where the JSON does (a string in them may hold "<|end|>")
    const json = recipient === undefined ? undefined : scanJson(text, skipSpace(text, bodyStart));
    const searchFrom = json?.complete ? json.end : json !== undefined ? text.length : bodyStart;
    let bodyEnd = text.length;
    let endTag = "";
    for (const e of ENDS) {
      const at = text.indexOf(e, searchFrom);
      if (at >= 0 && at < bodyEnd) {
        bodyEnd = at;
        endTag = e;
      }
    }
    let body = text.slice(bodyStart, bodyEnd);
    if (endTag === "" && partial) {
      body = body.slice(0, body.length - partialMarkerLength(body, ENDS));
    }
    if (recipient !== undefined) {
      if (recipient.startsWith("functions.") && options.tools.has(recipient.slice(10))) {
        const call: ToolCall = { id: "", name: recipient.slice(10), arguments: body.trim() };
        out.toolCalls.push(call);
      }
    } else if (channel === "analysis") {
      if (keepReasoning) {
        out.content += "<|channel|>analysis<|message|>" + body +
          (endTag === "<|end|>" ? endTag : "");
      } else {
        out.reasoningContent += body;
      }
    } else {
      out.content += body;
    }
    pos = endTag === "" ? text.length : bodyEnd + (endTag === "<|start|>" ? 0 : endTag.length);
  }
  out.reasoningContent = out.reasoningContent.trim();
  return out;
}
