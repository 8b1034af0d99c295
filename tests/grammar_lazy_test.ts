/**
 * Lazy grammars (tool calls' constraint): free text until a trigger, then
 * the grammar from the trigger on — the same tokens as llama-server's
 * `grammar_lazy` on SmolLM2-135M-Instruct F32 (goldens in
 * `tests/golden/grammar/llamacpp_lazy.json`, made by `make_lazy.ts` beside
 * them), plus the trigger rules llama.cpp applies (anchored patterns,
 * capture groups, a trigger that starts inside a token, trigger tokens).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generate } from "../src/generation/mod.ts";
import {
  compileGrammar,
  compileGrammarTriggers,
  grammarConstraint,
  GrammarError,
  type GrammarTrigger,
  LazyGrammarConstraint,
} from "../src/grammar/mod.ts";
import { TriggerPattern } from "../src/grammar/lazy.ts";
import { Context, Model } from "../src/model/mod.ts";
import { Sampler } from "../src/sampler/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { ladderF32 } from "./_quant_ladder.ts";
import { SMOLLM2_Q4_1 } from "./_server.ts";
import { repoRoot } from "./_testdata.ts";

const KINDS = ["token", "word", "pattern", "pattern_full"] as const;

interface Case {
  name: string;
  prompt: string;
  grammar: string;
  triggers: { type: number; value: string }[];
  text: string;
  tokens: number[];
  stop: string;
}

const CASES: Case[] = JSON.parse(
  readFileSync(join(repoRoot, "tests", "golden", "grammar", "llamacpp_lazy.json"), "utf8"),
).cases;

function triggers(c: Case): GrammarTrigger[] {
  return c.triggers.map((t) => ({ kind: KINDS[t.type], value: t.value }));
}

function bytes(s: string): string {
  return String.fromCharCode(...new TextEncoder().encode(s));
}

Deno.test("lazy grammar: greedy text and tokens equal llama-server's grammar_lazy on SmolLM2 F32", async () => {
  const model = Model.load(await ladderF32());
  const context = new Context(model, { threads: 2, contextSize: 512 });
  const tokenizer = Tokenizer.fromGguf(model.gguf);
  try {
    assert.ok(CASES.length >= 6);
    for (const c of CASES) {
      context.cache.clear();
      const constraint = grammarConstraint(tokenizer, {
        grammar: c.grammar,
        triggers: triggers(c),
      });
      assert.ok(constraint instanceof LazyGrammarConstraint);
      const r = await generate(
        { context },
        tokenizer,
        new Sampler(tokenizer.vocabSize, { temperature: 0 }, 1),
        { prompt: c.prompt, maxTokens: 48, processors: [constraint] },
      );
      assert.equal(r.text, c.text, c.name);
      // llama-server lists the end-of-generation token it stopped on; dotllm does not
      const want = c.tokens.filter((t) => !tokenizer.isEog(t));
      assert.deepEqual([...r.tokens], want, c.name);
      // the constraint engaged exactly where llama.cpp's trigger appears in the text
      const triggered = c.name !== "word that never appears";
      assert.equal(constraint.awaitingTrigger, !triggered, c.name);
    }
  } finally {
    context.close();
    model.close();
  }
});

Deno.test("lazy grammar: trigger patterns find where the grammar starts as llama.cpp's", () => {
  // a word is escaped: regex characters in it are literal
  const [word] = compileGrammarTriggers([{ kind: "word", value: "[TOOL_CALLS]" }], {
    vocabSize: 0,
    pieceBytes: () => new Uint8Array(),
    isEog: () => false,
    encode: () => [],
  }).patterns;
  assert.equal(word.find(bytes("ok [TOOL_CALLS][")), 3);
  assert.equal(word.find(bytes("ok T")), -1);
  // the first non-empty capture group starts the grammar, else the match
  assert.equal(new TriggerPattern(String.raw`\s*(<tool_call>)`).find(" \n<tool_call>"), 2);
  assert.equal(new TriggerPattern(String.raw`a(x)?(b)`).find("zab"), 2);
  assert.equal(new TriggerPattern(String.raw`a(x)?b`).find("zab"), 1);
  // anchored at both ends: the whole text must match
  const full = new TriggerPattern(String.raw`^(<think>[\s\S]*?</think>)?\s*(<tool_call>)[\s\S]*$`);
  assert.equal(full.find("<tool_call>{"), 0);
  assert.equal(full.find("<think>hm</think>\n<tool_call>{"), 0);
  assert.equal(full.find("Sure: <tool_call>{"), -1);
  // patterns match bytes, like std::regex over UTF-8: a non-ASCII literal matches its bytes
  const fancy = new TriggerPattern("<｜tool▁calls▁begin｜>");
  assert.equal(fancy.find(bytes("é <｜tool▁calls▁begin｜>")), 3);
  assert.throws(() => new TriggerPattern("(unclosed"), GrammarError);
});

Deno.test("lazy grammar: a trigger inside a token, a trigger token, and bad triggers (SmolLM2)", () => {
  const model = Model.load(SMOLLM2_Q4_1);
  try {
    const tokenizer = Tokenizer.fromGguf(model.gguf);
    const encode = (s: string) => tokenizer.encode(s, { addSpecial: false, parseSpecial: true });
    const grammar = compileGrammar(String.raw`root ::= "ity, which is " [a-z ]+ "."`, tokenizer);
    const lazy = new LazyGrammarConstraint(
      grammar,
      compileGrammarTriggers([{ kind: "word", value: "ity," }], tokenizer),
    );
    // free text: everything allowed, nothing masked
    for (const t of encode("A function for a")) {
      assert.ok(lazy.allows(t));
      lazy.accept(t);
    }
    const logits = new Float32Array(tokenizer.vocabSize).fill(1);
    lazy.process(logits);
    assert.ok(logits.every((x) => x === 1));
    // " city" starts the trigger inside the token: "ity" is replayed into the grammar
    const [city, comma] = encode(" city,");
    assert.equal(tokenizer.tokenToPiece(city), " city");
    lazy.accept(city);
    assert.ok(lazy.awaitingTrigger);
    lazy.accept(comma);
    assert.ok(!lazy.awaitingTrigger);
    assert.ok(lazy.allows(encode(" which")[0]));
    assert.ok(!lazy.allows(encode(" that")[0]));
    lazy.process(logits);
    assert.equal(logits[encode(" that")[0]], -Infinity);

    // a token trigger starts the grammar with that token
    const imStart = encode("<|im_start|>");
    assert.equal(imStart.length, 1);
    const byToken = new LazyGrammarConstraint(
      compileGrammar(String.raw`root ::= <|im_start|> "tool"`, tokenizer),
      compileGrammarTriggers([{ kind: "token", value: "<|im_start|>" }], tokenizer),
    );
    byToken.accept(encode("hello")[0]);
    assert.ok(byToken.awaitingTrigger);
    byToken.accept(imStart[0]);
    assert.ok(!byToken.awaitingTrigger);
    assert.ok(byToken.allows(encode("tool")[0]));
    assert.ok(!byToken.allows(encode("hello")[0]));

    assert.throws(
      () => compileGrammarTriggers([{ kind: "token", value: "two words" }], tokenizer),
      /trigger token "two words": it is 2 tokens, not one/,
    );
    assert.throws(() => compileGrammarTriggers([], tokenizer), /at least one trigger/);
    assert.throws(
      () => grammarConstraint(tokenizer, { triggers: [{ kind: "word", value: "x" }] }),
      /triggers without a grammar/,
    );
  } finally {
    model.close();
  }
});

Deno.test("lazy grammar: a word that is one special token triggers on that token only, as llama-server's", () => {
  const model = Model.load(SMOLLM2_Q4_1);
  try {
    const tokenizer = Tokenizer.fromGguf(model.gguf);
    const compiled = compileGrammarTriggers([{ kind: "word", value: "<|im_start|>" }], tokenizer);
    assert.deepEqual(
      [...compiled.tokens],
      tokenizer.encode("<|im_start|>", { parseSpecial: true }),
    );
    assert.equal(compiled.patterns.length, 0);
    // the same text spelled in ordinary pieces does not trigger
    const lazy = new LazyGrammarConstraint(
      compileGrammar(String.raw`root ::= <|im_start|> "x"`, tokenizer),
      compiled,
    );
    for (const t of tokenizer.encode("<|im_start|>", { parseSpecial: false })) lazy.accept(t);
    assert.ok(lazy.awaitingTrigger);
  } finally {
    model.close();
  }
});

Deno.test("lazy grammar: a prefix (the generation prompt) starts the trigger buffer, fed to the grammar only from the trigger on", () => {
  const model = Model.load(SMOLLM2_Q4_1);
  try {
    const tokenizer = Tokenizer.fromGguf(model.gguf);
    const encode = (s: string) => tokenizer.encode(s, { addSpecial: false, parseSpecial: true });
    const grammar = compileGrammar(String.raw`root ::= "{\"name\": \"" [a-z]+ "\"}"`, tokenizer);
    const triggers = compileGrammarTriggers(
      [{ kind: "pattern_full", value: String.raw`assistant\n\s*(\{\s*"name")[\s\S]*` }],
      tokenizer,
    );
    // the pattern only matches with the prefix in front
    const lazy = new LazyGrammarConstraint(grammar, triggers, "assistant\n");
    for (const t of encode(`{"name"`)) lazy.accept(t);
    assert.ok(!lazy.awaitingTrigger);
    assert.ok(lazy.allows(encode(":")[0]));
    assert.ok(!lazy.allows(encode(" hello")[0]));
    const none = new LazyGrammarConstraint(grammar, triggers);
    for (const t of encode(`{"name"`)) none.accept(t);
    assert.ok(none.awaitingTrigger);
    // a trigger inside the prefix feeds the prefix's text from there, as no token's
    const inPrefix = new LazyGrammarConstraint(
      grammar,
      compileGrammarTriggers([{ kind: "word", value: `{"na` }], tokenizer),
      `x {"na`,
    );
    inPrefix.accept(encode("me")[0]);
    assert.ok(!inPrefix.awaitingTrigger);
    assert.ok(inPrefix.allows(encode(`"`)[0]));
  } finally {
    model.close();
  }
});
