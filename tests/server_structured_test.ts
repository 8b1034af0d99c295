/**
 * Structured output from `dotllm serve` on the real SmolLM2-135M-Instruct
 * Q4_1, as clients send it: OpenAI's `response_format` (`json_object`,
 * `json_schema`) through the npm `openai` client and the Python one (with
 * its pydantic `parse` helper), streamed and not; llama.cpp's `grammar` and
 * `json_schema` fields; `n` choices and concurrent requests, each with its
 * own grammar state; greedy output equal to `dotllm run -j` on the rendered
 * prompt; and the 400s for a grammar or schema that cannot be used.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { validator } from "./_ajv.ts";
import { runDeno } from "./_cli.ts";
import { pythonPackages, runPython } from "./_python.ts";
import { SMOLLM2_Q4_1, startServer } from "./_server.ts";
import { parseChatRequest } from "../src/server/protocol.ts";

const PERSON = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 30 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    email: { type: "string", pattern: "^[a-z]+@[a-z]+\\.com$" },
    hobbies: { type: "array", items: { type: "string", maxLength: 20 }, maxItems: 3 },
  },
  required: ["name", "age", "email", "hobbies"],
  additionalProperties: false,
};

const CITY = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 30 },
    country: { enum: ["France", "Italy", "Spain", "Other"] },
    founded: { type: "integer" },
  },
  required: ["city", "country"],
};

const messages = (text: string) => [{ role: "user" as const, content: text }];

Deno.test({
  name: "serve: response_format, grammar and json_schema (npm and Python openai, SmolLM2 Q4_1)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const server = await startServer(SMOLLM2_Q4_1, ["--parallel", "4", "-c", "4096", "-t", "2"]);
    const api = new OpenAI({ baseURL: server.url + "/v1", apiKey: "none", maxRetries: 0 });
    const person = validator(PERSON);
    try {
      let greedy = "";
      await t.step("json_schema, not streamed and streamed: the same valid JSON", async () => {
        const format = {
          type: "json_schema" as const,
          json_schema: { name: "person", schema: PERSON, strict: true },
        };
        const r = await api.chat.completions.create({
          model: "m",
          messages: messages("Describe a person as JSON."),
          response_format: format,
          temperature: 0,
          max_tokens: 200,
        });
        greedy = r.choices[0].message.content ?? "";
        assert.equal(r.choices[0].finish_reason, "stop", greedy);
        assert.ok(person(JSON.parse(greedy)), `${greedy}: ${JSON.stringify(person.errors)}`);
        const stream = await api.chat.completions.create({
          model: "m",
          messages: messages("Describe a person as JSON."),
          response_format: format,
          temperature: 0,
          max_tokens: 200,
          stream: true,
        });
        let text = "";
        for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
        assert.equal(text, greedy);
      });

      await t.step(
        "the same as `dotllm run -j` on the prompt /apply-template renders",
        async () => {
          const res = await fetch(server.url + "/apply-template", {
            method: "POST",
            body: JSON.stringify({ messages: messages("Describe a person as JSON.") }),
          });
          const { prompt } = await res.json();
          const run = await runDeno([
            "run",
            SMOLLM2_Q4_1,
            "-p",
            prompt,
            "-j",
            JSON.stringify(PERSON),
            "-n",
            "200",
            "--temp",
            "0",
            "-q",
            "-c",
            "1024",
          ]);
          assert.equal(run.code, 0, run.stderr);
          assert.equal(run.stdout, greedy);
        },
      );

      await t.step(
        "json_object, n = 3 sampled choices and 4 requests at once: all valid",
        async () => {
          const city = validator(CITY);
          const calls = [
            api.chat.completions.create({
              model: "m",
              messages: messages("A city as JSON."),
              response_format: { type: "json_schema", json_schema: { name: "city", schema: CITY } },
              temperature: 1,
              seed: 3,
              n: 3,
              max_tokens: 160,
            }),
            api.chat.completions.create({
              model: "m",
              messages: messages("Any JSON object, please."),
              response_format: { type: "json_object" },
              temperature: 1,
              seed: 4,
              max_tokens: 160,
            }),
          ];
          const [cities, object] = await Promise.all(calls);
          assert.equal(cities.choices.length, 3);
          for (const c of cities.choices) {
            if (c.finish_reason !== "stop") continue; // a sampled value may run out of tokens
            const v = JSON.parse(c.message.content ?? "");
            assert.ok(city(v), `${c.message.content}: ${JSON.stringify(city.errors)}`);
          }
          assert.ok(cities.choices.some((c) => c.finish_reason === "stop"));
          if (object.choices[0].finish_reason === "stop") {
            const v = JSON.parse(object.choices[0].message.content ?? "");
            assert.ok(typeof v === "object" && v !== null && !Array.isArray(v));
          }
        },
      );

      await t.step("llama.cpp's grammar and json_schema fields on /v1/completions", async () => {
        const g = await api.completions.create({
          model: "m",
          prompt: "The answer is",
          max_tokens: 8,
          temperature: 0,
          grammar: 'root ::= " " ("yes" | "no") "."',
        } as never);
        assert.match(g.choices[0].text, /^ (yes|no)\.$/);
        const s = await api.completions.create({
          model: "m",
          prompt: "Three numbers:",
          max_tokens: 40,
          temperature: 0,
          json_schema: { type: "array", items: { type: "integer" }, minItems: 3, maxItems: 3 },
        } as never);
        const value = JSON.parse(s.choices[0].text);
        assert.ok(Array.isArray(value) && value.length === 3, s.choices[0].text);
      });

      await t.step(
        "a grammar or schema that cannot be used is a 400 naming the field",
        async () => {
          const cases: [Record<string, unknown>, string, RegExp][] = [
            [{ grammar: 'root ::= "a" | (' }, "grammar", /line 1, column 17/],
            [{ grammar: "root ::= missing" }, "grammar", /undefined rule 'missing'/],
            [{ json_schema: { type: "string", format: "email" } }, "json_schema", /"format"/],
            [
              {
                response_format: {
                  type: "json_schema",
                  json_schema: { name: "x", schema: { type: "number", multipleOf: 2 } },
                },
              },
              "response_format",
              /"multipleOf"/,
            ],
            [
              { response_format: { type: "xml" } },
              "response_format",
              /"text", "json_object" or "json_schema"/,
            ],
            [
              { response_format: { type: "json_schema", json_schema: { name: "x", schema: 3 } } },
              "response_format.json_schema.schema",
              /object/,
            ],
            [{ grammar: 'root ::= "a"', json_schema: {} }, "json_schema", /give one of/],
            [{ grammar: 7 }, "grammar", /GBNF text/],
          ];
          for (const [extra, param, message] of cases) {
            const res = await fetch(server.url + "/v1/chat/completions", {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ messages: messages("x"), max_tokens: 4, ...extra }),
            });
            const body = await res.json();
            assert.equal(res.status, 400, JSON.stringify(body));
            assert.equal(body.error.param ?? param, param, JSON.stringify(body));
            assert.match(body.error.message, message, JSON.stringify(body));
          }
        },
      );

      await t.step(
        "the Python openai client: response_format, streamed, and pydantic parse",
        async () => {
          const env = await pythonPackages("openai-3.63.0", [
            "openai==3.63.0",
            "jsonschema==4.26.0",
          ]);
          const out = await runPython(env, PYTHON, {
            BASE_URL: server.url + "/v1",
            SCHEMA: JSON.stringify(PERSON),
          });
          const result = JSON.parse(out.trim().split("\n").pop()!);
          assert.equal(result.plain, greedy);
          assert.equal(result.streamed, greedy);
          assert.equal(result.valid, true);
          assert.equal(typeof result.parsed.city, "string");
          assert.ok(["France", "Italy", "Spain", "Other"].includes(result.parsed.country));
          assert.equal(typeof result.object.color, "string");
        },
      );
    } finally {
      await server.stop();
    }
  },
});

const PYTHON = `
import json, os
from typing import Literal, Optional
import jsonschema
from openai import OpenAI
from pydantic import BaseModel

client = OpenAI(base_url=os.environ["BASE_URL"], api_key="none", max_retries=0)
schema = json.loads(os.environ["SCHEMA"])
messages = [{"role": "user", "content": "Describe a person as JSON."}]
fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}
plain = client.chat.completions.create(model="m", messages=messages, response_format=fmt,
                                       temperature=0, max_tokens=200).choices[0].message.content
jsonschema.validate(json.loads(plain), schema)
streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
    model="m", messages=messages, response_format=fmt, temperature=0, max_tokens=200, stream=True)
    if c.choices)

class City(BaseModel):
    city: str
    country: Literal["France", "Italy", "Spain", "Other"]
    founded: Optional[int] = None

parsed = client.chat.completions.parse(model="m", messages=[{"role": "user", "content": "A city as JSON."}],
                                        response_format=City, temperature=0, max_tokens=160)
city = parsed.choices[0].message.parsed
obj = client.chat.completions.create(
    model="m", messages=[{"role": "user", "content": "Give the color and size of an apple as a JSON object."}],
    response_format={"type": "json_object"}, temperature=0, max_tokens=120)
print(json.dumps({"plain": plain, "streamed": streamed, "valid": True,
                  "parsed": city.model_dump(), "object": json.loads(obj.choices[0].message.content)}))
`;

Deno.test("protocol: structured output asks a reasoning template to close its reasoning block", () => {
  const messages = [{ role: "user", content: "x" }];
  const plain = parseChatRequest({ messages }, {});
  assert.deepEqual(plain.input.prompt, { messages });
  for (const extra of [{ response_format: { type: "json_object" } }, { grammar: 'root ::= "a"' }]) {
    const structured = parseChatRequest({ messages, ...extra }, {});
    assert.deepEqual(structured.input.prompt, { messages, enableThinking: false });
    assert.ok((structured.input.grammar ?? "").includes("root ::="));
  }
  // response_format text is no constraint
  const text = parseChatRequest({ messages, response_format: { type: "text" } }, {});
  assert.equal(text.input.grammar, undefined);
});
