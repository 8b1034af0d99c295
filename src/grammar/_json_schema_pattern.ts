/**
 * A string schema's `pattern` (an anchored regular expression) as GBNF, following
 * llama.cpp's `_pattern_to_rule`: literals, `.`, groups (`(…)`, `(?:…)`), `|`, character
 * classes copied as GBNF classes, `* + ? {m} {m,} {,n} {m,n}`, and the escapes GBNF shares
 * (`\x \u \U \t \r \n \\ \" \[ \] \-`, and escaped regex metacharacters). Everything else
 * (`\d`, `\w`, lookarounds, named groups, backreferences, unanchored patterns, …) is refused
 * with its position instead of llama.cpp's fallback to any string.
 *
 * @module
 */
import { MAX_PATTERN_DEPTH, MAX_REPETITION } from "./_json_schema_error.ts";
import { buildRepetition } from "./_json_schema_repetition.ts";

/**
 * Why a pattern cannot become a grammar: `invalid` when it is no regular expression at
 * all, else it is one the grammar cannot express. `position` is a code point index.
 */
export class PatternError extends Error {
  readonly position: number;
  readonly invalid: boolean;
  constructor(message: string, position: number, invalid = false) {
    super(message);
    this.position = position;
    this.invalid = invalid;
  }
}

/** The rule callbacks the conversion needs from the grammar under construction. */
export interface PatternRules {
  /** Adds a rule (renamed on a clash, as `_add_rule` does) and returns its name. */
  addRule(name: string, body: string): string;
  /** Whether `.` also matches line breaks. */
  dotall: boolean;
}

const NON_LITERAL = new Set(["|", ".", "(", ")", "[", "]", "{", "}", "*", "+", "?", "^", "$"]);
const ESCAPED_METACHARACTERS = new Set([
  "^",
  "$",
  ".",
  "[",
  "]",
  "(",
  ")",
  "|",
  "{",
  "}",
  "*",
  "+",
  "?",
]);
const QUANTIFIERS = new Set(["*", "+", "?", "{"]);

/** Length of a GBNF-compatible escape at `pos` (`\n`, `\x41`, …), 0 if there is none. */
function gbnfEscapeLength(cps: string[], pos: number): number {
  if (pos + 1 >= cps.length || cps[pos] !== "\\") return 0;
  let hex: number;
  switch (cps[pos + 1]) {
    case "x":
      hex = 2;
      break;
    case "u":
      hex = 4;
      break;
    case "U":
      hex = 8;
      break;
    case "t":
    case "r":
    case "n":
    case "\\":
    case '"':
    case "[":
    case "]":
    case "-":
      return 2;
    default:
      return 0;
  }
  if (pos + 2 + hex > cps.length) return 0;
  for (let i = pos + 2; i < pos + 2 + hex; i++) {
    if (!/^[0-9a-fA-F]$/.test(cps[i])) return 0;
  }
  return 2 + hex;
}

/** The code point a GBNF-compatible escape at `pos` stands for (`gbnfEscapeLength` > 0). */
function escapeCodePoint(cps: string[], pos: number, n: number): number {
  switch (cps[pos + 1]) {
    case "t":
      return 0x09;
    case "r":
      return 0x0d;
    case "n":
      return 0x0a;
    case "x":
    case "u":
    case "U":
      return parseInt(cps.slice(pos + 2, pos + n).join(""), 16);
    default:
      return cps[pos + 1].codePointAt(0)!;
  }
}

/**
 * The GBNF literal text (inside `"..."`) that writes code point `cp` inside
 * a JSON string: a quote, a backslash and control characters as their JSON
 * escapes, so that a pattern's output stays valid JSON (llama.cpp writes
 * them raw, which breaks the JSON).
 */
function jsonLiteral(cp: number): string {
  switch (cp) {
    case 0x22:
      return '\\\\\\"'; // the JSON escape \" as GBNF string text
    case 0x5c:
      return "\\\\\\\\"; // \\
    case 0x0a:
      return "\\\\n";
    case 0x0d:
      return "\\\\r";
    case 0x09:
      return "\\\\t";
  }
  if (cp < 0x20) return "\\\\u00" + cp.toString(16).padStart(2, "0");
  return String.fromCodePoint(cp);
}

/** Characters a JSON string cannot hold raw: they are left out of character classes. */
const JSON_UNSAFE = '\\"\\\\\\x00-\\x1F';

/**
 * A pattern's character class as characters of a JSON string: a negated
 * class also leaves out what JSON cannot hold raw; a class that names a
 * quote, a backslash or control characters gets them as their JSON escapes
 * (llama.cpp writes them raw, which breaks the JSON).
 */
function jsonClass(cls: string): string {
  const members = Array.from(cls.slice(cls.startsWith("[^") ? 2 : 1, -1));
  if (cls.startsWith("[^")) {
    // a quote or a backslash the class does not exclude may come escaped
    const text = members.join("");
    const extra = [
      ...(text.includes('"') ? [] : [`"${jsonLiteral(0x22)}"`]), // `"` or `\"`
      ...(/\\\\/.test(text) ? [] : [`"${jsonLiteral(0x5c)}"`]),
    ];
    return `([^${text}${JSON_UNSAFE}] | ${extra.join(" | ")})`.replace(/ \| \)$/, ")");
  }
  // the ranges the class names, as code points
  const ranges: [number, number][] = [];
  for (let k = 0; k < members.length;) {
    const one = (at: number): [number, number] => {
      const n = gbnfEscapeLength(members, at);
      return n > 0 ? [escapeCodePoint(members, at, n), n] : [members[at].codePointAt(0)!, 1];
    };
    const [lo, n] = one(k);
    k += n;
    if (members[k] === "-" && k + 1 < members.length) {
      const [hi, m] = one(k + 1);
      ranges.push([lo, hi]);
      k += 1 + m;
    } else {
      ranges.push([lo, lo]);
    }
  }
  const unsafe = (cp: number) => cp < 0x20 || cp === 0x22 || cp === 0x5c;
  const escaped: string[] = [];
  for (const [lo, hi] of ranges) {
    for (let cp = lo; cp <= Math.min(hi, 0x5c); cp++) if (unsafe(cp)) escaped.push(jsonLiteral(cp));
  }
  if (escaped.length === 0) return cls;
  const safe = ranges.flatMap(([lo, hi]) => {
    const out: [number, number][] = [];
    let from = lo;
    for (let cp = lo; cp <= Math.min(hi, 0x5c); cp++) {
      if (unsafe(cp)) {
        if (from < cp) out.push([from, cp - 1]);
        from = cp + 1;
      }
    }
    if (from <= hi) out.push([from, hi]);
    return out;
  });
  const hex = (cp: number) => `\\U${cp.toString(16).padStart(8, "0")}`;
  const parts = escaped.map((e) => `"${e}"`);
  if (safe.length > 0) {
    parts.unshift(`[${safe.map(([a, b]) => a === b ? hex(a) : `${hex(a)}-${hex(b)}`).join("")}]`);
  }
  return `(${[...new Set(parts)].join(" | ")})`;
}

type Piece = { text: string; literal: boolean };

function toRule(p: Piece): string {
  return p.literal ? '"' + p.text + '"' : p.text;
}

/** Parses `{m}`, `{m,}`, `{,n}`, `{m,n}` (the text between the braces). */
function parseCounts(inner: string, at: number): [number, number] {
  const nums = inner.split(",");
  if (nums.length !== 1 && nums.length !== 2) {
    throw new PatternError("wrong number of values in curly brackets", at);
  }
  const parse = (s: string, empty: number): number => {
    if (s === "") {
      if (nums.length === 1) throw new PatternError("invalid number in curly brackets", at);
      return empty;
    }
    if (!/^[0-9]+$/.test(s)) throw new PatternError("invalid number in curly brackets", at);
    const n = Number(s);
    if (n > MAX_REPETITION) {
      throw new PatternError(
        `repetition count ${s} exceeds ${MAX_REPETITION} (MAX_REPETITION)`,
        at,
      );
    }
    return n;
  };
  const min = parse(nums[0], 0);
  const max = nums.length === 1 ? min : parse(nums[1], Infinity);
  if (min > max) {
    throw new PatternError(`repetition {${inner}} has its minimum above its maximum`, at);
  }
  return [min, max];
}

/**
 * The rule (named `name`) matching a JSON string whose content matches `pattern`; returns
 * its name. Throws `PatternError` for what it cannot convert or what is not a valid regex.
 */
export function patternToRule(pattern: string, name: string, rules: PatternRules): string {
  const all = Array.from(pattern);
  if (all.length < 2 || all[0] !== "^" || all[all.length - 1] !== "$") {
    throw new PatternError("is not anchored with '^' and '$'", 0);
  }
  const sub = all.slice(1, -1);
  const length = sub.length;
  const subRuleIds = new Map<string, string>();
  let i = 0;
  let depth = 0;
  const at = (j: number) => j + 1; // position in the whole pattern

  // Any character but a line break, as a JSON string holds it raw (llama.cpp's `[^\x0A\x0D]`
  // also writes quotes, backslashes and control characters raw: invalid JSON).
  const dot = () => {
    const escapes = [0x22, 0x5c, 0x09, ...(rules.dotall ? [0x0a, 0x0d] : [])];
    return rules.addRule(
      "dot",
      [`[^${JSON_UNSAFE}]`, ...escapes.map((cp) => `"${jsonLiteral(cp)}"`)].join(" | "),
    );
  };

  const transform = (): Piece => {
    const seq: Piece[] = [];
    const joinSeq = (): Piece => {
      const out: string[] = [];
      let literal = "";
      for (const item of seq) {
        if (item.literal) {
          literal += item.text;
        } else {
          if (literal !== "") out.push('"' + literal + '"');
          literal = "";
          out.push(item.text);
        }
      }
      if (literal !== "") out.push('"' + literal + '"');
      return { text: out.join(" "), literal: false };
    };

    while (i < length) {
      const c = sub[i];
      if (c === ".") {
        seq.push({ text: dot(), literal: false });
        i++;
      } else if (c === "(") {
        const start = i;
        i++;
        if (i < length && sub[i] === "?") {
          if (i + 1 < length && sub[i + 1] === ":") i += 2;
          else throw new PatternError("has an unsupported group syntax", at(start));
        }
        depth++;
        if (depth > MAX_PATTERN_DEPTH) {
          throw new PatternError(
            `nests groups deeper than ${MAX_PATTERN_DEPTH} (MAX_PATTERN_DEPTH)`,
            at(start),
          );
        }
        seq.push({ text: "(" + toRule(transform()) + ")", literal: false });
      } else if (c === ")") {
        if (depth === 0) throw new PatternError("has unbalanced parentheses", at(i), true);
        i++;
        depth--;
        return joinSeq();
      } else if (c === "^" || c === "$") {
        throw new PatternError("has an anchor inside the pattern", at(i));
      } else if (c === "[") {
        const start = i;
        let cls = "[";
        i++;
        while (i < length && sub[i] !== "]") {
          if (sub[i] === "\\") {
            const n = gbnfEscapeLength(sub, i);
            if (n === 0) {
              throw new PatternError(
                `has an unsupported escape in a character class: ${sub.slice(i, i + 2).join("")}`,
                at(i),
              );
            }
            cls += sub.slice(i, i + n).join("");
            i += n;
          } else {
            cls += sub[i];
            i++;
          }
        }
        if (i >= length) {
          throw new PatternError("has an unterminated character class", at(start), true);
        }
        i++;
        seq.push({ text: jsonClass(cls + "]"), literal: false });
      } else if (c === "|") {
        seq.push({ text: "|", literal: false });
        i++;
      } else if (c === "*" || c === "+" || c === "?") {
        if (seq.length === 0) throw new PatternError("has nothing to repeat", at(i), true);
        seq[seq.length - 1] = { text: toRule(seq[seq.length - 1]) + c, literal: false };
        i++;
      } else if (c === "{") {
        const start = i;
        let inner = "";
        i++;
        while (i < length && sub[i] !== "}") inner += sub[i++];
        if (i >= length) throw new PatternError("has unterminated curly brackets", at(start));
        i++;
        const [min, max] = parseCounts(inner, at(start));
        if (seq.length === 0) throw new PatternError("has nothing to repeat", at(start), true);
        const last = seq[seq.length - 1];
        let item = last.text;
        if (!last.literal) {
          let id = subRuleIds.get(item);
          if (id === undefined) {
            id = rules.addRule(name + "-" + (subRuleIds.size + 1), item);
            subRuleIds.set(item, id);
          }
          item = id;
        }
        seq[seq.length - 1] = {
          text: buildRepetition(last.literal ? '"' + item + '"' : item, min, max),
          literal: false,
        };
      } else {
        let literal = "";
        // A character joins the literal unless a quantifier follows it: then it stands
        // alone, so that the quantifier repeats it and not the whole literal.
        const joins = (next: number) =>
          literal === "" || next >= length || sub[next] === "." || !NON_LITERAL.has(sub[next]);
        while (i < length) {
          if (sub[i] === "\\") {
            if (i === length - 1) throw new PatternError("has a trailing backslash", at(i), true);
            const next = sub[i + 1];
            if (ESCAPED_METACHARACTERS.has(next)) {
              if (!joins(i + 2) && QUANTIFIERS.has(sub[i + 2])) break;
              literal += next;
              i += 2;
            } else if (gbnfEscapeLength(sub, i) > 0) {
              const n = gbnfEscapeLength(sub, i);
              if (!joins(i + n) && QUANTIFIERS.has(sub[i + n])) break;
              const cp = escapeCodePoint(sub, i, n);
              // a character JSON holds raw keeps llama.cpp's spelling of it
              literal += cp < 0x20 || cp === 0x22 || cp === 0x5c
                ? jsonLiteral(cp)
                : sub.slice(i, i + n).join("");
              i += n;
            } else {
              throw new PatternError(
                `has an unsupported escape: ${sub.slice(i, i + 2).join("")}`,
                at(i),
              );
            }
          } else if (sub[i] === '"' || sub[i].codePointAt(0)! < 0x20) {
            if (!joins(i + 1) && QUANTIFIERS.has(sub[i + 1])) break;
            literal += jsonLiteral(sub[i].codePointAt(0)!);
            i++;
          } else if (!NON_LITERAL.has(sub[i]) && joins(i + 1)) {
            literal += sub[i];
            i++;
          } else {
            break;
          }
        }
        if (literal === "") {
          throw new PatternError(`has an unsupported character: ${c}`, at(i));
        }
        seq.push({ text: literal, literal: true });
      }
    }
    return joinSeq();
  };

  const rule = toRule(transform());
  if (depth !== 0) throw new PatternError("has unbalanced parentheses", all.length - 1, true);
  try {
    new RegExp(pattern);
  } catch (e) {
    const reason = e instanceof Error ? e.message.replace(/^Invalid regular expression: /, "") : "";
    throw new PatternError(`is not a valid regular expression (${reason})`, 0, true);
  }
  return rules.addRule(name, '"\\"" (' + rule + ') "\\""');
}
