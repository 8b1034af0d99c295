/**
 * `Llm.chat` with tools (SmolLM2-135M-Instruct Q4_1 with the Qwen 2.5
 * template of llama.cpp's `models/templates/`): `toolChoice: "required"` and
 * a named function return parsed calls whose arguments validate, the pieces
 * streamed are the reply's raw text, and a tool choice that names no tool or
 * tools beside a grammar are refused.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Llm } from "../mod.ts";
import { validator } from "./_ajv.ts";
import { ensureLlamaCppSource } from "./_llamacpp_src.ts";
import { SMOLLM2_Q4_1 } from "./_server.ts";

const WEATHER = {
  type: "object",
  properties: { city: { type: "string", maxLength: 30 } },
  required: ["city"],
  additionalProperties: false,
};
const TOOLS = [
  { type: "function" as const, function: { name: "get_weather", parameters: WEATHER } },
  { type: "function" as const, function: { name: "get_time", parameters: {} } },
];

Deno.test("Llm.chat with tools returns the parsed calls (SmolLM2 Q4_1, Qwen 2.5 template)", async () => {
  const template = readFileSync(
    join(ensureLlamaCppSource(), "models", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja"),
    "utf8",
  );
  const llm = await Llm.load(SMOLLM2_Q4_1, { threads: 2, contextSize: 2048 });
  const valid = validator(WEATHER);
  try {
    const messages = [{ role: "user", content: "What is the weather in Rome?" }];
    for (let seed = 0; seed < 5; seed++) {
      let streamed = "";
      const it = llm.chat(messages, {
        template,
        tools: TOOLS,
        toolChoice: "required",
        temperature: 1.0,
        seed,
        maxTokens: 100,
      });
      let r = await it.next();
      while (!r.done) {
        streamed += r.value.text;
        r = await it.next();
      }
      const { message, finishReason } = r.value;
      assert.equal(finishReason, "stop");
      assert.ok(streamed.includes("<tool_call>"), streamed);
      assert.ok(message.toolCalls.length >= 1, JSON.stringify(message));
      for (const call of message.toolCalls) {
        assert.ok(["get_weather", "get_time"].includes(call.name), call.name);
        const args = JSON.parse(call.arguments);
        if (call.name === "get_weather") assert.ok(valid(args), call.arguments);
        assert.ok(call.id.length > 0);
      }
    }
    const named = llm.chat(messages, {
      template,
      tools: TOOLS,
      toolChoice: { type: "function", function: { name: "get_weather" } },
      temperature: 0,
      maxTokens: 100,
    });
    let r = await named.next();
    while (!r.done) r = await named.next();
    assert.deepEqual(r.value.message.toolCalls.map((c) => c.name), ["get_weather"]);
    assert.ok(valid(JSON.parse(r.value.message.toolCalls[0].arguments)));
    // no tools: the reply is content
    const plain = llm.chat(messages, { template, temperature: 0, maxTokens: 8 });
    let p = await plain.next();
    while (!p.done) p = await plain.next();
    assert.equal(p.value.message.toolCalls.length, 0);
    assert.equal(p.value.message.content, p.value.text);
    await assert.rejects(
      llm.chat(messages, { template, tools: TOOLS, grammar: 'root ::= "x"' }).next(),
      /cannot be combined with tools/,
    );
  } finally {
    llm.close();
  }
});
