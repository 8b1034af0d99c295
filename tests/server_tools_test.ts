/**
 * Tool calls from `dotllm serve` through the npm `openai` client, on the real
 * SmolLM2-135M-Instruct Q4_1 served with four tool-calling templates of
 * llama.cpp's `models/templates/` (Qwen 2.5, Llama 3.1, Mistral Nemo,
 * Hermes 2 Pro): `tool_choice: "required"` and a named function always
 * yield calls to declared tools whose arguments validate (ajv), at
 * temperature 1.0; the streamed deltas add up to the non-streamed reply; a
 * tool result completes the round trip; `parallel_tool_calls` gives several
 * calls; bad tools are 400s naming the field.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import OpenAI from "openai";
import { validator } from "./_ajv.ts";
import { ensureLlamaCppSource } from "./_llamacpp_src.ts";
import { SMOLLM2_Q4_1, startServer } from "./_server.ts";

const WEATHER = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 30 },
    unit: { enum: ["celsius", "fahrenheit"] },
  },
  required: ["city"],
  additionalProperties: false,
};
const TIME = {
  type: "object",
  properties: { timezone: { type: "string", maxLength: 40 } },
  required: ["timezone"],
  additionalProperties: false,
};
const TOOLS = [
  {
    type: "function" as const,
    function: { name: "get_weather", description: "The weather in a city", parameters: WEATHER },
  },
  {
    type: "function" as const,
    function: { name: "get_time", description: "The time in a timezone", parameters: TIME },
  },
];
const VALID: Record<string, ReturnType<typeof validator>> = {
  get_weather: validator(WEATHER),
  get_time: validator(TIME),
};

const TEMPLATES = [
  "Qwen-Qwen2.5-7B-Instruct.jinja",
  "meta-llama-Llama-3.1-8B-Instruct.jinja",
  "mistralai-Mistral-Nemo-Instruct-2407.jinja",
  "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
];

const ASK = [{ role: "user" as const, content: "What is the weather like in Paris today?" }];

type Call = { id?: string; type?: string; function: { name: string; arguments: string } };

/** Every call names a declared tool (`only`, when given) with arguments its schema accepts. */
function checkCalls(calls: Call[] | undefined, label: string, only?: string): void {
  assert.ok(calls !== undefined && calls.length > 0, `${label}: no tool call`);
  for (const c of calls) {
    const valid = VALID[c.function.name];
    assert.ok(valid !== undefined, `${label}: undeclared tool ${c.function.name}`);
    if (only !== undefined) assert.equal(c.function.name, only, label);
    const args = JSON.parse(c.function.arguments);
    assert.ok(valid(args), `${label}: ${c.function.arguments}: ${JSON.stringify(valid.errors)}`);
    assert.ok(typeof c.id === "string" && c.id.length > 0, `${label}: no id`);
  }
}

for (const template of TEMPLATES) {
  Deno.test({
    name: `serve: tool calls with ${template} (npm openai, SmolLM2 Q4_1)`,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn(t) {
      const file = join(ensureLlamaCppSource(), "models", "templates", template);
      const server = await startServer(SMOLLM2_Q4_1, [
        "--parallel",
        "5",
        "-c",
        "5120",
        "-t",
        "2",
        "--chat-template",
        file,
      ]);
      const api = new OpenAI({ baseURL: server.url + "/v1", apiKey: "none", maxRetries: 0 });
      try {
        for (
          const [label, choice, only] of [
            ["required", "required", undefined],
            ["named get_time", { type: "function", function: { name: "get_time" } }, "get_time"],
          ] as const
        ) {
          await t.step(
            `tool_choice ${label}: 50 samples at temperature 1.0 all call and validate`,
            async () => {
              const replies = await Promise.all(
                Array.from({ length: 10 }, (_, i) =>
                  api.chat.completions.create({
                    model: "m",
                    messages: ASK,
                    tools: TOOLS,
                    tool_choice: choice,
                    temperature: 1.0,
                    seed: 100 + i,
                    n: 5,
                    max_tokens: 120,
                  })),
              );
              let samples = 0;
              for (const r of replies) {
                for (const c of r.choices) {
                  samples++;
                  assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c.message));
                  checkCalls(c.message.tool_calls as Call[], `${template} ${label}`, only);
                }
              }
              assert.equal(samples, 50);
            },
          );
        }

        await t.step("streamed deltas add up to the non-streamed reply (greedy)", async () => {
          const body = {
            model: "m",
            messages: ASK,
            tools: TOOLS,
            tool_choice: "required" as const,
            temperature: 0,
            max_tokens: 120,
          };
          const whole = await api.chat.completions.create(body);
          const stream = await api.chat.completions.create({ ...body, stream: true });
          const calls: Call[] = [];
          let content = "", finish = "";
          for await (const chunk of stream) {
            const choice = chunk.choices[0];
            if (choice === undefined) continue;
            content += choice.delta.content ?? "";
            for (const d of choice.delta.tool_calls ?? []) {
              const c = calls[d.index] ??= { id: "", function: { name: "", arguments: "" } };
              if (d.id) c.id = d.id;
              if (d.function?.name) c.function.name += d.function.name;
              c.function.arguments += d.function?.arguments ?? "";
            }
            if (choice.finish_reason) finish = choice.finish_reason;
          }
          const message = whole.choices[0].message;
          checkCalls(calls, `${template} streamed`);
          assert.equal(finish, whole.choices[0].finish_reason);
          assert.equal(content, message.content ?? "");
          assert.deepEqual(
            calls.map((c) => [c.function.name, c.function.arguments]),
            (message.tool_calls as Call[]).map((c) => [c.function.name, c.function.arguments]),
          );
        });

        await t.step("a tool result completes the round trip", async () => {
          const first = await api.chat.completions.create({
            model: "m",
            messages: ASK,
            tools: TOOLS,
            tool_choice: "required",
            temperature: 0,
            max_tokens: 120,
          });
          const call = (first.choices[0].message.tool_calls as Call[])[0];
          const r = await api.chat.completions.create({
            model: "m",
            messages: [
              ...ASK,
              { role: "assistant", content: null, tool_calls: [call as never] },
              {
                role: "tool",
                tool_call_id: call.id!,
                content: '{"temperature": 18, "sky": "clear"}',
              },
            ],
            tools: TOOLS,
            tool_choice: "none",
            temperature: 0,
            max_tokens: 40,
          });
          const c = r.choices[0];
          assert.ok(["stop", "length"].includes(c.finish_reason), c.finish_reason);
          assert.equal(c.message.tool_calls, undefined);
          assert.equal(typeof c.message.content, "string");
        });

        // Llama 3.1's template renders one call per turn (it raises for more): its
        // grammar takes one call, as llama.cpp's.
        const parallel = !template.startsWith("meta-llama-Llama-3.1");
        await t.step(
          `parallel_tool_calls: ${parallel ? "several calls" : "one call"}`,
          async () => {
            let most = 0;
            for (let seed = 0; seed < (parallel ? 8 : 2) && most < 2; seed++) {
              const r = await api.chat.completions.create({
                model: "m",
                messages: [{
                  role: "user",
                  content: "Get the weather in Paris, the weather in Rome and the time in Tokyo.",
                }],
                tools: TOOLS,
                tool_choice: "required",
                parallel_tool_calls: true,
                temperature: 1.0,
                seed,
                n: 5,
                max_tokens: 200,
              });
              for (const c of r.choices) {
                const calls = c.message.tool_calls as Call[];
                checkCalls(calls, `${template} parallel`);
                most = Math.max(most, calls.length);
              }
            }
            if (parallel) assert.ok(most >= 2, `at most ${most} call per reply`);
            else assert.equal(most, 1);
          },
        );

        await t.step("bad tools are a 400 naming the field", async () => {
          for (
            const [extra, param] of [
              [{ tools: [{ type: "retrieval" }] }, "tools[0].type"],
              [
                { tools: TOOLS, tool_choice: { type: "function", function: { name: "nope" } } },
                "tool_choice.function.name",
              ],
              [{
                tools: [{
                  type: "function",
                  function: { name: "f", parameters: { type: "number", multipleOf: 3 } },
                }],
              }, "tools"],
              [{ tools: TOOLS, response_format: { type: "json_object" } }, "response_format"],
            ] as const
          ) {
            const res = await fetch(server.url + "/v1/chat/completions", {
              method: "POST",
              body: JSON.stringify({ messages: ASK, max_tokens: 4, ...extra }),
            });
            const body = await res.json();
            assert.equal(res.status, 400, JSON.stringify(body));
            assert.equal(body.error.param, param, JSON.stringify(body));
          }
        });
      } finally {
        await server.stop();
      }
    },
  });
}
