/**
 * Tool-call and reasoning parsing against llama.cpp's `tests/test-chat.cpp` (2026-10): each
 * ported case (`_chat_cases.ts`) is parsed as llama.cpp's `test_peg_parser` parses it —
 * every prefix of the output as a partial parse, the diffs between successive parses
 * accumulated and compared with each parse, then the whole output — and the final message
 * must be the one llama.cpp expects (content and reasoning compared trimmed, arguments as
 * JSON, as its `assert_msg_equals` compares them). The format is detected from the real
 * template file.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  chatGenerationParams,
  computeDiffs,
  detectToolFormat,
  diffsToDeltas,
  parseChatOutput,
  type ParsedMessage,
  toolCallIdGenerator,
  ToolCallIds,
  type ToolFormat,
  type ToolFormatName,
} from "../src/tools/mod.ts";
import { CHAT_CASES, type ChatCase, expectedCalls, generationPrompt } from "./_chat_cases.ts";
import * as T from "./_chat_tools.ts";
import { matches, triggerStart } from "./_grammar_text.ts";
import { ensureLlamaCppSource } from "./_llamacpp_src.ts";

const templatesDir = join(ensureLlamaCppSource(), "models", "templates");
const templateSource = (name: string) => readFileSync(join(templatesDir, name), "utf8");

/** llama.cpp's `renormalize_json`: a JSON text re-dumped, "" when it does not parse. */
function renormalize(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return "";
  }
}

/** llama.cpp's `assert_msg_equals(expected, actual, ignore_whitespace_differences = true)`. */
function assertMessage(actual: ParsedMessage, expected: ParsedMessage, what: string): void {
  assert.equal(actual.content.trim(), expected.content.trim(), `${what}: content`);
  assert.equal(
    actual.reasoningContent.trim(),
    expected.reasoningContent.trim(),
    `${what}: reasoning`,
  );
  assert.equal(actual.toolCalls.length, expected.toolCalls.length, `${what}: number of calls`);
  expected.toolCalls.forEach((e, i) => {
    const a = actual.toolCalls[i];
    assert.equal(a.name, e.name, `${what}: call ${i} name`);
    assert.equal(
      renormalize(a.arguments),
      renormalize(e.arguments),
      `${what}: call ${i} arguments`,
    );
    assert.equal(a.id, e.id, `${what}: call ${i} id`);
  });
}

/** Parses `c` as llama.cpp's test_peg_parser does; returns the final message. */
function runCase(c: ChatCase): ParsedMessage {
  const format = detectToolFormat(templateSource(c.template));
  const options = {
    format,
    tools: c.tools ?? [],
    reasoningFormat: c.reasoningFormat ?? "none",
    generationPrompt: generationPrompt(c.template, c.enableThinking ?? true),
    enableThinking: c.enableThinking ?? true,
  };
  const chars = [...c.input];
  const accum: ParsedMessage = { content: "", reasoningContent: "", toolCalls: [] };
  let prev: ParsedMessage = { content: "", reasoningContent: "", toolCalls: [] };
  for (let i = 1; i <= chars.length; i++) {
    const prefix = chars.slice(0, i).join("");
    const isPartial = i < chars.length || (c.isPartial ?? false);
    const current = parseChatOutput(prefix, { ...options, isPartial });
    for (const d of computeDiffs(prev, current)) {
      accum.reasoningContent += d.reasoningContentDelta;
      accum.content += d.contentDelta;
      if (d.toolCallIndex >= 0) {
        while (accum.toolCalls.length <= d.toolCallIndex) {
          accum.toolCalls.push({ id: "", name: "", arguments: "" });
        }
        const call = accum.toolCalls[d.toolCallIndex];
        if (d.toolCallDelta.name !== "") call.name = d.toolCallDelta.name;
        if (d.toolCallDelta.id !== "") call.id = d.toolCallDelta.id;
        call.arguments += d.toolCallDelta.arguments;
      }
    }
    assertMessage(accum, current, `after ${JSON.stringify(prefix)}: accumulated diffs vs parse`);
    prev = current;
  }
  const expected: ParsedMessage = {
    content: c.expect.content ?? "",
    reasoningContent: c.expect.reasoning ?? "",
    toolCalls: expectedCalls(c),
  };
  if (!c.isPartial) {
    assertMessage(
      parseChatOutput(c.input, { ...options, isPartial: false }),
      expected,
      "final parse",
    );
  }
  assertMessage(accum, expected, "accumulated stream");
  if (!c.isPartial && expected.toolCalls.length > 0) {
    checkGrammar(c, format, options.generationPrompt);
  }
  return accum;
}

/**
 * As test-chat.cpp checks a case's grammar (tool_choice auto): the lazy grammar's trigger
 * fires on the output, and the grammar takes the output from there to the end.
 */
function checkGrammar(c: ChatCase, format: ToolFormat, generationPrompt: string): void {
  const params = chatGenerationParams({
    format,
    tools: c.tools,
    parallelToolCalls: c.parallel ?? false,
    generationPrompt,
    enableThinking: c.enableThinking ?? true,
  });
  let constrained = c.input;
  if (params.grammarLazy) {
    const at = triggerStart(params.grammarTriggers, generationPrompt, c.input);
    assert.ok(at !== undefined, `the trigger does not fire on ${JSON.stringify(c.input)}`);
    constrained = (generationPrompt + c.input).slice(at);
  }
  assert.ok(
    matches(params.grammar, constrained),
    `the grammar refuses ${JSON.stringify(constrained)}\n${params.grammar}`,
  );
}

/** The ported cases per format, counted for the report. */
const perFormat = new Map<ToolFormatName, number>();
for (const c of CHAT_CASES) {
  const name = detectToolFormat(templateSource(c.template)).name;
  perFormat.set(name, (perFormat.get(name) ?? 0) + 1);
  Deno.test(`test-chat.cpp [${c.template}] ${JSON.stringify(c.input).slice(0, 70)}`, () => {
    runCase(c);
  });
}

Deno.test("the ported cases cover every tool-call format", () => {
  const covered = [...perFormat.keys()].sort();
  assert.deepEqual(covered, [
    "command-r7b",
    "deepseek-r1",
    "deepseek-v3.1",
    "firefunction-v2",
    "functionary-v3.1",
    "functionary-v3.2",
    "gpt-oss",
    "granite",
    "hermes",
    "llama3",
    "mistral-nemo",
    "mistral-small",
    "qwen3-coder",
  ]);
  console.log(Object.fromEntries([...perFormat].sort()));
});

/** An OpenAI client's view of a stream: the deltas of every parse, concatenated. */
function streamAsClient(c: ChatCase, ids: ToolCallIds) {
  const format = detectToolFormat(templateSource(c.template));
  const options = {
    format,
    tools: c.tools ?? [],
    reasoningFormat: c.reasoningFormat ?? "auto" as const,
    generationPrompt: generationPrompt(c.template, c.enableThinking ?? true),
    enableThinking: c.enableThinking ?? true,
  };
  const chars = [...c.input];
  const client = {
    content: "",
    reasoning: "",
    calls: [] as { id: string; name: string; arguments: string }[],
  };
  let prev: ParsedMessage = { content: "", reasoningContent: "", toolCalls: [] };
  let final = prev;
  for (let i = 1; i <= chars.length; i++) {
    const current = ids.assign(
      parseChatOutput(chars.slice(0, i).join(""), {
        ...options,
        isPartial: i < chars.length || (c.isPartial ?? false),
      }),
    );
    for (const delta of diffsToDeltas(computeDiffs(prev, current))) {
      assert.equal(Object.keys(delta).length, 1, JSON.stringify(delta));
      client.content += delta.content ?? "";
      client.reasoning += delta.reasoning_content ?? "";
      for (const tc of delta.tool_calls ?? []) {
        if (tc.id !== undefined) {
          // a call's first delta names it: id, type and name
          assert.equal(tc.index, client.calls.length);
          assert.equal(tc.type, "function");
          client.calls.push({ id: tc.id, name: tc.function.name!, arguments: "" });
        }
        client.calls[tc.index].arguments += tc.function.arguments;
      }
    }
    prev = final = current;
  }
  return { client, final };
}

Deno.test("streamed OpenAI deltas concatenate to the final message, ids stable across parses", () => {
  let n = 0;
  for (const c of CHAT_CASES.filter((c) => (c.expect.calls?.length ?? 0) > 0)) {
    let counter = 0;
    const ids = new ToolCallIds(() => `call${counter++}`);
    const { client, final } = streamAsClient(c, ids);
    assert.equal(client.content, final.content, c.input);
    assert.equal(client.reasoning, final.reasoningContent, c.input);
    assert.deepEqual(client.calls, final.toolCalls, c.input);
    // ids: the format's own where it writes them, else generated once per call
    final.toolCalls.forEach((call, i) => {
      const own = c.expect.calls![i][2];
      assert.equal(
        call.id,
        own ?? `call${i - (c.expect.calls!.slice(0, i).filter((x) => x[2]).length)}`,
      );
    });
    n++;
  }
  assert.ok(n >= 40, `${n} cases with calls`);
});

const hermes = detectToolFormat(templateSource("Qwen-Qwen2.5-7B-Instruct.jinja"));
const qwen3 = detectToolFormat(templateSource("Qwen-Qwen3-0.6B.jinja"));

Deno.test("a malformed call or a call to an undeclared tool stays content, never an error", () => {
  const tools = [T.specialFunctionTool];
  for (
    const text of [
      '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>',
      '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}\n</tool_call>',
      "<tool_call>\nnot json at all\n</tool_call>",
      '<tool_call>\n{"name": "special_function", "arguments": {"arg1": ',
      '<tool_call>\n{"name": 42, "arguments": {}}</tool_call>',
    ]
  ) {
    const msg = parseChatOutput("Sure. " + text, { format: hermes, tools });
    assert.deepEqual(msg, { content: "Sure. " + text, reasoningContent: "", toolCalls: [] }, text);
  }
  // a whole call whose closing tag never came (the model stopped) is still a call
  const unclosed = parseChatOutput(
    'Sure. <tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}',
    {
      format: hermes,
      tools,
    },
  );
  assert.deepEqual(unclosed.toolCalls, [{
    id: "",
    name: "special_function",
    arguments: '{"arg1": 1}',
  }]);
  assert.equal(unclosed.content, "Sure. ");
  // a stream whose call turns out malformed at the end: no error, the call is not taken back
  const cut = parseChatOutput('<tool_call>\n{"name": "special_function", "arguments": {"a', {
    format: hermes,
    tools,
    isPartial: true,
  });
  const final = parseChatOutput('<tool_call>\n{"name": "special_function", "arguments": {"a', {
    format: hermes,
    tools,
  });
  assert.equal(cut.toolCalls.length, 1);
  assert.equal(final.toolCalls.length, 0);
  assert.deepEqual(computeDiffs(cut, final), [{
    reasoningContentDelta: "",
    contentDelta: final.content,
    toolCallIndex: -1,
    toolCallDelta: { id: "", name: "", arguments: "" },
  }]);
});

Deno.test("while streaming, text that may start a marker is held back, and a cut call shows its arguments so far", () => {
  const tools = [T.specialFunctionTool];
  const at = (text: string) => parseChatOutput(text, { format: hermes, tools, isPartial: true });
  assert.equal(at("Hello <tool_c").content, "Hello ");
  assert.equal(at("Hello <tool_x").content, "Hello <tool_x");
  assert.deepEqual(at('Hello <tool_call>\n{"name": "special_fun').toolCalls, []);
  assert.deepEqual(at('<tool_call>\n{"name": "special_function", "arguments": {"arg').toolCalls, [
    { id: "", name: "special_function", arguments: '{"arg' },
  ]);
  // without tools nothing is held back: the markers are plain text
  assert.equal(
    parseChatOutput("Hello <tool_c", { format: hermes, isPartial: true }).content,
    "Hello <tool_c",
  );
});

Deno.test("reasoning: Qwen 3's <think> block, opened by the model or by the prompt, and reasoning format none", () => {
  const text = "<think>\nLet me see.\n</think>\n\nThe answer.";
  assert.deepEqual(parseChatOutput(text, { format: qwen3 }), {
    content: "The answer.",
    reasoningContent: "Let me see.",
    toolCalls: [],
  });
  assert.equal(parseChatOutput(text, { format: qwen3, reasoningFormat: "none" }).content, text);
  // thinking disabled: the prompt closed the block, the output is all answer
  const off = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  assert.deepEqual(parseChatOutput("The answer.", { format: qwen3, generationPrompt: off }), {
    content: "The answer.",
    reasoningContent: "",
    toolCalls: [],
  });
  // streaming inside the block: reasoning grows, no content; a half end tag is held back
  const open = { format: qwen3, isPartial: true };
  assert.deepEqual(parseChatOutput("<think>\nLet me</th", open), {
    content: "",
    reasoningContent: "Let me",
    toolCalls: [],
  });
  assert.deepEqual(parseChatOutput("<thi", open), {
    content: "",
    reasoningContent: "",
    toolCalls: [],
  });
  // a call after the reasoning
  const call = "<think>ok</think>\n<tool_call>\n" +
    '{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>';
  const msg = parseChatOutput(call, { format: qwen3, tools: [T.specialFunctionTool] });
  assert.equal(msg.reasoningContent, "ok");
  assert.deepEqual(msg.toolCalls, [{ id: "", name: "special_function", arguments: '{"arg1": 1}' }]);
});

Deno.test("raw code after <|python_tag|> is a python call, streamed as it grows", () => {
  const format = detectToolFormat(templateSource("meetkai-functionary-medium-v3.1.jinja"));
  const text = "<|python_tag|>import math\nprint(math.pi)\n";
  const c: ChatCase = {
    template: "meetkai-functionary-medium-v3.1.jinja",
    input: text,
    tools: [T.pythonTool],
    expect: { calls: [["python", JSON.stringify({ code: "import math\nprint(math.pi)" })]] },
  };
  runCase(c);
  assert.equal(
    parseChatOutput(text, { format, tools: [T.pythonTool] }).toolCalls[0].arguments,
    c.expect.calls![0][1],
  );
});

Deno.test("gpt-oss: text that is not harmony stays content; a header being written shows nothing", () => {
  const format = detectToolFormat(templateSource("openai-gpt-oss-120b.jinja"));
  assert.equal(parseChatOutput("Just text.", { format }).content, "Just text.");
  assert.equal(parseChatOutput("<|channel|>fin", { format, isPartial: true }).content, "");
});

Deno.test("tool-call ids: 9 alphanumeric characters for Mistral's formats, 32 otherwise", () => {
  assert.match(toolCallIdGenerator("mistral-nemo")(), /^[A-Za-z0-9]{9}$/);
  assert.match(toolCallIdGenerator("mistral-small")(), /^[A-Za-z0-9]{9}$/);
  assert.match(toolCallIdGenerator("hermes")(), /^[A-Za-z0-9]{32}$/);
  assert.notEqual(toolCallIdGenerator("hermes")(), toolCallIdGenerator("hermes")());
});
