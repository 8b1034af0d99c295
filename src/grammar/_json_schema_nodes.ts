/**
 * A JSON Schema read into the typed nodes llama.cpp's converter works on (a port of its
 * `common_chat_schema_from_json`, `common/json-schema.cpp`), with the checks that make the
 * conversion strict: every keyword the grammar will not enforce is refused (see
 * `_json_schema_keywords.ts`), as are impossible bounds, values beyond the limits, `$ref`
 * cycles that consume nothing (left recursion), and `allOf` combinations whose merge would
 * not be the intersection.
 *
 * @module
 */
import {
  childPath,
  MAX_INTEGER_BOUND,
  MAX_REPETITION,
  MAX_SCHEMA_DEPTH,
  MAX_SCHEMA_NODES,
  SchemaError,
} from "./_json_schema_error.ts";
import { refuseUnenforced } from "./_json_schema_keywords.ts";
import {
  dumpJson,
  isObject,
  isWellFormed,
  jsonTypeOf,
  type ValueType,
} from "./_json_schema_value.ts";

/** The string formats llama.cpp has rules for (`uuid1`…`uuid5` are `uuid`). */
export type StringFormat = "none" | "uuid" | "date" | "time" | "date-time";

/** One schema node, as llama.cpp's `common_chat_schema` kinds. `path` is a JSON pointer. */
export type SchemaNode =
  | { kind: "any"; path: string }
  | RefNode
  | AlternativesNode
  | { kind: "const"; path: string; value: unknown }
  | { kind: "enum"; path: string; values: unknown[] }
  | { kind: "null" | "boolean" | "number"; path: string }
  | { kind: "integer"; path: string; minimum: number | null; maximum: number | null }
  | StringNode
  | { kind: "array"; path: string; items: SchemaNode; minItems: number; maxItems: number }
  | { kind: "tuple"; path: string; items: SchemaNode[] }
  | ObjectNode;

/** A `$ref`; its target is set once the whole schema is read. */
export interface RefNode {
  kind: "ref";
  path: string;
  ref: string;
  target: SchemaNode | null;
}

/** `anyOf` (also `oneOf` and a `type` array) or `allOf`. */
export interface AlternativesNode {
  kind: "anyOf" | "allOf";
  path: string;
  children: SchemaNode[];
}

/** A string; `maxLength` -1 is unbounded, `pattern` "" is none. */
export interface StringNode {
  kind: "string";
  path: string;
  pattern: string;
  format: StringFormat;
  minLength: number;
  maxLength: number;
}

/** An object; `additional` null forbids other properties. */
export interface ObjectNode {
  kind: "object";
  path: string;
  properties: { name: string; schema: SchemaNode; required: boolean }[];
  additional: SchemaNode | null;
  json: Record<string, unknown>;
}

const ALL_TYPES: readonly ValueType[] = [
  "null",
  "boolean",
  "number",
  "integer",
  "string",
  "array",
  "object",
];
const TYPE_NAMES: ReadonlySet<string> = new Set(ALL_TYPES);

/** The `format` values with a grammar, and what they become. */
const FORMATS: Record<string, StringFormat> = {
  "date": "date",
  "time": "time",
  "date-time": "date-time",
  "uuid": "uuid",
  "uuid1": "uuid",
  "uuid2": "uuid",
  "uuid3": "uuid",
  "uuid4": "uuid",
  "uuid5": "uuid",
};

/** A node with its `$ref`s followed (the caller has ruled out cycles of bare `$ref`s). */
export function resolved(node: SchemaNode): SchemaNode {
  while (node.kind === "ref" && node.target !== null) node = node.target;
  return node;
}

/** The instance types a node's grammar can produce (llama.cpp's `value_types`). */
export function valueTypes(node: SchemaNode, visiting = new Set<SchemaNode>()): Set<ValueType> {
  switch (node.kind) {
    case "any":
      return new Set(ALL_TYPES);
    case "null":
    case "boolean":
    case "integer":
    case "string":
    case "object":
      return new Set([node.kind]);
    case "number":
      return new Set(["number", "integer"]);
    case "array":
    case "tuple":
      return new Set(["array"]);
    case "const":
      return new Set([jsonTypeOf(node.value)]);
    case "enum":
      return new Set(node.values.map(jsonTypeOf));
    case "ref": {
      if (node.target === null || visiting.has(node.target)) return new Set();
      visiting.add(node.target);
      const types = valueTypes(node.target, visiting);
      visiting.delete(node.target);
      return types;
    }
    case "anyOf": {
      const types = new Set<ValueType>();
      for (const c of node.children) for (const t of valueTypes(c, visiting)) types.add(t);
      return types;
    }
    case "allOf": {
      // llama.cpp merges an allOf into one object, unless its members are enums
      const isEnum = node.children.some((c) => resolved(c).kind === "enum");
      if (!isEnum) return new Set(["object"]);
      let types = new Set<ValueType>(ALL_TYPES);
      for (const c of node.children) {
        const ct = valueTypes(c, visiting);
        types = new Set([...types].filter((t) => ct.has(t)));
      }
      return types;
    }
  }
}

function describeTypes(types: Iterable<string>): string {
  return [...types].join(", ");
}

/** A deferred check, run once every `$ref` has its target. */
type Check = () => void;

/** Reads a schema (already parsed JSON) into nodes; throws `SchemaError`. */
export class SchemaBuilder {
  readonly #root: unknown;
  readonly #refs = new Map<string, SchemaNode | null>();
  readonly #pending: RefNode[] = [];
  readonly #checks: Check[] = [];
  #nodes = 0;

  constructor(root: unknown) {
    this.#root = root;
  }

  /** The root node, every check passed. */
  build(): SchemaNode {
    const root = this.#node(this.#root, "", 0);
    for (const ref of this.#pending) ref.target = this.#refs.get(ref.ref) ?? null;
    refuseLeftRecursion(root);
    for (const check of this.#checks) check();
    return root;
  }

  #node(schema: unknown, path: string, depth: number, typeArray?: Set<string>): SchemaNode {
    if (++this.#nodes > MAX_SCHEMA_NODES) {
      throw new SchemaError(
        path,
        "",
        `makes more than ${MAX_SCHEMA_NODES} sub-schemas (MAX_SCHEMA_NODES)`,
      );
    }
    if (depth > MAX_SCHEMA_DEPTH) {
      throw new SchemaError(path, "", `nests deeper than ${MAX_SCHEMA_DEPTH} (MAX_SCHEMA_DEPTH)`);
    }
    if (!isObject(schema)) {
      const hint = typeof schema === "boolean" ? " (boolean schemas are not supported)" : "";
      throw new SchemaError(path, "", "must be an object" + hint);
    }
    this.#checkFormat(schema, path);
    if ("$ref" in schema) {
      const node = this.#ref(schema.$ref, path, depth);
      this.#defer(schema, path, node, ["$ref"], '(beside "$ref")', typeArray);
      return node;
    }
    if ("oneOf" in schema || "anyOf" in schema) {
      const key = "oneOf" in schema ? "oneOf" : "anyOf";
      const node = this.#alternatives("anyOf", schema, key, path, depth);
      this.#defer(schema, path, node, [key], `(beside "${key}")`, typeArray);
      return node;
    }
    const type = schema.type ?? null;
    if (Array.isArray(type)) return this.#typeArray(schema, type, path, depth);
    if ("const" in schema) {
      const node: SchemaNode = { kind: "const", path, value: schema.const };
      const literal = dumpJson(schema.const, path, "const");
      const enforced = ["const"];
      const values = schema.enum;
      if (Array.isArray(values) && values.some((v) => dumpJson(v, path, "enum") === literal)) {
        enforced.push("enum");
      }
      this.#defer(schema, path, node, enforced, '(beside "const")', typeArray);
      return node;
    }
    if ("enum" in schema) {
      const values = schema.enum;
      if (!Array.isArray(values) || values.length === 0) {
        throw new SchemaError(path, "enum", "must be a non-empty array");
      }
      for (const v of values) dumpJson(v, path, "enum");
      const node: SchemaNode = { kind: "enum", path, values: [...values] };
      this.#defer(schema, path, node, ["enum"], '(beside "enum")', typeArray);
      return node;
    }
    if (type !== null && typeof type !== "string") {
      throw new SchemaError(path, "type", "must be a string or an array of strings");
    }
    const hasProperties = "properties" in schema ||
      ("additionalProperties" in schema && schema.additionalProperties !== true);
    const typed = type === null ? [] : ["type"];
    if (type === null) {
      // without a type the structural keywords decide, in llama.cpp's order
      if (hasProperties) return this.#object(schema, path, depth, typed, typeArray);
      if ("allOf" in schema) return this.#allOf(schema, path, depth, typed, typeArray);
      if ("items" in schema || "prefixItems" in schema) {
        return this.#array(schema, path, depth, typed);
      }
      const format = typeof schema.format === "string" ? FORMATS[schema.format] : undefined;
      if (
        "pattern" in schema || "minLength" in schema || "maxLength" in schema ||
        format !== undefined
      ) {
        return this.#string(schema, path, typed);
      }
      const node: SchemaNode = { kind: "any", path };
      this.#defer(schema, path, node, [], "", typeArray);
      return node;
    }
    switch (type) {
      case "object":
        if (!hasProperties && "allOf" in schema) {
          return this.#allOf(schema, path, depth, typed, typeArray);
        }
        return this.#object(schema, path, depth, typed, typeArray);
      case "string":
        if ("allOf" in schema) return this.#allOf(schema, path, depth, typed, typeArray);
        return this.#string(schema, path, typed);
      case "array":
        return this.#array(schema, path, depth, typed);
      case "integer":
        return this.#integer(schema, path);
      case "number":
      case "boolean":
      case "null": {
        const node: SchemaNode = { kind: type, path };
        this.#defer(schema, path, node, typed, "");
        return node;
      }
      default:
        throw new SchemaError(path, "type", `names an unknown type "${type}"`);
    }
  }

  /** Refuses a `format` that is not a string or has no grammar (anywhere, on any type). */
  #checkFormat(schema: Record<string, unknown>, path: string): void {
    if (!("format" in schema)) return;
    const format = schema.format;
    if (typeof format !== "string") throw new SchemaError(path, "format", "must be a string");
    if (!Object.hasOwn(FORMATS, format)) {
      throw new SchemaError(
        path,
        "format",
        `is not supported: "${format.slice(0, 40)}" (supported: ${
          Object.keys(FORMATS).join(", ")
        })`,
      );
    }
  }

  /**
   * Defers the keyword check of a schema object: what `enforced` does not cover is
   * refused where it applies to the node's types; a `type` the branch ignores must allow
   * every type the node produces (`typeArray`: the whole array when this object is one of
   * its expansions).
   */
  #defer(
    schema: Record<string, unknown>,
    path: string,
    node: SchemaNode,
    enforced: string[],
    hint: string,
    typeArray?: Set<string>,
  ): void {
    this.#checks.push(() => {
      const produced = valueTypes(node);
      refuseUnenforced(schema, path, new Set(enforced), produced, hint);
      if (enforced.includes("type") || schema.type === undefined || schema.type === null) return;
      const declared = typeArray ?? declaredTypes(schema.type, path);
      const extra = [...produced].filter((t) =>
        !declared.has(t) && !(t === "integer" && declared.has("number"))
      );
      if (extra.length > 0) {
        const beside = hint === "" ? "" : " " + hint;
        throw new SchemaError(
          path,
          "type",
          `is not enforced${beside}: the schema beside it also allows ${describeTypes(extra)}`,
        );
      }
    });
  }

  #typeArray(
    schema: Record<string, unknown>,
    types: unknown[],
    path: string,
    depth: number,
  ): SchemaNode {
    if (types.length === 0) throw new SchemaError(path, "type", "must not be empty");
    const declared = declaredTypes(types, path);
    const children = types.map((t) =>
      this.#node({ ...schema, type: t }, path, depth + 1, declared)
    );
    return { kind: "anyOf", path, children };
  }

  #ref(value: unknown, path: string, depth: number): SchemaNode {
    if (typeof value !== "string") throw new SchemaError(path, "$ref", "must be a string");
    if (!value.startsWith("#/")) {
      throw new SchemaError(
        path,
        "$ref",
        `is not supported: "${value.slice(0, 200)}" (only references into the same document, ` +
          "#/..., are; nothing is fetched)",
      );
    }
    if (!this.#refs.has(value)) {
      this.#refs.set(value, null); // a cycle back to this $ref stops here
      const target = this.#resolve(value, path);
      this.#refs.set(value, this.#node(target, value.slice(1), depth + 1));
    }
    const node: RefNode = {
      kind: "ref",
      path,
      ref: value,
      target: null,
    };
    this.#pending.push(node);
    return node;
  }

  /** Follows `ref`'s tokens from the root, as llama.cpp does (no `~` unescaping). */
  #resolve(ref: string, path: string): unknown {
    let target: unknown = this.#root;
    const tokens = ref.slice(1).split("/");
    for (const sel of tokens.slice(1)) {
      if (isObject(target) && Object.hasOwn(target, sel)) {
        target = target[sel];
      } else if (Array.isArray(target)) {
        const m = /^\s*\+?([0-9]+)/.exec(sel);
        const index = m === null ? target.length : Number(m[1]);
        if (index >= target.length) {
          throw new SchemaError(
            path,
            "$ref",
            `cannot be resolved: "${ref}" (${sel} is out of range)`,
          );
        }
        target = target[index];
      } else {
        throw new SchemaError(path, "$ref", `cannot be resolved: "${ref}" (${sel} not found)`);
      }
    }
    return target;
  }

  #alternatives(
    kind: "anyOf" | "allOf",
    schema: Record<string, unknown>,
    key: string,
    path: string,
    depth: number,
  ): AlternativesNode {
    const alts = schema[key];
    if (!Array.isArray(alts)) throw new SchemaError(path, key, "must be an array of schemas");
    if (alts.length === 0) throw new SchemaError(path, key, "must not be empty");
    const children = alts.map((a, i) => this.#node(a, childPath(path, key, i), depth + 1));
    return { kind, path, children };
  }

  #allOf(
    schema: Record<string, unknown>,
    path: string,
    depth: number,
    typed: string[],
    typeArray?: Set<string>,
  ): SchemaNode {
    const node = this.#alternatives("allOf", schema, "allOf", path, depth);
    this.#defer(schema, path, node, [...typed, "allOf"], '(beside "allOf")', typeArray);
    this.#checks.push(() => checkAllOf(node));
    return node;
  }

  #object(
    schema: Record<string, unknown>,
    path: string,
    depth: number,
    typed: string[],
    typeArray?: Set<string>,
  ): SchemaNode {
    const required = new Set<string>();
    if ("required" in schema) {
      const names = schema.required;
      if (!Array.isArray(names) || names.some((n) => typeof n !== "string")) {
        throw new SchemaError(path, "required", "must be an array of strings");
      }
      for (const n of names) required.add(n);
    }
    const node: ObjectNode = {
      kind: "object",
      path,
      properties: [],
      additional: null,
      json: schema,
    };
    if ("properties" in schema) {
      const properties = schema.properties;
      if (!isObject(properties)) throw new SchemaError(path, "properties", "must be an object");
      for (const [name, prop] of Object.entries(properties)) {
        const at = childPath(path, "properties", name);
        if (!isWellFormed(name)) throw new SchemaError(at, "", "has a name with a lone surrogate");
        node.properties.push({
          name,
          schema: this.#node(prop, at, depth + 1),
          required: required.has(name),
        });
      }
    }
    for (const name of required) {
      if (!node.properties.some((p) => p.name === name)) {
        throw new SchemaError(
          path,
          "required",
          `names "${name.slice(0, 80)}", which is not in "properties" (not supported)`,
        );
      }
    }
    if ("additionalProperties" in schema) {
      const additional = schema.additionalProperties;
      if (additional === true) node.additional = { kind: "any", path };
      else if (isObject(additional)) {
        node.additional = this.#node(
          additional,
          childPath(path, "additionalProperties"),
          depth + 1,
        );
      } else if (additional !== false) {
        throw new SchemaError(path, "additionalProperties", "must be a boolean or a schema");
      }
    } else if (!("properties" in schema)) {
      node.additional = { kind: "any", path }; // {"type": "object"} alone: any object
    }
    const enforced = [...typed, "properties", "required", "additionalProperties"];
    this.#defer(schema, path, node, enforced, "", typeArray);
    return node;
  }

  #array(
    schema: Record<string, unknown>,
    path: string,
    depth: number,
    typed: string[],
  ): SchemaNode {
    const minItems = count(schema, "minItems", path, 0);
    const maxItems = count(schema, "maxItems", path, -1);
    if (maxItems >= 0 && minItems > maxItems) {
      throw new SchemaError(path, "minItems", `(${minItems}) is above "maxItems" (${maxItems})`);
    }
    const enforced = [...typed, "additionalItems"];
    // the 2020-12 closed tuple, {"prefixItems": [...], "items": false}: llama.cpp refuses it
    const closedTuple = schema.items === false && Array.isArray(schema.prefixItems);
    if ("items" in schema || "prefixItems" in schema) {
      const key = "items" in schema && !closedTuple ? "items" : "prefixItems";
      const items = schema[key];
      enforced.push(key);
      if (closedTuple) enforced.push("items");
      if (Array.isArray(items)) {
        const node: SchemaNode = {
          kind: "tuple",
          path,
          items: items.map((s, i) => this.#node(s, childPath(path, key, i), depth + 1)),
        };
        // a tuple has exactly its length: the counts are enforced if that length meets them
        const n = items.length;
        if (minItems <= n) enforced.push("minItems");
        if (maxItems < 0 || n <= maxItems) enforced.push("maxItems");
        this.#defer(schema, path, node, enforced, `(a tuple of ${n} items)`);
        return node;
      }
      const node: SchemaNode = {
        kind: "array",
        path,
        items: this.#node(items, childPath(path, key), depth + 1),
        minItems,
        maxItems,
      };
      this.#defer(schema, path, node, [...enforced, "minItems", "maxItems"], `(beside "${key}")`);
      return node;
    }
    const node: SchemaNode = {
      kind: "array",
      path,
      items: { kind: "any", path },
      minItems,
      maxItems,
    };
    this.#defer(schema, path, node, [...enforced, "minItems", "maxItems"], "");
    return node;
  }

  #string(schema: Record<string, unknown>, path: string, typed: string[]): SchemaNode {
    let pattern = "";
    if ("pattern" in schema) {
      if (typeof schema.pattern !== "string") {
        throw new SchemaError(path, "pattern", "must be a string");
      }
      if (!isWellFormed(schema.pattern)) {
        throw new SchemaError(path, "pattern", "holds a lone surrogate");
      }
      pattern = schema.pattern;
    }
    const format = typeof schema.format === "string" ? FORMATS[schema.format] ?? "none" : "none";
    const minLength = count(schema, "minLength", path, 0);
    const maxLength = count(schema, "maxLength", path, -1);
    if (maxLength >= 0 && minLength > maxLength) {
      throw new SchemaError(
        path,
        "minLength",
        `(${minLength}) is above "maxLength" (${maxLength})`,
      );
    }
    const node: StringNode = { kind: "string", path, pattern, format, minLength, maxLength };
    // llama.cpp uses the pattern, else the format, else the lengths: only one of them
    const [enforced, hint] = pattern !== ""
      ? [["pattern"], '(beside "pattern")']
      : format !== "none"
      ? [["format"], '(beside "format")']
      : [["minLength", "maxLength"], ""];
    this.#defer(schema, path, node, [...typed, ...enforced], hint);
    return node;
  }

  #integer(schema: Record<string, unknown>, path: string): SchemaNode {
    // inclusive bounds; a fractional bound is rounded inwards; with both forms, the stricter
    const lower = [
      bound(schema, "minimum", path, Math.ceil),
      bound(schema, "exclusiveMinimum", path, (v) => Math.floor(v) + 1),
    ].filter((b) => b !== null);
    const upper = [
      bound(schema, "maximum", path, Math.floor),
      bound(schema, "exclusiveMaximum", path, (v) => Math.ceil(v) - 1),
    ].filter((b) => b !== null);
    const min = lower.length === 0 ? null : lower.reduce((a, b) => (b[0] > a[0] ? b : a));
    const max = upper.length === 0 ? null : upper.reduce((a, b) => (b[0] < a[0] ? b : a));
    if (min !== null && max !== null && min[0] > max[0]) {
      throw new SchemaError(path, min[1], `leaves no integer below "${max[1]}"`);
    }
    const node: SchemaNode = {
      kind: "integer",
      path,
      minimum: min?.[0] ?? null,
      maximum: max?.[0] ?? null,
    };
    const enforced = ["type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
    this.#defer(schema, path, node, enforced, "");
    return node;
  }
}

/** The type names of a `type` keyword (a string or an array of strings). */
function declaredTypes(type: unknown, path: string): Set<string> {
  const names = Array.isArray(type) ? type : [type];
  for (const t of names) {
    if (typeof t !== "string") {
      throw new SchemaError(path, "type", "must be a string or an array of strings");
    }
    if (!TYPE_NAMES.has(t)) throw new SchemaError(path, "type", `names an unknown type "${t}"`);
  }
  return new Set(names as string[]);
}

/** A count keyword (`minItems`, …): a non-negative integer up to `MAX_REPETITION`. */
function count(schema: Record<string, unknown>, key: string, path: string, absent: number): number {
  if (!(key in schema)) return absent;
  const v = schema[key];
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) {
    throw new SchemaError(path, key, "must be a non-negative integer");
  }
  if (v > MAX_REPETITION) {
    throw new SchemaError(
      path,
      key,
      `(${v}) is above ${MAX_REPETITION}, the largest repetition a grammar may hold ` +
        "(MAX_REPETITION)",
    );
  }
  return v;
}

/** An integer bound, rounded by `round` when fractional, or null when absent. */
function bound(
  schema: Record<string, unknown>,
  key: string,
  path: string,
  round: (v: number) => number,
): [number, string] | null {
  if (!(key in schema)) return null;
  const v = schema[key];
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw new SchemaError(path, key, "must be a number");
  }
  const b = Number.isInteger(v) && !key.startsWith("exclusive") ? v : round(v);
  if (Math.abs(b) > MAX_INTEGER_BOUND) {
    throw new SchemaError(
      path,
      key,
      `(${v}) is beyond ±${MAX_INTEGER_BOUND} (MAX_INTEGER_BOUND)`,
    );
  }
  return [b, key];
}

/**
 * Refuses a cycle through `$ref`, `anyOf` and `allOf` alone: its rules would be left
 * recursive (llama.cpp loops forever on some, and its grammar parser rejects the rest).
 */
function refuseLeftRecursion(root: SchemaNode): void {
  const done = new Set<SchemaNode>();
  const onPath = new Set<SchemaNode>();
  const edges = (n: SchemaNode): SchemaNode[] =>
    n.kind === "ref"
      ? (n.target === null ? [] : [n.target])
      : n.kind === "anyOf" || n.kind === "allOf"
      ? n.children
      : [];
  const stack: { node: SchemaNode; next: SchemaNode[] }[] = [];
  const all: SchemaNode[] = [];
  collect(root, all);
  for (const start of all) {
    if (done.has(start)) continue;
    stack.push({ node: start, next: [...edges(start)] });
    onPath.add(start);
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      const child = top.next.pop();
      if (child === undefined) {
        stack.pop();
        onPath.delete(top.node);
        done.add(top.node);
      } else if (onPath.has(child)) {
        const ref = [...stack].reverse().map((s) => s.node).find((n) => n.kind === "ref");
        const at = ref ?? child;
        throw new SchemaError(
          at.path,
          at.kind === "ref" ? "$ref" : at.kind,
          "makes a cycle that matches nothing first (left recursion), which is not supported",
        );
      } else if (!done.has(child)) {
        onPath.add(child);
        stack.push({ node: child, next: [...edges(child)] });
      }
    }
  }
}

/** Every node reachable from `root` without following `$ref`s (targets are reachable too). */
function collect(root: SchemaNode, out: SchemaNode[]): void {
  const seen = new Set<SchemaNode>();
  const todo = [root];
  while (todo.length > 0) {
    const n = todo.pop()!;
    if (seen.has(n)) continue;
    seen.add(n);
    out.push(n);
    switch (n.kind) {
      case "ref":
        if (n.target !== null) todo.push(n.target);
        break;
      case "anyOf":
      case "allOf":
        todo.push(...n.children);
        break;
      case "array":
        todo.push(n.items);
        break;
      case "tuple":
        todo.push(...n.items);
        break;
      case "object":
        todo.push(...n.properties.map((p) => p.schema));
        if (n.additional !== null) todo.push(n.additional);
        break;
    }
  }
}

/**
 * llama.cpp merges an `allOf` by taking every member object's properties (all required;
 * those of an `anyOf` member's alternatives optional) and no others, or, when members are
 * enums, the values common to all. Refuses the combinations where that is not the
 * intersection the schema asks for.
 */
function checkAllOf(node: AlternativesNode): void {
  const fail = (detail: string) => {
    throw new SchemaError(node.path, "allOf", detail);
  };
  const members: { node: SchemaNode; optional: boolean }[] = [];
  for (const child of node.children) {
    if (child.kind === "anyOf") {
      for (const alt of child.children) members.push({ node: resolved(alt), optional: true });
    } else {
      members.push({ node: resolved(child), optional: false });
    }
  }
  if (members.some((m) => m.node.kind === "enum")) {
    const counts = new Map<string, number>();
    for (const child of node.children) {
      const r = resolved(child);
      if (child.kind === "anyOf" || r.kind !== "enum") {
        return fail(
          `mixes enums with other schemas (member at ${
            r.path || "the root"
          }), which is not supported`,
        );
      }
      const literals = r.values.map((v) => dumpJson(v, r.path, "enum"));
      if (new Set(literals).size !== literals.length) {
        return fail(
          `has an enum member with repeated values (at ${
            r.path || "the root"
          }), which is not supported`,
        );
      }
      for (const l of literals) counts.set(l, (counts.get(l) ?? 0) + 1);
    }
    if (![...counts.values()].some((c) => c === node.children.length)) {
      fail("has enum members with no value in common: nothing matches");
    }
    return;
  }
  const seen = new Map<string, string>();
  for (const m of members) {
    const r = m.node;
    if (r.kind === "any") continue;
    if (r.kind !== "object") {
      return fail(
        `can only merge objects or enums, but the member at ${r.path || "the root"} is a ${r.kind}`,
      );
    }
    for (const p of r.properties) {
      if (seen.has(p.name)) {
        return fail(
          `defines property "${
            p.name.slice(0, 80)
          }" in more than one member, which is not supported`,
        );
      }
      seen.set(p.name, r.path);
    }
    if (m.optional) {
      const required = r.json.required;
      const additional = r.json.additionalProperties;
      if (
        (Array.isArray(required) && required.length > 0) ||
        (additional !== undefined && additional !== true)
      ) {
        return fail(
          `holds an anyOf alternative (at ${r.path || "the root"}) that requires or forbids ` +
            "properties, which is not supported",
        );
      }
    }
  }
  for (const m of members) {
    const r = m.node;
    if (r.kind !== "object" || r.json.additionalProperties === undefined) continue;
    if (r.json.additionalProperties === true) continue;
    for (const name of seen.keys()) {
      if (!r.properties.some((p) => p.name === name)) {
        return fail(
          `has a member (at ${r.path || "the root"}) that forbids property "${
            name.slice(0, 80)
          }" ` +
            "another member defines",
        );
      }
    }
  }
}
