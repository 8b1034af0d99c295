/**
 * The parsing cases of llama.cpp's `tests/test-chat.cpp` (2026-10,
 * `test_template_output_peg_parsers`) for the formats dotllm handles, ported as data: the
 * template, the request's options, the model's output and the message llama.cpp parses
 * from it. Continuation cases (`continue_final_message`) and response-format cases are
 * left out (not part of tool parsing). `generationPrompt` is what each template writes for
 * the assistant turn after one user message (llama.cpp's `common_chat_params.generation_prompt`).
 *
 * @module
 */
import type { ReasoningFormat, ToolCall, ToolDefinition } from "../src/tools/mod.ts";
import * as T from "./_chat_tools.ts";

/** One ported case. */
export interface ChatCase {
  template: string;
  input: string;
  tools?: ToolDefinition[];
  /** The request's reasoning format; llama.cpp's test default is `none`. */
  reasoningFormat?: ReasoningFormat;
  enableThinking?: boolean;
  parallel?: boolean;
  isPartial?: boolean;
  expect: { content?: string; reasoning?: string; calls?: [string, string, string?][] };
}

const HELLO = "Hello, world!\nWhat's up?";
const THINKING = "I'm\nthinking";
const CALL: [string, string] = ["special_function", '{"arg1": 1}'];

/** The generation prompt of `template` for one user message. */
export function generationPrompt(template: string, enableThinking = true): string {
  const im = "<|im_start|>assistant\n";
  const llama = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  const granite = "<|start_of_role|>assistant<|end_of_role|>";
  const table: Record<string, string> = {
    "Qwen-QwQ-32B.jinja": im + "<think>\n" + (enableThinking ? "" : "</think>"),
    "Qwen-Qwen3-0.6B.jinja": im + (enableThinking ? "" : "<think>\n\n</think>\n\n"),
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": im,
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": im,
    "Qwen-Qwen2.5-7B-Instruct.jinja": im,
    "MiMo-VL.jinja": im,
    "Qwen3-Coder.jinja": im,
    "ibm-granite-granite-3.3-2B-Instruct.jinja": granite,
    "ibm-granite-granite-4.0.jinja": granite,
    "ibm-granite-granite-4.1.jinja": granite,
    "deepseek-ai-DeepSeek-V3.1.jinja": "<｜Assistant｜>" +
      (enableThinking ? "<think>" : "</think>"),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "<｜Assistant｜><think>\n",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "<｜Assistant｜><think>\n",
    "llama-cpp-deepseek-r1.jinja": "<｜Assistant｜><think>\n",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja":
      "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "",
    "unsloth-mistral-Devstral-Small-2507.jinja": "",
    "meetkai-functionary-medium-v3.1.jinja": llama,
    "meetkai-functionary-medium-v3.2.jinja": llama + ">>>",
    "fireworks-ai-llama-3-firefunction-v2.jinja": llama,
    "meta-llama-Llama-3.1-8B-Instruct.jinja": llama,
    "meta-llama-Llama-3.2-3B-Instruct.jinja": llama,
    "meta-llama-Llama-3.3-70B-Instruct.jinja": llama,
    "openai-gpt-oss-120b.jinja": "<|start|>assistant",
    "Qwen3.5-4B.jinja": im + (enableThinking ? "<think>\n" : "<think>\n\n</think>\n\n"),
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": im +
      (enableThinking ? "<think>\n" : "<think></think>"),
    "Reka-Edge.jinja": enableThinking ? "assistant: <think>\n" : "assistant:",
  };
  const p = table[template];
  if (p === undefined) throw new Error(`no generation prompt for ${template}`);
  return p;
}

const edit = T.editTool;
const gptOssEdit: ToolDefinition = {
  type: "function",
  function: {
    name: "edit",
    description: "Edit a file",
    parameters: {
      type: "object",
      properties: {
        oldString: { type: "string", description: "Old string to replace." },
        newString: { type: "string", description: "New replacement string." },
        replaceAll: { type: "boolean", description: "Whether to replace all occurrences." },
      },
      required: ["oldString", "newString"],
    },
  },
};

const qc = (...lines: string[]) => lines.join("\n");

/** The ported cases, in test-chat.cpp's order per template. */
export const CHAT_CASES: ChatCase[] = [
  // Qwen-QwQ-32B
  {
    template: "Qwen-QwQ-32B.jinja",
    input: "Let me think about this...\n</think>\nThe answer is 42.",
    enableThinking: true,
    reasoningFormat: "auto",
    expect: { content: "The answer is 42.", reasoning: "Let me think about this..." },
  },
  {
    template: "Qwen-QwQ-32B.jinja",
    input: "</think>Hello, world!",
    reasoningFormat: "auto",
    expect: { content: "Hello, world!" },
  },
  // NousResearch-Hermes-2-Pro
  {
    template: "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
    input: '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}</tool_call>',
    tools: [T.specialFunctionTool],
    expect: { calls: [CALL] },
  },
  {
    template: "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
    input: HELLO +
      '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}</tool_call>',
    tools: [T.specialFunctionTool],
    expect: { content: HELLO, calls: [CALL] },
  },
  // IBM Granite 3.3
  {
    template: "ibm-granite-granite-3.3-2B-Instruct.jinja",
    input: HELLO,
    expect: { content: HELLO },
  },
  {
    template: "ibm-granite-granite-3.3-2B-Instruct.jinja",
    input: "<think>I'm\nthinking</think>" + HELLO,
    reasoningFormat: "deepseek",
    expect: { content: HELLO, reasoning: THINKING },
  },
  // IBM Granite 4.0 and 4.1
  ...["ibm-granite-granite-4.0.jinja", "ibm-granite-granite-4.1.jinja"].flatMap((
    template,
  ): ChatCase[] => [
    { template, input: HELLO, expect: { content: HELLO } },
    {
      template,
      input: '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>',
      tools: [T.specialFunctionTool],
      expect: { calls: [CALL] },
    },
  ]),
  // Qwen3-Coder
  { template: "Qwen3-Coder.jinja", input: HELLO, expect: { content: HELLO } },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=special_function>",
      "<parameter=arg1>",
      "1",
      "</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.specialFunctionTool],
    expect: { calls: [CALL] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<function=special_function>",
      "<parameter=arg1>",
      "1",
      "</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.specialFunctionTool],
    expect: { calls: [CALL] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "Let me call it.",
      "<function=special_function>",
      "<parameter=arg1>",
      "1",
      "</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.specialFunctionTool],
    expect: { content: "Let me call it.\n", calls: [CALL] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<function=special_function>",
      "<parameter=arg1>",
      "1",
      "</parameter>",
      "</function>",
      "</tool_call>",
      "<tool_call>",
      "<function=special_function_with_opt>",
      "<parameter=arg1>",
      "1",
      "</parameter>",
      "<parameter=arg2>",
      "2",
      "</parameter>",
      "</function>",
      "</tool_call>",
    ),
    parallel: true,
    tools: [T.specialFunctionTool, T.specialFunctionToolWithOptionalParam],
    expect: { calls: [CALL, ["special_function_with_opt", '{"arg1": 1, "arg2": 2}']] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=special_function>",
      "<parameter=arg1>",
      "1",
      "</parameter>",
      "</function>",
      "</tool_call>",
      "<tool_call>",
      "<function=special_function_with_opt>",
      "<parameter=arg1>",
      "1",
      "</parameter>",
      "<parameter=arg2>",
      "2",
      "</parameter>",
      "</function>",
      "</tool_call>",
    ),
    parallel: true,
    tools: [T.specialFunctionTool, T.specialFunctionToolWithOptionalParam],
    expect: { calls: [CALL, ["special_function_with_opt", '{"arg1": 1, "arg2": 2}']] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=python>",
      "<parameter=code>",
      "def hello():",
      '    print("Hello, world!")',
      "",
      "hello()",
      "</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.pythonTool],
    expect: {
      calls: [["python", '{"code": "def hello():\\n    print(\\"Hello, world!\\")\\n\\nhello()"}']],
    },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=python>",
      "<parameter=code>",
      "格",
      "</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.pythonTool],
    expect: { calls: [["python", '{"code": "格"}']] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=html>",
      "<parameter=markup>",
      "<html>",
      " <head>",
      "  <title>Hello!</title>",
      " </head>",
      "</html>",
      "</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.htmlTool],
    expect: {
      calls: [[
        "html",
        '{"markup": "<html>\\n <head>\\n  <title>Hello!</title>\\n </head>\\n</html>"}',
      ]],
    },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=todo_list>",
      "<parameter=todos>",
      '[{"item": "Check stuff", "selected": false}, {"item": "Prepare stuff", "selected": true}]',
      "</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.todoList],
    expect: {
      calls: [[
        "todo_list",
        '{"todos": [{"item": "Check stuff", "selected": false}, {"item": "Prepare stuff", "selected": true}]}',
      ]],
    },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=edit>",
      "<parameter=newString>\n#include\n</parameter>",
      "<parameter=filename>\nfoo.c\n</parameter>",
      "<parameter=oldString>\n#iclunde\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [edit],
    expect: {
      calls: [["edit", '{"newString": "#include", "filename": "foo.c", "oldString": "#iclunde"}']],
    },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=tool_2req_4opt>",
      "<parameter=req2>\n42\n</parameter>",
      "<parameter=req1>\nhello\n</parameter>",
      "<parameter=opt2>\n200\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.tool2req4opt],
    expect: { calls: [["tool_2req_4opt", '{"req2": 42, "req1": "hello", "opt2": 200}']] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=tool_2req_4opt>",
      "<parameter=req1>\nhello\n</parameter>",
      "<parameter=req2>\n42\n</parameter>",
      "<parameter=opt4>\n100\n</parameter>",
      "<parameter=opt2>\n200\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.tool2req4opt],
    expect: {
      calls: [["tool_2req_4opt", '{"req1": "hello", "req2": 42, "opt4": 100, "opt2": 200}']],
    },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=tool_2req_5opt>",
      "<parameter=req1>\nworld\n</parameter>",
      "<parameter=req2>\n7\n</parameter>",
      "<parameter=opt5>\nlast\n</parameter>",
      "<parameter=opt3>\nmiddle\n</parameter>",
      "<parameter=opt1>\nfirst\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.tool2req5opt],
    expect: {
      calls: [[
        "tool_2req_5opt",
        '{"req1": "world", "req2": 7, "opt5": "last", "opt3": "middle", "opt1": "first"}',
      ]],
    },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=tool_2req_5opt>",
      "<parameter=req1>\ntest\n</parameter>",
      "<parameter=req2>\n99\n</parameter>",
      "<parameter=opt3>\nc\n</parameter>",
      "<parameter=opt1>\na\n</parameter>",
      "<parameter=opt5>\ne\n</parameter>",
      "<parameter=opt4>\n4\n</parameter>",
      "<parameter=opt2>\n2\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.tool2req5opt],
    expect: {
      calls: [[
        "tool_2req_5opt",
        '{"req1": "test", "req2": 99, "opt3": "c", "opt1": "a", "opt5": "e", "opt4": 4, "opt2": 2}',
      ]],
    },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=set_nullable_str>",
      "<parameter=name>\nhello world\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.nullableStringTool],
    expect: { calls: [["set_nullable_str", '{"name": "hello world"}']] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=set_nullable_str_nf>",
      "<parameter=name>\nhello world\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.nullableStringNullFirstTool],
    expect: { calls: [["set_nullable_str_nf", '{"name": "hello world"}']] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=set_nullable_int>",
      "<parameter=count>\n42\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.nullableIntTool],
    expect: { calls: [["set_nullable_int", '{"count": 42}']] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=set_nullable_str>",
      "<parameter=name>\nnull\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.nullableStringTool],
    expect: { calls: [["set_nullable_str", '{"name": null}']] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=set_union>",
      '<parameter=value>\n{"a": 1}\n</parameter>',
      "<parameter=amount>\n2 dollars\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.stringUnionTool],
    expect: { calls: [["set_union", '{"value": {"a": 1}, "amount": "2 dollars"}']] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=set_union>",
      "<parameter=value>\n{not valid json\n</parameter>",
      "<parameter=amount>\n42\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.stringUnionTool],
    expect: { calls: [["set_union", '{"value": "{not valid json", "amount": 42}']] },
  },
  {
    template: "Qwen3-Coder.jinja",
    input: qc(
      "<tool_call>",
      "<function=set_unit>",
      "<parameter=unit>\ncelsius\n</parameter>",
      "</function>",
      "</tool_call>",
    ),
    tools: [T.enumNoTypeTool],
    expect: { calls: [["set_unit", '{"unit": "celsius"}']] },
  },
  // DeepSeek V3.1
  {
    template: "deepseek-ai-DeepSeek-V3.1.jinja",
    input:
      '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{"city": "XYZCITY"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    tools: [T.getTimeTool],
    enableThinking: false,
    reasoningFormat: "deepseek",
    expect: { calls: [["get_time", '{"city":"XYZCITY"}']] },
  },
  {
    template: "deepseek-ai-DeepSeek-V3.1.jinja",
    input:
      'REASONING</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{"city": "Tokyo"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    enableThinking: true,
    reasoningFormat: "deepseek",
    tools: [T.getTimeTool],
    expect: { reasoning: "REASONING", calls: [["get_time", '{"city":"Tokyo"}']] },
  },
  {
    template: "deepseek-ai-DeepSeek-V3.1.jinja",
    input:
      'REASONING</think>CONTENT<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    tools: [T.getTimeTool, T.getWeatherTool],
    enableThinking: true,
    reasoningFormat: "deepseek",
    parallel: true,
    expect: {
      reasoning: "REASONING",
      content: "CONTENT",
      calls: [["get_time", '{"city":"Paris"}'], ["get_weather", '{"city":"Paris"}']],
    },
  },
  {
    template: "deepseek-ai-DeepSeek-V3.1.jinja",
    input: "REASONING</think>\nCONTENT",
    enableThinking: true,
    reasoningFormat: "deepseek",
    expect: { content: "CONTENT", reasoning: "REASONING\n" },
  },
  {
    template: "deepseek-ai-DeepSeek-V3.1.jinja",
    input: "CONTENT",
    enableThinking: false,
    reasoningFormat: "deepseek",
    expect: { content: "CONTENT" },
  },
  // Command R7B
  {
    template: "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
    input: "<|START_RESPONSE|>" + HELLO + "<|END_RESPONSE|>",
    expect: { content: HELLO },
  },
  {
    template: "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
    input: "<|START_THINKING|>I'm\nthinking<|END_THINKING|><|START_ACTION|>[\n" +
      '    {"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}}\n' +
      "]<|END_ACTION|>",
    reasoningFormat: "deepseek",
    tools: [T.specialFunctionTool],
    expect: { reasoning: THINKING, calls: [[...CALL, "0"]] },
  },
  // Mistral Nemo
  {
    template: "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    input: HELLO,
    expect: { content: HELLO },
  },
  {
    template: "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    input:
      '[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]',
    tools: [T.specialFunctionTool],
    expect: { calls: [[...CALL, "123456789"]] },
  },
  // Functionary v3.1
  { template: "meetkai-functionary-medium-v3.1.jinja", input: HELLO, expect: { content: HELLO } },
  {
    template: "meetkai-functionary-medium-v3.1.jinja",
    input: '<function=special_function>{"arg1": 1}</function>',
    tools: [T.specialFunctionTool],
    expect: { calls: [CALL] },
  },
  // Functionary v3.2
  {
    template: "meetkai-functionary-medium-v3.2.jinja",
    input: "all\n" + HELLO,
    expect: { content: HELLO },
  },
  {
    template: "meetkai-functionary-medium-v3.2.jinja",
    input: 'special_function\n{"arg1": 1}',
    tools: [T.specialFunctionTool],
    expect: { calls: [CALL] },
  },
  // FireFunction v2
  {
    template: "fireworks-ai-llama-3-firefunction-v2.jinja",
    input: HELLO,
    expect: { content: HELLO },
  },
  {
    template: "fireworks-ai-llama-3-firefunction-v2.jinja",
    input: ' functools[{"name": "special_function", "arguments": {"arg1": 1}}]',
    tools: [T.specialFunctionTool],
    expect: { calls: [CALL] },
  },
  // DeepSeek R1 Distill Llama 8B
  {
    template: "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
    input: "</think>" + HELLO,
    reasoningFormat: "deepseek",
    expect: { content: HELLO },
  },
  {
    template: "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
    input: "I'm\nthinking</think>" + HELLO,
    enableThinking: true,
    reasoningFormat: "deepseek",
    expect: { content: HELLO, reasoning: THINKING },
  },
  // llama.cpp's DeepSeek R1 template
  {
    template: "llama-cpp-deepseek-r1.jinja",
    input: "</think>" + HELLO,
    reasoningFormat: "deepseek",
    expect: { content: HELLO },
  },
  {
    template: "llama-cpp-deepseek-r1.jinja",
    input: "I'm\nthinking</think>" + HELLO,
    reasoningFormat: "deepseek",
    expect: { content: HELLO, reasoning: THINKING },
  },
  {
    template: "llama-cpp-deepseek-r1.jinja",
    input:
      "</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n" +
      '```json\n{"arg1": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    reasoningFormat: "deepseek",
    tools: [T.specialFunctionTool],
    parallel: true,
    expect: { calls: [CALL] },
  },
  // DeepSeek R1 Distill Qwen 32B
  {
    template: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    input: "</think>" + HELLO,
    enableThinking: true,
    reasoningFormat: "deepseek",
    expect: { content: HELLO },
  },
  {
    template: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    input: "I'm\nthinking</think>" + HELLO,
    reasoningFormat: "deepseek",
    expect: { content: HELLO, reasoning: THINKING },
  },
  {
    template: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    input: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n" +
      '```json\n{"arg1": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    tools: [T.specialFunctionTool],
    enableThinking: false,
    reasoningFormat: "deepseek",
    expect: { calls: [CALL] },
  },
  // MiMo-VL, Hermes 3, Qwen 2.5
  ...[
    "MiMo-VL.jinja",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
    "Qwen-Qwen2.5-7B-Instruct.jinja",
  ]
    .flatMap((template): ChatCase[] => [
      { template, input: HELLO, expect: { content: HELLO } },
      {
        template,
        input: '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>',
        tools: [T.specialFunctionTool],
        expect: { calls: [CALL] },
      },
    ]),
  // Mistral Small 3.2
  {
    template: "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    input: HELLO,
    expect: { content: HELLO },
  },
  {
    template: "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    input: '[TOOL_CALLS]special_function[CALL_ID]123456789[ARGS]{"arg1": 1}',
    tools: [T.specialFunctionTool],
    expect: { calls: [[...CALL, "123456789"]] },
  },
  {
    template: "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    input: '[TOOL_CALLS]special_function[CALL_ID]000000001[ARGS]{"arg1": 1}' +
      '[TOOL_CALLS]special_function_with_opt[CALL_ID]000000002[ARGS]{"arg1": 1, "arg2": 2}',
    parallel: true,
    tools: [T.specialFunctionTool, T.specialFunctionToolWithOptionalParam],
    expect: {
      calls: [[...CALL, "000000001"], [
        "special_function_with_opt",
        '{"arg1": 1, "arg2": 2}',
        "000000002",
      ]],
    },
  },
  // Devstral
  {
    template: "unsloth-mistral-Devstral-Small-2507.jinja",
    input: HELLO,
    expect: { content: HELLO },
  },
  {
    template: "unsloth-mistral-Devstral-Small-2507.jinja",
    input: '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}',
    tools: [T.specialFunctionTool],
    expect: { calls: [CALL] },
  },
  {
    template: "unsloth-mistral-Devstral-Small-2507.jinja",
    input: HELLO + '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}',
    tools: [T.specialFunctionTool],
    expect: { content: HELLO, calls: [CALL] },
  },
  // Llama 3.1, 3.2, 3.3
  {
    template: "meta-llama-Llama-3.1-8B-Instruct.jinja",
    input: HELLO,
    tools: [T.specialFunctionTool],
    expect: { content: HELLO },
  },
  {
    template: "meta-llama-Llama-3.2-3B-Instruct.jinja",
    input: HELLO,
    tools: [T.specialFunctionTool],
    expect: { content: HELLO },
  },
  {
    template: "meta-llama-Llama-3.3-70B-Instruct.jinja",
    input: HELLO,
    tools: [T.pythonTool],
    expect: { content: HELLO },
  },
  // gpt-oss
  ...(() => {
    const template = "openai-gpt-oss-120b.jinja";
    const auto: ReasoningFormat = "auto";
    const cases: ChatCase[] = [
      { template, input: "<|channel|>final<|message|>" + HELLO, expect: { content: HELLO } },
      { template, input: "<|channel|>commentary<|message|>" + HELLO, expect: { content: HELLO } },
      {
        template,
        input:
          "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>" +
          HELLO,
        reasoningFormat: auto,
        expect: { content: HELLO, reasoning: THINKING },
      },
      {
        template,
        input:
          "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>" +
          HELLO,
        reasoningFormat: "none",
        expect: { content: "<|channel|>analysis<|message|>I'm\nthinking<|end|>" + HELLO },
      },
      {
        template,
        input: "<|channel|>analysis<|message|>I'm\nthinking",
        reasoningFormat: auto,
        isPartial: true,
        expect: { reasoning: THINKING },
      },
      {
        template,
        input: ' to=functions.special_function<|channel|>analysis<|message|>{"arg1": 1}',
        reasoningFormat: auto,
        tools: [T.specialFunctionTool],
        expect: { calls: [CALL] },
      },
      {
        template,
        input: '<|channel|>analysis to=functions.special_function<|message|>{"arg1": 1}',
        reasoningFormat: auto,
        tools: [T.specialFunctionTool],
        expect: { calls: [CALL] },
      },
      {
        template,
        input:
          ' to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{"arg1": 1}',
        reasoningFormat: auto,
        tools: [T.specialFunctionTool],
        expect: { calls: [CALL] },
      },
      {
        template,
        input: '<|channel|>commentary to=functions.special_function<|message|>{"arg1": 1}',
        reasoningFormat: auto,
        tools: [T.specialFunctionTool],
        expect: { calls: [CALL] },
      },
      {
        template,
        input: "<|channel|>analysis<|message|>I'm\nthinking<|end|>" +
          '<|start|>assistant to=functions.special_function<|channel|>analysis<|message|>{"arg1": 1}',
        reasoningFormat: auto,
        tools: [T.specialFunctionTool],
        expect: { reasoning: THINKING, calls: [CALL] },
      },
      {
        template,
        input: "<|channel|>analysis<|message|>Thinking about edit...<|end|>" +
          "<|start|>assistant<|channel|>commentary to=functions.edit <|constrain|>json" +
          '<|message|>{"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {", "replaceAll": false}',
        reasoningFormat: auto,
        tools: [gptOssEdit],
        expect: {
          reasoning: "Thinking about edit...",
          calls: [[
            "edit",
            '{"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {", "replaceAll": false}',
          ]],
        },
      },
      {
        template,
        input: "<|channel|>analysis<|message|>I will execute python to say hello<|end|>" +
          "<|start|>assistant to=container.exec<|channel|>commentary<|message|>python3 -c 'print(\"hello\")'",
        reasoningFormat: auto,
        expect: { reasoning: "I will execute python to say hello", content: "" },
      },
      {
        template,
        input: "<|channel|>analysis<|message|>I will execute python to say hello<|end|>" +
          '<|start|>assistant<|channel|>commentary to=python <|constrain|>code<|message|>print("hello")',
        reasoningFormat: auto,
        expect: { reasoning: "I will execute python to say hello", content: "" },
      },
      {
        template,
        input:
          "<|channel|>commentary to=assistant<|channel|>analysis<|message|>I'm\nthinking<|end|>" +
          "<|start|>assistant<|channel|>final<|message|>" + HELLO,
        reasoningFormat: auto,
        expect: { content: HELLO, reasoning: THINKING },
      },
      {
        template,
        input:
          "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary to=assistant" +
          "<|channel|>final<|message|>" + HELLO,
        reasoningFormat: auto,
        expect: { content: HELLO, reasoning: THINKING },
      },
    ];
    return cases;
  })(),
  ...thinkingXmlCases(),
  ...rekaCases(),
];

/** Qwen3.5 and Nemotron 3 Nano: Qwen3-Coder's XML calls after a `<think>` block the prompt opens. */
function thinkingXmlCases(): ChatCase[] {
  const call = (name: string, ...params: [string, string][]) =>
    qc(
      "<tool_call>",
      `<function=${name}>`,
      ...params.map(([k, v]) => `<parameter=${k}>\n${v}\n</parameter>`),
      "</function>",
      "</tool_call>",
    );
  const one = call("special_function", ["arg1", "1"]);
  const two = one + "\n" + call("special_function_with_opt", ["arg1", "1"], ["arg2", "2"]);
  const python = call("python", ["code", 'def hello():\n    print("Hello, world!")\n\nhello()']);
  const pythonArgs = '{"code": "def hello():\\n    print(\\"Hello, world!\\")\\n\\nhello()"}';
  const pwd = call("run_in_terminal", ["command", "pwd"]);
  const pwdCall: [string, string] = ["run_in_terminal", '{"command": "pwd"}'];
  const both = [T.specialFunctionTool, T.specialFunctionToolWithOptionalParam];
  const auto: ReasoningFormat = "auto";
  const q = "Qwen3.5-4B.jinja";
  const n = "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja";
  return [
    {
      template: q,
      input: "I'm\nthinking\n</think>\n\n" + HELLO,
      reasoningFormat: auto,
      enableThinking: true,
      expect: { content: HELLO, reasoning: THINKING },
    },
    {
      template: q,
      input: "I'm\nthinking\n</think>\n\n" + HELLO,
      enableThinking: true,
      reasoningFormat: "none",
      expect: { content: "<think>\nI'm\nthinking\n</think>\n\n" + HELLO },
    },
    {
      template: q,
      input: one,
      enableThinking: false,
      reasoningFormat: auto,
      tools: [T.specialFunctionTool],
      expect: { calls: [CALL] },
    },
    {
      template: q,
      input: "I'm\nthinking\n</think>\n\n" + one,
      reasoningFormat: auto,
      tools: [T.specialFunctionTool],
      expect: { reasoning: THINKING, calls: [CALL] },
    },
    {
      template: q,
      input: two,
      enableThinking: false,
      reasoningFormat: auto,
      parallel: true,
      tools: both,
      expect: { calls: [CALL, ["special_function_with_opt", '{"arg1": 1, "arg2": 2}']] },
    },
    {
      template: q,
      input: python,
      enableThinking: false,
      reasoningFormat: auto,
      tools: [T.pythonTool],
      expect: { calls: [["python", pythonArgs]] },
    },
    {
      template: q,
      input: call("edit", ["filename", "foo.c"], ["oldString", "#iclunde"], [
        "newString",
        "#include",
      ]),
      enableThinking: false,
      reasoningFormat: auto,
      tools: [T.editTool],
      expect: {
        calls: [[
          "edit",
          '{"filename": "foo.c", "oldString": "#iclunde", "newString": "#include"}',
        ]],
      },
    },
    {
      template: q,
      input: call("edit", ["filename", "foo.c"], ["oldString", "#iclunde"], [
        "newString",
        "#include\n",
      ]),
      enableThinking: false,
      reasoningFormat: auto,
      tools: [T.editTool],
      expect: {
        calls: [[
          "edit",
          '{"filename": "foo.c", "oldString": "#iclunde", "newString": "#include\\n"}',
        ]],
      },
    },
    {
      template: q,
      input: call("python", ["code", '    print("Hello, world!")']),
      enableThinking: false,
      reasoningFormat: auto,
      tools: [T.pythonTool],
      expect: { calls: [["python", '{"code": "    print(\\"Hello, world!\\")"}']] },
    },
    {
      template: q,
      input: pwd,
      enableThinking: true,
      reasoningFormat: auto,
      tools: [T.runInTerminalTool],
      expect: { calls: [pwdCall] },
    },
    {
      template: q,
      input: "Need to inspect the current directory.\n" + pwd,
      enableThinking: true,
      reasoningFormat: auto,
      tools: [T.runInTerminalTool],
      expect: { reasoning: "Need to inspect the current directory.", calls: [pwdCall] },
    },
    {
      template: q,
      input: qc("<tool_call>", "<function=empty_args>", "</function>", "</tool_call>"),
      enableThinking: false,
      reasoningFormat: auto,
      tools: [T.emptyArgsTool],
      expect: { calls: [["empty_args", "{}"]] },
    },
    {
      template: q,
      input: qc("<tool_call>", "<function=empty_args_no_props>", "</function>", "</tool_call>"),
      enableThinking: false,
      reasoningFormat: auto,
      tools: [T.emptyArgsToolNoProperties],
      expect: { calls: [["empty_args_no_props", "{}"]] },
    },
    {
      template: q,
      input: "<think>\n\n</think>\n\n" + one,
      reasoningFormat: auto,
      tools: [T.specialFunctionTool],
      expect: { reasoning: "<think>\n\n", calls: [CALL] },
    },
    {
      template: q,
      input: "</think>\n\n" + one,
      reasoningFormat: auto,
      tools: [T.specialFunctionTool],
      expect: { calls: [CALL] },
    },
    {
      template: q,
      input: "</think>\n\n" + pwd,
      reasoningFormat: auto,
      enableThinking: true,
      tools: [T.runInTerminalTool],
      expect: { calls: [pwdCall] },
    },
    {
      template: q,
      input: "</think>\n\nLet me inspect the current directory.\n" + pwd,
      reasoningFormat: auto,
      enableThinking: true,
      tools: [T.runInTerminalTool],
      expect: { content: "Let me inspect the current directory.\n", calls: [pwdCall] },
    },
    {
      template: q,
      input: "I should inspect the directory.\n</think>\n\nLet me inspect it now.\n" + pwd,
      reasoningFormat: auto,
      enableThinking: true,
      tools: [T.runInTerminalTool],
      expect: {
        reasoning: "I should inspect the directory.",
        content: "Let me inspect it now.\n",
        calls: [pwdCall],
      },
    },
    {
      template: n,
      input: HELLO,
      enableThinking: false,
      reasoningFormat: auto,
      expect: { content: HELLO },
    },
    {
      template: n,
      input: "I'm\nthinking\n</think>\n" + HELLO,
      enableThinking: true,
      reasoningFormat: "none",
      expect: { content: "<think>\nI'm\nthinking\n</think>\n" + HELLO },
    },
    {
      template: n,
      input: "I'm\nthinking\n</think>\n" + HELLO,
      enableThinking: true,
      reasoningFormat: auto,
      expect: { content: HELLO, reasoning: THINKING },
    },
    {
      template: n,
      input: one + "\n",
      enableThinking: false,
      reasoningFormat: auto,
      tools: [T.specialFunctionTool],
      expect: { calls: [CALL] },
    },
    {
      template: n,
      input: "I'm\nthinking\n</think>\n" + one + "\n",
      reasoningFormat: auto,
      tools: [T.specialFunctionTool],
      expect: { reasoning: THINKING, calls: [CALL] },
    },
    {
      template: n,
      input: two + "\n",
      enableThinking: false,
      reasoningFormat: auto,
      parallel: true,
      tools: both,
      expect: { calls: [CALL, ["special_function_with_opt", '{"arg1": 1, "arg2": 2}']] },
    },
    {
      template: n,
      input: python + "\n",
      enableThinking: false,
      reasoningFormat: auto,
      tools: [T.pythonTool],
      expect: { calls: [["python", pythonArgs]] },
    },
  ];
}

/** Reka Edge: Hermes-style calls, `<think>` opened by the prompt when thinking. */
function rekaCases(): ChatCase[] {
  const template = "Reka-Edge.jinja";
  const call = '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>';
  return [
    { template, input: HELLO, enableThinking: false, expect: { content: HELLO } },
    {
      template,
      input: "I'm\nthinking\n</think>\n\n" + HELLO,
      enableThinking: true,
      reasoningFormat: "deepseek",
      expect: { content: HELLO, reasoning: THINKING },
    },
    {
      template,
      input: call,
      enableThinking: false,
      tools: [T.specialFunctionTool],
      expect: { calls: [CALL] },
    },
    {
      template,
      input: HELLO + "\n" + call,
      enableThinking: false,
      tools: [T.specialFunctionTool],
      expect: { content: HELLO, calls: [CALL] },
    },
    {
      template,
      input: "I'm\nthinking\n</think>\n\n" + call,
      enableThinking: true,
      reasoningFormat: "deepseek",
      tools: [T.specialFunctionTool],
      expect: { reasoning: THINKING, calls: [CALL] },
    },
    {
      template,
      input: call +
        '\n<tool_call>\n{"name": "special_function_with_opt", "arguments": {"arg1": 1, "arg2": 2}}\n</tool_call>',
      enableThinking: false,
      parallel: true,
      tools: [T.specialFunctionTool, T.specialFunctionToolWithOptionalParam],
      expect: { calls: [CALL, ["special_function_with_opt", '{"arg1": 1, "arg2": 2}']] },
    },
    {
      template,
      input: '<tool_call>\n{"name": "special_function", "arguments": {"arg',
      enableThinking: false,
      tools: [T.specialFunctionTool],
      isPartial: true,
      expect: { calls: [["special_function", '{"arg']] },
    },
  ];
}

/** The expected calls as `ToolCall`s. */
export function expectedCalls(c: ChatCase): ToolCall[] {
  return (c.expect.calls ?? []).map(([name, args, id]) => ({
    id: id ?? "",
    name,
    arguments: args,
  }));
}
