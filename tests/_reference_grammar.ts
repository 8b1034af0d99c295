/**
 * A slow, literal port of llama.cpp's grammar matching (src/llama-grammar.cpp:
 * `llama_grammar_advance_stack`, `llama_grammar_reject_candidates_for_stack`,
 * `llama_grammar_accept_token`) over dotllm's parsed rule table: stacks are
 * plain arrays of element positions, nothing is shared or cached. The tests
 * compare the fast matcher's masks with it, token by token.
 *
 * @module
 */
import { El, type Grammar } from "../src/grammar/gbnf.ts";
import { decodeUtf8, type PartialUtf8 } from "../src/grammar/token_trie.ts";

type Stack = number[];

const isEnd = (t: number) => t === El.END || t === El.ALT;

/** One sequence's grammar state, as llama.cpp keeps it. */
export class ReferenceGrammar {
  stacks: Stack[];
  partial: PartialUtf8 = { value: 0, remain: 0 };

  constructor(
    readonly g: Grammar,
    readonly piece: (id: number) => Uint8Array,
    readonly isEog: (id: number) => boolean,
  ) {
    this.stacks = [];
    let pos = g.ruleStart[g.root];
    for (;;) {
      this.#advance(isEnd(g.types[pos]) ? [] : [pos], this.stacks);
      while (!isEnd(g.types[pos])) pos++;
      if (g.types[pos] === El.ALT) pos++;
      else break;
    }
  }

  #advance(stack: Stack, out: Stack[]): void {
    const { types, values, ruleStart } = this.g;
    const todo = [stack];
    const seen = new Set<string>();
    while (todo.length > 0) {
      const s = todo.pop()!;
      const key = s.join(",");
      if (seen.has(key)) continue;
      seen.add(key);
      if (s.length === 0) {
        if (!out.some((o) => o.length === 0)) out.push(s);
        continue;
      }
      const pos = s[s.length - 1];
      if (types[pos] === El.RULE_REF) {
        let sub = ruleStart[values[pos]];
        for (;;) {
          const next = s.slice(0, -1);
          if (!isEnd(types[pos + 1])) next.push(pos + 1);
          if (!isEnd(types[sub])) next.push(sub);
          todo.push(next);
          while (!isEnd(types[sub])) sub++;
          if (types[sub] === El.ALT) sub++;
          else break;
        }
      } else if (!out.some((o) => o.join(",") === key)) {
        out.push(s);
      }
    }
  }

  #match(pos: number, cp: number): [boolean, number] {
    const { types, values } = this.g;
    const positive = types[pos] === El.CHAR || types[pos] === El.CHAR_ANY;
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
    return [found === positive, pos];
  }

  #matchPartial(pos: number, p: PartialUtf8): boolean {
    const { types, values } = this.g;
    const positive = types[pos] === El.CHAR || types[pos] === El.CHAR_ANY;
    if (p.remain < 0 || (p.remain === 1 && p.value < 2)) return false;
    let low = p.value << (p.remain * 6);
    const high = low | ((1 << (p.remain * 6)) - 1);
    if (low === 0) {
      if (p.remain === 2) low = 1 << 11;
      else if (p.remain === 3) low = 1 << 16;
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

  /** True when one stack of `stacks` does not reject code points `cps[i..]` then `partial`. */
  #accepts(
    stacks: Stack[],
    cps: number[],
    i: number,
    partial: PartialUtf8,
    id: number,
    first: boolean,
  ): boolean {
    const { types, values } = this.g;
    for (const stack of stacks) {
      if (stack.length === 0) {
        if (i === cps.length && partial.remain === 0) return true;
        continue;
      }
      const pos = stack[stack.length - 1];
      if (types[pos] === El.TOKEN || types[pos] === El.TOKEN_NOT) {
        if (i === cps.length) {
          if (partial.remain === 0) return true;
        } else if (first && (types[pos] === El.TOKEN ? values[pos] === id : values[pos] !== id)) {
          return true; // (llama.cpp also accepts a token reference met mid-token; dotllm does not)
        }
        continue;
      }
      if (i === cps.length) {
        if (partial.remain === 0 || this.#matchPartial(pos, partial)) return true;
        continue;
      }
      const [ok, after] = this.#match(pos, cps[i]);
      if (!ok) continue;
      const next: Stack[] = [];
      const s = stack.slice(0, -1);
      if (!isEnd(types[after])) s.push(after);
      this.#advance(s, next);
      if (this.#accepts(next, cps, i + 1, partial, id, false)) return true;
    }
    return false;
  }

  /** llama.cpp's verdict on token `id` (`llama_grammar_apply_impl`). */
  allows(id: number): boolean {
    if (this.isEog(id)) return this.stacks.some((s) => s.length === 0);
    const bytes = cString(this.piece(id));
    if (bytes.length === 0) return false;
    const cps: number[] = [];
    const partial = decodeUtf8(bytes, this.partial, cps);
    if (partial.remain < 0) return false;
    return this.#accepts(this.stacks, cps, 0, partial, id, true);
  }

  /** `llama_grammar_accept_token`. */
  accept(id: number): void {
    if (this.isEog(id)) return;
    const { types, values } = this.g;
    const cps: number[] = [];
    const partial = decodeUtf8(cString(this.piece(id)), this.partial, cps);
    const out: Stack[] = [];
    const add = (s: Stack) => {
      if (!out.some((o) => o.join(",") === s.join(","))) out.push(s);
    };
    for (const stack of this.stacks) {
      if (stack.length === 0) continue;
      const pos = stack[stack.length - 1];
      if (types[pos] === El.TOKEN || types[pos] === El.TOKEN_NOT) {
        if (types[pos] === El.TOKEN ? values[pos] === id : values[pos] !== id) {
          const s = stack.slice(0, -1);
          if (!isEnd(types[pos + 1])) s.push(pos + 1);
          const next: Stack[] = [];
          this.#advance(s, next);
          next.forEach(add);
        }
        continue;
      }
      let current = [stack];
      for (const cp of cps) {
        const next: Stack[] = [];
        for (const s of current) {
          if (s.length === 0) continue;
          const top = s[s.length - 1];
          if (types[top] === El.TOKEN || types[top] === El.TOKEN_NOT) continue;
          const [ok, after] = this.#match(top, cp);
          if (!ok) continue;
          const n = s.slice(0, -1);
          if (!isEnd(types[after])) n.push(after);
          this.#advance(n, next);
        }
        current = next;
        if (current.length === 0) break;
      }
      current.forEach(add);
    }
    if (out.length === 0) throw new Error(`reference: token ${id} empties the grammar`);
    this.stacks = out;
    this.partial = partial;
  }
}

function cString(bytes: Uint8Array): Uint8Array {
  const nul = bytes.indexOf(0);
  return nul < 0 ? bytes : bytes.subarray(0, nul);
}
