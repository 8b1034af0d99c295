/**
 * The Jinja parser of llama.cpp's engine (`common/jinja/parser.cpp`),
 * ported as it is: its precedence (filters bind outside unary minus,
 * membership at comparison level), `{% generation %}` ignored, `{% call %}`,
 * `{% filter %}`, multi-line `{% set %}`, slices and `*args` spreads.
 *
 * @example
 * ```ts
 * import { parse } from "./parser.ts";
 * const program = parse("{% if x %}{{ x | upper }}{% endif %}");
 * if (program.body[0].type !== "If") throw new Error();
 * ```
 *
 * @module
 */
import type { Node, Program } from "./ast.ts";
import { JinjaError, sourceError } from "./error.ts";
import { type Token, tokenize, type TokenType } from "./lexer.ts";

/** A node before its position is set. */
type NodeInput = Node extends infer N ? N extends Node ? Omit<N, "pos"> : never : never;

const EOF_TOKEN: Token = { type: "eof", value: "", pos: 0 };

class Parser {
  #current = 0;
  constructor(readonly tokens: Token[], readonly source: string) {}

  parse(): Program {
    const body: Node[] = [];
    while (this.#current < this.tokens.length) body.push(this.#parseAny());
    return { type: "Program", body, pos: 0 } as Program;
  }

  #mk(start: number, node: NodeInput): Node {
    return { ...node, pos: (this.tokens[start] ?? EOF_TOKEN).pos } as Node;
  }

  #peek(offset = 0): Token {
    return this.tokens[this.#current + offset] ?? EOF_TOKEN;
  }

  #next(): Token {
    if (this.#current >= this.tokens.length) {
      const pos = this.tokens.length === 0 ? 0 : this.tokens[this.tokens.length - 1].pos;
      throw new JinjaError(sourceError("parser", "Parser Error: Unexpected EOF", this.source, pos));
    }
    return this.tokens[this.#current++];
  }

  #expect(type: TokenType, error: string): Token {
    const t = this.#peek();
    if (t.type !== type) {
      throw new JinjaError(
        sourceError("parser", `Parser Error: ${error} (Got ${t.value})`, this.source, t.pos),
      );
    }
    this.#current++;
    return t;
  }

  #expectIdentifier(name: string): void {
    const t = this.#peek();
    if (t.type !== "identifier" || t.value !== name) {
      throw new JinjaError(
        sourceError("parser", `Expected identifier: ${name}`, this.source, t.pos),
      );
    }
    this.#current++;
  }

  #is(type: TokenType): boolean {
    return this.#peek().type === type;
  }

  #isIdentifier(name: string): boolean {
    return this.#peek().type === "identifier" && this.#peek().value === name;
  }

  #isStatement(names: string[]): boolean {
    if (this.#peek(0).type !== "open_statement" || this.#peek(1).type !== "identifier") {
      return false;
    }
    return names.includes(this.#peek(1).value);
  }

  #parseAny(): Node {
    const start = this.#current;
    switch (this.#peek().type) {
      case "comment":
        return this.#mk(start, { type: "Comment", value: this.#next().value });
      case "text":
        return this.#mk(start, { type: "StringLiteral", value: this.#next().value });
      case "open_statement":
        return this.#parseStatement();
      case "open_expression": {
        this.#expect("open_expression", "Expected {{");
        const result = this.#parseExpression();
        this.#expect("close_expression", "Expected }}");
        return result;
      }
      default:
        throw new JinjaError("Unexpected token type");
    }
  }

  #parseStatement(): Node {
    this.#expect("open_statement", "Expected {%");
    if (this.#peek().type !== "identifier") throw new JinjaError("Unknown statement");
    const start = this.#current;
    const name = this.#next().value;
    const end = (keyword: string) => {
      this.#expect("open_statement", "Expected {%");
      this.#expectIdentifier(keyword);
      this.#expect("close_statement", "Expected %}");
    };
    const bodyUntil = (keywords: string[]) => {
      const body: Node[] = [];
      while (!this.#isStatement(keywords)) body.push(this.#parseAny());
      return body;
    };
    switch (name) {
      case "set":
        return this.#parseSet(start);
      case "if": {
        const result = this.#parseIf(start);
        end("endif");
        return result;
      }
      case "macro": {
        const nameNode = this.#parsePrimary();
        const args = this.#parseArgs();
        this.#expect("close_statement", "Expected %}");
        const body = bodyUntil(["endmacro"]);
        end("endmacro");
        return this.#mk(start, { type: "Macro", name: nameNode, args, body });
      }
      case "for": {
        const result = this.#parseFor(start);
        end("endfor");
        return result;
      }
      case "break":
        this.#expect("close_statement", "Expected %}");
        return this.#mk(start, { type: "Break" });
      case "continue":
        this.#expect("close_statement", "Expected %}");
        return this.#mk(start, { type: "Continue" });
      case "call": {
        let callerArgs: Node[] = [];
        if (this.#is("open_paren")) callerArgs = this.#parseArgs();
        const callee = this.#parsePrimary();
        if (callee.type !== "Identifier") throw new JinjaError("Expected identifier");
        const callArgs = this.#parseArgs();
        this.#expect("close_statement", "Expected %}");
        const body = bodyUntil(["endcall"]);
        end("endcall");
        const call = this.#mk(start, { type: "CallExpression", callee, args: callArgs });
        return this.#mk(start, { type: "CallStatement", call, callerArgs, body });
      }
      case "filter": {
        let filter = this.#parsePrimary();
        if (filter.type === "Identifier" && this.#is("open_paren")) {
          filter = this.#parseCall(filter);
        }
        this.#expect("close_statement", "Expected %}");
        const body = bodyUntil(["endfilter"]);
        end("endfilter");
        return this.#mk(start, { type: "FilterStatement", filter, body });
      }
      case "generation":
      case "endgeneration": {
        const result = this.#mk(start, { type: "Noop" });
        ++this.#current;
        return result;
      }
      default:
        throw new JinjaError(`Unknown statement: ${name}`);
    }
  }

  #parseSet(start: number): Node {
    const assignee = this.#parseExpressionSequence();
    let value: Node | null = null;
    const body: Node[] = [];
    if (this.#is("equals")) {
      ++this.#current;
      value = this.#parseExpressionSequence();
    } else {
      this.#expect("close_statement", "Expected %}");
      while (!this.#isStatement(["endset"])) body.push(this.#parseAny());
      this.#expect("open_statement", "Expected {%");
      this.#expectIdentifier("endset");
    }
    this.#expect("close_statement", "Expected %}");
    return this.#mk(start, { type: "Set", assignee, value, body });
  }

  #parseIf(start: number): Node {
    const test = this.#parseExpression();
    this.#expect("close_statement", "Expected %}");
    const body: Node[] = [];
    const alternate: Node[] = [];
    while (!this.#isStatement(["elif", "else", "endif"])) body.push(this.#parseAny());
    if (this.#isStatement(["elif"])) {
      const pos0 = this.#current;
      this.#current += 2;
      alternate.push(this.#parseIf(pos0));
    } else if (this.#isStatement(["else"])) {
      this.#current += 2;
      this.#expect("close_statement", "Expected %}");
      while (!this.#isStatement(["endif"])) alternate.push(this.#parseAny());
    }
    return this.#mk(start, { type: "If", test, body, alternate });
  }

  #parseExpressionSequence(primary = false): Node {
    const start = this.#current;
    const exprs = [primary ? this.#parsePrimary() : this.#parseExpression()];
    const isTuple = this.#is("comma");
    while (this.#is("comma")) {
      ++this.#current;
      exprs.push(primary ? this.#parsePrimary() : this.#parseExpression());
    }
    return isTuple ? this.#mk(start, { type: "TupleLiteral", value: exprs }) : exprs[0];
  }

  #parseFor(start: number): Node {
    const loopvar = this.#parseExpressionSequence(true);
    if (!this.#isIdentifier("in")) throw new JinjaError("Expected 'in'");
    ++this.#current;
    const iterable = this.#parseExpression();
    this.#expect("close_statement", "Expected %}");
    const body: Node[] = [];
    const defaultBlock: Node[] = [];
    while (!this.#isStatement(["endfor", "else"])) body.push(this.#parseAny());
    if (this.#isStatement(["else"])) {
      this.#current += 2;
      this.#expect("close_statement", "Expected %}");
      while (!this.#isStatement(["endfor"])) defaultBlock.push(this.#parseAny());
    }
    return this.#mk(start, { type: "For", loopvar, iterable, body, defaultBlock });
  }

  #parseExpression(): Node {
    return this.#parseIfExpression();
  }

  #parseIfExpression(): Node {
    const a = this.#parseOr();
    if (this.#isIdentifier("if")) {
      const start = this.#current;
      ++this.#current;
      const test = this.#parseOr();
      if (this.#isIdentifier("else")) {
        const pos0 = this.#current;
        ++this.#current;
        const falseExpr = this.#parseIfExpression();
        return this.#mk(pos0, { type: "Ternary", condition: test, trueExpr: a, falseExpr });
      }
      return this.#mk(start, { type: "SelectExpression", lhs: a, test });
    }
    return a;
  }

  #parseOr(): Node {
    let left = this.#parseAnd();
    while (this.#isIdentifier("or")) {
      const start = this.#current;
      const op = this.#next();
      left = this.#mk(start, { type: "BinaryExpression", op, left, right: this.#parseAnd() });
    }
    return left;
  }

  #parseAnd(): Node {
    let left = this.#parseNot();
    while (this.#isIdentifier("and")) {
      const start = this.#current;
      const op = this.#next();
      left = this.#mk(start, { type: "BinaryExpression", op, left, right: this.#parseNot() });
    }
    return left;
  }

  #parseNot(): Node {
    if (this.#isIdentifier("not")) {
      const start = this.#current;
      const op = this.#next();
      return this.#mk(start, { type: "UnaryExpression", op, argument: this.#parseNot() });
    }
    return this.#parseComparison();
  }

  #parseComparison(): Node {
    let left = this.#parseAdditive();
    while (true) {
      let op: Token;
      const start = this.#current;
      if (
        this.#isIdentifier("not") && this.#peek(1).type === "identifier" &&
        this.#peek(1).value === "in"
      ) {
        op = { type: "identifier", value: "not in", pos: this.tokens[this.#current].pos };
        this.#current += 2;
      } else if (this.#isIdentifier("in")) op = this.#next();
      else if (this.#is("comparison_binary_operator")) op = this.#next();
      else break;
      left = this.#mk(start, { type: "BinaryExpression", op, left, right: this.#parseAdditive() });
    }
    return left;
  }

  #parseAdditive(): Node {
    let left = this.#parseMultiplicative();
    while (this.#is("additive_binary_operator")) {
      const start = this.#current;
      const op = this.#next();
      left = this.#mk(start, {
        type: "BinaryExpression",
        op,
        left,
        right: this.#parseMultiplicative(),
      });
    }
    return left;
  }

  #parseMultiplicative(): Node {
    let left = this.#parseTest();
    while (this.#is("multiplicative_binary_operator")) {
      const start = this.#current;
      const op = this.#next();
      left = this.#mk(start, { type: "BinaryExpression", op, left, right: this.#parseTest() });
    }
    return left;
  }

  #parseTest(): Node {
    let operand = this.#parseFilter();
    while (this.#isIdentifier("is")) {
      const start = this.#current;
      ++this.#current;
      let negate = false;
      if (this.#isIdentifier("not")) {
        ++this.#current;
        negate = true;
      }
      let test = this.#parsePrimary();
      if (this.#is("open_paren")) test = this.#parseCall(test);
      else if (
        this.#is("numeric_literal") || this.#is("string_literal") ||
        this.#is("open_curly_bracket") || this.#is("open_square_bracket") ||
        (this.#is("identifier") && !this.#isIdentifier("and") && !this.#isIdentifier("or") &&
          !this.#isIdentifier("else"))
      ) {
        const callPos = this.#current;
        test = this.#mk(callPos, {
          type: "CallExpression",
          callee: test,
          args: [this.#parseUnary()],
        });
      }
      operand = this.#mk(start, { type: "TestExpression", operand, negate, test });
    }
    return operand;
  }

  #parseFilter(): Node {
    let operand = this.#parseUnary();
    while (this.#is("pipe")) {
      const start = this.#current;
      ++this.#current;
      let filter = this.#parsePrimary();
      if (this.#is("open_paren")) filter = this.#parseCall(filter);
      operand = this.#mk(start, { type: "FilterExpression", operand, filter });
    }
    return operand;
  }

  #parseUnary(): Node {
    if (this.#is("unary_operator")) {
      const start = this.#current;
      const op = this.#next();
      return this.#mk(start, { type: "UnaryExpression", op, argument: this.#parseUnary() });
    }
    const member = this.#parseMember(this.#parsePrimary());
    return this.#is("open_paren") ? this.#parseCall(member) : member;
  }

  #parseCall(callee: Node): Node {
    const start = this.#current;
    const expr = this.#mk(start, { type: "CallExpression", callee, args: this.#parseArgs() });
    const member = this.#parseMember(expr);
    return this.#is("open_paren") ? this.#parseCall(member) : member;
  }

  #parseArgs(): Node[] {
    this.#expect("open_paren", "Expected (");
    const args: Node[] = [];
    while (!this.#is("close_paren")) {
      let arg: Node;
      if (this.#peek().type === "multiplicative_binary_operator" && this.#peek().value === "*") {
        const start = this.#current;
        ++this.#current;
        arg = this.#mk(start, { type: "SpreadExpression", argument: this.#parseExpression() });
      } else {
        arg = this.#parseExpression();
        if (this.#is("equals")) {
          const start = this.#current;
          ++this.#current;
          arg = this.#mk(start, {
            type: "KeywordArgumentExpression",
            key: arg,
            value: this.#parseExpression(),
          });
        }
      }
      args.push(arg);
      if (this.#is("comma")) ++this.#current;
    }
    this.#expect("close_paren", "Expected )");
    return args;
  }

  #parseMember(object: Node): Node {
    const start = this.#current;
    while (this.#is("dot") || this.#is("open_square_bracket")) {
      const op = this.#next();
      const computed = op.type === "open_square_bracket";
      let property: Node;
      if (computed) {
        property = this.#parseMemberArguments();
        this.#expect("close_square_bracket", "Expected ]");
      } else property = this.#parsePrimary();
      object = this.#mk(start, { type: "MemberExpression", object, property, computed });
    }
    return object;
  }

  #parseMemberArguments(): Node {
    const slices: (Node | null)[] = [];
    let isSlice = false;
    const start = this.#current;
    while (!this.#is("close_square_bracket")) {
      if (this.#is("colon")) {
        slices.push(null);
        ++this.#current;
        isSlice = true;
      } else {
        slices.push(this.#parseExpression());
        if (this.#is("colon")) {
          ++this.#current;
          isSlice = true;
        }
      }
      if (this.#is("eof")) this.#next();
    }
    if (isSlice) {
      return this.#mk(start, {
        type: "SliceExpression",
        start: slices[0] ?? null,
        stop: slices[1] ?? null,
        step: slices[2] ?? null,
      });
    }
    if (slices.length === 0) return this.#mk(start, { type: "BlankExpression" });
    return slices[0]!;
  }

  #parsePrimary(): Node {
    const start = this.#current;
    const t = this.#next();
    switch (t.type) {
      case "numeric_literal":
        return t.value.includes(".")
          ? this.#mk(start, { type: "FloatLiteral", value: parseFloat(t.value) })
          : this.#mk(start, { type: "IntegerLiteral", value: parseInt(t.value, 10) });
      case "string_literal": {
        let value = t.value;
        while (this.#is("string_literal")) value += this.#next().value;
        return this.#mk(start, { type: "StringLiteral", value });
      }
      case "identifier":
        return this.#mk(start, { type: "Identifier", value: t.value });
      case "open_paren": {
        const expr = this.#parseExpressionSequence();
        this.#expect("close_paren", "Expected )");
        return expr;
      }
      case "open_square_bracket": {
        const value: Node[] = [];
        while (!this.#is("close_square_bracket")) {
          if (this.#is("eof")) this.#next();
          value.push(this.#parseExpression());
          if (this.#is("comma")) ++this.#current;
        }
        ++this.#current;
        return this.#mk(start, { type: "ArrayLiteral", value });
      }
      case "open_curly_bracket": {
        const value: [Node, Node][] = [];
        while (!this.#is("close_curly_bracket")) {
          if (this.#is("eof")) this.#next();
          const key = this.#parseExpression();
          this.#expect("colon", "Expected :");
          value.push([key, this.#parseExpression()]);
          if (this.#is("comma")) ++this.#current;
        }
        ++this.#current;
        return this.#mk(start, { type: "ObjectLiteral", value });
      }
      default:
        throw new JinjaError(`Unexpected token: ${t.value} of type ${t.type}`);
    }
  }
}

/** Parses template source into its tree; throws {@linkcode JinjaError} on a syntax error. */
export function parse(source: string): Program & { source: string } {
  const lexed = tokenize(source);
  return { ...new Parser(lexed.tokens, lexed.source).parse(), source: lexed.source };
}
