/**
 * Grammars as a logit processor of the generation core: a
 * {@linkcode GrammarConstraint} keeps one sequence's {@linkcode GrammarMatcher}
 * and offers the sequence llama.cpp's fast path — sample as if unconstrained,
 * check that one token, and mask the whole vocabulary only when it is
 * rejected (`common_sampler_sample` with `grammar_first = false`).
 *
 * Compiled grammars are kept per tokenizer (a few, most recently used) so a
 * server answering the same schema again does not rebuild its caches.
 *
 * @example Constrain a sequence to "yes" or "no"
 * ```ts
 * import { Model } from "../model/mod.ts";
 * import { Tokenizer } from "../tokenizer/mod.ts";
 * import { grammarConstraint } from "./constraint.ts";
 * const tokenizer = Tokenizer.fromGguf(Model.load("stories260K.gguf").gguf);
 * const constraint = grammarConstraint(tokenizer, { grammar: `root ::= "yes" | "no"` });
 * // new Sequence(tokenizer, { sampler, processors: [constraint] })
 * ```
 *
 * @module
 */
import type { LogitProcessor } from "../generation/processors.ts";
import { parseGbnf } from "./gbnf.ts";
import { GrammarError } from "./gbnf.ts";
import { jsonObjectGrammar, jsonSchemaToGrammar } from "./json_schema.ts";
import {
  type CompiledTriggers,
  compileTriggers,
  type GrammarTrigger,
  LazyGrammarConstraint,
} from "./lazy.ts";
import { CompiledGrammar, type GrammarMatcher, MAX_STACK_NODES } from "./matcher.ts";
import { tokenTrie, type TrieTokenizer } from "./token_trie.ts";

/** Compiled grammars kept per tokenizer. */
export const COMPILED_GRAMMARS_KEPT = 16;

/** What a grammar constraint needs from a tokenizer. */
export interface ConstraintTokenizer extends TrieTokenizer {
  encode(text: string, options?: { addSpecial?: boolean; parseSpecial?: boolean }): number[];
}

/** One of the ways to ask for constrained output. */
export interface ConstraintSpec {
  /** GBNF text (llama.cpp's format); its start rule is `root`. */
  grammar?: string;
  /** A JSON Schema the output must validate against. */
  jsonSchema?: unknown;
  /** Any JSON object (OpenAI's `response_format: {type: "json_object"}`). */
  jsonObject?: boolean;
  /**
   * Makes the grammar lazy: the text is free until one of these triggers
   * appears, then the grammar constrains it from the trigger on (tool calls).
   */
  triggers?: readonly GrammarTrigger[];
  /** Text a lazy grammar's trigger buffer starts with (a chat's generation prompt). */
  triggerPrefix?: string;
}

/** The GBNF text a spec asks for, or undefined when it asks for nothing. Throws on two at once. */
export function constraintGrammar(spec: ConstraintSpec): string | undefined {
  const given =
    [spec.grammar !== undefined, spec.jsonSchema !== undefined, spec.jsonObject === true]
      .filter(Boolean).length;
  if (given > 1) throw new GrammarError("give one of a grammar, a JSON schema or JSON object mode");
  if (spec.grammar !== undefined) return spec.grammar;
  if (spec.jsonSchema !== undefined) return jsonSchemaToGrammar(spec.jsonSchema);
  if (spec.jsonObject) return jsonObjectGrammar();
  return undefined;
}

const compiled = new WeakMap<TrieTokenizer, Map<string, CompiledGrammar>>();

/** The grammar `text` compiled for `tokenizer` (cached). Throws {@linkcode GrammarError}. */
export function compileGrammar(text: string, tokenizer: ConstraintTokenizer): CompiledGrammar {
  let kept = compiled.get(tokenizer);
  if (kept === undefined) compiled.set(tokenizer, kept = new Map());
  const hit = kept.get(text);
  // A grammar shared by many requests keeps every state they reached: past
  // half the limit it starts afresh (sequences on the old one keep it).
  if (hit !== undefined && hit.size < MAX_STACK_NODES / 2) {
    kept.delete(text);
    kept.set(text, hit);
    return hit;
  }
  const grammar = parseGbnf(text, "root", (piece) => {
    const ids = tokenizer.encode(piece, { addSpecial: false, parseSpecial: true });
    if (ids.length !== 1) throw new Error(`it is ${ids.length} tokens, not one`);
    return ids[0];
  });
  const result = new CompiledGrammar(grammar, tokenTrie(tokenizer));
  kept.set(text, result);
  if (kept.size > COMPILED_GRAMMARS_KEPT) kept.delete(kept.keys().next().value!);
  return result;
}

/** A sequence's grammar, as a logit processor with the one-token fast path. */
export class GrammarConstraint implements LogitProcessor {
  readonly matcher: GrammarMatcher;

  constructor(grammar: CompiledGrammar) {
    this.matcher = grammar.matcher();
  }

  /** True when `token` may come next. */
  allows(token: number): boolean {
    return this.matcher.allows(token);
  }

  /** Masks every token the grammar does not allow; throws when none is left. */
  process(logits: Float32Array): void {
    if (this.matcher.mask(logits) === 0) {
      throw new GrammarError("no token of the vocabulary can continue the grammar here");
    }
  }

  accept(token: number): void {
    this.matcher.accept(token);
  }
}

/**
 * `triggers` compiled for `tokenizer` (a `token` trigger must be one token).
 * A `word` that is one special token (`<tool_call>`, `[TOOL_CALLS]`) becomes
 * a trigger token, as llama-server makes it: the grammar starts at that
 * token, not at the same text spelled in pieces. Throws
 * {@linkcode GrammarError}.
 */
export function compileGrammarTriggers(
  triggers: readonly GrammarTrigger[],
  tokenizer: ConstraintTokenizer,
): CompiledTriggers {
  const special = (text: string) =>
    tokenizer.encode(text, { addSpecial: false, parseSpecial: true }).length === 1 &&
    tokenizer.encode(text, { addSpecial: false, parseSpecial: false }).length > 1;
  const resolved = triggers.map((t): GrammarTrigger =>
    t.kind === "word" && special(t.value) ? { kind: "token", value: t.value } : t
  );
  return compileTriggers(resolved, (text) => {
    const ids = tokenizer.encode(text, { addSpecial: false, parseSpecial: true });
    if (ids.length !== 1) throw new Error(`it is ${ids.length} tokens, not one`);
    return ids[0];
  });
}

/**
 * A compiled grammar's processor for one sequence: lazy when `triggers` are
 * given, its trigger buffer starting with `triggerPrefix` (see
 * {@linkcode LazyGrammarConstraint}).
 */
export function constraintProcessor(
  grammar: CompiledGrammar,
  triggers?: CompiledTriggers,
  triggerPrefix = "",
): GrammarConstraint | LazyGrammarConstraint {
  return triggers === undefined
    ? new GrammarConstraint(grammar)
    : new LazyGrammarConstraint(grammar, triggers, triggerPrefix);
}

/**
 * A constraint for `spec` on `tokenizer`, or undefined when the spec asks for
 * none. Throws {@linkcode GrammarError} (or the schema converter's
 * `SchemaError`) for a grammar or schema that cannot be used.
 */
export function grammarConstraint(
  tokenizer: ConstraintTokenizer,
  spec: ConstraintSpec,
): GrammarConstraint | LazyGrammarConstraint | undefined {
  const text = constraintGrammar(spec);
  if (text === undefined) {
    if (spec.triggers !== undefined) throw new GrammarError("triggers without a grammar");
    return undefined;
  }
  const triggers = spec.triggers === undefined
    ? undefined
    : compileGrammarTriggers(spec.triggers, tokenizer);
  return constraintProcessor(compileGrammar(text, tokenizer), triggers, spec.triggerPrefix);
}
