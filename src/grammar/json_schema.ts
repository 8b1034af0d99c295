/**
 * JSON Schema → GBNF: the grammar llama.cpp's `json_schema_to_grammar` writes for a schema
 * (same rules, names, order and whitespace rule), for constrained sampling. A port of
 * llama.cpp's `common/json-schema.cpp` and `common/json-schema-to-grammar.cpp` (MIT,
 * © the ggml authors), as of the `llama-cpp-python==0.3.36` sources (2026-10).
 *
 * ```ts
 * import { jsonSchemaToGrammar, SchemaError } from "./json_schema.ts";
 *
 * const grammar = jsonSchemaToGrammar({
 *   type: "object",
 *   properties: { name: { type: "string" }, age: { type: "integer", minimum: 0 } },
 *   required: ["name", "age"],
 * });
 * if (!grammar.includes('root ::= "{" space name-kv "," space age-kv space "}"')) {
 *   throw new Error(grammar);
 * }
 *
 * try {
 *   jsonSchemaToGrammar({ type: "number", multipleOf: 5 });
 * } catch (e) {
 *   if (!(e instanceof SchemaError) || e.keyword !== "multipleOf") throw e;
 *   // e.message: json schema: "multipleOf" at the root is not supported
 * }
 * ```
 *
 * **Enforced**, as llama.cpp does: `type` (a string or an array of types), `enum`, `const`,
 * `properties`, `required`, `additionalProperties` (`true`, `false` or a schema; absent
 * means none beside `properties`, any for a bare `{"type": "object"}`), `items` (a schema,
 * or an array as a tuple), `prefixItems`, `minItems`, `maxItems`, `minLength`,
 * `maxLength`, `pattern` (anchored `^…$`; see `_json_schema_pattern.ts` for the syntax),
 * `format` (`date`, `time`, `date-time`, `uuid`, `uuid1`…`uuid5`), integer `minimum`,
 * `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (fractional bounds round inwards),
 * `anyOf`, `oneOf` (as `anyOf`: that only one alternative matches is not enforced),
 * `allOf` (of objects, merged with every member's properties required and no others, or
 * of enums, the common values), `$ref` to `#/…` in the same document (`$defs`,
 * `definitions`, or any other path), recursion through properties and items. Like
 * llama.cpp, the grammar may be stricter than the schema (objects allow no properties
 * beyond `properties` unless `additionalProperties` says so; a tuple has exactly its
 * items), never looser.
 *
 * **Ignored** (they do not constrain the value): `title`, `description`, `examples`,
 * `default`, `deprecated`, `readOnly`, `writeOnly`, `$schema`, `$id`, `$anchor`,
 * `$dynamicAnchor`, `$recursiveAnchor`, `$vocabulary`, `$comment`, `$defs`,
 * `definitions`, `contentMediaType`, `contentEncoding`, `contentSchema`, `discriminator`
 * (OpenAPI's hint beside `oneOf`), and `x-…` extensions. A keyword that only applies to
 * types the schema object cannot produce is vacuous and ignored too (`minLength` beside
 * `"type": "integer"`), as is a value that constrains nothing (`"uniqueItems": false`,
 * `"minItems": 0`, `"required": []`, `"additionalProperties": true`).
 *
 * **Refused** with a `SchemaError` naming the keyword and its JSON pointer, where llama.cpp
 * silently drops it: `multipleOf`; `minimum`, `maximum`, `exclusiveMinimum`,
 * `exclusiveMaximum` on `number`; `uniqueItems`, `contains`, `minContains`,
 * `maxContains`, `unevaluatedItems`; `patternProperties`, `propertyNames`,
 * `minProperties`, `maxProperties`, `dependentRequired`, `dependentSchemas`,
 * `dependencies`, `unevaluatedProperties`; `not`, `if`, `then`, `else`, `$dynamicRef`,
 * `$recursiveRef`; any `format` not listed above (on any type); any unknown keyword; a
 * keyword beside the one llama.cpp picks instead (`minLength` or `format` beside
 * `pattern`, lengths beside `format`, anything but annotations beside `$ref`, `anyOf` or
 * `oneOf` (a `type` there only if it allows every type they produce), both `anyOf` and
 * `oneOf`, `prefixItems` beside `items`, counts a tuple's length cannot meet, `allOf`
 * beside `properties`); a `required` name not in `properties`; an `allOf` whose merge
 * would not be the intersection (members that are not objects or enums, a property in two
 * members, a member forbidding another's property, an `anyOf` alternative that requires or
 * forbids properties); a pattern llama.cpp would replace by "any string" (unanchored,
 * `\d`, `\w`, lookarounds, …) or that is not a valid regular expression (with its
 * position); boolean schemas (`true`/`false`, except as `additionalProperties` and
 * `"items": false` closing a `prefixItems` tuple); remote or malformed `$ref`s; impossible
 * bounds (`minItems` above `maxItems`, no integer between the bounds); a `$ref` cycle
 * that consumes nothing; and inputs beyond the limits (`MAX_SCHEMA_DEPTH`,
 * `MAX_SCHEMA_NODES`, `MAX_REPETITION`, …), so hostile schemas cannot hang the process.
 *
 * **Where the grammar differs** from llama.cpp's (where llama.cpp's would break): a
 * top-level property named `""` gets the value rule `-` (llama.cpp names it `root`, so its
 * grammar's root is that property's value); in a pattern, a quantifier after an escape or
 * a quote repeats that character only (llama.cpp repeats the whole preceding literal), and
 * patterns are read by code point (llama.cpp splits a UTF-8 character before a
 * quantifier); in the rule for "any other key", `]`, `-` and a lone `^` are escaped (a
 * property name with a quote, backslash or control character is refused there) and a
 * property named `*` is one property (llama.cpp takes it for the additional ones);
 * `minimum` with `exclusiveMinimum` (or the maxima) give the stricter bound (llama.cpp
 * ignores the exclusive one); `{"prefixItems": [...], "items": false}` is a tuple
 * (llama.cpp refuses it). A pattern's characters are written as a JSON string holds them:
 * a quote, a backslash or a control character it names comes as its JSON escape, and `.`
 * and negated classes leave out what JSON cannot hold raw (llama.cpp writes them raw,
 * which ends the string or makes it invalid JSON); the value the JSON decodes to matches
 * the pattern.
 *
 * Known limits: a schema is taken as a parsed JavaScript value, so property order follows
 * JavaScript's (integer-like names first) and `1.0` is the integer `1`, where llama.cpp
 * keeps the text's order and writes `1.0`. A pattern's `.` does not write control
 * characters other than a tab (and line breaks with `dotall`).
 *
 * @module
 */
import { formatLiteral, SchemaConverter } from "./_json_schema_converter.ts";
import { SchemaBuilder } from "./_json_schema_nodes.ts";

export {
  MAX_GRAMMAR_CHARS,
  MAX_INTEGER_BOUND,
  MAX_PATTERN_DEPTH,
  MAX_REPETITION,
  MAX_SCHEMA_DEPTH,
  MAX_SCHEMA_NODES,
  MAX_VALUE_DEPTH,
  SchemaError,
} from "./_json_schema_error.ts";

/** Options of `jsonSchemaToGrammar`. */
export interface JsonSchemaGrammarOptions {
  /** `.` in a `pattern` also matches line breaks (llama.cpp's `dotall`); default false. */
  dotall?: boolean;
  /**
   * Property names to write first, in this order, in every object (the rest follow in
   * schema order), as llama.cpp's former `--prop-order`; default none.
   */
  propOrder?: string[];
}

/**
 * The GBNF grammar (rule `root`) for the JSON values `schema` allows, identical to
 * llama.cpp's `json_schema_to_grammar(schema)`. Throws `SchemaError` for a schema it
 * refuses (see the module documentation); never anything else for any JSON input.
 */
export function jsonSchemaToGrammar(
  schema: unknown,
  options: JsonSchemaGrammarOptions = {},
): string {
  const root = new SchemaBuilder(schema).build();
  const converter = new SchemaConverter({
    dotall: options.dotall ?? false,
    propOrder: options.propOrder ?? [],
  });
  converter.visit(root, "");
  return converter.format();
}

/**
 * The grammar llama-server uses for OpenAI's `response_format: {"type": "json_object"}`
 * without a schema: any JSON object (the schema `{"type": "object"}`).
 */
export function jsonObjectGrammar(): string {
  return jsonSchemaToGrammar({ type: "object" });
}

/**
 * Several schemas' rules in one grammar, each under its own rule-name prefix, beside
 * hand-written rules (the tool-call grammars: one arguments schema per tool, inside the
 * format's markup). The rules are the ones `jsonSchemaToGrammar` writes for each schema,
 * named from the prefix instead of `root`; shared primitives (`space`, `string`, …) are
 * written once.
 *
 * ```ts
 * import { SchemaRules } from "./json_schema.ts";
 * const rules = new SchemaRules();
 * const args = rules.addSchema("get-time-args", { type: "object", properties: { city: { type: "string" } } });
 * rules.addRule("root", `"<call>" space ${args} "</call>"`);
 * const gbnf = rules.format();
 * ```
 */
export class SchemaRules {
  readonly #converter = new SchemaConverter({ dotall: false, propOrder: [] });

  /** Adds the rules of `schema` named from `name`; returns the rule to reference. Throws `SchemaError`. */
  addSchema(name: string, schema: unknown): string {
    if (name === "" || name === "root") {
      throw new RangeError(`a schema's rule name cannot be "${name}"`);
    }
    return this.#converter.visit(new SchemaBuilder(schema).build(), name);
  }

  /** Adds the rule `name ::= body` (renamed `name0`, … when the name holds another body); returns its name. */
  addRule(name: string, body: string): string {
    return this.#converter.addRule(name, body);
  }

  /** The grammar: every rule, sorted by name. */
  format(): string {
    return this.#converter.format();
  }
}

/** A GBNF string literal for `text` (quotes, backslashes and line breaks escaped). */
export function gbnfLiteral(text: string): string {
  return formatLiteral(text);
}
