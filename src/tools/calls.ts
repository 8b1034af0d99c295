/**
 * The tool-call sections of each format: where a section may start (its markers) and how
 * to read the calls in it, whole or, while streaming, cut short. A call is only read for a
 * declared tool; anything else there is malformed (the caller keeps it as content).
 *
 * @module
 */
import { Cursor } from "./cursor.ts";
import { type JsonSpan, member, stringMember } from "./json_scan.ts";
import type { ToolCall, ToolDefinition, ToolFormatName } from "./types.ts";
import { xmlArguments, type XmlParameter } from "./xml_args.ts";

/** What a section parser knows of the request. */
export interface CallContext {
  tools: ReadonlyMap<string, ToolDefinition>;
  partial: boolean;
}

/**
 * A section read from its marker: the calls (the last one may be cut while streaming),
 * where it ends, and whether it is whole. `undefined` when the text is not a valid section.
 */
export interface Section {
  calls: ToolCall[];
  end: number;
  complete: boolean;
}

/** How one format's calls are found and read. */
export interface CallSyntax {
  /** Texts a section starts with. */
  markers: string[];
  /** Reads the section starting at `at` (where a marker is). */
  section(text: string, at: number, ctx: CallContext): Section | undefined;
  /**
   * A call that may also open the answer without a marker (Llama 3's bare JSON): "yes",
   * "maybe" (streaming: too little text to tell), or "no".
   */
  leading?(text: string): "yes" | "maybe" | "no";
  /** Markup removed from the content (Command R7B's response tags). */
  contentMarkup?: string[];
}

type CallResult = { call?: ToolCall; ok: boolean };

/**
 * A call written as a JSON object (`{"name": …, "arguments": {…}}` and the like): the call
 * when its name is written (and declared); `ok: false` when the object cannot be a call.
 */
function jsonObjectCall(
  text: string,
  span: JsonSpan | undefined,
  ctx: CallContext,
  keys: { name: string[]; args: string[]; id?: string },
): CallResult {
  if (span === undefined || span.kind !== "object") return { ok: false };
  let name: string | undefined;
  for (const k of keys.name) name ??= stringMember(text, span, k);
  if (name === undefined) {
    // a whole object without a name, or a name that is not a string, is no call
    if (span.complete) return { ok: false };
    for (const k of keys.name) {
      const v = member(span, k)?.value;
      if (v !== undefined && v.kind !== "string") return { ok: false };
    }
    return { ok: true };
  }
  if (!ctx.tools.has(name)) return { ok: false };
  let args: JsonSpan | undefined;
  for (const k of keys.args) args ??= member(span, k)?.value;
  let argsText = args === undefined ? "" : text.slice(args.start, args.end).trimEnd();
  if (args !== undefined && args.complete && args.kind === "string") {
    // arguments given as a JSON string holding the object
    argsText = JSON.parse(argsText);
  } else if (args !== undefined && args.kind !== "object") {
    return { ok: false };
  }
  if (span.complete && (args === undefined || !args.complete)) {
    if (args !== undefined) return { ok: false };
    argsText = "{}";
  }
  let id = "";
  if (keys.id !== undefined) {
    const idSpan = member(span, keys.id)?.value;
    if (idSpan !== undefined && idSpan.complete) {
      const raw = text.slice(idSpan.start, idSpan.end);
      id = idSpan.kind === "string" ? JSON.parse(raw) : raw;
    } else if (!span.complete) {
      // the format writes the call's id (Mistral Nemo: after the arguments): the call is
      // shown once its id is known, so that a stream carries the id the final message has
      return { ok: true };
    }
  }
  return { call: { id, name, arguments: argsText }, ok: true };
}

const NAME_ARGS = { name: ["name"], args: ["arguments", "parameters"] };

/** A JSON array of call objects after the marker (Mistral Nemo, FireFunction, Granite, R7B). */
function jsonArraySection(
  marker: string,
  close: string,
  keys: { name: string[]; args: string[]; id?: string },
) {
  return (text: string, at: number, ctx: CallContext): Section | undefined => {
    const c = new Cursor(text, at + marker.length);
    c.space();
    if (c.atEnd) return { calls: [], end: text.length, complete: false };
    const span = c.json();
    if (span === undefined || span.kind !== "array") return undefined;
    const calls: ToolCall[] = [];
    for (const item of span.items ?? []) {
      const r = jsonObjectCall(text, item, ctx, keys);
      if (!r.ok) return undefined;
      if (r.call !== undefined) calls.push(r.call);
    }
    if (!span.complete) return { calls, end: text.length, complete: false };
    if (close !== "") {
      c.space();
      const r = c.lit(close);
      if (r === "no") return undefined;
      if (r === "cut") return { calls, end: text.length, complete: false };
    }
    return { calls, end: c.pos, complete: true };
  };
}

/** `MARKER json-object CLOSE` (Hermes' `<tool_call>`, Llama 3's `<|python_tag|>`). */
function jsonObjectSection(marker: string, close: string) {
  return (text: string, at: number, ctx: CallContext): Section | undefined => {
    const c = new Cursor(text, at + marker.length);
    c.space();
    if (c.atEnd) return { calls: [], end: text.length, complete: false };
    const span = c.json();
    const r = jsonObjectCall(text, span, ctx, NAME_ARGS);
    if (!r.ok) return undefined;
    const calls = r.call === undefined ? [] : [r.call];
    if (!span!.complete) return { calls, end: text.length, complete: false };
    if (close !== "") {
      c.space();
      const s = c.lit(close);
      if (s === "no") return undefined;
      if (s === "cut") return { calls, end: text.length, complete: false };
    }
    return { calls, end: c.pos, complete: true };
  };
}

/** Raw code after `<|python_tag|>` as a call to a declared `python` tool. */
function pythonTagSection(text: string, at: number, ctx: CallContext): Section | undefined {
  const body = text.slice(at + "<|python_tag|>".length);
  if (body.trimStart().startsWith("{")) {
    return jsonObjectSection("<|python_tag|>", "")(text, at, ctx);
  }
  if (!ctx.tools.has("python")) return undefined;
  return {
    calls: [{ id: "", name: "python", arguments: codeArguments(body, !ctx.partial) }],
    end: text.length,
    complete: !ctx.partial,
  };
}

/**
 * `{"code": …}` for raw code; while it is written, without the closing quote and brace
 * (and without trailing whitespace, which the whole code drops), so that it only grows.
 */
export function codeArguments(code: string, complete: boolean): string {
  const text = code.trimStart().trimEnd();
  const quoted = JSON.stringify(text);
  return complete ? `{"code":${quoted}}` : `{"code":${quoted.slice(0, -1)}`;
}

/** A literal step that fails the section on "no" and ends it (cut) on "cut". */
function need(c: Cursor, s: string): "ok" | "no" | "cut" {
  return c.lit(s);
}

/** `<function=NAME>{json}</function>` (Functionary v3.1). */
function functionTagSection(text: string, at: number, ctx: CallContext): Section | undefined {
  const c = new Cursor(text, at + "<function=".length);
  const name = c.until(">");
  if (name === undefined) {
    return ctx.partial ? { calls: [], end: text.length, complete: false } : undefined;
  }
  if (!ctx.tools.has(name.text)) return undefined;
  c.pos++;
  c.space();
  const span = c.json();
  if (span === undefined) {
    return c.atEnd ? { calls: [], end: text.length, complete: false } : undefined;
  }
  if (span.kind !== "object") return undefined;
  const call = { id: "", name: name.text, arguments: text.slice(span.start, span.end).trimEnd() };
  if (!span.complete) return { calls: [call], end: text.length, complete: false };
  c.space();
  const r = need(c, "</function>");
  if (r === "no") return undefined;
  return { calls: [call], end: c.pos, complete: r === "ok" };
}

/** `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{json}` (Mistral Small 3.2, Devstral, Magistral). */
function mistralArgsSection(text: string, at: number, ctx: CallContext): Section | undefined {
  const c = new Cursor(text, at + "[TOOL_CALLS]".length);
  const cut = (calls: ToolCall[] = []): Section => ({ calls, end: text.length, complete: false });
  const name = c.until("[CALL_ID]", "[ARGS]");
  if (name === undefined) {
    return ctx.partial && /^[A-Za-z0-9_.-]*$/.test(text.slice(c.pos).replace(/\[[A-Z_]*$/, ""))
      ? cut()
      : undefined;
  }
  if (!ctx.tools.has(name.text.trim())) return undefined;
  let id = "";
  if (name.delim === "[CALL_ID]") {
    c.pos += "[CALL_ID]".length;
    const idText = c.until("[ARGS]");
    if (idText === undefined) return ctx.partial ? cut() : undefined;
    id = idText.text.trim();
  }
  c.pos += "[ARGS]".length;
  c.space();
  if (c.atEnd) return cut([{ id, name: name.text.trim(), arguments: "" }]);
  const span = c.json();
  if (span === undefined || span.kind !== "object") return undefined;
  const call = {
    id,
    name: name.text.trim(),
    arguments: text.slice(span.start, span.end).trimEnd(),
  };
  return { calls: [call], end: span.complete ? c.pos : text.length, complete: span.complete };
}

/** DeepSeek R1's and V3.1's `<｜tool▁calls▁begin｜>…<｜tool▁calls▁end｜>`. */
function deepseekSection(v31: boolean) {
  const CALLS_BEGIN = "<｜tool▁calls▁begin｜>";
  const CALL_BEGIN = "<｜tool▁call▁begin｜>";
  const SEP = "<｜tool▁sep｜>";
  const CALL_END = "<｜tool▁call▁end｜>";
  const CALLS_END = "<｜tool▁calls▁end｜>";
  return (text: string, at: number, ctx: CallContext): Section | undefined => {
    const c = new Cursor(text, at);
    const cut = (calls: ToolCall[]): Section => ({ calls, end: text.length, complete: false });
    const calls: ToolCall[] = [];
    if (c.lit(CALLS_BEGIN) !== "ok") c.pos = at;
    for (;;) {
      c.space();
      if (c.atEnd) return cut(calls);
      const end = c.lit(CALLS_END);
      if (end === "ok") return { calls, end: c.pos, complete: true };
      const begin = c.lit(CALL_BEGIN);
      if (begin === "cut" || end === "cut") return cut(calls);
      if (begin === "no") {
        // a missing closing marker at the end is tolerated once a call was read
        return calls.length > 0 ? { calls, end: c.pos, complete: true } : undefined;
      }
      let name: string;
      if (v31) {
        const n = c.until(SEP);
        if (n === undefined) return ctx.partial ? cut(calls) : undefined;
        name = n.text.trim();
        c.pos += SEP.length;
      } else {
        const t = c.until(SEP);
        if (t === undefined) return ctx.partial ? cut(calls) : undefined;
        c.pos += SEP.length;
        const n = c.until("\n");
        if (n === undefined) return ctx.partial ? cut(calls) : undefined;
        name = n.text.trim();
        c.pos++;
        const fence = c.lit("```json");
        if (fence === "cut") return cut(calls);
        if (fence === "no") return undefined;
      }
      if (!ctx.tools.has(name)) return undefined;
      c.space();
      if (c.atEnd) return cut([...calls, { id: "", name, arguments: "" }]);
      const span = c.json();
      if (span === undefined || span.kind !== "object") return undefined;
      const call = { id: "", name, arguments: text.slice(span.start, span.end).trimEnd() };
      calls.push(call);
      if (!span.complete) return cut(calls);
      c.space();
      if (!v31) {
        const f = c.lit("```");
        if (f === "cut") return cut(calls);
        if (f === "no") return undefined;
        c.space();
      }
      const e = c.lit(CALL_END);
      if (e === "cut" || (e === "no" && c.atEnd)) return cut(calls);
      if (e === "no") return undefined;
    }
  };
}

/**
 * A parameter's value up to its closing tag, taken: `\n</parameter>\n` as llama.cpp reads
 * it (so a value may hold `</parameter>` itself); in a final text also the tag at the end
 * or without its line breaks. `undefined` while it is still being written.
 */
function parameterValue(c: Cursor, partial: boolean): string | undefined {
  const text = c.text;
  const start = c.pos;
  let at = text.indexOf("\n</parameter>\n", start);
  let end = at + "\n</parameter>\n".length;
  if (at < 0 && !partial) {
    if (text.endsWith("\n</parameter>") && text.length - 13 >= start) {
      at = text.length - 13;
      end = text.length;
    } else {
      at = text.indexOf("</parameter>", start);
      end = at + "</parameter>".length;
    }
  }
  if (at < 0) return undefined;
  c.pos = end;
  return text.slice(start, at) + (text[at] === "\n" ? "\n" : "");
}

/** Qwen3-Coder's `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>…`. */
function qwen3CoderSection(text: string, at: number, ctx: CallContext): Section | undefined {
  const c = new Cursor(text, at);
  const cut = (calls: ToolCall[]): Section => ({ calls, end: text.length, complete: false });
  const calls: ToolCall[] = [];
  if (c.lit("<tool_call>") === "ok") c.space();
  for (;;) {
    const open = c.lit("<function=");
    if (open === "cut" || c.atEnd) return cut(calls);
    if (open === "no") return undefined;
    const name = c.until(">");
    if (name === undefined) return ctx.partial ? cut(calls) : undefined;
    const tool = ctx.tools.get(name.text);
    if (tool === undefined) return undefined;
    c.pos++;
    const params: XmlParameter[] = [];
    let closed = false;
    for (;;) {
      c.space();
      if (c.atEnd) break;
      const p = c.lit("<parameter=");
      if (p === "ok") {
        const key = c.until(">");
        if (key === undefined) break;
        c.pos++;
        const value = parameterValue(c, ctx.partial);
        if (value === undefined) {
          params.push({ key: key.text.trim(), value: text.slice(c.pos), complete: false });
          break;
        }
        params.push({ key: key.text.trim(), value, complete: true });
        continue;
      }
      const f = c.lit("</function>");
      if (f === "ok") {
        closed = true;
        break;
      }
      if (p === "cut" || f === "cut") break;
      return undefined;
    }
    const args = xmlArguments(tool, params, closed);
    calls.push({ id: "", name: name.text, arguments: args });
    if (!closed) return cut(calls);
    c.space();
    const end = c.lit("</tool_call>");
    if (end === "cut") return cut(calls);
    if (end === "ok") return { calls, end: c.pos, complete: true };
    if (c.peek("<function=") !== "no") continue;
    return { calls, end: c.pos, complete: true };
  }
}

const HERMES: CallSyntax = {
  markers: ["<tool_call>"],
  section: jsonObjectSection("<tool_call>", "</tool_call>"),
};

/** Whether the answer opens with a Llama 3 JSON call (`{"name": …` or `{"type": "function"`). */
function llamaLeading(text: string): "yes" | "maybe" | "no" {
  const squeezed = text.trimStart().slice(0, 24).replace(/\s+/g, "");
  for (const head of ['{"name":', '{"type":"function"', '{"function":']) {
    if (squeezed.startsWith(head)) return "yes";
    if (head.startsWith(squeezed)) return "maybe";
  }
  return "no";
}

/** The call syntax of each format with tool calls. */
export const CALL_SYNTAX: Partial<Record<ToolFormatName, CallSyntax>> = {
  "hermes": HERMES,
  "qwen3-coder": { markers: ["<tool_call>", "<function="], section: qwen3CoderSection },
  "llama3": {
    markers: ["<|python_tag|>"],
    section: (text, at, ctx) =>
      text.startsWith("<|python_tag|>", at)
        ? pythonTagSection(text, at, ctx)
        : jsonObjectSection("", "")(text, at, ctx),
    leading: llamaLeading,
  },
  "mistral-nemo": {
    markers: ["[TOOL_CALLS]"],
    section: jsonArraySection("[TOOL_CALLS]", "", { ...NAME_ARGS, id: "id" }),
  },
  "mistral-small": { markers: ["[TOOL_CALLS]"], section: mistralArgsSection },
  "functionary-v3.1": {
    markers: ["<function=", "<|python_tag|>"],
    section: (text, at, ctx) =>
      text.startsWith("<|python_tag|>", at)
        ? pythonTagSection(text, at, ctx)
        : functionTagSection(text, at, ctx),
  },
  "firefunction-v2": {
    markers: ["functools"],
    section: jsonArraySection("functools", "", NAME_ARGS),
  },
  "command-r7b": {
    markers: ["<|START_ACTION|>"],
    section: jsonArraySection("<|START_ACTION|>", "<|END_ACTION|>", {
      name: ["tool_name"],
      args: ["parameters"],
      id: "tool_call_id",
    }),
    contentMarkup: ["<|START_RESPONSE|>", "<|END_RESPONSE|>"],
  },
  "deepseek-r1": {
    markers: ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"],
    section: deepseekSection(false),
  },
  "deepseek-v3.1": {
    markers: ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"],
    section: deepseekSection(true),
  },
  "granite": {
    markers: ["<|tool_call|>"],
    section: jsonArraySection("<|tool_call|>", "", NAME_ARGS),
  },
};
