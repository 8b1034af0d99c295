/**
 * A request's `tools`, `tool_choice` and `parallel_tool_calls` checked as OpenAI defines
 * them: anything else is a `ToolRequestError` whose one-line message names the field (the
 * server answers 400 with it). Tool names are what llama.cpp's grammars can hold
 * (letters, digits, `_`, `-`, `.`; OpenAI allows 64 characters).
 *
 * @example
 * ```ts
 * import { checkTools, checkToolChoice } from "./request.ts";
 * const tools = checkTools([{ type: "function", function: { name: "get_time", parameters: { type: "object" } } }]);
 * checkToolChoice({ type: "function", function: { name: "get_time" } }, tools); // ok
 * // checkToolChoice({ type: "function", function: { name: "nope" } }, tools) throws:
 * // tool_choice.function.name: "nope" is not one of the tools (get_time)
 * ```
 *
 * @module
 */
import type { ToolChoice, ToolDefinition } from "./types.ts";

/** A `tools`, `tool_choice` or `parallel_tool_calls` the request gets wrong. */
export class ToolRequestError extends Error {
  /** The request field at fault, e.g. `tools[1].function.name`. */
  readonly field: string;

  constructor(field: string, detail: string) {
    super(`${field}: ${detail}`.replace(/[\r\n]+/g, " "));
    this.name = "ToolRequestError";
    this.field = field;
  }
}

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const FUNCTION_KEYS = new Set(["name", "description", "parameters", "strict"]);

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function short(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 60 ? s.slice(0, 57) + "..." : s;
}

/** `tools` checked: an array of `{type: "function", function: {name, description?, parameters?, strict?}}`. */
export function checkTools(tools: unknown): ToolDefinition[] {
  if (!Array.isArray(tools)) {
    throw new ToolRequestError("tools", `expected an array, got ${short(tools)}`);
  }
  const seen = new Set<string>();
  return tools.map((t, i) => {
    const at = `tools[${i}]`;
    if (!isObject(t)) throw new ToolRequestError(at, `expected an object, got ${short(t)}`);
    for (const k of Object.keys(t)) {
      if (k !== "type" && k !== "function") {
        throw new ToolRequestError(`${at}.${k}`, "is not supported");
      }
    }
    if (t.type !== "function") {
      throw new ToolRequestError(
        `${at}.type`,
        `only "function" is supported, got ${short(t.type)}`,
      );
    }
    const f = t.function;
    if (!isObject(f)) {
      throw new ToolRequestError(`${at}.function`, `expected an object, got ${short(f)}`);
    }
    for (const k of Object.keys(f)) {
      if (!FUNCTION_KEYS.has(k)) {
        throw new ToolRequestError(`${at}.function.${k}`, "is not supported");
      }
    }
    if (typeof f.name !== "string" || !NAME.test(f.name)) {
      throw new ToolRequestError(
        `${at}.function.name`,
        `expected 1 to 64 letters, digits, "_", "-" or ".", got ${short(f.name)}`,
      );
    }
    if (seen.has(f.name)) {
      throw new ToolRequestError(`${at}.function.name`, `"${f.name}" is declared twice`);
    }
    seen.add(f.name);
    if (f.description !== undefined && typeof f.description !== "string") {
      throw new ToolRequestError(
        `${at}.function.description`,
        `expected a string, got ${short(f.description)}`,
      );
    }
    if (f.parameters !== undefined && f.parameters !== null && !isObject(f.parameters)) {
      throw new ToolRequestError(
        `${at}.function.parameters`,
        `expected a JSON Schema object, got ${short(f.parameters)}`,
      );
    }
    if (f.strict !== undefined && typeof f.strict !== "boolean") {
      throw new ToolRequestError(
        `${at}.function.strict`,
        `expected a boolean, got ${short(f.strict)}`,
      );
    }
    const fn: ToolDefinition["function"] = { name: f.name };
    if (f.description !== undefined) fn.description = f.description as string;
    if (isObject(f.parameters)) fn.parameters = f.parameters;
    if (f.strict !== undefined) fn.strict = f.strict as boolean;
    return { type: "function", function: fn };
  });
}

/** `tool_choice` checked against the declared tools (default `auto`). */
export function checkToolChoice(choice: unknown, tools: readonly ToolDefinition[]): ToolChoice {
  if (choice === undefined || choice === null) return "auto";
  if (choice === "auto" || choice === "none" || choice === "required") return choice;
  if (typeof choice === "string") {
    throw new ToolRequestError(
      "tool_choice",
      `expected "auto", "none", "required" or a function, got ${short(choice)}`,
    );
  }
  if (!isObject(choice) || choice.type !== "function" || !isObject(choice.function)) {
    throw new ToolRequestError(
      "tool_choice",
      `expected {"type": "function", "function": {"name": …}}, got ${short(choice)}`,
    );
  }
  const name = choice.function.name;
  const names = tools.map((t) => t.function.name);
  if (typeof name !== "string" || !names.includes(name)) {
    throw new ToolRequestError(
      "tool_choice.function.name",
      `${short(name)} is not one of the tools (${names.join(", ") || "none declared"})`,
    );
  }
  return { type: "function", function: { name } };
}

/** `parallel_tool_calls` checked (default false, as llama-server). */
export function checkParallelToolCalls(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== "boolean") {
    throw new ToolRequestError("parallel_tool_calls", `expected a boolean, got ${short(value)}`);
  }
  return value;
}

/** The parameters schema of a tool (none, or `{}`: an object without properties, as llama.cpp). */
export function toolParameters(tool: ToolDefinition): Record<string, unknown> {
  const p = tool.function.parameters;
  if (p === undefined || Object.keys(p).length === 0) return { type: "object", properties: {} };
  return p;
}
