/**
 * The grammar matcher: llama.cpp's pushdown automaton (src/llama-grammar.cpp:
 * a set of stacks of grammar positions, advanced one code point at a time),
 * made fast by sharing.
 *
 * - A stack is a hash-consed list node `(position, parent)`, so equal stacks
 *   are one integer and a push allocates at most once per distinct stack.
 * - A set of stacks is interned as a *state*; the state reached from a state
 *   by a code point is computed once and cached (a lazily built DFA).
 * - The allowed tokens of a state are found by one forward pass over the
 *   vocabulary's preorder trie ({@linkcode TokenTrie}), skipping every
 *   subtree whose prefix the grammar rejects, and cached per state.
 *
 * A {@linkcode GrammarMatcher} is one sequence's position in a
 * {@linkcode CompiledGrammar}: a state and a partial UTF-8 character. It
 * accepts exactly the tokens llama.cpp's `llama_grammar_apply_impl` leaves
 * unmasked, with one difference: a token reference (`<[id]>`) reached in the
 * middle of a token rejects it, where llama.cpp accepts it and then fails.
 *
 * @module
 */
import { El, type Grammar, GrammarError } from "./gbnf.ts";
import { decodeUtf8, type PartialUtf8, TokenKind, type TokenTrie } from "./token_trie.ts";

/** Most stacks one state may hold (an ambiguous grammar would otherwise grow without bound). */
export const MAX_STACKS_PER_STATE = 4096;
/** Most distinct stack nodes one compiled grammar may create. */
export const MAX_STACK_NODES = 1 << 21;
/** Bytes of allowed-token masks kept per compiled grammar (least recently used go first). */
export const MASK_CACHE_BYTES = 32 << 20;

const EMPTY = 0; // the empty stack
const DEAD = -1; // the state with no stacks
const UNKNOWN = -2;

/** Longest road {@linkcode CompiledGrammar} follows to prove a subtree taken. */
const MAX_CHAIN = 64;
/** Fewest tokens below a trie node for which the pass works out the state's road. */
const ROAD_MIN_TOKENS = 64;

/** A state's main road: see `CompiledGrammar.#chain`. */
interface Chain {
  ascii: Int32Array;
  other: boolean;
  next: number;
  /** Steps the road keeps its code points (Infinity: it loops); -1 until known. */
  run: number;
}

const NO_ROAD: Chain = { ascii: new Int32Array(4), other: false, next: DEAD, run: -1 };

/** True when road `outer` takes at least the code points of road `inner`. */
function contains(outer: Chain, inner: Chain): boolean {
  for (let k = 0; k < 4; k++) if ((inner.ascii[k] & ~outer.ascii[k]) !== 0) return false;
  return outer.other || !inner.other;
}

/** The tokens one state allows: the allowed ids when few, else the forbidden ones. */
export interface TokenMask {
  /** How many tokens are allowed. */
  readonly count: number;
  readonly allowed?: Int32Array;
  readonly forbidden?: Int32Array;
}

/** A grammar bound to a vocabulary, with the caches every sequence using it shares. */
export class CompiledGrammar {
  readonly grammar: Grammar;
  readonly trie: TokenTrie;
  readonly #types: Uint8Array;
  readonly #values: Uint32Array;
  /** For a char element: the index just past its class. */
  readonly #charEnd: Int32Array;
  // stack nodes
  readonly #nodePos: number[] = [-1];
  readonly #nodeParent: number[] = [-1];
  readonly #nodeIds = new Map<number, number>();
  readonly #advanced: (Int32Array | undefined)[] = [];
  // states
  readonly #stateStacks: Int32Array[] = [];
  readonly #stateCanEnd: boolean[] = [];
  readonly #stateIds = new Map<string, number>();
  readonly #asciiNext: (Int32Array | undefined)[] = [];
  readonly #classes: ({ bounds: Int32Array; next: Int32Array } | undefined)[] = [];
  readonly #masks = new Map<number, TokenMask>();
  #maskBytes = 0;
  readonly #chains: (Chain | undefined)[] = [];
  readonly #tokenStacks: (boolean | undefined)[] = [];
  /** The state before any token. */
  readonly start: number;

  constructor(grammar: Grammar, trie: TokenTrie) {
    this.grammar = grammar;
    this.trie = trie;
    const { types, values, ruleStart, root } = grammar;
    this.#types = types;
    this.#values = values;
    for (let i = 0; i < types.length; i++) {
      if ((types[i] === El.TOKEN || types[i] === El.TOKEN_NOT) && values[i] >= trie.vocabSize) {
        throw new GrammarError(
          `token <[${values[i]}]> is outside the vocabulary [0, ${trie.vocabSize})`,
        );
      }
    }
    const charEnd = new Int32Array(types.length);
    for (let i = 0; i < types.length; i++) {
      const t = types[i];
      if (t === El.CHAR || t === El.CHAR_NOT || t === El.CHAR_ANY) {
        let p = i;
        do {
          p += types[p + 1] === El.CHAR_RNG_UPPER ? 2 : 1;
        } while (types[p] === El.CHAR_ALT);
        charEnd[i] = p;
      }
    }
    this.#charEnd = charEnd;
    // the initial stacks: each alternative of the start rule
    const stacks = new Set<number>();
    let pos = ruleStart[root];
    for (;;) {
      const node = isEnd(types[pos]) ? EMPTY : this.#push(EMPTY, pos);
      for (const s of this.#advance(node)) stacks.add(s);
      while (!isEnd(types[pos])) pos++;
      if (types[pos] === El.ALT) pos++;
      else break;
    }
    this.start = this.#intern(stacks);
  }

  /** Stack nodes and states made so far (a cache that grew large is worth rebuilding). */
  get size(): number {
    return this.#nodePos.length + this.#stateStacks.length;
  }

  /** A new sequence's matcher at the grammar's start. */
  matcher(): GrammarMatcher {
    return new GrammarMatcher(this);
  }

  /** True when the grammar may end in `state` (a stack is empty): end-of-generation is allowed. */
  canEnd(state: number): boolean {
    return this.#stateCanEnd[state];
  }

  #push(parent: number, pos: number): number {
    const key = parent * this.#types.length + pos;
    let id = this.#nodeIds.get(key);
    if (id === undefined) {
      id = this.#nodePos.length;
      if (id >= MAX_STACK_NODES) {
        throw new GrammarError(`the grammar needs more than ${MAX_STACK_NODES} stack entries`);
      }
      this.#nodePos.push(pos);
      this.#nodeParent.push(parent);
      this.#nodeIds.set(key, id);
    }
    return id;
  }

  /** llama.cpp's `llama_grammar_advance_stack`: the stacks `node` expands to, each at a terminal or empty. */
  #advance(node: number): Int32Array {
    const cached = this.#advanced[node];
    if (cached !== undefined) return cached;
    const types = this.#types, values = this.#values, ruleStart = this.grammar.ruleStart;
    const out: number[] = [];
    const seen = new Set<number>();
    const todo = [node];
    while (todo.length > 0) {
      const s = todo.pop()!;
      if (seen.has(s)) continue;
      seen.add(s);
      if (s === EMPTY) {
        out.push(s);
        continue;
      }
      const pos = this.#nodePos[s];
      if (types[pos] === El.RULE_REF) {
        const parent = this.#nodeParent[s];
        const base = isEnd(types[pos + 1]) ? parent : this.#push(parent, pos + 1);
        let sub = ruleStart[values[pos]];
        for (;;) {
          todo.push(isEnd(types[sub]) ? base : this.#push(base, sub));
          while (!isEnd(types[sub])) sub++;
          if (types[sub] === El.ALT) sub++;
          else break;
        }
      } else {
        out.push(s);
      }
      if (out.length > MAX_STACKS_PER_STATE) throw tooAmbiguous();
    }
    const result = Int32Array.from(out);
    this.#advanced[node] = result;
    return result;
  }

  #intern(stacks: Set<number>): number {
    if (stacks.size === 0) return DEAD;
    if (stacks.size > MAX_STACKS_PER_STATE) throw tooAmbiguous();
    const sorted = Int32Array.from(stacks).sort();
    const key = sorted.join(",");
    let id = this.#stateIds.get(key);
    if (id === undefined) {
      id = this.#stateStacks.length;
      this.#stateStacks.push(sorted);
      this.#stateCanEnd.push(sorted[0] === EMPTY);
      this.#asciiNext.push(undefined);
      this.#classes.push(undefined);
      this.#stateIds.set(key, id);
    }
    return id;
  }

  /** The state after code point `cp` in `state` (DEAD when no stack takes it). */
  next(state: number, cp: number): number {
    if (cp < 128) {
      const table = this.#ascii(state);
      let n = table[cp];
      if (n === UNKNOWN) n = table[cp] = this.#nextByClass(state, cp);
      return n;
    }
    return this.#nextByClass(state, cp);
  }

  /**
   * The state after `cp`, cached per interval of code points that every
   * character class of the state treats alike (so a state inside a JSON
   * string computes a handful of transitions, not one per character).
   */
  #nextByClass(state: number, cp: number): number {
    const classes = this.#classes[state] ??= this.#classBounds(state);
    const bounds = classes.bounds;
    let lo = 0, hi = bounds.length; // the last bound <= cp
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      if (bounds[mid] <= cp) lo = mid;
      else hi = mid;
    }
    let n = classes.next[lo];
    if (n === UNKNOWN) n = classes.next[lo] = this.#step(state, cp);
    return n;
  }

  /** Where the character classes of `state`'s stacks may change their answer. */
  #classBounds(state: number): { bounds: Int32Array; next: Int32Array } {
    const types = this.#types, values = this.#values;
    const points = new Set<number>([0]);
    for (const s of this.#stateStacks[state]) {
      if (s === EMPTY) continue;
      let pos = this.#nodePos[s];
      const t = types[pos];
      if (t !== El.CHAR && t !== El.CHAR_NOT && t !== El.CHAR_ANY) continue;
      do {
        if (types[pos + 1] === El.CHAR_RNG_UPPER) {
          points.add(values[pos]).add(values[pos + 1] + 1);
          pos += 2;
        } else {
          if (types[pos] !== El.CHAR_ANY) points.add(values[pos]).add(values[pos] + 1);
          pos += 1;
        }
      } while (types[pos] === El.CHAR_ALT);
    }
    const bounds = Int32Array.from(points).sort();
    return { bounds, next: new Int32Array(bounds.length).fill(UNKNOWN) };
  }

  /** llama.cpp's `llama_grammar_accept` of one code point over every stack of `state`. */
  #step(state: number, cp: number): number {
    const out = new Set<number>();
    const types = this.#types;
    for (const s of this.#stateStacks[state]) {
      if (s === EMPTY) continue;
      const pos = this.#nodePos[s];
      const t = types[pos];
      if (t === El.TOKEN || t === El.TOKEN_NOT) continue;
      if (!this.#matchChar(pos, cp)) continue;
      const parent = this.#nodeParent[s];
      const after = this.#charEnd[pos];
      const node = isEnd(types[after]) ? parent : this.#push(parent, after);
      for (const n of this.#advance(node)) out.add(n);
    }
    return this.#intern(out);
  }

  #matchChar(pos: number, cp: number): boolean {
    const types = this.#types, values = this.#values;
    const positive = types[pos] !== El.CHAR_NOT;
    let found = false;
    do {
      if (types[pos + 1] === El.CHAR_RNG_UPPER) {
        found ||= values[pos] <= cp && cp <= values[pos + 1];
        pos += 2;
      } else if (types[pos] === El.CHAR_ANY) {
        found = true;
        pos += 1;
      } else {
        found ||= values[pos] === cp;
        pos += 1;
      }
    } while (types[pos] === El.CHAR_ALT);
    return found === positive;
  }

  /** llama.cpp's `llama_grammar_match_partial_char`: could the partial character complete to one `pos` takes? */
  #matchPartial(pos: number, value: number, remain: number): boolean {
    const types = this.#types, values = this.#values;
    const positive = types[pos] !== El.CHAR_NOT;
    if (remain < 0 || (remain === 1 && value < 2)) return false;
    let low = value << (remain * 6);
    const high = low | ((1 << (remain * 6)) - 1);
    if (low === 0) {
      if (remain === 2) low = 1 << 11;
      else if (remain === 3) low = 1 << 16;
    }
    do {
      if (types[pos + 1] === El.CHAR_RNG_UPPER) {
        if (values[pos] <= high && low <= values[pos + 1]) return positive;
        pos += 2;
      } else if (types[pos] === El.CHAR_ANY) {
        return true;
      } else {
        if (low <= values[pos] && values[pos] <= high) return positive;
        pos += 1;
      }
    } while (types[pos] === El.CHAR_ALT);
    return !positive;
  }

  /** True when some stack of `state` sits on a character class a partial character could complete into. */
  partialFits(state: number, value: number, remain: number): boolean {
    if (remain === 0) return true;
    for (const s of this.#stateStacks[state]) {
      if (s === EMPTY) continue;
      const pos = this.#nodePos[s];
      const t = this.#types[pos];
      if (t === El.TOKEN || t === El.TOKEN_NOT) continue;
      if (this.#matchPartial(pos, value, remain)) return true;
    }
    return false;
  }

  /** True when a token-reference stack of `state` takes token `id` as a whole. */
  tokenFits(state: number, id: number): boolean {
    for (const s of this.#stateStacks[state]) {
      if (s === EMPTY) continue;
      const pos = this.#nodePos[s];
      const t = this.#types[pos];
      if (
        t === El.TOKEN ? this.#values[pos] === id : t === El.TOKEN_NOT && this.#values[pos] !== id
      ) {
        return true;
      }
    }
    return false;
  }

  /** The state after whole token `id` taken by the token-reference stacks of `state`, into `out`. */
  tokenStep(state: number, id: number, out: Set<number>): void {
    const types = this.#types;
    for (const s of this.#stateStacks[state]) {
      if (s === EMPTY) continue;
      const pos = this.#nodePos[s];
      const t = types[pos];
      if (
        t === El.TOKEN ? this.#values[pos] === id : t === El.TOKEN_NOT && this.#values[pos] !== id
      ) {
        const parent = this.#nodeParent[s];
        const node = isEnd(types[pos + 1]) ? parent : this.#push(parent, pos + 1);
        for (const n of this.#advance(node)) out.add(n);
      }
    }
  }

  /** The stacks of `state` that a token can continue with characters (not empty, not at a token reference). */
  charStacks(state: number, out: Set<number>): void {
    for (const s of this.#stateStacks[state]) {
      if (s === EMPTY) continue;
      const t = this.#types[this.#nodePos[s]];
      if (t !== El.TOKEN && t !== El.TOKEN_NOT) out.add(s);
    }
  }

  /** All stacks of `state`, into `out`. */
  stacks(state: number, out: Set<number>): void {
    for (const s of this.#stateStacks[state]) out.add(s);
  }

  /** Interns a set of stacks (DEAD when empty). */
  state(stacks: Set<number>): number {
    return this.#intern(stacks);
  }

  /** True when `state` has a token-reference stack. */
  hasTokenStacks(state: number): boolean {
    let known = this.#tokenStacks[state];
    if (known === undefined) known = this.#tokenStacks[state] = this.#findTokenStacks(state);
    return known;
  }

  #findTokenStacks(state: number): boolean {
    for (const s of this.#stateStacks[state]) {
      if (s === EMPTY) continue;
      const t = this.#types[this.#nodePos[s]];
      if (t === El.TOKEN || t === El.TOKEN_NOT) return true;
    }
    return false;
  }

  /**
   * The tokens allowed at the start of a token in `state` (no partial
   * character pending): one pass over the trie, cached per state.
   */
  mask(state: number): TokenMask {
    const cached = this.#masks.get(state);
    if (cached !== undefined) {
      this.#masks.delete(state); // most recently used goes last
      this.#masks.set(state, cached);
      return cached;
    }
    const trie = this.trie;
    const bits = new Uint32Array((trie.vocabSize + 31) >>> 5);
    let count = 0;
    const allow = (t: number) => {
      const w = t >>> 5, b = 1 << (t & 31);
      if ((bits[w] & b) === 0) {
        bits[w] |= b;
        count++;
      }
    };
    if (this.canEnd(state)) { for (const t of trie.eog) allow(t); }
    if (this.hasTokenStacks(state)) {
      for (let t = 0; t < trie.vocabSize; t++) {
        if (trie.kind[t] === TokenKind.TEXT && this.tokenFits(state, t)) allow(t);
      }
    }
    // The trie pass: stateAt[d] is the state after the first d code points of the
    // current path, asciiAt[d] its table of ASCII transitions.
    const { nodeCp, nodeDepth, nodeEnd, nodeTokens, tokens, partialValue, partialRemain } = trie;
    const { belowAscii, belowOther, tokensBefore, height } = trie;
    const stateAt = new Int32Array(trie.maxDepth + 1);
    const asciiAt: Int32Array[] = new Array(trie.maxDepth + 1);
    stateAt[0] = state;
    asciiAt[0] = this.#ascii(state);
    const rootEnd = nodeTokens[1];
    for (let k = nodeTokens[0]; k < rootEnd; k++) { // tokens that are only a partial character
      const t = tokens[k];
      if (this.partialFits(state, partialValue[t], partialRemain[t])) allow(t);
    }
    const n = trie.nodeCount;
    for (let i = 1; i < n;) {
      const d = nodeDepth[i];
      const cp = nodeCp[i];
      let s: number;
      if (cp < 128) {
        const table = asciiAt[d - 1];
        s = table[cp];
        if (s === UNKNOWN) s = table[cp] = this.#nextByClass(stateAt[d - 1], cp);
      } else {
        s = this.#nextByClass(stateAt[d - 1], cp);
      }
      if (s === DEAD) {
        i = nodeEnd[i];
        continue;
      }
      if (stateAt[d] !== s || asciiAt[d] === undefined) {
        stateAt[d] = s;
        asciiAt[d] = this.#ascii(s);
      }
      // (a road longer than a loop is worth following only for a subtree of many tokens)
      const chain = this.#chain(s, tokensBefore[nodeEnd[i]] - tokensBefore[i] >= ROAD_MIN_TOKENS);
      if (
        height[i] <= chain.run &&
        (belowAscii[4 * i] & ~chain.ascii[0]) === 0 &&
        (belowAscii[4 * i + 1] & ~chain.ascii[1]) === 0 &&
        (belowAscii[4 * i + 2] & ~chain.ascii[2]) === 0 &&
        (belowAscii[4 * i + 3] & ~chain.ascii[3]) === 0 &&
        (belowOther[i] === 0 || chain.other)
      ) {
        // every path below stays on the chain from s, never past its end: the subtree is taken
        const end = tokensBefore[nodeEnd[i]];
        for (let k = tokensBefore[i]; k < end; k++) {
          const t = tokens[k];
          if (partialRemain[t] !== 0 && !this.#partialAfter(s, t, d)) continue;
          const w = t >>> 5, b = 1 << (t & 31);
          if ((bits[w] & b) === 0) {
            bits[w] |= b;
            count++;
          }
        }
        i = nodeEnd[i];
        continue;
      }
      const end = nodeTokens[2 * i + 1];
      for (let k = nodeTokens[2 * i]; k < end; k++) {
        const t = tokens[k];
        if (partialRemain[t] === 0 || this.partialFits(s, partialValue[t], partialRemain[t])) {
          const w = t >>> 5, b = 1 << (t & 31);
          if ((bits[w] & b) === 0) {
            bits[w] |= b;
            count++;
          }
        }
      }
      i++;
    }
    const mask = maskOf(bits, count, trie.vocabSize);
    this.#masks.set(state, mask);
    this.#maskBytes += maskBytes(mask);
    while (this.#maskBytes > MASK_CACHE_BYTES && this.#masks.size > 1) {
      const [oldest, old] = this.#masks.entries().next().value!;
      this.#masks.delete(oldest);
      this.#maskBytes -= maskBytes(old);
    }
    return mask;
  }

  /**
   * The state's main road: the code points that all lead to one next state
   * (128 ASCII bits, and whether every other code point does too), that
   * state, and how many steps the road keeps taking at least those code
   * points (Infinity for a state that loops on them: inside a JSON string;
   * a count for a bounded repetition: a string of at most 40 characters).
   */
  #chain(state: number, follow: boolean): Chain {
    const known = this.#chains[state] ??= this.#road(state);
    if (known.run >= 0) return known;
    if (known.next === state) {
      known.run = Infinity;
      return known;
    }
    if (!follow) return NO_ROAD;
    const walk: Chain[] = []; // roads whose run is one more than the next one's
    const seen = new Set<number>();
    let s = state;
    let run: number;
    for (;;) {
      const c = this.#chains[s] ??= this.#road(s);
      if (c.run >= 0) { // known
        run = c.run;
        break;
      }
      if (c.next === DEAD) {
        run = c.run = 0;
        break;
      }
      if (c.next === s || seen.has(s)) { // the road loops: it never ends
        run = c.run = Infinity;
        break;
      }
      seen.add(s);
      walk.push(c);
      if (walk.length >= MAX_CHAIN) {
        run = 0;
        break;
      }
      const d = this.#chains[c.next] ??= this.#road(c.next);
      if (!contains(d, c)) { // one step, then the road takes less
        run = 0;
        break;
      }
      s = c.next;
    }
    for (let k = walk.length - 1; k >= 0; k--) {
      run = run === Infinity ? Infinity : run + 1;
      walk[k].run = run;
    }
    return this.#chains[state]!;
  }

  /** The road of `state` (its class and next state; `run` unknown, -1). */
  #road(state: number): Chain {
    const classes = this.#classes[state] ??= this.#classBounds(state);
    const bounds = classes.bounds;
    const targets = new Int32Array(bounds.length);
    const cover = new Map<number, number>();
    for (let k = 0; k < bounds.length; k++) {
      const lo = bounds[k], hi = k + 1 < bounds.length ? bounds[k + 1] - 1 : 0x10ffff;
      const t = targets[k] = this.#nextByClass(state, lo);
      if (t === DEAD) continue;
      const n = lo < 128 ? Math.min(hi, 127) - lo + 1 : 0.5; // ASCII first
      cover.set(t, (cover.get(t) ?? 0) + n);
    }
    let next = DEAD, best = 0;
    for (const [t, n] of cover) {
      if (n > best) {
        best = n;
        next = t;
      }
    }
    const ascii = new Int32Array(4);
    let other = next !== DEAD;
    for (let k = 0; k < bounds.length; k++) {
      const lo = bounds[k], hi = k + 1 < bounds.length ? bounds[k + 1] - 1 : 0x10ffff;
      const on = next !== DEAD && targets[k] === next;
      if (lo < 128 && on) {
        for (let c = lo; c <= Math.min(hi, 127); c++) ascii[c >> 5] |= 1 << (c & 31);
      }
      if (hi >= 128 && !on) other = false;
    }
    return { ascii, other, next, run: -1 };
  }

  /** True when token `t`'s trailing partial character fits where its code points from index `from` lead from `state`. */
  #partialAfter(state: number, t: number, from: number): boolean {
    const trie = this.trie;
    let s = state;
    for (let i = trie.cpStart[t] + from; i < trie.cpStart[t + 1]; i++) {
      s = this.next(s, trie.cps[i]);
      if (s === DEAD) return false;
    }
    return this.partialFits(s, trie.partialValue[t], trie.partialRemain[t]);
  }

  #ascii(state: number): Int32Array {
    return this.#asciiNext[state] ??= new Int32Array(128).fill(UNKNOWN);
  }
}

function maskBytes(mask: TokenMask): number {
  return 4 * (mask.allowed?.length ?? mask.forbidden!.length);
}

/** A mask as the shorter of its allowed and its forbidden ids. */
function maskOf(bits: Uint32Array, count: number, vocabSize: number): TokenMask {
  const dense = count * 2 > vocabSize;
  const ids = new Int32Array(dense ? vocabSize - count : count);
  let k = 0;
  for (let w = 0; w < bits.length; w++) {
    // the ids to list are the set bits (sparse) or the clear ones (dense) of this word
    let word = dense ? ~bits[w] : bits[w];
    if (dense && w === bits.length - 1 && (vocabSize & 31) !== 0) {
      word &= (1 << (vocabSize & 31)) - 1;
    }
    while (word !== 0) {
      const low = word & -word;
      ids[k++] = (w << 5) + 31 - Math.clz32(low);
      word ^= low;
    }
  }
  return dense ? { count, forbidden: ids } : { count, allowed: ids };
}

function isEnd(type: number): boolean {
  return type === El.END || type === El.ALT;
}

function tooAmbiguous(): GrammarError {
  return new GrammarError(
    `the grammar is too ambiguous: more than ${MAX_STACKS_PER_STATE} parses at once`,
  );
}

/** One sequence's position in a grammar. */
export class GrammarMatcher {
  readonly grammar: CompiledGrammar;
  #state: number;
  #partial: PartialUtf8 = { value: 0, remain: 0 };
  readonly #scratch: number[] = [];

  constructor(grammar: CompiledGrammar) {
    this.grammar = grammar;
    this.#state = grammar.start;
  }

  /** True when the grammar may end here (end-of-generation tokens are allowed). */
  get canEnd(): boolean {
    return this.grammar.canEnd(this.#state);
  }

  /** True when token `id` may come next (llama.cpp's check of the one sampled token). */
  allows(id: number): boolean {
    const g = this.grammar, trie = g.trie;
    const kind = trie.kind[id];
    if (kind === TokenKind.EOG) return this.canEnd;
    const state = this.#state;
    if (this.#partial.remain !== 0) { // the token must finish a character first
      const piece = trie.piece(id);
      if (piece.length === 0 || piece[0] === 0) return false;
      const cps = this.#scratch;
      const p = decodeUtf8(piece, this.#partial, cps);
      return this.#walks(state, cps, 0, cps.length, p);
    }
    if (kind === TokenKind.NEVER) return false;
    if (kind === TokenKind.TEXT && g.hasTokenStacks(state) && g.tokenFits(state, id)) return true;
    const from = trie.cpStart[id], to = trie.cpStart[id + 1];
    return this.#walks(state, trie.cps, from, to, {
      value: trie.partialValue[id],
      remain: trie.partialRemain[id],
    });
  }

  #walks(
    state: number,
    cps: ArrayLike<number>,
    from: number,
    to: number,
    partial: PartialUtf8,
  ): boolean {
    if (partial.remain < 0) return false;
    if (from === to && partial.remain === 0) return false;
    const g = this.grammar;
    let s = state;
    for (let i = from; i < to; i++) {
      s = g.next(s, cps[i]);
      if (s === DEAD) return false;
    }
    return g.partialFits(s, partial.value, partial.remain);
  }

  /**
   * Sets the logits of every token the grammar does not allow here to
   * -Infinity. Returns how many tokens stay allowed.
   */
  mask(logits: Float32Array): number {
    if (this.#partial.remain !== 0) return this.#maskAfterPartial(logits);
    const { count, allowed, forbidden } = this.grammar.mask(this.#state);
    if (allowed !== undefined) {
      const keep = new Float32Array(allowed.length);
      for (let i = 0; i < allowed.length; i++) keep[i] = logits[allowed[i]];
      logits.fill(-Infinity);
      for (let i = 0; i < allowed.length; i++) logits[allowed[i]] = keep[i];
    } else {
      for (let i = 0; i < forbidden!.length; i++) logits[forbidden![i]] = -Infinity;
    }
    return count;
  }

  #maskAfterPartial(logits: Float32Array): number {
    const trie = this.grammar.trie;
    const allowed = new Uint8Array(trie.vocabSize);
    let count = 0;
    if (this.canEnd) {
      for (const t of trie.eog) {
        allowed[t] = 1;
        count++;
      }
    }
    for (const t of trie.continuations) {
      if (trie.kind[t] !== TokenKind.EOG && this.allows(t)) {
        allowed[t] = 1;
        count++;
      }
    }
    for (let t = 0; t < logits.length; t++) if (!allowed[t]) logits[t] = -Infinity;
    return count;
  }

  /** Advances over token `id` (which {@linkcode allows} must have accepted). */
  accept(id: number): void {
    const g = this.grammar, trie = g.trie;
    const kind = trie.kind[id];
    if (kind === TokenKind.EOG) {
      if (!this.canEnd) {
        throw new GrammarError(`token ${id} ends generation where the grammar cannot end`);
      }
      return;
    }
    const state = this.#state;
    // The common case: whole characters, no character pending, no token reference to
    // match: the next state is where the token's code points lead (already interned).
    if (kind === TokenKind.TEXT && this.#partial.remain === 0 && !g.hasTokenStacks(state)) {
      let s = state;
      for (let i = trie.cpStart[id]; i < trie.cpStart[id + 1] && s !== DEAD; i++) {
        s = g.next(s, trie.cps[i]);
      }
      if (s === DEAD) throw new GrammarError(`token ${id} does not continue the grammar`);
      this.#state = s;
      this.#partial = { value: trie.partialValue[id], remain: trie.partialRemain[id] };
      return;
    }
    this.#acceptPiece(id, trie.piece(id));
  }

  /**
   * Advances over `piece` as the text of token `id`: a lazy grammar replays
   * the tail of the token its trigger starts in (llama.cpp's
   * `llama_grammar_accept_token` with a partial piece); `id` -1: text that
   * is no token's (it matches no token reference). Throws
   * {@linkcode GrammarError} when the piece does not continue the grammar.
   */
  acceptPiece(id: number, piece: Uint8Array): void {
    if (id >= 0 && this.grammar.trie.kind[id] === TokenKind.EOG) return this.accept(id);
    this.#acceptPiece(id, piece);
  }

  #acceptPiece(id: number, piece: Uint8Array): void {
    const g = this.grammar, state = this.#state;
    const cps = this.#scratch;
    const partial = decodeUtf8(piece, this.#partial, cps);
    const out = new Set<number>();
    if (this.#partial.remain === 0 && id >= 0) g.tokenStep(state, id, out);
    if (partial.remain >= 0) {
      if (cps.length === 0) {
        g.charStacks(state, out);
      } else {
        let s = state;
        for (const cp of cps) {
          s = g.next(s, cp);
          if (s === DEAD) break;
        }
        if (s !== DEAD) g.stacks(s, out);
      }
    }
    const next = g.state(out);
    if (next === DEAD) {
      throw new GrammarError(`token ${id} does not continue the grammar`);
    }
    this.#state = next;
    this.#partial = partial;
  }
}
