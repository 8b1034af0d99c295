/**
 * What a template supports, found as llama.cpp finds it
 * (`common/jinja/caps.cpp`): probe conversations rendered with usage stats
 * on, then which input values the template read (a system message's
 * content, the tools, the tool calls and their object arguments) and whether
 * it rendered at all. chat.cpp's input workarounds follow these.
 *
 * @module
 */
import type { Program } from "./ast.ts";
import { Context, render } from "./runtime.ts";
import { fromJson, type Value } from "./value.ts";

/** The capabilities llama.cpp's `caps_get` reports. */
export interface Caps {
  supportsTools: boolean;
  supportsToolCalls: boolean;
  supportsSystemRole: boolean;
  supportsParallelToolCalls: boolean;
  supportsPreserveReasoning: boolean;
  supportsReasoningEffort: boolean;
  supportsStringContent: boolean;
  supportsTypedContent: boolean;
  supportsObjectArguments: boolean;
}

interface Probe {
  ctx: Context;
  ok: boolean;
  output: string;
  messages: Value;
  tools: Value;
}

function probe(
  program: Program & { source: string },
  messages: unknown,
  tools: unknown = [],
  extra?: (ctx: Context) => void,
): Probe {
  const ctx = new Context("");
  ctx.stats = true;
  const globals: Record<string, unknown> = {
    messages,
    tools,
    bos_token: "",
    eos_token: "",
    add_generation_prompt: true,
  };
  for (const [k, v] of Object.entries(globals)) ctx.set(k, fromJson(v));
  extra?.(ctx);
  const m = ctx.get("messages");
  const t = ctx.get("tools");
  try {
    return { ctx, ok: true, output: render(program, ctx), messages: m, tools: t };
  } catch {
    return { ctx, ok: false, output: "", messages: m, tools: t };
  }
}

const at = (v: Value, ...path: (number | string)[]): Value => {
  let cur = v;
  for (const p of path) cur = typeof p === "number" ? cur.arr[p] : cur.getKey(p)!;
  return cur;
};

const TOOLS = [{
  name: "tool",
  type: "function",
  function: {
    name: "tool1",
    description: "Tool description",
    parameters: {
      type: "object",
      properties: { arg: { type: "string", description: "Arg description" } },
      required: ["arg"],
    },
  },
}];

function toolConversation(args: unknown, calls = 1): unknown[] {
  const call = (id: string) => ({
    id,
    type: "function",
    function: { name: "tool1", arguments: args },
  });
  return [
    { role: "user", content: "User message" },
    {
      role: "assistant",
      content: "",
      tool_calls: calls === 1 ? [call("call00001")] : [call("call00001"), call("call00002")],
    },
    { role: "tool", content: "Tool response", tool_call_id: "call00001" },
    { role: "assistant", content: "The tool response was 'tool response'" },
    { role: "user", content: "User message" },
  ];
}

/** Preserve-reasoning switches (`caps_apply_preserve_reasoning`). */
export function applyPreserveReasoning(ctx: Context, enabled: boolean): void {
  ctx.set("preserve_thinking", fromJson(enabled));
  ctx.set("clear_thinking", fromJson(!enabled));
  ctx.set("truncate_history_thinking", fromJson(!enabled));
  ctx.set("drop_thinking", fromJson(!enabled));
}

/** Reasoning-effort variables (`caps_apply_reasoning_effort`). */
export function applyReasoningEffort(ctx: Context, effort: string): void {
  const v = fromJson(effort);
  ctx.set("reasoning_effort", v);
  ctx.set("reasoning_strength", v);
}

/** Probes `program` for its capabilities. */
export function capsOf(program: Program & { source: string }): Caps {
  const caps: Caps = {
    supportsTools: true,
    supportsToolCalls: true,
    supportsSystemRole: true,
    supportsParallelToolCalls: true,
    supportsPreserveReasoning: false,
    supportsReasoningEffort: false,
    supportsStringContent: true,
    supportsTypedContent: false,
    supportsObjectArguments: false,
  };
  const has = (v: Value, op: string) => v.hasStats && v.stats.ops.has(op);

  const marker = "STRING_MARKER";
  let p = probe(program, [{ role: "user", content: marker }]);
  let content = at(p.messages, 0, "content");
  const checksForString = has(content, "test_is_string");
  let usedAsArray = has(content, "selectattr") || has(content, "array_access");
  if (usedAsArray) caps.supportsTypedContent = true;
  if (!p.ok) caps.supportsStringContent = false;
  else if (usedAsArray && !p.output.includes(marker)) caps.supportsStringContent = false;

  if (checksForString) {
    p = probe(program, [{ role: "user", content: [] }]);
    content = at(p.messages, 0, "content");
    usedAsArray = has(content, "selectattr") || has(content, "array_access");
    if (usedAsArray && p.ok) caps.supportsTypedContent = true;
  }

  p = probe(program, [
    { role: "system", content: "System message" },
    { role: "user", content: "User message" },
  ]);
  content = at(p.messages, 0, "content");
  if (!(content.hasStats && content.stats.used)) caps.supportsSystemRole = false;

  p = probe(program, toolConversation({ arg: "value" }), TOOLS);
  if (p.ok) {
    const name = at(p.tools, 0, "function", "name");
    if (!(name.hasStats && name.stats.used)) caps.supportsTools = false;
    const calls = at(p.messages, 1, "tool_calls");
    if (!(calls.hasStats && calls.stats.used)) caps.supportsToolCalls = false;
    else {
      const arg = at(calls, 0, "function", "arguments", "arg");
      if (arg.hasStats && arg.stats.used) caps.supportsObjectArguments = true;
    }
  }

  if (!caps.supportsObjectArguments) {
    p = probe(program, toolConversation('{"arg": "value"}'), TOOLS);
    if (!p.ok) {
      caps.supportsToolCalls = false;
      caps.supportsTools = false;
    } else {
      const name = at(p.tools, 0, "function", "name");
      if (!(name.hasStats && name.stats.used)) caps.supportsTools = false;
      const calls = at(p.messages, 1, "tool_calls");
      if (!(calls.hasStats && calls.stats.used)) caps.supportsToolCalls = false;
    }
  }

  const args = caps.supportsObjectArguments ? { arg: "value" } : '{"arg": "value"}';
  p = probe(program, toolConversation(args, 2), TOOLS);
  if (!p.ok) caps.supportsParallelToolCalls = false;
  else {
    const second = at(p.messages, 1, "tool_calls", 1, "function");
    if (!(second.hasStats && second.stats.used)) caps.supportsParallelToolCalls = false;
  }

  const placeholder = "<REASONING_CONTENT_PLACEHOLDER>";
  p = probe(
    program,
    [
      { role: "user", content: "User message" },
      { role: "assistant", content: "Assistant message", reasoning_content: placeholder },
      { role: "user", content: "User message" },
      { role: "assistant", content: "Assistant message", reasoning_content: "Reasoning content" },
      { role: "user", content: "User message" },
    ],
    [],
    (ctx) => {
      ctx.set("enable_thinking", fromJson(true));
      applyPreserveReasoning(ctx, true);
    },
  );
  if (p.output.includes(placeholder)) caps.supportsPreserveReasoning = true;

  p = probe(program, [{ role: "user", content: "User message" }], [], (ctx) => {
    ctx.set("enable_thinking", fromJson(true));
    applyReasoningEffort(ctx, "low");
  });
  const effort = p.ctx.get("reasoning_effort");
  caps.supportsReasoningEffort = effort.hasStats && effort.stats.used;
  return caps;
}
