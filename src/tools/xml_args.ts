/**
 * The JSON arguments of a call written as XML parameters (Qwen3-Coder's
 * `<parameter=KEY>\nVALUE\n</parameter>`), typed by the tool's schema as llama.cpp types
 * them: a `string` parameter is the text as written; a nullable string is `null` for the
 * text `null`; a union with `string` takes the text as JSON when it is JSON of another
 * type, else as a string; any other type is the text as JSON (a string when it is not).
 * While streaming, a string parameter's text is given as far as it is written.
 *
 * @module
 */
import type { ToolDefinition } from "./types.ts";
import { partialMarkerLength } from "./reasoning.ts";

/** A parameter read so far; `complete` is false for the last one while it is written. */
export interface XmlParameter {
  key: string;
  value: string;
  complete: boolean;
}

type Kind = "string" | "nullable-string" | "union-string" | "json";

/** The JSON types a parameter schema allows (`[]`: not stated); an enum of strings is `string`. */
export function typesOf(schema: Record<string, unknown>): string[] {
  const t = schema.type;
  if (typeof t === "string") return [t];
  if (Array.isArray(t)) return t.filter((x): x is string => typeof x === "string");
  const alts = (schema.anyOf ?? schema.oneOf) as unknown;
  if (Array.isArray(alts)) {
    return alts.flatMap((
      a,
    ) => (a !== null && typeof a === "object" ? typesOf(a as Record<string, unknown>) : []));
  }
  if (
    Array.isArray(schema.enum) && schema.enum.length > 0 &&
    schema.enum.every((v) => typeof v === "string")
  ) {
    return ["string"];
  }
  if (typeof schema.const === "string") return ["string"];
  return [];
}

function kindOf(tool: ToolDefinition, key: string): { kind: Kind; types: Set<string> } {
  const props = (tool.function.parameters?.properties ?? {}) as Record<string, unknown>;
  const schema = props[key];
  if (schema === null || typeof schema !== "object") return { kind: "json", types: new Set() };
  const types = new Set(typesOf(schema as Record<string, unknown>));
  if (!types.has("string")) return { kind: "json", types };
  if (types.size === 1) return { kind: "string", types };
  if (types.size === 2 && types.has("null")) return { kind: "nullable-string", types };
  return { kind: "union-string", types };
}

/** The JSON type of a parsed value, as a schema names it. */
function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

/** The value as written: one line break after the opening and before the closing tag dropped. */
function trimValue(v: string): string {
  if (v.startsWith("\r\n")) v = v.slice(2);
  else if (v.startsWith("\n")) v = v.slice(1);
  if (v.endsWith("\r\n")) v = v.slice(0, -2);
  else if (v.endsWith("\n")) v = v.slice(0, -1);
  return v;
}

/** The text itself when it is JSON (kept as written, as JSON arguments are), else undefined. */
function asJson(text: string): string | undefined {
  try {
    JSON.parse(text);
    return text;
  } catch {
    return undefined;
  }
}

function valueJson({ kind, types }: { kind: Kind; types: Set<string> }, text: string): string {
  switch (kind) {
    case "string":
      return JSON.stringify(text);
    case "nullable-string":
      return text.trim() === "null" ? "null" : JSON.stringify(text);
    case "union-string": {
      // JSON of another declared type (an integer is a number too), else the text
      const j = asJson(text.trim());
      const t = j === undefined ? "" : jsonType(JSON.parse(j));
      const declared = types.has(t) || (t === "integer" && types.has("number"));
      return j !== undefined && t !== "string" && declared ? j : JSON.stringify(text);
    }
    case "json":
      return asJson(text.trim()) ?? JSON.stringify(text);
  }
}

/** The arguments object's JSON text; without its closing brace while the call is cut. */
export function xmlArguments(
  tool: ToolDefinition,
  params: XmlParameter[],
  closed: boolean,
): string {
  const parts: string[] = [];
  for (const p of params) {
    const kind = kindOf(tool, p.key);
    if (p.complete) {
      parts.push(JSON.stringify(p.key) + ":" + valueJson(kind, trimValue(p.value)));
    } else if (kind.kind === "string") {
      // what is written so far, less what may be the closing "\n</parameter>\n"
      let v = p.value.slice(0, p.value.length - partialMarkerLength(p.value, ["\n</parameter>\n"]));
      if (v.startsWith("\n")) v = v.slice(1);
      else if ("\n".startsWith(v)) v = "";
      parts.push(JSON.stringify(p.key) + ':"' + JSON.stringify(v).slice(1, -1));
    }
  }
  return "{" + parts.join(",") + (closed ? "}" : "");
}
