/**
 * A reading position in generated text for the call parsers: literals, text up to a
 * delimiter, whitespace, JSON values — each answering whether the text matched, did not,
 * or ended first (`"cut"`: while streaming, the rest is yet to come).
 *
 * @module
 */
import { type JsonSpan, scanJson, skipSpace } from "./json_scan.ts";

/** A step's outcome: matched, not matched, or the text ended before it could tell. */
export type Step = "ok" | "no" | "cut";

/** A position in `text`, moved by matching steps. */
export class Cursor {
  readonly text: string;
  pos: number;

  constructor(text: string, pos: number) {
    this.text = text;
    this.pos = pos;
  }

  get atEnd(): boolean {
    return this.pos >= this.text.length;
  }

  /** Skips whitespace. */
  space(): void {
    this.pos = skipSpace(this.text, this.pos);
  }

  /** Whether `s` is next (without moving). */
  peek(s: string): Step {
    if (this.text.startsWith(s, this.pos)) return "ok";
    const left = this.text.slice(this.pos);
    return left.length < s.length && s.startsWith(left) ? "cut" : "no";
  }

  /** Takes the literal `s` when it is next. */
  lit(s: string): Step {
    const r = this.peek(s);
    if (r === "ok") this.pos += s.length;
    return r;
  }

  /** The text up to the first of `delims` (not taken), or `undefined` when none follows. */
  until(...delims: string[]): { text: string; delim: string } | undefined {
    let best = -1;
    let which = "";
    for (const d of delims) {
      const at = this.text.indexOf(d, this.pos);
      if (at >= 0 && (best < 0 || at < best)) {
        best = at;
        which = d;
      }
    }
    if (best < 0) return undefined;
    const text = this.text.slice(this.pos, best);
    this.pos = best;
    return { text, delim: which };
  }

  /** The JSON value here (moved past when whole), or `undefined` when it is not JSON. */
  json(): JsonSpan | undefined {
    const span = scanJson(this.text, this.pos);
    if (span?.complete) this.pos = span.end;
    return span;
  }
}
