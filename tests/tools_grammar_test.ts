/**
 * The grammars of tool calls (`chatGenerationParams`): for each format, built from the real
 * template, with `tool_choice` auto (lazy: the trigger must fire on the format's call and
 * the grammar, fed from there, take the rest), required and a named function (the whole
 * answer): the grammar compiles with `parseGbnf`, takes the format's canonical call text
 * (as llama.cpp's test-chat.cpp writes it) byte by byte and may end there, refuses a call
 * to an undeclared tool and arguments its schema forbids, and the parser reads the call
 * back. Also the request checks (`tools`, `tool_choice`) and schemas that cannot be
 * enforced.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { compileGrammar, parseGbnf, SchemaError } from "../src/grammar/mod.ts";
import {
  chatGenerationParams,
  checkToolChoice,
  checkTools,
  detectToolFormat,
  generationPromptOf,
  parseChatOutput,
  type ToolChoice,
  ToolRequestError,
} from "../src/tools/mod.ts";
import * as T from "./_chat_tools.ts";
import { generationPrompt } from "./_chat_cases.ts";
import { matches, triggerStart } from "./_grammar_text.ts";
import { ensureLlamaCppSource } from "./_llamacpp_src.ts";
import { SMOLLM2_Q4_1 } from "./_server.ts";
import { tokenizerOf } from "./_vocabs.ts";

const templatesDir = join(ensureLlamaCppSource(), "models", "templates");
const templateSource = (name: string) => readFileSync(join(templatesDir, name), "utf8");

interface FormatCase {
  template: string;
  /** The call of special_function with {"arg1": 1}, as the format writes it. */
  call: (name: string, args: string) => string;
  /** Text before the call in an `auto` answer. */
  before?: string;
  /** The format writes the call's id. */
  id?: string;
  /** What a required call follows (the block the generation prompt opened, closed). */
  required?: string;
}

const FORMATS: FormatCase[] = [
  {
    template: "Qwen-Qwen2.5-7B-Instruct.jinja",
    call: (n, a) => `<tool_call>\n{"name": "${n}", "arguments": ${a}}\n</tool_call>`,
  },
  {
    template: "Qwen3-Coder.jinja",
    call: (n, a) => {
      const params = Object.entries(JSON.parse(a)).map(([k, v]) =>
        `<parameter=${k}>\n${JSON.stringify(v)}\n</parameter>\n`
      );
      return `<tool_call>\n<function=${n}>\n${params.join("")}</function>\n</tool_call>`;
    },
  },
  {
    template: "meta-llama-Llama-3.1-8B-Instruct.jinja",
    call: (n, a) => `{"name": "${n}", "parameters": ${a}}`,
    before: "",
  },
  {
    template: "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    call: (n, a) => `[TOOL_CALLS][{"name": "${n}", "arguments": ${a}, "id": "123456789"}]`,
    id: "123456789",
  },
  {
    template: "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    call: (n, a) => `[TOOL_CALLS]${n}[CALL_ID]123456789[ARGS]${a}`,
    id: "123456789",
  },
  {
    template: "meetkai-functionary-medium-v3.1.jinja",
    call: (n, a) => `<function=${n}>${a}</function>`,
  },
  {
    template: "meetkai-functionary-medium-v3.2.jinja",
    call: (n, a) => `${n}\n${a}`,
    before: "all\nLet me check.\n>>>",
  },
  {
    template: "fireworks-ai-llama-3-firefunction-v2.jinja",
    call: (n, a) => ` functools[{"name": "${n}", "arguments": ${a}}]`,
  },
  {
    template: "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
    call: (n, a) =>
      `<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "${n}", "parameters": ${a}}\n]<|END_ACTION|>`,
    before: "<|START_RESPONSE|>Let me check.<|END_RESPONSE|>",
    id: "0",
  },
  {
    template: "llama-cpp-deepseek-r1.jinja",
    call: (n, a) =>
      `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>${n}\n\`\`\`json\n${a}\`\`\`<｜tool▁call▁end｜><｜tool▁calls▁end｜>`,
    before: "Let me think.</think>Let me check.",
    required: "Let me think.</think>",
  },
  {
    template: "deepseek-ai-DeepSeek-V3.1.jinja",
    call: (n, a) =>
      `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>${n}<｜tool▁sep｜>${a}<｜tool▁call▁end｜><｜tool▁calls▁end｜>`,
    before: "Let me think.</think>Let me check.",
    required: "Let me think.</think>",
  },
  {
    template: "ibm-granite-granite-3.3-2B-Instruct.jinja",
    call: (n, a) => `<|tool_call|>[{"name": "${n}", "arguments": ${a}}]`,
  },
  {
    template: "openai-gpt-oss-120b.jinja",
    call: (n, a) => `<|channel|>commentary to=functions.${n} <|constrain|>json<|message|>${a}`,
    before: "<|channel|>analysis<|message|>Let me check.<|end|><|start|>assistant",
  },
  {
    template: "google-gemma-2-2b-it.jinja",
    call: (n, a) => `{"tool_call": {"name": "${n}", "arguments": ${a}}}`,
    before: "",
  },
];

const tools = [T.specialFunctionTool, T.specialFunctionToolWithOptionalParam];
const good = '{"arg1": 1}';
const choices: ToolChoice[] = ["auto", "required", {
  type: "function",
  function: { name: "special_function" },
}];

for (const f of FORMATS) {
  const format = detectToolFormat(templateSource(f.template));
  const prompt = generationPrompt(
    f.template === "google-gemma-2-2b-it.jinja" ? "Qwen-Qwen2.5-7B-Instruct.jinja" : f.template,
  );
  for (const toolChoice of choices) {
    const label = typeof toolChoice === "string" ? toolChoice : "named";
    Deno.test(`[${format.name}] ${f.template}, tool_choice ${label}: the grammar takes the call and only declared, valid ones`, () => {
      const params = chatGenerationParams({ format, tools, toolChoice, generationPrompt: prompt });
      parseGbnf(params.grammar);
      const lazy = toolChoice === "auto" && format.name !== "generic";
      assert.equal(params.grammarLazy, lazy);
      const before = lazy ? (f.before ?? "Let me check. ") : (f.required ?? "");
      const output = (call: string) => before + call;
      /** The text the grammar is fed for `call`, or undefined when the trigger does not fire. */
      const constrained = (call: string) => {
        if (!lazy) return output(call);
        const at = triggerStart(params.grammarTriggers, prompt, output(call));
        return at === undefined ? undefined : (prompt + output(call)).slice(at);
      };
      const accepted = (call: string) => {
        const text = constrained(call);
        return text !== undefined && matches(params.grammar, text);
      };
      const canonical = f.call("special_function", good);
      assert.ok(
        constrained(canonical) !== undefined,
        `the trigger fires on ${JSON.stringify(output(canonical))}`,
      );
      assert.ok(
        accepted(canonical),
        `grammar takes ${JSON.stringify(constrained(canonical))}\n${params.grammar}`,
      );
      // the parser reads the call back
      const msg = parseChatOutput(output(canonical), {
        format,
        tools,
        generationPrompt: prompt,
        reasoningFormat: "auto",
      });
      assert.deepEqual(
        msg.toolCalls.map((c) => ({ ...c, arguments: JSON.parse(c.arguments) })),
        [{ id: f.id ?? "", name: "special_function", arguments: JSON.parse(good) }],
      );
      // arguments the schema forbids, a missing required one, an undeclared tool
      assert.ok(
        !accepted(f.call("special_function", '{"arg1": "one"}')),
        "a string for an integer",
      );
      assert.ok(!accepted(f.call("special_function", '{"arg2": 1}')), "arg1 missing");
      assert.ok(!accepted(f.call("rm_rf", good)), "an undeclared tool");
      // the other tool: allowed unless the choice names special_function
      const other = f.call("special_function_with_opt", '{"arg1": 1, "arg2": 2}');
      assert.equal(accepted(other), label !== "named", "special_function_with_opt");
    });
  }
}

Deno.test("parallel_tool_calls: several calls pass only when asked for", () => {
  const format = detectToolFormat(templateSource("Qwen-Qwen2.5-7B-Instruct.jinja"));
  const call = (a: string) =>
    `<tool_call>\n{"name": "special_function", "arguments": ${a}}\n</tool_call>`;
  const two = call('{"arg1": 1}') + "\n" + call('{"arg1": 2}');
  for (const parallelToolCalls of [false, true]) {
    const { grammar } = chatGenerationParams({
      format,
      tools,
      toolChoice: "required",
      parallelToolCalls,
    });
    assert.equal(matches(grammar, two), parallelToolCalls);
    assert.ok(matches(grammar, call('{"arg1": 1}')));
  }
});

Deno.test("a required call after Qwen 3's reasoning block, and after one the prompt opened (DeepSeek R1)", () => {
  const qwen3 = detectToolFormat(templateSource("Qwen-Qwen3-0.6B.jinja"));
  const { grammar } = chatGenerationParams({
    format: qwen3,
    tools,
    toolChoice: "required",
    generationPrompt: "<|im_start|>assistant\n",
  });
  const call = `<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>`;
  assert.ok(matches(grammar, call));
  assert.ok(matches(grammar, "<think>\nI should call it. a </ b <</think>\n\n" + call));
  assert.ok(!matches(grammar, "<think>\nno end" + call));
  const r1 = detectToolFormat(templateSource("llama-cpp-deepseek-r1.jinja"));
  const p = chatGenerationParams({
    format: r1,
    tools,
    toolChoice: "required",
    generationPrompt: "<｜Assistant｜><think>\n",
  });
  const r1call =
    '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{"arg1": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>';
  assert.ok(matches(p.grammar, "Thinking.</think>\n" + r1call));
  assert.ok(!matches(p.grammar, r1call), "the opened block must be closed first");
});

Deno.test("tool_choice none: no grammar, no calls parsed", () => {
  const format = detectToolFormat(templateSource("Qwen-Qwen2.5-7B-Instruct.jinja"));
  const p = chatGenerationParams({ format, tools, toolChoice: "none" });
  assert.equal(p.grammar, "");
  assert.deepEqual(p.toolNames, []);
});

Deno.test("a schema the grammar cannot enforce is a SchemaError naming the tool and keyword", () => {
  const format = detectToolFormat(templateSource("Qwen-Qwen2.5-7B-Instruct.jinja"));
  const bad = checkTools([{
    type: "function",
    function: {
      name: "pick",
      parameters: { type: "object", properties: { n: { type: "number", multipleOf: 3 } } },
    },
  }]);
  assert.throws(() => chatGenerationParams({ format, tools: bad, toolChoice: "required" }), (e) => {
    assert.ok(e instanceof SchemaError);
    assert.equal(e.keyword, "multipleOf");
    assert.match(
      e.message,
      /^tool "pick" parameters: json schema: "multipleOf" at \/properties\/n/,
    );
    return true;
  });
  const coder = detectToolFormat(templateSource("Qwen3-Coder.jinja"));
  const patterned = checkTools([{
    type: "function",
    function: {
      name: "id",
      parameters: { type: "object", properties: { s: { type: "string", pattern: "^a+$" } } },
    },
  }]);
  assert.throws(
    () => chatGenerationParams({ format: coder, tools: patterned }),
    /tool "id" parameters: .*"pattern"/,
  );
});

Deno.test("tools and tool_choice are checked, naming the field", () => {
  const cases: [unknown, string][] = [
    [{}, "tools"],
    [[{ type: "retrieval" }], "tools[0].type"],
    [[{ type: "function", function: { name: "a b" } }], "tools[0].function.name"],
    [
      [{ type: "function", function: { name: "f", parameters: "x" } }],
      "tools[0].function.parameters",
    ],
    [[{ type: "function", function: { name: "f", extra: 1 } }], "tools[0].function.extra"],
    [
      [{ type: "function", function: { name: "f" } }, {
        type: "function",
        function: { name: "f" },
      }],
      "tools[1].function.name",
    ],
  ];
  for (const [raw, field] of cases) {
    assert.throws(
      () => checkTools(raw),
      (e) => e instanceof ToolRequestError && e.field === field,
      field,
    );
  }
  const ok = checkTools([{ type: "function", function: { name: "f" } }]);
  assert.equal(checkToolChoice(undefined, ok), "auto");
  assert.throws(
    () => checkToolChoice({ type: "function", function: { name: "g" } }, ok),
    (e) =>
      e instanceof ToolRequestError && e.field === "tool_choice.function.name" &&
      /"g" is not one of the tools \(f\)/.test(e.message),
  );
  assert.throws(
    () => checkToolChoice("sometimes", ok),
    (e) => e instanceof ToolRequestError && e.field === "tool_choice",
  );
});

Deno.test("format detection on llama.cpp's templates", () => {
  const expect: Record<string, string> = {
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
    "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes",
    "Qwen-Qwen3-0.6B.jinja": "hermes",
    "Qwen-QwQ-32B.jinja": "hermes",
    "Qwen3-Coder.jinja": "qwen3-coder",
    "Qwen3.5-4B.jinja": "qwen3-coder",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral-nemo",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral-small",
    "unsloth-mistral-Devstral-Small-2507.jinja": "mistral-small",
    "meetkai-functionary-medium-v3.1.jinja": "functionary-v3.1",
    "meetkai-functionary-medium-v3.2.jinja": "functionary-v3.2",
    "fireworks-ai-llama-3-firefunction-v2.jinja": "firefunction-v2",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "command-r7b",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek-r1",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek-r1",
    "llama-cpp-deepseek-r1.jinja": "deepseek-r1",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek-v3.1",
    "ibm-granite-granite-3.3-2B-Instruct.jinja": "granite",
    "ibm-granite-granite-4.0.jinja": "hermes",
    "openai-gpt-oss-120b.jinja": "gpt-oss",
    "google-gemma-2-2b-it.jinja": "generic",
    "microsoft-Phi-3.5-mini-instruct.jinja": "generic",
  };
  for (const [template, name] of Object.entries(expect)) {
    assert.equal(detectToolFormat(templateSource(template)).name, name, template);
  }
  const qwen3 = detectToolFormat(templateSource("Qwen-Qwen3-0.6B.jinja"));
  assert.deepEqual([qwen3.thinkingStart, qwen3.thinkingEnd], ["<think>", "</think>"]);
  const r7b = detectToolFormat(
    templateSource("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"),
  );
  assert.deepEqual([r7b.thinkingStart, r7b.thinkingEnd], [
    "<|START_THINKING|>",
    "<|END_THINKING|>",
  ]);
});

Deno.test("generic format: a response or a call under auto, only calls when required; several under tool_calls", () => {
  const format = detectToolFormat(templateSource("google-gemma-2-2b-it.jinja"));
  const auto = chatGenerationParams({ format, tools, toolChoice: "auto" });
  assert.equal(auto.grammarLazy, false);
  assert.ok(matches(auto.grammar, '{"response": "Hello, world!"}'));
  const required = chatGenerationParams({ format, tools, toolChoice: "required" });
  assert.ok(!matches(required.grammar, '{"response": "Hello, world!"}'));
  const two = '{"tool_calls": [{"name": "special_function", "arguments": {"arg1": 1}}, ' +
    '{"name": "special_function_with_opt", "arguments": {"arg1": 1, "arg2": 2}}]}';
  const parallel = chatGenerationParams({
    format,
    tools,
    toolChoice: "required",
    parallelToolCalls: true,
  });
  assert.ok(matches(parallel.grammar, two));
  assert.ok(!matches(required.grammar, two));
  assert.deepEqual(parseChatOutput(two, { format, tools }).toolCalls.map((c) => c.name), [
    "special_function",
    "special_function_with_opt",
  ]);
  assert.deepEqual(parseChatOutput('{"response": "Hi"}', { format, tools }).content, "Hi");
});

Deno.test("the generation prompt is what add_generation_prompt adds", () => {
  assert.equal(
    generationPromptOf(
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
      "<|im_start|>user\nHi<|im_end|>\n",
    ),
    "<|im_start|>assistant\n",
  );
});

Deno.test("on SmolLM2's real vocabulary, each format's required grammar takes its call token by token", () => {
  const tokenizer = tokenizerOf(SMOLLM2_Q4_1);
  const eos = [...Array(tokenizer.vocabSize).keys()].find((t) => tokenizer.isEog(t))!;
  for (const f of FORMATS) {
    const format = detectToolFormat(templateSource(f.template));
    const prompt = f.template === "google-gemma-2-2b-it.jinja" ? "" : generationPrompt(f.template);
    const params = chatGenerationParams({
      format,
      tools,
      toolChoice: "required",
      generationPrompt: prompt,
    });
    const m = compileGrammar(params.grammar, tokenizer).matcher();
    const output = (f.required ?? "") + f.call("special_function", good);
    const ids = tokenizer.encode(output, { addSpecial: false });
    for (const id of ids) {
      assert.ok(m.allows(id), `${format.name}: token ${id} of ${JSON.stringify(output)}`);
      m.accept(id);
    }
    assert.ok(m.allows(eos), `${format.name}: may end after ${JSON.stringify(output)}`);
  }
});
