/**
 * Which keywords of a schema object the conversion enforces, which it may ignore, and the
 * check that refuses the rest: a keyword that is neither enforced by the branch llama.cpp's
 * converter takes for that object, nor an annotation, nor vacuous there (it only applies to
 * instance types the grammar never produces, or its value constrains nothing) is a
 * `SchemaError` naming it.
 *
 * @module
 */
import { SchemaError } from "./_json_schema_error.ts";
import type { ValueType } from "./_json_schema_value.ts";

/** Keywords that never constrain the value: annotations, identifiers, definitions. */
export const IGNORED_KEYWORDS: ReadonlySet<string> = new Set([
  "title",
  "description",
  "examples",
  "default",
  "deprecated",
  "readOnly",
  "writeOnly",
  "$schema",
  "$id",
  "$anchor",
  "$dynamicAnchor",
  "$recursiveAnchor",
  "$vocabulary",
  "$comment",
  "$defs",
  "definitions",
  "contentMediaType",
  "contentEncoding",
  "contentSchema",
  "discriminator",
]);

/** The instance types each type-specific keyword applies to; on other types it is vacuous. */
const APPLIES_TO = new Map<string, readonly ValueType[]>();
const NUMERIC: readonly ValueType[] = ["number", "integer"];
for (const k of ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]) {
  APPLIES_TO.set(k, NUMERIC);
}
for (const k of ["minLength", "maxLength", "pattern", "format"]) APPLIES_TO.set(k, ["string"]);
for (
  const k of [
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedItems",
  ]
) APPLIES_TO.set(k, ["array"]);
for (
  const k of [
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "propertyNames",
    "unevaluatedProperties",
  ]
) APPLIES_TO.set(k, ["object"]);

/** Constraint keywords that apply to every type. */
const GENERAL_KEYWORDS: ReadonlySet<string> = new Set([
  "type",
  "enum",
  "const",
  "allOf",
  "anyOf",
  "oneOf",
  "not",
  "if",
  "then",
  "else",
  "$ref",
  "$dynamicRef",
  "$recursiveRef",
]);

/** A value that constrains nothing, so the keyword may stay unenforced. */
function isVacuous(key: string, value: unknown): boolean {
  switch (key) {
    case "additionalProperties":
    case "unevaluatedProperties":
    case "unevaluatedItems":
    case "additionalItems":
      return value === true;
    case "uniqueItems":
      return value === false;
    case "minLength":
    case "minItems":
    case "minProperties":
      return value === 0;
    case "required":
      return Array.isArray(value) && value.length === 0;
    case "pattern":
      return value === "";
    default:
      return false;
  }
}

/** Whether the keyword is one this converter knows (enforced somewhere, or refused by design). */
export function isKnownKeyword(key: string): boolean {
  return IGNORED_KEYWORDS.has(key) || GENERAL_KEYWORDS.has(key) || APPLIES_TO.has(key);
}

/**
 * Throws a `SchemaError` for the first keyword of `schema` that the branch does not
 * enforce (`enforced`), that is no annotation (nor an `x-` extension), that is not vacuous,
 * and that applies to one of the `produced` types. `hint` explains why, e.g. `(beside
 * "pattern")`. The `type` keyword is left to the caller.
 */
export function refuseUnenforced(
  schema: Record<string, unknown>,
  path: string,
  enforced: ReadonlySet<string>,
  produced: ReadonlySet<ValueType>,
  hint = "",
): void {
  for (const [key, value] of Object.entries(schema)) {
    if (key === "type" || enforced.has(key) || IGNORED_KEYWORDS.has(key)) continue;
    if (key.startsWith("x-") || isVacuous(key, value)) continue;
    const types = APPLIES_TO.get(key);
    if (types !== undefined && !types.some((t) => produced.has(t))) continue;
    const detail = isKnownKeyword(key)
      ? "is not supported" + (hint === "" ? "" : " " + hint)
      : "is not supported (not a JSON Schema keyword this converter knows)";
    throw new SchemaError(path, key, detail);
  }
}
