/**
 * Runs a parsed template as llama.cpp's engine does
 * (`common/jinja/runtime.cpp`): its scoping (a loop, a macro and a call
 * block copy the enclosing variables; `if` does not), its leniency (a loop
 * over undefined runs zero times, `none`/undefined concatenate as "",
 * `x in undefined` is false, a missing attribute is undefined), its output
 * rules (strings, numbers and booleans print, arrays print their items,
 * none, undefined and objects print nothing), its error excerpts, and the
 * usage stats its capability probes read.
 *
 * @example
 * ```ts
 * import { parse } from "./parser.ts";
 * import { Context, render } from "./runtime.ts";
 * import { fromJson } from "./value.ts";
 * const ctx = new Context(parse("{% for m in messages %}{{ m.role }};{% endfor %}{{ none }}").source);
 * ctx.set("messages", fromJson([{ role: "user" }, { role: "assistant" }]));
 * if (render(parse("{% for m in messages %}{{ m.role }};{% endfor %}{{ none }}"), ctx) !== "user;assistant;") throw new Error();
 * ```
 *
 * @module
 */
import type { Node, NodeOf, Program } from "./ast.ts";
import { builtinsOf, GLOBALS } from "./builtins.ts";
import { JinjaError, lineCol, LoopSignal, peakSource } from "./error.ts";
import {
  equals,
  type Func,
  type FuncArgs,
  markUsed,
  mkArray,
  mkBool,
  mkFloat,
  mkFunc,
  mkInt,
  mkKwarg,
  mkNone,
  mkObject,
  mkString,
  mkTuple,
  mkUndefined,
  type Value,
} from "./value.ts";

/**
 * The variables of one scope, the clock, and whether usage is recorded. A
 * scope sees its parent's variables and keeps its own assignments (llama.cpp
 * copies the parent's variables into a new scope; scopes nest strictly and a
 * parent does not change while a child runs, so reading through is the same).
 */
export class Context {
  readonly #vars = new Map<string, Value>();
  readonly #parent?: Context;
  now: Date = new Date();
  stats = false;

  /** A root context over `source` (for error excerpts), or a scope inside `parent`. */
  constructor(readonly source: string, parent?: Context) {
    this.#parent = parent;
    if (parent === undefined) {
      for (const name of ["true", "True"]) this.#vars.set(name, mkBool(true));
      for (const name of ["false", "False"]) this.#vars.set(name, mkBool(false));
      for (const name of ["none", "None"]) this.#vars.set(name, mkNone());
    } else {
      this.now = parent.now;
      this.stats = parent.stats;
    }
  }

  /** A variable, or undefined (hinted with its name). */
  get(name: string): Value {
    return this.#vars.get(name) ?? this.#parent?.get(name) ?? mkUndefined(name);
  }

  set(name: string, value: Value): void {
    this.#vars.set(name, value);
  }
}

/** Renders `program` in `ctx`: the text it outputs. Throws {@linkcode JinjaError}. */
export function render(program: Program, ctx: Context): string {
  return gather(mkArray(program.body.map((node) => exec(node, ctx))));
}

/** The text a value prints as statement output (concatenated, so V8 keeps it a rope until used). */
function gather(v: Value): string {
  if (v.kind === "string") return v.str;
  if (v.kind === "int" || v.kind === "float" || v.kind === "bool") return v.asString();
  let out = "";
  if (v.isArray()) { for (const item of v.arr) out += gather(item); }
  return out;
}

function execStatements(nodes: Node[], ctx: Context): Value {
  return mkString(gather(mkArray(nodes.map((node) => exec(node, ctx)))));
}

/** Executes `node`, wrapping an error in llama.cpp's source excerpt (once). */
function exec(node: Node, ctx: Context): Value {
  try {
    return execImpl(node, ctx);
  } catch (error) {
    if (error instanceof LoopSignal) throw error;
    if (error instanceof JinjaError && (error.rethrown || error.notImplemented)) throw error;
    const what = error instanceof Error ? error.message : String(error);
    const message = ctx.source === ""
      ? `\nError executing ${node.type} at position ${node.pos}: ${what}`
      : `\n------------\nWhile executing ${node.type} at ${
        lineCol(ctx.source, node.pos)
      } in source:\n${peakSource(ctx.source, node.pos)}\nError: ${what}`;
    const wrapped = new JinjaError(
      message,
      error instanceof JinjaError ? error.reason : what,
      error instanceof JinjaError && error.raised,
    );
    wrapped.rethrown = true;
    throw wrapped;
  }
}

function invoke(fn: Value, args: Value[], ctx: Context): Value {
  if (fn.kind !== "func") throw new JinjaError(`${fn.typeName()} is not a function value`);
  const all = fn.self !== undefined ? [fn.self, ...args] : [...args];
  return fn.func!({ args: all, name: fn.name, ctx });
}

function tryBuiltin(ctx: Context, name: string, input: Value, undefOnMissing = false): Value {
  if (ctx.stats) {
    markUsed(input);
    input.stats.ops.add(name);
  }
  const fn = builtinsOf(input).get(name);
  if (fn !== undefined) return mkFunc(name, fn, input);
  if (undefOnMissing) return mkUndefined(name);
  throw new JinjaError(`Unknown (built-in) filter '${name}' for type ${input.typeName()}`);
}

const FILTER_ALIASES: Record<string, string> = {
  count: "length",
  d: "default",
  e: "escape",
  trim: "strip",
};

const STRING_FILTERS = new Set([
  "capitalize",
  "lower",
  "replace",
  "strip",
  "title",
  "upper",
  "wordcount",
]);

function applyFilter(ctx: Context, filter: Node, input: Value): Value {
  let id: string;
  let args: Value[] = [];
  if (filter.type === "Identifier") id = filter.value;
  else if (filter.type === "CallExpression") {
    if (filter.callee.type !== "Identifier") {
      throw new JinjaError("Filter callee must be an identifier");
    }
    id = filter.callee.value;
  } else throw new JinjaError("Invalid filter expression");
  id = FILTER_ALIASES[id] ?? id;
  if (filter.type === "Identifier") {
    if (input.kind !== "undefined" && input.kind !== "string" && STRING_FILTERS.has(id)) {
      input = mkString(input.asString());
    }
  } else args = (filter as NodeOf<"CallExpression">).args.map((a) => exec(a, ctx));
  return invoke(tryBuiltin(ctx, id, input), args, ctx);
}

function bindParameters(name: string, params: Node[], args: FuncArgs, ctx: Context): void {
  const callerCtx = args.ctx as Context;
  const kwarg = (key: string) => {
    for (const a of args.args) if (a.kind === "kwarg" && a.name === key) return a.kwValue!;
    return undefined;
  };
  const kwargOrPos = (key: string, i: number): Value => {
    const v = kwarg(key);
    if (v !== undefined) return v;
    if (i < args.args.length && args.args[i].kind !== "kwarg") return args.args[i];
    return mkUndefined();
  };
  params.forEach((param, i) => {
    if (i < args.args.length) {
      if (param.type === "Identifier") ctx.set(param.value, kwargOrPos(param.value, i));
      else if (param.type === "KeywordArgumentExpression") {
        if (param.key.type !== "Identifier") {
          throw new JinjaError(`Keyword argument key must be an identifier in '${name}'`);
        }
        ctx.set(param.key.value, kwargOrPos(param.key.value, i));
      } else throw new JinjaError(`Invalid parameter type in '${name}'`);
    } else if (param.type === "KeywordArgumentExpression") {
      if (param.key.type !== "Identifier") {
        throw new JinjaError(`Keyword argument key must be an identifier in '${name}'`);
      }
      ctx.set(param.key.value, exec(param.value, callerCtx));
    } else throw new JinjaError(`Not enough arguments provided to '${name}'`);
  });
}

function concatNull(left: Value, right: Value): Value | undefined {
  const leftNull = left.kind === "none" || left.kind === "undefined";
  const rightNull = right.kind === "none" || right.kind === "undefined";
  if ((leftNull && right.kind === "string") || (rightNull && left.kind === "string")) {
    return mkString((leftNull ? "" : left.asString()) + (rightNull ? "" : right.asString()));
  }
  return undefined;
}

function testIn(left: Value, right: Value, ctx: Context): boolean {
  return GLOBALS.get("test_is_in")!({ args: [left, right], name: "test_is_in", ctx }).asBool();
}

function binary(node: NodeOf<"BinaryExpression">, ctx: Context): Value {
  const op = node.op.value;
  const left = exec(node.left, ctx);
  if (op === "and") return left.asBool() ? exec(node.right, ctx) : left;
  if (op === "or") return left.asBool() ? left : exec(node.right, ctx);
  const right = exec(node.right, ctx);
  if (op === "==") return mkBool(equals(left, right));
  if (op === "!=") return mkBool(!equals(left, right));
  const membership = op === "in" || op === "not in";

  if (left.kind === "undefined" || right.kind === "undefined") {
    if (right.kind === "undefined" && membership) return mkBool(op === "not in");
    if (op === "+" || op === "~") {
      const res = concatNull(left, right);
      if (res !== undefined) return res;
    }
    throw new JinjaError(`Cannot perform operation ${op} on undefined values`);
  }
  if (left.kind === "none" || right.kind === "none") {
    if (right.kind !== "none" && membership) {
      const member = testIn(left, right, ctx);
      return mkBool(op === "in" ? member : !member);
    }
    if (op === "+" || op === "~") {
      const res = concatNull(left, right);
      if (res !== undefined) return res;
    }
    throw new JinjaError("Cannot perform operation on null values");
  }
  const num = (v: Value) => v.kind === "int" || v.kind === "float";
  if (num(left) && num(right)) {
    const a = left.asFloat();
    const b = right.asFloat();
    const isFloat = left.kind === "float" || right.kind === "float";
    switch (op) {
      case "+":
      case "-":
      case "*": {
        const res = op === "+" ? a + b : op === "-" ? a - b : a * b;
        return isFloat ? mkFloat(res) : mkInt(res);
      }
      case "/":
        return mkFloat(a / b);
      case "%": {
        const rem = a % b;
        return isFloat ? mkFloat(rem) : mkInt(Number.isNaN(rem) ? 0 : rem);
      }
      case "<":
        return mkBool(a < b);
      case ">":
        return mkBool(a > b);
      case ">=":
        return mkBool(a >= b);
      case "<=":
        return mkBool(a <= b);
    }
  }
  if (left.isArray() && right.isArray()) {
    if (op === "+") return mkArray([...left.arr, ...right.arr]);
  } else if (right.isArray()) {
    const member = testIn(left, right, ctx);
    if (op === "in") return mkBool(member);
    if (op === "not in") return mkBool(!member);
  }
  if ((left.kind === "string" || right.kind === "string") && (op === "~" || op === "+")) {
    return mkString(left.asString() + right.asString());
  }
  if (
    op === "*" &&
    ((left.kind === "string" && right.kind === "int") ||
      (left.kind === "int" && right.kind === "string"))
  ) {
    const str = left.kind === "string" ? left.str : right.str;
    const times = left.kind === "int" ? left.num : right.num;
    return mkString(times <= 0 ? "" : str.repeat(times));
  }
  if (left.kind === "string" && right.kind === "string") {
    const member = testIn(left, right, ctx);
    if (op === "in") return mkBool(member);
    if (op === "not in") return mkBool(!member);
  }
  if (right.kind === "object") {
    const member = testIn(left, right, ctx);
    if (op === "in") return mkBool(member);
    if (op === "not in") return mkBool(!member);
  }
  throw new JinjaError(
    `Unknown operator "${op}" between ${left.typeName()} and ${right.typeName()}`,
  );
}

function member(node: NodeOf<"MemberExpression">, ctx: Context): Value {
  const object = exec(node.object, ctx);
  let property: Value;
  if (node.computed) {
    const size = object.isArray()
      ? object.arr.length
      : object.kind === "string"
      ? object.str.length
      : 0;
    if (node.property.type === "SliceExpression") {
      const s = node.property;
      const step = s.step ? exec(s.step, ctx) : mkInt(1);
      const start = s.start ? exec(s.start, ctx) : mkInt(step.asInt() < 0 ? size - 1 : 0);
      const stop = s.stop ? exec(s.stop, ctx) : mkInt(step.asInt() < 0 ? -1 : size);
      return invoke(tryBuiltin(ctx, "slice", object), [start, stop, step], ctx);
    }
    property = exec(node.property, ctx);
  } else if (node.property.type === "IntegerLiteral") {
    property = mkInt(node.property.value);
    if (property.num < 0) throw new JinjaError("Static member property cannot be negative");
  } else {
    if (node.property.type !== "Identifier") {
      throw new JinjaError("Static member property must be an identifier");
    }
    property = mkString(node.property.value);
    const fn = tryBuiltin(ctx, node.property.value, object, true);
    if (fn.kind !== "undefined") return fn;
  }

  let val = mkUndefined("object_property");
  if (property.kind === "undefined") return val;
  if (!property.isHashable()) {
    throw new JinjaError(`Type: ${property.typeName()} is not allowed as object key`);
  }
  if (object.kind === "undefined") return val;
  if (object.kind === "object") {
    const found = object.get(property);
    val = found ?? tryBuiltin(ctx, property.asString(), object, true);
  } else if (object.isArray() || object.kind === "string") {
    if (property.kind === "int" || property.kind === "bool") {
      let index = property.asInt();
      if (object.isArray()) {
        if (index < 0) index += object.arr.length;
        if (index >= 0 && index < object.arr.length) val = object.arr[index];
      } else if (index >= 0 && index < object.str.length) {
        val = mkString(object.str[index]);
      }
    } else if (property.kind === "string") {
      val = tryBuiltin(ctx, property.str, object, true);
    }
  } else {
    if (property.kind !== "string") {
      throw new JinjaError(`Cannot access property with non-string: got ${property.typeName()}`);
    }
    val = tryBuiltin(ctx, property.str, object, true);
  }
  if (ctx.stats) {
    markUsed(val);
    markUsed(object);
    markUsed(property);
    if (
      object.kind === "object" || property.kind === "string" || property.kind === "float" ||
      property.isArray() || property.kind === "none"
    ) {
      object.stats.ops.add("object_access");
    } else if (property.kind === "int" || property.kind === "bool") {
      object.stats.ops.add("array_access");
    }
  }
  return val;
}

function forLoop(node: NodeOf<"For">, ctx: Context): Value {
  const scope = new Context(ctx.source, ctx);
  const select = node.iterable.type === "SelectExpression" ? node.iterable : undefined;
  const iterExpr = select ? select.lhs : node.iterable;
  let iterable = exec(iterExpr, scope);
  if (ctx.stats) {
    markUsed(iterable);
    iterable.stats.ops.add("array_access");
  }
  if (iterable.kind === "undefined") iterable = mkArray();
  if (!iterable.isArray() && iterable.kind !== "object") {
    throw new JinjaError(
      `Expected iterable or object type in for loop: got ${iterable.typeName()}`,
    );
  }
  const isObject = iterable.kind === "object";
  const items: Value[] = isObject
    ? iterable.entries().map(([k, v]) => mkTuple([k, v]))
    : [...iterable.arr];
  if (ctx.stats) {
    markUsed(iterable);
    iterable.stats.ops.add(isObject ? "object_access" : "array_access");
  }
  const loopvar = node.loopvar;
  const updates: ((c: Context) => void)[] = [];
  const filtered: Value[] = [];
  items.forEach((item, i) => {
    let current = item;
    let update: (c: Context) => void;
    if (loopvar.type === "Identifier") {
      if (isObject) {
        current = item.arr[0];
        update = (c) => c.set(loopvar.value, items[i].arr[0]);
      } else update = (c) => c.set(loopvar.value, items[i]);
    } else if (loopvar.type === "TupleLiteral") {
      if (!current.isArray()) {
        throw new JinjaError(`Cannot unpack non-iterable type: ${current.typeName()}`);
      }
      if (loopvar.value.length !== current.arr.length) {
        throw new JinjaError(
          `Too ${loopvar.value.length > current.arr.length ? "few" : "many"} items to unpack`,
        );
      }
      update = (c) => {
        loopvar.value.forEach((target, j) => {
          if (target.type !== "Identifier") {
            throw new JinjaError(`Cannot unpack non-identifier type: ${target.type}`);
          }
          c.set(target.value, items[i].arr[j]);
        });
      };
    } else throw new JinjaError(`Invalid loop variable(s): ${loopvar.type}`);
    if (select) {
      const loopScope = new Context(ctx.source, scope);
      update(loopScope);
      if (!exec(select.test, loopScope).asBool()) return;
    }
    filtered.push(current);
    updates.push(update);
  });

  const result = mkArray();
  let noIteration = true;
  const n = filtered.length;
  for (let i = 0; i < n; i++) {
    const loop = mkObject([
      ["index", mkInt(i + 1)],
      ["index0", mkInt(i)],
      ["revindex", mkInt(n - i)],
      ["revindex0", mkInt(n - i - 1)],
      ["first", mkBool(i === 0)],
      ["last", mkBool(i === n - 1)],
      ["length", mkInt(n)],
      ["previtem", i > 0 ? filtered[i - 1] : mkUndefined("previtem")],
      ["nextitem", i < n - 1 ? filtered[i + 1] : mkUndefined("nextitem")],
    ]);
    loop.hasBuiltins = false;
    scope.set("loop", loop);
    updates[i](scope);
    try {
      for (const stmt of node.body) result.arr.push(exec(stmt, scope));
    } catch (error) {
      if (error instanceof LoopSignal) {
        if (error.kind === "continue") continue;
        break;
      }
      throw error;
    }
    noIteration = false;
  }
  if (noIteration) { for (const stmt of node.defaultBlock) result.arr.push(exec(stmt, ctx)); }
  return mkString(gather(result));
}

function setStatement(node: NodeOf<"Set">, ctx: Context): Value {
  const rhs = node.value ? exec(node.value, ctx) : execStatements(node.body, ctx);
  const target = node.assignee;
  if (target.type === "Identifier") ctx.set(target.value, rhs);
  else if (target.type === "TupleLiteral") {
    if (!rhs.isArray()) {
      throw new JinjaError(`Cannot unpack non-iterable type in set: ${rhs.typeName()}`);
    }
    if (rhs.arr.length !== target.value.length) {
      throw new JinjaError(
        `Too ${target.value.length > rhs.arr.length ? "few" : "many"} items to unpack in set`,
      );
    }
    target.value.forEach((elem, i) => {
      if (elem.type !== "Identifier") {
        throw new JinjaError(`Cannot unpack to non-identifier in set: ${elem.type}`);
      }
      ctx.set(elem.value, rhs.arr[i]);
    });
  } else if (target.type === "MemberExpression") {
    if (target.computed) throw new JinjaError("Cannot assign to computed member");
    if (target.property.type !== "Identifier") {
      throw new JinjaError("Cannot assign to member with non-identifier property");
    }
    const object = exec(target.object, ctx);
    if (object.kind !== "object") throw new JinjaError("Cannot assign to member of non-object");
    object.set(target.property.value, rhs);
  } else throw new JinjaError(`Invalid LHS inside assignment expression: ${target.type}`);
  return mkUndefined();
}

function execImpl(node: Node, ctx: Context): Value {
  switch (node.type) {
    case "Program":
      throw new JinjaError("Cannot execute program directly, use jinja::runtime instead");
    case "Comment":
    case "Noop":
    case "BlankExpression":
      return mkUndefined();
    case "Break":
      throw new LoopSignal("break");
    case "Continue":
      throw new LoopSignal("continue");
    case "StringLiteral":
      return mkString(node.value);
    case "IntegerLiteral":
      return mkInt(node.value);
    case "FloatLiteral":
      return mkFloat(node.value);
    case "ArrayLiteral":
      return mkArray(node.value.map((item) => exec(item, ctx)));
    case "TupleLiteral":
      return mkTuple(node.value.map((item) => exec(item, ctx)));
    case "ObjectLiteral": {
      const obj = mkObject();
      for (const [k, v] of node.value) {
        const key = exec(k, ctx);
        obj.set(key, exec(v, ctx));
      }
      return obj;
    }
    case "Identifier": {
      const value = ctx.get(node.value);
      if (value.kind !== "undefined") {
        if (ctx.stats) markUsed(value);
        return value;
      }
      const builtin = GLOBALS.get(node.value);
      if (builtin !== undefined) return mkFunc(node.value, builtin);
      return mkUndefined(node.value);
    }
    case "If": {
      const test = exec(node.test, ctx);
      const branch = test.asBool() ? node.body : node.alternate;
      return mkString(gather(mkArray(branch.map((stmt) => exec(stmt, ctx)))));
    }
    case "For":
      return forLoop(node, ctx);
    case "Set":
      return setStatement(node, ctx);
    case "Macro": {
      if (node.name.type !== "Identifier") throw new JinjaError("Macro name must be an identifier");
      const name = node.name.value;
      const fn: Func = (args) => {
        const macroCtx = new Context(ctx.source, args.ctx as Context);
        bindParameters(name, node.args, args, macroCtx);
        return execStatements(node.body, macroCtx);
      };
      ctx.set(name, mkFunc(name, fn));
      return mkUndefined();
    }
    case "CallStatement": {
      const call = node.call as NodeOf<"CallExpression">;
      const callee = exec(call.callee, ctx);
      if (callee.kind !== "func") {
        throw new JinjaError(`Callee is not a function: got ${callee.typeName()}`);
      }
      const callerCtx = new Context(ctx.source, ctx);
      const caller: Func = (args) => {
        const blockCtx = new Context(ctx.source, callerCtx);
        bindParameters("caller", node.callerArgs, args, blockCtx);
        return execStatements(node.body, blockCtx);
      };
      const callCtx = new Context(ctx.source, ctx);
      callCtx.set("caller", mkFunc("caller", caller));
      const args = call.args.map((a) => exec(a, ctx));
      return invoke(callee, args, callCtx);
    }
    case "FilterStatement":
      return applyFilter(ctx, node.filter, execStatements(node.body, ctx));
    case "FilterExpression":
      return applyFilter(ctx, node.filter, exec(node.operand, ctx));
    case "TestExpression": {
      const input = exec(node.operand, ctx);
      const args = [input];
      let id: string;
      if (node.test.type === "Identifier") id = node.test.value;
      else if (node.test.type === "CallExpression") {
        if (node.test.callee.type !== "Identifier") {
          throw new JinjaError("Test callee must be an identifier");
        }
        id = node.test.callee.value;
        for (const a of node.test.args) args.push(exec(a, ctx));
      } else throw new JinjaError("Invalid test expression");
      const name = "test_is_" + id;
      const test = GLOBALS.get(name);
      if (test === undefined) throw new JinjaError(`Unknown test '${id}'`);
      if (ctx.stats) {
        markUsed(input);
        input.stats.ops.add(name);
      }
      const res = test({ args, name, ctx });
      return node.negate ? mkBool(!res.asBool()) : res;
    }
    case "UnaryExpression": {
      const v = exec(node.argument, ctx);
      switch (node.op.value) {
        case "not":
          return mkBool(!v.asBool());
        case "-":
          if (v.kind === "int") return mkInt(-v.num);
          if (v.kind === "float") return mkFloat(-v.num);
          throw new JinjaError("Unary - operator requires numeric operand");
        case "+":
          if (v.kind === "int" || v.kind === "float") return v;
          throw new JinjaError("Unary + operator requires numeric operand");
      }
      throw new JinjaError(`Unknown unary operator '${node.op.value}'`);
    }
    case "BinaryExpression":
      return binary(node, ctx);
    case "MemberExpression":
      return member(node, ctx);
    case "CallExpression": {
      const args = node.args.map((a) => exec(a, ctx));
      const callee = exec(node.callee, ctx);
      if (callee.kind !== "func") {
        throw new JinjaError(`Callee is not a function: got ${callee.typeName()}`);
      }
      return invoke(callee, args, ctx);
    }
    case "KeywordArgumentExpression": {
      if (node.key.type !== "Identifier") {
        throw new JinjaError("Keyword argument key must be identifiers");
      }
      return mkKwarg(node.key.value, exec(node.value, ctx));
    }
    case "SelectExpression":
      if (!execImpl(node.test, ctx).asBool()) return mkUndefined();
      return execImpl(node.lhs, ctx);
    case "Ternary":
      return exec(node.condition, ctx).asBool()
        ? exec(node.trueExpr, ctx)
        : exec(node.falseExpr, ctx);
    case "SliceExpression":
      throw new JinjaError("must be handled by MemberExpression");
    case "SpreadExpression":
      throw new JinjaError("cannot exec SpreadExpression");
  }
}
