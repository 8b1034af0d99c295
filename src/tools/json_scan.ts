/**
 * A JSON value's extent in generated text, complete or cut short: where it ends, whether
 * it is whole, and for objects where each member's key and value are. Parsers use it to
 * take a call's arguments verbatim (as llama.cpp does) and, while streaming, the part of
 * them written so far.
 *
 * @example
 * ```ts
 * import { scanJson } from "./json_scan.ts";
 * const v = scanJson('{"name": "f", "arguments": {"a', 0)!;
 * // v.complete === false; v.members[1].key === "arguments"; its value runs to the end
 * ```
 *
 * @module
 */

/** A member of a scanned object. */
export interface JsonMember {
  /** The decoded key (the part written so far when `keyComplete` is false). */
  key: string;
  keyComplete: boolean;
  /** The value, absent while only the key (and maybe the colon) is written. */
  value?: JsonSpan;
}

/** A scanned JSON value: `text.slice(start, end)`. */
export interface JsonSpan {
  kind: "object" | "array" | "string" | "number" | "literal";
  start: number;
  end: number;
  /** False when the text ended inside the value. */
  complete: boolean;
  /** An object's members, in order. */
  members?: JsonMember[];
  /** An array's items, in order (the last one may be cut). */
  items?: JsonSpan[];
}

/** Deepest nesting scanned (deeper input is taken as malformed, not as a stack overflow). */
const MAX_DEPTH = 512;

const WS = new Set([" ", "\t", "\n", "\r"]);

/** The index of the first non-whitespace character at or after `i`. */
export function skipSpace(text: string, i: number): number {
  while (i < text.length && WS.has(text[i])) i++;
  return i;
}

/**
 * The JSON value starting at `pos` (after no whitespace): its extent, or `undefined` when
 * the text there is not (the start of) a JSON value. A value cut by the end of the text is
 * returned with `complete: false`.
 */
export function scanJson(text: string, pos: number): JsonSpan | undefined {
  try {
    return scanValue(text, pos, 0);
  } catch (e) {
    if (e instanceof Malformed) return undefined;
    throw e;
  }
}

class Malformed extends Error {}

function scanValue(text: string, i: number, depth: number): JsonSpan {
  if (depth > MAX_DEPTH) throw new Malformed();
  if (i >= text.length) throw new Malformed();
  const c = text[i];
  if (c === "{") return scanObject(text, i, depth);
  if (c === "[") return scanArray(text, i, depth);
  if (c === '"') return scanString(text, i);
  if (c === "-" || (c >= "0" && c <= "9")) return scanNumber(text, i);
  for (const lit of ["true", "false", "null"]) {
    const have = text.slice(i, i + lit.length);
    if (have === lit) return { kind: "literal", start: i, end: i + lit.length, complete: true };
    if (i + have.length === text.length && lit.startsWith(have)) {
      return { kind: "literal", start: i, end: text.length, complete: false };
    }
  }
  throw new Malformed();
}

function scanString(text: string, i: number): JsonSpan {
  let j = i + 1;
  while (j < text.length) {
    const c = text[j];
    if (c === '"') return { kind: "string", start: i, end: j + 1, complete: true };
    if (c === "\\") {
      j += 2;
      continue;
    }
    if (c < " ") throw new Malformed();
    j++;
  }
  return { kind: "string", start: i, end: text.length, complete: false };
}

function scanNumber(text: string, i: number): JsonSpan {
  const m = /^-?(?:0|[1-9][0-9]*)?(?:\.[0-9]*)?(?:[eE][-+]?[0-9]*)?/.exec(text.slice(i, i + 400))!;
  const end = i + m[0].length;
  if (m[0].length === 0) throw new Malformed();
  if (end === text.length) return { kind: "number", start: i, end, complete: false };
  if (!/^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$/.test(m[0])) throw new Malformed();
  return { kind: "number", start: i, end, complete: true };
}

function scanArray(text: string, i: number, depth: number): JsonSpan {
  const items: JsonSpan[] = [];
  let j = skipSpace(text, i + 1);
  const cut = (): JsonSpan => ({
    kind: "array",
    start: i,
    end: text.length,
    complete: false,
    items,
  });
  const whole = (end: number): JsonSpan => ({
    kind: "array",
    start: i,
    end,
    complete: true,
    items,
  });
  if (j >= text.length) return cut();
  if (text[j] === "]") return whole(j + 1);
  for (;;) {
    const v = scanValue(text, j, depth + 1);
    items.push(v);
    if (!v.complete) return cut();
    j = skipSpace(text, v.end);
    if (j >= text.length) return cut();
    if (text[j] === "]") return whole(j + 1);
    if (text[j] !== ",") throw new Malformed();
    j = skipSpace(text, j + 1);
    if (j >= text.length) return cut();
  }
}

function decodeKey(raw: string, complete: boolean): string {
  if (complete) return JSON.parse(raw);
  // a cut key: decode what is whole (drop a trailing partial escape)
  const body = raw.slice(1).replace(/\\(u[0-9a-fA-F]{0,3})?$/, "");
  try {
    return JSON.parse('"' + body + '"');
  } catch {
    return body;
  }
}

function scanObject(text: string, i: number, depth: number): JsonSpan {
  const members: JsonMember[] = [];
  const cut = (): JsonSpan => ({
    kind: "object",
    start: i,
    end: text.length,
    complete: false,
    members,
  });
  let j = skipSpace(text, i + 1);
  if (j >= text.length) return cut();
  if (text[j] === "}") return { kind: "object", start: i, end: j + 1, complete: true, members };
  for (;;) {
    if (text[j] !== '"') throw new Malformed();
    const k = scanString(text, j);
    const member: JsonMember = {
      key: decodeKey(text.slice(k.start, k.end), k.complete),
      keyComplete: k.complete,
    };
    members.push(member);
    if (!k.complete) return cut();
    j = skipSpace(text, k.end);
    if (j >= text.length) return cut();
    if (text[j] !== ":") throw new Malformed();
    j = skipSpace(text, j + 1);
    if (j >= text.length) return cut();
    member.value = scanValue(text, j, depth + 1);
    if (!member.value.complete) return cut();
    j = skipSpace(text, member.value.end);
    if (j >= text.length) return cut();
    if (text[j] === "}") return { kind: "object", start: i, end: j + 1, complete: true, members };
    if (text[j] !== ",") throw new Malformed();
    j = skipSpace(text, j + 1);
    if (j >= text.length) return cut();
  }
}

/** The member `key` of a scanned object, if written (whole key). */
export function member(span: JsonSpan, key: string): JsonMember | undefined {
  return span.members?.find((m) => m.keyComplete && m.key === key);
}

/** A complete string member's decoded value, else `undefined`. */
export function stringMember(text: string, span: JsonSpan, key: string): string | undefined {
  const v = member(span, key)?.value;
  if (v === undefined || v.kind !== "string" || !v.complete) return undefined;
  return JSON.parse(text.slice(v.start, v.end));
}
