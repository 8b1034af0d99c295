/**
 * Lazy grammars: generation runs free until a trigger appears in the text
 * (a tool-call marker such as `<tool_call>`), then the grammar constrains
 * the rest — llama.cpp's `llama_sampler_init_grammar_lazy_patterns`, step
 * for step:
 *
 * - every generated token's piece is appended to a buffer (bytes, as
 *   llama.cpp's `std::string`), and after each token every trigger pattern is
 *   searched in it; a pattern anchored at both ends (`^…$`) must match the
 *   whole buffer (tried first), any other may match anywhere;
 * - on a match the grammar starts at the first non-empty capture group (else
 *   at the match), and the tokens from there on are replayed into it (the
 *   first one from the matching byte on);
 * - a trigger token starts the grammar with that token.
 *
 * Triggers are given as llama.cpp's `common_grammar_trigger`s: a `word` (the
 * literal text), a `pattern` (a regular expression searched anywhere), a
 * `pattern_full` (anchored at both ends) or a `token` (the text of one
 * token). Patterns are ECMAScript regular expressions, as `std::regex`
 * reads them, matched over bytes like llama.cpp's (a non-ASCII literal
 * matches its UTF-8 bytes).
 *
 * @example
 * ```ts
 * import { compileTriggers } from "./lazy.ts";
 * const triggers = compileTriggers([{ kind: "word", value: "<tool_call>" }], () => 0);
 * if (triggers.patterns[0].find(bytes("Sure. <tool_call>{")) !== 6) throw new Error();
 * function bytes(s: string) { return String.fromCharCode(...new TextEncoder().encode(s)); }
 * ```
 *
 * @module
 */
import type { LogitProcessor } from "../generation/processors.ts";
import { GrammarError } from "./gbnf.ts";
import type { CompiledGrammar, GrammarMatcher } from "./matcher.ts";

/** What starts a lazy grammar (llama.cpp's `common_grammar_trigger`). */
export interface GrammarTrigger {
  /** `word`: literal text; `pattern`: a regex searched anywhere; `pattern_full`: a regex the whole text matches; `token`: one token's text. */
  kind: "word" | "pattern" | "pattern_full" | "token";
  value: string;
}

/** Most bytes a lazy grammar buffers while it waits (the text is kept free past it). */
export const MAX_TRIGGER_BUFFER = 1 << 20;

/** One compiled trigger pattern: llama.cpp's `llama_grammar_trigger_pattern`. */
export class TriggerPattern {
  readonly #regex: RegExp;

  /** `pattern` is a regex source; throws {@linkcode GrammarError} when it does not compile. */
  constructor(pattern: string) {
    try {
      // `d`: capture groups' indices. A pattern anchored at both ends can only match the
      // whole input, so one search is llama.cpp's `regex_match` then `regex_search`.
      this.#regex = new RegExp(binary(pattern), "d");
    } catch (error) {
      throw new GrammarError(
        `trigger pattern ${JSON.stringify(pattern)}: ${(error as Error).message}`,
      );
    }
  }

  /**
   * Where the grammar starts in `input` (bytes as a binary string: one char
   * per byte): the first non-empty capture group's start, else the match's;
   * -1 when the pattern is not in it.
   */
  find(input: string): number {
    const m = this.#regex.exec(input);
    if (m === null) return -1;
    const indices = m.indices!;
    for (let i = 1; i < indices.length; i++) {
      const g = indices[i];
      if (g !== undefined && g[1] > g[0]) return g[0];
    }
    return m.index;
  }
}

/** The UTF-8 bytes of `s` as one char per byte. */
function binary(s: string): string {
  const bytes = new TextEncoder().encode(s);
  let out = "";
  for (const b of bytes) out += String.fromCharCode(b);
  return out;
}

/** Regex-escapes `word` as llama.cpp's `regex_escape`. */
function escapeRegex(word: string): string {
  return word.replace(/[.^$|()*+?[\]{}\\]/g, "\\$&");
}

/** Compiled triggers: patterns and token ids. */
export interface CompiledTriggers {
  patterns: TriggerPattern[];
  tokens: Set<number>;
}

/**
 * Compiles `triggers`; `tokenOf` maps a `token` trigger's text to its id
 * (throwing when it is not one token). Throws {@linkcode GrammarError}.
 */
export function compileTriggers(
  triggers: readonly GrammarTrigger[],
  tokenOf: (text: string) => number,
): CompiledTriggers {
  if (triggers.length === 0) throw new GrammarError("a lazy grammar needs at least one trigger");
  const patterns: TriggerPattern[] = [], tokens = new Set<number>();
  for (const t of triggers) {
    switch (t.kind) {
      case "word":
        patterns.push(new TriggerPattern(escapeRegex(t.value)));
        break;
      case "pattern":
        patterns.push(new TriggerPattern(t.value));
        break;
      case "pattern_full": {
        const p = t.value;
        patterns.push(
          new TriggerPattern(
            p === "" ? "^$" : (p.startsWith("^") ? "" : "^") + p + (p.endsWith("$") ? "" : "$"),
          ),
        );
        break;
      }
      case "token": {
        let id: number;
        try {
          id = tokenOf(t.value);
        } catch (error) {
          throw new GrammarError(
            `trigger token ${JSON.stringify(t.value)}: ${(error as Error).message}`,
          );
        }
        tokens.add(id);
        break;
      }
      default:
        throw new GrammarError(
          `unknown trigger kind ${JSON.stringify((t as GrammarTrigger).kind)}`,
        );
    }
  }
  return { patterns, tokens };
}

/**
 * A sequence's lazy grammar: free until a trigger, then the grammar's
 * constraint (with the one-token fast path).
 */
export class LazyGrammarConstraint implements LogitProcessor {
  readonly matcher: GrammarMatcher;
  readonly #triggers: CompiledTriggers;
  #awaiting = true;
  #buffer = "";
  /** Each buffered token and where its piece starts in the buffer. */
  #tokens: number[] = [];
  #starts: number[] = [];

  /**
   * `prefix`: text the buffer starts with, before the first generated token
   * (the chat template's generation prompt, which some formats' trigger
   * patterns begin with); fed to the grammar, as no token's, only when a
   * trigger starts inside it.
   */
  constructor(grammar: CompiledGrammar, triggers: CompiledTriggers, prefix = "") {
    this.matcher = grammar.matcher();
    this.#triggers = triggers;
    if (prefix !== "") {
      this.#tokens.push(-1);
      this.#starts.push(0);
      this.#buffer = binary(prefix);
    }
  }

  /** True while no trigger has appeared (every token is allowed). */
  get awaitingTrigger(): boolean {
    return this.#awaiting;
  }

  allows(token: number): boolean {
    return this.#awaiting || this.matcher.allows(token);
  }

  process(logits: Float32Array): void {
    if (this.#awaiting) return;
    if (this.matcher.mask(logits) === 0) {
      throw new GrammarError("no token of the vocabulary can continue the grammar here");
    }
  }

  accept(token: number): void {
    if (!this.#awaiting) return this.matcher.accept(token);
    if (this.#triggers.tokens.has(token)) {
      this.#awaiting = false;
      this.#clear();
      this.matcher.accept(token);
      return;
    }
    const trie = this.matcher.grammar.trie;
    const piece = trie.piece(token);
    if (this.#buffer.length + piece.length > MAX_TRIGGER_BUFFER) return;
    this.#tokens.push(token);
    this.#starts.push(this.#buffer.length);
    for (const b of piece) this.#buffer += String.fromCharCode(b);
    for (const pattern of this.#triggers.patterns) {
      const at = pattern.find(this.#buffer);
      if (at < 0) continue;
      this.#awaiting = false;
      const buffer = this.#buffer, tokens = this.#tokens, starts = this.#starts;
      this.#clear();
      for (let i = 0; i < tokens.length; i++) {
        const end = i + 1 < tokens.length ? starts[i + 1] : buffer.length;
        if (end <= at) continue;
        const from = Math.max(starts[i], at);
        const bytes = new Uint8Array(end - from);
        for (let k = 0; k < bytes.length; k++) bytes[k] = buffer.charCodeAt(from + k);
        this.matcher.acceptPiece(tokens[i], bytes);
      }
      return;
    }
  }

  #clear(): void {
    this.#buffer = "";
    this.#tokens = [];
    this.#starts = [];
  }
}
