/**
 * The JSON Schema → GBNF converter against llama.cpp's own expectations (the cases of its
 * `tests/test-json-schema-to-grammar.cpp`, read from the llama.cpp sources of the
 * llama-cpp-python 0.3.36 sdist), the keywords it refuses, and hostile and fuzzed inputs.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  jsonObjectGrammar,
  jsonSchemaToGrammar,
  MAX_REPETITION,
  MAX_SCHEMA_DEPTH,
  SchemaError,
} from "../src/grammar/json_schema.ts";
import { prng, randomText } from "./_fuzz.ts";
import { ensureLlamaCppSource } from "./_llamacpp_src.ts";

// ---------------------------------------------------------------------------------------
// llama.cpp's cases

/** One `test({ STATUS, "name", schema, grammar })` of llama.cpp's C++ test. */
interface LlamaCase {
  status: "SUCCESS" | "FAILURE";
  name: string;
  schema: string;
  grammar: string;
  line: number;
}

const SIMPLE_ESCAPES: Record<string, string> = {
  n: "\n",
  t: "\t",
  r: "\r",
  '"': '"',
  "\\": "\\",
  "'": "'",
  "0": "\0",
  a: "\x07",
  b: "\b",
  f: "\f",
  v: "\v",
  "?": "?",
};

/** One C++ string literal at `i` (`R"d(…)d"` raw or `"…"` with escapes), or null. */
function readLiteral(src: string, i: number): [string, number] | null {
  const prefix = /^(?:u8|u|U|L)?R?"/.exec(src.slice(i, i + 4));
  if (prefix === null) return null;
  let j = i + prefix[0].length;
  if (prefix[0].endsWith('R"')) {
    const open = src.indexOf("(", j);
    const delimiter = src.slice(j, open);
    if (open < 0 || !/^[^\s()\\]{0,16}$/.test(delimiter)) {
      throw new Error(`bad raw string delimiter at offset ${i}`);
    }
    const close = src.indexOf(")" + delimiter + '"', open + 1);
    if (close < 0) throw new Error(`unterminated raw string at offset ${i}`);
    return [src.slice(open + 1, close), close + delimiter.length + 2];
  }
  let out = "";
  while (j < src.length && src[j] !== '"') {
    if (src[j] !== "\\") {
      out += src[j++];
      continue;
    }
    const c = src[j + 1];
    if (c === "x") {
      const hex = /^[0-9a-fA-F]+/.exec(src.slice(j + 2))![0];
      out += String.fromCharCode(parseInt(hex, 16));
      j += 2 + hex.length;
    } else if (c in SIMPLE_ESCAPES) {
      out += SIMPLE_ESCAPES[c];
      j += 2;
    } else {
      throw new Error(`unknown escape \\${c} at offset ${j}`);
    }
  }
  if (j >= src.length) throw new Error(`unterminated string at offset ${i}`);
  return [out, j + 1];
}

/** Skips blanks and comments. */
function skip(src: string, i: number): number {
  for (;;) {
    const m = /^(?:\s+|\/\/[^\n]*|\/\*[\s\S]*?\*\/)/.exec(src.slice(i, i + 8192));
    if (m === null) return i;
    i += m[0].length;
  }
}

/** A string argument: adjacent literals concatenate, as in C++. */
function readString(src: string, i: number): [string, number] {
  let out = "";
  let found = false;
  for (;;) {
    i = skip(src, i);
    const literal = readLiteral(src, i);
    if (literal === null) break;
    [out, i, found] = [out + literal[0], literal[1], true];
  }
  if (!found) throw new Error(`expected a string at offset ${i}: ${src.slice(i, i + 40)}`);
  return [out, i];
}

function expectToken(src: string, i: number, token: string): number {
  i = skip(src, i);
  if (!src.startsWith(token, i)) {
    throw new Error(`expected ${token} at offset ${i}: ${JSON.stringify(src.slice(i, i + 40))}`);
  }
  return i + token.length;
}

/** Every `test({ … })` call of the C++ file, in order. */
function parseLlamaCases(src: string): LlamaCase[] {
  const cases: LlamaCase[] = [];
  const call = /\btest\(\s*\{/g;
  let m: RegExpExecArray | null;
  while ((m = call.exec(src)) !== null) {
    let i = skip(src, m.index + m[0].length);
    const status = /^(SUCCESS|FAILURE)\b/.exec(src.slice(i, i + 8));
    if (status === null) throw new Error(`expected SUCCESS or FAILURE at offset ${i}`);
    i = expectToken(src, i + status[0].length, ",");
    const [name, a] = readString(src, i);
    const [schema, b] = readString(src, expectToken(src, a, ","));
    const [grammar, c] = readString(src, expectToken(src, b, ","));
    i = skip(src, c);
    if (src[i] === ",") i++;
    i = expectToken(src, expectToken(src, i, "}"), ")");
    const line = src.slice(0, m.index).split("\n").length;
    cases.push({ status: status[1] as LlamaCase["status"], name, schema, grammar, line });
    call.lastIndex = i;
  }
  return cases;
}

/** The C++ test's `trim`: both ends trimmed, each line's leading blanks removed. */
function trimGrammar(s: string): string {
  return s.replace(/^[ \n\r\t]+|[ \n\r\t]+$/g, "").replace(/(^|\n)[ \t]+/g, "$1");
}

/** The error `fn` throws; fails when it returns or throws anything but a `SchemaError`. */
function schemaError(fn: () => unknown, what = ""): SchemaError {
  let result: unknown;
  try {
    result = fn();
  } catch (e) {
    if (e instanceof SchemaError) return e;
    throw new Error(`${what}: expected a SchemaError, got ${e instanceof Error ? e.stack : e}`);
  }
  throw new Error(`${what}: expected a SchemaError, got ${String(result).slice(0, 2000)}`);
}

/**
 * Where dotllm deliberately differs from llama.cpp's expectation, and how exactly: each
 * entry names a case of the C++ test and checks our result against its expected grammar.
 */
const EXPECTED_DIFFERENCES: Record<string, { reason: string; check: (c: LlamaCase) => void }> = {
  "array with empty items and prefixItems": {
    reason: "llama.cpp uses `items` and silently drops `prefixItems` beside it; we refuse it",
    check: (c) => refusedAs(c, "prefixItems", ""),
  },
  "unanchored regexp": {
    reason: "llama.cpp replaces an unanchored pattern by any string (a warning on stderr); " +
      "we refuse it, the constraint would be lost",
    check: (c) => refusedAs(c, "pattern", "", "not anchored"),
  },
  "regexp with unsupported shorthand": {
    reason: "llama.cpp replaces a pattern with `\\w` by any string; we refuse it",
    check: (c) => refusedAs(c, "pattern", "", "\\w (at position 9)"),
  },
  "unsupported regexp in a property": {
    reason: "llama.cpp replaces a lookahead pattern by any string; we refuse it",
    check: (c) => refusedAs(c, "pattern", "/properties/a", "group syntax (at position 1)"),
  },
  "regexp quote": {
    reason: 'llama.cpp writes a pattern\'s quote raw inside the JSON string (`"""`, which ends ' +
      "the string: invalid JSON); we write its JSON escape",
    check: (c) => {
      assert.equal(
        trimGrammar(jsonSchemaToGrammar(JSON.parse(c.schema))),
        trimGrammar(c.grammar).replace('("\\"")', '("\\\\\\"")'),
      );
    },
  },
  regexp: {
    reason: "llama.cpp's `.` is `[^\\x0A\\x0D]`, which writes quotes, backslashes and control " +
      "characters raw inside the JSON string; ours is any character as JSON writes it",
    check: (c) => {
      const ours = trimGrammar(jsonSchemaToGrammar(JSON.parse(c.schema)));
      const dot = ours.split("\n").find((l) => l.startsWith("dot ::= "))!;
      assert.equal(dot, 'dot ::= [^\\"\\\\\\x00-\\x1F] | "\\\\\\"" | "\\\\\\\\" | "\\\\t"');
      assert.equal(ours, trimGrammar(c.grammar).replace("dot ::= [^\\x0A\\x0D]", dot));
    },
  },
  "max -5": {
    reason: "llama.cpp's `[0-4] [0-9]{1,15}` lets the magnitude of a negative number start with " +
      "0 (`-01`, `-0001`: not JSON); ours starts it with 1-9",
    check: (c) => {
      assert.equal(
        trimGrammar(jsonSchemaToGrammar(JSON.parse(c.schema))),
        trimGrammar(c.grammar).replace('"-" ([0-4] [0-9]{1,15}', '"-" ([1-4] [0-9]{1,15}'),
      );
    },
  },
  "optional props with empty name": {
    reason: 'llama.cpp names the value rule of a top-level property "" `root`, so its ' +
      "grammar's root is that integer, not the object; ours names it `-`",
    check: (c) => {
      const ours = trimGrammar(jsonSchemaToGrammar(JSON.parse(c.schema)));
      // theirs with the clash undone: the object is root, the "" property's value is integer
      const lines = trimGrammar(c.grammar).split("\n");
      const clash = lines.find((l) => l.startsWith("root ::= "))!;
      const valueRule = clash.slice("root ::= ".length);
      assert.equal(valueRule, jsonGrammarRoot({ type: "integer" }));
      const fixed = lines.filter((l) => l !== clash)
        .map((l) => l.replace(/^root0 ::= /, "root ::= "))
        .map((l) => l.startsWith("-kv ::= ") ? l.replace(/ root$/, " integer") : l);
      assert.equal(ours, safeKeys(fixed.join("\n")));
    },
  },
  ...Object.fromEntries(
    [
      "required + additional props",
      "optional + additional props",
      "required + optional + additional props",
      "optional props with nested names",
      "optional props with common prefix",
    ].map((name) => [name, {
      reason: "llama.cpp's rule for any other key lets `[^\"a]` start the rest of the key, " +
        "which admits a raw backslash or control character (invalid JSON); ours starts it as " +
        "`char` does",
      check: (c: LlamaCase) => {
        assert.equal(
          trimGrammar(jsonSchemaToGrammar(JSON.parse(c.schema))),
          safeKeys(trimGrammar(c.grammar)),
        );
      },
    }]),
  ),
};

/** llama.cpp's key rule with its negated classes limited to what JSON holds raw (as ours). */
function safeKeys(grammar: string): string {
  return grammar.split("\n").map((line) =>
    /^[a-zA-Z0-9-]*additional-k ::= /.test(line)
      ? line.replaceAll('[^"', '[^"\\\\\\x7F\\x00-\\x1F')
      : line
  ).join("\n");
}

/** The body of the root rule llama.cpp writes for `schema`. */
function jsonGrammarRoot(schema: unknown): string {
  const line = jsonSchemaToGrammar(schema).split("\n").find((l) => l.startsWith("root ::= "));
  return line!.slice("root ::= ".length);
}

function refusedAs(c: LlamaCase, keyword: string, path: string, text = ""): void {
  assert.equal(c.status, "SUCCESS", "llama.cpp accepts it, we differ by refusing");
  const e = schemaError(() => jsonSchemaToGrammar(JSON.parse(c.schema)));
  assert.equal(e.keyword, keyword, e.message);
  assert.equal(e.path, path, e.message);
  assert.ok(e.message.includes(text), e.message);
}

function llamaCases(): LlamaCase[] {
  const file = join(ensureLlamaCppSource(), "tests", "test-json-schema-to-grammar.cpp");
  return parseLlamaCases(readFileSync(file, "utf8"));
}

Deno.test("llama.cpp's test-json-schema-to-grammar cases: the same grammar, or the listed difference", () => {
  const cases = llamaCases();
  const src = readFileSync(
    join(ensureLlamaCppSource(), "tests", "test-json-schema-to-grammar.cpp"),
    "utf8",
  );
  // every test({ call of the file was read (the count is the file's, not a constant)
  assert.equal(cases.length, src.match(/\btest\(\s*\{/g)!.length);
  assert.ok(cases.some((c) => c.status === "FAILURE") && cases.some((c) => c.grammar !== ""));
  const names = new Set(cases.map((c) => c.name));
  for (const name of Object.keys(EXPECTED_DIFFERENCES)) {
    assert.ok(names.has(name), `expected difference "${name}" names no case`);
  }
  const failures: string[] = [];
  let same = 0;
  for (const c of cases) {
    try {
      const difference = EXPECTED_DIFFERENCES[c.name];
      if (difference !== undefined) {
        difference.check(c);
        continue;
      }
      if (c.status === "FAILURE") {
        schemaError(() => jsonSchemaToGrammar(JSON.parse(c.schema)));
      } else {
        assert.equal(
          trimGrammar(jsonSchemaToGrammar(JSON.parse(c.schema))),
          trimGrammar(c.grammar),
        );
      }
      same++;
    } catch (e) {
      failures.push(`${c.name} (line ${c.line}): ${e instanceof Error ? e.message : e}`);
    }
  }
  assert.deepEqual(failures, []);
  assert.equal(same + Object.keys(EXPECTED_DIFFERENCES).length, cases.length);
});

Deno.test('jsonObjectGrammar is llama.cpp\'s grammar for {"type": "object"}', () => {
  const c = llamaCases().find((c) => c.schema.replace(/\s/g, "") === '{"type":"object"}');
  assert.ok(c !== undefined, 'llama.cpp\'s test has a case for {"type": "object"}');
  assert.equal(trimGrammar(jsonObjectGrammar()), trimGrammar(c.grammar));
  assert.ok(jsonObjectGrammar().includes("root ::= object\n"));
});

// ---------------------------------------------------------------------------------------
// Refused keywords

/** [schema, keyword, path] refused; each constrains something the grammar would not. */
const REFUSED: [unknown, string, string][] = [
  [
    { type: "object", properties: { n: { type: "integer", multipleOf: 5 } } },
    "multipleOf",
    "/properties/n",
  ],
  [{ type: "number", minimum: 0 }, "minimum", ""],
  [{ type: "number", maximum: 1 }, "maximum", ""],
  [{ type: "number", exclusiveMinimum: 0 }, "exclusiveMinimum", ""],
  [{ type: "number", exclusiveMaximum: 1 }, "exclusiveMaximum", ""],
  [{ type: "array", items: { type: "string" }, uniqueItems: true }, "uniqueItems", ""],
  [{ type: "array", contains: { const: 1 } }, "contains", ""],
  [{ type: "array", items: {}, minContains: 2 }, "minContains", ""],
  [{ type: "array", prefixItems: [{}], unevaluatedItems: false }, "unevaluatedItems", ""],
  [{ not: { type: "string" } }, "not", ""],
  [{ if: { type: "string" }, then: { minLength: 1 } }, "if", ""],
  [{ type: "object", patternProperties: { "^x": {} } }, "patternProperties", ""],
  [{ type: "object", propertyNames: { maxLength: 3 } }, "propertyNames", ""],
  [{ type: "object", minProperties: 1 }, "minProperties", ""],
  [{ type: "object", maxProperties: 1 }, "maxProperties", ""],
  [{ type: "object", dependentRequired: { a: ["b"] } }, "dependentRequired", ""],
  [{ type: "object", dependentSchemas: { a: {} } }, "dependentSchemas", ""],
  [
    { type: "object", properties: { a: {} }, unevaluatedProperties: false },
    "unevaluatedProperties",
    "",
  ],
  [{ type: "string", format: "email" }, "format", ""],
  [{ type: "integer", format: "int32" }, "format", ""],
  [{ type: "string", nullable: true }, "nullable", ""],
  [{ type: "strin" }, "type", ""],
  [{ minimum: 3 }, "minimum", ""],
  [{ required: ["a"] }, "required", ""],
  [{ type: "object", properties: { a: {} }, required: ["b"] }, "required", ""],
  [{ type: "string", pattern: "^a+$", minLength: 2 }, "minLength", ""],
  [{ type: "string", format: "date", maxLength: 10 }, "maxLength", ""],
  [{ type: "string", pattern: "^a+$", format: "date" }, "format", ""],
  [{ type: "string", pattern: "^\\d+$" }, "pattern", ""],
  [{ type: "string", pattern: "^(a$" }, "pattern", ""],
  [{ type: "string", pattern: "^[z-a]$" }, "pattern", ""],
  [{ type: "string", pattern: "^a{3,2}$" }, "pattern", ""],
  [{ anyOf: [{ type: "string" }], oneOf: [{ type: "integer" }] }, "anyOf", ""],
  [{ anyOf: [{ type: "string" }, { type: "null" }], type: "string" }, "type", ""],
  [{ $ref: "#/$defs/s", minLength: 3, $defs: { s: { type: "string" } } }, "minLength", ""],
  [
    { $ref: "#/$defs/o", properties: { a: {} }, $defs: { o: { type: "object" } } },
    "properties",
    "",
  ],
  [{ const: "a", enum: ["b"] }, "enum", ""],
  [{ enum: ["a", 1], type: "string" }, "type", ""],
  [{ type: "array", items: [{}, {}], minItems: 3 }, "minItems", ""],
  [{ type: "array", items: [{}, {}], maxItems: 1 }, "maxItems", ""],
  [{ type: "object", properties: { a: {} }, allOf: [{ properties: { b: {} } }] }, "allOf", ""],
  [{ allOf: [{ type: "string" }, { minLength: 1 }] }, "allOf", ""],
  [{ allOf: [{ properties: { a: {} } }, { properties: { a: {} } }] }, "allOf", ""],
  [
    { allOf: [{ properties: { a: {} }, additionalProperties: false }, { properties: { b: {} } }] },
    "allOf",
    "",
  ],
  [
    { allOf: [{ properties: { a: {} } }, { anyOf: [{ properties: { b: {} }, required: ["b"] }] }] },
    "allOf",
    "",
  ],
  [{ allOf: [{ enum: ["a", "b"] }, { enum: ["c"] }] }, "allOf", ""],
  [{ allOf: [{ enum: ["a", "b"] }, { properties: { b: {} } }] }, "allOf", ""],
  [
    { type: "object", properties: { 'a"b': {} }, additionalProperties: { type: "integer" } },
    "additionalProperties",
    "",
  ],
];

Deno.test("a keyword the grammar cannot enforce is a SchemaError naming it and its path", () => {
  for (const [schema, keyword, path] of REFUSED) {
    const e = schemaError(() => jsonSchemaToGrammar(schema), JSON.stringify(schema));
    const where = `${JSON.stringify(schema)}: ${e.message}`;
    assert.equal(e.keyword, keyword, where);
    assert.equal(e.path, path, where);
    assert.ok(e.message.startsWith(`json schema: "${keyword}" at ${path || "the root"} `), where);
    assert.ok(!e.message.includes("\n"), where);
  }
  assert.equal(
    schemaError(() =>
      jsonSchemaToGrammar({ type: "object", properties: { n: { type: "integer", multipleOf: 5 } } })
    ).message,
    'json schema: "multipleOf" at /properties/n is not supported',
  );
});

Deno.test("invalid schemas and $refs are SchemaErrors with the place", () => {
  const cases: [unknown, string, string, string][] = [
    [null, "", "", "must be an object"],
    [true, "", "", "boolean schemas"],
    [[], "", "", "must be an object"],
    [{ properties: { a: 5 } }, "", "/properties/a", "must be an object"],
    [{ $ref: "https://example.com/schema.json" }, "$ref", "", "nothing is fetched"],
    [{ $ref: "other.json#/a" }, "$ref", "", "same document"],
    [{ $ref: 3 }, "$ref", "", "must be a string"],
    [{ $ref: "#/$defs/missing", $defs: {} }, "$ref", "", "missing not found"],
    [{ $ref: "#/items/7", items: [{}] }, "$ref", "", "7 is out of range"],
    [{ properties: { a: { $ref: "#/nope" } } }, "$ref", "/properties/a", "nope not found"],
    [{ type: "array", minItems: -1 }, "minItems", "", "non-negative integer"],
    [{ type: "array", minItems: 1.5 }, "minItems", "", "non-negative integer"],
    [{ type: "array", minItems: 3, maxItems: 2 }, "minItems", "", 'above "maxItems"'],
    [{ type: "string", minLength: 5, maxLength: 4 }, "minLength", "", 'above "maxLength"'],
    [{ type: "integer", minimum: 5, maximum: 4 }, "minimum", "", "no integer"],
    [{ type: "integer", minimum: 4.2, maximum: 4.8 }, "minimum", "", "no integer"],
    [
      { type: "integer", exclusiveMinimum: true, minimum: 1 },
      "exclusiveMinimum",
      "",
      "must be a number",
    ],
    [{ enum: [] }, "enum", "", "non-empty array"],
    [{ anyOf: [] }, "anyOf", "", "must not be empty"],
    [{ type: [] }, "type", "", "must not be empty"],
    [{ type: 123 }, "type", "", "must be a string"],
    [{ type: "object", required: "a" }, "required", "", "array of strings"],
    [
      { type: "object", additionalProperties: 1 },
      "additionalProperties",
      "",
      "boolean or a schema",
    ],
    [{ const: "\ud800" }, "const", "", "lone surrogate"],
  ];
  for (const [schema, keyword, path, text] of cases) {
    const e = schemaError(() => jsonSchemaToGrammar(schema), JSON.stringify(schema));
    const where = `${JSON.stringify(schema)}: ${e.message}`;
    assert.equal(e.keyword, keyword, where);
    assert.equal(e.path, path, where);
    assert.ok(e.message.includes(text), where);
  }
});

// ---------------------------------------------------------------------------------------
// Accepted schemas

const ANNOTATIONS = {
  title: "T",
  description: "D",
  examples: [1, "x"],
  default: null,
  deprecated: false,
  readOnly: true,
  writeOnly: false,
  $comment: "c",
  $id: "https://example.com/s",
  $schema: "https://json-schema.org/draft/2020-12/schema",
  contentMediaType: "text/plain",
  contentEncoding: "base64",
  "x-vendor": { anything: 1 },
};

Deno.test("annotations are ignored: the grammar is the one without them", () => {
  const plain = {
    type: "object",
    properties: {
      name: { type: "string", maxLength: 20 },
      tags: { type: "array", items: { enum: ["a", "b"] }, maxItems: 3 },
      when: { type: "string", format: "date-time" },
      kind: { anyOf: [{ const: 1 }, { type: "null" }] },
    },
    required: ["name"],
  };
  const annotate = (s: Record<string, unknown>): Record<string, unknown> => {
    const out: Record<string, unknown> = { ...ANNOTATIONS, ...s };
    if (s.properties !== undefined) {
      out.properties = Object.fromEntries(
        Object.entries(s.properties as Record<string, Record<string, unknown>>)
          .map(([k, v]) => [k, annotate(v)]),
      );
    }
    return out;
  };
  const annotated = annotate(plain);
  assert.notDeepEqual(annotated, plain);
  assert.equal(jsonSchemaToGrammar(annotated), jsonSchemaToGrammar(plain));
});

Deno.test("keywords that cannot apply to the types produced, or constrain nothing, are ignored", () => {
  const same: [unknown, unknown][] = [
    [{ type: "integer", minLength: 3, items: {}, required: ["x"] }, { type: "integer" }],
    [{ type: "string", minimum: 3, uniqueItems: true }, { type: "string" }],
    [{ type: "array", items: { type: "string" }, uniqueItems: false, minItems: 0 }, {
      type: "array",
      items: { type: "string" },
    }],
    [{ type: "object", properties: { a: {} }, required: [], additionalProperties: true }, {
      type: "object",
      properties: { a: {} },
      additionalProperties: true,
    }],
    [{ type: ["string", "null"], minLength: 2 }, {
      anyOf: [{ type: "string", minLength: 2 }, { type: "null" }],
    }],
  ];
  for (const [a, b] of same) {
    assert.equal(
      jsonSchemaToGrammar(a).replace(/alternative-0/g, "X"),
      jsonSchemaToGrammar(b).replace(/alternative-0/g, "X"),
      JSON.stringify(a),
    );
  }
});

Deno.test("a type beside $ref, anyOf or enum is accepted when it allows all they produce", () => {
  const g = jsonSchemaToGrammar({
    type: ["string", "null"],
    enum: ["a", null],
  });
  assert.match(g, /^alternative-0 ::= \("\\"a\\"" \| "null"\)$/m);
  assert.match(
    jsonSchemaToGrammar({ $ref: "#/$defs/i", type: "number", $defs: { i: { type: "integer" } } }),
    /^root ::= integer$/m,
  );
});

Deno.test("integer bounds: both minimum and exclusiveMinimum give the stricter", () => {
  const strict = jsonSchemaToGrammar({ type: "integer", minimum: 0, exclusiveMinimum: 5 });
  assert.equal(strict, jsonSchemaToGrammar({ type: "integer", minimum: 6 }));
  const loose = jsonSchemaToGrammar({ type: "integer", minimum: 7, exclusiveMaximum: 10.5 });
  assert.equal(loose, jsonSchemaToGrammar({ type: "integer", minimum: 7, maximum: 10 }));
});

Deno.test("a closed tuple (prefixItems with items: false) is a tuple", () => {
  assert.equal(
    jsonSchemaToGrammar({ type: "array", prefixItems: [{ type: "integer" }], items: false }),
    jsonSchemaToGrammar({ type: "array", prefixItems: [{ type: "integer" }] }),
  );
});

Deno.test("pattern: a quantifier after an escape repeats that escape only", () => {
  assert.match(
    jsonSchemaToGrammar({ pattern: "^a\\.+$" }),
    /^root ::= "\\"" \("a" "\."\+\) "\\""$/m,
  );
  assert.match(jsonSchemaToGrammar({ pattern: "^ab+$" }), /^root ::= "\\"" \("a" "b"\+\) "\\""$/m);
  assert.match(jsonSchemaToGrammar({ pattern: "^aé+$" }), /^root ::= "\\"" \("a" "é"\+\) "\\""$/m);
  assert.match(
    jsonSchemaToGrammar({ pattern: "^a😀?$" }),
    /^root ::= "\\"" \("a" "😀"\?\) "\\""$/m,
  );
  // any character, as a JSON string writes it: line breaks too with dotall
  assert.match(
    jsonSchemaToGrammar({ pattern: "^x.$" }, { dotall: true }),
    /^dot ::= \[\^\\"\\\\\\x00-\\x1F\] \| "\\\\\\"" \| "\\\\\\\\" \| "\\\\t" \| "\\\\n" \| "\\\\r"$/m,
  );
});

Deno.test("propOrder puts the named properties first, the others in schema order", () => {
  const schema = {
    type: "object",
    properties: { a: { type: "string" }, b: { type: "string" }, c: { type: "string" } },
    required: ["a", "b", "c"],
  };
  assert.match(
    jsonSchemaToGrammar(schema),
    /^root ::= "\{" space a-kv "," space b-kv "," space c-kv/m,
  );
  assert.match(
    jsonSchemaToGrammar(schema, { propOrder: ["c", "b"] }),
    /^root ::= "\{" space c-kv "," space b-kv "," space a-kv/m,
  );
});

Deno.test("other-key rules escape ], - and ^ in property names; a property named * is one", () => {
  const g = jsonSchemaToGrammar({
    type: "object",
    properties: { "a-]": {}, "^": {}, "*": {} },
    additionalProperties: { type: "integer" },
  });
  const k = g.split("\n").find((l) => l.startsWith("additional-k ::= "))!;
  assert.equal(
    k,
    safeKeys(
      'additional-k ::= ["] ( [*] char+ | [\\x5E] char+ | [a] ([\\-] ([\\]] char+ | [^"\\]] char*) | ' +
        '[^"\\-] char*) | [^"*^a] char* )? ["]',
    ),
  );
  // the property "*" is optional once, not repeated like the additional properties
  assert.match(g, /^--kv0 ::= "\\"\*\\"" space ":" space -$/m);
  assert.match(g, /^--rest0 ::= \( "," space --kv0 \)\? --rest$/m);
});

Deno.test("$ref recursion through properties is a recursive grammar", () => {
  const g = jsonSchemaToGrammar({
    $ref: "#/$defs/node",
    $defs: {
      node: {
        type: "object",
        properties: { value: { type: "integer" }, next: { $ref: "#/$defs/node" } },
        required: ["value"],
      },
    },
  });
  assert.match(g, /^ref-defs-node-next ::= ref-defs-node$/m);
  assert.match(g, /^root ::= ref-defs-node$/m);
  assertReferencesDefined(g);
});

// ---------------------------------------------------------------------------------------
// Hostile input

/** Runs `fn` and checks it ends within `ms` with a SchemaError naming `text`. */
function refusedQuickly(fn: () => unknown, text: string, ms = 2000): SchemaError {
  const start = performance.now();
  const e = schemaError(fn);
  const took = performance.now() - start;
  assert.ok(took < ms, `took ${took.toFixed(0)} ms: ${e.message}`);
  assert.ok(e.message.includes(text), e.message);
  assert.ok(e.message.length < 400, e.message);
  return e;
}

function nested(depth: number, leaf: unknown, wrap: (inner: unknown) => unknown): unknown {
  let s = leaf;
  for (let i = 0; i < depth; i++) s = wrap(s);
  return s;
}

Deno.test("hostile schemas end fast with a clear error naming the limit", () => {
  refusedQuickly(
    () => jsonSchemaToGrammar({ type: "array", minItems: 1e9 }),
    `above ${MAX_REPETITION}, the largest repetition a grammar may hold (MAX_REPETITION)`,
  );
  refusedQuickly(() => jsonSchemaToGrammar({ type: "string", maxLength: 1e9 }), "MAX_REPETITION");
  refusedQuickly(() => jsonSchemaToGrammar({ pattern: "^a{1000000000}$" }), "MAX_REPETITION");
  refusedQuickly(
    () => jsonSchemaToGrammar({ pattern: "^a{99999999999999999999}$" }),
    "MAX_REPETITION",
  );
  refusedQuickly(
    () => jsonSchemaToGrammar({ pattern: "^" + "(".repeat(5000) + ")".repeat(5000) + "$" }),
    "MAX_PATTERN_DEPTH",
  );
  refusedQuickly(
    () => jsonSchemaToGrammar({ type: "integer", minimum: -1e300 }),
    "MAX_INTEGER_BOUND",
  );
  for (
    const wrap of [
      (s: unknown) => ({ type: "object", properties: { a: s } }),
      (s: unknown) => ({ type: "array", items: s }),
      (s: unknown) => ({ anyOf: [s] }),
      (s: unknown) => ({ allOf: [s] }),
      (s: unknown) => ({ additionalProperties: s }),
    ]
  ) {
    const deep = nested(10_000, { type: "string" }, wrap);
    refusedQuickly(() => jsonSchemaToGrammar(deep), `nests deeper than ${MAX_SCHEMA_DEPTH}`);
  }
  // a chain of 10 000 $refs, each to the next
  const defs: Record<string, unknown> = {};
  for (let i = 0; i < 10_000; i++) defs["d" + i] = { $ref: `#/$defs/d${i + 1}` };
  defs.d10000 = { type: "string" };
  refusedQuickly(
    () => jsonSchemaToGrammar({ $ref: "#/$defs/d0", $defs: defs }),
    "MAX_SCHEMA_DEPTH",
  );
  // nested type arrays copy their subtree once per type: 8^6 sub-schemas
  const wide = nested(6, { type: "string" }, (s) => ({
    type: ["object", "object", "object", "object", "object", "object", "object", "object"],
    properties: { a: s },
  }));
  refusedQuickly(() => jsonSchemaToGrammar(wide), "MAX_SCHEMA_NODES");
  const deepValue = nested(100_000, 1, (v) => [v]);
  refusedQuickly(() => jsonSchemaToGrammar({ const: deepValue }), "MAX_VALUE_DEPTH");
  const cyclic: Record<string, unknown> = { type: "object" };
  cyclic.properties = { self: cyclic };
  refusedQuickly(() => jsonSchemaToGrammar(cyclic), "MAX_SCHEMA_DEPTH");
  refusedQuickly(() => jsonSchemaToGrammar({ const: undefined }), "not JSON");
  // keys that name Object.prototype members are plain keys
  for (const key of ["toString", "constructor", "__proto__", "hasOwnProperty"]) {
    const e = refusedQuickly(() => jsonSchemaToGrammar(JSON.parse(`{"${key}": {}}`)), "not a JSON");
    assert.equal(e.keyword, key);
    refusedQuickly(() => jsonSchemaToGrammar({ format: key }), "is not supported");
    refusedQuickly(() => jsonSchemaToGrammar({ $ref: "#/" + key }), "not found");
  }
  const proto = JSON.parse(
    '{"properties": {"__proto__": {"type": "integer"}}, "required": ["__proto__"]}',
  );
  assert.match(
    jsonSchemaToGrammar(proto),
    /^-proto--kv ::= "\\"__proto__\\"" space ":" space integer$/m,
  );
  refusedQuickly(() => jsonSchemaToGrammar({ enum: [() => 1] }), "not JSON");
});

Deno.test("cyclic $refs that consume nothing are refused; recursion inside values is not", () => {
  const cycles: unknown[] = [
    { $ref: "#/$defs/a", $defs: { a: { $ref: "#/$defs/a" } } },
    { $ref: "#/$defs/a", $defs: { a: { $ref: "#/$defs/b" }, b: { $ref: "#/$defs/a" } } },
    { anyOf: [{ $ref: "#" + "/anyOf/1" }, { anyOf: [{ type: "null" }, { $ref: "#/anyOf/0" }] }] },
    { allOf: [{ $ref: "#/$defs/a" }], $defs: { a: { $ref: "#/$defs/a" } } },
    { $ref: "#/anyOf/0", anyOf: [{ $ref: "#/anyOf/0" }] },
  ];
  for (const schema of cycles) {
    const e = refusedQuickly(() => jsonSchemaToGrammar(schema), "left recursion");
    assert.equal(e.keyword, "$ref", e.message);
  }
  const list = {
    $defs: {
      list: { type: "array", items: { anyOf: [{ type: "integer" }, { $ref: "#/$defs/list" }] } },
    },
    $ref: "#/$defs/list",
  };
  assertReferencesDefined(jsonSchemaToGrammar(list));
});

Deno.test("a large but legitimate schema converts quickly", () => {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < 2000; i++) {
    properties["field_" + i] = i % 3 === 0
      ? { type: "integer", minimum: -i, maximum: i * 7 }
      : i % 3 === 1
      ? { enum: ["x" + i, "y" + i, i] }
      : { type: "string", maxLength: 1 + (i % 50) };
  }
  const start = performance.now();
  const g = jsonSchemaToGrammar({
    type: "object",
    properties,
    required: Object.keys(properties).slice(0, 500),
  });
  const took = performance.now() - start;
  assert.ok(took < 3000, `took ${took.toFixed(0)} ms`);
  assertReferencesDefined(g);
});

// ---------------------------------------------------------------------------------------
// Fuzz

/** The names a GBNF rule body references (literals, classes and repetition counts removed). */
function referencedNames(body: string): string[] {
  // literals and classes in one left-to-right pass: a class may hold a quote, a literal a bracket
  const stripped = body
    .replace(/"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]/g, " ")
    .replace(/\{[0-9,]*\}/g, " ");
  return stripped.split(/[\s()|*+?]+/).filter((t) => t !== "");
}

/** Each line is `name ::= body`, `root` is defined, and every referenced rule exists. */
function assertReferencesDefined(grammar: string): void {
  assert.ok(grammar.endsWith("\n"));
  const lines = grammar.slice(0, -1).split("\n");
  const defined = new Set<string>();
  for (const line of lines) {
    const m = /^([a-zA-Z0-9-]+) ::= /.exec(line);
    assert.ok(m !== null, `not a rule: ${line.slice(0, 120)}`);
    assert.ok(!defined.has(m[1]), `rule ${m[1]} defined twice`);
    defined.add(m[1]);
  }
  assert.ok(defined.has("root"));
  for (const line of lines) {
    const body = line.slice(line.indexOf(" ::= ") + 5);
    for (const name of referencedNames(body)) {
      assert.ok(defined.has(name), `${name} undefined in: ${line.slice(0, 200)}`);
    }
  }
}

const KEYWORDS = [
  "type",
  "enum",
  "const",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "prefixItems",
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "anyOf",
  "oneOf",
  "allOf",
  "$ref",
  "$defs",
  "definitions",
  "multipleOf",
  "not",
  "title",
  "description",
  "default",
  "uniqueItems",
  "additionalItems",
  "x-ext",
  "nullable",
];
const TYPES = ["string", "integer", "number", "boolean", "null", "array", "object", "strng"];
const PATTERNS = [
  "^a+$",
  "^[0-9]{2,4}-x$",
  "^(ab|cd)*$",
  "^\\d$",
  "^(?:x|y)?z$",
  "^[^\\x00]$",
  "(",
  "^a{3}$",
  "^\\$\\.\\*$",
  "^.{1,3}$",
  "^[a-$",
  "^\\u00e9+$",
  "^a|b$",
  "^((a)b)c$",
];

function randomInt(rand: () => number): number {
  const r = rand();
  if (r < 0.5) return Math.floor(rand() * 10);
  if (r < 0.7) return Math.floor(rand() * 300) - 100;
  if (r < 0.8) return Math.floor(rand() * 5000);
  if (r < 0.9) return [1e9, -1e18, 2 ** 53, 1.5, -0.5, 1e300][Math.floor(rand() * 6)];
  return Number.MAX_SAFE_INTEGER;
}

/** A random JSON value, sometimes a schema-shaped one. */
function randomValue(rand: () => number, depth: number, refs: string[]): unknown {
  const r = rand();
  if (depth > 4 || r < 0.15) return randomInt(rand);
  if (r < 0.25) {
    return rand() < 0.5 ? randomText(rand).slice(0, 20) : TYPES[Math.floor(rand() * TYPES.length)];
  }
  if (r < 0.3) return rand() < 0.5;
  if (r < 0.33) return null;
  if (r < 0.45) {
    return Array.from({ length: Math.floor(rand() * 4) }, () => randomValue(rand, depth + 1, refs));
  }
  return randomSchema(rand, depth + 1, refs);
}

/** A random schema built from the keywords above with plausible or junk values. */
function randomSchema(rand: () => number, depth: number, refs: string[]): Record<string, unknown> {
  const s: Record<string, unknown> = {};
  const n = Math.floor(rand() * 4);
  for (let i = 0; i < n; i++) {
    const key = KEYWORDS[Math.floor(rand() * KEYWORDS.length)];
    const junk = rand() < 0.15;
    if (junk || depth > 5) {
      s[key] = randomValue(rand, depth + 3, refs);
      continue;
    }
    switch (key) {
      case "type":
        s.type = rand() < 0.8
          ? TYPES[Math.floor(rand() * 7)]
          : [TYPES[Math.floor(rand() * 7)], TYPES[Math.floor(rand() * 7)]];
        break;
      case "properties": {
        const props: Record<string, unknown> = {};
        for (let j = Math.floor(rand() * 4); j > 0; j--) {
          props[rand() < 0.8 ? "p" + Math.floor(rand() * 6) : randomText(rand).slice(0, 6)] =
            randomSchema(rand, depth + 1, refs);
        }
        s.properties = props;
        break;
      }
      case "required":
        s.required = Array.from(
          { length: Math.floor(rand() * 3) },
          () => "p" + Math.floor(rand() * 6),
        );
        break;
      case "anyOf":
      case "oneOf":
      case "allOf":
      case "prefixItems":
        s[key] = Array.from(
          { length: 1 + Math.floor(rand() * 3) },
          () => randomSchema(rand, depth + 1, refs),
        );
        break;
      case "items":
      case "additionalProperties":
      case "not":
        s[key] = rand() < 0.2 ? rand() < 0.5 : randomSchema(rand, depth + 1, refs);
        break;
      case "$defs":
      case "definitions":
        s[key] = { a: randomSchema(rand, depth + 1, refs), b: randomSchema(rand, depth + 1, refs) };
        break;
      case "$ref":
        s.$ref = refs[Math.floor(rand() * refs.length)];
        break;
      case "pattern":
        s.pattern = PATTERNS[Math.floor(rand() * PATTERNS.length)];
        break;
      case "format":
        s.format =
          ["date", "time", "date-time", "uuid", "uuid4", "email", "int32"][Math.floor(rand() * 7)];
        break;
      case "enum":
        s.enum = Array.from(
          { length: Math.floor(rand() * 4) },
          () => randomValue(rand, depth + 3, refs),
        );
        break;
      case "const":
        s.const = randomValue(rand, depth + 3, refs);
        break;
      default:
        s[key] = randomInt(rand);
    }
  }
  return s;
}

const REFS = [
  "#/$defs/a",
  "#/$defs/b",
  "#/definitions/a",
  "#",
  "#/",
  "#/properties/p1",
  "#/anyOf/0",
  "#/items",
  "#/$defs/zz",
  "http://x/y",
  "#/allOf/1",
];

Deno.test("fuzz: 1500 random and mutated schemas each give a grammar or a SchemaError, quickly", () => {
  const rand = prng(37);
  const seeds = llamaCases().map((c) => JSON.parse(c.schema));
  let grammars = 0;
  let errors = 0;
  const keywords = new Set<string>();
  for (let i = 0; i < 1500; i++) {
    let schema: unknown;
    if (i % 2 === 0) {
      schema = randomSchema(rand, 0, REFS);
    } else {
      // a llama.cpp case with one random keyword replaced, added or removed
      schema = structuredClone(seeds[Math.floor(rand() * seeds.length)]);
      const targets: Record<string, unknown>[] = [];
      const walk = (v: unknown, d: number) => {
        if (d > 20 || typeof v !== "object" || v === null) return;
        if (!Array.isArray(v)) targets.push(v as Record<string, unknown>);
        for (const x of Object.values(v)) walk(x, d + 1);
      };
      walk(schema, 0);
      const t = targets[Math.floor(rand() * targets.length)];
      if (t !== undefined) {
        const keys = Object.keys(t);
        const key = rand() < 0.5 && keys.length > 0
          ? keys[Math.floor(rand() * keys.length)]
          : KEYWORDS[Math.floor(rand() * KEYWORDS.length)];
        if (rand() < 0.2) delete t[key];
        else {t[key] = rand() < 0.5
            ? randomValue(rand, 2, REFS)
            : randomSchema(rand, 3, REFS)[key] ?? 1;}
      }
    }
    const start = performance.now();
    try {
      const g = jsonSchemaToGrammar(schema);
      assertReferencesDefined(g);
      grammars++;
    } catch (e) {
      if (!(e instanceof SchemaError)) {
        throw new Error(`${JSON.stringify(schema)}: ${e instanceof Error ? e.stack : e}`);
      }
      assert.ok(!e.message.includes("\n") && e.message.startsWith("json schema: "), e.message);
      keywords.add(e.keyword);
      errors++;
    }
    const took = performance.now() - start;
    assert.ok(took < 1000, `${took.toFixed(0)} ms for ${JSON.stringify(schema).slice(0, 300)}`);
  }
  // the fuzz reaches both outcomes, and refusals of several kinds
  assert.ok(grammars > 150 && errors > 150, `${grammars} grammars, ${errors} errors`);
  assert.ok(keywords.size > 10, [...keywords].join(" "));
});
