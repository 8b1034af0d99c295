/**
 * GBNF, llama.cpp's grammar format (`grammars/README.md` of llama.cpp), parsed
 * into the flat rule table the matcher runs. The parser follows llama.cpp's
 * `llama_grammar_parser` (src/llama-grammar.cpp) step for step, so a grammar
 * means here what it means there: the same rewriting of `* + ? {m,n}` into
 * helper rules, the same escapes, the same left-recursion check. Where
 * llama.cpp quietly loosens a grammar (a bound above 2000 becomes unbounded)
 * this parser refuses it instead: a constraint is never silently dropped.
 *
 * Errors are {@linkcode GrammarError}s that name the line and column.
 *
 * @example
 * ```ts
 * import { parseGbnf } from "./gbnf.ts";
 * const g = parseGbnf(`root ::= "yes" | "no"`);
 * console.log(g.ruleNames[g.root]); // "root"
 * ```
 *
 * @module
 */

/** Element kinds, llama.cpp's `llama_gretype` values. */
export const enum El {
  /** End of a rule. */
  END = 0,
  /** Start of another alternative of the rule. */
  ALT = 1,
  /** A reference to rule `value`. */
  RULE_REF = 2,
  /** A character class starting with code point `value`. */
  CHAR = 3,
  /** A negated character class starting with `value`. */
  CHAR_NOT = 4,
  /** Makes the preceding char the lower end of a range up to `value`. */
  CHAR_RNG_UPPER = 5,
  /** Another code point `value` in the same class. */
  CHAR_ALT = 6,
  /** Any character (`.`). */
  CHAR_ANY = 7,
  /** The token with id `value` (`<[id]>` or `<text>`). */
  TOKEN = 8,
  /** Any token but `value` (`!<[id]>`). */
  TOKEN_NOT = 9,
}

/** llama.cpp's bound on expanded repetitions (`MAX_REPETITION_THRESHOLD`). */
export const MAX_REPETITION = 2000;
/** Longest grammar text accepted, in code points. */
export const MAX_GRAMMAR_CHARS = 1 << 20;
/** Most elements in all rules together (after repetitions are expanded). */
export const MAX_GRAMMAR_ELEMENTS = 1 << 20;
/** Deepest nesting of parentheses. */
export const MAX_NESTING = 256;

/** A grammar that cannot be parsed or used; `line` and `column` are 1-based (0 when not about a place). */
export class GrammarError extends Error {
  constructor(message: string, readonly line = 0, readonly column = 0) {
    super(
      line > 0 ? `grammar: ${message} at line ${line}, column ${column}` : `grammar: ${message}`,
    );
    this.name = "GrammarError";
  }
}

/** A parsed grammar: every rule's elements in one flat table. */
export interface Grammar {
  /** Element kinds, rule after rule; each rule ends with `END`. */
  readonly types: Uint8Array;
  /** Element values (code point, rule id or token id). */
  readonly values: Uint32Array;
  /** Where each rule starts in `types`/`values`. */
  readonly ruleStart: Int32Array;
  /** Each rule's name (helper rules get llama.cpp's `name_N`). */
  readonly ruleNames: readonly string[];
  /** The start rule's id. */
  readonly root: number;
}

/** Turns `<text>` in a grammar into one token id (throws when it is not exactly one token). */
export type TokenLookup = (text: string) => number;

interface Element {
  type: El;
  value: number;
}

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isWordChar = (c: number) =>
  (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x2d || isDigit(c);
const isEndOfSequence = (t: El) => t === El.END || t === El.ALT;

class Parser {
  readonly #cps: Uint32Array;
  readonly #lineStarts: number[] = [0];
  readonly symbols = new Map<string, number>();
  readonly rules: Element[][] = [];
  #elements = 0;
  #depth = 0;

  constructor(text: string, readonly lookup: TokenLookup | undefined) {
    const cps: number[] = [];
    for (let i = 0; i < text.length; i++) {
      const c = text.codePointAt(i)!;
      if (c > 0xffff) i++;
      else if (c >= 0xd800 && c <= 0xdfff) throw this.error("a lone surrogate", cps.length);
      if (c === 0) throw this.error("a NUL character", cps.length);
      if (cps.length >= MAX_GRAMMAR_CHARS) {
        throw new GrammarError(`the text is longer than ${MAX_GRAMMAR_CHARS} characters`);
      }
      if (c === 0x0a) this.#lineStarts.push(cps.length + 1);
      cps.push(c);
    }
    this.#cps = Uint32Array.from(cps);
  }

  /** The code point at `i`, 0 past the end (llama.cpp reads a C string). */
  at(i: number): number {
    return i < this.#cps.length ? this.#cps[i] : 0;
  }

  error(what: string, i: number): GrammarError {
    let line = this.#lineStarts.length - 1;
    while (line > 0 && this.#lineStarts[line] > i) line--;
    return new GrammarError(what, line + 1, i - this.#lineStarts[line] + 1);
  }

  symbolId(name: string): number {
    let id = this.symbols.get(name);
    if (id === undefined) {
      id = this.symbols.size;
      this.symbols.set(name, id);
    }
    return id;
  }

  generateSymbolId(base: string): number {
    const id = this.symbols.size;
    this.symbols.set(`${base}_${id}`, id);
    return id;
  }

  addRule(id: number, rule: Element[]): void {
    this.#elements += rule.length;
    if (this.#elements > MAX_GRAMMAR_ELEMENTS) {
      throw new GrammarError(`the grammar expands to more than ${MAX_GRAMMAR_ELEMENTS} elements`);
    }
    while (this.rules.length <= id) this.rules.push([]);
    this.rules[id] = rule;
  }

  space(i: number, newlineOk: boolean): number {
    for (;;) {
      const c = this.at(i);
      if (c === 0x23) { // '#': a comment to the end of the line
        while (this.at(i) !== 0 && this.at(i) !== 0x0d && this.at(i) !== 0x0a) i++;
      } else if (c === 0x20 || c === 0x09 || (newlineOk && (c === 0x0d || c === 0x0a))) {
        i++;
      } else {
        return i;
      }
    }
  }

  name(i: number): number {
    const start = i;
    while (isWordChar(this.at(i))) i++;
    if (i === start) throw this.error("expecting a name", start);
    return i;
  }

  int(i: number): number {
    const start = i;
    while (isDigit(this.at(i))) i++;
    if (i === start) throw this.error("expecting an integer", start);
    return i;
  }

  text(from: number, to: number): string {
    return String.fromCodePoint(...this.#cps.subarray(from, to));
  }

  hex(i: number, size: number): [number, number] {
    let value = 0;
    for (let k = 0; k < size; k++) {
      const c = this.at(i + k);
      const d = c >= 0x30 && c <= 0x39
        ? c - 0x30
        : c >= 0x61 && c <= 0x66
        ? c - 0x61 + 10
        : c >= 0x41 && c <= 0x46
        ? c - 0x41 + 10
        : -1;
      if (d < 0) throw this.error(`expecting ${size} hex digits`, i);
      value = value * 16 + d;
    }
    return [value, i + size];
  }

  char(i: number): [number, number] {
    const c = this.at(i);
    if (c === 0x5c) { // '\\'
      const e = this.at(i + 1);
      switch (e) {
        case 0x78: // x
          return this.hex(i + 2, 2);
        case 0x75: // u
          return this.hex(i + 2, 4);
        case 0x55: { // U
          const [v, next] = this.hex(i + 2, 8);
          if (v > 0x10ffff) throw this.error(`\\U${v.toString(16)} is not a code point`, i);
          return [v, next];
        }
        case 0x74:
          return [0x09, i + 2];
        case 0x72:
          return [0x0d, i + 2];
        case 0x6e:
          return [0x0a, i + 2];
        case 0x5c:
        case 0x22:
        case 0x5b:
        case 0x5d:
        case 0x2d:
          return [e, i + 2];
        default:
          throw this.error("unknown escape", i);
      }
    }
    if (c !== 0) return [c, i + 1];
    throw this.error("unexpected end of input", i);
  }

  token(i: number): [number, number] {
    const start = i;
    if (this.at(i) !== 0x3c) throw this.error("expecting '<'", i);
    i++;
    if (this.at(i) === 0x5b) { // <[id]>
      i++;
      const end = this.int(i);
      const id = Number(this.text(i, end));
      if (id > 0xffffffff) throw this.error("token id is too big", i);
      i = end;
      if (this.at(i) !== 0x5d) throw this.error("expecting ']'", i);
      i++;
      if (this.at(i) !== 0x3e) throw this.error("expecting '>'", i);
      return [id, i + 1];
    }
    while (this.at(i) !== 0 && this.at(i) !== 0x3e) i++;
    if (this.at(i) !== 0x3e) throw this.error("expecting '>'", i);
    i++;
    if (this.lookup === undefined) throw this.error("a token by text needs a vocabulary", start);
    const text = this.text(start, i);
    try {
      return [this.lookup(text), i];
    } catch (e) {
      throw this.error(`invalid token '${text}': ${(e as Error).message}`, start);
    }
  }

  alternates(i: number, ruleName: string, ruleId: number, nested: boolean): number {
    const rule: Element[] = [];
    i = this.sequence(i, ruleName, rule, nested);
    while (this.at(i) === 0x7c) { // '|'
      rule.push({ type: El.ALT, value: 0 });
      i = this.space(i + 1, true);
      i = this.sequence(i, ruleName, rule, nested);
    }
    rule.push({ type: El.END, value: 0 });
    this.addRule(ruleId, rule);
    return i;
  }

  sequence(i: number, ruleName: string, rule: Element[], nested: boolean): number {
    let lastSymStart = rule.length;
    let prevRules = 1;

    // S{m,n} --> S S S (m times) S'(n-m); S'(x) ::= S S'(x-1) |; S'(1) ::= S |
    // S{m,}  --> S S S (m times) S';      S' ::= S S' |
    const repeat = (at: number, min: number, max: number): void => {
      const noMax = max === Infinity;
      if (lastSymStart === rule.length) throw this.error("expecting an item before */+/?/{", at);
      const prev = rule.slice(lastSymStart);
      const total = !noMax && max > 0 ? max : min > 0 ? min : 1;
      if (prevRules * total > MAX_REPETITION) {
        throw this.error(
          `the repetition expands to more than ${MAX_REPETITION} rules (llama.cpp's limit)`,
          at,
        );
      }
      if (min === 0) rule.length = lastSymStart;
      else for (let k = 1; k < min; k++) rule.push(...prev);
      let lastRecId = 0;
      const optional = noMax ? 1 : max - min;
      for (let k = 0; k < optional; k++) {
        const rec = prev.slice();
        const recId = this.generateSymbolId(ruleName);
        if (k > 0 || noMax) rec.push({ type: El.RULE_REF, value: noMax ? recId : lastRecId });
        rec.push({ type: El.ALT, value: 0 }, { type: El.END, value: 0 });
        this.addRule(recId, rec);
        lastRecId = recId;
      }
      if (optional > 0) rule.push({ type: El.RULE_REF, value: lastRecId });
      prevRules *= total;
    };

    for (;;) {
      const c = this.at(i);
      if (c === 0) break;
      if (c === 0x22) { // '"': a literal
        i++;
        lastSymStart = rule.length;
        prevRules = 1;
        while (this.at(i) !== 0x22) {
          if (this.at(i) === 0) throw this.error("unexpected end of input in a string", i);
          const [ch, next] = this.char(i);
          i = next;
          rule.push({ type: El.CHAR, value: ch });
        }
        i = this.space(i + 1, nested);
      } else if (c === 0x5b) { // '[': a character class
        i++;
        let startType = El.CHAR;
        if (this.at(i) === 0x5e) {
          i++;
          startType = El.CHAR_NOT;
        }
        lastSymStart = rule.length;
        prevRules = 1;
        while (this.at(i) !== 0x5d) {
          if (this.at(i) === 0) throw this.error("unexpected end of input in a character class", i);
          const [ch, next] = this.char(i);
          i = next;
          rule.push({ type: lastSymStart < rule.length ? El.CHAR_ALT : startType, value: ch });
          if (this.at(i) === 0x2d && this.at(i + 1) !== 0x5d) {
            if (this.at(i + 1) === 0) throw this.error("unexpected end of input in a range", i);
            const [upper, after] = this.char(i + 1);
            i = after;
            rule.push({ type: El.CHAR_RNG_UPPER, value: upper });
          }
        }
        i = this.space(i + 1, nested);
      } else if (c === 0x3c || c === 0x21) { // '<' or '!': a token
        let type = El.TOKEN;
        if (c === 0x21) {
          type = El.TOKEN_NOT;
          i++;
        }
        const [id, end] = this.token(i);
        lastSymStart = rule.length;
        prevRules = 1;
        rule.push({ type, value: id });
        i = this.space(end, nested);
      } else if (isWordChar(c)) { // a rule reference
        const end = this.name(i);
        const ref = this.symbolId(this.text(i, end));
        i = this.space(end, nested);
        lastSymStart = rule.length;
        prevRules = 1;
        rule.push({ type: El.RULE_REF, value: ref });
      } else if (c === 0x28) { // '(': a group becomes a helper rule
        const open = i;
        if (++this.#depth > MAX_NESTING) {
          throw this.error(`parentheses nest deeper than ${MAX_NESTING}`, open);
        }
        i = this.space(i + 1, true);
        const before = this.symbols.size;
        const sub = this.generateSymbolId(ruleName);
        i = this.alternates(i, ruleName, sub, true);
        this.#depth--;
        prevRules = Math.max(1, this.symbols.size - before);
        lastSymStart = rule.length;
        rule.push({ type: El.RULE_REF, value: sub });
        if (this.at(i) !== 0x29) throw this.error("expecting ')'", i);
        i = this.space(i + 1, nested);
      } else if (c === 0x2e) { // '.'
        lastSymStart = rule.length;
        prevRules = 1;
        rule.push({ type: El.CHAR_ANY, value: 0 });
        i = this.space(i + 1, nested);
      } else if (c === 0x2a || c === 0x2b || c === 0x3f) { // * + ?
        const at = i;
        i = this.space(i + 1, nested);
        if (c === 0x2a) repeat(at, 0, Infinity);
        else if (c === 0x2b) repeat(at, 1, Infinity);
        else repeat(at, 0, 1);
      } else if (c === 0x7b) { // '{m}', '{m,}', '{m,n}'
        const at = i;
        i = this.space(i + 1, nested);
        if (!isDigit(this.at(i))) throw this.error("expecting an integer", i);
        let end = this.int(i);
        const min = Number(this.text(i, end));
        i = this.space(end, nested);
        let max = Infinity;
        if (this.at(i) === 0x7d) {
          max = min;
          i = this.space(i + 1, nested);
        } else if (this.at(i) === 0x2c) {
          i = this.space(i + 1, nested);
          if (isDigit(this.at(i))) {
            end = this.int(i);
            max = Number(this.text(i, end));
            i = this.space(end, nested);
          }
          if (this.at(i) !== 0x7d) throw this.error("expecting '}'", i);
          i = this.space(i + 1, nested);
        } else {
          throw this.error("expecting ','", i);
        }
        if (min > MAX_REPETITION || (max !== Infinity && max > MAX_REPETITION)) {
          // llama.cpp refuses a minimum above the limit and quietly drops a maximum above it.
          throw this.error(`a repetition bound above ${MAX_REPETITION}`, at);
        }
        if (max < min) throw this.error(`the repetition {${min},${max}} has max < min`, at);
        repeat(at, min, max);
      } else {
        break;
      }
    }
    return i;
  }

  rule(i: number): number {
    const end = this.name(i);
    const name = this.text(i, end);
    const id = this.symbolId(name);
    let pos = this.space(end, false);
    if (!(this.at(pos) === 0x3a && this.at(pos + 1) === 0x3a && this.at(pos + 2) === 0x3d)) {
      throw this.error("expecting ::=", pos);
    }
    pos = this.space(pos + 3, true);
    pos = this.alternates(pos, name, id, false);
    const c = this.at(pos);
    if (c === 0x0d) pos += this.at(pos + 1) === 0x0a ? 2 : 1;
    else if (c === 0x0a) pos++;
    else if (c !== 0) throw this.error("expecting a newline or the end", pos);
    return this.space(pos, true);
  }
}

/**
 * Parses GBNF text. `root` names the start rule; `lookup` resolves `<text>`
 * token references (without it only `<[id]>` works). Throws
 * {@linkcode GrammarError} with the line and column of the first problem, an
 * undefined rule, a missing start rule, or left recursion.
 */
export function parseGbnf(text: string, root = "root", lookup?: TokenLookup): Grammar {
  const p = new Parser(text, lookup);
  let i = p.space(0, true);
  while (p.at(i) !== 0) i = p.rule(i);
  const names: string[] = [];
  for (const [name, id] of p.symbols) names[id] = name;
  for (let id = 0; id < p.rules.length; id++) {
    if (p.rules[id].length === 0) throw new GrammarError(`undefined rule '${names[id]}'`);
    for (const e of p.rules[id]) {
      if (e.type === El.RULE_REF && (e.value >= p.rules.length || p.rules[e.value].length === 0)) {
        throw new GrammarError(`undefined rule '${names[e.value]}'`);
      }
    }
  }
  for (let id = p.rules.length; id < names.length; id++) {
    throw new GrammarError(`undefined rule '${names[id]}'`);
  }
  if (p.rules.length === 0) throw new GrammarError("the grammar is empty");
  const rootId = p.symbols.get(root);
  if (rootId === undefined) throw new GrammarError(`the grammar has no '${root}' rule`);
  const leftRecursive = findLeftRecursion(p.rules);
  if (leftRecursive >= 0) {
    throw new GrammarError(`left recursion in rule '${names[leftRecursive]}' is not supported`);
  }
  let n = 0;
  for (const r of p.rules) n += r.length;
  const types = new Uint8Array(n), values = new Uint32Array(n);
  const ruleStart = new Int32Array(p.rules.length);
  let k = 0;
  p.rules.forEach((rule, id) => {
    ruleStart[id] = k;
    for (const e of rule) {
      types[k] = e.type;
      values[k++] = e.value;
    }
  });
  return { types, values, ruleStart, ruleNames: names, root: rootId };
}

/** llama.cpp's `llama_grammar_detect_left_recursion` over every rule; the offending rule or -1. */
function findLeftRecursion(rules: Element[][]): number {
  const n = rules.length;
  const visited = new Uint8Array(n), inProgress = new Uint8Array(n), mayBeEmpty = new Uint8Array(n);
  const detect = (id: number): boolean => {
    if (inProgress[id]) return true;
    inProgress[id] = 1;
    const rule = rules[id];
    let atStart = true;
    for (const e of rule) {
      if (isEndOfSequence(e.type)) {
        if (atStart) {
          mayBeEmpty[id] = 1;
          break;
        }
        atStart = true;
      } else {
        atStart = false;
      }
    }
    let recurse = true;
    for (const e of rule) {
      if (e.type === El.RULE_REF && recurse) {
        if (detect(e.value)) return true;
        if (!mayBeEmpty[e.value]) recurse = false;
      } else if (isEndOfSequence(e.type)) {
        recurse = true;
      } else {
        recurse = false;
      }
    }
    inProgress[id] = 0;
    visited[id] = 1;
    return false;
  };
  try {
    for (let id = 0; id < n; id++) {
      if (!visited[id] && detect(id)) return id;
    }
  } catch (e) {
    if (e instanceof RangeError) throw new GrammarError("the rules nest too deeply");
    throw e;
  }
  return -1;
}
