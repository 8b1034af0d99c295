/**
 * The error and the limits of the JSON Schema → GBNF converter (see `json_schema.ts`).
 *
 * @module
 */

/**
 * Deepest nesting of sub-schemas (through `properties`, `items`, `anyOf`, `$ref`, …) the
 * converter follows; deeper is refused, so hostile schemas cannot overflow the stack.
 */
export const MAX_SCHEMA_DEPTH = 100;
/**
 * Most sub-schemas one conversion builds (a `type` array copies its schema once per type,
 * so a few nested type arrays multiply); more is refused instead of running for minutes.
 */
export const MAX_SCHEMA_NODES = 20_000;
/**
 * Largest repetition count (`minItems`, `maxItems`, `minLength`, `maxLength`, a pattern's
 * `{m,n}`) a grammar may hold: llama.cpp's GBNF parser expands repetitions into rules and
 * refuses (or, for a maximum, silently drops) counts above its `MAX_REPETITION_THRESHOLD`,
 * 2000.
 */
export const MAX_REPETITION = 2000;
/** Deepest group nesting in a `pattern` (llama.cpp's `MAX_PATTERN_DEPTH`). */
export const MAX_PATTERN_DEPTH = 100;
/**
 * Largest magnitude of an integer bound (`minimum`, `maximum`, …): beyond 2^53 a JavaScript
 * number no longer holds every integer, so the bound would not be the one written.
 */
export const MAX_INTEGER_BOUND = Number.MAX_SAFE_INTEGER;
/** Deepest nesting of a `const` or `enum` value. */
export const MAX_VALUE_DEPTH = 256;
/** Largest grammar text (rule names and bodies, in UTF-16 code units) one conversion writes. */
export const MAX_GRAMMAR_CHARS = 16 * 1024 * 1024;

/** A JSON pointer (RFC 6901) token: `~` and `/` escaped. */
export function pointerToken(token: string | number): string {
  return String(token).replaceAll("~", "~0").replaceAll("/", "~1");
}

/** `path` extended by one token. */
export function childPath(path: string, ...tokens: (string | number)[]): string {
  return path + tokens.map((t) => "/" + pointerToken(t)).join("");
}

/** A long pointer with its middle elided, so that messages stay short. */
function shortened(path: string): string {
  return path.length <= 160 ? path : path.slice(0, 60) + "/…" + path.slice(-90);
}

/**
 * A schema the converter refuses: invalid, beyond a limit, or asking for a constraint the
 * grammar cannot enforce. The message is one line and names the keyword and where it is:
 *
 * `json schema: "multipleOf" at /properties/n is not supported`
 */
export class SchemaError extends Error {
  /** JSON pointer of the schema object holding the keyword ("" for the root schema). */
  readonly path: string;
  /** The keyword at fault (`"multipleOf"`, `"$ref"`, `"pattern"`, …), `""` for the schema itself. */
  readonly keyword: string;

  /** `detail` completes the sentence after the keyword and the place, e.g. "is not supported". */
  constructor(path: string, keyword: string, detail: string) {
    const where = path === "" ? "the root" : shortened(path);
    const what = keyword === "" ? `the schema at ${where}` : `"${keyword}" at ${where}`;
    super(`json schema: ${what} ${detail}`.replace(/[\r\n]+/g, " "));
    this.name = "SchemaError";
    this.path = path;
    this.keyword = keyword;
  }
}
