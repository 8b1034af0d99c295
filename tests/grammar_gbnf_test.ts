/**
 * GBNF parsing and the grammar matcher: errors with their place, the
 * language each construct means (checked over a byte vocabulary, so strings
 * cross UTF-8 characters token by token), and the fast matcher's masks
 * against a literal port of llama.cpp's algorithm (`_reference_grammar.ts`)
 * on the real stories260K and SmolLM2 vocabularies.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { compileGrammar } from "../src/grammar/constraint.ts";
import { GrammarError, parseGbnf } from "../src/grammar/gbnf.ts";
import { CompiledGrammar } from "../src/grammar/matcher.ts";
import { TokenTrie } from "../src/grammar/token_trie.ts";
import { parseGguf } from "../src/gguf/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { ReferenceGrammar } from "./_reference_grammar.ts";
import { testdata } from "./_testdata.ts";

/** 256 one-byte tokens and an end-of-generation token (256). */
const byteVocab = {
  vocabSize: 257,
  pieceBytes: (id: number) => (id < 256 ? Uint8Array.of(id) : new TextEncoder().encode("</s>")),
  isEog: (id: number) => id === 256,
};
const byteTrie = new TokenTrie(byteVocab);

/** True when the grammar takes all of `text`, byte by byte, and may end there. */
function matches(grammar: string, text: string): boolean {
  const m = new CompiledGrammar(parseGbnf(grammar), byteTrie).matcher();
  for (const b of new TextEncoder().encode(text)) {
    if (!m.allows(b)) return false;
    m.accept(b);
  }
  return m.allows(256);
}

function parseError(grammar: string): GrammarError {
  try {
    parseGbnf(grammar);
  } catch (error) {
    assert.ok(error instanceof GrammarError, String(error));
    return error;
  }
  assert.fail(`no error for ${JSON.stringify(grammar)}`);
}

Deno.test("gbnf: a parse error names its line and column", () => {
  const cases: [string, RegExp, number, number][] = [
    ['root := "a"', /expecting ::=/, 1, 6],
    ['root ::= "a"\nx ::= "b" | "c\n', /end of input in a string/, 3, 1],
    ['root ::= "\\q"', /unknown escape/, 1, 11],
    ["root ::= [a-z\n", /end of input in a character class/, 2, 1],
    ['root ::= ("a" "b"', /expecting '\)'/, 1, 18],
    ["root ::= {3}", /expecting an item/, 1, 10],
    ['root ::= "a"{2000,}\n\nb ::= "b"{2001}', /repetition bound above 2000/, 3, 10],
    ["root ::= [a-z]{5,2}", /max < min/, 1, 15],
    ['root ::= "\\x4"', /expecting 2 hex digits/, 1, 13],
    ['root ::= "a"\n  ::= "b"', /expecting a newline or the end|expecting a name/, 2, 3],
    ["root ::= <think>", /needs a vocabulary/, 1, 10],
    ['root ::= "a" ] "b"', /expecting a newline or the end/, 1, 14],
  ];
  for (const [text, message, line, column] of cases) {
    const e = parseError(text);
    assert.match(e.message, message, text);
    assert.equal(`${e.line}:${e.column}`, `${line}:${column}`, `${text}: ${e.message}`);
  }
});

Deno.test("gbnf: whole-grammar errors are named", () => {
  assert.match(parseError('root ::= a\nb ::= "b"').message, /undefined rule 'a'/);
  assert.match(parseError('start ::= "a"').message, /no 'root' rule/);
  assert.match(parseError('root ::= x\nx ::= y "a"\ny ::= x | "b"').message, /left recursion/);
  // a repetition that may be empty before the rule itself
  assert.match(parseError('root ::= "a"* root').message, /left recursion/);
  assert.match(parseError("").message, /empty/);
  assert.match(parseError('root ::= "a\u0000"').message, /NUL/);
  assert.match(parseError("root ::= " + "(".repeat(300) + '"a"' + ")".repeat(300)).message, /nest/);
  assert.match(parseError('root ::= ("a" | "b"){50}{50}').message, /more than 2000/);
});

Deno.test("gbnf: each construct means what llama.cpp's README says", () => {
  const cases: [string, string[], string[]][] = [
    // grammar, accepted, refused
    ['root ::= "yes" | "no"', ["yes", "no"], ["", "y", "yes!", "No"]],
    ["root ::= [a-c]+ [^a-c]", ["ad", "abcz", "a9"], ["a", "abc", "dd", "aa\n\n"]],
    ['root ::= "x" .', ["xy", "xé", "x😀"], ["x", "xyz"]],
    ["root ::= [0-9]{2,3}", ["12", "123"], ["1", "1234", ""]],
    ["root ::= [0-9]{2}", ["12"], ["1", "123"]],
    ["root ::= [0-9]{2,}", ["12", "12345"], ["1"]],
    ['root ::= "a"? "b"* "c"+', ["c", "abbc", "bccc"], ["", "ab", "aabc"]],
    ['root ::= ("ab" | "c")* "."', [".", "abc.", "cab."], ["a.", "abab", "cab.c."]],
    ['root ::= ("a"?)*', ["", "aaa"], ["b"]],
    ['root ::= "\\x41\\u00e9\\U0001F600\\t\\n\\\\\\"\\[\\]\\-"', ['Aé😀\t\n\\"[]-'], ["Ae"]],
    ["root ::= [\\x00-\\x7F]+", ["ascii ok"], ["café"]],
    ['root ::= [ぁ-ゟ]+ "。"', ["ひらがな。"], ["カタカナ。", "ひら"]],
    ['root ::= [^"\\\\]*', ["free text é", ""], ['a"b', "a\\b"]],
    ['root ::= x # a comment\nx ::= "1" |\r\n  "2" # another\n', ["1", "2"], ["12"]],
    ['root ::= ( "a" ) ( "b" )', ["ab"], ["a b"]],
  ];
  for (const [grammar, good, bad] of cases) {
    for (const s of good) {
      assert.ok(matches(grammar, s), `${grammar} should take ${JSON.stringify(s)}`);
    }
    for (const s of bad) {
      assert.ok(!matches(grammar, s), `${grammar} should refuse ${JSON.stringify(s)}`);
    }
  }
});

const JSON_GRAMMAR = String.raw`
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
`;

Deno.test("gbnf: a JSON grammar takes JSON and refuses the rest", () => {
  for (const s of ['{"a": [1, -2.5e3, true, null, "x\\n\\u00e9"]}', "{}", '{"k":{"n":[]}}']) {
    assert.ok(matches(JSON_GRAMMAR, s), s);
  }
  for (const s of ['{"a": 01}', '{"a" 1}', "[1]", '{"a": "\u0001"}', '{"a": tru}', "{} {}"]) {
    assert.ok(!matches(JSON_GRAMMAR, s), s);
  }
});

function loadTokenizer(path: string): Tokenizer {
  return Tokenizer.fromGguf(parseGguf(readFileSync(path)));
}

/** A seeded xorshift generator. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/**
 * Walks `steps` random allowed tokens; at each step compares the fast
 * matcher's mask and its one-token check with the reference on `probe`
 * tokens (all of them for a small vocabulary).
 */
function compareWithReference(
  tokenizer: Tokenizer,
  grammar: string,
  steps: number,
  seed: number,
  probeAll: boolean,
): number {
  const compiled = compileGrammar(grammar, tokenizer);
  const fast = compiled.matcher();
  const ref = new ReferenceGrammar(
    compiled.grammar,
    (id) => tokenizer.pieceBytes(id, true),
    (id) => tokenizer.isEog(id),
  );
  const V = tokenizer.vocabSize;
  const random = rng(seed);
  let compared = 0;
  for (let step = 0; step < steps; step++) {
    const logits = new Float32Array(V);
    const count = fast.mask(logits);
    const allowed: number[] = [];
    for (let t = 0; t < V; t++) if (logits[t] === 0) allowed.push(t);
    assert.equal(allowed.length, count, "the mask's count");
    const probe = probeAll ? Array.from({ length: V }, (_, t) => t) : [
      ...allowed,
      ...Array.from({ length: 2000 }, () => Math.floor(random() * V)),
    ];
    for (const t of probe) {
      const expected = ref.allows(t);
      assert.equal(
        logits[t] === 0,
        expected,
        `step ${step}: mask of token ${t} ${JSON.stringify(tokenizer.tokenToPiece(t))}`,
      );
      assert.equal(fast.allows(t), expected, `step ${step}: check of token ${t}`);
      compared++;
    }
    const choices = allowed.filter((t) => !tokenizer.isEog(t));
    if (choices.length === 0) break;
    const pick = choices[Math.floor(random() * choices.length)];
    fast.accept(pick);
    ref.accept(pick);
  }
  return compared;
}

const GRAMMARS: Record<string, string> = {
  json: JSON_GRAMMAR,
  japanese: 'root ::= ([ぁ-ゟ゠-ヿ一-鿿] | "、" | "。")+ "\\n"?',
  classes: 'root ::= "<" [^<>]* ">" . [a-zA-Z0-9_]{1,3} ("!" | "?")*',
  lists: 'root ::= item ("\\n" item){0,4}\nitem ::= "- " [a-z ]{1,12} ([0-9]+ "x")?',
  // bounded repetitions: the pass proves whole subtrees taken along a chain of states
  bounded: 'root ::= "\\"" [^"\\\\]{0,40} "\\"" [a-z]{2,5}',
};

Deno.test("matcher: masks equal llama.cpp's algorithm on stories260K (byte tokens, partial UTF-8)", () => {
  const tokenizer = loadTokenizer(testdata("models", "stories260K.gguf"));
  let compared = 0;
  for (const [name, grammar] of Object.entries(GRAMMARS)) {
    for (const seed of [1, 2, 3]) {
      compared += compareWithReference(tokenizer, grammar, 24, seed * 7 + name.length, true);
    }
  }
  assert.ok(compared > 100_000, `compared ${compared}`);
});

Deno.test("matcher: masks equal llama.cpp's algorithm on SmolLM2's 49k vocabulary", () => {
  const tokenizer = loadTokenizer(testdata("models", "SmolLM2-135M-Instruct.Q4_1.gguf"));
  for (const [name, grammar] of Object.entries(GRAMMARS)) {
    compareWithReference(tokenizer, grammar, 10, 11 + name.length, false);
  }
  // token references: by id and by text, and their negation
  const im = tokenizer.encode("<|im_end|>", { addSpecial: false, parseSpecial: true });
  assert.equal(im.length, 1);
  compareWithReference(tokenizer, `root ::= [a-z]+ "." <|im_end|> !<[${im[0]}]> "x"`, 8, 5, false);
  compareWithReference(tokenizer, `root ::= <[${im[0]}]> [a-z]{1,3}`, 4, 6, false);
});

Deno.test("matcher: end-of-generation only where the grammar may end", () => {
  const m = new CompiledGrammar(parseGbnf('root ::= "ab" "c"?'), byteTrie).matcher();
  assert.ok(!m.allows(256));
  m.accept(0x61);
  assert.ok(!m.allows(256));
  m.accept(0x62);
  assert.ok(m.allows(256) && m.allows(0x63));
  m.accept(0x63);
  const logits = new Float32Array(257);
  assert.equal(m.mask(logits), 1); // only the end is left
  assert.equal(logits[256], 0);
});

Deno.test("matcher: a token id outside the vocabulary and an ambiguous explosion are errors", () => {
  assert.throws(
    () => new CompiledGrammar(parseGbnf("root ::= <[300]>"), byteTrie),
    /outside the vocabulary/,
  );
  // every split of a run of a's is a parse: the stack sets stay bounded or it is an error
  const g = new CompiledGrammar(parseGbnf('root ::= x+\nx ::= "a" | "a" "a" | "a" x'), byteTrie);
  const m = g.matcher();
  for (let i = 0; i < 200; i++) {
    try {
      if (!m.allows(0x61)) break;
      m.accept(0x61);
    } catch (error) {
      assert.ok(error instanceof GrammarError && /ambiguous|stack entries/.test(error.message));
      break;
    }
  }
});
