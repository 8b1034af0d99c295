/**
 * Always valid: the schemas of the corpus (`tests/golden/grammar/
 * schemas_corpus.json`), each sampled at temperature 1.0 with three seeds
 * (`n: 3`) through `dotllm serve` on SmolLM2-135M-Instruct Q4_1, several
 * requests batched at once. Every choice that ends with `stop` parses and
 * validates against its schema (ajv, draft 2020-12, with formats).
 *
 * Left out: the schemas with two caveats of llama.cpp's grammar that dotllm
 * keeps (so its tokens stay llama.cpp's): a number whose 16-digit exponent
 * parses to Infinity, and a date like 2023-02-30. (The corpus's third
 * caveat, llama.cpp's key rule beside declared properties admitting raw
 * control characters, dotllm does not have: those schemas are in.)
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { validator } from "./_ajv.ts";
import { SMOLLM2_Q4_1, startServer } from "./_server.ts";
import { repoRoot } from "./_testdata.ts";

interface Entry {
  name: string;
  schema: unknown;
  caveats?: string[];
}

const corpus = (JSON.parse(
  readFileSync(join(repoRoot, "tests", "golden", "grammar", "schemas_corpus.json"), "utf8"),
) as Entry[]).filter((e) => (e.caveats ?? []).every((c) => c === "additional-key-raw-chars"));

Deno.test({
  name:
    "always valid: the corpus's schemas x 3 seeds at temperature 1 through the server all validate",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    assert.ok(corpus.length >= 100, `${corpus.length} schemas`);
    const server = await startServer(SMOLLM2_Q4_1, ["--parallel", "6", "-c", "6144", "-t", "2"]);
    let stopped = 0, cut = 0;
    try {
      const one = async (entry: Entry, i: number) => {
        const res = await fetch(server.url + "/v1/chat/completions", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            messages: [{ role: "user", content: `Write a JSON value (${entry.name}).` }],
            response_format: {
              type: "json_schema",
              json_schema: { name: "v", schema: entry.schema },
            },
            temperature: 1,
            seed: 1000 + i,
            n: 3,
            max_tokens: 256,
          }),
        });
        const body = await res.json();
        assert.equal(res.status, 200, `${entry.name}: ${JSON.stringify(body)}`);
        const valid = validator(entry.schema);
        for (const choice of body.choices) {
          const text: string = choice.message.content;
          if (choice.finish_reason !== "stop") {
            cut++;
            continue;
          }
          stopped++;
          let value: unknown;
          try {
            value = JSON.parse(text);
          } catch (error) {
            assert.fail(
              `${entry.name} seed ${1000 + i}+${choice.index}: not JSON (${error}): ${text}`,
            );
          }
          assert.ok(
            valid(value),
            `${entry.name} seed ${1000 + i}+${choice.index}: ${text}\n${
              JSON.stringify(valid.errors)
            }`,
          );
        }
      };
      // two requests (six sequences) at a time
      for (let i = 0; i < corpus.length; i += 2) {
        await Promise.all(corpus.slice(i, i + 2).map((e, k) => one(e, i + k)));
      }
    } finally {
      await server.stop();
    }
    console.log(`${stopped} outputs ended with stop and validate; ${cut} reached max_tokens`);
    assert.ok(stopped >= corpus.length * 3 * 0.8, `${stopped} stopped, ${cut} cut`);
  },
});
