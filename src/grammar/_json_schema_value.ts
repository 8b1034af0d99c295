/**
 * JSON values inside a schema (`const`, `enum`, property names): serialized as llama.cpp's
 * `common_json::dump()` (nlohmann::json) does, since the converter writes that text into
 * the grammar, and typed as its `json_type` does.
 *
 * @module
 */
import { MAX_VALUE_DEPTH, SchemaError } from "./_json_schema_error.ts";

/** The JSON value types of llama.cpp's `common_chat_schema::value_type`. */
export type ValueType = "null" | "boolean" | "number" | "integer" | "string" | "array" | "object";

/** A plain JSON object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The type of a JSON value; a whole number is an `integer`. */
export function jsonTypeOf(value: unknown): ValueType {
  if (value === null) return "null";
  if (typeof value === "boolean") return "boolean";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  if (typeof value === "string") return "string";
  if (Array.isArray(value)) return "array";
  return "object";
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether `s` is valid Unicode (no lone surrogate), as nlohmann's UTF-8 check requires. */
export function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/** Orders strings by code point, as C++ orders their UTF-8 bytes. */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!;
    const y = b.codePointAt(i)!;
    if (x !== y) return x - y;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
}

const SHORT_ESCAPES: Record<string, string> = {
  '"': '\\"',
  "\\": "\\\\",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
};

/** A JSON string literal as nlohmann writes it: raw UTF-8, `\u00xx` for other controls. */
export function dumpString(s: string): string {
  // deno-lint-ignore no-control-regex
  return '"' + s.replace(/["\\\x00-\x1f]/g, (c) => {
    return SHORT_ESCAPES[c] ?? "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0");
  }) + '"';
}

/**
 * A non-integral number as nlohmann writes a double: the shortest round-trip digits, a
 * decimal point up to 10^15, otherwise an exponent of at least two digits (`1e-07`).
 */
export function dumpDouble(v: number): string {
  if (!Number.isFinite(v)) return "null";
  const [mantissa, exponent] = Math.abs(v).toExponential().split("e");
  const digits = mantissa.replace(".", "");
  const k = digits.length;
  const n = Number(exponent) + 1; // position of the decimal point in `digits`
  const sign = v < 0 || Object.is(v, -0) ? "-" : "";
  let body: string;
  if (k <= n && n <= 15) body = digits + "0".repeat(n - k) + ".0";
  else if (0 < n && n <= 15) body = digits.slice(0, n) + "." + digits.slice(n);
  else if (-4 < n && n <= 0) body = "0." + "0".repeat(-n) + digits;
  else {
    const e = n - 1;
    const exp = (e < 0 ? "-" : "+") + String(Math.abs(e)).padStart(2, "0");
    body = (k === 1 ? digits : digits[0] + "." + digits.slice(1)) + "e" + exp;
  }
  return sign + body;
}

/** A number as nlohmann writes it: whole numbers within 64 bits as integers. */
export function dumpNumber(v: number): string {
  if (Number.isInteger(v) && v > -(2 ** 63) && v < 2 ** 64) return BigInt(v).toString();
  return dumpDouble(v);
}

/**
 * `value` serialized compactly as llama.cpp's `value.dump()`; throws `SchemaError` (at
 * `path`, naming `keyword`) for what is not JSON, a lone surrogate, or nesting beyond
 * `MAX_VALUE_DEPTH`.
 */
export function dumpJson(value: unknown, path: string, keyword: string, depth = 0): string {
  if (depth > MAX_VALUE_DEPTH) {
    throw new SchemaError(path, keyword, `nests deeper than ${MAX_VALUE_DEPTH} (MAX_VALUE_DEPTH)`);
  }
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      return dumpNumber(value);
    case "string":
      if (!isWellFormed(value)) {
        throw new SchemaError(path, keyword, "holds a string with a lone surrogate");
      }
      return dumpString(value);
    case "object": {
      if (Array.isArray(value)) {
        return "[" + value.map((v) => dumpJson(v, path, keyword, depth + 1)).join(",") + "]";
      }
      const parts = Object.entries(value).map(([k, v]) =>
        dumpJson(k, path, keyword, depth + 1) + ":" + dumpJson(v, path, keyword, depth + 1)
      );
      return "{" + parts.join(",") + "}";
    }
    default:
      throw new SchemaError(path, keyword, `holds a ${typeof value}, which is not JSON`);
  }
}
