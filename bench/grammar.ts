/**
 * What a grammar costs per token, and constrained against unconstrained
 * generation.
 *
 * 1. **Per token, on a vocabulary alone**: a JSON document (for llama.cpp's
 *    `json.gbnf`, and for a nested schema through the converter) tokenized
 *    with a model's vocabulary is fed token by token to a fresh compiled
 *    grammar, then a second document to the same one (warm caches, as a
 *    server answering the same schema again). Two costs per token:
 *    - *check + advance*: what generation pays when the sampled token is
 *      allowed (llama.cpp's fast path), the common case;
 *    - *mask + advance*: the whole vocabulary masked (what a rejected token
 *      costs; llguidance's published figures are of this kind).
 * 2. **Generation** (`--model M`): `dotllm run` greedy with `-j SCHEMA` and
 *    without, tok/s, interleaved with `llama-completion` on the same
 *    request when `--llama-completion PATH` is given.
 *
 *   deno task bench:grammar [--vocab V.gguf ... | --no-vocab] [--model M.gguf]
 *                           [--llama-completion PATH] [-r 3]
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import process from "node:process";
import { parseArgs } from "node:util";
import { generate, type LogitProcessor } from "../src/generation/mod.ts";
import {
  compileGrammar,
  GrammarConstraint,
  type GrammarMatcher,
  jsonSchemaToGrammar,
} from "../src/grammar/mod.ts";
import { Context, Model } from "../src/model/mod.ts";
import { Sampler } from "../src/sampler/mod.ts";
import { parseGguf } from "../src/gguf/mod.ts";
import { Tokenizer } from "../src/tokenizer/mod.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    vocab: { type: "string", multiple: true },
    model: { type: "string" },
    "llama-completion": { type: "string" },
    grammars: { type: "string" },
    runs: { type: "string", short: "r" },
    "no-vocab": { type: "boolean" },
  },
});
const testdata = new URL("../../shared/testdata/", import.meta.url).pathname;
const vocabs = values["no-vocab"]
  ? []
  : values.vocab ?? [`${testdata}vocab-converted/ggml-vocab-qwen2.gguf`];
const runs = Number(values.runs ?? 3);

/** llama.cpp's `grammars/json.gbnf` (the same rules; the file itself is not in this repository). */
const JSON_GBNF = String.raw`root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
`;

const ORDER_SCHEMA = {
  type: "object",
  properties: {
    id: { type: "string", format: "uuid" },
    customer: {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 40 },
        email: { type: "string", pattern: "^[a-z.]+@[a-z]+\\.[a-z]{2,3}$" },
        vip: { type: "boolean" },
      },
      required: ["name", "email"],
      additionalProperties: false,
    },
    items: {
      type: "array",
      minItems: 1,
      maxItems: 8,
      items: {
        type: "object",
        properties: {
          sku: { type: "string", pattern: "^[A-Z]{3}-[0-9]{4}$" },
          quantity: { type: "integer", minimum: 1, maximum: 99 },
          note: { anyOf: [{ type: "string", maxLength: 60 }, { type: "null" }] },
        },
        required: ["sku", "quantity"],
        additionalProperties: false,
      },
    },
    status: { enum: ["new", "paid", "shipped"] },
    placed: { type: "string", format: "date-time" },
  },
  required: ["id", "customer", "items", "status", "placed"],
  additionalProperties: false,
};

function order(k: number) {
  return {
    id: `1b4e28ba-2fa1-11d2-883f-00160${k}c3d4e5`.slice(0, 36),
    customer: {
      name: k ? "Zoë Ångström-Nakamura" : "Ana López",
      email: `ana.lopez${"x".repeat(k)}@example.com`,
      vip: k > 0,
    },
    items: Array.from({ length: 3 + k }, (_, i) => ({
      sku: `ABC-${String(1000 + i * 37).padStart(4, "0")}`,
      quantity: i + 1,
      note: i % 2 ? null : `gift wrap ${"please ".repeat(i)}— 東京まで`.trim(),
    })),
    status: k ? "shipped" : "paid",
    placed: "2026-12-07T22:15:00Z",
  };
}

function stats(ms: number[]) {
  const s = ms.slice().sort((a, b) => a - b);
  const us = (x: number) => `${(x * 1000).toFixed(0)} µs`;
  return {
    mean: us(ms.reduce((a, b) => a + b, 0) / ms.length),
    p50: us(s[Math.floor(s.length / 2)]),
    p99: us(s[Math.min(s.length - 1, Math.floor(s.length * 0.99))]),
    max: us(s[s.length - 1]),
  };
}

function feed(m: GrammarMatcher, ids: number[], full: boolean, logits: Float32Array): number[] {
  const times: number[] = [];
  for (const id of ids) {
    const t0 = performance.now();
    if (full) m.mask(logits);
    else if (!m.allows(id)) throw new Error(`the grammar refuses token ${id}`);
    m.accept(id);
    times.push(performance.now() - t0);
  }
  return times;
}

console.log(`load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
for (const path of vocabs) {
  const tokenizer = Tokenizer.fromGguf(parseGguf(readFileSync(path)));
  const t0 = performance.now();
  compileGrammar('root ::= "x"', tokenizer); // builds the vocabulary's trie
  const trieMs = performance.now() - t0;
  const rows: Record<string, Record<string, string>> = {};
  const cases: [string, string, (k: number) => string][] = [
    ["json.gbnf", JSON_GBNF, (k) => JSON.stringify(order(k), null, 2)],
    ["nested schema", jsonSchemaToGrammar(ORDER_SCHEMA), (k) => JSON.stringify(order(k))],
  ];
  for (const [name, gbnf, doc] of cases) {
    for (const full of [false, true]) {
      for (const [label, k] of [["cold", 0], ["warm", 1]] as const) {
        const all: number[] = [];
        for (let r = 0; r < runs; r++) {
          // a fresh compile per run: `cold` is the first document, `warm` the second on the same caches
          const g = compileGrammar(gbnf + "\n".repeat(r + 1 + (full ? 100 : 0)), tokenizer);
          const logits = new Float32Array(tokenizer.vocabSize);
          const first = tokenizer.encode(doc(0), { addSpecial: false, parseSpecial: false });
          const times = feed(g.matcher(), first, full, logits);
          if (k === 0) all.push(...times);
          else {
            const second = tokenizer.encode(doc(1), { addSpecial: false, parseSpecial: false });
            all.push(...feed(g.matcher(), second, full, logits));
          }
        }
        rows[`${name}, ${full ? "mask" : "check"} + advance, ${label}`] = {
          tokens: String(all.length / runs),
          ...stats(all),
        };
      }
    }
  }
  console.log(
    `\n${path.split("/").pop()}: ${tokenizer.vocabSize} tokens, trie built in ${
      trieMs.toFixed(0)
    } ms`,
  );
  console.table(rows);
}

if (values.model !== undefined) {
  // In one process: greedy generation with and without the schema, interleaved, and what
  // the constraint itself costs per generated token (check, mask when refused, advance).
  const model = Model.load(values.model);
  const context = new Context(model, { threads: 2, contextSize: 1024 });
  const tokenizer = Tokenizer.fromGguf(model.gguf);
  const prompt = "Here is a JSON record of a customer order:\n";
  const gbnf = jsonSchemaToGrammar(ORDER_SCHEMA);
  const perToken: number[][] = []; // each run's constraint time per generated token, ms
  const speed: Record<string, number[]> = { free: [], constrained: [] };
  let masks = 0, tokens = 0;
  for (let r = 0; r < runs + 1; r++) {
    for (const constrained of [false, true]) {
      const processors: LogitProcessor[] = [];
      const times: number[] = [];
      if (constrained) {
        // the first run compiles the schema (cold caches); the others reuse it (warm)
        const c = new GrammarConstraint(compileGrammar(gbnf, tokenizer));
        let spent = 0;
        const timed = <A, R>(f: (a: A) => R, mask = false) => (a: A): R => {
          const t0 = performance.now();
          try {
            return f(a);
          } finally {
            spent += performance.now() - t0;
            if (mask && r > 0) masks++;
          }
        };
        processors.push({
          allows: timed((t: number) => c.allows(t)),
          process: timed((l: Float32Array) => c.process(l), true),
          accept: (t: number) => { // the token's last call: its total is complete
            timed((x: number) => c.accept(x))(t);
            times.push(spent);
            spent = 0;
          },
        });
      }
      context.cache.clear();
      const result = await generate(
        { context },
        tokenizer,
        new Sampler(tokenizer.vocabSize, { temperature: 0 }, 1),
        { prompt, maxTokens: 128, processors },
      );
      if (constrained) perToken.push(times);
      if (r === 0) continue; // warm-up: JIT, pages
      const t = result.timings;
      speed[constrained ? "constrained" : "free"].push(
        result.tokens.length / (t.decodeMs + t.samplingMs) * 1000,
      );
      if (constrained) tokens += result.tokens.length;
    }
  }
  context.close();
  model.close();
  const median = (a: number[]) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
  const free = median(speed.free), constrained = median(speed.constrained);
  console.log(
    `\n${values.model.split("/").pop()} (${tokenizer.vocabSize} tokens): in one process, greedy, ` +
      `128 tokens, 2 threads, the nested schema`,
  );
  console.table({
    "unconstrained tok/s": { value: free.toFixed(1) },
    "constrained tok/s": { value: constrained.toFixed(1) },
    "constrained / unconstrained": { value: (constrained / free).toFixed(3) },
    "masks per token": { value: (masks / tokens).toFixed(3) },
  });
  console.log("the constraint's time per generated token (check, resample, advance):");
  console.table({
    "first request (cold)": stats(perToken[0]),
    "later requests (warm)": stats(perToken.slice(1).flat()),
  });
}

if (values.model !== undefined) {
  const model = values.model;
  const prompt = "Here is a JSON record of a customer order:\n";
  const schema = JSON.stringify(ORDER_SCHEMA);
  const tps: Record<string, number[]> = {};
  const add = (k: string, v: number) => (tps[k] ??= []).push(v);
  for (let r = 0; r < runs; r++) {
    for (const constrained of [false, true]) {
      // the same request to both: prompt, 128 tokens, greedy, 2 threads
      const request = ["-p", prompt, "-n", "128", "--temp", "0", "-t", "2"];
      const args = ["run", "-A", "cli.ts", "run", model, ...request, "--json", "-q"];
      if (constrained) args.push("-j", schema);
      const out = spawnSync(Deno.execPath(), args, {
        encoding: "utf8",
        cwd: new URL("..", import.meta.url).pathname,
      });
      const j = JSON.parse(out.stdout);
      add(
        `dotllm ${constrained ? "-j" : "free"} (${j.usage.completion_tokens} tokens)`,
        j.timings.decode_tokens_per_second,
      );
      const lc = values["llama-completion"];
      if (lc !== undefined) {
        const largs = ["-m", model, ...request, "-no-cnv", "--no-display-prompt", "--no-warmup"];
        if (constrained) largs.push("-j", schema);
        const l = spawnSync(lc, largs, { encoding: "utf8" });
        const m = /eval time =\s*[\d.]+ ms \/\s*(\d+) runs.*?([\d.]+) tokens per second/.exec(
          l.stderr.split("\n").filter((x) => x.includes(" eval time") && !x.includes("prompt"))
            .join("\n"),
        );
        if (m) add(`llama.cpp ${constrained ? "-j" : "free"} (${m[1]} tokens)`, Number(m[2]));
      }
    }
  }
  const median = (a: number[]) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
  console.log(
    `\n${
      model.split("/").pop()
    }: greedy, 128 tokens at most, 2 threads, medians of ${runs} (interleaved)`,
  );
  console.table(
    Object.fromEntries(Object.entries(tps).map(([k, v]) => [k, { "tok/s": median(v).toFixed(1) }])),
  );
  console.log(`load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
}
