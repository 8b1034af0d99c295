/**
 * Schema nodes to GBNF rules: a port of llama.cpp's `common_chat_schema_converter`
 * (`common/json-schema-to-grammar.cpp`): the same rule names, bodies and clash renaming,
 * the same primitive and format rules, rules written sorted by name.
 *
 * @module
 */
import { MAX_GRAMMAR_CHARS, MAX_SCHEMA_DEPTH, SchemaError } from "./_json_schema_error.ts";
import { buildMinMaxInt } from "./_json_schema_int_range.ts";
import type {
  AlternativesNode,
  ObjectNode,
  RefNode,
  SchemaNode,
  StringNode,
} from "./_json_schema_nodes.ts";
import { resolved } from "./_json_schema_nodes.ts";
import { PatternError, patternToRule } from "./_json_schema_pattern.ts";
import { buildRepetition } from "./_json_schema_repetition.ts";
import { compareCodePoints, dumpJson, dumpString } from "./_json_schema_value.ts";

/** The whitespace llama.cpp allows between tokens: none, a space, or up to two newlines and an indent of up to 20. */
export const SPACE_RULE = String.raw`| " " | "\n"{1,2} [ \t]{0,20}`;

interface BuiltinRule {
  content: string;
  deps: string[];
}

const PRIMITIVE_RULES: Record<string, BuiltinRule> = {
  "boolean": { content: String.raw`("true" | "false")`, deps: [] },
  "decimal-part": { content: "[0-9]{1,16}", deps: [] },
  "integral-part": { content: "[0] | [1-9] [0-9]{0,15}", deps: [] },
  "number": {
    content: String.raw`("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?`,
    deps: ["integral-part", "decimal-part"],
  },
  "integer": { content: String.raw`("-"? integral-part)`, deps: ["integral-part"] },
  "value": {
    content: "object | array | string | number | boolean | null",
    deps: ["object", "array", "string", "number", "boolean", "null"],
  },
  "object": {
    content: String
      .raw`"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"`,
    deps: ["string", "value"],
  },
  "array": {
    content: String.raw`"[" space ( value ("," space value)* )? space "]"`,
    deps: ["value"],
  },
  "uuid": {
    content: String.raw`"\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" ` +
      String.raw`[0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\""`,
    deps: [],
  },
  "char": {
    content: String.raw`[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`,
    deps: [],
  },
  "string": { content: String.raw`"\"" char* "\""`, deps: ["char"] },
  "null": { content: '"null"', deps: [] },
};

const STRING_FORMAT_RULES: Record<string, BuiltinRule> = {
  "date": {
    content: String
      .raw`[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )`,
    deps: [],
  },
  "time": {
    content: String.raw`([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ` +
      String
        .raw`( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`,
    deps: [],
  },
  "date-time": { content: 'date "T" time', deps: ["date", "time"] },
  "date-string": { content: String.raw`"\"" date "\""`, deps: ["date"] },
  "time-string": { content: String.raw`"\"" time "\""`, deps: ["time"] },
  "date-time-string": { content: String.raw`"\"" date-time "\""`, deps: ["date-time"] },
};

const RESERVED_NAMES: ReadonlySet<string> = new Set([
  "root",
  ...Object.keys(PRIMITIVE_RULES),
  ...Object.keys(STRING_FORMAT_RULES),
]);

const INVALID_RULE_CHARS = /[^a-zA-Z0-9-]+/g;

/** A GBNF string literal (llama.cpp's `format_literal`). */
export function formatLiteral(literal: string): string {
  const escaped = literal.replace(
    /[\r\n"\\]/g,
    (c) => ({ "\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\" })[c]!,
  );
  return '"' + escaped + '"';
}

/** A code point written inside a GBNF character class (`\`, `]`, `-` escaped). */
function classChar(c: string): string {
  return c === "\\" || c === "]" || c === "-" ? "\\" + c : c;
}

/** A code point as the only member of a GBNF class (`[^]` would negate nothing). */
function singleClass(c: string): string {
  return c === "^" ? "[\\x5E]" : "[" + classChar(c) + "]";
}

interface TrieNode {
  children: Map<number, TrieNode>;
  terminal: boolean;
}

function trieOf(words: string[]): TrieNode {
  const root: TrieNode = { children: new Map(), terminal: false };
  for (const w of words) {
    let node = root;
    for (const ch of w) {
      const cp = ch.codePointAt(0)!;
      let child = node.children.get(cp);
      if (child === undefined) {
        child = { children: new Map(), terminal: false };
        node.children.set(cp, child);
      }
      node = child;
    }
    node.terminal = true;
  }
  return root;
}

/** Where a property of an object is held while its rule is built. */
interface PropertyRef {
  name: string;
  kv: string;
  additional: boolean;
}

/** The options of a conversion. */
export interface ConverterOptions {
  /** `.` in patterns also matches line breaks. */
  dotall: boolean;
  /** Property names to put first, in this order (the others follow in schema order). */
  propOrder: string[];
}

/** Builds the rules of one grammar. */
export class SchemaConverter {
  readonly #rules = new Map<string, string>();
  readonly #refsBeingResolved = new Set<string>();
  readonly #options: ConverterOptions;
  #chars = 0;
  #depth = 0;

  constructor(options: ConverterOptions) {
    this.#options = options;
    this.#rules.set("space", SPACE_RULE);
  }

  /** The grammar: `name ::= body` lines, sorted by name. */
  format(): string {
    const names = [...this.#rules.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return names.map((n) => `${n} ::= ${this.#rules.get(n)}\n`).join("");
  }

  /** Adds a rule, renaming it `name0`, `name1`, … when the name holds another body. */
  addRule(name: string, rule: string): string {
    const esc = name.replace(INVALID_RULE_CHARS, "-");
    let key = esc;
    if (this.#rules.has(esc) && this.#rules.get(esc) !== rule) {
      let i = 0;
      while (this.#rules.has(esc + i) && this.#rules.get(esc + i) !== rule) i++;
      key = esc + i;
    }
    if (!this.#rules.has(key)) {
      this.#chars += key.length + rule.length + 6;
      if (this.#chars > MAX_GRAMMAR_CHARS) {
        throw new SchemaError(
          "",
          "",
          `makes a grammar larger than ${MAX_GRAMMAR_CHARS} characters (MAX_GRAMMAR_CHARS)`,
        );
      }
    }
    this.#rules.set(key, rule);
    return key;
  }

  #addPrimitive(name: string, rule: BuiltinRule): string {
    const n = this.addRule(name, rule.content);
    for (const dep of rule.deps) {
      const depRule = PRIMITIVE_RULES[dep] ?? STRING_FORMAT_RULES[dep];
      if (!this.#rules.has(dep)) this.#addPrimitive(dep, depRule);
    }
    return n;
  }

  #primitive(ruleName: string, type: string): string {
    return this.#addPrimitive(ruleName === "root" ? "root" : type, PRIMITIVE_RULES[type]);
  }

  /** The rule for `node` under `name` ("" for the root); returns the name to reference. */
  visit(node: SchemaNode, name: string): string {
    if (++this.#depth > 4 * MAX_SCHEMA_DEPTH) {
      throw new SchemaError(
        node.path,
        "",
        `nests deeper than ${4 * MAX_SCHEMA_DEPTH} through $ref (4 × MAX_SCHEMA_DEPTH)`,
      );
    }
    try {
      return this.#visit(node, name);
    } finally {
      this.#depth--;
    }
  }

  #visit(node: SchemaNode, name: string): string {
    const ruleName = RESERVED_NAMES.has(name) ? name + "-" : name === "" ? "root" : name;
    const subName = name + (name === "" ? "" : "-");
    switch (node.kind) {
      case "ref":
        return this.addRule(ruleName, this.#resolveRef(node));
      case "anyOf": {
        const alts = node.children.map((c, i) =>
          this.visit(c, name + (name === "" ? "alternative-" : "-") + i)
        );
        return this.addRule(ruleName, alts.join(" | "));
      }
      case "allOf":
        return this.#allOf(node, name, ruleName);
      case "const":
        return this.addRule(ruleName, formatLiteral(dumpJson(node.value, node.path, "const")));
      case "enum": {
        const values = node.values.map((v) => formatLiteral(dumpJson(v, node.path, "enum")));
        return this.addRule(ruleName, "(" + values.join(" | ") + ")");
      }
      case "object": {
        if (node.properties.length === 0 && node.additional?.kind === "any") {
          return this.addRule(ruleName, this.#addPrimitive("object", PRIMITIVE_RULES.object));
        }
        return this.addRule(
          ruleName,
          this.#objectRule(node.properties, name, node.additional, node.path),
        );
      }
      case "tuple": {
        const items = node.items.map((item, i) => this.visit(item, subName + "tuple-" + i));
        return this.addRule(ruleName, '"[" space ' + items.join(' "," space ') + ' space "]"');
      }
      case "array": {
        if (node.items.kind === "any" && node.minItems === 0 && node.maxItems < 0) {
          return this.#primitive(ruleName, "array");
        }
        const item = this.visit(node.items, subName + "item");
        const max = node.maxItems < 0 ? Infinity : node.maxItems;
        return this.addRule(
          ruleName,
          '"[" space ' + buildRepetition(item, node.minItems, max, '"," space') + ' space "]"',
        );
      }
      case "string":
        return this.#string(node, ruleName);
      case "integer": {
        if (node.minimum === null && node.maximum === null) {
          return this.#primitive(ruleName, "integer");
        }
        return this.addRule(ruleName, "(" + buildMinMaxInt(node.minimum, node.maximum) + ")");
      }
      case "number":
      case "boolean":
      case "null":
        return this.#primitive(ruleName, node.kind);
      case "any":
        return this.addRule(ruleName, this.#addPrimitive("value", PRIMITIVE_RULES.value));
    }
  }

  #string(node: StringNode, ruleName: string): string {
    if (node.pattern !== "") {
      try {
        return patternToRule(node.pattern, ruleName, {
          addRule: (n, r) => this.addRule(n, r),
          dotall: this.#options.dotall,
        });
      } catch (e) {
        if (!(e instanceof PatternError)) throw e;
        const quoted = JSON.stringify(node.pattern.slice(0, 200));
        throw new SchemaError(
          node.path,
          "pattern",
          `${e.invalid ? "is invalid" : "is not supported"}: ${quoted} ${e.message} ` +
            `(at position ${e.position})`,
        );
      }
    }
    if (node.format === "uuid") return this.#primitive(ruleName, "uuid");
    if (node.format !== "none") {
      const prim = node.format + "-string";
      return this.addRule(ruleName, this.#addPrimitive(prim, STRING_FORMAT_RULES[prim]));
    }
    if (node.minLength > 0 || node.maxLength >= 0) {
      const char = this.#addPrimitive("char", PRIMITIVE_RULES.char);
      const max = node.maxLength < 0 ? Infinity : node.maxLength;
      return this.addRule(
        ruleName,
        '"\\"" ' + buildRepetition(char, node.minLength, max) + ' "\\""',
      );
    }
    return this.#primitive(ruleName, "string");
  }

  #resolveRef(node: RefNode): string {
    const hash = node.ref.indexOf("#");
    const fragment = hash >= 0 ? node.ref.slice(hash + 1) : node.ref;
    let refName = "ref" + fragment.replace(INVALID_RULE_CHARS, "-");
    if (!this.#rules.has(refName) && !this.#refsBeingResolved.has(node.ref)) {
      if (node.target === null) {
        throw new SchemaError(node.path, "$ref", `cannot be resolved: "${node.ref}"`);
      }
      this.#refsBeingResolved.add(node.ref);
      refName = this.visit(node.target, refName);
      this.#refsBeingResolved.delete(node.ref);
    }
    return refName;
  }

  /**
   * The body matching a JSON string that is none of `names` (llama.cpp's `_not_strings`):
   * a trie walk, e.g. `["] ( [a] char+ | [^"a] char* )? ["]` for `["a"]`.
   */
  #notStrings(names: string[]): string {
    const trie = trieOf(names);
    const char = this.#addPrimitive("char", PRIMITIVE_RULES.char);
    const walk = (node: TrieNode): string => {
      const sorted = [...node.children].sort((a, b) => a[0] - b[0]);
      let out = "";
      let rejects = "";
      sorted.forEach(([cp, child], i) => {
        const c = String.fromCodePoint(cp);
        rejects += classChar(c);
        if (i > 0) out += " | ";
        out += singleClass(c);
        out += child.children.size > 0 ? " (" + walk(child) + ")" : " " + char + "+";
      });
      // llama.cpp's `[^"...]` also lets a raw backslash or control character start the
      // rest of the key (invalid JSON); the rest starts as `char` does
      if (sorted.length > 0) out += ' | [^"\\\\\\x7F\\x00-\\x1F' + rejects + "] " + char + "*";
      return out;
    };
    return '["] ( ' + walk(trie) + " )" + (trie.terminal ? "" : "?") + ' ["]';
  }

  /** llama.cpp's `_build_object_rule`: required properties in order, then optional ones. */
  #objectRule(
    properties: { name: string; schema: SchemaNode; required: boolean }[],
    name: string,
    additional: SchemaNode | null,
    path: string,
  ): string {
    const prefix = name + (name === "" ? "" : "-");
    const order = this.#options.propOrder;
    const sorted = properties
      .map((p, i) => ({ p, i, o: order.indexOf(p.name) }))
      .sort((a, b) => (a.o < 0 ? order.length : a.o) - (b.o < 0 ? order.length : b.o) || a.i - b.i)
      .map((x) => x.p);
    const required: PropertyRef[] = [];
    const optional: PropertyRef[] = [];
    for (const prop of sorted) {
      // an empty name at the top would make the value rule "root" (llama.cpp's clash)
      const valueName = prefix + prop.name === "" ? "-" : prefix + prop.name;
      const valueRule = this.visit(prop.schema, valueName);
      const kv = this.addRule(
        prefix + prop.name + "-kv",
        formatLiteral(dumpString(prop.name)) + ' space ":" space ' + valueRule,
      );
      (prop.required ? required : optional).push({ name: prop.name, kv, additional: false });
    }
    if (additional !== null) {
      const subName = prefix + "additional";
      const valueRule = additional.kind !== "any"
        ? this.visit(additional, subName + "-value")
        : this.#addPrimitive("value", PRIMITIVE_RULES.value);
      const names = sorted.map((p) => p.name);
      for (const n of names) {
        // deno-lint-ignore no-control-regex
        if (/["\\\x00-\x1f\x7f]/.test(n)) {
          throw new SchemaError(
            path,
            "additionalProperties",
            `beside a property name with a quote, backslash or control character ` +
              `(${JSON.stringify(n.slice(0, 40))}) is not supported`,
          );
        }
      }
      const keyRule = names.length === 0
        ? this.#addPrimitive("string", PRIMITIVE_RULES.string)
        : this.addRule(subName + "-k", this.#notStrings(names));
      const kv = this.addRule(subName + "-kv", keyRule + ' ":" space ' + valueRule);
      optional.push({ name: "*", kv, additional: true });
    }
    if (required.length === 0 && optional.length === 0) return '"{" space "}"';

    let rule = '"{" space ' + required.map((r) => r.kv).join(' "," space ');
    if (optional.length > 0) {
      rule += " (";
      if (required.length > 0) rule += ' "," space ( ';
      // llama.cpp recurses over every suffix of the optional properties; the rules of a
      // suffix do not depend on where it starts, so each is built once, the last first
      // (the order llama.cpp adds them in, which decides clash renaming)
      const restRule: string[] = new Array(optional.length).fill("");
      const commaRef = (k: PropertyRef) => '( "," space ' + k.kv + " )";
      for (let i = optional.length - 2; i >= 0; i--) {
        const next = optional[i + 1];
        const body = commaRef(next) + (next.additional ? "*" : "?") +
          (restRule[i + 1] === "" ? "" : " " + restRule[i + 1]);
        restRule[i] = this.addRule(prefix + optional[i].name + "-rest", body);
      }
      rule += optional.map((k, i) =>
        k.kv + (k.additional ? " " + commaRef(k) + "*" : "") +
        (restRule[i] === "" ? "" : " " + restRule[i])
      ).join(" | ");
      if (required.length > 0) rule += " )";
      rule += " )?";
    }
    return rule + ' space "}"';
  }

  /** llama.cpp's `_visit_all_of`: the common enum values, or the members' properties merged. */
  #allOf(node: AlternativesNode, name: string, ruleName: string): string {
    const properties: { name: string; schema: SchemaNode; required: boolean }[] = [];
    const enumCounts = new Map<string, number>();
    const add = (member: SchemaNode, isRequired: boolean) => {
      const r = resolved(member);
      if (r.kind === "object") {
        for (const p of (r as ObjectNode).properties) {
          properties.push({ name: p.name, schema: p.schema, required: isRequired });
        }
      } else if (r.kind === "enum") {
        for (const v of r.values) {
          const literal = formatLiteral(dumpJson(v, r.path, "enum"));
          enumCounts.set(literal, (enumCounts.get(literal) ?? 0) + 1);
        }
      }
    };
    for (const child of node.children) {
      if (child.kind === "anyOf") { for (const alt of child.children) add(alt, false); }
      else add(child, true);
    }
    if (enumCounts.size > 0) {
      const common = [...enumCounts].filter(([, n]) => n === node.children.length).map(([l]) => l)
        .sort(compareCodePoints);
      if (common.length > 0) return this.addRule(ruleName, "(" + common.join(" | ") + ")");
    }
    return this.addRule(ruleName, this.#objectRule(properties, name, null, node.path));
  }
}
