/**
 * Structured output: GBNF grammars (llama.cpp's format), JSON Schema
 * converted to GBNF as llama.cpp converts it, and the matcher that constrains
 * a sequence's tokens to them — a logit processor of the generation core.
 *
 * @example Any JSON value matching a schema
 * ```ts
 * import { jsonSchemaToGrammar, parseGbnf } from "./mod.ts";
 * const gbnf = jsonSchemaToGrammar({ type: "object", properties: { ok: { type: "boolean" } } });
 * parseGbnf(gbnf); // throws GrammarError (with line and column) on a bad grammar
 * ```
 *
 * @module
 */
export {
  compileGrammar,
  compileGrammarTriggers,
  constraintGrammar,
  constraintProcessor,
  type ConstraintSpec,
  type ConstraintTokenizer,
  GrammarConstraint,
  grammarConstraint,
} from "./constraint.ts";
export { type Grammar, GrammarError, MAX_REPETITION, parseGbnf } from "./gbnf.ts";
export {
  gbnfLiteral,
  jsonObjectGrammar,
  jsonSchemaToGrammar,
  SchemaError,
  SchemaRules,
} from "./json_schema.ts";
export {
  type CompiledTriggers,
  type GrammarTrigger,
  LazyGrammarConstraint,
  MAX_TRIGGER_BUFFER,
} from "./lazy.ts";
export { CompiledGrammar, GrammarMatcher } from "./matcher.ts";
export { tokenTrie } from "./token_trie.ts";
