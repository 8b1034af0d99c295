/**
 * Errors of the Jinja engine, with llama.cpp's source excerpts
 * (`common/jinja/utils.h`: `peak_source`, `fmt_error_with_source`).
 *
 * @example
 * ```ts
 * import { peakSource } from "./error.ts";
 * if (peakSource("{{ x }}", 3) !== "...{{ x }}...\n      ^") throw new Error();
 * ```
 *
 * @module
 */

/**
 * A template that fails to lex, parse or run. `message` is llama.cpp's text
 * (for a runtime error, the "While executing … in source" excerpt then
 * `Error: ` and the cause); `cause` is the innermost message alone.
 */
export class JinjaError extends Error {
  /** The innermost error's message (for `raise_exception`: `Jinja Exception: <text>`). */
  readonly reason: string;
  /** The template called `raise_exception`. */
  readonly raised: boolean;
  /** Already wrapped in its source excerpt (outer statements pass it on as is). */
  rethrown = false;
  /** A feature llama.cpp's engine does not implement (passed on unwrapped). */
  notImplemented = false;
  constructor(message: string, reason = message, raised = false) {
    super(message);
    this.name = "JinjaError";
    this.reason = reason;
    this.raised = raised;
  }
}

/** `{% break %}` / `{% continue %}` unwinding to their loop. */
export class LoopSignal {
  constructor(readonly kind: "break" | "continue") {}
}

/** 40 characters either side of `pos`, newlines as ↵, and a caret under `pos`. */
export function peakSource(source: string, pos: number, maxPeak = 40): string {
  if (source === "") return "(no source available)";
  const start = pos >= maxPeak ? pos - maxPeak : 0;
  const end = Math.min(pos + maxPeak, source.length);
  const excerpt = source.slice(start, end).replaceAll("\n", "↵");
  return `...${excerpt}...\n${" ".repeat(pos - start + 3)}^`;
}

/** `<tag>: <message>` and the excerpt, as llama.cpp's lexer and parser report. */
export function sourceError(tag: string, message: string, source: string, pos: number): string {
  return `${tag}: ${message}\n${peakSource(source, pos)}`;
}

/** `line L, column C` of `pos` in `source`. */
export function lineCol(source: string, pos: number): string {
  let line = 1;
  let col = 1;
  for (let i = 0; i < pos && i < source.length; i++) {
    if (source[i] === "\n") {
      line++;
      col = 1;
    } else col++;
  }
  return `line ${line}, column ${col}`;
}
