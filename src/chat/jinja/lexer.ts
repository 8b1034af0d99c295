/**
 * The Jinja lexer of llama.cpp's engine (`common/jinja/lexer.cpp`), ported
 * as it is: `\r\n` and `\r` read as `\n`, one trailing newline dropped,
 * `lstrip_blocks` and `trim_blocks` on (the chat-template defaults), `{%-`
 * and `-%}` trimming, and its escape and number rules.
 *
 * @example
 * ```ts
 * import { tokenize } from "./lexer.ts";
 * const { tokens } = tokenize("{{- 'a' + x -}}");
 * if (tokens.map((t) => t.value).join(" ") !== "{{- a + x -}}") throw new Error();
 * ```
 *
 * @module
 */
import { JinjaError, sourceError } from "./error.ts";

/** A token's kind (llama.cpp's `token::type`). */
export type TokenType =
  | "eof"
  | "text"
  | "numeric_literal"
  | "string_literal"
  | "identifier"
  | "equals"
  | "open_paren"
  | "close_paren"
  | "open_statement"
  | "close_statement"
  | "open_expression"
  | "close_expression"
  | "open_square_bracket"
  | "close_square_bracket"
  | "open_curly_bracket"
  | "close_curly_bracket"
  | "comma"
  | "dot"
  | "colon"
  | "pipe"
  | "call_operator"
  | "additive_binary_operator"
  | "multiplicative_binary_operator"
  | "comparison_binary_operator"
  | "unary_operator"
  | "comment";

/** One token: its kind, text and position in the (normalized) source. */
export interface Token {
  type: TokenType;
  value: string;
  pos: number;
}

/** The tokens and the normalized source their positions refer to. */
export interface LexerResult {
  tokens: Token[];
  source: string;
}

const ESCAPES: Record<string, string> = {
  n: "\n",
  t: "\t",
  r: "\r",
  b: "\b",
  f: "\f",
  v: "\v",
  "\\": "\\",
  "'": "'",
  '"': '"',
};

const MAPPING: [string, TokenType][] = [
  ["{%-", "open_statement"],
  ["-%}", "close_statement"],
  ["{{-", "open_expression"],
  ["-}}", "close_expression"],
  ["{%", "open_statement"],
  ["%}", "close_statement"],
  ["{{", "open_expression"],
  ["}}", "close_expression"],
  ["(", "open_paren"],
  [")", "close_paren"],
  ["{", "open_curly_bracket"],
  ["}", "close_curly_bracket"],
  ["[", "open_square_bracket"],
  ["]", "close_square_bracket"],
  [",", "comma"],
  [".", "dot"],
  [":", "colon"],
  ["|", "pipe"],
  ["<=", "comparison_binary_operator"],
  [">=", "comparison_binary_operator"],
  ["==", "comparison_binary_operator"],
  ["!=", "comparison_binary_operator"],
  ["<", "comparison_binary_operator"],
  [">", "comparison_binary_operator"],
  ["+", "additive_binary_operator"],
  ["-", "additive_binary_operator"],
  ["~", "additive_binary_operator"],
  ["*", "multiplicative_binary_operator"],
  ["/", "multiplicative_binary_operator"],
  ["%", "multiplicative_binary_operator"],
  ["=", "equals"],
];

/** C's `isspace` in the C locale. */
export function isSpace(c: string): boolean {
  return c === " " || c === "\t" || c === "\n" || c === "\v" || c === "\f" || c === "\r";
}

function isDigit(c: string): boolean {
  return c >= "0" && c <= "9";
}

function isWord(c: string): boolean {
  return isDigit(c) || (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || c === "_";
}

function lstripChars(s: string, chars: string): string {
  let i = 0;
  while (i < s.length && chars.includes(s[i])) i++;
  return s.slice(i);
}

function rstripChars(s: string, chars: string): string {
  let i = s.length;
  while (i > 0 && chars.includes(s[i - 1])) i--;
  return s.slice(0, i);
}

/** Splits `source` into tokens; throws {@linkcode JinjaError} on a lexical error. */
export function tokenize(source: string): LexerResult {
  const tokens: Token[] = [];
  if (source === "") return { tokens, source };
  let src = source.replaceAll("\r\n", "\n").replaceAll("\r", "\n");
  if (source.endsWith("\n")) src = src.slice(0, -1);
  const at = (i: number) => (i < src.length ? src[i] : "\0");
  const fail = (message: string, p: number): never => {
    throw new JinjaError(sourceError("lexer", message, source, p));
  };

  let pos = 0;
  let curlyDepth = 0;

  const consumeWhile = (predicate: (c: string) => boolean): string => {
    let str = "";
    while (predicate(at(pos))) {
      if (at(pos) === "\\") {
        ++pos;
        if (pos >= src.length) fail("unexpected end of input after escape character", pos);
        const escaped = src[pos++];
        const unescaped = ESCAPES[escaped];
        if (unescaped === undefined) fail(`unknown escape character \\${escaped}`, pos);
        str += unescaped;
        continue;
      }
      str += at(pos++);
      if (pos > src.length) fail("unexpected end of input during consume_while", pos);
    }
    return str;
  };
  const consumeNumeric = (): string => {
    let num = consumeWhile(isDigit);
    if (pos < src.length && src[pos] === "." && pos + 1 < src.length && isDigit(src[pos + 1])) {
      ++pos;
      num += "." + consumeWhile(isDigit);
    }
    return num;
  };
  const nextPosIs = (chars: string, n = 1): boolean => {
    if (pos + n >= src.length) return false;
    return chars.includes(src[pos + n]);
  };

  while (pos < src.length) {
    let startPos = pos;
    const lastType: TokenType = tokens.length === 0
      ? "close_statement"
      : tokens[tokens.length - 1].type;
    if (
      lastType === "close_statement" || lastType === "close_expression" || lastType === "comment"
    ) {
      let lastBlockCanRmNewline = false;
      let isRstripBlock = false;
      if (pos > 3) {
        const c0 = src[pos - 3];
        const c1 = src[pos - 2];
        const c2 = src[pos - 1];
        isRstripBlock = c0 === "-" && (c1 === "%" || c1 === "}" || c1 === "#") && c2 === "}";
        lastBlockCanRmNewline = (c1 === "#" || c1 === "%" || c1 === "-") && c2 === "}";
      }
      const start = pos;
      let end = start;
      while (pos < src.length && !(src[pos] === "{" && nextPosIs("%{#"))) end = ++pos;
      if (at(pos) === "{" && nextPosIs("%#-")) {
        let current = end;
        while (current > start) {
          const c = src[current - 1];
          if (current === 1) {
            end = 0;
            break;
          }
          if (c === "\n") {
            end = current;
            break;
          }
          if (!isSpace(c)) break;
          --current;
        }
      }
      let text = src.slice(start, Math.max(start, end));
      if (lastBlockCanRmNewline && text.startsWith("\n")) text = text.slice(1);
      if (isRstripBlock) text = lstripChars(text, " \t\r\n");
      const isLstripBlock = at(pos) === "{" && nextPosIs("{%#") && nextPosIs("-", 2);
      if (isLstripBlock) text = rstripChars(text, " \t\r\n");
      if (text !== "") {
        tokens.push({ type: "text", value: text, pos: startPos });
        continue;
      }
    }

    if (at(pos) === "{" && nextPosIs("#")) {
      startPos = pos;
      pos += 2;
      let comment = "";
      while (!(at(pos) === "#" && nextPosIs("}"))) {
        if (pos + 2 >= src.length) fail("missing end of comment tag", pos);
        comment += src[pos++];
      }
      tokens.push({ type: "comment", value: comment, pos: startPos });
      pos += 2;
      continue;
    }

    if (at(pos) === "-" && (lastType === "open_expression" || lastType === "open_statement")) {
      pos++;
      if (pos >= src.length) break;
    }

    consumeWhile(isSpace);
    if (pos >= src.length) break;

    const ch = src[pos];
    const isClosingBlock = ch === "-" && nextPosIs("%}");

    if (!isClosingBlock && (ch === "-" || ch === "+")) {
      startPos = pos;
      const last: TokenType = tokens.length === 0 ? "eof" : tokens[tokens.length - 1].type;
      if (last === "text" || last === "eof") fail(`unexpected character: ${ch}`, pos);
      if (
        last !== "identifier" && last !== "numeric_literal" && last !== "string_literal" &&
        last !== "close_paren" && last !== "close_square_bracket"
      ) {
        ++pos;
        const num = consumeNumeric();
        tokens.push({
          type: num === "" ? "unary_operator" : "numeric_literal",
          value: ch + num,
          pos: startPos,
        });
        continue;
      }
    }

    let matched = false;
    for (const [seq, type] of MAPPING) {
      startPos = pos;
      if (seq === "}}" && curlyDepth > 0) continue;
      if (src.startsWith(seq, pos)) {
        tokens.push({ type, value: seq, pos: startPos });
        if (type === "open_expression") curlyDepth = 0;
        else if (type === "open_curly_bracket") ++curlyDepth;
        else if (type === "close_curly_bracket") --curlyDepth;
        pos += seq.length;
        matched = true;
        break;
      }
    }
    if (matched) continue;

    if (ch === "'" || ch === '"') {
      startPos = pos;
      ++pos;
      const str = consumeWhile((c) => c !== ch);
      tokens.push({ type: "string_literal", value: str, pos: startPos });
      ++pos;
      continue;
    }
    if (isDigit(ch)) {
      startPos = pos;
      tokens.push({ type: "numeric_literal", value: consumeNumeric(), pos: startPos });
      continue;
    }
    if (isWord(ch)) {
      startPos = pos;
      tokens.push({ type: "identifier", value: consumeWhile(isWord), pos: startPos });
      continue;
    }
    fail(`unexpected character: ${ch}`, pos);
  }
  return { tokens, source: src };
}
