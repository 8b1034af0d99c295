/**
 * A TypeScript port of llama.cpp's Jinja engine (`common/jinja/`, 2026-10):
 * the lexer, parser, runtime, values and built-ins, and the capability
 * probes, so chat templates render byte for byte as llama-server renders
 * them, with its leniency where Python's Jinja2 would raise.
 *
 * @example
 * ```ts
 * import { renderTemplate } from "./mod.ts";
 * const out = renderTemplate("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}", {
 *   messages: [{ role: "user", content: "Hi" }],
 * });
 * if (out !== "<user>Hi") throw new Error(out);
 * ```
 *
 * @module
 */
import { parse } from "./parser.ts";
import { Context, render } from "./runtime.ts";
import { fromJson } from "./value.ts";

export { applyPreserveReasoning, applyReasoningEffort, type Caps, capsOf } from "./caps.ts";
export { JinjaError } from "./error.ts";
export { parse } from "./parser.ts";
export { Context, render } from "./runtime.ts";
export { fromJson } from "./value.ts";

/** Parses and renders `source` with `globals` (JSON-like values) in one step. */
export function renderTemplate(
  source: string,
  globals: Record<string, unknown>,
  now = new Date(),
): string {
  const program = parse(source);
  const ctx = new Context(program.source);
  ctx.now = now;
  for (const [k, v] of Object.entries(globals)) ctx.set(k, fromJson(v));
  return render(program, ctx);
}
