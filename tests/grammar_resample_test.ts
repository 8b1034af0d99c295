/**
 * The sequence's resample after a refused token looks for the few tokens
 * the sampler is decided by (greedy: the best allowed one; top-k: the k best
 * allowed) among the best-scored ones instead of masking the vocabulary.
 * Here it must pick exactly what llama.cpp's resample picks — every token
 * masked, then the sampler on the whole row — step for step, greedy and
 * sampled (the generator drawn the same number of times), on the real
 * SmolLM2 vocabulary and a JSON grammar, over rows where the allowed tokens
 * are sometimes among the best and sometimes not.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Sequence } from "../src/generation/mod.ts";
import { compileGrammar, GrammarConstraint } from "../src/grammar/mod.ts";
import { parseGguf } from "../src/gguf/mod.ts";
import { Sampler } from "../src/sampler/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { prng } from "./_fuzz.ts";
import { testdata } from "./_testdata.ts";

const JSON_GRAMMAR = String.raw`
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) ){0,24} "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ws
ws ::= | " " | "\n" [ \t]{0,4}
`;

Deno.test("resample: the few deciding tokens give llama.cpp's sample (greedy and top-k)", () => {
  const tokenizer = Tokenizer.fromGguf(
    parseGguf(readFileSync(testdata("models", "SmolLM2-135M-Instruct.Q4_1.gguf"))),
  );
  const V = tokenizer.vocabSize;
  const grammar = compileGrammar(JSON_GRAMMAR, tokenizer);
  const settings = [
    { temperature: 0 },
    { temperature: 1, topK: 40 },
    { temperature: 0.7, topK: 5, topP: 0.9, minP: 0.05 },
    { temperature: 1, topK: 0 }, // every token may matter: the whole row is masked
  ];
  let steps = 0;
  for (const [n, params] of settings.entries()) {
    for (let seed = 1; seed <= 16; seed++) {
      const ours = new Sequence(tokenizer, {
        sampler: new Sampler(V, params, seed),
        processors: [new GrammarConstraint(grammar)],
        maxTokens: 400,
      });
      // llama.cpp's way, written out: sample; if refused, mask every token and sample again
      const theirs = grammar.matcher();
      const sampler = new Sampler(V, params, seed);
      const rand = prng(100 * n + seed);
      const logits = new Float32Array(V);
      const masked = new Float32Array(V);
      while (!ours.finished) {
        // random scores, with a share of the allowed tokens raised among the best, or not
        masked.fill(0);
        theirs.mask(masked);
        const lift = rand() < 0.7 ? 4 + 4 * rand() : 0;
        for (let t = 0; t < V; t++) {
          logits[t] = 2 * (rand() + rand() + rand() - 1.5);
          if (masked[t] === 0 && rand() < 0.3) logits[t] += lift;
        }
        let want = sampler.sample(logits);
        if (!theirs.allows(want)) {
          masked.set(logits);
          theirs.mask(masked);
          want = sampler.sample(masked);
        }
        const got = ours.step(logits);
        assert.equal(got, want, `settings ${n}, seed ${seed}, step ${steps}`);
        steps++;
        if (ours.finished) break;
        theirs.accept(want);
      }
    }
  }
  assert.ok(steps > 1000, `${steps} steps`);
});
