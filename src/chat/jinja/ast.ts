/**
 * The syntax tree of a parsed template (llama.cpp's `common/jinja/runtime.h`
 * statement and expression classes), one plain object per node.
 *
 * @module
 */
import type { Token } from "./lexer.ts";

interface At {
  /** Position in the normalized source, for error excerpts. */
  pos: number;
}

/** A node of the tree. */
export type Node =
  | At & { type: "Program"; body: Node[] }
  | At & { type: "If"; test: Node; body: Node[]; alternate: Node[] }
  | At & { type: "For"; loopvar: Node; iterable: Node; body: Node[]; defaultBlock: Node[] }
  | At & { type: "Break" }
  | At & { type: "Continue" }
  | At & { type: "Noop" }
  | At & { type: "Set"; assignee: Node; value: Node | null; body: Node[] }
  | At & { type: "Macro"; name: Node; args: Node[]; body: Node[] }
  | At & { type: "Comment"; value: string }
  | At & { type: "BlankExpression" }
  | At & { type: "MemberExpression"; object: Node; property: Node; computed: boolean }
  | At & { type: "CallExpression"; callee: Node; args: Node[] }
  | At & { type: "Identifier"; value: string }
  | At & { type: "IntegerLiteral"; value: number }
  | At & { type: "FloatLiteral"; value: number }
  | At & { type: "StringLiteral"; value: string }
  | At & { type: "ArrayLiteral"; value: Node[] }
  | At & { type: "TupleLiteral"; value: Node[] }
  | At & { type: "ObjectLiteral"; value: [Node, Node][] }
  | At & { type: "BinaryExpression"; op: Token; left: Node; right: Node }
  | At & { type: "FilterExpression"; operand: Node; filter: Node }
  | At & { type: "FilterStatement"; filter: Node; body: Node[] }
  | At & { type: "SelectExpression"; lhs: Node; test: Node }
  | At & { type: "TestExpression"; operand: Node; negate: boolean; test: Node }
  | At & { type: "UnaryExpression"; op: Token; argument: Node }
  | At & { type: "SliceExpression"; start: Node | null; stop: Node | null; step: Node | null }
  | At & { type: "KeywordArgumentExpression"; key: Node; value: Node }
  | At & { type: "SpreadExpression"; argument: Node }
  | At & { type: "CallStatement"; call: Node; callerArgs: Node[]; body: Node[] }
  | At & { type: "Ternary"; condition: Node; trueExpr: Node; falseExpr: Node };

/** The node of type `T`. */
export type NodeOf<T extends Node["type"]> = Extract<Node, { type: T }>;

/** A parsed template. */
export type Program = NodeOf<"Program">;
