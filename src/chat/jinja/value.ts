/**
 * The values of llama.cpp's Jinja engine (`common/jinja/value.h`): int,
 * float, string, bool, array, tuple, object (insertion-ordered, keys any
 * hashable value, `1`, `1.0` and `true` the same key), none, undefined,
 * function and keyword argument, with its truthiness, equality, string and
 * JSON forms, and the usage stats its capability probes read.
 *
 * @example
 * ```ts
 * import { fromJson, toJson } from "./value.ts";
 * const v = fromJson({ a: [1, 2.5, "x", null, true] });
 * if (toJson(v) !== '{"a": [1, 2.5, "x", null, true]}') throw new Error(toJson(v));
 * ```
 *
 * @module
 */
import { JinjaError } from "./error.ts";

/** A value's kind. */
export type Kind =
  | "int"
  | "float"
  | "string"
  | "bool"
  | "array"
  | "tuple"
  | "object"
  | "none"
  | "undefined"
  | "func"
  | "kwarg";

/** What a function receives: positional and keyword arguments, and the caller's context. */
export interface FuncArgs {
  args: Value[];
  /** The function's name, for error messages. */
  name: string;
  /** The calling context (an opaque runtime context). */
  ctx: unknown;
}

/** A native function. */
export type Func = (args: FuncArgs) => Value;

/** Usage recorded while a capability probe renders. */
export interface Stats {
  used: boolean;
  ops: Set<string>;
}

const NO_ITEMS: Value[] = Object.freeze([]) as unknown as Value[];
const NO_ENTRIES: Map<string, [Value, Value]> = new Map();

/** One Jinja value. */
export class Value {
  readonly kind: Kind;
  /** int, float and bool payload. */
  num = 0;
  str = "";
  /** Array and tuple items (a frozen empty array for other kinds). */
  arr: Value[] = NO_ITEMS;
  /** Object entries in insertion order, by key hash (a frozen empty map for other kinds). */
  obj: Map<string, [Value, Value]> = NO_ENTRIES;
  func?: Func;
  /** A function's name, a kwarg's key, or an undefined value's hint. */
  name = "";
  /** A bound method's `self`. */
  self?: Value;
  /** A kwarg's value. */
  kwValue?: Value;
  /** Objects have builtins unless they are a context or a loop object. */
  hasBuiltins = true;
  #stats?: Stats;

  constructor(kind: Kind) {
    this.kind = kind;
    if (kind === "array" || kind === "tuple") this.arr = [];
    else if (kind === "object") this.obj = new Map();
  }

  get stats(): Stats {
    return this.#stats ??= { used: false, ops: new Set() };
  }

  get hasStats(): boolean {
    return this.#stats !== undefined;
  }

  isArray(): boolean {
    return this.kind === "array" || this.kind === "tuple";
  }

  isNumeric(): boolean {
    return this.kind === "int" || this.kind === "float" || this.kind === "bool";
  }

  /** The type name llama.cpp prints in errors. */
  typeName(): string {
    switch (this.kind) {
      case "int":
        return "Integer";
      case "float":
        return "Float";
      case "string":
        return "String";
      case "bool":
        return "Boolean";
      case "array":
        return "Array";
      case "tuple":
        return "Tuple";
      case "object":
        return "Object";
      case "none":
        return "None";
      case "undefined":
        return this.name === "" ? "Undefined" : `Undefined (hint: '${this.name}')`;
      case "func":
        return "Function";
      case "kwarg":
        return "KwArg";
    }
  }

  asBool(): boolean {
    switch (this.kind) {
      case "int":
      case "float":
      case "bool":
        return this.num !== 0;
      case "string":
        return this.str.length > 0;
      case "array":
      case "tuple":
        return this.arr.length > 0;
      case "object":
        return this.obj.size > 0;
      case "none":
      case "undefined":
        return false;
      default:
        throw new JinjaError(`${this.typeName()} is not a bool value`);
    }
  }

  asInt(): number {
    if (this.kind === "int" || this.kind === "bool") return this.num;
    if (this.kind === "float") return Number.isFinite(this.num) ? Math.trunc(this.num) : 0;
    throw new JinjaError(`${this.typeName()} is not an int value`);
  }

  asFloat(): number {
    if (this.kind === "int" || this.kind === "float") return this.num;
    throw new JinjaError(`${this.typeName()} is not a float value`);
  }

  /** llama.cpp's `as_string`. */
  asString(): string {
    switch (this.kind) {
      case "int":
        return String(this.num);
      case "float":
        return floatToString(this.num);
      case "string":
        return this.str;
      case "bool":
        return this.num ? "True" : "False";
      case "array":
      case "tuple": {
        const tuple = this.kind === "tuple";
        let s = tuple ? "(" : "[";
        s += this.arr.map(repr).join(", ");
        if (tuple && this.arr.length === 1) s += ",";
        return s + (tuple ? ")" : "]");
      }
      case "object":
        return "{" + [...this.obj.values()].map(([k, v]) => `${repr(k)}: ${repr(v)}`).join(", ") +
          "}";
      case "none":
        return "None";
      default:
        throw new JinjaError(`${this.typeName()} is not a string value`);
    }
  }

  isHashable(): boolean {
    switch (this.kind) {
      case "array":
      case "tuple":
        return this.arr.every((v) => isImmutable(v) && v.isHashable());
      case "object":
        return [...this.obj.values()].every(([, v]) => isImmutable(v) && v.isHashable());
      case "undefined":
      case "func":
        return false;
      default:
        return true;
    }
  }

  /** The object lookup `at(key, default)`. */
  get(key: Value): Value | undefined {
    if (this.kind !== "object") throw new JinjaError(`${this.typeName()} is not an object value`);
    if (!this.hasKey(key)) return undefined;
    return this.obj.get(keyHash(key))?.[1];
  }

  /** The object lookup by a string key. */
  getKey(key: string): Value | undefined {
    return this.obj.get("s:" + key)?.[1];
  }

  hasKey(key: Value): boolean {
    if (!isImmutable(key) || !key.isHashable()) {
      throw new JinjaError(`Object key of unhashable type: ${key.typeName()}`);
    }
    return this.obj.has(keyHash(key));
  }

  /** Inserts or replaces (keeping the first insertion's position). */
  set(key: Value | string, value: Value): void {
    if (this.kind !== "object") throw new JinjaError(`${this.typeName()} is not an object value`);
    let hash: string;
    if (typeof key === "string") hash = "s:" + key;
    else {
      this.hasKey(key);
      hash = keyHash(key);
    }
    const existing = this.obj.get(hash);
    if (existing !== undefined) existing[1] = value;
    else this.obj.set(hash, [typeof key === "string" ? mkString(key) : key, value]);
  }

  entries(): [Value, Value][] {
    return [...this.obj.values()];
  }
}

function isImmutable(v: Value): boolean {
  return v.kind !== "array" && v.kind !== "object";
}

/** The hash under which a key is stored: equivalent keys (1, 1.0, true) share one. */
export function keyHash(key: Value): string {
  switch (key.kind) {
    case "int":
    case "bool":
      return "n:" + key.num;
    case "float":
      return Number.isInteger(key.num) ? "n:" + key.num : "f:" + key.num;
    case "string":
      return "s:" + key.str;
    case "none":
      return "none";
    case "undefined":
      return "undefined";
    case "array":
    case "tuple":
      return key.kind + "[" + key.arr.map(keyHash).join(",") + "]";
    case "object":
      return "{" + key.entries().map(([k, v]) => keyHash(k) + ":" + keyHash(v)).join(",") + "}";
    case "kwarg":
      return "kw:" + key.name + "=" + keyHash(key.kwValue!);
    case "func":
      throw new JinjaError(`Object key of unhashable type: ${key.typeName()}`);
  }
}

/** C++ `std::to_string(double)` with its trailing zeros removed (one kept after the point). */
export function floatToString(x: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  let out = x.toFixed(6);
  out = out.replace(/0+$/, "");
  if (out.endsWith(".")) out += "0";
  return out;
}

/** C++ `ostream << double` (6 significant digits, `%g`). */
export function floatToJson(x: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0" : "0";
  const exp = Math.floor(Math.log10(Math.abs(x)));
  let p = x.toPrecision(6);
  const e = Number(p.includes("e") ? p.split("e")[1] : exp);
  if (e < -4 || e >= 6) {
    let [mant, ex] = x.toExponential(5).split("e");
    if (mant.includes(".")) mant = mant.replace(/0+$/, "").replace(/\.$/, "");
    const sign = ex.startsWith("-") ? "-" : "+";
    const digits = ex.replace(/^[-+]/, "").padStart(2, "0");
    return `${mant}e${sign}${digits}`;
  }
  if (p.includes(".")) p = p.replace(/0+$/, "").replace(/\.$/, "");
  return p;
}

/** llama.cpp's `value_to_string_repr`. */
export function repr(v: Value): string {
  if (v.kind === "string") return v.str.includes("'") ? toJson(v) : `'${v.str}'`;
  switch (v.kind) {
    case "none":
      return "None";
    case "undefined":
      return v.typeName();
    case "func":
      return `Function<${v.name}>(${v.self ? repr(v.self) : ""})`;
    case "kwarg":
      return "KwArg";
    default:
      return v.asString();
  }
}

export function mkInt(n: number): Value {
  const v = new Value("int");
  v.num = Math.trunc(n);
  return v;
}

export function mkFloat(n: number): Value {
  const v = new Value("float");
  v.num = n;
  return v;
}

export function mkString(s: string): Value {
  const v = new Value("string");
  v.str = s;
  return v;
}

export function mkBool(b: boolean): Value {
  const v = new Value("bool");
  v.num = b ? 1 : 0;
  return v;
}

export function mkArray(items: Value[] = []): Value {
  const v = new Value("array");
  v.arr = items;
  return v;
}

export function mkTuple(items: Value[]): Value {
  const v = new Value("tuple");
  v.arr = items;
  return v;
}

export function mkObject(entries: [Value | string, Value][] = []): Value {
  const v = new Value("object");
  for (const [k, x] of entries) v.set(k, x);
  return v;
}

export function mkNone(): Value {
  return new Value("none");
}

export function mkUndefined(hint = ""): Value {
  const v = new Value("undefined");
  v.name = hint;
  return v;
}

export function mkFunc(name: string, func: Func, self?: Value): Value {
  const v = new Value("func");
  v.name = name;
  v.func = func;
  v.self = self;
  return v;
}

export function mkKwarg(key: string, value: Value): Value {
  const v = new Value("kwarg");
  v.name = key;
  v.kwValue = value;
  return v;
}

/** A JSON value (as `JSON.parse` gives) as a Jinja value; integers stay ints. */
export function fromJson(json: unknown): Value {
  if (json === null || json === undefined) return mkNone();
  if (typeof json === "boolean") return mkBool(json);
  if (typeof json === "number") return Number.isInteger(json) ? mkInt(json) : mkFloat(json);
  if (typeof json === "string") return mkString(json);
  if (Array.isArray(json)) return mkArray(json.map(fromJson));
  if (typeof json === "object") {
    return mkObject(
      Object.entries(json as Record<string, unknown>).map(([k, x]) => [k, fromJson(x)]),
    );
  }
  throw new JinjaError("Unsupported JSON value type");
}

function jsonString(s: string): string {
  let out = '"';
  for (const c of s) {
    switch (c) {
      case '"':
        out += '\\"';
        break;
      case "\\":
        out += "\\\\";
        break;
      case "\b":
        out += "\\b";
        break;
      case "\f":
        out += "\\f";
        break;
      case "\n":
        out += "\\n";
        break;
      case "\r":
        out += "\\r";
        break;
      case "\t":
        out += "\\t";
        break;
      default:
        out += c.charCodeAt(0) < 0x20 ? "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0") : c;
    }
  }
  return out + '"';
}

/** llama.cpp's `value_to_json` (its `tojson`): insertion order, Python's separators by default. */
export function toJson(
  v: Value,
  indent = -1,
  itemSep = ", ",
  keySep = ": ",
  level = 0,
): string {
  const pad = (l: number) => (indent > 0 ? " ".repeat(l * indent) : "");
  const nl = indent >= 0 ? "\n" : "";
  switch (v.kind) {
    case "none":
    case "undefined":
      return "null";
    case "bool":
      return v.num ? "true" : "false";
    case "int":
      return String(v.num);
    case "float":
      return floatToJson(v.num);
    case "string":
      return jsonString(v.str);
    case "array":
    case "tuple": {
      if (v.arr.length === 0) return "[]";
      let out = "[" + nl;
      v.arr.forEach((x, i) => {
        out += pad(level) + pad(1) + toJson(x, indent, itemSep, keySep, level + 1);
        if (i < v.arr.length - 1) out += itemSep;
        out += nl;
      });
      return out + pad(level) + "]";
    }
    case "object": {
      const entries = v.entries();
      if (entries.length === 0) return "{}";
      let out = "{" + nl;
      entries.forEach(([k, x], i) => {
        out += pad(level) + pad(1) + jsonString(k.asString()) + keySep +
          toJson(x, indent, itemSep, keySep, level + 1);
        if (i < entries.length - 1) out += itemSep;
        out += nl;
      });
      return out + pad(level) + "}";
    }
    default:
      return "null";
  }
}

/** `==` (llama.cpp's `equivalent`). */
export function equals(a: Value, b: Value): boolean {
  if (a.isNumeric()) {
    return b.isNumeric() && a.asInt() === b.asInt() &&
      (a.kind === "float" ? a.num : a.num) === (b.kind === "float" ? b.num : b.num);
  }
  switch (a.kind) {
    case "string":
      return b.kind === "string" && a.str === b.str;
    case "none":
      return b.kind === "none";
    case "undefined":
      return b.kind === "undefined";
    case "array":
    case "tuple":
      return b.kind === a.kind && a.isHashable() && b.isHashable() &&
        a.arr.length === b.arr.length && a.arr.every((x, i) => equals(x, b.arr[i]));
    case "object": {
      if (b.kind !== "object" || !a.isHashable() || !b.isHashable()) return false;
      const ea = a.entries();
      const eb = b.entries();
      return ea.length === eb.length &&
        ea.every(([k, x], i) => equals(k, eb[i][0]) && equals(x, eb[i][1]));
    }
    case "func":
      return b.kind === "func" && a.func === b.func;
    case "kwarg":
      return b.kind === "kwarg" && a.name === b.name && a.kwValue === b.kwValue;
    default:
      return false;
  }
}

/** Marks `v` used (and, deep, everything in it). */
export function markUsed(v: Value, deep = false): void {
  v.stats.used = true;
  if (!deep) return;
  if (v.isArray()) { for (const x of v.arr) markUsed(x, true); }
  else if (v.kind === "object") {
    for (const [k, x] of v.obj.values()) {
      markUsed(k, true);
      markUsed(x, true);
    }
  }
}
