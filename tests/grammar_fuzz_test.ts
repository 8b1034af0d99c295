/**
 * Bad input: 1,000 mutated grammars (llama.cpp's `grammars/` and our own,
 * with characters deleted, inserted, swapped and spans doubled) and 500
 * mutated JSON schemas, each compiled for a real vocabulary and, when it
 * compiles, run for a few tokens. Every one ends as a `GrammarError` or
 * `SchemaError` with a message, or as a working constraint; nothing else is
 * thrown and nothing takes long. Then mutated request bodies against a
 * server: every answer is a 200 or a 400, never a 500, and the server lives.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  compileGrammar,
  GrammarConstraint,
  GrammarError,
  jsonSchemaToGrammar,
  SchemaError,
} from "../src/grammar/mod.ts";
import { parseGguf } from "../src/gguf/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";
import { prng } from "./_fuzz.ts";
import { ensureLlamaCppSource } from "./_llamacpp_src.ts";
import { startServer } from "./_server.ts";
import { testdata } from "./_testdata.ts";

/** Slowest a compile plus a few constrained steps may be (a hang fails the test). */
const CASE_MS = 2_000;

const OWN_GRAMMARS = [
  'root ::= ("yes" | "no") "."',
  'root ::= item ("\\n" item){0,4}\nitem ::= "- " [a-z ]{1,12} ([0-9]+ "x")?',
  'root ::= "<" [^<>]* ">" . [a-zA-Z0-9_]{1,3} ("!" | "?")*',
  "root ::= [\\u3041-\\u309F]+ [\\x00-\\x7F]? ",
  'root ::= <[1]> "a" !<[2]>',
];

const PALETTE = '"[]()|*+?{}-^\\.<>!:=#\n ,0123456789azAZ_\u00e9\u3042';

function mutate(text: string, rand: () => number): string {
  const chars = Array.from(text);
  const edits = 1 + Math.floor(rand() * 4);
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(rand() * (chars.length + 1));
    const pick = () => Array.from(PALETTE)[Math.floor(rand() * Array.from(PALETTE).length)];
    switch (Math.floor(rand() * 5)) {
      case 0:
        chars.splice(at, 1);
        break;
      case 1:
        chars.splice(at, 0, pick());
        break;
      case 2:
        chars[Math.min(at, chars.length - 1)] = pick();
        break;
      case 3: {
        const len = Math.floor(rand() * 12);
        chars.splice(at, 0, ...chars.slice(at, at + len));
        break;
      }
      default:
        chars.length = Math.min(chars.length, at);
    }
  }
  return chars.join("");
}

/** Compiles and runs `grammar` a few tokens; returns "error" or "works". */
function exercise(grammar: string, tokenizer: Tokenizer, rand: () => number): "error" | "works" {
  const t0 = performance.now();
  try {
    const constraint = new GrammarConstraint(compileGrammar(grammar, tokenizer));
    const logits = new Float32Array(tokenizer.vocabSize);
    for (let step = 0; step < 8; step++) {
      logits.fill(0);
      constraint.process(logits);
      const allowed: number[] = [];
      for (let t = 0; t < logits.length; t++) if (logits[t] === 0) allowed.push(t);
      const text = allowed.filter((t) => !tokenizer.isEog(t));
      if (text.length === 0) break;
      const id = text[Math.floor(rand() * text.length)];
      assert.ok(constraint.allows(id));
      constraint.accept(id);
    }
    return "works";
  } catch (error) {
    if (error instanceof GrammarError || error instanceof SchemaError) {
      assert.ok(error.message.length > 10 && !error.message.includes("\n"), error.message);
      return "error";
    }
    throw new Error(`${JSON.stringify(grammar).slice(0, 300)}: ${(error as Error).stack}`);
  } finally {
    const ms = performance.now() - t0;
    assert.ok(ms < CASE_MS, `${ms.toFixed(0)} ms for ${JSON.stringify(grammar).slice(0, 200)}`);
  }
}

function seeds(): string[] {
  const dir = join(ensureLlamaCppSource(), "grammars");
  const files = readdirSync(dir).filter((f) => f.endsWith(".gbnf")).sort();
  assert.ok(files.length >= 8, files.join(" "));
  return [...files.map((f) => readFileSync(join(dir, f), "utf8")), ...OWN_GRAMMARS];
}

Deno.test("fuzz: 1,000 mutated grammars are an error with a message or a working constraint", () => {
  const stories = Tokenizer.fromGguf(
    parseGguf(readFileSync(testdata("models", "stories260K.gguf"))),
  );
  const smol = Tokenizer.fromGguf(
    parseGguf(readFileSync(testdata("models", "SmolLM2-135M-Instruct.Q4_1.gguf"))),
  );
  const base = seeds();
  const rand = prng(37);
  const outcomes = { error: 0, works: 0 };
  for (let i = 0; i < 1000; i++) {
    const grammar = mutate(base[i % base.length], rand);
    outcomes[exercise(grammar, i % 5 === 0 ? smol : stories, rand)]++;
  }
  // both kinds occur: the mutations are neither all fatal nor all harmless
  assert.ok(outcomes.error > 100 && outcomes.works > 100, JSON.stringify(outcomes));
});

const SCHEMA_SEEDS: unknown[] = [
  {
    type: "object",
    properties: { a: { type: "integer", minimum: 1 }, b: { type: "string" } },
    required: ["a"],
  },
  { type: "array", items: { enum: ["x", "y", 3] }, minItems: 1, maxItems: 3 },
  { anyOf: [{ type: "string", pattern: "^[a-z]{2,4}$" }, { type: "null" }] },
  { $defs: { n: { type: "object", properties: { v: { $ref: "#/$defs/n" } } } }, $ref: "#/$defs/n" },
  { type: "string", format: "date-time" },
  { prefixItems: [{ type: "boolean" }, { const: "k" }], items: false },
];

const KEYS = [
  "type",
  "properties",
  "items",
  "minimum",
  "maxLength",
  "pattern",
  "enum",
  "$ref",
  "required",
  "format",
  "anyOf",
  "multipleOf",
  "minItems",
];
const VALUES: unknown[] = [
  "string",
  "integer",
  "object",
  -1,
  0,
  3,
  1e9,
  "^(a",
  "#/nope",
  [],
  {},
  null,
  true,
  ["a"],
  "uuid",
];

function mutateSchema(value: unknown, rand: () => number, depth = 0): unknown {
  if (typeof value !== "object" || value === null || depth > 4) {
    return rand() < 0.3 ? VALUES[Math.floor(rand() * VALUES.length)] : value;
  }
  if (Array.isArray(value)) return value.map((v) => mutateSchema(v, rand, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (rand() < 0.1) continue;
    out[k] = mutateSchema(v, rand, depth + 1);
  }
  if (rand() < 0.4) {
    out[KEYS[Math.floor(rand() * KEYS.length)]] = VALUES[Math.floor(rand() * VALUES.length)];
  }
  return out;
}

Deno.test("fuzz: 500 mutated JSON schemas convert and constrain, or fail with a message", () => {
  const stories = Tokenizer.fromGguf(
    parseGguf(readFileSync(testdata("models", "stories260K.gguf"))),
  );
  const rand = prng(91);
  const outcomes = { error: 0, works: 0 };
  for (let i = 0; i < 500; i++) {
    const schema = mutateSchema(SCHEMA_SEEDS[i % SCHEMA_SEEDS.length], rand);
    let grammar: string;
    try {
      grammar = jsonSchemaToGrammar(schema);
    } catch (error) {
      assert.ok(
        error instanceof SchemaError,
        `${JSON.stringify(schema)}: ${(error as Error).stack}`,
      );
      outcomes.error++;
      continue;
    }
    outcomes[exercise(grammar, stories, rand)]++;
  }
  assert.ok(outcomes.error > 50 && outcomes.works > 50, JSON.stringify(outcomes));
});

Deno.test({
  name: "fuzz: mutated grammar fields against a server are 200 or 400, never 500",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const server = await startServer(testdata("models", "stories260K.gguf"), [
      "--parallel",
      "2",
      "-c",
      "512",
      "-t",
      "1",
    ]);
    try {
      const base = seeds();
      const rand = prng(5);
      const statuses = new Map<number, number>();
      for (let i = 0; i < 120; i++) {
        const field = i % 3;
        const body: Record<string, unknown> = { prompt: "Once", max_tokens: 6 };
        if (field === 0) body.grammar = mutate(base[i % base.length], rand);
        else if (field === 1) {
          body.json_schema = mutateSchema(SCHEMA_SEEDS[i % SCHEMA_SEEDS.length], rand);
        } else {body.response_format = mutateSchema({
            type: "json_schema",
            json_schema: { schema: SCHEMA_SEEDS[i % 6] },
          }, rand);}
        const res = await fetch(server.url + "/v1/completions", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(30_000),
        });
        const json = await res.json();
        assert.ok(
          res.status === 200 || res.status === 400,
          `${res.status} ${JSON.stringify(json)} for ${JSON.stringify(body).slice(0, 300)}`,
        );
        if (res.status === 400) {
          assert.ok(typeof json.error.message === "string" && json.error.message.length > 5);
        }
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
      assert.ok(
        (statuses.get(200) ?? 0) > 10 && (statuses.get(400) ?? 0) > 10,
        JSON.stringify([...statuses]),
      );
      const health = await fetch(server.url + "/health");
      assert.equal(health.status, 200);
      await health.body?.cancel();
    } finally {
      await server.stop();
    }
  },
});
