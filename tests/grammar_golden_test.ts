/**
 * The same tokens as llama.cpp under every grammar of its `grammars/`
 * folder, 7 inline grammars and 26 JSON schemas (goldens in
 * `tests/golden/grammar/`, made with the reference build; the commands are
 * in its README), on the real SmolLM2-135M-Instruct:
 *
 * - **F32** (the real weights dequantized, `models/smollm2-f32.gguf`, the
 *   file llama-quantize makes): dotllm's greedy text equals
 *   `llama-completion`'s, case for case. Here the two engines' logits agree
 *   to float rounding, so equal masks give equal text.
 * - **Q4_1** (the file as published): llama.cpp's own token ids are fed
 *   through dotllm's model and grammar. Every one of them must be allowed
 *   by dotllm's mask (the grammar exactness), and at every step dotllm's
 *   masked greedy choice must be llama.cpp's token, or a near tie: dotllm's
 *   logit of its own choice at most {@linkcode NEAR_TIE} above its logit of
 *   llama.cpp's (the two Q4_1 dot products round differently). Where no
 *   step is a near tie, dotllm's free greedy text must equal llama.cpp's.
 *
 * A schema dotllm's converter refuses on purpose (llama.cpp would ignore a
 * keyword) must be refused naming that keyword: {@linkcode REFUSED}.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generate } from "../src/generation/mod.ts";
import {
  compileGrammar,
  GrammarConstraint,
  jsonSchemaToGrammar,
  SchemaError,
} from "../src/grammar/mod.ts";
import { Batch, Context, Model } from "../src/model/mod.ts";
import { Sampler } from "../src/sampler/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { ensureLlamaCppSource } from "./_llamacpp_src.ts";
import { ladderF32 } from "./_quant_ladder.ts";
import { SMOLLM2_Q4_1 } from "./_server.ts";
import { repoRoot } from "./_testdata.ts";

/**
 * Largest gap, in logits, between dotllm's greedy choice and llama.cpp's
 * token on the Q4_1 file that counts as a near tie. dotllm's and llama.cpp's
 * Q4_1 logits each differ from the F32 ones by up to ~0.2 on these prompts,
 * so a choice can flip where the two best tokens are within ~0.4; the
 * widest gap measured over the goldens (2026-12-07) is 0.333, in 26 of 1,492
 * steps.
 */
const NEAR_TIE = 0.5;

/**
 * Schemas of the goldens dotllm refuses on purpose, and the keyword the
 * error must name (none: every golden schema is one llama.cpp enforces).
 */
const REFUSED: Record<string, RegExp> = {};

interface Case {
  name?: string;
  file?: string;
  sha256?: string;
  grammar?: string;
  schema?: unknown;
  prompt: string;
  text: string;
  stop: "eos" | "length";
  tokens: number[];
  /** False when llama-server's text for the request (which gave `tokens`) is not llama-completion's. */
  server_same_text: boolean;
  f32_text: string;
  f32_stop: "eos" | "length";
}

function load(file: string): Case[] {
  const path = join(repoRoot, "tests", "golden", "grammar", file);
  return (JSON.parse(readFileSync(path, "utf8")) as { cases: Case[] }).cases;
}

const CASES: Case[] = [
  ...load("llamacpp_grammars.json"),
  ...load("llamacpp_inline_grammars.json"),
  ...load("llamacpp_schemas.json"),
];

function label(c: Case): string {
  return `${c.file ?? c.name}: ${JSON.stringify(c.prompt).slice(0, 40)}`;
}

/** The case's GBNF text, or the refusal it must be. */
function gbnf(c: Case): string | undefined {
  if (c.file !== undefined) {
    const text = readFileSync(join(ensureLlamaCppSource(), "grammars", c.file));
    assert.equal(createHash("sha256").update(text).digest("hex"), c.sha256, c.file);
    return new TextDecoder().decode(text);
  }
  if (c.grammar !== undefined) return c.grammar;
  const refused = REFUSED[c.name!];
  try {
    const g = jsonSchemaToGrammar(c.schema);
    assert.equal(refused, undefined, `${c.name}: expected a refusal`);
    return g;
  } catch (error) {
    if (!(error instanceof SchemaError) || refused === undefined) throw error;
    assert.match(error.message, refused, c.name);
    return undefined;
  }
}

function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

async function greedy(context: Context, tokenizer: Tokenizer, grammar: string, prompt: string) {
  context.cache.clear();
  return await generate(
    { context },
    tokenizer,
    new Sampler(tokenizer.vocabSize, { temperature: 0 }, 1),
    {
      prompt,
      maxTokens: 48,
      processors: [new GrammarConstraint(compileGrammar(grammar, tokenizer))],
    },
  );
}

Deno.test("goldens: greedy text under grammars and schemas equals llama.cpp's on SmolLM2 F32", async () => {
  const model = Model.load(await ladderF32());
  const context = new Context(model, { threads: 2, contextSize: 512 });
  const tokenizer = Tokenizer.fromGguf(model.gguf);
  try {
    let compared = 0;
    for (const c of CASES) {
      const grammar = gbnf(c);
      if (grammar === undefined) continue;
      const r = await greedy(context, tokenizer, grammar, c.prompt);
      assert.equal(r.text, c.f32_text, label(c));
      assert.equal(r.finishReason === "stop" ? "eos" : "length", c.f32_stop, label(c));
      compared++;
    }
    assert.ok(compared >= CASES.length - Object.keys(REFUSED).length, `${compared}`);
  } finally {
    context.close();
    model.close();
  }
});

Deno.test("goldens: llama.cpp's tokens under grammars and schemas on SmolLM2 Q4_1, step by step", async () => {
  const model = Model.load(SMOLLM2_Q4_1);
  const context = new Context(model, { threads: 2, contextSize: 512 });
  const tokenizer = Tokenizer.fromGguf(model.gguf);
  const batch = new Batch(context.batchSize);
  let steps = 0, ties = 0, widest = 0, sameText = 0, cases = 0;
  try {
    for (const c of CASES) {
      const grammar = gbnf(c);
      if (grammar === undefined || !c.server_same_text) continue;
      cases++;
      const constraint = new GrammarConstraint(compileGrammar(grammar, tokenizer));
      context.cache.clear();
      const prompt = tokenizer.encode(c.prompt, { addSpecial: true, parseSpecial: true });
      batch.clear();
      prompt.forEach((id, i) => batch.add(id, i, 0, i === prompt.length - 1));
      context.decode(batch);
      // llama-server lists the end-of-generation token it stopped on; -1 stands for one it did not list
      const last = c.tokens[c.tokens.length - 1];
      const expected = c.stop === "eos" && !tokenizer.isEog(last) ? [...c.tokens, -1] : c.tokens;
      let tied = false;
      for (const [i, token] of expected.entries()) {
        const row = context.logits(0).slice();
        constraint.process(row);
        const want = token >= 0 ? token : argmaxEog(row, tokenizer);
        assert.ok(
          Number.isFinite(row[want]),
          `${label(c)}: step ${i}: llama.cpp's token ${want} ${
            JSON.stringify(tokenizer.tokenToPiece(want))
          } is masked`,
        );
        const ours = argmax(row);
        steps++;
        if (ours !== want) {
          const gap = row[ours] - row[want];
          assert.ok(
            gap <= NEAR_TIE,
            `${label(c)}: step ${i}: dotllm picks ${
              JSON.stringify(tokenizer.tokenToPiece(ours))
            } ` +
              `${gap.toFixed(3)} above llama.cpp's ${JSON.stringify(tokenizer.tokenToPiece(want))}`,
          );
          widest = Math.max(widest, gap);
          ties++;
          tied = true;
        }
        if (token < 0 || tokenizer.isEog(token)) break;
        constraint.accept(token);
        batch.clear();
        batch.add(token, prompt.length + i, 0, true);
        context.decode(batch);
      }
      const free = await greedy(context, tokenizer, grammar, c.prompt);
      if (free.text === c.text) sameText++;
      else {assert.ok(
          tied,
          `${label(c)}: no near tie, yet the text differs:\n${free.text}\n---\n${c.text}`,
        );}
    }
    console.log(
      `Q4_1: ${cases} cases, ${steps} steps, ${ties} near ties (widest ${widest.toFixed(3)}), ` +
        `${sameText} texts equal to llama.cpp's`,
    );
    assert.ok(sameText >= cases / 2, `${sameText} of ${cases}`);
  } finally {
    context.close();
    model.close();
  }
});

/** The end-of-generation token llama.cpp ended with: the best-scored one the grammar allows. */
function argmaxEog(row: Float32Array, tokenizer: Tokenizer): number {
  let best = -1;
  for (const t of tokenizer.eog) if (best < 0 || row[t] > row[best]) best = t;
  return best;
}
