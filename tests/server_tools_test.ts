/**
 * Tool calls from `dotllm serve` through the npm `openai` client, on the real
 * SmolLM2-135M-Instruct Q4_1 served with four tool-calling templates of
 * llama.cpp's `models/templates/` (Qwen 2.5, Llama 3.1, Mistral Nemo,
 * Hermes 2 Pro): `tool_choice: "required"` and a named function always
 * yield calls to declared tools whose arguments validate (ajv), at
 * temperature 1.0; the streamed deltas add up to the non-streamed reply; a
 * tool result completes the round trip; `parallel_tool_calls` gives several
 * calls; bad tools are 400s naming the field; a template that raises for a
 * conversation (Mistral Nemo's 9-character call ids) is a 400 with its
 * message; and Python's `openai` client gets the same calls, streamed and not.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import OpenAI from "openai";
import { validator } from "./_ajv.ts";
import { ensureLlamaCppSource } from "./_llamacpp_src.ts";
import { pythonPackages, runPython } from "./_python.ts";
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

/** The Python client: one required call greedily, then streamed; both validated with jsonschema. */
const PYTHON_TOOLS = `
import json, os, jsonschema
from openai import OpenAI
api = OpenAI(base_url=os.environ["BASE_URL"], api_key="none", max_retries=0)
tools = json.loads(os.environ["TOOLS"])
schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
ask = [{"role": "user", "content": "What is the weather like in Paris today?"}]
r = api.chat.completions.create(model="m", messages=ask, tools=tools, tool_choice="required",
                                temperature=0, max_tokens=120)
calls = [[c.function.name, c.function.arguments] for c in r.choices[0].message.tool_calls]
valid = True
for name, args in calls:
    try:
        jsonschema.validate(json.loads(args), schemas[name])
    except jsonschema.ValidationError:
        valid = False
streamed = {}
for chunk in api.chat.completions.create(model="m", messages=ask, tools=tools, tool_choice="required",
                                         temperature=0, max_tokens=120, stream=True):
    for d in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
        c = streamed.setdefault(d.index, ["", ""])
        if d.function.name: c[0] += d.function.name
        c[1] += d.function.arguments or ""
print(json.dumps({"calls": calls, "streamed": [streamed[i] for i in sorted(streamed)],
                  "valid": valid, "finish": r.choices[0].finish_reason}))
`;

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

        await t.step("Python openai: required calls, streamed and not, the same", async () => {
          const env = await pythonPackages("openai-3.63.0", [
            "openai==3.63.0",
            "jsonschema==4.26.0",
          ]);
          const out = await runPython(env, PYTHON_TOOLS, {
            BASE_URL: server.url + "/v1",
            TOOLS: JSON.stringify(TOOLS),
          });
          const r = JSON.parse(out.trim().split("\n").pop()!);
          assert.ok(r.calls.length > 0);
          assert.deepEqual(r.streamed, r.calls);
          assert.equal(r.valid, true);
          assert.equal(r.finish, "tool_calls");
        });

        if (template.startsWith("mistralai-Mistral-Nemo")) {
          await t.step(
            "a template that raises (call ids not 9 characters) is a 400 with its message",
            async () => {
              const res = await fetch(server.url + "/v1/chat/completions", {
                method: "POST",
                body: JSON.stringify({
                  messages: [
                    ...ASK,
                    {
                      role: "assistant",
                      content: null,
                      tool_calls: [{
                        id: "call_1",
                        type: "function",
                        function: { name: "get_weather", arguments: '{"city": "Paris"}' },
                      }],
                    },
                    { role: "tool", tool_call_id: "call_1", content: "18 C" },
                  ],
                  tools: TOOLS,
                  max_tokens: 4,
                }),
              });
              const body = await res.json();
              assert.equal(res.status, 400, JSON.stringify(body));
              assert.match(
                body.error.message,
                /Tool call IDs should be alphanumeric strings with length 9/,
              );
            },
          );
        }

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
