/**
 * The built-in functions, filters and tests of llama.cpp's Jinja engine
 * (`common/jinja/value.cpp`): globals (`raise_exception`, `namespace`,
 * `dict`, `range`, `strftime_now`, `tojson`, the `test_is_*` tests) and the
 * methods and filters of each value kind, with its leniency (filters on
 * undefined and none give empty values) and its gaps (what it does not
 * implement raises "NotImplemented").
 *
 * @module
 */
import { JinjaError } from "./error.ts";
import { isSpace } from "./lexer.ts";
import {
  equals,
  type Func,
  type FuncArgs,
  markUsed,
  mkArray,
  mkBool,
  mkFloat,
  mkInt,
  mkNone,
  mkObject,
  mkString,
  mkTuple,
  mkUndefined,
  toJson,
  type Value,
} from "./value.ts";
import { strftime } from "../strftime.ts";

/** The runtime context a builtin needs: the clock and whether usage is being recorded. */
export interface BuiltinContext {
  now: Date;
  stats: boolean;
}

function ctxOf(args: FuncArgs): BuiltinContext {
  return args.ctx as BuiltinContext;
}

/** An error a template's builtin raised (llama.cpp's `raised_exception`). */
function raised(message: string): JinjaError {
  return new JinjaError(message, message, true);
}

function notImplemented(message: string): JinjaError {
  const error = new JinjaError(`NotImplemented: ${message}`);
  error.notImplemented = true;
  return error;
}

function pos(args: FuncArgs, i: number): Value {
  if (args.args.length > i) return args.args[i];
  throw raised(
    `Function '${args.name}' expected at least ${i + 1} arguments, got ${args.args.length}`,
  );
}

function posOr(args: FuncArgs, i: number, fallback: Value): Value {
  return args.args.length > i ? args.args[i] : fallback;
}

function kwarg(args: FuncArgs, key: string, fallback: Value): Value {
  for (const a of args.args) if (a.kind === "kwarg" && a.name === key) return a.kwValue!;
  return fallback;
}

/** A keyword argument, else the positional one at `i` (when it is not a keyword). */
export function kwargOrPos(args: FuncArgs, key: string, i: number): Value {
  const v = kwarg(args, key, mkUndefined());
  if (v.kind === "undefined" && i < args.args.length && args.args[i].kind !== "kwarg") {
    return args.args[i];
  }
  return v;
}

function ensureCount(args: FuncArgs, min: number, max = 999): void {
  const n = args.args.length;
  if (n < min || n > max) {
    throw new JinjaError(
      `Function '${args.name}' expected between ${min} and ${max} arguments, got ${n}`,
    );
  }
}

type Check = (v: Value) => boolean;
const isInt: Check = (v) => v.kind === "int";
const isFloat: Check = (v) => v.kind === "float";
const isStr: Check = (v) => v.kind === "string";
const isBool: Check = (v) => v.kind === "bool";
const isArr: Check = (v) => v.isArray();
const isObj: Check = (v) => v.kind === "object";
const CHECK_NAMES = new Map<Check, string>([
  [isInt, "jinja::value_int_t"],
  [isFloat, "jinja::value_float_t"],
  [isStr, "jinja::value_string_t"],
  [isBool, "jinja::value_bool_t"],
  [isArr, "jinja::value_array_t"],
  [isObj, "jinja::value_object_t"],
]);

/** `ensure_vals`: the count of required arguments, then each required one's type. */
function ensureVals(args: FuncArgs, checks: Check[], required: boolean[] = checks.map(() => true)) {
  ensureCount(args, required.filter((r) => r).length);
  checks.forEach((check, i) => {
    if (required[i] && args.args.length > i && !check(args.args[i])) {
      throw new JinjaError(
        `Function '${args.name}' expected value of type ${CHECK_NAMES.get(check)}, got ${
          args.args[i].typeName()
        }`,
      );
    }
  });
}

/** Python's slice of a sequence. */
function slice<T>(items: T[], start: number, stop: number, step: number): T[] {
  const len = items.length;
  const dir = step > 0 ? 1 : step < 0 ? -1 : 0;
  let s: number;
  let e: number;
  if (dir >= 0) {
    s = start < 0 ? Math.max(len + start, 0) : Math.min(start, len);
    e = stop < 0 ? Math.max(len + stop, 0) : Math.min(stop, len);
  } else {
    s = start < 0 ? Math.max(len + start, 0) : Math.min(start, len - 1);
    e = stop < -1 ? Math.max(len + stop, -1) : Math.min(stop, len - 1);
  }
  const out: T[] = [];
  if (dir === 0) return out;
  for (let i = s; dir * i < dir * e; i += step) if (i >= 0 && i < len) out.push(items[i]);
  return out;
}

function sliceArgs(args: FuncArgs): [number, number, number] {
  const a0 = pos(args, 1);
  const a1 = posOr(args, 2, mkUndefined());
  const a2 = posOr(args, 3, mkUndefined());
  // llama.cpp counts the bound `self` too: two arguments are (self, stop).
  if (args.args.length === 1) return [0, a0.asInt(), 1];
  if (args.args.length === 2) return [a0.asInt(), a1.asInt(), 1];
  return [a0.asInt(), a1.asInt(), a2.asInt()];
}

/** `value_compare` of llama.cpp: numbers by value, strings (and string/number) as strings. */
export function compare(a: Value, b: Value, op: "eq" | "ge" | "gt" | "lt" | "ne"): boolean {
  const num = (v: Value) => v.kind === "int" || v.kind === "float";
  const cmp = <T>(x: T, y: T) => {
    switch (op) {
      case "eq":
        return x === y;
      case "ge":
        return x >= y;
      case "gt":
        return x > y;
      case "lt":
        return x < y;
      case "ne":
        return x !== y;
    }
  };
  if (num(a) && num(b)) return cmp(a.asFloat(), b.asFloat());
  if (
    (isStr(b) && num(a)) || (isStr(a) && num(b)) || (isStr(a) && isStr(b))
  ) {
    return cmp(compareStrings(a.asString(), b.asString()), 0);
  }
  if (isBool(a) && isBool(b)) {
    if (op === "eq") return a.asBool() === b.asBool();
    if (op === "ne") return a.asBool() !== b.asBool();
    throw new JinjaError("Unsupported comparison operator for bool type");
  }
  return false;
}

/** C++ `std::string` order (UTF-8 bytes, which is code-point order): -1, 0 or 1. */
function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i].codePointAt(0)! - y[i].codePointAt(0)!;
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return x.length < y.length ? -1 : x.length > y.length ? 1 : 0;
}

function tojson(args: FuncArgs): Value {
  ensureCount(args, 1, 5);
  const ascii = kwargOrPos(args, "ensure_ascii", 1);
  const indentV = kwargOrPos(args, "indent", 2);
  const seps = kwargOrPos(args, "separators", 3);
  const sort = kwargOrPos(args, "sort_keys", 4);
  if (ctxOf(args).stats) markUsed(pos(args, 0), true);
  const indent = indentV.kind === "int" ? indentV.num : -1;
  if (sort.asBool()) throw notImplemented("tojson sort_keys=true not implemented");
  const sepList = seps.isArray() ? seps.arr : [];
  const itemSep = sepList.length > 0 ? sepList[0].asString() : indent < 0 ? ", " : ",";
  const keySep = sepList.length > 1 ? sepList[1].asString() : ": ";
  let json = toJson(pos(args, 0), indent, itemSep, keySep);
  if (ascii.asBool()) json = asciiJson(json);
  return mkString(json);
}

/** Non-ASCII characters inside JSON strings as `\uXXXX` escapes (surrogate pairs above the BMP). */
function asciiJson(json: string): string {
  let out = "";
  let inString = false;
  let escaped = false;
  for (const ch of json) {
    if (!inString) {
      out += ch;
      if (ch === '"') inString = true;
    } else if (escaped) {
      out += ch;
      escaped = false;
    } else if (ch === "\\") {
      out += ch;
      escaped = true;
    } else if (ch === '"') {
      out += ch;
      inString = false;
    } else if (ch.charCodeAt(0) < 0x80) out += ch;
    else {
      for (let i = 0; i < ch.length; i++) {
        out += "\\u" + ch.charCodeAt(i).toString(16).padStart(4, "0");
      }
    }
  }
  return out;
}

/** An item's attribute (an array's index, digits allowed as a string; an object's key). */
function getAttribute(v: Value, attr: Value, fallback: Value): Value {
  if (attr.kind === "undefined") return fallback;
  if (v.isArray()) {
    let idx: Value = attr;
    if (attr.kind === "string" && /^[0-9]+$/.test(attr.str)) idx = mkInt(parseInt(attr.str, 10));
    if (idx.kind !== "int" && idx.kind !== "bool") return fallback;
    let i = idx.num;
    if (i < 0) i += v.arr.length;
    return i >= 0 && i < v.arr.length ? v.arr[i] : fallback;
  }
  if (v.kind === "object") return v.get(attr) ?? fallback;
  return fallback;
}

function selectattr(reject: boolean): Func {
  return (args) => {
    ensureCount(args, 2, 4);
    ensureVals(args, [isArr, isStr, isStr, isStr], [true, true, false, false]);
    const arr = pos(args, 0).arr;
    const attribute = pos(args, 1);
    const out = mkArray();
    const pick = (selected: boolean, item: Value) => {
      if (selected !== reject) out.arr.push(item);
    };
    if (args.args.length === 2) {
      for (const item of arr) pick(getAttribute(item, attribute, mkUndefined()).asBool(), item);
      return out;
    }
    const testName = args.args.length === 3 ? pos(args, 1).asString() : pos(args, 2).asString();
    const test = GLOBALS.get("test_is_" + testName);
    if (test === undefined) throw raised(`selectattr: unknown test '${testName}'`);
    const extra = args.args.length === 3 ? pos(args, 2) : pos(args, 3);
    for (const item of arr) {
      const subject = args.args.length === 3 ? item : getAttribute(item, attribute, mkUndefined());
      pick(
        test({ args: [subject, extra], name: "test_is_" + testName, ctx: args.ctx }).asBool(),
        item,
      );
    }
    return out;
  };
}

function defaultValue(args: FuncArgs): Value {
  ensureCount(args, 2, 3);
  const checkBool = kwargOrPos(args, "boolean", 2).asBool();
  const v = pos(args, 0);
  const noValue = checkBool ? !v.asBool() : v.kind === "undefined" || v.kind === "none";
  return noValue ? pos(args, 1) : v;
}

function toObject(args: FuncArgs): Value {
  const out = mkObject();
  const iter = posOr(args, 0, mkUndefined());
  let iterFirst = false;
  if (iter.isArray()) {
    iterFirst = true;
    for (const it of iter.arr) {
      if (it.isArray() && it.arr.length === 2) out.set(it.arr[0], it.arr[1]);
      else {
        throw raised(
          `namespace/dict() iterable argument must consist of tuples, not ${it.typeName()}`,
        );
      }
    }
  } else if (iter.kind === "object") {
    iterFirst = true;
    for (const [k, v] of iter.entries()) out.set(k, v);
  }
  for (const a of args.args) {
    if (a.kind === "kwarg") out.set(a.name, a.kwValue!);
    else if (!iterFirst) {
      throw raised(
        `namespace/dict() arguments must be kwargs, dict and/or iterable of tuples, not ${a.typeName()}`,
      );
    }
    iterFirst = false;
  }
  return out;
}

function typeTest(...checks: Check[]): Func {
  return (args) => {
    ensureCount(args, 1);
    return mkBool(checks.some((c) => c(pos(args, 0))));
  };
}

function compareTest(op: "eq" | "ge" | "gt" | "lt" | "ne"): Func {
  return (args) => {
    ensureCount(args, 2, 2);
    return mkBool(compare(pos(args, 0), pos(args, 1), op));
  };
}

function isLowerStr(s: string): boolean {
  return !/[A-Z]/.test(s);
}

/** The global functions and tests. */
export const GLOBALS: ReadonlyMap<string, Func> = new Map<string, Func>([
  ["raise_exception", (args) => {
    ensureVals(args, [isStr]);
    throw raised(`Jinja Exception: ${pos(args, 0).asString()}`);
  }],
  ["dict", toObject],
  ["namespace", toObject],
  ["strftime_now", (args) => {
    ensureVals(args, [isStr]);
    return mkString(strftime(ctxOf(args).now, pos(args, 0).asString()));
  }],
  ["range", (args) => {
    ensureCount(args, 1, 3);
    ensureVals(args, [isInt, isInt, isInt], [true, false, false]);
    const a = args.args.map((v) => v.asInt());
    const [start, stop, step] = a.length === 1
      ? [0, a[0], 1]
      : a.length === 2
      ? [a[0], a[1], 1]
      : a;
    if (step === 0) throw raised("range() step argument must not be zero");
    const out = mkArray();
    if (step > 0) { for (let i = start; i < stop; i += step) out.arr.push(mkInt(i)); }
    else for (let i = start; i > stop; i += step) out.arr.push(mkInt(i));
    return out;
  }],
  ["tojson", tojson],
  ["test_is_boolean", typeTest(isBool)],
  ["test_is_callable", typeTest((v) => v.kind === "func")],
  ["test_is_odd", (args) => {
    ensureVals(args, [isInt]);
    return mkBool(pos(args, 0).num % 2 !== 0);
  }],
  ["test_is_even", (args) => {
    ensureVals(args, [isInt]);
    return mkBool(pos(args, 0).num % 2 === 0);
  }],
  ["test_is_false", (args) => {
    ensureCount(args, 1);
    return mkBool(isBool(pos(args, 0)) && !pos(args, 0).asBool());
  }],
  ["test_is_true", (args) => {
    ensureCount(args, 1);
    return mkBool(isBool(pos(args, 0)) && pos(args, 0).asBool());
  }],
  ["test_is_divisibleby", (args) => {
    ensureVals(args, [isInt, isInt]);
    return mkBool(pos(args, 0).num % pos(args, 1).num === 0);
  }],
  ["test_is_string", typeTest(isStr)],
  ["test_is_integer", typeTest(isInt)],
  ["test_is_float", typeTest(isFloat)],
  ["test_is_number", typeTest(isInt, isFloat)],
  ["test_is_iterable", typeTest(isObj, isArr, isStr, (v) => v.kind === "undefined")],
  ["test_is_sequence", typeTest(isObj, isArr, isStr, (v) => v.kind === "undefined")],
  ["test_is_mapping", typeTest(isObj)],
  ["test_is_lower", (args) => {
    ensureVals(args, [isStr]);
    return mkBool(isLowerStr(pos(args, 0).str));
  }],
  ["test_is_upper", (args) => {
    ensureVals(args, [isStr]);
    return mkBool(!/[a-z]/.test(pos(args, 0).str));
  }],
  ["test_is_none", typeTest((v) => v.kind === "none")],
  ["test_is_defined", (args) => {
    ensureCount(args, 1);
    return mkBool(pos(args, 0).kind !== "undefined");
  }],
  ["test_is_undefined", typeTest((v) => v.kind === "undefined")],
  ["test_is_eq", compareTest("eq")],
  ["test_is_equalto", compareTest("eq")],
  ["test_is_ge", compareTest("ge")],
  ["test_is_gt", compareTest("gt")],
  ["test_is_greaterthan", compareTest("gt")],
  ["test_is_lt", compareTest("lt")],
  ["test_is_lessthan", compareTest("lt")],
  ["test_is_ne", compareTest("ne")],
  ["test_is_in", (args) => {
    ensureCount(args, 2);
    const needle = pos(args, 0);
    const haystack = pos(args, 1);
    if (haystack.kind === "undefined") return mkBool(false);
    if (haystack.isArray()) return mkBool(haystack.arr.some((item) => equals(needle, item)));
    if (haystack.kind === "string") {
      if (needle.kind !== "string") {
        throw raised(
          `'in' test expects args[1] as string when args[0] is string, got args[1] as ${needle.typeName()}`,
        );
      }
      return mkBool(haystack.str.includes(needle.str));
    }
    if (haystack.kind === "object") return mkBool(haystack.hasKey(needle));
    throw raised(`'in' test expects iterable as first argument, got ${haystack.typeName()}`);
  }],
  ["test_is_test", (args) => {
    ensureVals(args, [isStr]);
    return mkBool(GLOBALS.has("test_is_" + pos(args, 0).str));
  }],
  ["test_is_sameas", (args) => {
    ensureCount(args, 2);
    const a = pos(args, 0);
    const b = pos(args, 1);
    if (a.kind === "undefined" || b.kind === "undefined") return mkBool(false);
    if (a.kind === "none" && b.kind === "none") return mkBool(true);
    if (isBool(a) && isBool(b)) return mkBool(a.asBool() === b.asBool());
    if (isInt(a) && isInt(b)) return mkBool(a.num >= -5 && a.num <= 256 && a.num === b.num);
    return mkBool(a === b);
  }],
  ["test_is_escaped", () => {
    throw notImplemented("escaped test not implemented");
  }],
  ["test_is_filter", () => {
    throw notImplemented("filter test not implemented");
  }],
]);

const empty = (make: () => Value): Func => () => make();

const NONE_BUILTINS = new Map<string, Func>([
  ["default", defaultValue],
  ["tojson", tojson],
  ["string", () => mkString("None")],
  ["safe", () => mkString("None")],
  ["items", empty(mkArray)],
  ["map", empty(mkArray)],
  ["reject", empty(mkArray)],
  ["rejectattr", empty(mkArray)],
  ["select", empty(mkArray)],
  ["selectattr", empty(mkArray)],
  ["unique", empty(mkArray)],
]);

const UNDEFINED_BUILTINS = new Map<string, Func>([
  ["default", defaultValue],
  ...[
    "capitalize",
    "join",
    "lower",
    "replace",
    "safe",
    "string",
    "strip",
    "title",
    "truncate",
    "upper",
  ]
    .map((n): [string, Func] => [n, empty(() => mkString(""))]),
  ...["first", "last", "max", "min"].map((n): [string, Func] => [n, empty(() => mkUndefined())]),
  ...[
    "items",
    "list",
    "map",
    "reject",
    "rejectattr",
    "reverse",
    "select",
    "selectattr",
    "sort",
    "unique",
  ]
    .map((n): [string, Func] => [n, empty(mkArray)]),
  ...["length", "sum", "wordcount"].map((n): [string, Func] => [n, empty(() => mkInt(0))]),
]);

const INT_BUILTINS = new Map<string, Func>([
  ["default", defaultValue],
  ["abs", (args) => {
    ensureVals(args, [isInt]);
    return mkInt(Math.abs(pos(args, 0).num));
  }],
  ["int", (args) => {
    ensureVals(args, [isInt]);
    return mkInt(pos(args, 0).num);
  }],
  ["float", (args) => {
    ensureVals(args, [isInt]);
    return mkFloat(pos(args, 0).num);
  }],
  ["safe", tojson],
  ["string", tojson],
  ["tojson", tojson],
]);

const FLOAT_BUILTINS = new Map<string, Func>([
  ["default", defaultValue],
  ["abs", (args) => {
    ensureVals(args, [isFloat]);
    return mkFloat(Math.abs(pos(args, 0).num));
  }],
  ["int", (args) => {
    ensureVals(args, [isFloat]);
    return mkInt(Math.trunc(pos(args, 0).num));
  }],
  ["float", (args) => {
    ensureVals(args, [isFloat]);
    return mkFloat(pos(args, 0).num);
  }],
  ["safe", tojson],
  ["string", tojson],
  ["tojson", tojson],
]);

function stripChars(s: string, left: boolean, right: boolean, chars?: string): string {
  const match = (c: string) => (chars !== undefined ? chars.includes(c) : isSpace(c));
  let start = 0;
  let end = s.length;
  if (left) { while (start < end && match(s[start])) start++; }
  if (right) { while (end > start && match(s[end - 1])) end--; }
  return s.slice(start, end);
}

function stripFilter(left: boolean, right: boolean): Func {
  return (args) => {
    if (left && right) {
      if (pos(args, 0).kind !== "string") throw raised("strip() first argument must be a string");
    } else ensureVals(args, [isStr]);
    const chars = kwargOrPos(args, "chars", 1);
    return mkString(
      stripChars(
        pos(args, 0).str,
        left,
        right,
        chars.kind === "undefined" ? undefined : chars.asString(),
      ),
    );
  };
}

function asciiUpper(s: string): string {
  return s.replace(/[a-z]+/g, (m) => m.toUpperCase());
}

function asciiLower(s: string): string {
  return s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
}

function splitFilter(fromRight: boolean): Func {
  return (args) => {
    ensureCount(args, 1, 3);
    const input = pos(args, 0);
    if (input.kind !== "string") {
      throw raised(`${fromRight ? "rsplit" : "split"}() first argument must be a string`);
    }
    let str = input.str;
    const delim = args.args.length > 1 ? pos(args, 1).asString() : " ";
    if (delim === "") throw raised("empty separator");
    let maxsplit = args.args.length > 2 ? pos(args, 2).asInt() : -1;
    const out: Value[] = [];
    if (!fromRight) {
      let at: number;
      while ((at = str.indexOf(delim)) >= 0 && maxsplit !== 0) {
        out.push(mkString(str.slice(0, at)));
        str = str.slice(at + delim.length);
        --maxsplit;
      }
      out.push(mkString(str));
    } else {
      let at: number;
      while ((at = str.lastIndexOf(delim)) >= 0 && maxsplit !== 0) {
        out.push(mkString(str.slice(at + delim.length)));
        str = str.slice(0, at);
        --maxsplit;
      }
      out.push(mkString(str));
      out.reverse();
    }
    return mkArray(out);
  };
}

const STRING_BUILTINS = new Map<string, Func>([
  ["upper", (args) => {
    ensureVals(args, [isStr]);
    return mkString(asciiUpper(pos(args, 0).str));
  }],
  ["lower", (args) => {
    ensureVals(args, [isStr]);
    return mkString(asciiLower(pos(args, 0).str));
  }],
  ["strip", stripFilter(true, true)],
  ["rstrip", stripFilter(false, true)],
  ["lstrip", stripFilter(true, false)],
  ["title", (args) => {
    ensureVals(args, [isStr]);
    let next = true;
    let out = "";
    for (const c of pos(args, 0).str) {
      if (isSpace(c)) {
        next = true;
        out += c;
      } else if (next) {
        out += asciiUpper(c);
        next = false;
      } else out += asciiLower(c);
    }
    return mkString(out);
  }],
  ["capitalize", (args) => {
    ensureVals(args, [isStr]);
    const s = pos(args, 0).str;
    return mkString(s === "" ? s : asciiUpper(s[0]) + asciiLower(s.slice(1)));
  }],
  ["length", (args) => {
    ensureVals(args, [isStr]);
    return mkInt(pos(args, 0).str.length);
  }],
  ["startswith", (args) => {
    ensureVals(args, [isStr, isStr]);
    return mkBool(pos(args, 0).str.startsWith(pos(args, 1).str));
  }],
  ["endswith", (args) => {
    ensureVals(args, [isStr, isStr]);
    return mkBool(pos(args, 0).str.endsWith(pos(args, 1).str));
  }],
  ["split", splitFilter(false)],
  ["rsplit", splitFilter(true)],
  ["replace", (args) => {
    ensureVals(args, [isStr, isStr, isStr, isInt], [true, true, true, false]);
    let str = pos(args, 0).str;
    const oldStr = pos(args, 1).str;
    const newStr = pos(args, 2).str;
    const count = args.args.length > 3 ? pos(args, 3).asInt() : -1;
    if (count > 0) throw notImplemented("String replace with count argument not implemented");
    if (oldStr !== newStr) {
      str = oldStr === ""
        ? newStr + [...str].map((c) => c + newStr).join("")
        : str.replaceAll(oldStr, newStr);
    }
    return mkString(str);
  }],
  ["format", (args) => {
    const fmt = pos(args, 0);
    if (fmt.kind !== "string") throw raised("format() first argument must be a string");
    let out = "";
    let argIdx = 1;
    const s = fmt.str;
    for (let i = 0; i < s.length; i++) {
      if (s[i] !== "{") {
        out += s[i];
        continue;
      }
      if (i + 1 >= s.length || s[i + 1] !== "}") {
        throw notImplemented("format() only supports simple '{}' placeholders");
      }
      ++i;
      out += pos(args, argIdx++).asString();
    }
    return mkString(out);
  }],
  ["int", (args) => {
    const input = pos(args, 0);
    const fallback = kwargOrPos(args, "default", 1);
    const baseV = kwargOrPos(args, "base", 2);
    const base = baseV.kind === "undefined" ? 10 : baseV.asInt();
    if (base !== 0 && (base < 2 || base > 36)) {
      throw raised("int() base must be 0 or between 2 and 36");
    }
    if (input.kind !== "string") throw raised("int() first argument must be a string");
    const m = /^\s*[+-]?[0-9a-zA-Z]+/.exec(input.str);
    const n = m === null ? NaN : parseInt(m[0], base === 0 ? undefined : base);
    if (Number.isNaN(n)) return mkInt(fallback.kind === "undefined" ? 0 : fallback.asInt());
    return mkInt(n);
  }],
  ["float", (args) => {
    ensureVals(args, [isStr]);
    const fallback = kwargOrPos(args, "default", 1);
    const n = parseFloat(pos(args, 0).str);
    if (Number.isNaN(n)) return mkFloat(fallback.kind === "undefined" ? 0 : fallback.asFloat());
    return mkFloat(n);
  }],
  ["string", (args) => {
    ensureVals(args, [isStr]);
    return mkString(pos(args, 0).str);
  }],
  ["default", (args) => {
    const input = pos(args, 0);
    if (input.kind !== "string") throw raised("default() first argument must be a string");
    let fallback = mkString("");
    if (args.args.length > 1 && pos(args, 1).kind !== "undefined") fallback = pos(args, 1);
    const boolean = kwargOrPos(args, "boolean", 2);
    return boolean.asBool() && !input.asBool() ? fallback : input;
  }],
  ["slice", (args) => {
    ensureCount(args, 1, 4);
    ensureVals(args, [isStr, isInt, isInt, isInt], [true, true, false, false]);
    const [start, stop, step] = sliceArgs(args);
    if (step === 0) throw raised("slice step cannot be zero");
    return mkString(slice([...pos(args, 0).str], start, stop, step).join(""));
  }],
  ["safe", (args) => {
    ensureVals(args, [isStr]);
    return pos(args, 0);
  }],
  ["tojson", tojson],
  ["indent", (args) => {
    ensureCount(args, 1, 4);
    const input = pos(args, 0);
    const width = kwargOrPos(args, "width", 1);
    const first = kwargOrPos(args, "first", 2).asBool();
    const blank = kwargOrPos(args, "blank", 3).asBool();
    if (input.kind !== "string") throw raised("indent() first argument must be a string");
    const pad = width.kind === "int"
      ? " ".repeat(Math.max(0, width.num))
      : width.kind === "string"
      ? width.str
      : "    ";
    const text = input.str;
    const lines = text.split("\n");
    if (text.endsWith("\n")) lines.pop();
    let out = "";
    let started = false;
    for (const line of lines) {
      if (started) out += "\n";
      if (!started ? first : line !== "" || blank) out += pad;
      out += line;
      started = true;
    }
    if (text !== "" && text.endsWith("\n")) {
      out += "\n";
      if (blank) out += pad;
    }
    return mkString(out);
  }],
  ["join", () => {
    throw notImplemented("String join builtin not implemented");
  }],
]);

const BOOL_BUILTINS = new Map<string, Func>([
  ["default", defaultValue],
  ["int", (args) => {
    ensureVals(args, [isBool]);
    return mkInt(pos(args, 0).asBool() ? 1 : 0);
  }],
  ["float", (args) => {
    ensureVals(args, [isBool]);
    return mkFloat(pos(args, 0).asBool() ? 1 : 0);
  }],
  ["safe", (args) => {
    ensureVals(args, [isBool]);
    return mkString(pos(args, 0).asBool() ? "True" : "False");
  }],
  ["string", (args) => {
    ensureVals(args, [isBool]);
    return mkString(pos(args, 0).asBool() ? "True" : "False");
  }],
  ["tojson", tojson],
]);

function sameKind(of: Value, items: Value[]): Value {
  return of.kind === "tuple" ? mkTuple(items) : mkArray(items);
}

function extreme(op: "lt" | "gt"): Func {
  return (args) => {
    ensureCount(args, 1, 4);
    ensureVals(args, [isArr]);
    const attribute = kwargOrPos(args, "attribute", 2);
    const arr = pos(args, 0).arr;
    if (arr.length === 0) return mkUndefined();
    let result = arr[0];
    for (const item of arr) {
      let a = item;
      let b = result;
      if (attribute.kind !== "undefined") {
        a = getAttribute(a, attribute, mkUndefined());
        b = getAttribute(b, attribute, mkUndefined());
      }
      if (compare(a, b, op)) result = item;
    }
    return result;
  };
}

const ARRAY_BUILTINS = new Map<string, Func>([
  ["default", defaultValue],
  ["list", (args) => {
    ensureVals(args, [isArr]);
    return mkArray([...pos(args, 0).arr]);
  }],
  ["first", (args) => {
    ensureVals(args, [isArr]);
    const arr = pos(args, 0).arr;
    return arr.length === 0 ? mkUndefined() : arr[0];
  }],
  ["last", (args) => {
    ensureVals(args, [isArr]);
    const arr = pos(args, 0).arr;
    return arr.length === 0 ? mkUndefined() : arr[arr.length - 1];
  }],
  ["length", (args) => {
    ensureVals(args, [isArr]);
    return mkInt(pos(args, 0).arr.length);
  }],
  ["slice", (args) => {
    ensureCount(args, 1, 4);
    ensureVals(args, [isArr, isInt, isInt, isInt], [true, true, false, false]);
    const [start, stop, step] = sliceArgs(args);
    if (step === 0) throw raised("slice step cannot be zero");
    const v = pos(args, 0);
    return sameKind(v, slice(v.arr, start, stop, step));
  }],
  ["selectattr", selectattr(false)],
  ["select", selectattr(false)],
  ["rejectattr", selectattr(true)],
  ["reject", selectattr(true)],
  ["join", (args) => {
    ensureCount(args, 1, 3);
    if (!pos(args, 0).isArray()) throw raised("join() first argument must be an array");
    const delimV = kwargOrPos(args, "d", 1);
    const attribute = kwargOrPos(args, "attribute", 2);
    const delim = delimV.kind === "undefined" ? "" : delimV.asString();
    const parts = pos(args, 0).arr.map((item) => {
      const v = attribute.kind !== "undefined"
        ? getAttribute(item, attribute, mkUndefined())
        : item;
      if (v.kind !== "string" && v.kind !== "int" && v.kind !== "float") {
        throw raised("join() can only join arrays of strings or numerics");
      }
      return v.asString();
    });
    return mkString(parts.join(delim));
  }],
  ["string", (args) => {
    ensureVals(args, [isArr]);
    if (ctxOf(args).stats) markUsed(pos(args, 0), true);
    return mkString(pos(args, 0).asString());
  }],
  ["tojson", tojson],
  ["map", (args) => {
    ensureCount(args, 2);
    const v = pos(args, 0);
    if (!v.isArray()) throw raised("map: first argument must be an array");
    if (args.args[1].kind !== "kwarg") throw notImplemented("map: filter-mapping not implemented");
    const attribute = kwargOrPos(args, "attribute", 1);
    const fallback = kwarg(args, "default", mkUndefined());
    return sameKind(v, v.arr.map((item) => getAttribute(item, attribute, fallback)));
  }],
  ["append", (args) => {
    ensureCount(args, 2);
    const v = pos(args, 0);
    if (!v.isArray()) throw raised("append: first argument must be an array");
    if (v.kind === "tuple") throw new JinjaError("Attempting to modify immutable type");
    v.arr.push(pos(args, 1));
    return v;
  }],
  ["pop", (args) => {
    ensureCount(args, 1, 2);
    ensureVals(args, [isArr, isInt], [true, false]);
    const v = pos(args, 0);
    if (v.kind === "tuple") throw new JinjaError("Attempting to modify immutable type");
    let index = args.args.length === 2 ? pos(args, 1).asInt() : -1;
    if (index < 0) index += v.arr.length;
    if (index < 0 || index >= v.arr.length) {
      throw new JinjaError(`Index ${index} out of bounds for array of size ${v.arr.length}`);
    }
    return v.arr.splice(index, 1)[0];
  }],
  ["sort", (args) => {
    ensureCount(args, 1, 4);
    const v = pos(args, 0);
    if (!v.isArray()) throw raised("sort: first argument must be an array");
    const reverse = kwargOrPos(args, "reverse", 1).asBool();
    const attribute = kwargOrPos(args, "attribute", 3);
    const key = (x: Value) =>
      attribute.kind === "undefined" ? x : getAttribute(x, attribute, mkUndefined());
    const arr = [...v.arr].sort((a, b) => {
      const [x, y] = [key(a), key(b)];
      if (compare(x, y, reverse ? "gt" : "lt")) return -1;
      if (compare(y, x, reverse ? "gt" : "lt")) return 1;
      return 0;
    });
    return sameKind(v, arr);
  }],
  ["reverse", (args) => {
    ensureVals(args, [isArr]);
    const v = pos(args, 0);
    return sameKind(v, [...v.arr].reverse());
  }],
  ["min", extreme("lt")],
  ["max", extreme("gt")],
  ["unique", () => {
    throw notImplemented("Array unique builtin not implemented");
  }],
]);

const OBJECT_BUILTINS = new Map<string, Func>([
  ["get", (args) => {
    ensureCount(args, 2, 3);
    if (pos(args, 0).kind !== "object") throw raised("get: first argument must be an object");
    if (pos(args, 1).kind !== "string") {
      throw raised("get: second argument must be a string (key)");
    }
    const fallback = args.args.length === 3 ? pos(args, 2) : mkNone();
    return pos(args, 0).get(pos(args, 1)) ?? fallback;
  }],
  ["keys", (args) => {
    ensureVals(args, [isObj]);
    return mkArray(pos(args, 0).entries().map(([k]) => k));
  }],
  ["values", (args) => {
    ensureVals(args, [isObj]);
    return mkArray(pos(args, 0).entries().map(([, v]) => v));
  }],
  ["items", (args) => {
    ensureVals(args, [isObj]);
    return mkArray(pos(args, 0).entries().map(([k, v]) => mkTuple([k, v])));
  }],
  ["tojson", tojson],
  ["string", (args) => {
    ensureVals(args, [isObj]);
    if (ctxOf(args).stats) markUsed(pos(args, 0), true);
    return mkString(pos(args, 0).asString());
  }],
  ["length", (args) => {
    ensureVals(args, [isObj]);
    return mkInt(pos(args, 0).obj.size);
  }],
  ["dictsort", (args) => {
    const input = pos(args, 0);
    const by = kwargOrPos(args, "by", 2);
    const reverse = kwargOrPos(args, "reverse", 3).asBool();
    const byValue = by.kind === "string" && by.str === "value";
    const op = reverse ? "gt" : "lt";
    const entries = input.entries().sort((a, b) => {
      const [x, y] = byValue ? [a[1], b[1]] : [a[0], b[0]];
      if (compare(x, y, op)) return -1;
      if (compare(y, x, op)) return 1;
      return 0;
    });
    return mkObject(entries);
  }],
  ["join", () => {
    throw notImplemented("object join not implemented");
  }],
]);

const NO_BUILTINS = new Map<string, Func>();

/** The methods and filters of `v`'s kind. */
export function builtinsOf(v: Value): ReadonlyMap<string, Func> {
  switch (v.kind) {
    case "int":
      return INT_BUILTINS;
    case "float":
      return FLOAT_BUILTINS;
    case "string":
      return STRING_BUILTINS;
    case "bool":
      return BOOL_BUILTINS;
    case "array":
    case "tuple":
      return ARRAY_BUILTINS;
    case "object":
      return v.hasBuiltins ? OBJECT_BUILTINS : NO_BUILTINS;
    case "none":
      return NONE_BUILTINS;
    case "undefined":
      return UNDEFINED_BUILTINS;
    default:
      throw new JinjaError(`${v.typeName()} has no builtins`);
  }
}
